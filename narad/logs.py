"""One logging configuration for a node: the CLI's master, gunicorn and the app.

Every line goes to standard error, at ``log.level`` and in ``log.format``:

- ``text``: ``2026-05-01T12:00:00.123Z WARNING narad.guard [4242] storage is
  not durable: appendfsync is everysec`` (plus ``request_id=...`` within a
  request);
- ``json``: one object a line, ``{"time", "level", "logger", "pid",
  "message"}`` plus ``"request_id"`` within a request and ``"traceback"``
  with an exception.

``narad serve`` configures it before anything logs (:func:`configure`), and
gunicorn applies the same dictionary in its master and every worker
(:func:`dict_config`, its ``logconfig_dict`` setting), so a hand-run
gunicorn with ``conf/gunicorn.conf.py`` logs alike. The request id of the
request being served rides on :data:`REQUEST_ID`, set by the request
middleware; the access log (one line per request, ``server.access_log``)
writes lines it formats itself, through the ``narad.access`` logger (straight
to its :class:`AccessLines` handler while that is the only one).

Components log a state change once (storage lost, back; a node unreachable;
durability lost), not every retry or every failed request:
:class:`Episode` is the helper for a run of failures.
"""

from __future__ import annotations

import json
import logging
import logging.config
import select
import time
from collections.abc import Callable
from contextvars import ContextVar
from typing import Any

from gevent import monkey

from narad.config import Config

__all__ = (
    "REQUEST_ID",
    "AccessLines",
    "Episode",
    "Formatter",
    "configure",
    "dict_config",
)

#: The id of the request being served (per greenlet), for log lines.
REQUEST_ID: ContextVar[str | None] = ContextVar("narad_request_id", default=None)

ACCESS_LOGGER = "narad.access"
#: The most a pipe takes in one write without interleaving another's.
ATOMIC_WRITE = select.PIPE_BUF
# The thread's id: gevent's patched get_ident tells greenlets apart.
_thread_id = monkey.get_original("_thread", "get_ident")


class Formatter(logging.Formatter):
    """Text or JSON lines with time (UTC), level, logger, pid, message and
    the request id when there is one."""

    def __init__(self, style: str = "text") -> None:
        super().__init__()
        if style not in ("text", "json"):
            raise ValueError(f"log format must be text or json, got {style!r}")
        self.json = style == "json"

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:
        seconds = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
        return f"{seconds}.{int(record.msecs):03d}Z"

    def format(self, record: logging.LogRecord) -> str:
        message = record.getMessage()
        request_id = getattr(record, "request_id", None) or REQUEST_ID.get()
        trace = self.formatException(record.exc_info) if record.exc_info else None
        if self.json:
            line: dict[str, Any] = {
                "time": self.formatTime(record),
                "level": record.levelname,
                "logger": record.name,
                "pid": record.process,
                "message": message,
            }
            if request_id:
                line["request_id"] = request_id
            if trace:
                line["traceback"] = trace
            return json.dumps(line, ensure_ascii=False)
        text = (
            f"{self.formatTime(record)} {record.levelname} {record.name} "
            f"[{record.process}] {message}"
        )
        if request_id:
            text += f" request_id={request_id}"
        return f"{text}\n{trace}" if trace else text


