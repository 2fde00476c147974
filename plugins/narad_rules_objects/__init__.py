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
``additionalProperties`` stays open. A subschema they hold may also become
``true`` or ``{}`` ("a nested schema may always become true or {}"), the
patterns and names staying as they were: that can only widen.

The one deliberate exception: an optional property added under an open
content model is allowed, though a message that already carried that key with
another type was valid before. The model is open for a name only when nothing
the previous version applied to the object says anything about that name's
value. Everything applying to the same object value counts, not only the
subschema the property is added to (:class:`~narad.compatibility.InPlace`):
its ``$ref`` targets and ``allOf``/``anyOf``/``then``/``else``/
``dependentSchemas`` branches, the subschemas it is itself a branch of, and
the other subschemas that reach the same value from above (another branch's
``items`` or matching ``patternProperties``, passed down as
``compare(applying=...)``), with their ``properties``, matching
``patternProperties``, ``additionalProperties`` and ``unevaluatedProperties``.
The new property must accept everything each of those accepted. Two more
readings, both refusing where the exception could hide a narrowing:

- a name the previous version ``required`` (or named in ``dependentRequired``)
  is not an optional property: it was allowed any value, and the new property
  must accept every value;
- where the name's value could decide a ``not``, a ``oneOf`` or an ``if``, or
  a dynamic reference applies, the previous version's verdict on the value is
  not a schema the check can compare with: the new property must accept
  every value.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from narad import hookimpl
from narad.compatibility import ABSENT
from narad.compatibility import IN_PLACE
from narad.compatibility import UNKNOWN
from narad.compatibility import Change
from narad.compatibility import InPlace
from narad.compatibility import RuleContext
from narad.compatibility import Violation
from narad.compatibility import identical_or_opened
from narad.compatibility import identical_or_removed
from narad.compatibility import pattern_matches
from narad.compatibility import show


def required(old: Any, new: Any, ctx: RuleContext) -> Iterator[Violation]:
    """Remove names; never add."""
    if new is ABSENT:
        return
    before = set() if old is ABSENT else set(old)
    for name in dict.fromkeys(new):
        if name not in before:
            message = f"required property {show(name)} added"
            yield Violation(Change.required_attribute_added, message)


def properties(old: Any, new: Any, ctx: RuleContext) -> Iterator[Violation]:
    """Add optional properties; never remove one; each kept one must widen."""
    old = {} if old is ABSENT else old
    new = {} if new is ABSENT else new
    # The common case, one subschema whose members only properties govern,
    # needs no gathering for the members it lists.
    members = None if _alone(ctx) else _Members(ctx)
    for name, schema in old.items():
        if name not in new:
            message = f"property {show(name)} removed"
            yield Violation(Change.property_removed, message)
        else:
            at = ctx.at("properties", name)
            also = members.applying(name, schema) if members else ()
            yield from ctx.compare(schema, new[name], at, applying=also)
    for name, schema in new.items():
        if name not in old:
            members = members or _Members(ctx)  # gathered once, when needed
            governing = members.governing(name)
            for i, before in enumerate(governing):
                also = governing[:i] + governing[i + 1 :]
                before = True if before is UNKNOWN else before
                at = ctx.at("properties", name)
                yield from ctx.compare(before, schema, at, applying=also)


