"""Fan-out and delay children over real HTTP, on real gunicorn and Valkey.

Every rule of issue 14 and the rulebook's "Fan-out children": copies made in
the parent's append script (keys, bytes, kinds, partitions), links and their
409s, delay children that are never early, schema adoption and propagation,
byte budgets that count each child's copy, and the all-or-nothing promise
under concurrent attach/detach and under kill -9 of workers.
"""

from __future__ import annotations

import itertools
import json
import os
import random
import signal
import threading
import time
import zlib
from dataclasses import dataclass
from urllib.parse import urlencode

import pytest

import narad_redis
from narad import testing
from narad.config import Config
from narad.storage import SchemaLimits
from narad.testing.storage_contract import schema_version
from narad_redis.storage import _message
from tests.integration.test_durability import TRANSPORT_ERRORS
from tests.integration.test_durability import OneShotClient
from tests.nodes import Node
from tests.nodes import tcp_url

pytestmark = pytest.mark.slow

HOUR = 3_600_000


def make(http, name, **fields):
    resp = http.post("/v1/topics", {"name": name, **fields})
    assert resp.status == 201, resp.data
    return resp.json()


def attach(http, parent, child, **fields):
    return http.post(f"/v1/topics/{parent}/children", {"child": child, **fields})


def produce(http, topic, body, **params):
    query = "?" + urlencode(params) if params else ""
    return http.post(f"/v1/topics/{topic}/produce{query}", body)


def consume(http, topic, **params):
    return http.get(f"/v1/topics/{topic}/consume?{urlencode(params)}")


def replay(http, topic, partition, offset):
    return consume(http, topic, partition=partition, offset=offset)


def record(http, topic):
    resp = http.get(f"/v1/topics/{topic}")
    assert resp.status == 200, resp.data
    return resp.json()


def history(http, topic):
    versions = http.get(f"/v1/topics/{topic}/schemas").json()["versions"]
    return [
        http.get(f"/v1/topics/{topic}/schemas/{v['version']}").data for v in versions
    ]


def all_messages(http, topic):
    """Every retained message of ``topic``, by replay, per partition."""
    out = []
    for stats in record(http, topic)["partition_stats"]:
        out.append(
            [
                replay(http, topic, stats["index"], offset).json()
                for offset in range(stats["oldest_offset"], stats["next_offset"])
            ]
        )
    return out


@pytest.fixture
def storage(storage_url):
    """The session node's storage (``$NARAD_TEST_STORAGE_URL`` when given)."""
    backend = narad_redis.connect(storage_url, Config.load(env={}))
    yield backend
    backend.close()


def stored_log(storage, topic, partitions):
    """Each partition's messages read straight from Valkey (for big counts)."""
    redis = storage.client.redis
    logs = []
    for index in range(partitions):
        raw = redis.hgetall(f"narad:{{{topic}}}:p{index}:log")
        logs.append([_message(index, int(o), raw[o], "") for o in sorted(raw, key=int)])
    return logs


# -- copies -------------------------------------------------------------------


