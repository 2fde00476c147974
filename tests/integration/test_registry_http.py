"""Confluent's registry API under /registry over real HTTP on a live node and
real Valkey (issue 54): every endpoint, its errors, its authorisation, and
the identity of a topic's history with its subject ``<topic>-value``.
Confluent's own client and serializers against a node:
tests/integration/test_confluent_clients_http.py."""

from __future__ import annotations

import json
import uuid
from urllib.parse import quote

import pytest

from tests.httpclient import Client

MEDIA = "application/vnd.schemaregistry.v1+json"
HEADERS = {"Content-Type": MEDIA, "Accept": MEDIA}
ORDER = {
    "type": "record",
    "name": "Order",
    "namespace": "shop",
    "fields": [{"name": "id", "type": "string"}],
}
WIDER = {
    **ORDER,
    "fields": [*ORDER["fields"], {"name": "qty", "type": "int", "default": 1}],
}
WIDEST = {
    **ORDER,
    "fields": [*WIDER["fields"], {"name": "note", "type": "string", "default": ""}],
}
NARROWED = {**ORDER, "fields": [{"name": "id", "type": "int"}]}
JSON_SCHEMA = {"type": "object", "properties": {"id": {"type": "integer"}}}
PROTO = 'syntax = "proto3";\npackage shop;\n\nmessage Order {\n  string id = 1;\n}\n'


@pytest.fixture
def subject(topic) -> str:
    """A standalone subject unique to the test."""
    return f"team.{topic}"


def body(value, **more) -> str:
    text = value if isinstance(value, str) else json.dumps(value)
    return json.dumps({"schema": text, **more})


def register(http, subject, value, **more):
    return http.post(
        f"/registry/subjects/{quote(subject, safe='')}/versions",
        body(value, **more),
        headers=HEADERS,
    )


def code(resp) -> int:
    assert resp.headers["content-type"] == MEDIA, resp.headers
    return resp.json()["error_code"]


def versions(http, subject, **query) -> list[int]:
    qs = "".join(f"&{k}={v}" for k, v in query.items()).lstrip("&")
    resp = http.get(f"/registry/subjects/{quote(subject, safe='')}/versions?{qs}")
    assert resp.status == 200, resp.data
    return resp.json()


# -- the standalone engine ----------------------------------------------------


def test_schema_types(http):
    resp = http.get("/registry/schemas/types")
    assert resp.status == 200
    assert resp.headers["content-type"] == MEDIA
    assert set(resp.json()) == {"AVRO", "JSON", "PROTOBUF"}
    assert http.get("/registry").json() == {}


def test_register_reuses_ids_across_subjects(http, subject):
    first = register(http, subject, ORDER)
    assert first.status == 200, first.data
    one = first.json()["id"]
    assert one >= 1
    assert register(http, subject, ORDER).json() == {"id": one}
    # Formatting does not make another schema.
    spaced = json.dumps(ORDER, indent=4)
    assert register(http, subject, spaced).json() == {"id": one}
    two = register(http, subject, WIDER).json()["id"]
    assert two != one
    assert register(http, subject + ".copy", WIDER).json() == {"id": two}
    assert versions(http, subject) == [1, 2]
    subjects = http.get(f"/registry/schemas/ids/{two}/subjects").json()
    assert subjects == sorted([subject, subject + ".copy"])
    pairs = http.get(f"/registry/schemas/ids/{two}/versions").json()
    assert {"subject": subject, "version": 2} in pairs


