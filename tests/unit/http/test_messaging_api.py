"""Produce, consume, ack, replay, flow control, retention (in-process, fakeredis)."""

from __future__ import annotations

import base64
import json

import pytest


def make(client, name="t", **settings):
    resp = client.simulate_post("/v1/topics", json={"name": name, **settings})
    assert resp.status_code == 201, resp.text


def produce(client, body, name="t", **params):
    return client.simulate_post(f"/v1/topics/{name}/produce", body=body, params=params)


def consume(client, name="t", **params):
    return client.simulate_get(f"/v1/topics/{name}/consume", params=params)


def ack(client, handle, name="t", **params):
    return client.simulate_post(
        f"/v1/topics/{name}/ack", params={"receipt_handle": handle, **params}
    )


def test_produce_is_202_with_empty_body_and_consume_returns_it(client, clock):
    make(client, partitions=1)
    resp = produce(client, b'{"id": 1,  "n": 1e400}', key="k1")
    assert resp.status_code == 202
    assert resp.content == b""
    got = consume(client)
    assert got.status_code == 200
    message = got.json
    assert message["topic"] == "t"
    assert message["partition"] == 0
    assert message["offset"] == 0
    assert message["key"] == "k1"
    assert message["timestamp"] == clock.now
    assert message["receipt_handle"]
    # The JSON payload is embedded verbatim: spacing and number spelling kept.
    assert b'"payload":{"id": 1,  "n": 1e400}' in got.content
    assert "payload_encoding" not in message


def test_text_and_binary_payloads(client, clock):
    make(client, partitions=1)
    produce(client, "plain text, not JSON ✓".encode())
    produce(client, b"\xff\x00\x01")
    produce(client, b"")
    first, second, third = (
        consume(client).json,
        consume(client).json,
        consume(client).json,
    )
    assert first["payload"] == "plain text, not JSON ✓"
    assert second["payload_encoding"] == "base64"
    assert base64.b64decode(second["payload"]) == b"\xff\x00\x01"
    assert third["payload"] == ""


def test_bytes_are_stored_exactly(client, clock):
    make(client, partitions=1)
    body = bytes(range(256)) * 10
    produce(client, body)
    message = consume(client).json
    assert base64.b64decode(message["payload"]) == body


def test_produce_over_one_mib_is_413_and_nothing_written(client, clock):
    make(client, partitions=1)
    assert produce(client, b"x" * (1024 * 1024 + 1)).status_code == 413
    assert produce(client, b"x" * (1024 * 1024)).status_code == 202
    stats = client.simulate_get("/v1/topics/t").json["partition_stats"]
    assert stats[0]["next_offset"] == 1


def test_partition_pinning_and_range(client, clock):
    make(client, partitions=4)
    assert produce(client, b"a", partition="3").status_code == 202
    resp = produce(client, b"a", partition="4")
    assert resp.status_code == 400
    assert "partition 4 is out of range" in resp.json["error"]
    assert produce(client, b"a", partition="-1").status_code == 400
    assert consume(client, partition="3").json["partition"] == 3


def test_key_hashes_to_a_stable_partition(client, clock):
    make(client, partitions=8)
    for _ in range(5):
        produce(client, b"m", key="customer-42")
    stats = client.simulate_get("/v1/topics/t").json["partition_stats"]
    assert sorted(s["next_offset"] for s in stats) == [0] * 7 + [5]


def test_no_key_round_robins(client, clock):
    make(client, partitions=4)
    for _ in range(8):
        produce(client, b"m")
    stats = client.simulate_get("/v1/topics/t").json["partition_stats"]
    assert [s["next_offset"] for s in stats] == [2, 2, 2, 2]


def test_empty_topic_consume_is_204(client, clock):
    make(client)
    assert consume(client).status_code == 204
    assert consume(client, wait="30ms").status_code == 204


@pytest.mark.parametrize("wait", ["soon", "-1", "1h", "5 s"])
def test_bad_wait_is_400(client, clock, wait):
    make(client)
    resp = consume(client, wait=wait)
    assert resp.status_code == 400
    assert "wait" in resp.json["error"]


