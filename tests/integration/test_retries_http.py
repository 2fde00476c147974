"""Safe retries over real HTTP and a real Valkey: a request whose worker died
after its write and before its reply is retried and finds the write done.

The node loads :mod:`tests.crashing` as a plugin (from a distribution's
metadata on its ``PYTHONPATH``, as any third-party plugin): its worker dies
by SIGKILL right after the storage answered a write the test chose, so the
client sees a dropped connection for a request that was applied. The chaos
test then retries every produce with its idempotency key through worker
kills, storage stalls and a storage restart, and counts the duplicates.
"""

from __future__ import annotations

import http.client
import json
import os
import signal
import threading
import time
from collections import Counter
from pathlib import Path
from urllib.parse import urlencode

import pytest
import redis

from tests import crashing
from tests.httpclient import ADMIN
from tests.httpclient import Response
from tests.httpclient import basic
from tests.nodes import ROOT
from tests.nodes import Node
from tests.nodes import free_port
from tests.nodes import start_valkey

pytestmark = pytest.mark.slow

DROPPED = (OSError, http.client.HTTPException)


def crashing_node(tmp: Path, valkey_port: int, **env: str) -> tuple[Node, Path]:
    markers = tmp / "markers"
    markers.mkdir(parents=True, exist_ok=True)
    plugin_path = crashing.install(tmp / "plugin")
    url = f"{crashing.SCHEME}://127.0.0.1:{valkey_port}/0?markers={markers}"
    node = Node(
        tmp / "node",
        storage_url=url,
        env={
            "PYTHONPATH": os.pathsep.join(
                [str(plugin_path), str(ROOT), str(ROOT / "plugins")]
            ),
            **env,
        },
    )
    return node, markers


@pytest.fixture(scope="module")
def crash(valkey, tmp_path_factory):
    """A node over the session's Valkey whose workers die on request."""
    node, markers = crashing_node(tmp_path_factory.mktemp("crash"), valkey.port)
    node.markers = markers
    node.start()
    yield node
    node.stop()


def once(node: Node, method: str, path: str, body=None, headers=None) -> Response:
    """One attempt on a fresh connection, never resent (header names in
    lower case)."""
    conn = http.client.HTTPConnection("127.0.0.1", node.port, timeout=30)
    try:
        headers = {"Authorization": basic(*ADMIN), **(headers or {})}
        conn.request(method, path, body=body, headers=headers)
        raw = conn.getresponse()
        headers = {k.lower(): v for k, v in raw.getheaders()}
        return Response(raw.status, headers, raw.read())
    finally:
        conn.close()


def dies(node: Node, marker: str, method: str, path: str, body=None, headers=None):
    """Send a request whose worker dies after its write; check that it did.

    A connection the kernel had queued for a worker killed just before is
    reset unread (the marker is still there): that one is sent again, as
    :func:`call` does."""
    for _ in range(50):
        (node.markers / marker).touch()
        with pytest.raises(DROPPED):
            once(node, method, path, body, headers)
        if not (node.markers / marker).exists():
            return
        time.sleep(0.1)
    pytest.fail(f"no worker took the {marker!r} marker")


def call(node: Node, method: str, path: str, body=None, headers=None) -> Response:
    """A request resent until it is answered. After a kill, a connection the
    kernel had queued for the dead worker is reset without being read: a
    resend then reaches a live worker. (No worker dies afterwards: each
    marker kills one.)"""
    for _ in range(50):
        try:
            return once(node, method, path, body, headers)
        except DROPPED:
            time.sleep(0.1)
    raise AssertionError(f"no answer to {method} {path}")


def make(node, topic, **settings):
    body = json.dumps({"name": topic, **settings}).encode()
    resp = call(node, "POST", "/v1/topics", body)
    assert resp.status == 201, resp.data


def stats(node, topic) -> list[dict]:
    return call(node, "GET", f"/v1/topics/{topic}").json()["partition_stats"]


def stored(node, topic) -> int:
    return sum(s["next_offset"] for s in stats(node, topic))


def test_a_produce_retried_after_its_worker_died_is_stored_once(crash, topic):
    make(crash, topic, partitions=2)
    path = f"/v1/topics/{topic}/produce"
    headers = {"Idempotency-Key": "order-1"}
    dies(crash, "append", "POST", path, b'{"id": 1}', headers)
    assert stored(crash, topic) == 1  # the write was applied
    retry = call(crash, "POST", path, b'{"id": 1}', headers)
    assert retry.status == 202
    assert retry.headers.get("idempotent-replayed") == "true"
    assert stored(crash, topic) == 1
    # A different body under the same key is a conflict, not a retry.
    assert call(crash, "POST", path, b'{"id": 2}', headers).status == 409


