from __future__ import annotations

import contextlib
import sys
import time
import tracemalloc

import pytest

from narad.errors import InvalidPayload
from narad.errors import InvalidSchema
from narad.plugins import Plugins
from narad.plugins import get_plugin_manager
from narad.schema.jsontext import loads
from narad.schema.validator import Validator
from tests.cases.validation import CASES

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
    validator = compile_schema(schema)
    tracemalloc.start()
    started = time.perf_counter()
    with contextlib.suppress(InvalidPayload):
        validator.validate(payload)
    elapsed = time.perf_counter() - started
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert elapsed < 2.0
    assert peak < 200 * 1024 * 1024
