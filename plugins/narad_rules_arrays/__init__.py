"""Compatibility rules for arrays.

Rows of the rulebook's keyword table:

- ``items``: widen or drop; never add. The array form (tuples) is not
  supported: it may only stay identical or be dropped.
- ``uniqueItems``: ``true`` may become ``false`` or absent; never add.

And from the paragraphs after it: ``contains`` may stay identical or be
removed; ``prefixItems`` may stay identical, or be removed only together with
``items`` (else ``items`` would reach the leading elements too). A subschema
they hold may also become ``true`` or ``{}`` ("a nested schema may always
become true or {}"), ``contains`` only where no ``maxContains`` follows: "at
most N elements match" would become "at most N elements".

The other array keywords the drafts define are named by neither the table nor
the list of other keywords, so the check cannot reason about them: they may
only stay identical, or disappear where removing them can only widen.
``additionalItems`` (up to 2019-09) and ``maxContains`` can always go;
``minContains`` can go only where the implicit ``minContains`` of 1 is no
stricter, or together with ``contains``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from narad import hookimpl
from narad.compatibility import ABSENT
from narad.compatibility import UNKNOWN
from narad.compatibility import Change
from narad.compatibility import InPlace
from narad.compatibility import RuleContext
from narad.compatibility import Violation
from narad.compatibility import identical_or_opened
from narad.compatibility import identical_or_removed
from narad.compatibility import show


def items(old: Any, new: Any, ctx: RuleContext) -> Iterator[Violation]:
    """Widen or drop; never add. Tuples may only stay identical or be dropped."""
    if new is ABSENT:
        return
    if old is ABSENT:
        if isinstance(new, list) or not ctx.accepts_everything(new, "new"):
            yield Violation(Change.items_added, "items added")
        return
    if isinstance(old, list) or isinstance(new, list):
        if not (isinstance(old, list) and ctx.identical(old, new, keyword="items")):
            message = "items in array form (tuples) changed: not supported"
            yield Violation(Change.tuple_items_changed, message)
        return
    yield from ctx.compare(old, new, ctx.at("items"), applying=_elements(ctx, old))


# What a subschema applies to (some of) the elements of an array value.
_ELEMENTS = ("items", "prefixItems", "additionalItems", "contains", "unevaluatedItems")


def _elements(ctx: RuleContext, own: Any) -> list[Any]:
    """What applies to the elements ``items`` governs here besides ``own``:
    whatever another subschema applies to elements, and ``contains``."""
    place = InPlace.of(ctx)
    keywords = ctx.old_draft.keywords
    found: dict[int, Any] = {}
    for schema in place.positive:
        # This subschema's other keywords reach those elements only through
        # contains; another one's may through any of them.
        mine = schema is ctx.old_schema
        for keyword in ("contains",) if mine else _ELEMENTS:
            value = schema.get(keyword, ABSENT) if keyword in keywords else ABSENT
            for subschema in value if isinstance(value, list) else [value]:
                if subschema is ABSENT or subschema is own:
                    continue
                if not ctx.accepts_everything(subschema, "old"):
                    found.setdefault(id(subschema), subschema)
    if place.unknown or any(
        not set(_ELEMENTS).isdisjoint(schema) for schema in place.turning
    ):
        found[id(UNKNOWN)] = UNKNOWN
    return list(found.values())


def prefix_items(old: Any, new: Any, ctx: RuleContext) -> Iterator[Violation]:
    """Stay identical (each entry may open up), or be removed together with
    ``items``."""
    if new is not ABSENT:
        yield from identical_or_opened(old, new, ctx)
        return
    after = ctx.new.get("items", ABSENT)
    if after is not ABSENT and not ctx.accepts_everything(after, "new"):
        message = "prefixItems removed while items stays"
        yield Violation(Change.keyword_removed, message)


def contains(old: Any, new: Any, ctx: RuleContext) -> Iterator[Violation]:
    """Stay identical or be removed; open up only where no ``maxContains``
    caps the elements it matches."""
    if "maxContains" in ctx.new and "maxContains" in ctx.new_draft.keywords:
        yield from identical_or_removed(old, new, ctx)
    else:
        yield from identical_or_opened(old, new, ctx)


def unique_items(old: Any, new: Any, ctx: RuleContext) -> Iterator[Violation]:
    """``true`` may become ``false`` or absent; never add."""
    if new is True and old is not True:
        yield Violation(Change.unique_items_added, "uniqueItems added")


def min_contains(old: Any, new: Any, ctx: RuleContext) -> Iterator[Violation]:
    """Stay identical, or go where the implicit 1 is no stricter (or with
    ``contains``)."""
    if new is not ABSENT:
        yield from identical_or_removed(old, new, ctx)
    elif old < 1 and "contains" in ctx.new:
        message = f"minContains {show(old)} removed while contains stays (1 applies)"
        yield Violation(Change.keyword_removed, message)


@hookimpl
def narad_compatibility_rules() -> dict[str, Any]:
    return {
        "items": items,
        "additionalItems": identical_or_removed,
        "prefixItems": prefix_items,
        "uniqueItems": unique_items,
        "contains": contains,
        "minContains": min_contains,
        "maxContains": identical_or_removed,
    }
