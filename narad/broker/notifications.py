"""One listener per worker process for the storage's notifications.

It reads :meth:`narad.storage.Storage.notifications` on a daemon thread and
hands each event to the handlers registered for it: waiting consumers are
woken by ``MESSAGES``, cached topic records dropped by ``TOPIC_CHANGED``.
Handlers also learn when the stream goes live or is lost (``on_live``): while
it is down an event may be missed, so they stop trusting what they hold.
Tick handlers (``on_tick``) run after every event and every idle second:
the caches' deferred drops and metrics ride on them.

The thread starts on first use (the first topic record a worker caches, or
the first long poll) and survives any failure: it opens a new
stream after a pause, and logs the loss once and the recovery once, not
every attempt.

A listener may ask for some events only (``events``): the worker's users
listener takes ``USER_CHANGED`` alone, so that watching credentials does not
cost it an event per message produced anywhere.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from collections.abc import Collection

from narad.storage import Event
from narad.storage import Storage

log = logging.getLogger(__name__)

RECONNECT_DELAY_S = 0.1


class Listener:
    def __init__(
        self,
        storage: Storage,
        events: Collection[Event] | None = None,
        *,
        name: str = "storage notifications",
    ) -> None:
        self._storage = storage
        self._name = name  # in its log lines
        self._events = frozenset(events) if events is not None else None
        self.enabled = storage.capabilities.notifications
        self._handlers: defaultdict[Event, list[Callable[[str], None]]] = defaultdict(
            list
        )
        self._live_handlers: list[Callable[[bool], None]] = []
        self._tick_handlers: list[Callable[[], None]] = []
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._stopped = False

    def on(self, event: Event, handler: Callable[[str], None]) -> None:
        """Call ``handler(topic)`` for each ``event`` (from the listener thread)."""
        self._handlers[event].append(handler)

    def on_live(self, handler: Callable[[bool], None]) -> None:
        """Call ``handler(True)`` when the stream goes live, ``(False)`` when lost."""
        self._live_handlers.append(handler)

    def on_tick(self, handler: Callable[[], None]) -> None:
        """Call ``handler()`` after every event and every idle second; it must
        be cheap (the cache metrics check whether they are due)."""
        self._tick_handlers.append(handler)

    def start(self) -> None:
        """Start the thread once; a no-op for a backend without notifications."""
        if self._thread is None and self.enabled:
            with self._lock:
                if self._thread is None:
                    self._thread = threading.Thread(
                        target=self._run, name="narad-notifications", daemon=True
                    )
                    self._thread.start()

    def stop(self) -> None:
        """Let the thread end at its next event or idle tick (about a second)."""
        self._stopped = True

    def _run(self) -> None:
        lost = False
        while not self._stopped:
            try:
                for note in self._storage.notifications(self._events):
                    if self._stopped:
                        return
                    for tick in self._tick_handlers:
                        tick()
                    if note is None:
                        continue
                    if note.event is Event.LISTENING:
                        if lost:
                            log.warning("%s are back", self._name)
                            lost = False
                        self._live(True)
                    else:
                        for handler in self._handlers[note.event]:
                            handler(note.topic)
            except Exception as exc:  # any failure: open a new stream, never die
                if not lost:
                    log.warning("%s lost: %s", self._name, exc)
                    lost = True
            self._live(False)
            time.sleep(RECONNECT_DELAY_S)

    def _live(self, live: bool) -> None:
        for handler in self._live_handlers:
            handler(live)
