from __future__ import annotations

import narad_rules_arrays
from narad.compatibility import Change
from tests.compatcheck import check_texts

D2019 = '"$schema":"https://json-schema.org/draft/2019-09/schema",'


def test_claims_its_keywords():
    assert set(narad_rules_arrays.narad_compatibility_rules()) == {
        "items",
        "additionalItems",
        "prefixItems",
        "uniqueItems",
        "contains",
        "minContains",
        "maxContains",
    }


def test_items_added_that_accepts_everything_is_fine():
    assert check_texts('{"type":"array"}', '{"type":"array","items":{}}') == []


def test_tuple_form_changes_are_named():
    old = "{" + D2019 + '"items":[{"type":"string"}]}'
    [problem] = check_texts(old, old.replace('"string"', '"null"'))
    assert problem.kind is Change.tuple_items_changed


def test_min_and_max_contains_may_only_stay_or_go():
    old = '{"contains":{"type":"string"},"minContains":2,"maxContains":3}'
    assert check_texts(old, '{"contains":{"type":"string"}}') == []
    assert check_texts(old, "{}") == []
    found = check_texts(old, '{"minContains":1,"maxContains":4}')
    assert [p.message for p in found] == ["minContains changed", "maxContains changed"]
