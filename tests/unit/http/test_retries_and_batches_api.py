"""Idempotent produce and ack, batch consume and batch ack (in-process, fakeredis)."""

from __future__ import annotations

import base64
import re

import pytest

from narad import testing


def make(client, name="t", **settings):
    resp = client.simulate_post("/v1/topics", json={"name": name, **settings})
    assert resp.status_code == 201, resp.text


def produce(client, body, idem=None, name="t", **params):
    headers = {"Idempotency-Key": idem} if idem is not None else {}
    return client.simulate_post(
        f"/v1/topics/{name}/produce", body=body, params=params, headers=headers
    )


def batch(client, messages, idem=None, name="t"):
    headers = {"Idempotency-Key": idem} if idem is not None else {}
    return client.simulate_post(
        f"/v1/topics/{name}/produce/batch",
        json={"messages": messages},
        headers=headers,
    )


def stored(client, name="t") -> int:
    stats = client.simulate_get(f"/v1/topics/{name}").json["partition_stats"]
    return sum(s["next_offset"] for s in stats)


def consume_batch(client, name="t", **params):
    return client.simulate_get(f"/v1/topics/{name}/consume/batch", params=params)


def ack_batch(client, handles, name="t", **fields):
    return client.simulate_post(
        f"/v1/topics/{name}/ack/batch", json={"receipt_handles": handles, **fields}
    )


# -- idempotent produce ----------------------------------------------------------


def test_a_retried_produce_with_its_key_is_202_and_stores_nothing(client, clock):
    make(client, partitions=3)
    first = produce(client, b"m", idem="order-1")
    assert first.status_code == 202
    assert "idempotent-replayed" not in first.headers
    again = produce(client, b"m", idem="order-1")
    assert (again.status_code, again.content) == (202, b"")
    assert again.headers["idempotent-replayed"] == "true"
    assert stored(client) == 1
    # The key is per topic; no key means no deduplication.
    make(client, name="u")
    assert produce(client, b"m", idem="order-1", name="u").status_code == 202
    assert produce(client, b"m").status_code == 202
    assert produce(client, b"m").status_code == 202
    assert stored(client) == 3


@pytest.mark.parametrize(
    ("first", "second"),
    [
        ({"body": b"m"}, {"body": b"n"}),
        ({"body": b"m", "key": "a"}, {"body": b"m", "key": "b"}),
        ({"body": b"m", "partition": "0"}, {"body": b"m", "partition": "1"}),
        ({"body": b"m"}, {"body": b"m", "partition": "0"}),
    ],
    ids=["payload", "message-key", "partition", "pinned-or-not"],
)
def test_a_key_reused_for_another_message_is_409(client, clock, first, second):
    make(client, partitions=2)

    def send(spec):
        params = {k: v for k, v in spec.items() if k in ("key", "partition")}
        return produce(client, spec["body"], idem="k", **params)

    assert send(first).status_code == 202
    resp = send(second)
    assert resp.status_code == 409
    assert resp.json["error"] == (
        "Idempotency-Key 'k' was used within the last 600000 ms for a different "
        "request; nothing was stored"
    )
    assert stored(client) == 1


def test_the_key_is_remembered_for_the_window(client, clock):
    make(client, partitions=1)
    assert produce(client, b"m", idem="k").status_code == 202
    clock.now += 600_000 - 1
    assert produce(client, b"other", idem="k").status_code == 409
    clock.now += 1
    assert produce(client, b"other", idem="k").status_code == 202
    assert stored(client) == 2


def test_a_retry_after_a_schema_change_is_still_a_retry(client, clock):
    schema = {"type": "object"}
    make(client, partitions=1, schema=schema)
    assert produce(client, b"{}", idem="k").status_code == 202
    widened = {"type": ["object", "array"]}
    assert (
        client.simulate_patch("/v1/topics/t", json={"schema": widened}).status_code
        == 200
    )
    again = produce(client, b"{}", idem="k")
    assert (again.status_code, again.headers.get("idempotent-replayed")) == (
        202,
        "true",
    )
    assert stored(client) == 1


