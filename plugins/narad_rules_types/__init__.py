"""Compatibility rules for which values a schema allows: type, enum, const.

Rows of the rulebook's keyword table:

- ``type``: add types to the set; ``integer`` may become ``number``; drop.
- ``enum``, ``const``: add values (``const`` may become an ``enum`` that
  contains it); drop. Both on one schema count as their intersection.
"""

from __future__ import annotations

from collections.abc import Iterator
from collections.abc import Mapping
from typing import Any

from narad import hookimpl
from narad.compatibility import ABSENT
from narad.compatibility import Change
from narad.compatibility import RuleContext
from narad.compatibility import Violation
from narad.compatibility import json_key
from narad.compatibility import show

_EVERY_TYPE = frozenset(
    {"array", "boolean", "integer", "null", "number", "object", "string"}
)


def type_(old: Any, new: Any, ctx: RuleContext) -> Iterator[Violation]:
    """Add types to the set; ``integer`` may become ``number``; drop the keyword."""
    if new is ABSENT:
        return
    allowed = _types(new)
    if "number" in allowed:
        allowed |= {"integer"}
    if old is ABSENT:
        if allowed != _EVERY_TYPE:
            yield Violation(Change.type_added, f"type {show(new)} added")
        return
    for name in sorted(_types(old) - allowed):
        yield Violation(Change.type_narrowed, f"type {show(name)} no longer allowed")


def _types(value: Any) -> set[str]:
    return {value} if isinstance(value, str) else set(value)


def enum(old: Any, new: Any, ctx: RuleContext) -> Iterator[Violation]:
    """Add values; drop. Every value the previous schema allowed stays in."""
    if new is not ABSENT:
        yield from _values_refused(
            ctx, new, Change.enum_added, Change.enum_array_narrowed
        )


def const(old: Any, new: Any, ctx: RuleContext) -> Iterator[Violation]:
    """Drop, or become an ``enum`` that contains it (judged by :func:`enum`)."""
    if new is not ABSENT:
        yield from _values_refused(ctx, [new], Change.const_added, Change.const_changed)


def _values_refused(
    ctx: RuleContext, now: list[Any], added: Change, narrowed: Change
) -> Iterator[Violation]:
    """What the new keyword refuses of the values the previous schema allowed."""
    before = _allowed(ctx.old)
    if before is None:
        yield Violation(added, f"{ctx.keyword} added")
        return
    keys = {json_key(value) for value in now}
    for key, value in before.items():
        if key not in keys:
            message = f"{ctx.keyword} value {show(value)} no longer allowed"
            yield Violation(narrowed, message)


def _allowed(schema: Mapping[str, Any]) -> dict[Any, Any] | None:
    """The values ``enum`` and ``const`` allow together, or None if unlimited."""
    lists = [schema["enum"]] if "enum" in schema else []
    if "const" in schema:
        lists.append([schema["const"]])
    if not lists:
        return None
    allowed = {json_key(value): value for value in lists[0]}
    for values in lists[1:]:
        keep = {json_key(value) for value in values}
        allowed = {key: value for key, value in allowed.items() if key in keep}
    return allowed


@hookimpl
def narad_compatibility_rules() -> dict[str, Any]:
    return {"type": type_, "enum": enum, "const": const}
