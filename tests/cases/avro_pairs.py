"""Avro schema pairs with stated verdicts under BACKWARD and FORWARD.

Each case is ``(name, old, new, backward, forward)``: whether the new schema
may follow the old one in that mode, by Avro's resolution rules (the
specification's "Schema Resolution" and the pairs of Apache Avro's
``TestSchemaCompatibility`` and Confluent's ``AvroCompatibilityTest``: a
reader field without default the writer lacks, promotions one way only,
enum symbols the reader lacks, union branches the reader cannot take,
aliases on the reader's side, fixed sizes).
"""

from __future__ import annotations

from typing import Any


def record(*fields: dict[str, Any], name: str = "Order") -> dict[str, Any]:
    return {"type": "record", "name": name, "namespace": "shop", "fields": list(fields)}


def field(name: str, type_: Any, **extra: Any) -> dict[str, Any]:
    return {"name": name, "type": type_, **extra}


ID = field("id", "string")


def enum(symbols: list[str], **extra: Any) -> dict[str, Any]:
    return {"type": "enum", "name": "Status", "symbols": symbols, **extra}


def fixed(size: int, **extra: Any) -> dict[str, Any]:
    return {"type": "fixed", "name": "Hash", "size": size, **extra}


def nested(*fields: dict[str, Any]) -> dict[str, Any]:
    return record(ID, field("line", record(*fields, name="Line")))


def linked(value: str, *more: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "record",
        "name": "Node",
        "fields": [field("v", value), field("next", ["null", "Node"]), *more],
    }


CASES: list[tuple[str, Any, Any, bool, bool]] = [
    # fields added / removed, with and without defaults
    (
        "add_with_default",
        record(ID),
        record(ID, field("n", "int", default=0)),
        True,
        True,
    ),
    ("add_without_default", record(ID), record(ID, field("n", "int")), False, True),
    (
        "remove_with_default",
        record(ID, field("n", "int", default=0)),
        record(ID),
        True,
        True,
    ),
    ("remove_without_default", record(ID, field("n", "int")), record(ID), True, False),
    # promotions
    ("int_to_long", record(field("n", "int")), record(field("n", "long")), True, False),
    ("long_to_int", record(field("n", "long")), record(field("n", "int")), False, True),
    (
        "int_to_double",
        record(field("n", "int")),
        record(field("n", "double")),
        True,
        False,
    ),
    (
        "float_to_double",
        record(field("n", "float")),
        record(field("n", "double")),
        True,
        False,
    ),
    (
        "string_to_bytes",
        record(field("n", "string")),
        record(field("n", "bytes")),
        True,
        True,
    ),
    (
        "int_to_string",
        record(field("n", "int")),
        record(field("n", "string")),
        False,
        False,
    ),
    # enum symbols
    (
        "enum_symbol_added",
        record(field("s", enum(["A", "B"]))),
        record(field("s", enum(["A", "B", "C"]))),
        True,
        False,
    ),
    (
        "enum_symbol_added_with_default",
        record(field("s", enum(["A", "B"], default="A"))),
        record(field("s", enum(["A", "B", "C"], default="A"))),
        True,
        True,
    ),
    (
        "enum_symbol_removed",
        record(field("s", enum(["A", "B", "C"]))),
        record(field("s", enum(["A", "B"]))),
        False,
        True,
    ),
    # unions
    (
        "union_widened",
        record(field("n", ["null", "string"])),
        record(field("n", ["null", "string", "int"])),
        True,
        False,
    ),
    (
        "union_narrowed",
        record(field("n", ["null", "string", "int"])),
        record(field("n", ["null", "string"])),
        False,
        True,
    ),
    (
        "union_from_its_branch",
        record(field("n", "string")),
        record(field("n", ["null", "string"])),
        True,
        False,
    ),
    # renames through aliases (aliases act on the reader's side)
    (
        "rename_with_alias",
        record(field("n", "int")),
        record(field("m", "int", aliases=["n"])),
        True,
        False,
    ),
    (
        "rename_without_alias",
        record(field("n", "int")),
        record(field("m", "int")),
        False,
        False,
    ),
    # fixed sizes
    (
        "fixed_same_size",
        record(field("h", fixed(4))),
        record(field("h", fixed(4, aliases=["Digest"]))),
        True,
        True,
    ),
    (
        "fixed_size_changed",
        record(field("h", fixed(4))),
        record(field("h", fixed(8))),
        False,
        False,
    ),
    # nested and recursive records
    (
        "nested_add_with_default",
        nested(field("q", "int")),
        nested(field("q", "int"), field("p", "double", default=0)),
        True,
        True,
    ),
    (
        "nested_add_without_default",
        nested(field("q", "int")),
        nested(field("q", "int"), field("p", "double")),
        False,
        True,
    ),
    (
        "recursive_add_with_default",
        linked("int"),
        linked("int", field("w", "long", default=0)),
        True,
        True,
    ),
    ("recursive_type_changed", linked("int"), linked("string"), False, False),
]
