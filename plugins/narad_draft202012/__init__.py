"""JSON Schema draft 2020-12, the default when ``$schema`` is absent."""

from __future__ import annotations

from narad import hookimpl
from narad.drafts import DRAFT202012_KEYWORDS
from narad.drafts import Draft
from narad.drafts import specification_draft

URI = "https://json-schema.org/draft/2020-12/schema"
KEYWORDS = DRAFT202012_KEYWORDS

DRAFT = specification_draft(
    "2020-12",
    URI,
    KEYWORDS,
    contains_evaluates=True,
    default=True,
)


@hookimpl
def narad_json_schema_drafts() -> list[Draft]:
    return [DRAFT]
