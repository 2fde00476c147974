"""JSON Schema draft-04."""

from __future__ import annotations

from dataclasses import replace

import jsonschema_specifications

from narad import hookimpl
from narad.schema.drafts import Draft
from narad.schema.metaschema import MetaSchema

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


_DRAFT = Draft(
    name="04",
    uris=(URI, URI + "#"),
    meta_schema=jsonschema_specifications.REGISTRY.contents(URI),
    keywords=KEYWORDS,
    id_keyword="id",
    ref_overrides_siblings=True,
    default=False,
)
# As python-jsonschema reads draft-04: 1.0 and 1e2 are numbers, not integers.
_META_SCHEMA = MetaSchema(
    _DRAFT,
    jsonschema_specifications.REGISTRY.contents,
    fraction_integers=False,
)


@hookimpl
def narad_json_schema_drafts() -> list[Draft]:
    return [replace(_DRAFT, meta_validator=_META_SCHEMA.errors)]