def test_copies_keep_keys_bytes_and_kinds_in_the_keys_partition(http, topic):
    parent, inherits, wider = topic, f"{topic}-in", f"{topic}-wide"
    make(http, parent, partitions=3)
    child = make(http, inherits, parent=parent, partitions=0)
    assert (child["partitions"], child["parent"]) == (3, parent)
    assert "fanout_delay_ms" not in child
    make(http, wider, partitions=5)
    resp = attach(http, parent, wider)
    assert resp.status == 200, resp.data
    assert resp.json()["children"] == [inherits, wider]
    assert record(http, wider)["parent"] == parent

    bodies = [b'{"n": 1, "x": 1e400}', "plain ✓".encode(), b"\xff\x00\x01"]
    for i, body in enumerate(bodies):
        assert produce(http, parent, body, key=f"k{i}").status == 202
    batch = {
        "messages": [
            {"value": json.dumps({"n": n}), "key": f"k{n % 3}"} for n in range(10, 16)
        ]
        + [{"value_base64": "AAE=", "key": "k9", "partition": 2}]
    }
    assert http.post(f"/v1/topics/{parent}/produce/batch", batch).status == 202

    sent = all_messages(http, parent)
    for name, partitions in ((inherits, 3), (wider, 5)):
        got = all_messages(http, name)
        by_key: dict[str, list] = {}
        for index, messages in enumerate(got):
            for m in messages:
                assert zlib.crc32(m["key"].encode()) % partitions == index
                by_key.setdefault(m["key"], []).append(
                    (m["payload"], m.get("payload_encoding"), m["timestamp"])
                )
        expected: dict[str, list] = {}
        for messages in sent:
            for m in messages:
                expected.setdefault(m["key"], []).append(
                    (m["payload"], m.get("payload_encoding"), m["timestamp"])
                )
        assert by_key == expected  # every message, per key in order, as stored
    raw = replay(http, inherits, zlib.crc32(b"k0") % 3, 0).data
    assert raw.endswith(b'"payload":{"n": 1, "x": 1e400}}\n')


def test_no_backfill_and_attaching_again_starts_afresh(http, topic):
    parent, child = topic, f"{topic}-c"
    make(http, parent, partitions=1)
    make(http, child, partitions=1)
    assert produce(http, parent, b"before").status == 202
    assert attach(http, parent, child).status == 200
    assert produce(http, parent, b"during").status == 202
    assert http.delete(f"/v1/topics/{parent}/children/{child}").status == 204
    assert "parent" not in record(http, child)
    assert "children" not in record(http, parent)
    assert produce(http, parent, b"between").status == 202
    assert attach(http, parent, child).status == 200
    assert produce(http, parent, b"after").status == 202
    payloads = [m["payload"] for m in all_messages(http, child)[0]]
    assert payloads == ["during", "after"]


def test_an_immediate_child_is_a_topic_of_its_own(http, topic):
    parent, child = topic, f"{topic}-c"
    make(http, parent, partitions=2)
    make(http, child, parent=parent, max_in_flight_per_partition=1)
    assert produce(http, child, b"direct", partition=0).status == 202
    # A full child (its one lease held) never holds the parent back.
    held = consume(http, child, partition=0)
    assert held.status == 200
    for n in range(3):
        assert produce(http, parent, b"%d" % n, partition=0).status == 202
    assert consume(http, child, partition=0).status == 204
    stats = record(http, child)["partition_stats"][0]
    assert stats["next_offset"] == 4
    children = http.get(f"/v1/topics/{parent}/children").json()
    assert children == {
        "parent": parent,
        "children": [
            {"name": child, "delay_ms": 0, "lag_messages": 0, "lag_complete": True}
        ],
    }


def test_a_retry_stored_before_the_topic_became_a_delay_child_is_one(http, topic):
    """A keyed produce whose answer was lost, retried after the topic was
    attached as a delay child: the retry is answered as a retry (202, nothing
    stored), not with the 409 that sends the client to the parent, where its
    message would be stored, and copied to this child, a second time."""
    parent, child = topic, f"{topic}-c"
    make(http, parent, partitions=1)
    make(http, child, partitions=1)
    single = {"Idempotency-Key": "one"}
    assert http.post(f"/v1/topics/{child}/produce", b"a", headers=single).status == 202
    entries = {"messages": [{"value": "b", "idempotency_key": "two"}]}
    assert http.post(f"/v1/topics/{child}/produce/batch", entries).status == 202
    assert attach(http, parent, child, delay_ms=HOUR).status == 200
    again = http.post(f"/v1/topics/{child}/produce", b"a", headers=single)
    assert again.status == 202, again.data
    assert again.headers["idempotent-replayed"] == "true"
    batch = http.post(f"/v1/topics/{child}/produce/batch", entries)
    assert batch.status == 202, batch.data
    assert batch.json() == {"accepted": 1, "duplicates": 1}
    # Anything else is refused, and stores nothing.
    fresh = http.post(
        f"/v1/topics/{child}/produce", b"a", headers={"Idempotency-Key": "x"}
    )
    assert fresh.status == 409, fresh.data
    assert http.post(f"/v1/topics/{child}/produce", b"a").status == 409
    assert record(http, child)["partition_stats"][0]["next_offset"] == 2


