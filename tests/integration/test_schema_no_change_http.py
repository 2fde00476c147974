"""Which schema changes register nothing, over real HTTP (issue 50, item 2).

The rulebook: "A schema equal to the current version (the same JSON value;
formatting and key order do not matter) registers nothing and answers 200",
and "Annotations are not a change": a schema that differs only in title,
description, ... registers nothing. ``{}`` and ``true`` accept the same
messages but are different JSON values, and neither is an annotation: one
becoming the other registers a new version. The same JSON value is JSON
Schema's equality, as a child's history is matched on attach: a number's
spelling (10, 1e1, 10.0) does not matter.
"""

from __future__ import annotations

import pytest


def make(http, topic: str, schema_text: str) -> None:
    body = '{"name": "%s", "partitions": 1, "schema": %s}' % (topic, schema_text)  # noqa: UP031
    resp = http.post("/v1/topics", body)
    assert resp.status == 201, resp.data


def change(http, topic: str, schema_text: str) -> int:
    """PATCH the schema (as written); the version current afterwards."""
    resp = http.patch(f"/v1/topics/{topic}", '{"schema": %s}' % schema_text)  # noqa: UP031
    assert resp.status == 200, resp.data
    return resp.json()["schema_version"]


def dry_run(http, topic: str, schema_text: str):
    path = f"/v1/topics/{topic}/schemas/compatibility"
    resp = http.post(path, '{"schema": %s}' % schema_text)  # noqa: UP031
    assert resp.status == 200, resp.data
    return resp


def history(http, topic: str) -> list[bytes]:
    versions = http.get(f"/v1/topics/{topic}/schemas").json()["versions"]
    return [
        http.get(f"/v1/topics/{topic}/schemas/{v['version']}").data for v in versions
    ]


def test_empty_object_then_true_registers_a_version(http, topic):
    make(http, topic, "{}")
    dry = dry_run(http, topic, "true")
    assert "narad-no-change" not in dry.headers
    assert dry.json()["compatible"] is True
    assert change(http, topic, "true") == 2
    assert change(http, topic, " true ") == 2  # the same value again
    assert change(http, topic, "{ }") == 3  # and back: another value again
    assert history(http, topic) == [b"{}", b"true", b"{}"]
    # Every message is still only "must be JSON".
    assert http.post(f"/v1/topics/{topic}/produce", b"[1]").status == 202
    assert http.post(f"/v1/topics/{topic}/produce", b"[1").status == 400


def test_a_nested_empty_object_becoming_true_registers_a_version(http, topic):
    make(http, topic, '{"properties": {"a": {}}, "items": true}')
    assert change(http, topic, '{"properties": {"a": true}, "items": true}') == 2
    assert change(http, topic, '{"items": true, "properties": {"a": true}}') == 2
    assert change(http, topic, '{"properties": {"a": true}, "items": {}}') == 3


@pytest.mark.parametrize(
    ("current", "again"),
    [
        ('{"type": "object", "maximum": 10}', '{"maximum": 1e1, "type": "object"}'),
        ('{"maximum": 10}', '{"maximum": 10.0}'),
        ('{"maximum": 10}', '{"maximum": 100E-1}'),
        ('{"enum": [1, 2.5]}', '{"enum": [1.0, 25e-1]}'),
        ('{"required": ["a"]}', '{\n  "required" : [ "a" ]\n}'),
        ("true", "true"),
    ],
)
def test_the_same_json_value_registers_nothing(http, topic, current, again):
    make(http, topic, current)
    stored = history(http, topic)
    assert "narad-no-change" in dry_run(http, topic, again).headers
    assert change(http, topic, again) == 1
    assert history(http, topic) == stored  # as first written, spelling kept


@pytest.mark.parametrize(
    ("current", "other"),
    [
        ('{"const": 1}', '{"const": true}'),
        ('{"enum": [1, 2]}', '{"enum": [2, 1]}'),
        ('{"maximum": 10}', '{"maximum": 10.000000000000001}'),
        ("true", '{"title": "t"}'),
    ],
)
def test_another_json_value_is_a_change(http, topic, current, other):
    make(http, topic, current)
    assert "narad-no-change" not in dry_run(http, topic, other).headers
    resp = http.patch(f"/v1/topics/{topic}", '{"schema": %s}' % other)  # noqa: UP031
    # Registered, or refused as incompatible: never "no change".
    assert resp.status in (200, 400), resp.data
    if resp.status == 200:
        assert resp.json()["schema_version"] == 2


def test_annotations_alone_register_nothing(http, topic):
    make(http, topic, '{"title": "a", "properties": {"x": {}}}')
    assert change(http, topic, '{"title": "b", "properties": {"x": {}}}') == 1
    text = '{"description": "d", "properties": {"x": {"$comment": "c"}}}'
    assert change(http, topic, text) == 1
    # A nested {} becoming true is a change, with annotations or without.
    assert change(http, topic, '{"title": "a", "properties": {"x": true}}') == 2