def test_reads_of_versions_and_ids(http, subject):
    one = register(http, subject, ORDER).json()["id"]
    register(http, subject, WIDER)
    latest = http.get(f"/registry/subjects/{subject}/versions/latest").json()
    assert (latest["subject"], latest["version"]) == (subject, 2)
    assert json.loads(latest["schema"]) == WIDER
    same = http.get(f"/registry/subjects/{subject}/versions/-1").json()
    assert same == latest
    text = http.get(f"/registry/subjects/{subject}/versions/1/schema")
    assert text.status == 200
    assert json.loads(text.data) == ORDER
    by_id = http.get(f"/registry/schemas/ids/{one}")
    assert by_id.status == 200
    assert json.loads(by_id.json()["schema"]) == ORDER
    assert "schemaType" not in by_id.json()
    assert json.loads(http.get(f"/registry/schemas/ids/{one}/schema").data) == ORDER
    named = http.get(f"/registry/schemas/ids/{one}?subject={subject}")
    assert named.status == 200
    elsewhere = http.get(f"/registry/schemas/ids/{one}?subject=nobody")
    assert (elsewhere.status, code(elsewhere)) == (404, 40403)
    listed = http.get(f"/registry/subjects?subjectPrefix={subject}").json()
    assert listed == [subject]


def test_lookup(http, subject):
    register(http, subject, ORDER)
    found = http.post(f"/registry/subjects/{subject}", body(ORDER), headers=HEADERS)
    assert found.status == 200
    record = found.json()
    assert (record["subject"], record["version"]) == (subject, 1)
    assert json.loads(record["schema"]) == ORDER
    missing = http.post(f"/registry/subjects/{subject}", body(WIDER), headers=HEADERS)
    assert (missing.status, code(missing)) == (404, 40403)
    nobody = http.post(
        f"/registry/subjects/{subject}.none", body(ORDER), headers=HEADERS
    )
    assert (nobody.status, code(nobody)) == (404, 40401)


def test_incompatible_registrations_and_checks(http, subject):
    register(http, subject, ORDER)
    refused = register(http, subject, NARROWED)
    assert (refused.status, code(refused)) == (409, 409)
    assert "incompatible" in refused.json()["message"]
    url = f"/registry/compatibility/subjects/{subject}/versions"
    ok = http.post(f"{url}/latest", body(WIDER), headers=HEADERS)
    assert ok.json() == {"is_compatible": True}
    bad = http.post(f"{url}/latest?verbose=true", body(NARROWED), headers=HEADERS)
    assert bad.json()["is_compatible"] is False
    assert any("int" in m for m in bad.json()["messages"])
    every = http.post(url, body(NARROWED), headers=HEADERS)
    assert every.json() == {"is_compatible": False}
    one = http.post(f"{url}/1?verbose=True", body(WIDER), headers=HEADERS)
    assert one.json() == {"is_compatible": True, "messages": []}
    gone = http.post(f"{url}/7", body(WIDER), headers=HEADERS)
    assert (gone.status, code(gone)) == (404, 40402)
    assert versions(http, subject) == [1]  # a check stores nothing


def test_soft_and_permanent_deletes(http, subject):
    register(http, subject, ORDER)
    register(http, subject, WIDER)
    base = f"/registry/subjects/{subject}"
    assert http.delete(f"{base}/versions/1").json() == 1
    again = http.delete(f"{base}/versions/1")
    assert (again.status, code(again)) == (404, 40406)
    early = http.delete(f"{base}/versions/2?permanent=true")
    assert (early.status, code(early)) == (404, 40407)
    hidden = http.get(f"{base}/versions/1")
    assert (hidden.status, code(hidden)) == (404, 40402)
    assert http.get(f"{base}/versions/1?deleted=true").json()["version"] == 1
    assert versions(http, subject, deleted="true") == [1, 2]
    early = http.delete(f"{base}?permanent=true")
    assert (early.status, code(early)) == (404, 40405)
    assert http.delete(base).json() == [2]
    soft = http.delete(base)
    assert (soft.status, code(soft)) == (404, 40404)
    assert http.get(f"/registry/subjects?subjectPrefix={subject}").json() == []
    shown = http.get(f"/registry/subjects?subjectPrefix={subject}&deleted=true")
    assert shown.json() == [subject]
    assert http.delete(f"{base}?permanent=true").json() == [1, 2]
    after = http.get(f"{base}/versions")
    assert (after.status, code(after)) == (404, 40401)
    # Numbering and ids survive: registering again starts a new history.
    assert register(http, subject, ORDER).status == 200


