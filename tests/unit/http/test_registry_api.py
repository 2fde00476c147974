"""Confluent's registry API (narad.http.registry, narad.registry) in-process
over fakeredis: standalone subjects' engine, the topic <-> subject identity,
global ids, Confluent's error codes and the registry's authorisation.
Over a real node: tests/integration/test_registry_http.py."""

from __future__ import annotations

import json
import re

import pytest

from narad import testing
from narad.http.openapi_registry import _BOOL
from narad.registry.subjects import candidate_topics
from narad.registry.subjects import parse_version
from narad.registry.subjects import topic_of
from narad.testing import basic_auth

ORDER = {
    "type": "record",
    "name": "Order",
    "fields": [{"name": "id", "type": "string"}],
}
WIDER = {
    "type": "record",
    "name": "Order",
    "fields": [
        {"name": "id", "type": "string"},
        {"name": "qty", "type": "int", "default": 1},
    ],
}
NARROWED = {
    "type": "record",
    "name": "Order",
    "fields": [{"name": "id", "type": "int"}],
}
JSON_SCHEMA = {"type": "object", "properties": {"id": {"type": "integer"}}}


def schema(value) -> dict:
    return {"schema": json.dumps(value)}


@pytest.fixture
def secure(tmp_path):
    return testing.client(testing.make_config(tmp_path, security__enabled=True))


def register(client, subject, value, **body):
    return client.simulate_post(
        f"/registry/subjects/{subject}/versions", json={**schema(value), **body}
    )


def code(resp) -> int:
    return resp.json["error_code"]


def test_subject_names_route_to_topics():
    assert topic_of("orders-value") == "orders"
    assert topic_of("orders-key") == ""
    assert topic_of("a b-value") == ""
    assert topic_of("..-value") == ""
    assert candidate_topics("orders-va") == {"orders"}
    assert candidate_topics("orders") == set()
    assert parse_version("latest") is None
    assert parse_version("-1") is None
    assert parse_version("7") == 7
    for bad in ("0", "x", "2147483648", "-2", "٣"):
        with pytest.raises(ValueError):
            parse_version(bad)


def test_a_standalone_subject_registers_checks_and_reuses_ids(client):
    first = register(client, "shop.Order", ORDER)
    assert first.status_code == 200, first.text
    assert first.headers["content-type"] == "application/vnd.schemaregistry.v1+json"
    one = first.json["id"]
    # The same schema again: no new version, the same id.
    assert register(client, "shop.Order", ORDER).json == {"id": one}
    wider = register(client, "shop.Order", WIDER)
    assert wider.status_code == 200
    assert wider.json["id"] != one
    # Another subject with the same schema: the same global id.
    assert register(client, "other", WIDER).json == wider.json
    refused = register(client, "shop.Order", NARROWED)
    assert refused.status_code == 409
    assert code(refused) == 409
    assert "incompatible" in refused.json["message"]
    versions = client.simulate_get("/registry/subjects/shop.Order/versions")
    assert versions.json == [1, 2]
    latest = client.simulate_get("/registry/subjects/shop.Order/versions/latest").json
    assert latest["version"] == 2
    assert latest["id"] == wider.json["id"]
    assert json.loads(latest["schema"]) == WIDER
    assert "schemaType" not in latest  # Avro, Confluent's default, goes unsaid
    by_id = client.simulate_get(f"/registry/schemas/ids/{one}").json
    assert json.loads(by_id["schema"]) == ORDER
    uses = client.simulate_get(f"/registry/schemas/ids/{wider.json['id']}/versions")
    assert uses.json == [
        {"subject": "other", "version": 1},
        {"subject": "shop.Order", "version": 2},
    ]


def test_lookup_and_compatibility_checks(client):
    register(client, "s", ORDER)
    found = client.simulate_post("/registry/subjects/s", json=schema(ORDER))
    assert found.status_code == 200
    assert (found.json["subject"], found.json["version"]) == ("s", 1)
    missing = client.simulate_post("/registry/subjects/s", json=schema(WIDER))
    assert (missing.status_code, code(missing)) == (404, 40403)
    url = "/registry/compatibility/subjects/s/versions/latest"
    assert client.simulate_post(url, json=schema(WIDER)).json == {"is_compatible": True}
    verbose = client.simulate_post(
        url, json=schema(NARROWED), params={"verbose": "true"}
    ).json
    assert verbose["is_compatible"] is False
    assert verbose["messages"] and "int" in verbose["messages"][0]
    nothing = client.simulate_post(
        "/registry/compatibility/subjects/s/versions/9", json=schema(WIDER)
    )
    assert (nothing.status_code, code(nothing)) == (404, 40402)


