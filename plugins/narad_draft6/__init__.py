"""JSON Schema draft-06."""

from __future__ import annotations

import json
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import jsonschema
import jsonschema_specifications
from jsonschema.exceptions import best_match
from jsonschema.exceptions import relevance

from narad import hookimpl
from narad.schema.drafts import Draft

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


def _integral(value: Any) -> Any:
    # From draft-06 on, 1.0 and 1e2 are integers; jsontext parses them as
    # Decimal, which jsonschema's type checker does not count as one.
    if isinstance(value, Decimal) and value == value.to_integral_value():
        return int(value)
    if isinstance(value, dict):
        return {key: _integral(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_integral(item) for item in value]
    return value


_META_VALIDATOR = jsonschema.Draft6Validator(
    jsonschema_specifications.REGISTRY.contents(URI)
)


def meta_errors(document: Any) -> Iterator[str]:
    """Yield one short message per meta-schema violation, most relevant first.

    Messages name where the document fails and the meta-schema keyword it
    fails, never the document's own values (they could repeat a reference).
    """
    for error in sorted(
        _META_VALIDATOR.iter_errors(_integral(document)), key=relevance
    ):
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
            name="06",
            uris=(URI, URI + "#"),
            meta_schema=_META_VALIDATOR.schema,
            keywords=KEYWORDS,
            id_keyword="$id",
            ref_overrides_siblings=True,
            meta_validator=meta_errors,
            default=False,
        )
    ]
