"""Prometheus metrics, all named ``narad_*``.

Under gunicorn every worker is a process, so the CLI sets
``PROMETHEUS_MULTIPROC_DIR`` before this module is imported and ``/metrics``
aggregates the workers' files. Gauges state how they combine across workers.

Counted on every request (HTTP requests, storage scripts, validations,
failed credentials), a
metric goes through :data:`TALLY`: counted in the worker's memory (a dict
update) and written to the shared files at most every :data:`FLUSH_S`
seconds, since one write to a multiprocess file costs microseconds. Values
that need storage reads (per-topic backlog, age of the oldest unacked
message...) are not counted here at all: :mod:`narad.broker.stats` reads
them when ``/metrics`` is scraped.
"""

from __future__ import annotations

import bisect
import os
import threading
import time
from collections.abc import Iterable

from prometheus_client import CONTENT_TYPE_LATEST
from prometheus_client import CollectorRegistry
from prometheus_client import Counter
from prometheus_client import Gauge
from prometheus_client import Histogram
from prometheus_client import generate_latest
from prometheus_client import multiprocess
from prometheus_client.registry import Collector

SCHEMA_VALIDATIONS_IN_FLIGHT = Gauge(
    "narad_schema_validations_in_flight",
    "Validations running under the per-node validation capacity bound.",
    multiprocess_mode="livesum",
)
SCHEMA_VALIDATION_SLOTS = Gauge(
    "narad_schema_validation_slots",
    "The node's validation capacity: costly validations that may run at once "
    "(validation.capacity_slots).",
    multiprocess_mode="max",
)
SCHEMA_CAPACITY_REFUSED = Counter(
    "narad_schema_capacity_refused",
    "Produces refused with 503 because no validation slot freed in time "
    "(validation.capacity_wait_ms).",
)
SCHEMA_VALIDATIONS = Counter(
    "narad_schema_validations",
    "Messages validated against their topic's schema, by outcome: valid, "
    "invalid (refused with 400), busy (no validation slot: 503).",
    ["outcome"],
)
VALIDATION_OUTCOMES = ("valid", "invalid", "busy")
# No per-topic labels: topics come and go by the thousand, and every label
# value is a file per worker in multiprocess mode.
MESSAGES_PRODUCED = Counter("narad_messages_produced", "Messages accepted (202).")
MESSAGES_REFUSED = Counter(
    "narad_messages_refused", "Produces refused with 400 (schema or bad request)."
)
MESSAGES_CONSUMED = Counter(
    "narad_messages_consumed", "Messages handed out under a lease."
)
MESSAGES_ACKED = Counter("narad_messages_acked", "Leases settled by ack.")
MESSAGES_DEDUPLICATED = Counter(
    "narad_messages_deduplicated",
    "Messages of a retried produce not stored again: their idempotency key was "
    "remembered with the same content (answered 202).",
)
ACKS_REPEATED = Counter(
    "narad_acks_repeated",
    "Acks of a message already acked with the same receipt handle (answered 204).",
)
IDEMPOTENCY_KEYS_EVICTED = Counter(
    "narad_idempotency_keys_evicted",
    "Idempotency keys forgotten before their window closed, to keep a topic "
    "within broker.idempotency_max_keys / _max_bytes.",
)
FANOUT_COPIES = Counter(
    "narad_fanout_copies", "Copies of accepted messages stored in fan-out children."
)
STORAGE_RETRIES = Counter(
    "narad_storage_retries",
    "Storage calls retried, by reason: moved (to the leader), connection (refused, "
    "lost or timed out), clusterdown, tryagain, loading, busy (another client's "
    "script ran long), readonly, raft "
    "(RedisRaft's transient -ERR replies), timeout (RedisRaft's -TIMEOUT, for a "
    "call that may run twice).",
    ["reason"],
)
STORAGE_RETRY_REASONS = (
    "moved",
    "connection",
    "clusterdown",
    "tryagain",
    "loading",
    "busy",
    "readonly",
    "raft",
    "timeout",
)

STORAGE_SCRIPT_SECONDS = Histogram(
    "narad_storage_script_duration_seconds",
    "Time of each storage script call (Lua on Redis/Valkey), retries included.",
    ["script"],
    buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 5),
)
STORAGE_ERRORS = Counter(
    "narad_storage_errors",
    "Requests that failed for the storage, by kind: unavailable (no answer "
    "once retries gave up: 503), uncertain (the link failed after a write was "
    "sent: 503, it may have been applied), full (over its memory limit: 507).",
    ["kind"],
)
STORAGE_ERROR_KINDS = ("unavailable", "uncertain", "full")

