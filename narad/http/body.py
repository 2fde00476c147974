"""Reading request bodies and query parameters without trusting them.

A body is read through the WSGI input whatever the server or its worker
class: with ``Transfer-Encoding: chunked`` until the server reports its end,
otherwise exactly ``Content-Length`` bytes, counted. A body that stops short
(the client closed) or a chunked body the server cannot decode is refused
(400), as is one slower than the worker's deadlines allow (408, raised by
:class:`narad.serve.workers.Connection`), so a 202 always stands for the whole body
the client meant to send.
"""

from __future__ import annotations

import re
from typing import IO
from typing import Any
from urllib.parse import parse_qsl

import falcon

from narad import jsontext
from narad.errors import InvalidArgument
from narad.errors import NaradError
from narad.errors import PayloadTooLarge
from narad.quoting import QUOTE_LIMIT
from narad.quoting import quote

MAX_BODY = 1024 * 1024
# Deep enough for a schema at its 64-level limit inside a request; deeper
# bodies are refused (see jsontext.loads for how the parser is kept safe).
MAX_BODY_DEPTH = 128

_DURATION = re.compile(r"([0-9]{1,12})(ms|s)?")
_MAX_SAFE = 2**53 - 1  # every stored number must be exact in Lua's doubles
_MAX_QUERY_DIGITS = 15


def read_body(req: falcon.Request, limit: int = MAX_BODY) -> bytes:
    """The whole body, or 413 as soon as it is known to exceed ``limit``.

    Raises:
        PayloadTooLarge: ``Content-Length`` over ``limit``, or more than
            ``limit`` bytes of a chunked body arrived (no more is read).
        InvalidArgument: the body ended or stalled before it was complete,
            or its chunked framing is broken, or an HTTP/1.0 request
            announces no length; nothing of it is used.
        falcon.HTTPNotImplemented: a transfer coding other than chunked.
        falcon.HTTPUnsupportedMediaType: a content coding (``gzip``...): the
            node does not decode bodies, and the coded bytes are not what
            the client meant to store.
    """
    encoding = req.get_header("Content-Encoding")
    if encoding is not None and encoding.strip(" \t").lower() not in ("", "identity"):
        raise falcon.HTTPUnsupportedMediaType(
            description=f"Content-Encoding {quote(encoding)} is not supported: "
            "send the body as it is; nothing was stored"
        )
    coding = req.get_header("Transfer-Encoding")
    if coding is not None:
        codings = [c.strip(" \t").lower() for c in coding.split(",")]
        if codings != ["chunked"]:
            raise falcon.HTTPNotImplemented(
                description=f"Transfer-Encoding {quote(coding)} is not supported: "
                "send the body as it is, with Content-Length or chunked"
            )
        return _read_chunked(req.stream, limit)
    length = _content_length(req)
    if length > limit:
        raise PayloadTooLarge(f"request body is over {limit} bytes")
    return _read_exactly(req.stream, length)


def _content_length(req: falcon.Request) -> int:
    """The announced length; 0 when the request announces none."""
    raw = req.env.get("CONTENT_LENGTH") or ""
    if not raw:
        if req.env.get("SERVER_PROTOCOL") == "HTTP/1.0":
            # HTTP/1.0 has no other framing: a body may follow the head
            # unannounced, up to the close (RFC 1945 8.3: 400 then).
            raise InvalidArgument(
                "an HTTP/1.0 request body needs a Content-Length; nothing was stored"
            )
        return 0
    if not ascii_digits(raw):
        raise InvalidArgument(
            f"Content-Length must be a number of bytes, got {quote(raw)}"
        )
    return int(raw)


def _read_exactly(stream: IO[bytes], length: int) -> bytes:
    parts: list[bytes] = []
    got = 0
    end = f"the {length} bytes its Content-Length announced"
    while got < length:
        part = _read(stream, length - got, "request body", end)
        if not part:
            raise InvalidArgument(
                f"request body ended after {got} of {end}; nothing was stored"
            )
        parts.append(part)
        got += len(part)
    return b"".join(parts)


def _read_chunked(stream: IO[bytes], limit: int) -> bytes:
    parts: list[bytes] = []
    got = 0
    while True:
        # Never ask for more than one byte past the limit: that byte is
        # enough to know the body is too large.
        part = _read(stream, limit + 1 - got, "chunked request body", "its last chunk")
        if not part:
            return b"".join(parts)
        parts.append(part)
        got += len(part)
        if got > limit:
            raise PayloadTooLarge(f"request body is over {limit} bytes")


