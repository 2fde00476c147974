"""PROTOBUF topics over real HTTP on real storage (issue 53): the three forms
of a schema, the topic's message, both encodings, compatibility rule by rule,
and the dry run."""

from __future__ import annotations

import base64
import json

import pytest
from google.protobuf import json_format
from google.protobuf import message_factory

from narad_protobuf import parse_schema
from tests.cases.protobuf_pairs import BASE
from tests.cases.protobuf_pairs import CASES

ENGINE = parse_schema(BASE, proto_message="shop.Order")
ORDER_CLASS = message_factory.GetMessageClass(ENGINE.descriptor)


def order(**fields) -> bytes:
    values = {"order_id": "o-1", "qty": 2, "status": 1, **fields}
    return ORDER_CLASS(**values).SerializeToString()


def event_store_form() -> str:
    return base64.b64encode(ENGINE.canonical).decode() + ":shop.Order"


def file_descriptor_form() -> str:
    [only] = ENGINE.files.file
    return base64.b64encode(only.SerializeToString()).decode()


def create(http, topic, schema, **extra):
    body = {"name": topic, "partitions": 1, "schema_type": "PROTOBUF", "schema": schema}
    return http.post("/v1/topics", {**body, **extra})


def made(http, topic, schema=BASE, **extra):
    extra.setdefault("proto_message", "shop.Order")
    resp = create(http, topic, schema, **extra)
    assert resp.status == 201, resp.data
    return resp.json()


def error(resp) -> str:
    return resp.json()["error"]


@pytest.mark.parametrize("form", ["proto", "file_descriptor", "event_store"])
def test_each_form_registers_and_validates(http, topic, form):
    schema = {
        "proto": BASE,
        "file_descriptor": file_descriptor_form(),
        "event_store": event_store_form(),
    }[form]
    extra = {} if form == "event_store" else {"proto_message": "shop.Order"}
    resp = create(http, topic, schema, **extra)
    assert resp.status == 201, resp.data
    record = resp.json()
    assert (record["schema_type"], record["encoding"], record["proto_message"]) == (
        "PROTOBUF",
        "binary",
        "shop.Order",
    )
    stored = http.get(f"/v1/topics/{topic}/schemas/1")
    assert json.loads(stored.data) == ENGINE.compiled  # loads with no protoc
    assert stored.headers["narad-schema-type"] == "PROTOBUF"
    assert http.post(f"/v1/topics/{topic}/produce", order()).status == 202
    # The same schema in another form registers nothing.
    again = http.patch(f"/v1/topics/{topic}", {"schema": event_store_form()})
    assert again.status == 200 and again.json()["schema_version"] == 1


def test_the_topics_message(http, topic):
    first = create(http, topic, BASE)  # no proto_message: the first message
    assert first.json()["proto_message"] == "shop.Line"
    for extra, schema, wanted in [
        ({"proto_message": "shop.Nope"}, BASE, "shop.Nope"),
        ({"proto_message": "shop.Line"}, event_store_form(), "differs"),
        ({"proto_message": "not a name"}, BASE, "proto_message"),
    ]:
        resp = create(http, f"{topic}-x", schema, **extra)
        assert resp.status == 400, resp.data
        assert wanted in error(resp)
    # A PATCH naming no message keeps the topic's.
    made(http, f"{topic}-o")
    kept = BASE.replace("string note = 5;", "string note = 5;\n  int64 at = 6;")
    resp = http.patch(f"/v1/topics/{topic}-o", {"schema": kept})
    assert resp.status == 200, resp.data
    assert (resp.json()["schema_version"], resp.json()["proto_message"]) == (
        2,
        "shop.Order",
    )


@pytest.mark.parametrize(
    ("schema", "wanted"),
    [
        ('syntax = "proto3";\nmessage A {\n  strin x = 1;\n}\n', "3:"),
        ("not*base64:shop.Order", "base64"),
        ("QUJD:shop.Order", "FileDescriptorSet"),
        ({"message": "A"}, "JSON string"),
        ("", "empty"),
    ],
)
def test_bad_schemas_are_400_naming_the_problem(http, topic, schema, wanted):
    resp = create(http, topic, schema)
    assert resp.status == 400, resp.data
    assert wanted in error(resp)
    assert http.get(f"/v1/topics/{topic}").status == 404