def test_soft_then_permanent_delete_of_a_standalone_subject(client):
    register(client, "s", ORDER)
    register(client, "s", WIDER)
    one = client.simulate_delete("/registry/subjects/s/versions/1")
    assert one.json == 1
    again = client.simulate_delete("/registry/subjects/s/versions/1")
    assert (again.status_code, code(again)) == (404, 40406)
    early = client.simulate_delete(
        "/registry/subjects/s/versions/2", params={"permanent": "true"}
    )
    assert (early.status_code, code(early)) == (404, 40407)
    assert client.simulate_get("/registry/subjects/s/versions").json == [2]
    every = client.simulate_get("/registry/subjects/s/versions?deleted=true")
    assert every.json == [1, 2]
    assert client.simulate_delete("/registry/subjects/s").json == [2]
    soft = client.simulate_delete("/registry/subjects/s")
    assert (soft.status_code, code(soft)) == (404, 40404)
    assert client.simulate_get("/registry/subjects").json == []
    assert client.simulate_get("/registry/subjects?deleted=true").json == ["s"]
    gone = client.simulate_delete("/registry/subjects/s", params={"permanent": "true"})
    assert gone.json == [1, 2]
    after = client.simulate_get("/registry/subjects/s/versions")
    assert (after.status_code, code(after)) == (404, 40401)
    # Ids held by no version any more are gone; the same schema registered
    # again gets its id back (a number never stands for another schema).
    gone = client.simulate_get("/registry/schemas/ids/2")
    assert (gone.status_code, code(gone)) == (404, 40403)
    assert register(client, "s", WIDER).json == {"id": 2}
    back = client.simulate_get("/registry/schemas/ids/2").json
    assert json.loads(back["schema"]) == WIDER


def test_a_topics_subject_is_its_history(client):
    made = client.simulate_post(
        "/v1/topics", json={"name": "orders", "schema_type": "AVRO", "schema": ORDER}
    )
    assert made.status_code == 201
    assert client.simulate_get("/registry/subjects").json == ["orders-value"]
    # A PATCH is a new version of the subject...
    patched = client.simulate_patch("/v1/topics/orders", json={"schema": WIDER})
    assert patched.json["schema_version"] == 2
    listed = client.simulate_get("/registry/subjects/orders-value/versions")
    assert listed.json == [1, 2]
    # ...and registering under the subject changes the topic, by its rules.
    refused = register(client, "orders-value", NARROWED)
    assert refused.status_code == 409
    third = {
        **WIDER,
        "fields": [*WIDER["fields"], {"name": "n", "type": "long", "default": 0}],
    }
    added = register(client, "orders-value", third)
    assert added.status_code == 200
    assert client.simulate_get("/v1/topics/orders").json["schema_version"] == 3
    # An earlier version registered again answers its id, adding nothing.
    one = client.simulate_get("/registry/subjects/orders-value/versions/1").json
    assert register(client, "orders-value", ORDER).json == {"id": one["id"]}
    assert client.simulate_get("/v1/topics/orders").json["schema_version"] == 3
    # Its config is the topic's mode.
    put = client.simulate_put(
        "/registry/config/orders-value", json={"compatibility": "FULL"}
    )
    assert put.json == {"compatibility": "FULL"}
    assert client.simulate_get("/v1/topics/orders").json["compatibility"] == "FULL"
    # Its history is append-only.
    refused = client.simulate_delete("/registry/subjects/orders-value")
    assert (refused.status_code, code(refused)) == (422, 42205)
    assert "DELETE /v1/topics/orders" in refused.json["message"]
    assert client.simulate_get("/v1/topics/orders").json["schema_version"] == 3


