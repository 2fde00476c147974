"""Wake long-polling consumers as soon as their topic may have a message.

Appends, give-backs and acks that let a message past a flow-control cap
publish ``MESSAGES`` for their topic (see
:class:`narad.storage.Event`); the worker's :class:`Listener` hands it here,
and each topic's generation counter moves on. A consumer snapshots the
counter before it looks for a message and sleeps only until the counter
moves, so a message produced between its look and its sleep still wakes it.
While the notification stream is down (or the backend has none), waits are
cut to short slices: the consumer looks again instead of trusting a wake-up.

``MESSAGES`` is published only for topics marked as waited on
(:meth:`narad.storage.Storage.mark_waiting`), so that a produce nobody
waits for costs no worker anything. A consumer that may wait makes sure,
before its first look, that the topic's mark lasts past its wait by
:data:`MARK_SLACK_MS`; the write completes before the look, so an append
committed after the look finds the mark live and publishes, and one
committed before it is found by the look. Each worker remembers the mark it
last wrote per topic (:meth:`Waiters.mark_until`, :meth:`Waiters.marked`)
and writes again only when it would run out within half the slack after the
wait: a topic in steady use costs a mark write per worker every ~30 s.
Messages that become available without a write (a lease lapsing, a copy in
a delay child falling due) never relied on a publish: a look reports when
the next one may, and the consumer's sleep ends by then.

The same counters let a worker skip storage round trips while a topic stays
empty, which is what thousands of idle long polls mostly see: a look that
found nothing is remembered with its generation (:meth:`Waiters.remember_empty`)
and a consume arriving while the generation has not moved and no lease has
come due waits without looking again (:meth:`Waiters.known_empty`). Once a
note is a second old, the next consume looks again while the others keep
waiting on it, so a change a notification could not carry is noticed within
a second, at the cost of one look a second, however many consumers poll.

What a worker keeps per topic (its generation, its condition while consumers
wait on it, its empty notes, its last mark) is bounded: topics nobody waits
on go least recently used first beyond ``[cache] topics``, and a topic's
state goes when ``TOPIC_CHANGED`` says it changed (deleted, recreated),
waking its consumers. Generations are drawn from one counter and never
reused, so a consumer whose topic was forgotten and seen again reads it as
moved on and looks again: forgetting costs a look (and a mark write), never
a missed message. A ``MESSAGES`` event for a topic nobody here waits on
costs little: another worker or node may wait on it.

In a gevent worker (``narad.serve.workers``) ``threading`` is monkey-patched: the
listener is a greenlet and a waiting consumer costs a greenlet, not a thread.
There consumers wait on a :class:`GreenCondition`, whose wait runs out as a
timer firing: ``threading.Condition.wait`` runs out as a ``Timeout`` raised
into the greenlet through a lock made for the wait, three times the cost,
and most of 10,000 idle long polls' waits run out.
:meth:`Waiters.stop` (graceful shutdown) wakes every waiting consumer at once.
"""

from __future__ import annotations

import itertools
import math
import threading
import time
from collections import OrderedDict
from collections.abc import Hashable

from gevent import monkey
from gevent.hub import Waiter
from gevent.hub import get_hub

from narad.broker.notifications import Listener
from narad.storage import Event

# Without the stream, waiting consumers look again on their own; the slices
# grow with their number so that a worker's looks stay near this rate.
UNSUBSCRIBED_LOOKS_PER_S = 1000
UNSUBSCRIBED_SLICE_S = 0.01
EMPTY_NOTE_MS = 1000
# Notes per topic: one per partition (and one for "any"), per epoch.
EMPTY_NOTES_PER_TOPIC = 256
MAX_TOPICS = 10_000
# A wait mark lasts this much past the wait it was written for. Marks carry
# the waiting worker's clock and appends compare them with the producing
# worker's, so the slack absorbs clock skew between nodes; a worker writes
# again only once its mark would end within half of it after a wait (up to
# 30 s of skew tolerated), so a topic in steady use costs one mark write
# per worker every ~30 s, not one per consume.
MARK_SLACK_MS = 60_000
# Long polls end on a grid: a wait of W ends at the next multiple of
# min(DEADLINE_STEP_S, W / 100) on the monotonic clock after W, so up to 1%
# (at most 50 ms) late. Those whose waits run out within one step end
# together and a worker answers them in one wake-up, not one each: under
# 10,000 idle waiters (10 s) the workers' CPU fell by about a quarter.
DEADLINE_STEP_S = 0.05


def poll_deadline(now: float, wait_ms: int) -> float:
    """When a long poll of ``wait_ms`` that starts at ``now`` (monotonic
    clock) ends: ``now`` itself for no wait."""
    if wait_ms <= 0:
        return now
    step = min(DEADLINE_STEP_S, wait_ms / 100_000)
    return math.ceil((now + wait_ms / 1000) / step) * step


