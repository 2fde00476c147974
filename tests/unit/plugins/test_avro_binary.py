"""Raw Avro datums: decoded completely, bad bytes refused cheaply."""

from __future__ import annotations

import io
import struct
import tracemalloc
from typing import Any

import fastavro
import pytest
from fastavro.validation import validate as fastavro_validate
from hypothesis import HealthCheck
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st

from narad.errors import InvalidPayload
from narad_avro import AvroSchema
from narad_avro import compile_validator
from narad_avro import parse
from narad_avro.model import Array
from narad_avro.model import AvroType
from narad_avro.model import Enum
from narad_avro.model import Fixed
from narad_avro.model import Map
from narad_avro.model import Primitive
from narad_avro.model import Record
from narad_avro.model import Union

PREFIX = "schema: payload is not an Avro datum of the topic schema: "

ORDER = {
    "type": "record",
    "name": "Order",
    "namespace": "shop",
    "fields": [
        {"name": "order_id", "type": "long"},
        {"name": "small", "type": "int"},
        {"name": "email", "type": "string"},
        {"name": "amount", "type": "double"},
        {"name": "ratio", "type": "float"},
        {"name": "paid", "type": "boolean"},
        {"name": "blob", "type": "bytes"},
        {"name": "nothing", "type": "null"},
        {
            "name": "status",
            "type": {
                "type": "enum",
                "name": "Status",
                "symbols": ["NEW", "PAID", "GONE"],
            },
        },
        {"name": "hash", "type": {"type": "fixed", "name": "Hash", "size": 4}},
        {"name": "tags", "type": {"type": "array", "items": "string"}},
        {"name": "counts", "type": {"type": "map", "values": "long"}},
        {"name": "discount", "type": ["null", "double", "string"]},
        {
            "name": "lines",
            "type": {
                "type": "array",
                "items": {
                    "type": "record",
                    "name": "Line",
                    "fields": [
                        {"name": "sku", "type": "string"},
                        {"name": "qty", "type": "int"},
                    ],
                },
            },
        },
    ],
}


def write(schema: AvroSchema, value: Any) -> bytes:
    out = io.BytesIO()
    fastavro.schemaless_writer(out, schema.fastavro, value)
    return out.getvalue()


def refusal(schema: AvroSchema | object, payload: bytes) -> str:
    parsed = schema if isinstance(schema, AvroSchema) else parse(schema)
    with pytest.raises(InvalidPayload) as caught:
        compile_validator(parsed, "binary").validate(payload)
    return caught.value.detail


def accepts(schema: AvroSchema | object, payload: bytes) -> None:
    parsed = schema if isinstance(schema, AvroSchema) else parse(schema)
    compile_validator(parsed, "binary").validate(payload)


def zigzag(n: int) -> bytes:
    z = (n << 1) ^ (n >> 63)
    out = bytearray()
    while True:
        if z < 0x80:
            out.append(z)
            return bytes(out)
        out.append((z & 0x7F) | 0x80)
        z >>= 7


# -- values of a schema, for hypothesis ---------------------------------------


def values(t: AvroType, depth: int = 0) -> st.SearchStrategy[Any]:
    if isinstance(t, Primitive):
        return {
            "null": st.none(),
            "boolean": st.booleans(),
            "int": st.integers(-(2**31), 2**31 - 1),
            "long": st.integers(-(2**63), 2**63 - 1),
            "float": st.floats(width=32, allow_nan=False),
            "double": st.floats(allow_nan=False),
            "bytes": st.binary(max_size=40),
            "string": st.text(max_size=20),
        }[t.name]
    if isinstance(t, Enum):
        return st.sampled_from(t.symbols)
    if isinstance(t, Fixed):
        return st.binary(min_size=t.size, max_size=t.size)
    if isinstance(t, Array):
        return st.lists(values(t.items, depth + 1), max_size=4)
    if isinstance(t, Map):
        return st.dictionaries(
            st.text(max_size=5), values(t.values, depth + 1), max_size=4
        )
    if isinstance(t, Union):
        return st.one_of(*(values(b, depth + 1) for b in t.branches))
    assert isinstance(t, Record)
    return st.fixed_dictionaries({f.name: values(f.type, depth + 1) for f in t.fields})


SCHEMA = parse(ORDER)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(values(SCHEMA.root))
def test_every_datum_fastavro_writes_is_accepted(value: Any) -> None:
    accepts(SCHEMA, write(SCHEMA, value))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(values(SCHEMA.root), st.data())
