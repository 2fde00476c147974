"""JSON Schema draft-07."""

from __future__ import annotations

from narad import hookimpl
from narad.drafts import DRAFT7_KEYWORDS
from narad.drafts import Draft
from narad.drafts import specification_draft

URI = "http://json-schema.org/draft-07/schema"
KEYWORDS = DRAFT7_KEYWORDS

DRAFT = specification_draft(
    "07",
    URI,
    KEYWORDS,
    ref_overrides_siblings=True,
    id_fragment_anchors=True,
)


@hookimpl
def narad_json_schema_drafts() -> list[Draft]:
    return [DRAFT]
