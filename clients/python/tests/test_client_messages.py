"""Produce, consume, leases and replay against a live node."""

from __future__ import annotations

import json
import uuid

import httpx
import pytest
from tests.httpclient import ADMIN

from narad_client import Client
from narad_client import Gone
from narad_client import Message
from narad_client import NotFound

#: Bodies of every kind the node tells apart, and the edges between them.
PAYLOADS = [
    pytest.param(b'{"id": 1, "price": 1.50, "big": 1e400}', id="json-object"),
    pytest.param(b" [1, 2.0,\n3] \t", id="json-with-whitespace"),
    pytest.param(b"12345678901234567890123456789", id="json-big-number"),
    pytest.param(b"true", id="json-literal"),
    pytest.param(b'"a\\/b \\u00e9"', id="json-string-escaped"),
    pytest.param(b'"42"', id="json-string-of-json"),
    pytest.param('{"naïve": "日本"}'.encode(), id="json-unicode"),
    pytest.param(b"hello world", id="text"),
    pytest.param("héllo \u2028 wörld \U0001f600".encode(), id="text-unicode"),
    pytest.param(b'line\nbreak\ttab "quote" \\ \x01\x7f', id="text-controls"),
    pytest.param(b"NaN", id="text-nan"),
    pytest.param(b'{"a": 1', id="text-broken-json"),
    pytest.param(b"[" * 300 + b"]" * 300, id="text-too-deep"),
    pytest.param(b"\xef\xbb\xbf{}", id="text-bom"),
    pytest.param(b"", id="empty"),
    pytest.param(b"\xff\xfe\x00\x01binary", id="binary"),
    pytest.param(bytes(range(256)), id="binary-all-bytes"),
    pytest.param(b"\xed\xa0\x80", id="binary-surrogate-utf8"),
]


@pytest.mark.parametrize("payload", PAYLOADS)
def test_payload_round_trips_byte_for_byte(
    client: Client, topic: str, payload: bytes
) -> None:
    client.produce(topic, payload, key="k-1")
    message = client.consume(topic)
    assert message is not None
    assert message.payload == payload
    assert message.key == "k-1"
    assert (message.topic, message.partition, message.offset) == (topic, 0, 0)
    assert message.timestamp > 1_600_000_000_000
    assert message.receipt_handle
    assert client.replay(topic, 0, 0).payload == payload
    client.produce_batch(topic, [payload])
    (batched,) = client.consume_batch(topic, max=5)
    assert batched.payload == payload
    client.ack_batch(topic, [message, batched])


def test_json_string_body_reads_as_text_unless_payload_json(
    client: Client, topic: str
) -> None:
    # The one case the API leaves open: a body that is a JSON string whose
    # content is not JSON is answered exactly as the text without quotes.
    client.produce(topic, b'"hello"')
    message = client.consume(topic)
    assert message is not None
    assert message.payload == b"hello"
    assert message.payload_json == '"hello"'
    assert json.loads(message.payload_json) == "hello"


def test_binary_payload_is_marked(client: Client, topic: str) -> None:
    client.produce(topic, b"\x00\xff")
    message = client.consume(topic)
    assert message is not None
    assert message.payload_encoding == "base64"
    assert message.payload_json == '"AP8="'


def test_produce_refuses_text(client: Client, topic: str) -> None:
    with pytest.raises(TypeError, match="encode"):
        client.produce(topic, "text")  # type: ignore[arg-type]


def test_consume_empty_and_long_poll(client: Client, topic: str) -> None:
    assert client.consume(topic) is None
    assert client.consume(topic, wait=0.2) is None
    assert client.consume_batch(topic, wait=0.2) == []


def test_produce_with_partition_and_key(client: Client) -> None:
    name = f"keyed-{uuid.uuid4().hex[:10]}"
    client.create_topic(name, partitions=3)
    try:
        client.produce(name, b"to-2", partition=2)
        message = client.consume(name, partition=2)
        assert message is not None
        assert (message.partition, message.payload, message.key) == (2, b"to-2", None)
        client.ack(name, message)
        for _ in range(3):
            client.produce(name, b"same", key="order-7")
        taken = client.consume_batch(name, max=10)
        assert len(taken) == 3
        assert len({m.partition for m in taken}) == 1
        assert {m.key for m in taken} == {"order-7"}
        assert client.ack_batch(name, taken) == ["acked"] * 3
    finally:
        client.delete_topic(name)


