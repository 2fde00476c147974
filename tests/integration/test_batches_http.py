"""Batch consume and batch ack over real HTTP and the Lua scripts on a real
Valkey, with real time: leases are short and lapse in the middle of a batch."""

from __future__ import annotations

import json
import threading
import time

import pytest

pytestmark = pytest.mark.slow


def make(http, topic, **settings):
    resp = http.post("/v1/topics", {"name": topic, **settings})
    assert resp.status == 201, resp.data


def fill(http, topic, count, **entry):
    batch = {"messages": [{"value": f"m{i}", **entry} for i in range(count)]}
    assert http.post(f"/v1/topics/{topic}/produce/batch", batch).status == 202


def take(http, topic, **params):
    query = "&".join(f"{k}={v}" for k, v in params.items())
    resp = http.get(f"/v1/topics/{topic}/consume/batch?{query}")
    if resp.status == 204:
        return []
    assert resp.status == 200, resp.data
    return resp.json()["messages"]


def settle(http, topic, handles, **fields):
    resp = http.post(
        f"/v1/topics/{topic}/ack/batch", {"receipt_handles": handles, **fields}
    )
    assert resp.status == 200, resp.data
    return resp.json()["results"]


def handles(messages):
    return [m["receipt_handle"] for m in messages]


def test_batch_consume_and_ack_with_leases_lapsing_mid_batch(http, topic):
    # Leases of 1.5 s: the early ones lapse 0.2 s before the batch ack, the
    # late ones 0.6 s after it.
    make(http, topic, partitions=2, visibility_timeout_ms=1500)
    fill(http, topic, 6)
    early = take(http, topic, max=3)
    time.sleep(0.8)
    late = take(http, topic, max=10)
    assert len(early) == 3 and len(late) == 3
    time.sleep(0.9)
    assert settle(http, topic, handles(early + late)) == ["lapsed"] * 3 + ["acked"] * 3
    again = take(http, topic, max=10)
    assert sorted((m["partition"], m["offset"]) for m in again) == sorted(
        (m["partition"], m["offset"]) for m in early
    )
    # One batch: a retried ack, extends, a give-back, a stale handle.
    results = settle(
        http, topic, handles(late[:1] + again[:2] + early[2:]), extend=True
    )
    assert results == ["lapsed", "extended", "extended", "lapsed"]
    assert settle(http, topic, handles(again[2:]), extend=0) == ["released"]
    back = take(http, topic, max=10)
    assert [m["offset"] for m in back] == [again[2]["offset"]]
    assert settle(http, topic, handles(again[:2] + back + late)) == ["acked"] * 6
    stats = http.get(f"/v1/topics/{topic}").json()["partition_stats"]
    assert sum(s["in_flight"] for s in stats) == 0
    assert take(http, topic, max=10) == []


def test_batch_payloads_come_back_as_sent(http, topic):
    make(http, topic, partitions=1)
    batch = {
        "messages": [
            {"value": '{"a": [1,  2]}', "key": "k/1"},
            {"value": "plain ✓"},
            {"value_base64": "/wAB"},
        ]
    }
    assert http.post(f"/v1/topics/{topic}/produce/batch", batch).status == 202
    resp = http.get(f"/v1/topics/{topic}/consume/batch?max=3")
    assert b'"key":"k/1"' in resp.data
    assert b'"payload":{"a": [1,  2]}}' in resp.data
    messages = resp.json()["messages"]
    assert [m["payload"] for m in messages[1:]] == ["plain ✓", "/wAB"]
    assert messages[2]["payload_encoding"] == "base64"
    single = http.get(f"/v1/topics/{topic}/consume?partition=0&offset=0").json()
    assert {k: v for k, v in messages[0].items() if k != "receipt_handle"} == single


def test_a_batch_long_poll_wakes_on_produce(node, http, topic):
    make(http, topic, partitions=3)
    answer = {}

    def wait():
        other = node.client()
        try:
            answer["messages"] = take(other, topic, max=50, wait="5s")
            answer["at"] = time.monotonic()
        finally:
            other.close()

    waiter = threading.Thread(target=wait)
    waiter.start()
    time.sleep(0.3)
    fired = time.monotonic()
    fill(http, topic, 5)
    waiter.join(10)
    assert 1 <= len(answer["messages"]) <= 5
    assert fired < answer["at"] < fired + 1.0


def test_a_batch_long_poll_on_an_empty_topic_answers_204_after_the_wait(http, topic):
    make(http, topic)
    start = time.monotonic()
    resp = http.get(f"/v1/topics/{topic}/consume/batch?wait=300ms")
    assert resp.status == 204
    assert time.monotonic() - start >= 0.29


def test_a_batch_ack_of_a_thousand_handles(http, topic):
    make(http, topic, partitions=3, max_in_flight_per_partition=1000)
    for _ in range(2):
        fill(http, topic, 500)
    held = []
    while len(held) < 1000:
        got = take(http, topic, max=100)
        assert got
        held += got
    results = settle(http, topic, handles(held))
    assert results == ["acked"] * 1000
    body = json.dumps({"receipt_handles": handles(held) * 2}).encode()
    too_many = http.post(f"/v1/topics/{topic}/ack/batch", body)
    assert too_many.status == 400


def test_a_batch_consume_answers_what_fits_its_byte_budget(http, topic):
    # The node's budget is the default broker.batch_consume_max_bytes (4 MiB):
    # four of these messages fit in a batch, a fifth would go past it.
    make(http, topic, partitions=2)
    sent = {}
    held = []

    def produce(partition, count):
        for _ in range(count):
            offset = sum(1 for p, _ in sent if p == partition)
            tag = f"{partition}/{offset}:".encode()
            sent[partition, offset] = tag + b"x" * (1_000_000 - len(tag))
            path = f"/v1/topics/{topic}/produce?partition={partition}"
            assert http.post(path, sent[partition, offset]).status == 202

    def leased(messages):
        held.extend(messages)
        for m in messages:
            assert m["payload"].encode() == sent[m["partition"], m["offset"]]
        return [(m["partition"], m["offset"]) for m in messages]

    # Without a partition: two batches of four; per partition, nothing is
    # skipped or repeated and the offsets come in order.
    produce(0, 5)
    produce(1, 3)
    first = leased(take(http, topic, max=100))
    second = leased(take(http, topic, max=100))
    assert len(first) == len(second) == 4
    for partition, count in ((0, 5), (1, 3)):
        assert [o for p, o in first + second if p == partition] == list(range(count))
    assert take(http, topic, max=100) == []
    # With a partition: the other partition's message stays for later.
    produce(0, 5)
    produce(1, 1)
    assert leased(take(http, topic, max=100, partition=0)) == [
        (0, 5),
        (0, 6),
        (0, 7),
        (0, 8),
    ]
    assert leased(take(http, topic, max=100, partition=0)) == [(0, 9)]
    assert take(http, topic, max=100, partition=0) == []
    # A single consume of such a message is as before.
    produce(0, 1)
    single = http.get(f"/v1/topics/{topic}/consume?partition=0")
    assert single.status == 200
    assert leased([single.json()]) == [(0, 10)]
    assert leased(take(http, topic, max=100)) == [(1, 3)]
    # Everything was delivered once; acking it all leaves nothing.
    assert sorted((m["partition"], m["offset"]) for m in held) == sorted(sent)
    assert settle(http, topic, handles(held)) == ["acked"] * len(sent)
    stats = http.get(f"/v1/topics/{topic}").json()["partition_stats"]
    assert sum(s["in_flight"] for s in stats) == 0
    assert take(http, topic, max=100) == []
