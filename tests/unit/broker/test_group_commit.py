"""Group commit: calls queued behind those in flight under their key go together."""

from __future__ import annotations

import gc
import threading
import time
import weakref
from types import SimpleNamespace

from narad.broker import group_commit
from narad.broker.group_commit import IN_FLIGHT
from narad.broker.group_commit import Groups
from narad.errors import StorageError
from narad.errors import StorageUncertain


class HeldSend:
    """A ``send`` that records each group's items; calls are held in flight
    until ``release`` is set, and answer each item with ``("sent", item)``,
    or raise ``raises[i]`` for the i-th call (from 0)."""

    def __init__(self) -> None:
        self.groups: list[list] = []
        self.release = threading.Event()
        self.raises: dict[int, BaseException] = {}
        self._lock = threading.Lock()

    def __call__(self, items: list) -> list:
        with self._lock:
            index = len(self.groups)
            self.groups.append(list(items))
        assert self.release.wait(10)
        if index in self.raises:
            raise self.raises[index]
        return [("sent", item) for item in items]

    def sent(self, count: int) -> None:
        """Wait until ``count`` calls were sent."""
        deadline = time.monotonic() + 10
        while len(self.groups) < count:
            assert time.monotonic() < deadline, "calls were not sent"
            time.sleep(0.001)

    def after_first(self) -> list[list]:
        """The groups sent after the first :data:`IN_FLIGHT` ones."""
        return self.groups[IN_FLIGHT:]


def same_letter(first: str, other: str) -> bool:
    return first[0] == other[0]


class Callers:
    """Calls through ``groups``, each from a thread of its own."""

    def __init__(self, groups: Groups) -> None:
        self.groups = groups
        self.outcomes: dict[str, object] = {}
        self.threads: list[threading.Thread] = []

    def start(self, item: str, key: str = "t", messages: int = 1, size: int = 0):
        def run() -> None:
            try:
                self.outcomes[item] = self.groups.call(key, item, messages, size)
            except BaseException as exc:
                self.outcomes[item] = exc

        thread = threading.Thread(target=run)
        thread.start()
        self.threads.append(thread)

    def queued(self, count: int, key: str = "t") -> None:
        """Wait until ``count`` callers queue under ``key``."""
        deadline = time.monotonic() + 10
        while True:
            queue = self.groups._queues.get(key)
            if queue is not None and len(queue.calls) >= count:
                return
            assert time.monotonic() < deadline, "callers did not queue"
            time.sleep(0.001)

    def queue(self, *items: str, **sizes) -> None:
        """Queue a call of each of ``items``, in order."""
        for index, item in enumerate(items):
            self.start(item, **sizes)
            self.queued(index + 1)

    def join(self) -> dict[str, object]:
        for thread in self.threads:
            thread.join(10)
        return self.outcomes


def held(send: HeldSend, answer=None) -> tuple[Groups, Callers]:
    """Groups with :data:`IN_FLIGHT` calls under key t in flight, held;
    ``answer`` (default ``send``) makes the groups' calls through ``send``."""
    groups = Groups(answer or send, joins=same_letter)
    callers = Callers(groups)
    for index in range(IN_FLIGHT):
        callers.start(f"first{index}")
    send.sent(IN_FLIGHT)
    return groups, callers


def test_a_lone_call_goes_at_once_and_leaves_nothing_behind():
    send = HeldSend()
    send.release.set()
    groups = Groups(send, joins=same_letter)
    assert groups.call("t", "a") == ("sent", "a")
    assert send.groups == [["a"]]
    assert groups._queues == {}


class Result:
    """A result a weak reference can follow."""


def test_calls_leave_no_reference_cycle():
    # With the cyclic collector off, a caller's result goes as soon as the
    # caller drops it: nothing of the call (a leader listed in its own
    # group) keeps it alive until a collection.
    send = HeldSend()
    _, callers = held(send, lambda items: [Result() for _ in send(items)])
    callers.queue("b1", "b2")  # b1 leads the group that follows
    gc.collect()
    gc.disable()
    try:
        send.release.set()
        outcomes = callers.join()
        refs = [weakref.ref(result) for result in outcomes.values()]
        assert len(refs) == IN_FLIGHT + 2
        outcomes.clear()
        assert [ref() for ref in refs] == [None] * len(refs)
    finally:
        gc.enable()


def test_a_few_calls_go_at_once_and_the_next_ones_queue():
    send = HeldSend()
    groups, callers = held(send)  # IN_FLIGHT sent, none waiting
    assert IN_FLIGHT >= 2
    assert not groups._queues["t"].calls
    callers.queue("q")
    assert len(send.groups) == IN_FLIGHT
    send.release.set()
    assert callers.join()["q"] == ("sent", "q")
    assert groups._queues == {}


def test_queued_calls_go_as_one_in_order_each_with_its_result():
    send = HeldSend()
    groups, callers = held(send)
    callers.queue("b1", "b2", "b3")
    send.release.set()
    outcomes = callers.join()
    assert send.after_first() == [["b1", "b2", "b3"]]
    assert {item: outcomes[item] for item in ("b1", "b2", "b3")} == {
        "b1": ("sent", "b1"),
        "b2": ("sent", "b2"),
        "b3": ("sent", "b3"),
    }
    assert groups._queues == {}


