"""Parsing a Protobuf schema string: its three forms and the topic's message.

A topic's ``schema`` string is one of (told apart by their characters: base64
and a message name never hold whitespace other than line breaks, ``{``, ``}``,
``;`` or ``"``, and a ``.proto`` file with a message always does):

- ``.proto`` source text, one file, proto2, proto3 or editions, importing only
  ``google/protobuf/*.proto`` (compiled by :mod:`narad_protobuf.compiler`);
- standard base64 of a serialized ``FileDescriptorProto``, what Confluent's
  serializers register (its imports: the well-known types only);
- the event store's ``base64(FileDescriptorSet):Full.Message.Name``.

The topic's message: the one the event-store form names; else the one
``proto_message`` names; else the first top-level message of the file (of the
``.proto`` text or the ``FileDescriptorProto``). :attr:`ProtobufSchema.
message_source` says which. A ``proto_message`` that disagrees with the
event-store form's name is refused rather than silently losing.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass
from dataclasses import field
from enum import StrEnum
from enum import unique
from functools import cached_property
from typing import TYPE_CHECKING
from typing import Literal
from typing import TypeVar

from google.protobuf import descriptor_pb2
from google.protobuf.descriptor import Descriptor
from google.protobuf.descriptor_pool import DescriptorPool
from google.protobuf.message import DecodeError

from narad_protobuf.compiler import DEFAULT_LIMITS
from narad_protobuf.compiler import FILE_NAME
from narad_protobuf.compiler import Limits
from narad_protobuf.compiler import compile_proto
from narad_protobuf.descriptors import build_pool
from narad_protobuf.descriptors import canonical_set
from narad_protobuf.descriptors import user_files
from narad_protobuf.errors import ProtobufSchemaError

if TYPE_CHECKING:
    from narad_protobuf.binary import BinaryValidator
    from narad_protobuf.jsonpayload import JsonValidator

__all__ = (
    "MAX_SCHEMA_BYTES",
    "Encoding",
    "MessageSource",
    "ProtobufSchema",
    "SchemaForm",
    "parse_schema",
)

#: The rulebook's budget for one schema document, in UTF-8 bytes.
MAX_SCHEMA_BYTES = 256 * 1024

Encoding = Literal["binary", "json"]

# Base64 (standard alphabet, MIME line breaks allowed) with an optional
# ":Message.Name"; what is not .proto text (module docstring).
_NOT_PROTO_TEXT = re.compile(r"[^ \t\f\v{};\"]+")
_MESSAGE_NAME = re.compile(r"\.?[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*")


@unique
class SchemaForm(StrEnum):
    """Which of the three forms the client sent."""

    PROTO = "proto"
    """``.proto`` source text."""
    FILE_DESCRIPTOR = "file_descriptor"
    """base64 of a ``FileDescriptorProto`` (Confluent)."""
    DESCRIPTOR_SET = "descriptor_set"
    """``base64(FileDescriptorSet):Full.Message.Name`` (the event store)."""


@unique
class MessageSource(StrEnum):
    """What named the topic's message."""

    SCHEMA = "schema"
    """The event-store form's ``:Full.Message.Name``."""
    PROTO_MESSAGE = "proto_message"
    """The topic's ``proto_message`` field."""
    FIRST_MESSAGE = "first_message"
    """Nothing: the file's first top-level message."""


