from __future__ import annotations

import narad_rules_combinators
from narad.compatibility import Change
from tests.compatcheck import check_texts


def test_claims_its_keywords():
    assert set(narad_rules_combinators.narad_compatibility_rules()) == {
        "anyOf",
        "allOf",
        "oneOf",
        "not",
        "if",
        "then",
        "else",
    }


def test_any_of_branch_covered_by_another_index():
    old = '{"anyOf":[{"type":"integer"},{"type":"string"}]}'
    new = '{"anyOf":[{"type":"string"},{"type":"number"}]}'
    assert check_texts(old, new) == []


def test_any_of_added_with_a_branch_accepting_everything():
    assert check_texts("{}", '{"anyOf":[{"type":"string"},{}]}') == []


def test_all_of_branch_names_the_change():
    [problem] = check_texts('{"allOf":[{}]}', '{"allOf":[{},{"minimum":1}]}')
    assert problem.kind is Change.product_type_extended


def test_identical_follows_ref_for_one_of():
    old = '{"$defs":{"a":{"type":"string"}},"oneOf":[{"$ref":"#/$defs/a"}]}'
    assert check_texts(old, old.replace('"$defs":{', '"$defs":{"b":{},')) == []
    [problem] = check_texts(old, old.replace('"string"', '"null"'))
    assert problem.message == "oneOf changed"
