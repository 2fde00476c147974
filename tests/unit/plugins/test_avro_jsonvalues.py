"""JSON payloads against Avro schemas: queue-ti's rules and wording."""

from __future__ import annotations

import json

import pytest

from narad.errors import InvalidPayload
from narad_avro import compile_validator
from narad_avro import parse

PREFIX = "schema: payload does not match topic schema: "

ORDER = {
    "type": "record",
    "name": "Order",
    "fields": [
        {"name": "order_id", "type": "int"},
        {"name": "customer_email", "type": "string"},
        {"name": "amount", "type": "double"},
        {"name": "note", "type": ["null", "string"], "default": None},
    ],
}
GOOD = {"order_id": 1, "customer_email": "a@b.c", "amount": 9.5}


def validate(schema: object, payload: object | bytes) -> object:
    raw = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    return compile_validator(parse(schema), "json").validate(raw)


def refusal(schema: object, payload: object | bytes) -> str:
    with pytest.raises(InvalidPayload) as caught:
        validate(schema, payload)
    return caught.value.detail


def test_queue_ti_wording_for_a_missing_field_and_a_wrong_type() -> None:
    missing = {k: v for k, v in GOOD.items() if k != "order_id"}
    assert refusal(ORDER, missing) == (
        PREFIX + "at '': missing required field \"order_id\""
    )
    assert refusal(ORDER, {**GOOD, "amount": "9.5"}) == (
        PREFIX + "at '/amount': field \"amount\": expected double, got string"
    )
    assert refusal(ORDER, [1]) == PREFIX + "payload is not a valid JSON object"


def test_optional_fields_may_be_omitted_and_present_ones_must_fit() -> None:
    validate(ORDER, GOOD)
    validate(ORDER, {**GOOD, "note": "hi"})
    validate(ORDER, {**GOOD, "note": None})
    assert "expected one of [null, string], got number" in refusal(
        ORDER, {**GOOD, "note": 3}
    )


def test_a_field_the_schema_does_not_name_is_refused() -> None:
    assert refusal(ORDER, {**GOOD, "extra": 1}) == (
        PREFIX + "at '/extra': unknown field \"extra\": the schema does not name it"
    )


@pytest.mark.parametrize(
    ("avro", "good", "bad", "says"),
    [
        ("null", [None], [0, False, ""], "expected null"),
        ("boolean", [True, False], [0, "true", None], "expected boolean"),
        ("int", [0, -(2**31), 2**31 - 1, 1.0, 1e2], [2**31, 1.5, "1", True], "int"),
        ("long", [2**63 - 1, -(2**63)], [2**63, 0.5, False], "long"),
        ("float", [0, 1.5, -3.4e38, 1e-60], [1e39, "1", None, True], "float"),
        ("double", [1, 1.7e308, 5e-324], ["x", [1]], "double"),
        ("string", ["", "x", "\u00e9"], [1, None], "expected string"),
        ("bytes", ["", "\u00ff\u0000"], ["\u0100", 1], "bytes"),
        (
            {"type": "fixed", "name": "F", "size": 2},
            ["ab"],
            ["a", "abc", "\u0100b", 12],
            "fixed 'F'",
        ),
        (
            {"type": "enum", "name": "E", "symbols": ["A", "B"]},
            ["A", "B"],
            ["C", "a", 0],
            "enum 'E'",
        ),
        ({"type": "array", "items": "int"}, [[], [1, 2]], [[1, "2"], {}, 1], ""),
        ({"type": "map", "values": "int"}, [{}, {"a": 1}], [{"a": "1"}, [], 1], ""),
        (["null", "int", "string"], [None, 1, "x"], [1.5, [], {}], "expected"),
        ({"type": "int", "logicalType": "date"}, [0, -1, 19000], ["2024-01-01"], "int"),
        (
            {"type": "int", "logicalType": "time-millis"},
            [0, 86_399_999],
            [86_400_000, -1],
            "time-millis",
        ),
        (
            {"type": "long", "logicalType": "time-micros"},
            [86_399_999_999],
            [86_400_000_000],
            "time-micros",
        ),
        (
            {"type": "long", "logicalType": "timestamp-millis"},
            [1_700_000_000_000, -1],
            ["2024-01-01T00:00:00Z", 2**63],
            "long",
        ),
        (
            {"type": "string", "logicalType": "uuid"},
            ["123e4567-e89b-12d3-a456-426614174000"],
            ["not-a-uuid", 1],
            "",
        ),
        (
            {"type": "bytes", "logicalType": "decimal", "precision": 5, "scale": 2},
            [0, 123.45, -999.99, 1.5, 12.3, "\u0001\u0002"],
            [1000, 1.234, 0.001, True],
            "decimal(5,2)",
        ),
        (
            {
                "type": "fixed",
                "name": "U",
                "size": 16,
                "logicalType": "uuid",
            },
            ["123e4567-e89b-12d3-a456-426614174000", "x" * 16],
            ["x"],
            "fixed 'U'",
        ),
    ],
)
def test_each_type_fits_and_refuses(avro, good, bad, says) -> None:
    for value in good:
        validate(avro, value)
    for value in bad:
        message = refusal(avro, value)
        assert message.startswith(PREFIX + "at '") and says in message, message


