from __future__ import annotations

import contextlib
import time

import pytest
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st

from narad.plugins import Plugins
from narad.plugins import get_plugin_manager
from narad.schema.resolver import SchemaIndex
from narad.schema.shapes import ShapeError
from narad.schema.shapes import analyse

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


@settings(max_examples=80, deadline=None)
@given(_ref_structures())
def test_analysis_stays_fast_on_generated_ref_graphs(document):
    started = time.perf_counter()
    with contextlib.suppress(ShapeError):
        _analyse(document)
    assert time.perf_counter() - started < 0.5


@pytest.mark.parametrize("keyword", ["allOf", "anyOf", "oneOf"])
def test_long_doubling_chains_are_refused_fast(keyword):
    started = time.perf_counter()
    with pytest.raises(ShapeError):
        _analyse(_chain(2000, 2, keyword))
    assert time.perf_counter() - started < 2.0


def test_wide_recursive_union_is_refused_fast():
    document = {"anyOf": [{"items": {"$ref": "#"}} for _ in range(3000)]}
    started = time.perf_counter()
    with pytest.raises(ShapeError, match="two paths at one level"):
        _analyse(document)
    assert time.perf_counter() - started < 2.0
