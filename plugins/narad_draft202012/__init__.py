"""JSON Schema draft 2020-12, the default when ``$schema`` is absent."""

from __future__ import annotations

from dataclasses import replace

import jsonschema_specifications

from narad import hookimpl
from narad.schema.drafts import Draft
from narad.schema.metaschema import MetaSchema

URI = "https://json-schema.org/draft/2020-12/schema"

KEYWORDS = frozenset(
    {
        "$anchor",
        "$comment",
        "$defs",
        "$dynamicAnchor",
        "$dynamicRef",
        "$id",
        "$ref",
        "$schema",
        "$vocabulary",
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
        "prefixItems",
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
    name="2020-12",
    uris=(URI, URI + "#"),
    meta_schema=jsonschema_specifications.REGISTRY.contents(URI),
    keywords=KEYWORDS,
    id_keyword="$id",
    ref_overrides_siblings=False,
    default=True,
)
_META_SCHEMA = MetaSchema(
    _DRAFT,
    jsonschema_specifications.REGISTRY.contents,
    fraction_integers=True,
)


@hookimpl
def narad_json_schema_drafts() -> list[Draft]:
    return [replace(_DRAFT, meta_validator=_META_SCHEMA.errors)]
