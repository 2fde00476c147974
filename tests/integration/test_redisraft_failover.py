"""A node over a 3-node RedisRaft cluster through the loss of its leader.

The node was given one follower's address only (``raft_node``). Under
producers and consumers, the leader is killed (``kill -9``) and later
restarted, the leadership is handed over (``RAFT.TRANSFER_LEADER``), and a
majority is lost and comes back. Every message answered 202 is accounted
for afterwards, by its unique id and by its (partition, offset), as in
``test_durability.py``. Each test leaves the cluster whole.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

import pytest
import redis

import narad_redis
from narad.broker.notifications import Listener
from narad.config import Config
from narad.storage import Event
from narad.testing.storage_contract import new_meta
from tests.integration.test_durability import Load
from tests.integration.test_durability import assert_wakes_promptly
from tests.integration.test_durability import drain_and_check
from tests.integration.test_durability import make
from tests.integration.test_durability import wait_for_progress
from tests.nodes import Node

pytestmark = pytest.mark.slow

VISIBILITY_MS = 1000
#: A guard against a hang, not a figure: how fast produces recover (the
#: issue's 5 s bound) is measured by bench/raft.py, not asserted here.
RECOVERY_S = 60.0
#: Answers a client may see during an election or an outage; never a 500.
OUTAGE = {
    ("produce", 202),
    ("produce", 503),
    ("consume", 200),
    ("consume", 204),
    ("consume", 503),
    ("ack", 204),
    ("ack", 410),  # a lease that lapsed while the leader was gone
    ("ack", 503),
}


@pytest.fixture
def cluster(redisraft):
    """The session's cluster, whole again after the test."""
    yield redisraft
    for port in redisraft.ports:
        if not _answers(port):
            redisraft.start(port)
    redisraft.wait_whole()


def _answers(port: int) -> bool:
    try:
        with redis.Redis(port=port, socket_timeout=2) as client:
            return bool(client.ping())
    except redis.RedisError:
        return False


def codes(statuses) -> set[tuple[str, int]]:
    return {(op, s) for op, s in statuses if isinstance(s, int)}


def test_kill_9_of_the_leader_under_load_loses_nothing(cluster, raft_node, topic):
    http = raft_node.client()
    make(http, topic, partitions=3, visibility_timeout_ms=VISIBILITY_MS)
    with Load(raft_node, topic, producers=4, consumers=4, limit=100_000) as load:
        wait_for_progress(load, 100, timeout=30)
        leader = cluster.leader()
        cluster.kill(leader)
        cluster.new_leader(leader)
        elected = time.monotonic()
        seen = load.accepted()
        while load.accepted() == seen:
            waited = time.monotonic() - elected
            assert waited < RECOVERY_S, f"no 202 {waited:.1f} s after the election"
            time.sleep(0.01)
        wait_for_progress(load, load.accepted() + 150, timeout=30)
        # The killed node rejoins; the node needs no telling.
        cluster.start(leader)
        cluster.wait_whole()
        wait_for_progress(load, load.accepted() + 150, timeout=30)
    statuses = load.ledger.statuses
    assert codes(statuses) <= OUTAGE, statuses
    drain_and_check(raft_node, topic, load.ledger, VISIBILITY_MS)
    assert http.get("/readyz").status == 200
    # The workers' wake-up subscriptions followed the leader.
    assert_wakes_promptly(raft_node, http, topic)
    http.close()


def test_leadership_transfers_under_load_answer_no_5xx(cluster, raft_node, topic):
    http = raft_node.client()
    make(http, topic, partitions=3, visibility_timeout_ms=VISIBILITY_MS)
    with Load(raft_node, topic, producers=4, consumers=4, limit=100_000) as load:
        wait_for_progress(load, 100, timeout=30)
        for _ in range(3):
            cluster.new_leader(cluster.transfer_leader())
            wait_for_progress(load, load.accepted() + 100, timeout=30)
    statuses = load.ledger.statuses
    assert codes(statuses) <= OUTAGE - {
        ("produce", 503),
        ("consume", 503),
        ("ack", 503),
    }, statuses
    drain_and_check(raft_node, topic, load.ledger, VISIBILITY_MS)
    assert_wakes_promptly(raft_node, http, topic)
    http.close()


