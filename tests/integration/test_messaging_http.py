"""The messaging flows of tests/unit/http/test_messaging_api.py over real HTTP.

Same behaviour, but through gunicorn and the Lua scripts on a real Valkey
(the unit tests run them on fakeredis). Real time instead of a fake clock:
leases are made short and allowed to lapse.
"""

from __future__ import annotations

import base64
import json
import time
from urllib.parse import urlencode

import pytest

import narad_redis
from narad.broker.receipts import Receipt
from narad.config import Config
from narad.storage import Entry
from narad.storage import PayloadKind

pytestmark = pytest.mark.slow

HOUR = 3_600_000

# Well-formed (partition 0, offset 0) but with a nonce no reservation has.
FORGED = base64.urlsafe_b64encode(b"0.0." + b"A" * 16).decode().rstrip("=")


def make(http, topic, **settings):
    resp = http.post("/v1/topics", {"name": topic, **settings})
    assert resp.status == 201, resp.data


def produce(http, topic, body, **params):
    query = "?" + urlencode(params) if params else ""
    return http.post(f"/v1/topics/{topic}/produce{query}", body)


def consume(http, topic, **params):
    query = "?" + urlencode(params) if params else ""
    return http.get(f"/v1/topics/{topic}/consume{query}")


def ack(http, topic, handle, **params):
    query = urlencode({"receipt_handle": handle, **params})
    return http.post(f"/v1/topics/{topic}/ack?{query}")


def stats(http, topic):
    return http.get(f"/v1/topics/{topic}").json()["partition_stats"]


@pytest.mark.parametrize(
    ("body", "expected", "encoding"),
    [
        (b'{"id": 1,  "n": 1e400}', b'"payload":{"id": 1,  "n": 1e400}}', None),
        ("plain ✓".encode(), b'"payload":"plain \xe2\x9c\x93"}', None),
        (b"", b'"payload":""}', None),
        (b"\xff\x00\x01", b'"payload":"/wAB"}', "base64"),
        (bytes(range(256)) * 10, None, "base64"),
    ],
    ids=["json-verbatim", "text", "empty", "binary", "all-bytes"],
)
def test_produce_then_consume_keeps_the_bytes(http, topic, body, expected, encoding):
    make(http, topic, partitions=1)
    resp = produce(http, topic, body, key="k1")
    assert (resp.status, resp.data) == (202, b"")
    got = consume(http, topic)
    assert got.status == 200
    message = got.json()
    assert (message["topic"], message["partition"], message["offset"]) == (topic, 0, 0)
    assert message["key"] == "k1"
    assert message["receipt_handle"]
    assert message.get("payload_encoding") == encoding
    if expected is not None:
        assert got.data.rstrip(b"\n").endswith(expected)
    if encoding:
        assert base64.b64decode(message["payload"]) == body
    assert ack(http, topic, message["receipt_handle"]).status == 204


def test_deep_json_is_classified_alike_by_every_worker_at_any_time(http, topic):
    # A payload is JSON up to the 256 levels a payload may nest; deeper it is
    # text. The same body must not turn from text into JSON once a worker has
    # validated a schema-topic payload (which raises Python's recursion limit).
    make(http, topic, partitions=1)
    make(http, f"{topic}-schema", partitions=1, schema={"type": "object"})
    bodies = [b"[" * depth + b"]" * depth for depth in (256, 257, 1200)]
    for _ in range(2):
        for body in bodies:
            assert produce(http, topic, body).status == 202
        for _ in range(8):  # both workers
            assert produce(http, f"{topic}-schema", b"{}").status == 202
    shapes = []
    for offset in range(2 * len(bodies)):
        got = consume(http, topic, partition=0, offset=offset)
        assert got.status == 200
        shapes.append(got.data.split(b'"payload":')[1][:1])
    assert shapes == [b"[", b'"', b'"'] * 2


def test_over_one_mib_is_413_and_nothing_written(http, topic):
    make(http, topic, partitions=1)
    assert produce(http, topic, b"x" * (1024 * 1024 + 1)).status == 413
    assert produce(http, topic, b"x" * (1024 * 1024)).status == 202
    assert stats(http, topic)[0]["next_offset"] == 1
    big = {"messages": [{"value": "x" * 600_000}, {"value": "y" * 600_000}]}
    assert http.post(f"/v1/topics/{topic}/produce/batch", big).status == 413
    assert stats(http, topic)[0]["next_offset"] == 1


