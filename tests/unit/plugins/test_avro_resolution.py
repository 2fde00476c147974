"""Avro compatibility: each resolution rule, suite-style pairs, the modes.

The pairs below are written in the spirit of Apache Avro's
TestSchemaCompatibility (reader, writer, verdict), not copied from it.
"""

from __future__ import annotations

import copy

import pytest

from narad_avro import Direction
from narad_avro import Mode
from narad_avro import check
from narad_avro import parse
from narad_avro import read_violations


def record(*fields: dict, name: str = "R", **extra: object) -> dict:
    return {"type": "record", "name": name, "fields": list(fields), **extra}


def f(name: str, avro_type: object, **extra: object) -> dict:
    return {"name": name, "type": avro_type, **extra}


def backward(new: object, old: object) -> list[tuple[str, str]]:
    """(pointer, rule) of every violation: the new schema reading old data."""
    found = read_violations(parse(new), parse(old), new_is_reader=True)
    return [(v.pointer, v.rule) for v in found]


def forward(new: object, old: object) -> list[tuple[str, str]]:
    found = read_violations(parse(old), parse(new), new_is_reader=False)
    return [(v.pointer, v.rule) for v in found]


# -- each rule, compatible and not --------------------------------------------------


def test_field_added_with_and_without_default() -> None:
    old = record(f("a", "int"))
    assert backward(record(f("a", "int"), f("b", "int", default=0)), old) == []
    assert backward(record(f("a", "int"), f("b", "int")), old) == [
        ("/fields/1", "field_added_without_default")
    ]
    # Forward: the old reader ignores the new field either way.
    assert forward(record(f("a", "int"), f("b", "int")), old) == []


def test_field_removed_with_and_without_default() -> None:
    old = record(f("a", "int"), f("b", "int", default=0), f("c", "int"))
    new = record(f("a", "int"))
    assert backward(new, old) == []
    assert forward(new, old) == [("/fields", "field_removed_without_default")]


@pytest.mark.parametrize(
    ("writer", "reader"),
    [
        ("int", "long"),
        ("int", "float"),
        ("int", "double"),
        ("long", "float"),
        ("long", "double"),
        ("float", "double"),
        ("string", "bytes"),
        ("bytes", "string"),
    ],
)
def test_promotions(writer: str, reader: str) -> None:
    old = record(f("a", writer))
    new = record(f("a", reader))
    assert backward(new, old) == []
    if {writer, reader} != {"string", "bytes"}:
        assert forward(new, old) == [("/fields/0/type", "type_changed")]


@pytest.mark.parametrize(
    ("writer", "reader"),
    [("long", "int"), ("double", "float"), ("string", "int"), ("boolean", "null")],
)
def test_type_changed(writer: str, reader: str) -> None:
    assert backward(record(f("a", reader)), record(f("a", writer))) == [
        ("/fields/0/type", "type_changed")
    ]


def test_kinds_that_differ_are_type_changes() -> None:
    array = {"type": "array", "items": "int"}
    mapping = {"type": "map", "values": "int"}
    assert backward(array, mapping) == [("", "type_changed")]
    assert backward(record(), "int") == [("", "type_changed")]


def test_enum_symbols_added_and_removed() -> None:
    def enum(*symbols: str, **extra: object) -> dict:
        return {"type": "enum", "name": "E", "symbols": list(symbols), **extra}

    assert backward(enum("A", "B", "C"), enum("A", "B")) == []
    assert backward(enum("A"), enum("A", "B", "C")) == [
        ("/symbols", "enum_symbol_removed"),
        ("/symbols", "enum_symbol_removed"),
    ]
    assert forward(enum("A", "B", "C"), enum("A", "B")) == [
        ("/symbols/2", "enum_symbol_added")
    ]
    # With a default on the reader, unknown symbols read as it.
    assert backward(enum("A", default="A"), enum("A", "B")) == []
    assert forward(enum("A", "B", "C"), enum("A", "B", default="A")) == []


def test_fixed_size_changed() -> None:
    def fixed(size: int) -> dict:
        return {"type": "fixed", "name": "F", "size": size}

    assert backward(fixed(4), fixed(4)) == []
    assert backward(fixed(8), fixed(4)) == [("/size", "fixed_size_changed")]


