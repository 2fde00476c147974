"""Compatibility rules for references, the dialect, and what changes freely.

Rows of the rulebook's keyword table:

- ``$ref``: only ``#/...`` pointers into the same document, with no sibling
  keywords (annotations, ``$schema`` and a root ``$id`` aside). Both sides are
  resolved before they are compared, and recursive schemas are compared the
  way recursive types are: the engine does this walking. A ``$ref`` that
  reaches this rule has real siblings (2019-09 on, where it applies beside
  them): such a subschema is outside what the check reasons about, and may
  only stay identical (or, nested, become ``true`` or ``{}``); a change to a
  sibling is refused even where it widens, and so are adding or dropping the
  ``$ref`` itself.
- ``$schema``: must not change (naming the same draft another way, such as
  with or without the trailing ``#``, is no change). Registration admits a
  nested ``$schema`` only when it names the document's draft, so the dialect
  is the document's everywhere and the drafts of the two documents decide.

And from the paragraphs after it: ``unevaluatedProperties``,
``unevaluatedItems`` and ``$dynamicRef`` (and 2019-09's ``$recursiveRef``) are
accepted only in a part of the schema unchanged byte for byte (a dynamic
reference also reached through the same dynamic scope, which the engine
checks); title, description, default, examples and ``$defs`` (and the other
annotations and identifiers) can change freely: references are resolved
through them, so a changed ``$defs`` entry counts wherever it is used.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from narad import hookimpl
from narad.compatibility import ABSENT
from narad.compatibility import Change
from narad.compatibility import RuleContext
from narad.compatibility import Violation
from narad.compatibility import changes_freely
from narad.compatibility import document_keyword
from narad.compatibility import show


def ref(old: Any, new: Any, ctx: RuleContext) -> Iterator[Violation]:
    """Beside constraining keywords: the subschema may only stay identical."""
    if ctx.identical(ctx.old_schema, ctx.new_schema):
        return
    if old is ABSENT:
        yield Violation(Change.ref_added, f"$ref {show(new)} added")
    elif new is ABSENT:
        message = f"$ref {show(old)} removed from beside other keywords"
        yield Violation(Change.ref_changed, message)
    else:
        message = (
            f"subschema with $ref {show(new)} beside other keywords changed: "
            "it may only stay identical"
        )
        yield Violation(Change.ref_changed, message)


@document_keyword
def schema(old: Any, new: Any, ctx: RuleContext) -> Iterator[Violation]:
    """Must not change."""
    if ctx.old_draft.name != ctx.new_draft.name:
        message = f"$schema changed from {ctx.old_draft.name} to {ctx.new_draft.name}"
        yield Violation(Change.dialect_changed, message)


def unchanged_only(old: Any, new: Any, ctx: RuleContext) -> Iterator[Violation]:
    """Accepted only where the subschema is unchanged byte for byte; dropping
    it removes a constraint and is allowed."""
    if new is ABSENT or ctx.unchanged(ctx.old_schema, ctx.new_schema):
        return
    message = f"{ctx.keyword} is accepted only in a part unchanged byte for byte"
    if ctx.keyword in _DYNAMIC:
        message += ", reached through the same dynamic scope"
    yield Violation(Change.keyword_changed, message)


_DYNAMIC = frozenset({"$dynamicRef", "$recursiveRef"})
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