# -- links --------------------------------------------------------------------


def test_links_that_are_refused(http, topic):
    parent, child, grand = topic, f"{topic}-c", f"{topic}-g"
    make(http, parent)
    make(http, child, parent=parent)
    make(http, grand)

    def refused(resp, status, words):
        assert resp.status == status, resp.data
        assert words in resp.error, resp.error

    refused(attach(http, parent, parent), 400, "cannot be a child of itself")
    refused(
        http.post("/v1/topics", {"name": f"{topic}-x", "parent": f"{topic}-x"}),
        400,
        "cannot be a child of itself",
    )
    refused(attach(http, parent, f"{topic}-none"), 404, f"{topic}-none not found")
    refused(attach(http, f"{topic}-none", grand), 404, f"{topic}-none not found")
    refused(attach(http, child, grand), 409, "a child cannot have children")
    refused(attach(http, grand, parent), 409, "a parent cannot become a child")
    refused(attach(http, grand, child), 409, f"already a child of {parent}")
    refused(
        http.post("/v1/topics", {"name": f"{topic}-y", "parent": child}),
        409,
        "a child cannot have children",
    )
    refused(
        http.delete(f"/v1/topics/{grand}/children/{child}"),
        404,
        f"{child} is not a child of {grand}",
    )
    # Attaching again as it is changes nothing (a retried request).
    again = attach(http, parent, child)
    assert (again.status, again.json()["children"]) == (200, [child])
    refused(attach(http, parent, child, delay_ms=5), 409, "already a child")
    for bad, words in (
        ({"child": 5}, "child must be a string"),
        ({"child": "a/b"}, "child must be 1 to 249"),
        ({"child": grand, "delay_ms": -1}, "delay_ms must be from 0"),
        ({"child": grand, "delay_ms": 365 * 24 * HOUR + 1}, "delay_ms must be"),
        ({"child": grand, "delay_ms": "1"}, "delay_ms must be an integer"),
        ({"child": grand, "extra": 1}, "unknown field 'extra'"),
    ):
        refused(http.post(f"/v1/topics/{parent}/children", bad), 400, words)
    assert "parent" not in record(http, grand)
    assert record(http, parent)["children"] == [child]
    for body, words in (
        ({"fanout_delay_ms": 5}, "fanout_delay_ms cannot be changed"),
        ({"parent": grand}, "parent cannot be changed here"),
    ):
        refused(http.patch(f"/v1/topics/{child}", body), 400, words)
    refused(
        http.post("/v1/topics", {"name": f"{topic}-z", "fanout_delay_ms": 5}),
        400,
        "fanout_delay_ms needs parent",
    )
    refused(
        http.post("/v1/topics", {"name": f"{topic}-z", "partitions": 0}),
        400,
        "partitions must be from 1",
    )
    assert http.get(f"/v1/topics/{topic}-z").status == 404


def test_a_parent_has_at_most_108_children(http, topic):
    make(http, topic, partitions=1)
    for n in range(108):
        make(http, f"{topic}-{n}", parent=topic)
    resp = http.post("/v1/topics", {"name": f"{topic}-108", "parent": topic})
    assert resp.status == 409
    assert "108 children, the most a parent may have" in resp.error
    assert http.get(f"/v1/topics/{topic}-108").status == 404  # nothing half-made
    make(http, f"{topic}-108")
    assert attach(http, topic, f"{topic}-108").status == 409
    assert produce(http, topic, b"all").status == 202
    for n in (0, 57, 107):
        assert replay(http, f"{topic}-{n}", 0, 0).json()["payload"] == "all"


