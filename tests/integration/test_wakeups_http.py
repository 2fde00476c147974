"""Long polls woken through wait marks, over real HTTP and a real Valkey.

``MESSAGES`` is published only for topics some consumer marked as waited on
(``narad:{<t>}:waited``), so every way a message reaches a waiter is run
here on a node of several workers: a produce from another client, right
after the topic was created and after it was deleted and created again, a
parent's copy into a child, a give-back, a batch. A missed wake-up would
leave the waiter asleep until its wait ran out and answer 204: each test
asserts the message came instead (the waits are long enough that a prompt
answer and a missed one cannot be confused).
"""

from __future__ import annotations

import socket
import threading
import time
from urllib.parse import urlencode

import pytest

from tests.httpclient import ADMIN
from tests.httpclient import basic

pytestmark = pytest.mark.slow

WAIT = "5s"
SETTLE_S = 0.3  # for the waiters to reach their long poll


def make(http, name, **fields):
    resp = http.post("/v1/topics", {"name": name, **fields})
    assert resp.status == 201, resp.data


class Waiting:
    """Consumers long-polling ``topic`` from their own connections."""

    def __init__(
        self, node, topic: str, count: int = 1, path: str = "consume", **params
    ):
        self.responses: list = []
        self._lock = threading.Lock()
        query = urlencode({"wait": WAIT, **params})
        self._threads = [
            threading.Thread(target=self._poll, args=(node, f"{topic}/{path}?{query}"))
            for _ in range(count)
        ]
        for thread in self._threads:
            thread.start()
        time.sleep(SETTLE_S)

    def _poll(self, node, target: str) -> None:
        client = node.client()
        try:
            resp = client.get(f"/v1/topics/{target}")
        except Exception as exc:  # reported by answers()
            resp = exc
        finally:
            client.close()
        with self._lock:
            self.responses.append(resp)

    def answers(self) -> list:
        for thread in self._threads:
            thread.join(30)
        assert not any(thread.is_alive() for thread in self._threads)
        for resp in self.responses:
            assert not isinstance(resp, Exception), resp
        return self.responses


def woken(waiting: Waiting) -> list:
    """Each waiter's message: none may have slept to a 204."""
    answers = waiting.answers()
    assert [r.status for r in answers] == [200] * len(answers), [
        (r.status, r.data) for r in answers
    ]
    return [r.json() for r in answers]


def test_a_long_poll_on_a_new_topic_wakes_on_produce(node, http, topic):
    make(http, topic, partitions=2)
    waiting = Waiting(node, topic)
    assert http.post(f"/v1/topics/{topic}/produce", {"n": 1}).status == 202
    (message,) = woken(waiting)
    assert message["payload"] == {"n": 1}


def test_waiters_on_every_worker_wake_on_produce_again_and_again(node, http, topic):
    make(http, topic, partitions=2)
    # Four at once, spread over the node's workers; then again, when each
    # worker already remembers the mark it wrote and writes none.
    for round_ in range(2):
        waiting = Waiting(node, topic, count=4)
        for n in range(4):
            body = {"round": round_, "n": n}
            assert http.post(f"/v1/topics/{topic}/produce", body).status == 202
        got = sorted(m["payload"]["n"] for m in woken(waiting))
        assert got == [0, 1, 2, 3]


def test_a_long_poll_wakes_after_the_topic_was_deleted_and_created_again(
    node, http, topic
):
    make(http, topic)
    waiting = Waiting(node, topic)
    assert http.post(f"/v1/topics/{topic}/produce", {"n": "old"}).status == 202
    assert woken(waiting)[0]["payload"] == {"n": "old"}
    # The mark went with the topic; the new one is marked by the next poll.
    assert http.delete(f"/v1/topics/{topic}").status == 204
    make(http, topic)
    waiting = Waiting(node, topic)
    assert http.post(f"/v1/topics/{topic}/produce", {"n": "new"}).status == 202
    assert woken(waiting)[0]["payload"] == {"n": "new"}