class _Members:
    """What the previous version applied to the members of this pair's object
    value, gathered over everything applying to it (:class:`InPlace`)."""

    def __init__(self, ctx: RuleContext) -> None:
        self.ctx = ctx
        self.keywords = ctx.old_draft.keywords
        self.place = InPlace.of(ctx)

    def applying(self, name: str, own: Any) -> list[Any]:
        """The subschemas other than ``own`` applying to the member ``name``,
        :data:`UNKNOWN` where the previous version constrains it in ways no
        subschema says."""
        found = {id(own): own}
        for schema in self.place.positive:
            for subschema in self.member_schemas(schema, name):
                found.setdefault(id(subschema), subschema)
        del found[id(own)]
        if self.place.unknown or any(
            self.member_schemas(schema, name) for schema in self.place.turning
        ):
            found[id(UNKNOWN)] = UNKNOWN
        return list(found.values())

    def governing(self, name: str) -> list[Any]:
        """What the member ``name``, listed nowhere in the previous subschema,
        must accept: empty under an open content model; ``True`` where it was
        allowed any value but required."""
        found = self.applying(name, None)
        for schema in self.place.positive:
            if self.required(schema, name):
                found.append(True)
                break
        return found

    def member_schemas(self, schema: dict[str, Any], name: str) -> list[Any]:
        """The subschemas of ``schema`` that apply to its member ``name``."""
        get = self.get
        found = []
        named = get(schema, "properties")
        if isinstance(named, dict) and name in named:
            found.append(named[name])
        matched = False
        for pattern, subschema in _items(get(schema, "patternProperties")):
            if pattern_matches(pattern, name):
                found.append(subschema)
                matched = True
        if not found and not matched:
            found.append(get(schema, "additionalProperties"))
        found.append(get(schema, "unevaluatedProperties"))
        accepts = self.ctx.accepts_everything
        return [s for s in found if s is not ABSENT and not accepts(s, "old")]

    def required(self, schema: dict[str, Any], name: str) -> bool:
        """Whether ``schema`` may require the member ``name``."""
        get = self.get
        required = get(schema, "required")
        if isinstance(required, list) and name in required:
            return True
        for key in ("dependentRequired", "dependencies"):
            for trigger, names in _items(get(schema, key)):
                if isinstance(names, list) and (name == trigger or name in names):
                    return True
        return False

    def get(self, schema: dict[str, Any], keyword: str) -> Any:
        if keyword in self.keywords:
            return schema.get(keyword, ABSENT)
        return ABSENT

    def additional(self, own: Any) -> list[Any]:
        """What applies to members ``additionalProperties`` governs here
        besides ``own``: whatever another subschema applies to members."""
        found: dict[int, Any] = {}
        accepts = self.ctx.accepts_everything
        for schema in self.place.positive:
            if schema is self.ctx.old_schema:
                continue  # its own keywords leave those members to ``own``
            for subschema in self.all_member_schemas(schema):
                if subschema is not own and not accepts(subschema, "old"):
                    found.setdefault(id(subschema), subschema)
        if self.place.unknown or any(
            self.all_member_schemas(schema) for schema in self.place.turning
        ):
            found[id(UNKNOWN)] = UNKNOWN
        return list(found.values())

    def all_member_schemas(self, schema: dict[str, Any]) -> list[Any]:
        get = self.get
        found = [
            *(s for _, s in _items(get(schema, "properties"))),
            *(s for _, s in _items(get(schema, "patternProperties"))),
            get(schema, "additionalProperties"),
            get(schema, "unevaluatedProperties"),
        ]
        return [s for s in found if s is not ABSENT]


# Keywords by which a subschema applies more to its own members than its
# properties do, directly or through other subschemas.
_NOT_ALONE = IN_PLACE | {"patternProperties", "unevaluatedProperties"}


def _alone(ctx: RuleContext) -> bool:
    """Whether only this subschema's ``properties`` apply to the members it
    lists: nothing else applies to the value, and it has no keyword that
    applies more to them."""
    applying = ctx.old_applying
    return (
        len(applying) == 1
        and applying[0] is ctx.old_schema
        and _NOT_ALONE.isdisjoint(ctx.old)
    )


def _items(value: Any) -> list[tuple[str, Any]]:
    return list(value.items()) if isinstance(value, dict) else []


def additional_properties(old: Any, new: Any, ctx: RuleContext) -> Iterator[Violation]:
    """``false`` may open up; a schema may only widen; a closed model or a
    schema may not appear where there was none."""
    if new is ABSENT or ctx.accepts_everything(new, "new"):
        return
    if old is ABSENT or ctx.accepts_everything(old, "old"):
        message = f"additionalProperties {show(new)} added"
        yield Violation(Change.additional_properties_added, message)
        return
    also = _Members(ctx).additional(old)
    yield from ctx.compare(old, new, ctx.at("additionalProperties"), applying=also)


def pattern_properties(old: Any, new: Any, ctx: RuleContext) -> Iterator[Violation]:
    """Stay identical (each pattern's subschema may open up) or be removed,
    removed only while additionalProperties stays open (else the names it
    matched fall to additionalProperties)."""
    if new is ABSENT:
        additional = ctx.new.get("additionalProperties", ABSENT)
        if additional is not ABSENT and not ctx.accepts_everything(additional, "new"):
            message = "patternProperties removed while additionalProperties is not open"
            yield Violation(Change.keyword_removed, message)
        return
    yield from identical_or_opened(old, new, ctx)


@hookimpl
def narad_compatibility_rules() -> dict[str, Any]:
    return {
        "required": required,
        "properties": properties,
        "additionalProperties": additional_properties,
        "patternProperties": pattern_properties,
        "dependentRequired": identical_or_removed,
        "dependentSchemas": identical_or_opened,
        "dependencies": identical_or_opened,
        "propertyNames": identical_or_opened,
    }
