"""The compiled meta-schema check against python-jsonschema's full check."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import jsonschema
import jsonschema_specifications
import pytest
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st

from narad import jsontext
from narad.plugins import Plugins
from narad.plugins import get_plugin_manager
from narad.schema.drafts import Draft
from narad.schema.registration.metaschema import MetaSchema
from tests.cases.registration import CASES
from tests.unit.schema.corpus import SCHEMAS
from tests.unit.schema.corpus import SCHEMAS_FROM

BY_URI, DEFAULT = Plugins(get_plugin_manager(load_entry_points=False)).drafts()
DRAFTS = {draft.name: draft for draft in BY_URI.values()}
REFERENCE = {
    name: jsonschema.validators.validator_for(draft.meta_schema)(draft.meta_schema)
    for name, draft in DRAFTS.items()
}


def _integral(value: Any) -> Any:
    # What registration handed python-jsonschema before: from draft-06 on,
    # 1.0 is an integer, which its type checker only sees in an int.
    if isinstance(value, Decimal) and value == value.to_integral_value():
        return int(value)
    if isinstance(value, dict):
        return {key: _integral(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_integral(item) for item in value]
    return value


def _reference_valid(name: str, document: Any) -> bool:
    return REFERENCE[name].is_valid(document if name == "04" else _integral(document))


def _ours_valid(name: str, document: Any) -> bool:
    return not list(DRAFTS[name].meta_validator(document))


def _numbers(text: str) -> Any:
    return jsontext.loads(text.encode(), max_depth=64)


def _case_documents() -> list[Any]:
    """The registration case table's small documents that parse as objects."""
    documents = []
    for _, text, _, _ in CASES:
        try:
            document = _numbers(text)
        except jsontext.JSONTextError:
            continue
        if isinstance(document, dict) and len(text) < 10_000:
            documents.append(document)
    return documents


INVALID = [
    {"type": 5},
    {"type": "strin"},
    {"type": []},
    {"type": ["string", "string"]},
    {"minLength": -1},
    {"minLength": "1"},
    {"minLength": True},
    {"minLength": _numbers("1.5")},
    {"maxItems": _numbers("1e2")},  # an integer from draft-06 on only
    {"minLength": _numbers("1.0")},
    {"multipleOf": 0},
    {"multipleOf": -2},
    {"maximum": "3"},
    {"properties": [{"type": "string"}]},
    {"properties": {"a": {"type": "foo"}}},
    {"properties": {"a": 1}},
    {"items": [{"type": 1}]},
    {"items": []},
    {"items": {"items": {"items": {"minItems": -1}}}},
    {"allOf": []},
    {"anyOf": {}},
    {"oneOf": [1]},
    {"not": "x"},
    {"required": "a"},
    {"required": ["a", "a"]},
    {"required": []},
    {"enum": []},
    {"enum": [1, 1]},
    {"enum": [1, _numbers("1.0")]},
    {"enum": "a"},
    {"$ref": 5},
    {"$id": "#frag"},
    {"$id": "a#b"},
    {"$anchor": "1a"},
    {"$anchor": ""},
    {"$dynamicAnchor": "a b"},
    {"$defs": {"a": {"type": 1}}},
    {"$defs": []},
    {"definitions": {"a": {"minimum": "x"}}},
    {"dependencies": {"a": 1}},
    {"dependencies": {"a": ["b", "b"]}},
    {"dependencies": {"a": {"type": 1}}},
    {"dependentRequired": {"a": [1]}},
    {"dependentSchemas": {"a": 1}},
    {"exclusiveMinimum": True},
    {"exclusiveMaximum": 1},
    {"propertyNames": {"type": 1}},
    {"patternProperties": {"^a": 1}},
    {"if": 1},
    {"contains": []},
    {"prefixItems": []},
    {"$vocabulary": {"https://example.com": 1}},
    {"$recursiveAnchor": 1},
    {"$recursiveRef": 1},
    {"unevaluatedProperties": 1},
    {"contentSchema": 1},
    {"uniqueItems": 1},
    {"deprecated": "yes"},
    {"additionalItems": 1},
    {"title": 1},
    {"examples": {}},
    {"$schema": 1},
    {"minContains": -1},
    {"format": 1},
]
VALID = [
    {},
    {"$anchor": "a\n"},  # Python's $ matches before a final newline
    {"$id": "https://example.com/s#"},
    {"enum": [True, 1, [1], [True], {"a": 1}, {"a": True}]},
    {"minimum": _numbers("1e400"), "multipleOf": _numbers("0.5")},
    {"maxItems": _numbers("1.0")},
    {"x-unknown": {"type": 5}},
    {"properties": {"type": {"type": "string"}}},
    {"items": [{"type": "string"}, True]},
    {"dependencies": {"a": ["b"], "c": {"required": ["d"]}}},
    {"$vocabulary": {"https://example.com/v": True}},
    *SCHEMAS,
    *(schema for schemas in SCHEMAS_FROM.values() for schema in schemas),
    *_case_documents(),
]


