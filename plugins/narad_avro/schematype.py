"""The ``AVRO`` schema type: this package behind Narad's schema-type hook.

What each question of :class:`narad.schematypes.SchemaType` gets:

- parse: :func:`~narad_avro.parsing.parse_text` (names, references, recursive
  records, logical types, defaults valid for their field); the history stores
  the compact text as sent, and idempotency compares
  :attr:`~narad_avro.parsing.AvroSchema.identity` (the Parsing Canonical Form
  with defaults, aliases, logical types and docs): the same identity
  registers nothing, and a change of ``doc`` alone is a version, compatible
  in every mode since resolution ignores docs;
- references (Confluent's): each names a version defining named types the
  schema may use by full name; their types are parsed first, dependencies
  first (:func:`~narad_avro.parsing.parse_references`), and the schema's
  tree, canonical form and identity hold them where it uses them (inlined,
  as Avro's own parser gives them), so payload checks and compatibility need
  nothing more;
- compile: :func:`~narad_avro.compile_validator` for the topic's encoding
  (``json``, the default, or ``binary``);
- check: Avro's resolution rules per direction
  (:func:`~narad_avro.compatibility.violations`), every violation at a
  pointer into the new schema, in the one shape every type reports.
"""

from __future__ import annotations

from collections.abc import Iterable
from collections.abc import Iterator

from narad.errors import InvalidSchema
from narad.schematypes import Compiled
from narad.schematypes import Direction
from narad.schematypes import Finding
from narad.schematypes import Mode
from narad.schematypes import ParsedSchema
from narad.schematypes import Report
from narad.schematypes import SchemaOptions
from narad.schematypes import SchemaType
from narad.schematypes import UnusableVersion
from narad.schematypes import Violation
from narad.schematypes import check_versions
from narad.schematypes import walk_references
from narad_avro.compatibility import violations
from narad_avro.parsing import AvroSchema
from narad_avro.parsing import Known
from narad_avro.parsing import parse_references
from narad_avro.parsing import parse_text
from narad_avro.payloads import ENCODINGS
from narad_avro.payloads import TYPE_NAME
from narad_avro.payloads import compile_validator

__all__ = ("AvroType",)

# What one compiled validator keeps per stored byte of its schema, roughly
# (closures per type node): only the validator cache's accounting reads it.
_BYTES_PER_SCHEMA_BYTE = 40


class AvroType(SchemaType):
    name = TYPE_NAME
    encodings = ENCODINGS

    takes_references = True

    def parse(self, raw: bytes, options: SchemaOptions) -> ParsedSchema:
        return _parsed(parse_text(raw, _known(options)))

    def load(self, stored: bytes, options: SchemaOptions) -> ParsedSchema:
        try:
            return _parsed(parse_text(stored, _known(options)))
        except InvalidSchema as exc:
            # Stored before a rule of today's parser: register a new version.
            raise UnusableVersion(exc.detail.removeprefix("schema: ")) from None

    def compile(
        self, schema: ParsedSchema, options: SchemaOptions, uri: str
    ) -> Compiled:
        validator = compile_validator(schema.value, options.encoding)  # type: ignore[arg-type]
        size = len(schema.stored) * _BYTES_PER_SCHEMA_BYTE
        return Compiled(validator.validate, size)

    def check(
        self,
        new: ParsedSchema,
        against: Iterable[tuple[int, ParsedSchema]],
        mode: Mode,
        options: SchemaOptions,
        *,
        first: bool,
    ) -> Report:
        return check_versions(
            against,
            mode,
            lambda stored, version: _findings(new.value, stored.value, version, mode),
            first=first,
        )


def _known(options: SchemaOptions) -> Known | None:
    """The named types of the schema's references (None: it has none)."""
    if not options.references:
        return None
    ordered = walk_references(options.references)
    return parse_references([(r.name, r.document) for r in ordered])


def _parsed(schema: AvroSchema) -> ParsedSchema:
    return ParsedSchema(schema.stored, schema.identity.encode(), False, schema)


def _findings(
    new: AvroSchema, old: AvroSchema, version: int, mode: Mode
) -> Iterator[Finding]:
    for direction in mode.directions:
        for found in violations(new, old, Direction(direction)):
            violation = Violation(found.rule, found.message, found.rule, found.pointer)
            # Pointers point into the new schema both ways; the message
            # names old and new itself.
            yield Finding(violation, version, direction, swapped=False)