def test_mutated_datums_agree_with_fastavros_reader(
    value: Any, data: st.DataObject
) -> None:
    datum = bytearray(write(SCHEMA, value))
    for _ in range(data.draw(st.integers(1, 3))):
        action = data.draw(st.sampled_from(["flip", "cut", "append"]))
        if action == "flip" and datum:
            i = data.draw(st.integers(0, len(datum) - 1))
            datum[i] = data.draw(st.integers(0, 255))
        elif action == "cut" and datum:
            del datum[data.draw(st.integers(0, len(datum) - 1)) :]
        else:
            datum += data.draw(st.binary(min_size=1, max_size=3))
    payload = bytes(datum)
    try:
        accepts(SCHEMA, payload)
        ours = True
    except InvalidPayload:
        ours = False
    reader = io.BytesIO(payload)
    try:
        decoded = fastavro.schemaless_reader(reader, SCHEMA.fastavro, None)
    except Exception:
        assert not ours, "accepted bytes fastavro cannot decode"
        return
    complete = reader.tell() == len(payload)
    canonical = complete and write(SCHEMA, decoded) == payload
    if canonical:
        # fastavro decodes and re-encodes it byte for byte: a datum, unless a
        # value is out of its type's range (fastavro reads ints as longs).
        assert ours == fastavro_validate(decoded, SCHEMA.fastavro, raise_errors=False)
    elif not complete:
        assert not ours, "accepted bytes left over after the datum"


# -- nasty bytes ---------------------------------------------------------------


def test_trailing_and_missing_bytes() -> None:
    assert refusal("int", b"\x02\x00") == (
        PREFIX + "1 bytes left over after the datum (it ends at byte 1)"
    )
    assert refusal("int", b"") == PREFIX + "at '': the datum is truncated"
    assert refusal("double", b"\x00" * 7) == PREFIX + "at '': the datum is truncated"
    record = {
        "type": "record",
        "name": "R",
        "fields": [{"name": "a", "type": "int"}, {"name": "b", "type": "string"}],
    }
    assert refusal(record, b"\x02") == PREFIX + "at '/b': the datum is truncated"


def test_a_huge_claimed_length_is_refused_without_allocating_it() -> None:
    claim = zigzag(2**31) + b"x" * (1024 * 1024)
    tracemalloc.start()
    try:
        message = refusal("string", claim)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert (
        message
        == PREFIX + "at '': a string claims 2147483648 bytes, only 1048576 remain"
    )
    assert peak < 4 * 1024 * 1024
    assert "claims" in refusal("bytes", zigzag(2**62))


def test_negative_lengths_and_overlong_varints() -> None:
    assert (
        refusal("bytes", zigzag(-5))
        == PREFIX + "at '': bytes has a negative length (-5)"
    )
    assert "negative length" in refusal("string", zigzag(-1))
    assert "runs past 64 bits" in refusal("long", b"\xff" * 11)
    assert "out of long range" in refusal("long", b"\xff" * 9 + b"\x7f")
    assert "out of int range" in refusal("int", zigzag(2**31))
    accepts("int", zigzag(-(2**31)))
    accepts("long", zigzag(-(2**63)))


def test_huge_block_counts() -> None:
    assert refusal({"type": "array", "items": "int"}, zigzag(2**40) + b"\x00") == (
        PREFIX + "at '': an array block claims 1099511627776 items, only 1 bytes remain"
    )
    assert "a map block claims" in refusal(
        {"type": "map", "values": "null"}, zigzag(10**6)
    )
    # Items of no bytes cost nothing however many are claimed.
    nulls = {"type": "array", "items": "null"}
    accepts(nulls, zigzag(2**62) + zigzag(2**62) + b"\x00")
    empty = {"type": "record", "name": "E", "fields": [{"name": "n", "type": "null"}]}
    accepts({"type": "array", "items": empty}, zigzag(10**15) + b"\x00")


def test_blocks_with_byte_sizes() -> None:
    ints = {"type": "array", "items": "int"}
    accepts(ints, zigzag(-2) + zigzag(2) + b"\x02\x04" + b"\x00")
    assert "block says 3 bytes, its items take 2" in refusal(
        ints, zigzag(-2) + zigzag(3) + b"\x02\x04\x00" + b"\x00"
    )
    assert "array block claims 5 bytes" in refusal(
        ints, zigzag(-2) + zigzag(5) + b"\x02"
    )