# Per request: counted through TALLY. The route is the template
# ("/v1/topics/{name}/produce"), never the path, so series stay bounded.
HTTP_REQUESTS = Counter(
    "narad_http_requests",
    "HTTP requests answered by the app, by route template, method and status.",
    ["route", "method", "status"],
)
HTTP_REQUEST_SECONDS = Histogram(
    "narad_http_request_duration_seconds",
    "Time from a request's arrival to its response, by route template (a "
    "long-polling consume counts its wait).",
    ["route"],
    buckets=(
        0.0005,
        0.001,
        0.0025,
        0.005,
        0.01,
        0.025,
        0.05,
        0.1,
        0.25,
        0.5,
        1,
        2.5,
        5,
        10,
        30,
        60,
    ),
)
# Counted through TALLY too: a flood of bad credentials is the hot path then.
AUTH_FAILURES = Counter(
    "narad_auth_failures",
    "Requests refused for their credentials: missing, malformed, wrong (user "
    "or password), or rate_limited (429 after too many failures).",
    ["reason"],
)
AUTH_FAILURE_REASONS = ("missing", "malformed", "wrong", "rate_limited")
AUTH_DELAYS = Counter(
    "narad_auth_delayed",
    "Credential checks held back for their turn because their user name had "
    "failed too often from many addresses and theirs had been failing too "
    "(security.user_failures_*); never one from an address that had not.",
)
#: The label of requests no route matched.
UNMATCHED = "unmatched"
_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})

# Each worker refreshes these from the storage every few seconds while it
# serves requests (and on every scrape); the freshest value wins.
STORAGE_DURABLE = Gauge(
    "narad_storage_durable",
    "1 while the storage has every write on disk (AOF, fsync always) or on a "
    "Raft majority before it answers; else 0, as while it cannot be reached.",
    multiprocess_mode="mostrecent",
)
STORAGE_MEMORY_USED = Gauge(
    "narad_storage_memory_used_bytes",
    "Memory the storage server uses (INFO used_memory).",
    multiprocess_mode="mostrecent",
)
STORAGE_MEMORY_LIMIT = Gauge(
    "narad_storage_memory_limit_bytes",
    "The storage server's maxmemory; writes over it answer 507. 0: no limit.",
    multiprocess_mode="mostrecent",
)

# Each worker's caches (narad.caches), written by the worker every few
# seconds while it listens to the storage, and on every scrape it serves: one
# series per worker (``pid``), since the bounds are per worker.
CACHE_ENTRIES = Gauge(
    "narad_cache_entries",
    "Entries a worker's cache holds (topic records, validators, patterns...).",
    ["cache"],
    multiprocess_mode="liveall",
)
CACHE_BYTES = Gauge(
    "narad_cache_bytes",
    "Estimated bytes a worker's cache holds (0 where only entries are bounded).",
    ["cache"],
    multiprocess_mode="liveall",
)
CACHE_EVICTIONS = Counter(
    "narad_cache_evictions",
    "Entries evicted to keep a cache within its bounds (not topics dropped).",
    ["cache"],
)


# Timed in each worker by narad.collector (gc.callbacks), observed through
# TALLY on the worker's tick. The generation a collection ran on: 0, 1 (the
# middle one, or an increment of the old one under CPython 3.14) or 2.
GC_PAUSE_SECONDS = Histogram(
    "narad_gc_pause_seconds",
    "Pauses of a worker's cyclic garbage collector, by generation collected.",
    ["generation"],
    buckets=(
        0.0001,
        0.00025,
        0.0005,
        0.001,
        0.0025,
        0.005,
        0.01,
        0.025,
        0.05,
        0.1,
        0.25,
        0.5,
        1,
    ),
)
GC_GENERATIONS = ("0", "1", "2")
#: Seconds a worker keeps counts in memory before writing them out.
FLUSH_S = 1.0