def _read(stream: IO[bytes], size: int, what: str, end: str) -> bytes:
    """One read of the WSGI input, its failures turned into the client's."""
    try:
        return stream.read(size)
    except NaradError:
        raise  # the worker's own verdict on the connection (408)
    except TimeoutError:
        raise InvalidArgument(
            f"{what} stopped arriving before {end}; nothing was stored"
        ) from None
    except OSError:
        # The server's reader reports a connection closed mid-body this way
        # (gunicorn's NoMoreData is an IOError).
        raise InvalidArgument(
            f"{what} ended before {end}; nothing was stored"
        ) from None
    except Exception as exc:
        # Anything else the server's input raises is about framing it could
        # not decode (gunicorn: InvalidChunkSize, ChunkMissingTerminator,
        # InvalidChunkExtension, a bad trailer); its text quotes the bytes.
        detail = str(exc)
        if len(detail) > QUOTE_LIMIT:
            detail = detail[:QUOTE_LIMIT] + "…"
        raise InvalidArgument(
            f"{what} is malformed: {detail}; nothing was stored"
        ) from None


def parse_json(data: bytes, what: str = "request body") -> Any:
    """``data`` read by the one strict JSON reader (``narad.jsontext``).

    Raises:
        InvalidArgument: not one JSON text by those rules (invalid or wide
            Unicode, a byte-order mark, NaN, nesting deeper than
            :data:`MAX_BODY_DEPTH`, a repeated key...); the message says which.
    """
    try:
        return jsontext.loads(data, max_depth=MAX_BODY_DEPTH)
    except jsontext.JSONTextError as exc:
        raise InvalidArgument(f"{what} {exc}") from None


def read_object(req: falcon.Request) -> tuple[dict[str, Any], bytes]:
    """A JSON object body, parsed with exact numbers, and its raw bytes."""
    data = read_body(req)
    value = parse_json(data)
    if not isinstance(value, dict):
        raise InvalidArgument("request body must be a JSON object")
    return value, data


def refuse_unknown(
    body: dict[str, Any], allowed: tuple[str, ...], where: str = ""
) -> None:
    for name in body:
        if name not in allowed:
            raise InvalidArgument(f"{where}unknown field {quote(name)}")


def integer(value: Any, name: str, *, low: int = 1, high: int = _MAX_SAFE) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidArgument(f"{name} must be an integer")
    if not low <= value <= high:
        shown = str(value)
        if len(shown) > QUOTE_LIMIT:
            shown = shown[:QUOTE_LIMIT] + "…"
        raise InvalidArgument(f"{name} must be from {low} to {high}, got {shown}")
    return value


def ascii_digits(text: str) -> bool:
    """Only 0-9: ``str.isdigit`` also accepts ``'٣'`` and ``'²'``."""
    return text.isascii() and text.isdigit()


def param(req: falcon.Request, name: str) -> str | None:
    """A query parameter given at most once (which of two would be a guess)."""
    value = req.params.get(name)
    if isinstance(value, list):
        raise InvalidArgument(f"{name} is given more than once")
    if value is not None and "\ufffd" in value:
        # The server replaces percent-encoded bytes that are not UTF-8 with
        # U+FFFD: refuse rather than act on a value the client did not send.
        try:
            parse_qsl(req.query_string, keep_blank_values=True, errors="strict")
        except UnicodeDecodeError:
            raise InvalidArgument(
                "query string is not UTF-8 once percent-decoded"
            ) from None
    return value


def query_int(
    req: falcon.Request, name: str, *, low: int = 0, high: int | None = None
) -> int | None:
    raw = param(req, name)
    if raw is None:
        return None
    if not ascii_digits(raw) or len(raw) > _MAX_QUERY_DIGITS:
        raise InvalidArgument(
            f"{name} must be a non-negative integer in digits 0-9, got {quote(raw)}"
        )
    value = int(raw)
    if value < low:
        raise InvalidArgument(f"{name} must be at least {low}")
    if high is not None and value > high:
        raise InvalidArgument(f"{name} must be at most {high}")
    return value


def query_duration_ms(req: falcon.Request, name: str) -> int:
    """``500ms``, ``10s`` or plain milliseconds; absent means 0."""
    raw = param(req, name)
    if raw is None or raw == "":
        return 0
    match = _DURATION.fullmatch(raw.strip(" \t"))
    if match is None:
        raise InvalidArgument(
            f"{name} must be a duration such as 500ms or 10s, got {quote(raw)}"
        )
    number = int(match[1])
    return number * 1000 if match[2] == "s" else number
