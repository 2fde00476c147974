"""Memory under topic churn and long uptime.

Run from a checkout: ``PYTHONPATH=.:plugins python bench/soak.py``.

Starts ``narad serve`` as the README says (gunicorn with Narad's gevent
workers, the embedded Valkey) and drives it from ``--clients`` threads, each
spreading its requests over several keep-alive connections so that a topic is
created, used and deleted through different workers, as a load balancer
would. Every ``--every`` seconds (60) it prints each worker's RSS, the
storage's memory (``INFO used_memory`` and the server's RSS) and the worker
caches' sizes (``narad_cache_entries``); at the end of a phase, the growth
after its first interval (the warm-up) and, under churn, the growth per
10,000 deleted topics, against the target (under 5 MiB per worker).

Phases (each can be turned off with 0):

- ``--minutes N`` (5) of churn: rounds of create a topic with a schema,
  produce 4 messages, consume and ack 2, PATCH the schema (one more optional
  property), produce under the new version, delete.
- ``--steady-minutes N`` (2) of a steady mix with no churn: produce, consume
  and ack on ``--steady-topics`` (64) live topics; memory must stay flat.
- ``--live-topics N`` (2,000): memory held per live topic. The topics are
  created with a typical schema (an order event: a dozen properties, nested
  objects, an array, patterns and formats) and produced to until every
  worker caches them; the worker growth is divided by the topics each worker
  caches, the storage's by the topics created.

- ``--listener-events N`` (50,000): the CPU a worker spends hearing one
  storage event (every produce anywhere is heard by every worker that
  caches a topic), against the CPU of a produce in the worker serving it.

``--rounds N`` runs the experiment of issue 20 instead of the churn phase: N
rounds of create a topic whose schema has 20 properties with patterns,
produce 4 messages, delete; memory is printed every ``--rounds-every``
rounds (500).

``--trace N`` runs N such rounds in this process instead, against two apps
built on the node's storage (one creates and deletes, the other produces, as
two workers would), printing the second app's Python heap (tracemalloc), its
live objects (gc) and this process's RSS before and after ``malloc_trim``:
what the workers' RSS cannot tell apart, a leak from fragmentation.
"""

from __future__ import annotations

import argparse
import ctypes
import gc
import http.client
import itertools
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import tracemalloc
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "plugins"), str(ROOT / "bench")]

import redis  # noqa: E402
from messaging import ADMIN_PASSWORD  # noqa: E402
from messaging import HEADERS  # noqa: E402
from messaging import call  # noqa: E402
from messaging import comm  # noqa: E402
from messaging import free_port  # noqa: E402

from narad.serve.embedded import socket_path  # noqa: E402

MIB = 1024 * 1024
TARGET_MIB_PER_10K = 5.0
_CACHE_SAMPLE = re.compile(
    r'^narad_cache_(entries|bytes)\{cache="([^"]+)",pid="(\d+)"\} ([0-9.e+]+)$', re.M
)


# -- schemas and payloads -----------------------------------------------------


def churn_schema(unique: str = "") -> dict[str, Any]:
    """Issue 20's schema: 20 string properties, each with a pattern."""
    return {
        "type": "object",
        "properties": {
            f"p{j}": {"type": "string", "pattern": f"^[a-z]{{1,8}}-{j}{unique}$"}
            for j in range(20)
        },
    }


def churn_payload(unique: str = "") -> bytes:
    return json.dumps({f"p{j}": f"abc-{j}{unique}" for j in range(20)}).encode()


