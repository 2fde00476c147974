"""Validate raw Avro datums (binary encoding, no container header).

A payload passes when it decodes completely under the schema: every byte
read, none left over, as the event store checks its writes. The check walks
the bytes with one compiled skipper per type and builds no values, so it
allocates nothing a datum merely claims:

- a length (string, bytes) is checked against the bytes that remain before
  anything is sliced, so a 1 MiB body claiming a 2 GiB string is refused at
  once; negative lengths and varints longer than 64 bits are refused;
- an array or map block of ``n`` items is refused when ``n`` exceeds the bytes
  left and each item takes at least one byte (so the walk always advances);
  items that take no bytes at all (``null``, ``fixed`` of size 0, records of
  those) are skipped in one step however many a block claims, where
  fastavro's reader would loop over all of them;
- a negative block count carries the block's byte size (the specification's
  skippable blocks); the items must fill it exactly;
- records nest at most 256 levels (the payload depth limit), so a recursive
  schema cannot recurse without bound;
- strings are strict UTF-8 (no lone surrogates), booleans are 0 or 1, ``int``
  values fit 32 bits and ``long`` values 64, enum and union indexes are in
  range; logical types: ``uuid`` strings are UUIDs, ``time-millis`` and
  ``time-micros`` within a day.

Work is linear in the payload: each step consumes at least one byte, except
the constant-time skips above.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from narad.errors import InvalidPayload
from narad_avro.compiling import TypeCompiler
from narad_avro.jsonvalues import cut
from narad_avro.limits import PAYLOAD_DEPTH
from narad_avro.model import Array
from narad_avro.model import AvroType
from narad_avro.model import Enum
from narad_avro.model import Fixed
from narad_avro.model import Map
from narad_avro.model import Primitive
from narad_avro.model import Record
from narad_avro.model import Union
from narad_avro.parsing import AvroSchema
from narad_avro.text import escape

__all__ = ("BinaryValidator", "Malformed", "compile_skip")

# skip(buf, pos, depth) -> the position after the datum; raises Malformed
# (or IndexError at the end of the bytes).
Skip = Callable[[bytes, int, int], int]

_UUID = re.compile(
    rb"[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}\Z"
)
_DAY_MILLIS = 86_400_000


class Malformed(Exception):
    """The bytes are not a datum of the schema; tokens locate it (inner first)."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message
        self.tokens: list[str] = []

    @property
    def pointer(self) -> str:
        return "".join("/" + escape(t) for t in reversed(self.tokens))


class BinaryValidator:
    """A schema's raw-datum check, compiled once."""

    def __init__(self, schema: AvroSchema) -> None:
        self.schema = schema
        self.skip = compile_skip(schema.root)

    def validate(self, payload: bytes) -> None:
        """Check that ``payload`` is exactly one datum of the schema.

        Raises:
            InvalidPayload: it is not; the message says what and where (the
                path of the value in the datum), within 2 KiB.
        """
        try:
            end = self.skip(payload, 0, 0)
        except Malformed as exc:
            raise InvalidPayload(_message(exc)) from None
        except IndexError:
            raise InvalidPayload(_message(_truncated())) from None
        if end != len(payload):
            raise InvalidPayload(
                cut(
                    "schema: payload is not an Avro datum of the topic schema: "
                    f"{len(payload) - end} bytes left over after the datum "
                    f"(it ends at byte {end})"
                )
            )


def _message(exc: Malformed) -> str:
    return cut(
        "schema: payload is not an Avro datum of the topic schema: "
        f"at '{exc.pointer}': {exc.message}"
    )


def _truncated() -> Malformed:
    return Malformed("the datum is truncated")


def compile_skip(root: AvroType) -> Skip:
    """The skipper of ``root`` (see the module's rules)."""
    return _Compiler().build(root)


# -- varints ------------------------------------------------------------------


def _varint(buf: bytes, pos: int, bits: int) -> tuple[int, int]:
    """A zig-zag varint of at most ``bits`` bits: (value, next position)."""
    result = 0
    shift = 0
    while True:
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            break
        shift += 7
        if shift >= bits + 6:  # ceil(bits / 7) bytes at most
            raise Malformed(f"a varint runs past {bits} bits")
    if result >> bits:
        raise Malformed(f"a varint is out of {'int' if bits == 32 else 'long'} range")
    return (result >> 1) ^ -(result & 1), pos