@dataclass(eq=False)
class ProtobufSchema:
    """A parsed, resolved Protobuf schema and the topic's message in it.

    Attributes:
        form: The form the client sent.
        message_name: Full name of the topic's message (``shop.Order``).
        message_source: What named it.
        files: The canonical form of the schema's own files (no well-known
            types), see :mod:`narad_protobuf.descriptors`.
        pool: A private descriptor pool with the files and the well-known
            types they import.
        declared: :attr:`files` with messages in the order declared (what
            is stored, and what Confluent's message indexes count).
        main: The main file's name where it declares no message (then
            :attr:`message_name` is ``""``: a file of enums, say, that
            other files import, registered where no payload is checked).
    """

    form: SchemaForm
    message_name: str
    message_source: MessageSource
    files: descriptor_pb2.FileDescriptorSet
    pool: DescriptorPool = field(repr=False)
    declared: descriptor_pb2.FileDescriptorSet | None = field(default=None, repr=False)
    main: str = ""

    @cached_property
    def canonical(self) -> bytes:
        """The canonical ``FileDescriptorSet``, deterministically serialized."""
        return self.files.SerializeToString(deterministic=True)

    @cached_property
    def identity(self) -> bytes:
        """What idempotent registration compares: the canonical set and the
        topic's message name. Two schemas are the same schema exactly when
        their identities are equal."""
        return self.canonical + b"\n" + self.message_name.encode()

    @cached_property
    def fingerprint(self) -> str:
        """SHA-256 of :attr:`identity`, hex: a short key for caches."""
        return hashlib.sha256(self.identity).hexdigest()

    def same_as(self, other: ProtobufSchema) -> bool:
        """Whether ``other`` is the same schema (registers nothing)."""
        return self.identity == other.identity

    @cached_property
    def compiled(self) -> str:
        """The canonical set with messages in their declared order
        (:attr:`declared`), in the event-store form
        (``base64(FileDescriptorSet):Full.Message.Name``): what to store
        beside the client's text, since :func:`parse_schema` loads it without
        running the compiler, and it parses back to the same schema with
        ``message_source`` :attr:`MessageSource.SCHEMA`. The declared order
        is kept because Confluent's framed messages name a message by its
        position in the file (its message indexes)."""
        files = self.declared if self.declared is not None else self.files
        stored = files.SerializeToString(deterministic=True)
        # No message: nothing after the ":" (the main file is the one no
        # other imports).
        return base64.b64encode(stored).decode() + ":" + self.message_name

    @property
    def descriptor(self) -> Descriptor:
        """The topic's message."""
        return self.pool.FindMessageTypeByName(self.message_name)

    @cached_property
    def binary_validator(self) -> BinaryValidator:
        """The precompiled checker of binary payloads (built on first use)."""
        from narad_protobuf.binary import BinaryValidator

        return BinaryValidator(self.descriptor)

    @cached_property
    def json_validator(self) -> JsonValidator:
        """The precompiled checker of JSON payloads (built on first use)."""
        from narad_protobuf.jsonpayload import JsonValidator

        return JsonValidator(self.descriptor, self.pool)

    def validate(self, payload: bytes, encoding: Encoding = "binary") -> None:
        """Check one produced payload against the topic's message.

        ``"binary"``: the bytes decode as the message, structurally (unknown
        fields, missing fields and empty bytes pass); ``"json"``: one JSON
        text in the Protobuf JSON mapping of the message.

        Raises:
            ProtobufPayloadError: naming where it failed.
        """
        if encoding == "binary":
            self.binary_validator.validate(payload)
        elif encoding == "json":
            self.json_validator.validate(payload)
        else:
            raise ValueError(f"unknown encoding {encoding!r}")


def parse_schema(
    schema: str,
    *,
    proto_message: str | None = None,
    limits: Limits = DEFAULT_LIMITS,
    dependencies: Sequence[descriptor_pb2.FileDescriptorProto] = (),
    message_optional: bool = False,
) -> ProtobufSchema:
    """Parse, compile and resolve a schema string in any of the three forms.

    Args:
        schema: The topic's ``schema`` string.
        proto_message: The topic's ``proto_message`` field, if any: the full
            name of the topic's message (a leading ``.`` is allowed).
        limits: Bounds of the ``.proto`` compiler's subprocess.
        dependencies: Files the schema may import besides the well-known
            types, named by their import paths (schema references); they
            are stored with it, as a ``FileDescriptorSet``'s own imports are.
        message_optional: A main file declaring no message is taken (with
            ``message_name`` ``""``), as is the stored form of one
            (``base64(FileDescriptorSet):`` with no name).

    Raises:
        ProtobufSchemaError: naming the problem (over the 256 KiB budget, bad
            base64, a descriptor that does not decode or build, a ``.proto``
            error with line and column, a message name not found, no message).
    """
    size = len(schema.encode("utf-8", "surrogatepass"))
    if size > MAX_SCHEMA_BYTES:
        raise ProtobufSchemaError(
            f"schema is {size} bytes, over the budget of {MAX_SCHEMA_BYTES} (256 KiB)"
        )
    text = schema.strip()
    if not text:
        raise ProtobufSchemaError("schema is empty")
    if proto_message is not None:
        proto_message = _message_name(proto_message, "proto_message")
    if _NOT_PROTO_TEXT.fullmatch(text):
        if ":" in text:
            blob, _, name = text.partition(":")
            if not name.strip() and message_optional and proto_message is None:
                return _no_message_set(blob, dependencies)
            named = _message_name(name, "the message name after ':'")
            if proto_message is not None and proto_message != named:
                raise ProtobufSchemaError(
                    f"proto_message {proto_message} differs from the message "
                    f"the schema names, {named}"
                )
            fds = _decode(blob, descriptor_pb2.FileDescriptorSet, "FileDescriptorSet")
            if not fds.file:
                raise ProtobufSchemaError("the FileDescriptorSet holds no file")
            return _resolve(
                SchemaForm.DESCRIPTOR_SET,
                _with_references(fds, dependencies),
                None,
                named,
                MessageSource.SCHEMA,
            )
        fdp = _decode(text, descriptor_pb2.FileDescriptorProto, "FileDescriptorProto")
        if not fdp.name:
            fdp.name = FILE_NAME
        return _resolve(
            SchemaForm.FILE_DESCRIPTOR,
            [fdp, *dependencies],
            fdp.name,
            proto_message,
            None,
            single_file=not dependencies,
            message_optional=message_optional,
        )
    deps = b""
    if dependencies:
        if any(d.name == FILE_NAME for d in dependencies):
            raise ProtobufSchemaError(
                f"a reference names {FILE_NAME}, the name the .proto text "
                "compiles as: give the referenced file another import path"
            )
        bundle = descriptor_pb2.FileDescriptorSet()
        bundle.file.extend(dependencies)
        deps = bundle.SerializeToString()
    compiled = descriptor_pb2.FileDescriptorSet.FromString(
        compile_proto(schema, limits, deps)
    )
    main = compiled.file[-1].name  # --include_imports puts dependencies first
    return _resolve(
        SchemaForm.PROTO,
        list(compiled.file),
        main,
        proto_message,
        None,
        message_optional=message_optional,
    )


