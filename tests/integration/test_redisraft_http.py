"""The README walkthrough on a node over a 3-node RedisRaft cluster, given
one follower's address (every write follows MOVED to the leader)."""

from __future__ import annotations

import base64

import pytest

pytestmark = pytest.mark.slow

ID_ONLY = {
    "type": "object",
    "required": ["id"],
    "properties": {"id": {"type": "integer"}},
}


def test_the_readme_walkthrough(raft_node, topic):
    http = raft_node.client()
    assert http.get("/readyz").status == 200
    created = http.post(
        "/v1/topics", {"name": topic, "partitions": 3, "schema": ID_ONLY}
    )
    assert created.status == 201, created.data
    produce = f"/v1/topics/{topic}/produce"
    resp = http.post(produce + "?key=order-1", b'{"id": 1, "amount": 5}')
    assert (resp.status, resp.data) == (202, b"")
    refused = http.post(produce, b'{"amount": 5}')
    assert refused.status == 400
    assert "missing property 'id'" in refused.error
    batch = {
        "messages": [{"value": '{"id": 2}'}, {"value": '{"id": 3}', "key": "order-3"}]
    }
    assert http.post(produce + "/batch", batch).status == 202

    taken = []
    for _ in range(3):
        resp = http.get(f"/v1/topics/{topic}/consume?wait=5s")
        assert resp.status == 200, resp.data
        message = resp.json()
        ack = f"/v1/topics/{topic}/ack?receipt_handle={message['receipt_handle']}"
        assert http.post(ack).status == 204
        taken.append(message)
    assert sorted(m["payload"]["id"] for m in taken) == [1, 2, 3]
    assert http.get(f"/v1/topics/{topic}/consume").status == 204

    first = taken[0]
    replay = http.get(
        f"/v1/topics/{topic}/consume?partition={first['partition']}"
        f"&offset={first['offset']}"
    )
    assert replay.json()["payload"] == first["payload"]
    record = http.get(f"/v1/topics/{topic}").json()
    assert sum(p["next_offset"] for p in record["partition_stats"]) == 3

    note = {"note": {"type": "string"}}
    wider = {**ID_ONLY, "properties": {**ID_ONLY["properties"], **note}}
    assert http.patch(f"/v1/topics/{topic}", {"schema": wider}).status == 200
    narrower = {**ID_ONLY, "required": ["id", "note"]}
    refused = http.patch(f"/v1/topics/{topic}", {"schema": narrower})
    assert refused.status == 400
    check = f"/v1/topics/{topic}/schemas/compatibility"
    resp = http.post(check, {"schema": narrower})
    headers = {k.lower(): v for k, v in resp.headers.items()}
    report = resp.json()
    assert (report["compatible"], headers["narad-checked-versions"]) == (False, "2")
    assert [v["message"] for v in report["violations"]] == [
        'required property "note" added',
        'property "note" removed',
    ]
    full = http.patch(f"/v1/topics/{topic}", {"compatibility": "FULL_TRANSITIVE"})
    assert full.json()["compatibility"] == "FULL_TRANSITIVE"
    history = http.get(f"/v1/topics/{topic}/schemas").json()
    assert [v["version"] for v in history["versions"]] == [1, 2]

    assert http.delete(f"/v1/topics/{topic}").status == 204
    assert http.get(f"/v1/topics/{topic}").status == 404
    http.close()


def test_binary_payloads_and_keys_round_trip(raft_node, topic):
    http = raft_node.client()
    assert http.post("/v1/topics", {"name": topic, "partitions": 1}).status == 201
    body = bytes(range(256))
    assert http.post(f"/v1/topics/{topic}/produce?key=k", body).status == 202
    message = http.get(f"/v1/topics/{topic}/consume?wait=5s").json()
    assert message["payload_encoding"] == "base64"
    assert base64.b64decode(message["payload"]) == body
    assert message["key"] == "k"
    http.close()
