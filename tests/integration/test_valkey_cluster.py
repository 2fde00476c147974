"""The cluster client on a real local Valkey Cluster (3 primaries, 3
replicas): readiness, WAIT for replicas, redirects, notifications."""

from __future__ import annotations

import os
import signal
import time

import pytest
import redis

import narad_redis
from narad.config import Config
from narad.errors import StorageError
from narad.storage import Entry
from narad.storage import Event
from narad.storage import Notification
from narad.storage import PayloadKind
from narad.storage import Status
from narad.testing.storage_contract import LIMITS
from narad.testing.storage_contract import new_meta
from narad.testing.storage_contract import schema_version
from narad_redis import wakeups
from narad_redis.client import NotEnoughReplicas
from narad_redis.client import RetryingClient
from narad_redis.client import detached
from narad_redis.client import run_script
from narad_redis.cluster import ClusterClient
from tests.nodes import ROOT

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("valkey_cluster")]

SET_GET = "redis.call('SET', KEYS[1], ARGV[1]) return redis.call('GET', KEYS[1])"


@pytest.fixture
def client(valkey_cluster):
    made = ClusterClient(valkey_cluster.url, replica_wait_ms=2000)
    yield made
    made.close()


def test_ready_while_every_slot_is_served(client):
    assert client.leader_answers() is True


def test_not_ready_when_no_seed_answers():
    with pytest.raises(StorageError, match="no cluster node"):
        ClusterClient("redis+cluster://127.0.0.1:1", connect_timeout_s=0.2)


def test_scripts_reach_every_primary(client, valkey_cluster, topic):
    script = client.redis.register_script(SET_GET)
    owners = set()
    for n in range(30):
        key = f"narad:{{{topic}-{n}}}:k"
        stored = client.call(lambda r, k=key, n=n: run_script(script, [k], [n], r))
        assert stored == b"%d" % n
        owners.add(valkey_cluster.primary_of(key).port)
    assert len(owners) == 3


def test_a_write_waits_for_min_replicas(client, topic):
    client.redis.min_replicas = 1
    script = client.redis.register_script(SET_GET)
    key = f"narad:{{{topic}}}:k"
    assert client.call(lambda r: run_script(script, [key], ["v"], r)) == b"v"


def test_too_few_replicas_answer_uncertain(valkey_cluster, topic):
    # Each primary has one replica: two cannot confirm.
    client = ClusterClient(valkey_cluster.url, min_replicas=2, replica_wait_ms=100)
    try:
        script = client.redis.register_script(SET_GET)
        key = f"narad:{{{topic}}}:k"
        with pytest.raises(NotEnoughReplicas, match="1 of the 2 replicas"):
            client.call(lambda r: run_script(script, [key], ["v"], r))
        # It ran on the primary all the same: the 503 says it may be lost.
        assert client.call(lambda r: r.get(key)) == b"v"
    finally:
        client.close()


def test_a_stale_slot_map_is_corrected_by_moved(client, topic):
    script = client.redis.register_script(SET_GET)
    key = f"narad:{{{topic}}}:k"
    manager = client.redis.nodes_manager
    slot = client.redis.keyslot(key)
    owner = manager.slots_cache[slot][0]
    other = next(n for n in client.redis.get_primaries() if n.name != owner.name)
    manager.slots_cache[slot] = [other]
    assert client.call(lambda r: run_script(script, [key], ["v"], r)) == b"v"
    assert manager.slots_cache[slot][0].name == owner.name


def test_a_subscriber_on_any_primary_hears_a_script_on_another(client, topic):
    publish = client.redis.register_script(
        "redis.call('PUBLISH', ARGV[1], ARGV[2]) return 1"
    )
    listener = detached(client.redis)
    pubsub = listener.pubsub()
    try:
        pubsub.subscribe("narad:events")
        assert pubsub.get_message(timeout=5)["type"] == "subscribe"
        for n in range(6):  # keys on every primary
            key = f"narad:{{{topic}-{n}}}:k"
            client.call(
                lambda r, k=key, n=n: run_script(
                    publish, [k], ["narad:events", f"m {n}"], r
                )
            )
        # Over the cluster bus from the other primaries: in no set order.
        heard = [pubsub.get_message(timeout=5) for _ in range(6)]
        assert sorted(m["data"] for m in heard) == [b"m %d" % n for n in range(6)]
    finally:
        pubsub.close()
        listener.connection_pool.disconnect()


def test_cross_slot_keys_are_refused_not_retried(client, topic):
    script = client.redis.register_script("return #KEYS")
    keys = [f"narad:{{{topic}-a}}:k", f"narad:{{{topic}-b}}:k"]
    with pytest.raises(redis.ResponseError, match=r"CROSSSLOT|slot"):
        client.call(lambda r: run_script(script, keys, [], r))


