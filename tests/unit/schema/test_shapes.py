from __future__ import annotations

import json
import re

import pytest
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st

from narad.errors import InvalidSchema
from narad.plugins import Plugins
from narad.plugins import get_plugin_manager
from narad.schema.registration import shapes
from narad.schema.registration.documents import register
from narad.schema.registration.shapes import ShapeError
from narad.schema.registration.shapes import analyse
from narad.schema.resolver import SchemaIndex
from tests.cases.registration import recursive_properties_chain

BY_URI, DEFAULT = Plugins(get_plugin_manager(load_entry_points=False)).drafts()


def _analyse(document):
    return analyse(SchemaIndex(document, draft=DEFAULT, base_uri="narad://t"))


def test_two_paths_are_named():
    document = {"allOf": [{"items": {"$ref": "#"}}, {"items": {"$ref": "#"}}]}
    with pytest.raises(ShapeError) as caught:
        _analyse(document)
    assert "'/allOf/0/items/$ref' and '/allOf/1/items/$ref'" in str(caught.value)


def test_duplicated_recursion_across_a_definition():
    document = {
        "properties": {"a": {"$ref": "#/$defs/x"}},
        "$defs": {"x": {"allOf": [{"$ref": "#"}, {"$ref": "#"}]}},
    }
    with pytest.raises(ShapeError, match="two paths at one level"):
        _analyse(document)


def test_non_recursive_duplicate_is_within_the_limit():
    document = {
        "allOf": [{"$ref": "#/$defs/x"}, {"$ref": "#/$defs/x"}],
        "$defs": {"x": {}},
    }
    assert _analyse(document).applies_many is False


def test_chain_of_dynamic_anchors_is_one_path_per_link():
    defs = {
        f"d{i}": {"$dynamicAnchor": "n", "allOf": [{"$ref": f"#/$defs/d{i + 1}"}]}
        for i in range(7)
    }
    defs["d7"] = {"type": "string"}
    assert _analyse({"$ref": "#/$defs/d0", "$defs": defs}).applies_many is False


def test_applies_many_counts_subschemas_not_hops():
    branches = [{"$ref": "#/$defs/b"} for _ in range(63)]
    assert _analyse({"anyOf": branches, "$defs": {"b": {}}}).applies_many is False
    branches.append({"type": "string"})
    assert _analyse({"anyOf": branches, "$defs": {"b": {}}}).applies_many is True


def _chain(length: int, fanout: int, keyword: str) -> dict:
    defs = {
        f"d{i}": {keyword: [{"$ref": f"#/$defs/d{i + 1}"}] * fanout}
        for i in range(length)
    }
    defs[f"d{length}"] = {"items": {"$ref": "#"}}
    return {"$ref": "#/$defs/d0", "$defs": defs}


@st.composite
def _ref_structures(draw) -> dict:
    """Nested $ref/allOf graphs: definitions applying each other, some recursive."""
    size = draw(st.integers(min_value=2, max_value=40))
    defs = {}
    for i in range(size):
        refs = draw(st.lists(st.integers(0, size - 1), min_size=0, max_size=4))
        wrapper = draw(st.sampled_from(["allOf", "anyOf", "items", "properties"]))
        subs = [{"$ref": f"#/$defs/d{j}"} for j in refs]
        if wrapper == "items":
            defs[f"d{i}"] = {"items": {"allOf": subs}}
        elif wrapper == "properties":
            defs[f"d{i}"] = {"properties": {f"p{k}": s for k, s in enumerate(subs)}}
        else:
            defs[f"d{i}"] = {wrapper: subs} if subs else {}
    return {"$ref": "#/$defs/d0", "$defs": defs}


# The analysis counts its steps against a budget proportional to the document
# and refuses past it, so "it ends" is what these tests can hold it to; how
# long it takes is bench/register.py's business.


# What the analysis may refuse a document for: the rulebook's shapes, or its
# budget. Generated references all resolve, so "leads nowhere" is not one.
REFUSALS = (
    "two paths at one level|re-applies a schema to the same value"
    f"|through more than {shapes.MAX_PATHS} paths|too costly to analyse"
)


@settings(max_examples=80, deadline=None)
@given(_ref_structures())
def test_analysis_ends_on_generated_ref_graphs(document):
    try:
        analysis = _analyse(document)
    except ShapeError as exc:
        assert re.search(REFUSALS, str(exc)), str(exc)
    else:
        assert analysis.applies_many in (True, False)


@pytest.mark.parametrize("keyword", ["allOf", "anyOf", "oneOf"])
def test_long_doubling_chains_are_refused(keyword):
    with pytest.raises(ShapeError):
        _analyse(_chain(2000, 2, keyword))


def test_wide_recursive_union_is_refused_for_its_shape_not_its_cost():
    document = {"anyOf": [{"items": {"$ref": "#"}} for _ in range(3000)]}
    with pytest.raises(ShapeError, match="two paths at one level"):
        _analyse(document)


