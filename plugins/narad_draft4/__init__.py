"""JSON Schema draft-04."""

from __future__ import annotations

from narad import hookimpl
from narad.schema.drafts import Draft
from narad.schema.metaschema import specification_draft

URI = "http://json-schema.org/draft-04/schema"

KEYWORDS = frozenset(
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


DRAFT = specification_draft(
    "04",
    URI,
    KEYWORDS,
    id_keyword="id",
    ref_overrides_siblings=True,
    # As python-jsonschema reads draft-04: 1.0 and 1e2 are numbers, not integers.
    fraction_integers=False,
)


@hookimpl
def narad_json_schema_drafts() -> list[Draft]:
    return [DRAFT]
