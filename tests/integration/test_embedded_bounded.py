"""The storage is bounded: over its memory limit a write answers 507 and
stores nothing, on the real server, script by script."""

from __future__ import annotations

import re
import uuid

import pytest
import redis

import narad_redis
from narad.config import Config
from narad.errors import StorageFull
from narad.serve.embedded import socket_path
from narad.storage import Entry
from narad.storage import PayloadKind
from narad.storage import SchemaLimits
from narad.storage import Status
from narad.storage import TopicMeta
from narad.testing.storage_contract import schema_version
from tests.integration.test_node import wait_until
from tests.nodes import Node
from tests.nodes import start_valkey

pytestmark = pytest.mark.slow

FULL = {"error": "storage full: nothing was stored"}
LIMITS = SchemaLimits(4 << 20, 256 << 20, 100)
USED = "narad_storage_memory_used_bytes"
LIMIT = "narad_storage_memory_limit_bytes"


def gauge(http, name: str) -> float:
    text = http.get("/metrics").data.decode()
    [value] = re.findall(rf"^{name} (\S+)$", text, re.M)
    return float(value)


def test_a_full_embedded_storage_answers_507_and_stores_nothing(tmp_path):
    limit = 8 << 20
    node = Node(tmp_path, workers=1, env={"NARAD_STORAGE_MAX_MEMORY": "8mb"}).start()
    http = node.client()
    try:
        assert http.post("/v1/topics", {"name": "t", "partitions": 2}).status == 201
        schema = {"type": "object"}
        assert http.post("/v1/topics", {"name": "s", "schema": schema}).status == 201
        for _ in range(100):
            resp = http.post("/v1/topics/t/produce?partition=0", b"x" * (768 << 10))
            if resp.status != 202:
                break
        assert resp.status == 507
        assert resp.json() == FULL
        owner = redis.Redis(unix_socket_path=str(socket_path(tmp_path / "data")))
        assert owner.config_get("maxmemory") == {"maxmemory": str(limit)}
        policy = owner.config_get("maxmemory-policy")
        assert policy == {"maxmemory-policy": "noeviction"}
        assert wait_until(lambda: gauge(http, LIMIT) == limit)
        assert wait_until(lambda: gauge(http, USED) > limit // 2)
        # That write's own size put it over; a small one may still fit. Lower
        # the limit under what is stored, so that every write is over it.
        limit = owner.info("memory")["used_memory"] // 2
        owner.config_set("maxmemory", limit)
        owner.close()
        before = http.get("/v1/topics/t").json()["partition_stats"]
        history = http.get("/v1/topics/s/schemas").json()

        batch = {"messages": [{"value": "a", "partition": p} for p in (0, 1)]}
        assert http.post("/v1/topics/t/produce/batch", batch).json() == FULL
        assert http.post("/v1/topics/t/produce?partition=1", b"small").status == 507
        assert http.post("/v1/topics", {"name": "u"}).json() == FULL
        widened = {"type": ["object", "null"]}
        assert http.patch("/v1/topics/s", {"schema": widened}).status == 507

        # Nothing of it was stored; reads go on, and the node stays ready.
        assert http.get("/v1/topics/t").json()["partition_stats"] == before
        assert http.get("/v1/topics/s/schemas").json() == history
        assert http.get("/v1/topics/u").status == 404
        replay = http.get("/v1/topics/t/consume?partition=0&offset=0")
        assert replay.status == 200
        assert http.get("/readyz").status == 200

        assert wait_until(lambda: gauge(http, LIMIT) == limit)
        assert wait_until(lambda: gauge(http, USED) > limit)
    finally:
        http.close()
        node.stop()


@pytest.fixture
def over_limit(tmp_path):
    """A backend on a real Valkey holding a topic with a schema and messages,
    then put over its memory limit; and a raw client to inspect it."""
    server = start_valkey(tmp_path / "valkey")
    backend = narad_redis.connect(server.tcp_url, Config.load(env={}))
    raw = redis.Redis.from_url(server.tcp_url)
    name = f"t-{uuid.uuid4().hex[:8]}"
    meta = TopicMeta(name, uuid.uuid4().hex, 2, 0, 1000, 100, 100, 0)
    schema = schema_version(1, b'{"type":"object"}', False)
    assert backend.create_topic(meta, schema, limits=LIMITS).status is Status.OK
    meta = backend.get_topic(name)
    entries = [Entry(p, b"k", b"{}", PayloadKind.JSON) for p in (0, 1, 0)]
    assert backend.append(meta, entries, schema_version=1, now_ms=1).status is Status.OK
    used = raw.info("memory")["used_memory"]
    raw.config_set("maxmemory", used // 2)
    yield backend, raw, meta
    raw.close()
    backend.close()
    server.stop()


def snapshot(raw: redis.Redis) -> dict[bytes, bytes]:
    return {key: raw.dump(key) for key in raw.scan_iter("narad:*")}


def test_scripts_over_the_limit_are_refused_before_they_write(over_limit):
    """A Lua script with no flags is refused at its first write command that
    may grow memory, and only if it has written nothing before: so it either
    fails whole or runs whole. Every writing script, on the real server."""
    backend, raw, meta = over_limit
    before = snapshot(raw)
    entries = [Entry(p, b"", b"{}", PayloadKind.JSON) for p in (1, 0)]
    refused = {
        "append": lambda: backend.append(meta, entries, schema_version=1, now_ms=2),
        "create_topic": lambda: backend.create_topic(
            TopicMeta("other", "e", 1, 0, 1000, 100, 100, 0), None, limits=LIMITS
        ),
        "append_schema": lambda: backend.append_schema(
            meta,
            schema_version(2, b"{}", False),
            expected_current=1,
            limits=LIMITS,
        ),
        "reserve": lambda: backend.reserve(meta, [0, 1], nonce="n", now_ms=2),
        "delete_topic": lambda: backend.delete_topic(meta),
    }
    for script, call in refused.items():
        with pytest.raises(StorageFull, match="used memory > 'maxmemory'"):
            call()
        assert snapshot(raw) == before, script


def test_under_the_limit_again_writes_resume(over_limit):
    backend, raw, meta = over_limit
    entries = [Entry(0, b"", b"{}", PayloadKind.JSON)]
    with pytest.raises(StorageFull):
        backend.append(meta, entries, schema_version=1, now_ms=2)
    raw.config_set("maxmemory", 0)
    assert backend.append(meta, entries, schema_version=1, now_ms=2).count == 1
