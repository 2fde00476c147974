"""The ``framing`` topic setting over HTTP (in-process, fakeredis)."""

from __future__ import annotations

import json
import re
import time

import pytest

AVRO = {"type": "record", "name": "R", "fields": [{"name": "a", "type": "long"}]}
PROTO = 'syntax = "proto3"; message M { int64 a = 1; }'


def create(client, **body):
    return client.simulate_post("/v1/topics", json=body)


def test_framing_defaults_to_none_and_shows_in_the_record(client):
    resp = create(client, name="plain")
    assert resp.status_code == 201, resp.text
    assert resp.json["framing"] == "none"
    assert client.simulate_get("/v1/topics/plain").json["framing"] == "none"
    listed = client.simulate_get("/v1/topics").json["topics"]
    assert [t["framing"] for t in listed] == ["none"]


def test_created_framed_json_topic(client):
    resp = create(client, name="j", framing="confluent", schema={"type": "object"})
    assert resp.status_code == 201, resp.text
    assert (resp.json["framing"], resp.json["encoding"]) == ("confluent", "json")
    assert client.simulate_get("/v1/topics/j").json["framing"] == "confluent"


@pytest.mark.parametrize(
    ("schema_type", "schema"), [("AVRO", AVRO), ("PROTOBUF", PROTO)]
)
def test_framed_avro_and_protobuf_take_binary_by_default(client, schema_type, schema):
    resp = create(
        client, name="t", framing="confluent", schema_type=schema_type, schema=schema
    )
    assert resp.status_code == 201, resp.text
    assert resp.json["encoding"] == "binary"
    assert resp.json["framing"] == "confluent"


def test_framed_avro_topic_without_a_schema_takes_binary(client):
    resp = create(client, name="t", framing="confluent", schema_type="AVRO")
    assert resp.status_code == 201, resp.text
    assert (resp.json["schema_type"], resp.json["encoding"]) == ("AVRO", "binary")
    assert resp.json["schema_version"] is None


@pytest.mark.parametrize("schema_type", ["AVRO", "PROTOBUF"])
def test_framed_topic_in_json_encoding_is_refused(client, schema_type):
    resp = create(
        client,
        name="t",
        framing="confluent",
        schema_type=schema_type,
        encoding="json",
    )
    assert resp.status_code == 400
    assert "framing confluent takes" in resp.json["error"]
    assert "give encoding binary" in resp.json["error"]
    assert client.simulate_get("/v1/topics/t").status_code == 404


@pytest.mark.parametrize(
    "value", ["Confluent", "", "framed", 0, None, True, ["confluent"], {"a": 1}]
)
def test_other_framing_values_are_refused(client, value):
    resp = create(client, name="t", framing=value)
    assert resp.status_code == 400
    assert "framing must be one of none, confluent" in resp.json["error"]
    assert client.simulate_get("/v1/topics/t").status_code == 404
    create(client, name="u")
    patched = client.simulate_patch("/v1/topics/u", json={"framing": value})
    assert patched.status_code == 400
    assert "framing must be one of none, confluent" in patched.json["error"]
    assert client.simulate_get("/v1/topics/u").json["framing"] == "none"


def test_patch_frames_and_unframes_a_topic(client):
    create(client, name="t", schema={"type": "object"})
    resp = client.simulate_patch("/v1/topics/t", json={"framing": "confluent"})
    assert resp.status_code == 200, resp.text
    assert resp.json["framing"] == "confluent"
    assert resp.json["schema_version"] == 1  # a setting, no new version
    assert client.simulate_get("/v1/topics/t").json["framing"] == "confluent"
    back = client.simulate_patch("/v1/topics/t", json={"framing": "none"})
    assert back.json["framing"] == "none"


def test_patch_with_a_first_schema_frames_in_binary(client):
    create(client, name="t")
    resp = client.simulate_patch(
        "/v1/topics/t",
        json={"framing": "confluent", "schema_type": "AVRO", "schema": AVRO},
    )
    assert resp.status_code == 200, resp.text
    record = resp.json
    assert (record["framing"], record["encoding"]) == ("confluent", "binary")
    assert record["schema_version"] == 1