@st.composite
def _large_documents(draw) -> bytes:
    """Up to ~50 KB: long chains, wide unions and maps, deep nesting, mixed."""
    n = draw(st.integers(min_value=1, max_value=700))
    keyword = draw(st.sampled_from(["allOf", "anyOf", "oneOf", "not", "items"]))
    fanout = draw(st.integers(min_value=1, max_value=2))
    step = draw(st.integers(min_value=1, max_value=3))
    last = draw(
        st.sampled_from(
            [{"type": "string"}, {"items": {"$ref": "#"}}, {"not": {"$ref": "#"}}]
        )
    )

    def link(i: int) -> dict:
        ref = {"$ref": f"#/$defs/d{min(i + step, n)}"}
        if keyword in ("not", "items"):
            return {keyword: ref}
        return {keyword: [ref] * fanout}

    shape = draw(st.sampled_from(["chain", "wide", "deep", "union"]))
    if shape == "chain":
        defs = {f"d{i}": link(i) for i in range(n)}
        defs[f"d{n}"] = last
        document: dict = {"$ref": "#/$defs/d0", "$defs": defs}
    elif shape == "wide":
        document = {"properties": {f"p{i}": link(0) for i in range(n)}}
        document["$defs"] = {"d0": last, **{f"d{i}": {} for i in range(1, n + 1)}}
    elif shape == "deep":
        inner: dict = last
        for _ in range(min(n, 60)):
            inner = {"items": inner, "properties": {"a": {"$ref": "#"}}}
        document = {"properties": {f"p{i}": inner for i in range(n // 60 + 1)}}
    else:
        document = {"anyOf": [dict(last) for _ in range(n)]}
    return json.dumps(document, separators=(",", ":")).encode()


@settings(max_examples=40, deadline=None)
@given(_large_documents())
def test_registration_ends_on_generated_documents(raw):
    try:
        registered = register(raw, drafts=BY_URI, default_draft=DEFAULT)
    except InvalidSchema as exc:
        assert exc.detail.startswith("schema: ")
        assert re.search(REFUSALS, exc.detail), exc.detail
    else:
        # Already compact: stored as sent, and read back as the same value.
        assert registered.compact == raw
        assert registered.document == json.loads(raw)


def test_recursive_properties_chain_is_accepted_within_the_budget():
    document = recursive_properties_chain(400)
    raw = json.dumps(document).encode()
    registered = register(raw, drafts=BY_URI, default_draft=DEFAULT)
    assert registered.document == document
    assert registered.draft is DEFAULT
    # Ordinary recursion, accepted; but its 400 links all apply to the root
    # value in place, more than 64 subschemas to one value, so it validates
    # under the capacity bound ("Validation capacity").
    assert registered.high_cost is True
    small = register(
        json.dumps(recursive_properties_chain(30)).encode(),
        drafts=BY_URI,
        default_draft=DEFAULT,
    )
    assert small.high_cost is False


class _Forgets(set):
    def add(self, _item) -> None:
        pass

    def update(self, *_items) -> None:
        pass


class _ForgetfulLevel(shapes._Level):
    """Shape 1 checked afresh from every start, as before memoisation."""

    def __init__(self, *args) -> None:
        super().__init__(*args)
        self.accepted = _Forgets()
        self.settled = _Forgets()


@st.composite
def _one_level_graphs(draw) -> dict:
    """Definitions mixing in-place and child edges, cycles of both kinds."""
    size = draw(st.integers(min_value=1, max_value=12))

    def ref() -> dict:
        return {"$ref": f"#/$defs/d{draw(st.integers(0, size - 1))}"}

    def link() -> dict:
        kind = draw(
            st.sampled_from(["ref", "allOf", "anyOf", "items", "property", "pattern"])
        )
        if kind == "ref":
            return ref()
        if kind in ("allOf", "anyOf"):
            return {kind: draw(st.lists(st.builds(ref), min_size=1, max_size=3))}
        if kind == "items":
            return {"items": ref(), "additionalProperties": ref()}
        if kind == "pattern":
            return {"patternProperties": {draw(st.sampled_from(["^a", "b$"])): ref()}}
        names = draw(st.lists(st.sampled_from("abc"), min_size=1, max_size=3))
        return {"allOf": [ref()], "properties": {name: ref() for name in names}}

    defs = {f"d{i}": link() for i in range(size)}
    return {"$ref": "#/$defs/d0", "$defs": defs}


def _outcome(document) -> str:
    try:
        return str(_analyse(document))
    except ShapeError as exc:
        return str(exc)


@settings(max_examples=300, deadline=None)
@given(_one_level_graphs())
def test_memoised_shape_one_agrees_with_checking_every_start(document):
    remembered = _outcome(document)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(shapes, "_Level", _ForgetfulLevel)
        assert _outcome(document) == remembered


def test_analysis_past_its_budget_is_refused(monkeypatch):
    monkeypatch.setattr(shapes, "_STEPS_MINIMUM", 0)
    monkeypatch.setattr(shapes, "_STEPS_PER_SUBSCHEMA", 1)
    raw = json.dumps(recursive_properties_chain(10)).encode()
    with pytest.raises(InvalidSchema, match="schema: too costly to analyse"):
        register(raw, drafts=BY_URI, default_draft=DEFAULT)