class AccessLines(logging.StreamHandler):
    """The access log's handler: each line as the access log made it, on
    standard error.

    The access log hands it each line directly (:meth:`write`) while it is
    the ``narad.access`` logger's only handler, skipping the log record and
    the logging calls around it, which cost more than the line itself: a
    twentieth of a consume's re-poll. Records from elsewhere (``emit``) are
    written alike.

    A line is one ``write(2)`` of its own, unless :meth:`write_per_turn`
    says how to run the writes at the end of an event loop's turn (a gevent
    worker): the lines of a turn then go out together, in pieces of whole
    lines of at most :data:`ATOMIC_WRITE` bytes, which a pipe takes whole
    however many workers write to it, and a long poll costs its worker less
    CPU (bench/ab.py, waiters phase).
    """

    def __init__(self, stream: Any = None) -> None:
        super().__init__(stream)
        self._pending: list[str] = []
        self._schedule: Callable[[Callable[[], None]], object] | None = None
        self._thread: int | None = None  # whose lines are held

    def write_per_turn(self, schedule: Callable[[Callable[[], None]], object]) -> None:
        """Hold the lines written by this thread until ``schedule``'s
        callback (gevent's ``loop.run_callback``: once the turn's greenlets
        have run); lines from other threads are written at once."""
        self._thread = _thread_id()
        self._schedule = schedule

    def emit(self, record: logging.LogRecord) -> None:
        self.write(record.getMessage())

    def write(self, line: str) -> None:
        if self._schedule is not None and _thread_id() == self._thread:
            if not self._pending:
                self._schedule(self.flush)
            self._pending.append(line + "\n")
            return
        self._write(line + "\n")

    def flush(self) -> None:
        """Write the held lines (also at exit: ``logging.shutdown``)."""
        pending, self._pending = self._pending, []
        # Characters for bytes: an access line is ASCII (names, routes and
        # request ids are).
        piece: list[str] = []
        size = 0
        for line in pending:
            if piece and size + len(line) > ATOMIC_WRITE:
                self._write("".join(piece))
                piece, size = [], 0
            piece.append(line)
            size += len(line)
        if piece:
            self._write("".join(piece))

    def _write(self, text: str) -> None:
        stream = self.stream
        try:
            # Standard error is line-buffered: the write reaches the file.
            stream.write(text)
            if not getattr(stream, "line_buffering", False):
                stream.flush()
        except Exception:  # as logging's handlers: a log line never fails a request
            self.handleError(logging.makeLogRecord({"msg": text.rstrip("\n")}))


def dict_config(config: Config) -> dict[str, Any]:
    """The ``logging.config.dictConfig`` dictionary of a node (also gunicorn's
    ``logconfig_dict``)."""
    level = config.get("log.level").upper()
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {
            "narad": {"()": Formatter, "style": config.get("log.format")},
        },
        "handlers": {
            "stderr": {
                "class": "logging.StreamHandler",
                "formatter": "narad",
                "stream": "ext://sys.stderr",
            },
            "access": {"()": AccessLines, "stream": "ext://sys.stderr"},
        },
        "root": {"level": level, "handlers": ["stderr"]},
        "loggers": {
            # gunicorn's own lines (master and workers) go through the root.
            "gunicorn.error": {"level": level, "handlers": [], "propagate": True},
            # Unused: Narad writes its own access log.
            "gunicorn.access": {"level": "WARNING", "handlers": [], "propagate": False},
            # Lines the access log formats itself (text or JSON), as they are.
            ACCESS_LOGGER: {
                "level": "INFO",
                "handlers": ["access"],
                "propagate": False,
            },
        },
    }


def configure(config: Config) -> None:
    """Apply :func:`dict_config` to this process."""
    logging.config.dictConfig(dict_config(config))


class Episode:
    """A run of failures of one kind, logged when it starts and when it ends.

    The first :meth:`failed` logs a warning; the next ones are only counted
    (the metrics count each); the first :meth:`recovered` after them logs how
    many there were and for how long. Cheap to call on every request:
    :meth:`recovered` does nothing unless a run is under way.
    """

    def __init__(self, logger: logging.Logger, what: str) -> None:
        self.logger = logger
        self.what = what
        self.active = False
        self._count = 0
        self._since = 0.0

    def failed(self, detail: object) -> None:
        if self.active:
            self._count += 1
            return
        self.active, self._count, self._since = True, 1, time.monotonic()
        self.logger.warning("%s: %s", self.what, detail)

    def recovered(self) -> None:
        if not self.active:
            return
        self.active = False
        self.logger.info(
            "%s: over (%d in %.1f s)",
            self.what,
            self._count,
            time.monotonic() - self._since,
        )
