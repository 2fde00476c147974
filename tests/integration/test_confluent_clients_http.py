"""Confluent's own clients against a live node (issue 54): the registry
client and the Avro, JSON Schema and Protobuf serializers register through
``/registry`` on a framed topic's ``<topic>-value`` subject, their framed
bytes are produced over ``/v1``, consumed, and decoded by the deserializers.
Also every refusal of a framed produce, over HTTP."""

from __future__ import annotations

import base64
import json

import pytest
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.schema_registry.json_schema import JSONDeserializer
from confluent_kafka.schema_registry.json_schema import JSONSerializer
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer
from confluent_kafka.schema_registry.protobuf import ProtobufSerializer
from confluent_kafka.serialization import MessageField
from confluent_kafka.serialization import SerializationContext
from google.protobuf import descriptor_pb2
from google.protobuf import descriptor_pool
from google.protobuf.message_factory import GetMessageClass

from narad_protobuf.compiler import compile_proto
from tests.httpclient import ADMIN

ORDER_V1 = {
    "type": "record",
    "name": "Order",
    "namespace": "shop",
    "fields": [
        {"name": "order_id", "type": "string"},
        {"name": "amount", "type": "double"},
    ],
}
# Backward compatible: a field added with a default.
ORDER_V2 = {
    **ORDER_V1,
    "fields": [*ORDER_V1["fields"], {"name": "qty", "type": "int", "default": 1}],
}
JSON_SCHEMA = {
    "$schema": "http://json-schema.org/draft-07/schema#",
    "title": "Order",
    "type": "object",
    "properties": {"order_id": {"type": "string"}, "amount": {"type": "number"}},
    "required": ["order_id"],
}
# Messages declared in name order, so the client's message indexes and the
# stored (canonical, name-sorted) file agree; Line is nested in Order.
PROTO = """
syntax = "proto3";
package shop.v1;
message Order {
  string order_id = 1;
  double amount = 2;
  repeated Line lines = 3;
  message Line { string sku = 1; int32 qty = 2; }
}
message Refund { string order_id = 1; }
"""


@pytest.fixture
def registry(node) -> SchemaRegistryClient:
    user, password = ADMIN
    return SchemaRegistryClient(
        {"url": node.base + "/registry", "basic.auth.user.info": f"{user}:{password}"}
    )


def value_of(topic: str) -> SerializationContext:
    return SerializationContext(topic, MessageField.VALUE)


def create_framed(http, topic: str, **extra) -> dict:
    body = {"name": topic, "partitions": 1, "framing": "confluent", **extra}
    resp = http.post("/v1/topics", body)
    assert resp.status == 201, resp.data
    assert resp.json()["framing"] == "confluent"
    return resp.json()


def produce(http, topic: str, body: bytes):
    return http.post(f"/v1/topics/{topic}/produce", body)


def consumed(http, topic: str, count: int) -> list[bytes]:
    """The next ``count`` messages' bytes, as sent (acked)."""
    out = []
    for _ in range(count):
        resp = http.get(f"/v1/topics/{topic}/consume?wait=5000")
        assert resp.status == 200, resp.data
        message = resp.json()
        out.append(payload_bytes(message))
        ack = http.post(
            f"/v1/topics/{topic}/ack?receipt_handle={message['receipt_handle']}"
        )
        assert ack.status == 204
    return out


def payload_bytes(message: dict) -> bytes:
    # A framed message is binary (base64) or, when its bytes happen to be
    # UTF-8, text (a JSON string): either way the bytes as sent.
    if message.get("payload_encoding") == "base64":
        return base64.b64decode(message["payload"])
    assert isinstance(message["payload"], str), message
    return message["payload"].encode("utf-8")


def schema_id(registry: SchemaRegistryClient, topic: str, version: int) -> int:
    return registry.get_version(f"{topic}-value", version).schema_id


def frame(schema_id: int, payload: bytes) -> bytes:
    return b"\x00" + schema_id.to_bytes(4, "big") + payload


def error(resp) -> str:
    return resp.json()["error"]