def test_deleting_a_parent_or_a_child_undoes_the_links(http, topic):
    parent, kept, gone = topic, f"{topic}-kept", f"{topic}-gone"
    make(http, parent, partitions=1, schema={"type": "object"})
    make(http, kept, parent=parent, fanout_delay_ms=1)
    make(http, gone, parent=parent)
    assert produce(http, parent, b"{}").status == 202
    assert http.delete(f"/v1/topics/{gone}").status == 204
    assert record(http, parent)["children"] == [kept]
    assert http.delete(f"/v1/topics/{parent}").status == 204
    left = record(http, kept)
    assert "parent" not in left and "fanout_delay_ms" not in left
    assert left["schema_version"] == 1  # it keeps its history and its data
    assert replay(http, kept, 0, 0).json()["payload"] == {}
    assert produce(http, kept, b"{}").status == 202  # a normal topic again


# -- delay children -----------------------------------------------------------


def test_a_delay_child_is_never_early(node, http, topic):
    parent, late = topic, f"{topic}-late"
    delay = 2500
    make(http, parent, partitions=1, retention_ms=HOUR + delay)
    made = make(http, late, parent=parent, fanout_delay_ms=delay)
    assert (made["fanout_delay_ms"], made["partitions"]) == (delay, 1)
    waiter = {}
    late_client = node.client()

    def long_poll():
        waiter["response"] = consume(late_client, late, wait="30s")
        waiter["at"] = time.time() * 1000

    polling = threading.Thread(target=long_poll)
    polling.start()
    time.sleep(0.2)
    assert produce(http, parent, b'{"n": 1}').status == 202
    committed = replay(http, parent, 0, 0).json()["timestamp"]
    due = committed + delay

    # Until it falls due nothing reveals it (the node's clock is this one).
    while True:
        asked = time.time() * 1000
        early = replay(http, late, 0, 0)
        answered = time.time() * 1000
        if early.status == 200:
            assert answered >= due
            break
        assert early.status == 404
        assert asked < due
        lag = http.get(f"/v1/topics/{parent}/children").json()["children"][0]
        if time.time() * 1000 < due:
            assert (lag["lag_messages"], lag["lag_complete"]) == (1, True)
        time.sleep(0.2)
    assert early.json()["timestamp"] == due
    polling.join(40)
    got = waiter["response"]
    assert got.status == 200, got.data  # the long poll woke when it fell due
    message = got.json()
    assert (message["payload"], message["timestamp"]) == ({"n": 1}, due)
    assert waiter["at"] >= due
    lag = http.get(f"/v1/topics/{parent}/children").json()["children"][0]
    assert lag["lag_messages"] == 0
    refused = produce(http, late, b"{}")
    assert refused.status == 409
    assert f"{late} is a delay child of {parent}" in refused.error
    late_client.close()


def test_a_detached_delay_child_keeps_its_copies_due_when_they_were(http, topic):
    """Detaching does not release the copies a delay child holds early, and
    what is produced to it afterwards is stamped no earlier than they are
    (a partition's stamps never decrease): it comes after them."""
    parent, late = topic, f"{topic}-late"
    delay = 1500
    make(http, parent, partitions=1, retention_ms=HOUR + delay)
    make(http, late, parent=parent, fanout_delay_ms=delay)
    assert produce(http, parent, b'{"n": 1}').status == 202
    due = replay(http, parent, 0, 0).json()["timestamp"] + delay
    assert http.delete(f"/v1/topics/{parent}/children/{late}").status == 204
    detached = record(http, late)
    assert "parent" not in detached and "fanout_delay_ms" not in detached
    assert produce(http, late, b'{"n": 2}').status == 202
    while time.time() * 1000 < due - 300:
        assert replay(http, late, 0, 0).status == 404
        assert consume(http, late).status == 204
        time.sleep(0.1)
    first = consume(http, late, wait="5s")
    assert first.status == 200, first.data
    assert first.json()["payload"] == {"n": 1}
    assert first.json()["timestamp"] == due
    second = replay(http, late, 0, 1).json()
    assert (second["payload"], second["timestamp"]) == ({"n": 2}, due)


