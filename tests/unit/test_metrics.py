"""Metrics: the in-memory tally, the per-topic collector, and /metrics of an
in-process app (one process, no multiprocess directory; the integration
tests scrape a real node's workers)."""

from __future__ import annotations

import logging
import threading

import pytest
from prometheus_client import CollectorRegistry
from prometheus_client import Counter
from prometheus_client import Histogram
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from narad import metrics
from narad import testing
from narad.broker.stats import TopicMetrics
from narad.errors import StorageError
from narad.storage import Entry
from narad.storage import PayloadKind
from narad.testing.storage_contract import new_meta
from tests.contract.memory import MemoryStorage


def samples(text: bytes | str) -> dict[tuple[str, tuple], float]:
    """Every sample of an exposition, keyed by (name, sorted labels)."""
    if isinstance(text, bytes):
        text = text.decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if not s.name.endswith("_created")
    }


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


# -- the tally -----------------------------------------------------------------


def test_a_flushed_tally_shows_what_direct_calls_would():
    direct, tallied = CollectorRegistry(), CollectorRegistry()
    buckets = (0.001, 0.01, 0.1, 1)

    def pair(registry):
        counter = Counter("x_requests", "h", ["route"], registry=registry)
        histogram = Histogram(
            "x_seconds", "h", ["route"], buckets=buckets, registry=registry
        )
        return counter, histogram

    counter, histogram = pair(direct)
    t_counter, t_histogram = pair(tallied)
    tally = metrics.Tally(clock=Clock())
    observations = [0.0005, 0.001, 0.002, 0.05, 0.05, 0.5, 3.0, 1.0]
    for value in observations:
        for route in ("/a", "/b"):
            counter.labels(route).inc()
            histogram.labels(route).observe(value)
            tally.inc(t_counter, (route,))
            tally.observe(t_histogram, (route,), value)
    assert samples(generate_latest(tallied)) != samples(generate_latest(direct))
    tally.flush()
    assert samples(generate_latest(tallied)) == samples(generate_latest(direct))
    tally.flush()  # nothing new: nothing changes
    assert samples(generate_latest(tallied)) == samples(generate_latest(direct))


def test_the_tally_writes_out_once_a_second():
    registry = CollectorRegistry()
    counter = Counter("y_things", "h", ["kind"], registry=registry)
    clock = Clock()
    tally = metrics.Tally(clock=clock)
    tally.inc(counter, ("a",))
    clock.now += metrics.FLUSH_S / 2
    tally.inc(counter, ("a",))
    assert ("y_things_total", (("kind", "a"),)) not in samples(
        generate_latest(registry)
    )
    clock.now += metrics.FLUSH_S / 2
    tally.inc(counter, ("a",), 3)  # this one notices the second has passed
    assert samples(generate_latest(registry))[("y_things_total", (("kind", "a"),))] == 5


# -- the per-topic collector -----------------------------------------------------


def make_topic(storage: MemoryStorage, **settings):
    meta = new_meta(**settings)
    storage.create_topic(meta)
    return storage.get_topic(meta.name)


def put(storage, meta, count: int, now: int) -> None:
    entries = [Entry(0, b"", b"m", PayloadKind.TEXT) for _ in range(count)]
    storage.append(meta, entries, schema_version=0, now_ms=now)


def collected(collector: TopicMetrics) -> dict[tuple[str, tuple], float]:
    registry = CollectorRegistry()
    registry.register(collector)
    return samples(generate_latest(registry))


def test_topic_series_follow_the_topics_that_exist():
    storage = MemoryStorage()
    first, second = make_topic(storage, partitions=2), make_topic(storage)
    put(storage, first, 5, now=1_000)
    storage.reserve(first, [0], nonce="n" * 16, now_ms=2_000)
    collector = TopicMetrics(storage, max_topics=100, ttl_s=0, wait_s=5)
    seen = collected(collector)
    label = (("topic", first.name),)
    assert seen[("narad_topic_messages_produced_total", label)] == 5
    assert seen[("narad_topic_messages_consumed_total", label)] == 1
    assert seen[("narad_topic_backlog_messages", label)] == 4
    assert seen[("narad_topic_in_flight_messages", label)] == 1
    assert seen[("narad_topic_oldest_unacked_age_seconds", label)] > 1e6  # 1970
    assert seen[("narad_topic_partitions", label)] == 2
    assert seen[("narad_topic_visibility_timeout_seconds", label)] == 1.0
    assert seen[("narad_topic_metrics_topics", ())] == 2
    assert seen[("narad_topic_metrics_truncated", ())] == 0
    storage.delete_topic(storage.get_topic(first.name))
    seen = collected(collector)
    assert not [key for key in seen if key[1] == label]
    assert ("narad_topic_backlog_messages", (("topic", second.name),)) in seen


