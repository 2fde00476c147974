"""narad.logs: the line formats, the request id on lines written while a
request is served, and one line per change of state."""

from __future__ import annotations

import io
import json
import logging
import re
import sys
import threading
from datetime import datetime
from datetime import timedelta

import gevent
import pytest

from narad import testing
from narad.http.health import Health
from narad.logs import ATOMIC_WRITE
from narad.logs import REQUEST_ID
from narad.logs import AccessLines
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


# -- the access log's handler -------------------------------------------------------


def test_the_access_log_writes_through_its_own_handler(tmp_path):
    built = dict_config(testing.make_config(tmp_path))
    assert built["handlers"]["access"] == {
        "()": AccessLines,
        "stream": "ext://sys.stderr",
    }


class Writes:
    """A stream that records each write and flush."""

    def __init__(self, line_buffering: bool) -> None:
        self.line_buffering = line_buffering
        self.calls: list[str] = []

    def write(self, text: str) -> int:
        self.calls.append(text)
        return len(text)

    def flush(self) -> None:
        self.calls.append("flush")


@pytest.mark.parametrize(
    "line_buffering, calls",
    [(True, ["a line\n"]), (False, ["a line\n", "flush"])],
)
def test_access_lines_are_one_write_each(line_buffering, calls):
    stream = Writes(line_buffering)
    AccessLines(stream).write("a line")
    # Standard error is line-buffered: the write itself reaches the file.
    assert stream.calls == calls


def test_access_lines_write_records_from_elsewhere_and_never_raise(monkeypatch):
    stream = Writes(True)
    handler = AccessLines(stream)
    handler.handle(logging.makeLogRecord({"msg": "from %s", "args": ("elsewhere",)}))
    assert stream.calls == ["from elsewhere\n"]

    class Broken(io.StringIO):
        def write(self, text: str) -> int:
            raise OSError("disk full")

    reported = []
    handler = AccessLines(Broken())
    monkeypatch.setattr(handler, "handleError", reported.append)
    handler.write("lost")
    assert [r.getMessage() for r in reported] == ["lost"]


def test_access_lines_of_a_loop_turn_go_out_together_after_it():
    stream = Writes(True)
    handler = AccessLines(stream)
    handler.write_per_turn(gevent.get_hub().loop.run_callback)
    for n in range(3):
        handler.write(f"line {n}")
    assert stream.calls == []  # held until the turn's greenlets have run
    gevent.sleep(0)
    assert stream.calls == ["line 0\nline 1\nline 2\n"]
    handler.write("next turn")
    gevent.sleep(0)
    assert stream.calls[1:] == ["next turn\n"]


def test_a_turns_lines_are_written_in_whole_lines_a_pipe_takes_whole():
    stream = Writes(True)
    handler = AccessLines(stream)
    handler.write_per_turn(gevent.get_hub().loop.run_callback)
    lines = [f"{n:04d} " + "x" * 95 for n in range(100)]  # 100 bytes each
    for line in lines:
        handler.write(line)
    gevent.sleep(0)
    assert len(stream.calls) == 3  # 10,000 bytes in 4,096-byte writes at most
    assert all(len(call.encode()) <= ATOMIC_WRITE for call in stream.calls)
    assert all(call.endswith("\n") for call in stream.calls)
    assert "".join(stream.calls).splitlines() == lines


def test_held_lines_are_written_by_flush_and_other_threads_lines_at_once():
    stream = Writes(True)
    handler = AccessLines(stream)
    handler.write_per_turn(lambda callback: None)  # a turn that never ends
    handler.write("held")
    other = threading.Thread(target=handler.write, args=("from a thread",))
    other.start()
    other.join()
    assert stream.calls == ["from a thread\n"]
    handler.flush()  # as logging.shutdown does when the worker exits
    assert stream.calls == ["from a thread\n", "held\n"]


def test_access_lines_as_the_middleware_writes_them(tmp_path):
    access = logging.getLogger("narad.access")
    stream = Writes(True)
    saved = access.handlers[:], access.level
    access.handlers[:] = [AccessLines(stream)]
    access.setLevel(logging.INFO)
    try:
        client = testing.client(
            testing.make_config(tmp_path, server__access_log="text")
        )
        client.simulate_get("/healthz", headers={"X-Request-ID": "req-1"})
    finally:
        access.handlers[:] = saved[0]
        access.setLevel(saved[1])
    (line,) = stream.calls
    when, address, user, method, route, topic, status, ms, request_id = line.split()
    assert datetime.fromisoformat(when).utcoffset() == timedelta(0)
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}\+00:00", when)
    assert (address, user, method, route, topic, status, request_id) == (
        "127.0.0.1",
        "-",
        "GET",
        "/healthz",
        "-",
        "200",
        "req-1",
    )
    assert float(ms) >= 0
