"""Avro schema documents: what registers, what is refused and where."""

from __future__ import annotations

import json
from decimal import Decimal

import pytest
from fastavro.schema import fingerprint
from fastavro.schema import to_parsing_canonical_form

from narad.errors import InvalidSchema
from narad_avro import parse
from narad_avro import parse_text
from narad_avro.model import Enum
from narad_avro.model import Fixed
from narad_avro.model import Record
from narad_avro.model import Union

ORDER = {
    "type": "record",
    "name": "Order",
    "namespace": "shop",
    "doc": "an order",
    "fields": [
        {"name": "order_id", "type": "long"},
        {"name": "amount", "type": "double"},
        {"name": "currency", "type": "string", "default": "EUR"},
        {
            "name": "status",
            "type": {
                "type": "enum",
                "name": "Status",
                "symbols": ["NEW", "PAID"],
                "default": "NEW",
            },
        },
        {"name": "id", "type": {"type": "fixed", "name": "Id", "size": 16}},
        {"name": "copy", "type": ["null", "Id"], "default": None},
    ],
}


def refusal(document: object) -> str:
    with pytest.raises(InvalidSchema) as caught:
        parse(document)
    return caught.value.detail


# -- accepted -----------------------------------------------------------------


@pytest.mark.parametrize(
    "document",
    [
        "int",
        "null",
        {"type": "string"},
        ["null", "string"],
        ORDER,
        {"type": "array", "items": "long"},
        {"type": "map", "values": {"type": "array", "items": "string"}},
        {"type": "error", "name": "Oops", "fields": []},
        {"type": "fixed", "name": "Empty", "size": 0},
        {"type": "string", "logicalType": "something-new"},
    ],
)
def test_registers(document: object) -> None:
    schema = parse(document)
    assert schema.canonical == to_parsing_canonical_form(document)


def test_names_and_namespaces_resolve() -> None:
    schema = parse(
        {
            "type": "record",
            "name": "a.b.Outer",
            "fields": [
                {
                    "name": "inner",
                    "type": {
                        "type": "record",
                        "name": "Inner",
                        "fields": [{"name": "x", "type": "int"}],
                    },
                },
                {"name": "again", "type": "Inner"},
                {"name": "full", "type": "a.b.Inner"},
                {
                    "name": "other",
                    "type": {
                        "type": "enum",
                        "name": "E",
                        "namespace": "c",
                        "symbols": ["X"],
                    },
                },
                {"name": "e", "type": "c.E"},
            ],
        }
    )
    root = schema.root
    assert isinstance(root, Record)
    assert root.fullname == "a.b.Outer"
    inner = root.fields[0].type
    assert root.fields[1].type is inner and root.fields[2].type is inner
    assert isinstance(inner, Record) and inner.fullname == "a.b.Inner"
    assert isinstance(root.fields[3].type, Enum)
    assert root.fields[3].type.fullname == "c.E"
    assert '"type":"a.b.Inner"' in schema.canonical


def test_a_recursive_record_is_a_cycle() -> None:
    schema = parse(
        {
            "type": "record",
            "name": "Node",
            "fields": [
                {"name": "value", "type": "int"},
                {"name": "next", "type": ["null", "Node"], "default": None},
            ],
        }
    )
    root = schema.root
    assert isinstance(root, Record)
    union = root.fields[1].type
    assert isinstance(union, Union) and union.branches[1] is root


def test_canonical_form_and_fingerprint_match_fastavros() -> None:
    schema = parse(ORDER)
    canonical = to_parsing_canonical_form(ORDER)
    assert schema.canonical == canonical
    assert schema.fingerprint == int(fingerprint(canonical, "CRC-64-AVRO"), 16)


