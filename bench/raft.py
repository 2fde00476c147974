"""RedisRaft figures beside a single Valkey's, and the loss of the leader
under load.

Run from a checkout: ``PYTHONPATH=.:plugins python bench/raft.py``
(``--seconds N`` per phase, default 5; ``--workers N`` per node, default 4;
``--failover-seconds N`` of load after the leader is killed, default 10).

Starts, side by side:

- ``narad serve`` on its embedded Valkey (append-only, ``appendfsync
  always``, unix socket): the baseline;
- a local 3-node RedisRaft cluster (``cluster.sh`` from
  ``$NARAD_REDISRAFT_DIR``, ``/work/shared/redisraft`` or
  ``../shared/redisraft``; a write is answered once a majority has it in
  its fsynced Raft log), and ``narad serve`` given one follower's address.

Measures single produce (32 keep-alive clients, 1 KiB JSON bodies) and batch
produce (8 clients, 100 messages a request) on each, with the load generator
of ``bench/messaging.py``.

Then the failover: producers (each message a unique id; half of them send
an ``Idempotency-Key`` with each, so the storage client may send their
writes again) and consumers (consume + ack) against the RedisRaft node; the
leader is killed (SIGKILL),
and restarted some seconds later. Printed: how long the election took, the
longest time without a 202, how long after the election produces succeeded
again, the 202s lost (the topic is drained and every accepted id accounted
for), every 5xx answer, and how long the killed node took to rejoin.
"""

from __future__ import annotations

import argparse
import http.client
import itertools
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "bench")]

from messaging import ADMIN_PASSWORD  # noqa: E402
from messaging import BATCH  # noqa: E402
from messaging import BATCH_CLIENTS  # noqa: E402
from messaging import BODY  # noqa: E402
from messaging import CLIENTS  # noqa: E402
from messaging import HEADERS  # noqa: E402
from messaging import call  # noqa: E402
from messaging import constant  # noqa: E402
from messaging import create_topic  # noqa: E402
from messaging import free_port  # noqa: E402
from messaging import request  # noqa: E402
from messaging import run_load  # noqa: E402
from messaging import wait_ready  # noqa: E402

VISIBILITY_MS = 1000
PRODUCERS = 8
CONSUMERS = 4


def redisraft_dir() -> Path:
    for candidate in (
        os.environ.get("NARAD_REDISRAFT_DIR", ""),
        "/work/shared/redisraft",
        str(ROOT.parent / "shared" / "redisraft"),
    ):
        if candidate and (Path(candidate) / "cluster.sh").is_file():
            return Path(candidate)
    sys.exit("no RedisRaft binaries: set NARAD_REDISRAFT_DIR (see tests/redisraft.py)")


class Cluster:
    """``cluster.sh`` on a scratch directory."""

    def __init__(self, directory: Path, work: Path) -> None:
        self.script, self.work = directory / "cluster.sh", work
        self.ports: list[int] = []

    def run(self, *args: str) -> str:
        done = subprocess.run(
            [str(self.script), *args], capture_output=True, text=True, check=True
        )
        return done.stdout

    def up(self) -> None:
        while True:
            base = free_port()
            if base + 3 < 65536:
                break
        out = self.run("up", str(self.work), str(base))
        self.ports = [int(p) for p in re.search(r"ports (.*)", out)[1].split()]

    def leader(self) -> int | None:
        answer = self.run("leader", str(self.work)).strip()
        return None if answer == "none" else int(answer)

    def number(self, port: int) -> str:
        return str(self.ports.index(port) + 1)

    def whole(self) -> bool:
        """Whether the leader is connected to both other nodes."""
        leader = self.leader()
        if leader is None:
            return False
        cli = self.script.parent / "bin" / "redis-cli"
        out = subprocess.run(
            [str(cli), "-p", str(leader), "info", "raft"],
            capture_output=True,
            text=True,
        ).stdout
        return len(re.findall(r"^raft_node\d+:.*state=connected", out, re.M)) == 2

    def down(self) -> None:
        self.run("down", str(self.work))


class Node:
    """``narad serve`` in its own directory."""

    def __init__(self, tmp: Path, workers: int, storage_url: str) -> None:
        tmp.mkdir(parents=True)
        self.port, self.tmp = free_port(), tmp
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "plugins")]),
            "NARAD_SERVER_BIND": f"127.0.0.1:{self.port}",
            "NARAD_SERVER_WORKERS": str(workers),
            "NARAD_STORAGE_URL": storage_url,
            "NARAD_STORAGE_DATA_DIR": str(tmp / "data"),
            "NARAD_VALIDATION_CAPACITY_DIR": str(tmp / "capacity"),
            # Security on, as shipped: every request carries these credentials.
            "NARAD_ADMIN_PASSWORD": ADMIN_PASSWORD,
        }
        self.log = tmp / "narad.log"
        with self.log.open("wb") as out:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "narad.cli", "serve"],
                env=env,
                cwd=tmp,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        wait_ready(self.port, "/readyz", self.process, self.log)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            self.process.wait(30)


