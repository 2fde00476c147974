"""gunicorn's own refusals, answered as JSON by the worker mixin."""

from __future__ import annotations

import json
import logging
import socket

import pytest
from gunicorn.http import errors as http_errors

from narad.config import Config
from narad.http.middleware import RequestLog
from narad.http.middleware import access_log
from narad.serve.server import gunicorn_settings
from narad.serve.workers import JSONErrors
from narad.serve.workers import refusal


@pytest.mark.parametrize(
    ("exc", "status", "start"),
    [
        (http_errors.LimitRequestLine(5000, 4094), 414, "request line too long: "),
        (
            http_errors.LimitRequestHeaders("limit request headers fields"),
            431,
            "request header fields too large: ",
        ),
        (http_errors.InvalidRequestLine("BLAH"), 400, "malformed request: "),
        (http_errors.InvalidHeader("CONTENT-LENGTH"), 400, "malformed request: "),
        (http_errors.InvalidChunkSize(b"zz"), 400, "malformed request: "),
        (
            http_errors.UnsupportedTransferCoding("br"),
            501,
            "transfer coding not implemented: ",
        ),
        (http_errors.ExpectationFailed("x"), 417, "expectation failed: "),
        (http_errors.InvalidResponseHeader("x"), 500, "internal error"),
        (RuntimeError("boom"), 500, "internal error"),
    ],
)
def test_refusal_keeps_gunicorns_status(exc, status, start):
    got_status, _, message = refusal(exc)
    assert got_status == status
    assert message.startswith(start)
    if status == 500:
        assert message == "internal error"  # no internals leak


def test_refusal_quotes_the_request_line_short():
    _, _, message = refusal(http_errors.InvalidRequestLine("A" * 10_000))
    assert len(message) < 140
    assert message.endswith("…")


class Worker(JSONErrors):
    cfg = None
    log = logging.getLogger("test-worker")


def test_handle_error_writes_a_json_response():
    ours, theirs = socket.socketpair()
    with ours, theirs:
        Worker().handle_error(None, ours, None, http_errors.LimitRequestLine(9, 4))
        ours.shutdown(socket.SHUT_WR)
        raw = theirs.makefile("rb").read()
    head, _, body = raw.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 414 URI Too Long\r\n")
    assert b"Content-Type: application/json" in head
    assert b"Connection: close" in head
    assert b"Content-Length: %d" % len(body) in head
    assert json.loads(body) == {
        "error": "request line too long: Request Line is too large (9 > 4)"
    }


def test_a_refusal_writes_a_json_access_line():
    lines = []

    class Collect(logging.Handler):
        def emit(self, record):
            lines.append(record.getMessage())

    worker = Worker()
    worker.access = RequestLog("json")
    handler = Collect()
    access_log.addHandler(handler)
    ours, theirs = socket.socketpair()
    try:
        with ours, theirs:
            exc = http_errors.InvalidRequestLine("BLAH")
            worker.handle_error(None, ours, ("10.0.0.1", 5), exc)
            ours.shutdown(socket.SHUT_WR)
            head = theirs.makefile("rb").read().partition(b"\r\n\r\n")[0]
    finally:
        access_log.removeHandler(handler)
    [line] = [json.loads(line) for line in lines]
    assert line["message"] == "- - 400"
    assert (line["client"], line["method"], line["status"]) == ("10.0.0.1", None, 400)
    assert f"X-Request-ID: {line['request_id']}".encode() in head


def test_narad_serve_uses_the_json_worker():
    settings = gunicorn_settings(Config.load(env={}))
    assert settings["worker_class"] == "narad.serve.workers.NaradWorker"
