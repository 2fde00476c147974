"""``.proto`` source text rendered from a stored ``FileDescriptorProto``.

Confluent's registry API shows a Protobuf schema as ``.proto`` text (and as
base64 of the file's ``FileDescriptorProto`` with ``?format=serialized``);
Narad stores the compiled descriptors (:mod:`narad_protobuf.schema`), so the
text is rendered from them. What protoc compiles from the text is the same
schema again (the same :attr:`~narad_protobuf.schema.ProtobufSchema.identity`):
``syntax`` or ``edition``, the package, imports (``public``, ``weak``), the
options of files, messages, fields, enums, values, services and methods that
the runtime knows (``descriptor.proto``'s, features included), messages with
their nested messages and enums, fields with their labels (proto2's
``optional``/``required``, proto3's explicit ``optional``), maps, oneofs,
proto2 groups, defaults, custom ``json_name``, extension ranges, extensions,
reserved ranges and names, and services.

What it cannot give back: comments and the source's layout (the stored form
has none), and custom options (extensions of ``descriptor.proto``'s options
declared by the file itself): the runtime keeps those as unknown fields, so
they are left out.

Type names are written fully qualified with a leading dot (``.shop.Item``), as
the resolved descriptors hold them: protoc resolves them the same way from any
scope.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

from google.protobuf import descriptor_pb2
from google.protobuf.descriptor import FieldDescriptor

__all__ = ("render_file",)

_F = descriptor_pb2.FieldDescriptorProto
_SCALARS = {
    _F.TYPE_DOUBLE: "double",
    _F.TYPE_FLOAT: "float",
    _F.TYPE_INT64: "int64",
    _F.TYPE_UINT64: "uint64",
    _F.TYPE_INT32: "int32",
    _F.TYPE_FIXED64: "fixed64",
    _F.TYPE_FIXED32: "fixed32",
    _F.TYPE_BOOL: "bool",
    _F.TYPE_STRING: "string",
    _F.TYPE_BYTES: "bytes",
    _F.TYPE_UINT32: "uint32",
    _F.TYPE_SFIXED32: "sfixed32",
    _F.TYPE_SFIXED64: "sfixed64",
    _F.TYPE_SINT32: "sint32",
    _F.TYPE_SINT64: "sint64",
}
_LABELS = {
    _F.LABEL_OPTIONAL: "optional",
    _F.LABEL_REQUIRED: "required",
    _F.LABEL_REPEATED: "repeated",
}
#: Field numbers' top (exclusive ends in descriptors are this plus one).
_MAX_FIELD = (1 << 29) - 1
_MAX_ENUM = (1 << 31) - 1
_INDENT = "  "


def render_file(file: descriptor_pb2.FileDescriptorProto) -> str:
    """The ``.proto`` text of ``file`` (a resolved descriptor: type names
    fully qualified)."""
    out = _Out()
    syntax = file.syntax or "proto2"
    editions = syntax == "editions"
    if editions:
        name = descriptor_pb2.Edition.Name(file.edition)
        out.line(0, f'edition = "{name.removeprefix("EDITION_")}";')
    else:
        out.line(0, f'syntax = "{syntax}";')
    if file.package:
        out.line(0, f"package {file.package};")
    public = {file.dependency[i] for i in file.public_dependency}
    weak = {file.dependency[i] for i in file.weak_dependency}
    for dep in file.dependency:
        kind = "public " if dep in public else "weak " if dep in weak else ""
        out.line(0, f"import {kind}{_string(dep)};")
    for option in _options(file.options):
        out.line(0, f"option {option};")
    context = _Context(syntax)
    scope = f".{file.package}" if file.package else ""
    for enum in file.enum_type:
        _enum(out, 0, enum)
    for message in file.message_type:
        _message(out, 0, message, context, scope)
    _extensions(out, 0, file.extension, context)
    for service in file.service:
        _service(out, service)
    return out.text()


class _Out:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def line(self, depth: int, text: str) -> None:
        self.lines.append(_INDENT * depth + text)

    def text(self) -> str:
        return "\n".join(self.lines) + "\n"


class _Context:
    def __init__(self, syntax: str) -> None:
        self.syntax = syntax


def _message(
    out: _Out,
    depth: int,
    message: descriptor_pb2.DescriptorProto,
    context: _Context,
    scope: str,
) -> None:
    out.line(depth, f"message {message.name} {{")
    inner = depth + 1
    full = f"{scope}.{message.name}"
    for option in _options(message.options, skip=("map_entry",)):
        out.line(inner, f"option {option};")
    nested = {n.name: n for n in message.nested_type}
    # Maps' entries and groups' types are written with their fields, which
    # go where the entry stands among the nested messages: protoc lists
    # nested types in the order it meets them, and the stored form keeps
    # that order (Confluent's message indexes count it). Fields may go in
    # any order: the stored form lists them by number.
    owners: dict[str, descriptor_pb2.FieldDescriptorProto] = {}
    for field in message.field:
        entry = _nested_of(field, full, nested)
        if entry is not None and (
            entry.options.map_entry or field.type == _F.TYPE_GROUP
        ):
            owners[entry.name] = field
    for enum in message.enum_type:
        _enum(out, inner, enum)
    synthetic = _synthetic_oneofs(message)
    written: set[int] = set()

    def write(field: descriptor_pb2.FieldDescriptorProto) -> None:
        if field.number in written:
            return
        index = field.oneof_index if field.HasField("oneof_index") else None
        if index is not None and index not in synthetic:
            written.update(
                f.number
                for f in message.field
                if f.HasField("oneof_index") and f.oneof_index == index
            )
            _oneof(out, inner, message, full, index, nested, context)
            return
        written.add(field.number)
        _field(out, inner, field, full, nested, context, in_oneof=False)

    for child in message.nested_type:
        owner = owners.get(child.name)
        if owner is None:
            _message(out, inner, child, context, full)
        else:
            write(owner)
    for field in message.field:
        write(field)
    for declared in message.extension_range:
        end = declared.end - 1
        shown = "max" if end >= _MAX_FIELD else str(end)
        span = (
            str(declared.start)
            if end == declared.start
            else f"{declared.start} to {shown}"
        )
        options = _options(declared.options)
        suffix = f" [{', '.join(options)}]" if options else ""
        out.line(inner, f"extensions {span}{suffix};")
    _extensions(out, inner, message.extension, context)
    _reserved(out, inner, message.reserved_range, message.reserved_name, context, 1)
    out.line(depth, "}")


def _group_head(
    field: descriptor_pb2.FieldDescriptorProto, type_name: str, context: _Context
) -> str:
    label = _LABELS[field.label]
    options = _field_options(field, context)
    suffix = f" [{', '.join(options)}]" if options else ""
    return f"{label} group {type_name} = {field.number}{suffix}"


def _nested_of(
    field: descriptor_pb2.FieldDescriptorProto,
    full: str,
    nested: dict[str, descriptor_pb2.DescriptorProto],
) -> descriptor_pb2.DescriptorProto | None:
    """The nested type of the message ``full`` (its fully qualified name)
    that ``field``'s type names, if any."""
    if field.type not in (_F.TYPE_MESSAGE, _F.TYPE_GROUP):
        return None
    head, _, last = field.type_name.rpartition(".")
    return nested.get(last) if head == full else None


