"""Reading request bodies and query parameters without trusting them."""

from __future__ import annotations

import re
from typing import Any

import falcon

from narad.errors import InvalidArgument
from narad.errors import PayloadTooLarge
from narad.schema import jsontext

MAX_BODY = 1024 * 1024
# Deep enough for a schema at its 64-level limit inside a request; deeper
# bodies are refused before parsing, so the C parser never recurses far.
MAX_BODY_DEPTH = 128

_DURATION = re.compile(r"(\d{1,12})(ms|s)?")
_MAX_SAFE = 2**53 - 1  # every stored number must be exact in Lua's doubles


def read_body(req: falcon.Request, limit: int = MAX_BODY) -> bytes:
    """The whole body, or 413 as soon as it is known to exceed ``limit``."""
    if req.content_length is not None and req.content_length > limit:
        raise PayloadTooLarge(f"request body is over {limit} bytes")
    data = req.bounded_stream.read(limit + 1)
    if len(data) > limit:
        raise PayloadTooLarge(f"request body is over {limit} bytes")
    return data


def read_object(req: falcon.Request) -> tuple[dict[str, Any], bytes]:
    """A JSON object body, parsed with exact numbers, and its raw bytes."""
    data = read_body(req)
    try:
        value = jsontext.loads(data, max_depth=MAX_BODY_DEPTH)
    except jsontext.TooDeep:
        raise InvalidArgument(
            f"request body nests deeper than {MAX_BODY_DEPTH} levels"
        ) from None
    except jsontext.JSONTextError as exc:
        raise InvalidArgument(f"request body {exc}") from None
    if not isinstance(value, dict):
        raise InvalidArgument("request body must be a JSON object")
    return value, data


def refuse_unknown(
    body: dict[str, Any], allowed: tuple[str, ...], where: str = ""
) -> None:
    for name in body:
        if name not in allowed:
            raise InvalidArgument(f"{where}unknown field {name!r}")


def integer(value: Any, name: str, *, low: int = 1, high: int = _MAX_SAFE) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidArgument(f"{name} must be an integer")
    if not low <= value <= high:
        raise InvalidArgument(f"{name} must be from {low} to {high}, got {value}")
    return value


def query_int(req: falcon.Request, name: str, *, low: int = 0) -> int | None:
    raw = req.get_param(name)
    if raw is None:
        return None
    if not raw.isdigit() or len(raw) > 15:
        raise InvalidArgument(f"{name} must be a non-negative integer, got {raw!r}")
    value = int(raw)
    if value < low:
        raise InvalidArgument(f"{name} must be at least {low}")
    return value


def query_duration_ms(req: falcon.Request, name: str) -> int:
    """``500ms``, ``10s`` or plain milliseconds; absent means 0."""
    raw = req.get_param(name)
    if raw is None or raw == "":
        return 0
    match = _DURATION.fullmatch(raw.strip())
    if match is None:
        raise InvalidArgument(f"{name} must be a duration such as 500ms or 10s")
    number = int(match[1])
    return number * 1000 if match[2] == "s" else number