def test_a_lone_server_without_replicas_cannot_meet_min_replicas(valkey, topic):
    # The same WAIT on the single-server client: no replica, no 202.
    client = RetryingClient(valkey.tcp_url, min_replicas=1, replica_wait_ms=50)
    try:
        script = client.redis.register_script(SET_GET)
        with pytest.raises(NotEnoughReplicas, match="0 of the 1 replicas"):
            client.call(lambda r: run_script(script, [topic], ["v"], r))
    finally:
        client.close()


def test_not_ready_while_a_slot_has_no_primary(client, valkey_cluster):
    owner = valkey_cluster.primary_of("narad:{ready}:k")
    slot = client.redis.keyslot("narad:{ready}:k")
    with owner.client() as r:
        r.execute_command("CLUSTER DELSLOTS", slot)
    try:
        assert client.leader_answers() is False
    finally:
        with owner.client() as r:
            r.execute_command("CLUSTER ADDSLOTS", slot)
        valkey_cluster.wait_ok()
    assert client.leader_answers() is True


def test_not_ready_while_a_primary_is_down_until_its_replica_serves(
    client, valkey_cluster
):
    # A frozen primary and its frozen replica: the primary's slots are
    # served by no one that answers, and no failover can happen...
    owner = valkey_cluster.primary_of("narad:{frozen}:k")
    replica = valkey_cluster.replica_of(owner)
    os.kill(owner.process.pid, signal.SIGSTOP)
    os.kill(replica.process.pid, signal.SIGSTOP)
    try:
        assert client.leader_answers() is False
        # ... until the replica is back and takes over.
        os.kill(replica.process.pid, signal.SIGCONT)
        deadline = time.monotonic() + 60
        while valkey_cluster.primary_of("narad:{frozen}:k") is owner:
            assert time.monotonic() < deadline, "no replica took over"
            time.sleep(0.05)
        client.redis.nodes_manager.initialize()
        assert client.leader_answers() is True
    finally:
        os.kill(replica.process.pid, signal.SIGCONT)
        os.kill(owner.process.pid, signal.SIGCONT)
        valkey_cluster.wait_ok()


def test_wake_ups_go_over_sharded_pub_sub(valkey_cluster, topic):
    storage = narad_redis.connect(valkey_cluster.url, Config.load(env={}))
    stream = storage.notifications()
    try:
        assert next(stream) == Notification(Event.LISTENING)
        meta = new_meta(name=topic)
        assert storage.create_topic(meta).status is Status.OK
        assert storage.mark_waiting(meta, 1 << 50) is Status.OK
        # The mark returned once this worker's shard subscription was
        # confirmed, on the primary serving the topic's slot.
        shard = f"narad:{{{topic}}}:events"
        with valkey_cluster.primary_of(shard).client() as r:
            assert r.execute_command("PUBSUB", "SHARDNUMSUB", shard)[1] == 1
        entry = Entry(0, b"", b"m", PayloadKind.TEXT, None)
        appended = storage.append(meta, [entry], schema_version=0, now_ms=1)
        assert appended.status is Status.OK
        wanted = Notification(Event.MESSAGES, topic)
        heard = [next(stream) for _ in range(5)]  # ticks, the create's event
        assert wanted in heard
    finally:
        stream.close()
        storage.close()


def test_durable_only_while_every_primary_fsyncs(valkey_cluster):
    storage = narad_redis.connect(valkey_cluster.url, Config.load(env={}))
    try:
        status = storage.server_status()
        assert status.durable, status.detail
        assert status.detail.startswith("3 primaries")
        lax = valkey_cluster.primaries()[1]
        with lax.client() as r:
            r.config_set("appendfsync", "everysec")
        try:
            status = storage.server_status()
            assert not status.durable
            assert f"127.0.0.1:{lax.port}" in status.detail
            assert "appendfsync is everysec" in status.detail
        finally:
            with lax.client() as r:
                r.config_set("appendfsync", "always")
        assert storage.server_status().durable
    finally:
        storage.close()


def test_a_slot_being_migrated_is_followed_by_ask(client, valkey_cluster, topic):
    key = f"narad:{{{topic}}}:k"
    slot = client.redis.keyslot(key)
    source = valkey_cluster.primary_of(key)
    target = next(n for n in valkey_cluster.primaries() if n is not source)
    with target.client() as r:
        r.execute_command("CLUSTER SETSLOT", slot, "IMPORTING", source.node_id())
    with source.client() as r:
        r.execute_command("CLUSTER SETSLOT", slot, "MIGRATING", target.node_id())
    try:
        # The key is not on the source: it answers ASK, and the script runs
        # on the target after ASKING.
        script = client.redis.register_script(SET_GET)
        assert client.call(lambda r: run_script(script, [key], ["v"], r)) == b"v"
        with target.client() as r:
            pipe = r.pipeline(transaction=False)
            pipe.execute_command("ASKING")
            pipe.get(key)
            pipe.execute_command("ASKING")
            pipe.delete(key)
            assert pipe.execute()[1] == b"v"
    finally:
        for node in (source, target):
            with node.client() as r:
                r.execute_command("CLUSTER SETSLOT", slot, "STABLE")
        valkey_cluster.wait_ok()


