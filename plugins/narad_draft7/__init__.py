"""JSON Schema draft-07."""

from __future__ import annotations

from dataclasses import replace

import jsonschema_specifications

from narad import hookimpl
from narad.schema.drafts import Draft
from narad.schema.metaschema import MetaSchema

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


_DRAFT = Draft(
    name="07",
    uris=(URI, URI + "#"),
    meta_schema=jsonschema_specifications.REGISTRY.contents(URI),
    keywords=KEYWORDS,
    id_keyword="$id",
    ref_overrides_siblings=True,
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
