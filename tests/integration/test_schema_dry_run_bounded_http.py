"""The dry-run compatibility check over real HTTP is bounded (issue 50,
item 9).

``POST /v1/topics/{t}/schemas/compatibility`` reports every violation. On
the issue's 0.5 KB recursive pair it took 5.7 s (47 s on a 489-byte one)
while a PATCH refused the same change in 10 ms; its work is now polynomial
in the schemas, so the pair and families of such pairs grown to several
KiB answer at once (timed by ``bench/compat.py``, not here). A check of
recursive schemas runs under the node's validation capacity bound: with no
free slot it answers 503, as a costly validation does, and nothing is
decided.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from narad.schema.capacity import ValidationCapacity
from tests.nodes import Node

BUSY = "schema: validation capacity busy, retry"

ISSUE_OLD: dict[str, Any] = json.loads(
    '{"allOf":[{"$ref":"#/$defs/c"},{"$ref":"#/$defs/a"}],"$defs":{"a":{"items":'
    '{"$ref":"#/$defs/b"},"additionalProperties":{"$ref":"#/$defs/b"}},"b":{"prop'
    'erties":{"q":{"$ref":"#/$defs/a"}},"additionalProperties":{"$ref":"#/$defs/c'
    '"},"items":{"$ref":"#/$defs/a"}},"c":{"additionalProperties":{"$ref":"#/$def'
    's/a"},"items":{"$ref":"#/$defs/c"},"properties":{"w":{"$ref":"#/$defs/a"}}}}}'
)


def ref(i: int) -> dict[str, str]:
    return {"$ref": f"#/$defs/d{i}"}


def ring(n: int) -> dict[str, Any]:
    """The issue's shape grown to ``n`` mutually recursive definitions."""
    defs = {
        f"d{i}": {
            "items": ref((i + 1) % n),
            "additionalProperties": ref((i + 2) % n),
            "properties": {"q": ref((i + 1) % n)},
        }
        for i in range(n)
    }
    return {"allOf": [ref(0), ref(1)], "$defs": defs}


def subsets(n: int) -> dict[str, Any]:
    """Recursive references that reach one definition with 2**n sets of
    others applying to the same value (a subset construction)."""
    defs: dict[str, Any] = {
        "d0": {"properties": {"a": {"allOf": [ref(0), ref(1)]}, "b": ref(0)}}
    }
    for i in range(1, n):
        defs[f"d{i}"] = {"properties": {"a": ref(i + 1), "b": ref(i + 1)}}
    defs[f"d{n}"] = {"properties": {"z": {"type": "integer"}}}
    return {"$ref": "#/$defs/d0", "$defs": defs}


def narrowed(old: dict[str, Any], name: str, **change: Any) -> dict[str, Any]:
    new = json.loads(json.dumps(old))
    new["$defs"][name].update(change)
    return new


def make(http, topic: str, schema: Any) -> None:
    resp = http.post("/v1/topics", {"name": topic, "partitions": 1, "schema": schema})
    assert resp.status == 201, resp.data


def dry_run(http, topic: str, schema: Any):
    return http.post(f"/v1/topics/{topic}/schemas/compatibility", {"schema": schema})


def test_the_issue_pair_reports_every_violation(http, topic):
    make(http, topic, ISSUE_OLD)
    new = narrowed(ISSUE_OLD, "b", type="array")
    resp = dry_run(http, topic, new)
    assert resp.status == 200, resp.data
    assert resp.json() == {
        "compatible": False,
        "mode": "BACKWARD",
        "violations": [
            {
                "pointer": "",
                "keyword": "allOf",
                "message": f"allOf branch {i} not implied by any previous branch",
                "against_version": 1,
            }
            for i in (0, 1)
        ],
    }
    # The PATCH names the report's first violation, and stores nothing.
    patch = http.patch(f"/v1/topics/{topic}", {"schema": new})
    assert patch.status == 400
    assert "allOf branch 0 not implied by any previous branch" in patch.error
    assert http.get(f"/v1/topics/{topic}").json()["schema_version"] == 1


@pytest.mark.parametrize(
    ("old", "new", "refused"),
    [
        *(
            (ring(n), narrowed(ring(n), f"d{n // 2}", type="array"), True)
            for n in (6, 12, 24, 48)
        ),
        *(
            (
                subsets(n),
                narrowed(subsets(n), f"d{n}", properties={"z": {"type": "string"}}),
                True,
            )
            for n in (8, 16, 24)
        ),
        *(
            (
                subsets(n),
                narrowed(subsets(n), f"d{n}", properties={"z": {"type": "number"}}),
                False,
            )
            for n in (8, 16, 24)
        ),
    ],
    ids=[
        *(f"ring of {n}, narrowed" for n in (6, 12, 24, 48)),
        *(f"{n} levels of subsets, narrowed" for n in (8, 16, 24)),
        *(f"{n} levels of subsets, widened" for n in (8, 16, 24)),
    ],
)
def test_growing_recursive_pairs_answer(http, topic, old, new, refused):
    make(http, topic, old)
    resp = dry_run(http, topic, new)
    assert resp.status == 200, resp.data
    report = resp.json()
    assert report["compatible"] is not refused
    patch = http.patch(f"/v1/topics/{topic}", {"schema": new})
    if not refused:
        assert patch.status == 200, patch.data
        return
    assert patch.status == 400
    first = report["violations"][0]
    assert first["message"] in patch.error
    # Each violation once.
    seen = [(v["pointer"], v["message"]) for v in report["violations"]]
    assert len(seen) == len(set(seen))


@pytest.fixture
def one_slot_node(storage_url, tmp_path):
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


def test_a_recursive_check_waits_for_the_capacity_bound(one_slot_node, topic, tmp_path):
    http = one_slot_node.client()
    make(http, topic, ISSUE_OLD)
    plain = f"{topic}-plain"
    make(http, plain, {"type": "object", "properties": {"n": {"type": "integer"}}})
    new = narrowed(ISSUE_OLD, "b", type="array")
    capacity = ValidationCapacity(tmp_path / "capacity", slots=1)
    with capacity.slot():  # the node's one slot, held by another validation
        busy = dry_run(http, topic, new)
        assert (busy.status, busy.error) == (503, BUSY)
        busy = http.patch(f"/v1/topics/{topic}", {"schema": new})
        assert (busy.status, busy.error) == (503, BUSY)
        # A check of schemas without references needs no slot.
        widened = {"type": "object", "properties": {"n": {"type": "number"}}}
        assert dry_run(http, plain, widened).status == 200
    assert http.get(f"/v1/topics/{topic}").json()["schema_version"] == 1
    resp = dry_run(http, topic, new)
    assert (resp.status, resp.json()["compatible"]) == (200, False)
