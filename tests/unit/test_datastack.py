"""narad._datastack: freed frame-stack chunks are reused, not unmapped."""

from __future__ import annotations

import sys
import threading

import greenlet

import narad  # noqa: F401  (installs the wrapper)
from narad import _datastack


def recurse(depth: int) -> int:
    return 0 if depth == 0 else 1 + recurse(depth - 1)


def test_importing_narad_installs_it():
    assert _datastack.stats()["installed"] is True
    _datastack.install()  # again: nothing changes
    assert _datastack.stats()["installed"] is True


def test_a_recursion_back_and_forth_over_a_chunk_edge_reuses_the_chunk():
    # A few hundred frames span several 16 KiB chunks: every return below a
    # chunk's first frame frees it, every call past the edge takes one.
    before = _datastack.stats()["reused"]
    for _ in range(50):
        assert recurse(300) == 300
    stats = _datastack.stats()
    assert stats["reused"] - before >= 50
    assert 1 <= stats["spares"] <= 16


def test_threads_and_greenlets_take_and_give_back_chunks_safely():
    before = _datastack.stats()["reused"]
    results: list[int] = []

    def work() -> None:
        results.append(recurse(200))

    for _ in range(20):
        threads = [threading.Thread(target=work) for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    for _ in range(200):
        greenlet.greenlet(work).switch()
    assert results == [200] * (20 * 4 + 200)
    assert _datastack.stats()["reused"] - before >= 200


def test_a_deep_recursion_still_grows_and_shrinks_the_stack():
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(20_000)
    try:
        assert recurse(15_000) == 15_000
    finally:
        sys.setrecursionlimit(limit)
    assert recurse(10) == 10
