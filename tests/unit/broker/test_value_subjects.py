"""A topic cannot be created, alone or as a child, while the registry's
standalone subject ``<topic>-value`` holds versions."""

from __future__ import annotations

from narad import testing
from narad.storage import SchemaLimits
from narad.testing.storage_contract import schema_version

LIMITS = SchemaLimits(1 << 22, 1 << 28, 1000)


def test_a_value_subject_keeps_its_topic_name(config):
    client = testing.client(config)
    storage = client.app._router.find("/v1/topics/t/schemas")[0].schemas.storage
    result = storage.register_subject_version(
        "t-value",
        schema_version(0, b'{"type":"object"}'),
        expected_latest=0,
        topic="t",
        limits=LIMITS,
    )
    assert result.version == 1
    client.simulate_post("/v1/topics", json={"name": "p"})
    for body in (
        {"name": "t"},
        {"name": "t", "schema": {"type": "object"}},
        {"name": "t", "parent": "p"},
    ):
        resp = client.simulate_post("/v1/topics", json=body)
        assert resp.status_code == 409, body
        assert "registry subject t-value" in resp.json["error"]
        assert "permanent=true" in resp.json["error"]
    assert client.simulate_get("/v1/topics/t").status_code == 404
    storage.delete_subject_versions("t-value", [1], permanent=False)
    storage.delete_subject_versions("t-value", [1], permanent=True)
    assert client.simulate_post("/v1/topics", json={"name": "t"}).status_code == 201
