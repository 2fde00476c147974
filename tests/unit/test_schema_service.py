"""Schema service rules that need control over storage: stale verdicts, budgets."""

from __future__ import annotations

import pytest

from narad import testing
from narad.storage import SchemaLimits
from narad.testing.storage_contract import schema_version


def app_over(config, **changes):
    return testing.client(config.replace(**changes))


@pytest.fixture
def two_nodes(config):
    """Two apps (two workers' caches) over one storage."""
    return app_over(config), app_over(config)


def test_a_recreated_topic_is_never_validated_with_the_old_schema(two_nodes):
    a, b = two_nodes
    a.simulate_post("/v1/topics", json={"name": "t", "schema": {"type": "object"}})
    assert a.simulate_post("/v1/topics/t/produce", body=b'{"x": 1}').status_code == 202
    b.simulate_delete("/v1/topics/t")
    b.simulate_post("/v1/topics", json={"name": "t", "schema": {"required": ["id"]}})
    # a's worker still caches version 1 of the old topic: the append script
    # sees the new epoch, and the payload is validated against the new schema.
    resp = a.simulate_post("/v1/topics/t/produce", body=b'{"x": 1}')
    assert resp.status_code == 400
    assert "missing property 'id'" in resp.json["error"]
    stats = b.simulate_get("/v1/topics/t").json["partition_stats"]
    assert sum(s["next_offset"] for s in stats) == 0


def test_a_record_whose_history_is_gone_is_read_again(two_nodes):
    a, b = two_nodes
    a.simulate_post("/v1/topics", json={"name": "t", "schema": {"type": "object"}})
    assert a.simulate_post("/v1/topics/t/produce", body=b'{"x": 1}').status_code == 202
    # a's worker hears nothing more (the notification is on its way), and
    # has no validator compiled (a topic just created, or one evicted): its
    # record names version 1 of a history that went with the topic. It
    # answered 404 "topic t has no schema version 1".
    a.app._listener.stop()
    b.simulate_delete("/v1/topics/t")
    a.app._router.find("/v1/topics/t/schemas")[0].schemas.validators.clear()
    resp = a.simulate_post("/v1/topics/t/produce", body=b'{"x": 1}')
    assert (resp.status_code, resp.json["error"]) == (404, "topic t not found")
    b.simulate_post("/v1/topics", json={"name": "t"})
    resp = a.simulate_post("/v1/topics/t/produce", body=b'{"x": 1}')
    assert resp.status_code == 202, resp.text


def test_a_refusal_is_rechecked_against_a_newer_version(two_nodes):
    a, b = two_nodes
    a.simulate_post(
        "/v1/topics",
        json={"name": "t", "schema": {"properties": {"n": {"type": "integer"}}}},
    )
    assert a.simulate_post("/v1/topics/t/produce", body=b'{"n": 1}').status_code == 202
    b.simulate_patch(
        "/v1/topics/t", json={"schema": {"properties": {"n": {"type": "number"}}}}
    )
    assert (
        a.simulate_post("/v1/topics/t/produce", body=b'{"n": 1.5}').status_code == 202
    )


def storage_of(client):
    return client.app._router.find("/readyz")[0].storage


def test_history_already_over_the_topic_budget_takes_no_new_version(config):
    client = app_over(config)
    client.simulate_post("/v1/topics", json={"name": "t", "schema": {"enum": [0]}})
    storage = storage_of(client)
    meta = storage.get_topic("t")
    # Stored before budgets applied: 5 MiB of history.
    big = b'{"enum":[0],"description":"' + b"x" * (5 * 1024 * 1024) + b'"}'
    result = storage.append_schema(
        meta,
        schema_version(2, big, False),
        expected_current=1,
        limits=SchemaLimits(1 << 40, 1 << 40, 1000),
    )
    assert result.stored_bytes > 4 * 1024 * 1024
    resp = client.simulate_patch("/v1/topics/t", json={"schema": {"enum": [0, 1]}})
    assert resp.status_code == 409
    assert "smaller versions cannot help" in resp.json["error"]
    assert "new topic" in resp.json["error"]
    # Produce still works against the oversized history.
    assert client.simulate_post("/v1/topics/t/produce", body=b"0").status_code == 202