def test_ack_settles_forever_and_a_retried_ack_is_204_again(client, clock):
    make(client, partitions=1, visibility_timeout_ms=1000)
    produce(client, b"m")
    handle = consume(client).json["receipt_handle"]
    assert ack(client, handle).status_code == 204
    clock.now += 5000
    assert consume(client).status_code == 204
    assert ack(client, handle).status_code == 204  # the same ack, retried
    assert ack(client, handle, extend="true").status_code == 410
    assert ack(client, handle, extend="0").status_code == 410
    assert consume(client).status_code == 204


def test_lapsed_lease_redelivers_and_old_handle_is_gone(client, clock):
    make(client, partitions=1, visibility_timeout_ms=1000)
    produce(client, b"m")
    first = consume(client).json
    assert consume(client).status_code == 204  # reserved
    clock.now += 1000
    second = consume(client).json
    assert second["offset"] == first["offset"]
    assert second["receipt_handle"] != first["receipt_handle"]
    assert ack(client, first["receipt_handle"]).status_code == 410
    assert ack(client, second["receipt_handle"]).status_code == 204


def test_extend_restarts_the_lease(client, clock):
    make(client, partitions=1, visibility_timeout_ms=1000)
    produce(client, b"m")
    handle = consume(client).json["receipt_handle"]
    clock.now += 900
    assert ack(client, handle, extend="true").status_code == 204
    clock.now += 900
    assert consume(client).status_code == 204  # still leased
    assert ack(client, handle).status_code == 204


def test_extend_zero_gives_the_message_back_at_once(client, clock):
    make(client, partitions=1, visibility_timeout_ms=60_000)
    produce(client, b"m")
    handle = consume(client).json["receipt_handle"]
    assert ack(client, handle, extend="0").status_code == 204
    again = consume(client).json
    assert again["offset"] == 0
    assert ack(client, handle).status_code == 410


@pytest.mark.parametrize("handle", ["", "garbage!", "bm90LWEtaGFuZGxl", "MC4wLnNob3J0"])
def test_malformed_handle_is_400(client, clock, handle):
    make(client)
    resp = ack(client, handle)
    assert resp.status_code == 400


def test_forged_handle_is_410(client, clock):
    make(client, partitions=1)
    produce(client, b"m")
    consume(client)
    forged = base64.urlsafe_b64encode(b"0.0." + b"A" * 16).decode().rstrip("=")
    assert ack(client, forged).status_code == 410


def test_bad_extend_value_is_400(client, clock):
    make(client)
    assert ack(client, "x", extend="5").status_code == 400


def test_max_in_flight_per_partition(client, clock):
    make(client, partitions=1, max_in_flight_per_partition=2)
    for _ in range(3):
        produce(client, b"m")
    first, second = consume(client).json, consume(client).json
    assert consume(client).status_code == 204
    assert ack(client, first["receipt_handle"]).status_code == 204
    assert consume(client).json["offset"] == 2
    assert second["offset"] == 1


def test_max_acked_ahead_blocks_until_the_frontier_moves(client, clock):
    make(
        client,
        partitions=1,
        max_acked_ahead_per_partition=2,
        visibility_timeout_ms=1000,
    )
    for _ in range(6):
        produce(client, b"m")
    held = [consume(client).json for _ in range(4)]
    assert ack(client, held[1]["receipt_handle"]).status_code == 204
    assert ack(client, held[2]["receipt_handle"]).status_code == 204
    resp = ack(client, held[3]["receipt_handle"])
    assert resp.status_code == 503
    # Only the message blocking the frontier (offset 0) may be served, once lapsed.
    assert consume(client).status_code == 204
    clock.now += 1000
    again = consume(client).json
    assert again["offset"] == 0
    assert ack(client, again["receipt_handle"]).status_code == 204
    stats = client.simulate_get("/v1/topics/t").json["partition_stats"][0]
    assert stats["in_flight"] == 1  # offset 3, lapsed but not settled


def test_replay_is_read_only(client, clock):
    make(client, partitions=2)
    produce(client, b'{"a":1}', partition="1")
    replay = consume(client, partition="1", offset="0")
    assert replay.status_code == 200
    assert "receipt_handle" not in replay.json
    assert replay.json["payload"] == {"a": 1}
    # not reserved by the replay
    assert consume(client, partition="1").json["offset"] == 0
    assert consume(client, partition="1", offset="1").status_code == 404
    assert consume(client, partition="5", offset="0").status_code == 400
    resp = consume(client, offset="0")
    assert resp.status_code == 400
    assert "offset needs partition" in resp.json["error"]