def proto_classes(source: str = PROTO) -> dict[str, type]:
    """Message classes generated at test time: protoc (grpcio-tools)
    compiles the file, a private pool holds it."""
    files = descriptor_pb2.FileDescriptorSet.FromString(compile_proto(source))
    pool = descriptor_pool.DescriptorPool()
    for file in files.file:
        pool.Add(file)
    main = files.file[-1]
    prefix = f"{main.package}." if main.package else ""
    return {
        m.name: GetMessageClass(pool.FindMessageTypeByName(prefix + m.name))
        for m in main.message_type
    }


# -- Confluent's serializers ------------------------------------------------------


def test_avro_serializers_register_produce_and_decode(http, topic, registry):
    create_framed(http, topic, schema_type="AVRO")
    conf = {"auto.register.schemas": True}
    v1 = AvroSerializer(registry, json.dumps(ORDER_V1), conf=conf)
    first = v1({"order_id": "o-1", "amount": 9.5}, value_of(topic))
    assert produce(http, topic, first).status == 202
    # A producer on a newer schema registers it as version 2 of the topic.
    v2 = AvroSerializer(registry, json.dumps(ORDER_V2), conf=conf)
    second = v2({"order_id": "o-2", "amount": 1.0, "qty": 3}, value_of(topic))
    assert produce(http, topic, second).status == 202
    # The old producer keeps writing with version 1's id.
    third = v1({"order_id": "o-3", "amount": 2.0}, value_of(topic))
    assert third[1:5] == first[1:5] != second[1:5]
    assert produce(http, topic, third).status == 202
    record = http.get(f"/v1/topics/{topic}").json()
    assert (record["schema_version"], record["encoding"]) == (2, "binary")
    assert registry.get_latest_version(f"{topic}-value").version == 2
    received = consumed(http, topic, 3)
    assert received == [first, second, third]  # stored as sent
    decode = AvroDeserializer(registry)
    assert [decode(m, value_of(topic)) for m in received] == [
        {"order_id": "o-1", "amount": 9.5},
        {"order_id": "o-2", "amount": 1.0, "qty": 3},
        {"order_id": "o-3", "amount": 2.0},
    ]


def test_json_schema_serializers_register_produce_and_decode(http, topic, registry):
    create_framed(http, topic)
    serialize = JSONSerializer(
        json.dumps(JSON_SCHEMA), registry, conf={"auto.register.schemas": True}
    )
    orders = [{"order_id": "o-1", "amount": 3}, {"order_id": "o-2"}]
    framed = [serialize(order, value_of(topic)) for order in orders]
    for message in framed:
        assert produce(http, topic, message).status == 202
    assert http.get(f"/v1/topics/{topic}").json()["schema_version"] == 1
    received = consumed(http, topic, 2)
    assert received == framed
    decode = JSONDeserializer(None, schema_registry_client=registry)
    assert [decode(m, value_of(topic)) for m in received] == orders


def test_protobuf_serializers_register_produce_and_decode(http, topic, registry):
    create_framed(http, topic, schema_type="PROTOBUF")
    classes = proto_classes()
    order_class = classes["Order"]
    serialize = ProtobufSerializer(
        order_class,
        registry,
        conf={"auto.register.schemas": True, "use.deprecated.format": False},
    )
    order = order_class(order_id="o-1", amount=4.5)
    order.lines.add(sku="a", qty=2)
    framed = serialize(order, value_of(topic))
    assert framed[5:6] == b"\x00"  # message indexes [0]: the first message
    assert produce(http, topic, framed).status == 202
    record = http.get(f"/v1/topics/{topic}").json()
    assert (record["schema_version"], record["proto_message"]) == (1, "shop.v1.Order")
    (received,) = consumed(http, topic, 1)
    assert received == framed
    decode = ProtobufDeserializer(
        order_class, {"use.deprecated.format": False}, schema_registry_client=registry
    )
    assert decode(received, value_of(topic)) == order