def _synthetic_oneofs(message: descriptor_pb2.DescriptorProto) -> set[int]:
    """The oneofs proto3 ``optional`` fields made (each holds one such field)."""
    members: dict[int, list[descriptor_pb2.FieldDescriptorProto]] = {}
    for field in message.field:
        if field.HasField("oneof_index"):
            members.setdefault(field.oneof_index, []).append(field)
    return {
        index
        for index, fields in members.items()
        if len(fields) == 1 and fields[0].proto3_optional
    }


def _oneof(
    out: _Out,
    depth: int,
    message: descriptor_pb2.DescriptorProto,
    full: str,
    index: int,
    nested: dict[str, descriptor_pb2.DescriptorProto],
    context: _Context,
) -> None:
    decl = message.oneof_decl[index]
    out.line(depth, f"oneof {decl.name} {{")
    for option in _options(decl.options):
        out.line(depth + 1, f"option {option};")
    for field in message.field:
        if field.HasField("oneof_index") and field.oneof_index == index:
            _field(out, depth + 1, field, full, nested, context, in_oneof=True)
    out.line(depth, "}")


def _field(
    out: _Out,
    depth: int,
    field: descriptor_pb2.FieldDescriptorProto,
    full: str,
    nested: dict[str, descriptor_pb2.DescriptorProto],
    context: _Context,
    *,
    in_oneof: bool,
) -> None:
    entry = _nested_of(field, full, nested)
    if field.type == _F.TYPE_GROUP and entry is not None:
        # The group's type is declared with it, inside the field.
        body = descriptor_pb2.DescriptorProto()
        body.CopyFrom(entry)
        head = _group_head(field, entry.name, context)
        if in_oneof:
            head = head.split(" ", 1)[1]  # no label inside a oneof
        out.line(depth, head + " {")
        inner = _Out()
        _message(inner, 0, body, context, full)
        # Drop the "message Name {" line and its closing brace: the field's
        # head stands for them.
        for line in inner.lines[1:-1]:
            out.line(depth, line)
        out.line(depth, "}")
        return
    options = _field_options(field, context)
    suffix = f" [{', '.join(options)}]" if options else ""
    if entry is not None and entry.options.map_entry:
        key, value = sorted(entry.field, key=lambda f: f.number)
        kind = f"map<{_type(key)}, {_type(value)}>"
        out.line(depth, f"{kind} {field.name} = {field.number}{suffix};")
        return
    label = _label(field, context, in_oneof=in_oneof)
    out.line(depth, f"{label}{_type(field)} {field.name} = {field.number}{suffix};")


