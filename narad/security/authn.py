"""Who is asking: HTTP Basic credentials checked against the stored users.

A password check is a scrypt hash (about 0.2 s of CPU, 16 MiB of memory),
so each worker remembers the credentials it verified, keyed by a keyed hash
of the ``user:password`` bytes (never the password itself): after the first
request a client's credentials cost a dictionary lookup, and once an entry
is ``security.auth_cache_s`` old, one read of the user's record (a hash
again only if the stored hash changed). The cache follows the users:

- The worker's users listener (a :class:`narad.broker.notifications.Listener`
  for :attr:`~narad.storage.Event.USER_CHANGED` alone) drops a user's entries
  the moment any node changes or deletes that user, so a new password or a
  deletion holds on every worker within the notification's latency.
- While that stream is not live (starting, lost, or a backend without
  notifications), and for entries made before it last went live, an entry
  is not trusted alone: the request re-reads the user's record and reuses
  the entry only if the stored hash is unchanged (one round trip instead of
  a hash).
- A verification that raced a change is cached only once the user is read
  again after it (a generation counter says a change came).

Hashes run on :mod:`narad.serve.offload`'s native threads, at most
:data:`CHECK_SLOTS` at once per worker with at most :data:`CHECK_QUEUE`
waiting; past that the answer is 503 at once. With the failure limits
(:mod:`narad.security.limiter`, per user name from one address and per
client address), which answer 429 before any hash once either has failed too
often, a flood of bad passwords costs a worker a bounded amount of CPU and
memory. A third limit, per user name from anywhere, slows a guesser who
spreads over many addresses: once the name has failed too often, attempts
for it from addresses that have been failing wait their turn (at most
:data:`MAX_DELAY_S`, else 429). An attempt from an address that has not been
failing is never held back by it, so an attack on a name never locks its
owner out.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import math
import re
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from operator import itemgetter
from typing import NoReturn

from narad import metrics
from narad.broker.notifications import Listener
from narad.caches import BoundedCache
from narad.errors import AuthenticationRequired
from narad.errors import BadCredentials
from narad.errors import CredentialChecksBusy
from narad.errors import MalformedCredentials
from narad.errors import TooManyFailures
from narad.security.grants import Permissions
from narad.security.limiter import FailureLimiter
from narad.security.limiter import address_key
from narad.security.passwords import MAX_PASSWORD
from narad.security.passwords import Scrypt
from narad.security.passwords import hash_password
from narad.security.passwords import return_hash_memory
from narad.security.passwords import verify_password
from narad.serve import offload
from narad.storage import Event
from narad.storage import Storage
from narad.storage import UserRecord

USERNAME = re.compile(r"[A-Za-z0-9._@-]{1,64}")
CHECK_SLOTS = 2  # hashes at once per worker: 2 x 16 MiB at the default cost
CHECK_QUEUE = 64  # requests waiting for a slot before the next one gets 503
CHECK_WAIT_S = 5.0
# The longest an attempt from a failing address waits for its turn under the
# user-wide limit; a turn further away is refused (429) instead.
MAX_DELAY_S = 5.0
MAX_CACHED = 10_000  # credentials a worker remembers (narad_cache_entries)
# How old an entry the users stream cannot vouch for may be and still let a
# long poll look again without reading the user (see Authenticator.reconfirm).
RECONFIRM_S = 1.0
# base64 of the longest user:password a stored user can have
_MAX_ENCODED = 4 * math.ceil((64 + 1 + 4 * MAX_PASSWORD) / 3)


@dataclass(frozen=True)
class Principal:
    """An authenticated user: their name and compiled grants."""

    name: str
    permissions: Permissions

    @classmethod
    def of(cls, user: UserRecord) -> Principal:
        return cls(user.name, Permissions(user.grants))


#: Who a request is while security is off: allowed everything, owns nothing.
OPEN = Principal("", Permissions.everything())


@dataclass(frozen=True)
class _Entry:
    principal: Principal
    password_hash: str  # the stored hash the password was checked against
    at: float  # when that hash was read


class _Flight:
    """A credential check in progress, and its outcome for those waiting."""

    __slots__ = ("done", "failed", "principal")

    def __init__(self) -> None:
        self.done = threading.Event()
        self.failed = False
        self.principal: Principal | None = None


class Hasher:
    """scrypt, bounded: at most :data:`CHECK_SLOTS` hashes at once in this
    worker, off the event loop."""

    def __init__(self, params: Scrypt) -> None:
        return_hash_memory()
        self.params = params
        self._slots = threading.BoundedSemaphore(CHECK_SLOTS)
        self._waiting = 0
        self._lock = threading.Lock()

    def hash(self, password: str) -> str:
        return self._bounded(hash_password, password, self.params)

    def verify(self, password: str, stored: str | None) -> bool:
        """Whether ``password`` matches ``stored`` (``None``: no such user)."""
        return self._bounded(verify_password, password, stored, self.params)

    def _bounded(self, fn, *args):
        with self._lock:
            if self._waiting >= CHECK_QUEUE:
                raise CredentialChecksBusy()
            self._waiting += 1
        try:
            if not self._slots.acquire(timeout=CHECK_WAIT_S):
                raise CredentialChecksBusy()
            try:
                return offload.run(fn, *args)
            finally:
                self._slots.release()
        finally:
            with self._lock:
                self._waiting -= 1


def parse_basic(header: str) -> tuple[str, str, bytes]:
    """(user name, password, the decoded ``user:password`` bytes).

    Raises:
        MalformedCredentials: not ``Basic`` and the base64 of UTF-8
            ``user:password``.
    """
    scheme, _, encoded = header.strip().partition(" ")
    encoded = encoded.strip()
    if scheme.lower() != "basic" or not encoded or len(encoded) > _MAX_ENCODED:
        raise MalformedCredentials()
    try:
        raw = base64.b64decode(encoded, validate=True)
        name, sep, password = raw.decode("utf-8").partition(":")
    except ValueError:  # bad base64, a non-ASCII header byte, or not UTF-8
        raise MalformedCredentials() from None
    if not sep:
        raise MalformedCredentials()
    return name, password, raw


class Authenticator:
    """One worker's credential checks: cache, limiter, bounded hashing."""

    def __init__(
        self,
        storage: Storage,
        listener: Listener,
        hasher: Hasher,
        pairs: FailureLimiter,
        addresses: FailureLimiter,
        *,
        users: FailureLimiter | None = None,
        cache_s: float,
        seed: Callable[[], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._storage = storage
        self._listener = listener
        self._hasher = hasher
        self._pairs = pairs  # failures per user name from one address: 429
        self._addresses = addresses  # failures per client address: 429
        self._users = users  # failures per user name from anywhere: delays
        self._cache_s = cache_s
        self._seed = seed  # seeds the root admin if the node could not at start
        self._clock = clock
        self._sleep = sleep  # cooperative under the gevent worker
        self._key = secrets.token_bytes(32)  # this process's cache key
        # Keyed by (user name, keyed hash of user:password): a user's entries
        # go together when the user changes.
        self.cache: BoundedCache[tuple[str, bytes], _Entry] = BoundedCache(
            "credentials", max_entries=MAX_CACHED, topic_of=itemgetter(0)
        )
        self._flights: dict[tuple[str, bytes], _Flight] = {}
        self._trusted = False  # the users stream is live...
        self._live_since = math.inf  # ... since then: older entries are checked
        self._generation = 0
        self._lock = threading.Lock()
        listener.on(Event.USER_CHANGED, self._changed)
        listener.on_live(self._live)
        # This listener runs once a worker has checked credentials, the
        # worker's messages listener only once it has served a topic: a
        # worker answering nothing but failed logins writes its counts out
        # within a second or so too.
        listener.on_tick(metrics.TALLY.maybe_flush)

    def authenticate(self, header: str | None, address: str) -> Principal:
        """The user the ``Authorization`` header names, if its password holds.

        Raises:
            Unauthorized: no credentials, malformed ones, or wrong ones (401).
            TooManyFailures: the user name from this address, or this
                address, failed too often; or the user name failed too often
                from everywhere and this address has been failing too (429).
            CredentialChecksBusy: this worker is busy checking others (503).
        """
        if header is None:
            metrics.TALLY.inc(metrics.AUTH_FAILURES, ("missing",))
            raise AuthenticationRequired()
        try:
            name, password, raw = parse_basic(header)
        except MalformedCredentials:
            metrics.TALLY.inc(metrics.AUTH_FAILURES, ("malformed",))
            raise
        self._listener.start()
        where = address_key(address)
        # A name no user can have gets no bucket (nor memory for one).
        who = name if USERNAME.fullmatch(name) else None
        pair = f"{name}\0{where}" if who is not None else None
        key = self._cache_key(name, raw)
        known = self.cache.get(key)
        entry = self._fresh(known)
        turn = self._limit(entry, who, pair, where)
        if entry is not None and self._trusted and entry.at >= self._live_since:
            principal: Principal | None = entry.principal
        else:
            # Past auth_cache_s too, an entry whose stored hash is unchanged
            # holds: hashing the same password against the same hash again
            # would cost each worker a hash per active user every auth_cache_s.
            principal = self._shared(
                key, lambda: self._check(key, name, password, known)
            )
        if principal is None:
            self._fail(who, pair, where, counted=turn)
            metrics.TALLY.inc(metrics.AUTH_FAILURES, ("wrong",))
            raise BadCredentials()
        if turn:
            self._users.release(who)  # the owner's own: not a failure
        return principal

    def remembered(self, header: str | None) -> Principal | None:
        """The principal of credentials this worker verified, however long
        ago, or None: for a request that must answer while the storage
        stalls (a scrape of ``/metrics``), which may fall back on it when
        :meth:`authenticate` cannot read the user in time. A change of the
        user announced meanwhile has dropped it."""
        if header is None:
            return None
        try:
            name, _, raw = parse_basic(header)
        except MalformedCredentials:
            return None
        entry = self.cache.get(self._cache_key(name, raw))
        return entry.principal if entry is not None else None

    def reconfirm(self, header: str | None, address: str) -> Principal:
        """The user of a request admitted earlier and still at work (a long
        poll about to look again), as :meth:`authenticate` would find it now.

        A lookup while the users stream vouches for the cached entry, which
        a change or deletion of the user drops; while it cannot vouch, an
        entry read within :data:`RECONFIRM_S` serves too, so that thousands
        of waiting polls do not each read their user before every look.
        Otherwise the credentials are checked as a new request's are.

        Raises:
            As :meth:`authenticate`.
        """
        if header is not None:
            try:
                name, _, raw = parse_basic(header)
            except MalformedCredentials:
                pass  # not admitted either: authenticate() answers it
            else:
                entry = self._cached(self._cache_key(name, raw))
                if entry is not None and (
                    (self._trusted and entry.at >= self._live_since)
                    or self._clock() - entry.at < RECONFIRM_S
                ):
                    return entry.principal
        return self.authenticate(header, address)

    def _cache_key(self, name: str, raw: bytes) -> tuple[str, bytes]:
        return (name, hashlib.blake2b(raw, key=self._key, digest_size=16).digest())

    def _cached(self, key: tuple[str, bytes]) -> _Entry | None:
        return self._fresh(self.cache.get(key))

    def _fresh(self, entry: _Entry | None) -> _Entry | None:
        """``entry`` if it was read within ``auth_cache_s``, else None."""
        if entry is not None and self._clock() - entry.at >= self._cache_s:
            return None
        return entry

    def _limit(
        self, entry: _Entry | None, who: str | None, pair: str | None, where: str
    ) -> bool:
        """Refuse (429) or delay what the failure limits hold back; whether
        the attempt took a turn of its user name's limit (it counts as a
        failure there already).

        - A user name that failed too often from this address is refused,
          right password or not: the guesser cannot tell one from the other.
        - So is anything from an address that failed too often, except
          credentials this worker verified whose name has not been failing
          from there (users behind the address of a guesser, such as a NAT's,
          keep working; the guesser's own first try of a name has no such
          credentials to match unless it is the right one).
        - A user name that failed too often from everywhere delays an attempt
          for its turn (at most :data:`MAX_DELAY_S`, else 429) only when this
          address has been failing too: from an address that has not, the
          right password is never delayed nor refused, so an attack on a name
          never locks its owner out.

        An attempt refused here counts as one more failure of its name from
        this address and of this address, so a guesser learns nothing from
        an address's first refused attempt onwards.
        """
        wait = self._pairs.wait(pair) if pair is not None else 0.0
        if not wait:
            wait = self._addresses.wait(where)
            if wait and entry is not None and self._pairs.clean(pair):
                wait = 0.0
        if wait:
            self._refuse(pair, where, wait)
        if self._users is None or who is None or not self._users.wait(who):
            return False
        if self._addresses.clean(where) and self._pairs.clean(pair):
            return False  # an address that has not been failing
        delay = self._users.reserve(who, MAX_DELAY_S)
        if delay is None:
            self._refuse(pair, where, self._users.wait(who))
        if not delay:
            return False
        metrics.TALLY.inc(metrics.AUTH_DELAYS, ())
        self._sleep(delay)
        return True

    def _refuse(self, pair: str | None, where: str, wait: float) -> NoReturn:
        self._addresses.fail(where)
        if pair is not None:
            self._pairs.fail(pair)
        metrics.TALLY.inc(metrics.AUTH_FAILURES, ("rate_limited",))
        raise TooManyFailures(max(1, math.ceil(wait)))

    def _fail(
        self, who: str | None, pair: str | None, where: str, *, counted: bool
    ) -> None:
        """Count a wrong password (or user name); ``counted``: the attempt's
        turn of its user name's limit counted it there already."""
        self._addresses.fail(where)
        if pair is not None:
            self._pairs.fail(pair)
        if who is not None and self._users is not None and not counted:
            self._users.fail(who)

    def _shared(
        self, key: tuple[str, bytes], check: Callable[[], Principal | None]
    ) -> Principal | None:
        """``check()``, once at a time per credentials: requests bringing the
        same ones meanwhile (a client opening many connections at once) wait
        for its outcome instead of hashing again."""
        with self._lock:
            flight = self._flights.get(key)
            leading = flight is None
            if flight is None:
                flight = self._flights[key] = _Flight()
        if not leading:
            if not flight.done.wait(2 * CHECK_WAIT_S) or flight.failed:
                raise CredentialChecksBusy()
            return flight.principal
        try:
            flight.principal = check()
        except BaseException:
            flight.failed = True
            raise
        finally:
            with self._lock:
                del self._flights[key]
            flight.done.set()
        return flight.principal

    def _check(
        self, key: tuple[str, bytes], name: str, password: str, entry: _Entry | None
    ) -> Principal | None:
        """The principal if the password holds against the stored user."""
        generation, read_at = self._generation, self._clock()
        user = self._user(name)
        stored = user.password_hash if user is not None else None
        # An entry the stream cannot vouch for holds if the hash is unchanged.
        reusable = (
            entry is not None
            and stored is not None
            and hmac.compare_digest(stored, entry.password_hash)
        )
        if not reusable:
            if USERNAME.fullmatch(name) is None or len(password) > MAX_PASSWORD:
                return None  # no stored user can have these
            if not self._hasher.verify(password, stored) or user is None:
                return None
        principal = Principal.of(user)
        # Dated from the read: a change after it is either announced or, if
        # the stream went live later, makes the entry be checked again.
        if self._remember(key, _Entry(principal, stored, read_at), generation):
            return principal
        # A change was announced meanwhile (often this user's own creation):
        # remember what holds after it, if the password still does.
        generation, read_at = self._generation, self._clock()
        fresh = self._storage.get_user(name)
        if fresh is not None and hmac.compare_digest(fresh.password_hash, stored):
            principal = Principal.of(fresh)
            self._remember(key, _Entry(principal, stored, read_at), generation)
        return principal

    def _user(self, name: str) -> UserRecord | None:
        if USERNAME.fullmatch(name) is None:
            return None
        user = self._storage.get_user(name)
        if user is None and self._seed is not None:
            # Once: the root admin may be missing because the storage did
            # not answer when the node started.
            seed, self._seed = self._seed, None
            try:
                seed()
            except BaseException:
                self._seed = seed  # not seeded (the storage refused): next time
                raise
            user = self._storage.get_user(name)
        return user

    def _remember(self, key: tuple[str, bytes], entry: _Entry, generation: int) -> bool:
        """Cache ``entry`` unless a change was announced since ``generation``."""
        with self._lock:
            if generation != self._generation:
                return False
            self.cache.put(key, entry)
            return True

    def _changed(self, name: str) -> None:
        with self._lock:
            self._generation += 1
            self.cache.drop_topic(name)

    def _live(self, live: bool) -> None:
        # Changes made before the stream went live may not have been
        # announced: entries from before then are checked against the stored
        # hash once more (a read, not a hash) before they are trusted.
        with self._lock:
            self._trusted = live
            self._live_since = self._clock() if live else math.inf
