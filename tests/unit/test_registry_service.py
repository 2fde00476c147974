"""The registry service's writes racing others (narad.registry.service):
a standalone subject's version is appended only over the latest version it
was checked against, and checked again when another came first."""

from __future__ import annotations

import json

from narad import testing

ORDER = {
    "type": "record",
    "name": "Order",
    "fields": [{"name": "id", "type": "string"}],
}


def with_field(kind: str, default: object) -> dict:
    field = {"name": "qty", "type": kind, "default": default}
    return {**ORDER, "fields": [*ORDER["fields"], field]}


def register(client, subject, value):
    return client.simulate_post(
        f"/registry/subjects/{subject}/versions", json={"schema": json.dumps(value)}
    )


class Racing:
    """The storage, but another registration lands just before the first
    append this one asks for (as if another node's came first)."""

    def __init__(self, storage, before) -> None:
        self._storage = storage
        self._before = before

    def __getattr__(self, name):
        return getattr(self._storage, name)

    def register_subject_version(self, *args, **kwargs):
        before, self._before = self._before, None
        if before is not None:
            before()
        return self._storage.register_subject_version(*args, **kwargs)


def registry_of(client):
    return client.app._router.find("/registry/subjects/s/versions")[0].registry


def test_a_version_that_came_first_is_checked_against(config):
    a, b = testing.client(config), testing.client(config)
    assert register(a, "s", ORDER).status_code == 200
    registry = registry_of(a)

    def competitor() -> None:
        assert register(b, "s", with_field("int", 1)).status_code == 200

    registry.storage = Racing(registry.storage, competitor)
    # Compatible with version 1, which it was checked against first; not
    # with version 2, which came meanwhile (int is not read as string).
    resp = a.simulate_post(
        "/registry/subjects/s/versions",
        json={"schema": json.dumps(with_field("string", "x"))},
    )
    assert (resp.status_code, resp.json["error_code"]) == (409, 409)
    assert a.simulate_get("/registry/subjects/s/versions").json == [1, 2]


def test_the_same_schema_registered_meanwhile_answers_its_id(config):
    a, b = testing.client(config), testing.client(config)
    register(a, "s", ORDER)
    wider = with_field("int", 1)
    registry = registry_of(a)
    ids = []

    def competitor() -> None:
        ids.append(register(b, "s", wider).json["id"])

    registry.storage = Racing(registry.storage, competitor)
    resp = register(a, "s", wider)
    assert resp.json == {"id": ids[0]}
    assert a.simulate_get("/registry/subjects/s/versions").json == [1, 2]


def test_a_topic_created_meanwhile_takes_the_registration(config):
    a, b = testing.client(config), testing.client(config)
    registry = registry_of(a)

    def competitor() -> None:
        made = b.simulate_post(
            "/v1/topics",
            json={"name": "orders", "schema_type": "AVRO", "schema": ORDER},
        )
        assert made.status_code == 201

    registry.storage = Racing(registry.storage, competitor)
    resp = register(a, "orders-value", with_field("int", 1))
    assert resp.status_code == 200, resp.text
    # The subject is the topic's history now: the registration altered it.
    assert b.simulate_get("/v1/topics/orders").json["schema_version"] == 2
    assert a.simulate_get("/registry/subjects/orders-value/versions").json == [1, 2]


def test_a_topic_stored_before_ids_gets_them_through_the_registry(config):
    client = testing.client(config)
    schemas = client.app._router.find("/v1/topics/t/schemas")[0].schemas
    storage, redis = schemas.storage, schemas.storage.client.redis
    made = client.simulate_post(
        "/v1/topics", json={"name": "t", "schema_type": "AVRO", "schema": ORDER}
    )
    assert made.status_code == 201
    # As a version stored before global ids was: no id, fingerprint or
    # references beside it.
    redis.hdel("narad:{t}:schemas", "id:1", "fp:1", "r:1")
    assert [v.schema_id for v in storage.get_schemas("t")] == [0]
    version = client.simulate_get("/registry/subjects/t-value/versions/1").json
    assert version["id"] >= 1
    assert [v.schema_id for v in storage.get_schemas("t")] == [version["id"]]
    # The id reads back, and the same schema elsewhere gets the same one.
    by_id = client.simulate_get(f"/registry/schemas/ids/{version['id']}").json
    assert json.loads(by_id["schema"]) == ORDER
    assert register(client, "elsewhere", ORDER).json == {"id": version["id"]}
