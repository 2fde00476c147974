"""The storage guard: how often it asks, what it refuses, what it logs."""

from __future__ import annotations

import logging
import uuid

import pytest

from narad import guard
from narad import testing
from narad.config import Config
from narad.errors import InvalidConfiguration
from narad.guard import StorageGuard
from narad.guard import check_at_start
from narad.storage import ServerStatus

DURABLE = ServerStatus(True, "appendonly yes, appendfsync always", 10, 100)
EVERYSEC = ServerStatus(False, "appendfsync is everysec, not always", 10, 100)


class Scripted:
    """A storage whose server_status answers come from a list."""

    def __init__(self, *answers: ServerStatus | None) -> None:
        self.answers = list(answers)
        self.asked = 0

    def server_status(self) -> ServerStatus | None:
        self.asked += 1
        return self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_known_status_is_read_again_only_once_stale():
    storage, clock = Scripted(DURABLE), Clock()
    watch = StorageGuard(storage, relaxed=False, clock=clock)
    assert watch.refusal() is None
    watch.refusal()
    clock.now += guard.FRESH_S / 2
    watch.status()
    assert storage.asked == 1
    clock.now += guard.FRESH_S
    watch.status()
    assert storage.asked == 2


def test_an_unreachable_storage_is_asked_again_soon_and_refuses_writes():
    storage, clock = Scripted(None, None, DURABLE), Clock()
    watch = StorageGuard(storage, relaxed=False, clock=clock)
    assert watch.refusal() == "storage unavailable, retry"
    assert watch.refusal() == "storage unavailable, retry"  # not asked again yet
    assert storage.asked == 1
    clock.now += guard.RETRY_S
    assert watch.refusal() == "storage unavailable, retry"
    clock.now += guard.RETRY_S
    assert watch.refusal() is None
    assert storage.asked == 3


def test_a_lost_link_makes_the_next_write_wait_for_a_fresh_check():
    storage, clock = Scripted(DURABLE, EVERYSEC), Clock()
    watch = StorageGuard(storage, relaxed=False, clock=clock)
    assert watch.refusal() is None
    watch.stream_live(True)
    assert watch.refusal() is None
    assert storage.asked == 1
    watch.stream_live(False)  # long before FRESH_S has passed
    assert watch.refusal().startswith("storage is not durable (appendfsync is")
    assert storage.asked == 2


def test_an_answer_read_while_the_link_was_lost_is_not_trusted():
    watch = None

    class LostWhileAsked(Scripted):
        def server_status(self):
            if self.asked == 0:
                watch.stream_live(False)
            return super().server_status()

    storage = LostWhileAsked(EVERYSEC, DURABLE)
    watch = StorageGuard(storage, relaxed=False, clock=Clock())
    assert watch.refusal() == "storage unavailable, retry"
    assert watch.refusal() is None  # asked again at once: the new server's answer
    assert storage.asked == 2


def test_not_durable_refuses_writes_unless_relaxed():
    clock = Clock()
    strict = StorageGuard(Scripted(EVERYSEC), relaxed=False, clock=clock)
    assert strict.refusal() == (
        "storage is not durable (appendfsync is everysec, not always): "
        "writes are refused"
    )
    relaxed = StorageGuard(Scripted(EVERYSEC, None), relaxed=True, clock=clock)
    assert relaxed.refusal() is None
    clock.now += guard.FRESH_S
    assert relaxed.refusal() is None  # unreachable: left to the storage calls


def test_each_change_of_durability_is_logged_once(caplog):
    storage, clock = (
        Scripted(DURABLE, DURABLE, EVERYSEC, None, EVERYSEC, DURABLE),
        Clock(),
    )
    watch = StorageGuard(storage, relaxed=False, clock=clock)
    with caplog.at_level(logging.INFO, logger="narad.guard"):
        for _ in range(6):
            watch.status()
            clock.now += guard.FRESH_S
    assert [r.getMessage() for r in caplog.records] == [
        "storage is not durable: appendfsync is everysec, not always",
        "storage is durable again: appendonly yes, appendfsync always",
    ]


def fakeredis_config(**overrides) -> Config:
    values = {"storage.url": f"fakeredis://{uuid.uuid4().hex}", **overrides}
    return Config.load(env={}, overrides=values)


def test_a_storage_that_is_not_durable_stops_the_start_unless_relaxed(
    caplog, monkeypatch
):
    # The master loads the production plugins; the test adds fakeredis.
    monkeypatch.setattr(
        "narad.plugins.load_plugins", lambda config: testing.load_plugins(config=config)
    )
    # fakeredis answers neither INFO nor CONFIG: nothing proves it durable.
    with pytest.raises(InvalidConfiguration) as info:
        check_at_start(fakeredis_config())
    message = str(info.value)
    assert "is not durable (INFO refused:" in message
    assert '`storage.durability` = "relaxed"' in message
    with caplog.at_level(logging.WARNING, logger="narad.guard"):
        check_at_start(fakeredis_config(**{"storage.durability": "relaxed"}))
    assert "a 202 does not mean the message is on disk" in caplog.text


def test_logged_urls_hide_the_password():
    hide = guard._without_password
    assert hide("redis://narad:s3cret@db:6379/0") == "redis://narad:***@db:6379/0"
    assert hide("unix://narad@/run/v.sock") == "unix://narad@/run/v.sock"
    assert hide("rediss://:s3cret@db/0") == "rediss://:***@db/0"


def test_writes_wait_for_a_durable_storage_and_reads_do_not():
    # fakeredis proves nothing durable: strict refuses its writes.
    client = testing.client(fakeredis_config())
    refused = client.simulate_post("/v1/topics", json={"name": "t"})
    assert refused.status_code == 503
    assert refused.json["error"].startswith("storage is not durable (INFO refused:")
    assert client.simulate_get("/readyz").json == refused.json
    assert client.simulate_get("/v1/topics").status_code == 200
    assert client.simulate_post("/v1/nothing").status_code == 404
    assert client.simulate_get("/healthz").status_code == 200
