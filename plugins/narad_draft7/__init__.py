"""JSON Schema draft-07."""

from __future__ import annotations

from narad import hookimpl
from narad.schema.drafts import Draft
from narad.schema.metaschema import specification_draft

URI = "http://json-schema.org/draft-07/schema"

KEYWORDS = frozenset(
    {
        "$comment",
        "$id",
        "$ref",
        "$schema",
        "additionalItems",
        "additionalProperties",
        "allOf",
        "anyOf",
        "const",
        "contains",
        "contentEncoding",
        "contentMediaType",
        "default",
        "definitions",
        "dependencies",
        "description",
        "else",
        "enum",
        "examples",
        "exclusiveMaximum",
        "exclusiveMinimum",
        "format",
        "if",
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
        "propertyNames",
        "readOnly",
        "required",
        "then",
        "title",
        "type",
        "uniqueItems",
        "writeOnly",
    }
)


DRAFT = specification_draft(
    "07",
    URI,
    KEYWORDS,
    ref_overrides_siblings=True,
)


@hookimpl
def narad_json_schema_drafts() -> list[Draft]:
    return [DRAFT]
