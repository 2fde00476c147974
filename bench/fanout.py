"""Fan-out figures: produce throughput to a parent with 0, 1, 10 and 108
children, single and batch, beside the plain produce, in one run.

Run from a checkout: ``PYTHONPATH=.:plugins python bench/fanout.py``
(``--seconds N`` per phase, default 4; ``--workers N``, default 4).

Starts ``narad serve`` as ``bench/messaging.py`` does (gunicorn with Narad's
gevent workers, the embedded Valkey: append-only, fsync always) and drives it
with the same load generator: 32 keep-alive connections producing 1 KiB JSON
texts one at a time, then 8 connections producing batches of 100. A parent
with 0 children is the plain produce, the baseline each row is compared with.
Children are immediate, created under their parent (so with its 3
partitions); every copy is made in the parent's append script, so the figures
are the cost of the whole fan-out, with the workers' notification listeners
running (they start with a worker's first long poll) and every topic marked
as waited on (a short long poll on each before its phase, as consumers make
them), so each append publishes the wake-up of the parent's and every
child's long polls, the costlier case. After each phase the copies are counted
(each child must hold every message its parent took) and the topics deleted,
so earlier phases' copies do not fill the storage.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path

import messaging
from messaging import BATCH
from messaging import BATCH_CLIENTS
from messaging import BODY
from messaging import CLIENTS
from messaging import Usage
from messaging import call
from messaging import constant
from messaging import request
from messaging import run_load
from messaging import stored
from messaging import wait_ready

FAN_OUTS = (0, 1, 10, 108)


class Node(messaging.Servers):
    """``narad serve`` alone (no floor app: the baseline here is 0 children)."""

    def start(self) -> None:
        log = self.tmp / "narad.log"
        self.narad = self._spawn([sys.executable, "-m", "narad.cli", "serve"], log)
        wait_ready(self.port, "/readyz", self.narad, log)
        self.valkey, self.narad_workers = self._processes(self.narad.pid)


def post(port: int, path: str, body: dict) -> dict:
    status, data = call(port, "POST", path, json.dumps(body).encode())
    assert status in (200, 201), data
    return json.loads(data)


def family(port: int, name: str, children: int) -> list[str]:
    """A parent ``name`` and its children; every topic's name."""
    post(port, "/v1/topics", {"name": name, "partitions": 3})
    names = [f"{name}-c{i}" for i in range(children)]
    for child in names:
        post(port, "/v1/topics", {"name": child, "parent": name})
    return [name, *names]


def start_listeners(port: int, workers: int) -> None:
    """A short long poll on many fresh connections, so that every worker
    (the kernel spreads connections over them) runs its listener."""
    post(port, "/v1/topics", {"name": "fan-warm-up", "partitions": 1})
    for _ in range(16 * workers):
        status, data = call(port, "GET", "/v1/topics/fan-warm-up/consume?wait=1ms")
        assert status == 204, data


def measure(
    node: Node, name: str, children: int, seconds: float, batch: bool
) -> tuple[float, dict[int, int], str]:
    """(messages/s, statuses, CPU text) of one phase, copies checked."""
    port = node.port
    topics = family(port, name, children)
    for topic in topics:  # waited on: each append publishes its wake-up
        status, data = call(port, "GET", f"/v1/topics/{topic}/consume?wait=1ms")
        assert status == 204, data
    if batch:
        body = json.dumps({"messages": [{"value": BODY.decode()}] * BATCH}).encode()
        path = f"/v1/topics/{name}/produce/batch"
        load = constant(request("POST", path, body), 202, BATCH)
        clients = BATCH_CLIENTS
    else:
        path = f"/v1/topics/{name}/produce"
        load = constant(request("POST", path, BODY), 202, 1)
        clients = CLIENTS
    groups = {"gunicorn workers": node.narad_workers, "valkey": node.valkey}
    with Usage(groups) as usage:
        rate, statuses = run_load(port, clients, seconds, load)
    accepted = stored(port, name)
    for child in topics[1:]:
        copies = stored(port, child)
        assert copies == accepted, f"{child} holds {copies} of {accepted}"
    for topic in topics:
        status, data = call(port, "DELETE", f"/v1/topics/{topic}")
        assert status == 204, data
    return rate, statuses, usage.text


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=4.0, help="per phase")
    parser.add_argument("--workers", type=int, default=4)
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="narad-bench-fanout-"))
    node = Node(tmp, args.workers)
    try:
        node.start()
        start_listeners(node.port, args.workers)
        report(node, args.seconds)
    finally:
        node.stop()
        shutil.rmtree(tmp, ignore_errors=True)


def report(node: Node, seconds: float) -> None:
    print(
        f"narad serve: {node.workers} workers (gevent), embedded Valkey (appendonly, "
        f"fsync always); parent with 3 partitions, immediate children created "
        f"under it; {seconds:g} s per phase after {messaging.WARMUP_S:g} s warm-up"
    )
    print(
        f"single: {CLIENTS} connections, one 1 KiB JSON produce each in flight; "
        f"batch: {BATCH_CLIENTS} connections, {BATCH} messages per request"
    )
    print()
    rows, cpu = [], []
    baseline: dict[bool, float] = {}
    for batch in (False, True):
        kind = "batch" if batch else "single"
        for children in FAN_OUTS:
            name = f"fan-{kind}-{children}"
            rate, statuses, usage = measure(node, name, children, seconds, batch)
            if set(statuses) != {202}:
                sys.exit(f"{name}: unexpected statuses {dict(statuses)}")
            baseline.setdefault(batch, rate)
            rows.append((kind, children, rate, rate / baseline[batch]))
            cpu.append((f"{kind}, {children} children", usage))
    head = ("produce", "children", "msgs/s", "of plain", "copies/s")
    print("{:<8} {:>8} {:>10} {:>9} {:>10}".format(*head))
    for kind, children, rate, share in rows:
        plain = " (plain)" if children == 0 else ""
        print(
            f"{kind:<8} {children:>8} {rate:>10,.0f} {100 * share:>8.0f}% "
            f"{rate * children:>10,.0f}{plain}"
        )
    print()
    print("CPU per phase (100% = one core):")
    for name, usage in cpu:
        print(f"  {name:<22} {usage}")
    print()
    print("every child held every message its parent accepted (checked per phase)")


if __name__ == "__main__":
    import report

    report.run("fanout", main)