def test_logical_types_are_kept() -> None:
    schema = parse(
        {
            "type": "record",
            "name": "R",
            "fields": [
                {
                    "name": "price",
                    "type": {
                        "type": "bytes",
                        "logicalType": "decimal",
                        "precision": 9,
                        "scale": 2,
                    },
                },
                {
                    "name": "big",
                    "type": {
                        "type": "fixed",
                        "name": "D",
                        "size": 8,
                        "logicalType": "decimal",
                        "precision": 18,
                    },
                },
                {"name": "day", "type": {"type": "int", "logicalType": "date"}},
                {"name": "id", "type": {"type": "string", "logicalType": "uuid"}},
                {
                    "name": "took",
                    "type": {
                        "type": "fixed",
                        "name": "Dur",
                        "size": 12,
                        "logicalType": "duration",
                    },
                },
            ],
        }
    )
    root = schema.root
    assert isinstance(root, Record)
    price = root.fields[0].type
    assert price.logical is not None  # type: ignore[union-attr]
    assert (price.logical.precision, price.logical.scale) == (9, 2)  # type: ignore[union-attr]
    fixed = root.fields[1].type
    assert isinstance(fixed, Fixed) and fixed.logical is not None
    assert fixed.logical.scale == 0
    assert '"logicalType":"decimal"' not in schema.canonical
    assert '"logicalType":"decimal"' in schema.identity


def test_every_valid_default_is_accepted() -> None:
    fields = [
        ("null", None),
        ("boolean", True),
        ("int", -(2**31)),
        ("long", 2**63 - 1),
        ("float", Decimal("1.5")),
        ("double", 1),
        ("bytes", "\u00ff\u0000"),
        ("string", "\ud800"),  # a lone surrogate is a valid JSON string
        ({"type": "array", "items": "int"}, [1, 2]),
        ({"type": "map", "values": "string"}, {"a": "b"}),
        (["null", "int"], None),
        (["int", "null"], 3),
        ({"type": "fixed", "name": "F", "size": 2}, "ab"),
        ({"type": "enum", "name": "E", "symbols": ["A"]}, "A"),
        (
            {
                "type": "record",
                "name": "P",
                "fields": [
                    {"name": "x", "type": "int"},
                    {"name": "y", "type": "int", "default": 0},
                ],
            },
            {"x": 1},
        ),
    ]
    document = {
        "type": "record",
        "name": "R",
        "fields": [
            {"name": f"f{i}", "type": t, "default": d}
            for i, (t, d) in enumerate(fields)
        ],
    }
    schema = parse(document)
    assert isinstance(schema.root, Record)
    assert all(f.has_default for f in schema.root.fields)


# -- refused, with the place ----------------------------------------------------


def _record(*fields: dict) -> dict:
    return {"type": "record", "name": "R", "fields": list(fields)}