def test_partitioning_pin_key_and_round_robin(http, topic):
    make(http, topic, partitions=4)
    assert produce(http, topic, b"a", partition="3").status == 202
    assert produce(http, topic, b"a", partition="4").status == 400
    for _ in range(5):
        assert produce(http, topic, b"k", key="customer-42").status == 202
    after_key = [s["next_offset"] for s in stats(http, topic)]
    assert sorted(after_key) in ([0, 0, 1, 5], [0, 0, 0, 6])
    assert consume(http, topic, partition="3").json()["partition"] == 3
    # Round-robin is per worker, so over two workers only the total is exact.
    for _ in range(8):
        assert produce(http, topic, b"r").status == 202
    assert sum(s["next_offset"] for s in stats(http, topic)) == 14


def test_empty_consume_is_204_and_bad_wait_is_400(http, topic):
    make(http, topic)
    assert consume(http, topic).status == 204
    assert consume(http, topic, wait="30ms").status == 204
    assert consume(http, topic, wait="soon").status == 400


def test_ack_settles_forever_and_a_retried_ack_is_204(http, topic):
    make(http, topic, partitions=1, visibility_timeout_ms=200)
    produce(http, topic, b"m")
    handle = consume(http, topic).json()["receipt_handle"]
    assert ack(http, topic, handle).status == 204
    time.sleep(0.3)  # past the lease: an acked message is still not redelivered
    assert consume(http, topic).status == 204
    assert ack(http, topic, handle).status == 204
    assert ack(http, topic, handle, extend="true").status == 410
    assert stats(http, topic)[0]["in_flight"] == 0


def test_lapsed_lease_redelivers_and_old_handle_is_410(http, topic):
    make(http, topic, partitions=1, visibility_timeout_ms=200)
    produce(http, topic, b"m")
    first = consume(http, topic).json()
    assert consume(http, topic).status == 204  # reserved
    # Long poll: the server wakes this consumer when the lease lapses.
    second = consume(http, topic, wait="2s").json()
    assert second["offset"] == first["offset"]
    assert second["receipt_handle"] != first["receipt_handle"]
    assert ack(http, topic, first["receipt_handle"]).status == 410
    assert ack(http, topic, second["receipt_handle"]).status == 204


def test_extend_restarts_the_lease_and_extend_0_gives_back(http, topic):
    make(http, topic, partitions=1, visibility_timeout_ms=400)
    produce(http, topic, b"m")
    handle = consume(http, topic).json()["receipt_handle"]
    time.sleep(0.25)
    assert ack(http, topic, handle, extend="true").status == 204
    time.sleep(0.25)  # 500 ms after the reservation, 250 ms after the renewal
    assert consume(http, topic).status == 204
    assert ack(http, topic, handle, extend="0").status == 204
    again = consume(http, topic).json()
    assert again["offset"] == 0
    assert ack(http, topic, handle).status == 410
    assert ack(http, topic, again["receipt_handle"]).status == 204


@pytest.mark.parametrize(
    ("handle", "extend", "status"),
    [
        ("garbage!", None, 400),
        ("bm90LWEtaGFuZGxl", None, 400),
        (FORGED, None, 410),
        ("x", "5", 400),
    ],
)
def test_bad_handles(http, topic, handle, extend, status):
    make(http, topic, partitions=1)
    produce(http, topic, b"m")
    assert consume(http, topic).status == 200
    params = {"extend": extend} if extend else {}
    assert ack(http, topic, handle, **params).status == status


def test_replay_is_read_only(http, topic):
    make(http, topic, partitions=2)
    produce(http, topic, b'{"a":1}', partition="1")
    replay = consume(http, topic, partition="1", offset="0")
    assert replay.status == 200
    assert "receipt_handle" not in replay.json()
    assert replay.json()["payload"] == {"a": 1}
    assert consume(http, topic, partition="1").json()["offset"] == 0
    assert consume(http, topic, partition="1", offset="1").status == 404
    assert consume(http, topic, partition="5", offset="0").status == 400
    assert consume(http, topic, offset="0").status == 400


