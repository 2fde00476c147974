"""Avro schemas for Narad: parsing, payload validation, compatibility.

The engine of topics of ``schema_type`` ``AVRO`` (issue 52), wired in through
the schema-type hook by :mod:`narad_avro.schematype` (the hook implementation
at the end of this module). This package is its API:

- :func:`parse` / :func:`parse_text` check a schema document and give an
  :class:`AvroSchema`: the stored (compact) form, Avro's Parsing Canonical
  Form, and ``identity`` for idempotent registration (``same_as``);
- :func:`compile_validator` builds, once per schema, the check of produced
  payloads: ``"json"`` (one JSON text, checked as queue-ti does; a member the
  schema does not name is refused, see :mod:`narad_avro.jsonvalues`) or
  ``"binary"`` (one raw Avro datum, no trailing bytes);
- :func:`check` runs a compatibility mode (``BACKWARD`` ... ``NONE``) by
  Avro's resolution rules and returns every :class:`Finding`, each a
  :class:`Violation` (``pointer`` into the new schema, ``rule``, ``message``)
  with ``against_version`` and direction; :func:`read_violations` is the
  single reader/writer comparison under it.

Errors are Narad's: :class:`narad.errors.InvalidSchema` (``schema:
/fields/2/default: expected int, got string``) and
:class:`narad.errors.InvalidPayload`, both 400.

Library: fastavro (1.13.1, compiled with Cython, binary wheels on PyPI,
maintained and released several times a year) rather than Apache Avro's
``avro`` package (1.12.2, pure Python). What the engine needs from a
library is a second, independent parser of schemas and a reference reader and
writer of datums: fastavro's ``parse_schema`` is that second opinion at
registration, its ``to_parsing_canonical_form`` and ``fingerprint`` check
ours in tests, and its ``schemaless_reader``/``writer`` are the oracle the
tests and ``bench/avro.py`` compare with. Neither library could be used on
the hot path or for the verdicts as is: neither names where in the document
a rule is broken, fastavro's reader trusts a datum's claimed block counts
(an array of a billion nulls loops a billion times) and ignores trailing
bytes, and ``avro``'s compatibility checker reports no pointers into the new
schema. So the walk, the validators and the resolution are this package's
own, and fastavro is the reference: being the fastest Python decoder, it is
the fair baseline for the per-message figures.
"""

from __future__ import annotations

from typing import Any

from narad import hookimpl
from narad_avro.binary import BinaryValidator
from narad_avro.compatibility import Direction
from narad_avro.compatibility import Finding
from narad_avro.compatibility import Mode
from narad_avro.compatibility import check
from narad_avro.compatibility import violations
from narad_avro.jsonvalues import JsonValidator
from narad_avro.parsing import AvroSchema
from narad_avro.parsing import parse
from narad_avro.parsing import parse_text
from narad_avro.payloads import ENCODINGS
from narad_avro.payloads import TYPE_NAME
from narad_avro.payloads import PayloadValidator
from narad_avro.payloads import compile_validator
from narad_avro.resolution import Violation
from narad_avro.resolution import read_violations

__all__ = (
    "ENCODINGS",
    "TYPE_NAME",
    "AvroSchema",
    "BinaryValidator",
    "Direction",
    "Finding",
    "JsonValidator",
    "Mode",
    "PayloadValidator",
    "Violation",
    "check",
    "compile_validator",
    "parse",
    "parse_text",
    "read_violations",
    "violations",
)


@hookimpl
def narad_schema_types() -> list[Any]:
    from narad_avro.schematype import AvroType

    return [AvroType()]
