"""Compatibility of two Protobuf schema versions, under the seven modes.

A check compares a stored version and the proposed one from the topic's
message down, pairing fields by number, and reports every violation (a
:class:`Violation`: ``pointer``, ``rule``, ``message``; the caller stamps the
version). Two families of rules:

**Reading rules**, asked of a writer and a reader: can a reader with one
schema read what a writer with the other wrote? BACKWARD reads with the
proposed schema what the stored one wrote; FORWARD the reverse; FULL both.
Their pointers point into the reader's schema (the proposed one backward, the
stored one forward, as the JSON Schema check's do), at the message or enum by
full name: ``/shop.Order/fields/3``, ``/shop.Order/oneofs/pay``,
``/shop.Status/values/2``, ``/shop.Order`` for the message itself.

===========================  ================================================
rule                         a field number both sides declare ...
===========================  ================================================
``field_renamed``            ... under another name (table 4: a rename
                             breaks the JSON mapping and generated code)
``label_changed``            ... with another label: optional (singular),
                             repeated (maps too) or required (table 4)
``type_changed``             ... with types of different wire encodings, or
                             named types of different names (below)
``json_type_changed``        ... with types the wire shares but the JSON
                             mapping does not (``encoding="json"`` only)
``field_number_changed``     a field name both declare, under another number
``required_field_added``     the reader requires a field the writer lacks
``required_field_removed``   the writer has a required field the reader lacks
``oneof_field_removed``      a member of a writer's oneof that the reader's
                             oneof of that name lacks
``fields_moved_into_oneof``  fields that could be set together are members
                             of one new oneof for the reader (one is lost)
``field_moved_into_existing_oneof``  a field joins a oneof the writer had
``enum_value_renamed``       an enum number named otherwise by the reader
``enum_value_removed``       an enum number the reader lacks (``json`` only:
                             the wire keeps unknown numbers)
``message_changed``          the topic's message has another name
===========================  ================================================

Which scalar types share a wire encoding (Protobuf's "Updating a message
type"): int32, uint32, int64, uint64 and bool; sint32 and sint64; fixed32 and
sfixed32; fixed64 and sfixed64; string and bytes; an enum with int32, uint32,
int64 and uint64. Of those, JSON spells bool, enums and bytes otherwise, so
under ``encoding="json"`` bool <-> integer, enum -> integer (a writer's enum
name is no integer; an integer is a valid enum value) and string <-> bytes are
``json_type_changed``. A message or group field pairs with one of the same
name (relative to its file's package, as Confluent compares: moving a type to
another package or file is compatible; the well-known types by full name,
since their JSON is special) and the two are then compared alike; message and
group, message and scalar never pair. A message type the topic's message no
longer reaches is not compared (its removal is compatible: it can be in no
payload), nor is a new one. Pairs of messages are memoised, so recursive
types terminate and each pair is reported once.

**Change rules**, asked of the history in order (stored, then proposed),
whatever the direction, in every mode but NONE; pointers into the proposed
schema:

==============================  ==============================================
``field_removed_without_reserve``  a field of the stored version whose number
                                and name the proposed one does not both
                                ``reserved`` (table 4; example 2)
``reserved_reused``             a proposed field on a number or name the
                                stored version reserved
``reserved_removed``            a reservation the proposed version dropped
``rpc_removed``                 a service or method of the stored version
                                gone (table 4)
``rpc_signature_changed``       a method's input, output or streaming changed
==============================  ==============================================

Where Narad and Confluent differ: Confluent accepts a renamed field or enum
value, a changed field number (a removal plus an addition to it), a removed
field without ``reserved``, and an optional <-> repeated change of a string,
bytes or message field; Narad refuses them all, by Apicurio's table 4 (a
rename breaks the JSON mapping and generated code; an unreserved number gets
reused). Confluent refuses removing any message type; Narad only one the
topic's message still reaches. Confluent refuses removing an enum value;
Narad only for JSON topics, since binary readers keep unknown numbers.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from collections.abc import Iterator
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from enum import unique
from typing import Any

from google.protobuf import descriptor_pb2
from google.protobuf.descriptor import Descriptor
from google.protobuf.descriptor import EnumDescriptor
from google.protobuf.descriptor import FieldDescriptor

from narad_protobuf.framing import main_file
from narad_protobuf.schema import Encoding
from narad_protobuf.schema import ProtobufSchema

__all__ = ("MODES", "Direction", "Violation", "check", "check_history", "directions")


@dataclass(frozen=True)
class Violation:
    """One way the proposed version breaks a stored one.

    Attributes:
        pointer: Where: ``/<message full name>/fields/<number>`` (see the
            module docstring for the other forms).
        rule: The rule's short name (``type_changed``).
        message: A sentence naming the field, both sides and why.
    """

    pointer: str
    rule: str
    message: str

    def as_dict(self, against_version: int | None = None) -> dict[str, Any]:
        """The record the API reports (``against_version`` when given)."""
        out: dict[str, Any] = {
            "pointer": self.pointer,
            "rule": self.rule,
            "message": self.message,
        }
        if against_version is not None:
            out["against_version"] = against_version
        return out


@unique
class Direction(StrEnum):
    """Which schema reads what the other wrote."""

    BACKWARD = "backward"
    """The proposed schema reads what the stored one wrote."""
    FORWARD = "forward"
    """The stored schema reads what the proposed one writes."""


#: The seven modes (Confluent's and Apicurio's names).
MODES = (
    "BACKWARD",
    "BACKWARD_TRANSITIVE",
    "FORWARD",
    "FORWARD_TRANSITIVE",
    "FULL",
    "FULL_TRANSITIVE",
    "NONE",
)


def directions(mode: str) -> tuple[tuple[Direction, ...], bool]:
    """The directions a mode checks and whether it is transitive.

    Raises:
        ValueError: ``mode`` is not one of :data:`MODES`.
    """
    if mode not in MODES:
        raise ValueError(f"unknown compatibility mode {mode!r}")
    base = mode.removesuffix("_TRANSITIVE")
    found = {
        "NONE": (),
        "BACKWARD": (Direction.BACKWARD,),
        "FORWARD": (Direction.FORWARD,),
        "FULL": (Direction.BACKWARD, Direction.FORWARD),
    }[base]
    return found, mode.endswith("_TRANSITIVE")


def check(
    stored: ProtobufSchema,
    proposed: ProtobufSchema,
    *,
    directions: Sequence[Direction] = (Direction.BACKWARD,),
    encoding: Encoding = "binary",
) -> list[Violation]:
    """Every violation of ``proposed`` against one stored version.

    Args:
        stored: A stored version.
        proposed: The schema being registered.
        directions: The reading directions to check (none: nothing is
            checked, the change rules included, as in mode NONE).
        encoding: The topic's payload encoding: ``"json"`` adds the JSON
            mapping's rules.

    Returns:
        Change-rule violations first, then each direction's reading-rule
        violations, without repeats.
    """
    if not directions:
        return []
    if not stored.message_name or not proposed.message_name:
        return list(dict.fromkeys(_enums_only(stored, proposed, directions, encoding)))
    pairs, enums = _pairs(stored.descriptor, proposed.descriptor)
    found: list[Violation] = []
    found.extend(_change_rules(pairs, stored, proposed))
    root_s, root_p = stored.descriptor, proposed.descriptor
    if _local_name(root_s) != _local_name(root_p):
        found.append(
            Violation(
                f"/{root_p.full_name}",
                "message_changed",
                f"the topic's message is {root_p.full_name}, was {root_s.full_name}",
            )
        )
    for direction in directions:
        backward = direction is Direction.BACKWARD
        for s, p in pairs:
            writer, reader = (s, p) if backward else (p, s)
            found.extend(_reading_rules(writer, reader, encoding))
        for s, p in enums:
            writer_enum, reader_enum = (s, p) if backward else (p, s)
            found.extend(_enum_rules(writer_enum, reader_enum, encoding))
    return list(dict.fromkeys(found))


def _enums_only(
    stored: ProtobufSchema,
    proposed: ProtobufSchema,
    directions: Sequence[Direction],
    encoding: Encoding,
) -> Iterator[Violation]:
    """A version declaring no message (a file of enums other files import,
    in a registry subject) against another: the enum rules between the
    main files' top-level enums of the same full name, in each direction;
    with no message there is no reading root for the other rules."""

    def enums(schema: ProtobufSchema) -> dict[str, EnumDescriptor]:
        file = main_file(schema)
        prefix = f"{file.package}." if file.package else ""
        return {
            prefix + e.name: schema.pool.FindEnumTypeByName(prefix + e.name)
            for e in file.enum_type
        }

    old, new = enums(stored), enums(proposed)
    for direction in directions:
        backward = direction is Direction.BACKWARD
        for name in sorted(old.keys() & new.keys()):
            pair = (old[name], new[name])
            writer, reader = pair if backward else pair[::-1]
            yield from _enum_rules(writer, reader, encoding)


def check_history(
    proposed: ProtobufSchema,
    history: Iterable[tuple[int, ProtobufSchema]],
    mode: str,
    *,
    encoding: Encoding = "binary",
) -> Iterator[tuple[int, Violation]]:
    """Every violation under ``mode``, version by version.

    Args:
        proposed: The schema being registered.
        history: ``(version, schema)`` latest first; consumed only as far as
            the mode needs (the latest alone unless transitive).
        mode: One of :data:`MODES`.
        encoding: The topic's payload encoding.

    Yields:
        ``(version, violation)``; the caller stamps ``against_version``.
    """
    wanted, transitive = directions(mode)
    if not wanted:
        return
    for version, stored in history:
        for violation in check(stored, proposed, directions=wanted, encoding=encoding):
            yield version, violation
        if not transitive:
            return


# -- pairing ------------------------------------------------------------------


def _local_name(descriptor: Descriptor | EnumDescriptor) -> str:
    """A type's name relative to its file's package (full for the well-known
    types, whose JSON mapping goes by full name)."""
    package = descriptor.file.package
    if package == "google.protobuf" or not package:
        return descriptor.full_name
    return descriptor.full_name.removeprefix(package + ".")


def _is_message(fd: FieldDescriptor) -> bool:
    return fd.type in (FieldDescriptor.TYPE_MESSAGE, FieldDescriptor.TYPE_GROUP)


def _pairs(
    stored: Descriptor, proposed: Descriptor
) -> tuple[
    list[tuple[Descriptor, Descriptor]], list[tuple[EnumDescriptor, EnumDescriptor]]
]:
    """Message and enum pairs reachable from the topic's messages through
    fields of the same number and a pairable type (memoised, breadth first)."""
    pairs = [(stored, proposed)]
    seen = {(stored.full_name, proposed.full_name)}
    enums: list[tuple[EnumDescriptor, EnumDescriptor]] = []
    seen_enums: set[tuple[str, str]] = set()
    queue = deque(pairs)
    while queue:
        s, p = queue.popleft()
        for fs in s.fields:
            fp = p.fields_by_number.get(fs.number)
            if fp is None or fs.type != fp.type:
                continue
            if _is_message(fs):
                a, b = fs.message_type, fp.message_type
                key = (a.full_name, b.full_name)
                if _local_name(a) == _local_name(b) and key not in seen:
                    seen.add(key)
                    pairs.append((a, b))
                    queue.append((a, b))
            elif fs.type == FieldDescriptor.TYPE_ENUM:
                ea, eb = fs.enum_type, fp.enum_type
                key = (ea.full_name, eb.full_name)
                if _local_name(ea) == _local_name(eb) and key not in seen_enums:
                    seen_enums.add(key)
                    enums.append((ea, eb))
    return pairs, enums


# -- reading rules ------------------------------------------------------------

_T = FieldDescriptor
_TYPE_NAMES = {
    getattr(_T, name): name.removeprefix("TYPE_").lower()
    for name in dir(_T)
    if name.startswith("TYPE_")
}
_INTEGERS = frozenset({_T.TYPE_INT32, _T.TYPE_UINT32, _T.TYPE_INT64, _T.TYPE_UINT64})
# Scalar types sharing a wire encoding (an enum is handled with _INTEGERS).
_WIRE_GROUPS = (
    _INTEGERS | {_T.TYPE_BOOL},
    frozenset({_T.TYPE_SINT32, _T.TYPE_SINT64}),
    frozenset({_T.TYPE_FIXED32, _T.TYPE_SFIXED32}),
    frozenset({_T.TYPE_FIXED64, _T.TYPE_SFIXED64}),
    frozenset({_T.TYPE_STRING, _T.TYPE_BYTES}),
)


def _type_name(fd: FieldDescriptor) -> str:
    if _is_message(fd):
        kind = "group" if fd.type == _T.TYPE_GROUP else "message"
        return f"{kind} {fd.message_type.full_name}"
    if fd.type == _T.TYPE_ENUM:
        return f"enum {fd.enum_type.full_name}"
    return _TYPE_NAMES[fd.type]


def _label(fd: FieldDescriptor) -> str:
    if fd.is_required:
        return "required"
    return "repeated" if fd.is_repeated else "optional"


def _field(fd: FieldDescriptor) -> str:
    return f"field {fd.number} ({fd.name})"


def _type_violation(
    w: FieldDescriptor, r: FieldDescriptor, encoding: Encoding
) -> str | None:
    """The rule a type change breaks, or None."""
    wt, rt = w.type, r.type
    if wt == rt:
        if _is_message(w):
            same = _local_name(w.message_type) == _local_name(r.message_type)
            return None if same else "type_changed"
        if wt == _T.TYPE_ENUM:
            return (
                None
                if _local_name(w.enum_type) == _local_name(r.enum_type)
                else "type_changed"
            )
        return None
    if _T.TYPE_ENUM in (wt, rt):
        other = rt if wt == _T.TYPE_ENUM else wt
        if other not in _INTEGERS:
            return "type_changed"
        return (
            "json_type_changed" if encoding == "json" and wt == _T.TYPE_ENUM else None
        )
    if not any(wt in group and rt in group for group in _WIRE_GROUPS):
        return "type_changed"
    if encoding == "json" and (_T.TYPE_BOOL in (wt, rt) or _T.TYPE_BYTES in (wt, rt)):
        return "json_type_changed"
    return None


def _real_oneof(fd: FieldDescriptor) -> str | None:
    oneof = fd.containing_oneof
    if oneof is None:
        return None
    # A proto3 `optional` field's synthetic oneof is presence, not a choice.
    if len(oneof.fields) == 1 and oneof.name == "_" + fd.name:
        return None
    return oneof.name


def _reading_rules(
    w: Descriptor, r: Descriptor, encoding: Encoding
) -> Iterator[Violation]:
    at = f"/{r.full_name}"
    for rf in r.fields:
        wf = w.fields_by_number.get(rf.number)
        where = f"{at}/fields/{rf.number}"
        if wf is None:
            if rf.is_required:
                yield Violation(
                    where,
                    "required_field_added",
                    f"{_field(rf)} is required by the reader; the writer does not "
                    "have it, so its messages lack it",
                )
            moved = w.fields_by_name.get(rf.name)
            if moved is not None:
                yield Violation(
                    where,
                    "field_number_changed",
                    f"field {rf.name} is number {rf.number} for the reader and "
                    f"{moved.number} for the writer: the reader cannot find it",
                )
            continue
        if wf.name != rf.name:
            yield Violation(
                where,
                "field_renamed",
                f"field {rf.number} is named {wf.name} by the writer and {rf.name} "
                "by the reader (a rename breaks the JSON mapping and generated code)",
            )
        if _label(wf) != _label(rf):
            yield Violation(
                where,
                "label_changed",
                f"{_field(rf)} is {_label(wf)} for the writer and {_label(rf)} "
                "for the reader",
            )
        rule = _type_violation(wf, rf, encoding)
        if rule is not None:
            why = (
                "the JSON mapping spells them differently"
                if rule == "json_type_changed"
                else "the reader cannot decode what the writer wrote"
            )
            yield Violation(
                where,
                rule,
                f"{_field(rf)} is {_type_name(wf)} for the writer and "
                f"{_type_name(rf)} for the reader: {why}",
            )
    for wf in w.fields:
        if wf.number in r.fields_by_number:
            continue
        where = f"{at}/fields/{wf.number}"
        if wf.is_required:
            yield Violation(
                where,
                "required_field_removed",
                f"{_field(wf)} is required by the writer and gone from the reader",
            )
        oneof = _real_oneof(wf)
        if oneof is not None and oneof in r.oneofs_by_name:
            yield Violation(
                where,
                "oneof_field_removed",
                f"{_field(wf)} of oneof {oneof} is gone from the reader's oneof: "
                "a message that sets it reads as setting none",
            )
    yield from _oneof_rules(w, r)


def _oneof_rules(w: Descriptor, r: Descriptor) -> Iterator[Violation]:
    writer_oneofs = {name for name in w.oneofs_by_name}
    for oneof in r.oneofs:
        members = [f for f in oneof.fields if _real_oneof(f) is not None]
        if not members:
            continue
        where = f"/{r.full_name}/oneofs/{oneof.name}"
        slots: dict[str, list[str]] = {}
        for rf in members:
            wf = w.fields_by_number.get(rf.number)
            if wf is None:
                continue
            slot = _real_oneof(wf) or f"field {wf.number}"
            slots.setdefault(slot, []).append(str(rf.number))
        if oneof.name in writer_oneofs:
            for slot, numbers in slots.items():
                if slot != oneof.name:
                    yield Violation(
                        where,
                        "field_moved_into_existing_oneof",
                        f"field {', '.join(numbers)} joined oneof {oneof.name}, which "
                        "the writer has without it: a message setting both loses one",
                    )
        elif len(slots) > 1:
            numbers = sorted(n for ns in slots.values() for n in ns)
            yield Violation(
                where,
                "fields_moved_into_oneof",
                f"fields {', '.join(numbers)} are in the reader's new oneof "
                f"{oneof.name} but could be set together by the writer: all but "
                "one are lost",
            )


def _enum_rules(
    w: EnumDescriptor, r: EnumDescriptor, encoding: Encoding
) -> Iterator[Violation]:
    reader_names: dict[int, set[str]] = {}
    for value in r.values:
        reader_names.setdefault(value.number, set()).add(value.name)
    for value in w.values:
        where = f"/{r.full_name}/values/{value.number}"
        names = reader_names.get(value.number)
        if names is None:
            if encoding == "json":
                yield Violation(
                    where,
                    "enum_value_removed",
                    f"enum value {value.name} = {value.number} is gone from the "
                    "reader: its JSON name is unknown there",
                )
        elif value.name not in names:
            yield Violation(
                where,
                "enum_value_renamed",
                f"enum value {value.number} is named {value.name} by the writer and "
                f"{' / '.join(sorted(names))} by the reader",
            )


# -- change rules -------------------------------------------------------------


def _reservations(d: Descriptor) -> tuple[list[tuple[int, int]], set[str]]:
    """A message's reserved ``[start, end)`` number ranges and names."""
    proto = descriptor_pb2.DescriptorProto()
    d.CopyToProto(proto)
    return [(r.start, r.end) for r in proto.reserved_range], set(proto.reserved_name)


