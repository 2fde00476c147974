"""The per-node validation capacity bound: one validation per CPU core.

Costly validations (large payloads, high-cost schemas) run under this bound,
shared by every worker process of the node. A slot is an exclusive
``fcntl.flock`` on one of N files in a node-local directory: the kernel drops
the lock when its descriptor closes, including when the process holding it is
killed, so a dead worker never keeps a slot.
"""

from __future__ import annotations

import fcntl
import os
import random
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from narad.errors import CapacityBusy
from narad.metrics import SCHEMA_CAPACITY_REFUSED
from narad.metrics import SCHEMA_VALIDATIONS_IN_FLIGHT

__all__ = ("ValidationCapacity",)


class ValidationCapacity:
    """Slots for costly validations, shared by the processes of one node.

    Args:
        directory: Node-local directory for the slot files (created if
            missing). Every worker of the node must use the same one.
        slots: How many validations may run at once; the CPU count by default.
        deadline: Seconds to wait for a free slot before giving up.
        step: Longest pause between two rounds of tries, in seconds.
    """

    def __init__(
        self,
        directory: str | os.PathLike[str],
        *,
        slots: int | None = None,
        deadline: float = 5.0,
        step: float = 0.01,
    ) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.slots = slots if slots is not None else os.cpu_count() or 1
        if self.slots < 1:
            raise ValueError("validation capacity needs at least one slot")
        self.deadline = deadline
        self.step = step
        self.paths = [str(self.directory / f"slot-{i}.lock") for i in range(self.slots)]

    @contextmanager
    def slot(self) -> Iterator[None]:
        """Hold one slot for the duration of the ``with`` block.

        Raises:
            CapacityBusy: no slot freed up within ``deadline`` seconds.
        """
        fd = self._acquire()
        SCHEMA_VALIDATIONS_IN_FLIGHT.inc()
        try:
            yield
        finally:
            SCHEMA_VALIDATIONS_IN_FLIGHT.dec()
            os.close(fd)  # closing the descriptor releases the lock

    def _acquire(self) -> int:
        give_up = time.monotonic() + self.deadline
        while True:
            fd = self._try_once()
            if fd is not None:
                return fd
            remaining = give_up - time.monotonic()
            if remaining <= 0:
                SCHEMA_CAPACITY_REFUSED.inc()
                raise CapacityBusy()
            # Jittered so waiting workers do not retry in lockstep.
            time.sleep(min(remaining, self.step * random.uniform(0.5, 1.0)))

    def _try_once(self) -> int | None:
        """Try every slot once, starting at a random one; return a locked fd."""
        first = random.randrange(self.slots)
        for i in range(self.slots):
            path = self.paths[(first + i) % self.slots]
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                continue
            except BaseException:
                os.close(fd)
                raise
            return fd
        return None
