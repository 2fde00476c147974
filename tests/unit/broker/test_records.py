"""Topic records and the caches attached to them follow topic changes."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import replace
from types import SimpleNamespace

import pytest

from narad.broker import records as records_module
from narad.broker.messages import MessageService
from narad.broker.records import TopicRecords
from narad.broker.topics import TopicService
from narad.broker.waiters import Waiters
from narad.caches import BoundedCache
from narad.errors import TopicNotFound
from narad.storage import Event
from narad.storage import TopicChanges
from narad.testing.storage_contract import new_meta
from tests.contract.memory import MemoryStorage

HOUR = 3_600_000


class Events:
    """A listener whose events the test delivers itself."""

    def __init__(self) -> None:
        self.handlers = defaultdict(list)
        self.live = []
        self.ticks = []
        self.started = 0

    def on(self, event, handler):
        self.handlers[event].append(handler)

    def on_live(self, handler):
        self.live.append(handler)

    def on_tick(self, handler):
        self.ticks.append(handler)

    def start(self):
        self.started += 1

    def changed(self, topic: str) -> None:
        for handler in self.handlers[Event.TOPIC_CHANGED]:
            handler(topic)

    def going_live(self) -> None:
        for handler in self.live:
            handler(True)

    def tick(self) -> None:
        for handler in self.ticks:
            handler()


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch) -> Clock:
    clock = Clock()
    monkeypatch.setattr(records_module, "time", SimpleNamespace(monotonic=clock))
    return clock


@pytest.fixture
def world(clock):
    storage = MemoryStorage()
    events = Events()
    records = TopicRecords(storage, events, max_entries=100)
    # Like the validators (dropped on any change) and the round-robin
    # counters (kept while the topic lives on).
    validators = BoundedCache("v", max_entries=100, topic_of=lambda k: k[0])
    counters = BoundedCache("c", max_entries=100, topic_of=lambda k: k[0])
    records.attach(
        validators,
        lambda key, meta: key[1:] == (meta.epoch, meta.schema_version),
        kept_on_change=False,
    )
    records.attach(
        counters, lambda key, meta: key[1] == meta.epoch, kept_on_change=True
    )
    meta = new_meta()
    storage.create_topic(meta)
    return SimpleNamespace(
        storage=storage,
        events=events,
        records=records,
        validators=validators,
        counters=counters,
        meta=meta,
    )


def hold(w) -> None:
    w.records.cached(w.meta.name)
    w.validators.put((w.meta.name, w.meta.epoch, 0), "validator")
    w.counters.put((w.meta.name, w.meta.epoch), "ticks")


def test_caching_a_record_starts_the_listener(world):
    w = world
    assert w.events.started == 0
    w.records.cached(w.meta.name)
    assert w.events.started == 1


def test_an_alter_elsewhere_drops_the_record_and_validators_but_keeps_the_ticks(
    world,
):
    w = world
    hold(w)
    w.events.changed(w.meta.name)
    assert len(w.records.cache) == 0
    assert len(w.validators) == 0
    assert len(w.counters) == 1
    # Read again, same epoch: the round-robin goes on where it was.
    w.records.cached(w.meta.name)
    assert w.counters.get((w.meta.name, w.meta.epoch)) == "ticks"


def test_a_delete_elsewhere_drops_everything_once_the_grace_is_over(world, clock):
    w = world
    hold(w)
    w.storage.delete_topic(w.meta)
    w.events.changed(w.meta.name)
    w.events.tick()
    assert len(w.counters) == 1  # not yet: the topic might be read again
    # A produce in flight when the change came puts its validator after it.
    w.validators.put((w.meta.name, w.meta.epoch, 0), "late")
    clock.now += records_module.CHANGED_GRACE_S
    w.events.tick()
    assert len(w.counters) == 0
    assert len(w.validators) == 0


def test_a_change_heard_while_reading_a_record_keeps_the_read_out(world):
    # The read was answered before another worker's alter, whose event this
    # worker handles before the reading request caches what it read.
    w = world
    read = w.storage.get_topic

    def read_then_altered(name):
        before = read(name)
        w.storage.alter_topic(before, TopicChanges(retention_ms=HOUR))
        w.events.changed(name)
        return before

    w.storage.get_topic = read_then_altered
    assert w.records.cached(w.meta.name).retention_ms == 0
    w.storage.get_topic = read
    assert w.records.cached(w.meta.name).retention_ms == HOUR


def test_a_topic_deleted_before_its_creator_heard_back_is_not_cached(world):
    # Another worker deleted the topic between the create script and its
    # reply, and this worker handled that event first: the record it then
    # cached outlived the topic (a replay said "no message at offset 0"
    # instead of "topic not found", until the name changed again).
    w = world
    create = w.storage.create_topic

    def create_then_deleted(meta):
        result = create(meta)
        w.storage.delete_topic(w.storage.get_topic(meta.name))
        w.events.changed(meta.name)
        return result

    w.storage.create_topic = create_then_deleted
    TopicService(w.storage, w.records, None, None).create("fresh", {}, None)
    assert w.records.cache.get("fresh") is None
    messages = MessageService(
        w.storage, w.records, None, Waiters(w.events), max_wait_ms=0
    )
    with pytest.raises(TopicNotFound):
        messages.replay("fresh", partition=0, offset=0)


def test_a_recreated_topic_drops_the_former_incarnations_entries(world):
    w = world
    hold(w)
    w.storage.delete_topic(w.meta)
    w.storage.create_topic(replace(w.meta, epoch="second"))
    w.events.changed(w.meta.name)
    assert w.records.cached(w.meta.name).epoch == "second"
    assert len(w.counters) == 0
    assert len(w.validators) == 0


def test_a_new_schema_version_drops_the_old_versions_validator(world):
    w = world
    hold(w)
    w.records.put(replace(w.meta, schema_version=1))
    assert len(w.validators) == 0
    assert len(w.counters) == 1


def test_a_delete_served_here_drops_everything(world, clock):
    w = world
    hold(w)
    w.storage.delete_topic(w.meta)
    w.records.drop(w.meta.name)
    assert (len(w.records.cache), len(w.validators), len(w.counters)) == (0, 0, 1)
    clock.now += records_module.CHANGED_GRACE_S
    w.events.tick()
    assert len(w.counters) == 0


def test_a_stream_that_comes_back_distrusts_every_record(world, clock):
    w = world
    hold(w)
    w.validators.put(("gone", "e", 0), "dead")
    w.events.going_live()
    assert len(w.records.cache) == 0
    # Keyed by epoch and version, the others are never wrong, only maybe
    # dead: what is read again soon stays.
    w.records.cached(w.meta.name)
    clock.now += records_module.CHANGED_GRACE_S
    w.events.tick()
    assert len(w.validators) == 1
    assert len(w.counters) == 1
    assert "gone" not in w.validators.topics()


def test_changes_waiting_for_their_grace_are_bounded(world):
    w = world
    for i in range(150):
        w.counters.put((f"t{i}", "e"), i)
        w.events.changed(f"t{i}")
    assert len(w.records._changed) == 100
    assert len(w.counters) == 100  # the 50 oldest went at once
