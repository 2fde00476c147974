"""The per-node validation capacity bound, saturated over real HTTP."""

from __future__ import annotations

import json
import re
import threading

import pytest

from tests.nodes import Node

BUSY = "schema: validation capacity busy, retry"

# A 64-branch oneOf: high-cost, so every payload is validated under the bound.
# Each branch walks every property, so one validation holds the slot a while.
UNION = {
    "oneOf": [
        {
            "type": "object",
            "additionalProperties": {"type": "string", "pattern": "^x+$"},
            "required": [f"k{i}"],
        }
        for i in range(64)
    ]
}


def gauge(client) -> float:
    text = client.get("/metrics").data.decode()
    found = re.findall(
        r"^narad_schema_validations_in_flight(?:\{[^}]*\})? (\S+)$", text, re.M
    )
    return sum(float(v) for v in found)


@pytest.fixture
def bounded_node(storage_url, tmp_path):
    node = Node(
        tmp_path,
        storage_url=storage_url,
        workers=2,
        env={
            "NARAD_VALIDATION_CAPACITY_SLOTS": "1",
            "NARAD_VALIDATION_CAPACITY_WAIT_MS": "50",
        },
    ).start()
    yield node
    node.stop()


def test_saturated_bound_answers_503_and_writes_nothing(bounded_node, topic):
    http = bounded_node.client()
    assert (
        http.post(
            "/v1/topics", {"name": topic, "partitions": 1, "schema": UNION}
        ).status
        == 201
    )
    # Big enough to hold the single slot for a while; valid for exactly one branch.
    payload = json.dumps(
        {"k7": "x", **{f"f{i}": "x" * 64 for i in range(3000)}}
    ).encode()
    statuses: list[int] = []
    errors: list[str] = []
    lock = threading.Lock()

    def produce() -> None:
        client = bounded_node.client()
        for _ in range(6):
            resp = client.post(f"/v1/topics/{topic}/produce", payload)
            with lock:
                statuses.append(resp.status)
                if resp.status != 202:
                    errors.append(resp.error)
        client.close()

    threads = [threading.Thread(target=produce) for _ in range(24)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()

    assert 503 in statuses
    assert set(statuses) <= {202, 503}
    assert set(errors) == {BUSY}
    accepted = statuses.count(202)
    stats = http.get(f"/v1/topics/{topic}").json()["partition_stats"][0]
    assert stats["next_offset"] == accepted
    assert gauge(http) == 0
    assert "narad_schema_capacity_refused_total" in http.get("/metrics").data.decode()
    http.close()


def test_small_payload_on_ordinary_schema_is_not_bounded(bounded_node, topic):
    http = bounded_node.client()
    http.post(
        "/v1/topics", {"name": topic, "partitions": 1, "schema": {"type": "object"}}
    )
    statuses: list[int] = []

    def produce() -> None:
        client = bounded_node.client()
        statuses.extend(
            client.post(f"/v1/topics/{topic}/produce", b"{}").status for _ in range(20)
        )
        client.close()

    threads = [threading.Thread(target=produce) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert statuses == [202] * 160


def _schema(**document) -> dict:
    return {"type": "object", **document}


BOUNDED_CASES = [
    ("payload over 16 KiB", _schema(), {"pad": "x" * (16 * 1024)}, True),
    ("payload of 16 KiB or less", _schema(), {"pad": "x" * 100}, False),
    (
        "more than 1,024 required names",
        _schema(required=[f"r{i}" for i in range(1025)]),
        {f"r{i}": 0 for i in range(1025)},
        True,
    ),
    (
        "1,024 required names",
        _schema(properties={"a": {"required": [f"r{i}" for i in range(1024)]}}),
        {},
        False,
    ),
    (
        "more than 64 patternProperties keys",
        _schema(patternProperties={f"^p{i}$": {} for i in range(65)}),
        {},
        True,
    ),
    ("a 64-branch anyOf", {"anyOf": [{"type": "object"}] * 63 + [{}]}, {}, True),
    ("a 63-branch anyOf", {"anyOf": [{"type": "object"}] * 62 + [{}]}, {}, False),
]


@pytest.mark.parametrize(
    ("schema", "payload", "bounded"),
    [pytest.param(s, p, b, id=n) for n, s, p, b in BOUNDED_CASES],
)
def test_which_produces_wait_for_the_bound(
    bounded_node, topic, schema, payload, bounded
):
    from narad.schema.capacity import ValidationCapacity

    http = bounded_node.client()
    created = http.post(
        "/v1/topics", {"name": topic, "partitions": 1, "schema": schema}
    )
    assert created.status == 201, created.data
    body = json.dumps(payload).encode()
    # Hold the node's only slot from this process, as another worker would.
    holder = ValidationCapacity(bounded_node.tmp / "capacity", slots=1, deadline=1)
    with holder.slot():
        resp = http.post(f"/v1/topics/{topic}/produce", body)
    stats = http.get(f"/v1/topics/{topic}").json()["partition_stats"][0]
    if bounded:
        assert (resp.status, resp.error) == (503, BUSY)
        assert stats["next_offset"] == 0
        assert http.post(f"/v1/topics/{topic}/produce", body).status == 202
    else:
        assert resp.status == 202
        assert stats["next_offset"] == 1
    http.close()