def test_cluster_budget(config):
    client = app_over(config)
    schemas = client.app._router.find("/v1/topics")[0].topics.schemas
    schemas.cluster_budget = 1000
    assert (
        client.simulate_post(
            "/v1/topics", json={"name": "a", "schema": {"description": "x" * 900}}
        ).status_code
        == 201
    )
    resp = client.simulate_post(
        "/v1/topics", json={"name": "b", "schema": {"description": "y" * 200}}
    )
    assert resp.status_code == 409
    assert "cluster budget" in resp.json["error"]
    assert "stores 918 bytes" in resp.json["error"]
    assert client.simulate_get("/v1/topics/b").status_code == 404


def test_cluster_already_over_budget_takes_no_new_version_anywhere(config):
    client = app_over(config)
    schemas = client.app._router.find("/v1/topics")[0].topics.schemas
    client.simulate_post(
        "/v1/topics", json={"name": "a", "schema": {"description": "x" * 900}}
    )
    schemas.cluster_budget = 800  # the cluster now holds more than its budget
    resp = client.simulate_post("/v1/topics", json={"name": "b", "schema": {}})
    assert resp.status_code == 409
    assert "cluster budget" in resp.json["error"]
    # A new topic without a schema is still fine; giving it one is not.
    assert client.simulate_post("/v1/topics", json={"name": "c"}).status_code == 201
    resp = client.simulate_patch("/v1/topics/c", json={"schema": {"type": "string"}})
    assert resp.status_code == 409
    # Deleting topics brings the cluster under the budget again.
    client.simulate_delete("/v1/topics/a")
    assert (
        client.simulate_patch(
            "/v1/topics/c", json={"schema": {"type": "string"}}
        ).status_code
        == 200
    )


def count_compiles(monkeypatch) -> list[str]:
    """The schema URIs of every validator compiled from now on."""
    import narad_jsonschema as service

    compiled: list[str] = []
    original = service.Validator

    def counting(*args, **kwargs):
        compiled.append(kwargs["schema_uri"])
        return original(*args, **kwargs)

    monkeypatch.setattr(service, "Validator", counting)
    return compiled


def test_validators_are_cached_per_topic_and_version(config, monkeypatch):

    client = app_over(config)
    client.simulate_post("/v1/topics", json={"name": "t", "schema": {"type": "object"}})
    compiled = count_compiles(monkeypatch)
    # Compiled once per version; once more at most when the change's own
    # notification lands after the first produce and drops what it compiled.
    for _ in range(5):
        client.simulate_post("/v1/topics/t/produce", body=b"{}")
    assert set(compiled) == {"narad://schema/t/1"}
    assert len(compiled) <= 2
    compiled.clear()
    client.simulate_patch(
        "/v1/topics/t", json={"schema": {"type": ["object", "array"]}}
    )
    for _ in range(5):
        client.simulate_post("/v1/topics/t/produce", body=b"[]")
    assert set(compiled) == {"narad://schema/t/2"}
    assert len(compiled) <= 2


def test_a_schema_at_the_size_limit_is_compiled_once(config, monkeypatch):
    client = app_over(config)
    # 255 KiB of empty subschemas: some 40 MiB compiled, within the default
    # validator_memory (64 MiB); an estimate past it is never kept.
    schema = {"allOf": [{} for _ in range(87_000)]}
    resp = client.simulate_post("/v1/topics", json={"name": "t", "schema": schema})
    assert resp.status_code == 201
    compiled = count_compiles(monkeypatch)
    for _ in range(3):
        assert (
            client.simulate_post("/v1/topics/t/produce", body=b"1").status_code == 202
        )
    assert len(compiled) <= 2  # once more at most, as above


