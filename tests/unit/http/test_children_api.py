"""Fan-out over the API in-process (fakeredis): stale worker caches, long
polls on delay children, and what the responses carry."""

from __future__ import annotations

import re
import threading
import time

import falcon.testing
import pytest

from narad import testing


@pytest.fixture
def two_workers(config):
    """Two apps (two workers' caches) over one storage."""
    return testing.client(config), testing.client(config)


def make(client, name, **fields):
    resp = client.simulate_post("/v1/topics", json={"name": name, **fields})
    assert resp.status_code == 201, resp.text
    return resp.json


def produce(client, topic, body=b"{}", **params):
    return client.simulate_post(f"/v1/topics/{topic}/produce", body=body, params=params)


def offsets(client, topic):
    stats = client.simulate_get(f"/v1/topics/{topic}").json["partition_stats"]
    return [s["next_offset"] for s in stats]


def test_a_worker_with_a_stale_record_still_copies_to_a_new_child(two_workers):
    a, b = two_workers
    make(a, "p", partitions=1)
    make(a, "c", partitions=1)
    assert produce(a, "p").status_code == 202  # a caches p without children
    resp = b.simulate_post("/v1/topics/p/children", json={"child": "c"})
    assert resp.status_code == 200
    assert produce(a, "p", b'{"n": 2}').status_code == 202
    copy = a.simulate_get("/v1/topics/c/consume", params={"partition": 0, "offset": 0})
    assert copy.json["payload"] == {"n": 2}
    assert b.simulate_delete("/v1/topics/p/children/c").status_code == 204
    assert produce(a, "p").status_code == 202  # a caches p with c: not copied
    assert offsets(a, "c") == [1]


def test_a_worker_with_a_stale_record_refuses_a_new_delay_child(two_workers):
    a, b = two_workers
    make(a, "p")
    make(a, "c")
    assert produce(a, "c").status_code == 202
    b.simulate_post("/v1/topics/p/children", json={"child": "c", "delay_ms": 60_000})
    resp = produce(a, "c")
    assert resp.status_code == 409
    assert resp.json["error"] == (
        "topic c is a delay child of p: it takes messages only from its parent; "
        "produce to p"
    )
    b.simulate_delete("/v1/topics/p/children/c")
    assert produce(a, "c").status_code == 202  # a cached it as a delay child


def test_create_as_child_of_a_missing_parent_is_404_and_creates_nothing(client):
    resp = client.simulate_post("/v1/topics", json={"name": "c", "parent": "nope"})
    assert resp.status_code == 404
    assert resp.json["error"] == "topic nope not found"
    assert client.simulate_get("/v1/topics/c").status_code == 404


def test_parent_null_creates_a_plain_topic(client):
    record = make(client, "t", parent=None)
    assert "parent" not in record


def test_children_of_a_topic_without_any_and_of_no_topic(client):
    make(client, "t")
    listed = client.simulate_get("/v1/topics/t/children")
    assert listed.json == {"parent": "t", "children": []}
    assert client.simulate_head("/v1/topics/t/children").status_code == 200
    assert client.simulate_get("/v1/topics/none/children").status_code == 404
    resp = client.simulate_delete("/v1/topics/t/children/none")
    assert (resp.status_code, resp.json["error"]) == (
        404,
        "topic none is not a child of t",
    )


def test_the_copies_are_counted(client):
    def copies():
        text = client.simulate_get("/metrics").text
        found = re.search(r"^narad_fanout_copies_total (\S+)$", text, re.M)
        return float(found.group(1))

    make(client, "p", partitions=1)
    for name in ("c1", "c2"):
        make(client, name, parent="p")
    before = copies()
    produce(client, "p")
    batch = {"messages": [{"value": "a"}, {"value": "b"}]}
    client.simulate_post("/v1/topics/p/produce/batch", json=batch)
    assert copies() == before + 6


@pytest.fixture
def live_app(config):
    """An app whose notification listener is up (long polls then sleep)."""
    app = testing.make_app(config)
    waiters = app._waiters
    waiters.generation("-")  # starts the listener
    deadline = time.monotonic() + 5
    while not waiters.quiet("-", waiters.generation("-")):
        assert time.monotonic() < deadline, "no subscription"
        time.sleep(0.01)
    yield app
    waiters.stop()


def test_a_long_poll_on_a_delay_child_wakes_when_the_copy_falls_due(live_app):
    client = falcon.testing.TestClient(live_app)
    make(client, "p", partitions=1)
    make(client, "late", parent="p", fanout_delay_ms=700)
    storage = live_app._waiters._listener._storage
    looks = []
    reserve = storage.reserve

    def counting(*args, **kwargs):
        result = reserve(*args, **kwargs)
        looks.append(result)
        return result

    storage.reserve = counting
    answer = {}

    def poll():
        answer["response"] = client.simulate_get(
            "/v1/topics/late/consume", params={"wait": "10s"}
        )
        answer["at"] = time.time() * 1000

    polling = threading.Thread(target=poll)
    polling.start()
    time.sleep(0.1)
    assert produce(client, "p", b'{"n": 1}').status_code == 202
    polling.join(15)
    message = answer["response"].json
    assert message["payload"] == {"n": 1}
    assert answer["at"] >= message["timestamp"]
    # One look before the produce, one on its wake-up (learning when the copy
    # falls due), one at that moment: no polling in between.
    assert len(looks) <= 4, looks
    assert any(r.next_due_ms == message["timestamp"] for r in looks)