def _skip_int(buf: bytes, pos: int, depth: int) -> int:
    if buf[pos] < 0x80:
        return pos + 1
    return _varint(buf, pos, 32)[1]


def _skip_long(buf: bytes, pos: int, depth: int) -> int:
    if buf[pos] < 0x80:
        return pos + 1
    return _varint(buf, pos, 64)[1]


def _length(buf: bytes, pos: int, what: str) -> tuple[int, int]:
    """A length prefix, checked against the bytes that remain."""
    b = buf[pos]
    if b < 0x80:
        size, pos = (b >> 1) ^ -(b & 1), pos + 1
    else:
        size, pos = _varint(buf, pos, 64)
    if size < 0:
        raise Malformed(f"{what} has a negative length ({size})")
    if size > len(buf) - pos:
        raise Malformed(f"{what} claims {size} bytes, only {len(buf) - pos} remain")
    return size, pos + size


# -- primitives ---------------------------------------------------------------


def _skip_null(buf: bytes, pos: int, depth: int) -> int:
    return pos


def _skip_boolean(buf: bytes, pos: int, depth: int) -> int:
    if buf[pos] > 1:
        raise Malformed(f"a boolean is 0 or 1, got {buf[pos]}")
    return pos + 1


def _skip_float(buf: bytes, pos: int, depth: int) -> int:
    if pos + 4 > len(buf):
        raise _truncated()
    return pos + 4


def _skip_double(buf: bytes, pos: int, depth: int) -> int:
    if pos + 8 > len(buf):
        raise _truncated()
    return pos + 8


def _skip_bytes(buf: bytes, pos: int, depth: int) -> int:
    return _length(buf, pos, "bytes")[1]


def _skip_string(buf: bytes, pos: int, depth: int) -> int:
    b = buf[pos]
    if b < 0x80 and not b & 1:  # a short length: the common case
        start = pos + 1
        end = start + (b >> 1)
        if end > len(buf):
            raise Malformed(
                f"a string claims {b >> 1} bytes, only {len(buf) - start} remain"
            )
    else:
        size, end = _length(buf, pos, "a string")
        start = end - size
    try:
        buf[start:end].decode()
    except UnicodeDecodeError as exc:
        raise Malformed(
            f"a string is not valid UTF-8 (at its byte {exc.start})"
        ) from None
    return end


def _skip_uuid(buf: bytes, pos: int, depth: int) -> int:
    size, end = _length(buf, pos, "a string")
    if _UUID.match(buf[end - size : end]) is None:
        raise Malformed("a uuid string is not a UUID")
    return end


def _day(unit: int, bits: int) -> Skip:
    top = _DAY_MILLIS * unit

    def time_of_day(buf: bytes, pos: int, depth: int) -> int:
        value, end = _varint(buf, pos, bits)
        if not 0 <= value < top:
            raise Malformed(f"a time of day is {value}, outside 0 to {top - 1}")
        return end

    return time_of_day


_PRIMITIVES: dict[str, Skip] = {
    "null": _skip_null,
    "boolean": _skip_boolean,
    "int": _skip_int,
    "long": _skip_long,
    "float": _skip_float,
    "double": _skip_double,
    "bytes": _skip_bytes,
    "string": _skip_string,
}


# -- compiled types -----------------------------------------------------------