def _reserves(ranges: list[tuple[int, int]], number: int) -> bool:
    return any(start <= number < end for start, end in ranges)


def _uncovered(
    start: int, end: int, covered: Iterable[tuple[int, int]]
) -> list[tuple[int, int]]:
    """The parts of ``[start, end)`` outside every ``covered`` range."""
    out = []
    at = start
    for a, b in sorted(covered):
        if b <= at:
            continue
        if a >= end:
            break
        if a > at:
            out.append((at, a))
        at = max(at, b)
        if at >= end:
            break
    if at < end:
        out.append((at, end))
    return out


def _change_rules(
    pairs: list[tuple[Descriptor, Descriptor]],
    stored: ProtobufSchema,
    proposed: ProtobufSchema,
) -> Iterator[Violation]:
    for s, p in pairs:
        at = f"/{p.full_name}"
        s_numbers, s_names = _reservations(s)
        p_numbers, p_names = _reservations(p)
        for sf in s.fields:
            if sf.number in p.fields_by_number:
                continue
            missing = []
            if not _reserves(p_numbers, sf.number):
                missing.append(f"its number (reserved {sf.number};)")
            if sf.name not in p_names:
                missing.append(f'its name (reserved "{sf.name}";)')
            if missing:
                yield Violation(
                    f"{at}/fields/{sf.number}",
                    "field_removed_without_reserve",
                    f"{_field(sf)} was removed without reserving "
                    f"{' and '.join(missing)}: a later field could reuse it",
                )
        for pf in p.fields:
            reused = []
            if _reserves(s_numbers, pf.number) and pf.number not in s.fields_by_number:
                reused.append(f"number {pf.number}")
            if pf.name in s_names and pf.name not in s.fields_by_name:
                reused.append(f"name {pf.name}")
            if reused:
                yield Violation(
                    f"{at}/fields/{pf.number}",
                    "reserved_reused",
                    f"{_field(pf)} uses the reserved {' and '.join(reused)}",
                )
        # A stored reservation may give way to a reservation or a field (the
        # latter is reserved_reused, reported above).
        covered = p_numbers + [(n, n + 1) for n in p.fields_by_number]
        for start, end in s_numbers:
            for a, b in _uncovered(start, end, covered):
                shown = f"{a}" if b == a + 1 else f"{a} to {b - 1}"
                yield Violation(
                    f"{at}/reserved",
                    "reserved_removed",
                    f"reserved number {shown} is no longer reserved",
                )
        for name in sorted(s_names - p_names):
            if name not in p.fields_by_name:
                yield Violation(
                    f"{at}/reserved",
                    "reserved_removed",
                    f'reserved name "{name}" is no longer reserved',
                )
    yield from _service_rules(stored, proposed)


