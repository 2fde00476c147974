"""Compatibility modes and the dry-run check over real HTTP, on a gunicorn node
on Valkey: the case tables per mode through PATCH and the dry run, which must
agree, histories, fan-out children following their parent, and who may ask
for a dry run."""

from __future__ import annotations

import json
import uuid

import pytest

from tests.cases.compatibility import CASES
from tests.cases.compatibility import MODE_CASES
from tests.cases.compatibility import MODES
from tests.httpclient import Client

NO_CHANGE = {
    "idempotent: key order and whitespace",
    "idempotent: 10 and 1e1",
    "annotations are not a change, wherever a subschema sits",
}


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


def create(http, name: str, schema_text: str, mode: str) -> None:
    body = (
        f'{{"name": "{name}", "partitions": 1, "compatibility": "{mode}", '
        f'"schema": {schema_text}}}'
    )
    resp = http.post("/v1/topics", body)
    assert resp.status == 201, resp.data[:300]


def patch_schema(http, name: str, schema_text: str):
    return http.patch(f"/v1/topics/{name}", '{"schema": ' + schema_text + "}")


def dry_run(http, name: str, schema_text: str, extra: str = ""):
    body = '{"schema": ' + schema_text + extra + "}"
    return http.post(f"/v1/topics/{name}/schemas/compatibility", body)


def stored_versions(http, name: str) -> list[int]:
    history = http.get(f"/v1/topics/{name}/schemas").json()
    return [v["version"] for v in history["versions"]]


def checked(resp) -> list[int]:
    """The versions a dry run read, from its header."""
    headers = {k.lower(): v for k, v in resp.headers.items()}
    value = headers.get("narad-checked-versions")
    return [int(v) for v in value.split(", ")] if value else []


def direction_of(violation: dict) -> str:
    """Which way a dry run's violation was found: a forward one says so."""
    return "forward" if "(forward: " in violation["message"] else "backward"


def said(violation: dict) -> str:
    """A dry run's violation as a PATCH refusal words it."""
    return f"at {violation['pointer'] or 'the root'}: {violation['message']}"


def both_ways(http, name, proposed, compatible, words, direction):
    """The dry run and then the PATCH of ``proposed``: the same verdict, the
    same words; a refused PATCH stores nothing."""
    before = stored_versions(http, name)
    report = dry_run(http, name, proposed)
    assert report.status == 200, report.data[:300]
    found = report.json()
    assert stored_versions(http, name) == before
    resp = patch_schema(http, name, proposed)
    assert found["compatible"] is compatible, found
    if compatible:
        assert found["violations"] == []
        assert resp.status == 200, resp.data[:300]
        return
    assert resp.status == 400, resp.data[:300]
    assert words in resp.error
    assert any(words in said(v) for v in found["violations"]), found
    assert {direction_of(v) for v in found["violations"]} == {direction}
    assert stored_versions(http, name) == before


@pytest.mark.parametrize(
    ("old", "new", "compatible", "words"),
    [pytest.param(o, n, c, w, id=i) for i, o, n, c, w in CASES],
)
def test_backward_case(http, old, new, compatible, words):
    name = _name("bwd")
    create(http, name, old, "BACKWARD")
    both_ways(http, name, new, compatible, words, "backward")


@pytest.mark.parametrize(
    ("old", "new", "compatible", "words"),
    [pytest.param(o, n, c, w, id=i) for i, o, n, c, w in CASES],
)
def test_forward_case_by_swapping(http, old, new, compatible, words):
    name = _name("fwd")
    create(http, name, new, "FORWARD")
    both_ways(http, name, old, compatible, words, "forward")


@pytest.mark.parametrize(
    ("old", "new", "compatible", "words"),
    [
        pytest.param(o, n, c, w, id=i)
        for i, o, n, c, w in CASES
        if not c or i in NO_CHANGE
    ],
)
def test_full_case(http, old, new, compatible, words):
    # What the table defines for FULL: refused backward is refused; no change
    # is accepted.
    name = _name("full")
    create(http, name, old, "FULL")
    report = dry_run(http, name, new).json()
    resp = patch_schema(http, name, new)
    assert report["compatible"] is compatible
    assert (resp.status == 200) is compatible, resp.data[:300]
    if not compatible:
        assert words in resp.error
        assert any(words in said(v) for v in report["violations"]), report