@pytest.mark.parametrize("name", sorted(DRAFTS))
@pytest.mark.parametrize("document", INVALID + VALID, ids=repr)
def test_same_verdict_as_the_full_check(name, document):
    assert _ours_valid(name, document) is _reference_valid(name, document)


def test_corpus_has_both_verdicts_in_every_draft():
    for name in DRAFTS:
        verdicts = {_reference_valid(name, d) for d in INVALID + VALID}
        assert verdicts == {True, False}, name


def test_unique_items_finds_a_duplicate_that_sorts_apart():
    # python-jsonschema compares sorted neighbours: [1] sorts equal to [true]
    # and keeps the two [1] apart, so it misses the duplicate.
    document = {"$schema": DRAFTS["04"].uris[0], "enum": [[1], [True], [1]]}
    assert _reference_valid("04", document)
    assert not _ours_valid("04", document)


SIMPLE = (
    st.none()
    | st.booleans()
    | st.integers(-2, 3)
    | st.sampled_from(
        [Decimal("1.0"), Decimal("0.5"), Decimal("-1.5"), Decimal("1E+2")]
    )
    | st.sampled_from(["", "a", "string", "integer", "#a", "a#", "a\n", "#/$defs/a"])
)
KEYWORDS = sorted(
    {keyword for draft in DRAFTS.values() for keyword in draft.keywords} | {"x-other"}
)


def _schema_like(inner: st.SearchStrategy) -> st.SearchStrategy:
    value = inner | st.lists(inner, max_size=3) | st.lists(SIMPLE, max_size=3)
    keyed = st.dictionaries(st.sampled_from(KEYWORDS), value, max_size=4)
    named = st.dictionaries(st.sampled_from(["a", "b", "^a"]), inner, max_size=2)
    return keyed | named


DOCUMENTS = st.recursive(SIMPLE, _schema_like, max_leaves=16).filter(
    lambda d: isinstance(d, dict)
)


@settings(max_examples=400, deadline=None)
@given(name=st.sampled_from(sorted(DRAFTS)), document=DOCUMENTS)
def test_same_verdict_on_generated_documents(name, document):
    assert _ours_valid(name, document) is _reference_valid(name, document)


@pytest.mark.parametrize("name", sorted(DRAFTS))
def test_message_names_place_and_rule_not_the_value(name):
    secret = "https://example.com/secret-name"
    document = {"properties": {"a": {"minLength": -1, "$ref": secret}}}
    (message,) = DRAFTS[name].meta_validator(document)
    assert message.startswith("at '/properties/a/")
    assert "fails the meta-schema" in message
    assert "secret-name" not in message


def test_a_wide_document_is_checked():
    # Its time is bench/register.py's rows for wide documents.
    document = {"allOf": [{"properties": {"a": {}}} for _ in range(20_000)]}
    assert _ours_valid("2020-12", document)


def test_an_unsupported_meta_schema_keyword_is_refused():
    draft = Draft(
        name="x",
        uris=("https://example.com/meta",),
        meta_schema={"$id": "https://example.com/meta", "oneOf": [{}]},
        keywords=frozenset({"oneOf"}),
    )
    with pytest.raises(ValueError, match="oneOf is not supported"):
        MetaSchema(draft, jsonschema_specifications.REGISTRY.contents)