def test_names_and_aliases() -> None:
    old = record(f("a", "int"), name="Old")
    assert backward(record(f("a", "int"), name="New"), old) == [
        ("/name", "name_mismatch")
    ]
    assert backward(record(f("a", "int"), name="New", aliases=["Old"]), old) == []
    # The namespace is not part of the match (the unqualified name is).
    assert backward(record(f("a", "int"), name="x.Old"), old) == []
    # Aliases help the reader only: forward, the old reader lacks one.
    assert forward(record(f("a", "int"), name="New", aliases=["Old"]), old) == [
        ("/name", "name_mismatch")
    ]
    enum_old = {"type": "enum", "name": "E1", "symbols": ["A"]}
    enum_new = {"type": "enum", "name": "E2", "symbols": ["A"]}
    assert backward(enum_new, enum_old) == [("/name", "name_mismatch")]
    assert backward({**enum_new, "aliases": ["E1"]}, enum_old) == []


def test_field_renamed_through_an_alias() -> None:
    old = record(f("user_id", "int"))
    assert backward(record(f("customer_id", "int")), old) == [
        ("/fields/0", "field_added_without_default")
    ]
    assert backward(record(f("customer_id", "int", aliases=["user_id"])), old) == []
    # Old readers do not know the new name: forward breaks.
    assert forward(record(f("customer_id", "int", aliases=["user_id"])), old) == [
        ("/fields", "field_removed_without_default")
    ]


def test_unions_widened_and_narrowed() -> None:
    narrow = record(f("a", ["null", "string"]))
    wide = record(f("a", ["null", "string", "int"]))
    assert backward(wide, narrow) == []
    assert backward(narrow, wide) == [("/fields/0/type", "union_branch_missing")]
    assert forward(wide, narrow) == [("/fields/0/type/2", "union_branch_missing")]
    assert forward(narrow, wide) == []


def test_union_to_and_from_a_single_type() -> None:
    single = record(f("a", "string"))
    union = record(f("a", ["null", "string"]))
    assert backward(union, single) == []
    assert backward(single, union) == [("/fields/0/type", "union_branch_missing")]
    assert forward(single, union) == []
    assert forward(union, single) == [("/fields/0/type/0", "union_branch_missing")]
    # A branch promotes: int written, a [null, long] reader reads it.
    assert backward(record(f("a", ["null", "long"])), record(f("a", "int"))) == []


def test_a_union_branch_of_the_same_name_reports_its_own_violations() -> None:
    inner_old = record(f("x", "int"), name="I")
    inner_new = record(f("x", "int"), f("y", "int"), name="I")
    old = record(f("a", ["null", inner_old]))
    new = record(f("a", ["null", inner_new]))
    assert backward(new, old) == [
        ("/fields/0/type/1/fields/1", "field_added_without_default")
    ]


def test_nested_records_arrays_and_maps_report_where() -> None:
    def schema(qty: str) -> dict:
        line = record(f("qty", qty), name="Line")
        return record(
            f("lines", {"type": "array", "items": line}),
            f("totals", {"type": "map", "values": qty if qty != "Line" else "int"}),
        )

    assert backward(schema("long"), schema("int")) == []
    assert backward(schema("int"), schema("long")) == [
        ("/fields/0/type/items/fields/0/type", "type_changed"),
        ("/fields/1/type/values", "type_changed"),
    ]


def test_recursive_records_terminate_and_compare() -> None:
    def node(value: str, extra: list | None = None) -> dict:
        return record(
            f("value", value),
            f("next", ["null", "Node"], default=None),
            *(extra or []),
            name="Node",
        )

    assert backward(node("long"), node("int")) == []
    assert backward(node("int"), node("long")) == [("/fields/0/type", "type_changed")]
    assert backward(node("int", [f("z", "int")]), node("int")) == [
        ("/fields/2", "field_added_without_default")
    ]
    mutual_old = record(
        f("b", ["null", record(f("a", ["null", "A"]), f("n", "int"), name="B")]),
        name="A",
    )
    mutual_new = copy.deepcopy(mutual_old)
    mutual_new["fields"][0]["type"][1]["fields"][1]["type"] = "string"
    assert backward(mutual_new, mutual_old) == [
        ("/fields/0/type/1/fields/1/type", "type_changed")
    ]


