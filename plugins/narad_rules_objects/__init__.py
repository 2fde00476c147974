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
content model is allowed, though a message that already carried that key with
another type was valid before. The model is open for a name when nothing the
previous version applied to the object says anything about that name's value.
Everything that applies to the same object counts, not only the subschema the
property is added to: its ``$ref`` targets and ``allOf``/``anyOf``/``then``/
``else``/``dependentSchemas`` branches (and the subschemas it is itself a
branch of), with their ``properties``, matching ``patternProperties``,
``additionalProperties`` and ``unevaluatedProperties``. The new property must
accept everything each of those accepted. Two more readings, both refusing
where the exception could hide a narrowing:

- a name the previous version ``required`` (or named in ``dependentRequired``)
  is not an optional property: it was allowed any value, and the new property
  must accept every value;
- where the name's value could decide a ``not``, a ``oneOf`` or an ``if``, or
  a ``$dynamicRef`` applies in place, the previous version's verdict on the
  value is not a schema the check can compare with: the new property must
  accept every value.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import re2

from narad import hookimpl
from narad.compatibility import ABSENT
from narad.compatibility import Change
from narad.compatibility import RuleContext
from narad.compatibility import Violation
from narad.compatibility import identical_or_removed
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
    for name, schema in old.items():
        if name not in new:
            message = f"property {show(name)} removed"
            yield Violation(Change.property_removed, message)
        else:
            yield from ctx.compare(schema, new[name], ctx.at("properties", name))
    for name, schema in new.items():
        if name not in old:
            for before in _Said(name, ctx).governing():
                yield from ctx.compare(before, schema, ctx.at("properties", name))


class _Said:
    """What the previous version said about the value of a property ``name``
    it did not list where the proposed version adds it."""

    # Scans nested inside not, oneOf or if, past which a name counts as said.
    MAX_NESTING = 32

    def __init__(self, name: str, ctx: RuleContext, nesting: int = 0) -> None:
        self.name = name
        self.ctx = ctx
        self.keywords = ctx.old_draft.keywords
        self.nesting = nesting
        self.found: dict[int, Any] = {}
        self.seen: set[int] = set()
        # Whether a subschema's verdict can turn on the value, per subschema;
        # shared by nested scans, True while one is under way (fail closed).
        self.turns: dict[int, bool] = {}

    def governing(self) -> list[Any]:
        """The previous subschemas that applied to the value, each of which
        the new property must widen; ``True`` where that was any value, but
        the name mattered. Empty under an open content model."""
        self.scan(self.ctx.old_in_place_root, self.ctx.old_schema)
        return list(self.found.values())

    def get(self, schema: dict[str, Any], keyword: str) -> Any:
        if keyword in self.keywords:
            return schema.get(keyword, ABSENT)
        return ABSENT

    def scan(self, *start: Any) -> None:
        """Visit every subschema applying in place of ``start``."""
        pending = list(start)
        while pending:
            schema = pending.pop()
            if not isinstance(schema, dict) or id(schema) in self.seen:
                continue
            self.seen.add(id(schema))
            ref = self.get(schema, "$ref")
            if isinstance(ref, str):
                pending.append(self.ctx.resolve(ref, "old", schema))
                if self.ctx.old_draft.ref_overrides_siblings:
                    continue
            self.applied(schema)
            pending.extend(self.branches(schema))

    def applied(self, schema: dict[str, Any]) -> None:
        """Record what ``schema`` itself applies to the value."""
        name, get = self.name, self.get
        named = get(schema, "properties")
        if isinstance(named, dict) and name in named:
            self.add(named[name])
        else:
            patterns = get(schema, "patternProperties")
            matching = [
                subschema
                for pattern, subschema in _items(patterns)
                if _matches(pattern, name)
            ]
            for subschema in matching:
                self.add(subschema)
            additional = get(schema, "additionalProperties")
            if not matching and additional is not ABSENT:
                self.add(additional)
        self.add(get(schema, "unevaluatedProperties"))
        required = get(schema, "required")
        if isinstance(required, list) and name in required:
            self.found[id(True)] = True
        for trigger, names in _items(get(schema, "dependentRequired")):
            if name == trigger or name in names:
                self.found[id(True)] = True
        dynamic = get(schema, "$dynamicRef"), get(schema, "$recursiveRef")
        if any(ref is not ABSENT for ref in dynamic):
            self.found[id(True)] = True

    def add(self, subschema: Any) -> None:
        if subschema is not ABSENT and not self.ctx.accepts_everything(
            subschema, "old"
        ):
            self.found[id(subschema)] = subschema

    def branches(self, schema: dict[str, Any]) -> list[Any]:
        """The subschemas applying in place of ``schema`` whose verdict only
        adds to it; those that can turn on the value are judged here."""
        get = self.get
        branches: list[Any] = []
        for keyword in ("allOf", "anyOf"):
            value = get(schema, keyword)
            if isinstance(value, list):
                branches.extend(value)
        branches.extend(
            subschema for _, subschema in _items(get(schema, "dependentSchemas"))
        )
        for trigger, value in _items(get(schema, "dependencies")):
            if isinstance(value, list):
                if self.name == trigger or self.name in value:
                    self.found[id(True)] = True
            else:
                branches.append(value)
        negated: list[Any] = []
        if get(schema, "if") is not ABSENT:
            branches.extend(
                v for v in (get(schema, "then"), get(schema, "else")) if v is not ABSENT
            )
            negated.append(schema["if"])
        if get(schema, "not") is not ABSENT:
            negated.append(schema["not"])
        one_of = get(schema, "oneOf")
        if isinstance(one_of, list):
            negated.extend(one_of)
        if any(self.turns_on_value(subschema) for subschema in negated):
            self.found[id(True)] = True
        return branches

    def turns_on_value(self, schema: Any) -> bool:
        """Whether ``schema``'s verdict can depend on the value of the name."""
        key = id(schema)
        if key not in self.turns:
            if self.nesting >= self.MAX_NESTING:
                return True
            self.turns[key] = True  # under way: a cycle counts as turning
            inner = _Said(self.name, self.ctx, self.nesting + 1)
            inner.turns = self.turns
            inner.scan(schema)
            self.turns[key] = bool(inner.found)
        return self.turns[key]


def _items(value: Any) -> list[tuple[str, Any]]:
    return list(value.items()) if isinstance(value, dict) else []


def _matches(pattern: str, name: str) -> bool:
    try:
        return re2.search(pattern, name) is not None
    except re2.error:
        return True  # a pattern we cannot run might match: fail closed


def additional_properties(old: Any, new: Any, ctx: RuleContext) -> Iterator[Violation]:
    """``false`` may open up; a schema may only widen; a closed model or a
    schema may not appear where there was none."""
    if new is ABSENT or ctx.accepts_everything(new, "new"):
        return
    if old is ABSENT or ctx.accepts_everything(old, "old"):
        message = f"additionalProperties {show(new)} added"
        yield Violation(Change.additional_properties_added, message)
        return
    yield from ctx.compare(old, new, ctx.at("additionalProperties"))


def pattern_properties(old: Any, new: Any, ctx: RuleContext) -> Iterator[Violation]:
    """Stay identical or be removed, removed only while additionalProperties
    stays open (else the names it matched fall to additionalProperties)."""
    if new is ABSENT:
        additional = ctx.new.get("additionalProperties", ABSENT)
        if additional is not ABSENT and not ctx.accepts_everything(additional, "new"):
            message = "patternProperties removed while additionalProperties is not open"
            yield Violation(Change.keyword_removed, message)
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
