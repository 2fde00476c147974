from __future__ import annotations

import contextlib
import json
import sys
import tracemalloc

import pytest

from narad.errors import InvalidPayload
from narad.errors import InvalidSchema
from narad.jsontext import loads
from narad.plugins import Plugins
from narad.plugins import get_plugin_manager
from narad.schema.validation.validator import Validator
from tests.cases.validation import CASES
from tests.cases.validation import UNEVALUATED_ANY_OF_ITEMS
from tests.cases.validation import UNEVALUATED_ANY_OF_PROPERTIES
from tests.cases.validation import UNEVALUATED_CONTAINS
from tests.cases.validation import UNEVALUATED_IF
from tests.cases.validation import UNEVALUATED_ONE_OF
from tests.cases.validation import nested_c

PLUGINS = Plugins(get_plugin_manager(load_entry_points=False))
BY_URI, DEFAULT = PLUGINS.drafts()
FORMATS = PLUGINS.format_checkers()
URI = "narad://schema/payments/1"


def compile_schema(text: str) -> Validator:
    document = loads(text.encode(), max_depth=64)
    draft = DEFAULT
    if isinstance(document, dict) and "$schema" in document:
        draft = BY_URI[document["$schema"]]
    return Validator(
        document, draft=draft, drafts=BY_URI, formats=FORMATS, schema_uri=URI
    )


@pytest.mark.parametrize(
    ("name", "schema", "payload", "accepted", "words"),
    CASES,
    ids=[case[0] for case in CASES],
)
def test_rulebook_case(name, schema, payload, accepted, words):
    validator = compile_schema(schema)
    if accepted:
        validator.validate(payload)
        return
    with pytest.raises(InvalidPayload) as caught:
        validator.validate(payload)
    message = str(caught.value)
    assert message.startswith("invalid argument: ")
    assert len(message.encode()) <= 2048
    if words is not None:
        assert words in message


def test_rulebook_example_message_exactly():
    validator = compile_schema('{"type": "object", "required": ["id"]}')
    with pytest.raises(InvalidPayload) as caught:
        validator.validate(b'{"amount": 5}')
    assert str(caught.value) == (
        "invalid argument: schema: jsonschema validation failed with "
        "'narad://schema/payments/1#'\n- at '': missing property 'id'"
    )


def test_one_line_per_violation_with_pointers():
    validator = compile_schema(
        '{"properties": {"a/b": {"type": "integer"}, "n": {"items": {"maximum": 3}}},'
        ' "required": ["x", "y"]}'
    )
    with pytest.raises(InvalidPayload) as caught:
        validator.validate(b'{"a/b": "s", "n": [1, 5]}')
    lines = str(caught.value).split("\n")[1:]
    assert sorted(lines) == [
        "- at '': missing properties 'x', 'y'",
        "- at '/a~1b': got string, want integer",
        "- at '/n/1': maximum: got 5, want <= 3",
    ]


def test_verdict_is_the_same_when_the_report_is_too_large():
    validator = compile_schema('{"items": {"type": "string"}}')
    payload = b"[" + b",".join([b"1"] * 500_000) + b"]"
    value = loads(payload, max_depth=256)
    assert validator.is_valid(value) is False
    with pytest.raises(InvalidPayload, match="too many violations"):
        validator.validate(payload)


def test_recursion_limit_cannot_be_hit_at_256_levels():
    validator = compile_schema(
        '{"$defs": {"a": {"allOf": [{"$ref": "#/$defs/b"}]},'
        ' "b": {"anyOf": [{"$ref": "#/$defs/c"}]}, "c": {"items": {"$ref": "#"}}},'
        ' "allOf": [{"$ref": "#/$defs/a"}]}'
    )
    sys.setrecursionlimit(1000)
    deep = b"[" * 256 + b"]" * 256
    validator.validate(deep)
    assert validator.is_valid(loads(deep, max_depth=256))


def test_ref_cycle_fails_only_its_branch():
    validator = compile_schema('{"anyOf": [{"$ref": "#"}, {"type": "integer"}]}')
    assert validator.is_valid(1)
    assert not validator.is_valid("x")


def test_unresolvable_ref_is_an_invalid_schema():
    with pytest.raises(InvalidSchema):
        compile_schema('{"$ref": "#/$defs/missing"}')


def test_numbers_in_schema_are_exact():
    validator = compile_schema('{"exclusiveMaximum": 1e400, "multipleOf": 1e-3}')
    assert validator.is_valid(loads(b"1e399", max_depth=1))
    assert not validator.is_valid(loads(b"1e400", max_depth=1))
    assert not validator.is_valid(loads(b"0.0015", max_depth=1))