def test_numbers_are_exact() -> None:
    assert "out of range" in refusal("long", b"9223372036854775808")
    validate("long", b"9223372036854775807")
    validate("int", b"2147483647.000")
    assert "fraction" in refusal("int", b"1.0000000000000000000001")
    validate("double", b"1e308")
    assert "out of range" in refusal("double", b"1e309")
    validate("double", b"1e-400")  # rounds to zero, which double holds


def test_paths_name_the_value_deep_inside() -> None:
    schema = {
        "type": "record",
        "name": "Cart",
        "fields": [
            {
                "name": "lines",
                "type": {
                    "type": "array",
                    "items": {
                        "type": "record",
                        "name": "Line",
                        "fields": [
                            {"name": "sku", "type": "string"},
                            {"name": "tags", "type": {"type": "map", "values": "int"}},
                        ],
                    },
                },
            }
        ],
    }
    payload = {"lines": [{"sku": "a", "tags": {}}, {"sku": "b", "tags": {"x/y": "z"}}]}
    assert refusal(schema, payload) == (
        PREFIX + "at '/lines/1/tags/x~1y': expected int, got string"
    )
    assert refusal(schema, {"lines": [{"tags": {}}]}) == (
        PREFIX + "at '/lines/0': missing required field \"sku\""
    )
    assert refusal(schema, {"lines": [{"sku": 1, "tags": {}}]}) == (
        PREFIX + "at '/lines/0/sku': field \"sku\": expected string, got number"
    )


def test_a_union_with_one_branch_of_the_values_kind_explains_that_branch() -> None:
    schema = {
        "type": "record",
        "name": "R",
        "fields": [
            {
                "name": "inner",
                "type": [
                    "null",
                    {
                        "type": "record",
                        "name": "I",
                        "fields": [{"name": "x", "type": "int"}],
                    },
                ],
            }
        ],
    }
    validate(schema, {"inner": None})
    validate(schema, {"inner": {"x": 1}})
    assert refusal(schema, {"inner": {"x": "1"}}) == (
        PREFIX + "at '/inner/x': field \"x\": expected int, got string"
    )


def test_recursive_schemas_validate_to_the_depth_limit() -> None:
    node = {
        "type": "record",
        "name": "Node",
        "fields": [{"name": "next", "type": ["null", "Node"]}],
    }
    payload: object = {"next": None}
    for _ in range(254):
        payload = {"next": payload}
    validate(node, payload)
    too_deep = b'{"next":' * 300 + b"null" + b"}" * 300
    assert refusal(node, too_deep) == "payload nests deeper than 256 levels"


def test_not_json_is_refused_as_the_rulebook_says() -> None:
    for raw in (b"", b"{", b'{"a":1} x', b"NaN", b"\xff", b'{"a":1,"a":2}'):
        assert refusal("string", raw).startswith("payload is not one JSON text")


def test_lone_surrogates_are_strings_and_messages_stay_printable() -> None:
    validate("string", b'"\\ud800"')
    message = refusal(
        ORDER, b'{"order_id":1,"customer_email":"x","amount":1,"\\ud800":1}'
    )
    assert "\\ud800" in message
    message.encode()


def test_refusals_are_cut_at_2_kib() -> None:
    long_name = "k" * 5000
    message = refusal(ORDER, {**GOOD, long_name: 1})
    assert len(("invalid argument: " + message).encode()) <= 2048
    enum = {"type": "enum", "name": "E", "symbols": [f"S{i}" for i in range(3000)]}
    assert len(refusal(enum, "x" * 10_000).encode()) <= 2048


def test_the_validator_is_compiled_once_and_reused() -> None:
    validator = compile_validator(parse(ORDER), "json")
    for i in range(3):
        assert (
            validator.validate(json.dumps({**GOOD, "order_id": i}).encode())["order_id"]
            == i
        )
    with pytest.raises(ValueError):
        compile_validator(parse(ORDER), "xml")  # type: ignore[arg-type]
