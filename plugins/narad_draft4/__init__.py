"""JSON Schema draft-04."""

from __future__ import annotations

from narad import hookimpl
from narad.drafts import DRAFT4_KEYWORDS
from narad.drafts import Draft
from narad.drafts import specification_draft

URI = "http://json-schema.org/draft-04/schema"
KEYWORDS = DRAFT4_KEYWORDS

DRAFT = specification_draft(
    "04",
    URI,
    KEYWORDS,
    id_keyword="id",
    ref_overrides_siblings=True,
    id_fragment_anchors=True,
    boolean_exclusive_bounds=True,
    # As python-jsonschema reads draft-04's meta-schema: 1.0 and 1e2 are numbers,
    # not integers there (validation counts them as integers on every draft).
    fraction_integers=False,
)


@hookimpl
def narad_json_schema_drafts() -> list[Draft]:
    return [DRAFT]