def test_topic_series_stop_at_max_topics_and_say_so():
    storage = MemoryStorage()
    names = sorted(make_topic(storage).name for _ in range(5))
    collector = TopicMetrics(storage, max_topics=3, ttl_s=0, wait_s=5)
    seen = collected(collector)
    shown = {k[1][0][1] for k in seen if k[0] == "narad_topic_backlog_messages"}
    assert shown == set(names[:3])
    assert seen[("narad_topic_metrics_truncated", ())] == 1
    assert seen[("narad_topic_metrics_topics", ())] == 3


def test_one_read_serves_scrapes_until_it_is_stale():
    storage = MemoryStorage()
    meta = make_topic(storage)
    clock = Clock()
    collector = TopicMetrics(storage, max_topics=10, ttl_s=10, wait_s=5, clock=clock)
    key = ("narad_topic_messages_produced_total", (("topic", meta.name),))
    assert collected(collector)[key] == 0
    put(storage, meta, 2, now=1)
    clock.now += 9
    assert collected(collector)[key] == 0  # cached
    clock.now += 1
    assert collected(collector)[key] == 2


class SlowStorage(MemoryStorage):
    """Its topic_stats waits for a go-ahead."""

    def __init__(self) -> None:
        super().__init__()
        self.go = threading.Event()

    def topic_stats(self, metas, *, now_ms):
        self.go.wait(10)
        return super().topic_stats(metas, now_ms=now_ms)


def test_a_scrape_waits_a_bounded_time_then_answers_with_the_last_read():
    storage = SlowStorage()
    meta = make_topic(storage)
    clock = Clock()
    collector = TopicMetrics(storage, max_topics=10, ttl_s=1, wait_s=0.05, clock=clock)
    seen = collected(collector)  # the first read is not back yet
    assert seen[("narad_topic_metrics_topics", ())] == 0
    assert seen[("narad_topic_metrics_age_seconds", ())] == float("inf")
    storage.go.set()
    collector.snapshot()
    for _ in range(100):
        if collected(collector)[("narad_topic_metrics_topics", ())] == 1:
            break
        threading.Event().wait(0.02)
    seen = collected(collector)
    assert seen[("narad_topic_backlog_messages", (("topic", meta.name),))] == 0
    assert seen[("narad_topic_metrics_age_seconds", ())] == 0


class FailingStorage(MemoryStorage):
    failing = False

    def list_topics(self, **kwargs):
        if self.failing:
            raise StorageError("no answer")
        return super().list_topics(**kwargs)


def test_a_failed_read_keeps_the_last_one_and_logs_once(caplog):
    storage = FailingStorage()
    meta = make_topic(storage)
    collector = TopicMetrics(storage, max_topics=10, ttl_s=0, wait_s=5)
    key = ("narad_topic_backlog_messages", (("topic", meta.name),))
    assert key in collected(collector)
    storage.failing = True
    with caplog.at_level(logging.INFO, logger="narad.broker.stats"):
        for _ in range(3):
            assert key in collected(collector)
        storage.failing = False
        collected(collector)
    lines = [r.getMessage() for r in caplog.records]
    assert lines == [
        "topic metrics: cannot read the storage: no answer",
        "topic metrics: the storage answers again",
    ]


def test_a_backend_without_topic_stats_shows_records_only():
    storage = MemoryStorage(topic_stats=False)
    meta = make_topic(storage)
    seen = collected(TopicMetrics(storage, max_topics=10, ttl_s=0, wait_s=5))
    assert seen[("narad_topic_schema_version", (("topic", meta.name),))] == 0
    assert not [k for k in seen if k[0] == "narad_topic_backlog_messages"]


# -- /metrics of the app -----------------------------------------------------------


