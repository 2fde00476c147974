"""The cyclic garbage collector's policy, chosen by CPython version, and its
pauses measured.

Everything Narad does to Python's cyclic collector is here:

- **In a worker, on its clock** (:class:`Ticker`, :func:`tune`): CPython
  starts a young collection when new containers outnumber freed ones by the
  first threshold. Under thousands of long polls they stay even (a new
  poll's objects are born as an old one's die), so young collections came
  seldom and found tens of thousands of waiting objects: pauses of hundreds
  of milliseconds with 10,000 waiters (``bench/messaging.py``'s waiters
  phase). So the worker's run loop collects on its tick (every
  :data:`TICK_S`): the young generation every tick, more on the policy's
  slower rates, and CPython's own allocation-driven collections still run,
  for bursts, with thresholds set to about the tick's rates.
- **What outlives start-up is frozen** (:func:`freeze_survivors`): modules,
  plugins and settings last the worker's life, so no collection walks them.
- **Registration pauses the collector** (:func:`collector_paused`): a schema
  registration allocates hundreds of thousands of small containers, none in
  a cycle, and each burst made the collector traverse the parsed document
  again (``bench/register.py`` measures it).
- **Pauses are measured** (:func:`watch_pauses`): ``gc.callbacks`` times
  every collection of a worker, flushed on its tick into the histogram
  ``narad_gc_pause_seconds`` by generation (:mod:`narad.metrics`).

The policy by version (:func:`policy_for`):

- CPython 3.11 to 3.13, and again from 3.15 (which brought the generational
  collector back in place of 3.14's incremental one): three generations;
  the tick collects the young one, the middle one every
  :attr:`Policy.middle_every` ticks and all of them every
  :attr:`Policy.full_every`, since cyclic garbage past the middle generation
  would otherwise wait for allocations to outrun frees, which a steady load
  never does.
- CPython 3.14's incremental collector: two generations, young and old;
  ``gc.collect(1)`` collects the young one and an *increment* of the old one,
  and ``gc.set_threshold`` reads only its first two values (the second is
  the rate the old generation is scanned at). The same ticks then give
  increments where 3.11 gave middle collections, and the full collection
  stays. Should a 3.14 point release bring the generational collector back,
  its version goes with the generational policy here.

The free-threaded build's collector is neither; Narad does not ship for it.
"""

from __future__ import annotations

import gc
import sys
import time
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

#: The worker's run loop ticks this often (seconds); the policy's rates are
#: in ticks.
TICK_S = 0.1


@dataclass(frozen=True)
class Policy:
    """What a worker does with the collector."""

    #: Which collector this is for: "generational" or "incremental".
    kind: str
    #: ``gc.set_threshold``'s arguments for CPython's own collections.
    thresholds: tuple[int, ...]
    #: Every this many ticks ``gc.collect(1)``: the middle generation
    #: (generational) or the young one and an increment of the old one
    #: (incremental); the other ticks collect the young one.
    middle_every: int
    #: Every this many ticks a full collection.
    full_every: int

    def generation_at(self, tick: int) -> int:
        """The generation :class:`Ticker` collects at its ``tick``-th tick."""
        if tick % self.full_every == 0:
            return 2
        if tick % self.middle_every == 0:
            return 1
        return 0


# 1 s: a poll's objects are walked once in the middle generation, not at
# every young collection; 100 s between full collections.
GENERATIONAL = Policy(
    kind="generational",
    thresholds=(700, 10, 100),
    middle_every=10,
    full_every=1000,
)
# The same rates: an increment of the old generation each second (its
# threshold's second value, the old generation's scan rate, is CPython's
# default), all of it every 100 s.
INCREMENTAL = Policy(
    kind="incremental",
    thresholds=(700, 10),
    middle_every=10,
    full_every=1000,
)


def policy_for(version: tuple[int, ...]) -> Policy:
    """The policy for CPython ``version`` (``sys.version_info``)."""
    if tuple(version[:2]) == (3, 14):
        return INCREMENTAL
    return GENERATIONAL


#: This interpreter's policy.
POLICY = policy_for(sys.version_info)


def tune(policy: Policy = POLICY) -> None:
    """Set this process's collector thresholds to about the rates
    :class:`Ticker` collects at."""
    gc.set_threshold(*policy.thresholds)


class Ticker:
    """A worker's cyclic collections on its clock, one per :meth:`tick`
    (every :data:`TICK_S`), as ``policy`` says; each tick also hands the
    pauses measured since the last one to the metrics."""

    def __init__(self, policy: Policy = POLICY) -> None:
        self.policy = policy
        self.ticks = 0

    def tick(self) -> None:
        self.ticks += 1
        gc.collect(self.policy.generation_at(self.ticks))
        flush_pauses()


def freeze_survivors() -> None:
    """Collect, then move every object left to the permanent generation,
    which no collection walks: what a worker's loaded app holds lasts its
    life. Reference counting still frees what of it goes; only a cycle in
    it would stay."""
    gc.collect()
    gc.freeze()


@contextmanager
def collector_paused() -> Iterator[None]:
    """Pause the cyclic collector for the block (a schema registration).

    Reference counting frees everything the block allocates regardless;
    other threads of the process keep running, and their cyclic garbage only
    waits for the block, which its caller keeps short. Only the thread that
    paused the collector resumes it, so overlapping blocks never leave it
    off, and a collector someone else turned off stays off.
    """
    paused = gc.isenabled()
    if paused:
        gc.disable()
    try:
        yield
    finally:
        if paused:
            gc.enable()


# -- pauses ---------------------------------------------------------------------

#: Collections timed and not yet handed to the metrics: (generation, seconds).
#: Bounded, should nothing flush them (a process that never ticks).
_pauses: deque[tuple[int, float]] = deque(maxlen=100_000)
_started = [0.0]


def _on_collection(phase: str, info: dict[str, Any]) -> None:
    # Runs inside the collection: no lock (the collection may have started
    # while this thread held one), nothing but a clock read and an append.
    if phase == "start":
        _started[0] = time.perf_counter()
    else:
        _pauses.append((info["generation"], time.perf_counter() - _started[0]))


def watch_pauses() -> None:
    """Time every collection of this process from now on (a worker's,
    after the fork)."""
    if _on_collection not in gc.callbacks:
        gc.callbacks.append(_on_collection)


def unwatch_pauses() -> None:
    """Stop timing collections; those timed and not flushed are dropped."""
    while _on_collection in gc.callbacks:
        gc.callbacks.remove(_on_collection)
    _pauses.clear()


def flush_pauses() -> int:
    """Hand the pauses timed since the last flush to the histogram
    ``narad_gc_pause_seconds``; how many there were."""
    if not _pauses:
        return 0
    # Imported here: metrics must not load before the CLI has set
    # PROMETHEUS_MULTIPROC_DIR, and this module loads with the schema engine.
    from narad.metrics import GC_PAUSE_SECONDS
    from narad.metrics import TALLY

    count = 0
    while _pauses:
        generation, seconds = _pauses.popleft()
        TALLY.observe(GC_PAUSE_SECONDS, (str(generation),), seconds)
        count += 1
    return count
