"""The ``redis`` storage backend: Redis, Valkey, Sentinel-less primaries, RedisRaft.

Serves ``redis://``, ``rediss://`` and ``unix://`` storage URLs.
"""

from __future__ import annotations

from narad import hookimpl
from narad.config import Config
from narad_redis.client import RetryingClient
from narad_redis.storage import RedisStorage

__all__ = ("RedisStorage", "RetryingClient")


def connect(url: str, config: Config) -> RedisStorage:
    client = RetryingClient(
        url,
        attempts=config.get("storage.retry_attempts"),
        backoff_s=config.get("storage.retry_backoff_ms") / 1000,
        backoff_max_s=config.get("storage.retry_backoff_max_ms") / 1000,
        socket_timeout_s=config.get("storage.socket_timeout_ms") / 1000,
        pool_size=config.get("storage.pool_size"),
    )
    return RedisStorage(client)


@hookimpl
def narad_storage_backends():
    return {"redis": connect, "rediss": connect, "unix": connect}
