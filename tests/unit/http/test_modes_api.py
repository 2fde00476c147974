"""Compatibility modes and the dry-run check over the API, in-process
(fakeredis): field rules, what the answers carry, children following their
parent."""

from __future__ import annotations

import json

import pytest

from narad import testing
from narad.schema.capacity import ValidationCapacity
from narad.schema.modes import MAX_REPORTED

INT = {"properties": {"qty": {"type": "integer"}}}
WIDE = {"properties": {"qty": {"type": ["integer", "string"]}}}
NARROW = {"properties": {"qty": {"type": "string"}}, "required": ["qty", "id"]}


def make(client, name, **fields):
    resp = client.simulate_post("/v1/topics", json={"name": name, **fields})
    assert resp.status_code == 201, resp.text
    return resp.json


def patch(client, name, **fields):
    return client.simulate_patch(f"/v1/topics/{name}", json=fields)


def dry_run(client, name, **body):
    return client.simulate_post(f"/v1/topics/{name}/schemas/compatibility", json=body)


def checked(resp):
    """The versions a dry run read, from its header."""
    value = resp.headers.get("narad-checked-versions")
    return [int(v) for v in value.split(", ")] if value else []


def direction(violation):
    """Which way a dry run's violation was found: a forward one says so."""
    return "forward" if "(forward: " in violation["message"] else "backward"


def record(client, name):
    return client.simulate_get(f"/v1/topics/{name}").json


def versions(client, name):
    history = client.simulate_get(f"/v1/topics/{name}/schemas").json
    return [v["version"] for v in history["versions"]]


# -- the setting --------------------------------------------------------------


def test_the_mode_is_a_setting_shown_in_the_record(client):
    assert make(client, "plain")["compatibility"] == "BACKWARD"
    assert make(client, "full", compatibility="FULL")["compatibility"] == "FULL"
    assert record(client, "full")["compatibility"] == "FULL"
    listed = client.simulate_get("/v1/topics").json["topics"]
    assert {t["name"]: t["compatibility"] for t in listed} == {
        "full": "FULL",
        "plain": "BACKWARD",
    }
    resp = patch(client, "plain", compatibility="FORWARD_TRANSITIVE")
    assert resp.status_code == 200, resp.text
    assert resp.json["compatibility"] == "FORWARD_TRANSITIVE"


@pytest.mark.parametrize(
    ("value", "words"),
    [
        ("forward", "compatibility must be one of BACKWARD, BACKWARD_TRANSITIVE, "),
        ("FULLY", "got 'FULLY'"),
        ("", "got ''"),
        (None, "compatibility must be a string naming a compatibility mode"),
        (3, "compatibility must be a string"),
        (["FULL"], "compatibility must be a string"),
    ],
)
def test_a_mode_is_named_exactly(client, value, words):
    resp = client.simulate_post(
        "/v1/topics", json={"name": "t", "compatibility": value}
    )
    assert resp.status_code == 400
    assert words in resp.json["error"]
    assert client.simulate_get("/v1/topics/t").status_code == 404
    make(client, "t")
    resp = patch(client, "t", compatibility=value, visibility_timeout_ms=5)
    assert resp.status_code == 400
    assert words in resp.json["error"]
    assert record(client, "t")["visibility_timeout_ms"] == 30000


def test_a_mode_changes_with_the_other_settings_or_not_at_all(client):
    make(client, "t")
    resp = patch(client, "t", compatibility="NONE", retention_ms=5)
    assert resp.status_code == 400
    assert record(client, "t")["compatibility"] == "BACKWARD"
    resp = patch(client, "t", compatibility="NONE", visibility_timeout_ms=5)
    assert resp.status_code == 200
    assert (resp.json["compatibility"], resp.json["visibility_timeout_ms"]) == (
        "NONE",
        5,
    )


def test_a_schema_is_checked_in_the_mode_the_patch_leaves(client):
    make(client, "t", schema=INT)
    # Forward refuses a widening; the mode and the schema stay as they were.
    resp = patch(client, "t", compatibility="FORWARD", schema=WIDE)
    assert resp.status_code == 400
    assert "forward" in resp.json["error"]
    assert record(client, "t")["compatibility"] == "BACKWARD"
    assert versions(client, "t") == [1]
    # NONE lets a narrowing through, both written in one step.
    resp = patch(client, "t", compatibility="NONE", schema=NARROW)
    assert resp.status_code == 200, resp.text
    assert (resp.json["compatibility"], resp.json["schema_version"]) == ("NONE", 2)