def store_unusable_version(storage) -> None:
    """Version 2 of topic t as a node before registration meta-checked what a
    reference leads to could store it (the validator cannot use it)."""
    storage.append_schema(
        storage.get_topic("t"),
        schema_version(2, b'{"$ref":"#/x","x":{"type":"bogus"}}', False),
        expected_current=1,
        limits=SchemaLimits(1 << 40, 1 << 40, 1000),
    )


def test_a_version_that_cannot_be_used_is_not_compiled_per_produce(config, monkeypatch):
    import narad_jsonschema as service

    client = app_over(config)
    client.simulate_post("/v1/topics", json={"name": "t", "schema": {"type": "object"}})
    storage = storage_of(client)
    store_unusable_version(storage)
    checked = []
    original = service.check_stored

    def counting(document, draft):
        checked.append(document)
        return original(document, draft)

    monkeypatch.setattr(service, "check_stored", counting)
    for _ in range(5):
        resp = client.simulate_post("/v1/topics/t/produce", body=b"{}")
        assert resp.status_code == 409
        assert (
            "the subschema at '/x', which a reference leads to" in (resp.json["error"])
        )
    # Once more at most when the append's notification drops the first.
    assert 1 <= len(checked) <= 2


def test_a_version_that_cannot_be_used_is_rechecked_against_a_newer_one(
    two_nodes,
):
    a, b = two_nodes
    a.simulate_post("/v1/topics", json={"name": "t", "schema": {"type": "object"}})
    a.app._listener.stop()  # a's worker hears of no change: its records stay
    storage = storage_of(a)
    store_unusable_version(storage)
    # Version 1 passes it, the append finds version 2: checked again, 409.
    assert a.simulate_post("/v1/topics/t/produce", body=b"{}").status_code == 409
    assert b.simulate_patch("/v1/topics/t", json={"schema": True}).status_code == 200
    assert a.simulate_post("/v1/topics/t/produce", body=b"{}").status_code == 202


def test_a_patch_of_settings_and_schema_is_all_or_nothing(config):
    client = app_over(config)
    schemas = client.app._router.find("/v1/topics")[0].topics.schemas
    hour = 3_600_000
    client.simulate_post(
        "/v1/topics",
        json={"name": "t", "schema": {"type": "object"}, "retention_ms": hour},
    )

    def patch(**body):
        return client.simulate_patch("/v1/topics/t", json=body)

    def record():
        return client.simulate_get("/v1/topics/t").json

    assert patch(retention_ms=0, schema={"type": "string"}).status_code == 400
    assert (record()["retention_ms"], record()["schema_version"]) == (hour, 1)
    # Refused by the write itself (the budget): the settings stay too.
    schemas.topic_budget = 20
    widened = {"type": ["object", "string"]}
    resp = patch(retention_ms=0, schema=widened)
    assert resp.status_code == 409
    assert "topic budget exceeded" in resp.json["error"]
    assert (record()["retention_ms"], record()["schema_version"]) == (hour, 1)
    schemas.topic_budget = 1 << 20
    resp = patch(retention_ms=0, visibility_timeout_ms=5, schema=widened)
    assert resp.status_code == 200
    assert (resp.json["retention_ms"], resp.json["schema_version"]) == (0, 2)
    assert resp.json["visibility_timeout_ms"] == 5
    # A schema that changes nothing leaves the version; the settings apply.
    resp = patch(retention_ms=hour, schema=widened)
    assert (resp.json["retention_ms"], resp.json["schema_version"]) == (hour, 2)


