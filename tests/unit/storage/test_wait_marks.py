"""``MESSAGES`` is published only for topics some consumer may wait on
(their ``waited`` mark is live), and the consume path marks a topic before
a long poll looks, once per mark's lifetime (fakeredis)."""

from __future__ import annotations

import time
import uuid

import falcon.testing
import pytest

from narad import testing
from narad.broker.waiters import MARK_SLACK_MS
from narad.config import Config
from narad.storage import Entry
from narad.storage import Event
from narad.storage import Lease
from narad.storage import PayloadKind
from narad.storage import Settle
from narad.storage import Status
from narad.testing.storage_contract import LIMITS
from narad.testing.storage_contract import new_meta
from narad_redis import fakeredis

NOW = 1_000_000
SENTINEL = "sentinel"


@pytest.fixture
def storage():
    backend = fakeredis.connect(f"fakeredis://{uuid.uuid4().hex}", Config.load(env={}))
    yield backend
    backend.close()


@pytest.fixture
def events(storage):
    """A function returning every ``messages`` event published since the
    last call (the events channel read up to a sentinel of the test's own)."""
    pubsub = storage.client.redis.pubsub(ignore_subscribe_messages=True)
    pubsub.subscribe(storage.EVENTS)

    def published() -> list[str]:
        storage.client.redis.publish(storage.EVENTS, SENTINEL)
        found = []
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            message = pubsub.get_message(timeout=0.1)
            if message is None:
                continue
            data = message["data"].decode()
            if data == SENTINEL:
                return found
            if data.startswith(Event.MESSAGES.value + " "):
                found.append(data)
        raise AssertionError("the sentinel never came back")

    yield published
    pubsub.close()


def topic(storage, **settings):
    meta = new_meta(**settings)
    assert storage.create_topic(meta, None, limits=LIMITS).status is Status.OK
    return storage.get_topic(meta.name)


def produce(storage, meta, count=1, now=NOW):
    entries = [
        Entry(i % meta.partitions, b"", b"m", PayloadKind.TEXT) for i in range(count)
    ]
    result = storage.append(meta, entries, schema_version=0, now_ms=now)
    assert result.status is Status.OK
    return result


def give_back(storage, meta, now=NOW, batch=False):
    lease = storage.reserve(meta, [0], nonce="n" * 16, now_ms=now).message
    assert lease is not None
    if batch:
        leases = [Lease(0, lease.offset, lease.nonce)]
        (status,) = storage.settle_batch(
            meta, leases, action=Settle.RELEASE, now_ms=now
        )
    else:
        status = storage.settle(
            meta, 0, lease.offset, lease.nonce, action=Settle.RELEASE, now_ms=now
        )
    assert status is Status.OK


def test_nothing_is_published_for_a_topic_nobody_waits_on(storage, events):
    meta = topic(storage, partitions=2)
    events()
    produce(storage, meta)
    produce(storage, meta, count=5)  # a batch
    give_back(storage, meta)
    give_back(storage, meta, batch=True)
    assert events() == []


def test_a_live_mark_publishes_each_write(storage, events):
    meta = topic(storage, partitions=2)
    assert storage.mark_waiting(meta, NOW) is Status.OK  # live at NOW itself
    events()
    produce(storage, meta)
    assert events() == [f"messages {meta.name}"]
    produce(storage, meta, count=5)
    assert events() == [f"messages {meta.name}"]
    give_back(storage, meta)
    assert events() == [f"messages {meta.name}"]
    give_back(storage, meta, batch=True)
    assert events() == [f"messages {meta.name}"]


def test_an_expired_mark_publishes_nothing(storage, events):
    meta = topic(storage)
    assert storage.mark_waiting(meta, NOW - 1) is Status.OK
    events()
    produce(storage, meta)
    give_back(storage, meta)
    assert events() == []


def test_fan_out_copies_publish_for_a_waited_on_child(storage, events):
    parent, child, other = (topic(storage) for _ in range(3))
    for each in (child, other):
        result = storage.attach_child(
            parent, each, delay_ms=0, limits=LIMITS, max_children=108
        )
        assert result.status is Status.OK
        parent = storage.get_topic(parent.name)
    events()
    produce(storage, parent)
    assert events() == []  # nobody waits on the parent or a child
    assert storage.mark_waiting(storage.get_topic(child.name), NOW) is Status.OK
    produce(storage, parent)
    # One event for the parent and its children, as without marks.
    assert events() == [f"messages {parent.name} {child.name} {other.name}"]
    produce(storage, parent, now=NOW + 1)  # the child's mark ran out
    assert events() == []


