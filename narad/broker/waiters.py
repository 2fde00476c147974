"""Wake long-polling consumers as soon as their topic may have a message.

Every append and every give-back publishes ``MESSAGES`` for its topic (see
:class:`narad.storage.Event`); the worker's :class:`Listener` hands it here,
and each topic's generation counter moves on. A consumer snapshots the
counter before it looks for a message and sleeps only until the counter
moves, so a message produced between its look and its sleep still wakes it.
While the notification stream is down (or the backend has none), waits are
cut to short slices: the consumer looks again instead of trusting a wake-up.

The same counters let a worker skip storage round trips while a topic stays
empty, which is what thousands of idle long polls mostly see: a look that
found nothing is remembered with its generation (:meth:`Waiters.remember_empty`)
and a consume arriving while the generation has not moved and no lease has
come due waits without looking again (:meth:`Waiters.known_empty`). Once a
note is a second old, the next consume looks again while the others keep
waiting on it, so a change a notification could not carry is noticed within
a second, at the cost of one look a second, however many consumers poll.

In a gevent worker (``narad.workers``) ``threading`` is monkey-patched: the
listener is a greenlet and a waiting consumer costs a greenlet, not a thread.
:meth:`Waiters.stop` (graceful shutdown) wakes every waiting consumer at once.
"""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from collections.abc import Hashable

from narad.broker.notifications import Listener
from narad.storage import Event

# Without the stream, waiting consumers look again on their own; the slices
# grow with their number so that a worker's looks stay near this rate.
UNSUBSCRIBED_LOOKS_PER_S = 1000
UNSUBSCRIBED_SLICE_S = 0.01
EMPTY_NOTE_MS = 1000
EMPTY_NOTES = 10_000


class Waiters:
    def __init__(self, listener: Listener) -> None:
        self._listener = listener
        # One lock, one condition per topic: a wake-up disturbs only the
        # consumers of that topic.
        self._lock = threading.Lock()
        self._conds: dict[str, threading.Condition] = {}
        self._generation: defaultdict[str, int] = defaultdict(int)
        self._live = False
        self._stopped = False
        self._waiting = 0
        # key -> (generation, lease expiry ms or None, noted at ms)
        self._empty: dict[Hashable, tuple[int, int | None, int]] = {}
        # A deleted topic wakes its consumers too: they look, and learn.
        listener.on(Event.MESSAGES, self._wake)
        listener.on(Event.TOPIC_CHANGED, self._wake)
        listener.on_live(self._wake_all)

    def generation(self, topic: str) -> int:
        self._listener.start()
        with self._lock:
            return self._generation[topic]

    def quiet(self, topic: str, seen: int) -> bool:
        """Whether nothing was published on ``topic`` since generation ``seen``."""
        with self._lock:
            return self._live and self._generation[topic] == seen

    def remember_empty(
        self, key: Hashable, topic: str, seen: int, expiry_ms: int | None, now_ms: int
    ) -> None:
        """Note that a look at ``key`` (of ``topic``) at generation ``seen``
        found nothing, the next lease falling due at ``expiry_ms``."""
        with self._lock:
            if self._generation[topic] != seen:
                return
            if len(self._empty) >= EMPTY_NOTES:
                self._empty.clear()
            self._empty[key] = (seen, expiry_ms, now_ms)

    def known_empty(
        self, key: Hashable, topic: str, now_ms: int
    ) -> tuple[int, int | None] | None:
        """(generation, lease expiry) of an empty look still valid now.

        None tells the caller to look itself: no valid note, or the note is
        a second old (this caller refreshes it; the others keep using it).
        """
        with self._lock:
            note = self._empty.get(key)
            if note is None or not self._live:
                return None
            seen, expiry_ms, noted_ms = note
            if self._generation[topic] != seen or (
                expiry_ms is not None and now_ms >= expiry_ms
            ):
                del self._empty[key]
                return None
            if now_ms - noted_ms >= EMPTY_NOTE_MS:
                self._empty[key] = (seen, expiry_ms, now_ms)
                return None
            return seen, expiry_ms

    def forget_empty(self, key: Hashable) -> None:
        """Drop the note on ``key``: a look found a message or no topic."""
        with self._lock:
            self._empty.pop(key, None)

    def wait(self, topic: str, seen: int, timeout_s: float) -> None:
        """Sleep until ``topic`` is woken after generation ``seen``, or timeout."""
        deadline = time.monotonic() + timeout_s
        with self._lock:
            cond = self._conds.get(topic)
            if cond is None:
                cond = self._conds[topic] = threading.Condition(self._lock)
            self._waiting += 1
            try:
                while self._generation[topic] == seen:
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        return
                    if not self._live:
                        slice_s = max(
                            UNSUBSCRIBED_SLICE_S,
                            self._waiting / UNSUBSCRIBED_LOOKS_PER_S,
                        )
                        cond.wait(min(remaining, slice_s))
                        return
                    cond.wait(remaining)
            finally:
                self._waiting -= 1

    @property
    def stopped(self) -> bool:
        return self._stopped

    def stop(self) -> None:
        """Wake every waiting consumer for good (graceful shutdown)."""
        self._stopped = True
        self._listener.stop()
        self._wake_all(False)

    def _wake(self, topic: str) -> None:
        with self._lock:
            self._generation[topic] += 1
            cond = self._conds.get(topic)
            if cond is not None:
                cond.notify_all()

    def _wake_all(self, live: bool) -> None:
        # Going live: a publish before the subscription was confirmed could
        # have been missed, so everyone looks again and then waits in earnest.
        with self._lock:
            self._live = live and not self._stopped
            for topic in self._generation:
                self._generation[topic] += 1
            for cond in self._conds.values():
                cond.notify_all()
