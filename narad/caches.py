"""Bounded caches of a worker process, and the registry that publishes them.

Everything a worker keeps per topic or per schema (topic records, compiled
validators, round-robin counters, waiting consumers' state) or shares across
schemas (compiled RE2 patterns, pattern cost estimates) is a
:class:`BoundedCache`: least recently used entries go first once the cache
holds ``max_entries``, or once the estimated bytes of its entries pass
``max_bytes`` where entries vary in size. So a worker's memory does not grow
with the number of topics it ever saw, only with the bounds (``[cache]`` in
``conf/narad.toml``).

A cache keyed by topic says how to get the topic from a key (``topic_of``)
so that :meth:`BoundedCache.drop_topic` can drop a topic's entries: the
worker's topic records (:class:`narad.broker.records.TopicRecords`) do so for
every cache attached to them when the storage announces ``TOPIC_CHANGED``
(create, alter, new schema version, delete: published by the storage
scripts, heard by every worker of every node), and empty them when the
notification stream is lost or comes back, since an event may have been
missed. Shared caches (patterns) are keyed by what they compile, not by
topic, and are only ever evicted. :class:`Caches` publishes their sizes.

Locks are native locks, not gevent's: patterns are compiled on the
validation threads (:mod:`narad.serve.offload`) as well as on the event loop. No
critical section switches greenlets or waits for anything but the lock.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable
from collections.abc import Hashable
from collections.abc import Iterator
from typing import Any
from typing import Generic
from typing import Protocol
from typing import TypeVar

from narad import metrics

__all__ = ("BoundedCache", "Caches", "SizedCache", "native_lock", "topic_key")

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")

#: How often a worker's cache gauges are written at most (and at least, while
#: its notification listener runs).
PUBLISH_EVERY_S = 2.0


def native_lock():
    """A lock that blocks the OS thread, even in a monkey-patched worker."""
    try:
        from gevent import monkey
    except ImportError:  # pragma: no cover - gevent is a dependency
        import _thread

        return _thread.allocate_lock()
    return monkey.get_original("_thread", "allocate_lock")()


def topic_key(key: str) -> str:
    """``topic_of`` for caches keyed by the topic name itself."""
    return key


class SizedCache(Protocol):
    """What :class:`Caches` reads of a cache to publish its size."""

    name: str

    def __len__(self) -> int: ...

    @property
    def nbytes(self) -> int: ...

    def take_evictions(self) -> int:
        """Entries evicted to stay within bounds since the last call."""
        ...


class BoundedCache(Generic[K, V]):
    """A least-recently-used map bounded by entries and estimated bytes.

    Args:
        name: The ``cache`` label of its metrics.
        max_entries: Entries kept at most.
        max_bytes: Estimated bytes kept at most (each :meth:`put` says what
            its entry costs); None: entries only.
        topic_of: The topic a key belongs to, for :meth:`drop_topic`; None
            for a cache shared across topics.
    """

    def __init__(
        self,
        name: str,
        *,
        max_entries: int,
        max_bytes: int | None = None,
        topic_of: Callable[[K], str] | None = None,
    ) -> None:
        if max_entries < 1:
            raise ValueError(f"cache {name!r} needs room for at least one entry")
        self.name = name
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self.topic_of = topic_of
        self._entries: OrderedDict[K, tuple[V, int]] = OrderedDict()
        # topic -> its keys, where a key is more than the topic's name.
        self._by_topic: dict[str, set[K]] | None = (
            {} if topic_of not in (None, topic_key) else None
        )
        self._bytes = 0
        self._evictions = 0
        self._lock = native_lock()

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: K) -> bool:
        return key in self._entries

    def __iter__(self) -> Iterator[K]:
        with self._lock:
            return iter(list(self._entries))

    @property
    def nbytes(self) -> int:
        return self._bytes

    def take_evictions(self) -> int:
        with self._lock:
            evictions, self._evictions = self._evictions, 0
        return evictions

    def resize(self, *, max_entries: int, max_bytes: int | None = None) -> None:
        """New bounds (evicting what no longer fits)."""
        with self._lock:
            self.max_entries = max_entries
            self.max_bytes = max_bytes
            self._shrink()

    def get(self, key: K) -> V | None:
        """The value under ``key`` (now the most recently used), or None."""
        with self._lock:
            found = self._entries.get(key)
            if found is None:
                return None
            self._entries.move_to_end(key)
            return found[0]

    def put(self, key: K, value: V, nbytes: int = 0) -> None:
        """Keep ``value`` under ``key``, evicting the least recently used
        entries beyond the bounds. An entry larger than ``max_bytes`` on its
        own is not kept."""
        with self._lock:
            self._remove(key)
            if self.max_bytes is not None and nbytes > self.max_bytes:
                return
            self._entries[key] = (value, nbytes)
            self._bytes += nbytes
            if self._by_topic is not None:
                self._by_topic.setdefault(self.topic_of(key), set()).add(key)
            self._shrink()

    def drop_topic(self, topic: str) -> None:
        """Drop every entry of ``topic``."""
        if self.topic_of is None:
            return
        with self._lock:
            if self._by_topic is None:
                self._remove(topic)  # type: ignore[arg-type]
                return
            for key in self._by_topic.pop(topic, ()):
                found = self._entries.pop(key, None)
                if found is not None:
                    self._bytes -= found[1]

    def retain(self, topic: str, state: Any, belongs: Callable[[K, Any], bool]) -> None:
        """Drop the entries of ``topic`` for which ``belongs(key, state)`` is
        false (another epoch of the topic, say)."""
        if self._by_topic is None:
            raise TypeError(f"cache {self.name!r} is not keyed by topic and more")
        with self._lock:
            keys = self._by_topic.get(topic, ())
            for key in [k for k in keys if not belongs(k, state)]:
                self._remove(key)

    def topics(self) -> list[str]:
        """The topics this cache holds entries of."""
        with self._lock:
            if self._by_topic is not None:
                return list(self._by_topic)
            if self.topic_of is None:
                return []
            return [self.topic_of(key) for key in self._entries]

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            if self._by_topic is not None:
                self._by_topic.clear()
            self._bytes = 0

    def _remove(self, key: K) -> V | None:
        found = self._entries.pop(key, None)
        if found is None:
            return None
        self._bytes -= found[1]
        if self._by_topic is not None:
            topic = self.topic_of(key)
            keys = self._by_topic.get(topic)
            if keys is not None:
                keys.discard(key)
                if not keys:
                    del self._by_topic[topic]
        return found[0]

    def _shrink(self) -> None:
        limit = self.max_bytes
        while len(self._entries) > self.max_entries or (
            limit is not None and self._bytes > limit
        ):
            key = next(iter(self._entries))
            self._remove(key)
            self._evictions += 1


class Caches:
    """A worker's caches, published as the ``narad_cache_*`` metrics."""

    def __init__(self, *caches: SizedCache) -> None:
        self._caches: list[SizedCache] = []
        self._published_at = 0.0
        for cache in caches:
            self.add(cache)

    def add(self, cache: SizedCache) -> None:
        if any(c.name == cache.name for c in self._caches):
            raise ValueError(f"two caches named {cache.name!r}")
        self._caches.append(cache)

    def tick(self) -> None:
        """Publish the metrics if they were not written for a while."""
        if time.monotonic() - self._published_at >= PUBLISH_EVERY_S:
            self.publish()

    def publish(self) -> None:
        """Write every cache's entries, bytes and evictions to the metrics."""
        self._published_at = time.monotonic()
        for cache in self._caches:
            name = cache.name
            metrics.CACHE_ENTRIES.labels(name).set(len(cache))
            metrics.CACHE_BYTES.labels(name).set(cache.nbytes)
            metrics.CACHE_EVICTIONS.labels(name).inc(cache.take_evictions())
