"""Keep the embedded Valkey running for as long as the node runs.

A thread of the process that owns the storage (``narad serve``'s master, not
a worker, whatever the worker class) waits on the server. If it exits
unbidden, the thread starts it again on the same data and socket, after a
backoff that grows with each failure. Meanwhile workers' storage calls fail
(``/readyz`` answers 503, writes 503) and reconnect by themselves once it is
back. Should it fail ``MAX_FAILURES`` times within ``WINDOW_S`` (it dies or
cannot start), the node stops with a non-zero status so that its service
manager restarts it whole. Each change (lost, restarting, back, giving up) is
logged once.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
from collections import deque
from collections.abc import Callable

from narad.errors import StorageError
from narad.serve.embedded import EmbeddedValkey

log = logging.getLogger(__name__)

MAX_FAILURES = 5
WINDOW_S = 60.0
FIRST_BACKOFF_S = 0.5
MAX_BACKOFF_S = 5.0


def _stop_node() -> None:
    # gunicorn's master stops gracefully on SIGTERM; serve_forever then exits
    # with the status the supervisor records.
    os.kill(os.getpid(), signal.SIGTERM)


def describe_exit(code: int | None) -> str:
    """How the server ended, from :meth:`EmbeddedValkey.wait`'s answer."""
    if code is None:
        return "exited (its status went to gunicorn's reaper)"
    if code < 0:
        try:
            return f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with status {code}" if code else "exited"


class Supervisor:
    """Restarts ``server`` whenever it exits until :meth:`stop` is called."""

    def __init__(
        self,
        server: EmbeddedValkey,
        *,
        give_up: Callable[[], None] = _stop_node,
        max_failures: int = MAX_FAILURES,
        window_s: float = WINDOW_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.server = server
        self.gave_up = False
        self._give_up = give_up
        self._max_failures = max_failures
        self._window_s = window_s
        self._clock = clock
        self._failures: deque[float] = deque()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(
            target=self._run, name="narad-supervisor", daemon=True
        )
        self._thread.start()

    def stop(self) -> None:
        """Stop watching, then stop the server."""
        self._stopping.set()
        self.server.stop()
        if self._thread is not None:
            self._thread.join(30)
        self.server.stop()  # one it may have started meanwhile

    def _run(self) -> None:
        try:
            while not self._stopping.is_set():
                code = self.server.wait()
                if self._stopping.is_set():
                    return
                log.error(
                    "embedded Valkey %s: %s",
                    describe_exit(code),
                    self.server.log_tail() or "(its log is empty)",
                )
                if not self._restart():
                    return
        except Exception:
            # Never die silently: servers this thread started would follow it
            # (their parent-death signal), with nobody left to restart them.
            log.exception("embedded Valkey supervisor failed")
            self._stop_the_node()

    def _restart(self) -> bool:
        """Bring the server back; False if stopping or given up."""
        while not self._stopping.is_set():
            now = self._clock()
            self._failures.append(now)
            while self._failures[0] <= now - self._window_s:
                self._failures.popleft()
            failures = len(self._failures)
            if failures >= self._max_failures:
                log.error(
                    "embedded Valkey failed %d times within %.0f s; stopping the "
                    "node so that its service manager restarts it",
                    failures,
                    self._window_s,
                )
                self._stop_the_node()
                return False
            # The first restart is immediate; then FIRST_BACKOFF_S, doubling.
            delay = 0.0 if failures == 1 else FIRST_BACKOFF_S * 2 ** (failures - 2)
            delay = min(delay, MAX_BACKOFF_S)
            log.warning(
                "restarting embedded Valkey on %s in %.1f s (failure %d; the node "
                "stops at %d within %.0f s)",
                self.server.data_dir,
                delay,
                failures,
                self._max_failures,
                self._window_s,
            )
            if self._stopping.wait(delay):
                return False
            try:
                self.server.start()
            except StorageError as exc:
                log.error("embedded Valkey did not come back: %s", exc)
                continue
            log.info("embedded Valkey is back (pid %d)", self.server.process.pid)
            return True
        return False

    def _stop_the_node(self) -> None:
        self.gave_up = True
        self._give_up()
