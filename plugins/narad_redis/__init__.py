"""The ``redis`` storage backend: Redis, Valkey, RedisRaft, Valkey/Redis Cluster.

Serves ``redis://``, ``rediss://`` and ``unix://`` storage URLs; a RedisRaft
cluster's nodes go comma-separated in the host part
(``redis://h1:6379,h2:6379,h3:6379/0``, see :mod:`narad_redis.client`).
``redis+cluster://`` and ``rediss+cluster://`` name seeds of a sharded
Valkey or Redis Cluster (:mod:`narad_redis.cluster`). Its settings live under
``[plugins.redis]`` (``NARAD_PLUGINS_REDIS_*``).
"""

from __future__ import annotations

from narad import hookimpl
from narad.config import Config
from narad.config import Setting
from narad.config import integer
from narad_redis.client import RetryingClient
from narad_redis.cluster import ClusterClient
from narad_redis.cluster import is_cluster_url
from narad_redis.sharded import ClusterStorage
from narad_redis.storage import RedisStorage

__all__ = ("SECTION", "RedisStorage", "RetryingClient", "connect")

SECTION = "redis"

SETTINGS = (
    Setting(
        "retry_attempts",
        8,
        integer(0, 100),
        "backoff waits of one storage call before it answers 503: after "
        "CLUSTERDOWN, TRYAGAIN, LOADING, RedisRaft's transient replies or a "
        "lost connection (moving to another live node costs none)",
    ),
    Setting(
        "retry_backoff_ms",
        20,
        integer(1, 60_000),
        "first retry delay; doubles each attempt",
    ),
    Setting(
        "retry_backoff_max_ms", 1000, integer(1, 600_000), "cap on one retry delay"
    ),
    Setting(
        "socket_timeout_ms",
        15_000,
        integer(100, 600_000),
        "storage socket timeout; no retry starts after it since the call began",
    ),
    Setting(
        "connect_timeout_ms",
        2000,
        integer(100, 600_000),
        "timeout of a connection attempt, after which the next node is asked",
    ),
    Setting(
        "pool_size",
        32,
        integer(1, 10_000),
        "storage connections per worker process; requests queue for a free one",
    ),
    Setting(
        "replica_wait_ms",
        2000,
        integer(1, 600_000),
        "how long a write waits for storage.min_replicas replicas to confirm "
        "it before it answers 503",
    ),
)


def connect(url: str, config: Config) -> RedisStorage:
    """A storage over ``url`` (defaults for settings ``config`` lacks)."""
    settings = {s.name: s.default for s in SETTINGS} | config.plugin(SECTION)
    common = {
        "attempts": settings["retry_attempts"],
        "backoff_s": settings["retry_backoff_ms"] / 1000,
        "backoff_max_s": settings["retry_backoff_max_ms"] / 1000,
        "socket_timeout_s": settings["socket_timeout_ms"] / 1000,
        "connect_timeout_s": settings["connect_timeout_ms"] / 1000,
        "pool_size": settings["pool_size"],
    }
    min_replicas = config.get("storage.min_replicas")
    if is_cluster_url(url):
        cluster = ClusterClient(
            url,
            **common,
            min_replicas=min_replicas,
            replica_wait_ms=settings["replica_wait_ms"],
        )
        return ClusterStorage(cluster)
    client = RetryingClient(
        url,
        **common,
        min_replicas=min_replicas,
        replica_wait_ms=settings["replica_wait_ms"],
    )
    return RedisStorage(client)


@hookimpl
def narad_storage_backends():
    return {
        "redis": connect,
        "rediss": connect,
        "unix": connect,
        "redis+cluster": connect,
        "rediss+cluster": connect,
    }


@hookimpl
def narad_settings():
    return {SECTION: SETTINGS}
