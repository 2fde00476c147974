"""Binary payloads: do the bytes decode as the topic's message?

The check is structural, as the event store's (prost-reflect) is: every
field's wire data must be well formed and, for a field the message declares,
of the wire type its declaration allows (a packed run for a repeated scalar
too); strings of proto3 (and of editions files verifying UTF-8) must be UTF-8;
embedded messages and groups must decode as their types, down to
:data:`MAX_DEPTH` levels. Unknown fields pass (they are skipped, groups
included), missing fields pass (``required`` is not enforced), empty bytes
pass, and values are not judged (an enum number a closed enum lacks, a bool of
7). A known field with another wire type is refused: protobuf's own parsers
would keep it as an unknown field, but it means the bytes were written for
another message, which is what the check is for.

Why a walker of our own rather than ``ParseFromString``: the runtime says
"Error parsing message" and no more, accepts wire-type mismatches silently,
and materialises every value; the walker names the byte offset and the field
path where decoding failed and allocates nothing but string slices it checks.
Per schema it is precompiled into one table per message type, keyed by the
tag as it appears on the wire (``bench/protobuf.py`` measures it beside the
runtime's parse). Work is linear in the payload: each byte is read once, a
length is checked against what is left before anything is skipped, and
nesting is bounded.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from dataclasses import field

from google.protobuf import descriptor_pb2
from google.protobuf.descriptor import Descriptor
from google.protobuf.descriptor import FieldDescriptor

from narad_protobuf.errors import ProtobufPayloadError

__all__ = ("MAX_DEPTH", "BinaryValidator")

#: Deepest nesting of messages and groups (known or unknown) a payload may
#: have: protobuf's own default recursion limit.
MAX_DEPTH = 100

# What a declared field's wire data is checked as.
_VARINT, _FIXED64, _FIXED32, _BYTES, _UTF8, _MESSAGE, _GROUP = range(7)
_PACKED_VARINT, _PACKED_FIXED32, _PACKED_FIXED64 = range(7, 10)

_WIRE_VARINT, _WIRE_FIXED64, _WIRE_LEN, _WIRE_START, _WIRE_END, _WIRE_FIXED32 = range(6)

_T = FieldDescriptor
_NATURAL = {
    _T.TYPE_INT32: _VARINT,
    _T.TYPE_INT64: _VARINT,
    _T.TYPE_UINT32: _VARINT,
    _T.TYPE_UINT64: _VARINT,
    _T.TYPE_SINT32: _VARINT,
    _T.TYPE_SINT64: _VARINT,
    _T.TYPE_BOOL: _VARINT,
    _T.TYPE_ENUM: _VARINT,
    _T.TYPE_FIXED64: _FIXED64,
    _T.TYPE_SFIXED64: _FIXED64,
    _T.TYPE_DOUBLE: _FIXED64,
    _T.TYPE_FIXED32: _FIXED32,
    _T.TYPE_SFIXED32: _FIXED32,
    _T.TYPE_FLOAT: _FIXED32,
    _T.TYPE_BYTES: _BYTES,
    _T.TYPE_STRING: _BYTES,
    _T.TYPE_MESSAGE: _MESSAGE,
    _T.TYPE_GROUP: _GROUP,
}
_WIRE_OF = {
    _VARINT: _WIRE_VARINT,
    _FIXED64: _WIRE_FIXED64,
    _FIXED32: _WIRE_FIXED32,
    _BYTES: _WIRE_LEN,
    _UTF8: _WIRE_LEN,
    _MESSAGE: _WIRE_LEN,
    _GROUP: _WIRE_START,
}
_PACKED_OF = {
    _VARINT: _PACKED_VARINT,
    _FIXED32: _PACKED_FIXED32,
    _FIXED64: _PACKED_FIXED64,
}
_WIRE_NAMES = (
    "varint",
    "fixed64",
    "length-delimited",
    "start-group",
    "end-group",
    "fixed32",
)

_MAX_FIELD_NUMBER = (1 << 29) - 1

# A varint of more than ten bytes: ten continuation bytes in a row.
_OVERLONG = re.compile(rb"[\x80-\xff]{10}")


@dataclass
class _Plan:
    """How to check one message type: wire tag -> (kind, sub-plan, name)."""

    name: str
    tags: dict[int, tuple[int, _Plan | None, str]] = field(default_factory=dict)
    numbers: dict[int, str] = field(default_factory=dict)


class _Fail(Exception):
    def __init__(self, offset: int, reason: str) -> None:
        self.offset = offset
        self.reason = reason
        self.path: list[str] = []


def _utf8_verified(fd: FieldDescriptor) -> bool:
    # Resolved features (proto3: VERIFY, proto2: NONE, editions: as set) are
    # only exposed under a private name; without them, verify.
    features = getattr(fd, "_GetFeatures", None)
    if features is None:
        return True
    return features().utf8_validation != descriptor_pb2.FeatureSet.NONE


def _plan(descriptor: Descriptor, plans: dict[str, _Plan]) -> _Plan:
    known = plans.get(descriptor.full_name)
    if known is not None:
        return known
    plan = _Plan(descriptor.full_name)
    plans[descriptor.full_name] = plan  # before the fields: types recurse
    for fd in descriptor.fields:
        kind = _NATURAL[fd.type]
        if fd.type == _T.TYPE_STRING and _utf8_verified(fd):
            kind = _UTF8
        sub = _plan(fd.message_type, plans) if kind in (_MESSAGE, _GROUP) else None
        label = f"field {fd.number} ({fd.name})"
        plan.numbers[fd.number] = label
        plan.tags[fd.number << 3 | _WIRE_OF[kind]] = (kind, sub, label)
        if fd.is_repeated and kind in _PACKED_OF:
            plan.tags[fd.number << 3 | _WIRE_LEN] = (_PACKED_OF[kind], None, label)
    return plan


class BinaryValidator:
    """Checks binary payloads against one message type (module docstring)."""

    def __init__(self, descriptor: Descriptor) -> None:
        self.message_name = descriptor.full_name
        self._plan = _plan(descriptor, {})

    def validate(self, payload: bytes) -> None:
        """Return if ``payload`` decodes as the message.

        Raises:
            ProtobufPayloadError: naming the byte offset, the path of fields
                (``field 2 (items) > field 1 (sku)``) and what was wrong.
        """
        try:
            _walk(payload, 0, len(payload), self._plan, 0, 0)
        except _Fail as fail:
            where = " > ".join(fail.path)
            inside = f", in {where}" if where else ""
            raise ProtobufPayloadError(
                f"payload does not decode as {self.message_name}: at byte "
                f"{fail.offset}{inside}: {fail.reason}",
                offset=fail.offset,
                path=".".join(p.split(" ", 2)[1] for p in fail.path),
            ) from None


def _varint(data: bytes, pos: int, end: int) -> tuple[int, int]:
    """The varint at ``pos`` and the position after it."""
    result = 0
    shift = 0
    start = pos
    while pos < end:
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, pos
        shift += 7
        if shift >= 70:
            raise _Fail(start, "malformed varint (more than 10 bytes)")
    raise _Fail(start, "truncated varint")


def _walk(data: bytes, pos: int, end: int, plan: _Plan, depth: int, group: int) -> int:
    """Check the fields from ``pos`` to ``end``; inside a group (``group`` is
    its field number), stop after its end tag. Return where it stopped."""
    tags = plan.tags
    while pos < end:
        tag_at = pos
        key = data[pos]
        if key < 0x80:
            pos += 1
        else:
            key, pos = _varint(data, pos, end)
        entry = tags.get(key)
        if entry is not None:
            kind, sub, label = entry
            try:
                if kind == _VARINT:
                    if pos < end and data[pos] < 0x80:
                        pos += 1
                    else:
                        pos = _varint(data, pos, end)[1]
                elif kind in (_FIXED32, _FIXED64):
                    size = 4 if kind == _FIXED32 else 8
                    if end - pos < size:
                        raise _Fail(pos, f"{size}-byte value runs past the end")
                    pos += size
                elif kind == _GROUP:
                    if depth >= MAX_DEPTH:
                        raise _Fail(tag_at, f"nests deeper than {MAX_DEPTH} messages")
                    pos = _walk(data, pos, end, sub, depth + 1, key >> 3)  # type: ignore[arg-type]
                else:
                    length, pos = _varint(data, pos, end)
                    if length > end - pos:
                        left = end - pos
                        raise _Fail(
                            pos,
                            f"length {length} runs past the end ({left} bytes left)",
                        )
                    stop = pos + length
                    if kind == _MESSAGE:
                        if depth >= MAX_DEPTH:
                            raise _Fail(
                                tag_at, f"nests deeper than {MAX_DEPTH} messages"
                            )
                        _walk(data, pos, stop, sub, depth + 1, 0)  # type: ignore[arg-type]
                    elif kind == _UTF8:
                        try:
                            data[pos:stop].decode("utf-8")
                        except UnicodeDecodeError as exc:
                            raise _Fail(
                                pos + exc.start, "string is not valid UTF-8"
                            ) from None
                    elif kind == _PACKED_VARINT:
                        if length and data[stop - 1] >= 0x80:
                            raise _Fail(stop - 1, "packed varints end mid-varint")
                        bad = _OVERLONG.search(data, pos, stop)
                        if bad:
                            raise _Fail(
                                bad.start(), "malformed varint (more than 10 bytes)"
                            )
                    elif kind == _PACKED_FIXED32 and length % 4:
                        raise _Fail(pos, f"packed fixed32 run of {length} bytes")
                    elif kind == _PACKED_FIXED64 and length % 8:
                        raise _Fail(pos, f"packed fixed64 run of {length} bytes")
                    pos = stop
            except _Fail as fail:
                fail.path.insert(0, label)
                raise
            continue
        number, wire = key >> 3, key & 7
        if number == 0 or number > _MAX_FIELD_NUMBER:
            raise _Fail(tag_at, f"invalid field number {number}")
        if wire == _WIRE_END:
            if group == number:
                return pos
            raise _Fail(tag_at, f"end-group tag for field {number} without its start")
        if number in plan.numbers:
            shown = _WIRE_NAMES[wire] if wire < 6 else f"invalid ({wire})"
            fail = _Fail(tag_at, f"wire type {shown} does not fit its declared type")
            fail.path.insert(0, plan.numbers[number])
            raise fail
        pos = _skip(data, pos, end, number, wire, depth, tag_at)
    if group:
        raise _Fail(pos, f"group of field {group} has no end-group tag")
    return pos


def _skip(
    data: bytes, pos: int, end: int, number: int, wire: int, depth: int, at: int
) -> int:
    """Skip an unknown field's value; return the position after it."""
    if wire == _WIRE_VARINT:
        return _varint(data, pos, end)[1]
    if wire in (_WIRE_FIXED64, _WIRE_FIXED32):
        size = 8 if wire == _WIRE_FIXED64 else 4
        if end - pos < size:
            raise _Fail(
                pos, f"unknown field {number}: {size}-byte value runs past the end"
            )
        return pos + size
    if wire == _WIRE_LEN:
        length, pos = _varint(data, pos, end)
        if length > end - pos:
            raise _Fail(
                pos,
                f"unknown field {number}: length {length} runs past the end "
                f"({end - pos} bytes left)",
            )
        return pos + length
    if wire == _WIRE_START:
        if depth >= MAX_DEPTH:
            raise _Fail(at, f"nests deeper than {MAX_DEPTH} messages")
        return _walk(data, pos, end, _EMPTY, depth + 1, number)
    raise _Fail(at, f"invalid wire type {wire} (field {number})")


# An unknown group's contents: a message with no declared field.
_EMPTY = _Plan("")