def test_config_of_subjects_and_the_default(http, subject):
    assert http.get("/registry/config").json() == {"compatibilityLevel": "BACKWARD"}
    none = http.get(f"/registry/config/{subject}")
    assert (none.status, code(none)) == (404, 40408)
    default = http.get(f"/registry/config/{subject}?defaultToGlobal=true")
    assert default.json() == {"compatibilityLevel": "BACKWARD"}
    put = http.put(
        f"/registry/config/{subject}",
        json.dumps({"compatibility": "NONE"}),
        headers=HEADERS,
    )
    assert put.json() == {"compatibility": "NONE"}
    register(http, subject, ORDER)
    assert register(http, subject, NARROWED).status == 200  # NONE: anything
    bad = http.put(f"/registry/config/{subject}", json.dumps({"compatibility": "LAX"}))
    assert (bad.status, code(bad)) == (422, 42203)
    assert http.delete(f"/registry/config/{subject}").json() == {
        "compatibilityLevel": "NONE"
    }
    assert http.get("/registry/mode").json() == {"mode": "READWRITE"}
    assert http.get(f"/registry/mode/{subject}").json() == {"mode": "READWRITE"}


def test_the_default_config(http):
    try:
        put = http.put("/registry/config", json.dumps({"compatibility": "FULL"}))
        assert put.json() == {"compatibility": "FULL"}
        assert http.get("/registry/config").json() == {"compatibilityLevel": "FULL"}
    finally:
        cleared = http.delete("/registry/config")
    assert cleared.json() == {"compatibilityLevel": "FULL"}
    assert http.get("/registry/config").json() == {"compatibilityLevel": "BACKWARD"}


def test_json_and_protobuf_schemas(http, subject):
    made = register(http, subject + ".json", JSON_SCHEMA, schemaType="JSON")
    assert made.status == 200, made.data
    read = http.get(f"/registry/schemas/ids/{made.json()['id']}").json()
    assert read["schemaType"] == "JSON"
    assert json.loads(read["schema"]) == JSON_SCHEMA
    proto = register(http, subject + ".proto", PROTO, schemaType="PROTOBUF")
    assert proto.status == 200, proto.data
    shown = http.get(f"/registry/schemas/ids/{proto.json()['id']}").json()
    assert shown["schemaType"] == "PROTOBUF"
    assert "message Order" in shown["schema"]
    serialized = http.get(
        f"/registry/schemas/ids/{proto.json()['id']}?format=serialized"
    ).json()
    assert serialized["schema"] != shown["schema"]
    # A history has one type.
    other = register(http, subject + ".json", ORDER)
    assert (other.status, code(other)) == (409, 409)


def test_bad_requests_answer_confluent_errors(http, subject):
    invalid = register(http, subject, {"type": "record", "name": "X"})
    assert (invalid.status, code(invalid)) == (422, 42201)
    unknown = register(http, subject, ORDER, schemaType="XML")
    assert (unknown.status, code(unknown)) == (422, 42201)
    version = http.get(f"/registry/subjects/{subject}/versions/first")
    assert (version.status, code(version)) == (422, 42202)
    zero = http.get(f"/registry/subjects/{subject}/versions/0")
    assert (zero.status, code(zero)) == (422, 42202)
    no_subject = http.get(f"/registry/subjects/{subject}/versions/latest")
    assert (no_subject.status, code(no_subject)) == (404, 40401)
    no_id = http.get("/registry/schemas/ids/2147483647")
    assert (no_id.status, code(no_id)) == (404, 40403)
    broken = http.post(f"/registry/subjects/{subject}/versions", "{", headers=HEADERS)
    assert (broken.status, code(broken)) == (422, 422)
    missing = http.post(f"/registry/subjects/{subject}/versions", "{}")
    assert (missing.status, code(missing)) == (422, 422)
    method = http.request("PATCH", f"/registry/subjects/{subject}")
    assert (method.status, code(method)) == (405, 405)
    nowhere = http.get("/registry/nothing/here")
    assert (nowhere.status, code(nowhere)) == (404, 404)


