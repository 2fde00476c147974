"""AVRO topics over real HTTP on real storage (issue 52): registration,
compatibility by Avro's resolution rules, payloads in both encodings, fan-out
adoption, and a node killed with SIGKILL during registration."""

from __future__ import annotations

import base64
import copy
import io
import json
import os
import signal
import threading

import fastavro
import pytest

from tests.cases.avro_pairs import CASES
from tests.nodes import Node

ORDER = {
    "type": "record",
    "name": "Order",
    "namespace": "shop",
    "fields": [
        {"name": "order_id", "type": "string"},
        {"name": "amount", "type": "double"},
        {"name": "qty", "type": "int", "default": 1},
        {"name": "note", "type": ["null", "string"], "default": None},
    ],
}
GOOD = {"order_id": "o-1", "amount": 9.5, "qty": 2, "note": None}


def create(http, topic, schema, **extra):
    body = {"name": topic, "partitions": 1, "schema_type": "AVRO", "schema": schema}
    return http.post("/v1/topics", {**body, **extra})


def made(http, topic, schema=ORDER, **extra):
    resp = create(http, topic, schema, **extra)
    assert resp.status == 201, resp.data
    return resp.json()


def binary(datum, schema=ORDER) -> bytes:
    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(copy.deepcopy(schema)), datum)
    return out.getvalue()


def error(resp) -> str:
    return resp.json()["error"]


# -- registration --------------------------------------------------------------


def test_create_shows_the_type_and_stores_the_schema_compacted(http, topic):
    text = json.dumps(ORDER, indent=2)
    body = f'{{"name": "{topic}", "schema_type": "AVRO", "schema": {text}}}'
    resp = http.post("/v1/topics", body)
    assert resp.status == 201, resp.data
    record = resp.json()
    assert (record["schema_type"], record["encoding"], record["schema_version"]) == (
        "AVRO",
        "json",
        1,
    )
    assert "proto_message" not in record
    assert http.get(f"/v1/topics/{topic}").json()["schema_type"] == "AVRO"
    stored = http.get(f"/v1/topics/{topic}/schemas/1")
    assert stored.data == json.dumps(ORDER, separators=(",", ":")).encode()
    assert stored.headers["narad-schema-type"] == "AVRO"
    history = http.get(f"/v1/topics/{topic}/schemas").json()
    assert history["schema_type"] == "AVRO"
    assert [v["schema_type"] for v in history["versions"]] == ["AVRO"]


@pytest.mark.parametrize(
    ("schema", "wanted"),
    [
        (
            {**ORDER, "fields": [{"name": "n", "type": "int", "default": "x"}]},
            "/fields/0/default",
        ),
        ({"type": "record", "name": "R"}, "fields"),
        ({"type": "recrod", "name": "R", "fields": []}, "recrod"),
        ("NoSuchType", "NoSuchType"),
        ({"type": "fixed", "name": "F", "size": -1}, "size"),
        ({"type": "enum", "name": "E", "symbols": ["A", "A"]}, "A"),
    ],
)
def test_bad_avro_schemas_are_400_naming_the_problem(http, topic, schema, wanted):
    resp = create(http, topic, schema)
    assert resp.status == 400, resp.data
    assert wanted in error(resp)
    assert http.get(f"/v1/topics/{topic}").status == 404  # nothing written


def test_bad_settings_are_400_and_write_nothing(http, topic):
    for extra, wanted in [
        ({"schema_type": "XML"}, "schema_type"),
        ({"schema_type": "avro"}, "schema_type"),
        ({"encoding": "yaml"}, "encoding"),
        ({"schema_type": "JSON", "encoding": "binary"}, "encoding"),
    ]:
        resp = http.post(
            "/v1/topics", {"name": topic, "schema": {"type": "object"}, **extra}
        )
        assert resp.status == 400, (extra, resp.data)
        assert wanted in error(resp)
    assert http.get(f"/v1/topics/{topic}").status == 404


def test_same_canonical_form_registers_nothing_and_doc_registers(http, topic):
    made(http, topic)
    reordered = {k: ORDER[k] for k in ("fields", "namespace", "name", "type")}
    resp = http.patch(f"/v1/topics/{topic}", {"schema": reordered})
    assert resp.status == 200
    assert resp.json()["schema_version"] == 1
    # Full name spelt out instead of namespace + name: the same canonical form.
    spelt = {k: v for k, v in ORDER.items() if k != "namespace"}
    spelt["name"] = "shop.Order"
    assert (
        http.patch(f"/v1/topics/{topic}", {"schema": spelt}).json()["schema_version"]
        == 1
    )
    documented = {**ORDER, "doc": "an order"}
    resp = http.patch(f"/v1/topics/{topic}", {"schema": documented})
    assert resp.json()["schema_version"] == 2
    # A changed default is a change too (the same canonical form otherwise).
    fields = copy.deepcopy(documented["fields"])
    fields[2]["default"] = 5
    resp = http.patch(
        f"/v1/topics/{topic}", {"schema": {**documented, "fields": fields}}
    )
    assert resp.json()["schema_version"] == 3