def test_a_batch_retried_after_its_worker_died_is_stored_once(crash, topic):
    make(crash, topic, partitions=3)
    path = f"/v1/topics/{topic}/produce/batch"
    messages = [{"value": f"m{i}", "idempotency_key": f"m{i}"} for i in range(5)]
    body = json.dumps({"messages": messages}).encode()
    dies(crash, "append", "POST", path, body)
    retry = call(crash, "POST", path, body)
    assert (retry.status, retry.json()) == (202, {"accepted": 5, "duplicates": 5})
    assert stored(crash, topic) == 5


def test_a_retry_the_new_schema_refuses_is_still_a_retry(crash, topic):
    """The first attempt was stored under version 1; before its client
    retries, a FORWARD-compatible version 2 that refuses the payload lands.
    The retry must say "stored" (202), not "refused" (400)."""
    loose = {"type": "object", "required": ["id"]}
    make(crash, topic, partitions=2, schema=loose, compatibility="FORWARD")
    path = f"/v1/topics/{topic}/produce"
    headers = {"Idempotency-Key": "order-1"}
    dies(crash, "append", "POST", path, b'{"id": 1}', headers)
    batch_path = f"/v1/topics/{topic}/produce/batch"
    messages = [{"value": f'{{"id": {i}}}', "idempotency_key": f"b{i}"} for i in (2, 3)]
    batch = json.dumps({"messages": messages}).encode()
    dies(crash, "append", "POST", batch_path, batch)
    strict = {"type": "object", "required": ["id", "note"]}
    body = json.dumps({"schema": strict}).encode()
    assert call(crash, "PATCH", f"/v1/topics/{topic}", body).status == 200

    retry = call(crash, "POST", path, b'{"id": 1}', headers)
    assert (retry.status, retry.headers.get("idempotent-replayed")) == (202, "true")
    retry = call(crash, "POST", batch_path, batch)
    assert (retry.status, retry.json()) == (202, {"accepted": 2, "duplicates": 2})
    assert stored(crash, topic) == 3
    # A new message, or one whose key is not remembered, is still refused.
    refused = call(crash, "POST", path, b'{"id": 4}', {"Idempotency-Key": "order-4"})
    assert refused.status == 400
    messages[1]["idempotency_key"] = "b9"
    refused = call(crash, "POST", batch_path, json.dumps({"messages": messages}))
    assert refused.status == 400
    assert stored(crash, topic) == 3


def test_without_a_key_the_same_retry_stores_the_message_twice(crash, topic):
    """What the README calls at-least-once: a retry cannot know."""
    make(crash, topic, partitions=1)
    path = f"/v1/topics/{topic}/produce"
    dies(crash, "append", "POST", path, b"m")
    assert call(crash, "POST", path, b"m").status == 202
    assert stored(crash, topic) == 2


def test_an_ack_retried_after_its_worker_died_is_204(crash, topic):
    make(crash, topic, partitions=1, visibility_timeout_ms=500)
    assert call(crash, "POST", f"/v1/topics/{topic}/produce", b"m").status == 202
    got = call(crash, "GET", f"/v1/topics/{topic}/consume")
    path = f"/v1/topics/{topic}/ack?" + urlencode(
        {"receipt_handle": got.json()["receipt_handle"]}
    )
    dies(crash, "settle", "POST", path)
    assert call(crash, "POST", path).status == 204
    time.sleep(0.7)  # past the visibility timeout: an acked message stays acked
    assert call(crash, "GET", f"/v1/topics/{topic}/consume").status == 204
    assert stats(crash, topic) == [
        {"index": 0, "oldest_offset": 0, "next_offset": 1, "in_flight": 0}
    ]


def test_a_batch_ack_retried_after_its_worker_died_answers_acked(crash, topic):
    make(crash, topic, partitions=2)
    batch = json.dumps({"messages": [{"value": f"m{i}"} for i in range(4)]})
    path = f"/v1/topics/{topic}/produce/batch"
    assert call(crash, "POST", path, batch.encode()).status == 202
    got = call(crash, "GET", f"/v1/topics/{topic}/consume/batch?max=4")
    handles = [m["receipt_handle"] for m in got.json()["messages"]]
    body = json.dumps({"receipt_handles": handles}).encode()
    path = f"/v1/topics/{topic}/ack/batch"
    dies(crash, "settle", "POST", path, body)
    retry = call(crash, "POST", path, body)
    assert (retry.status, retry.json()) == (200, {"results": ["acked"] * 4})
    assert sum(s["in_flight"] for s in stats(crash, topic)) == 0


