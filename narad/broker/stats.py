"""Per-topic metrics, read from the storage when ``/metrics`` is scraped.

The questions an operator asks of a queue (how far behind are the consumers,
how many messages are out, how old is the oldest one nobody acked) need the
storage's positions, so they are never counted per request: a scrape reads
them, in bounded batches, and keeps the result for ``metrics.topic_stats_ttl_s``
so that several scrapers (or dashboards) cost one read.

Bounded work per scrape:

- at most ``metrics.max_topics`` topics (the first in name order); past it
  ``narad_topic_metrics_truncated`` is 1 and the rest have no series;
- three round trips per 1,000 topics: their names, their records, their
  positions;
- at most ``metrics.topic_stats_wait_ms`` of the scrape's time: the read runs
  beside the scrape, which answers with the previous snapshot when the read
  takes longer (``narad_topic_metrics_age_seconds`` says how old it is) while
  the read goes on.

Series exist only for topics that exist at the last read: a deleted topic's
series are gone from the next read on, so cardinality follows the topics.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from collections.abc import Iterator
from dataclasses import dataclass

from prometheus_client.core import CounterMetricFamily
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.metrics_core import Metric

from narad.broker import now_ms
from narad.errors import StorageError
from narad.storage import Storage
from narad.storage import TopicMeta
from narad.storage import TopicStats

log = logging.getLogger(__name__)

#: Topic names listed per round trip.
PAGE = 1000
INF = float("inf")


@dataclass(frozen=True)
class Snapshot:
    """Topics as one read found them."""

    topics: list[tuple[TopicMeta, TopicStats | None]]
    truncated: bool
    read_at: float  # monotonic
    read_seconds: float


_EMPTY = Snapshot([], False, -INF, 0.0)


class TopicMetrics:
    """A prometheus-client collector of the ``narad_topic_*`` series.

    Args:
        storage: The worker's storage.
        max_topics: Topics reported at most.
        ttl_s: How long one read serves scrapes.
        wait_s: How long a scrape waits for a read before answering with
            the previous one.
        clock: Monotonic seconds.
    """

    def __init__(
        self,
        storage: Storage,
        *,
        max_topics: int,
        ttl_s: float,
        wait_s: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.storage = storage
        self.max_topics = max_topics
        self.ttl_s = ttl_s
        self.wait_s = wait_s
        self._clock = clock
        self._snapshot = _EMPTY
        self._reading: threading.Thread | None = None
        self._lock = threading.Lock()
        self._failing = False

    # -- reading -------------------------------------------------------------

    def snapshot(self) -> Snapshot:
        """The latest read, reading again first if it is older than the TTL
        (waiting for that at most ``wait_s``)."""
        with self._lock:
            stale = self._clock() - self._snapshot.read_at >= self.ttl_s
            if stale and self._reading is None:
                self._reading = threading.Thread(
                    target=self._read, name="narad-topic-metrics", daemon=True
                )
                self._reading.start()
            reading = self._reading
        if reading is not None:
            reading.join(self.wait_s)
        return self._snapshot

    def _read(self) -> None:
        started = self._clock()
        try:
            topics, truncated = self.read()
        except StorageError as exc:
            if not self._failing:
                log.warning("topic metrics: cannot read the storage: %s", exc)
                self._failing = True
        else:
            if self._failing:
                log.info("topic metrics: the storage answers again")
                self._failing = False
            done = self._clock()
            self._snapshot = Snapshot(topics, truncated, done, done - started)
        finally:
            with self._lock:
                self._reading = None

    def read(self) -> tuple[list[tuple[TopicMeta, TopicStats | None]], bool]:
        """Up to ``max_topics`` topics with their stats, and whether there
        were more."""
        found: list[tuple[TopicMeta, TopicStats | None]] = []
        after, more = "", True
        with_stats = self.storage.capabilities.topic_stats
        while more and len(found) < self.max_topics:
            page = self.storage.list_topics(
                after=after, limit=min(PAGE, self.max_topics - len(found))
            )
            metas = [m for m in self.storage.get_topics(page.names) if m is not None]
            if with_stats:
                stats = self.storage.topic_stats(metas, now_ms=now_ms())
                found += zip(metas, stats, strict=True)
            else:
                found += [(meta, None) for meta in metas]
            after, more = page.next_token or "", page.next_token is not None
        return found, more

    # -- the collector -------------------------------------------------------

    def collect(self) -> Iterator[Metric]:
        """The series of the latest read (prometheus-client's collector call)."""
        snapshot = self.snapshot()
        now = now_ms()
        families = {
            "schema": GaugeMetricFamily(
                "narad_topic_schema_version",
                "The topic's current schema version (0: no schema).",
                labels=["topic"],
            ),
            "partitions": GaugeMetricFamily(
                "narad_topic_partitions", "The topic's partitions.", labels=["topic"]
            ),
            "visibility": GaugeMetricFamily(
                "narad_topic_visibility_timeout_seconds",
                "How long a consume leases a message before it is delivered again.",
                labels=["topic"],
            ),
        }
        counted = {
            "produced": CounterMetricFamily(
                "narad_topic_messages_produced",
                "Messages appended to the topic (fan-out copies included).",
                labels=["topic"],
            ),
            "delivered": CounterMetricFamily(
                "narad_topic_messages_consumed",
                "Messages delivered at least once (redeliveries not counted "
                "again; a message retention dropped undelivered counts too).",
                labels=["topic"],
            ),
            "acked": CounterMetricFamily(
                "narad_topic_messages_acked",
                "Messages acked (a message retention dropped unacked counts too).",
                labels=["topic"],
            ),
            "backlog": GaugeMetricFamily(
                "narad_topic_backlog_messages",
                "Retained messages not delivered yet (in a delay child, due or not).",
                labels=["topic"],
            ),
            "in_flight": GaugeMetricFamily(
                "narad_topic_in_flight_messages",
                "Messages delivered and not acked (lease held, lapsed or given back).",
                labels=["topic"],
            ),
            "age": GaugeMetricFamily(
                "narad_topic_oldest_unacked_age_seconds",
                "Age of the oldest retained message not acked, from its "
                "timestamp (0 when every message is acked or it is not due).",
                labels=["topic"],
            ),
        }
        for meta, stats in snapshot.topics:
            labels = [meta.name]
            families["schema"].add_metric(labels, meta.schema_version)
            families["partitions"].add_metric(labels, meta.partitions)
            families["visibility"].add_metric(labels, meta.visibility_timeout_ms / 1000)
            if stats is None:
                continue
            counted["produced"].add_metric(labels, stats.produced)
            counted["delivered"].add_metric(labels, stats.delivered)
            counted["acked"].add_metric(labels, stats.acked)
            counted["backlog"].add_metric(labels, stats.backlog)
            counted["in_flight"].add_metric(labels, stats.in_flight)
            oldest = stats.oldest_unacked_ms
            age = 0.0 if oldest is None else max(0, now - oldest) / 1000
            counted["age"].add_metric(labels, age)
        yield from families.values()
        if self.storage.capabilities.topic_stats:
            yield from counted.values()
        yield GaugeMetricFamily(
            "narad_topic_metrics_topics",
            "Topics the per-topic series cover (at most metrics.max_topics).",
            value=len(snapshot.topics),
        )
        yield GaugeMetricFamily(
            "narad_topic_metrics_truncated",
            "1 when more topics exist than metrics.max_topics: those past it "
            "(in name order) have no per-topic series.",
            value=int(snapshot.truncated),
        )
        yield GaugeMetricFamily(
            "narad_topic_metrics_age_seconds",
            "How old the storage read behind the per-topic series is (+Inf "
            "before the worker's first read succeeds).",
            value=self._clock() - snapshot.read_at if snapshot is not _EMPTY else INF,
        )
        yield GaugeMetricFamily(
            "narad_topic_metrics_read_seconds",
            "How long that read took.",
            value=snapshot.read_seconds,
        )
