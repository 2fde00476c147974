"""narad.collector: the cyclic collector's policy by CPython version, the
worker's ticks, the registration's pause and the pause histogram."""

from __future__ import annotations

import gc
import sys
import threading

import pytest

from narad import collector
from narad import metrics
from narad.collector import GENERATIONAL
from narad.collector import INCREMENTAL
from narad.collector import Ticker
from narad.collector import collector_paused
from narad.collector import policy_for


@pytest.fixture
def thresholds():
    before = gc.get_threshold()
    yield
    gc.set_threshold(*before)


@pytest.fixture
def watching():
    collector.unwatch_pauses()
    collector.watch_pauses()
    yield
    collector.unwatch_pauses()


def histogram_counts() -> dict[str, float]:
    """narad_gc_pause_seconds's count per generation, as exposed."""
    counts = {}
    for family in metrics.GC_PAUSE_SECONDS.collect():
        for sample in family.samples:
            if sample.name == "narad_gc_pause_seconds_count":
                counts[sample.labels["generation"]] = sample.value
    return counts


def test_the_policy_follows_the_cpython_version():
    assert policy_for((3, 11, 9)) is GENERATIONAL
    assert policy_for((3, 12, 0)) is GENERATIONAL
    assert policy_for((3, 13, 5)) is GENERATIONAL
    # 3.14's collector is incremental: two generations, two thresholds.
    assert policy_for((3, 14, 0)) is INCREMENTAL
    assert len(INCREMENTAL.thresholds) == 2
    # 3.15 brought the generational collector back.
    assert policy_for((3, 15, 0)) is GENERATIONAL
    assert policy_for(sys.version_info) is collector.POLICY


def test_generational_thresholds_match_the_ticks_rates(thresholds):
    collector.tune(GENERATIONAL)
    policy = GENERATIONAL
    assert gc.get_threshold() == (700, 10, 100)
    # CPython's own middle and full collections come at about the tick's rates.
    assert policy.thresholds[1] == policy.middle_every
    assert policy.thresholds[2] == policy.full_every // policy.middle_every


def test_this_interpreters_policy_is_set(thresholds):
    collector.tune()
    assert gc.get_threshold()[:2] == collector.POLICY.thresholds[:2]


@pytest.mark.parametrize("policy", [GENERATIONAL, INCREMENTAL])
def test_a_ticker_collects_young_each_tick_middle_and_full_on_theirs(
    policy, monkeypatch
):
    collected = []
    monkeypatch.setattr(gc, "collect", collected.append)
    ticker = Ticker(policy)
    for _ in range(policy.full_every):
        ticker.tick()
    every = policy.middle_every
    assert collected[: every - 1] == [0] * (every - 1)
    assert collected[every - 1] == 1
    assert collected.count(2) == 1 and collected[-1] == 2
    assert collected.count(1) == policy.full_every // every - 1
    assert len(collected) == policy.full_every


def test_survivors_are_frozen():
    before = gc.get_freeze_count()
    kept = [[] for _ in range(100)]
    try:
        collector.freeze_survivors()
        assert gc.get_freeze_count() >= before + len(kept)
        # The frozen ones are in no generation a collection walks.
        young = {id(o) for o in gc.get_objects(0)}
        assert not any(id(k) in young for k in kept[:3])
    finally:
        gc.unfreeze()


def test_the_collector_is_paused_for_the_block_and_resumed():
    assert gc.isenabled()
    with collector_paused():
        assert not gc.isenabled()
    assert gc.isenabled()


def test_a_failing_block_resumes_the_collector():
    with pytest.raises(ValueError), collector_paused():
        raise ValueError("bad schema")
    assert gc.isenabled()


def test_only_the_block_that_paused_the_collector_resumes_it():
    # Nested (or overlapping, in another thread): the inner block leaves the
    # collector as the outer one set it.
    with collector_paused():
        with collector_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()


def test_a_collector_turned_off_elsewhere_stays_off():
    gc.disable()
    try:
        with collector_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_overlapping_blocks_in_threads_leave_the_collector_on():
    inside = threading.Event()
    leave = threading.Event()

    def other():
        with collector_paused():
            inside.set()
            leave.wait(5)

    thread = threading.Thread(target=other)
    thread.start()
    inside.wait(5)
    with collector_paused():
        assert not gc.isenabled()
    leave.set()
    thread.join(5)
    assert gc.isenabled()


def test_pauses_are_timed_by_generation_and_flushed_to_the_histogram(watching):
    before = histogram_counts()
    gc.collect(0)
    gc.collect(2)
    pending = list(collector._pauses)
    assert [g for g, _ in pending].count(0) >= 1
    assert [g for g, _ in pending].count(2) >= 1
    assert all(seconds >= 0 for _, seconds in pending)
    flushed = collector.flush_pauses()
    assert flushed >= 2
    metrics.TALLY.flush()
    after = histogram_counts()
    assert after["0"] >= before.get("0", 0) + 1
    assert after["2"] >= before.get("2", 0) + 1
    assert collector.flush_pauses() == 0  # nothing timed twice


def test_a_ticks_own_collection_reaches_the_histogram(watching):
    before = histogram_counts().get("0", 0)
    Ticker(GENERATIONAL).tick()  # its first tick collects the young generation
    metrics.TALLY.flush()
    assert histogram_counts()["0"] >= before + 1


def test_nothing_is_timed_unless_watched():
    collector.unwatch_pauses()
    gc.collect(0)
    assert collector.flush_pauses() == 0


def test_watching_twice_times_each_collection_once(watching):
    collector.watch_pauses()
    assert gc.callbacks.count(collector._on_collection) == 1
