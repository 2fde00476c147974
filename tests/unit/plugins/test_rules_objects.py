from __future__ import annotations

import narad_rules_objects
from narad.compatibility import Change
from tests.compatcheck import check_texts


def test_claims_its_keywords():
    assert set(narad_rules_objects.narad_compatibility_rules()) == {
        "required",
        "properties",
        "additionalProperties",
        "patternProperties",
        "dependentRequired",
        "dependentSchemas",
        "dependencies",
        "propertyNames",
    }


def test_new_property_must_accept_every_matching_pattern():
    old = (
        '{"patternProperties":{"^a":{"type":["string","null"]},"b$":{"type":"string"}}}'
    )
    new = old[:-1] + ',"properties":{"ab":{"type":"string"}}}'
    [problem] = check_texts(old, new)
    assert str(problem) == 'at /properties/ab: type "null" no longer allowed'


def test_patterns_are_re2_searches():
    old = '{"patternProperties":{"\\\\d":{"type":"string"}}}'
    new = old[:-1] + ',"properties":{"x1y":{"type":"integer"}}}'
    assert check_texts(old, new)


def test_removed_property_is_named():
    [problem] = check_texts('{"properties":{"a":{}}}', '{"properties":{}}')
    assert problem.kind is Change.property_removed


def test_required_names_each_added_name_once():
    found = check_texts("{}", '{"required":["a","b"]}')
    assert [p.message for p in found] == [
        'required property "a" added',
        'required property "b" added',
    ]


def test_a_new_property_named_with_a_lone_surrogate_is_judged_not_crashed():
    from narad.testing.compatibility import check_compatibility

    old = '{"patternProperties": {"^a": {"type": "string"}}}'
    new = (
        '{"patternProperties": {"^a": {"type": "string"}},'
        ' "properties": {"\\ud800": {"type": "integer"}}}'
    )
    assert check_compatibility(old, new) == []
    narrowing = (
        '{"patternProperties": {"^a": {"type": "string"}},'
        ' "properties": {"a\\ud800": {"type": "integer"}}}'
    )
    assert check_compatibility(old, narrowing)
