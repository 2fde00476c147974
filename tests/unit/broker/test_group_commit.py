"""Group commit: small produces queued behind appends in flight go together."""

from __future__ import annotations

import dataclasses
import threading
import time
from types import SimpleNamespace

from narad.broker import group_commit
from narad.broker.group_commit import ALONE_BYTES
from narad.broker.group_commit import ALONE_ENTRIES
from narad.broker.group_commit import IN_FLIGHT
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
OK = AppendResult(Status.OK, count=1, evicted=2)  # a lone one-entry produce's


def entries(*payloads: bytes) -> list[Entry]:
    return [Entry(0, b"", p, PayloadKind.TEXT) for p in payloads]


class HeldStorage:
    """Records each append; appends are held in flight until ``release`` is
    set, and answer ``outcome`` (OK with their entries, by default), or
    ``outcomes[i]`` for the i-th call (from 0) when given."""

    def __init__(self, outcome=None) -> None:
        self.calls: list[tuple[TopicMeta, list[bytes], tuple]] = []
        self.nows: list[int] = []
        self.release = threading.Event()
        self.outcome = outcome
        self.outcomes: dict[int, object] = {}
        self._lock = threading.Lock()

    def append(self, meta, entries, *, schema_version, now_ms, idempotency, limits):
        assert schema_version == meta.schema_version and limits is DEFAULT_IDEMPOTENCY
        with self._lock:
            index = len(self.calls)
            self.calls.append((meta, [e.payload for e in entries], tuple(idempotency)))
            self.nows.append(now_ms)
        assert self.release.wait(10)
        outcome = self.outcomes.get(index, self.outcome)
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome or AppendResult(Status.OK, count=len(entries), evicted=2)

    def sent(self, count: int) -> None:
        """Wait until ``count`` appends were sent."""
        deadline = time.monotonic() + 10
        while len(self.calls) < count:
            assert time.monotonic() < deadline, "appends were not sent"
            time.sleep(0.001)

    def payloads(self, start: int = IN_FLIGHT) -> list[list[bytes]]:
        """What the appends from the ``start``-th on carried."""
        return [payloads for _, payloads, _ in self.calls[start:]]


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
        """Wait until ``count`` produces queue for ``topic``."""
        deadline = time.monotonic() + 10
        while True:
            state = self.commit._topics.get(topic)
            if state is not None and len(state.queue) >= count:
                return
            assert time.monotonic() < deadline, "produces did not queue"
            time.sleep(0.001)

    def join(self) -> dict[str, object]:
        for thread in self.threads:
            thread.join(10)
        return self.outcomes


def held(storage: HeldStorage) -> tuple[GroupCommit, Produces]:
    """A commit with :data:`IN_FLIGHT` appends of topic t in flight, held."""
    commit = GroupCommit(storage, DEFAULT_IDEMPOTENCY)
    produces = Produces(commit)
    for index in range(IN_FLIGHT):
        produces.start(f"first{index}", META, entries(b"first%d" % index))
    storage.sent(IN_FLIGHT)
    return commit, produces


def queue(produces: Produces, *batches: list[Entry], meta=META) -> None:
    """Queue one produce of each of ``batches``, in order (named p0, p1...)."""
    for index, batch in enumerate(batches):
        produces.start(f"p{index}", meta, batch)
        produces.queued(index + 1, meta.name)


def test_a_lone_produce_goes_at_once_and_leaves_nothing_behind():
    storage = HeldStorage()
    storage.release.set()
    commit = GroupCommit(storage, DEFAULT_IDEMPOTENCY)
    result = commit.append(META, entries(b"a", b"b"), NOW)
    assert result == AppendResult(Status.OK, count=2, evicted=2)
    assert storage.calls == [(META, [b"a", b"b"], ())]
    assert commit._topics == {}


def test_a_few_produces_go_at_once_and_the_next_ones_queue():
    storage = HeldStorage()
    commit, produces = held(storage)  # IN_FLIGHT sent, none waiting
    assert IN_FLIGHT >= 2
    assert len(commit._topics["t"].queue) == 0
    queue(produces, entries(b"q"))
    assert len(storage.calls) == IN_FLIGHT
    storage.release.set()
    assert produces.join()["p0"] == OK
    assert commit._topics == {}


def test_queued_produces_go_in_one_append_in_order():
    storage = HeldStorage()
    commit, produces = held(storage)
    queue(produces, entries(b"b1"), entries(b"b2", b"b3"), entries(b"b4"))
    storage.release.set()
    outcomes = produces.join()
    assert storage.payloads() == [[b"b1", b"b2", b"b3", b"b4"]]
    # Each its own count; keys evicted to make room counted once, by the leader.
    assert outcomes == {
        **{f"first{i}": OK for i in range(IN_FLIGHT)},
        "p0": OK,
        "p1": AppendResult(Status.OK, count=2),
        "p2": AppendResult(Status.OK, count=1),
    }
    assert commit._topics == {}


def test_a_group_appends_at_its_latest_now():
    storage = HeldStorage()
    _, produces = held(storage)
    for index, now in enumerate((NOW + 7, NOW + 9, NOW + 8)):
        produces.start(f"p{index}", META, entries(b"%d" % index), now=now)
        produces.queued(index + 1)
    storage.release.set()
    produces.join()
    assert storage.nows[IN_FLIGHT:] == [NOW + 9]


