"""Messaging figures: produce, batch produce, consume+ack, the full flow in
batches, produce-to-consume, and the same node holding thousands of idle long
polls or slow clients.

Run from a checkout: ``PYTHONPATH=.:plugins python bench/messaging.py``
(``--seconds N`` per phase, default 6; ``--workers N``, default the node's,
one per core and at least two; ``--waiters N``, default 10,000;
``--slowloris N``, default 2,000). ``--cost`` runs only the per-message
cost phases instead, in a few minutes, into the page's ``consume-cost``
section: per-message CPU in the workers and in Valkey, Valkey's write system
calls, the entries and bytes each phase writes and its replies' sizes, for
produce, consume, ack and the full flow, beside the floor's
(``bench/msgcost.py``; ``--messages``, ``--singles``, ``--rounds``,
``--profile`` to sample the workers with py-spy). ``--storage URL`` runs
only single produce and the full flow on a node over that storage (a
``redis+cluster://`` Valkey Cluster, say) beside one on the embedded
Valkey, in alternating turns, and prints them side by side, into the
page's ``storage-cluster`` section; ``--storage local-cluster`` starts the
test suite's local Valkey Cluster for it (``tests/valkeycluster.py``: 3
primaries, 3 replicas, each with ``LOCAL_CLUSTER_MEMORY`` of maxmemory).

Starts ``narad serve`` as a user would (gunicorn with Narad's gevent worker
class, the embedded Valkey: append-only, fsync always) and, for the floor,
``bench/floor_app.py`` (a bare falcon endpoint doing one EVALSHA per request)
under the same gunicorn settings and worker class against the same Valkey.
Prints each figure beside its target, and where the CPU went in each phase
(gunicorn workers, Valkey and its AOF rewrites, the load generators), since
all share the machine's cores.

The produce/consume load generator is this process: one thread,
non-blocking sockets on an epoll loop, one keep-alive HTTP/1.1 connection per
client with one request outstanding at a time, requests prebuilt as bytes.
Its own CPU use is printed so it can be ruled out (or not) as the
bottleneck. The idle waiters, the slowloris connections and the ``/healthz``
prober are separate processes (``bench/loadgen.py``), so none of them slows
another down or skews its timings.

The node runs as shipped, with security on: every request carries the root
admin's HTTP Basic credentials (its password set by the bench through
``NARAD_ADMIN_PASSWORD``). First, two fresh nodes alike but for
``security.enabled`` take single produce in alternating turns (the target:
on >= 90% of off), and are stopped before the other phases; then two alike
but for ``metrics.requests`` (request counts and latencies as shipped vs
none: on >= 97% of off).

Phases: security on vs off; request metrics on vs off; security, access log
and request metrics all on vs all off; the floor and single produce in
alternating turns (``COMPARE_ROUNDS`` each: the machine's speed drifts over minutes);
single produce with the prober (the no-waiter /healthz figures); batch
produce; five runs each of consume+ack (one message at a time, from the
batch phase's backlog), single produce and consume+ack's floor (the same
requests to the floor app's bare single routes, from a backlog in its single
produce's list), alternating, compared by their medians; the full flow in
batches (connections producing batches of 100 while others consume batches
of up to 100 and ack each batch in one request, acking again with the next
one any handle the partition's acked-ahead cap refused, counting acked
messages) in alternating turns
(``FLOW_ROUNDS`` each, compared by their medians) with its floor (the same
requests to the floor app's bare batch routes: a list, a hash of leased
values, one script per request) and the storage floor (the same bare routes
over Narad's own storage calls); latency; single
produce alone, then ``WAIT_ROUNDS`` times N idle consumers long-polling
``wait=10s`` (memory per waiter measured once they all wait, in the first
round) while single produce runs again (and the latency phase, in the
first round), then, once their last polls ran out, single produce alone
(the figure is the rounds' median); then the slowloris connections while
single produce runs again, then single produce alone. The /healthz prober
runs through each of these produce phases, alone or beside a crowd, so
that a crowd's ratio counts the crowd alone; last, the floor alone,
beside as many waiters long-polling its bare ``/floor/wait`` (no look, 204
at the deadline), and alone again: the least a long poll costs the same
produce. Each crowd's figure is compared with the mean of single produce
(or the floor) alone just before and just after it. Valkey rewrites its
append-only file on its own whenever the file has doubled;
before each compared turn (and before the crowds) the bench has it rewrite
at once if the turn could reach that point, and waits, so that no rewrite
lands in one side of a comparison (:class:`Rewrites`).
"""

from __future__ import annotations

import argparse
import base64
import http.client
import json
import os
import re
import resource
import secrets
import selectors
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "plugins")]

import redis  # noqa: E402
from floor_app import SINGLE as FLOOR_SINGLE  # noqa: E402

from narad.config import default_workers  # noqa: E402
from narad.serve.embedded import socket_path  # noqa: E402

CLIENTS = 32
BATCH = 100
BATCH_CLIENTS = 8
FLOW_PRODUCERS = 4
FLOW_CONSUMERS = 8
# Turns each of the full flow and its floor, compared by their medians: one
# turn's rate moves by a fifth with the Valkey's fsyncs and the turn order.
FLOW_ROUNDS = 5
#: ``--storage local-cluster``: the suite's 3+3 cluster, each node's maxmemory
#: (the full flow's backlog must fit on one primary, or the flow meets 507s).
LOCAL_CLUSTER = "local-cluster"
LOCAL_CLUSTER_MEMORY = 2 << 30
RUNS = 5
# More than the floor's single consume+ack takes a second here (~3,000):
# each of its runs starts with this many bodies a second of the run queued.
FLOOR_SINGLES_PER_S = 8_000
WARMUP_S = 1.0
# The topics bench/loadgen.py's waiters poll by default: bench-wait-0 to -9.
WAIT_TOPICS = 10
# Crowds of waiters, each compared with single produce alone around it: five,
# since single rounds of one run ranged from 58 to 110% (the machine's speed
# moves within a minute, and the bare floor's beside its waiters with it).
WAIT_ROUNDS = 5
TICKS = os.sysconf("SC_CLK_TCK")
# One 1 KiB JSON text, its string random as real content is: Valkey writes
# its data compressed when it rewrites its append-only file, and rewrites
# whenever the file has doubled since, so a compressible message would make
# rewrites (a fork writing everything out) come every few seconds.
BODY = b'{"order": "' + secrets.token_urlsafe(800)[:1011].encode() + b'"}'
assert len(BODY) == 1024
_LENGTH = re.compile(rb"\r\ncontent-length:[ \t]*(\d+)", re.IGNORECASE)
ADMIN_PASSWORD = secrets.token_urlsafe(16)
AUTHORIZATION = "Basic " + base64.b64encode(f"admin:{ADMIN_PASSWORD}".encode()).decode()
HEADERS = {"Authorization": AUTHORIZATION}
# Turns per side when two figures are compared in alternation: a turn's rate
# moves by up to a sixth with the machine, and five turns a side average
# most of that out.
COMPARE_ROUNDS = 5
_HANDLE = re.compile(rb'"receipt_handle":"([^"]+)"')

# A driver gets the previous response (status, body), or None to open, and
# returns (next request bytes, messages the previous response accounts for).
Driver = Callable[[tuple[int, bytes] | None], tuple[bytes, int]]


def stop_nodes_on_sigterm() -> None:
    """Make SIGTERM end this process through its ``finally`` clauses, which
    stop the nodes it started: they run in sessions of their own, so a
    terminated bench would otherwise leave them running (and taking part of
    the machine from every later measurement)."""

    def exit_on(signum: int, frame: object) -> None:
        sys.exit(f"stopped by signal {signum}")

    signal.signal(signal.SIGTERM, exit_on)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def request(method: str, path: str, body: bytes = b"") -> bytes:
    head = (
        f"{method} {path} HTTP/1.1\r\nHost: bench\r\nAuthorization: {AUTHORIZATION}\r\n"
    )
    if body or method == "POST":
        head += f"Content-Length: {len(body)}\r\n"
    return head.encode() + b"\r\n" + body


# -- processes ----------------------------------------------------------------


def child_pids(pid: int) -> list[int]:
    out = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True)
    return [int(p) for p in out.stdout.split()]


def cpu_seconds(pid: int) -> float:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except FileNotFoundError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / TICKS  # utime + stime


def rewrite_seconds(pid: int) -> float:
    """CPU seconds of Valkey's (``pid``'s) children, reaped and running: its
    AOF rewrites, forks that write the whole data set out again."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except FileNotFoundError:
        return 0.0
    reaped = (int(fields[13]) + int(fields[14])) / TICKS  # cutime + cstime
    return reaped + sum(map(cpu_seconds, child_pids(pid)))


def machine_busy_seconds() -> float:
    """CPU seconds all processes on the machine have used (not idle, not iowait)."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n")[0].split()[1:]]
    return (sum(fields[:8]) - fields[3] - fields[4]) / TICKS


