"""HTTP resources: parse and check requests, call a service, shape responses."""

from __future__ import annotations

from typing import Any

import ujson


def encode(value: Any) -> str:
    """Compact JSON as Narad writes it: UTF-8 text, ``/`` unescaped."""
    return ujson.dumps(value, ensure_ascii=False, escape_forward_slashes=False)


def dumps(value: Any) -> str:
    """A JSON response body: the compact text and a newline, as Narad sends it."""
    return encode(value) + "\n"
