"""How fast failed authentications may come: per (user name, address), per
address, and per user name.

A limiter holds one bucket per key of ``burst`` failures that refills at
``per_minute``; a failure takes one. A node has three
(:class:`narad.security.authn.Authenticator` says how each is used):

- per user name *from one address* (``security.failures_*``) and per client
  address (``security.address_failures_*``): while either bucket holds less
  than one, attempts for that key are answered 429 without checking the
  password, so guessing costs the node nothing and gains the guesser
  nothing;
- per user name from anywhere (``security.user_failures_*``): it only ever
  *delays* attempts from addresses that have been failing, and never touches
  one from an address that has not, so an attack on a name cannot lock its
  owner out. A delayed attempt reserves its turn (:meth:`FailureLimiter.reserve`):
  the bucket goes below zero by the turns handed out, and a turn further
  away than the caller will wait is refused instead.

The buckets live in each worker's memory, and a node's ``burst`` and
``per_minute`` are split evenly across its workers (as
``server.max_connections`` is): spread over every worker, an attacker gets
the node's figures, and one who lands on a single worker a share of them.
Per worker, not in storage, because counting in storage would turn every
failed guess into a storage write (the attacker's traffic amplified into
the one shared component, with keys no expiry may clean up) and add a round
trip to the path being flooded; the price is that a cluster of N nodes
allows N times a node's figures, still far from line rate.
"""

from __future__ import annotations

import ipaddress
import math
import threading
import time
from collections import OrderedDict
from collections.abc import Callable

MAX_KEYS = 100_000  # buckets a worker remembers; the least recent go first


def address_key(address: str) -> str:
    """The key of a client address: IPv6 addresses count per /64, since
    one host usually holds a whole /64; an IPv4 client of a dual-stack
    socket (``::ffff:a.b.c.d``) counts as its IPv4 address."""
    if ":" not in address:
        return address
    try:
        mapped = ipaddress.IPv6Address(address).ipv4_mapped
        if mapped is not None:
            return str(mapped)
        return str(ipaddress.IPv6Network(f"{address}/64", strict=False))
    except ValueError:
        return address


class FailureLimiter:
    def __init__(
        self,
        *,
        burst: int,
        per_minute: int,
        share: int = 1,
        clock: Callable[[], float] = time.monotonic,
        max_keys: int = MAX_KEYS,
    ) -> None:
        self.capacity = max(1.0, burst / share)
        self.rate = per_minute / 60 / share  # failures per second
        self._clock = clock
        self._max_keys = max_keys
        self._buckets: OrderedDict[str, tuple[float, float]] = OrderedDict()
        self._lock = threading.Lock()

    def _tokens(self, key: str, now: float) -> float:
        tokens, at = self._buckets.get(key, (self.capacity, now))
        return min(self.capacity, tokens + (now - at) * self.rate)

    def wait(self, key: str) -> float:
        """Seconds before an attempt for ``key`` may be checked; 0: now."""
        if key not in self._buckets:
            return 0.0  # never failed (or forgotten): the common case, lock-free
        with self._lock:
            tokens = self._tokens(key, self._clock())
        if tokens >= 1:
            return 0.0
        return (1 - tokens) / self.rate if self.rate else math.inf

    def clean(self, key: str) -> bool:
        """Whether ``key`` has no failure left to pay off (a full bucket)."""
        if key not in self._buckets:
            return True
        with self._lock:
            return self._tokens(key, self._clock()) >= self.capacity

    def fail(self, key: str) -> None:
        """Count a failed authentication against ``key``."""
        with self._lock:
            now = self._clock()
            tokens = self._tokens(key, now)
            # Down to empty; below it only by reserved turns, never by failures.
            self._put(key, max(min(tokens, 0.0), tokens - 1), now)

    def reserve(self, key: str, max_wait: float) -> float | None:
        """A turn for an attempt on ``key``: seconds to wait for it (0: now,
        nothing reserved), or None when the next free turn is more than
        ``max_wait`` s away (nothing reserved either).

        A turn taken counts as that attempt's failure in advance: a caller
        whose attempt then succeeds gives it back with :meth:`release`, and
        one whose attempt fails does not :meth:`fail` it again.
        """
        with self._lock:
            now = self._clock()
            tokens = self._tokens(key, now)
            if tokens >= 1:
                return 0.0
            wait = (1 - tokens) / self.rate if self.rate else math.inf
            if wait > max_wait:
                return None
            self._put(key, tokens - 1, now)
            return wait

    def release(self, key: str) -> None:
        """Give back a turn :meth:`reserve` took (its attempt succeeded)."""
        with self._lock:
            if key in self._buckets:
                now = self._clock()
                self._put(key, min(self.capacity, self._tokens(key, now) + 1), now)

    def _put(self, key: str, tokens: float, now: float) -> None:
        self._buckets[key] = (tokens, now)
        self._buckets.move_to_end(key)
        while len(self._buckets) > self._max_keys:
            self._buckets.popitem(last=False)
