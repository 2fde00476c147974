"""JSON Schema draft-06."""

from __future__ import annotations

from narad import hookimpl
from narad.schema.drafts import Draft
from narad.schema.metaschema import specification_draft

URI = "http://json-schema.org/draft-06/schema"

KEYWORDS = frozenset(
    {
        "$id",
        "$ref",
        "$schema",
        "additionalItems",
        "additionalProperties",
        "allOf",
        "anyOf",
        "const",
        "contains",
        "default",
        "definitions",
        "dependencies",
        "description",
        "enum",
        "examples",
        "exclusiveMaximum",
        "exclusiveMinimum",
        "format",
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
        "required",
        "title",
        "type",
        "uniqueItems",
    }
)


DRAFT = specification_draft(
    "06",
    URI,
    KEYWORDS,
    ref_overrides_siblings=True,
)


@hookimpl
def narad_json_schema_drafts() -> list[Draft]:
    return [DRAFT]
