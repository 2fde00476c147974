"""Descriptor pools built from what a client sent, and their canonical form.

Every schema becomes a private :class:`~google.protobuf.descriptor_pool.
DescriptorPool` (never the process's default pool, so two topics may declare
the same names differently) holding the client's files and the well-known
types they import. The well-known types always come from the ``protobuf``
runtime, even when a ``FileDescriptorSet`` carries its own copies: their JSON
mapping is special-cased by full name, so a look-alike would be trusted as the
real one.

What "the same schema" means (:func:`canonical_set`): the client's files as
the pool resolved them (type references fully qualified, whatever spelling
the source used: ``Status``, ``.foo.Msg.Status``), serialized with
deterministic serialization, after:

- no source info (comments, spans, whitespace);
- declaration order dropped: files by name, dependencies by name (public and
  weak indices follow), messages, enums, services and methods by name,
  fields by number, enum values by number then name, extensions by extendee
  then number, extension ranges by start, reserved ranges merged and sorted,
  reserved names sorted and deduplicated, oneofs by name (synthetic proto3
  ``optional`` oneofs after the real ones, as protoc requires);
- spelling dropped: ``json_name`` when it is the default one protoc derives
  from the field name, ``syntax = "proto2"`` (the default) as absent;
- a lone file's name as :data:`~narad_protobuf.compiler.FILE_NAME`: the name
  is where the client kept the file, not part of the contract, so a ``.proto``
  text and Confluent's base64 ``FileDescriptorProto`` of it are the same
  schema. In a set of several files the names are what imports refer to and
  are kept.

Options (``java_package``, custom options, ``deprecated``, a proto2
``default``) are kept as declared: a change to one is a new version (never an
incompatible one). The topic's message is part of the identity too
(:class:`narad_protobuf.schema.ProtobufSchema`), since with declaration order
dropped "the first message" is not.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from collections.abc import Iterable
from collections.abc import Sequence
from typing import Any

from google.protobuf import descriptor_pb2
from google.protobuf import descriptor_pool

from narad_protobuf.compiler import FILE_NAME
from narad_protobuf.errors import ProtobufSchemaError

__all__ = (
    "WELL_KNOWN_PACKAGE",
    "build_pool",
    "canonical_set",
    "is_well_known",
    "user_files",
)

WELL_KNOWN_PACKAGE = "google.protobuf"
_WELL_KNOWN_PREFIX = "google/protobuf/"

# The runtime's well-known types, as serialized FileDescriptorProtos by name.
_WELL_KNOWN_MODULES = (
    "any",
    "api",
    "descriptor",
    "duration",
    "empty",
    "field_mask",
    "source_context",
    "struct",
    "timestamp",
    "type",
    "wrappers",
)
_WELL_KNOWN: dict[str, bytes] = {}
for _name in _WELL_KNOWN_MODULES:
    _module = importlib.import_module(f"google.protobuf.{_name}_pb2")
    _WELL_KNOWN[_module.DESCRIPTOR.name] = _module.DESCRIPTOR.serialized_pb


def is_well_known(file_name: str) -> bool:
    """Whether ``file_name`` is one of ``google/protobuf/*.proto``."""
    return file_name.startswith(_WELL_KNOWN_PREFIX)


def build_pool(
    files: Sequence[descriptor_pb2.FileDescriptorProto],
    *,
    single_file: bool = False,
) -> descriptor_pool.DescriptorPool:
    """A private pool holding ``files`` and the well-known types they import.

    Files are added dependencies first, whatever their order in ``files``.
    ``single_file``: the client sent one ``FileDescriptorProto``, so an import
    error says how to send its imports along.

    Raises:
        ProtobufSchemaError: two files share a name, a file imports one that
            is neither among ``files`` nor a well-known type, imports form a
            cycle, a file declares package ``google.protobuf``, or the pool
            refuses a file (protobuf's own words: an unknown type, a
            duplicate name or number, ...).
    """
    given: dict[str, descriptor_pb2.FileDescriptorProto] = {}
    for file in files:
        if is_well_known(file.name):
            continue  # the runtime's copy is used instead (module docstring)
        if file.name in given:
            raise ProtobufSchemaError(
                f"the descriptors hold two files named {file.name!r}"
            )
        package = file.package
        if package == WELL_KNOWN_PACKAGE or package.startswith(
            WELL_KNOWN_PACKAGE + "."
        ):
            raise ProtobufSchemaError(
                f"{_shown(file.name)} declares package {package}, "
                "which is reserved for the well-known types"
            )
        given[file.name] = file
    pool = descriptor_pool.DescriptorPool()
    added: set[str] = set()

    def add_well_known(name: str) -> None:
        if name in added:
            return
        proto = descriptor_pb2.FileDescriptorProto.FromString(_WELL_KNOWN[name])
        for dep in proto.dependency:
            add_well_known(dep)
        pool.Add(proto)
        added.add(name)

    pending = list(given.values())
    while pending:
        waiting: list[descriptor_pb2.FileDescriptorProto] = []
        for file in pending:
            missing = [
                d for d in file.dependency if d not in added and d not in _WELL_KNOWN
            ]
            unknown = [d for d in missing if d not in given]
            if unknown:
                raise ProtobufSchemaError(
                    _missing_import(file.name, unknown[0], single_file)
                )
            if missing:
                waiting.append(file)
                continue
            for dep in file.dependency:
                if dep in _WELL_KNOWN:
                    add_well_known(dep)
            try:
                pool.Add(file)
            except (TypeError, ValueError) as exc:
                raise ProtobufSchemaError(
                    f"{_shown(file.name)} does not build: {_pool_words(exc)}"
                ) from None
            added.add(file.name)
        if len(waiting) == len(pending):
            names = ", ".join(sorted(f.name for f in waiting))
            raise ProtobufSchemaError(f"the descriptors' imports form a cycle: {names}")
        pending = waiting
    return pool


def _shown(name: str) -> str:
    return f"file {name!r}" if name else "the file"


def _missing_import(name: str, dep: str, single_file: bool) -> str:
    if is_well_known(dep):
        return f"{_shown(name)} imports {dep}, which is not a well-known type"
    if single_file:
        return (
            f"{_shown(name)} imports {dep}; only google/protobuf/*.proto can be "
            "imported (send a FileDescriptorSet that holds it, as "
            "base64(FileDescriptorSet):Full.Message.Name, or register it under "
            f"/registry and give a schema reference named {dep})"
        )
    return f"{_shown(name)} imports {dep}, which the descriptors do not include"


def _pool_words(exc: Exception) -> str:
    text = str(exc)
    prefix = "Couldn't build proto file into descriptor pool: "
    return text[len(prefix) :] if text.startswith(prefix) else text


def user_files(
    pool: descriptor_pool.DescriptorPool, names: Iterable[str]
) -> list[descriptor_pb2.FileDescriptorProto]:
    """The pool's resolved copies of the files ``names`` (no well-known ones)."""
    out = []
    for name in names:
        proto = descriptor_pb2.FileDescriptorProto()
        pool.FindFileByName(name).CopyToProto(proto)
        out.append(proto)
    return out


def canonical_set(
    files: Sequence[descriptor_pb2.FileDescriptorProto],
    *,
    keep_message_order: bool = False,
) -> descriptor_pb2.FileDescriptorSet:
    """The canonical form of a schema's own files (see the module docstring).

    ``files`` are the pool's resolved copies (:func:`user_files`); the result
    is a new set, and ``canonical_set`` of its files gives it back unchanged.
    ``keep_message_order``: messages (top-level and nested) stay in the
    order declared, as Confluent's message indexes count them; the form
    stored (:attr:`narad_protobuf.schema.ProtobufSchema.compiled`).
    """
    out = descriptor_pb2.FileDescriptorSet()
    for file in sorted(files, key=lambda f: f.name):
        copy = out.file.add()
        copy.CopyFrom(file)
        _canonical_file(copy, keep_message_order)
        if len(files) == 1:
            copy.name = FILE_NAME
    return out


def _canonical_file(file: descriptor_pb2.FileDescriptorProto, keep: bool) -> None:
    file.ClearField("source_code_info")
    if file.syntax == "proto2":
        file.ClearField("syntax")
    deps = list(file.dependency)
    public = {deps[i] for i in file.public_dependency}
    weak = {deps[i] for i in file.weak_dependency}
    deps.sort()
    file.ClearField("dependency")
    file.dependency.extend(deps)
    file.ClearField("public_dependency")
    file.public_dependency.extend(i for i, d in enumerate(deps) if d in public)
    file.ClearField("weak_dependency")
    file.weak_dependency.extend(i for i, d in enumerate(deps) if d in weak)
    if not keep:
        _sort(file.message_type, lambda m: m.name)
    for message in file.message_type:
        _canonical_message(message, keep)
    _sort(file.enum_type, lambda e: e.name)
    for enum in file.enum_type:
        _canonical_enum(enum)
    _canonical_fields(file.extension)
    _sort(file.extension, lambda f: (f.extendee, f.number))
    _sort(file.service, lambda s: s.name)
    for service in file.service:
        _sort(service.method, lambda m: m.name)


def _canonical_message(message: descriptor_pb2.DescriptorProto, keep: bool) -> None:
    # Oneofs are referred to by index: sort them, then renumber the fields'.
    real = [o for o in message.oneof_decl if not _is_synthetic(message, o.name)]
    synthetic = [o for o in message.oneof_decl if _is_synthetic(message, o.name)]
    order = sorted(real, key=lambda o: o.name) + sorted(synthetic, key=lambda o: o.name)
    old_index = {o.name: i for i, o in enumerate(message.oneof_decl)}
    new_index = {old_index[o.name]: i for i, o in enumerate(order)}
    oneofs = [descriptor_pb2.OneofDescriptorProto() for _ in order]
    for copy, oneof in zip(oneofs, order, strict=True):
        copy.CopyFrom(oneof)
    message.ClearField("oneof_decl")
    message.oneof_decl.extend(oneofs)
    for field in message.field:
        if field.HasField("oneof_index"):
            field.oneof_index = new_index[field.oneof_index]
    _canonical_fields(message.field)
    _sort(message.field, lambda f: f.number)
    _canonical_fields(message.extension)
    _sort(message.extension, lambda f: (f.extendee, f.number))
    if not keep:
        _sort(message.nested_type, lambda m: m.name)
    for nested in message.nested_type:
        _canonical_message(nested, keep)
    _sort(message.enum_type, lambda e: e.name)
    for enum in message.enum_type:
        _canonical_enum(enum)
    _sort(message.extension_range, lambda r: (r.start, r.end))
    _merge_ranges(message.reserved_range, inclusive=False)
    names = sorted(set(message.reserved_name))
    message.ClearField("reserved_name")
    message.reserved_name.extend(names)


def _is_synthetic(message: descriptor_pb2.DescriptorProto, oneof_name: str) -> bool:
    index = [o.name for o in message.oneof_decl].index(oneof_name)
    members = [
        f for f in message.field if f.HasField("oneof_index") and f.oneof_index == index
    ]
    return len(members) == 1 and members[0].proto3_optional


def _canonical_fields(fields: Iterable[descriptor_pb2.FieldDescriptorProto]) -> None:
    for field in fields:
        if field.HasField("json_name") and field.json_name == default_json_name(
            field.name
        ):
            field.ClearField("json_name")


def _canonical_enum(enum: descriptor_pb2.EnumDescriptorProto) -> None:
    _sort(enum.value, lambda v: (v.number, v.name))
    _merge_ranges(enum.reserved_range, inclusive=True)
    names = sorted(set(enum.reserved_name))
    enum.ClearField("reserved_name")
    enum.reserved_name.extend(names)


def default_json_name(name: str) -> str:
    """The ``json_name`` protoc derives from a field name (``foo_bar`` ->
    ``fooBar``): underscores dropped, each letter after one capitalised."""
    out = []
    upper = False
    for char in name:
        if char == "_":
            upper = True
        elif upper:
            out.append(char.upper())
            upper = False
        else:
            out.append(char)
    return "".join(out)


def _sort(items: Any, key: Callable[[Any], Any]) -> None:
    # Repeated message fields have no sort(): rebuild them in order.
    ordered = sorted(items, key=key)
    copies = []
    for item in ordered:
        copy = type(item)()
        copy.CopyFrom(item)
        copies.append(copy)
    del items[:]
    items.extend(copies)


def _merge_ranges(ranges: Any, *, inclusive: bool) -> None:
    # Message reserved ranges are [start, end); enum ones [start, end].
    spans = sorted((r.start, r.end if not inclusive else r.end + 1) for r in ranges)
    merged: list[list[int]] = []
    for start, end in spans:
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    del ranges[:]
    for start, end in merged:
        item = ranges.add()
        item.start = start
        item.end = end - 1 if inclusive else end
