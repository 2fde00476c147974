"""Nothing lost: crashes under load, one consumer at a time, prompt wake-ups.

Real gunicorn over a real Valkey (append-only, fsync always). The crash tests
run producers and consumers against their own node and Valkey, kill a worker
or the Valkey mid-load, then drain the topic and account for every message
by its unique payload id and by its (partition, offset).
"""

from __future__ import annotations

import http.client
import itertools
import json
import os
import random
import signal
import threading
import time
from collections import Counter
from collections import defaultdict
from dataclasses import dataclass
from dataclasses import field
from urllib.parse import urlencode

import pytest

from tests.httpclient import Client
from tests.httpclient import Response
from tests.nodes import Node
from tests.nodes import free_port
from tests.nodes import start_valkey
from tests.nodes import tcp_url

pytestmark = pytest.mark.slow

# What a client sees when a worker dies under it, besides a status code.
TRANSPORT_ERRORS = (OSError, http.client.HTTPException)


class OneShotClient(Client):
    """Never resends a request whose connection died: a resent ack that had
    already been applied would answer 410 and hide the first outcome."""

    def request(self, method, path, body=None, headers=None):
        if isinstance(body, dict):
            body = json.dumps(body).encode()
        conn = self._conn()
        try:
            conn.request(method, path, body=body, headers=self.with_auth(headers))
            raw = conn.getresponse()
            return Response(raw.status, dict(raw.getheaders()), raw.read())
        except BaseException:
            self.close()
            raise


def make(http, topic, **settings):
    resp = http.post("/v1/topics", {"name": topic, **settings})
    assert resp.status == 201, resp.data


def consume(http, topic, **params):
    return http.get(f"/v1/topics/{topic}/consume?{urlencode(params)}")


def ack(http, topic, handle, **params):
    query = urlencode({"receipt_handle": handle, **params})
    return http.post(f"/v1/topics/{topic}/ack?{query}")


@dataclass
class Delivery:
    start: float  # monotonic, before the consume was sent
    end: float  # monotonic, after its response arrived
    id: str
    handle: str
    acked: int | str | None = None  # the ack's outcome


