"""The x-unit rule, tested the way any plugin author tests a rule: installed
next to Narad, checked through :mod:`narad.testing`."""

from __future__ import annotations

import json

import narad_example
import pytest
from narad_example import UNIT_CHANGED

from narad.testing import client
from narad.testing.compatibility import check_compatibility

WEIGHT = '{"properties":{"weight":{"type":"number","x-unit":"kg"}}}'


@pytest.mark.parametrize(
    ("new", "message"),
    [
        (WEIGHT.replace('"kg"', '"lb"'), 'x-unit changed from "kg" to "lb"'),
        (WEIGHT.replace(',"x-unit":"kg"', ""), 'x-unit "kg" removed'),
    ],
)
def test_a_change_to_the_unit_is_refused(new, message):
    [violation] = check_compatibility(WEIGHT, new)
    assert violation.kind == UNIT_CHANGED
    assert (violation.pointer, violation.keyword) == ("/properties/weight", "x-unit")
    assert str(violation) == f"at /properties/weight: {message}"


def test_adding_a_unit_is_a_change():
    [violation] = check_compatibility(
        '{"properties":{"weight":{"type":"number"}}}', WEIGHT
    )
    assert violation.message == 'x-unit "kg" added'


def test_the_unit_kept_lets_other_changes_through():
    assert (
        check_compatibility(WEIGHT, WEIGHT.replace('"number"', '["number","null"]'))
        == []
    )


def test_applies_whatever_the_draft():
    d07 = '{"$schema":"http://json-schema.org/draft-07/schema#",'
    [violation] = check_compatibility(
        d07 + WEIGHT[1:], d07 + WEIGHT[1:].replace('"kg"', '"g"')
    )
    assert violation.keyword == "x-unit"


def test_shows_up_in_a_full_report_beside_the_built_in_rules():
    new = '{"properties":{"weight":{"type":"integer","x-unit":"g"}},"required":["w"]}'
    found = check_compatibility(WEIGHT, new)
    assert [(v.pointer, v.keyword) for v in found] == [
        ("/properties/weight", "type"),
        ("/properties/weight", "x-unit"),
        ("", "required"),
    ]
    # A schema change (PATCH) stops at the first.
    assert check_compatibility(WEIGHT, new, first=True) == found[:1]


def test_a_nested_schema_may_still_become_true():
    assert check_compatibility(WEIGHT, '{"properties":{"weight":true}}') == []


def test_shows_up_in_a_dry_run_report_in_each_direction():
    http = client(plugins={"narad_example": narad_example})
    created = http.simulate_post(
        "/v1/topics",
        json={"name": "w", "schema": json.loads(WEIGHT), "compatibility": "FULL"},
    )
    assert created.status_code == 201
    report = http.simulate_post(
        "/v1/topics/w/schemas/compatibility",
        json={"schema": json.loads(WEIGHT.replace('"kg"', '"lb"'))},
    ).json
    assert [(v["keyword"], v["message"]) for v in report["violations"]] == [
        ("x-unit", 'x-unit changed from "kg" to "lb"'),
        (
            "x-unit",
            'x-unit changed from "lb" to "kg" (forward: read as a change from '
            "the new schema to version 1, at a place in version 1)",
        ),
    ]