class Rewrites:
    """Valkey's automatic AOF rewrites, kept out of measured turns.

    Valkey rewrites its append-only file in a fork whenever the file has
    grown by ``auto-aof-rewrite-percentage`` since the last rewrite (and is
    past ``auto-aof-rewrite-min-size``); the fork writes the whole data set
    out again, a sixth to a quarter of a core for seconds once the batch
    phases have stored millions of messages. One landing in one side of a
    comparison would count against that side, so before each compared turn
    :meth:`make_room` rewrites the file at once if the turn could reach the
    trigger, and waits for it.
    """

    # More than a compared turn here writes to the AOF in a second (single
    # produce or the floor: up to ~5,000 requests of ~1.2 KB as logged).
    BYTES_PER_S = 8 * 1024 * 1024
    # Batch produce and the full flow: ~65,000 and ~25,000 messages of 1 KiB
    # a second, the flow's leases and acks besides.
    BATCH_BYTES_PER_S = 96 * 1024 * 1024

    def __init__(self) -> None:
        self.count = 0
        self.seconds = 0.0

    def make_room(
        self, storage_url: str, seconds: float, bytes_per_s: int = BYTES_PER_S
    ) -> None:
        """Rewrite now if ``seconds`` of writes (at ``bytes_per_s``) could
        start a rewrite."""
        client = redis.Redis.from_url(storage_url)
        started = time.monotonic()
        try:
            self._settled(client)
            settings = client.config_get("auto-aof-rewrite-*")
            percent = int(settings["auto-aof-rewrite-percentage"])
            least = int(settings["auto-aof-rewrite-min-size"])
            info = client.info("persistence")
            trigger = max(least, max(info["aof_base_size"], 1) * (100 + percent) // 100)
            if info["aof_current_size"] + bytes_per_s * seconds < trigger:
                return
            client.bgrewriteaof()
            self._settled(client)
            self.count += 1
        finally:
            self.seconds += time.monotonic() - started
            client.close()

    @staticmethod
    def _settled(client: redis.Redis) -> None:
        while True:
            info = client.info("persistence")
            if not (info["aof_rewrite_in_progress"] or info["aof_rewrite_scheduled"]):
                return
            time.sleep(0.2)


def comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except FileNotFoundError:
        return ""


def wait_ready(port: int, path: str, process: subprocess.Popen, log: Path) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            sys.exit(f"server exited:\n{log.read_text()[-3000:]}")
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            conn.request("GET", path, headers=HEADERS)
            if conn.getresponse().status < 500:
                return
        except OSError:
            pass
        time.sleep(0.1)
    sys.exit(f"server not ready:\n{log.read_text()[-3000:]}")


class Servers:
    """``narad serve`` with embedded Valkey, the floor app beside it, and a
    second node with security off for the comparison."""

    def __init__(self, tmp: Path, workers: int) -> None:
        self.tmp = tmp
        self.workers = workers
        self.port, self.floor_port = free_port(), free_port()
        self.data = tmp / "data"
        self.env = self.node_env(self.port, "data")
        self.processes: list[subprocess.Popen] = []

    def node_env(self, port: int, data: str, **extra: str) -> dict[str, str]:
        return {
            **os.environ,
            "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "plugins")]),
            "NARAD_SERVER_BIND": f"127.0.0.1:{port}",
            "NARAD_SERVER_WORKERS": str(self.workers),
            "NARAD_STORAGE_URL": "",
            "NARAD_STORAGE_DATA_DIR": str(self.tmp / data),
            "NARAD_VALIDATION_CAPACITY_DIR": str(self.tmp / data / "capacity"),
            "NARAD_ADMIN_PASSWORD": ADMIN_PASSWORD,
            **extra,
        }

    def _spawn(
        self, args: list[str], log: Path, env: dict[str, str] | None = None
    ) -> subprocess.Popen:
        with log.open("wb") as out:
            process = subprocess.Popen(
                args,
                env=env or self.env,
                cwd=self.tmp,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self.processes.append(process)
        return process

    def start(self) -> None:
        log = self.tmp / "narad.log"
        self.narad = self._spawn([sys.executable, "-m", "narad.cli", "serve"], log)
        wait_ready(self.port, "/readyz", self.narad, log)
        # The floor app shares narad's embedded Valkey (same user: its socket).
        self.storage_url = f"unix://{socket_path(self.data)}"
        log = self.tmp / "floor.log"
        self.floor = self._spawn(
            [
                sys.executable,
                str(ROOT / "bench" / "floor_app.py"),
                f"127.0.0.1:{self.floor_port}",
                self.storage_url,
                str(self.workers),
            ],
            log,
        )
        wait_ready(self.floor_port, "/", self.floor, log)
        self.valkey, self.narad_workers = self._processes(self.narad.pid)
        _, self.floor_workers = self._processes(self.floor.pid)

    def spawn_node(
        self, name: str, **extra: str
    ) -> tuple[int, dict[str, list[int]], str]:
        """Another ``narad serve`` on its own embedded Valkey: (port, its
        processes by group for :class:`Usage`, its Valkey's URL)."""
        port = free_port()
        log = self.tmp / f"{name}.log"
        env = self.node_env(port, name, **extra)
        process = self._spawn([sys.executable, "-m", "narad.cli", "serve"], log, env)
        wait_ready(port, "/readyz", process, log)
        valkey, workers = self._processes(process.pid)
        url = f"unix://{socket_path(self.tmp / name)}"
        return port, {"gunicorn workers": workers, "valkey": valkey}, url

    def _processes(self, arbiter: int) -> tuple[list[int], list[int]]:
        """A node's (Valkey, gunicorn workers), once every worker is up: the
        first one answers ready before the others have forked, and a worker
        missed here would count as "other processes" in every phase."""
        deadline = time.monotonic() + 30
        while True:
            children = child_pids(arbiter)
            valkey = [p for p in children if comm(p).startswith("valkey")]
            workers = [p for p in children if p not in valkey]
            if len(workers) >= self.workers or time.monotonic() > deadline:
                return valkey, workers
            time.sleep(0.1)

    def stop(self, processes: list[subprocess.Popen] | None = None) -> None:
        for process in reversed(self.processes if processes is None else processes):
            if process.poll() is None:
                process.terminate()
                try:
                    process.wait(30)
                except subprocess.TimeoutExpired:
                    os.killpg(process.pid, 9)
                    process.wait()


def stored(port: int, topic: str) -> int:
    """How many messages ``topic`` has taken: its partitions' next offsets."""
    status, data = call(port, "GET", f"/v1/topics/{topic}")
    assert status == 200, data
    return sum(p["next_offset"] for p in json.loads(data)["partition_stats"])


def call(port: int, method: str, path: str, body: bytes = b"") -> tuple[int, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.request(method, path, body=body, headers=HEADERS)
        resp = conn.getresponse()
        return resp.status, resp.read()
    finally:
        conn.close()


def counted(port: int, *series: str) -> list[float]:
    """The node's figures for each of ``series`` (a metric's name and labels,
    as /metrics prints them), summed over its workers."""
    _, data = call(port, "GET", "/metrics")
    lines = data.decode().splitlines()
    return [
        sum(float(line.rsplit(" ", 1)[1]) for line in lines if line.startswith(name))
        for name in series
    ]


# A produce's append, and the messages produced: how many produces shared one.
APPENDS = 'narad_storage_script_duration_seconds_count{script="append"}'
PRODUCED = "narad_messages_produced_total"


def create_topic(port: int, name: str, **settings: int) -> None:
    status, data = call(
        port, "POST", "/v1/topics", json.dumps({"name": name, **settings}).encode()
    )
    assert status == 201, data


def create_wait_topics(port: int) -> None:
    """The topics bench/loadgen.py's waiters poll (its ``--topics`` default)."""
    for i in range(WAIT_TOPICS):
        create_topic(port, f"bench-wait-{i}")


# -- the load generator -------------------------------------------------------


class Conn:
    __slots__ = ("buf", "driver", "out", "sock")

    def __init__(self, port: int, driver: Driver) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock.setblocking(False)
        self.driver = driver
        self.buf = bytearray()
        self.out = memoryview(b"")


def run_load(port: int, clients: int, seconds: float, factory: Callable[[], Driver]):
    """Drive ``clients`` connections; return (messages/s, statuses, elapsed)."""
    sel = selectors.DefaultSelector()
    conns = [Conn(port, factory()) for _ in range(clients)]
    counting_from = time.monotonic() + WARMUP_S
    until = counting_from + seconds
    messages, statuses = 0, Counter()

    def send(conn: Conn, data: bytes) -> None:
        conn.out = memoryview(data)
        flush(conn)

    def flush(conn: Conn) -> None:
        while conn.out:
            try:
                sent = conn.sock.send(conn.out)
            except BlockingIOError:
                break
            conn.out = conn.out[sent:]
        sel.modify(
            conn.sock,
            selectors.EVENT_READ | (selectors.EVENT_WRITE if conn.out else 0),
            conn,
        )

    for conn in conns:
        sel.register(conn.sock, selectors.EVENT_READ, conn)
        send(conn, conn.driver(None)[0])
    open_conns = len(conns)
    while open_conns:
        for key, events in sel.select(timeout=1.0):
            conn = key.data
            if events & selectors.EVENT_WRITE:
                flush(conn)
            if not events & selectors.EVENT_READ:
                continue
            chunk = conn.sock.recv(262144)
            if not chunk:
                raise ConnectionError("server closed a keep-alive connection")
            conn.buf += chunk
            end = conn.buf.find(b"\r\n\r\n")
            if end < 0:
                continue
            head = bytes(conn.buf[:end])
            status = int(head[9:12])
            match = _LENGTH.search(head)
            length = int(match[1]) if match else 0
            if len(conn.buf) < end + 4 + length:
                continue
            body = bytes(conn.buf[end + 4 : end + 4 + length])
            del conn.buf[: end + 4 + length]
            now = time.monotonic()
            data, count = conn.driver((status, body))
            if now >= counting_from:
                statuses[status] += 1
                messages += count
            if now >= until:
                sel.unregister(conn.sock)
                conn.sock.close()
                open_conns -= 1
            else:
                send(conn, data)
    sel.close()
    return messages / seconds, statuses


def constant(data: bytes, ok: int, per: int) -> Callable[[], Driver]:
    def driver(prev):
        return data, per if prev is not None and prev[0] == ok else 0

    return lambda: driver


def batch_flow(base: str, producers: int) -> Callable[[], Driver]:
    """The first ``producers`` connections batch-produce; the others
    batch-consume and batch-ack what they got, at ``base`` (a topic's path,
    or the floor's). Counts acked messages.

    A handle whose ack the partition refused (``acked_ahead_full``: too many
    acks above its oldest unacked message) is acked again with the next
    batch, or on its own after a consume that got nothing, as the README
    tells clients to; dropped, its message would stay leased until its lease
    lapsed and hold the partition's frontier back meanwhile."""
    produce = request("POST", f"{base}/produce/batch", batch_body())
    consume = request("GET", f"{base}/consume/batch?max={BATCH}&wait=1s")
    ack_path = f"{base}/ack/batch"
    made = 0

    def producer(prev):
        return produce, 0

    def new_consumer() -> Driver:
        sent: list[bytes] = []  # the handles of the ack in flight
        refused: list[bytes] = []  # to ack again

        def consumer(prev):
            acked = 0
            if sent:  # prev answers the ack
                assert prev[0] == 200, prev
                results = json.loads(prev[1])["results"]
                acked = results.count("acked")
                refused[:] = [
                    h
                    for h, r in zip(sent, results, strict=True)
                    if r == "acked_ahead_full"
                ]
                sent.clear()
                return consume, acked
            if prev is not None and prev[0] == 200:
                refused.extend(_HANDLE.findall(prev[1]))
            if not refused:
                return consume, 0
            sent[:], refused[:] = refused, []
            body = b'{"receipt_handles":["' + b'","'.join(sent) + b'"]}'
            return request("POST", ack_path, body), 0

        return consumer

    def factory() -> Driver:
        nonlocal made
        made += 1
        return producer if made <= producers else new_consumer()

    return factory


def batch_body() -> bytes:
    return json.dumps({"messages": [{"value": BODY.decode()}] * BATCH}).encode()


def consume_and_ack(base: str, unacked: set[str]) -> Callable[[], Driver]:
    """Consume one, ack it, and so on, at ``base`` (a topic's path, or the
    floor's). ``unacked`` holds the handles of messages consumed and not
    acked yet: those the phase's end cut off."""
    consume = request("GET", f"{base}/consume")

    def factory() -> Driver:
        held = None  # per connection: the handle the last consume got

        def driver(prev):
            nonlocal held
            settled = 0
            if held is not None:
                settled = 1 if prev[0] == 204 else 0
                if prev[0] in (204, 410):
                    unacked.discard(held)
                held = None
            elif prev is not None and prev[0] == 200:
                held = _HANDLE.search(prev[1])[1].decode()
                unacked.add(held)
                path = f"{base}/ack?receipt_handle={held}"
                return request("POST", path), settled
            return consume, settled

        return driver

    return factory


def fill_floor_singles(storage_url: str, count: int) -> None:
    """Queue bodies on the floor's single produce list until it holds
    ``count``: the backlog the floor's single consume takes from, as Narad's
    takes from the batch phase's."""
    client = redis.Redis.from_url(storage_url)
    try:
        missing = count - client.llen(FLOOR_SINGLE)
        chunk = [BODY] * 1000
        while missing > 0:
            client.rpush(FLOOR_SINGLE, *chunk[:missing])
            missing -= len(chunk)
    finally:
        client.close()


def ack_all(port: int, topic: str, handles: set[str]) -> None:
    """Ack what a phase left leased, so that the next phase does not meet
    those messages at the acked-ahead frontier until their leases lapse."""
    if handles:
        body = json.dumps({"receipt_handles": sorted(handles)}).encode()
        status, data = call(port, "POST", f"/v1/topics/{topic}/ack/batch", body)
        assert status == 200, data
        handles.clear()


# -- measurement --------------------------------------------------------------


class Usage:
    """CPU seconds used by the groups of processes during one phase."""

    def __init__(self, groups: dict[str, list[int]]) -> None:
        self.groups = groups

    def __enter__(self) -> Usage:
        self.t0 = time.monotonic()
        self.before = {g: sum(map(cpu_seconds, ps)) for g, ps in self.groups.items()}
        self.rewrites0 = sum(map(rewrite_seconds, self.groups.get("valkey", ())))
        self.self0 = resource.getrusage(resource.RUSAGE_SELF)
        self.children0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        self.busy0 = machine_busy_seconds()
        return self

    def __exit__(self, *exc) -> None:
        wall = time.monotonic() - self.t0
        after = {g: sum(map(cpu_seconds, ps)) for g, ps in self.groups.items()}
        me = resource.getrusage(resource.RUSAGE_SELF)
        children = resource.getrusage(resource.RUSAGE_CHILDREN)
        used = {g: after[g] - self.before[g] for g in self.groups}
        used["load generator"] = (
            me.ru_utime - self.self0.ru_utime + me.ru_stime - self.self0.ru_stime
        )
        # The /healthz prober, a child of this process done within the phase.
        prober = (
            children.ru_utime
            - self.children0.ru_utime
            + children.ru_stime
            - self.children0.ru_stime
        )
        if prober:
            used["prober"] = prober
        # Valkey rewrites its AOF in a fork whenever the file doubled: a
        # phase it lands in has that much less of the machine.
        rewrites = sum(map(rewrite_seconds, self.groups.get("valkey", ())))
        if rewrites - self.rewrites0 >= 0.005 * wall:
            used["valkey's AOF rewrite"] = rewrites - self.rewrites0
        # Anything else running on the machine competes for the same cores.
        used["other processes"] = max(
            machine_busy_seconds() - self.busy0 - sum(used.values()), 0.0
        )
        self.text = ", ".join(f"{g} {100 * s / wall:.0f}%" for g, s in used.items())
        # Cores the measured processes (the server's and the load
        # generator) had: on a shared machine, a rate per core of theirs says
        # more than the rate itself.
        self.cores = (sum(used[g] for g in self.groups) + used["load generator"]) / wall


def latency(port: int, topic: str, seconds: float) -> list[float]:
    """Produce one message at a time while a consumer long-polls for it."""
    ready, got = threading.Event(), threading.Event()
    received: dict[int, float] = {}
    stop = threading.Event()

    def consumer():
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        while not stop.is_set():
            ready.set()
            conn.request("GET", f"/v1/topics/{topic}/consume?wait=2s", headers=HEADERS)
            resp = conn.getresponse()
            body = resp.read()
            if resp.status != 200:
                continue
            message = json.loads(body)
            received[message["payload"]["seq"]] = time.perf_counter()
            ready.clear()
            got.set()
            handle = message["receipt_handle"]
            path = f"/v1/topics/{topic}/ack?receipt_handle={handle}"
            conn.request("POST", path, headers=HEADERS)
            conn.getresponse().read()
        conn.close()

    thread = threading.Thread(target=consumer, daemon=True)
    thread.start()
    producer = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    samples = []
    deadline = time.monotonic() + seconds
    seq = 0
    while time.monotonic() < deadline:
        ready.wait(5)
        time.sleep(0.005)  # let the consumer's long poll reach the server
        got.clear()
        body = json.dumps({"seq": seq, "pad": "x" * 990}).encode()
        sent = time.perf_counter()
        producer.request(
            "POST", f"/v1/topics/{topic}/produce", body=body, headers=HEADERS
        )
        producer.getresponse().read()
        if got.wait(5):
            samples.append(received[seq] - sent)
        seq += 1
    stop.set()
    producer.close()
    thread.join(5)
    return samples


class Background:
    """A ``bench/loadgen.py`` process: started, waited for, stopped for results."""

    def __init__(self, *args: str) -> None:
        self.process = subprocess.Popen(
            [
                sys.executable,
                str(ROOT / "bench" / "loadgen.py"),
                *args,
                "--authorization",
                AUTHORIZATION,
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        line = self.process.stdout.readline()
        if not line:
            sys.exit(f"load generator {args} failed to start")
        self.ready = json.loads(line)["ready"]
        self.started = time.monotonic()

    def stop(self) -> dict:
        self.process.stdin.close()
        out = self.process.stdout.readline()
        self.process.wait(60)
        return json.loads(out)


def memory(pids: list[int]) -> tuple[int, int]:
    """(total resident bytes, largest virtual size) of these processes."""
    rss, vsz = 0, 0
    for pid in pids:
        fields = dict(
            line.split(":", 1)
            for line in Path(f"/proc/{pid}/status").read_text().splitlines()
        )
        rss += int(fields["VmRSS"].split()[0]) * 1024
        vsz = max(vsz, int(fields["VmSize"].split()[0]) * 1024)
    return rss, vsz


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=6.0, help="per phase")
    parser.add_argument("--workers", type=int, default=default_workers())
    parser.add_argument("--waiters", type=int, default=10_000)
    parser.add_argument("--slowloris", type=int, default=2_000)
    parser.add_argument(
        "--cost",
        action="store_true",
        help="only the per-message cost phases (bench/msgcost.py), a few minutes",
    )
    parser.add_argument(
        "--messages", type=int, default=50_000, help="--cost: per batch phase"
    )
    parser.add_argument(
        "--singles", type=int, default=5_000, help="--cost: per single phase"
    )
    parser.add_argument("--rounds", type=int, default=2, help="--cost: turns a side")
    parser.add_argument(
        "--profile", action="store_true", help="--cost: sample the workers (py-spy)"
    )
    parser.add_argument(
        "--storage",
        metavar="URL",
        help="only single produce and the full flow, on a node over URL (e.g. "
        "redis+cluster://..., or local-cluster: the suite's 3+3 Valkey Cluster, "
        "started here) beside one on its embedded Valkey, in turns",
    )
    args = parser.parse_args()
    stop_nodes_on_sigterm()
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))  # the children too
    tmp = Path(tempfile.mkdtemp(prefix="narad-bench-"))
    servers = Servers(tmp, args.workers)
    try:
        servers.start()
        if args.cost:
            cost_report(servers, args)
        elif args.storage:
            storage_report(servers, args.storage, args.seconds)
        else:
            report(servers, args.seconds, args.waiters, args.slowloris)
    finally:
        servers.stop()
        shutil.rmtree(tmp, ignore_errors=True)


def report(servers: Servers, seconds: float, waiters: int, slowloris: int) -> None:
    port = servers.port
    narad = {"gunicorn workers": servers.narad_workers, "valkey": servers.valkey}
    floor = {"gunicorn workers": servers.floor_workers, "valkey": servers.valkey}
    print(
        f"narad serve: {servers.workers} workers (narad.serve.workers.NaradWorker, "
        f"gevent), reuse_port, embedded Valkey (appendonly, fsync always) at "
        f"{servers.storage_url}"
    )
    print(
        f"load generator: this process, one epoll thread, {CLIENTS} keep-alive "
        f"HTTP/1.1 connections, 1 request in flight each, {seconds:g} s per "
        f"phase after {WARMUP_S:g} s warm-up; waiters, slowloris and the "
        f"/healthz prober (one new connection every 20 ms) are separate "
        f"processes; {os.cpu_count()} cores shared"
    )
    print()
    rows = []
    cores: dict[str, float] = {}

    def phase(name, groups, fn):
        with Usage(groups) as usage:
            result = fn()
        rows.append((name, usage.text))
        cores[name] = usage.cores
        return result

    def produce_load(topic: str, duration: float = seconds):
        body = request("POST", f"/v1/topics/{topic}/produce", BODY)
        return lambda: run_load(port, CLIENTS, duration, constant(body, 202, 1))

    floor_body = request("POST", "/floor", BODY)

    def floor_load(duration: float = seconds):
        return lambda: run_load(
            servers.floor_port, CLIENTS, duration, constant(floor_body, 202, 1)
        )

    def flow_load(node_port: int, base: str):
        """The full flow at ``base`` for half a phase (a compared turn)."""
        load = batch_flow(base, FLOW_PRODUCERS)
        connections = FLOW_PRODUCERS + FLOW_CONSUMERS
        return lambda: run_load(node_port, connections, seconds / 2, load)

    def probed(fn):
        """Run ``fn`` while the prober probes; return (its result, probe report)."""
        prober = Background("probe", str(port))
        try:
            result = fn()
        finally:
            probes = prober.stop()
        return result, probes

    rewrites = Rewrites()
    turn_s = seconds / 2 + WARMUP_S  # a compared turn, warm-up included

    def on_vs_off(what: str, **off_env: str) -> tuple[float, float]:
        """Single produce on two fresh nodes alike but for ``off_env``, the
        same load on each in alternating turns (stopped afterwards): the
        mean rate of each, (on, off)."""
        before = len(servers.processes)
        slug = what.replace(" ", "-")  # its data directory's name
        pair = {
            "on": servers.spawn_node(f"{slug}-on"),
            "off": servers.spawn_node(f"{slug}-off", **off_env),
        }
        rates = {"on": 0.0, "off": 0.0}
        for side, (node_port, _, _) in pair.items():
            create_topic(node_port, f"bench-{side}")
            # Uncounted: each worker's first check of the credentials (a
            # scrypt hash) happens here, not in a measured turn.
            body = request("POST", f"/v1/topics/bench-{side}/produce", BODY)
            run_load(node_port, CLIENTS, 1.0, constant(body, 202, 1))
        for turn in range(COMPARE_ROUNDS):
            for side in ("on", "off") if turn % 2 == 0 else ("off", "on"):
                node_port, groups, url = pair[side]
                body = request("POST", f"/v1/topics/bench-{side}/produce", BODY)
                rewrites.make_room(url, turn_s)
                rate, st = phase(
                    f"produce, {what} {side}",
                    groups,
                    lambda p=node_port, b=body: run_load(
                        p, CLIENTS, seconds / 2, constant(b, 202, 1)
                    ),
                )
                check(st, {202})
                rates[side] += rate / COMPARE_ROUNDS
        servers.stop(servers.processes[before:])
        return rates["on"], rates["off"]

    secure_rate, open_rate = on_vs_off("security", NARAD_SECURITY_ENABLED="false")
    # The request metrics as shipped (counted and timed per request) against
    # none at all: what the middleware costs a produce.
    counted_rate, uncounted_rate = on_vs_off(
        "request metrics", NARAD_METRICS_REQUESTS="false"
    )
    # What the per-request extras cost together, beside the floor: the gap
    # left once they are all off is the produce itself.
    full_rate, bare_rate = on_vs_off(
        "security, access log, request metrics",
        NARAD_SECURITY_ENABLED="false",
        NARAD_SERVER_ACCESS_LOG="off",
        NARAD_METRICS_REQUESTS="false",
    )

    # The floor and single produce in alternating turns: the machine's speed
    # drifts by a fifth over minutes, which a ratio of two phases taken
    # apart would read as Narad's.
    create_topic(port, "bench-single")
    floor_rate = single = 0.0
    appends_before, produced_before = counted(port, APPENDS, PRODUCED)
    for turn in range(COMPARE_ROUNDS):
        for side in ("floor", "narad") if turn % 2 == 0 else ("narad", "floor"):
            rewrites.make_room(servers.storage_url, turn_s)
            if side == "floor":
                rate, st = phase("floor", floor, floor_load(seconds / 2))
                floor_rate += rate / COMPARE_ROUNDS
            else:
                rate, st = phase(
                    "single produce",
                    narad,
                    produce_load("bench-single", seconds / 2),
                )
                single += rate / COMPARE_ROUNDS
            check(st, {202})
    appends_after, produced_after = counted(port, APPENDS, PRODUCED)
    per_append = (produced_after - produced_before) / max(
        appends_after - appends_before, 1
    )
    (_, st), idle_probes = phase(
        "single produce, probed", narad, lambda: probed(produce_load("bench-single"))
    )
    check(st, {202})

    create_topic(port, "bench-batch")
    rewrites.make_room(
        servers.storage_url, seconds + WARMUP_S, Rewrites.BATCH_BYTES_PER_S
    )
    batch, st = phase(
        "batch produce",
        narad,
        lambda: run_load(
            port,
            BATCH_CLIENTS,
            seconds,
            constant(
                request("POST", "/v1/topics/bench-batch/produce/batch", batch_body()),
                202,
                BATCH,
            ),
        ),
    )
    check(st, {202})

    # Consume the batch phase's backlog (far more than these runs can take),
    # alternating with single produce and with the floor's consume+ack (the
    # same requests to bare routes, one script each) so that all three see
    # the same conditions.
    runs: list[tuple[float, float, float]] = []
    unacked: set[str] = set()
    for run in range(1, RUNS + 1):
        fill_floor_singles(
            servers.storage_url, round((seconds + WARMUP_S) * FLOOR_SINGLES_PER_S)
        )
        rewrites.make_room(servers.storage_url, 3 * (seconds + WARMUP_S))
        consumed, st = phase(
            f"consume+ack #{run}",
            narad,
            lambda: run_load(
                port,
                CLIENTS,
                seconds,
                consume_and_ack("/v1/topics/bench-batch", unacked),
            ),
        )
        check(st, {200, 204})
        ack_all(port, "bench-batch", unacked)
        produced, st = phase(
            f"single produce #{run}", narad, produce_load("bench-single")
        )
        check(st, {202})
        floor_consumed, st = phase(
            f"floor consume+ack #{run}",
            floor,
            lambda: run_load(
                servers.floor_port, CLIENTS, seconds, consume_and_ack("/floor", set())
            ),
        )
        check(st, {200, 204})
        runs.append((produced, consumed, floor_consumed))
    produced_median = statistics.median(p for p, _, _ in runs)
    consumed_median = statistics.median(c for _, c, _ in runs)
    floor_consumed_median = statistics.median(f for _, _, f in runs)
    # Per core the processes had, so that runs that got less of a shared
    # machine still compare.
    per_core = [
        (p / cores[f"single produce #{run}"], c / cores[f"consume+ack #{run}"])
        for run, (p, c, _) in enumerate(runs, 1)
    ]
    per_core_ratio = statistics.median(c for _, c in per_core) / statistics.median(
        p for p, _ in per_core
    )

    # The full flow beside its floor (the same requests to bare falcon
    # routes, one script each: bench/floor_app.py), in alternating turns.
    # Between them, the storage floor: the floor app's routes over Narad's
    # own storage calls, so that a gap splits into Narad's scripts and the
    # rest of its requests. Each Narad turn (and each storage floor turn)
    # has its own topic: the leases the last turn's end cut off hold its
    # partitions' frontiers until they lapse.
    # Per side: its phases' name, processes, node and routes' base.
    flow_sides = {
        "floor": ("batch flow floor", floor, servers.floor_port, "/floor"),
        "storage": ("batch flow storage floor", floor, servers.floor_port, "/storage"),
        "narad": ("batch flow", narad, port, "/v1/topics"),
    }
    rates: dict[str, list[float]] = {side: [] for side in flow_sides}
    flow_stored = flow_elapsed = 0.0
    for turn in range(FLOW_ROUNDS):
        order = list(flow_sides) if turn % 2 == 0 else list(reversed(flow_sides))
        for side in order:
            name, groups, node_port, base = flow_sides[side]
            rewrites.make_room(servers.storage_url, turn_s, Rewrites.BATCH_BYTES_PER_S)
            if side != "floor":
                topic = f"bench-{side}-flow-{turn}"
                create_topic(port, topic)
                base = f"{base}/{topic}"
            started = time.monotonic()
            rate, st = phase(f"{name} #{turn + 1}", groups, flow_load(node_port, base))
            check(st, {200, 202, 204})
            rates[side].append(rate)
            if side == "narad":
                flow_elapsed += time.monotonic() - started
                flow_stored += stored(port, topic)
    flow_rates, floor_rates = rates["narad"], rates["floor"]
    flow, floor_flow = statistics.median(flow_rates), statistics.median(floor_rates)
    storage_flow = statistics.median(rates["storage"])
    # Each Narad turn beside the floor's of the same round.
    flow_turns = " ".join(
        f"{100 * n / f:.0f}" for n, f in zip(flow_rates, floor_rates, strict=True)
    )

    def flow_cores(name: str) -> float:
        return statistics.median(cores[f"{name} #{t + 1}"] for t in range(FLOW_ROUNDS))

    create_topic(port, "bench-latency")
    samples = phase("latency", narad, lambda: latency(port, "bench-latency", seconds))

    # -- N idle long polls -----------------------------------------------------
    # Every phase from here to the slowloris' end, waits included: the
    # crowds are compared with single produce before, between and after.
    create_wait_topics(port)
    workers = servers.narad_workers
    rss_before, _ = memory(workers)
    # Each crowd's figure is compared with single produce alone just before
    # and just after it (their mean): the machine's speed drifts. The prober
    # runs alone as beside the crowds, so that the ratio is the crowd's cost
    # and not the prober's too (some 4% of single produce here). The same
    # code gave 46 to 83% in single rounds on one day, so the crowd comes
    # WAIT_ROUNDS times and the figure is their median.
    create_topic(port, "bench-single-w")
    create_topic(port, "bench-latency-w")
    rewrites.make_room(servers.storage_url, 60.0)
    (alone_before, st), _ = phase(
        "produce before the waiters",
        narad,
        lambda: probed(produce_load("bench-single-w")),
    )
    check(st, {202})
    crowd_rounds: list[CrowdRound] = []
    for round_no in range(1, WAIT_ROUNDS + 1):
        # The waiters connect over 10 s (their wait), so that from then on
        # their polls come evenly, count/10 a second, as from consumers
        # started apart.
        crowd = Background("waiters", str(port), "--count", str(waiters))
        time.sleep(1.0)  # the last ones reach their long poll
        if round_no == 1:
            rss_waiting, vsz_waiting = memory(workers)
            waiting = crowd.ready
        # A whole wait period, so every waiter polls again during the phase.
        with_crowd = {**narad, "waiters' client": [crowd.process.pid]}
        (beside, st), probes = phase(
            f"produce+{waiters // 1000}k waiters #{round_no}",
            with_crowd,
            lambda: probed(produce_load("bench-single-w", max(seconds, 10.0))),
        )
        check(st, {202})
        if round_no == 1:
            samples_w = phase(
                f"latency+{waiters // 1000}k waiters",
                with_crowd,
                lambda: latency(port, "bench-latency-w", seconds),
            )
        answers = crowd.stop()
        # The server learns of a closed connection only when it answers: let
        # the long polls the waiters left behind run out before the next phase.
        time.sleep(11.0)
        rewrites.make_room(servers.storage_url, 60.0)
        (alone_after, st), _ = phase(
            f"produce after the waiters #{round_no}",
            narad,
            lambda: probed(produce_load("bench-single-w")),
        )
        check(st, {202})
        crowd_rounds.append(
            CrowdRound(alone_before, beside, alone_after, probes, answers)
        )
        alone_before = alone_after
    crowd_ratio = statistics.median(r.ratio for r in crowd_rounds)
    crowd_p99 = statistics.median(r.probes["p99_ms"] for r in crowd_rounds)
    crowd_answers = merged_answers([r.answers for r in crowd_rounds])

    # -- slowloris ---------------------------------------------------------------
    rewrites.make_room(servers.storage_url, 40.0)
    create_topic(port, "bench-slow")
    create_topic(port, "bench-single-s")
    # The last crowd's "after" is the slowloris' "before".
    before_s = crowd_rounds[-1].after
    loris = Background("slowloris", str(port), "--count", str(slowloris))
    # Longer than server.header_timeout, so the server closes each slow
    # connection at least once and the load generator opens another.
    (single_s, st), slow_probes = phase(
        f"produce+{slowloris // 1000}k slowloris",
        {**narad, "slowloris client": [loris.process.pid]},
        lambda: probed(produce_load("bench-single-s", max(seconds, 12.0))),
    )
    check(st, {202})
    loris_result = loris.stop()
    time.sleep(1.0)  # the server sees the slow connections close
    (after_s, st), _ = phase(
        "produce after the slowloris",
        narad,
        lambda: probed(produce_load("bench-single-s")),
    )
    check(st, {202})
    alone_s = (before_s + after_s) / 2
    slow_stored = stored(port, "bench-slow")
    _, vsz_end = memory(workers)

    # -- the floor beside as many idle long polls --------------------------------
    # What a long poll costs at the least (bench/floor_app.py's /floor/wait:
    # no look, 204 at the deadline), as the same produce sees it.
    def floor_produce(
        name: str, duration: float = seconds, beside: dict | None = None
    ) -> float:
        rate, st = phase(name, {**floor, **(beside or {})}, floor_load(duration))
        check(st, {202})
        return rate

    floor_before_w = floor_produce("floor before the waiters")
    floor_crowd = Background(
        "waiters",
        str(servers.floor_port),
        "--count",
        str(waiters),
        "--path",
        "/floor/wait",
    )
    time.sleep(1.0)
    floor_w = floor_produce(
        f"floor+{waiters // 1000}k waiters",
        max(seconds, 10.0),
        {"waiters' client": [floor_crowd.process.pid]},
    )
    floor_crowd_result = floor_crowd.stop()
    time.sleep(11.0)  # as above: the floor's long polls run out
    floor_after_w = floor_produce("floor after the waiters")
    floor_alone_w = (floor_before_w + floor_after_w) / 2

    def verdict(ok: bool) -> str:
        return "PASS" if ok else "MISS"

    def lat(samples: list[float]) -> tuple[float, float]:
        samples = sorted(samples)
        return (
            statistics.median(samples) * 1000,
            samples[max(0, int(len(samples) * 0.99) - 1)] * 1000,
        )

    p50, p99 = lat(samples)
    p50_w, p99_w = lat(samples_w)
    per_waiter = (rss_waiting - rss_before) / max(waiting, 1)
    table = [
        (
            "floor: falcon + 1 EVALSHA",
            f"{floor_rate:9,.0f} req/s",
            f"(in turns with single produce, {COMPARE_ROUNDS} each)",
        ),
        (
            "single produce (1 KiB)",
            f"{single:9,.0f} msgs/s",
            f">= 80% of floor: {100 * single / floor_rate:.0f}% "
            f"{verdict(single >= 0.8 * floor_rate)}; {per_append:.1f} produces "
            "per append",
        ),
        (
            "  security on (Basic auth)",
            f"{secure_rate:9,.0f} msgs/s",
            f">= 90% of off: {100 * secure_rate / open_rate:.0f}% "
            f"{verdict(secure_rate >= 0.9 * open_rate)} (fresh nodes, {COMPARE_ROUNDS} "
            "turns each)",
        ),
        ("  security off", f"{open_rate:9,.0f} msgs/s", ""),
        (
            "  request metrics on (as shipped)",
            f"{counted_rate:9,.0f} msgs/s",
            f">= 97% of off: {100 * counted_rate / uncounted_rate:.0f}% "
            f"{verdict(counted_rate >= 0.97 * uncounted_rate)} (fresh nodes, "
            f"{COMPARE_ROUNDS} turns each)",
        ),
        ("  request metrics off", f"{uncounted_rate:9,.0f} msgs/s", ""),
        (
            "  as shipped",
            f"{full_rate:9,.0f} msgs/s",
            f"{100 * full_rate / bare_rate:.0f}% of all three off "
            f"(fresh nodes, {COMPARE_ROUNDS} turns each)",
        ),
        (
            "  security, access log, metrics off",
            f"{bare_rate:9,.0f} msgs/s",
            f"{100 * bare_rate / floor_rate:.0f}% of floor",
        ),
        (
            f"batch produce ({BATCH}/req, {BATCH_CLIENTS} conns)",
            f"{batch:9,.0f} msgs/s",
            f">= 50,000 msgs/s: {verdict(batch >= 50_000)}",
        ),
        (
            f"consume+ack (median of {RUNS})",
            f"{consumed_median:9,.0f} msgs/s",
            f">= 60% of single produce (median of {RUNS}, "
            f"{produced_median:,.0f} msgs/s): "
            f"{100 * consumed_median / produced_median:.0f}% "
            f"{verdict(consumed_median >= 0.6 * produced_median)}",
        ),
        *(
            (
                f"  run {run}",
                f"{c:9,.0f} msgs/s",
                f"single produce {p:,.0f} msgs/s: {100 * c / p:.0f}%; "
                f"floor {f:,.0f} msgs/s: {100 * f / p:.0f}%",
            )
            for run, (p, c, f) in enumerate(runs, 1)
        ),
        (
            "  per core used (medians)",
            "",
            f"consume+ack {100 * per_core_ratio:.0f}% of single produce",
        ),
        (
            "consume+ack floor: falcon + 1 EVALSHA",
            f"{floor_consumed_median:9,.0f} msgs/s",
            f"{100 * floor_consumed_median / produced_median:.0f}% of single "
            f"produce: the same requests to bare routes (median of {RUNS}); "
            f"consume+ack is {100 * consumed_median / floor_consumed_median:.0f}% "
            "of it",
        ),
        (
            "full flow floor: falcon + 1 EVALSHA",
            f"{floor_flow:9,.0f} msgs/s",
            f"the same batches to bare routes (median of {FLOW_ROUNDS} turns, "
            f"alternating with Narad's; "
            f"{floor_flow / flow_cores('batch flow floor'):,.0f} msgs/s per core used)",
        ),
        (
            "full flow storage floor",
            f"{storage_flow:9,.0f} msgs/s",
            f"{100 * storage_flow / floor_flow:.0f}% of floor: the same batches to "
            "bare routes over Narad's storage calls (its scripts; median of "
            f"{FLOW_ROUNDS} turns)",
        ),
        (
            f"full flow, batches of {BATCH}",
            f"{flow:9,.0f} msgs/s",
            f">= 85% of floor: {100 * flow / floor_flow:.0f}% "
            f"{verdict(flow >= 0.85 * floor_flow)} "
            f"(medians; turn by turn {flow_turns}%; "
            f"{FLOW_PRODUCERS} producing + {FLOW_CONSUMERS} consuming/acking "
            f"conns; {flow_stored / flow_elapsed:,.0f} msgs/s produced; "
            f"{flow / flow_cores('batch flow'):,.0f} msgs/s per core used)",
        ),
        (
            "produce->consume latency",
            f"p50 {p50:.2f} ms, p99 {p99:.2f} ms",
            f"p50 < 5 ms: {verdict(p50 < 5)} ({len(samples)} samples)",
        ),
        (
            "/healthz, no waiters",
            probe_figure(idle_probes),
            f"p99 < 100 ms: {verdict(idle_probes['p99_ms'] < 100)}",
        ),
        (f"{waiting:,} idle waiters (wait=10s)", "", ""),
        (
            "  memory per idle waiter",
            f"{per_waiter / 1024:9.1f} KiB",
            f"< 64 KiB: {verdict(per_waiter < 64 * 1024)} (workers' RSS "
            f"{rss_before / 2**20:.0f} -> {rss_waiting / 2**20:.0f} MiB)",
        ),
        (
            f"  single produce (median of {WAIT_ROUNDS})",
            f"{statistics.median(r.beside for r in crowd_rounds):9,.0f} msgs/s",
            f">= 80% of no waiters: {100 * crowd_ratio:.0f}% "
            f"{verdict(crowd_ratio >= 0.8)}",
        ),
        *(
            (
                f"    round {n}",
                f"{r.beside:9,.0f} msgs/s",
                f"{100 * r.ratio:.0f}% (alone just before and after: "
                f"{r.before:,.0f}, {r.after:,.0f} msgs/s); /healthz "
                f"{probe_figure(r.probes)}",
            )
            for n, r in enumerate(crowd_rounds, 1)
        ),
        (
            f"  /healthz (median of {WAIT_ROUNDS} p99s)",
            f"p99 {crowd_p99:.1f} ms",
            f"p99 < 100 ms: {verdict(crowd_p99 < 100)}",
        ),
        (
            "  produce->consume latency",
            f"p50 {p50_w:.2f} ms, p99 {p99_w:.2f} ms",
            f"p50 < 5 ms: {verdict(p50_w < 5)} ({len(samples_w)} samples)",
        ),
        (
            "  floor: falcon + 1 EVALSHA",
            f"{floor_w:9,.0f} req/s",
            f"{100 * floor_w / floor_alone_w:.0f}% of alone (just before and after: "
            f"{floor_before_w:,.0f}, {floor_after_w:,.0f} req/s) beside "
            f"{floor_crowd.ready:,} waiters on /floor/wait "
            f"({answers_figure(floor_crowd_result['statuses']).strip()})",
        ),
        (
            "  answers to the waiters",
            answers_figure(crowd_answers["statuses"]),
            f"all 204: {verdict(set(crowd_answers['statuses']) == {'204'})}; "
            f"204 after {crowd_answers['wait_204_s']['min']:.2f}.."
            f"{crowd_answers['wait_204_s']['max']:.2f} s; "
            f"errors {crowd_answers['errors'] or 'none'}",
        ),
        (f"{slowloris:,} slowloris connections", "", ""),
        (
            "  single produce",
            f"{single_s:9,.0f} msgs/s",
            f">= 80% of none: {100 * single_s / alone_s:.0f}% "
            f"{verdict(single_s >= 0.8 * alone_s)} (alone just before and "
            f"after: {before_s:,.0f}, {after_s:,.0f} msgs/s)",
        ),
        (
            "  /healthz",
            probe_figure(slow_probes),
            f"p99 < 100 ms: {verdict(slow_probes['p99_ms'] < 100)}",
        ),
        (
            "  closed by the server",
            answers_figure(loris_result["closed_by_server"]),
            f"after {loris_result['lifetime_s']['p50']:.1f} s (p50); "
            f"stored {slow_stored}: {verdict(slow_stored == 0)}",
        ),
        (
            "virtual memory per worker",
            f"{max(vsz_waiting, vsz_end) / 2**20:9,.0f} MiB",
            f"< 1 GiB: {verdict(max(vsz_waiting, vsz_end) < 2**30)}",
        ),
    ]
    width = max(len(r[0]) for r in table)
    for name, figure, target in table:
        print(f"{name:<{width}}  {figure:<30} {target}".rstrip())
    print()
    print("CPU per phase (100% = one core):")
    for name, text in rows:
        print(f"  {name:<22} {text}")
    print(
        f"Valkey's AOF rewritten {rewrites.count} times before compared turns "
        "and the batch phases, when one could have started within them "
        f"({rewrites.seconds:.1f} s in all, checks included)"
    )


def storage_report(servers: Servers, url: str, seconds: float) -> None:
    """Single produce and the full flow on a node over ``url`` beside the
    same on one embedded Valkey (``servers``' node), in alternating turns
    (``FLOW_ROUNDS`` each, compared by their medians), each turn on a topic
    of its own.
    ``local-cluster``: on the suite's local cluster, started for the run."""
    if url == LOCAL_CLUSTER:
        from tests.valkeycluster import ValkeyCluster

        cluster = ValkeyCluster(servers.tmp / "cluster")
        for server in cluster.nodes:
            server.max_memory = LOCAL_CLUSTER_MEMORY
        try:
            print(f"{LOCAL_CLUSTER}: 3 primaries, 3 replicas (tests/valkeycluster.py)")
            storage_report(servers, cluster.up().url, seconds)
        finally:
            cluster.down()
        return
    other, _, _ = servers.spawn_node("other", NARAD_STORAGE_URL=url)
    sides = {"one Valkey": servers.port, url.partition("://")[0]: other}
    run = secrets.token_hex(4)  # an external storage may hold earlier runs' topics
    produce: dict[str, list[float]] = {name: [] for name in sides}
    flow: dict[str, list[float]] = {name: [] for name in sides}
    for turn in range(FLOW_ROUNDS):
        order = list(sides) if turn % 2 == 0 else list(reversed(sides))
        for name in order:
            port = sides[name]
            topic = f"bench-storage-{run}-{turn}"
            create_topic(port, topic)
            body = request("POST", f"/v1/topics/{topic}/produce", BODY)
            rate, st = run_load(port, CLIENTS, seconds, constant(body, 202, 1))
            check(st, {202})
            produce[name].append(rate)
            create_topic(port, f"{topic}-flow")
            load = batch_flow(f"/v1/topics/{topic}-flow", FLOW_PRODUCERS)
            rate, st = run_load(port, FLOW_PRODUCERS + FLOW_CONSUMERS, seconds, load)
            check(st, {200, 202, 204})
            flow[name].append(rate)
    print(f"storage {url} beside one embedded Valkey, medians of {FLOW_ROUNDS} turns")
    print(f"{'':24}{'produce msg/s':>16}{'full flow msg/s':>18}")
    for name in sides:
        print(
            f"{name:24}{statistics.median(produce[name]):>16,.0f}"
            f"{statistics.median(flow[name]):>18,.0f}"
        )


def cost_report(servers: Servers, args: argparse.Namespace) -> None:
    """Per-message CPU, write syscalls, storage writes and reply sizes of
    produce, consume, ack and the full flow, beside the floor's
    (``bench/msgcost.py``)."""
    import msgcost

    n = args.messages // BATCH * BATCH
    batch = batch_body()

    def topic_path(topic: str) -> str:
        return f"/v1/topics/{topic}"

    narad = msgcost.Side(
        "narad",
        servers.port,
        servers.narad_workers,
        produce_batch=lambda t: request(
            "POST", f"{topic_path(t)}/produce/batch", batch
        ),
        consume_batch=lambda t: request(
            "GET", f"{topic_path(t)}/consume/batch?max={BATCH}"
        ),
        ack_batch=lambda t, hs: request(
            "POST",
            f"{topic_path(t)}/ack/batch",
            b'{"receipt_handles":["' + b'","'.join(hs) + b'"]}',
        ),
        produce=lambda t: request("POST", f"{topic_path(t)}/produce", BODY),
        consume=lambda t: request("GET", f"{topic_path(t)}/consume"),
        ack=lambda t, h: request(
            "POST", f"{topic_path(t)}/ack?receipt_handle={h.decode()}"
        ),
    )
    floor = msgcost.Side(
        "floor",
        servers.floor_port,
        servers.floor_workers,
        produce_batch=lambda t: request("POST", "/floor/produce/batch", batch),
        consume_batch=lambda t: request("GET", f"/floor/consume/batch?max={BATCH}"),
        ack_batch=lambda t, hs: request(
            "POST",
            "/floor/ack/batch",
            b'{"receipt_handles":["' + b'","'.join(hs) + b'"]}',
        ),
        produce=lambda t: request("POST", "/floor", BODY),
        consume=lambda t: request("GET", "/floor/consume"),
        ack=lambda t, h: request("POST", f"/floor/ack?receipt_handle={h.decode()}"),
    )
    (valkey,) = servers.valkey
    counters = msgcost.Counters(servers.storage_url, valkey)
    rewrites = Rewrites()
    costs: dict[tuple[str, str], msgcost.Cost] = {}

    def measured(phase: str, side: msgcost.Side, fn, expected: int = 0) -> object:
        """``fn()``'s counters' deltas, once Valkey has rewritten its AOF if
        ``expected`` more bytes (twice the phase's) could set it off."""
        rewrites.make_room(servers.storage_url, 1.0, 2 * expected)
        before = counters.snapshot(side.workers)
        run = fn()
        after = counters.snapshot(side.workers)
        if run is not None:
            cost = costs.setdefault((phase, side.name), msgcost.Cost())
            cost.add(before, after, run, counters.writes)
            if set(run.statuses) - {200, 202, 204}:
                print(f"  {phase} on {side.name}: statuses {dict(run.statuses)}")
        return run

    print(
        f"narad serve: {servers.workers} workers, security on, embedded Valkey "
        f"(appendonly, fsync always); floor: bench/floor_app.py on the same "
        f"Valkey; {os.cpu_count()} cores shared"
    )
    print(
        f"batch phases: {n:,} messages of 1 KiB a round, {BATCH} a request, "
        f"{msgcost.CONNECTIONS} connections; {args.rounds} rounds alternating "
        f"sides; flow: {FLOW_PRODUCERS} producing + {FLOW_CONSUMERS} "
        f"consuming/acking connections, {args.seconds / 2:g} s a turn; singles: "
        f"{args.singles:,} messages, {2 * msgcost.CONNECTIONS} connections"
    )
    # Unmeasured: each worker's first check of the credentials (a scrypt
    # hash), its scripts' first load, its connections to Valkey.
    create_topic(servers.port, "cost-warmup")
    for side in (narad, floor):
        msgcost.produce_phase(side, "cost-warmup", BODY, 20 * BATCH)
        msgcost.single_produce(side, "cost-warmup", 200)
    handles_w: list[bytes] = []
    msgcost.single_consume(narad, "cost-warmup", 100, handles_w)
    msgcost.single_ack(narad, "cost-warmup", handles_w)
    for turn in range(args.rounds):
        sides = (narad, floor) if turn % 2 == 0 else (floor, narad)
        for side in sides:
            topic = f"cost-batch-{turn}"
            if side is narad:
                create_topic(servers.port, topic, **msgcost.LONG_LEASES)
            handles: list[bytes] = []
            measured(
                "batch produce",
                side,
                lambda s=side, t=topic: msgcost.produce_phase(s, t, BODY, n),
                1200 * n,
            )
            measured(
                "batch consume",
                side,
                lambda s=side, t=topic, h=handles: msgcost.consume_phase(s, t, n, h),
                1100 * n,
            )
            measured(
                "batch ack",
                side,
                lambda s=side, t=topic, h=handles: msgcost.ack_phase(s, t, h),
                100 * n,
            )
    connections = FLOW_PRODUCERS + FLOW_CONSUMERS

    def flow_base(side: msgcost.Side, topic: str) -> str:
        """Where a flow turn of ``side`` sends its batches: the floor's
        routes, or a new Narad topic's."""
        if side is narad:
            create_topic(servers.port, topic)
            return topic_path(topic)
        return "/floor"

    for turn in range(args.rounds):
        sides = (floor, narad) if turn % 2 == 0 else (narad, floor)
        for side in sides:
            base = flow_base(side, f"cost-flow-{turn}")
            measured(
                "flow (per ack)",
                side,
                lambda s=side, b=base: msgcost.run_drivers(
                    s.port, connections, args.seconds / 2, batch_flow(b, FLOW_PRODUCERS)
                ),
                int(args.seconds / 2 * Rewrites.BATCH_BYTES_PER_S),
            )
    # Where each script's time goes in the flow: one more turn a side with
    # every command in Valkey's slow log, which slows them (so left out of
    # the figures above).
    names = msgcost.script_names(
        ROOT / "plugins" / "narad_redis" / "scripts", ROOT / "bench" / "floor"
    )
    scripts: list[str] = []
    for side in (narad, floor):
        base = flow_base(side, "cost-flow-logged")
        rewrites.make_room(
            servers.storage_url,
            args.seconds / 2,
            Rewrites.BATCH_BYTES_PER_S,
        )
        run, entries = msgcost.logged(
            servers.storage_url,
            lambda s=side, b=base: msgcost.run_drivers(
                s.port, connections, args.seconds / 2, batch_flow(b, FLOW_PRODUCERS)
            ),
        )
        times = msgcost.script_times(entries, names)
        scripts += msgcost.script_lines(side.name, times, run.messages)
    for turn in range(args.rounds):
        sides = (narad, floor) if turn % 2 == 0 else (floor, narad)
        for side in sides:
            topic = f"cost-single-{turn}"
            if side is narad:
                create_topic(servers.port, topic, **msgcost.LONG_LEASES)
            measured(
                "single produce",
                side,
                lambda s=side, t=topic: msgcost.single_produce(s, t, args.singles),
                1300 * args.singles,
            )
            handles = []
            measured(
                "single consume",
                side,
                lambda s=side, t=topic, h=handles: msgcost.single_consume(
                    s, t, args.singles, h
                ),
                400 * args.singles,
            )
            measured(
                "single ack",
                side,
                lambda s=side, t=topic, h=handles: msgcost.single_ack(s, t, h),
                200 * args.singles,
            )
    print()
    print(
        "per message (batch ack, single ack: per message acked; flow: per message "
        "acked, its produce and lease included): wrk us / vk us = CPU "
        "microseconds in the side's gunicorn workers / in valkey-server; vk sys = "
        "the part of vk us in the kernel (sockets, AOF writes and fsyncs); syscw = "
        "Valkey's write system calls; aof B = bytes appended to the AOF; mem B = "
        "Valkey's used_memory change; vk out = Valkey's reply bytes; http B = "
        "HTTP response bytes; evals = scripts run; turns = turns of Valkey's "
        "event loop (each that wrote ends in an fsync); loop us / cmd us = "
        "microseconds of Valkey's event loop (its turns: commands, sockets, the "
        "fsync after a write) / of its commands alone; busy = the loop's share "
        "of the phase's time; AOF = entries written (hash fields, sorted-set "
        "members, list values) by command, (commands)"
    )
    for line in msgcost.cost_table(
        costs,
        [
            "batch produce",
            "batch consume",
            "batch ack",
            "flow (per ack)",
            *msgcost.SINGLES,
        ],
    ):
        print(line)
    lease = costs[("batch consume", "narad")]
    ack = costs[("batch ack", "narad")]
    print()
    print(
        f"narad: a batch lease leaves {lease.per(lease.memory):,.0f} B of Valkey "
        f"memory per message until acked (keys {lease.keys:+d} in all), and its ack "
        f"gives {-ack.per(ack.memory):,.0f} B back (keys {ack.keys:+d}); "
        f"{lease.per(lease.entries.total()):.2f} and "
        f"{ack.per(ack.entries.total()):.2f} storage entries written per message"
    )
    for line in msgcost.bounds(costs):
        print(line)
    print()
    print(
        "where each script's time goes in the flow (one more turn a side, every "
        "command in Valkey's slow log; microseconds per acked message as the log "
        "timed them): calls per 100 messages, the script's time, its own Lua's "
        "(arguments, replies, logic), and its commands' (top 4)"
    )
    print(f"  {'side':6} {'script':18} {'calls':>6} {'us':>7} {'Lua us':>7}   commands")
    for line in scripts:
        print(line)
    if args.profile:
        print()
        create_topic(servers.port, "cost-profile-produce")
        print(
            f"where a Narad worker's time goes: batch produce, "
            f"{msgcost.CONNECTIONS} connections, {args.seconds:g} s"
        )
        stacks = msgcost.profile(
            servers.narad_workers,
            args.seconds,
            lambda: msgcost.run_drivers(
                servers.port,
                msgcost.CONNECTIONS,
                args.seconds,
                batch_flow(topic_path("cost-profile-produce"), msgcost.CONNECTIONS),
            ),
        )
        for line in msgcost.profile_lines(stacks):
            print(line)
        print()
        create_topic(servers.port, "cost-profile")
        msgcost.produce_phase(narad, "cost-profile", BODY, 2 * n)
        print(
            f"batch consume+ack from a backlog, "
            f"{connections} connections, {args.seconds:g} s"
        )
        stacks = msgcost.profile(
            servers.narad_workers,
            args.seconds,
            lambda: msgcost.run_drivers(
                servers.port,
                connections,
                args.seconds,
                batch_flow(topic_path("cost-profile"), 0),
            ),
        )
        for line in msgcost.profile_lines(stacks):
            print(line)
        print()
        print(
            f"single consume+ack from the same backlog, {CLIENTS} connections, "
            f"{args.seconds:g} s"
        )
        unacked: set[str] = set()
        stacks = msgcost.profile(
            servers.narad_workers,
            args.seconds,
            lambda: msgcost.run_drivers(
                servers.port,
                CLIENTS,
                args.seconds,
                consume_and_ack("/v1/topics/cost-profile", unacked),
            ),
        )
        for line in msgcost.profile_lines(stacks):
            print(line)
    print(
        f"Valkey's AOF rewritten {rewrites.count} times between phases, when one "
        "could have started within them"
    )


@dataclass(frozen=True)
class CrowdRound:
    """Single produce beside one crowd of waiters, and alone around it."""

    before: float
    beside: float
    after: float
    probes: dict
    answers: dict

    @property
    def ratio(self) -> float:
        return self.beside / ((self.before + self.after) / 2)


def merged_answers(results: list[dict]) -> dict:
    """The waiters' answers of several crowds as one crowd's."""
    statuses: Counter = Counter()
    errors: Counter = Counter()
    for result in results:
        statuses.update(result["statuses"])
        errors.update(result["errors"])
    return {
        "statuses": dict(statuses),
        "errors": dict(errors),
        "wait_204_s": {
            "min": min(r["wait_204_s"]["min"] for r in results),
            "max": max(r["wait_204_s"]["max"] for r in results),
        },
    }


def probe_figure(probes: dict) -> str:
    failed = sum(probes["failures"].values())
    text = f"p50 {probes['p50_ms']:.1f} ms, p99 {probes['p99_ms']:.1f} ms"
    return text + (f", {failed} failed" if failed else "")


def answers_figure(counts: dict) -> str:
    return ", ".join(f"{n:,} x {status}" for status, n in sorted(counts.items()))


def check(statuses: Counter, allowed: set[int]) -> None:
    if set(statuses) - allowed:
        print(f"  unexpected statuses: {dict(statuses)}")


if __name__ == "__main__":
    # Not under its own name: this module's report() would be shadowed.
    import report as page

    storage = any(a.split("=")[0] == "--storage" for a in sys.argv)
    section = "storage-cluster" if storage else "messaging"
    page.run("consume-cost" if "--cost" in sys.argv else section, main)