def test_a_storage_busy_with_a_long_script_is_waited_for(tmp_path, topic):
    """While another client's script runs past busy-reply-threshold, Valkey
    refuses every other command with -BUSY (not run): a produce then waits
    and retries within its budget, and never answers 500."""
    storage = start_valkey(tmp_path / "valkey", extra=("busy-reply-threshold 50",))
    node = Node(tmp_path / "node", storage_url=storage.tcp_url).start()
    http = node.client()
    try:
        make(node, topic, partitions=1)
        long_script = threading.Thread(
            target=lambda: redis.Redis(port=storage.port).eval(
                "local n = 0 for i = 1, 4e8 do n = n + 1 end return n", 0
            )
        )
        long_script.start()
        time.sleep(0.3)  # past the threshold: others get -BUSY now
        produced = http.post(f"/v1/topics/{topic}/produce", b"m")
        long_script.join()
        assert produced.status in (202, 503), produced
        if produced.status == 503:  # the script outlasted the retry budget
            assert produced.error == "storage unavailable, retry"
            assert http.post(f"/v1/topics/{topic}/produce", b"m").status == 202
        assert stored(node, topic) == 1
    finally:
        http.close()
        node.stop()
        storage.stop()


# -- chaos -----------------------------------------------------------------------


class Producer(threading.Thread):
    """Produces ``count`` messages, each retried with its key until a 202."""

    def __init__(self, node: Node, topic: str, name: str, count: int, stop):
        super().__init__()
        self.node, self.topic, self.name, self.count = node, topic, name, count
        self.stop_at = stop
        self.accepted: set[str] = set()
        self.outcomes: Counter[str] = Counter()

    def run(self) -> None:
        path = f"/v1/topics/{self.topic}/produce"
        for seq in range(self.count):
            ident = f"{self.name}-{seq}"
            body = json.dumps({"id": ident}).encode()
            while time.monotonic() < self.stop_at:
                try:
                    resp = once(
                        self.node, "POST", path, body, {"Idempotency-Key": ident}
                    )
                except DROPPED as exc:
                    self.outcomes[type(exc).__name__] += 1
                    time.sleep(0.02)
                    continue
                self.outcomes[resp.status] += 1
                if resp.status == 202:
                    self.accepted.add(ident)
                    if resp.headers.get("idempotent-replayed") == "true":
                        self.outcomes["replayed"] += 1
                    break
                assert resp.status == 503, resp
                time.sleep(0.02)


def test_a_client_retrying_with_its_keys_through_chaos_stores_no_duplicate(
    tmp_path, topic
):
    port = free_port()
    servers = [start_valkey(tmp_path / "valkey", port)]
    node, markers = crashing_node(
        tmp_path,
        port,
        # Fail fast (503) through outages, and time out on a stalled storage
        # while the write it was sent may still be applied later.
        NARAD_PLUGINS_REDIS_RETRY_ATTEMPTS="1",
        NARAD_PLUGINS_REDIS_SOCKET_TIMEOUT_MS="300",
    )
    try:
        node.start()
        make(node, topic, partitions=3)
        stop_at = time.monotonic() + 90
        producers = [Producer(node, topic, f"p{i}", 150, stop_at) for i in range(3)]
        for producer in producers:
            producer.start()

        def progress(at_least: int) -> None:
            deadline = time.monotonic() + 20
            while sum(len(p.accepted) for p in producers) < at_least:
                assert time.monotonic() < deadline
                time.sleep(0.02)

        progress(40)
        for _ in range(3):  # workers die right after applying a keyed produce
            (markers / "append").touch()
            progress(sum(len(p.accepted) for p in producers) + 20)
        victim = node.worker_pids()[0]  # and one dies wherever it is
        os.kill(victim, signal.SIGKILL)
        progress(sum(len(p.accepted) for p in producers) + 20)
        server = servers[-1].process.pid
        for _ in range(2):  # the storage stalls past the socket timeout
            os.kill(server, signal.SIGSTOP)
            time.sleep(1.0)
            os.kill(server, signal.SIGCONT)
            progress(sum(len(p.accepted) for p in producers) + 20)
        servers[-1].kill()  # and restarts on its append-only file
        time.sleep(0.5)
        servers.append(start_valkey(tmp_path / "valkey", port))
        for producer in producers:
            producer.join(120)
        outcomes = sum((p.outcomes for p in producers), Counter())
        accepted = set().union(*(p.accepted for p in producers))
        assert len(accepted) == 450, outcomes
        # Every retry that found its message stored already said so.
        assert outcomes["replayed"] >= 3, outcomes
        assert sum(n for o, n in outcomes.items() if o not in (202, "replayed")), (
            "the chaos went unnoticed"
        )

        ids: Counter[str] = Counter()
        http = node.client()
        for partition in stats(node, topic):
            for offset in range(partition["oldest_offset"], partition["next_offset"]):
                query = urlencode({"partition": partition["index"], "offset": offset})
                got = http.get(f"/v1/topics/{topic}/consume?{query}")
                assert got.status == 200, got
                ids[got.json()["payload"]["id"]] += 1
        duplicates = {i: n for i, n in ids.items() if n > 1}
        assert not duplicates, (duplicates, outcomes)
        assert set(ids) == accepted
        http.close()
    finally:
        node.stop()
        for server in servers:
            server.stop()