def widened(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` with one more optional property: a compatible change."""
    return {
        **schema,
        "properties": {**schema["properties"], "note": {"type": "string"}},
    }


# A typical event schema: what "memory per live topic" is measured with.
TYPICAL_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "required": ["id", "type", "amount", "currency", "created_at", "customer"],
    "properties": {
        "id": {
            "type": "string",
            "pattern": "^[0-9a-f]{8}(-[0-9a-f]{4}){3}-[0-9a-f]{12}$",
        },
        "type": {"enum": ["created", "paid", "shipped", "cancelled"]},
        "amount": {"type": "number", "minimum": 0},
        "currency": {"type": "string", "pattern": "^[A-Z]{3}$"},
        "created_at": {"type": "string", "format": "date-time"},
        "customer": {
            "type": "object",
            "required": ["id"],
            "properties": {
                "id": {"type": "integer", "minimum": 1},
                "email": {"type": "string", "format": "email"},
                "country": {"type": "string", "pattern": "^[A-Z]{2}$"},
            },
        },
        "items": {
            "type": "array",
            "maxItems": 100,
            "items": {
                "type": "object",
                "required": ["sku", "qty"],
                "properties": {
                    "sku": {"type": "string", "pattern": "^[A-Z0-9-]{4,32}$"},
                    "qty": {"type": "integer", "minimum": 1},
                    "price": {"type": "number", "minimum": 0},
                },
            },
        },
        "tags": {"type": "array", "items": {"type": "string", "maxLength": 64}},
        "note": {"type": "string", "maxLength": 1000},
    },
}
TYPICAL_PAYLOAD = json.dumps(
    {
        "id": "0b9f3c2e-8d4a-4f1e-9a7b-2c6d5e8f1a3b",
        "type": "paid",
        "amount": 42.5,
        "currency": "EUR",
        "created_at": "2024-05-01T12:00:00Z",
        "customer": {"id": 7, "email": "a@example.com", "country": "FR"},
        "items": [{"sku": "AB-1234", "qty": 2, "price": 21.25}],
        "tags": ["web"],
    }
).encode()


# -- the node -----------------------------------------------------------------


def rss_mib(pid: int) -> float:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return 0.0
    return int(status.split("VmRSS:")[1].split()[0]) / 1024


class Node:
    """``narad serve`` with its embedded Valkey, in a temporary directory."""

    def __init__(self, tmp: Path, workers: int) -> None:
        self.tmp = tmp
        self.count = workers
        self.port = free_port()
        self.data = tmp / "data"
        self.env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "plugins")]),
            "NARAD_SERVER_BIND": f"127.0.0.1:{self.port}",
            "NARAD_SERVER_WORKERS": str(workers),
            "NARAD_STORAGE_URL": "",
            "NARAD_STORAGE_DATA_DIR": str(self.data),
            "NARAD_VALIDATION_CAPACITY_DIR": str(tmp / "capacity"),
            # Security on, as shipped: every request carries these credentials.
            "NARAD_ADMIN_PASSWORD": ADMIN_PASSWORD,
        }

    def start(self) -> None:
        self.log = self.tmp / "narad.log"
        with self.log.open("wb") as out:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "narad.cli", "serve"],
                env=self.env,
                cwd=self.tmp,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                sys.exit(f"node exited:\n{self.log.read_text()[-3000:]}")
            try:
                if call(self.port, "GET", "/readyz")[0] == 200:
                    break
            except OSError:
                pass
            time.sleep(0.1)
        else:
            sys.exit(f"node not ready:\n{self.log.read_text()[-3000:]}")
        while True:  # every worker forked (the first ready one answered)
            children = [
                int(p)
                for p in subprocess.run(
                    ["pgrep", "-P", str(self.process.pid)],
                    capture_output=True,
                    text=True,
                ).stdout.split()
            ]
            if len(children) > self.count or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        self.valkey = next(p for p in children if comm(p).startswith("valkey"))
        self.workers = sorted(p for p in children if p != self.valkey)
        self.storage_url = f"unix://{socket_path(self.data)}"
        self.storage = redis.Redis(unix_socket_path=str(socket_path(self.data)))

    def stop(self) -> None:
        self.storage.close()
        self.process.terminate()
        try:
            self.process.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, 9)
            self.process.wait()

    def worker_rss(self) -> list[float]:
        return [rss_mib(pid) for pid in self.workers]

    def storage_used_mib(self) -> float:
        return self.storage.info("memory")["used_memory"] / MIB

    def caches(self) -> dict[int, dict[str, tuple[int, int]]]:
        """``narad_cache_entries`` and ``_bytes`` by worker pid and cache."""
        _, body = call(self.port, "GET", "/metrics")
        out: dict[int, dict[str, list[int]]] = {}
        for kind, cache, pid, value in _CACHE_SAMPLE.findall(body.decode()):
            entry = out.setdefault(int(pid), {}).setdefault(cache, [0, 0])
            entry[kind == "bytes"] = int(float(value))
        return {pid: {c: (e[0], e[1]) for c, e in v.items()} for pid, v in out.items()}


# -- clients ------------------------------------------------------------------


class Client:
    """Keep-alive connections used in turn: a round's requests reach several
    workers, as they would behind a load balancer."""

    def __init__(self, port: int, conns: int) -> None:
        self.port = port
        self.conns = [self._open() for _ in range(conns)]
        self.turn = itertools.cycle(range(conns))
        self.statuses: Counter[int] = Counter()

    def _open(self) -> http.client.HTTPConnection:
        return http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)

    def send(self, method: str, path: str, body: bytes = b"", ok=(200,)) -> bytes:
        index = next(self.turn)
        conn = self.conns[index]
        try:
            conn.request(method, path, body=body, headers=HEADERS)
            resp = conn.getresponse()
            data = resp.read()
        except (OSError, http.client.HTTPException):
            conn.close()
            self.conns[index] = self._open()
            self.statuses[0] += 1
            return b""
        self.statuses[resp.status] += 1
        if resp.status not in ok:
            raise RuntimeError(f"{method} {path}: {resp.status} {data[:300]!r}")
        return data

    def close(self) -> None:
        for conn in self.conns:
            conn.close()


def churn_round(client: Client, name: str, unique: str) -> None:
    """Create with a schema, produce, consume and ack, PATCH, produce, delete."""
    schema = churn_schema(unique)
    payload = churn_payload(unique)
    body = json.dumps({"name": name, "partitions": 3, "schema": schema}).encode()
    client.send("POST", "/v1/topics", body, ok=(201,))
    for _ in range(4):
        client.send("POST", f"/v1/topics/{name}/produce", payload, ok=(202,))
    for _ in range(2):
        message = client.send("GET", f"/v1/topics/{name}/consume", ok=(200, 204))
        if message:
            handle = json.loads(message)["receipt_handle"]
            path = f"/v1/topics/{name}/ack?receipt_handle={handle}"
            client.send("POST", path, ok=(204,))
    patch = json.dumps({"schema": widened(schema)}).encode()
    client.send("PATCH", f"/v1/topics/{name}", patch, ok=(200,))
    client.send("POST", f"/v1/topics/{name}/produce", payload, ok=(202,))
    client.send("DELETE", f"/v1/topics/{name}", ok=(204,))


def issue_round(client: Client, name: str, unique: str) -> None:
    """Issue 20's experiment: create with a schema, produce 4, delete."""
    body = json.dumps({"name": name, "schema": churn_schema(unique)}).encode()
    client.send("POST", "/v1/topics", body, ok=(201,))
    payload = churn_payload(unique)
    for _ in range(4):
        client.send("POST", f"/v1/topics/{name}/produce", payload, ok=(202,))
    client.send("DELETE", f"/v1/topics/{name}", ok=(204,))


def steady_round(client: Client, name: str) -> None:
    """No churn: produce, consume and ack on a live topic."""
    for _ in range(2):
        client.send("POST", f"/v1/topics/{name}/produce", TYPICAL_PAYLOAD, ok=(202,))
    for _ in range(2):
        message = client.send("GET", f"/v1/topics/{name}/consume", ok=(200, 204))
        if message:
            handle = json.loads(message)["receipt_handle"]
            path = f"/v1/topics/{name}/ack?receipt_handle={handle}"
            client.send("POST", path, ok=(204,))


class Load:
    """``clients`` threads running rounds until stopped; counts rounds."""

    def __init__(
        self, node: Node, clients: int, conns: int, round_: Callable[..., None]
    ) -> None:
        self.node = node
        self.round = round_
        self.rounds = 0
        self.errors: list[str] = []
        self.stopping = threading.Event()
        self.lock = threading.Lock()
        self.clients = [Client(node.port, conns) for _ in range(clients)]
        self.threads = [
            threading.Thread(target=self._run, args=(i, c), daemon=True)
            for i, c in enumerate(self.clients)
        ]

    def start(self, limit: int | None = None) -> Load:
        self.limit = limit
        for thread in self.threads:
            thread.start()
        return self

    def _run(self, index: int, client: Client) -> None:
        for n in itertools.count():
            if self.stopping.is_set():
                return
            with self.lock:
                if self.limit is not None and self.rounds >= self.limit:
                    return
                self.rounds += 1
            try:
                self.round(client, index, n)
            except RuntimeError as exc:
                self.errors.append(str(exc))
                if len(self.errors) > 20:
                    self.stopping.set()

    def stop(self) -> Counter[int]:
        self.stopping.set()
        for thread in self.threads:
            thread.join()
        statuses: Counter[int] = Counter()
        for client in self.clients:
            statuses += client.statuses
            client.close()
        return statuses


# -- reporting ----------------------------------------------------------------


class Sample:
    def __init__(self, node: Node, label: str, deleted: int) -> None:
        gc.collect()
        self.label = label
        self.deleted = deleted
        self.workers = node.worker_rss()
        self.storage = node.storage_used_mib()
        self.storage_rss = rss_mib(node.valkey)
        try:
            self.caches = node.caches()
        except OSError:
            self.caches = {}

    def line(self) -> str:
        workers = " ".join(f"{m:6.1f}" for m in self.workers)
        totals: Counter[str] = Counter()
        for by_cache in self.caches.values():
            for cache, (entries, _) in by_cache.items():
                totals[cache] += entries
        caches = " ".join(f"{c}={n}" for c, n in sorted(totals.items()))
        return (
            f"  {self.label:>8}  deleted {self.deleted:7,}  workers RSS MiB "
            f"{workers}  storage used {self.storage:6.1f} MiB "
            f"(RSS {self.storage_rss:6.1f})" + (f"  caches {caches}" if caches else "")
        )


def growth(first: Sample, last: Sample, churned: bool) -> None:
    diffs = [b - a for a, b in zip(first.workers, last.workers, strict=True)]
    deleted = last.deleted - first.deleted
    print(
        f"  growth after warm-up ({first.label} -> {last.label}): workers "
        + " ".join(f"{d:+.1f}" for d in diffs)
        + f" MiB (max {max(diffs):+.1f}), storage used "
        f"{last.storage - first.storage:+.1f} MiB, storage RSS "
        f"{last.storage_rss - first.storage_rss:+.1f} MiB"
    )
    if churned and deleted:
        per = max(diffs) * 10_000 / deleted
        verdict = "met" if per < TARGET_MIB_PER_10K else "MISSED"
        print(
            f"  per worker per 10,000 deleted topics: {per:+.2f} MiB over "
            f"{deleted:,} deletions (target < {TARGET_MIB_PER_10K:g} MiB: {verdict})"
        )


def timed_phase(
    node: Node,
    title: str,
    minutes: float,
    every: float,
    load: Load,
    churned: bool,
) -> tuple[Sample, Sample, Counter[int]]:
    print(f"\n{title}")
    start = time.monotonic()
    samples = [Sample(node, "0:00", 0)]
    print(samples[0].line())
    load.start()
    end = start + minutes * 60
    while time.monotonic() < end and not load.stopping.is_set():
        time.sleep(min(every, max(end - time.monotonic(), 0)))
        elapsed = time.monotonic() - start
        label = f"{int(elapsed // 60)}:{int(elapsed % 60):02d}"
        samples.append(Sample(node, label, load.rounds if churned else 0))
        print(samples[-1].line(), f" rounds {load.rounds:,}", flush=True)
    statuses = load.stop()
    report_statuses(load, statuses)
    if len(samples) >= 3:
        growth(samples[1], samples[-1], churned)
    return samples[0], samples[-1], statuses


def report_statuses(load: Load, statuses: Counter[int]) -> None:
    print("  statuses:", dict(sorted(statuses.items())))
    for error in load.errors[:5]:
        print("  error:", error)


def rounds_phase(node: Node, rounds: int, every: int, load: Load) -> None:
    print(
        f"\nissue 20's experiment: {rounds:,} rounds of create a topic with 20 "
        "pattern properties -> 4 produces -> delete"
    )
    samples = [Sample(node, "0", 0)]
    print(samples[0].line())
    load.start(limit=rounds)
    done = 0
    while done < rounds and not load.stopping.is_set():
        done = min(done + every, rounds)
        while load.rounds < done and not load.stopping.is_set():
            time.sleep(0.05)
        if any(t.is_alive() for t in load.threads) and done == rounds:
            for thread in load.threads:
                thread.join()
        samples.append(Sample(node, f"{done:,}", load.rounds))
        print(samples[-1].line(), flush=True)
    statuses = load.stop()
    report_statuses(load, statuses)
    print(
        f"  growth over all rounds: workers total "
        f"{sum(samples[-1].workers) - sum(samples[0].workers):+.1f} MiB"
    )
    if len(samples) >= 3:
        growth(samples[1], samples[-1], True)


def live_topics_phase(node: Node, count: int, conns: int) -> None:
    print(f"\nmemory per live topic: {count:,} topics with a typical schema")
    before = Sample(node, "before", 0)
    client = Client(node.port, conns)
    schema = json.dumps(TYPICAL_SCHEMA)
    for i in range(count):
        body = f'{{"name": "live-{i}", "schema": {schema}}}'.encode()
        client.send("POST", "/v1/topics", body, ok=(201,))
    created = Sample(node, "created", 0)
    # Every worker validates each topic's produce at least once: connections
    # land on workers as the kernel hands them out, so produce over fresh
    # connections until each worker caches every topic (or give up).
    workers = len(node.workers)

    def validators(sample: dict[int, dict[str, tuple[int, int]]], pid: int) -> int:
        return sample.get(pid, {}).get("validators", (0, 0))[0]

    held: list[int] = []
    for _ in range(4 * workers):
        for i in range(count):
            path = f"/v1/topics/live-{i}/produce"
            client.send("POST", path, TYPICAL_PAYLOAD, ok=(202,))
        client.close()
        client = Client(node.port, conns)
        now = node.caches()
        previous, held = (
            held,
            [validators(now, p) - validators(created.caches, p) for p in node.workers],
        )
        # Done when every worker caches every topic, or as many as its
        # bounds let it (no more than after the previous pass).
        if not now or min(held) >= count or held == previous:
            break
    client.close()
    after = Sample(node, "produced", 0)
    print(before.line())
    print(created.line())
    print(after.line())
    storage = (created.storage - before.storage) * MIB / count
    print(
        f"  storage: {storage / 1024:.1f} KiB per topic with its schema "
        f"({GIB / storage:,.0f} topics per GiB of storage memory)"
    )
    pids = node.workers
    per_worker = []
    for pid, rss0, rss1 in zip(pids, created.workers, after.workers, strict=True):
        held = after.caches.get(pid, {})
        topics = validators(after.caches, pid) - validators(created.caches, pid)
        if topics > 0:
            per_worker.append((rss1 - rss0) * MIB / topics)
            print(
                f"  worker {pid}: {topics:,} topics cached, RSS {rss1 - rss0:+.1f} MiB"
                f" = {per_worker[-1] / 1024:.1f} KiB per topic; caches "
                + ", ".join(
                    f"{c} {n:,} ({b / MIB:.1f} MiB est.)"
                    for c, (n, b) in sorted(held.items())
                )
            )
    if per_worker:
        mean = sum(per_worker) / len(per_worker)
        print(
            f"  workers: {mean / 1024:.1f} KiB per cached topic, per worker "
            f"({GIB / mean:,.0f} topics per GiB of one worker's memory)"
        )
    else:
        total = (sum(after.workers) - sum(created.workers)) * MIB / count
        print(f"  workers: {total / 1024:.1f} KiB per topic, all workers together")


GIB = 1024 * MIB


# -- in-process trace -----------------------------------------------------------


def in_process_app(node: Node) -> Any:
    """The Narad app built as a worker builds it, over the node's storage,
    driven in this process (a falcon test client sending the root admin's
    credentials)."""
    import falcon.testing

    from narad.app import create_app
    from narad.config import Config
    from narad.plugins import load_plugins

    config = Config.load(
        env={},
        overrides={
            "storage.url": node.storage_url,
            "storage.data_dir": str(node.data),
            "validation.capacity_dir": str(node.tmp / "capacity"),
            "server.access_log": "off",
        },
    )
    app = create_app(config, plugins=load_plugins(config))
    return falcon.testing.TestClient(app, headers=HEADERS)


def trace(node: Node, rounds: int, block: int) -> None:
    """Issue rounds against two in-process apps; the producing one is measured."""
    admin, producer = in_process_app(node), in_process_app(node)
    libc = ctypes.CDLL("libc.so.6")
    payload = churn_payload()
    schema = churn_schema()

    def run(first: int, last: int) -> None:
        for i in range(first, last):
            name = f"trace-{i}"
            resp = admin.simulate_post(
                "/v1/topics", json={"name": name, "schema": schema}
            )
            assert resp.status_code == 201, resp.text
            for _ in range(4):
                resp = producer.simulate_post(
                    f"/v1/topics/{name}/produce", body=payload
                )
                assert resp.status_code == 202, resp.text
            resp = admin.simulate_delete(f"/v1/topics/{name}")
            assert resp.status_code == 204, resp.text
        time.sleep(0.2)  # the producing app's listener drops the deleted topics

    print(f"\nin-process trace: {rounds:,} rounds, producer and admin apps apart")
    run(0, block)  # warm-up, not counted
    gc.collect()
    tracemalloc.start()
    base_heap = tracemalloc.get_traced_memory()[0]
    base_objects = len(gc.get_objects())
    base_rss = rss_mib(os.getpid())
    for done in range(block, rounds, block):
        run(done, done + block)
        gc.collect()
        heap = (tracemalloc.get_traced_memory()[0] - base_heap) / MIB
        objects = len(gc.get_objects()) - base_objects
        rss = rss_mib(os.getpid()) - base_rss
        libc.malloc_trim(0)
        trimmed = rss_mib(os.getpid()) - base_rss
        print(
            f"  {done + block:7,} rounds: Python heap {heap:+.2f} MiB, gc objects "
            f"{objects:+,}, RSS {rss:+.1f} MiB, after malloc_trim {trimmed:+.1f} MiB",
            flush=True,
        )
    tracemalloc.stop()
    for client in (admin, producer):
        client.app.drain()  # stop their listeners before the node goes
    time.sleep(1.5)


# -- what hearing every event costs -------------------------------------------


def listener_cost(node: Node, events: int, workers: int) -> None:
    """A worker's CPU per event heard, against a produce's CPU in the worker
    that serves it: since every worker that caches a topic listens (to drop
    what it caches when the topic changes), every produce is heard by every
    worker of every node."""
    from narad.storage import Event

    client = in_process_app(node)
    listener = client.app._waiters._listener
    heard: list[float] = []
    done = threading.Event()

    def count(topic: str) -> None:
        heard.append(time.thread_time())
        if len(heard) == events + 1:
            done.set()

    listener.on(Event.MESSAGES, count)
    body = json.dumps({"name": "cost", "schema": TYPICAL_SCHEMA}).encode()
    assert client.simulate_post("/v1/topics", body=body).status_code == 201
    assert client.simulate_post("/v1/topics/cost/produce", body=TYPICAL_PAYLOAD)
    deadline = time.monotonic() + 10
    while not heard and time.monotonic() < deadline:  # listening
        client.simulate_post("/v1/topics/cost/produce", body=TYPICAL_PAYLOAD)
        time.sleep(0.1)
    heard.clear()
    channel = "narad:events"
    for first in range(0, events + 1, 1000):
        pipe = node.storage.pipeline(transaction=False)
        for i in range(first, min(first + 1000, events + 1)):
            pipe.publish(channel, f"{Event.MESSAGES.value} other-topic-{i}")
        pipe.execute()
    done.wait(60)
    got = heard[: events + 1]
    per_event = (got[-1] - got[0]) / (len(got) - 1)
    produces = 2000
    cpu = time.thread_time()
    for _ in range(produces):
        client.simulate_post("/v1/topics/cost/produce", body=TYPICAL_PAYLOAD)
    per_produce = (time.thread_time() - cpu) / produces
    client.app.drain()
    print(
        f"\nhearing the storage's events: {per_event * 1e6:.1f} us of a worker's CPU "
        f"per event ({len(got) - 1:,} heard); a produce of a typical event "
        f"costs {per_produce * 1e6:.0f} us in the worker serving it (in-process, "
        f"without HTTP); with {workers} workers hearing each produce to a "
        f"topic a consumer waits on: +{100 * workers * per_event / per_produce:.0f}% "
        "of a produce's CPU (a topic nobody waits on publishes nothing)"
    )


# -- main ---------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--minutes", type=float, default=5)
    parser.add_argument("--steady-minutes", type=float, default=2)
    parser.add_argument("--steady-topics", type=int, default=64)
    parser.add_argument("--live-topics", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=0)
    parser.add_argument("--rounds-every", type=int, default=500)
    parser.add_argument("--trace", type=int, default=0)
    parser.add_argument("--listener-events", type=int, default=50_000)
    parser.add_argument("--every", type=float, default=60)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--conns", type=int, default=8)
    parser.add_argument(
        "--unique-patterns",
        action="store_true",
        help="give every churned topic patterns of its own (nothing to share)",
    )
    args = parser.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="narad-soak-"))
    node = Node(tmp, args.workers)
    node.start()
    run = f"{os.getpid()}"
    print(
        f"node: {args.workers} workers (pids {', '.join(map(str, node.workers))}), "
        f"embedded Valkey (pid {node.valkey}); {args.clients} clients x "
        f"{args.conns} connections; cores shared with whatever else runs"
    )

    def unique(index: int, n: int) -> str:
        return f"u{run}x{index}x{n}" if args.unique_patterns else ""

    try:
        if args.trace:
            trace(node, args.trace, args.rounds_every)
        elif args.rounds:
            load = Load(
                node,
                args.clients,
                args.conns,
                lambda c, i, n: issue_round(c, f"issue-{i}-{n}", unique(i, n)),
            )
            rounds_phase(node, args.rounds, args.rounds_every, load)
        elif args.minutes:
            load = Load(
                node,
                args.clients,
                args.conns,
                lambda c, i, n: churn_round(c, f"churn-{i}-{n}", unique(i, n)),
            )
            timed_phase(
                node,
                f"churn: {args.minutes:g} minutes of create (schema) -> produce -> "
                "consume+ack -> PATCH schema -> produce -> delete",
                args.minutes,
                args.every,
                load,
                churned=True,
            )
        if args.steady_minutes and not args.trace:
            client = Client(node.port, 1)
            schema = json.dumps(TYPICAL_SCHEMA)
            for i in range(args.steady_topics):
                body = f'{{"name": "steady-{i}", "schema": {schema}}}'.encode()
                client.send("POST", "/v1/topics", body, ok=(201,))
            client.close()
            topics = args.steady_topics
            load = Load(
                node,
                args.clients,
                args.conns,
                lambda c, i, n: steady_round(c, f"steady-{(i * 7919 + n) % topics}"),
            )
            first, last, statuses = timed_phase(
                node,
                f"steady: {args.steady_minutes:g} minutes of produce, consume, ack "
                f"on {topics} live topics (no churn)",
                args.steady_minutes,
                args.every,
                load,
                churned=False,
            )
            if statuses[202]:
                # Acked messages stay until their retention: the storage grows.
                per = (last.storage - first.storage) * MIB / statuses[202]
                print(
                    f"  storage grows with the messages kept: {per:,.0f} bytes per "
                    f"stored message ({statuses[202]:,} of {len(TYPICAL_PAYLOAD)} "
                    "bytes each)"
                )
        if args.live_topics and not args.trace:
            live_topics_phase(node, args.live_topics, args.conns)
        if args.listener_events and not args.trace:
            listener_cost(node, args.listener_events, args.workers)
    finally:
        node.stop()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    import report

    report.run("soak", main)