@pytest.mark.parametrize(
    ("schema", "payload"),
    [
        ('{"pattern": "^[a-z]+$"}', b'"' + b"a" * (1 << 20) + b'"'),
        ('{"pattern": "[0-9]{3}x"}', b'"' + b"1" * (1 << 20) + b'"'),
        (
            '{"enum": [' + ",".join(str(i) for i in range(45_000)) + "]}",
            b"[" + b",".join([b"7"] * 1000) + b"]",
        ),
        ("true", b"[" * 9990 + b"]" * 9990),
        ('{"items": {"type": "string"}}', b"[" + b",".join([b"1"] * 500_000) + b"]"),
    ],
)
def test_adversarial_inputs_are_bounded(schema, payload):
    # Memory here; bench/validate.py times the same inputs.
    validator = compile_schema(schema)
    tracemalloc.start()
    with contextlib.suppress(InvalidPayload):
        validator.validate(payload)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 200 * 1024 * 1024


def _calls(validator: Validator, payload: bytes) -> int:
    """Python function calls one validation makes: work, counted exactly."""
    count = 0

    def profile(frame, event, arg):
        nonlocal count
        count += event == "call"

    sys.setprofile(profile)
    try:
        with contextlib.suppress(InvalidPayload):
            validator.validate(payload)
    finally:
        sys.setprofile(None)
    return count


@pytest.mark.parametrize(
    ("schema", "nest"),
    [
        (UNEVALUATED_ANY_OF_ITEMS, lambda n: b"[" * n + b"]" * n),
        (UNEVALUATED_ANY_OF_ITEMS, lambda n: b"[" * n + b"1,2" + b"]" * n),
        (UNEVALUATED_ANY_OF_PROPERTIES, nested_c),
        (UNEVALUATED_ANY_OF_PROPERTIES, lambda n: nested_c(n, b'{"x":1}')),
        (UNEVALUATED_ONE_OF, nested_c),
        (UNEVALUATED_IF, nested_c),
        (UNEVALUATED_IF, lambda n: nested_c(n, b'{"x":1}')),
        (UNEVALUATED_CONTAINS, lambda n: b"[" * n + b"1" + b"]" * n),
        (UNEVALUATED_CONTAINS, lambda n: b"[" * n + b"]" * n),
    ],
)
def test_unevaluated_beside_applicators_is_linear_in_depth(schema, nest):
    # Issue 19: each level of nesting doubled the work (2**n calls). Twice
    # the depth must cost about twice the calls, accepted or refused.
    validator = compile_schema(schema)
    shallow, deep = _calls(validator, nest(8)), _calls(validator, nest(16))
    assert deep < 2.5 * shallow


def test_unevaluated_sees_what_in_place_branches_evaluated():
    validator = compile_schema(
        '{"allOf": [{"properties": {"a": true}}],'
        ' "anyOf": [{"prefixItems": [true]}, {"properties": {"b": true}},'
        ' {"required": ["z"]}],'
        ' "if": {"properties": {"c": {"const": 1}}},'
        ' "then": {"properties": {"d": true}},'
        ' "dependentSchemas": {"e": {"properties": {"e": true, "f": true}}},'
        ' "unevaluatedProperties": false, "unevaluatedItems": false}'
    )

    def valid(text: bytes) -> bool:
        return validator.is_valid(loads(text, max_depth=9))

    assert valid(b'{"a": 1, "b": 2, "c": 1, "d": 3, "e": 0, "f": 4}')
    assert not valid(b'{"a": 1, "c": 2, "d": 3}')  # if failed: then not applied
    assert not valid(b'{"f": 1}')  # dependentSchemas applies only with "e"
    assert not valid(b'{"z": 1}')  # the branch requiring z evaluates nothing
    assert valid(b"[1]")
    assert not valid(b"[1, 2]")


def test_a_failed_branch_evaluates_nothing():
    validator = compile_schema(
        '{"anyOf": [{"properties": {"a": {"type": "string"}}}, true],'
        ' "unevaluatedProperties": {"type": "integer"}}'
    )
    assert validator.is_valid(loads(b'{"a": "x"}', max_depth=9))
    assert not validator.is_valid(loads(b'{"a": 1.5}', max_depth=9))


def test_unevaluated_report_names_the_properties_left():
    validator = compile_schema(
        '{"properties": {"a": true}, "unevaluatedProperties": false}'
    )
    with pytest.raises(InvalidPayload) as caught:
        validator.validate(b'{"a": 1, "b": 2, "c": 3}')
    assert str(caught.value).endswith(
        "- at '': unevaluated properties 'b', 'c' not allowed"
    )


