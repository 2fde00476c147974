"""Topic records as a worker sees them: a small per-process cache.

A produce costs one storage round trip because the record comes from here.
The cache is never trusted for a write: every script checks the topic's
epoch (and, for produce, its schema version), and the caller refreshes and
retries when the record moved on. While the worker's notification listener
runs (it starts with the first long poll), a ``TOPIC_CHANGED`` notification
drops the topic's record; when the stream is lost or comes back, events may
have been missed, so the whole cache is dropped. The cache does not start the
listener itself: a produce-only worker then pays nothing for events it would
only use to save a refresh the epoch check already forces.
"""

from __future__ import annotations

import threading

from narad.broker.notifications import Listener
from narad.errors import TopicNotFound
from narad.storage import Event
from narad.storage import Storage
from narad.storage import TopicMeta

MAX_CACHED = 10_000


class TopicRecords:
    def __init__(self, storage: Storage, listener: Listener) -> None:
        self._storage = storage
        self._cache: dict[str, TopicMeta] = {}
        self._lock = threading.Lock()
        listener.on(Event.TOPIC_CHANGED, self.drop)
        listener.on_live(lambda live: self.clear())

    def cached(self, name: str) -> TopicMeta:
        """The record, from the cache when it holds one.

        Raises:
            TopicNotFound: no such topic.
        """
        meta = self._cache.get(name)
        return meta if meta is not None else self.refresh(name)

    def refresh(self, name: str) -> TopicMeta:
        """The record as stored now (and cached).

        Raises:
            TopicNotFound: no such topic.
        """
        meta = self._storage.get_topic(name)
        if meta is None:
            self.drop(name)
            raise TopicNotFound(name)
        self.put(meta)
        return meta

    def put(self, meta: TopicMeta) -> None:
        """Cache a record the caller just wrote."""
        with self._lock:
            if len(self._cache) >= MAX_CACHED:
                self._cache.clear()
            self._cache[meta.name] = meta

    def drop(self, name: str) -> None:
        with self._lock:
            self._cache.pop(name, None)

    def clear(self) -> None:
        with self._lock:
            self._cache.clear()
