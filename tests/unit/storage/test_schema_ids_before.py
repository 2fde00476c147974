"""Versions stored before global schema ids (a history hash with no ``id:``,
``fp:`` or ``r:`` field per version) get their ids the first time the schema
service reads them for ids, the same ids the same schemas have elsewhere."""

from __future__ import annotations

from narad import testing
from narad.schema.service import fingerprint
from narad.schema.service import history_of

OLD_FIELDS = ("id", "fp", "r")


def test_versions_stored_before_ids_get_them_once(config):
    client = testing.client(config)
    schemas = client.app._router.find("/v1/topics/t/schemas")[0].schemas
    storage, redis = schemas.storage, schemas.storage.client.redis
    client.simulate_post("/v1/topics", json={"name": "t", "schema": {"type": "object"}})
    patch = {"schema": {"type": "object", "properties": {"n": {"type": "integer"}}}}
    assert client.simulate_patch("/v1/topics/t", json=patch).status_code == 200
    # The same first schema on another topic: it holds the id the old
    # versions must get back.
    client.simulate_post("/v1/topics", json={"name": "u", "schema": {"type": "object"}})
    [u1] = storage.get_schemas("u")
    for version in (1, 2):
        redis.hdel("narad:{t}:schemas", *(f"{f}:{version}" for f in OLD_FIELDS))
    old = storage.get_schemas("t")
    assert [v.schema_id for v in old] == [0, 0]

    meta = storage.get_topic("t")
    history = schemas.with_ids(meta)
    assert [v.version for v in history] == [1, 2]
    assert history[0].schema_id == u1.schema_id
    assert history[1].schema_id not in (0, u1.schema_id)
    for version in history:
        identity = fingerprint("JSON", schemas.load(history_of(meta), version))
        assert version.identity == identity
        assert storage.schema_id_of(identity) == version.schema_id
        found = storage.schema_by_id(version.schema_id)
        assert ("t-value", version.version) in found.uses
    # Once given, they stay: a second read assigns nothing new.
    assert schemas.with_ids(meta) == history
    assert [v.schema_id for v in schemas.with_ids(meta)] == [
        v.schema_id for v in history
    ]
