from __future__ import annotations

import json

import pytest

from narad.errors import InvalidSchema
from narad.plugins import Plugins
from narad.plugins import get_plugin_manager
from narad.schema.registration.documents import register
from tests.cases.registration import CASES
from tests.cases.registration import union
from tests.cases.validation import UNEVALUATED_ANY_OF_ITEMS
from tests.cases.validation import UNEVALUATED_ANY_OF_PROPERTIES
from tests.cases.validation import UNEVALUATED_CONTAINS
from tests.cases.validation import UNEVALUATED_IF
from tests.cases.validation import UNEVALUATED_ONE_OF

BY_URI, DEFAULT = Plugins(get_plugin_manager(load_entry_points=False)).drafts()


def _register(text: str):
    return register(text.encode(), drafts=BY_URI, default_draft=DEFAULT)


@pytest.mark.parametrize(
    ("name", "text", "accepted", "words"), CASES, ids=[case[0] for case in CASES]
)
def test_case_table(name, text, accepted, words):
    if accepted:
        _register(text)
        return
    with pytest.raises(InvalidSchema) as caught:
        _register(text)
    message = str(caught.value)
    assert message.startswith("invalid argument: schema: ")
    assert words in message


@pytest.mark.parametrize(
    "ref",
    [
        "https://example.com/secret-name.json",
        "file:///etc/secret-name",
        "secret-name.json",
    ],
)
def test_error_never_repeats_the_reference(ref):
    with pytest.raises(InvalidSchema) as caught:
        _register(json.dumps({"$defs": {"a": {"$ref": ref}}}))
    assert "secret-name" not in str(caught.value)
    assert "'/$defs/a/$ref'" in str(caught.value)


LONG = "p" * 3_000


@pytest.mark.parametrize(
    "schema",
    [
        {"properties": {LONG: {"pattern": "(?=a)"}}},
        {"patternProperties": {"(?=a)" + LONG: {}}},
        {"properties": {LONG: {"$ref": "https://example.com/x"}}},
        {"properties": {LONG: {"$ref": "#/nowhere"}}},
        {"properties": {LONG: {"type": "no-such-type"}}},
        {"properties": {LONG: {"$schema": "https://example.com/x"}}},
        {"$defs": {LONG: {"$anchor": "a"}, "b": {"$anchor": "a"}}},
        {"$defs": {"a": {"$anchor": LONG}, "b": {"$anchor": LONG}}},
        {
            "properties": {LONG: {"$ref": "#"}},
            "patternProperties": {"^p": {"$ref": "#"}},
        },
        {"properties": {LONG: {"not": {"$ref": "#/properties/" + LONG}}}},
        {
            "anyOf": [{"$ref": "#/$defs/" + LONG}] * 65,
            "$defs": {LONG: {"type": "string"}},
        },
    ],
    ids=[
        "pattern",
        "patternProperties",
        "remote $ref",
        "dangling $ref",
        "meta-schema",
        "nested $schema",
        "duplicate anchor",
        "long anchor",
        "two paths",
        "negated cycle",
        "many paths",
    ],
)
def test_refusal_quotes_a_long_name_short(schema):
    # Names in a schema are the client's text: a refusal quotes at most 100
    # characters of each (issue 9), however long the name.
    with pytest.raises(InvalidSchema) as caught:
        _register(json.dumps(schema))
    message = str(caught.value)
    assert len(message) < 400, message[:400]
    assert "p" * 95 in message and "…" in message


def test_meta_schema_error_does_not_repeat_a_reference():
    text = '{"properties": [{"$ref": "https://example.com/secret-name"}]}'
    with pytest.raises(InvalidSchema) as caught:
        _register(text)
    assert "secret-name" not in str(caught.value)


def test_compact_keeps_numbers_as_written():
    registered = _register('{ "minimum" : 1e2,\n  "maximum": 1.50 }')
    assert registered.compact == b'{"minimum":1e2,"maximum":1.50}'
    assert registered.draft is DEFAULT
    assert registered.high_cost is False


def test_draft_comes_from_schema():
    registered = _register('{"$schema": "http://json-schema.org/draft-04/schema#"}')
    assert registered.draft.name == "04"


DRAFT7 = "http://json-schema.org/draft-07/schema#"


def _listing(keyword: str, count: int, *, extra=None, dialect: str = "") -> str:
    names = [f"k{i}" for i in range(count)]
    document = {keyword: names if keyword == "required" else {"a": names}}
    if dialect:
        document["$schema"] = dialect
    return json.dumps({**document, **(extra or {})})


def _patterns(count: int) -> dict:
    return {f"^p{i}$": {} for i in range(count)}


def _with_unevaluated(text: str) -> str:
    document = json.loads(text)
    document.update(unevaluatedProperties=False, unevaluatedItems=False)
    return json.dumps(document)


def _recursive_union(branches: int) -> str:
    """A union whose branches each recurse under their own property name,
    beside unevaluatedProperties."""
    return json.dumps(
        {
            "anyOf": [
                {"properties": {f"p{i}": {"$ref": "#"}}} for i in range(branches)
            ],
            "unevaluatedProperties": False,
        }
    )


@pytest.mark.parametrize(
    ("text", "high_cost"),
    [
        (_listing("required", 1024), False),
        (_listing("required", 1025), True),
        (_listing("dependentRequired", 1024, extra={"required": ["b"]}), True),
        (_listing("dependencies", 1025, dialect=DRAFT7), True),
        (json.dumps({"patternProperties": _patterns(64)}), False),
        (
            json.dumps(
                {
                    "properties": {"a": {"patternProperties": _patterns(64)}},
                    "patternProperties": {"^q$": {}},
                }
            ),
            True,
        ),
        (union(63), False),
        (union(64), True),
        # unevaluated* applies its subschema to child values; the annotations
        # it reads come from the pass that decides the verdict: the cost is
        # the union's, counted with every branch.
        (_with_unevaluated(union(63)), False),
        (_with_unevaluated(union(64)), True),
        (_recursive_union(63), False),
        (_recursive_union(64), True),
        (UNEVALUATED_ANY_OF_ITEMS, False),
        (UNEVALUATED_ANY_OF_PROPERTIES, False),
        (UNEVALUATED_ONE_OF, False),
        (UNEVALUATED_IF, False),
        (UNEVALUATED_CONTAINS, False),
        (json.dumps({"oneOf": [{"const": i} for i in range(64)]}), True),
    ],
)
def test_high_cost_class(text, high_cost):
    assert _register(text).high_cost is high_cost
