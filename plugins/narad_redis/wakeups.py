"""Wake-ups over sharded pub/sub on a Valkey/Redis Cluster (7.0 and later).

On a cluster, plain ``PUBLISH`` goes to every node over the cluster bus, so
each wake-up costs every node something however many listen. With sharded
pub/sub a script publishes a topic's ``messages`` event with ``SPUBLISH`` on
its family's shard channel, ``narad:{<tag>}:events`` (in the topic's own
slot, as a script's channels must be), and only the primary serving that
slot sends it, to the workers subscribed there.

A worker subscribes (``SSUBSCRIBE``, on a connection of its own to the
primary serving the channel's slot) to the channels of the topics its
consumers wait on: :meth:`ShardedWakeups.want` is called from
``mark_waiting``, which runs before a waiting consumer's look, and returns
once the subscription is confirmed, so that an append committed after the
look is heard. A channel stays subscribed for :data:`WANT_S` after the last
mark that wanted it, then is unsubscribed. Topic and user events (rare) stay
on plain ``PUBLISH``.

The stream (:meth:`ShardedWakeups.stream`) merges the plain subscription's
notifications with the shard channels'; it says LISTENING once every wanted
channel is subscribed again, and ends with :class:`StorageError` when a
connection is lost or a slot moves (the server unsubscribes its channels):
the worker's listener then opens a new stream, and its waiters look again
(as after any gap).
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable
from collections.abc import Iterator
from typing import Any

import redis

from narad.errors import StorageError
from narad.storage import Event
from narad.storage import Notification
from narad_redis.client import ReplyLost

#: How long a channel stays subscribed after the last mark that wanted it.
WANT_S = 900.0
#: Most channels a worker keeps wanted (then the oldest marks are dropped).
MAX_WANTED = 100_000
#: How long a mark waits for its channel's subscription to be confirmed.
CONFIRM_S = 5.0
#: Silence on the stream before it yields None (a tick).
TICK_S = 1.0
#: How often the stream looks for channels no longer wanted.
SWEEP_S = 60.0

_LOST = object()
_EVENTS = {event.value: event for event in Event}


def channel(tag: str) -> str:
    """The shard channel of the topics stored under hash tag ``tag``."""
    return f"narad:{{{tag}}}:events"


class _Link:
    """A subscription connection to one primary, read by its own thread."""

    def __init__(self, client: redis.Redis, owner: ShardedWakeups) -> None:
        self.client = client
        self.connection = client.connection_pool.get_connection()
        self.owner = owner
        self.lock = threading.Lock()
        self.closed = False
        self.thread = threading.Thread(
            target=self._read, name="narad-shard-wakeups", daemon=True
        )
        self.thread.start()

    def subscribe(self, name: str) -> None:
        self._send("SSUBSCRIBE", name)

    def unsubscribe(self, name: str) -> None:
        self._send("SUNSUBSCRIBE", name)

    def _send(self, *command: str) -> None:
        with self.lock:
            # No health check: its PING's reply would be read here while the
            # link's thread reads the connection too.
            self.connection.send_command(*command, check_health=False)

    def _read(self) -> None:
        try:
            while not self.closed:
                try:
                    reply = self.connection.read_response(
                        timeout=TICK_S, disconnect_on_error=False
                    )
                except redis.TimeoutError:
                    continue
                except ReplyLost as exc:
                    # A read timing out after a command left counts as a
                    # reply lost; on a subscription it only says nothing came.
                    if isinstance(exc.__cause__, redis.TimeoutError):
                        continue
                    raise
                if reply is not None:
                    self.owner._heard(self, reply)
        except (redis.RedisError, OSError) as exc:
            if not self.closed:
                self.owner._refresh()
                self.owner._lost(f"shard subscription lost: {exc}")

    def close(self) -> None:
        self.closed = True
        try:
            self.connection.disconnect()
        finally:
            self.client.connection_pool.disconnect()


class ShardedWakeups:
    """A worker's shard-channel subscriptions, shared by its request
    greenlets (:meth:`want`) and its notification listener (:meth:`stream`)."""

    def __init__(
        self,
        node_of: Callable[[str], tuple[str, int]],
        connect: Callable[[tuple[str, int]], redis.Redis],
        refresh: Callable[[], None],
    ) -> None:
        self._node_of = node_of
        self._connect = connect
        self._refresh = refresh
        self._lock = threading.Lock()
        self._wanted: dict[str, float] = {}  # channel -> wanted until (monotonic)
        self._confirmed: dict[str, threading.Event] = {}
        self._links: dict[tuple[str, int], _Link] = {}
        self._subscribed: dict[str, _Link] = {}  # channel -> its link
        self._leaving: dict[str, _Link] = {}  # unsubscribed as no longer wanted
        self._queue: queue.Queue[Any] | None = None  # while a stream runs
        self._swept = time.monotonic()

    # -- request side -------------------------------------------------------------

    def want(self, name: str) -> None:
        """Keep ``name`` subscribed; once a stream runs, wait (up to
        :data:`CONFIRM_S`) until the subscription is confirmed."""
        with self._lock:
            if len(self._wanted) >= MAX_WANTED and name not in self._wanted:
                oldest = min(self._wanted, key=self._wanted.__getitem__)
                del self._wanted[oldest]
            self._wanted[name] = time.monotonic() + WANT_S
            if self._queue is None:
                return  # subscribed when the stream starts
            confirmed = self._confirmed.get(name)
            if confirmed is None:
                confirmed = self._confirmed[name] = threading.Event()
                self._subscribe(name)
        confirmed.wait(CONFIRM_S)

    # -- listener side ---------------------------------------------------------------

    def stream(
        self, plain: Iterator[Notification | None], wanted: frozenset[Event]
    ) -> Iterator[Notification | None]:
        """``plain``'s notifications of ``wanted`` events (its LISTENING held
        back) and the shard channels' MESSAGES, as one stream."""
        events: queue.Queue[Any] = queue.Queue()
        stop = threading.Event()
        pump = threading.Thread(
            target=self._pump,
            args=(plain, wanted, events, stop),
            name="narad-wakeups",
            daemon=True,
        )
        with self._lock:
            self._close_links()
            self._queue = events
            now = time.monotonic()
            self._wanted = {c: t for c, t in self._wanted.items() if t > now}
            pending = []
            for name in self._wanted:
                self._confirmed[name] = threading.Event()
                pending.append(self._confirmed[name])
                self._subscribe(name)
        try:
            pump.start()
            # Until LISTENING, events may have been missed anyway (and the
            # listener's waiters look again once it comes): drop them.
            deadline = time.monotonic() + 2 * CONFIRM_S
            while (item := _take(events, deadline)) is not Event.LISTENING:
                _raise_if_lost(item)
            for confirmed in pending:
                if not confirmed.wait(max(deadline - time.monotonic(), 0)):
                    raise StorageError("shard subscriptions not confirmed in time")
            yield Notification(Event.LISTENING)
            while True:
                self._sweep()
                try:
                    item = events.get(timeout=TICK_S)
                except queue.Empty:
                    yield None
                    continue
                _raise_if_lost(item)
                if item is not Event.LISTENING:
                    yield item
        finally:
            stop.set()
            with self._lock:
                if self._queue is events:
                    self._queue = None
                    self._close_links()

    @staticmethod
    def _pump(
        plain: Iterator[Notification | None],
        wanted: frozenset[Event],
        events: queue.Queue,
        stop: threading.Event,
    ) -> None:
        """Forward ``plain``'s notifications (from a thread of its own: it
        blocks on its connection) until ``stop``; then close it here."""
        try:
            for note in plain:
                if stop.is_set():
                    break
                if note is None:
                    continue
                if note.event is Event.LISTENING:
                    events.put(Event.LISTENING)
                elif note.event in wanted:
                    events.put(note)
        except Exception as exc:  # the stream reports it
            events.put((_LOST, f"plain subscription lost: {exc}"))
        finally:
            close = getattr(plain, "close", None)
            if close is not None:
                close()

    def _sweep(self) -> None:
        """Unsubscribe the channels no mark wanted for :data:`WANT_S`
        (once a minute at most, busy or idle)."""
        now = time.monotonic()
        if now - self._swept < SWEEP_S:
            return
        self._swept = now
        with self._lock:
            for name in [c for c, until in self._wanted.items() if until <= now]:
                del self._wanted[name]
                self._confirmed.pop(name, None)
                link = self._subscribed.pop(name, None)
                if link is not None and not link.closed:
                    self._leaving[name] = link
                    link.unsubscribe(name)

    # -- links (under self._lock) -----------------------------------------------------

    def _subscribe(self, name: str) -> None:
        try:
            address = self._node_of(name)
            link = self._links.get(address)
            if link is None:
                link = self._links[address] = _Link(self._connect(address), self)
            link.subscribe(name)
            self._subscribed[name] = link
        except (redis.RedisError, OSError) as exc:
            self._refresh()  # the slot map may name a primary that died
            self._lost(f"cannot subscribe to {name}: {exc}")

    def _close_links(self) -> None:
        links, self._links = self._links, {}
        self._confirmed, self._subscribed, self._leaving = {}, {}, {}
        for link in links.values():
            link.close()

    def _heard(self, link: _Link, reply: list[Any]) -> None:
        kind = reply[0]
        if kind == b"smessage":
            code, *topics = reply[2].decode().split(" ")
            event = _EVENTS.get(code)
            events = self._queue
            if event is not None and events is not None:
                for topic in topics:
                    events.put(Notification(event, topic))
        elif kind == b"ssubscribe":
            confirmed = self._confirmed.get(reply[1].decode())
            if confirmed is not None:
                confirmed.set()
        elif kind == b"sunsubscribe":
            name = reply[1].decode()
            with self._lock:
                asked = self._leaving.get(name) is link
                if asked:
                    del self._leaving[name]
            if not asked:
                # The slot moved (a failover, a resharding): subscribe anew.
                self._lost(f"{name} unsubscribed by the server")

    def _lost(self, why: str) -> None:
        events = self._queue
        if events is not None:
            events.put((_LOST, why))


def _take(events: queue.Queue, deadline: float) -> Any:
    try:
        return events.get(timeout=max(deadline - time.monotonic(), 0.001))
    except queue.Empty:
        raise StorageError("no subscription confirmation in time") from None


def _raise_if_lost(item: Any) -> None:
    if isinstance(item, tuple) and item and item[0] is _LOST:
        raise StorageError(item[1])
