"""Wake long-polling consumers as soon as their topic may have a message.

Every append and every give-back publishes ``MESSAGES`` for its topic (see
:class:`narad.storage.Event`); the worker's :class:`Listener` hands it here,
and each topic's generation counter moves on. A consumer snapshots the
counter before it looks for a message and sleeps only until the counter
moves, so a message produced between its look and its sleep still wakes it.
While the notification stream is down (or the backend has none), waits are
cut to short slices: the consumer looks again instead of trusting a wake-up.
"""

from __future__ import annotations

import threading
import time
from collections import defaultdict

from narad.broker.notifications import Listener
from narad.storage import Event

UNSUBSCRIBED_SLICE_S = 0.01


class Waiters:
    def __init__(self, listener: Listener) -> None:
        self._listener = listener
        # One lock, one condition per topic: a wake-up disturbs only the
        # consumers of that topic.
        self._lock = threading.Lock()
        self._conds: dict[str, threading.Condition] = {}
        self._generation: defaultdict[str, int] = defaultdict(int)
        self._live = False
        # A deleted topic wakes its consumers too: they look, and learn.
        listener.on(Event.MESSAGES, self._wake)
        listener.on(Event.TOPIC_CHANGED, self._wake)
        listener.on_live(self._wake_all)

    def generation(self, topic: str) -> int:
        self._listener.start()
        with self._lock:
            return self._generation[topic]

    def wait(self, topic: str, seen: int, timeout_s: float) -> None:
        """Sleep until ``topic`` is woken after generation ``seen``, or timeout."""
        deadline = time.monotonic() + timeout_s
        with self._lock:
            cond = self._conds.get(topic)
            if cond is None:
                cond = self._conds[topic] = threading.Condition(self._lock)
            while self._generation[topic] == seen:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return
                if not self._live:
                    cond.wait(min(remaining, UNSUBSCRIBED_SLICE_S))
                    return
                cond.wait(remaining)

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
            self._live = live
            for topic in self._generation:
                self._generation[topic] += 1
            for cond in self._conds.values():
                cond.notify_all()
