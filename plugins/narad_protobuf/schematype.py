"""The ``PROTOBUF`` schema type: this package behind Narad's schema-type hook.

- parse: the ``schema`` member is a JSON string in any of the three forms
  (:func:`~narad_protobuf.schema.parse_schema`); the history stores the
  :attr:`~narad_protobuf.schema.ProtobufSchema.compiled` form as a JSON
  string (``base64(FileDescriptorSet):Full.Message.Name``), so a worker
  loads a version without running protoc and ``GET .../schemas/{v}`` serves
  a string a client can register again. Idempotency compares
  :attr:`~narad_protobuf.schema.ProtobufSchema.identity`: the canonical
  descriptor set (comments, whitespace, declaration order of the source
  aside) and the topic's message name.
- the topic's message: the event-store form names it; else ``proto_message``
  (a PATCH naming none keeps the topic's, unless the schema names its own);
  else the file's first top-level message. The record shows it.
- compile: :meth:`~narad_protobuf.schema.ProtobufSchema.validate` in the
  topic's encoding (``binary`` by default, or ``json``).
- check: :func:`~narad_protobuf.compatibility.check` per direction, each
  violation once, in the one shape every type reports.
- registry: Confluent's ``schema`` string is ``.proto`` text rendered from
  the stored descriptors (:mod:`~narad_protobuf.render`), or with
  ``format=serialized`` base64 of the main file's ``FileDescriptorProto``;
  a framed message is Confluent's message indexes then a binary message
  (:mod:`~narad_protobuf.framing`).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterable
from collections.abc import Iterator

from narad import jsontext
from narad.errors import InvalidSchema
from narad.schematypes import Compiled
from narad.schematypes import Finding
from narad.schematypes import Mode
from narad.schematypes import ParsedSchema
from narad.schematypes import Report
from narad.schematypes import SchemaOptions
from narad.schematypes import SchemaType
from narad.schematypes import UnusableVersion
from narad.schematypes import Violation
from narad.schematypes import check_versions
from narad_protobuf.compatibility import Direction
from narad_protobuf.compatibility import check
from narad_protobuf.errors import ProtobufSchemaError
from narad_protobuf.framing import FramedValidator
from narad_protobuf.framing import main_file
from narad_protobuf.render import render_file
from narad_protobuf.schema import ProtobufSchema
from narad_protobuf.schema import parse_schema

__all__ = ("ProtobufType",)

_NOT_A_STRING = (
    "schema: a PROTOBUF schema is a JSON string: .proto source text, base64 of "
    "a FileDescriptorProto, or base64(FileDescriptorSet):Full.Message.Name"
)
# What a compiled message checker keeps per stored byte, roughly: only the
# validator cache's accounting reads it.
_BYTES_PER_SCHEMA_BYTE = 20


class ProtobufType(SchemaType):
    name = "PROTOBUF"
    encodings = ("binary", "json")
    # protoc runs in a subprocess: gevent waits for it on the loop's thread.
    offload_parse = False

    def parse(self, raw: bytes, options: SchemaOptions) -> ParsedSchema:
        try:
            text = jsontext.loads(raw, max_depth=1)
        except jsontext.JSONTextError as exc:
            raise InvalidSchema(f"schema: {exc}") from None
        if not isinstance(text, str):
            raise InvalidSchema(_NOT_A_STRING)
        wanted = options.proto_message or None
        try:
            schema = parse_schema(text, proto_message=wanted)
        except ProtobufSchemaError:
            if not options.proto_message_kept:
                raise
            # The topic's kept message is no order of the client's: a schema
            # that names its own (the event-store form) wins.
            schema = parse_schema(text)
            if schema.message_source.value != "schema":
                raise
        return _parsed(schema)

    def load(self, stored: bytes, options: SchemaOptions) -> ParsedSchema:
        try:
            return _parsed(parse_schema(jsontext.loads(stored, max_depth=1)))
        except ProtobufSchemaError as exc:
            raise UnusableVersion(exc.detail) from None

    def compile(
        self, schema: ParsedSchema, options: SchemaOptions, uri: str
    ) -> Compiled:
        parsed: ProtobufSchema = schema.value
        encoding = options.encoding
        # Built now, once per version, not on the first produce.
        if encoding == "json":
            validator = parsed.json_validator
        else:
            validator = parsed.binary_validator
        size = len(schema.stored) * _BYTES_PER_SCHEMA_BYTE
        return Compiled(validator.validate, size)

    def compile_framed(
        self, schema: ParsedSchema, options: SchemaOptions, uri: str
    ) -> Compiled:
        # Confluent's message indexes, then a binary message, whatever the
        # topic's encoding (narad_protobuf.framing).
        validator = FramedValidator(schema.value)
        size = len(schema.stored) * _BYTES_PER_SCHEMA_BYTE
        return Compiled(validator.validate, size)

    def registry_schema(self, stored: bytes, fmt: str = "") -> str:
        # .proto text rendered from the stored descriptors; Confluent's
        # deserializers ask for format=serialized: base64 of the main file.
        try:
            schema = parse_schema(jsontext.loads(stored, max_depth=1))
        except ProtobufSchemaError as exc:
            raise UnusableVersion(exc.detail) from None
        file = main_file(schema)
        if fmt == "serialized":
            return base64.b64encode(file.SerializeToString(deterministic=True)).decode()
        return render_file(file)

    def registry_document(self, schema: str) -> bytes:
        # A PROTOBUF document is a JSON string (.proto text or base64).
        return json.dumps(schema).encode()

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
            lambda stored, version: _findings(
                new.value, stored.value, version, mode, options
            ),
            first=first,
        )


def _parsed(schema: ProtobufSchema) -> ParsedSchema:
    # The compiled form is base64 and a message name: ASCII, nothing to escape.
    stored = json.dumps(schema.compiled).encode()
    return ParsedSchema(stored, schema.identity, False, schema, schema.message_name)


def _findings(
    new: ProtobufSchema,
    old: ProtobufSchema,
    version: int,
    mode: Mode,
    options: SchemaOptions,
) -> Iterator[Finding]:
    seen: set[object] = set()
    encoding = "json" if options.encoding == "json" else "binary"
    for direction in mode.directions:
        way = Direction(direction.value)
        for found in check(old, new, directions=(way,), encoding=encoding):
            if found in seen:  # the change rules run in each direction
                continue
            seen.add(found)
            violation = Violation(found.rule, found.message, found.rule, found.pointer)
            yield Finding(violation, version, direction, swapped=False)