def _label(
    field: descriptor_pb2.FieldDescriptorProto, context: _Context, *, in_oneof: bool
) -> str:
    if in_oneof:
        return ""
    if field.label == _F.LABEL_REPEATED:
        return "repeated "
    if context.syntax == "proto2":
        return _LABELS[field.label] + " "
    if context.syntax == "proto3" and field.proto3_optional:
        return "optional "
    return ""  # proto3 implicit presence; editions say it in features


def _type(field: descriptor_pb2.FieldDescriptorProto) -> str:
    if field.type in (_F.TYPE_MESSAGE, _F.TYPE_ENUM, _F.TYPE_GROUP):
        return field.type_name
    return _SCALARS[field.type]


def _field_options(
    field: descriptor_pb2.FieldDescriptorProto, context: _Context
) -> list[str]:
    options = []
    if field.HasField("default_value"):
        options.append(f"default = {_default(field)}")
    if field.HasField("json_name"):
        options.append(f"json_name = {_string(field.json_name)}")
    options += _options(field.options)
    return options


def _default(field: descriptor_pb2.FieldDescriptorProto) -> str:
    value = field.default_value
    if field.type == _F.TYPE_STRING:
        return _string(value)
    if field.type == _F.TYPE_BYTES:
        return f'"{value}"'  # already C-escaped in the descriptor
    return value  # numbers (inf, -inf, nan too), true/false, an enum value


def _extensions(
    out: _Out,
    depth: int,
    extensions: Any,
    context: _Context,
) -> None:
    by_extendee: dict[str, list[descriptor_pb2.FieldDescriptorProto]] = {}
    for field in extensions:
        by_extendee.setdefault(field.extendee, []).append(field)
    for extendee, fields in by_extendee.items():
        out.line(depth, f"extend {extendee} {{")
        for field in fields:
            _field(out, depth + 1, field, "", {}, context, in_oneof=False)
        out.line(depth, "}")


