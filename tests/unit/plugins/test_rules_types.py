from __future__ import annotations

import narad_rules_types
from narad.compatibility import Change
from tests.compatcheck import check_texts


def test_claims_its_keywords():
    assert set(narad_rules_types.narad_compatibility_rules()) == {
        "type",
        "enum",
        "const",
    }


def test_type_reports_each_type_dropped():
    found = check_texts('{"type":["string","null","array"]}', '{"type":"array"}')
    assert [p.message for p in found] == [
        'type "null" no longer allowed',
        'type "string" no longer allowed',
    ]
    assert {p.kind for p in found} == {Change.type_narrowed}


def test_type_added_that_allows_everything_is_no_narrowing():
    every = '["array","boolean","null","number","object","string"]'
    assert check_texts("{}", '{"type":' + every + "}") == []


def test_enum_compares_values_as_json_values():
    assert check_texts('{"enum":[{"a":1,"b":2}]}', '{"enum":[{"b":2,"a":1.0}]}') == []
    [problem] = check_texts('{"enum":[true]}', '{"enum":[1]}')
    assert problem.kind is Change.enum_array_narrowed


def test_const_null_is_a_value():
    [problem] = check_texts('{"const":null}', '{"const":0}')
    assert problem.message == "const value null no longer allowed"