def throughput(port: int, seconds: float) -> tuple[float, float, Counter, Counter]:
    """(single produce/s, batch-produced messages/s) and their statuses."""
    name = f"bench-{port}"
    create_topic(port, name + "-single")
    create_topic(port, name + "-batch")
    single = request("POST", f"/v1/topics/{name}-single/produce", BODY)
    one, st1 = run_load(port, CLIENTS, seconds, constant(single, 202, 1))
    body = json.dumps({"messages": [{"value": BODY.decode()}] * BATCH}).encode()
    batch = request("POST", f"/v1/topics/{name}-batch/produce/batch", body)
    many, st2 = run_load(port, BATCH_CLIENTS, seconds, constant(batch, 202, BATCH))
    return one, many, st1, st2


# -- the failover -----------------------------------------------------------------


class Ledger:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.accepted: set[str] = set()
        self.accepted_at: list[float] = []  # monotonic time of each 202
        self.delivered: Counter[str] = Counter()
        self.answers: Counter[tuple[str, int | str]] = Counter()
        self.uncertain: Counter[str] = Counter()  # 503 "may have been applied"

    def answer(self, op: str, status: int | str, body: bytes = b"") -> None:
        with self.lock:
            self.answers[(op, status)] += 1
            if status == 503 and b"may have been applied" in body:
                self.uncertain[op] += 1


def exchange(conn, method: str, path: str, body: bytes = b"", headers=None):
    """One request on a kept-alive connection; (status, body) or the error's
    name (the connection is then dropped: never resent)."""
    try:
        conn.request(method, path, body=body, headers={**HEADERS, **(headers or {})})
        resp = conn.getresponse()
        return resp.status, resp.read()
    except (OSError, http.client.HTTPException) as exc:
        conn.close()
        return type(exc).__name__, b""