@pytest.mark.parametrize("key", ["", "in side", "tab\there", "é", "x" * 256], ids=repr)
def test_a_bad_idempotency_key_is_400(client, clock, key):
    make(client)
    resp = produce(client, b"m", idem=key)
    assert resp.status_code == 400
    assert (
        "Idempotency-Key must be 1 to 255 visible ASCII characters"
        in resp.json["error"]
    )
    assert stored(client) == 0


def test_batch_entries_carry_their_own_keys(client, clock):
    make(client, partitions=2)
    messages = [
        {"value": "a", "idempotency_key": "a"},
        {"value": "b", "idempotency_key": "b"},
        {"value": "free"},
    ]
    first = batch(client, messages)
    assert (first.status_code, first.json) == (202, {"accepted": 3, "duplicates": 0})
    # A retry with one entry more: only what was not stored before is stored.
    retry = batch(client, [*messages[:2], {"value": "c", "idempotency_key": "c"}])
    assert (retry.status_code, retry.json) == (202, {"accepted": 3, "duplicates": 2})
    assert "idempotent-replayed" not in retry.headers
    assert stored(client) == 4
    replay = batch(client, messages[:2])
    assert replay.json == {"accepted": 2, "duplicates": 2}
    assert replay.headers["idempotent-replayed"] == "true"
    reused = batch(client, [{"value": "new"}, {"value": "B", "idempotency_key": "b"}])
    assert reused.status_code == 409
    assert reused.json["error"].startswith(
        "messages[1]: idempotency_key 'b' was used within the last 600000 ms for a "
        "different message"
    )
    assert stored(client) == 4


def test_a_key_on_a_batch_request_guards_the_whole_batch(client, clock):
    make(client, partitions=2)
    messages = [{"value": "a"}, {"value": "b", "partition": 1}]
    assert batch(client, messages, idem="req-1").json == {
        "accepted": 2,
        "duplicates": 0,
    }
    assert batch(client, messages, idem="req-1").json == {
        "accepted": 2,
        "duplicates": 2,
    }
    assert stored(client) == 2
    assert batch(client, messages[:1], idem="req-1").status_code == 409
    assert batch(client, [{"value": "a"}]).json == {"accepted": 1}


@pytest.mark.parametrize(
    ("messages", "key", "words"),
    [
        (
            [
                {"value": "a", "idempotency_key": "k"},
                {"value": "b", "idempotency_key": "k"},
            ],
            None,
            "messages[1]: idempotency_key 'k' repeats messages[0]'s",
        ),
        (
            [{"value": "a", "idempotency_key": "k"}],
            "r",
            "messages[0]: idempotency_key given with the Idempotency-Key header",
        ),
        (
            [{"value": "a", "idempotency_key": 5}],
            None,
            "messages[0]: idempotency_key must be 1 to 255 visible ASCII characters",
        ),
        (
            [{"value": "a", "idempotency_key": ""}],
            None,
            "messages[0]: idempotency_key must be 1 to 255",
        ),
    ],
)
def test_bad_batch_keys_are_400(client, clock, messages, key, words):
    make(client)
    resp = batch(client, messages, idem=key)
    assert resp.status_code == 400
    assert words in resp.json["error"]
    assert stored(client) == 0


def test_idempotency_bounds_come_from_the_settings(tmp_path, clock):
    config = testing.make_config(
        tmp_path, broker__idempotency_window_ms=1000, broker__idempotency_max_keys=2
    )
    client = testing.client(config)
    make(client, partitions=1)
    for key in ("a", "b", "c"):
        assert produce(client, b"m", idem=key).status_code == 202
    assert produce(client, b"m", idem="a").headers.get("idempotent-replayed") is None
    assert produce(client, b"m", idem="c").headers["idempotent-replayed"] == "true"
    clock.now += 1000
    assert produce(client, b"m", idem="c").headers.get("idempotent-replayed") is None
    text = client.simulate_get("/metrics").text
    assert re.search(r"^narad_idempotency_keys_evicted_total [1-9]", text, re.M)
    assert re.search(r"^narad_messages_deduplicated_total [1-9]", text, re.M)


