"""Narad's validator against python-jsonschema, per draft, on ordinary input."""

from __future__ import annotations

import sys

import jsonschema
import pytest
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st

from narad.plugins import Plugins
from narad.plugins import get_plugin_manager
from narad.schema.validator import Validator
from tests.unit.schema.corpus import INSTANCES
from tests.unit.schema.corpus import SCHEMAS
from tests.unit.schema.corpus import SCHEMAS_FROM

BY_URI, DEFAULT = Plugins(get_plugin_manager(load_entry_points=False)).drafts()
DRAFTS = {draft.name: draft for draft in BY_URI.values()}
REFERENCE = {
    "04": jsonschema.Draft4Validator,
    "06": jsonschema.Draft6Validator,
    "07": jsonschema.Draft7Validator,
    "2019-09": jsonschema.Draft201909Validator,
    "2020-12": jsonschema.Draft202012Validator,
}
# The validator raises the recursion limit to what 256 levels can need;
# raising it once here keeps hypothesis from warning that it changed.
sys.setrecursionlimit(max(sys.getrecursionlimit(), 20_000))
ORDER = ["04", "06", "07", "2019-09", "2020-12"]


def _schemas_for(name: str) -> list[dict]:
    found = list(SCHEMAS)
    for since in ("06", "07", "2019-09", "2020-12"):
        if ORDER.index(name) >= ORDER.index(since):
            found += SCHEMAS_FROM[since]
    if name == "2019-09":
        found += SCHEMAS_FROM["2019-09-only"]
    if name == "04":
        found += SCHEMAS_FROM["04-only"]
    if name in ("04", "06", "07"):
        found += SCHEMAS_FROM["legacy"]
    return found


CASES = [
    (name, i, schema) for name in ORDER for i, schema in enumerate(_schemas_for(name))
]


def _ours(name: str, schema: dict) -> Validator:
    return Validator(
        schema,
        draft=DRAFTS[name],
        drafts=BY_URI,
        formats={},
        schema_uri="narad://schema/t/1",
    )


@pytest.mark.parametrize(("name", "i", "schema"), CASES)
def test_same_verdict_as_python_jsonschema(name, i, schema):
    ours = _ours(name, schema)
    reference = REFERENCE[name](schema)
    for instance in INSTANCES:
        expected = reference.is_valid(instance)
        assert ours.is_valid(instance) is expected, (schema, instance)


JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-5, 5)
    | st.sampled_from(["", "a", "ab", "x-1", "abc"]),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(
            st.sampled_from(["a", "b", "c", "x-1", "name"]), inner, max_size=4
        )
    ),
    max_leaves=12,
)


@settings(max_examples=300, deadline=None)
@given(case=st.sampled_from(CASES), instance=JSON)
def test_same_verdict_on_generated_instances(case, instance):
    name, _, schema = case
    expected = REFERENCE[name](schema).is_valid(instance)
    assert _ours(name, schema).is_valid(instance) is expected