class _Compiler(TypeCompiler[Skip]):
    def __init__(self) -> None:
        super().__init__()
        self.empty: dict[int, bool] = {}

    def zero_width(self, t: AvroType) -> bool:
        """Whether ``t``'s datums take no bytes (and so always decode)."""
        if isinstance(t, Primitive):
            return t.name == "null"
        if isinstance(t, Fixed):
            return t.size == 0
        if not isinstance(t, Record):
            return False
        known = self.empty.get(id(t))
        if known is None:
            # In progress counts as not empty: a cycle of records that hold
            # nothing else has no finite value at all.
            self.empty[id(t)] = False
            known = all(self.zero_width(f.type) for f in t.fields)
            self.empty[id(t)] = known
        return known

    def primitive(self, t: Primitive) -> Skip:
        logical = t.logical.name if t.logical is not None else None
        if logical == "uuid":
            return _skip_uuid
        if logical == "time-millis":
            return _day(1, 32)
        if logical == "time-micros":
            return _day(1000, 64)
        return _PRIMITIVES[t.name]

    def record(self, t: Record) -> Skip:
        cell: list[Skip] = []

        def forward(buf: bytes, pos: int, depth: int) -> int:
            return cell[0](buf, pos, depth)

        self.named[id(t)] = forward
        # Fields that take no bytes cannot fail: leave them out of the walk.
        fields = [
            (f.name, self.build(f.type))
            for f in t.fields
            if not self.zero_width(f.type)
        ]

        def record(buf: bytes, pos: int, depth: int) -> int:
            if depth >= PAYLOAD_DEPTH:
                raise Malformed(f"the datum nests deeper than {PAYLOAD_DEPTH} records")
            depth += 1
            for name, skip in fields:
                try:
                    pos = skip(buf, pos, depth)
                except Malformed as exc:
                    exc.tokens.append(name)
                    raise
                except IndexError:
                    exc = _truncated()
                    exc.tokens.append(name)
                    raise exc from None
            return pos

        cell.append(record)
        self.named[id(t)] = record
        return record

    def enum(self, t: Enum) -> Skip:
        count = len(t.symbols)

        def enum(buf: bytes, pos: int, depth: int) -> int:
            b = buf[pos]
            if b < 0x80:
                index, pos = (b >> 1) ^ -(b & 1), pos + 1
            else:
                index, pos = _varint(buf, pos, 32)
            if not 0 <= index < count:
                raise Malformed(f"enum index {index} is not one of its {count} symbols")
            return pos

        return enum

    def fixed(self, t: Fixed) -> Skip:
        size = t.size

        def fixed(buf: bytes, pos: int, depth: int) -> int:
            end = pos + size
            if end > len(buf):
                raise Malformed(f"a fixed of {size} bytes is truncated")
            return end

        return fixed

    def union(self, t: Union) -> Skip:
        branches = [self.build(b) for b in t.branches]
        count = len(branches)

        def union(buf: bytes, pos: int, depth: int) -> int:
            b = buf[pos]
            if b < 0x80:
                index, pos = (b >> 1) ^ -(b & 1), pos + 1
            else:
                index, pos = _varint(buf, pos, 64)
            if not 0 <= index < count:
                raise Malformed(
                    f"union index {index} is not one of its {count} branches"
                )
            return branches[index](buf, pos, depth)

        return union

    def array(self, t: Array) -> Skip:
        item = self.build(t.items)
        return _blocks(None, item, self.zero_width(t.items), "an array")

    def map(self, t: Map) -> Skip:
        return _blocks(_skip_string, self.build(t.values), False, "a map")


def _blocks(key: Skip | None, item: Skip, empty: bool, what: str) -> Skip:
    """Skip an array (``key`` None) or a map: blocks of items, then a 0."""

    def blocks(buf: bytes, pos: int, depth: int) -> int:
        index = 0
        while True:
            b = buf[pos]
            if b < 0x80:
                count, pos = (b >> 1) ^ -(b & 1), pos + 1
            else:
                count, pos = _varint(buf, pos, 64)
            if count == 0:
                return pos
            size = -1
            if count < 0:
                count = -count
                size, start = _length(buf, pos, f"{what} block")
                pos = start - size
            if empty:  # items of no bytes: nothing to walk
                index += count
                continue
            if count > len(buf) - pos:
                raise Malformed(
                    f"{what} block claims {count} items, only {len(buf) - pos} "
                    "bytes remain"
                )
            start = pos
            for _ in range(count):
                try:
                    if key is not None:
                        pos = key(buf, pos, depth)
                    pos = item(buf, pos, depth)
                except Malformed as exc:
                    exc.tokens.append(str(index))
                    raise
                except IndexError:
                    exc = _truncated()
                    exc.tokens.append(str(index))
                    raise exc from None
                index += 1
            if size >= 0 and pos - start != size:
                raise Malformed(
                    f"{what} block says {size} bytes, its items take {pos - start}"
                )

    return blocks
