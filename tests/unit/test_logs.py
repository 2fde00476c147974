"""narad.logs: the line formats, the request id on lines written while a
request is served, and one line per change of state."""

from __future__ import annotations

import io
import json
import logging
import sys

import pytest

from narad import testing
from narad.http.health import Health
from narad.logs import REQUEST_ID
from narad.logs import Episode
from narad.logs import Formatter
from narad.logs import dict_config


def record(message: str, *args, level: int = logging.WARNING, exc_info=None):
    return logging.LogRecord("narad.guard", level, __file__, 1, message, args, exc_info)


def test_json_lines_carry_level_logger_message_and_request_id():
    token = REQUEST_ID.set("req-42")
    try:
        line = Formatter("json").format(record("storage is not durable: %s", "x"))
    finally:
        REQUEST_ID.reset(token)
    fields = json.loads(line)
    assert fields["level"] == "WARNING"
    assert fields["logger"] == "narad.guard"
    assert fields["message"] == "storage is not durable: x"
    assert fields["request_id"] == "req-42"
    assert fields["time"].endswith("Z")
    # Outside a request: no request id at all.
    assert "request_id" not in json.loads(Formatter("json").format(record("m")))


def test_text_lines_and_tracebacks():
    try:
        raise RuntimeError("boom")
    except RuntimeError:
        line = Formatter("text").format(record("failed", exc_info=sys.exc_info()))
    first, *trace = line.splitlines()
    assert " WARNING narad.guard [" in first and first.endswith("] failed")
    assert trace[-1] == "RuntimeError: boom"
    with pytest.raises(ValueError, match="text or json"):
        Formatter("xml")


def test_the_dict_config_follows_the_settings(tmp_path):
    config = testing.make_config(tmp_path, log__format="json", log__level="warning")
    built = dict_config(config)
    assert built["root"]["level"] == "WARNING"
    assert built["formatters"]["narad"]["style"] == "json"
    access = built["loggers"]["narad.access"]
    # The access log's lines are formatted by the middleware, and only once.
    assert (access["handlers"], access["propagate"]) == (["access"], False)


def test_a_run_of_failures_is_two_lines(caplog):
    episode = Episode(logging.getLogger("narad.test"), "requests fail")
    with caplog.at_level(logging.INFO, logger="narad.test"):
        episode.recovered()  # nothing under way: nothing logged
        for n in range(50):
            episode.failed(f"attempt {n}")
        episode.recovered()
        episode.recovered()
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 2
    assert lines[0] == "requests fail: attempt 0"
    assert lines[1].startswith("requests fail: over (50 in ")


def test_lines_written_while_serving_a_request_carry_its_id(tmp_path, monkeypatch):
    def broken(self, req, resp):
        raise RuntimeError("a bug")

    monkeypatch.setattr(Health, "on_get", broken)
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(Formatter("json"))
    logger = logging.getLogger("narad.app")
    logger.addHandler(handler)
    try:
        http = testing.client(testing.make_config(tmp_path))
        resp = http.simulate_get("/healthz", headers={"X-Request-ID": "abc-123"})
        fresh = http.simulate_get("/healthz")
    finally:
        logger.removeHandler(handler)
    assert resp.status_code == fresh.status_code == 500
    lines = [json.loads(line) for line in stream.getvalue().splitlines()]
    assert [line["request_id"] for line in lines] == [
        "abc-123",
        fresh.headers["X-Request-ID"],
    ]
    assert "RuntimeError: a bug" in lines[0]["traceback"]
    assert REQUEST_ID.get() is None  # reset once the request is answered