def test_a_topic_without_a_schema_takes_its_first_from_the_registry(client):
    client.simulate_post("/v1/topics", json={"name": "plain"})
    empty = client.simulate_get("/registry/subjects/plain-value/versions")
    assert (empty.status_code, code(empty)) == (404, 40401)
    made = register(client, "plain-value", JSON_SCHEMA, schemaType="JSON")
    assert made.status_code == 200, made.text
    record = client.simulate_get("/v1/topics/plain").json
    assert (record["schema_type"], record["schema_version"]) == ("JSON", 1)
    other = register(client, "plain-value", ORDER)
    assert other.status_code == 409  # a history has one type


def test_config_defaults_and_codes(client):
    assert client.simulate_get("/registry/config").json == {
        "compatibilityLevel": "BACKWARD"
    }
    assert client.simulate_put(
        "/registry/config", json={"compatibility": "NONE"}
    ).json == {"compatibility": "NONE"}
    none = client.simulate_get("/registry/config/s")
    assert (none.status_code, code(none)) == (404, 40408)
    default = client.simulate_get("/registry/config/s?defaultToGlobal=true")
    assert default.json == {"compatibilityLevel": "NONE"}
    # The default mode applies to standalone subjects: NONE takes anything.
    register(client, "s", ORDER)
    assert register(client, "s", NARROWED).status_code == 200
    bad = client.simulate_put("/registry/config/s", json={"compatibility": "LAX"})
    assert (bad.status_code, code(bad)) == (422, 42203)
    client.simulate_put("/registry/config/s", json={"compatibility": "FULL"})
    assert client.simulate_get("/registry/config/s").json == {
        "compatibilityLevel": "FULL"
    }
    assert client.simulate_delete("/registry/config/s").json == {
        "compatibilityLevel": "FULL"
    }
    assert client.simulate_get("/registry/mode").json == {"mode": "READWRITE"}


def test_bad_requests_answer_confluents_codes(client):
    bad_version = client.simulate_get("/registry/subjects/s/versions/zero")
    assert (bad_version.status_code, code(bad_version)) == (422, 42202)
    invalid = register(client, "s", {"type": "record", "name": "X"})
    assert (invalid.status_code, code(invalid)) == (422, 42201)
    # Narad's lead-in is not Confluent's: the message is the detail alone.
    assert invalid.json["message"].startswith("schema: ")
    no_type = register(client, "s", ORDER, schemaType="XML")
    assert (no_type.status_code, code(no_type)) == (422, 42201)
    no_id = client.simulate_get("/registry/schemas/ids/999")
    assert (no_id.status_code, code(no_id)) == (404, 40403)
    not_json = client.simulate_post(
        "/registry/subjects/s/versions",
        body=b"{",
        headers={"Content-Type": "application/json"},
    )
    assert not_json.status_code == 422
    assert set(not_json.json) == {"error_code", "message"}
    refs = register(
        client, "s", ORDER, references=[{"name": "a", "subject": "b", "version": 1}]
    )
    assert (refs.status_code, code(refs)) == (422, 42201)


def test_percent_encoded_subject_names(client):
    resp = client.simulate_post(
        "/registry/subjects/my%20subject%3Av1/versions", json=schema(ORDER)
    )
    assert resp.status_code == 200
    assert client.simulate_get("/registry/subjects").json == ["my subject:v1"]
    # A name no subject can have (not printable ASCII, or over 255): none.
    for name in ("caf%C3%A9", "tab%09", "x" * 256):
        resp = client.simulate_get(f"/registry/subjects/{name}/versions")
        assert (resp.status_code, code(resp)) == (404, 40401), name


def add_user(client, name, grants):
    body = {"username": name, "password": "a-good-password", "grants": grants}
    assert client.simulate_post("/v1/users", json=body).status_code == 201
    return basic_auth(name, "a-good-password")