def test_binary_payloads(http, topic):
    made(http, topic)
    produce = f"/v1/topics/{topic}/produce"
    payload = order(note="fragile")
    assert http.post(produce, payload).status == 202
    assert http.post(produce, b"").status == 202  # every field missing
    for bad in (b"\xff\xff\xff", payload + b"\x0a\x10ab"):
        resp = http.post(produce, bad)
        assert resp.status == 400, bad
        assert "decod" in error(resp) or "field" in error(resp)
    got = http.get(f"/v1/topics/{topic}/consume").json()
    if got.get("payload_encoding") == "base64":
        assert base64.b64decode(got["payload"]) == payload
    else:
        assert got["payload"].encode() == payload


def test_json_payloads(http, topic):
    made(http, topic, encoding="json")
    produce = f"/v1/topics/{topic}/produce"
    good = json_format.MessageToJson(ORDER_CLASS.FromString(order()))
    assert http.post(produce, good.encode()).status == 202
    assert http.post(produce, b'{"orderId": "a", "status": "PAID"}').status == 202
    for bad, wanted in [
        (b'{"orderId": "a", "colour": 1}', "colour"),
        (b'{"qty": "many"}', "qty"),
        (b"not json", ""),
    ]:
        resp = http.post(produce, bad)
        assert resp.status == 400, bad
        assert wanted in error(resp)
    batch = {"messages": [{"value": '{"orderId": "b"}'}, {"value": '{"qty": "x"}'}]}
    resp = http.post(f"/v1/topics/{topic}/produce/batch", batch)
    assert resp.status == 400 and "messages[1]" in error(resp)
    stats = http.get(f"/v1/topics/{topic}").json()["partition_stats"]
    assert sum(p["next_offset"] for p in stats) == 2


@pytest.mark.parametrize(
    ("name", "new", "encoding", "compatible"), CASES, ids=[c[0] for c in CASES]
)
def test_compatibility_rules(http, topic, name, new, encoding, compatible):
    made(http, topic, encoding=encoding)
    dry = http.post(f"/v1/topics/{topic}/schemas/compatibility", {"schema": new})
    assert dry.status == 200, dry.data
    assert dry.json()["compatible"] is compatible, dry.json()
    resp = http.patch(f"/v1/topics/{topic}", {"schema": new})
    if compatible:
        assert resp.status == 200, resp.data
        assert resp.json()["schema_version"] == 2
    else:
        assert resp.status == 400, resp.data
        assert "incompatible with version 1" in error(resp)


def test_dry_run_lists_every_violation(http, topic):
    made(http, topic, compatibility="FULL_TRANSITIVE")
    v2 = BASE.replace("string note = 5;", "string note = 5;\n  int64 at = 6;")
    assert http.patch(f"/v1/topics/{topic}", {"schema": v2}).status == 200
    bad = v2.replace("string order_id = 1;", "int64 order_id = 1;").replace(
        "string note = 5;\n", ""
    )
    resp = http.post(f"/v1/topics/{topic}/schemas/compatibility", {"schema": bad})
    report = resp.json()
    assert report["compatible"] is False
    found = {
        (v["pointer"], v["keyword"], v["against_version"]) for v in report["violations"]
    }
    assert ("/shop.Order/fields/1", "type_changed", 2) in found
    assert ("/shop.Order/fields/1", "type_changed", 1) in found
    assert any(k == "field_removed_without_reserve" for _, k, _ in found)
    assert resp.headers["narad-checked-versions"] == "2, 1"


def test_another_type_or_encoding_is_409(http, topic):
    made(http, topic)
    resp = http.patch(
        f"/v1/topics/{topic}", {"schema_type": "AVRO", "schema": "string"}
    )
    assert resp.status == 409
    assert "PROTOBUF" in error(resp) and "AVRO" in error(resp)
    resp = http.patch(f"/v1/topics/{topic}", {"encoding": "json", "schema": BASE})
    assert resp.status == 409
