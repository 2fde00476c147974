"""Compatibility rules for numeric bounds and sizes.

Rows of the rulebook's keyword table:

- ``minimum``, ``exclusiveMinimum``, ``maximum``, ``exclusiveMaximum``: loosen
  or drop; never add. Draft-04 writes exclusiveness as a boolean beside
  ``minimum``/``maximum``; there the pair is one bound, judged by the rule of
  ``minimum``/``maximum``.
- ``multipleOf``: change to a divisor of the old value; drop. Exactly, on
  numbers of any size.
- ``minLength``, ``minItems``, ``minProperties``: decrease or drop; a new one
  may appear only as ``0``.
- ``maxLength``, ``maxItems``, ``maxProperties``: increase or drop; never add.

Numbers arrive exact (``int`` or ``Decimal``), so comparisons never round.
"""

from __future__ import annotations

from collections.abc import Iterator
from fractions import Fraction
from typing import Any

from narad import hookimpl
from narad.compatibility import ABSENT
from narad.compatibility import Change
from narad.compatibility import RuleContext
from narad.compatibility import Violation
from narad.compatibility import show


def minimum(old: Any, new: Any, ctx: RuleContext) -> Iterator[Violation]:
    """Loosen (lower) or drop; never add."""
    yield from _bound(old, new, ctx, "exclusiveMinimum", lower=True)


def maximum(old: Any, new: Any, ctx: RuleContext) -> Iterator[Violation]:
    """Loosen (raise) or drop; never add."""
    yield from _bound(old, new, ctx, "exclusiveMaximum", lower=False)


def exclusive_minimum(old: Any, new: Any, ctx: RuleContext) -> Iterator[Violation]:
    """Loosen (lower) or drop; never add. The boolean form goes with ``minimum``."""
    if not isinstance(new, bool):
        yield from _bound(_number(old), new, ctx, None, lower=True)


def exclusive_maximum(old: Any, new: Any, ctx: RuleContext) -> Iterator[Violation]:
    """Loosen (raise) or drop; never add. The boolean form goes with ``maximum``."""
    if not isinstance(new, bool):
        yield from _bound(_number(old), new, ctx, None, lower=False)


def _number(value: Any) -> Any:
    return ABSENT if isinstance(value, bool) else value


_CHANGES = {
    ("minimum", "added"): Change.minimum_added,
    ("minimum", "tightened"): Change.minimum_increased,
    ("maximum", "added"): Change.maximum_added,
    ("maximum", "tightened"): Change.maximum_decreased,
    ("exclusiveMinimum", "added"): Change.minimum_exclusive_added,
    ("exclusiveMinimum", "tightened"): Change.minimum_exclusive_increased,
    ("exclusiveMaximum", "added"): Change.maximum_exclusive_added,
    ("exclusiveMaximum", "tightened"): Change.maximum_exclusive_decreased,
}


def _bound(
    old: Any, new: Any, ctx: RuleContext, flag: str | None, *, lower: bool
) -> Iterator[Violation]:
    """Judge one bound; ``flag`` names draft-04's boolean exclusiveness keyword."""
    if new is ABSENT:
        return
    if old is ABSENT:
        message = f"{ctx.keyword} {show(new)} added"
        yield Violation(_CHANGES[ctx.keyword, "added"], message)
        return
    looser = new < old if lower else new > old
    was_exclusive = flag is not None and ctx.old.get(flag) is True
    is_exclusive = flag is not None and ctx.new.get(flag) is True
    if looser or (new == old and (was_exclusive or not is_exclusive)):
        return
    if new == old:
        message = f"{ctx.keyword} {show(new)} made exclusive"
    else:
        moved = "raised" if lower else "lowered"
        message = f"{ctx.keyword} {moved} from {show(old)} to {show(new)}"
    yield Violation(_CHANGES[ctx.keyword, "tightened"], message)


def multiple_of(old: Any, new: Any, ctx: RuleContext) -> Iterator[Violation]:
    """Change to a divisor of the old value; drop."""
    if new is ABSENT:
        return
    if old is ABSENT:
        yield Violation(Change.multiple_added, f"multipleOf {show(new)} added")
    elif (Fraction(old) / Fraction(new)).denominator != 1:
        message = f"multipleOf {show(new)} does not divide {show(old)}"
        yield Violation(Change.multiple_changed, message)


def min_length(old: Any, new: Any, ctx: RuleContext) -> Iterator[Violation]:
    """Decrease or drop; a new one may appear only as 0."""
    yield from _at_least(
        old, new, ctx, Change.min_length_added, Change.min_length_increased
    )


def min_items(old: Any, new: Any, ctx: RuleContext) -> Iterator[Violation]:
    """Decrease or drop; a new one may appear only as 0."""
    yield from _at_least(
        old, new, ctx, Change.min_items_added, Change.min_items_increased
    )


def min_properties(old: Any, new: Any, ctx: RuleContext) -> Iterator[Violation]:
    """Decrease or drop; a new one may appear only as 0."""
    yield from _at_least(
        old, new, ctx, Change.min_properties_added, Change.min_properties_increased
    )


def _at_least(
    old: Any, new: Any, ctx: RuleContext, added: Change, increased: Change
) -> Iterator[Violation]:
    if new is ABSENT or new == 0:
        return
    if old is ABSENT:
        yield Violation(added, f"{ctx.keyword} {show(new)} added")
    elif new > old:
        message = f"{ctx.keyword} raised from {show(old)} to {show(new)}"
        yield Violation(increased, message)


def max_length(old: Any, new: Any, ctx: RuleContext) -> Iterator[Violation]:
    """Increase or drop; never add."""
    yield from _at_most(
        old, new, ctx, Change.max_length_added, Change.max_length_decreased
    )


def max_items(old: Any, new: Any, ctx: RuleContext) -> Iterator[Violation]:
    """Increase or drop; never add."""
    yield from _at_most(
        old, new, ctx, Change.max_items_added, Change.max_items_decreased
    )


def max_properties(old: Any, new: Any, ctx: RuleContext) -> Iterator[Violation]:
    """Increase or drop; never add."""
    yield from _at_most(
        old, new, ctx, Change.max_properties_added, Change.max_properties_decreased
    )


def _at_most(
    old: Any, new: Any, ctx: RuleContext, added: Change, decreased: Change
) -> Iterator[Violation]:
    if new is ABSENT:
        return
    if old is ABSENT:
        yield Violation(added, f"{ctx.keyword} {show(new)} added")
    elif new < old:
        message = f"{ctx.keyword} lowered from {show(old)} to {show(new)}"
        yield Violation(decreased, message)


@hookimpl
def narad_compatibility_rules() -> dict[str, Any]:
    return {
        "minimum": minimum,
        "exclusiveMinimum": exclusive_minimum,
        "maximum": maximum,
        "exclusiveMaximum": exclusive_maximum,
        "multipleOf": multiple_of,
        "minLength": min_length,
        "minItems": min_items,
        "minProperties": min_properties,
        "maxLength": max_length,
        "maxItems": max_items,
        "maxProperties": max_properties,
    }