def test_lag_and_stats_read_timestamps_not_payloads(http, topic, storage):
    # A lag count or a describe looks at messages' timestamps only: reading
    # whole records of ~1 MiB, partition by partition, step by step, would
    # make one request move (and a worker hold) gigabytes.
    parent, late = topic, f"{topic}-late"
    make(http, parent, partitions=4)
    make(http, late, parent=parent, fanout_delay_ms=HOUR)
    big = b'"' + b"x" * 1_000_000 + b'"'
    for partition in range(4):
        for _ in range(3):
            assert produce(http, parent, big, partition=partition).status == 202
    redis = storage.client.redis

    def sent() -> int:
        return redis.info("stats")["total_net_output_bytes"]

    before = sent()
    lag = http.get(f"/v1/topics/{parent}/children").json()["children"][0]
    assert lag["lag_messages"] == 12
    stats = http.get(f"/v1/topics/{late}").json()["partition_stats"]
    assert [s["next_offset"] - s["oldest_offset"] for s in stats] == [3] * 4
    assert sent() - before < 1_000_000


def test_a_parent_keeps_messages_an_hour_longer_than_any_delay(http, topic):
    parent = topic
    make(http, parent, retention_ms=2 * HOUR)
    resp = http.post(
        "/v1/topics",
        {"name": f"{topic}-a", "parent": parent, "fanout_delay_ms": HOUR + 1},
    )
    assert resp.status == 409
    assert "retention_ms must be 0 or at least 7200001" in resp.error
    assert http.get(f"/v1/topics/{topic}-a").status == 404
    make(http, f"{topic}-b")
    assert attach(http, parent, f"{topic}-b", delay_ms=HOUR + 1).status == 409
    assert attach(http, parent, f"{topic}-b", delay_ms=HOUR).status == 200
    short = http.patch(f"/v1/topics/{parent}", {"retention_ms": 2 * HOUR - 1})
    assert short.status == 409
    assert "at least 7200000" in short.error
    for ok in (0, 2 * HOUR):
        assert http.patch(f"/v1/topics/{parent}", {"retention_ms": ok}).status == 200


# -- schemas ------------------------------------------------------------------

V1 = {"type": "object", "required": ["id"]}
V2 = {"type": "object", "required": ["id"], "properties": {"note": {"type": "string"}}}
V3 = {
    "type": "object",
    "required": ["id"],
    "properties": {"note": {"type": "string"}, "n": {"type": "integer"}},
}


def test_children_adopt_and_follow_the_parents_history(http, topic):
    parent, made, attached = topic, f"{topic}-made", f"{topic}-att"
    make(http, parent, partitions=1, schema=V1)
    assert http.patch(f"/v1/topics/{parent}", {"schema": V2}).status == 200
    assert make(http, made, parent=parent)["schema_version"] == 2
    make(http, attached, partitions=1)
    assert attach(http, parent, attached).status == 200
    assert history(http, made) == history(http, parent)
    assert history(http, attached) == history(http, parent)

    resp = http.patch(f"/v1/topics/{made}", {"schema": V3})
    assert resp.status == 409
    assert f"{made} is a child of {parent}, which manages its schema" in resp.error
    assert http.patch(f"/v1/topics/{parent}", {"schema": V3}).status == 200
    for child in (made, attached):
        assert record(http, child)["schema_version"] == 3
        assert history(http, child) == history(http, parent)
    # A copy is never validated again; a direct produce is, by the same version.
    assert produce(http, parent, b'{"id": 1, "n": 2}').status == 202
    assert produce(http, made, b'{"id": 2, "n": "x"}').status == 400
    assert replay(http, made, 0, 0).json()["payload"] == {"id": 1, "n": 2}

    assert http.delete(f"/v1/topics/{parent}/children/{made}").status == 204
    widened = {**V3, "properties": {**V3["properties"], "m": {}}}
    assert http.patch(f"/v1/topics/{made}", {"schema": widened}).status == 200
    assert record(http, parent)["schema_version"] == 3


