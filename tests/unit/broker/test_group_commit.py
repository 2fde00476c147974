"""Group commit: produces queued behind an append in flight go together."""

from __future__ import annotations

import dataclasses
import threading
import time
from types import SimpleNamespace

from narad.broker import group_commit
from narad.broker.group_commit import MAX_GROUP_BYTES
from narad.broker.group_commit import MAX_GROUP_ENTRIES
from narad.broker.group_commit import GroupCommit
from narad.errors import StorageError
from narad.errors import StorageUncertain
from narad.storage import DEFAULT_IDEMPOTENCY
from narad.storage import AppendResult
from narad.storage import Entry
from narad.storage import IdempotencyKey
from narad.storage import PayloadKind
from narad.storage import Status
from narad.storage import TopicMeta

META = TopicMeta("t", "e1", 3, 0, 30000, 1024, 1024, 0)
NOW = 1_800_000_000_000


def entries(*payloads: bytes) -> list[Entry]:
    return [Entry(0, b"", p, PayloadKind.TEXT) for p in payloads]


class HeldStorage:
    """Records each append; the first one is held in flight until released,
    and every append answers ``outcome`` (OK with its entries, by default),
    or ``outcomes[i]`` for the i-th call (from 0) when given."""

    def __init__(self, outcome=None) -> None:
        self.calls: list[tuple[TopicMeta, list[bytes], tuple]] = []
        self.release = threading.Event()
        self.in_flight = threading.Event()
        self.outcome = outcome
        self.outcomes: dict[int, object] = {}
        self.nows: list[int] = []

    def append(self, meta, entries, *, schema_version, now_ms, idempotency, limits):
        assert schema_version == meta.schema_version and limits is DEFAULT_IDEMPOTENCY
        self.calls.append((meta, [e.payload for e in entries], tuple(idempotency)))
        self.nows.append(now_ms)
        if len(self.calls) == 1:
            self.in_flight.set()
            assert self.release.wait(10)
        outcome = self.outcomes.get(len(self.calls) - 1, self.outcome)
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome or AppendResult(Status.OK, count=len(entries), evicted=2)


class Produces:
    """Appends through ``commit``, each from a thread of its own."""

    def __init__(self, commit: GroupCommit) -> None:
        self.commit = commit
        self.outcomes: dict[str, object] = {}
        self.threads: list[threading.Thread] = []

    def start(
        self, name: str, meta: TopicMeta, batch: list[Entry], keys=(), now=NOW
    ) -> None:
        def run() -> None:
            try:
                self.outcomes[name] = self.commit.append(meta, batch, now, keys)
            except BaseException as exc:
                self.outcomes[name] = exc

        thread = threading.Thread(target=run)
        thread.start()
        self.threads.append(thread)

    def queued(self, count: int, topic: str = "t") -> None:
        """Wait until ``count`` produces are in ``topic``'s queue."""
        deadline = time.monotonic() + 10
        while len(self.commit._queues.get(topic, ())) < count:
            assert time.monotonic() < deadline, "produces did not queue"
            time.sleep(0.001)

    def join(self) -> dict[str, object]:
        for thread in self.threads:
            thread.join(10)
        return self.outcomes


def held(storage: HeldStorage) -> tuple[GroupCommit, Produces]:
    """A commit whose first append (of "first") is in flight."""
    commit = GroupCommit(storage, DEFAULT_IDEMPOTENCY)
    produces = Produces(commit)
    produces.start("first", META, entries(b"first"))
    assert storage.in_flight.wait(10)
    return commit, produces


def test_a_lone_produce_goes_at_once_and_leaves_nothing_behind():
    storage = HeldStorage()
    storage.release.set()
    commit = GroupCommit(storage, DEFAULT_IDEMPOTENCY)
    result = commit.append(META, entries(b"a", b"b"), NOW)
    assert result == AppendResult(Status.OK, count=2, evicted=2)
    assert storage.calls == [(META, [b"a", b"b"], ())]
    assert commit._queues == {}


def test_produces_queued_behind_one_in_flight_go_in_one_append_in_order():
    storage = HeldStorage()
    commit, produces = held(storage)
    for index, batch in enumerate(
        (entries(b"b1"), entries(b"b2", b"b3"), entries(b"b4"))
    ):
        produces.start(f"p{index}", META, batch)
        produces.queued(index + 2)
    storage.release.set()
    outcomes = produces.join()
    assert [payloads for _, payloads, _ in storage.calls] == [
        [b"first"],
        [b"b1", b"b2", b"b3", b"b4"],
    ]
    # Each its own count; keys evicted to make room counted once, by the leader.
    assert outcomes == {
        "first": AppendResult(Status.OK, count=1, evicted=2),
        "p0": AppendResult(Status.OK, count=1, evicted=2),
        "p1": AppendResult(Status.OK, count=2),
        "p2": AppendResult(Status.OK, count=1),
    }
    assert commit._queues == {}


def test_a_group_appends_at_its_latest_now():
    storage = HeldStorage()
    _, produces = held(storage)
    for index, now in enumerate((NOW + 7, NOW + 9, NOW + 8)):
        produces.start(f"p{index}", META, entries(b"%d" % index), now=now)
        produces.queued(index + 2)
    storage.release.set()
    produces.join()
    assert storage.nows == [NOW, NOW + 9]


