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
