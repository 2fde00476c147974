"""A node's workers time their garbage collections: ``/metrics`` exposes
``narad_gc_pause_seconds`` by generation, with counts once requests ran."""

from __future__ import annotations

import re

import pytest

from tests.integration.test_node import wait_until

pytestmark = pytest.mark.slow

COUNT = re.compile(r'^narad_gc_pause_seconds_count\{generation="(\d)"\} (\S+)$', re.M)


def pause_counts(http) -> dict[str, float]:
    response = http.get("/metrics")
    assert response.status == 200, response.data
    return {g: float(v) for g, v in COUNT.findall(response.data.decode())}


def test_metrics_expose_gc_pauses_by_generation_with_counts(http, topic):
    assert http.post("/v1/topics", {"name": topic, "partitions": 1}).status == 201
    for i in range(50):
        assert http.post(f"/v1/topics/{topic}/produce", f"m{i}").status == 202
    # Every generation's series is there from a worker's start; young
    # collections come on every tick of each worker (a tenth of a second)
    # and reach the shared files within a second of the tally's flush.
    assert set(pause_counts(http)) == {"0", "1", "2"}
    assert wait_until(lambda: pause_counts(http)["0"] > 0, timeout=15)
    # The middle generation's turn comes once a second.
    assert wait_until(lambda: pause_counts(http)["1"] > 0, timeout=15)
    text = http.get("/metrics").data.decode()
    assert "# TYPE narad_gc_pause_seconds histogram" in text
    buckets = re.findall(
        r'^narad_gc_pause_seconds_bucket\{generation="0",le="([^"]+)"\} (\S+)$',
        text,
        re.M,
    )
    assert buckets and buckets[-1][0] == "+Inf"
    assert float(buckets[-1][1]) > 0  # +Inf: every pause timed