def test_protobuf_message_indexes_name_other_messages(http, topic, registry):
    create_framed(http, topic, schema_type="PROTOBUF")
    classes = proto_classes()
    conf = {"auto.register.schemas": True, "use.deprecated.format": False}
    order = ProtobufSerializer(classes["Order"], registry, conf=conf)(
        classes["Order"](order_id="o"), value_of(topic)
    )
    ident = order[1:5]
    refund = classes["Refund"](order_id="o-9").SerializeToString()
    # Indexes [1] (count 1, index 1, zigzag): Refund, the file's second.
    framed = b"\x00" + ident + b"\x02\x02" + refund
    assert produce(http, topic, framed).status == 202
    line = classes["Order"].Line(sku="s", qty=1).SerializeToString()
    # [0, 0]: Order.Line (Order's only nested message).
    nested = b"\x00" + ident + b"\x04\x00\x00" + line
    assert produce(http, topic, nested).status == 202
    wrong = b"\x00" + ident + b"\x02\x04" + line  # [2]: past the two messages
    resp = produce(http, topic, wrong)
    assert resp.status == 400
    assert "message indexes [2] name no message" in error(resp)


UNSORTED = """
syntax = "proto3";
package shop.v2;
message Order { string order_id = 1; Address ship_to = 2; }
message Address { string street = 1; int32 zip = 2; }
"""


def test_protobuf_indexes_follow_the_clients_declaration_order(http, topic, registry):
    # Order is declared first, so the serializer frames it as [0], though
    # Address sorts before it: the stored file keeps the declared order.
    create_framed(http, topic, schema_type="PROTOBUF")
    classes = proto_classes(UNSORTED)
    serialize = ProtobufSerializer(
        classes["Order"],
        registry,
        conf={"auto.register.schemas": True, "use.deprecated.format": False},
    )
    order = classes["Order"](order_id="o-1")
    order.ship_to.street = "Main St"
    framed = serialize(order, value_of(topic))
    assert framed[5:6] == b"\x00"
    assert produce(http, topic, framed).status == 202
    address = classes["Address"](zip=7).SerializeToString()
    as_address = framed[:5] + b"\x02\x02" + address  # [1]: Address
    assert produce(http, topic, as_address).status == 202
    as_order = framed[:5] + b"\x00" + address  # zip's varint where a string is
    refused = produce(http, topic, as_order)
    assert refused.status == 400
    assert "does not decode as shop.v2.Order" in error(refused)
    decode = ProtobufDeserializer(
        classes["Order"],
        {"use.deprecated.format": False},
        schema_registry_client=registry,
    )
    (received, _) = consumed(http, topic, 2)
    assert decode(received, value_of(topic)) == order


# -- refusals ----------------------------------------------------------------------


@pytest.fixture
def framed_json(http, topic, registry) -> tuple[str, int]:
    """A framed JSON topic with one version, and that version's id."""
    create_framed(http, topic, schema=JSON_SCHEMA)
    return topic, schema_id(registry, topic, 1)


@pytest.mark.parametrize(
    ("body", "words"),
    [
        (b'{"order_id": "o"}', "payload is not framed"),
        (b"\x01\x00\x00\x00\x01{}", "got byte 0x01"),
        (b"\x00\x00\x01", "payload is 3 bytes, shorter than the framing header"),
        (b"", "payload is not framed"),
    ],
)
def test_unframed_and_short_messages_are_refused(http, framed_json, body, words):
    topic, _ = framed_json
    resp = produce(http, topic, body)
    assert resp.status == 400, resp.data
    assert words in error(resp)


def test_unknown_schema_id_is_refused(http, framed_json):
    topic, _ = framed_json
    resp = produce(http, topic, frame(2**31 - 1, b'{"order_id": "o"}'))
    assert resp.status == 400
    assert "schema id 2147483647 is no registered schema" in error(resp)
    zero = produce(http, topic, frame(0, b'{"order_id": "o"}'))
    assert zero.status == 400
    assert "schema id 0 is no registered schema" in error(zero)


