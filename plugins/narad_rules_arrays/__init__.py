"""Compatibility rules for arrays.

Rows of the rulebook's keyword table:

- ``items``: widen or drop; never add. The array form (tuples) is not
  supported: it may only stay identical or be dropped.
- ``uniqueItems``: ``true`` may become ``false`` or absent; never add.

And from the paragraphs after it: ``contains`` may stay identical or be
removed; ``prefixItems`` may stay identical, or be removed only together with
``items`` (else ``items`` would reach the leading elements too).
``additionalItems`` (up to 2019-09) constrains the elements past a tuple and
is judged like ``items``. ``minContains`` and ``maxContains`` are bounds on
``contains``: loosen or drop, the implicit ``minContains`` being 1.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from narad import hookimpl
from narad.schema.compatibility import ABSENT
from narad.schema.compatibility import Change
from narad.schema.compatibility import Incompatibility
from narad.schema.compatibility import RuleContext
from narad.schema.compatibility import identical_or_removed
from narad.schema.compatibility import show


def items(old: Any, new: Any, ctx: RuleContext) -> Iterator[Incompatibility]:
    """Widen or drop; never add. Tuples may only stay identical or be dropped."""
    yield from _widen_or_drop(old, new, ctx, Change.items_added)


def additional_items(old: Any, new: Any, ctx: RuleContext) -> Iterator[Incompatibility]:
    """Widen or drop; never add."""
    yield from _widen_or_drop(old, new, ctx, Change.additional_items_added)


def _widen_or_drop(
    old: Any, new: Any, ctx: RuleContext, added: Change
) -> Iterator[Incompatibility]:
    if new is ABSENT:
        return
    if old is ABSENT:
        if isinstance(new, list) or not ctx.accepts_everything(new, "new"):
            yield Incompatibility(added, f"{ctx.keyword} added")
        return
    if isinstance(old, list) or isinstance(new, list):
        if not (isinstance(old, list) and ctx.identical(old, new)):
            message = f"{ctx.keyword} in array form (tuples) changed: not supported"
            yield Incompatibility(Change.tuple_items_changed, message)
        return
    yield from ctx.compare(old, new, ctx.at(ctx.keyword))


def prefix_items(old: Any, new: Any, ctx: RuleContext) -> Iterator[Incompatibility]:
    """Stay identical, or be removed together with ``items``."""
    if new is not ABSENT:
        yield from identical_or_removed(old, new, ctx)
        return
    after = ctx.new.get("items", ABSENT)
    if after is not ABSENT and not ctx.accepts_everything(after, "new"):
        message = "prefixItems removed while items stays"
        yield Incompatibility(Change.keyword_removed, message)


def unique_items(old: Any, new: Any, ctx: RuleContext) -> Iterator[Incompatibility]:
    """``true`` may become ``false`` or absent; never add."""
    if new is True and old is not True:
        yield Incompatibility(Change.unique_items_added, "uniqueItems added")


def min_contains(old: Any, new: Any, ctx: RuleContext) -> Iterator[Incompatibility]:
    """Decrease or drop (to the implicit 1), while ``contains`` applies."""
    if "contains" not in ctx.new:
        return
    before = 1 if old is ABSENT else old
    now = 1 if new is ABSENT else new
    if now > before:
        message = f"minContains raised from {show(before)} to {show(now)}"
        yield Incompatibility(Change.min_contains_increased, message)


def max_contains(old: Any, new: Any, ctx: RuleContext) -> Iterator[Incompatibility]:
    """Increase or drop; never add, while ``contains`` applies."""
    if new is ABSENT or "contains" not in ctx.new:
        return
    if old is ABSENT:
        message = f"maxContains {show(new)} added"
        yield Incompatibility(Change.max_contains_added, message)
    elif new < old:
        message = f"maxContains lowered from {show(old)} to {show(new)}"
        yield Incompatibility(Change.max_contains_decreased, message)


@hookimpl
def narad_compatibility_rules() -> dict[str, Any]:
    return {
        "items": items,
        "additionalItems": additional_items,
        "prefixItems": prefix_items,
        "uniqueItems": unique_items,
        "contains": identical_or_removed,
        "minContains": min_contains,
        "maxContains": max_contains,
    }