def test_percent_encoded_subjects(http, topic):
    name = f"{topic} with spaces:and:colons"
    made = register(http, name, ORDER)
    assert made.status == 200, made.data
    path = f"/registry/subjects/{quote(name, safe='')}/versions/1"
    assert http.get(path).json()["subject"] == name
    listed = http.get(f"/registry/subjects?subjectPrefix={quote(topic)}").json()
    assert name in listed


# -- one history, two APIs ------------------------------------------------------


def make_topic(http, name, schema=ORDER, **more):
    body = {"name": name, "partitions": 1, "schema_type": "AVRO", "schema": schema}
    resp = http.post("/v1/topics", {**body, **more})
    assert resp.status == 201, resp.data
    return resp.json()


def test_a_patch_shows_as_a_version_of_the_subject(http, topic):
    make_topic(http, topic)
    subject = f"{topic}-value"
    assert versions(http, subject) == [1]
    patched = http.patch(f"/v1/topics/{topic}", {"schema": WIDER})
    assert patched.status == 200, patched.data
    assert versions(http, subject) == [1, 2]
    latest = http.get(f"/registry/subjects/{subject}/versions/latest").json()
    assert json.loads(latest["schema"]) == WIDER
    assert http.get(f"/registry/subjects?subjectPrefix={topic}").json() == [subject]
    uses = http.get(f"/registry/schemas/ids/{latest['id']}/versions").json()
    assert {"subject": subject, "version": 2} in uses


def test_registering_under_the_subject_alters_the_topic(http, topic):
    make_topic(http, topic)
    subject = f"{topic}-value"
    refused = register(http, subject, NARROWED)
    assert (refused.status, code(refused)) == (409, 409)
    made = register(http, subject, WIDER)
    assert made.status == 200
    record = http.get(f"/v1/topics/{topic}").json()
    assert record["schema_version"] == 2
    stored = http.get(f"/v1/topics/{topic}/schemas/2")
    assert json.loads(stored.data) == WIDER
    # Version 1 registered again: its id, and the topic stays at version 2.
    one = http.get(f"/registry/subjects/{subject}/versions/1").json()["id"]
    assert register(http, subject, ORDER).json() == {"id": one}
    assert http.get(f"/v1/topics/{topic}").json()["schema_version"] == 2
    # The subject's config is the topic's mode.
    put = http.put(f"/registry/config/{subject}", json.dumps({"compatibility": "FULL"}))
    assert put.status == 200
    assert http.get(f"/v1/topics/{topic}").json()["compatibility"] == "FULL"
    assert http.get(f"/registry/config/{subject}").json() == {
        "compatibilityLevel": "FULL"
    }
    http.patch(f"/v1/topics/{topic}", {"compatibility": "NONE"})
    assert http.get(f"/registry/config/{subject}").json() == {
        "compatibilityLevel": "NONE"
    }
    assert http.delete(f"/registry/config/{subject}").json() == {
        "compatibilityLevel": "NONE"
    }
    assert http.get(f"/v1/topics/{topic}").json()["compatibility"] == "BACKWARD"


def test_a_topics_history_is_not_deleted_through_the_registry(http, topic):
    make_topic(http, topic)
    subject = f"{topic}-value"
    for path in (
        f"/registry/subjects/{subject}",
        f"/registry/subjects/{subject}/versions/1",
    ):
        refused = http.delete(path)
        assert (refused.status, code(refused)) == (422, 42205)
        assert f"DELETE /v1/topics/{topic}" in refused.json()["message"]
    assert versions(http, subject) == [1]