def test_idempotency_key_stores_once(client: Client, topic: str) -> None:
    first = client.produce(topic, b"once", idempotency_key="order-1-created")
    again = client.produce(topic, b"once", idempotency_key="order-1-created")
    assert first.idempotency_key == again.idempotency_key == "order-1-created"
    assert (first.replayed, again.replayed) == (False, True)
    made = client.produce(topic, b"twice")
    assert made.idempotency_key and len(made.idempotency_key) == 32
    stats = client.topic(topic)["partition_stats"]
    assert stats[0]["next_offset"] == 2


def test_produce_batch_forms_and_keys(client: Client, topic: str) -> None:
    messages = [
        b"plain",
        {"payload": b"\x00bin", "key": "k"},
        {"payload": b'{"j": 1}', "partition": 0},
    ]
    done = client.produce_batch(topic, messages, idempotency_key="batch-1")
    assert (done.accepted, done.duplicates, done.replayed) == (3, 0, False)
    again = client.produce_batch(topic, messages, idempotency_key="batch-1")
    assert (again.accepted, again.duplicates, again.replayed) == (3, 3, True)
    taken = client.consume_batch(topic, max=100)
    assert [m.payload for m in taken] == [b"plain", b"\x00bin", b'{"j": 1}']
    assert [m.key for m in taken] == [None, "k", None]
    client.ack_batch(topic, taken)
    own = [{"payload": b"a", "idempotency_key": "m-a"}, {"payload": b"b"}]
    per = client.produce_batch(topic, [own[0]])
    assert per.idempotency_key is None
    assert client.produce_batch(topic, own).duplicates == 1
    with pytest.raises(ValueError, match="not both"):
        client.produce_batch(topic, own, idempotency_key="x")
    with pytest.raises(TypeError, match="unknown field"):
        client.produce_batch(topic, [{"payload": b"a", "value": "b"}])


def test_leases_ack_extend_release(client: Client, topic: str) -> None:
    client.produce_batch(topic, [b"1", b"2", b"3"])
    one, two, three = client.consume_batch(topic, max=3)
    client.extend(topic, one)
    client.ack(topic, one.receipt_handle or "")
    client.ack(topic, one)  # again: the API answers 204
    client.release(topic, two)
    with pytest.raises(Gone) as lapsed:
        client.release(topic, two)
    assert lapsed.value.status == 410 and lapsed.value.error
    back = client.consume(topic)
    assert back is not None and back.payload == b"2"
    assert client.extend_batch(topic, [back, three]) == ["extended", "extended"]
    assert client.release_batch(topic, [back]) == ["released"]
    assert client.release_batch(topic, [back]) == ["lapsed"]
    again = client.consume(topic)
    assert again is not None and again.offset == back.offset
    assert client.ack_batch(topic, [again, three, "junk"]) == [
        "acked",
        "acked",
        "malformed",
    ]
    assert client.consume(topic) is None


def test_replay(client: Client, topic: str) -> None:
    client.produce(topic, b'{"n": 1}', key="r")
    message = client.replay(topic, 0, 0)
    assert isinstance(message, Message)
    assert message.receipt_handle is None
    assert message.json() == {"n": 1}
    assert message.text == '{"n": 1}'
    with pytest.raises(ValueError, match="replayed"):
        client.ack(topic, message)
    with pytest.raises(NotFound):
        client.replay(topic, 0, 5)
    # A replay leases nothing: the message is still there to consume.
    leased = client.consume(topic)
    assert leased is not None and leased.offset == 0


def test_raw_json_is_the_message_as_the_node_wrote_it(
    client: Client, node, topic: str
) -> None:
    body = b'{"f": 1.50, "big": 1e400,\n "s": "\\u00e9"}'
    client.produce(topic, body, key="k")
    answer = httpx.get(
        f"{node.base}/v1/topics/{topic}/consume",
        params={"partition": 0, "offset": 0},
        auth=ADMIN,
    )
    assert client.replay(topic, 0, 0).raw_json.encode() == answer.content.strip()
    (leased,) = client.consume_batch(topic)
    assert json.loads(leased.raw_json)["receipt_handle"] == leased.receipt_handle
    assert body.decode() in leased.raw_json
    client.ack(topic, leased)