def test_a_type_changing_patch_is_409_naming_both(http, topic):
    made(http, topic)
    resp = http.patch(
        f"/v1/topics/{topic}", {"schema_type": "JSON", "schema": {"type": "object"}}
    )
    assert resp.status == 409
    assert "AVRO" in error(resp) and "JSON" in error(resp)
    resp = http.patch(f"/v1/topics/{topic}", {"encoding": "binary", "schema": ORDER})
    assert resp.status == 409
    assert "binary" in error(resp)
    # Without a schema the settings cannot change (the same values are fine).
    assert http.patch(f"/v1/topics/{topic}", {"schema_type": "AVRO"}).status == 200
    assert http.patch(f"/v1/topics/{topic}", {"encoding": "binary"}).status == 400
    assert http.get(f"/v1/topics/{topic}/schemas").json()["current_version"] == 1


def test_a_topic_without_schema_takes_its_type_with_the_first_version(http, topic):
    assert http.post("/v1/topics", {"name": topic}).status == 201
    resp = http.patch(
        f"/v1/topics/{topic}",
        {"schema_type": "AVRO", "encoding": "binary", "schema": ORDER},
    )
    assert resp.status == 200, resp.data
    assert (resp.json()["schema_type"], resp.json()["encoding"]) == ("AVRO", "binary")
    assert http.post(f"/v1/topics/{topic}/produce", binary(GOOD)).status == 202


# -- compatibility ---------------------------------------------------------------


@pytest.mark.parametrize("mode", ["BACKWARD", "FORWARD"])
@pytest.mark.parametrize(
    ("name", "old", "new", "backward", "forward"), CASES, ids=[c[0] for c in CASES]
)
def test_resolution_rules(http, topic, mode, name, old, new, backward, forward):
    made(http, topic, old, compatibility=mode)
    allowed = backward if mode == "BACKWARD" else forward
    dry = http.post(f"/v1/topics/{topic}/schemas/compatibility", {"schema": new})
    assert dry.status == 200
    assert dry.json()["compatible"] is allowed, dry.json()
    resp = http.patch(f"/v1/topics/{topic}", {"schema": new})
    if allowed:
        assert resp.status == 200, resp.data
        assert resp.json()["schema_version"] == 2
    else:
        assert resp.status == 400, resp.data
        assert "incompatible with version 1" in error(resp)
        assert http.get(f"/v1/topics/{topic}").json()["schema_version"] == 1


def test_dry_run_lists_every_violation_with_place_and_version(http, topic):
    made(http, topic, compatibility="FULL_TRANSITIVE")
    v2 = copy.deepcopy(ORDER)
    v2["fields"].append({"name": "channel", "type": "string", "default": "web"})
    assert http.patch(f"/v1/topics/{topic}", {"schema": v2}).status == 200
    bad = copy.deepcopy(v2)
    bad["fields"][1]["type"] = "string"  # amount: double -> string, both ways
    bad["fields"].append({"name": "coupon", "type": "string"})  # no default
    resp = http.post(f"/v1/topics/{topic}/schemas/compatibility", {"schema": bad})
    report = resp.json()
    assert report["compatible"] is False
    assert resp.headers["narad-checked-versions"] == "2, 1"
    found = {
        ("/".join(v["pointer"].split("/")[:3]), v["against_version"])
        for v in report["violations"]
    }
    assert {
        ("/fields/1", 2),
        ("/fields/1", 1),
        ("/fields/5", 2),
        ("/fields/5", 1),
    } <= found
    for violation in report["violations"]:
        assert violation["keyword"] and violation["message"]
    forward = [v for v in report["violations"] if "forward" in v["message"]]
    assert forward  # FULL checks the second direction too


# -- payloads ----------------------------------------------------------------------


def test_json_payloads(http, topic):
    made(http, topic)
    produce = f"/v1/topics/{topic}/produce"
    assert http.post(produce, json.dumps(GOOD).encode()).status == 202
    # Fields with defaults may be left out.
    assert http.post(produce, b'{"order_id": "o-2", "amount": 1}').status == 202
    for payload, wanted in [
        (b'{"amount": 1.0}', 'missing required field "order_id"'),
        (
            b'{"order_id": "o", "amount": "9"}',
            'field "amount": expected double, got string',
        ),
        (b'{"order_id": "o", "amount": 1, "qty": 2147483648}', "qty"),
        (b'{"order_id": "o", "amount": 1, "extra": true}', "extra"),
        (b"[1]", "JSON object"),
        (b'{"order_id": "o", "amount": 1', "JSON"),
    ]:
        resp = http.post(produce, payload)
        assert resp.status == 400, payload
        assert wanted in error(resp), (payload, error(resp))
        assert len(resp.data) <= 2048 + 64
    stored = http.get(f"/v1/topics/{topic}/consume").json()
    assert stored["payload"] == GOOD  # the JSON as sent


