"""JSON Schema draft 2019-09."""

from __future__ import annotations

from narad import hookimpl
from narad.drafts import DRAFT201909_KEYWORDS
from narad.drafts import Draft
from narad.drafts import specification_draft

URI = "https://json-schema.org/draft/2019-09/schema"
KEYWORDS = DRAFT201909_KEYWORDS

DRAFT = specification_draft(
    "2019-09",
    URI,
    KEYWORDS,
)


@hookimpl
def narad_json_schema_drafts() -> list[Draft]:
    return [DRAFT]
