"""Group commit over real HTTP and Valkey: produces (and single acks and
consumes) that arrive while calls of their topic are in flight go together
in the next one, each answered as alone and each applied once.

Valkey's writes are paused (``CLIENT PAUSE WRITE``), so the first calls wait
in Valkey and the others queue behind them in the node's one worker.
"""

from __future__ import annotations

import json
import threading

import pytest
import redis

from narad.broker.group_commit import IN_FLIGHT
from narad.broker.messages import ALONE_MESSAGES
from narad.broker.messages import LEASE_CALLS_IN_FLIGHT
from tests.integration.test_security_http import metric
from tests.nodes import Node
from tests.nodes import start_valkey
from tests.nodes import tcp_url

APPENDS = 'narad_storage_script_duration_seconds_count{script="append"}'
SETTLES = 'narad_storage_script_duration_seconds_count{script="settle"}'
RESERVES = 'narad_storage_script_duration_seconds_count{script="reserve"}'
PAUSE_MS = 2000
CALLS = 12


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    """A private Valkey (its writes get paused) and a one-worker node on it."""
    tmp = tmp_path_factory.mktemp("group-commit")
    valkey = start_valkey(tmp / "valkey")
    node = Node(tmp, storage_url=tcp_url(valkey), workers=1).start()
    yield node, redis.Redis.from_url(tcp_url(valkey))
    node.stop()
    valkey.stop()


def concurrently(node: Node, requests: list[tuple[str, str, bytes]]) -> list[int]:
    """Send each (method, path, body) from a connection of its own, all at
    once; their statuses, in order."""
    statuses: list[int] = [0] * len(requests)

    def send(index: int) -> None:
        method, path, body = requests[index]
        client = node.client()
        try:
            statuses[index] = client.request(method, path, body).status
        finally:
            client.close()

    threads = [threading.Thread(target=send, args=(i,)) for i in range(len(requests))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    return statuses


def test_produces_queued_behind_appends_in_flight_share_the_next(stack):
    node, valkey = stack
    http = node.client()
    assert http.post("/v1/topics", {"name": "g", "partitions": 1}).status == 201
    assert http.post("/v1/topics/g/produce", b"warm").status == 202
    before = metric(http, APPENDS)

    valkey.client_pause(PAUSE_MS, all=False)
    bodies = [json.dumps({"n": i}).encode() for i in range(CALLS)]
    statuses = concurrently(node, [("POST", "/v1/topics/g/produce", b) for b in bodies])

    assert statuses == [202] * CALLS
    # Those held, then all the others together.
    assert metric(http, APPENDS) - before == IN_FLIGHT + 1
    resp = http.get("/v1/topics/g/consume/batch?max=100")
    stored = [m["payload"] for m in resp.json()["messages"]]
    assert stored[0] == "warm"
    assert sorted(stored[1:], key=lambda p: p["n"]) == [{"n": i} for i in range(CALLS)]
    http.close()


def test_big_produces_go_alone(stack):
    node, valkey = stack
    http = node.client()
    assert http.post("/v1/topics", {"name": "big"}).status == 201
    before = metric(http, APPENDS)
    batch = json.dumps({"messages": [{"value": "m"}] * ALONE_MESSAGES}).encode()

    valkey.client_pause(PAUSE_MS, all=False)
    statuses = concurrently(node, [("POST", "/v1/topics/big/produce/batch", batch)] * 4)

    assert statuses == [202] * 4
    assert metric(http, APPENDS) - before == 4
    http.close()


def test_single_acks_share_a_settle_and_each_gets_its_own_answer(stack):
    node, valkey = stack
    http = node.client()
    assert http.post("/v1/topics", {"name": "acks", "partitions": 3}).status == 201
    for i in range(CALLS):
        assert http.post("/v1/topics/acks/produce", b"%d" % i).status == 202
    leased = http.get("/v1/topics/acks/consume/batch?max=100").json()["messages"]
    handles = [m["receipt_handle"] for m in leased]
    assert len(handles) == CALLS
    # One acked already (acked again: 204), one given back (its handle: 410).
    acked, given_back = handles[3], handles[7]
    assert http.post(f"/v1/topics/acks/ack?receipt_handle={acked}").status == 204
    back = f"/v1/topics/acks/ack?receipt_handle={given_back}&extend=0"
    assert http.post(back).status == 204
    before = metric(http, SETTLES)

    valkey.client_pause(PAUSE_MS, all=False)
    statuses = concurrently(
        node,
        [("POST", f"/v1/topics/acks/ack?receipt_handle={h}", b"") for h in handles],
    )

    assert statuses == [410 if h == given_back else 204 for h in handles]
    assert metric(http, SETTLES) - before == LEASE_CALLS_IN_FLIGHT + 1
    # Only the message given back is there to consume again.
    again = http.get("/v1/topics/acks/consume/batch?max=100").json()["messages"]
    assert [m["payload"] for m in again] == [leased[7]["payload"]]
    http.close()


def test_single_consumes_share_a_reserve_and_each_gets_its_own_message(stack):
    node, valkey = stack
    http = node.client()
    assert http.post("/v1/topics", {"name": "takes", "partitions": 3}).status == 201
    for i in range(CALLS):
        assert http.post("/v1/topics/takes/produce", b"%d" % i).status == 202
    before = metric(http, RESERVES)

    valkey.client_pause(PAUSE_MS, all=False)
    answers: list[dict] = [{}] * CALLS

    def consume(index: int) -> None:
        client = node.client()
        try:
            resp = client.get("/v1/topics/takes/consume")
            assert resp.status == 200
            answers[index] = resp.json()
        finally:
            client.close()

    threads = [threading.Thread(target=consume, args=(i,)) for i in range(CALLS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)

    # Those held, then all the others together: a message each, none twice.
    assert metric(http, RESERVES) - before == LEASE_CALLS_IN_FLIGHT + 1
    assert sorted(a["payload"] for a in answers) == list(range(CALLS))
    handles = {a["receipt_handle"] for a in answers}
    assert len(handles) == CALLS
    assert http.get("/v1/topics/takes/consume").status == 204
    for handle in handles:
        assert http.post(f"/v1/topics/takes/ack?receipt_handle={handle}").status == 204
    http.close()


def test_single_acks_and_consumes_of_a_topic_share_one_round_trip(stack):
    node, valkey = stack
    http = node.client()
    assert http.post("/v1/topics", {"name": "mixed", "partitions": 3}).status == 201
    for i in range(2 * CALLS):
        assert http.post("/v1/topics/mixed/produce", b"%d" % i).status == 202
    leased = http.get(f"/v1/topics/mixed/consume/batch?max={CALLS}").json()["messages"]
    handles = [m["receipt_handle"] for m in leased]
    before = metric(http, SETTLES) + metric(http, RESERVES)

    valkey.client_pause(PAUSE_MS, all=False)
    acks = [("POST", f"/v1/topics/mixed/ack?receipt_handle={h}", b"") for h in handles]
    consumes = [("GET", "/v1/topics/mixed/consume", b"")] * CALLS
    statuses = concurrently(
        node, [x for pair in zip(acks, consumes, strict=True) for x in pair]
    )

    assert statuses == [204, 200] * CALLS
    # The first held, then the others together: one settle and one reserve,
    # pipelined.
    assert metric(http, SETTLES) + metric(http, RESERVES) - before == (
        LEASE_CALLS_IN_FLIGHT + 2
    )
    # Acked messages are gone; the consumed ones are leased: nothing is left.
    assert http.get("/v1/topics/mixed/consume").status == 204
    http.close()