@pytest.mark.parametrize(
    ("old", "new"), [pytest.param(o, n, id=i) for i, o, n, _, _ in CASES]
)
def test_none_accepts_every_registrable_schema(http, old, new):
    name = _name("none")
    create(http, name, old, "NONE")
    report = dry_run(http, name, new).json()
    assert (report["compatible"], report["violations"]) == (True, [])
    resp = patch_schema(http, name, new)
    assert resp.status == 200, resp.data[:300]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(
    ("history", "new", "refusals"),
    [pytest.param(h, n, r, id=i) for i, h, n, r in MODE_CASES],
)
def test_mode_case(http, mode, history, new, refusals):
    name = _name("mode")
    create(http, name, history[0], "NONE")
    for version in history[1:]:
        assert patch_schema(http, name, version).status == 200
    resp = http.patch(f"/v1/topics/{name}", {"compatibility": mode})
    assert resp.json()["compatibility"] == mode
    report = dry_run(http, name, new).json()
    assert report["mode"] == mode
    resp = patch_schema(http, name, new)
    if mode not in refusals:
        assert report["compatible"] is True, report
        assert resp.status == 200, resp.data[:300]
        return
    version, direction, words = refusals[mode]
    assert report["compatible"] is False
    first = report["violations"][0]
    assert (first["against_version"], direction_of(first)) == (version, direction)
    assert words in said(first)
    assert resp.status == 400
    assert words in resp.error
    assert f"incompatible with version {version}" in resp.error
    assert (" forward (" in resp.error) is (direction == "forward")
    assert stored_versions(http, name) == list(range(1, len(history) + 1))


def test_a_dry_run_reports_several_violations_against_every_version(http):
    name = _name("many")
    create(http, name, '{"type":"integer","maximum":5}', "NONE")
    assert patch_schema(http, name, '{"type":"string"}').status == 200
    resp = http.patch(f"/v1/topics/{name}", {"compatibility": "FULL_TRANSITIVE"})
    assert resp.status == 200
    proposed = '{"type":"boolean","required":["a"]}'
    resp = dry_run(http, name, proposed)
    assert checked(resp) == [2, 1]
    report = resp.json()
    assert set(report) == {"compatible", "mode", "violations"}
    assert [
        (v["against_version"], direction_of(v), v["keyword"])
        for v in report["violations"]
    ] == [
        (2, "backward", "type"),
        (2, "backward", "required"),
        (2, "forward", "type"),
        (1, "backward", "type"),
        (1, "backward", "required"),
        (1, "forward", "type"),
        (1, "forward", "maximum"),
    ]
    one = dry_run(http, name, proposed, ', "against": 1, "mode": "FORWARD"').json()
    assert [(v["against_version"], v["keyword"]) for v in one["violations"]] == [
        (1, "type"),
        (1, "maximum"),
    ]
    # The PATCH names the first of them, and stores nothing.
    resp = patch_schema(http, name, proposed)
    assert resp.status == 400
    assert resp.error == (
        "invalid argument: schema: incompatible with version 2: at the root: "
        'type "string" no longer allowed'
    )
    assert stored_versions(http, name) == [1, 2]


def test_a_dry_run_report_quoting_a_lone_surrogate_is_json(http):
    # The names a report quotes come from the schemas: "\ud800" is valid
    # JSON there, and UTF-8 cannot hold it, so the report writes it escaped.
    name = _name("surrogate")
    create(http, name, '{"properties": {"\\ud800": {"type": "string"}}}', "BACKWARD")
    resp = dry_run(http, name, '{"properties": {"\\ud800": {"type": "integer"}}}')
    assert resp.status == 200, resp.data[:300]
    [violation] = resp.json()["violations"]
    assert violation["pointer"] == "/properties/\ud800"
    assert violation["message"] == 'type "string" no longer allowed'


def test_children_follow_their_parent_over_http(http):
    parent, child, loose = _name("p"), _name("c"), _name("l")
    create(http, parent, '{"type":"integer"}', "FORWARD")
    resp = http.post("/v1/topics", {"name": child, "parent": parent})
    assert resp.json()["compatibility"] == "FORWARD"
    resp = http.post("/v1/topics", {"name": loose, "compatibility": "NONE"})
    assert resp.status == 201
    resp = http.post(f"/v1/topics/{parent}/children", {"child": loose})
    assert resp.status == 200
    # Refused for a child, a mode and a schema alike; its dry run too.
    resp = http.patch(f"/v1/topics/{child}", {"compatibility": "NONE"})
    assert resp.status == 409
    assert dry_run(http, child, '{"type":"integer"}').status == 409
    # The parent's new mode and its new version reach both in one write.
    resp = http.patch(
        f"/v1/topics/{parent}",
        '{"compatibility": "FULL", "schema": {"type":"integer","title":"n"}}',
    )
    assert resp.status == 200
    resp = http.patch(
        f"/v1/topics/{parent}",
        '{"compatibility": "BACKWARD", "schema": {"type":["integer","null"]}}',
    )
    assert resp.status == 200
    for name in (child, loose):
        got = http.get(f"/v1/topics/{name}").json()
        assert (got["compatibility"], got["schema_version"]) == ("BACKWARD", 2)
    assert http.delete(f"/v1/topics/{parent}/children/{loose}").status == 204
    resp = http.patch(f"/v1/topics/{loose}", {"compatibility": "NONE"})
    assert resp.json()["compatibility"] == "NONE"
    assert http.get(f"/v1/topics/{child}").json()["compatibility"] == "BACKWARD"


