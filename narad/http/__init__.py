"""HTTP resources: parse and check requests, call a service, shape responses."""

from __future__ import annotations

import json
import random
import re
from collections.abc import Callable
from typing import Any

import ujson

_REQUEST_ID = re.compile(r"[!-~]{1,128}")


class EverySecond:
    """A second's text as ``format`` makes it from the second (Unix time),
    made once a second: the access log's time and a response's ``Date``
    header change only that often."""

    __slots__ = ("_cached", "_format")

    def __init__(self, format: Callable[[int], str]) -> None:
        self._format = format
        self._cached: tuple[int, str] = (-1, "")

    def text(self, second: int) -> str:
        cached = self._cached
        if cached[0] != second:
            cached = (second, self._format(second))
            self._cached = cached  # one tuple: a thread never pairs mismatched parts
        return cached[1]


def new_request_id() -> str:
    """An ``X-Request-ID`` for a request that came without one: 16 hex
    digits. It tells requests apart in logs and guards nothing, so it comes
    from ``random`` (reseeded in each forked worker), not the system's
    entropy, which costs a system call per request."""
    return f"{random.getrandbits(64):016x}"


def request_id(given: str | None) -> str:
    """The client's ``X-Request-ID`` when usable (printable ASCII without
    spaces, as ids from proxies and tracers are; at most 128), else a new one."""
    if given is None or not _REQUEST_ID.fullmatch(given):
        return new_request_id()
    return given


def encode(value: Any) -> str:
    """Compact JSON as Narad writes it: UTF-8 text, ``/`` unescaped."""
    return ujson.dumps(value, ensure_ascii=False, escape_forward_slashes=False)


def dumps(value: Any) -> str:
    """A JSON response body: the compact text and a newline, as Narad sends it."""
    return encode(value) + "\n"


def error_body(message: str) -> bytes:
    """``{"error": message}`` as UTF-8 JSON, whatever the message quotes."""
    return json_body({"error": message})


def json_body(value: Any) -> bytes:
    """A JSON response body as UTF-8, whatever its strings quote.

    A string may quote a lone surrogate the client sent (``"\\ud800"`` in a
    JSON body): UTF-8 cannot encode it, so such a body is written with
    ``\\u`` escapes, which keeps it valid JSON.
    """
    text = dumps(value)
    try:
        return text.encode()
    except UnicodeEncodeError:
        return (json.dumps(value) + "\n").encode()