@pytest.mark.parametrize(
    ("again", "answer"),
    [
        (None, (404, {"error": "topic t has no schema"})),
        ({"required": ["id"]}, (200, {"required": ["id"]})),
    ],
)
def test_latest_of_a_topic_created_again_meanwhile(
    two_nodes, monkeypatch, again, answer
):
    # The record said version 2 and the history had gone with the topic by
    # the time it was read: 404 "topic t has no schema version 2", true of
    # no topic that ever existed.
    a, b = two_nodes
    a.simulate_post("/v1/topics", json={"name": "t", "schema": {"type": "object"}})
    a.simulate_patch("/v1/topics/t", json={"schema": {"type": ["object", "array"]}})
    storage = storage_of(a)
    read = storage.get_schema

    def recreated_first(name, version):
        monkeypatch.setattr(storage, "get_schema", read)
        assert b.simulate_delete("/v1/topics/t").status_code == 204
        body = {"name": "t"} if again is None else {"name": "t", "schema": again}
        assert b.simulate_post("/v1/topics", json=body).status_code == 201
        return read(name, version)

    monkeypatch.setattr(storage, "get_schema", recreated_first)
    resp = a.simulate_get("/v1/topics/t/schemas/latest")
    assert (resp.status_code, resp.json) == answer


@pytest.mark.parametrize("against", [None, "latest", "all"])
def test_a_check_against_a_topic_deleted_meanwhile_finds_no_topic(
    two_nodes, monkeypatch, against
):
    # The record said version 2, and the history went with the topic before
    # it was read: 404 "topic t has no schema version 2", true of no topic
    # that ever existed (the topic there is now has a version 1 only).
    a, b = two_nodes
    a.simulate_post("/v1/topics", json={"name": "t", "schema": {"type": "object"}})
    a.simulate_patch("/v1/topics/t", json={"schema": {"type": ["object", "array"]}})
    storage = storage_of(a)
    reads = {"get_schema": storage.get_schema, "get_schemas": storage.get_schemas}

    def recreated_first(read):
        def read_after(*args):
            for name, original in reads.items():
                monkeypatch.setattr(storage, name, original)
            assert b.simulate_delete("/v1/topics/t").status_code == 204
            body = {"name": "t", "schema": {"type": "object"}}
            assert b.simulate_post("/v1/topics", json=body).status_code == 201
            return read(*args)

        return read_after

    for name, original in reads.items():
        monkeypatch.setattr(storage, name, recreated_first(original))
    body = {"schema": {"type": "array"}}
    if against is not None:
        body["against"] = against
    resp = a.simulate_post("/v1/topics/t/schemas/compatibility", json=body)
    assert (resp.status_code, resp.json) == (404, {"error": "topic t not found"})


@pytest.mark.parametrize(
    ("meanwhile", "current", "versions"),
    [
        ("patch", 2, [1, 2]),  # a new version came after the record was read
        ("recreate", None, []),  # another topic took the name
    ],
)
def test_a_history_agrees_with_its_current_version(
    two_nodes, monkeypatch, meanwhile, current, versions
):
    # The record and the history were two reads: a change between them gave
    # "current_version": 1 with versions [1, 2], or 1 with none at all.
    a, b = two_nodes
    a.simulate_post("/v1/topics", json={"name": "t", "schema": {"type": "object"}})
    storage = storage_of(a)
    read = storage.schema_sizes

    def changed_first(name):
        monkeypatch.setattr(storage, "schema_sizes", read)
        if meanwhile == "patch":
            newer = {"schema": {"type": ["object", "array"]}}
            assert b.simulate_patch("/v1/topics/t", json=newer).status_code == 200
        else:
            assert b.simulate_delete("/v1/topics/t").status_code == 204
            assert b.simulate_post("/v1/topics", json={"name": "t"}).status_code == 201
        return read(name)

    monkeypatch.setattr(storage, "schema_sizes", changed_first)
    history = a.simulate_get("/v1/topics/t/schemas").json
    assert history["current_version"] == current
    assert [v["version"] for v in history["versions"]] == versions
    assert history["total_bytes"] == sum(v["size"] for v in history["versions"])
