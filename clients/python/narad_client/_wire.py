"""Reading consume answers so that each payload comes back byte for byte.

The node embeds a JSON body verbatim in its answer (``"payload":{"a": 1}``,
whitespace and number spellings kept), writes other UTF-8 text as a JSON
string and binary as base64 with ``"payload_encoding":"base64"``. Parsing
the answer and writing the value again would change a JSON body (``1.50``,
key order, spaces), so the span of text the ``payload`` member takes is cut
out of the answer as written.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Callable
from typing import Any

from narad_client._errors import UnexpectedResponse
from narad_client._models import Message

#: Nesting past this makes a body text, not JSON, on the node.
PAYLOAD_DEPTH = 256

_WS = re.compile(r"[ \t\n\r]*")
#: The standard library's JSON string reader: (text, index past the opening
#: quote) -> (the string, index past the closing quote).
scanstring: Callable[[str, int], tuple[str, int]] = json.decoder.scanstring  # type: ignore[attr-defined]
_DECODER = json.JSONDecoder()
# Spans are found without building numbers (a 5,000-digit integer is JSON).
_SPANS = json.JSONDecoder(parse_int=str, parse_float=str, parse_constant=str)


def _not_json(name: str) -> None:
    raise ValueError(name)


# The node's own test of whether a body is JSON: NaN and Infinity are not.
_STRICT = json.JSONDecoder(parse_constant=_not_json)


def message(text: str) -> Message:
    """The message of a single consume (or replay) answer."""
    try:
        start = _skip(text, 0)
        members, spans, end = _members(text, start)
        _end(text, end)
        return _message(text, members, spans, start, end)
    except (ValueError, IndexError, RecursionError, KeyError, TypeError) as exc:
        raise UnexpectedResponse(f"not a Narad message: {exc!r}", 200) from None


def batch(text: str) -> list[Message]:
    """The messages of a batch consume answer, ``{"messages": [...]}``."""
    try:
        idx = _skip(text, 0)
        out: list[Message] | None = None
        if text[idx] != "{":
            raise ValueError("expected an object")
        idx = _skip(text, idx + 1)
        while text[idx] != "}":
            name, idx = _name(text, idx)
            if name != "messages":
                _, idx = _SPANS.raw_decode(text, idx)
            else:
                if text[idx] != "[":
                    raise ValueError("messages is not a list")
                out = []
                idx = _skip(text, idx + 1)
                while text[idx] != "]":
                    start = idx
                    members, spans, idx = _members(text, start)
                    out.append(_message(text, members, spans, start, idx))
                    idx = _after_value(text, idx, "]")
                idx += 1
            idx = _after_value(text, idx, "}")
        _end(text, idx + 1)
        if out is None:
            raise ValueError("no messages member")
        return out
    except (ValueError, IndexError, RecursionError, KeyError, TypeError) as exc:
        raise UnexpectedResponse(f"not a Narad message batch: {exc!r}", 200) from None


def _skip(text: str, idx: int) -> int:
    """Past the JSON whitespace at ``idx``."""
    match = _WS.match(text, idx)
    return match.end() if match else idx


def _end(text: str, idx: int) -> None:
    """Nothing but whitespace may follow the answer's object."""
    if _skip(text, idx) != len(text):
        raise ValueError(f"text after the object at {idx}")


def _name(text: str, idx: int) -> tuple[str, int]:
    """A member's name at ``idx``; the index of its value."""
    if text[idx] != '"':
        raise ValueError(f"expected a member name at {idx}")
    name, idx = scanstring(text, idx + 1)
    idx = _skip(text, idx)
    if text[idx] != ":":
        raise ValueError(f"expected ':' at {idx}")
    return name, _skip(text, idx + 1)


def _after_value(text: str, idx: int, close: str) -> int:
    """Past the whitespace and the comma after a value; at ``close`` if last."""
    idx = _skip(text, idx)
    if text[idx] == ",":
        idx = _skip(text, idx + 1)
        if text[idx] == close:
            raise ValueError(f"a trailing comma before {idx}")
        return idx
    if text[idx] != close:
        raise ValueError(f"expected ',' or {close!r} at {idx}")
    return idx


def _members(
    text: str, idx: int
) -> tuple[dict[str, Any], dict[str, tuple[int, int]], int]:
    """The object at ``idx``: its members (the payload's numbers left as text), the
    span of text each value takes, and the index past the object. The span
    of a value runs from after the colon to before the comma or brace that
    follows it: the node writes no whitespace of its own, so whitespace
    there is the body's."""
    if text[idx] != "{":
        raise ValueError(f"expected an object at {idx}")
    members: dict[str, Any] = {}
    spans: dict[str, tuple[int, int]] = {}
    idx = _skip(text, idx + 1)
    while text[idx] != "}":
        if text[idx] != '"':
            raise ValueError(f"expected a member name at {idx}")
        name, idx = scanstring(text, idx + 1)
        idx = _skip(text, idx)
        if text[idx] != ":":
            raise ValueError(f"expected ':' at {idx}")
        start = idx + 1
        idx = _skip(text, start)
        decoder = _SPANS if name == "payload" else _DECODER
        value, idx = decoder.raw_decode(text, idx)
        idx = _skip(text, idx)
        members[name] = value
        spans[name] = (start, idx)
        idx = _after_value(text, idx, "}")
    return members, spans, idx + 1


def _message(
    text: str,
    members: dict[str, Any],
    spans: dict[str, tuple[int, int]],
    first: int,
    last: int,
) -> Message:
    """The message of the object ``text[first:last]``."""
    start, end = spans["payload"]
    raw = text[start:end]
    encoding = members.get("payload_encoding")
    if encoding == "base64":
        payload = base64.b64decode(members["payload"], validate=True)
    elif encoding is not None:
        raise ValueError(f"unknown payload_encoding {encoding!r}")
    else:
        payload = payload_bytes(raw)
    key = members.get("key")
    return Message(
        topic=members["topic"],
        partition=members["partition"],
        offset=members["offset"],
        key=key if key else None,
        timestamp=members["timestamp"],
        payload=payload,
        receipt_handle=members.get("receipt_handle"),
        payload_json=raw,
        payload_encoding=encoding,
        raw_json=text[first:last],
    )


def payload_bytes(raw: str) -> bytes:
    """The body a ``payload`` member's text (not base64) stands for.

    Text is written as ``json.dumps(text, ensure_ascii=False)``; anything
    else is a JSON body, verbatim. A JSON string written that way is taken
    as text unless its content is JSON by the node's rule (one JSON text
    without NaN or Infinity, nested at most :data:`PAYLOAD_DEPTH` deep):
    such a body is stored as JSON, never as text, so the string was the body.
    """
    if raw[:1] == '"':
        value = json.loads(raw)
        if (
            isinstance(value, str)
            and json.dumps(value, ensure_ascii=False) == raw
            and not _is_json(value)
        ):
            return value.encode("utf-8")
    return raw.encode("utf-8")


def _is_json(text: str) -> bool:
    if _depth(text) > PAYLOAD_DEPTH:
        return False
    try:
        _STRICT.decode(text)
    except (ValueError, RecursionError):
        return False
    return True


_ESCAPES = re.compile(r'\\.|"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)


def _depth(text: str) -> int:
    """How deep arrays and objects nest in ``text``, strings left out."""
    if text.count("[") + text.count("{") <= PAYLOAD_DEPTH:
        return 0
    depth = deepest = 0
    for char in _ESCAPES.sub("", text):
        if char in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif char in "]}":
            depth -= 1
    return deepest