def test_batch_produce(http, topic):
    make(http, topic, partitions=2)
    body = {
        "messages": [
            {"value": '{"id": 1}'},
            {"value": "text", "key": "k"},
            {"value_base64": base64.b64encode(b"\xfe").decode(), "partition": 1},
        ]
    }
    resp = http.post(f"/v1/topics/{topic}/produce/batch", body)
    assert resp.status == 202
    assert resp.json() == {"accepted": 3}
    got = [consume(http, topic).json() for _ in range(3)]
    assert sorted(json.dumps(m["payload"]) for m in got) == sorted(
        ['{"id": 1}', '"text"', '"/g=="']
    )


@pytest.mark.parametrize(
    ("entries", "words"),
    [
        ([{"value": "a"}, {"value": 5}], "messages[1]: value must be a string"),
        ([{"value": "a"}, {"value": "b", "partition": 9}], "messages[1]: partition 9"),
        ([{"value": "a"}] * 1001, "at most 1000"),
    ],
)
def test_bad_batch_is_400_naming_the_entry_and_nothing_written(
    http, topic, entries, words
):
    make(http, topic, partitions=2)
    resp = http.post(f"/v1/topics/{topic}/produce/batch", {"messages": entries})
    assert resp.status == 400
    assert words in resp.error
    assert all(s["next_offset"] == 0 for s in stats(http, topic))


def test_max_in_flight_per_partition(http, topic):
    make(http, topic, partitions=1, max_in_flight_per_partition=2)
    for _ in range(3):
        produce(http, topic, b"m")
    first, second = consume(http, topic).json(), consume(http, topic).json()
    assert consume(http, topic).status == 204
    assert ack(http, topic, first["receipt_handle"]).status == 204
    assert consume(http, topic).json()["offset"] == 2
    assert second["offset"] == 1


def test_max_acked_ahead_blocks_until_the_frontier_moves(http, topic):
    make(
        http,
        topic,
        partitions=1,
        max_acked_ahead_per_partition=2,
        visibility_timeout_ms=300,
    )
    for _ in range(6):
        produce(http, topic, b"m")
    held = [consume(http, topic).json() for _ in range(4)]
    assert ack(http, topic, held[1]["receipt_handle"]).status == 204
    assert ack(http, topic, held[2]["receipt_handle"]).status == 204
    assert ack(http, topic, held[3]["receipt_handle"]).status == 503
    # Only the message blocking the frontier (offset 0) is served, once lapsed.
    assert consume(http, topic).status == 204
    again = consume(http, topic, wait="2s").json()
    assert again["offset"] == 0
    assert ack(http, topic, again["receipt_handle"]).status == 204


def test_acks_of_messages_past_retention_do_not_fill_the_acked_ahead_cap(
    http, topic, storage_url
):
    # Messages that aged out while leased, nothing writing since: the node's
    # clock judges them, so they are produced and leased at an earlier "now"
    # straight through the storage.
    make(
        http,
        topic,
        partitions=1,
        retention_ms=HOUR,
        visibility_timeout_ms=3 * HOUR,
        max_acked_ahead_per_partition=1,
    )
    storage = narad_redis.connect(storage_url, Config.load(env={}))
    try:
        meta = storage.get_topic(topic)
        aged = int(time.time() * 1000) - HOUR - 60_000
        entries = [Entry(0, b"", b"old", PayloadKind.TEXT)] * 3
        assert storage.append(meta, entries, schema_version=0, now_ms=aged).count == 3
        nonces = [f"{i:016d}" for i in range(3)]
        held = storage.reserve_batch(meta, [0], nonces=nonces, now_ms=aged).messages
    finally:
        storage.close()
    handles = [Receipt(0, m.offset, m.nonce).encode() for m in held]
    assert ack(http, topic, handles[1]).status == 204
    assert ack(http, topic, handles[2]).status == 204
    assert ack(http, topic, handles[0]).status == 204
    assert stats(http, topic)[0]["in_flight"] == 0
