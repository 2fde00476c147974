"""JSON Schema drafts, for draft plugins (public).

A draft plugin answers ``narad_json_schema_drafts`` (:mod:`narad.hookspecs`)
with :class:`Draft` records. :func:`specification_draft` builds one for a
dialect whose meta-schema ``jsonschema_specifications`` ships, with its
compiled meta-schema check; the keyword sets of the built-in drafts
(``DRAFT4_KEYWORDS`` ... ``DRAFT202012_KEYWORDS``) are each written as what
changed from the draft before, and a draft of your own may start from one::

    from narad import hookimpl
    from narad.drafts import DRAFT7_KEYWORDS, Draft, specification_draft

    DRAFT = specification_draft(
        "07", "http://json-schema.org/draft-07/schema", DRAFT7_KEYWORDS,
        ref_overrides_siblings=True, id_fragment_anchors=True,
    )

    @hookimpl
    def narad_json_schema_drafts() -> list[Draft]:
        return [DRAFT]

Covered by the compatibility promise (docs/plugins.md): the names in
``__all__`` keep their meaning within a major version; new :class:`Draft`
flags may be added, with defaults that keep a plugin's draft as it was.
"""

from __future__ import annotations

from narad.schema.drafts import DRAFT4_KEYWORDS
from narad.schema.drafts import DRAFT6_KEYWORDS
from narad.schema.drafts import DRAFT7_KEYWORDS
from narad.schema.drafts import DRAFT201909_KEYWORDS
from narad.schema.drafts import DRAFT202012_KEYWORDS
from narad.schema.drafts import Draft
from narad.schema.registration.metaschema import specification_draft

__all__ = (
    "DRAFT4_KEYWORDS",
    "DRAFT6_KEYWORDS",
    "DRAFT7_KEYWORDS",
    "DRAFT201909_KEYWORDS",
    "DRAFT202012_KEYWORDS",
    "Draft",
    "specification_draft",
)
