from __future__ import annotations

import pytest

import narad_rules_bounds
from narad.compatibility import Change
from tests.compatcheck import check_texts

D04 = '"$schema":"http://json-schema.org/draft-04/schema#",'


def test_claims_its_keywords():
    assert len(narad_rules_bounds.narad_compatibility_rules()) == 11


@pytest.mark.parametrize(
    ("old", "new", "change"),
    [
        ('{"minimum":1}', '{"minimum":1.5}', Change.minimum_increased),
        ("{}", '{"maximum":1}', Change.maximum_added),
        (
            '{"exclusiveMinimum":1}',
            '{"exclusiveMinimum":2}',
            Change.minimum_exclusive_increased,
        ),
        ("{}", '{"exclusiveMaximum":1}', Change.maximum_exclusive_added),
        ('{"multipleOf":4}', '{"multipleOf":3}', Change.multiple_changed),
        ('{"minItems":1}', '{"minItems":2}', Change.min_items_increased),
        ("{}", '{"maxProperties":1}', Change.max_properties_added),
    ],
)
def test_changes_are_named(old, new, change):
    [problem] = check_texts(old, new)
    assert problem.kind is change


def test_numbers_compare_exactly():
    assert check_texts('{"maximum":1e400}', '{"maximum":1.0000001e400}') == []
    assert check_texts('{"maximum":0.3}', '{"maximum":0.29999999999999999}')
    assert check_texts('{"multipleOf":1e-400}', '{"multipleOf":3e-401}')
    assert check_texts('{"multipleOf":3e-400}', '{"multipleOf":1e-400}') == []


def test_min_one_point_zero_is_not_zero():
    [problem] = check_texts("{}", '{"minLength":1.0}')
    assert problem.message == "minLength 1.0 added"
    assert check_texts("{}", '{"minLength":0.0}') == []


def test_draft04_boolean_exclusive_alone_is_ignored():
    old = "{" + D04 + '"type":"number"}'
    new = "{" + D04 + '"type":"number","exclusiveMinimum":true}'
    assert check_texts(old, new) == []
