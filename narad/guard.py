"""Whether the storage is fit to take writes: reachable, durable, and how full.

A ``202`` promises the message is on disk. That holds only while the storage
has every write on disk before it answers (append-only file with ``appendfsync
always``) or on a majority of a RedisRaft cluster, and while it never evicts.
The master checks once at start (:func:`check_at_start`): unless
``storage.durability`` is ``relaxed``, a storage that is not durable stops the
node there. Each worker then re-reads the server's status at most every
``FRESH_S`` seconds as requests arrive (:class:`StorageGuard`): should the
storage stop being durable at run time (``CONFIG SET appendfsync everysec``, a
failing disk), ``/readyz`` and every write answer 503 until it is durable
again. Once the worker's link to the storage is lost (its notification
stream drops: the server may come back with other settings), the next write
waits for a fresh check. No thread: the requests that need the answer refresh
it, and ``/metrics`` does so for the gauges.

On a RedisRaft cluster any node's ``INFO raft`` says the writes are durable,
so a cluster without a leader still counts as durable here; whether a leader
answers is readiness's question (:meth:`narad.storage.Storage.ping`, which
``/readyz`` asks first), and each write finds the leader, or answers 503, by
its own retries.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable
from urllib.parse import urlsplit

from narad import metrics
from narad.config import Config
from narad.errors import InvalidConfiguration
from narad.storage import ServerStatus
from narad.storage import Storage

log = logging.getLogger(__name__)

FRESH_S = 2.0  # a known status is read again after this long
RETRY_S = 0.1  # an unknown one (storage unreachable) this soon
UNAVAILABLE = "storage unavailable, retry"


class StorageGuard:
    """One worker's view of the storage server's status."""

    def __init__(
        self,
        storage: Storage,
        *,
        relaxed: bool,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.relaxed = relaxed
        self._storage = storage
        self._clock = clock
        self._status: ServerStatus | None = None
        self._durable: bool | None = None  # last known, kept through outages
        self._checked = -math.inf
        self._lock = threading.Lock()
        self._losses = 0  # links to the storage lost so far (stream_live)

    def status(self) -> ServerStatus | None:
        """The server's status, read again if stale; None while unreachable."""
        known = self._status is not None
        if self._clock() - self._checked < (FRESH_S if known else RETRY_S):
            return self._status
        # One request refreshes at a time. The others go on with a known
        # answer, or wait for the first one.
        if self._lock.acquire(blocking=not known):
            try:
                if self._clock() - self._checked >= (FRESH_S if known else RETRY_S):
                    self._refresh()
            finally:
                self._lock.release()
        return self._status

    def refusal(self) -> str | None:
        """Why writes must be refused right now, or None if they may proceed."""
        status = self.status()
        if self.relaxed:
            return None
        if status is None:
            # Durability is verified again after every outage before writes resume.
            return UNAVAILABLE
        if not status.durable:
            return f"storage is not durable ({status.detail}): writes are refused"
        return None

    def stream_live(self, live: bool) -> None:
        """The worker's notification stream went live, or was lost (a
        :meth:`narad.broker.notifications.Listener.on_live` handler).

        A lost link may be a server restarted with other settings: the
        status known so far is dropped, so the next write waits for a fresh
        check instead of trusting the old server's answer for up to
        ``FRESH_S``.
        """
        if not live:
            self._losses += 1
            self._status = None
            self._checked = -math.inf

    def _refresh(self) -> None:
        losses = self._losses
        status = self._storage.server_status()
        if losses != self._losses:
            # Lost while asking: the answer may be the old server's.
            status = None
        else:
            self._checked = self._clock()
        self._status = status
        if status is None:
            # Writes are refused until it answers and is checked again: no
            # write is on disk meanwhile (the memory gauges keep their last).
            metrics.STORAGE_DURABLE.set(0)
            return
        metrics.STORAGE_DURABLE.set(int(status.durable))
        metrics.STORAGE_MEMORY_USED.set(status.memory_used)
        metrics.STORAGE_MEMORY_LIMIT.set(status.memory_limit)
        if status.durable != self._durable:
            if not status.durable:
                log.warning("storage is not durable: %s", status.detail)
            elif self._durable is not None:
                log.info("storage is durable again: %s", status.detail)
            self._durable = status.durable


def check_at_start(config: Config) -> None:
    """Refuse to start on a storage that is not durable, unless relaxed.

    Runs in the master (gunicorn ``on_starting``) before any worker starts. A
    storage that does not answer yet does not stop the node: its workers
    check it once it does, and refuse writes until then.
    """
    from narad.plugins import connect_storage
    from narad.plugins import load_plugins

    storage = connect_storage(config, load_plugins(config))
    try:
        status = storage.server_status()
    finally:
        storage.close()
    where = _without_password(config.storage_url)
    if status is None:
        log.warning("storage at %s is not answering yet", where)
        return
    if not status.memory_limit:
        log.warning(
            "storage at %s has no maxmemory: it grows until the machine runs out "
            "of memory; set one (writes over it answer 507)",
            where,
        )
    if status.durable:
        log.info("storage at %s is durable: %s", where, status.detail)
    elif config.get("storage.durability") == "relaxed":
        log.warning(
            "storage at %s is not durable (%s); `storage.durability` is relaxed, "
            "so a 202 does not mean the message is on disk",
            where,
            status.detail,
        )
    else:
        raise InvalidConfiguration(
            f"storage at {where} is not durable ({status.detail}), so a 202 would "
            "not mean the message is on disk: configure it with appendonly yes "
            "and appendfsync always, no-appendfsync-on-rewrite no and "
            "maxmemory-policy noeviction (as conf/valkey.conf does), or set "
            '`storage.durability` = "relaxed" to serve anyway'
        )


def _without_password(url: str) -> str:
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
    return parts._replace(netloc=netloc).geturl()
