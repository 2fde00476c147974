"""The record a draft plugin contributes through ``narad_json_schema_drafts``.

Each built-in draft's keywords are written as what changed from the draft
before it, starting from draft-04's, so the five sets cannot drift apart.
What a draft does differently with a keyword it shares with others is a flag
on its :class:`Draft`, never inferred from which keywords it lists.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from dataclasses import field
from typing import Any

__all__ = (
    "DRAFT4_KEYWORDS",
    "DRAFT6_KEYWORDS",
    "DRAFT7_KEYWORDS",
    "DRAFT201909_KEYWORDS",
    "DRAFT202012_KEYWORDS",
    "Draft",
)

DRAFT4_KEYWORDS = frozenset(
    {
        "$ref",
        "$schema",
        "additionalItems",
        "additionalProperties",
        "allOf",
        "anyOf",
        "default",
        "definitions",
        "dependencies",
        "description",
        "enum",
        "exclusiveMaximum",
        "exclusiveMinimum",
        "format",
        "id",
        "items",
        "maxItems",
        "maxLength",
        "maxProperties",
        "maximum",
        "minItems",
        "minLength",
        "minProperties",
        "minimum",
        "multipleOf",
        "not",
        "oneOf",
        "pattern",
        "patternProperties",
        "properties",
        "required",
        "title",
        "type",
        "uniqueItems",
    }
)
DRAFT6_KEYWORDS = (DRAFT4_KEYWORDS - {"id"}) | {
    "$id",
    "const",
    "contains",
    "examples",
    "propertyNames",
}
DRAFT7_KEYWORDS = DRAFT6_KEYWORDS | {
    "$comment",
    "contentEncoding",
    "contentMediaType",
    "else",
    "if",
    "readOnly",
    "then",
    "writeOnly",
}
DRAFT201909_KEYWORDS = (DRAFT7_KEYWORDS - {"definitions", "dependencies"}) | {
    "$anchor",
    "$defs",
    "$recursiveAnchor",
    "$recursiveRef",
    "$vocabulary",
    "contentSchema",
    "dependentRequired",
    "dependentSchemas",
    "deprecated",
    "maxContains",
    "minContains",
    "unevaluatedItems",
    "unevaluatedProperties",
}
DRAFT202012_KEYWORDS = (
    DRAFT201909_KEYWORDS - {"$recursiveAnchor", "$recursiveRef", "additionalItems"}
) | {"$dynamicAnchor", "$dynamicRef", "prefixItems"}


@dataclass(frozen=True)
class Draft:
    """One JSON Schema draft as Narad knows it.

    Attributes:
        name: Short name used in messages and config, e.g. ``"2020-12"``.
        uris: Every ``$schema`` value that selects this draft (with and without
            a trailing ``#``).
        meta_schema: The draft's meta-schema document; a registered schema must
            be valid against it.
        keywords: Every keyword the draft defines (core, applicator,
            validation, format and annotation vocabularies). Anything else in a
            schema of this draft is an annotation.
        id_keyword: ``"$id"``, or ``"id"`` for draft-04.
        ref_overrides_siblings: True for drafts up to 07, where a ``$ref``
            makes its sibling keywords ignored.
        id_fragment_anchors: True for drafts up to 07, where an ``$id`` (or
            ``id``) with a plain-name fragment (``"#foo"``) declares an anchor;
            later drafts have ``$anchor`` for that.
        boolean_exclusive_bounds: True for draft-04, where
            ``exclusiveMinimum``/``exclusiveMaximum`` are booleans that make
            ``minimum``/``maximum`` exclusive instead of numbers of their own.
        contains_evaluates: True for 2020-12, where the items ``contains``
            matches count as evaluated for ``unevaluatedItems``.
        fraction_integers: ``1.0`` and ``1e2`` are integers to the meta-schema
            check (draft-06 on, as python-jsonschema reads them). Validation
            always counts them as integers (the rulebook's exact numbers).
        meta_validator: Callable that yields a message for a meta-schema
            violation of a document, nothing for a valid one (the check
            registration runs;
            :class:`narad.schema.registration.metaschema.MetaSchema` builds
            one that is linear in the document).
        default: True for the draft used when ``$schema`` is absent.
    """

    name: str
    uris: tuple[str, ...]
    meta_schema: Mapping[str, Any]
    keywords: frozenset[str]
    id_keyword: str = "$id"
    ref_overrides_siblings: bool = False
    id_fragment_anchors: bool = False
    boolean_exclusive_bounds: bool = False
    contains_evaluates: bool = False
    fraction_integers: bool = True
    meta_validator: Any = field(default=None, compare=False)
    default: bool = False