def _services(schema: ProtobufSchema) -> dict[str, Any]:
    out = {}
    for file in schema.files.file:
        for service in file.service:
            name = f"{file.package}.{service.name}" if file.package else service.name
            out[name] = schema.pool.FindServiceByName(name)
    return out


def _service_rules(
    stored: ProtobufSchema, proposed: ProtobufSchema
) -> Iterator[Violation]:
    s_services, p_services = _services(stored), _services(proposed)
    for name, service in s_services.items():
        other = p_services.get(name)
        for method in service.methods:
            where = f"/{name}/methods/{method.name}"
            new = other.methods_by_name.get(method.name) if other is not None else None
            if new is None:
                yield Violation(
                    where, "rpc_removed", f"rpc {name}.{method.name} was removed"
                )
                continue
            before = _signature(method)
            after = _signature(new)
            if before != after:
                yield Violation(
                    where,
                    "rpc_signature_changed",
                    f"rpc {name}.{method.name} changed from {before} to {after}",
                )


def _signature(method: Any) -> str:
    proto_in = method.input_type.full_name
    proto_out = method.output_type.full_name
    client = "stream " if getattr(method, "client_streaming", False) else ""
    server = "stream " if getattr(method, "server_streaming", False) else ""
    return f"({client}{proto_in}) returns ({server}{proto_out})"
