"""Wake long-polling consumers as soon as their topic may have a message.

Every append (and every give-back) publishes on ``narad:wake:<topic>``. One
listener thread per worker process subscribes to them all and bumps a
per-topic generation counter; a consumer snapshots the counter before it
looks for a message and sleeps only until the counter moves, so a message
produced between its look and its sleep still wakes it. If the subscription
is down, waits are cut to short slices until it is back.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import defaultdict

from narad.storage import Storage

log = logging.getLogger(__name__)

UNSUBSCRIBED_SLICE_S = 0.01
RECONNECT_DELAY_S = 0.1


class Waiters:
    def __init__(self, storage: Storage) -> None:
        self._storage = storage
        self._prefix = storage.wake_channel("")
        # One lock, one condition per topic: a wake-up disturbs only the
        # consumers of that topic.
        self._lock = threading.Lock()
        self._conds: dict[str, threading.Condition] = {}
        self._generation: defaultdict[str, int] = defaultdict(int)
        self._subscribed = False
        self._lost = False  # logged as lost; log again only once it is back
        self._thread: threading.Thread | None = None
        self._stopped = False

    def generation(self, topic: str) -> int:
        self._ensure_listener()
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
                if not self._subscribed:
                    cond.wait(min(remaining, UNSUBSCRIBED_SLICE_S))
                    return
                cond.wait(remaining)

    def stop(self) -> None:
        self._stopped = True

    def _ensure_listener(self) -> None:
        if self._thread is None:
            with self._lock:
                if self._thread is None:
                    self._thread = threading.Thread(
                        target=self._listen, name="narad-waiters", daemon=True
                    )
                    self._thread.start()

    def _listen(self) -> None:
        while not self._stopped:
            try:
                pubsub = self._storage.listen(self._prefix + "*")
                try:
                    self._pump(pubsub)
                finally:
                    pubsub.close()
            except Exception as exc:  # any failure: resubscribe, never die
                if not self._lost:
                    log.warning("wake-up subscription lost: %s", exc)
                    self._lost = True
            self._wake_all(subscribed=False)
            time.sleep(RECONNECT_DELAY_S)

    def _wake_all(self, *, subscribed: bool) -> None:
        with self._lock:
            self._subscribed = subscribed
            for topic in self._generation:
                self._generation[topic] += 1
            for cond in self._conds.values():
                cond.notify_all()

    def _pump(self, pubsub) -> None:
        # Until the server confirms the subscription, a publish could be
        # missed; once it has, everyone looks again and waits in earnest.
        if pubsub.get_message(timeout=5.0) is None:
            raise ConnectionError("no subscription confirmation within 5 s")
        self._wake_all(subscribed=True)
        if self._lost:
            log.info("wake-up subscription back")
            self._lost = False
        while not self._stopped:
            message = pubsub.get_message(timeout=1.0)
            if message is None or message["type"] != "pmessage":
                continue
            channel = message["channel"]
            topic = channel.decode()[len(self._prefix) :]
            with self._lock:
                self._generation[topic] += 1
                cond = self._conds.get(topic)
                if cond is not None:
                    cond.notify_all()