def test_attach_needs_histories_equal_as_json_values(http, topic):
    parent = topic
    make(http, parent, schema={"type": "object", "maximum": 10, "required": ["a"]})
    # The same values written differently: key order, spacing, 1e1 for 10.
    twin = f"{topic}-twin"
    resp = http.post(
        "/v1/topics",
        '{"name": "' + twin + '", "schema": {"required" : ["a"], "maximum": 1e1,'
        ' "type": "object"}}',
    )
    assert resp.status == 201
    assert attach(http, parent, twin).status == 200
    assert history(http, twin)[0] != history(http, parent)[0]  # kept as stored

    drifted = f"{topic}-drift"
    make(http, drifted, schema={"type": "object", "maximum": 11, "required": ["a"]})
    resp = attach(http, parent, drifted)
    assert resp.status == 409
    assert "differ at version 1" in resp.error
    longer = f"{topic}-longer"
    make(http, longer, schema={"type": "object", "maximum": 10, "required": ["a"]})
    http.patch(f"/v1/topics/{longer}", {"schema": {"type": "object", "maximum": 10}})
    assert "differ at version 2" in attach(http, parent, longer).error

    bare = f"{topic}-bare"
    make(http, bare)
    resp = attach(http, bare, drifted)
    assert resp.status == 409
    assert "cannot go under a parent without one" in resp.error
    resp = http.post(
        "/v1/topics",
        {"name": f"{topic}-s", "parent": bare, "schema": {"type": "object"}},
    )
    assert resp.status == 409 and http.get(f"/v1/topics/{topic}-s").status == 404
    # Created under a parent with a schema given: it must be the parent's history.
    same = {"required": ["a"], "type": "object", "maximum": 10.0}
    resp = http.post(
        "/v1/topics", {"name": f"{topic}-same", "parent": parent, "schema": same}
    )
    assert resp.status == 201, resp.data
    other = {"type": "object"}
    resp = http.post(
        "/v1/topics", {"name": f"{topic}-o", "parent": parent, "schema": other}
    )
    assert resp.status == 409 and "differ at version 1" in resp.error


def test_adopting_a_history_over_the_topic_budget_is_refused(http, topic, storage):
    parent, child = topic, f"{topic}-c"
    make(http, parent, schema={"enum": [0]})
    # Stored before budgets applied: over 4 MiB of history.
    big = b'{"enum":[0],"description":"' + b"x" * (4 * 1024 * 1024 + 1) + b'"}'
    meta = storage.get_topic(parent)
    written = storage.append_schema(
        meta,
        schema_version(2, big, False),
        expected_current=1,
        limits=SchemaLimits(1 << 40, 1 << 40, 1000),
    )
    assert written.stored_bytes > 4 * 1024 * 1024
    try:
        make(http, child)
        resp = attach(http, parent, child)
        assert resp.status == 409
        assert "topic budget exceeded" in resp.error
        assert "no new schema-less child" in resp.error
        resp = http.post("/v1/topics", {"name": f"{topic}-n", "parent": parent})
        assert resp.status == 409 and "topic budget exceeded" in resp.error
        assert record(http, child)["schema_version"] is None
    finally:
        assert http.delete(f"/v1/topics/{parent}").status == 204