@pytest.fixture
def app_client(tmp_path):
    config = testing.make_config(tmp_path, metrics__topic_stats_ttl_s=0)
    return testing.client(config)


def scrape(http) -> dict[tuple[str, tuple], float]:
    resp = http.simulate_get("/metrics")
    assert resp.status_code == 200
    return samples(resp.text)


def test_requests_are_counted_by_route_template_method_and_status(app_client, topic):
    before = scrape(app_client)
    app_client.simulate_post("/v1/topics", json={"name": topic})
    for _ in range(3):
        app_client.simulate_post(f"/v1/topics/{topic}/produce", body=b"x")
    app_client.simulate_get("/v1/topics/nope/consume")
    app_client.simulate_get("/no/such/route")
    after = scrape(app_client)

    def delta(name, **labels):
        key = (name, tuple(sorted(labels.items())))
        return after.get(key, 0) - before.get(key, 0)

    route = "/v1/topics/{name}/produce"
    assert (
        delta("narad_http_requests_total", route=route, method="POST", status="202")
        == 3
    )
    assert (
        delta(
            "narad_http_requests_total",
            route="/v1/topics/{name}/consume",
            method="GET",
            status="404",
        )
        == 1
    )
    assert (
        delta(
            "narad_http_requests_total",
            route=metrics.UNMATCHED,
            method="GET",
            status="404",
        )
        == 1
    )
    assert delta("narad_http_request_duration_seconds_count", route=route) == 3
    assert (
        delta("narad_http_request_duration_seconds_bucket", route=route, le="+Inf") == 3
    )
    assert not [k for k in after if topic in str(k) and k[0].startswith("narad_http")]


def test_requests_go_uncounted_when_metrics_requests_is_off(tmp_path, topic):
    config = testing.make_config(tmp_path, metrics__requests=False)
    http = testing.client(config)
    before = scrape(http)
    http.simulate_post("/v1/topics", json={"name": topic})
    http.simulate_post(f"/v1/topics/{topic}/produce", body=b"x")
    after = scrape(http)
    route = "/v1/topics/{name}/produce"
    key = ("narad_http_request_duration_seconds_count", (("route", route),))
    assert after.get(key, 0) == before.get(key, 0)
    # The rest is still counted.
    key = ("narad_messages_produced_total", ())
    assert after[key] - before.get(key, 0) == 1


def test_validations_are_counted_by_outcome(app_client, topic):
    schema = {"type": "object", "required": ["id"]}
    app_client.simulate_post("/v1/topics", json={"name": topic, "schema": schema})
    before = scrape(app_client)
    app_client.simulate_post(f"/v1/topics/{topic}/produce", body=b'{"id": 1}')
    app_client.simulate_post(f"/v1/topics/{topic}/produce", body=b"{}")
    after = scrape(app_client)
    for outcome, count in (("valid", 1), ("invalid", 1), ("busy", 0)):
        key = ("narad_schema_validations_total", (("outcome", outcome),))
        assert after[key] - before.get(key, 0) == count


def test_per_topic_series_appear_with_a_topic_and_go_with_it(app_client, topic):
    app_client.simulate_post("/v1/topics", json={"name": topic, "partitions": 1})
    app_client.simulate_post(f"/v1/topics/{topic}/produce", body=b"a")
    app_client.simulate_post(f"/v1/topics/{topic}/produce", body=b"b")
    handle = app_client.simulate_get(f"/v1/topics/{topic}/consume").json[
        "receipt_handle"
    ]
    app_client.simulate_post(
        f"/v1/topics/{topic}/ack", params={"receipt_handle": handle}
    )
    seen = scrape(app_client)
    label = (("topic", topic),)
    assert seen[("narad_topic_messages_produced_total", label)] == 2
    assert seen[("narad_topic_messages_consumed_total", label)] == 1
    assert seen[("narad_topic_messages_acked_total", label)] == 1
    assert seen[("narad_topic_backlog_messages", label)] == 1
    assert seen[("narad_topic_in_flight_messages", label)] == 0
    assert seen[("narad_topic_schema_version", label)] == 0
    assert 0 <= seen[("narad_topic_oldest_unacked_age_seconds", label)] < 3600
    app_client.simulate_delete(f"/v1/topics/{topic}")
    assert not [k for k in scrape(app_client) if k[1] == label]
