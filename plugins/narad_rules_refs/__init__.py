"""Compatibility rules for references, the dialect, and what changes freely.

Rows of the rulebook's keyword table:

- ``$ref``: only ``#/...`` pointers into the same document, with no sibling
  keywords (annotations, ``$schema`` and a root ``$id`` aside). Both sides are
  resolved before they are compared, and recursive schemas are compared the
  way recursive types are: the engine does this walking. A ``$ref`` that
  reaches this rule has siblings that constrain values (2019-09 on, where it
  applies beside them): it may be dropped, or keep a target that only widens.
- ``$schema``: must not change (naming the same draft another way, such as
  with or without the trailing ``#``, is no change).

And from the paragraphs after it: ``unevaluatedProperties``,
``unevaluatedItems`` and ``$dynamicRef`` (and 2019-09's ``$recursiveRef``) are
accepted only in a part of the schema unchanged byte for byte; title,
description, default, examples and ``$defs`` (and the other annotations and
identifiers) can change freely: references are resolved through them, so a
changed ``$defs`` entry counts wherever it is used.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from narad import hookimpl
from narad.schema.compatibility import ABSENT
from narad.schema.compatibility import Change
from narad.schema.compatibility import Incompatibility
from narad.schema.compatibility import RuleContext
from narad.schema.compatibility import changes_freely
from narad.schema.compatibility import document_keyword
from narad.schema.compatibility import show
from narad.schema.jsontext import json_equal


def ref(old: Any, new: Any, ctx: RuleContext) -> Iterator[Incompatibility]:
    """Beside constraining keywords: drop, or keep a target that only widens."""
    if new is ABSENT:
        return
    after = ctx.resolve(new, "new")
    if old is ABSENT:
        if after is ABSENT or not ctx.accepts_everything(after, "new"):
            yield Incompatibility(Change.ref_added, f"$ref {show(new)} added")
        return
    before = ctx.resolve(old, "old")
    if before is ABSENT or after is ABSENT:
        if not json_equal(old, new):
            message = f"$ref changed from {show(old)} to {show(new)}"
            yield Incompatibility(Change.keyword_changed, message)
        return
    yield from ctx.compare(before, after, ctx.location)


@document_keyword
def schema(old: Any, new: Any, ctx: RuleContext) -> Iterator[Incompatibility]:
    """Must not change."""
    if ctx.location == "":
        if ctx.old_draft.name != ctx.new_draft.name:
            message = (
                f"$schema changed from {ctx.old_draft.name} to {ctx.new_draft.name}"
            )
            yield Incompatibility(Change.dialect_changed, message)
    elif not json_equal(old, new):
        message = f"$schema changed from {show(old)} to {show(new)}"
        yield Incompatibility(Change.dialect_changed, message)


def unchanged_only(old: Any, new: Any, ctx: RuleContext) -> Iterator[Incompatibility]:
    """Accepted only where the subschema is unchanged byte for byte; dropping
    it removes a constraint and is allowed."""
    if new is ABSENT or ctx.unchanged(ctx.old_schema, ctx.new_schema):
        return
    message = f"{ctx.keyword} is accepted only in a part unchanged byte for byte"
    yield Incompatibility(Change.keyword_changed, message)


_FREE = (
    "title",
    "description",
    "default",
    "examples",
    "deprecated",
    "readOnly",
    "writeOnly",
    "$comment",
    "$defs",
    "definitions",
    "$id",
    "id",
    "$anchor",
    "$dynamicAnchor",
    "$recursiveAnchor",
)


@hookimpl
def narad_compatibility_rules() -> dict[str, Any]:
    return {
        "$ref": ref,
        "$schema": schema,
        "$dynamicRef": unchanged_only,
        "$recursiveRef": unchanged_only,
        "unevaluatedProperties": unchanged_only,
        "unevaluatedItems": unchanged_only,
        **dict.fromkeys(_FREE, changes_freely),
    }