def _reserved(
    out: _Out,
    depth: int,
    ranges: Any,
    names: Any,
    context: _Context,
    exclusive: int,
) -> None:
    spans = []
    top = _MAX_FIELD if exclusive else _MAX_ENUM
    for declared in ranges:
        end = declared.end - exclusive
        if end == declared.start:
            spans.append(str(end))
        else:
            shown = "max" if end >= top else str(end)
            spans.append(f"{declared.start} to {shown}")
    if spans:
        out.line(depth, f"reserved {', '.join(spans)};")
    if names:
        if context.syntax == "editions":
            shown_names = ", ".join(names)
        else:
            shown_names = ", ".join(_string(n) for n in names)
        out.line(depth, f"reserved {shown_names};")


def _enum(out: _Out, depth: int, enum: descriptor_pb2.EnumDescriptorProto) -> None:
    out.line(depth, f"enum {enum.name} {{")
    for option in _options(enum.options):
        out.line(depth + 1, f"option {option};")
    for value in enum.value:
        options = _options(value.options)
        suffix = f" [{', '.join(options)}]" if options else ""
        out.line(depth + 1, f"{value.name} = {value.number}{suffix};")
    _reserved(out, depth + 1, enum.reserved_range, enum.reserved_name, _ENUM, 0)
    out.line(depth, "}")


_ENUM = _Context("proto2")  # enum reserved names are strings outside editions


def _service(out: _Out, service: descriptor_pb2.ServiceDescriptorProto) -> None:
    out.line(0, f"service {service.name} {{")
    for option in _options(service.options):
        out.line(1, f"option {option};")
    for method in service.method:
        streams_in = "stream " if method.client_streaming else ""
        streams_out = "stream " if method.server_streaming else ""
        head = (
            f"rpc {method.name} ({streams_in}{method.input_type}) returns "
            f"({streams_out}{method.output_type})"
        )
        options = _options(method.options)
        if options:
            out.line(1, head + " {")
            for option in options:
                out.line(2, f"option {option};")
            out.line(1, "}")
        else:
            out.line(1, head + ";")
    out.line(0, "}")


def _options(options: Any, *, skip: tuple[str, ...] = ()) -> list[str]:
    """``name = value`` for every option set in an options message (nested
    messages, such as ``features``, as dotted paths)."""
    return [
        f"{path} = {value}"
        for path, value in _option_values(options, "")
        if path not in skip
    ]


def _option_values(message: Any, prefix: str) -> Iterator[tuple[str, str]]:
    for fd, value in message.ListFields():
        if fd.is_extension:
            continue  # custom options: the runtime does not know them here
        path = prefix + fd.name
        values = value if fd.is_repeated else [value]
        for item in values:
            if fd.type in (FieldDescriptor.TYPE_MESSAGE, FieldDescriptor.TYPE_GROUP):
                if fd.name == "uninterpreted_option":
                    continue
                yield from _option_values(item, path + ".")
            else:
                yield path, _scalar(fd, item)


def _scalar(fd: Any, value: Any) -> str:
    if fd.type == FieldDescriptor.TYPE_ENUM:
        return fd.enum_type.values_by_number[value].name
    if fd.type == FieldDescriptor.TYPE_BOOL:
        return "true" if value else "false"
    if fd.type == FieldDescriptor.TYPE_STRING:
        return _string(value)
    if fd.type == FieldDescriptor.TYPE_BYTES:
        return _bytes(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return repr(value)
    return str(value)


def _string(text: str | bytes) -> str:
    """A ``.proto`` string literal of ``text``: its UTF-8 bytes, escaped (a
    proto2 default that is not UTF-8 reads back as bytes)."""
    return _bytes(text if isinstance(text, bytes) else text.encode("utf-8"))


_ESCAPES = {
    ord("\\"): "\\\\",
    ord('"'): '\\"',
    ord("'"): "\\'",
    ord("\n"): "\\n",
    ord("\r"): "\\r",
    ord("\t"): "\\t",
}


def _bytes(data: bytes) -> str:
    out = []
    for byte in data:
        if byte in _ESCAPES:
            out.append(_ESCAPES[byte])
        elif 0x20 <= byte < 0x7F:
            out.append(chr(byte))
        else:
            out.append(f"\\{byte:03o}")
    return '"' + "".join(out) + '"'
