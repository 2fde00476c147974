"""Narad's JSON Schema engine, for the ``JSON`` schema type (public).

The built-in ``JSON`` type (``plugins/narad_jsonschema``) puts this engine
behind the schema-type hook, as any type plugin would, and so may a tool or
another type that reuses JSON Schema. One name per rulebook section:

- "Schema documents": :func:`register` checks a schema's JSON text against
  every registration rule and answers a :class:`RegisteredSchema` (the parsed
  document, the compact text to store, its draft, whether validating against
  it is costly); :func:`check_stored` re-checks what a stored version's
  references lead to, when the validator fails on a version stored before
  registration checked that; :data:`SCHEMA_DEPTH` is how deep a document may
  nest (read a stored one with :func:`narad.jsontext.loads` and it).
- "Validation on produce": :class:`Validator` compiles a document once;
  ``Validator(...).validate(payload)`` raises
  :class:`~narad.errors.InvalidPayload` with the rulebook's message.
- "Compatibility": :func:`no_change` (the same JSON value, or annotations
  alone changed: registers nothing) and :func:`check` (a proposed document
  against stored ones, in a mode's directions, into a
  :class:`~narad.schematypes.Report`). The keyword rules they run come from
  ``narad_compatibility_rules`` (:mod:`narad.compatibility`).

Covered by the compatibility promise (docs/plugins.md): the names in
``__all__`` and their documented arguments keep their meaning within a major
version; the modules they come from (``narad.schema.*``) are internal.
"""

from __future__ import annotations

from narad.schema.compatibility.engine import no_change
from narad.schema.compatibility.versions import check
from narad.schema.drafts import Draft
from narad.schema.limits import SCHEMA_DEPTH
from narad.schema.registration.documents import RegisteredSchema
from narad.schema.registration.documents import check_stored
from narad.schema.registration.documents import register
from narad.schema.validation.validator import Validator

__all__ = (
    "SCHEMA_DEPTH",
    "Draft",
    "RegisteredSchema",
    "Validator",
    "check",
    "check_stored",
    "no_change",
    "register",
)
