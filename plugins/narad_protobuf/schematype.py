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
- references (Confluent's): each names a version whose file the schema
  imports, by the import path (the reference's name; well-known
  ``google/protobuf/*.proto`` imports need none, they come from the
  runtime). The referenced versions' main files, renamed to those paths,
  are the schema's dependencies (:func:`_dependencies`, their own
  references' files too), and are stored with it in its
  ``FileDescriptorSet``: a stored version loads, compiles and is checked
  with no reference resolved again.
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
from functools import lru_cache

from google.protobuf import descriptor_pb2

from narad import jsontext
from narad.errors import InvalidSchema
from narad.schematypes import Compiled
from narad.schematypes import Finding
from narad.schematypes import Mode
from narad.schematypes import ParsedSchema
from narad.schematypes import Reference
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
    takes_references = True

    def parse(self, raw: bytes, options: SchemaOptions) -> ParsedSchema:
        try:
            text = jsontext.loads(raw, max_depth=1)
        except jsontext.JSONTextError as exc:
            raise InvalidSchema(f"schema: {exc}") from None
        if not isinstance(text, str):
            raise InvalidSchema(_NOT_A_STRING)
        wanted = options.proto_message or None
        deps = _dependencies(options.references)
        # A registry subject's file may declare no message (enums other
        # files import); a topic's is what its payloads are checked against.
        optional = not options.payloads
        try:
            schema = parse_schema(
                text, proto_message=wanted, dependencies=deps, message_optional=optional
            )
        except ProtobufSchemaError:
            if not options.proto_message_kept:
                raise
            # The topic's kept message is no order of the client's: a schema
            # that names its own (the event-store form) wins.
            schema = parse_schema(text, dependencies=deps, message_optional=optional)
            if schema.message_source.value != "schema":
                raise
        return _parsed(schema)

    def load(self, stored: bytes, options: SchemaOptions) -> ParsedSchema:
        # A stored set holds its references' files already.
        try:
            return _parsed(_stored(stored))
        except ProtobufSchemaError as exc:
            raise UnusableVersion(exc.detail) from None

    def compile(
        self, schema: ParsedSchema, options: SchemaOptions, uri: str
    ) -> Compiled:
        parsed: ProtobufSchema = _with_message(schema.value)
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
        validator = FramedValidator(_with_message(schema.value))
        size = len(schema.stored) * _BYTES_PER_SCHEMA_BYTE
        return Compiled(validator.validate, size)

    def registry_schema(self, stored: bytes, fmt: str = "") -> str:
        # .proto text rendered from the stored descriptors; Confluent's
        # deserializers ask for format=serialized: base64 of the main file.
        try:
            schema = _stored(stored)
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


def _dependencies(
    references: tuple[Reference, ...],
) -> list[descriptor_pb2.FileDescriptorProto]:
    """The files a schema's references give it to import: each referenced
    version's main file under the reference's name (its import path), and
    its own references' files, each path once (the first reference naming
    it wins; two files under one path would not build anyway).

    Raises:
        ProtobufSchemaError: a referenced version does not load.
    """
    files: dict[str, descriptor_pb2.FileDescriptorProto] = {}
    stack = list(reversed(references))
    while stack:
        reference = stack.pop()
        if reference.name in files:
            continue
        file = descriptor_pb2.FileDescriptorProto.FromString(
            _main_file(reference.document)
        )
        file.name = reference.name
        files[reference.name] = file
        stack.extend(reversed(reference.references))
    return list(files.values())


@lru_cache(maxsize=64)
def _main_file(document: bytes) -> bytes:
    """The serialized main file (the one declaring its message, messages in
    the order declared) of a stored version's document; versions never
    change, so a worker reads each once."""
    try:
        schema = _stored(document)
    except ProtobufSchemaError as exc:
        raise ProtobufSchemaError(
            f"a referenced schema does not load: {exc.detail}"
        ) from None
    return main_file(schema).SerializeToString(deterministic=True)


def _stored(document: bytes) -> ProtobufSchema:
    """A stored version's schema (one declaring no message too: it passed
    registration where that is taken)."""
    return parse_schema(jsontext.loads(document, max_depth=1), message_optional=True)


def _with_message(schema: ProtobufSchema) -> ProtobufSchema:
    """``schema``, which payloads are checked against: it declares a message.

    Raises:
        UnusableVersion: it declares none (a registry subject's file that
            other files import is never a topic's version).
    """
    if not schema.message_name:
        raise UnusableVersion(
            "it declares no message, so no payload can be checked against it"
        )
    return schema


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