def test_the_cluster_budget_counts_every_childs_copy(valkey, tmp_path, topic):
    # In process over the same real Valkey, with a small cluster budget.
    config = testing.make_config(tmp_path, storage__url=tcp_url(valkey))
    client = testing.client(config)
    schemas = client.app._router.find("/v1/topics")[0].topics.schemas
    storage = client.app._router.find("/readyz")[0].storage
    parent = topic

    def post(path, body):
        return client.simulate_post(path, json=body)

    doc = {"type": "object", "description": "x" * 500}
    assert post("/v1/topics", {"name": parent, "schema": doc}).status_code == 201
    total = int(storage.client.redis.get(storage.SCHEMA_BYTES))
    size = storage.get_topic(parent).schema_bytes
    schemas.cluster_budget = total + size  # room for one copy, not two
    try:
        first = post("/v1/topics", {"name": f"{topic}-1", "parent": parent})
        assert first.status_code == 201
        second = post("/v1/topics", {"name": f"{topic}-2", "parent": parent})
        assert second.status_code == 409
        assert "cluster budget exceeded" in second.json["error"]
        assert client.simulate_get(f"/v1/topics/{topic}-2").status_code == 404
        post("/v1/topics", {"name": f"{topic}-3"})
        attached = post(f"/v1/topics/{parent}/children", {"child": f"{topic}-3"})
        assert attached.status_code == 409
        assert "cluster budget exceeded" in attached.json["error"]
        # A new version costs once per history: the parent's and the child's.
        wider = {"type": ["object", "array"]}
        added = len(b'{"type":["object","array"]}')
        schemas.cluster_budget = total + size + 2 * added - 1
        path = f"/v1/topics/{parent}"
        refused = client.simulate_patch(path, json={"schema": wider})
        assert refused.status_code == 409
        assert "cluster budget exceeded" in refused.json["error"]
        schemas.cluster_budget += 1
        assert client.simulate_patch(path, json={"schema": wider}).status_code == 200
        assert storage.get_topic(f"{topic}-1").schema_version == 2
    finally:
        for name in (parent, f"{topic}-1", f"{topic}-3"):
            client.simulate_delete(f"/v1/topics/{name}")


# -- all or nothing -------------------------------------------------------------


@dataclass
class Sent:
    ident: str
    start: float
    end: float


def test_attach_and_detach_during_produce_load(node, http, storage, topic):
    """Every message accepted while attached is in the child, none accepted
    while detached, and the child's copies are runs of the parent's log."""
    parent, steady, churned = topic, f"{topic}-steady", f"{topic}-churn"
    make(http, parent, partitions=1)
    make(http, steady, parent=parent)
    make(http, churned)
    stop = threading.Event()
    sent: list[Sent] = []
    statuses: list[int] = []
    links: list[tuple[str, float, float]] = []  # (action, sent, answered)
    lock = threading.Lock()

    def producing(name):
        client = node.client()
        for seq in range(100_000):
            if stop.is_set():
                break
            ident = f"{name}-{seq}"
            start = time.monotonic()
            status = produce(client, parent, json.dumps({"id": ident})).status
            with lock:
                statuses.append(status)
                if status == 202:
                    sent.append(Sent(ident, start, time.monotonic()))
        client.close()

    def churning():
        client = node.client()
        rng = random.Random(14)
        while not stop.is_set():
            for action in ("attach", "detach"):
                start = time.monotonic()
                if action == "attach":
                    resp = attach(client, parent, churned)
                    assert resp.status == 200, resp.data
                else:
                    resp = client.delete(f"/v1/topics/{parent}/children/{churned}")
                    assert resp.status == 204, resp.data
                links.append((action, start, time.monotonic()))
                time.sleep(rng.uniform(0.0, 0.04))
        client.close()

    threads = [threading.Thread(target=producing, args=(f"p{i}",)) for i in range(3)]
    threads.append(threading.Thread(target=churning))
    for thread in threads:
        thread.start()
    time.sleep(3)
    stop.set()
    for thread in threads:
        thread.join(30)
    assert set(statuses) == {202}, statuses

    def ids(name):
        [log] = stored_log(storage, name, 1)
        return [json.loads(m.payload)["id"] for m in log]

    in_parent, in_steady, in_churned = ids(parent), ids(steady), ids(churned)
    assert sorted(in_parent) == sorted(s.ident for s in sent)
    assert in_steady == in_parent
    position = {ident: i for i, ident in enumerate(in_parent)}
    places = [position[ident] for ident in in_churned]
    assert places == sorted(set(places))  # in the parent's order, once each
    runs = 1 + sum(1 for a, b in itertools.pairwise(places) if b != a + 1)
    attaches = [link for link in links if link[0] == "attach"]
    assert len(attaches) >= 5
    assert runs <= len(attaches)

    copied = set(in_churned)
    windows = [
        (attach_done, detach_sent)
        for (_, _, attach_done), (_, detach_sent, _) in zip(
            links[::2], links[1::2], strict=True
        )
    ]
    gaps = [
        (-1.0, links[0][1]),
        *(
            (detach_done, attach_sent)
            for (_, _, detach_done), (_, attach_sent, _) in zip(
                links[1::2], links[2::2], strict=False
            )
        ),
        (links[-1][2], float("inf")),
    ]
    checked_in = checked_out = 0
    for message in sent:
        if any(a < message.start and message.end < d for a, d in windows):
            assert message.ident in copied, message
            checked_in += 1
        if any(a < message.start and message.end < d for a, d in gaps):
            assert message.ident not in copied, message
            checked_out += 1
    assert checked_in and checked_out


