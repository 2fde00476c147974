"""JSON Schema draft 2019-09."""

from __future__ import annotations

from narad import hookimpl
from narad.schema.drafts import Draft
from narad.schema.metaschema import specification_draft

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


DRAFT = specification_draft(
    "2019-09",
    URI,
    KEYWORDS,
)


@hookimpl
def narad_json_schema_drafts() -> list[Draft]:
    return [DRAFT]