def _no_message_set(
    blob: str, dependencies: Sequence[descriptor_pb2.FileDescriptorProto]
) -> ProtobufSchema:
    """The stored form of a schema whose main file declares no message:
    ``base64(FileDescriptorSet):``; the main file is the one no other file
    of the set imports."""
    fds = _decode(blob, descriptor_pb2.FileDescriptorSet, "FileDescriptorSet")
    own = [f for f in fds.file if not f.name.startswith("google/protobuf/")]
    imported = {d for f in own for d in f.dependency}
    roots = sorted(f.name for f in own if f.name not in imported)
    if not roots:
        raise ProtobufSchemaError("the FileDescriptorSet holds no file")
    return _resolve(
        SchemaForm.DESCRIPTOR_SET,
        _with_references(fds, dependencies),
        roots[-1],
        None,
        None,
        message_optional=True,
    )


def _with_references(
    fds: descriptor_pb2.FileDescriptorSet,
    dependencies: Sequence[descriptor_pb2.FileDescriptorProto],
) -> list[descriptor_pb2.FileDescriptorProto]:
    """A set's files, then the referenced files it does not hold itself."""
    given = {f.name for f in fds.file}
    return [*fds.file, *(d for d in dependencies if d.name not in given)]


def _message_name(name: str, what: str) -> str:
    name = name.strip()
    if not _MESSAGE_NAME.fullmatch(name):
        raise ProtobufSchemaError(f"{what} {name[:200]!r} is not a full message name")
    return name.removeprefix(".")


_Descriptors = TypeVar(
    "_Descriptors", descriptor_pb2.FileDescriptorSet, descriptor_pb2.FileDescriptorProto
)


def _decode(blob: str, kind: type[_Descriptors], what: str) -> _Descriptors:
    try:
        data = base64.b64decode(blob.replace("\n", "").replace("\r", ""), validate=True)
    except (binascii.Error, ValueError) as exc:
        raise ProtobufSchemaError(f"schema is not valid base64: {exc}") from None
    try:
        return kind.FromString(data)
    except DecodeError as exc:
        raise ProtobufSchemaError(
            f"the base64 does not decode as a {what}: {exc}"
        ) from None


def _resolve(
    form: SchemaForm,
    files: list[descriptor_pb2.FileDescriptorProto],
    main: str | None,
    named: str | None,
    source: MessageSource | None,
    *,
    single_file: bool = False,
    message_optional: bool = False,
) -> ProtobufSchema:
    pool = build_pool(files, single_file=single_file)
    own = sorted({f.name for f in files if not f.name.startswith("google/protobuf/")})
    if not own:
        raise ProtobufSchemaError("the descriptors hold only well-known types")
    resolved = user_files(pool, own)
    if named is None:
        first = next((f for f in resolved if f.name == main), None)
        if first is not None and not first.message_type and message_optional:
            declared = canonical_set(resolved, keep_message_order=True)
            # A lone file is stored under the canonical name.
            stored_main = declared.file[0].name if len(resolved) == 1 else first.name
            return ProtobufSchema(
                form,
                "",
                MessageSource.FIRST_MESSAGE,
                canonical_set(resolved),
                pool,
                declared=declared,
                main=stored_main,
            )
        if first is None or not first.message_type:
            raise ProtobufSchemaError("the schema declares no message")
        prefix = f"{first.package}." if first.package else ""
        name, source = prefix + first.message_type[0].name, MessageSource.FIRST_MESSAGE
    else:
        name = named
        if source is None:
            source = MessageSource.PROTO_MESSAGE
        _find(pool, name, resolved)
    declared = canonical_set(resolved, keep_message_order=True)
    return ProtobufSchema(
        form, name, source, canonical_set(resolved), pool, declared=declared
    )


def _find(
    pool: DescriptorPool, name: str, files: list[descriptor_pb2.FileDescriptorProto]
) -> None:
    try:
        found = pool.FindMessageTypeByName(name)
    except KeyError:
        found = None
    if found is None or found.file.name not in {f.name for f in files}:
        known = sorted(_message_names(files))
        shown = ", ".join(known[:20]) + (", ..." if len(known) > 20 else "")
        raise ProtobufSchemaError(
            f"message {name} is not in the descriptors (messages: {shown or 'none'})"
        )


def _message_names(files: list[descriptor_pb2.FileDescriptorProto]) -> list[str]:
    names: list[str] = []

    def walk(prefix: str, messages: list[descriptor_pb2.DescriptorProto]) -> None:
        for message in messages:
            if message.options.map_entry:
                continue
            full = prefix + message.name
            names.append(full)
            walk(full + ".", list(message.nested_type))

    for file in files:
        walk(f"{file.package}." if file.package else "", list(file.message_type))
    return names