def test_schema_id_of_another_topic_is_refused(http, framed_json, registry):
    topic, _ = framed_json
    other = topic[:180] + "-other"
    made = http.post(
        "/v1/topics", {"name": other, "schema": {"type": "object", "title": "X"}}
    )
    assert made.status == 201, made.data
    foreign = schema_id(registry, other, 1)
    resp = produce(http, topic, frame(foreign, b'{"order_id": "o"}'))
    assert resp.status == 400
    message = error(resp)
    assert f"schema id {foreign} is not a version of {topic}'s history" in message
    assert f"'{other}-value'" in message


def test_refused_payload_names_the_id_and_version(http, framed_json):
    topic, ident = framed_json
    resp = produce(http, topic, frame(ident, b'{"amount": 1}'))
    assert resp.status == 400
    message = error(resp)
    assert f"framed with schema id {ident} (version 1 of {topic})" in message
    assert "order_id" in message
    not_json = produce(http, topic, frame(ident, b"{oops"))
    assert not_json.status == 400
    assert "not one JSON text" in error(not_json)


def test_older_versions_ids_are_accepted_and_checked_as_theirs(
    http, framed_json, registry
):
    topic, v1 = framed_json
    # Version 2 widens version 1: an amount may be a string too.
    properties = {**JSON_SCHEMA["properties"], "amount": {"type": ["number", "string"]}}
    wider = {**JSON_SCHEMA, "properties": properties}
    patched = http.patch(f"/v1/topics/{topic}", {"schema": wider})
    assert patched.status == 200, patched.data
    assert patched.json()["schema_version"] == 2
    v2 = schema_id(registry, topic, 2)
    assert v2 != v1
    both = b'{"order_id": "o"}'
    for ident in (v1, v2):
        assert produce(http, topic, frame(ident, both)).status == 202
    # Each message is checked under the version its id names.
    text_amount = b'{"order_id": "o", "amount": "5"}'
    assert produce(http, topic, frame(v2, text_amount)).status == 202
    refused = produce(http, topic, frame(v1, text_amount))
    assert refused.status == 400
    assert f"framed with schema id {v1} (version 1 of {topic})" in error(refused)
    assert consumed(http, topic, 3) == [
        frame(v1, both),
        frame(v2, both),
        frame(v2, text_amount),
    ]


def test_a_batch_is_refused_whole_naming_the_entry(http, framed_json):
    topic, ident = framed_json
    good = frame(ident, b'{"order_id": "o"}')
    entries = [
        {"value_base64": base64.b64encode(good).decode()},
        {"value_base64": base64.b64encode(b"\x00\x00").decode()},
    ]
    resp = http.post(f"/v1/topics/{topic}/produce/batch", {"messages": entries})
    assert resp.status == 400
    assert "messages[1]: payload is 2 bytes" in error(resp)
    assert http.get(f"/v1/topics/{topic}/consume?wait=0").status == 204
    ok = http.post(f"/v1/topics/{topic}/produce/batch", {"messages": entries[:1] * 2})
    assert ok.status == 202, ok.data
    assert consumed(http, topic, 2) == [good, good]


def test_framed_avro_datum_is_checked_under_its_version(http, topic, registry):
    create_framed(http, topic, schema_type="AVRO", schema=ORDER_V1)
    ident = schema_id(registry, topic, 1)
    serialize = AvroSerializer(
        registry, json.dumps(ORDER_V1), conf={"auto.register.schemas": False}
    )
    good = serialize({"order_id": "o", "amount": 1.0}, value_of(topic))
    assert good[1:5] == ident.to_bytes(4, "big")
    assert produce(http, topic, good).status == 202
    cut = produce(http, topic, good[:-3])
    assert cut.status == 400
    assert f"framed with schema id {ident} (version 1 of {topic})" in error(cut)
    extra = produce(http, topic, good + b"\x00")
    assert extra.status == 400


def test_an_unframed_topic_takes_what_it_always_took(http, topic):
    made = http.post("/v1/topics", {"name": topic, "schema": {"type": "object"}})
    assert made.json()["framing"] == "none"
    assert produce(http, topic, b'{"a": 1}').status == 202
    assert produce(http, topic, frame(1, b"{}")).status == 400