def test_a_mode_change_checks_no_stored_version(client):
    make(client, "t", schema=WIDE, compatibility="NONE")
    assert patch(client, "t", schema=INT).status_code == 200
    # The history is not forward compatible; the mode applies from now on.
    resp = patch(client, "t", compatibility="FORWARD_TRANSITIVE")
    assert resp.status_code == 200
    assert patch(client, "t", schema=WIDE).status_code == 400


def test_refusals_name_version_and_direction(client):
    make(client, "t", schema=INT, compatibility="FORWARD")
    resp = patch(client, "t", schema=WIDE)
    assert resp.status_code == 400
    assert resp.json["error"] == (
        "invalid argument: schema: incompatible with version 1 forward (version 1 "
        "must accept every message the new schema accepts; read as a change from "
        "the new schema to version 1, at places in version 1): at /properties/qty: "
        'type "string" no longer allowed'
    )
    assert patch(client, "t", compatibility="BACKWARD").status_code == 200
    resp = patch(client, "t", schema=NARROW)
    # The rulebook's wording, one violation (a PATCH stops at the first).
    assert resp.json["error"] == (
        "invalid argument: schema: incompatible with version 1: at "
        '/properties/qty: type "integer" no longer allowed'
    )


def test_none_accepts_any_registrable_schema_only(client):
    make(client, "t", schema=INT, compatibility="NONE")
    assert patch(client, "t", schema=NARROW).status_code == 200
    assert patch(client, "t", schema={"type": "boolean"}).status_code == 200
    assert patch(client, "t", schema=False).status_code == 400
    resp = patch(client, "t", schema=None)
    assert resp.status_code == 400
    assert "cannot be removed" in resp.json["error"]
    assert versions(client, "t") == [1, 2, 3]


# -- the dry run --------------------------------------------------------------


def test_a_dry_run_reports_every_violation_and_stores_nothing(client):
    make(client, "t", schema=INT)
    resp = dry_run(client, "t", schema=NARROW)
    assert resp.status_code == 200, resp.text
    # Exactly the report: no other member.
    assert resp.json == {
        "compatible": False,
        "mode": "BACKWARD",
        "violations": [
            {
                "pointer": "/properties/qty",
                "keyword": "type",
                "message": 'type "integer" no longer allowed',
                "against_version": 1,
            },
            {
                "pointer": "",
                "keyword": "required",
                "message": 'required property "qty" added',
                "against_version": 1,
            },
            {
                "pointer": "",
                "keyword": "required",
                "message": 'required property "id" added',
                "against_version": 1,
            },
        ],
    }
    assert checked(resp) == [1]
    assert "narad-no-change" not in resp.headers
    assert "narad-report-truncated" not in resp.headers
    assert versions(client, "t") == [1]
    assert record(client, "t")["schema_version"] == 1


def test_a_dry_run_in_full_mode_reports_both_directions(client):
    make(client, "t", schema=INT, compatibility="FULL")
    found = dry_run(client, "t", schema=WIDE).json
    assert found == {
        "compatible": False,
        "mode": "FULL",
        "violations": [
            {
                "pointer": "/properties/qty",
                "keyword": "type",
                "message": 'type "string" no longer allowed (forward: read as a '
                "change from the new schema to version 1, at a place in version 1)",
                "against_version": 1,
            }
        ],
    }
    both = dry_run(client, "t", schema={"properties": {"qty": {"type": "number"}}})
    assert both.json["compatible"] is False
    assert [direction(v) for v in both.json["violations"]] == ["forward"]


def test_a_dry_run_against_a_version_or_the_whole_history(client):
    make(client, "t", schema=INT, compatibility="NONE")
    patch(client, "t", schema={"properties": {"qty": {"type": "string"}}})
    patch(client, "t", schema=WIDE)
    patch(client, "t", compatibility="BACKWARD")
    proposal = {"properties": {"qty": {"type": ["string", "null"]}}}
    latest = dry_run(client, "t", schema=proposal)
    assert (checked(latest), latest.json["compatible"]) == ([3], False)
    every = dry_run(client, "t", schema=proposal, against="all")
    assert checked(every) == [3, 2, 1]
    assert [v["against_version"] for v in every.json["violations"]] == [3, 1]
    second = dry_run(client, "t", schema=proposal, against=2)
    assert (checked(second), second.json["compatible"]) == ([2], True)
    # FULL against one version: both directions against that version.
    full = dry_run(client, "t", schema=proposal, against=2, mode="FULL").json
    assert full["mode"] == "FULL"
    assert [(v["against_version"], direction(v)) for v in full["violations"]] == [
        (2, "forward")
    ]
    # A transitive mode's default is the whole history.
    patch(client, "t", compatibility="BACKWARD_TRANSITIVE")
    assert checked(dry_run(client, "t", schema=proposal)) == [3, 2, 1]
    assert checked(dry_run(client, "t", schema=proposal, against="latest")) == [3]


