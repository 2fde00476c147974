from __future__ import annotations

import multiprocessing
import os
import signal
import time

import pytest

from narad.errors import CapacityBusy
from narad.metrics import SCHEMA_VALIDATIONS_IN_FLIGHT
from narad.schema.capacity import ValidationCapacity


def _hold(directory: str, ready, release) -> None:
    capacity = ValidationCapacity(directory, slots=1)
    with capacity.slot():
        ready.set()
        release.wait(30)


def _in_flight() -> float:
    return SCHEMA_VALIDATIONS_IN_FLIGHT._value.get()


def test_one_slot_per_cpu_by_default(tmp_path):
    assert ValidationCapacity(tmp_path).slots == (os.cpu_count() or 1)


def test_slot_counts_in_flight_and_releases(tmp_path):
    capacity = ValidationCapacity(tmp_path, slots=1, deadline=0.05)
    before = _in_flight()
    with capacity.slot():
        assert _in_flight() == before + 1
    assert _in_flight() == before
    with capacity.slot():
        pass


def test_released_when_the_block_raises(tmp_path):
    capacity = ValidationCapacity(tmp_path, slots=1, deadline=0.05)
    with pytest.raises(RuntimeError), capacity.slot():
        raise RuntimeError("validation blew up")
    with capacity.slot():
        pass


def test_busy_within_one_process(tmp_path):
    capacity = ValidationCapacity(tmp_path, slots=2, deadline=0.1)
    with capacity.slot(), capacity.slot():
        started = time.monotonic()
        busy = pytest.raises(CapacityBusy, match="validation capacity busy, retry")
        with busy, capacity.slot():
            pass
        assert time.monotonic() - started >= 0.1  # it waited its deadline out


def test_two_processes_contend_and_waiter_gets_the_freed_slot(tmp_path):
    ctx = multiprocessing.get_context("fork")
    ready, release = ctx.Event(), ctx.Event()
    holder = ctx.Process(target=_hold, args=(str(tmp_path), ready, release))
    holder.start()
    try:
        assert ready.wait(10)
        capacity = ValidationCapacity(tmp_path, slots=1, deadline=0.1)
        with pytest.raises(CapacityBusy), capacity.slot():
            pass
        release.set()
        waiting = ValidationCapacity(tmp_path, slots=1, deadline=5)
        with waiting.slot():
            pass
    finally:
        release.set()
        holder.join(10)


def test_a_killed_holder_frees_its_slot(tmp_path):
    ctx = multiprocessing.get_context("fork")
    ready, release = ctx.Event(), ctx.Event()
    holder = ctx.Process(target=_hold, args=(str(tmp_path), ready, release))
    holder.start()
    assert ready.wait(10)
    capacity = ValidationCapacity(tmp_path, slots=1, deadline=0.1)
    with pytest.raises(CapacityBusy), capacity.slot():
        pass
    os.kill(holder.pid, signal.SIGKILL)
    holder.join(10)
    with ValidationCapacity(tmp_path, slots=1, deadline=2).slot():
        pass
