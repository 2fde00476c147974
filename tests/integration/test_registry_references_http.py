"""Schema references on a live node and real Valkey: the registry's
register, lookup, versions, ids, referencedby and delete protection with
references over HTTP, errors included; and Confluent's own clients, as a
Kafka team drives them: an AvroSerializer whose schema uses a named type
of a referenced subject, ProtobufSerializers of messages whose .proto
imports another user .proto (and google/protobuf/timestamp.proto),
generated with grpcio-tools here (the imported file in a directory, so its
subject holds a "/"); a JSONSerializer whose schema $refs a
referenced document. Their framed bytes are produced over /v1, consumed,
and decoded by the deserializers. In-process: tests/unit/http/
test_registry_references.py."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from urllib.parse import quote

import grpc_tools
from confluent_kafka.schema_registry import Schema
from confluent_kafka.schema_registry import SchemaReference
from confluent_kafka.schema_registry.avro import AvroDeserializer
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.schema_registry.json_schema import JSONDeserializer
from confluent_kafka.schema_registry.json_schema import JSONSerializer
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer
from confluent_kafka.schema_registry.protobuf import ProtobufSerializer
from google.protobuf import descriptor_pb2
from google.protobuf import descriptor_pool
from google.protobuf.message_factory import GetMessageClass

from tests.integration.test_confluent_clients_http import consumed
from tests.integration.test_confluent_clients_http import create_framed
from tests.integration.test_confluent_clients_http import produce
from tests.integration.test_confluent_clients_http import registry  # noqa: F401
from tests.integration.test_confluent_clients_http import value_of

MEDIA = "application/vnd.schemaregistry.v1+json"
HEADERS = {"Content-Type": MEDIA, "Accept": MEDIA}
PROTO_CONF = {"auto.register.schemas": True, "use.deprecated.format": False}


def address_of(namespace: str) -> dict:
    return {
        "type": "record",
        "name": "Address",
        "namespace": namespace,
        "fields": [{"name": "street", "type": "string"}],
    }


def order_of(namespace: str) -> dict:
    return {
        "type": "record",
        "name": "Order",
        "namespace": namespace,
        "fields": [
            {"name": "id", "type": "string"},
            {"name": "ship_to", "type": f"{namespace}.Address"},
        ],
    }


def path(subject: str) -> str:
    return quote(subject, safe="")


def register(http, subject, schema, references=None, kind=None):
    body = {"schema": schema if isinstance(schema, str) else json.dumps(schema)}
    if references is not None:
        body["references"] = references
    if kind:
        body["schemaType"] = kind
    return http.post(
        f"/registry/subjects/{path(subject)}/versions",
        json.dumps(body),
        headers=HEADERS,
    )


def refused(resp, status: int, code: int) -> str:
    assert resp.status == status, resp.data
    assert resp.headers["content-type"] == MEDIA
    assert resp.json()["error_code"] == code, resp.data
    return resp.json()["message"]


# -- the API over HTTP -----------------------------------------------------------


def test_references_over_http(http, topic):
    space = "t" + topic.replace("-", "_").replace(".", "_")[:60]
    address, order = f"{topic}.address", f"{topic}.order"
    made = register(http, address, address_of(space))
    assert made.status == 200, made.data
    ref = {"name": f"{space}.Address", "subject": address, "version": 1}
    first = register(http, order, order_of(space), [ref])
    assert first.status == 200, first.data
    order_id = first.json()["id"]
    assert register(http, order, order_of(space), [ref]).json() == {"id": order_id}
    shown = http.get(f"/registry/subjects/{path(order)}/versions/latest").json()
    assert (shown["id"], shown["references"]) == (order_id, [ref])
    by_id = http.get(f"/registry/schemas/ids/{order_id}").json()
    assert by_id["references"] == [ref]
    looked = http.post(
        f"/registry/subjects/{path(order)}",
        json.dumps({"schema": json.dumps(order_of(space)), "references": [ref]}),
        headers=HEADERS,
    )
    assert looked.status == 200, looked.data
    assert looked.json()["version"] == 1
    referrers = http.get(f"/registry/subjects/{path(address)}/versions/1/referencedby")
    assert referrers.status == 200
    assert referrers.json() == [order_id]
    # Errors: what does not resolve, what is not a reference, a delete of a
    # referenced version.
    missing = {**ref, "version": 5}
    message = refused(register(http, order, order_of(space), [missing]), 422, 42201)
    assert message == (
        f'No schema reference found for subject "{address}" and version 5'
    )
    refused(register(http, order, order_of(space), "x"), 422, 42201)
    refused(register(http, order, order_of(space)), 422, 42201)
    protected = http.delete(f"/registry/subjects/{path(address)}/versions/1")
    message = refused(protected, 422, 42206)
    assert f"subject={address},version=1" in message
    refused(http.delete(f"/registry/subjects/{path(address)}"), 422, 42206)
    # Gone the referrer, gone the protection.
    assert http.delete(f"/registry/subjects/{path(order)}").json() == [1]
    assert http.delete(f"/registry/subjects/{path(order)}?permanent=true").json() == [1]
    assert http.delete(f"/registry/subjects/{path(address)}").json() == [1]
    assert http.delete(f"/registry/subjects/{path(address)}?permanent=true").json() == [
        1
    ]


def test_a_topics_subject_with_references_validates_produce(http, topic):
    space = "t" + topic.replace("-", "_").replace(".", "_")[:60]
    address = f"{topic}.address"
    assert register(http, address, address_of(space)).status == 200
    made = http.post(
        "/v1/topics", {"name": topic, "partitions": 1, "schema_type": "AVRO"}
    )
    assert made.status == 201, made.data
    ref = {"name": f"{space}.Address", "subject": address, "version": 1}
    assert register(http, f"{topic}-value", order_of(space), [ref]).status == 200
    record = http.get(f"/v1/topics/{topic}").json()
    assert record["schema_version"] == 1
    good = {"id": "1", "ship_to": {"street": "Main"}}
    assert produce(http, topic, json.dumps(good).encode()).status == 202
    bad = produce(http, topic, json.dumps({"id": "1", "ship_to": {}}).encode())
    assert bad.status == 400
    assert "street" in bad.json()["error"]
    # The topic's version is what references it now: the address stays.
    refused(http.delete(f"/registry/subjects/{path(address)}"), 422, 42206)


# -- Confluent's clients ----------------------------------------------------------


def test_avro_serializer_with_a_referenced_named_type(http, topic, registry):  # noqa: F811
    space = "t" + topic.replace("-", "_").replace(".", "_")[:60]
    address = f"{space}.Address"
    version = registry.register_schema(
        address, Schema(json.dumps(address_of(space)), "AVRO")
    )
    assert version
    referenced = registry.get_latest_version(address)
    create_framed(http, topic, schema_type="AVRO")
    schema = Schema(
        json.dumps(order_of(space)),
        "AVRO",
        references=[SchemaReference(address, address, referenced.version)],
    )
    serialize = AvroSerializer(registry, schema, conf={"auto.register.schemas": True})
    orders = [
        {"id": "o-1", "ship_to": {"street": "Main St"}},
        {"id": "o-2", "ship_to": {"street": "High St"}},
    ]
    framed = [serialize(o, value_of(topic)) for o in orders]
    for message in framed:
        assert produce(http, topic, message).status == 202
    shown = registry.get_latest_version(f"{topic}-value")
    assert [(r.name, r.subject, r.version) for r in shown.schema.references] == [
        (address, address, referenced.version)
    ]
    received = consumed(http, topic, 2)
    assert received == framed
    decode = AvroDeserializer(registry)
    assert [decode(m, value_of(topic)) for m in received] == orders
    # A datum the referenced type refuses, framed with the same id.
    cut = produce(http, topic, framed[0][:-2])
    assert cut.status == 400


ADDRESS_PROTO = """
syntax = "proto3";
package {package};
message Address {{ string street = 1; int32 zip = 2; }}
"""
STATUS_PROTO = """
syntax = "proto3";
package {package};
enum Status {{ UNKNOWN = 0; PLACED = 1; }}
"""
ORDER_PROTO = """
syntax = "proto3";
package {package};
import "{address}";
import "{status}";
import "google/protobuf/timestamp.proto";
message Order {{
  string order_id = 1;
  {package}.Address ship_to = 2;
  google.protobuf.Timestamp placed_at = 3;
  {package}.Status status = 4;
}}
"""
STAMPED_PROTO = """
syntax = "proto3";
package {package};
import "google/protobuf/timestamp.proto";
message Stamped {{ string id = 1; google.protobuf.Timestamp at = 2; }}
"""


def generated(tmp_path: Path, files: dict[str, str], main: str) -> dict[str, type]:
    """Message classes of ``main`` generated here with grpcio-tools' protoc
    from ``files`` (import path -> source), in a private pool."""
    for name, source in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(source)
    out = tmp_path / "set.pb"
    wkt = str(Path(grpc_tools.__file__).parent / "_proto")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "grpc_tools.protoc",
            f"-I{tmp_path}",
            f"-I{wkt}",
            f"--descriptor_set_out={out}",
            "--include_imports",
            main,
        ],
        check=True,
    )
    pool = descriptor_pool.DescriptorPool()
    descriptors = descriptor_pb2.FileDescriptorSet.FromString(out.read_bytes())
    for file in descriptors.file:
        pool.Add(file)
    top = descriptors.file[-1]
    return {
        m.name: GetMessageClass(pool.FindMessageTypeByName(f"{top.package}.{m.name}"))
        for m in top.message_type
    }


def test_protobuf_serializer_of_a_file_importing_another(
    http,
    topic,
    registry,  # noqa: F811
    tmp_path,
):
    package = "t" + topic.replace("-", "_").replace(".", "_")[:60]
    # The imported file's import path is its subject (Confluent's default
    # reference.subject.name.strategy), "/" included: one per test.
    address = f"{package}/common/address.proto"
    # A file of enums alone is a subject too (it declares no message).
    status = f"{package}/common/status.proto"
    files = {
        address: ADDRESS_PROTO.format(package=package),
        status: STATUS_PROTO.format(package=package),
        f"{package}_order.proto": ORDER_PROTO.format(
            package=package, address=address, status=status
        ),
    }
    classes = generated(tmp_path, files, f"{package}_order.proto")
    order_class = classes["Order"]
    create_framed(http, topic, schema_type="PROTOBUF")
    serialize = ProtobufSerializer(order_class, registry, conf=PROTO_CONF)
    order = order_class(order_id="o-1")
    order.ship_to.street = "Main St"
    order.ship_to.zip = 7
    order.placed_at.seconds = 1_700_000_000
    order.status = 1
    framed = serialize(order, value_of(topic))
    assert produce(http, topic, framed).status == 202
    # The imported file is a subject of its own, referenced by import path;
    # the well-known import needs no reference.
    shown = registry.get_latest_version(f"{topic}-value")
    assert [(r.name, r.subject) for r in shown.schema.references] == [
        (address, address),
        (status, status),
    ]
    assert registry.get_latest_version(address).version == 1
    assert "enum Status" in registry.get_latest_version(status).schema.schema_str
    record = http.get(f"/v1/topics/{topic}").json()
    assert record["proto_message"] == f"{package}.Order"
    # A message the imported type refuses (zip's varint where a string is).
    bad = framed[:6] + b"\x12\x02\x08\x07"
    assert produce(http, topic, framed[:6] + b"\x12\x02\x10\x07").status == 202
    refused_bad = produce(http, topic, bad)
    assert refused_bad.status == 400
    received = consumed(http, topic, 2)
    assert received[0] == framed
    decode = ProtobufDeserializer(
        order_class, {"use.deprecated.format": False}, schema_registry_client=registry
    )
    assert decode(received[0], value_of(topic)) == order
    assert decode(received[1], value_of(topic)).ship_to.zip == 7
    # The referenced file is protected while the topic's version uses it.
    gone = http.delete(f"/registry/subjects/{path(address)}/versions/1")
    refused(gone, 422, 42206)


def test_protobuf_serializer_of_a_file_importing_timestamp(
    http,
    topic,
    registry,  # noqa: F811
    tmp_path,
):
    package = "t" + topic.replace("-", "_").replace(".", "_")[:60]
    main = f"{package}_stamped.proto"
    classes = generated(tmp_path, {main: STAMPED_PROTO.format(package=package)}, main)
    stamped_class = classes["Stamped"]
    create_framed(http, topic, schema_type="PROTOBUF")
    serialize = ProtobufSerializer(stamped_class, registry, conf=PROTO_CONF)
    stamped = stamped_class(id="s-1")
    stamped.at.seconds = 42
    stamped.at.nanos = 7
    framed = serialize(stamped, value_of(topic))
    assert produce(http, topic, framed).status == 202
    assert registry.get_latest_version(f"{topic}-value").schema.references == []
    (received,) = consumed(http, topic, 1)
    decode = ProtobufDeserializer(
        stamped_class, {"use.deprecated.format": False}, schema_registry_client=registry
    )
    assert decode(received, value_of(topic)) == stamped


def test_json_serializer_with_a_referenced_document(http, topic, registry):  # noqa: F811
    customer_subject = f"{topic}.customer"
    customer = {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "type": "object",
        "properties": {"name": {"type": "string", "minLength": 1}},
        "required": ["name"],
    }
    registry.register_schema(customer_subject, Schema(json.dumps(customer), "JSON"))
    invoice = {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "type": "object",
        "properties": {
            "customer": {"$ref": "customer.json"},
            "total": {"type": "number"},
        },
        "required": ["customer"],
    }
    schema = Schema(
        json.dumps(invoice),
        "JSON",
        references=[SchemaReference("customer.json", customer_subject, 1)],
    )
    create_framed(http, topic)
    serialize = JSONSerializer(schema, registry, conf={"auto.register.schemas": True})
    invoices = [{"customer": {"name": "Ann"}, "total": 3}, {"customer": {"name": "B"}}]
    framed = [serialize(i, value_of(topic)) for i in invoices]
    for message in framed:
        assert produce(http, topic, message).status == 202
    # Narad checks the referenced document too.
    empty_name = framed[0][:5] + json.dumps({"customer": {"name": ""}}).encode()
    resp = produce(http, topic, empty_name)
    assert resp.status == 400
    assert "/customer/name" in resp.json()["error"]
    received = consumed(http, topic, 2)
    assert received == framed
    decode = JSONDeserializer(None, schema_registry_client=registry)
    assert [decode(m, value_of(topic)) for m in received] == invoices