def test_a_group_stops_at_its_caps_and_the_rest_goes_next(monkeypatch):
    monkeypatch.setattr(group_commit, "MAX_GROUP_ENTRIES", 3)
    monkeypatch.setattr(group_commit, "MAX_GROUP_BYTES", 5)
    storage = HeldStorage()
    _, produces = held(storage)
    queue(
        produces,
        entries(b"a", b"b"),
        entries(b"c"),  # three entries
        entries(b"dd"),
        entries(b"eeee"),  # six bytes
        entries(b"f"),
    )
    storage.release.set()
    produces.join()
    # The groups may go side by side: in any order.
    assert sorted(storage.payloads()) == [[b"a", b"b", b"c"], [b"dd"], [b"eeee", b"f"]]


def test_big_produces_go_alone_at_once():
    storage = HeldStorage()
    _, produces = held(storage)
    many = entries(*[b"m"] * ALONE_ENTRIES)
    large = entries(b"x" * ALONE_BYTES)
    produces.start("many", META, many)
    produces.start("large", META, large)
    storage.sent(IN_FLIGHT + 2)  # while the others are still held
    storage.release.set()
    outcomes = produces.join()
    assert sorted(map(len, storage.payloads())) == [1, ALONE_ENTRIES]
    assert outcomes["many"].count == ALONE_ENTRIES


def test_only_produces_holding_the_same_record_go_together():
    storage = HeldStorage()
    _, produces = held(storage)
    newer = dataclasses.replace(META, schema_version=2)
    for index, meta in enumerate((META, newer, newer, META)):
        produces.start(f"p{index}", meta, entries(b"%d" % index))
        produces.queued(index + 1)
    storage.release.set()
    produces.join()
    assert sorted((m.schema_version, p) for m, p, _ in storage.calls[IN_FLIGHT:]) == [
        (0, [b"0"]),
        (0, [b"3"]),
        (2, [b"1", b"2"]),
    ]


def test_topics_queue_apart_and_keyed_produces_go_alone():
    storage = HeldStorage()
    commit, produces = held(storage)
    other = dataclasses.replace(META, name="u")
    produces.start("other topic", other, entries(b"u"))
    key = IdempotencyKey("k", "digest", 0, 1)
    produces.start("keyed", META, entries(b"keyed"), (key,))
    storage.sent(IN_FLIGHT + 2)  # both went while the others are held
    storage.release.set()
    produces.join()
    assert sorted((m.name, p, k) for m, p, k in storage.calls[IN_FLIGHT:]) == [
        ("t", [b"keyed"], (key,)),
        ("u", [b"u"], ()),
    ]
    assert commit._topics == {}


def test_a_refusal_about_the_topic_is_each_members():
    stale = AppendResult(Status.STALE_SCHEMA, schema_version=3)
    storage = HeldStorage(outcome=stale)
    _, produces = held(storage)
    queue(produces, entries(b"p0"), entries(b"p1"))
    storage.release.set()
    outcomes = produces.join()
    assert outcomes["p0"] == outcomes["p1"] == stale


def test_an_error_is_raised_to_each_member_and_the_queue_moves_on():
    storage = HeldStorage()
    storage.outcomes[IN_FLIGHT] = StorageError("storage down")
    commit, produces = held(storage)
    queue(produces, entries(b"p0"), entries(b"p1"))
    storage.release.set()
    outcomes = produces.join()
    assert [str(outcomes[name]) for name in ("p0", "p1")] == ["storage down"] * 2
    assert commit.append(META, entries(b"later"), NOW) == OK
    assert commit._topics == {}


def test_a_leader_cut_short_leaves_its_group_uncertain():
    storage = HeldStorage()
    storage.outcomes[IN_FLIGHT] = KeyboardInterrupt()  # the queued group's append
    commit, produces = held(storage)
    queue(produces, entries(b"p0"), entries(b"p1"))
    storage.release.set()
    outcomes = produces.join()
    assert isinstance(outcomes["p0"], KeyboardInterrupt)
    assert isinstance(outcomes["p1"], StorageUncertain)
    assert commit._topics == {}


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


def interruptible(monkeypatch) -> None:
    Interruptible.cut.clear()
    waits = SimpleNamespace(Lock=threading.Lock, Event=Interruptible)
    monkeypatch.setattr(group_commit, "threading", waits)


def test_a_produce_cut_short_while_queued_leaves_the_queue(monkeypatch):
    storage = HeldStorage()
    interruptible(monkeypatch)
    commit, produces = held(storage)
    queue(produces, entries(b"cut"))
    Interruptible.cut.set()  # only the queued one waits: it leaves
    produces.threads[-1].join(10)
    Interruptible.cut.clear()
    assert not commit._topics["t"].queue
    produces.start("after", META, entries(b"after"))
    produces.queued(1)
    storage.release.set()
    outcomes = produces.join()
    assert isinstance(outcomes["p0"], KeyboardInterrupt)
    assert outcomes["after"] == OK
    assert storage.payloads() == [[b"after"]]
    assert commit._topics == {}


def test_a_group_whose_leader_was_cut_short_fails_unsent(monkeypatch):
    storage = HeldStorage()
    interruptible(monkeypatch)
    commit, produces = held(storage)
    queue(produces, entries(b"p0"), entries(b"p1"))
    # Made the next group's leader, and then cut short before it sends.
    with commit._lock:
        topic = commit._topics["t"]
        group = commit._take(topic.queue)
        group[0].group = group
        topic.in_flight += 1  # its slot, as a returning append hands it on
    Interruptible.cut.set()
    produces.threads[-2].join(10)
    Interruptible.cut.clear()
    storage.release.set()
    outcomes = produces.join()
    assert isinstance(outcomes["p0"], KeyboardInterrupt)
    assert isinstance(outcomes["p1"], StorageError)
    assert "before the append was sent" in str(outcomes["p1"])
    assert len(storage.calls) == IN_FLIGHT  # nothing of theirs
    assert commit._topics == {}
