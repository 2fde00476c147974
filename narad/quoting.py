"""Quoting a client's text inside an error message.

A message repeats what the client sent so it can see what was refused, but
never all of it: a one-megabyte key must not come back as a one-megabyte
error. Quotes are Python literals, so control characters and lone surrogates
show as escapes and the message stays one readable line.
"""

from __future__ import annotations

QUOTE_LIMIT = 100


def quote(value: str, limit: int = QUOTE_LIMIT) -> str:
    """``value`` as a literal (``'id'``), cut after ``limit`` characters (``'ab'…``)."""
    if len(value) <= limit:
        return repr(value)
    return repr(value[:limit]) + "…"


def quote_pointer(pointer: str, limit: int = QUOTE_LIMIT) -> str:
    """A JSON pointer as a literal, each of its tokens cut after ``limit``
    characters (``'/properties/ab…/type'``): a schema's property names are
    the client's text, and the pointer's shape stays readable."""
    return repr(cut_pointer(pointer, limit))


def cut_pointer(pointer: str, limit: int = QUOTE_LIMIT) -> str:
    """``pointer`` with each reference token cut after ``limit`` characters."""
    if len(pointer) <= limit:
        return pointer
    return "/".join(
        token if len(token) <= limit else token[:limit] + "…"
        for token in pointer.split("/")
    )
