"""The notification listener: caches and waiters follow storage events."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator

from narad.broker.notifications import Listener
from narad.broker.records import TopicRecords
from narad.broker.waiters import Waiters
from narad.errors import StorageError
from narad.storage import Entry
from narad.storage import Notification
from narad.storage import PayloadKind
from narad.storage import TopicChanges
from narad.testing.storage_contract import new_meta
from tests.contract.memory import MemoryStorage


def eventually(condition, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.01)
    return False


def test_a_topic_change_elsewhere_drops_the_cached_record():
    storage = MemoryStorage()
    listener = Listener(storage)
    records = TopicRecords(storage, listener)
    meta = new_meta()
    storage.create_topic(meta)
    listener.start()
    assert records.cached(meta.name).visibility_timeout_ms == 1000
    # Another worker alters the topic: this one's cache learns of it.
    storage.alter_topic(meta, TopicChanges(visibility_timeout_ms=5))
    assert eventually(lambda: records.cached(meta.name).visibility_timeout_ms == 5)
    listener.stop()


def test_a_message_elsewhere_wakes_the_topics_waiters():
    storage = MemoryStorage()
    listener = Listener(storage)
    waiters = Waiters(listener)
    live = []
    listener.on_live(live.append)
    meta = new_meta()
    storage.create_topic(meta)
    waiters.generation(meta.name)  # starts the listener
    assert eventually(lambda: live == [True])
    seen = waiters.generation(meta.name)
    entry = Entry(0, b"", b"m", PayloadKind.TEXT)
    storage.append(meta, [entry], schema_version=0, now_ms=0)
    waiters.wait(meta.name, seen, 10.0)
    assert waiters.generation(meta.name) != seen
    listener.stop()


class Flaky(MemoryStorage):
    """Loses its notification stream a few times before it holds."""

    def __init__(self, failures: int) -> None:
        super().__init__()
        self.failures = failures

    def notifications(self, events=None) -> Iterator[Notification | None]:
        if self.failures:
            self.failures -= 1
            raise StorageError("connection refused")
        return super().notifications(events)


def test_a_lost_stream_is_logged_once_and_its_return_once(caplog):
    caplog.set_level(logging.WARNING, logger="narad.broker.notifications")
    storage = Flaky(failures=5)
    listener = Listener(storage)
    live = []
    listener.on_live(live.append)
    listener.start()
    assert eventually(lambda: True in live)
    listener.stop()
    messages = [r.getMessage() for r in caplog.records]
    assert messages == [
        "storage notifications lost: connection refused",
        "storage notifications are back",
    ]
    assert live.count(False) == 5