def test_every_violation_is_listed_once() -> None:
    shared = {"type": "fixed", "name": "F", "size": 4}
    old = record(f("a", shared), f("b", "F"), f("c", "int"))
    new = record(
        f("a", {**shared, "size": 8}), f("b", "F"), f("c", "string"), f("d", "int")
    )
    assert backward(new, old) == [
        ("/fields/0/type/size", "fixed_size_changed"),
        ("/fields/2/type", "type_changed"),
        ("/fields/3", "field_added_without_default"),
    ]


def test_docs_and_logical_types_are_compatible() -> None:
    old = record(f("a", "long"), f("b", "string"))
    new = record(
        f("a", {"type": "long", "logicalType": "timestamp-millis"}, doc="when"),
        f("b", "string"),
        doc="changed",
    )
    assert backward(new, old) == [] and forward(new, old) == []


def test_messages_say_old_and_new() -> None:
    old = record(f("a", "string"))
    new = record(f("a", "int"))
    (violation,) = read_violations(parse(new), parse(old), new_is_reader=True)
    assert violation.message == (
        "the old schema writes string, which the new schema cannot read as int"
    )
    assert str(violation) == f"at /fields/0/type: {violation.message}"
    assert violation.kind == violation.keyword == violation.rule == "type_changed"


# -- suite-style pairs: (reader, writer, compatible?) ---------------------------------

INT_LIST = record(
    f("head", "int"), f("tail", ["null", "IntList"], default=None), name="IntList"
)
LONG_LIST = record(
    f("head", "long"), f("tail", ["null", "LongList"], default=None), name="LongList"
)
LONG_LIST_AS_INT = record(
    f("head", "long"), f("tail", ["null", "IntList"], default=None), name="IntList"
)
ENUM_AB = {"type": "enum", "name": "E", "symbols": ["A", "B"]}
ENUM_ABC = {"type": "enum", "name": "E", "symbols": ["A", "B", "C"]}

PAIRS = [
    ("null", "null", True),
    ("int", "int", True),
    ("long", "int", True),
    ("int", "long", False),
    ("float", "long", True),
    ("double", "float", True),
    ("float", "double", False),
    ("bytes", "string", True),
    ("string", "bytes", True),
    ("boolean", "int", False),
    ({"type": "array", "items": "long"}, {"type": "array", "items": "int"}, True),
    ({"type": "array", "items": "int"}, {"type": "array", "items": "long"}, False),
    ({"type": "map", "values": "double"}, {"type": "map", "values": "float"}, True),
    ({"type": "map", "values": "int"}, {"type": "array", "items": "int"}, False),
    (ENUM_ABC, ENUM_AB, True),
    (ENUM_AB, ENUM_ABC, False),
    (["int", "string"], "int", True),
    (["int", "string"], ["string", "int"], True),
    ("int", ["int"], True),
    ("int", ["int", "string"], False),
    (["null", "long"], ["null", "int"], True),
    (["null", "int"], ["null", "long"], False),
    ([], "int", "unparsable"),
    (record(), record(), True),
    (record(f("a", "int", default=1)), record(), True),
    (record(f("a", "int")), record(), False),
    (record(), record(f("a", "int")), True),
    (record(f("a", "long")), record(f("a", "int")), True),
    (record(f("a", "int")), record(f("a", "long")), False),
    (record(f("b", "int", aliases=["a"])), record(f("a", "int")), True),
    (record(name="S", aliases=["R"]), record(), True),
    (record(name="S"), record(), False),
    (INT_LIST, INT_LIST, True),
    (LONG_LIST_AS_INT, INT_LIST, True),
    (INT_LIST, LONG_LIST_AS_INT, False),
    (LONG_LIST, INT_LIST, False),  # the names differ
    (
        {"type": "fixed", "name": "F", "size": 2},
        {"type": "fixed", "name": "F", "size": 2},
        True,
    ),
    (
        {"type": "fixed", "name": "F", "size": 3},
        {"type": "fixed", "name": "F", "size": 2},
        False,
    ),
]