def test_a_dry_run_of_no_change(client):
    make(client, "t", schema=INT, compatibility="FULL_TRANSITIVE")
    annotated = {"title": "x", "properties": {"qty": {"type": "integer"}}}
    same = dry_run(client, "t", schema=annotated)
    assert same.json == {
        "compatible": True,
        "mode": "FULL_TRANSITIVE",
        "violations": [],
    }
    assert (same.headers["narad-no-change"], checked(same)) == ("true", [])
    asked = dry_run(client, "t", schema=INT, against="latest")
    assert (asked.headers["narad-no-change"], asked.json["compatible"]) == (
        "true",
        True,
    )
    assert checked(asked) == [1]


def test_a_dry_run_without_a_schema_or_in_none_mode(client):
    make(client, "bare")
    found = dry_run(client, "bare", schema=INT)
    assert (found.json["compatible"], checked(found)) == (True, [])
    assert dry_run(client, "bare", schema=INT, against="all").json["compatible"]
    missing = dry_run(client, "bare", schema=INT, against=1)
    assert missing.status_code == 404
    assert missing.json["error"] == "topic bare has no schema version 1"
    make(client, "free", schema=INT, compatibility="NONE")
    free = dry_run(client, "free", schema=NARROW)
    assert free.json == {"compatible": True, "mode": "NONE", "violations": []}
    assert checked(free) == []
    assert (
        dry_run(client, "free", schema=NARROW, mode="BACKWARD").json["compatible"]
        is False
    )


@pytest.mark.parametrize(
    ("body", "status", "words"),
    [
        ({}, 400, "schema is required"),
        ({"schema": INT, "extra": 1}, 400, "unknown field 'extra'"),
        ({"schema": None}, 400, "a schema cannot be removed (null)"),
        ({"schema": False}, 400, "false is refused"),
        ({"schema": {"$ref": "http://x/y"}}, 400, "schema: "),
        ({"schema": {"type": 5}}, 400, "schema: "),
        ({"schema": INT, "against": "first"}, 400, 'against must be "latest", "all"'),
        ({"schema": INT, "against": 0}, 400, "against must be from 1"),
        ({"schema": INT, "against": 1.5}, 400, "against must be an integer"),
        ({"schema": INT, "against": True}, 400, "against must be an integer"),
        ({"schema": INT, "against": 2}, 404, "topic t has no schema version 2"),
        ({"schema": INT, "mode": "full"}, 400, "mode must be one of BACKWARD"),
    ],
)
def test_a_dry_run_refuses_what_a_patch_would(client, body, status, words):
    make(client, "t", schema=INT)
    resp = client.simulate_post("/v1/topics/t/schemas/compatibility", json=body)
    assert resp.status_code == status, resp.text
    assert words in resp.json["error"]
    assert versions(client, "t") == [1]


def test_a_dry_run_of_an_unknown_topic_or_a_bad_body(client):
    assert dry_run(client, "nope", schema=INT).status_code == 404
    make(client, "t")
    resp = client.simulate_post("/v1/topics/t/schemas/compatibility", body=b"[1]")
    assert resp.status_code == 400
    wrong = client.simulate_get("/v1/topics/t/schemas/compatibility")
    assert (wrong.status_code, wrong.headers["allow"]) == (405, "POST, OPTIONS")


def test_a_dry_run_report_is_bounded_and_says_so(client):
    count = MAX_REPORTED + 10
    old = {"properties": {f"p{i}": {"type": "integer"} for i in range(count)}}
    new = {"properties": {f"p{i}": {"type": "string"} for i in range(count)}}
    make(client, "t", schema=old)
    found = dry_run(client, "t", schema=new)
    assert len(found.json["violations"]) == MAX_REPORTED
    assert found.headers["narad-report-truncated"] == "true"


# -- children follow their parent ---------------------------------------------