def test_binary_payloads_are_stored_byte_for_byte(http, topic):
    made(http, topic, encoding="binary")
    produce = f"/v1/topics/{topic}/produce"
    datum = binary({**GOOD, "note": "fragile ✓"})
    assert http.post(produce, datum).status == 202
    for payload, wanted in [
        (datum + b"\x00", "left over"),
        (datum[:-3], ""),
        (b"", ""),
    ]:
        resp = http.post(produce, payload)
        assert resp.status == 400, payload
        assert wanted in error(resp)
    got = http.get(f"/v1/topics/{topic}/consume").json()
    if got.get("payload_encoding") == "base64":
        assert base64.b64decode(got["payload"]) == datum
    else:
        assert got["payload"].encode() == datum


def test_batches_are_all_or_nothing(http, topic):
    made(http, topic, encoding="binary")
    batch = f"/v1/topics/{topic}/produce/batch"
    good = [{"value_base64": base64.b64encode(binary(GOOD)).decode()}] * 3
    assert http.post(batch, {"messages": good}).status == 202
    bad = [*good, {"value_base64": base64.b64encode(b"\x02").decode()}]
    resp = http.post(batch, {"messages": bad})
    assert resp.status == 400
    assert "messages[3]" in error(resp)
    stats = http.get(f"/v1/topics/{topic}").json()["partition_stats"]
    assert sum(p["next_offset"] for p in stats) == 3


# -- fan-out -------------------------------------------------------------------------


def test_children_adopt_the_type_and_follow_the_parent(http, topic):
    made(http, topic, encoding="binary")
    child = f"{topic}-c"
    resp = http.post("/v1/topics", {"name": child, "parent": topic})
    assert resp.status == 201, resp.data
    assert (resp.json()["schema_type"], resp.json()["encoding"]) == ("AVRO", "binary")
    assert (
        http.post(
            "/v1/topics", {"name": f"{topic}-x", "parent": topic, "schema_type": "JSON"}
        ).status
        == 409
    )
    v2 = {**ORDER, "doc": "v2"}
    assert http.patch(f"/v1/topics/{topic}", {"schema": v2}).status == 200
    assert http.get(f"/v1/topics/{child}").json()["schema_version"] == 2
    # A JSON Schema topic with a history cannot go under it.
    other = f"{topic}-json"
    assert http.post("/v1/topics", {"name": other, "schema": {}}).status == 201
    resp = http.post(f"/v1/topics/{topic}/children", {"child": other})
    assert resp.status == 409
    assert "AVRO" in error(resp) and "JSON" in error(resp)
    # A topic without one adopts the history, type and encoding.
    loose = f"{topic}-loose"
    assert http.post("/v1/topics", {"name": loose}).status == 201
    assert http.post(f"/v1/topics/{topic}/children", {"child": loose}).status in (
        200,
        201,
    )
    adopted = http.get(f"/v1/topics/{loose}").json()
    assert (adopted["schema_type"], adopted["encoding"], adopted["schema_version"]) == (
        "AVRO",
        "binary",
        2,
    )
    assert http.post(f"/v1/topics/{topic}/produce", binary(GOOD)).status == 202


# -- kill -9 during registration ----------------------------------------------


def test_sigkill_during_registration_leaves_history_and_record_agreeing(
    storage_url, tmp_path, topic
):
    node = Node(tmp_path / "victim", storage_url=storage_url).start()
    http = node.client()
    made(http, topic, compatibility="NONE")
    stop = threading.Event()

    def register() -> None:
        client = node.client()
        n = 0
        while not stop.is_set():
            n += 1
            schema = copy.deepcopy(ORDER)
            schema["fields"].append({"name": f"f{n}", "type": "long", "default": n})
            try:
                client.patch(f"/v1/topics/{topic}", {"schema": schema})
            except Exception:
                return  # the node is gone

    threads = [threading.Thread(target=register) for _ in range(4)]
    for thread in threads:
        thread.start()
    deadline = 50
    while http.get(f"/v1/topics/{topic}").json()["schema_version"] < 5 and deadline:
        deadline -= 1
        threading.Event().wait(0.05)
    os.killpg(node.process.pid, signal.SIGKILL)
    node.process.wait()
    stop.set()
    for thread in threads:
        thread.join(10)
    again = Node(tmp_path / "after", storage_url=storage_url).start()
    try:
        http = again.client()
        record = http.get(f"/v1/topics/{topic}").json()
        history = http.get(f"/v1/topics/{topic}/schemas").json()
        versions = [v["version"] for v in history["versions"]]
        assert record["schema_version"] == history["current_version"] >= 5
        assert versions == list(range(1, record["schema_version"] + 1))
        assert history["total_bytes"] == sum(v["size"] for v in history["versions"])
        latest = json.loads(http.get(f"/v1/topics/{topic}/schemas/latest").data)
        assert len(latest["fields"]) == len(ORDER["fields"]) + 1
        assert (
            http.post(f"/v1/topics/{topic}/produce", json.dumps(GOOD).encode()).status
            == 202
        )
    finally:
        again.stop()
