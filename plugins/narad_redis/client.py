"""A redis-py client that follows ``-MOVED`` and retries transient failures.

RedisRaft answers a write sent to a follower with ``-MOVED <slot> host:port``
naming the leader; it and Redis Cluster answer ``-CLUSTERDOWN`` or
``-TRYAGAIN`` while an election or a resharding is under way. A lost
connection is retried the same way. Retries are bounded (attempts and a
doubling, capped backoff) so a request fails with ``StorageError`` instead of
hanging a worker.

A script whose connection was lost (or timed out) may have run: its retry
runs it again. The scripts make that safe where it matters: an append whose
entries carry idempotency keys finds them stored and stores nothing new, and
an ack finds the message acked under its nonce (``Status.REPEATED``). An
append without keys may store its entries twice, and a reserve may lease
messages nobody receives (they come back when the lease lapses); see the
README's "Delivery".
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any
from typing import TypeVar

import redis
from redis.backoff import NoBackoff
from redis.exceptions import ClusterDownError
from redis.exceptions import MovedError
from redis.exceptions import OutOfMemoryError
from redis.exceptions import TryAgainError
from redis.retry import Retry

from narad.errors import StorageError
from narad.errors import StorageFull
from narad.metrics import STORAGE_RETRIES

T = TypeVar("T")

_TRANSIENT: tuple[type[Exception], ...] = (
    ClusterDownError,
    TryAgainError,
    redis.ConnectionError,
    redis.TimeoutError,
)
_REASONS = {
    ClusterDownError: "clusterdown",
    TryAgainError: "tryagain",
}


class RetryingClient:
    """Holds the current redis-py client and runs calls through :meth:`call`."""

    def __init__(
        self,
        url: str,
        *,
        attempts: int = 8,
        backoff_s: float = 0.02,
        backoff_max_s: float = 1.0,
        socket_timeout_s: float = 15.0,
        pool_size: int = 32,
        client: redis.Redis | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.attempts = attempts
        self.backoff_s = backoff_s
        self.backoff_max_s = backoff_max_s
        self._sleep = sleep
        self._options: dict[str, Any] = {
            "socket_timeout": socket_timeout_s,
            "socket_connect_timeout": min(socket_timeout_s, 5.0),
            # Retrying is ours to bound; redis-py must not retry underneath.
            "retry": Retry(NoBackoff(), 0),
            "health_check_interval": 30,
            # RESP2: every RESP server speaks it (RedisRaft, older Redis).
            "protocol": 2,
            # A gevent worker runs thousands of requests at once: without a
            # bound, each concurrent storage call would open a connection.
            # Callers queue for one of pool_size instead (as long as a
            # command may take), and a waiting consumer holds none.
            "max_connections": pool_size,
            "timeout": socket_timeout_s,
        }
        self.redis = client if client is not None else self._connect(url)

    def _connect(self, url: str) -> redis.Redis:
        pool = redis.BlockingConnectionPool.from_url(url, **self._options)
        return redis.Redis(connection_pool=pool)

    def call(self, fn: Callable[[redis.Redis], T]) -> T:
        """Run ``fn(client)``, following MOVED and retrying transient errors."""
        delay = self.backoff_s
        for attempt in range(self.attempts + 1):
            try:
                return fn(self.redis)
            except MovedError as exc:
                STORAGE_RETRIES.labels(reason="moved").inc()
                self.move_to(exc.host, exc.port)
                last: Exception = exc
                continue  # the leader is named: no need to wait
            except OutOfMemoryError as exc:
                # -OOM: over maxmemory, the server refused the write before it
                # changed anything (a script is refused at its first write).
                raise StorageFull(str(exc)) from exc
            except _TRANSIENT as exc:
                reason = _REASONS.get(type(exc), "connection")
                STORAGE_RETRIES.labels(reason=reason).inc()
                last = exc
            if attempt < self.attempts:
                self._sleep(delay)
                delay = min(delay * 2, self.backoff_max_s)
        raise StorageError(
            f"storage unavailable after {self.attempts} retries: {last}"
        ) from last

    def move_to(self, host: str, port: int) -> None:
        """Talk to ``host:port`` from now on (the leader a MOVED named)."""
        kwargs = dict(self.redis.connection_pool.connection_kwargs)
        kwargs.pop("path", None)  # the leader is named by host:port
        kwargs.update(host=host, port=port)
        pool = redis.BlockingConnectionPool(
            connection_class=redis.Connection,
            max_connections=self._options["max_connections"],
            timeout=self._options["timeout"],
            **kwargs,
        )
        old, self.redis = self.redis, redis.Redis(connection_pool=pool)
        old.close()

    def close(self) -> None:
        self.redis.close()