@pytest.mark.parametrize(
    ("document", "expected"),
    [
        (42, "/: a type is a name, an object or a union array, not a number"),
        ("Nope", "/: unknown type 'Nope'"),
        ({"name": "x"}, '/: a type object needs "type"'),
        ({"type": 3}, '/type: "type" must be a type name, not a number'),
        ({"type": "record", "fields": []}, '/: a record needs "name"'),
        ({"type": "record", "name": "R"}, '/: a record needs "fields"'),
        (
            {"type": "record", "name": "1R", "fields": []},
            "/name: '1R' is not a valid name",
        ),
        (
            {"type": "record", "name": "int", "fields": []},
            "/name: 'int' is a primitive",
        ),
        (
            {"type": "record", "name": "R", "namespace": "a..b", "fields": []},
            "/namespace: 'a..b' is not a valid namespace",
        ),
        (
            {"type": "record", "name": "R", "doc": 3, "fields": []},
            "/doc: doc must be a string",
        ),
        (_record({"type": "int"}), '/fields/0: a field needs "name"'),
        (_record({"name": "a"}), "/fields/0: field 'a' needs \"type\""),
        (
            _record({"name": "a-b", "type": "int"}),
            "/fields/0/name: 'a-b' is not a valid name",
        ),
        (
            _record({"name": "a", "type": "int"}, {"name": "a", "type": "long"}),
            "/fields/1/name: field 'a' is already field 0",
        ),
        (
            _record({"name": "a", "type": "int", "order": "up"}),
            '/fields/0/order: order must be "ascending"',
        ),
        (
            _record({"name": "a", "type": "int", "aliases": ["b c"]}),
            "/fields/0/aliases/0: an alias must be a name",
        ),
        (
            _record(
                {"name": "a", "type": {"type": "record", "name": "R", "fields": []}}
            ),
            "/fields/0/type/name: 'R' is defined twice",
        ),
        (
            _record(
                {"name": "a", "type": "Later"},
                {"name": "b", "type": {"type": "fixed", "name": "Later", "size": 1}},
            ),
            "/fields/0/type: unknown type 'Later' (a named type is defined "
            "before it is used)",
        ),
        ({"type": "enum", "name": "E"}, '/: an enum needs "symbols"'),
        (
            {"type": "enum", "name": "E", "symbols": ["A", "A"]},
            "/symbols/1: symbol 'A' is already symbol 0",
        ),
        (
            {"type": "enum", "name": "E", "symbols": ["A", "1"]},
            "/symbols/1: a symbol must be a name",
        ),
        (
            {"type": "enum", "name": "E", "symbols": ["A"], "default": "B"},
            "/default: the default must be one of the symbols",
        ),
        ({"type": "fixed", "name": "F", "size": -1}, '/size: a fixed needs "size"'),
        ({"type": "fixed", "name": "F", "size": True}, '/size: a fixed needs "size"'),
        ({"type": "fixed", "name": "F"}, '/: a fixed needs "size"'),
        ({"type": "array"}, '/: an array needs "items"'),
        ({"type": "map"}, '/: a map needs "values"'),
        ([], "/: a union needs at least one branch"),
        (["int", ["null"]], "/1: a union may not directly contain a union"),
        (["int", "int"], "/1: the union already has a branch of type 'int' (branch 0)"),
        (
            [{"type": "array", "items": "int"}, {"type": "array", "items": "long"}],
            "/1: the union already has a branch of type 'array'",
        ),
        (
            {"type": "record", "name": "R", "aliases": "x", "fields": []},
            "/aliases: aliases must be an array",
        ),
        (
            {"type": "string", "logicalType": "date"},
            "/logicalType: logical type 'date' annotates int, not string",
        ),
        ({"type": "bytes", "logicalType": "decimal"}, "/: a decimal needs a precision"),
        (
            {"type": "bytes", "logicalType": "decimal", "precision": 2, "scale": 3},
            "/scale: a decimal's scale is an integer from 0 to its precision",
        ),
        (
            {
                "type": "fixed",
                "name": "F",
                "size": 2,
                "logicalType": "decimal",
                "precision": 5,
            },
            "/precision: a fixed of 2 bytes holds at most 4 decimal digits",
        ),
        (
            {"type": "fixed", "name": "F", "size": 2, "logicalType": "duration"},
            "/logicalType: logical type 'duration' needs a fixed of size 12, not 2",
        ),
        (
            {"type": "long", "logicalType": 7},
            "/logicalType: logicalType must be a string",
        ),
    ],
)
def test_refused_where(document: object, expected: str) -> None:
    assert refusal(document).startswith("schema: " + expected)


@pytest.mark.parametrize(
    ("field_type", "default", "expected"),
    [
        ("int", "str", "/fields/0/default: expected an integer (int), got string"),
        ("int", 2**31, "/fields/0/default: 2147483648 is out of int range"),
        ("long", -(2**63) - 1, "is out of long range"),
        ("int", Decimal("1.0"), "expected an integer (int), got number"),
        ("int", True, "expected an integer (int), got boolean"),
        ("float", True, "expected a number (float), got boolean"),
        ("float", Decimal("1e39"), "the number is out of float range"),
        ("double", Decimal("1e400"), "the number is out of double range"),
        ("null", 0, "expected null, got number"),
        ("boolean", "true", "expected boolean, got string"),
        ("string", None, "expected string, got null"),
        ("bytes", "\u0100", "bytes are written as code points U+0000 to U+00FF"),
        (
            ["null", "int"],
            3,
            "expected null, got number (a union's default is for its first branch)",
        ),
        ({"type": "array", "items": "int"}, [1, "x"], "/fields/0/default/1: expected"),
        (
            {"type": "map", "values": "int"},
            {"a/b": "x"},
            "/fields/0/default/a~1b: expected",
        ),
        ({"type": "map", "values": "int"}, [], "expected an object (map), got array"),
        (
            {"type": "fixed", "name": "F", "size": 2},
            "abc",
            "fixed F holds 2 bytes, the string has 3",
        ),
        (
            {"type": "enum", "name": "E", "symbols": ["A"]},
            "B",
            "'B' is not a symbol of enum E",
        ),
        (
            {"type": "record", "name": "P", "fields": [{"name": "x", "type": "int"}]},
            {},
            "/fields/0/default: missing field 'x', which has no default",
        ),
        (
            {"type": "record", "name": "P", "fields": [{"name": "x", "type": "int"}]},
            {"x": "no"},
            "/fields/0/default/x: expected an integer",
        ),
    ],
)
def test_defaults_must_fit_their_type(
    field_type: object, default: object, expected: str
) -> None:
    message = refusal(_record({"name": "a", "type": field_type, "default": default}))
    assert expected in message, message