def producer(port, topic, ledger, name, stop, keyed: bool) -> None:
    """Produces unique ids, with an ``Idempotency-Key`` each if ``keyed``."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    op = "keyed produce" if keyed else "produce"
    seq = 0
    while not stop.is_set():
        ident = f"{name}-{seq}"
        seq += 1
        body = json.dumps({"id": ident}).encode()
        headers = {"Idempotency-Key": ident} if keyed else {}
        path = f"/v1/topics/{topic}/produce"
        status, data = exchange(conn, "POST", path, body, headers)
        ledger.answer(op, status, data)
        if status == 202:
            with ledger.lock:
                ledger.accepted.add(ident)
                ledger.accepted_at.append(time.monotonic())
        else:
            time.sleep(0.02)
    conn.close()


def take(conn, topic, ledger, wait: str) -> int | str:
    status, data = exchange(conn, "GET", f"/v1/topics/{topic}/consume?wait={wait}")
    ledger.answer("consume", status)
    if status != 200:
        return status
    message = json.loads(data)
    with ledger.lock:
        ledger.delivered[message["payload"]["id"]] += 1
    path = f"/v1/topics/{topic}/ack?receipt_handle={message['receipt_handle']}"
    ledger.answer("ack", *exchange(conn, "POST", path))
    return status


def consumer(port, topic, ledger, stop) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    while not stop.is_set():
        if take(conn, topic, ledger, "500ms") not in (200, 204):
            time.sleep(0.02)
    conn.close()


def failover(cluster: Cluster, port: int, seconds: float) -> dict:
    topic = "bench-failover"
    create_topic(port, topic, partitions=3, visibility_timeout_ms=VISIBILITY_MS)
    ledger = Ledger()
    stop_producing, stop_consuming = threading.Event(), threading.Event()
    threads = [
        threading.Thread(
            target=producer,
            args=(port, topic, ledger, f"p{i}", stop_producing, i % 2 == 1),
        )
        for i in range(PRODUCERS)
    ] + [
        threading.Thread(target=consumer, args=(port, topic, ledger, stop_consuming))
        for _ in range(CONSUMERS)
    ]
    for thread in threads:
        thread.start()
    time.sleep(2.0)
    leader = cluster.leader()
    killed_at = time.monotonic()
    cluster.run("kill", str(cluster.work), cluster.number(leader))
    while cluster.leader() in (None, leader):
        time.sleep(0.01)
    elected_at = time.monotonic()
    time.sleep(seconds / 2)
    cluster.run("start", str(cluster.work), cluster.number(leader))
    restarted_at = time.monotonic()
    while not cluster.whole():
        time.sleep(0.05)
    rejoined_at = time.monotonic()
    time.sleep(seconds / 2)
    stop_producing.set()
    for thread in threads[:PRODUCERS]:
        thread.join()
    stop_consuming.set()
    for thread in threads[PRODUCERS:]:
        thread.join()
    # Drain: a 204 after waiting longer than a lease means nothing is left.
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    while take(conn, topic, ledger, f"{VISIBILITY_MS + 500}ms") != 204:
        pass
    conn.close()

    times = sorted(ledger.accepted_at)
    around = [t for t in times if t >= killed_at - 1.0]
    gaps = [b - a for a, b in itertools.pairwise(around)]
    after = [t for t in times if t >= elected_at]
    return {
        "election_s": elected_at - killed_at,
        "longest_gap_s": max(gaps, default=float("nan")),
        "recovered_s": (after[0] - elected_at) if after else float("nan"),
        "rejoin_s": rejoined_at - restarted_at,
        "accepted": len(ledger.accepted),
        "lost": len(ledger.accepted - set(ledger.delivered)),
        "redelivered": sum(1 for n in ledger.delivered.values() if n > 1),
        "answers": ledger.answers,
        "uncertain": ledger.uncertain,
    }


# -- the report ---------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=5.0, help="per phase")
    parser.add_argument("--workers", type=int, default=4, help="per node")
    parser.add_argument("--failover-seconds", type=float, default=10.0)
    args = parser.parse_args()
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    tmp = Path(tempfile.mkdtemp(prefix="narad-raft-bench-"))
    cluster = Cluster(redisraft_dir(), tmp / "cluster")
    nodes: list[Node] = []
    try:
        cluster.up()
        follower = next(p for p in cluster.ports if p != cluster.leader())
        nodes.append(Node(tmp / "valkey-node", args.workers, ""))
        raft_url = f"redis://127.0.0.1:{follower}/0"
        nodes.append(Node(tmp / "raft-node", args.workers, raft_url))
        report(cluster, nodes, raft_url, args)
    finally:
        for node in nodes:
            node.stop()
        cluster.down()
        shutil.rmtree(tmp, ignore_errors=True)


def report(cluster: Cluster, nodes: list[Node], raft_url: str, args) -> None:
    valkey, raft = nodes
    print(
        f"two nodes of {args.workers} workers each (narad.serve.workers.NaradWorker); "
        f"load generator of bench/messaging.py ({CLIENTS} clients for single, "
        f"{BATCH_CLIENTS} x {BATCH} messages for batch), {args.seconds:g} s per "
        f"phase; {os.cpu_count()} cores shared by everything"
    )
    print("  valkey:    embedded Valkey, appendonly, appendfsync always, unix socket")
    print(
        f"  redisraft: 3 local nodes (ports {cluster.ports}), node given {raft_url}; "
        "a write is answered once a majority logged it"
    )
    print()
    rows = []
    for name, node in (("valkey", valkey), ("redisraft", raft)):
        one, many, st1, st2 = throughput(node.port, args.seconds)
        rows.append((name, one, many, st1 + st2))
    print(f"{'':<12}{'single produce':>18}{'batch produce':>22}")
    for name, one, many, statuses in rows:
        odd = {s: n for s, n in statuses.items() if s != 202}
        note = f"   (not 202: {odd})" if odd else ""
        print(f"{name:<12}{one:>12,.0f} msg/s{many:>16,.0f} msg/s{note}")
    print(
        f"redisraft / valkey: single {rows[1][1] / rows[0][1]:.2f}, "
        f"batch {rows[1][2] / rows[0][2]:.2f}"
    )
    print()
    figures = failover(cluster, raft.port, args.failover_seconds)
    answers = figures["answers"]
    errors = {
        k: n for k, n in answers.items() if not isinstance(k[1], int) or k[1] >= 500
    }
    print(
        f"failover: {PRODUCERS} producers (half with an Idempotency-Key per "
        f"message) + {CONSUMERS} consumers (consume+ack) on "
        f"the redisraft node; leader killed with SIGKILL, restarted "
        f"{args.failover_seconds / 2:g} s after the election"
    )
    lines = [
        ("new leader elected", f"{figures['election_s']:.2f} s after the kill"),
        ("produces succeed again", f"{figures['recovered_s']:.2f} s after it"),
        ("longest time without a 202", f"{figures['longest_gap_s']:.2f} s"),
        ("killed node rejoined", f"{figures['rejoin_s']:.2f} s after its restart"),
    ]
    for label, text in lines:
        print(f"  {label:<27}{text}")
    print(
        f"  202s: {figures['accepted']:,} accepted, {figures['lost']} lost; "
        f"{figures['redelivered']} delivered again after a lapsed lease"
    )
    shown = ", ".join(
        f"{op} {s}: {n}" for (op, s), n in sorted(errors.items(), key=str)
    )
    print(f"  5xx and transport errors: {shown or 'none'}")
    uncertain = ", ".join(f"{op} {n}" for op, n in sorted(figures["uncertain"].items()))
    print(
        '    of the 503s, in flight when the leader died ("the write may have '
        f'been applied"): {uncertain or "none"}'
    )
    call_ok = sorted(
        (f"{op} {s}", n) for (op, s), n in answers.items() if (op, s) not in errors
    )
    print("  other answers: " + ", ".join(f"{k}: {n:,}" for k, n in call_ok))
    status, _ = call(raft.port, "GET", "/readyz")
    print(f"  /readyz afterwards: {status}")


if __name__ == "__main__":
    import report

    report.run("raft", main)