def test_a_dry_run_is_for_readers_of_the_topic(node, http):
    """The dry run reads a topic's schemas: any grant matching the topic, or
    owning it, lets a user ask; changing the schema stays the owner's."""
    p = _name("sec")
    create(http, f"{p}.t", '{"type":"integer"}', "BACKWARD")
    check = f"/v1/topics/{p}.t/schemas/compatibility"
    body = {"schema": {"type": "string"}}
    users: list[tuple[str, str]] = []
    for grants in (
        [{"action": "produce", "patterns": [f"{p}.t"]}],
        [{"action": "consume", "patterns": [f"{p}.other"]}],
        [{"action": "create", "patterns": [f"{p}.own.*"]}],
    ):
        user = (f"u-{uuid.uuid4().hex[:10]}", "a-password-of-its-own")
        resp = http.post(
            "/v1/users", {"username": user[0], "password": user[1], "grants": grants}
        )
        assert resp.status == 201, resp.data
        users.append(user)
    reader, stranger, creator = (Client(node.base, auth=u) for u in users)
    anonymous = Client(node.base, auth=None)
    try:
        resp = anonymous.post(check, body)
        assert resp.status == 401
        assert resp.headers["www-authenticate"] == 'Basic realm="narad"'
        resp = stranger.post(check, body)
        assert resp.status == 403
        assert resp.error == (
            f"user {users[1][0]} may not read topic {p}.t: no grant matches it"
        )
        # Without a grant matching it, a missing topic is 403 as well.
        assert (
            stranger.post(f"/v1/topics/{p}.never/schemas/compatibility", body).status
            == 403
        )
        report = reader.post(check, body)
        assert report.status == 200, report.data
        assert report.json()["compatible"] is False
        assert reader.patch(f"/v1/topics/{p}.t", body).status == 403
        # The owner asks about the topic it created, as the admin does.
        own = f"{p}.own.t"
        assert creator.post("/v1/topics", {"name": own, "schema": True}).status == 201
        owned = creator.post(f"/v1/topics/{own}/schemas/compatibility", body)
        assert (owned.status, owned.json()["compatible"]) == (200, False)
        assert http.post(check, body).json()["compatible"] is False
        assert stored_versions(http, f"{p}.t") == [1]
    finally:
        for client in (reader, stranger, creator, anonymous):
            client.close()


@pytest.mark.parametrize("mode", ["BACKWARD", "FORWARD", "FULL_TRANSITIVE"])
def test_a_dry_run_against_latest_of_no_change_agrees_with_the_patch(http, mode):
    # Only annotations differ, inside a part the check wants unchanged byte
    # for byte (unevaluatedProperties): the schema accepts exactly what
    # version 2 does, so a PATCH registers nothing (200), and a dry run
    # against the latest version, or every version, says compatible, as a
    # Confluent user's check against "latest" expects before that PATCH.
    name = _name("nochange")
    closed = '"a":{"type":"object","unevaluatedProperties":false'
    v1 = '{"properties":{' + closed + '},"n":{"const":1}}}'
    v2 = '{"properties":{' + closed + '},"n":{"enum":[1]}}}'
    create(http, name, v1, mode)
    assert patch_schema(http, name, v2).json()["schema_version"] == 2
    proposed = '{"properties":{' + closed + ',"title":"a"},"n":{"enum":[1]}}}'
    for against in ("latest", "all", 2):
        resp = dry_run(http, name, proposed, f', "against": {json.dumps(against)}')
        assert resp.status == 200, resp.data[:300]
        headers = {k.lower(): v for k, v in resp.headers.items()}
        assert headers["narad-no-change"] == "true"
        assert resp.json() == {"compatible": True, "mode": mode, "violations": []}
    resp = patch_schema(http, name, proposed)
    assert resp.status == 200, resp.data[:300]
    assert resp.json()["schema_version"] == 2