@dataclass
class Ledger:
    """Every outcome of a load, for the accounting afterwards."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    accepted: set[str] = field(default_factory=set)  # produce answered 202
    deliveries: defaultdict[tuple[int, int], list[Delivery]] = field(
        default_factory=lambda: defaultdict(list)
    )
    acked: dict[tuple[int, int], float] = field(default_factory=dict)  # 204 at
    double_acks: list[tuple[int, int]] = field(default_factory=list)
    ack_unknown: set[tuple[int, int]] = field(default_factory=set)  # no answer
    statuses: Counter[tuple[str, int | str]] = field(default_factory=Counter)

    def status(self, op: str, outcome: int | str) -> None:
        with self.lock:
            self.statuses[(op, outcome)] += 1

    def delivered_ids(self) -> set[str]:
        return {d.id for ds in self.deliveries.values() for d in ds}

    def late_deliveries(self) -> list[tuple[int, int]]:
        """Messages reserved by a consume sent after their ack had succeeded."""
        return [
            where
            for where, ds in self.deliveries.items()
            if where in self.acked and any(d.start > self.acked[where] for d in ds)
        ]


def take_one(http, topic, ledger, *, wait="200ms", settle="ack"):
    """One consume and (unless ``settle`` is None) its ack, recorded."""
    start = time.monotonic()
    try:
        resp = consume(http, topic, wait=wait)
    except TRANSPORT_ERRORS as exc:
        http.close()
        ledger.status("consume", type(exc).__name__)
        return None
    end = time.monotonic()
    ledger.status("consume", resp.status)
    if resp.status != 200:
        return resp.status
    message = resp.json()
    where = (message["partition"], message["offset"])
    delivery = Delivery(start, end, message["payload"]["id"], message["receipt_handle"])
    with ledger.lock:
        ledger.deliveries[where].append(delivery)
    if settle is None:
        return delivery
    try:
        answer = ack(http, topic, delivery.handle).status
    except TRANSPORT_ERRORS as exc:
        http.close()
        answer = type(exc).__name__
    ledger.status("ack", answer)
    delivery.acked = answer
    with ledger.lock:
        if answer == 204:
            if where in ledger.acked:
                ledger.double_acks.append(where)
            ledger.acked[where] = time.monotonic()
        elif answer != 410:
            ledger.ack_unknown.add(where)
    return delivery


def producer(http, topic, ledger, name, stop, limit):
    for seq in range(limit):
        if stop.is_set():
            return
        ident = f"{name}-{seq}"
        try:
            resp = http.post(f"/v1/topics/{topic}/produce", {"id": ident})
            outcome = resp.status
        except TRANSPORT_ERRORS as exc:
            http.close()
            outcome = type(exc).__name__
        ledger.status("produce", outcome)
        if outcome == 202:
            with ledger.lock:
                ledger.accepted.add(ident)
        else:
            time.sleep(0.02)  # outage: don't spin


def consumer(http, topic, ledger, stop):
    while not stop.is_set():
        got = take_one(http, topic, ledger)
        if got is None or got == 503:
            time.sleep(0.02)  # outage or dead worker: don't spin


class Load:
    """Producer and consumer threads against one topic, bounded in time."""

    def __init__(self, node, topic, *, producers=3, consumers=4, limit=400):
        self.ledger = Ledger()
        self.client = OneShotClient(node.base, timeout=10)
        self.stop_producing = threading.Event()
        self.stop_consuming = threading.Event()
        self.producers = [
            threading.Thread(
                target=producer,
                args=(
                    self.client,
                    topic,
                    self.ledger,
                    f"p{i}",
                    self.stop_producing,
                    limit,
                ),
            )
            for i in range(producers)
        ]
        self.consumers = [
            threading.Thread(
                target=consumer,
                args=(self.client, topic, self.ledger, self.stop_consuming),
            )
            for _ in range(consumers)
        ]

    def __enter__(self) -> Load:
        for thread in self.producers + self.consumers:
            thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop_producing.set()
        for thread in self.producers:
            thread.join(30)
        self.stop_consuming.set()
        for thread in self.consumers:
            thread.join(30)
        self.client.close()

    def accepted(self) -> int:
        with self.ledger.lock:
            return len(self.ledger.accepted)


def drain_and_check(node, topic, ledger, visibility_ms):
    """Take and ack what is left, then account for every message."""
    http = OneShotClient(node.base, timeout=10)
    try:
        # Outlive every lease the load left behind (killed requests, lost acks):
        # a 204 after waiting longer than the visibility timeout means empty.
        wait = f"{visibility_ms + 500}ms"
        deadline = time.monotonic() + 60
        while take_one(http, topic, ledger, wait=wait) != 204:
            assert time.monotonic() < deadline, "drain did not finish"
        stats = http.get(f"/v1/topics/{topic}").json()["partition_stats"]
    finally:
        http.close()

    statuses = ledger.statuses
    assert ledger.accepted, statuses
    lost = ledger.accepted - ledger.delivered_ids()
    assert not lost, f"{len(lost)} accepted never delivered: {sorted(lost)[:5]}"
    stored = {(s["index"], o) for s in stats for o in range(s["next_offset"])}
    unsettled = stored - set(ledger.acked) - ledger.ack_unknown
    assert not unsettled, (
        f"stored but never acked: {sorted(unsettled)[:5]} "
        f"{[ledger.deliveries.get(w) for w in sorted(unsettled)[:3]]} {statuses}"
    )
    assert all(s["in_flight"] == 0 for s in stats), stats
    assert not ledger.double_acks, ledger.double_acks
    assert not ledger.late_deliveries(), "acked messages delivered again"
    return stats


@pytest.fixture
def stack(tmp_path):
    """A private Valkey on a fixed port and a node on it: these tests kill things."""
    port = free_port()
    servers = [start_valkey(tmp_path / "valkey", port)]
    node = Node(
        tmp_path,
        storage_url=tcp_url(servers[0]),
        # Fail fast during an outage (503) instead of retrying through it.
        env={"NARAD_PLUGINS_REDIS_RETRY_ATTEMPTS": "2"},
    )

    def restart_valkey(down_s: float) -> None:
        servers[-1].kill()
        time.sleep(down_s)
        # Started from the test's main thread: the server's parent-death
        # signal fires when the starting thread exits.
        servers.append(start_valkey(tmp_path / "valkey", port))

    node.restart_valkey = restart_valkey
    try:
        node.start()
        yield node
    finally:
        node.stop()
        for server in servers:
            server.stop()


def wait_for_progress(load, at_least, timeout=10.0):
    deadline = time.monotonic() + timeout
    while load.accepted() < at_least:
        assert time.monotonic() < deadline, load.ledger.statuses
        time.sleep(0.02)


def test_kill_9_a_worker_under_load_loses_nothing(stack, topic):
    visibility = 1000
    http = stack.client()
    make(http, topic, partitions=3, visibility_timeout_ms=visibility)
    http.close()
    with Load(stack, topic) as load:
        wait_for_progress(load, 100)
        killed = []
        for _ in range(2):  # both original workers, one after the other
            pid = next(p for p in stack.worker_pids() if p not in killed)
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)
            wait_for_progress(load, load.accepted() + 150)
    stats = drain_and_check(stack, topic, load.ledger, visibility)
    assert not set(killed) & set(stack.worker_pids())  # really replaced
    outcomes = {k for k in load.ledger.statuses}
    # A dead worker shows as a transport error, never as a wrong status.
    assert {s for op, s in outcomes if op == "produce" and isinstance(s, int)} == {202}
    assert {s for op, s in outcomes if op == "ack" and isinstance(s, int)} <= {204, 410}
    assert sum(s["next_offset"] for s in stats) >= len(load.ledger.accepted)


def test_storage_sigkill_and_restart_under_load_loses_nothing(stack, topic):
    visibility = 1000
    http = stack.client()
    make(http, topic, partitions=3, visibility_timeout_ms=visibility)
    with Load(stack, topic) as load:
        wait_for_progress(load, 100)
        before = load.accepted()
        stack.restart_valkey(down_s=0.7)
        wait_for_progress(load, load.accepted() + 150)
    statuses = load.ledger.statuses
    assert before < len(load.ledger.accepted)
    outage = statuses[("produce", 503)] + sum(
        n for (op, s), n in statuses.items() if op == "produce" and isinstance(s, str)
    )
    assert outage, f"the outage went unnoticed: {statuses}"
    codes = {(op, s) for op, s in statuses if isinstance(s, int)}
    allowed = {
        ("produce", 202),
        ("produce", 503),
        ("consume", 200),
        ("consume", 204),
        ("consume", 503),
        ("ack", 204),
        ("ack", 410),
        ("ack", 503),
    }
    assert codes <= allowed, statuses
    drain_and_check(stack, topic, load.ledger, visibility)
    # The wake-up subscription came back with the server.
    assert_wakes_promptly(stack, http, topic)
    http.close()


def assert_wakes_promptly(node, http, topic, *, trigger=None):
    """A consumer long-polling 5 s is answered < 1 s after ``trigger`` runs."""
    answer = {}

    def wait():
        other = node.client()
        try:
            answer["resp"] = consume(other, topic, wait="5s")
            answer["end"] = time.monotonic()
        except Exception as exc:
            answer["error"] = exc
        finally:
            other.close()

    waiter = threading.Thread(target=wait)
    waiter.start()
    time.sleep(0.2)
    fired = time.monotonic()
    if trigger is None:
        assert http.post(f"/v1/topics/{topic}/produce", {"id": "wake"}).status == 202
    else:
        trigger()
    waiter.join(10)
    assert "resp" in answer, answer
    assert answer["resp"].status == 200
    assert fired < answer["end"] < fired + 1.0, answer["end"] - fired
    return answer["resp"].json()


def test_long_poll_wakes_on_produce(node, http, topic):
    make(http, topic, partitions=3)
    message = assert_wakes_promptly(node, http, topic)
    assert message["payload"] == {"id": "wake"}


def test_give_back_wakes_a_waiting_consumer(node, http, topic):
    make(http, topic, partitions=1, visibility_timeout_ms=60_000)
    assert http.post(f"/v1/topics/{topic}/produce", {"id": "m"}).status == 202
    held = consume(http, topic).json()

    def give_back():
        assert ack(http, topic, held["receipt_handle"], extend="0").status == 204

    again = assert_wakes_promptly(node, http, topic, trigger=give_back)
    assert again["offset"] == held["offset"]
    assert ack(http, topic, held["receipt_handle"]).status == 410
    assert ack(http, topic, again["receipt_handle"]).status == 204


def test_lapsed_lease_goes_to_a_waiting_consumer(node, http, topic):
    visibility = 300
    make(http, topic, partitions=1, visibility_timeout_ms=visibility)
    assert http.post(f"/v1/topics/{topic}/produce", {"id": "m"}).status == 202
    ledger = Ledger()
    first = take_one(http, topic, ledger, settle=None)  # never acked
    other = Client(node.base)
    try:
        second = take_one(other, topic, ledger, wait="5s", settle=None)
    finally:
        other.close()
    assert second.id == first.id
    # The second lease began only once the first had lapsed.
    assert second.end - first.start >= (visibility - 5) / 1000
    assert ack(http, topic, first.handle).status == 410
    assert ack(http, topic, second.handle).status == 204


def test_one_consumer_at_a_time_under_16_concurrent_consumers(node, topic):
    """Consumers abandon some messages; each lease is still exclusive."""
    visibility, total = 500, 400
    admin = node.client()
    make(admin, topic, partitions=3, visibility_timeout_ms=visibility)
    ledger = Ledger()
    done = threading.Event()
    rng = random.Random(7)

    def produce_batches(first):
        for start in range(first, total, 100):
            batch = [{"value": json.dumps({"id": str(start + i)})} for i in range(50)]
            resp = admin.post(f"/v1/topics/{topic}/produce/batch", {"messages": batch})
            assert resp.status == 202, resp.data

    def consume_loop():
        http = node.client()
        try:
            while not done.is_set():
                # About one in ten messages is abandoned and must redeliver.
                settle = None if rng.random() < 0.1 else "ack"
                got = take_one(http, topic, ledger, wait="1s", settle=settle)
                if isinstance(got, Delivery) and settle == "ack":
                    time.sleep(rng.random() * 0.005)  # overlap the holds
                with ledger.lock:
                    if len(ledger.acked) >= total:
                        done.set()
        finally:
            http.close()

    consumers = [threading.Thread(target=consume_loop) for _ in range(16)]
    producers = [threading.Thread(target=produce_batches, args=(f,)) for f in (0, 50)]
    try:
        for thread in consumers + producers:
            thread.start()
        for thread in producers:
            thread.join(30)
        assert done.wait(30), f"acked {len(ledger.acked)} of {total}"
    finally:
        done.set()
        for thread in consumers:
            thread.join(30)
        admin.close()

    assert ledger.delivered_ids() == {str(i) for i in range(total)}
    assert len(ledger.acked) == total
    assert not ledger.double_acks
    assert not ledger.late_deliveries()
    redelivered = 0
    for deliveries in ledger.deliveries.values():
        # Each lease was granted somewhere in [start, end] of its consume (a
        # long poll sent first can be granted last). Leases are exclusive, so
        # one of any two was granted at least a visibility timeout after the
        # other: possible only if that one's end is that far past the
        # other's start.
        for a, b in itertools.combinations(deliveries, 2):
            gap = max(b.end - a.start, a.end - b.start)
            assert gap >= (visibility - 5) / 1000, (a, b)
            redelivered += 1
        assert [d.acked for d in deliveries].count(204) == 1, deliveries
    assert redelivered  # the abandoned ones came back


def test_hundreds_of_consumers_wait_at_once(valkey, tmp_path, topic):
    node = Node(tmp_path, storage_url=tcp_url(valkey), workers=2)
    waiters, answers = 200, []
    lock = threading.Lock()
    started = threading.Barrier(waiters + 1)

    def wait():
        http = node.client()
        try:
            started.wait(10)
            resp = consume(http, topic, wait="3s")
            with lock:
                answers.append(resp)
        finally:
            http.close()

    threads = [threading.Thread(target=wait) for _ in range(waiters)]
    try:
        node.start()
        admin = node.client()
        make(admin, topic, partitions=3)
        for thread in threads:
            thread.start()
        started.wait(10)
        time.sleep(1.0)  # let them all reach their long poll
        assert admin.post(f"/v1/topics/{topic}/produce", {"id": "x"}).status == 202
        for thread in threads:
            thread.join(20)
        admin.close()
    finally:
        node.stop()
    assert len(answers) == waiters
    assert Counter(r.status for r in answers) == {200: 1, 204: waiters - 1}
    assert next(r for r in answers if r.status == 200).json()["payload"] == {"id": "x"}
