"""Prometheus metrics, all named ``narad_*``.

Under gunicorn every worker is a process, so the CLI sets
``PROMETHEUS_MULTIPROC_DIR`` before this module is imported and ``/metrics``
aggregates the workers' files. Gauges state how they combine across workers.
"""

from __future__ import annotations

import os

from prometheus_client import CONTENT_TYPE_LATEST
from prometheus_client import CollectorRegistry
from prometheus_client import Counter
from prometheus_client import Gauge
from prometheus_client import generate_latest
from prometheus_client import multiprocess

SCHEMA_VALIDATIONS_IN_FLIGHT = Gauge(
    "narad_schema_validations_in_flight",
    "Validations running under the per-node validation capacity bound.",
    multiprocess_mode="livesum",
)
SCHEMA_CAPACITY_REFUSED = Counter(
    "narad_schema_capacity_refused",
    "Produces refused with 503 because no validation slot freed within 5 s.",
)
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
AUTH_FAILURES = Counter(
    "narad_auth_failures",
    "Requests refused for their credentials: missing, malformed, wrong (user "
    "or password), or rate_limited (429 after too many failures).",
    ["reason"],
)
STORAGE_RETRIES = Counter(
    "narad_storage_retries",
    "Storage calls retried, by reason: moved (to the leader), connection (refused, "
    "lost or timed out), clusterdown, tryagain, loading, readonly, raft "
    "(RedisRaft's transient -ERR replies).",
    ["reason"],
)

# Each worker refreshes these from the storage every few seconds while it
# serves requests (and on every scrape); the freshest value wins.
STORAGE_DURABLE = Gauge(
    "narad_storage_durable",
    "1 while the storage has every write on disk (AOF, fsync always) or on a "
    "Raft majority before it answers; else 0.",
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


def render() -> tuple[bytes, str]:
    """The exposition text for ``/metrics`` and its content type."""
    if "PROMETHEUS_MULTIPROC_DIR" in os.environ:
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)
        return generate_latest(registry), CONTENT_TYPE_LATEST
    return generate_latest(), CONTENT_TYPE_LATEST


def mark_process_dead(pid: int) -> None:
    """Drop a dead worker's live gauges (gunicorn ``child_exit``)."""
    if "PROMETHEUS_MULTIPROC_DIR" in os.environ:
        multiprocess.mark_process_dead(pid)