# -- limits -------------------------------------------------------------------


def test_nesting_beyond_64_levels_is_refused_before_the_walk() -> None:
    document: object = "int"
    for _ in range(65):
        document = {"type": "array", "items": document}
    assert refusal(document) == "schema: nests deeper than 64 levels"
    raw = json.dumps(document).encode()
    with pytest.raises(InvalidSchema, match="nests deeper than 64 levels"):
        parse_text(raw)


def test_nesting_within_64_levels_parses() -> None:
    document: object = "int"
    for _ in range(64):  # one JSON level each
        document = {"type": "array", "items": document}
    assert parse(document).canonical.count("array") == 64


def test_a_document_over_256_kib_is_refused() -> None:
    fields = [{"name": f"f{i}", "type": "string", "doc": "x" * 300} for i in range(900)]
    assert refusal(_record(*fields)) == "schema: is larger than 256 KiB"


def test_text_must_be_one_json_text() -> None:
    with pytest.raises(InvalidSchema, match="schema: "):
        parse_text(b'{"type": "int"} x')
    with pytest.raises(InvalidSchema, match="duplicate key"):
        parse_text(b'{"type": "int", "type": "long"}')
    with pytest.raises(InvalidSchema, match="NaN"):
        parse_text(
            b'{"type":"record","name":"R","fields":[{"name":"a","type":"double","default":NaN}]}'
        )


def test_text_is_stored_compact_and_exact() -> None:
    field = b'{"name":"a","type":"double","default":1E+2}'
    schema = parse_text(
        b'{ "type" : "record", "name":"R", "fields": [\n ' + field + b"]}"
    )
    assert schema.stored == b'{"type":"record","name":"R","fields":[' + field + b"]}"


def test_fastavro_is_a_second_opinion() -> None:
    # Both refuse it; ours says where.
    assert refusal(_record({"name": "a", "type": "int", "default": "x"})).startswith(
        "schema: /fields/0/default"
    )


# -- identity -----------------------------------------------------------------


def _variant(**changes: object) -> dict:
    document = json.loads(json.dumps(ORDER))
    for key, value in changes.items():
        document[key] = value
    return document


def test_formatting_key_order_and_namespace_spelling_are_the_same_schema() -> None:
    base = parse(ORDER)
    reordered = parse(dict(reversed(list(ORDER.items()))))
    spelled = _variant(name="shop.Order")
    del spelled["namespace"]
    assert base.same_as(reordered)
    assert base.same_as(parse(spelled))
    assert parse_text(json.dumps(ORDER, indent=2).encode()).same_as(base)


def test_a_number_spelled_otherwise_is_the_same_default() -> None:
    a = parse(_record({"name": "a", "type": "double", "default": 1}))
    b = parse(_record({"name": "a", "type": "double", "default": Decimal("1.0")}))
    assert a.same_as(b)


@pytest.mark.parametrize(
    "change",
    [
        lambda d: d["fields"][2].update(default="USD"),
        lambda d: d["fields"][2].update(aliases=["money"]),
        lambda d: d.update(aliases=["Purchase"]),
        lambda d: d["fields"][1].update(
            type={"type": "bytes", "logicalType": "decimal", "precision": 9}
        ),
        lambda d: d["fields"][0].update(
            type={"type": "long", "logicalType": "timestamp-millis"}
        ),
        lambda d: d["fields"][3]["type"].update(default="PAID"),
        lambda d: d.update(doc="another doc"),
        lambda d: d["fields"][0].update(doc="the id"),
    ],
)
def test_defaults_aliases_logical_types_and_docs_make_another_schema(change) -> None:
    document = json.loads(json.dumps(ORDER))
    change(document)
    changed = parse(document)
    assert not changed.same_as(parse(ORDER))


def test_docs_leave_the_canonical_form_alone() -> None:
    document = _variant(doc="changed")
    assert parse(document).canonical == parse(ORDER).canonical


def test_order_and_other_properties_are_not_part_of_identity() -> None:
    document = json.loads(json.dumps(ORDER))
    document["fields"][0]["order"] = "descending"
    document["connect.name"] = "x"
    assert parse(document).same_as(parse(ORDER))