def test_the_mark_goes_with_the_topic(storage, events):
    meta = topic(storage)
    assert storage.mark_waiting(meta, NOW) is Status.OK
    key = f"narad:{{{meta.name}}}:waited"
    assert storage.client.redis.get(key) == str(NOW).encode()
    assert storage.mark_waiting(meta, NOW - 5) is Status.OK  # keeps the latest
    assert storage.client.redis.get(key) == str(NOW).encode()
    assert storage.delete_topic(meta) is Status.OK
    assert storage.client.redis.exists(key) == 0
    again = topic(storage, name=meta.name)
    events()
    produce(storage, again)
    assert events() == []  # the new incarnation starts unmarked


# -- the consume path -------------------------------------------------------------


@pytest.fixture
def app(tmp_path):
    return testing.make_app(testing.make_config(tmp_path))  # closed after the test


def create(app, client, name="t"):
    """Create ``name`` and let the app's listener hear of it (live, and past
    the create's own TOPIC_CHANGED, which drops what the worker holds)."""
    waiters = app._waiters
    deadline = time.monotonic() + 5
    # Live first: going live drops what the worker holds too, and a loop
    # ended by that would let the create's TOPIC_CHANGED come later.
    while not waiters.quiet(name, waiters.generation(name)):
        assert time.monotonic() < deadline, "the listener never went live"
        time.sleep(0.01)
    before = waiters.generation(name)
    assert client.simulate_post("/v1/topics", json={"name": name}).status_code == 201
    while waiters.generation(name) == before or not waiters.quiet(
        name, waiters.generation(name)
    ):
        assert time.monotonic() < deadline, "the create was never heard"
        time.sleep(0.01)


@pytest.fixture
def marks(app):
    """Every mark the app writes, as (topic, until, epoch)."""
    storage = app._waiters._listener._storage
    written = []
    mark = storage.mark_waiting

    def recording(meta, until_ms):
        written.append((meta.name, until_ms, meta.epoch))
        return mark(meta, until_ms)

    storage.mark_waiting = recording
    return written


def test_a_long_poll_marks_its_topic_once_for_the_mark_s_lifetime(app, marks):
    client = falcon.testing.TestClient(app)
    create(app, client)
    before = int(time.time() * 1000)
    resp = client.simulate_get("/v1/topics/t/consume", params={"wait": "20ms"})
    assert resp.status_code == 204
    assert len(marks) == 1
    name, until, _ = marks[0]
    assert name == "t" and until >= before + 20 + MARK_SLACK_MS
    for path in ("/v1/topics/t/consume", "/v1/topics/t/consume/batch") * 3:
        assert client.simulate_get(path, params={"wait": "20ms"}).status_code == 204
    assert len(marks) == 1
    # A wait longer than the remembered mark covers writes again.
    app._waiters._topics["t"].mark = ("stale-epoch", until)
    client.simulate_get("/v1/topics/t/consume", params={"wait": "20ms"})
    assert len(marks) == 2


def test_consumes_that_cannot_wait_write_no_mark(app, marks):
    client = falcon.testing.TestClient(app)
    create(app, client)
    assert client.simulate_post("/v1/topics/t/produce", body=b"{}").status_code == 202
    assert client.simulate_get("/v1/topics/t/consume").status_code == 200
    assert client.simulate_get("/v1/topics/t/consume").status_code == 204
    assert client.simulate_get("/v1/topics/t/consume/batch").status_code == 204
    assert client.simulate_post("/v1/topics/t/produce", body=b"{}").status_code == 202
    assert client.simulate_get("/v1/topics/t/consume/batch").status_code == 200
    replay = client.simulate_get(
        "/v1/topics/t/consume", params={"partition": "0", "offset": "0"}
    )
    assert replay.status_code == 200
    assert marks == []


def test_a_changed_topic_is_marked_again(app, marks):
    client = falcon.testing.TestClient(app)
    create(app, client)
    client.simulate_get("/v1/topics/t/consume", params={"wait": "10ms"})
    assert client.simulate_delete("/v1/topics/t").status_code == 204
    assert client.simulate_post("/v1/topics", json={"name": "t"}).status_code == 201
    # Whether or not this worker heard TOPIC_CHANGED yet: the new epoch
    # is marked before the look (and again if the create's TOPIC_CHANGED
    # drops the worker's note of it during the wait).
    client.simulate_get("/v1/topics/t/consume", params={"wait": "10ms"})
    epochs = [epoch for _, _, epoch in marks]
    assert len(set(epochs)) == 2 and epochs[-1] != epochs[0]
    storage = app._waiters._listener._storage
    assert storage.client.redis.exists("narad:{t}:waited") == 1


def test_a_failed_mark_fails_the_consume(app):
    from narad.errors import StorageError

    client = falcon.testing.TestClient(app)
    create(app, client)
    storage = app._waiters._listener._storage

    def failing(meta, until_ms):
        raise StorageError("storage down")

    storage.mark_waiting = failing
    resp = client.simulate_get("/v1/topics/t/consume", params={"wait": "10ms"})
    assert resp.status_code == 503
