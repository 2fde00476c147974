"""Reuse of freed frame-stack chunks, on the CPython versions that need it.

CPython 3.11+ keeps frames on a per-thread stack of chunks and, before
gh-142183, freed a chunk as soon as the frame at its start returned: a
recursion going back and forth over a chunk's edge (the validator on a deep
payload) mapped and unmapped memory on every crossing, and every gevent
greenlet took and freed a chunk of its own. CPython fixed it by caching one
chunk per thread (gh-142183: 3.15, and backported to 3.13.13 and 3.14.4);
3.11 and 3.12 take security fixes only and keep the churn.

On those versions a worker installs :mod:`narad._datastack` (a small optional C
extension, built where the installing machine has a compiler) when it
starts, not on ``import narad``: the CLI and a plugin author's tests keep the
interpreter's allocator. Without the extension everything works; only deep
payloads validate slower (``bench/validate.py``, the caller-depth rows).
"""

from __future__ import annotations

import sys

__all__ = ("install", "needed")

#: The first release of each minor version with CPython's own chunk cache.
FIXED_IN = {(3, 13): (3, 13, 13), (3, 14): (3, 14, 4)}


def needed(version: tuple[int, ...] = tuple(sys.version_info[:3])) -> bool:
    """Whether this CPython frees and maps frame-stack chunks on every crossing."""
    if sys.implementation.name != "cpython":
        return False
    minor = tuple(version[:2])
    if minor < (3, 13):
        return True
    fixed = FIXED_IN.get(minor)
    return fixed is not None and tuple(version[:3]) < fixed


def install() -> str:
    """Install the chunk cache where it is needed and built; say what happened.

    Returns:
        ``"installed"``, ``"not needed"`` (this CPython caches chunks itself)
        or ``"not built"`` (needed, but the extension was not compiled).
    """
    if not needed():
        return "not needed"
    try:
        from narad import _datastack
    except ImportError:
        return "not built"
    _datastack.install()
    return "installed"
