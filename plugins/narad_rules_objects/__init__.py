"""Compatibility rules for objects.

Rows of the rulebook's keyword table:

- ``required``: remove names; never add.
- ``properties``: add optional properties; never remove one. Each existing
  property is checked with these same rules. A new property whose name
  matches a previous ``patternProperties`` pattern must accept everything that
  pattern's schema did.
- ``additionalProperties``: ``false`` may open up (to absent, ``true``, or a
  schema); a schema may only widen; a closed model or a schema may not appear
  where there was none.

And from the paragraphs after it: ``patternProperties``, ``dependentRequired``,
``dependentSchemas``, ``dependencies`` and ``propertyNames`` may stay identical
or be removed; ``patternProperties`` may be removed only while
``additionalProperties`` stays open.

The one deliberate exception: an optional property added under an open
content model (``additionalProperties`` absent or ``true``) is allowed, though
a message that already carried that key with another type was valid before.
Under an ``additionalProperties`` schema, the new property must accept what
that schema did, as it must a matching pattern's.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import re2

from narad import hookimpl
from narad.schema.compatibility import ABSENT
from narad.schema.compatibility import Change
from narad.schema.compatibility import Incompatibility
from narad.schema.compatibility import RuleContext
from narad.schema.compatibility import identical_or_removed
from narad.schema.compatibility import show


def required(old: Any, new: Any, ctx: RuleContext) -> Iterator[Incompatibility]:
    """Remove names; never add."""
    if new is ABSENT:
        return
    before = set() if old is ABSENT else set(old)
    for name in dict.fromkeys(new):
        if name not in before:
            message = f"required property {show(name)} added"
            yield Incompatibility(Change.required_attribute_added, message)


def properties(old: Any, new: Any, ctx: RuleContext) -> Iterator[Incompatibility]:
    """Add optional properties; never remove one; each kept one must widen."""
    old = {} if old is ABSENT else old
    new = {} if new is ABSENT else new
    for name, schema in old.items():
        if name not in new:
            message = f"property {show(name)} removed"
            yield Incompatibility(Change.property_removed, message)
        else:
            yield from ctx.compare(schema, new[name], ctx.at("properties", name))
    for name in new.keys() - old.keys():
        for before in _governing(name, ctx):
            yield from ctx.compare(before, new[name], ctx.at("properties", name))


def _governing(name: str, ctx: RuleContext) -> list[Any]:
    """The previous schemas that applied to a property ``name`` not listed then."""
    patterns = ctx.old.get("patternProperties", {})
    matching = [schema for p, schema in patterns.items() if _matches(p, name)]
    if matching:
        return matching  # additionalProperties applies to no name a pattern matches
    additional = ctx.old.get("additionalProperties", ABSENT)
    if additional is ABSENT or ctx.accepts_everything(additional, "old"):
        return []  # the deliberate exception: open content model
    return [additional]


def _matches(pattern: str, name: str) -> bool:
    try:
        return re2.search(pattern, name) is not None
    except re2.error:
        return True  # a pattern we cannot run might match: fail closed


def additional_properties(
    old: Any, new: Any, ctx: RuleContext
) -> Iterator[Incompatibility]:
    """``false`` may open up; a schema may only widen; a closed model or a
    schema may not appear where there was none."""
    if new is ABSENT or ctx.accepts_everything(new, "new"):
        return
    if old is ABSENT or ctx.accepts_everything(old, "old"):
        message = f"additionalProperties {show(new)} added"
        yield Incompatibility(Change.additional_properties_added, message)
        return
    yield from ctx.compare(old, new, ctx.at("additionalProperties"))


def pattern_properties(
    old: Any, new: Any, ctx: RuleContext
) -> Iterator[Incompatibility]:
    """Stay identical or be removed, removed only while additionalProperties
    stays open (else the names it matched fall to additionalProperties)."""
    if new is ABSENT:
        additional = ctx.new.get("additionalProperties", ABSENT)
        if additional is not ABSENT and not ctx.accepts_everything(additional, "new"):
            message = "patternProperties removed while additionalProperties is not open"
            yield Incompatibility(Change.keyword_removed, message)
        return
    yield from identical_or_removed(old, new, ctx)


@hookimpl
def narad_compatibility_rules() -> dict[str, Any]:
    return {
        "required": required,
        "properties": properties,
        "additionalProperties": additional_properties,
        "patternProperties": pattern_properties,
        "dependentRequired": identical_or_removed,
        "dependentSchemas": identical_or_removed,
        "dependencies": identical_or_removed,
        "propertyNames": identical_or_removed,
    }
