"""Topic records as a worker sees them: a small per-process cache.

A produce costs one storage round trip because the record comes from here.
The cache is never trusted for a write: every script checks the topic's
epoch (and, for produce, its schema version), and the caller refreshes and
retries when the record moved on.

It is bounded (``[cache] topics``, least recently used first) and it is the
hub of what else a worker keeps per topic incarnation: caches keyed by
topic, epoch and more (compiled validators, round-robin counters) are
:meth:`attached <TopicRecords.attach>` to it.

- A ``TOPIC_CHANGED`` notification (create, alter, schema version, delete,
  from any worker of any node), or :meth:`TopicRecords.drop` by the worker
  that made the change, drops the topic's record at once, and the attached
  entries that are costly to hold (validators). A record read while a
  change was heard is not cached: it may have been read before that change,
  and would outlive its drop.
- Whenever a record is cached, the attached entries of that topic that do
  not belong to it (another epoch: the topic was recreated; an older schema
  version) are dropped, and those that do are kept: altering a topic does
  not restart its round-robin.
- Attached entries of a topic that changed and was not read again within
  :data:`CHANGED_GRACE_S` (deleted, most likely) are dropped then, including
  any put while the change was on its way.
- When the stream is lost or comes back, events may have been missed: every
  record is dropped, and every attached entry goes unless its topic is read
  again within the grace (and it still belongs).

The worker's notification listener starts with the first record cached: a
worker that keeps nothing about any topic has nothing to drop, and one that
keeps something hears when to drop it, whatever requests it serves.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from narad.broker.notifications import Listener
from narad.caches import BoundedCache
from narad.caches import native_lock
from narad.caches import topic_key
from narad.errors import TopicNotFound
from narad.storage import Event
from narad.storage import Storage
from narad.storage import TopicMeta

MAX_CACHED = 10_000
CHANGED_GRACE_S = 5.0

#: Whether an attached cache's key still belongs to the topic as ``meta`` is.
Belongs = Callable[[Any, TopicMeta], bool]


class TopicRecords:
    def __init__(
        self, storage: Storage, listener: Listener, *, max_entries: int = MAX_CACHED
    ) -> None:
        self._storage = storage
        self._listener = listener
        self.cache: BoundedCache[str, TopicMeta] = BoundedCache(
            "topic_records", max_entries=max_entries, topic_of=topic_key
        )
        self._attached: list[tuple[BoundedCache, Belongs]] = []
        self._dropped_on_change: list[BoundedCache] = []
        # Topics changed and not read since: name -> when, oldest first.
        self._changed: OrderedDict[str, float] = OrderedDict()
        self._heard = 0  # changes (and stream losses) heard so far
        self._lock = native_lock()
        listener.on(Event.TOPIC_CHANGED, self._on_changed)
        listener.on_live(self._on_live)
        listener.on_tick(self._expire)

    def attach(
        self, cache: BoundedCache, belongs: Belongs, *, kept_on_change: bool
    ) -> None:
        """Drop ``cache``'s entries of a topic with the topic (see the module
        doc); ``belongs(key, meta)`` tells the entries of the topic as
        ``meta`` is from those of a former epoch or version.

        Args:
            kept_on_change: Keep the entries through a ``TOPIC_CHANGED``
                until the record, read again, says whether they still
                belong (small entries that matter while the topic lives);
                else they go at once (large entries, cheap to make again).
        """
        self._attached.append((cache, belongs))
        if not kept_on_change:
            self._dropped_on_change.append(cache)

    def cached(self, name: str) -> TopicMeta:
        """The record, from the cache when it holds one.

        Raises:
            TopicNotFound: no such topic.
        """
        meta = self.cache.get(name)
        return meta if meta is not None else self.refresh(name)

    def refresh(self, name: str, *, epoch: str | None = None) -> TopicMeta:
        """The record as stored now (and cached).

        Args:
            epoch: The incarnation the caller may act on (one its user owns):
                another of the same name is not found.

        Raises:
            TopicNotFound: no such topic (of that ``epoch``).
        """
        heard = self._heard
        meta = self._storage.get_topic(name)
        if meta is None:
            self.drop(name)
            raise TopicNotFound(name)
        if self._heard == heard:
            self.put(meta)
        # Else a change came while reading: what was read may predate it, and
        # cached it would outlive the drop. The next read caches.
        if epoch is not None and meta.epoch != epoch:
            raise TopicNotFound(name)
        return meta

    @property
    def heard(self) -> int:
        """Changes (and stream losses) heard so far (see :meth:`put`)."""
        return self._heard

    def put(self, meta: TopicMeta, heard: int | None = None) -> None:
        """Cache a record the caller just wrote or read; with ``heard``
        (:attr:`heard` before the write), only if no change was heard since:
        another worker may have deleted the topic meanwhile, and the record
        cached after its drop would outlive it."""
        if heard is not None and heard != self._heard:
            return
        self._listener.start()
        self.cache.put(meta.name, meta)
        with self._lock:
            self._changed.pop(meta.name, None)
        for cache, belongs in self._attached:
            cache.retain(meta.name, meta, belongs)

    def drop(self, name: str) -> None:
        """Forget topic ``name``'s record: it changed or is gone (see
        ``TOPIC_CHANGED`` in the module doc for what goes with it)."""
        self._on_changed(name)

    def clear(self) -> None:
        with self._lock:
            self._changed.clear()
        self.cache.clear()
        for cache, _ in self._attached:
            cache.clear()

    def _on_live(self, live: bool) -> None:
        # Events may have been missed: no record is trusted, and what is
        # attached to any topic goes unless the topic is read again soon
        # (attached entries are keyed by epoch and version: never wrong,
        # only possibly dead).
        self._heard += 1
        self.cache.clear()
        for cache, _ in self._attached:
            for name in cache.topics():
                self._suspect(name)

    def _on_changed(self, name: str) -> None:
        self._heard += 1
        self.cache.drop_topic(name)
        for cache in self._dropped_on_change:
            cache.drop_topic(name)
        if self._attached:
            self._suspect(name)

    def _suspect(self, name: str) -> None:
        """Drop what is attached to ``name`` unless it is read again soon."""
        with self._lock:
            self._changed.pop(name, None)
            self._changed[name] = time.monotonic()
            # Bounded like the records: past it the oldest goes at once.
            overflow = len(self._changed) > self.cache.max_entries
            oldest = self._changed.popitem(last=False)[0] if overflow else None
        if oldest is not None:
            for cache, _ in self._attached:
                cache.drop_topic(oldest)

    def _expire(self) -> None:
        """Drop what is attached to topics changed and not read since."""
        until = time.monotonic() - CHANGED_GRACE_S
        while True:
            with self._lock:
                if not self._changed:
                    return
                name, when = next(iter(self._changed.items()))
                if when > until:
                    return
                del self._changed[name]
            for cache, _ in self._attached:
                cache.drop_topic(name)