def test_a_frozen_leader_is_passed_over_after_one_timeout(cluster, tmp_path, topic):
    """A hung leader keeps its port open while the others elect a new one.
    A worker's first call to it times out (503, after the 3 s socket
    timeout); the calls after that go to the new leader instead of each
    waiting out the timeout on a connection the pool still holds to it."""
    node = Node(
        tmp_path,
        storage_url=cluster.url(first=cluster.follower()),
        workers=1,
        env={"NARAD_PLUGINS_REDIS_SOCKET_TIMEOUT_MS": "3000"},
    ).start()
    http = node.client()
    make(http, topic, partitions=1)
    produce = f"/v1/topics/{topic}/produce"

    def keyed(i: int) -> int:
        client = node.client()
        try:
            key = {"Idempotency-Key": f"k{i}"}
            return client.post(produce, {"id": f"k{i}"}, headers=key).status
        finally:
            client.close()

    leader = cluster.leader()
    try:
        with ThreadPoolExecutor(8) as pool:
            # Keyed produces go alone, one pooled connection each: the pool
            # keeps several to the leader.
            assert set(pool.map(keyed, range(32))) == {202}
            cluster.freeze(leader)
            _leader_besides(cluster, leader)
            # Times out on the frozen leader (503), unless this worker's
            # listener, whose subscription died with it, moved on first.
            assert keyed(100) in (202, 503)
            statuses = list(pool.map(keyed, range(101, 109)))
    finally:
        cluster.thaw(leader)
        http.close()
        node.stop()
    assert statuses == [202] * 8, statuses


def _leader_besides(cluster, frozen: int, timeout: float = 30.0) -> int:
    """The port of a leader other than ``frozen`` (asked with a timeout:
    ``cluster.sh leader`` would hang on the frozen node)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for port in cluster.ports:
            if port == frozen:
                continue
            try:
                with redis.Redis(port=port, socket_timeout=1) as client:
                    if client.info("raft").get("raft_role") == "leader":
                        return port
            except redis.RedisError:
                pass
        time.sleep(0.05)
    raise AssertionError(f"no leader besides {frozen} within {timeout} s")


def test_the_listener_resubscribes_on_the_new_leader(cluster, topic):
    """Each change of leader drops the subscription (RedisRaft disconnects a
    former leader's subscribers; a killed one drops everything); the stream
    comes back on the new leader and carries its events."""
    storage = narad_redis.connect(
        cluster.url(first=cluster.follower()), Config.load(env={})
    )
    listener = Listener(storage)
    live: list[tuple[bool, float]] = []
    events: list[str] = []
    listener.on_live(lambda up: live.append((up, time.monotonic())))
    listener.on(Event.TOPIC_CHANGED, events.append)
    listener.start()
    try:
        assert _eventually(lambda: live and live[-1][0])
        for change in ("transfer", "kill"):
            old = cluster.leader()
            lost = len(live)
            if change == "transfer":
                cluster.transfer_leader()
            else:
                cluster.kill(old)
            cluster.new_leader(old)
            assert _eventually(lambda n=lost: len(live) > n + 1 and live[-1][0])
            meta = new_meta(name=f"{topic}-{change}")
            storage.create_topic(meta)  # publishes TOPIC_CHANGED on the leader
            assert _eventually(lambda n=meta.name: n in events)
        cluster.start(old)
    finally:
        listener.stop()
        storage.close()


def test_losing_the_majority_answers_503_then_recovers(cluster, raft_node, topic):
    http = raft_node.client()
    make(http, topic, partitions=1)
    assert http.post(f"/v1/topics/{topic}/produce", {"id": "before"}).status == 202
    survivor = cluster.follower()
    gone = [p for p in cluster.ports if p != survivor]
    for port in gone:  # the leader and one follower
        cluster.kill(port)
    produced = http.post(f"/v1/topics/{topic}/produce", {"id": "during"})
    assert produced.status == 503
    assert produced.error.startswith("storage unavailable, retry")
    ready = http.get("/readyz")
    assert ready.status == 503, ready.data
    assert http.get(f"/v1/topics/{topic}/consume").status == 503
    for port in gone:
        cluster.start(port)
    cluster.new_leader(-1)
    deadline = time.monotonic() + 30
    while http.get("/readyz").status != 200:
        assert time.monotonic() < deadline, "not ready after the majority came back"
        time.sleep(0.1)
    assert http.post(f"/v1/topics/{topic}/produce", {"id": "after"}).status == 202
    ids = set()
    while (resp := http.get(f"/v1/topics/{topic}/consume?wait=1s")).status == 200:
        message = resp.json()
        ids.add(message["payload"]["id"])
        ack = f"/v1/topics/{topic}/ack?receipt_handle={message['receipt_handle']}"
        assert http.post(ack).status == 204
    # "during" was refused before it reached a leader: it is nowhere.
    assert ids == {"before", "after"}
    http.close()


def _eventually(check, timeout: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.01)
    return False