def test_a_child_follows_its_parents_mode(client):
    make(client, "p", schema=INT, compatibility="FULL")
    assert make(client, "c", parent="p")["compatibility"] == "FULL"
    assert make(client, "same", parent="p", compatibility="FULL")["compatibility"] == (
        "FULL"
    )
    refused = client.simulate_post(
        "/v1/topics", json={"name": "x", "parent": "p", "compatibility": "NONE"}
    )
    assert refused.status_code == 409
    assert refused.json["error"] == (
        "compatibility: topic x would be a child of p, whose compatibility mode is "
        "FULL: a child follows its parent's mode; leave compatibility out or give FULL"
    )
    assert client.simulate_get("/v1/topics/x").status_code == 404
    # Attached with a mode of its own, a topic takes the parent's.
    make(client, "a", compatibility="NONE")
    attached = client.simulate_post("/v1/topics/p/children", json={"child": "a"})
    assert attached.status_code == 200, attached.text
    assert record(client, "a")["compatibility"] == "FULL"
    # The parent's new mode reaches every child in the same write.
    assert patch(client, "p", compatibility="BACKWARD").status_code == 200
    assert {record(client, n)["compatibility"] for n in ("c", "same", "a")} == {
        "BACKWARD"
    }
    resp = patch(client, "c", compatibility="NONE", visibility_timeout_ms=5)
    assert resp.status_code == 409
    assert "whose compatibility mode (BACKWARD) it follows" in resp.json["error"]
    assert record(client, "c")["visibility_timeout_ms"] == 30000
    # Naming the mode it has is no change.
    resp = patch(client, "c", compatibility="BACKWARD", visibility_timeout_ms=5)
    assert resp.status_code == 200
    # A dry run on a child is refused as its PATCH would be.
    assert dry_run(client, "c", schema=WIDE).status_code == 409
    # Detached, it keeps the mode it had and manages it again.
    assert client.simulate_delete("/v1/topics/p/children/c").status_code == 204
    assert record(client, "c")["compatibility"] == "BACKWARD"
    assert patch(client, "c", compatibility="NONE").status_code == 200
    assert record(client, "p")["compatibility"] == "BACKWARD"


def test_a_parents_schema_change_is_checked_in_its_mode_and_reaches_children(client):
    make(client, "p", schema=WIDE, compatibility="FORWARD")
    make(client, "c", parent="p")
    assert patch(client, "p", schema=INT).status_code == 200
    assert record(client, "c")["schema_version"] == 2
    assert patch(client, "p", schema=WIDE).status_code == 400
    resp = patch(client, "p", schema=WIDE, compatibility="BACKWARD")
    assert resp.status_code == 200
    child = record(client, "c")
    assert (child["schema_version"], child["compatibility"]) == (3, "BACKWARD")


# -- cost ---------------------------------------------------------------------


def test_a_large_check_takes_a_slot_of_the_validation_capacity(tmp_path):
    config = testing.make_config(
        tmp_path, validation__capacity_slots=1, validation__capacity_wait_ms=50
    )
    client = testing.client(config)
    # Three versions of ~100 KiB, FULL_TRANSITIVE: well over LARGE_CHECK.
    wide = {
        "properties": {f"p{i}": {"type": "integer", "maximum": i} for i in range(4000)}
    }
    assert 64 * 1024 < len(json.dumps(wide)) < 256 * 1024
    make(client, "big", schema=wide, compatibility="NONE")
    for n in (1, 2):
        wide["properties"]["p0"]["maximum"] = n
        assert patch(client, "big", schema=wide).status_code == 200
    patch(client, "big", compatibility="FULL_TRANSITIVE")
    make(client, "small", schema=INT)
    capacity = ValidationCapacity(tmp_path / "capacity", slots=1)
    with capacity.slot():
        busy = dry_run(client, "big", schema=wide)
        assert busy.status_code == 503
        assert busy.json["error"] == "schema: validation capacity busy, retry"
        wide["properties"]["p0"]["maximum"] = 7
        assert patch(client, "big", schema=wide).status_code == 503
        # A small check needs no slot.
        assert dry_run(client, "small", schema=WIDE).status_code == 200
    assert record(client, "big")["schema_version"] == 3
    wide["properties"]["p0"]["maximum"] = 2
    found = dry_run(client, "big", schema=wide, against="all")
    assert (checked(found), found.headers["narad-no-change"]) == ([3, 2, 1], "true")