def test_a_group_stops_at_its_caps_and_the_rest_goes_next(monkeypatch):
    monkeypatch.setattr(group_commit, "MAX_GROUP_ENTRIES", 3)
    storage = HeldStorage()
    _, produces = held(storage)
    for index, batch in enumerate(
        (
            entries(b"a", b"b"),
            entries(b"c"),
            entries(b"d"),
            entries(b"e", b"f", b"g", b"h"),
        )
    ):
        produces.start(f"p{index}", META, batch)
        produces.queued(index + 2)
    storage.release.set()
    produces.join()
    # Three entries at most, but a produce bigger than that on its own goes, alone.
    assert [payloads for _, payloads, _ in storage.calls] == [
        [b"first"],
        [b"a", b"b", b"c"],
        [b"d"],
        [b"e", b"f", b"g", b"h"],
    ]


def test_a_group_stops_at_its_bytes():
    storage = HeldStorage()
    _, produces = held(storage)
    half = b"x" * (MAX_GROUP_BYTES // 2)
    for index in range(3):
        produces.start(f"p{index}", META, entries(half))
        produces.queued(index + 2)
    storage.release.set()
    produces.join()
    assert [len(payloads) for _, payloads, _ in storage.calls] == [1, 2, 1]
    assert MAX_GROUP_ENTRIES >= 1000  # a full batch produce fits on its own


def test_only_produces_holding_the_same_record_go_together():
    storage = HeldStorage()
    _, produces = held(storage)
    newer = dataclasses.replace(META, schema_version=2)
    for index, meta in enumerate((META, newer, newer, META)):
        produces.start(f"p{index}", meta, entries(b"%d" % index))
        produces.queued(index + 2)
    storage.release.set()
    produces.join()
    assert [(m.schema_version, p) for m, p, _ in storage.calls] == [
        (0, [b"first"]),
        (0, [b"0"]),
        (2, [b"1", b"2"]),
        (0, [b"3"]),
    ]


def test_topics_queue_apart_and_keyed_produces_go_alone():
    storage = HeldStorage()
    commit, produces = held(storage)
    other = dataclasses.replace(META, name="u")
    produces.start("other topic", other, entries(b"u"))
    key = IdempotencyKey("k", "digest", 0, 1)
    produces.start("keyed", META, entries(b"keyed"), (key,))
    deadline = time.monotonic() + 10
    while len(storage.calls) < 3:  # both went while "first" is still held
        assert time.monotonic() < deadline
        time.sleep(0.001)
    storage.release.set()
    produces.join()
    assert sorted((m.name, p, k) for m, p, k in storage.calls) == [
        ("t", [b"first"], ()),
        ("t", [b"keyed"], (key,)),
        ("u", [b"u"], ()),
    ]
    assert commit._queues == {}


def test_a_refusal_about_the_topic_is_each_members():
    stale = AppendResult(Status.STALE_SCHEMA, schema_version=3)
    storage = HeldStorage(outcome=stale)
    _, produces = held(storage)
    produces.start("second", META, entries(b"second"))
    produces.queued(2)
    storage.release.set()
    assert produces.join() == {"first": stale, "second": stale}


def test_an_error_is_raised_to_each_member_and_the_queue_moves_on():
    storage = HeldStorage(outcome=StorageError("storage down"))
    commit, produces = held(storage)
    produces.start("second", META, entries(b"second"))
    produces.queued(2)
    storage.release.set()
    outcomes = produces.join()
    assert {name: str(exc) for name, exc in outcomes.items()} == {
        "first": "storage down",
        "second": "storage down",
    }
    storage.outcome = None
    assert commit.append(META, entries(b"later"), NOW).count == 1
    assert commit._queues == {}


class Interruptible:
    """A produce's wake-up whose wait can be cut short, as a worker's kill
    cuts a greenlet's."""

    cut = threading.Event()

    def __init__(self) -> None:
        self.event = threading.Event()

    def set(self) -> None:
        self.event.set()

    def wait(self) -> None:
        while not self.event.wait(0.001):
            if self.cut.is_set():
                raise KeyboardInterrupt


def test_a_produce_cut_short_while_queued_leaves_and_the_lead_passes_on(monkeypatch):
    storage = HeldStorage()
    waits = SimpleNamespace(Lock=threading.Lock, Event=Interruptible)
    monkeypatch.setattr(group_commit, "threading", waits)
    commit, produces = held(storage)
    Interruptible.cut.clear()
    produces.start("cut", META, entries(b"cut"))
    produces.queued(2)
    Interruptible.cut.set()  # only "cut" waits: it leaves the queue
    produces.threads[-1].join(10)
    Interruptible.cut.clear()
    produces.start("after", META, entries(b"after"))
    produces.queued(2)
    storage.release.set()
    outcomes = produces.join()
    assert isinstance(outcomes["cut"], KeyboardInterrupt)
    assert outcomes["after"] == AppendResult(Status.OK, count=1, evicted=2)
    assert [payloads for _, payloads, _ in storage.calls] == [[b"first"], [b"after"]]
    assert commit._queues == {}


def test_a_leader_cut_short_leaves_its_group_uncertain():
    storage = HeldStorage()
    storage.outcomes[1] = KeyboardInterrupt()  # in the second append, led by "second"
    commit, produces = held(storage)
    produces.start("second", META, entries(b"second"))
    produces.queued(2)
    produces.start("third", META, entries(b"third"))
    produces.queued(3)
    storage.release.set()
    outcomes = produces.join()
    assert outcomes["first"] == AppendResult(Status.OK, count=1, evicted=2)
    assert isinstance(outcomes["second"], KeyboardInterrupt)
    assert isinstance(outcomes["third"], StorageUncertain)
    assert "cut short" in str(outcomes["third"])
    assert commit._queues == {}