class GreenCondition:
    """``threading.Condition``'s ``wait`` and ``notify_all`` for greenlets
    of one thread, over ``lock`` (held by the caller of both).

    A wait is a hub :class:`~gevent.hub.Waiter` switched to by its timer or
    by ``notify_all``, whichever comes first; a late second switch finds the
    waiter no longer waiting and is dropped. Consumers wake in the order they
    began to wait, as with ``threading.Condition``.
    """

    __slots__ = ("_lock", "_waiters")

    def __init__(self, lock: threading.Lock) -> None:
        self._lock = lock
        self._waiters: dict[Waiter, None] = {}

    def wait(self, timeout: float) -> None:
        hub = get_hub()
        waiter = Waiter(hub)
        timer = hub.loop.timer(max(timeout, 0.0))
        # Counted from the clock's time, not the loop's at the start of this
        # turn, as gevent's Timeout does: a timer counted from a stale time
        # would run out early, and the caller wait again for what is left.
        timer.start(waiter.switch, None, update=True)
        self._waiters[waiter] = None
        self._lock.release()
        try:
            waiter.get()
        finally:
            timer.close()
            self._lock.acquire()
            self._waiters.pop(waiter, None)

    def notify_all(self) -> None:
        # Waiter.switch runs only from the hub; the woken wait on its turn.
        loop = get_hub().loop
        for waiter in self._waiters:
            loop.run_callback(waiter.switch, None)
        self._waiters.clear()


def _condition_class() -> type:
    """What consumers wait on: greenlets of one thread where ``threading``
    is monkey-patched (the listener is one of them), threads otherwise."""
    if monkey.is_module_patched("threading"):
        return GreenCondition
    return threading.Condition


class _Topic:
    """What this worker keeps about one topic its consumers look at."""

    __slots__ = ("cond", "generation", "mark", "notes", "waiting")

    def __init__(self, generation: int) -> None:
        self.generation = generation
        # Only while consumers wait on the topic.
        self.cond: threading.Condition | GreenCondition | None = None
        self.waiting = 0
        # key -> (lease expiry ms or None, noted at ms), at this generation.
        self.notes: dict[Hashable, tuple[int | None, int]] = {}
        # (epoch, until ms) of the last wait mark this worker wrote.
        self.mark: tuple[str, int] | None = None


