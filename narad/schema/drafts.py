"""The record a draft plugin contributes through ``narad_json_schema_drafts``."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from dataclasses import field
from typing import Any


@dataclass(frozen=True)
class Draft:
    """One JSON Schema draft as Narad knows it.

    Attributes:
        name: Short name used in messages and config, e.g. ``"2020-12"``.
        uris: Every ``$schema`` value that selects this draft (with and without
            a trailing ``#``).
        meta_schema: The draft's meta-schema document; a registered schema must
            be valid against it.
        keywords: Every keyword the draft defines (core, applicator,
            validation, format and annotation vocabularies). Anything else in a
            schema of this draft is an annotation.
        id_keyword: ``"$id"``, or ``"id"`` for draft-04.
        ref_overrides_siblings: True for drafts up to 07, where a ``$ref``
            makes its sibling keywords ignored.
        meta_validator: Callable that yields a message for a meta-schema
            violation of a document, nothing for a valid one (the check
            registration runs; :class:`narad.schema.metaschema.MetaSchema`
            builds one that is linear in the document).
        default: True for the draft used when ``$schema`` is absent.
    """

    name: str
    uris: tuple[str, ...]
    meta_schema: Mapping[str, Any]
    keywords: frozenset[str]
    id_keyword: str = "$id"
    ref_overrides_siblings: bool = False
    meta_validator: Any = field(default=None, compare=False)
    default: bool = False
