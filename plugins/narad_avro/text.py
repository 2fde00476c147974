"""Small text helpers: JSON pointers, JSON type names, compact JSON output."""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

__all__ = ("dumps", "escape", "json_type", "printable")


def escape(token: str) -> str:
    """One JSON pointer reference token (RFC 6901)."""
    if "~" in token or "/" in token:
        return token.replace("~", "~0").replace("/", "~1")
    return token


def json_type(value: Any) -> str:
    """The JSON type of a parsed value, as queue-ti's messages name it."""
    if value is None:
        return "null"
    if value is True or value is False:
        return "boolean"
    if isinstance(value, int | float | Decimal):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def printable(text: str) -> str:
    """``text`` with lone surrogates written as escapes, so it encodes."""
    try:
        text.encode()
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode()
    return text


def dumps(value: Any, *, sort_keys: bool = False) -> str:
    """Compact JSON of a parsed value; ``Decimal`` numbers kept as written
    (``1E+2``, ``0.10``), lone surrogates escaped so the text encodes."""
    parts: list[str] = []
    _dump(value, parts, sort_keys)
    return "".join(parts)


def _string(text: str) -> str:
    out = json.dumps(text, ensure_ascii=False)
    try:
        out.encode()
    except UnicodeEncodeError:
        return json.dumps(text)
    return out


def _dump(value: Any, parts: list[str], sort_keys: bool) -> None:
    if isinstance(value, str):
        parts.append(_string(value))
    elif value is None or value is True or value is False:
        parts.append("null" if value is None else "true" if value else "false")
    elif isinstance(value, int):
        parts.append(str(int(value)))
    elif isinstance(value, Decimal):
        if not value.is_finite():
            raise ValueError("NaN and Infinity are not JSON")
        parts.append(str(value))
    elif isinstance(value, float):
        parts.append(json.dumps(value, allow_nan=False))
    elif isinstance(value, dict):
        parts.append("{")
        items = sorted(value.items()) if sort_keys else value.items()
        for i, (key, item) in enumerate(items):
            if i:
                parts.append(",")
            parts.append(_string(key))
            parts.append(":")
            _dump(item, parts, sort_keys)
        parts.append("}")
    elif isinstance(value, list | tuple):
        parts.append("[")
        for i, item in enumerate(value):
            if i:
                parts.append(",")
            _dump(item, parts, sort_keys)
        parts.append("]")
    else:
        raise TypeError(f"not a JSON value: {type(value).__name__}")