@pytest.mark.parametrize(
    ("schema", "payload", "line"),
    [
        ('{"type": "integer"}', b'"\\ud800"', "- at '': got string, want integer"),
        (
            '{"additionalProperties": false}',
            b'{"\\ud800": 1}',
            "- at '': additional properties '\\ud800' not allowed",
        ),
        (
            '{"properties": {"\\udc00": {"type": "integer"}}}',
            b'{"\\udc00": "x"}',
            "- at '/\\udc00': got string, want integer",
        ),
        ('{"required": ["\\ud800"]}', b"{}", "- at '': missing property '\\ud800'"),
        ('{"const": "\\ud800"}', b'"x"', "- at '': value must be '\\ud800'"),
        ('{"enum": ["\\ud800", 1]}', b'"x"', "value must be one of '\\ud800', 1"),
        (
            '{"pattern": "^a"}',
            b'"\\ud800"',
            "- at '': '\\ud800' does not match pattern '^a'",
        ),
        (
            '{"propertyNames": {"maxLength": 0}}',
            b'{"\\ud800": 1}',
            "- at '': invalid property name '\\ud800'",
        ),
        ('{"format": "email"}', b'"\\ud800@x.com"', "is not valid email"),
        ('{"format": "hostname"}', b'"\\ud800.com"', "is not valid hostname"),
        ('{"format": "idn-email"}', b'"a@\\ud800.com"', "is not valid idn-email"),
        ('{"format": "regex"}', b'"\\ud800"', "is not valid regex"),
        ('{"format": "date-time"}', b'"\\ud800"', "is not valid date-time"),
        (
            '{"dependentRequired": {"\\ud800": ["b"]}}',
            b'{"\\ud800": 1}',
            "missing property 'b', required by '\\ud800'",
        ),
        (
            '{"unevaluatedProperties": false}',
            b'{"\\udfff": 1}',
            "unevaluated properties '\\udfff' not allowed",
        ),
    ],
)
def test_lone_surrogates_are_reported_not_crashed_on(schema, payload, line):
    validator = compile_schema(schema)
    with pytest.raises(InvalidPayload) as caught:
        validator.validate(payload)
    message = str(caught.value)
    message.encode()  # UTF-8 all through: the lone surrogate is escaped
    assert line in message


@pytest.mark.parametrize(
    ("schema", "accepted", "refused"),
    [
        # equal to itself, and not to another surrogate
        ('{"enum": ["\\ud800"]}', b'"\\ud800"', b'"\\udc00"'),
        # one character to a pattern and to maxLength, two are two
        ('{"pattern": "^.$"}', b'"\\ud800"', b'"\\ud800\\ud800"'),
        ('{"maxLength": 1}', b'"\\ud800"', b'"\\ud800\\ud800"'),
        # a property name matched like any other
        (
            '{"patternProperties": {"^a": false}}',
            b'{"\\ud800": 1}',
            b'{"a\\ud800": 1}',
        ),
        # distinct surrogates are distinct items, the same one twice is not
        (
            '{"uniqueItems": true}',
            b'["\\ud800", "\\udc00"]',
            b'["\\ud800", "\\ud800"]',
        ),
    ],
)
def test_lone_surrogates_are_values_like_any_other(schema, accepted, refused):
    validator = compile_schema(schema)
    # validate() answers the value it accepted, the lone surrogate kept.
    assert validator.validate(accepted) == json.loads(accepted)
    with pytest.raises(InvalidPayload):
        validator.validate(refused)


# -- "When an object repeats a key, the last value wins" (issue 50) -------------


@pytest.mark.parametrize(
    ("schema", "payload", "accepted", "words"),
    [
        ('{"properties":{"a":{"type":"string"}}}', b'{"a": 1, "a": "x"}', True, None),
        (
            '{"properties":{"a":{"type":"string"}}}',
            b'{"a": "x", "a": 1}',
            False,
            "- at '/a': got integer, want string",
        ),
        # Nested objects, in arrays, and the last of three.
        (
            '{"items":{"properties":{"b":{"const":3}}}}',
            b'[{"b": 1, "b": 2, "b": 3}, {"b": 3}]',
            True,
            None,
        ),
        (
            '{"properties":{"o":{"required":["k"],"properties":{"k":{"type":"null"}}}}}',
            b'{"o": {"k": null, "x": 1, "k": false}}',
            False,
            "- at '/o/k'",
        ),
        # A repeated key still counts once: required finds it, maxProperties
        # counts the members there are.
        ('{"required":["id"],"maxProperties":1}', b'{"id": 1, "id": 2}', True, None),
        # The repeat's earlier value is not checked at all.
        ('{"properties":{"a":{"minimum":0}}}', b'{"a": -1, "a": 1}', True, None),
        ('{"properties":{"a":{"minimum":0}}}', b'{"a": 1, "a": -1}', False, "/a"),
    ],
)
def test_a_repeated_key_holds_its_last_value(schema, payload, accepted, words):
    validator = compile_schema(schema)
    if accepted:
        value = validator.validate(payload)
        assert "duplicate" not in repr(value)
        return
    with pytest.raises(InvalidPayload) as caught:
        validator.validate(payload)
    assert "duplicate" not in str(caught.value)
    assert words in str(caught.value)


def test_a_repeated_key_is_checked_as_the_last_value_on_every_draft():
    for uri in BY_URI:
        schema = {"$schema": uri, "properties": {"a": {"type": "string"}}}
        validator = compile_schema(json.dumps(schema))
        validator.validate(b'{"a": 1, "a": "x"}')
        with pytest.raises(InvalidPayload):
            validator.validate(b'{"a": "x", "a": 1}')
