"""JSON Schema draft-04."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import jsonschema
import jsonschema_specifications
from jsonschema.exceptions import best_match
from jsonschema.exceptions import relevance

from narad import hookimpl
from narad.schema.drafts import Draft

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


_META_VALIDATOR = jsonschema.Draft4Validator(
    jsonschema_specifications.REGISTRY.contents(URI)
)


def meta_errors(document: Any) -> Iterator[str]:
    """Yield one short message per meta-schema violation, most relevant first.

    Messages name where the document fails and the meta-schema keyword it
    fails, never the document's own values (they could repeat a reference).
    """
    for error in sorted(_META_VALIDATOR.iter_errors(document), key=relevance):
        leaf = best_match([error])
        where = "".join(
            "/" + str(part).replace("~", "~0").replace("/", "~1")
            for part in leaf.absolute_path
        )
        rule = json.dumps(leaf.validator_value)
        rule = rule if len(rule) <= 40 else "..."
        yield f"at {where!r}: fails the meta-schema ({leaf.validator} {rule})"


@hookimpl
def narad_json_schema_drafts() -> list[Draft]:
    return [
        Draft(
            name="04",
            uris=(URI, URI + "#"),
            meta_schema=_META_VALIDATOR.schema,
            keywords=KEYWORDS,
            id_keyword="id",
            ref_overrides_siblings=True,
            meta_validator=meta_errors,
            default=False,
        )
    ]
