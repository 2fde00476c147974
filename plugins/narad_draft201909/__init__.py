"""JSON Schema draft 2019-09."""

from __future__ import annotations

from dataclasses import replace

import jsonschema_specifications

from narad import hookimpl
from narad.schema.drafts import Draft
from narad.schema.metaschema import MetaSchema

URI = "https://json-schema.org/draft/2019-09/schema"

KEYWORDS = frozenset(
    {
        "$anchor",
        "$comment",
        "$defs",
        "$id",
        "$recursiveAnchor",
        "$recursiveRef",
        "$ref",
        "$schema",
        "$vocabulary",
        "additionalItems",
        "additionalProperties",
        "allOf",
        "anyOf",
        "const",
        "contains",
        "contentEncoding",
        "contentMediaType",
        "contentSchema",
        "default",
        "dependentRequired",
        "dependentSchemas",
        "deprecated",
        "description",
        "else",
        "enum",
        "examples",
        "exclusiveMaximum",
        "exclusiveMinimum",
        "format",
        "if",
        "items",
        "maxContains",
        "maxItems",
        "maxLength",
        "maxProperties",
        "maximum",
        "minContains",
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
        "propertyNames",
        "readOnly",
        "required",
        "then",
        "title",
        "type",
        "unevaluatedItems",
        "unevaluatedProperties",
        "uniqueItems",
        "writeOnly",
    }
)


_DRAFT = Draft(
    name="2019-09",
    uris=(URI, URI + "#"),
    meta_schema=jsonschema_specifications.REGISTRY.contents(URI),
    keywords=KEYWORDS,
    id_keyword="$id",
    ref_overrides_siblings=False,
    default=False,
)
_META_SCHEMA = MetaSchema(
    _DRAFT,
    jsonschema_specifications.REGISTRY.contents,
    fraction_integers=True,
)


@hookimpl
def narad_json_schema_drafts() -> list[Draft]:
    return [replace(_DRAFT, meta_validator=_META_SCHEMA.errors)]