# -- batch consume ---------------------------------------------------------------


def test_batch_consume_leases_up_to_max_each_with_its_handle(client, clock):
    make(client, partitions=2)
    batch(client, [{"value": f"m{i}", "partition": i % 2} for i in range(7)])
    first = consume_batch(client, max="5")
    assert first.status_code == 200
    messages = first.json["messages"]
    assert len(messages) == 5
    handles = [m["receipt_handle"] for m in messages]
    assert len(set(handles)) == 5
    single = client.simulate_get("/v1/topics/t/consume").json
    assert set(single) == set(messages[0])
    rest = consume_batch(client).json["messages"]  # default max: 10
    assert len(rest) == 1
    seen = {(m["partition"], m["offset"]) for m in [*messages, *rest, single]}
    assert len(seen) == 7
    assert consume_batch(client).status_code == 204
    assert consume_batch(client, wait="20ms").status_code == 204


def test_batch_consume_bytes_come_from_the_settings(tmp_path, clock):
    config = testing.make_config(tmp_path, broker__batch_consume_max_bytes="1mb")
    client = testing.client(config)
    make(client, partitions=1)
    for i in range(5):
        assert produce(client, b"%d" % i * 400_000).status_code == 202
    batches = [consume_batch(client, max="100").json["messages"] for _ in range(3)]
    assert [[m["offset"] for m in got] for got in batches] == [[0, 1], [2, 3], [4]]
    for got in batches:
        assert all(m["payload"] == str(m["offset"]) * 400_000 for m in got)
    assert consume_batch(client, max="100").status_code == 204


def test_batch_consume_renders_every_payload_kind(client, clock):
    make(client, partitions=1)
    batch(
        client,
        [
            {"value": '{"id": 1,  "n": 1e400}'},
            {"value": "text ✓"},
            {"value_base64": base64.b64encode(b"\xff\x00").decode()},
        ],
    )
    resp = consume_batch(client)
    assert b'"payload":{"id": 1,  "n": 1e400}}' in resp.content
    messages = resp.json["messages"]
    assert messages[1]["payload"] == "text ✓"
    assert messages[2]["payload_encoding"] == "base64"
    assert base64.b64decode(messages[2]["payload"]) == b"\xff\x00"


def test_batch_consume_keeps_the_caps(client, clock):
    make(
        client,
        partitions=1,
        max_in_flight_per_partition=3,
        max_acked_ahead_per_partition=1,
        visibility_timeout_ms=1000,
    )
    batch(client, [{"value": "m"}] * 6)
    held = consume_batch(client, max="100").json["messages"]
    assert [m["offset"] for m in held] == [0, 1, 2]
    assert ack_batch(client, [held[2]["receipt_handle"]]).json == {"results": ["acked"]}
    clock.now += 1000
    # Acked ahead is full: only the frontier (offset 0) comes back.
    again = consume_batch(client, max="100").json["messages"]
    assert [m["offset"] for m in again] == [0]


@pytest.mark.parametrize(
    ("params", "words"),
    [
        ({"max": "0"}, "max must be at least 1"),
        ({"max": "101"}, "max must be at most 100"),
        ({"max": "ten"}, "max must be a non-negative integer"),
        ({"partition": "2"}, "partition 2 is out of range"),
        ({"offset": "0", "partition": "0"}, "replay by offset is consume?"),
        ({"wait": "soon"}, "wait must be a duration"),
    ],
)
def test_bad_batch_consume_is_400(client, clock, params, words):
    make(client, partitions=2)
    resp = consume_batch(client, **params)
    assert resp.status_code == 400
    assert words in resp.json["error"]