def test_a_child_s_long_poll_wakes_on_a_produce_to_its_parent(node, http, topic):
    child = f"{topic}-child"
    make(http, topic)
    make(http, child, parent=topic)
    waiting = Waiting(node, child)
    assert http.post(f"/v1/topics/{topic}/produce", {"n": 1}).status == 202
    (message,) = woken(waiting)
    assert message["payload"] == {"n": 1}


def test_a_given_back_message_wakes_a_waiter(node, http, topic):
    make(http, topic, partitions=1, visibility_timeout_ms=60_000)
    assert http.post(f"/v1/topics/{topic}/produce", {"n": 1}).status == 202
    held = http.get(f"/v1/topics/{topic}/consume").json()
    waiting = Waiting(node, topic)
    query = urlencode({"receipt_handle": held["receipt_handle"], "extend": "0"})
    assert http.post(f"/v1/topics/{topic}/ack?{query}").status == 204
    (again,) = woken(waiting)
    assert again["offset"] == held["offset"]


@pytest.mark.parametrize("cap", ["max_in_flight", "max_acked_ahead"])
@pytest.mark.parametrize("path", ["consume", "ack/batch"])
def test_an_ack_that_frees_a_capped_partition_wakes_a_waiter(
    node, http, topic, cap, path
):
    # The next message is held back by a cap of 1 until the first is acked:
    # with in-flight, by its lease; with acked-ahead, by the ack above it.
    caps = {f"{cap}_per_partition": 1}
    make(http, topic, partitions=1, visibility_timeout_ms=60_000, **caps)
    for n in range(3):
        assert http.post(f"/v1/topics/{topic}/produce", {"n": n}).status == 202
    held = http.get(f"/v1/topics/{topic}/consume").json()
    if cap == "max_acked_ahead":
        above = http.get(f"/v1/topics/{topic}/consume").json()
        query = urlencode({"receipt_handle": above["receipt_handle"]})
        assert http.post(f"/v1/topics/{topic}/ack?{query}").status == 204
    waiting = Waiting(node, topic)
    if path == "consume":
        query = urlencode({"receipt_handle": held["receipt_handle"]})
        assert http.post(f"/v1/topics/{topic}/ack?{query}").status == 204
    else:
        body = {"receipt_handles": [held["receipt_handle"]]}
        assert http.post(f"/v1/topics/{topic}/ack/batch", body).json() == {
            "results": ["acked"]
        }
    (message,) = woken(waiting)
    assert message["offset"] > held["offset"]


def test_a_batch_long_poll_wakes_on_a_batch_produce(node, http, topic):
    make(http, topic, partitions=3)
    waiting = Waiting(node, topic, path="consume/batch", max=10)
    batch = {"messages": [{"value": f"m{n}"} for n in range(3)]}
    assert http.post(f"/v1/topics/{topic}/produce/batch", batch).status == 202
    (answer,) = woken(waiting)
    assert 1 <= len(answer["messages"]) <= 3


@pytest.mark.parametrize("path", ["consume", "consume/batch"])
def test_a_long_poll_whose_client_hung_up_leases_nothing(node, http, topic, path):
    # Leased to a closed connection, the message would be invisible for the
    # hour of the visibility timeout.
    make(http, topic, partitions=1, visibility_timeout_ms=3_600_000)
    gone = socket.create_connection(("127.0.0.1", node.port))
    gone.sendall(
        f"GET /v1/topics/{topic}/{path}?wait={WAIT} HTTP/1.1\r\nHost: x\r\n"
        f"Authorization: {basic(*ADMIN)}\r\n\r\n".encode()
    )
    time.sleep(SETTLE_S)  # for it to reach its long poll
    gone.close()
    assert http.post(f"/v1/topics/{topic}/produce", {"n": 1}).status == 202
    got = http.get(f"/v1/topics/{topic}/consume?wait=2s")
    assert got.status == 200, "the message went to the closed connection"
    assert got.json()["payload"] == {"n": 1}