def test_booleans_enums_unions_strings_fixed() -> None:
    assert refusal("boolean", b"\x02") == PREFIX + "at '': a boolean is 0 or 1, got 2"
    enum = {"type": "enum", "name": "E", "symbols": ["A", "B"]}
    accepts(enum, zigzag(1))
    assert "enum index 2 is not one of its 2 symbols" in refusal(enum, zigzag(2))
    assert "enum index -1" in refusal(enum, zigzag(-1))
    assert "union index 2 is not one of its 2 branches" in refusal(
        ["null", "int"], zigzag(2)
    )
    assert "not valid UTF-8" in refusal("string", zigzag(1) + b"\xff")
    # A lone surrogate written as UTF-8 bytes (CESU) is not UTF-8.
    assert "not valid UTF-8" in refusal("string", zigzag(3) + b"\xed\xa0\x80")
    accepts("string", zigzag(2) + "é".encode())
    assert "a fixed of 4 bytes is truncated" in refusal(
        {"type": "fixed", "name": "F", "size": 4}, b"abc"
    )


def test_floats_take_any_bits() -> None:
    accepts("double", struct.pack("<d", float("nan")))
    accepts("float", struct.pack("<f", float("inf")))


def test_logical_types() -> None:
    uuid = {"type": "string", "logicalType": "uuid"}
    text = b"123e4567-e89b-12d3-a456-426614174000"
    accepts(uuid, zigzag(len(text)) + text)
    assert "not a UUID" in refusal(uuid, zigzag(3) + b"abc")
    millis = {"type": "int", "logicalType": "time-millis"}
    accepts(millis, zigzag(86_399_999))
    assert "outside 0 to 86399999" in refusal(millis, zigzag(86_400_000))
    accepts({"type": "int", "logicalType": "date"}, zigzag(-1))
    decimal = {"type": "bytes", "logicalType": "decimal", "precision": 4, "scale": 2}
    accepts(decimal, zigzag(2) + b"\x01\x00")


def test_paths_locate_the_bad_value() -> None:
    value = {
        "order_id": 1,
        "small": 2,
        "email": "e",
        "amount": 1.0,
        "ratio": 1.0,
        "paid": True,
        "blob": b"",
        "nothing": None,
        "status": "NEW",
        "hash": b"abcd",
        "tags": [],
        "counts": {},
        "discount": None,
        "lines": [{"sku": "a", "qty": 1}, {"sku": "b", "qty": 2}],
    }
    datum = bytearray(write(SCHEMA, value))
    # The last line's sku: its length, then "b", its qty and the block end.
    assert datum[-4:] == b"\x02b\x04\x00"
    datum[-4] = 0x7E
    assert refusal(SCHEMA, bytes(datum)) == (
        PREFIX + "at '/lines/1/sku': a string claims 63 bytes, only 3 remain"
    )
    assert refusal(SCHEMA, bytes(datum[:-3])) == (
        PREFIX + "at '/lines/1/sku': a string claims 63 bytes, only 0 remain"
    )
    datum[-4] = 0x02
    assert refusal(SCHEMA, bytes(datum[:-2])) == (
        PREFIX + "at '/lines/1/qty': the datum is truncated"
    )


def test_recursion_is_bounded_by_the_depth_limit() -> None:
    node = parse(
        {
            "type": "record",
            "name": "Node",
            "fields": [{"name": "next", "type": ["null", "Node"]}],
        }
    )
    accepts(node, b"\x02" * 255 + b"\x00")
    message = refusal(node, b"\x02" * 100_000 + b"\x00")
    assert message.endswith("the datum nests deeper than 256 records")
    endless = {
        "type": "record",
        "name": "Loop",
        "fields": [{"name": "again", "type": "Loop"}],
    }
    assert "nests deeper" in refusal(endless, b"")


def test_a_record_of_many_null_fields_costs_nothing_per_item() -> None:
    wide = {
        "type": "record",
        "name": "W",
        "fields": [{"name": f"n{i}", "type": "null"} for i in range(500)]
        + [{"name": "x", "type": "boolean"}],
    }
    accepts({"type": "array", "items": wide}, zigzag(3) + b"\x01\x00\x01" + b"\x00")
