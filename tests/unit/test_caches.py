"""Bounded caches: entries, estimated bytes, topics, and their metrics."""

from __future__ import annotations

import pytest
from prometheus_client import REGISTRY

from narad.caches import BoundedCache
from narad.caches import Caches
from narad.caches import topic_key


def by_topic(max_entries: int = 100, max_bytes: int | None = None) -> BoundedCache:
    return BoundedCache(
        "t", max_entries=max_entries, max_bytes=max_bytes, topic_of=lambda k: k[0]
    )


def test_least_recently_used_entries_go_past_the_entry_bound():
    cache = BoundedCache("t", max_entries=3)
    for key in "abc":
        cache.put(key, key.upper())
    assert cache.get("a") == "A"  # now the most recently used
    cache.put("d", "D")
    assert list(cache) == ["c", "a", "d"]
    assert cache.get("b") is None
    assert cache.take_evictions() == 1
    assert cache.take_evictions() == 0


def test_entries_go_past_the_byte_bound_and_a_huge_one_is_not_kept():
    cache = BoundedCache("t", max_entries=100, max_bytes=1000)
    cache.put("a", 1, 400)
    cache.put("b", 2, 400)
    cache.put("c", 3, 400)
    assert list(cache) == ["b", "c"]
    assert cache.nbytes == 800
    cache.put("huge", 4, 1001)
    assert "huge" not in cache
    assert cache.nbytes == 800
    cache.put("b", 5, 100)  # replaced: its old size no longer counts
    assert cache.nbytes == 500


def test_a_topics_entries_are_dropped_together_and_only_them():
    cache = by_topic()
    cache.put(("t1", "e1", 1), "v1", 10)
    cache.put(("t1", "e1", 2), "v2", 10)
    cache.put(("t2", "e1", 1), "w", 10)
    assert sorted(cache.topics()) == ["t1", "t2"]
    cache.drop_topic("t1")
    assert list(cache) == [("t2", "e1", 1)]
    assert cache.nbytes == 10
    assert cache.topics() == ["t2"]
    cache.drop_topic("unknown")
    assert len(cache) == 1


def test_retain_keeps_what_still_belongs_to_the_topic():
    cache = by_topic()
    cache.put(("t", "old", 1), "a")
    cache.put(("t", "new", 1), "b")
    cache.put(("t", "new", 2), "c")
    cache.put(("u", "old", 1), "d")
    cache.retain("t", ("new", 2), lambda key, state: key[1:] == state)
    assert sorted(cache) == [("t", "new", 2), ("u", "old", 1)]


def test_eviction_keeps_the_topic_index_in_step():
    cache = by_topic(max_entries=2)
    cache.put(("a", 1), 1)
    cache.put(("b", 1), 1)
    cache.put(("c", 1), 1)
    assert sorted(cache.topics()) == ["b", "c"]
    cache.drop_topic("b")
    assert cache.topics() == ["c"]


def test_a_cache_keyed_by_topic_name_and_a_shared_one():
    records = BoundedCache("r", max_entries=10, topic_of=topic_key)
    records.put("t", 1)
    assert records.topics() == ["t"]
    records.drop_topic("t")
    assert len(records) == 0
    shared = BoundedCache("p", max_entries=10)
    shared.put("^a$", 1)
    shared.drop_topic("^a$")  # not keyed by topic: nothing to drop
    assert len(shared) == 1
    assert shared.topics() == []
    with pytest.raises(TypeError):
        shared.retain("t", None, lambda key, state: False)


def test_resize_evicts_what_no_longer_fits():
    cache = BoundedCache("t", max_entries=10, max_bytes=100)
    for i in range(10):
        cache.put(i, i, 10)
    cache.resize(max_entries=5, max_bytes=30)
    assert list(cache) == [7, 8, 9]


def test_bounds_must_leave_room():
    with pytest.raises(ValueError):
        BoundedCache("t", max_entries=0)


def test_caches_publish_entries_bytes_and_evictions():
    cache = BoundedCache("test_published", max_entries=2, max_bytes=1000)
    caches = Caches(cache)
    for i in range(3):
        cache.put(i, i, 100)
    caches.publish()

    def sample(name: str) -> float | None:
        return REGISTRY.get_sample_value(name, {"cache": "test_published"})

    assert sample("narad_cache_entries") == 2
    assert sample("narad_cache_bytes") == 200
    assert sample("narad_cache_evictions_total") == 1
    caches.publish()  # counted once
    assert sample("narad_cache_evictions_total") == 1
    with pytest.raises(ValueError):
        caches.add(BoundedCache("test_published", max_entries=1))
