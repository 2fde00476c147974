"""Broker services: they decide; storage scripts make each decision atomic."""

from __future__ import annotations

import time


def now_ms() -> int:
    """Wall-clock milliseconds: the "now" every storage script is given."""
    return time.time_ns() // 1_000_000