class Tally:
    """Counter increments and histogram observations kept in this process's
    memory, written to their metrics by :meth:`flush`.

    :meth:`inc` and :meth:`observe` cost a dict update; every
    :data:`FLUSH_S` seconds the first of them to notice writes everything
    out, as do the worker's idle ticks, a scrape and the worker's exit, so a
    scrape sees all but the last second of the other workers' counts.
    """

    def __init__(self, clock=time.monotonic) -> None:
        self._clock = clock
        self._flushed = clock()
        self._lock = threading.Lock()
        self._counts: dict[tuple[Counter, tuple[str, ...]], float] = {}
        # (histogram, labels) -> [count per bucket..., sum of observations]
        self._observed: dict[tuple[Histogram, tuple[str, ...]], list[float]] = {}

    def inc(self, counter: Counter, labels: tuple[str, ...], amount: float = 1) -> None:
        key = (counter, labels)
        with self._lock:
            self._counts[key] = self._counts.get(key, 0) + amount
        self.maybe_flush()

    def observe(
        self, histogram: Histogram, labels: tuple[str, ...], value: float
    ) -> None:
        key = (histogram, labels)
        with self._lock:
            slots = self._observed.get(key)
            if slots is None:
                slots = self._observed[key] = [0.0] * (len(_bounds(histogram)) + 1)
            slots[bisect.bisect_left(_bounds(histogram), value)] += 1
            slots[-1] += value
        self.maybe_flush()

    def maybe_flush(self) -> None:
        """:meth:`flush` if the last one was :data:`FLUSH_S` ago or more."""
        if self._clock() - self._flushed >= FLUSH_S:
            self.flush()

    def flush(self) -> None:
        """Write what was counted since the last flush to the metrics."""
        with self._lock:
            self._flushed = self._clock()
            counts, self._counts = self._counts, {}
            observed, self._observed = self._observed, {}
        for (counter, labels), amount in counts.items():
            (counter.labels(*labels) if labels else counter).inc(amount)
        for (histogram, labels), slots in observed.items():
            _add_observations(histogram.labels(*labels), slots)


def _bounds(histogram: Histogram) -> list[float]:
    # prometheus-client's own bucket bounds, +Inf last.
    return histogram._upper_bounds


def _add_observations(child: Histogram, slots: list[float]) -> None:
    """Add counted observations to a histogram's child: prometheus-client has
    no public call for many observations at once, so this writes its bucket
    and sum values as ``observe`` does (tests/unit/test_metrics.py checks the
    result matches ``observe``'s)."""
    for index, count in enumerate(slots[:-1]):
        if count:
            child._buckets[index].inc(count)
    child._sum.inc(slots[-1])


#: The tally of this process.
TALLY = Tally()


def record_request(route: str | None, method: str, status: int, seconds: float) -> None:
    """Count one HTTP request the app answered (cheap: see :class:`Tally`)."""
    route = route or UNMATCHED
    TALLY.inc(
        HTTP_REQUESTS, (route, method if method in _METHODS else "other", str(status))
    )
    TALLY.observe(HTTP_REQUEST_SECONDS, (route,), seconds)


def start_worker(validation_slots: int) -> None:
    """Series that must show from a worker's start, zero until counted, so
    that rates and alerts over them work before the first event."""
    SCHEMA_VALIDATION_SLOTS.set(validation_slots)
    for outcome in VALIDATION_OUTCOMES:
        SCHEMA_VALIDATIONS.labels(outcome)
    for kind in STORAGE_ERROR_KINDS:
        STORAGE_ERRORS.labels(kind)
    for reason in STORAGE_RETRY_REASONS:
        STORAGE_RETRIES.labels(reason)
    for reason in AUTH_FAILURE_REASONS:
        AUTH_FAILURES.labels(reason)
    for generation in GC_GENERATIONS:
        GC_PAUSE_SECONDS.labels(generation)


def render(collectors: Iterable[Collector] = ()) -> tuple[bytes, str]:
    """The exposition text for ``/metrics`` and its content type: every
    worker's metrics, plus ``collectors`` read now in this worker."""
    TALLY.flush()
    registry = CollectorRegistry()
    shared = "PROMETHEUS_MULTIPROC_DIR" in os.environ
    if shared:
        multiprocess.MultiProcessCollector(registry)
    for collector in collectors:
        registry.register(collector)
    text = generate_latest(registry)
    if not shared:  # one process (in-process tests): its own registry
        text = generate_latest() + text
    return text, CONTENT_TYPE_LATEST


def mark_process_dead(pid: int) -> None:
    """Drop a dead worker's live gauges (gunicorn ``child_exit``)."""
    if "PROMETHEUS_MULTIPROC_DIR" in os.environ:
        multiprocess.mark_process_dead(pid)