def test_patch_cannot_frame_a_json_encoded_avro_history(client):
    create(client, name="t", schema_type="AVRO", schema=AVRO)  # json encoding
    resp = client.simulate_patch("/v1/topics/t", json={"framing": "confluent"})
    assert resp.status_code == 400
    assert "topic's encoding would be json" in resp.json["error"]
    assert client.simulate_get("/v1/topics/t").json["framing"] == "none"


def test_framing_alone_of_a_patch_with_an_unchanged_schema_is_written(client):
    create(client, name="t", schema={"type": "object"})
    resp = client.simulate_patch(
        "/v1/topics/t",
        body=json.dumps({"schema": {"type": "object"}, "framing": "confluent"}),
    )
    assert resp.status_code == 200, resp.text
    assert resp.json["schema_version"] == 1
    assert resp.json["framing"] == "confluent"


def test_a_child_has_its_own_framing(client):
    create(client, name="p", schema={"type": "object"}, framing="confluent")
    resp = create(client, name="c", parent="p")
    assert resp.status_code == 201, resp.text
    assert resp.json["framing"] == "none"
    assert client.simulate_get("/v1/topics/p").json["framing"] == "confluent"


def test_openapi_names_framing_where_topics_take_and_show_it():
    from narad.http import openapi

    schemas = openapi.document()["components"]["schemas"]
    for name in ("TopicCreate", "TopicAlter", "Topic", "TopicDescription"):
        assert schemas[name]["properties"]["framing"]["enum"] == [
            "none",
            "confluent",
        ], name
    assert "framing" in schemas["Topic"]["required"]


def _cache_entries(client, cache: str) -> int:
    text = client.simulate_get("/metrics").text
    match = re.search(rf'^narad_cache_entries\{{cache="{cache}"\}} (\S+)$', text, re.M)
    assert match, f"no narad_cache_entries for {cache}"
    return int(float(match[1]))


def test_framed_produce_in_process_fills_the_framed_caches(client):
    create(client, name="t", framing="confluent", schema={"type": "object"})
    version = client.simulate_get("/registry/subjects/t-value/versions/1")
    assert version.status_code == 200, version.text
    schema_id = version.json["id"]
    framed = b"\x00" + schema_id.to_bytes(4, "big") + b'{"a": 1}'
    # The create's own notification, or the listener going live, may land
    # after a produce and drop what it cached: produce until both are held.
    deadline = time.monotonic() + 10
    while True:
        resp = client.simulate_post("/v1/topics/t/produce", body=framed)
        assert resp.status_code == 202, resp.text
        held = (
            _cache_entries(client, "framed_ids"),
            _cache_entries(client, "framed_validators"),
        )
        if held == (1, 1):
            break
        assert time.monotonic() < deadline, held
        time.sleep(0.05)
    assert client.simulate_delete("/v1/topics/t").status_code == 204
    assert _cache_entries(client, "framed_ids") == 0
    assert _cache_entries(client, "framed_validators") == 0
    create(client, name="t", framing="confluent", schema={"type": "object"})
    refused = client.simulate_post("/v1/topics/t/produce", body=b'{"a": 1}')
    assert refused.status_code == 400
    assert "payload is not framed" in refused.json["error"]


def test_registering_a_first_avro_schema_frames_the_topic_in_binary(client):
    # A framed topic of the default type takes its first schema through the
    # registry (as Confluent's serializers register): binary, as they write.
    create(client, name="t", framing="confluent")
    resp = client.simulate_post(
        "/registry/subjects/t-value/versions",
        json={"schema": json.dumps(AVRO), "schemaType": "AVRO"},
    )
    assert resp.status_code == 200, resp.text
    record = client.simulate_get("/v1/topics/t").json
    assert (record["schema_type"], record["encoding"]) == ("AVRO", "binary")
    assert (record["framing"], record["schema_version"]) == ("confluent", 1)


def test_a_framed_topic_without_a_schema_refuses_every_message(client):
    create(client, name="t", framing="confluent")
    create(client, name="u", schema={"type": "object"})
    schema_id = client.simulate_get("/registry/subjects/u-value/versions/1").json["id"]
    for body in (b'{"a": 1}', b"\x00" + schema_id.to_bytes(4, "big") + b"{}"):
        resp = client.simulate_post("/v1/topics/t/produce", body=body)
        assert resp.status_code == 400, body
    assert "not a version of t's history" in resp.json["error"]
    stats = client.simulate_get("/v1/topics/t").json["partition_stats"]
    assert sum(s["next_offset"] for s in stats) == 0
