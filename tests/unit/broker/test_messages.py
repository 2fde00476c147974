"""MessageService decisions taken from a worker's cached topic record."""

from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace

import pytest

from narad.broker import now_ms
from narad.broker.messages import MessageService
from narad.broker.receipts import Receipt
from narad.broker.records import TopicRecords
from narad.broker.waiters import Waiters
from narad.storage import Entry
from narad.storage import PayloadKind
from narad.storage import Settle
from narad.testing.storage_contract import new_meta
from tests.contract.memory import MemoryStorage
from tests.unit.broker.test_records import Events


@pytest.fixture
def recreated():
    """A worker that cached topic ``t`` with one partition, after another
    node deleted it and created it again with three (the notification has
    not reached the worker yet), and leased a message of partition 2."""
    storage = MemoryStorage()
    events = Events()
    records = TopicRecords(storage, events, max_entries=100)
    service = MessageService(storage, records, None, Waiters(events), max_wait_ms=0)
    old = new_meta(partitions=1)
    storage.create_topic(old)
    records.cached(old.name)
    storage.delete_topic(old)
    new = replace(new_meta(partitions=3), name=old.name)
    storage.create_topic(new)
    for payload in (b"leased", b"waiting"):
        entry = Entry(2, b"", payload, PayloadKind.TEXT, None)
        storage.append(new, [entry], schema_version=0, now_ms=now_ms())
    lease = storage.reserve(new, [2], nonce="A" * 16, now_ms=now_ms()).message
    handle = Receipt(2, lease.offset, lease.nonce).encode()
    return SimpleNamespace(service=service, topic=old.name, handle=handle)


def test_a_stale_record_does_not_refuse_a_partition_the_topic_has(recreated):
    service, topic, handle = recreated.service, recreated.topic, recreated.handle
    assert service.settle_batch(topic, [handle], Settle.EXTEND) == ["extended"]
    service.settle(topic, handle, Settle.ACK)  # not LeaseGone
    assert service.replay(topic, partition=2, offset=0).message.payload == b"leased"
    got = service.consume(topic, wait_ms=0, partition=2)
    assert got.message.payload == b"waiting"


def test_concurrent_single_consumes_share_one_reserve():
    """Single consumes queued behind in_flight others go as one reserve: a
    message each while the topic has them; those left without one look
    again alone, and nothing is leased twice or lost."""
    import threading
    import time

    storage = MemoryStorage()
    events = Events()
    records = TopicRecords(storage, events, max_entries=100)
    service = MessageService(storage, records, None, Waiters(events), max_wait_ms=0)
    in_flight = service._lease_calls.in_flight
    meta = new_meta(partitions=1)
    storage.create_topic(meta)
    stored = [b"m0", b"m1", b"m2"]
    for payload in stored:
        entry = Entry(0, b"", payload, PayloadKind.TEXT, None)
        storage.append(meta, [entry], schema_version=0, now_ms=now_ms())
    gates = [threading.Event() for _ in range(in_flight)]
    alone, grouped = [], []
    reserve, reserve_batch = storage.reserve, storage.reserve_batch

    def held_reserve(*args, **kwargs):
        call = len(alone)
        alone.append(1)
        if call < in_flight:  # the first ones wait to be let through
            assert gates[call].wait(10)
        return reserve(*args, **kwargs)

    def counted_batch(*args, **kwargs):
        if len(kwargs["nonces"]) > 1:  # not a single reserve underneath
            grouped.append(len(kwargs["nonces"]))
        return reserve_batch(*args, **kwargs)

    storage.reserve, storage.reserve_batch = held_reserve, counted_batch
    got = []

    def consume():
        got.append(service.consume(meta.name, wait_ms=0, partition=None))

    first = [threading.Thread(target=consume) for _ in range(in_flight)]
    for thread in first:
        thread.start()
    while len(alone) < in_flight:
        time.sleep(0.001)
    queued = [threading.Thread(target=consume) for _ in range(4)]
    for thread in queued:
        thread.start()
    deadline = time.monotonic() + 10
    while len(service._lease_calls._queues[meta.name].calls) < 4:
        assert time.monotonic() < deadline
        time.sleep(0.001)
    gates[0].set()  # m0; the four queued then go together
    for thread in queued:
        thread.join(10)
    assert grouped == [4]  # one call for the four
    # It leased m1 and m2; the two members left without one looked again
    # alone and found nothing.
    assert len(alone) == in_flight + 2
    assert sorted(d.message.payload for d in got if d is not None) == stored
    assert got.count(None) == 2
    for gate in gates[1:]:
        gate.set()
    for thread in first:
        thread.join(10)
    delivered = [d for d in got if d is not None]
    assert sorted(d.message.payload for d in delivered) == stored
    handles = [d.receipt_handle for d in delivered]
    acks = service.settle_batch(meta.name, handles, Settle.ACK)
    assert acks == ["acked"] * len(stored)
