"""Protobuf schemas for Narad topics: the engine of topics of ``schema_type``
``PROTOBUF`` (issue 53), wired in through the schema-type hook by
:mod:`narad_protobuf.schematype` (the hook implementation at the end of this
module).

The API::

    schema = parse_schema(text, proto_message=None)   # ProtobufSchema or
                                                      # ProtobufSchemaError
    schema.message_name, schema.message_source        # "shop.Order", FIRST_MESSAGE
    schema.same_as(other)                             # idempotent registration
    schema.compiled                                   # store this: loads with
                                                      # no compiler
    schema.validate(payload, "binary" | "json")       # or ProtobufPayloadError
    check(stored, proposed, directions=..., encoding=...)   # [Violation]
    check_history(proposed, [(version, stored), ...], mode) # (version, Violation)

- :mod:`narad_protobuf.schema`: the three forms of a schema string, the
  topic's message, the 256 KiB budget.
- :mod:`narad_protobuf.compiler`: protoc (``grpcio-tools``) in a bounded
  subprocess, and why.
- :mod:`narad_protobuf.descriptors`: private descriptor pools, and the
  canonical form idempotency compares.
- :mod:`narad_protobuf.binary` and :mod:`narad_protobuf.jsonpayload`: the two
  payload encodings.
- :mod:`narad_protobuf.compatibility`: the rules, the seven modes, and where
  Narad and Confluent differ.

Every refusal is a :class:`narad.errors.InvalidArgument` (400) whose message
names the problem.
"""

from __future__ import annotations

from typing import Any

from narad import hookimpl
from narad_protobuf.compatibility import MODES
from narad_protobuf.compatibility import Direction
from narad_protobuf.compatibility import Violation
from narad_protobuf.compatibility import check
from narad_protobuf.compatibility import check_history
from narad_protobuf.compiler import Limits
from narad_protobuf.errors import ProtobufPayloadError
from narad_protobuf.errors import ProtobufSchemaError
from narad_protobuf.schema import MAX_SCHEMA_BYTES
from narad_protobuf.schema import Encoding
from narad_protobuf.schema import MessageSource
from narad_protobuf.schema import ProtobufSchema
from narad_protobuf.schema import SchemaForm
from narad_protobuf.schema import parse_schema

__all__ = (
    "MAX_SCHEMA_BYTES",
    "MODES",
    "Direction",
    "Encoding",
    "Limits",
    "MessageSource",
    "ProtobufPayloadError",
    "ProtobufSchema",
    "ProtobufSchemaError",
    "SchemaForm",
    "Violation",
    "check",
    "check_history",
    "parse_schema",
)

#: The schema type's name, as Confluent spells it.
SCHEMA_TYPE = "PROTOBUF"


@hookimpl
def narad_schema_types() -> list[Any]:
    from narad_protobuf.schematype import ProtobufType

    return [ProtobufType()]
