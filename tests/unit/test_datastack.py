"""narad._datastack: freed frame-stack chunks are reused, not unmapped; and
narad.datastack installs it only where CPython lacks its own chunk cache."""

from __future__ import annotations

import subprocess
import sys
import threading

import greenlet
import pytest

from narad import _datastack
from narad import datastack


def recurse(depth: int) -> int:
    return 0 if depth == 0 else 1 + recurse(depth - 1)


@pytest.mark.parametrize(
    ("version", "needed"),
    [
        ((3, 11, 7), True),
        ((3, 12, 12), True),
        ((3, 13, 12), True),
        ((3, 13, 13), False),
        ((3, 14, 3), True),
        ((3, 14, 4), False),
        ((3, 15, 0), False),
    ],
)
def test_it_is_needed_only_before_cpythons_own_chunk_cache(version, needed):
    assert datastack.needed(version) is needed


def test_importing_narad_leaves_the_allocator_alone():
    probe = (
        "import narad, narad.cli, narad.testing, narad._datastack as d;"
        "print(d.stats()['installed'])"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "False"


def test_install_says_what_it_did():
    expected = "installed" if datastack.needed() else "not needed"
    assert datastack.install() == expected
    assert _datastack.stats()["installed"] is datastack.needed()


def test_a_recursion_back_and_forth_over_a_chunk_edge_reuses_the_chunk():
    _datastack.install()
    # A few hundred frames span several 16 KiB chunks: every return below a
    # chunk's first frame frees it, every call past the edge takes one.
    before = _datastack.stats()["reused"]
    for _ in range(50):
        assert recurse(300) == 300
    stats = _datastack.stats()
    assert stats["reused"] - before >= 50
    assert 1 <= stats["spares"] <= 16


def test_threads_and_greenlets_take_and_give_back_chunks_safely():
    _datastack.install()
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
    _datastack.install()
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(20_000)
    try:
        assert recurse(15_000) == 15_000
    finally:
        sys.setrecursionlimit(limit)