@pytest.mark.parametrize(
    ("reader", "writer", "verdict"), [p for p in PAIRS if p[2] != "unparsable"]
)
def test_suite_pairs(reader: object, writer: object, verdict: bool) -> None:
    found = read_violations(parse(reader), parse(writer), new_is_reader=True)
    assert (not found) is verdict, found


def test_apicurio_table_2() -> None:
    base = record(f("name", "string"), f("kept", ["null", "string"], default=None))
    cases = {
        "add a field with a default": (
            record(*base["fields"], f("email", "string", default="")),
            (True, True),
        ),
        "add a field without a default": (
            record(*base["fields"], f("email", "string")),
            (False, True),
        ),
        "remove a field that has a default": (
            record(f("name", "string")),
            (True, True),
        ),
        "remove a field without a default": (
            record(f("kept", ["null", "string"], default=None)),
            (True, False),
        ),
        "add a type to a union": (
            record(
                f("name", "string"), f("kept", ["null", "string", "int"], default=None)
            ),
            (True, False),
        ),
        "remove a type from a union": (
            record(f("name", "string"), f("kept", ["null"], default=None)),
            (False, True),
        ),
        "rename a field without an alias": (
            record(f("full_name", "string"), base["fields"][1]),
            (False, False),
        ),
        "change a field type": (
            record(f("name", "int"), base["fields"][1]),
            (False, False),
        ),
    }
    for change, (new, (is_backward, is_forward)) in cases.items():
        assert (not backward(new, base)) is is_backward, change
        assert (not forward(new, base)) is is_forward, change


# -- modes --------------------------------------------------------------------------

V1 = parse(record(f("name", "string")))
V2 = parse(record(f("name", "string"), f("email", "string", default="")))
V3 = parse(record(f("name", "string"), f("email", "string")))


def test_transitive_modes_check_every_version() -> None:
    history = [(2, V2), (1, V1)]  # latest first
    assert check(V3, history, Mode.BACKWARD) == []
    (finding,) = check(V3, history, Mode.BACKWARD_TRANSITIVE)
    assert finding.against_version == 1
    assert finding.direction is Direction.BACKWARD
    assert (finding.pointer, finding.rule) == (
        "/fields/1",
        "field_added_without_default",
    )
    assert str(finding).startswith("incompatible with version 1: at /fields/1: ")


def test_forward_full_and_none() -> None:
    history = [(1, V3)]
    assert check(V1, history, "BACKWARD") == []
    (finding,) = check(V1, history, "FORWARD")
    assert finding.direction is Direction.FORWARD
    assert finding.rule == "field_removed_without_default"
    assert " forward: " in str(finding)
    assert [x.direction for x in check(V1, history, Mode.FULL)] == [Direction.FORWARD]
    assert check(V1, [(1, V3), (0, V1)], Mode.FULL_TRANSITIVE)[0].against_version == 1
    assert check(V1, history, Mode.NONE) == []
    assert check(V3, [(2, V2), (1, V1)], "FORWARD_TRANSITIVE") == []


def test_first_stops_at_the_first_violation() -> None:
    old = parse(record(f("a", "int"), f("b", "int")))
    new = parse(record(f("a", "string"), f("b", "string")))
    assert len(check(new, [(1, old)], Mode.FULL)) == 4
    assert len(check(new, [(1, old)], Mode.FULL, first=True)) == 1


def test_an_unknown_mode_is_refused() -> None:
    with pytest.raises(ValueError):
        check(V1, [], "SIDEWAYS")


def test_two_500_field_records_are_checked() -> None:
    old = parse(
        record(*(f(f"f{i}", ["null", "int"], default=None) for i in range(500)))
    )
    new = parse(
        record(
            *(f(f"f{i}", ["null", "long"], default=None) for i in range(500)),
            f("x", "int"),
        )
    )
    findings = check(new, [(1, old)], Mode.FULL)
    assert [(x.rule, x.direction) for x in findings][:1] == [
        ("field_added_without_default", Direction.BACKWARD)
    ]
    assert len(findings) == 1 + 500  # each long branch unreadable as int, forward