def test_fan_out_children_share_the_history(http, topic):
    make_topic(http, topic)
    child = f"{topic}.audit"
    made = http.post("/v1/topics", {"name": child, "parent": topic})
    assert made.status == 201, made.data
    register(http, f"{topic}-value", WIDER)
    assert versions(http, f"{child}-value") == [1, 2]
    managed = register(http, f"{child}-value", WIDEST)
    assert (managed.status, code(managed)) == (409, 409)
    assert "is a child of" in managed.json()["message"]


def test_a_topic_under_a_standalone_subjects_name_is_refused(http, topic):
    subject = f"{topic}-value"
    assert register(http, subject, ORDER).status == 200
    refused = http.post("/v1/topics", {"name": topic})
    assert refused.status == 409
    assert subject in refused.error
    # Once the subject is deleted for good, the name is free.
    http.delete(f"/registry/subjects/{subject}")
    http.delete(f"/registry/subjects/{subject}?permanent=true")
    assert http.post("/v1/topics", {"name": topic}).status == 201


# -- authorisation ----------------------------------------------------------


def add_user(http, node, name, grants) -> Client:
    password = "a-good-password"
    resp = http.post(
        "/v1/users", {"username": name, "password": password, "grants": grants}
    )
    assert resp.status == 201, resp.data
    return Client(node.base, auth=(name, password))


def test_who_may_do_what(http, node, topic):
    make_topic(http, topic)
    subject = f"{topic}-value"
    team = f"team.{topic}"
    register(http, team, {**ORDER, "name": "Team"})
    suffix = uuid.uuid4().hex[:8]
    reader = add_user(
        http, node, f"r{suffix}", [{"action": "consume", "patterns": [topic]}]
    )
    creator = add_user(
        http, node, f"c{suffix}", [{"action": "create", "patterns": ["team.*"]}]
    )
    try:
        assert reader.get(f"/registry/subjects/{subject}/versions").status == 200
        denied = reader.get(f"/registry/subjects/{team}/versions")
        assert (denied.status, code(denied)) == (403, 40301)
        listed = reader.get(f"/registry/subjects?subjectPrefix={topic}").json()
        assert listed == [subject]
        write = reader.post(
            f"/registry/subjects/{subject}/versions", body(WIDER), headers=HEADERS
        )
        assert (write.status, code(write)) == (403, 40301)
        config = reader.put(
            f"/registry/config/{subject}", json.dumps({"compatibility": "NONE"})
        )
        assert (config.status, code(config)) == (403, 40301)
        mine = creator.post(
            f"/registry/subjects/{team}/versions",
            body({**WIDER, "name": "Team"}),
            headers=HEADERS,
        )
        assert mine.status == 200, mine.data
        hidden = reader.get(f"/registry/schemas/ids/{mine.json()['id']}")
        assert (hidden.status, code(hidden)) == (404, 40403)
        one = http.get(f"/registry/subjects/{subject}/versions/1").json()["id"]
        assert reader.get(f"/registry/schemas/ids/{one}").status == 200
        delete = creator.delete(f"/registry/subjects/{team}")
        assert (delete.status, code(delete)) == (403, 40301)
        default = creator.put("/registry/config", json.dumps({"compatibility": "NONE"}))
        assert (default.status, code(default)) == (403, 40301)
    finally:
        reader.close()
        creator.close()
    anonymous = Client(node.base, auth=None)
    try:
        resp = anonymous.get("/registry/subjects")
        assert (resp.status, code(resp)) == (401, 40101)
        assert resp.headers["www-authenticate"].startswith("Basic")
        wrong = Client(node.base, auth=("admin", "wrong"))
        bad = wrong.get("/registry/schemas/types")
        wrong.close()
        assert (bad.status, code(bad)) == (401, 40101)
    finally:
        anonymous.close()