def test_batch_consume_of_no_topic_is_404_and_head_is_400(client, clock):
    assert consume_batch(client, name="nope").status_code == 404
    make(client)
    assert client.simulate_head("/v1/topics/t/consume/batch").status_code == 400


# -- batch ack -------------------------------------------------------------------


def test_batch_ack_answers_per_handle(client, clock):
    make(client, partitions=1, visibility_timeout_ms=1000)
    batch(client, [{"value": "m"}] * 4)
    held = consume_batch(client).json["messages"]
    handles = [m["receipt_handle"] for m in held]
    forged = base64.urlsafe_b64encode(b"0.1." + b"A" * 16).decode().rstrip("=")
    far = base64.urlsafe_b64encode(b"7.0." + b"A" * 16).decode().rstrip("=")
    resp = ack_batch(client, [handles[0], "garbage!", forged, far, handles[1]])
    assert resp.status_code == 200
    assert resp.json == {"results": ["acked", "malformed", "lapsed", "lapsed", "acked"]}
    # Retried: the acks stand.
    assert ack_batch(client, handles[:2]).json == {"results": ["acked", "acked"]}
    assert ack_batch(client, handles[:3], extend=True).json == {
        "results": ["lapsed", "lapsed", "extended"]
    }
    assert ack_batch(client, [handles[3]], extend=0).json == {"results": ["released"]}
    clock.now += 1000  # handles[2] was extended at the old "now": lapsed now
    assert ack_batch(client, handles[2:]).json == {"results": ["lapsed", "lapsed"]}
    again = consume_batch(client).json["messages"]
    assert sorted(m["offset"] for m in again) == [2, 3]
    text = client.simulate_get("/metrics").text
    assert re.search(r"^narad_acks_repeated_total [1-9]", text, re.M)


def test_batch_ack_orders_acks_so_the_frontier_moves(client, clock):
    make(client, partitions=1, max_acked_ahead_per_partition=1)
    batch(client, [{"value": "m"}] * 4)
    held = consume_batch(client).json["messages"]
    handles = [m["receipt_handle"] for m in reversed(held)]
    # Given 3, 2, 1, 0: acked from 0 up, the cap of one is never reached.
    assert ack_batch(client, handles).json == {"results": ["acked"] * 4}
    stats = client.simulate_get("/v1/topics/t").json["partition_stats"][0]
    assert stats["in_flight"] == 0


def test_batch_ack_past_the_acked_ahead_cap_says_so_per_handle(client, clock):
    make(client, partitions=1, max_acked_ahead_per_partition=1)
    batch(client, [{"value": "m"}] * 4)
    held = consume_batch(client).json["messages"]
    handles = [m["receipt_handle"] for m in held]
    assert ack_batch(client, [handles[2], handles[3]]).json == {
        "results": ["acked", "acked_ahead_full"]
    }
    assert ack_batch(client, handles).json == {"results": ["acked"] * 4}


@pytest.mark.parametrize(
    ("body", "words"),
    [
        ({"receipt_handles": []}, "receipt_handles must not be empty"),
        ({"receipt_handles": ["x"] * 1001}, "at most 1000"),
        ({"receipt_handles": ["x", 5]}, "receipt_handles[1] must be a string"),
        ({"receipt_handles": ["x"], "extend": "true"}, "extend must be true"),
        ({"receipt_handles": ["x"], "extend": 1}, "extend must be true"),
        ({"receipt_handles": ["x"], "other": 1}, "unknown field 'other'"),
        ({"handles": ["x"]}, 'must be {"receipt_handles": [...]}'),
    ],
)
def test_bad_batch_ack_is_400(client, clock, body, words):
    make(client)
    resp = client.simulate_post("/v1/topics/t/ack/batch", json=body)
    assert resp.status_code == 400
    assert words in resp.json["error"]


def test_batch_ack_of_no_topic_is_404(client, clock):
    assert ack_batch(client, ["x"], name="nope").status_code == 404