def test_who_may_read_and_write_subjects(secure):
    secure.simulate_post(
        "/v1/topics", json={"name": "orders", "schema_type": "AVRO", "schema": ORDER}
    )
    team = {**ORDER, "name": "Team"}
    register(secure, "team.Order", team)
    reader = add_user(secure, "reader", [{"action": "consume", "patterns": ["orders"]}])
    creator = add_user(
        secure, "creator", [{"action": "create", "patterns": ["team.*"]}]
    )
    ok = secure.simulate_get("/registry/subjects/orders-value/versions", headers=reader)
    assert ok.status_code == 200
    assert secure.simulate_get("/registry/subjects", headers=reader).json == [
        "orders-value"
    ]
    other = secure.simulate_get(
        "/registry/subjects/team.Order/versions", headers=reader
    )
    assert (other.status_code, code(other)) == (403, 40301)
    write = register(secure, "orders-value", WIDER)
    assert write.status_code == 200  # the admin
    denied = secure.simulate_post(
        "/registry/subjects/orders-value/versions", json=schema(WIDER), headers=reader
    )
    assert (denied.status_code, code(denied)) == (403, 40301)
    more = {**WIDER, "name": "Team"}
    mine = secure.simulate_post(
        "/registry/subjects/team.Order/versions", json=schema(more), headers=creator
    )
    assert mine.status_code == 200, mine.text
    # An id is readable by whoever reads a subject using it.
    shared = secure.simulate_get("/registry/subjects/orders-value/versions/1")
    by_reader = secure.simulate_get(
        f"/registry/schemas/ids/{shared.json['id']}", headers=reader
    )
    assert by_reader.status_code == 200
    hidden = secure.simulate_get(
        f"/registry/schemas/ids/{mine.json['id']}", headers=reader
    )
    assert (hidden.status_code, code(hidden)) == (404, 40403)
    # A standalone <t>-value holds topic t's name: registering one takes
    # create on t too.
    squat = secure.simulate_post(
        "/registry/subjects/team.x-value/versions", json=schema(ORDER), headers=creator
    )
    assert squat.status_code == 200  # team.* covers the topic team.x too
    other = add_user(secure, "other", [{"action": "create", "patterns": ["shop-*"]}])
    squat = secure.simulate_post(
        "/registry/subjects/shop-value/versions", json=schema(ORDER), headers=other
    )
    assert (squat.status_code, code(squat)) == (403, 40301)
    assert "topic shop" in squat.json["message"]
    # Deleting takes admin.
    refused = secure.simulate_delete("/registry/subjects/team.Order", headers=creator)
    assert (refused.status_code, code(refused)) == (403, 40301)
    anonymous = secure.simulate_get("/registry/subjects", headers={"Authorization": ""})
    assert (anonymous.status_code, code(anonymous)) == (401, 40101)
    assert anonymous.headers["www-authenticate"].startswith("Basic")


def test_registering_on_a_framed_topic_is_a_patch_of_it(client):
    made = client.simulate_post(
        "/v1/topics", json={"name": "f", "framing": "confluent"}
    )
    assert made.status_code == 201, made.text
    resp = register(client, "f-value", ORDER)
    assert resp.status_code == 200, resp.text
    record = client.simulate_get("/v1/topics/f").json
    # As a PATCH of a framed topic without a schema: the framed encoding.
    assert (record["schema_type"], record["encoding"]) == ("AVRO", "binary")
    assert record["framing"] == "confluent"
    one = client.simulate_get("/registry/subjects/f-value/versions/1").json
    assert one["id"] == resp.json["id"]


@pytest.mark.parametrize(
    ("path", "shown"),
    [("nope", "'nope'"), ("%C3%A9t%C3%A9", "'été'"), ("a%0Ab", "'a\\nb'")],
)
def test_a_missing_subject_is_named_once_quoted(client, path, shown):
    resp = client.simulate_get(f"/registry/subjects/{path}/versions")
    assert resp.status_code == 404
    assert resp.json == {"error_code": 40401, "message": f"Subject {shown} not found."}


@pytest.mark.parametrize(
    ("value", "status"),
    [("", 200), ("true", 200), ("TRUE", 200), ("False", 200), ("yes", 422)],
)
def test_the_deleted_flag_takes_what_its_schema_documents(client, value, status):
    """Empty is false, as absent; the OpenAPI pattern says the same (a fuzzer
    sent ``deleted=`` and found the two apart)."""
    listed = client.simulate_get("/registry/subjects", params={"deleted": value})
    assert listed.status_code == status, listed.text
    assert (re.search(_BOOL["pattern"], value) is not None) == (status == 200)