def test_a_group_stops_at_its_caps_and_the_rest_goes_next(monkeypatch):
    monkeypatch.setattr(group_commit, "MAX_GROUP_MESSAGES", 3)
    monkeypatch.setattr(group_commit, "MAX_GROUP_BYTES", 5)
    send = HeldSend()
    _, callers = held(send)
    for item, messages, size in (
        ("m-a", 2, 0),
        ("m-b", 1, 0),  # three messages
        ("m-c", 1, 2),
        ("m-d", 1, 4),  # six bytes
        ("m-e", 1, 0),
    ):
        callers.start(item, messages=messages, size=size)
        callers.queued(len(callers.threads) - IN_FLIGHT)
    send.release.set()
    callers.join()
    # The groups may go side by side: in any order.
    assert sorted(send.after_first()) == [["m-a", "m-b"], ["m-c"], ["m-d", "m-e"]]


def test_only_calls_that_join_the_first_go_with_it():
    send = HeldSend()
    _, callers = held(send)
    callers.queue("x1", "y1", "y2", "x2")
    send.release.set()
    callers.join()
    assert sorted(send.after_first()) == [["x1"], ["x2"], ["y1", "y2"]]


def test_keys_queue_apart():
    send = HeldSend()
    groups, callers = held(send)
    callers.start("u", key="u")
    send.sent(IN_FLIGHT + 1)  # went while the others are held
    send.release.set()
    assert callers.join()["u"] == ("sent", "u")
    assert groups._queues == {}


def test_an_error_is_raised_to_each_member_and_the_queue_moves_on():
    send = HeldSend()
    send.raises[IN_FLIGHT] = StorageError("storage down")
    groups, callers = held(send)
    callers.queue("p0", "p1")
    send.release.set()
    outcomes = callers.join()
    assert [str(outcomes[item]) for item in ("p0", "p1")] == ["storage down"] * 2
    assert groups.call("t", "later") == ("sent", "later")
    assert groups._queues == {}


def test_a_leader_cut_short_leaves_its_group_uncertain():
    send = HeldSend()
    send.raises[IN_FLIGHT] = KeyboardInterrupt()  # the queued group's call
    groups, callers = held(send)
    callers.queue("p0", "p1")
    send.release.set()
    outcomes = callers.join()
    assert isinstance(outcomes["p0"], KeyboardInterrupt)
    assert isinstance(outcomes["p1"], StorageUncertain)
    assert groups._queues == {}


class Interruptible:
    """A caller's wake-up whose wait can be cut short, as a worker's kill
    cuts a greenlet's."""

    cut = threading.Event()
    # The one thread cut, when only one may be (None: any that waits).
    victim: int | None = None

    def __init__(self) -> None:
        self.event = threading.Event()

    def set(self) -> None:
        self.event.set()

    def wait(self) -> None:
        while not self.event.wait(0.001):
            if self.cut.is_set() and self.victim in (None, threading.get_ident()):
                raise KeyboardInterrupt


def interruptible(monkeypatch) -> None:
    Interruptible.cut.clear()
    Interruptible.victim = None
    waits = SimpleNamespace(Lock=threading.Lock, Event=Interruptible)
    monkeypatch.setattr(group_commit, "threading", waits)


def test_a_call_cut_short_while_queued_leaves_the_queue(monkeypatch):
    send = HeldSend()
    interruptible(monkeypatch)
    groups, callers = held(send)
    callers.queue("cut")
    Interruptible.cut.set()  # only the queued one waits: it leaves
    callers.threads[-1].join(10)
    Interruptible.cut.clear()
    assert not groups._queues["t"].calls
    callers.queue("after")
    send.release.set()
    outcomes = callers.join()
    assert isinstance(outcomes["cut"], KeyboardInterrupt)
    assert outcomes["after"] == ("sent", "after")
    assert send.after_first() == [["after"]]
    assert groups._queues == {}


def test_a_group_whose_leader_was_cut_short_fails_unsent(monkeypatch):
    send = HeldSend()
    interruptible(monkeypatch)
    groups, callers = held(send)
    callers.queue("p0", "p1")
    # Made the next group's leader, then cut short before it sends.
    with groups._lock:
        queue = groups._queues["t"]
        group = groups._take(queue.calls)
        group[0].group = group
        queue.in_flight += 1  # its slot, as a returning call hands it on
    # Only the leader: its follower waits too, and must learn from the leader.
    Interruptible.victim = callers.threads[-2].ident
    Interruptible.cut.set()
    callers.threads[-2].join(10)
    Interruptible.cut.clear()
    send.release.set()
    outcomes = callers.join()
    assert isinstance(outcomes["p0"], KeyboardInterrupt)
    assert isinstance(outcomes["p1"], StorageError)
    assert "before the call was sent" in str(outcomes["p1"])
    assert len(send.groups) == IN_FLIGHT  # nothing of theirs
    assert groups._queues == {}
