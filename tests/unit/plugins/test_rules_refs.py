from __future__ import annotations

import narad_rules_refs
from narad.compatibility import Change
from narad.compatibility import changes_freely
from tests.compatcheck import check_texts

D2019 = '"$schema":"https://json-schema.org/draft/2019-09/schema",'


def test_free_keywords_change_freely():
    rules = narad_rules_refs.narad_compatibility_rules()
    for keyword in ("title", "description", "default", "examples", "$defs", "$id"):
        assert rules[keyword] is changes_freely


def test_schema_with_or_without_trailing_hash_is_the_same_draft():
    old = '{"$schema":"http://json-schema.org/draft-07/schema#","type":"string"}'
    new = '{"$schema":"http://json-schema.org/draft-07/schema","type":"string"}'
    assert check_texts(old, new) == []


def test_schema_change_is_named():
    old = '{"$schema":"http://json-schema.org/draft-07/schema#"}'
    [problem] = check_texts(
        old, '{"$schema":"http://json-schema.org/draft-06/schema#"}'
    )
    assert (problem.kind, problem.keyword) == (Change.dialect_changed, "$schema")


def test_root_ref_beside_schema_still_compares_the_dialect():
    old = (
        '{"$schema":"http://json-schema.org/draft-07/schema#","$ref":"#/definitions/a",'
    )
    old += '"definitions":{"a":{"type":"string"}}}'
    new = old.replace("draft-07", "draft-06")
    assert [p.keyword for p in check_texts(old, new)] == ["$schema"]


def test_recursive_ref_only_unchanged():
    old = (
        "{" + D2019 + '"$recursiveAnchor":true,"properties":{"a":{"$recursiveRef":"#"},'
    )
    old += '"b":{"type":"string"}}}'
    new = old.replace('"type":"string"', '"type":"integer"')
    found = check_texts(old, new)
    assert "$recursiveRef" in {p.keyword for p in found}