def test_retention_removes_old_messages_consumed_or_not(client, clock):
    make(client, partitions=1, retention_ms=3_600_000)
    produce(client, b"old-1")
    produce(client, b"old-2")
    handle = consume(client).json["receipt_handle"]
    clock.now += 3_600_000
    produce(client, b"new")
    stats = client.simulate_get("/v1/topics/t").json["partition_stats"][0]
    assert stats["oldest_offset"] == 2
    assert stats["in_flight"] == 0
    assert consume(client, partition="0", offset="0").status_code == 404
    assert consume(client).json["payload"] == "new"
    assert ack(client, handle).status_code == 410


def test_retention_is_at_least_the_window(client, clock):
    make(client, partitions=1, retention_ms=3_600_000)
    produce(client, b"m")
    clock.now += 3_599_999
    produce(client, b"n")
    assert consume(client, partition="0", offset="0").status_code == 200


def test_batch_produce(client, clock):
    make(client, partitions=2)
    body = {
        "messages": [
            {"value": '{"id": 1}'},
            {"value": "text", "key": "k"},
            {"value_base64": base64.b64encode(b"\xfe").decode(), "partition": 1},
        ]
    }
    resp = client.simulate_post("/v1/topics/t/produce/batch", json=body)
    assert resp.status_code == 202
    assert resp.json == {"accepted": 3}
    got = [consume(client).json for _ in range(3)]
    payloads = sorted(json.dumps(m["payload"]) for m in got)
    assert payloads == sorted(
        ['{"id": 1}', '"text"', json.dumps(base64.b64encode(b"\xfe").decode())]
    )


@pytest.mark.parametrize(
    ("entries", "words"),
    [
        ([{"value": "a"}, {"value": 5}], "messages[1]: value must be a string"),
        ([{"value": "a"}, {"valu": "b"}], "messages[1]: unknown field 'valu'"),
        ([{"value": "a", "value_base64": "YQ=="}], "messages[0]: give exactly one"),
        ([{"value_base64": "!!"}], "messages[0]: value_base64 is not base64"),
        ([{"value": "a", "partition": 9}], "messages[0]: partition 9 is out of range"),
        ([{"value": "a", "key": 1}], "messages[0]: key must be a string"),
        ([], "messages must not be empty"),
        ([{"value": "a"}] * 1001, "at most 1000"),
    ],
)
def test_bad_batch_entry_is_400_naming_its_index_and_nothing_written(
    client, clock, entries, words
):
    make(client, partitions=2)
    resp = client.simulate_post(
        "/v1/topics/t/produce/batch", json={"messages": entries}
    )
    assert resp.status_code == 400
    assert words in resp.json["error"]
    stats = client.simulate_get("/v1/topics/t").json["partition_stats"]
    assert all(s["next_offset"] == 0 for s in stats)


def test_batch_over_one_mib_is_413(client, clock):
    make(client)
    big = {"messages": [{"value": "x" * 600_000}, {"value": "y" * 600_000}]}
    assert (
        client.simulate_post("/v1/topics/t/produce/batch", json=big).status_code == 413
    )


def test_metrics_count_messages(client, clock):
    import re

    def counter(name):
        text = client.simulate_get("/metrics").text
        return float(re.search(rf"^{name}_total (\S+)$", text, re.M).group(1))

    make(client, partitions=1)
    before = {
        n: counter(n)
        for n in (
            "narad_messages_produced",
            "narad_messages_consumed",
            "narad_messages_acked",
        )
    }
    produce(client, b"a")
    ack(client, consume(client).json["receipt_handle"])
    assert counter("narad_messages_produced") == before["narad_messages_produced"] + 1
    assert counter("narad_messages_consumed") == before["narad_messages_consumed"] + 1
    assert counter("narad_messages_acked") == before["narad_messages_acked"] + 1


def test_error_body_is_byte_for_byte_the_rulebook_example(client):
    client.simulate_post(
        "/v1/topics",
        json={"name": "payments", "schema": {"type": "object", "required": ["id"]}},
    )
    resp = produce(client, b'{"amount": 5}', name="payments")
    assert resp.status_code == 400
    assert resp.headers["content-length"] == "133"
    assert resp.content == (
        b'{"error":"invalid argument: schema: jsonschema validation failed with '
        b"'narad://schema/payments/1#'\\n- at '': missing property 'id'\"}\n"
    )