def test_stats_over_topics_on_every_primary(valkey_cluster, topic):
    storage = narad_redis.connect(valkey_cluster.url, Config.load(env={}))
    try:
        metas = []
        for n in range(6):
            meta = new_meta(name=f"{topic}-{n}", partitions=2, retention_ms=3_600_000)
            assert storage.create_topic(meta).status is Status.OK
            entries = [Entry(p, b"", b"m", PayloadKind.TEXT, None) for p in (0, 1)]
            for _ in range(n + 1):
                assert storage.append(meta, entries, schema_version=0, now_ms=5).status
            metas.append(meta)
        # One pipeline, one script call per slot (keys of one slot each).
        stats = storage.topic_stats(metas, now_ms=10)
        assert [s.produced for s in stats] == [2 * (n + 1) for n in range(6)]
        assert storage.count_not_due(metas, now_ms=10) == [0] * 6
        assert storage.count_not_due(metas, now_ms=4) == [2 * (n + 1) for n in range(6)]
    finally:
        storage.close()


def test_a_channel_no_mark_wants_is_unsubscribed(valkey_cluster, topic, monkeypatch):
    monkeypatch.setattr(wakeups, "WANT_S", 0.0)  # wanted until the next sweep
    monkeypatch.setattr(wakeups, "SWEEP_S", 0.0)
    storage = narad_redis.connect(valkey_cluster.url, Config.load(env={}))
    stream = storage.notifications()
    shard = f"narad:{{{topic}}}:events"
    try:
        assert next(stream) == Notification(Event.LISTENING)
        meta = new_meta(name=topic)
        assert storage.create_topic(meta).status is Status.OK
        assert storage.mark_waiting(meta, 1 << 50) is Status.OK
        primary = valkey_cluster.primary_of(shard)
        with primary.client() as r:
            assert r.execute_command("PUBSUB", "SHARDNUMSUB", shard)[1] == 1
        # The stream sweeps it out as it goes on (the server's unsubscribe
        # reply was asked for, not a moved slot: the stream does not end).
        for _ in range(3):
            next(stream)
        with primary.client() as r:
            assert r.execute_command("PUBSUB", "SHARDNUMSUB", shard)[1] == 0
        assert storage.mark_waiting(meta, 1 << 50) is Status.OK
        with primary.client() as r:
            assert r.execute_command("PUBSUB", "SHARDNUMSUB", shard)[1] == 1
        for _ in range(2):
            next(stream)  # still live: no unsubscribe taken for a lost slot
    finally:
        stream.close()
        storage.close()


def test_the_shipped_cluster_acl_lets_narad_do_all_it_does(valkey_cluster, topic):
    # conf/valkey-cluster.conf's user narad, given to every node: a node's
    # whole round (readiness, durability, slot map, scripts with WAIT,
    # sharded wake-ups, users, repair) runs under it.
    conf = (ROOT / "conf" / "valkey-cluster.conf").read_text().splitlines()
    [rule] = [line.split()[2:] for line in conf if line.startswith("user narad ")]
    rule = [">acl-test" if word.startswith(">") else word for word in rule]
    for server in valkey_cluster.nodes:
        with server.client() as r:
            r.execute_command("ACL", "SETUSER", "narad", "reset", *rule)
    url = valkey_cluster.url.replace("//", "//narad:acl-test@")
    config = Config.load(env={"NARAD_STORAGE_MIN_REPLICAS": "1"})
    storage = narad_redis.connect(url, config)
    stream = storage.notifications()
    try:
        assert storage.ping() is True
        assert storage.server_status().durable
        assert next(stream) == Notification(Event.LISTENING)
        meta = new_meta(name=topic)
        doc = schema_version(1, b'{"type":"object"}')
        assert storage.create_topic(meta, doc, limits=LIMITS).status is Status.OK
        meta = storage.get_topic(topic)
        child = new_meta(name=f"{topic}-child")
        made = storage.create_child(
            child, meta, delay_ms=0, limits=LIMITS, max_children=10
        )
        assert made.status is Status.OK
        assert storage.mark_waiting(meta, 1 << 50) is Status.OK
        meta = storage.get_topic(topic)
        entry = Entry(0, b"", b"{}", PayloadKind.TEXT, None)
        assert storage.append(meta, [entry], schema_version=1, now_ms=5).status
        heard = [next(stream) for _ in range(4)]
        assert Notification(Event.MESSAGES, topic) in heard
        assert storage.repair()["unlisted"] == 0
    finally:
        stream.close()
        storage.close()
