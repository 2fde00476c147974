"""Group commit over real HTTP and Valkey: produces that arrive while appends
of their topic are in flight go together in the next one, each answered 202
and each stored once."""

from __future__ import annotations

import json
import threading

import redis

from narad.broker.group_commit import IN_FLIGHT
from tests.integration.test_security_http import metric
from tests.nodes import Node
from tests.nodes import start_valkey
from tests.nodes import tcp_url

APPENDS = 'narad_storage_script_duration_seconds_count{script="append"}'
PAUSE_MS = 2000
PRODUCES = 12


def test_produces_queued_behind_an_append_in_flight_share_the_next(tmp_path):
    valkey = start_valkey(tmp_path / "valkey")
    # One worker: every produce meets the same queue.
    node = Node(tmp_path, storage_url=tcp_url(valkey), workers=1).start()
    http = node.client()
    try:
        assert http.post("/v1/topics", {"name": "g", "partitions": 1}).status == 201
        assert http.post("/v1/topics/g/produce", b"warm").status == 202
        before = metric(http, APPENDS)

        # Writes stall: the first produces' appends wait in Valkey, and the
        # others queue behind them in the worker.
        redis.Redis.from_url(tcp_url(valkey)).client_pause(PAUSE_MS, all=False)
        statuses: list[int] = []

        def produce(index: int) -> None:
            client = node.client()
            try:
                body = json.dumps({"n": index}).encode()
                statuses.append(client.post("/v1/topics/g/produce", body).status)
            finally:
                client.close()

        threads = [threading.Thread(target=produce, args=(i,)) for i in range(PRODUCES)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(30)

        assert statuses == [202] * PRODUCES
        # Those held, then all the others together.
        assert metric(http, APPENDS) - before == IN_FLIGHT + 1
        resp = http.get("/v1/topics/g/consume/batch?max=100")
        stored = [m["payload"] for m in resp.json()["messages"]]
        assert stored[0] == "warm"
        assert sorted(stored[1:], key=lambda p: p["n"]) == [
            {"n": i} for i in range(PRODUCES)
        ]
    finally:
        http.close()
        node.stop()
        valkey.stop()
