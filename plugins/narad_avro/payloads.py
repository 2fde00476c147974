"""What a topic of type AVRO takes: the type's name, its payload encodings,
and the payload check compiled once per schema for one of them."""

from __future__ import annotations

from typing import Any
from typing import Literal
from typing import Protocol

from narad_avro.binary import BinaryValidator
from narad_avro.jsonvalues import JsonValidator
from narad_avro.parsing import AvroSchema

#: The schema type's name, Confluent's spelling.
TYPE_NAME = "AVRO"
#: Payload encodings a topic of this type may take; the first is the default.
ENCODINGS = ("json", "binary")

Encoding = Literal["json", "binary"]


class PayloadValidator(Protocol):
    def validate(self, payload: bytes) -> Any:
        """Accept ``payload`` or raise :class:`narad.errors.InvalidPayload`."""


def compile_validator(schema: AvroSchema, encoding: Encoding) -> PayloadValidator:
    """The payload check of ``schema`` in ``encoding``, built once.

    Raises:
        ValueError: an encoding that is not one of :data:`ENCODINGS`.
    """
    if encoding == "json":
        return JsonValidator(schema)
    if encoding == "binary":
        return BinaryValidator(schema)
    raise ValueError(f"encoding must be one of {', '.join(ENCODINGS)}")
