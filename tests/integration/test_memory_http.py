"""Worker caches over real HTTP: what one worker deletes, every worker drops.

A real node (gunicorn, 2 workers) on a real Valkey: a topic's validator is
compiled by both workers, the topic is deleted through one connection, and
``narad_cache_entries`` (one series per worker) shows each worker let go of
it, the one that only ever produced to it included.
"""

from __future__ import annotations

import re
import time

import pytest

pytestmark = pytest.mark.slow

_SAMPLE = re.compile(
    r'^narad_cache_entries\{cache="([^"]+)",pid="(\d+)"\} ([0-9.e+]+)$', re.M
)
SCHEMA = {
    "type": "object",
    "properties": {f"p{j}": {"type": "string", "pattern": f"^x{j}$"} for j in range(3)},
}


def entries(node, cache: str) -> dict[int, int]:
    """Each worker's entries in ``cache``: every scrape is on a new
    connection, so both workers answer (and publish) in turn."""
    found: dict[int, int] = {}
    for _ in range(20):
        client = node.client()
        try:
            text = client.get("/metrics").data.decode()
        finally:
            client.close()
        for name, pid, value in _SAMPLE.findall(text):
            if name == cache:
                found[int(pid)] = int(float(value))
    return found


def until(condition, what: str, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.2)


def test_a_deleted_topics_validator_leaves_every_worker(node, topic):
    http = node.client()
    assert http.post("/v1/topics", {"name": topic, "schema": SCHEMA}).status == 201
    before = entries(node, "validators")
    assert len(before) == 2, before

    def produce_on_a_new_connection() -> None:
        client = node.client()
        try:
            resp = client.post(f"/v1/topics/{topic}/produce", b'{"p0": "x0"}')
            assert resp.status == 202, resp.data
        finally:
            client.close()

    def both_compiled() -> bool:
        produce_on_a_new_connection()
        now = entries(node, "validators")
        return all(now.get(pid, 0) == count + 1 for pid, count in before.items())

    until(both_compiled, "both workers compile the topic's validator")
    assert http.delete(f"/v1/topics/{topic}").status == 204
    until(
        lambda: entries(node, "validators") == before,
        "every worker drops the deleted topic's validator",
    )
    http.close()