def test_kill_9_of_workers_mid_fan_out_is_all_or_nothing(valkey, tmp_path, topic):
    """Batches of 10 to a parent with 12 children while both workers are
    killed: each batch is in the parent and every child whole, or nowhere."""
    node = Node(tmp_path, storage_url=tcp_url(valkey))
    node.start()
    storage = narad_redis.connect(tcp_url(valkey), Config.load(env={}))
    try:
        setup = node.client()
        make(setup, topic, partitions=3)
        children = [f"{topic}-{n}" for n in range(12)]
        for n, child in enumerate(children):
            make(setup, child, parent=topic, fanout_delay_ms=n % 2)
        setup.close()
        stop = threading.Event()
        accepted: set[str] = set()
        outcomes: list[object] = []

        def producing(name):
            client = OneShotClient(node.base, timeout=10)
            for seq in range(100_000):
                if stop.is_set():
                    break
                batch = {
                    "messages": [
                        {"value": json.dumps({"batch": f"{name}-{seq}", "i": i})}
                        for i in range(10)
                    ]
                }
                try:
                    status = client.post(f"/v1/topics/{topic}/produce/batch", batch)
                    outcome: object = status.status
                except TRANSPORT_ERRORS as exc:
                    client.close()
                    outcome = type(exc).__name__
                    time.sleep(0.02)
                outcomes.append(outcome)
                if outcome == 202:
                    accepted.add(f"{name}-{seq}")
            client.close()

        threads = [
            threading.Thread(target=producing, args=(f"p{i}",)) for i in range(4)
        ]
        for thread in threads:
            thread.start()
        killed = []
        for _ in range(2):
            deadline = time.monotonic() + 10
            while len(accepted) < 30 * (len(killed) + 1):
                assert time.monotonic() < deadline, outcomes[-10:]
                time.sleep(0.01)
            pid = next(p for p in node.worker_pids() if p not in killed)
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)
        deadline = time.monotonic() + 10
        while len(accepted) < 30 * (len(killed) + 1):
            assert time.monotonic() < deadline, outcomes[-10:]
            time.sleep(0.01)
        stop.set()
        for thread in threads:
            thread.join(30)
        assert {o for o in outcomes if isinstance(o, int)} == {202}

        parent_logs = stored_log(storage, topic, 3)
        batches: dict[str, int] = {}
        for log in parent_logs:
            for m in log:
                key = json.loads(m.payload)["batch"]
                batches[key] = batches.get(key, 0) + 1
        assert set(batches.values()) == {10}  # no batch stored in part
        assert accepted <= set(batches)
        for child in children:
            logs = stored_log(storage, child, 3)
            assert [[m.payload for m in log] for log in logs] == [
                [m.payload for m in log] for log in parent_logs
            ], child
        assert not set(killed) & set(node.worker_pids())
    finally:
        storage.close()
        node.stop()