class Waiters:
    name = "waiter_topics"  # as a cache (narad.caches.SizedCache)
    nbytes = 0  # bounded by entries: each holds at most a few hundred notes

    def __init__(self, listener: Listener, *, max_topics: int = MAX_TOPICS) -> None:
        self._listener = listener
        self.max_topics = max_topics
        # One lock, one condition per waited-on topic: a wake-up disturbs
        # only the consumers of that topic.
        self._lock = threading.Lock()
        self._condition = _condition_class()
        self._topics: OrderedDict[str, _Topic] = OrderedDict()
        self._generations = itertools.count(1)
        self._evictions = 0
        self._live = False
        self._stopped = False
        self._waiting = 0
        listener.on(Event.MESSAGES, self._wake)
        # A deleted topic wakes its consumers too: they look, and learn.
        listener.on(Event.TOPIC_CHANGED, self._changed)
        listener.on_live(self._wake_all)

    def __len__(self) -> int:
        return len(self._topics)

    def take_evictions(self) -> int:
        with self._lock:
            evictions, self._evictions = self._evictions, 0
        return evictions

    def generation(self, topic: str) -> int:
        self._listener.start()
        with self._lock:
            return self._state(topic).generation

    def quiet(self, topic: str, seen: int) -> bool:
        """Whether nothing was published on ``topic`` since generation ``seen``."""
        with self._lock:
            return self._live and self._current(topic, seen) is not None

    def remember_empty(
        self, key: Hashable, topic: str, seen: int, expiry_ms: int | None, now_ms: int
    ) -> None:
        """Note that a look at ``key`` (of ``topic``) at generation ``seen``
        found nothing, the next lease falling due at ``expiry_ms``."""
        with self._lock:
            state = self._current(topic, seen)
            if state is None:
                return
            if len(state.notes) >= EMPTY_NOTES_PER_TOPIC:
                state.notes.clear()
            state.notes[key] = (expiry_ms, now_ms)

    def known_empty(
        self, key: Hashable, topic: str, now_ms: int
    ) -> tuple[int, int | None] | None:
        """(generation, lease expiry) of an empty look still valid now.

        None tells the caller to look itself: no valid note, or the note is
        a second old (this caller refreshes it; the others keep using it).
        """
        with self._lock:
            state = self._topics.get(topic)
            if state is None or not self._live:
                return None
            note = state.notes.get(key)
            if note is None:
                return None
            expiry_ms, noted_ms = note
            if expiry_ms is not None and now_ms >= expiry_ms:
                del state.notes[key]
                return None
            if now_ms - noted_ms >= EMPTY_NOTE_MS:
                state.notes[key] = (expiry_ms, now_ms)
                return None
            self._topics.move_to_end(topic)
            return state.generation, expiry_ms

    def mark_until(
        self, topic: str, epoch: str, now_ms: int, wait_ms: int
    ) -> int | None:
        """The mark to write on ``topic`` (at ``epoch``) before a look that
        may be followed by a wait of ``wait_ms``; None when the last one this
        worker wrote still lasts long enough."""
        with self._lock:
            state = self._topics.get(topic)
            mark = state.mark if state is not None else None
            if (
                mark is not None
                and mark[0] == epoch
                and mark[1] >= now_ms + wait_ms + MARK_SLACK_MS // 2
            ):
                return None
        return now_ms + wait_ms + MARK_SLACK_MS

    def marked(self, topic: str, epoch: str, until_ms: int) -> None:
        """Remember that the mark ``until_ms`` is stored for ``topic`` at
        ``epoch``; it goes with the topic's other state here."""
        with self._lock:
            state = self._state(topic)
            if state.mark is None or state.mark[0] != epoch or state.mark[1] < until_ms:
                state.mark = (epoch, until_ms)

    def forget_empty(self, key: Hashable, topic: str) -> None:
        """Drop the note on ``key``: a look found a message or no topic."""
        with self._lock:
            state = self._topics.get(topic)
            if state is not None:
                state.notes.pop(key, None)

    def wait(self, topic: str, seen: int, timeout_s: float) -> None:
        """Sleep until ``topic`` is woken after generation ``seen``, or timeout."""
        deadline = time.monotonic() + timeout_s
        with self._lock:
            state = self._current(topic, seen)
            if state is None:
                return
            if state.cond is None:
                state.cond = self._condition(self._lock)
            cond = state.cond
            state.waiting += 1
            self._waiting += 1
            try:
                while self._current(topic, seen) is state:
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        return
                    if not self._live:
                        slice_s = max(
                            UNSUBSCRIBED_SLICE_S,
                            self._waiting / UNSUBSCRIBED_LOOKS_PER_S,
                        )
                        cond.wait(min(remaining, slice_s))
                        return
                    cond.wait(remaining)
            finally:
                self._waiting -= 1
                state.waiting -= 1
                if not state.waiting:
                    state.cond = None

    @property
    def stopped(self) -> bool:
        return self._stopped

    def stop(self) -> None:
        """Wake every waiting consumer for good (graceful shutdown)."""
        self._stopped = True
        self._listener.stop()
        self._wake_all(False)

    def _state(self, topic: str) -> _Topic:
        """``topic``'s state, made the most recently used (new if none)."""
        state = self._topics.get(topic)
        if state is not None:
            self._topics.move_to_end(topic)
            return state
        state = self._topics[topic] = _Topic(next(self._generations))
        self._shrink()
        return state

    def _current(self, topic: str, seen: int) -> _Topic | None:
        """``topic``'s state if it is still at generation ``seen``."""
        state = self._topics.get(topic)
        return state if state is not None and state.generation == seen else None

    def _shrink(self) -> None:
        # Least recently used first, but never a topic consumers wait on:
        # past the bound only by topics with waiting consumers, which the
        # connection limit bounds.
        for _ in range(len(self._topics)):
            if len(self._topics) <= self.max_topics:
                return
            topic, state = next(iter(self._topics.items()))
            if state.waiting:
                self._topics.move_to_end(topic)
            else:
                del self._topics[topic]
                self._evictions += 1

    def _wake(self, topic: str) -> None:
        with self._lock:
            state = self._topics.get(topic)
            if state is None:
                return  # nobody here holds a generation of it
            state.generation = next(self._generations)
            state.notes.clear()
            if state.cond is not None:
                state.cond.notify_all()

    def _changed(self, topic: str) -> None:
        # Deleted, recreated or altered: its consumers look again, and the
        # state goes (a consumer still interested makes a new one).
        with self._lock:
            state = self._topics.pop(topic, None)
            if state is not None and state.cond is not None:
                state.cond.notify_all()

    def _wake_all(self, live: bool) -> None:
        # Going live: a publish before the subscription was confirmed could
        # have been missed, so everyone looks again and then waits in earnest.
        with self._lock:
            self._live = live and not self._stopped
            states = list(self._topics.values())
            self._topics.clear()
            for state in states:
                if state.cond is not None:
                    state.cond.notify_all()
