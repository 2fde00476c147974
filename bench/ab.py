"""Compare this checkout's speed with a git revision's, on fresh node pairs.

A change worth a few percent hides in this machine's noise: its speed
drifts by up to a sixth within a minute, and two nodes of the same code,
started alike, can differ by a tenth for as long as they run (single
produce 2,756 against 3,236 msgs/s over eight alternating turns). One node
per version, or one node switching between versions, measures the node as
much as the change. So each pair is two fresh nodes, one per version, taking
turns (order alternating), and compared only with each other; the pairs'
ratios then say how far the change moved things and how much they scatter.

Run from a checkout: ``PYTHONPATH=.:plugins python bench/ab.py REV``
(``--pairs N``, default 3; ``--turns N`` per pair and version, default 4;
``--seconds N`` per turn, default 4; ``--phases``, default
``produce,consume-ack,flow``, or any of those and ``waiters`` and
``beside-waiters``, whose turns take half a minute each). ``REV`` is checked
out in a temporary git worktree (its C helper built there) and run from it:
its node imports its own ``narad`` and plugins. Phases, as in
``bench/messaging.py``: single produce (32 connections, 1 KiB); consume+ack
from a backlog, one message at a time; the full flow in batches of 100,
counting acked messages; 10,000 idle consumers long-polling ``wait=10s``
with nothing else running, measured as the polls the node answers per
second of its workers' CPU (over one whole wait, once all of them poll);
and single produce beside those 10,000 waiters. As there,
Valkey rewrites its append-only file before a turn that could start a
rewrite, so that none lands inside a turn (:class:`messaging.Rewrites`).
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from collections.abc import Iterator
from contextlib import contextmanager
from itertools import chain
from pathlib import Path
from typing import NamedTuple

from messaging import BATCH
from messaging import BATCH_CLIENTS
from messaging import BODY
from messaging import CLIENTS
from messaging import FLOW_CONSUMERS
from messaging import FLOW_PRODUCERS
from messaging import ROOT
from messaging import WARMUP_S
from messaging import Background
from messaging import Rewrites
from messaging import Servers
from messaging import ack_all
from messaging import batch_body
from messaging import batch_flow
from messaging import constant
from messaging import consume_and_ack
from messaging import cpu_seconds
from messaging import create_topic
from messaging import create_wait_topics
from messaging import default_workers
from messaging import request
from messaging import run_load
from messaging import stop_nodes_on_sigterm

PHASES = ("produce", "consume-ack", "flow", "waiters", "beside-waiters")
DEFAULT_PHASES = PHASES[:3]
UNITS = {"waiters": "polls per CPU-second"}
VERSIONS = ("old", "new")
# What a turn of each phase may write to the AOF in a second, at most.
AOF_BYTES_PER_S = {
    "produce": Rewrites.BYTES_PER_S,
    "consume-ack": Rewrites.BYTES_PER_S,
    "flow": Rewrites.BATCH_BYTES_PER_S,
    "waiters": Rewrites.BYTES_PER_S,
    "beside-waiters": Rewrites.BYTES_PER_S,
}
# The waiters phase: as many idle long polls as bench/messaging.py holds,
# each asking again as soon as it is answered, with bench/loadgen.py's wait.
WAITERS = 10_000
WAIT_S = 10.0


class Node(NamedTuple):
    port: int
    workers: list[int]  # its gunicorn workers' pids


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("rev", help="the git revision to compare with")
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--turns", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=4.0, help="per turn")
    parser.add_argument("--phases", default=",".join(DEFAULT_PHASES))
    parser.add_argument("--workers", type=int, default=default_workers())
    args = parser.parse_args()
    stop_nodes_on_sigterm()
    phases = args.phases.split(",")
    unknown = set(phases) - set(PHASES)
    if unknown:
        parser.error(f"unknown phases {sorted(unknown)}; choose from {PHASES}")
    tmp = Path(tempfile.mkdtemp(prefix="narad-bench-ab-"))
    old = tmp / "old"
    try:
        label = checkout(args.rev, old)
        print(
            f"old: {label}; new: this checkout; {args.pairs} pairs of fresh nodes "
            f"({args.workers} workers, embedded Valkey, fsync always), "
            f"{args.turns} turn(s) a version per phase, {args.seconds:g} s a turn"
        )
        rates = {p: {v: [] for v in VERSIONS} for p in phases}
        rewritten = 0
        for pair in range(args.pairs):
            rewritten += run_pair(pair, old, tmp / f"pair{pair}", args, phases, rates)
        report(phases, rates)
        print(f"Valkey's AOF rewritten {rewritten} times before turns, none within")
    finally:
        subprocess.run(
            ["git", "-C", str(ROOT), "worktree", "remove", "--force", str(old)],
            capture_output=True,
        )
        shutil.rmtree(tmp, ignore_errors=True)


def checkout(rev: str, where: Path) -> str:
    """``rev`` in a worktree at ``where``, C helper built; its one-line log."""
    git = ["git", "-C", str(ROOT)]
    subprocess.run(
        [*git, "worktree", "add", "--detach", "--quiet", str(where), rev], check=True
    )
    subprocess.run(
        [sys.executable, "setup.py", "--quiet", "build_ext", "--inplace"],
        cwd=where,
        check=True,
        capture_output=True,
    )
    return subprocess.run(
        [*git, "log", "-1", "--format=%h %<(60,trunc)%s", rev],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()


def run_pair(
    pair: int,
    old: Path,
    tmp: Path,
    args: argparse.Namespace,
    phases: list[str],
    rates: dict[str, dict[str, list[list[float]]]],
) -> int:
    """Start one node per version, take alternating turns of each phase, and
    add the pair's rates (one list per version and phase); how many AOF
    rewrites were made before turns."""
    tmp.mkdir()
    servers = Servers(tmp, args.workers)
    rewrites = Rewrites()
    try:
        nodes, storage = {}, {}
        # Which version starts first alternates too.
        for version in VERSIONS if pair % 2 == 0 else VERSIONS[::-1]:
            extra = {}
            if version == "old":
                extra["PYTHONPATH"] = f"{old}:{old / 'plugins'}"
            port, groups, storage[version] = servers.spawn_node(version, **extra)
            nodes[version] = Node(port, groups["gunicorn workers"])
            prepare(port)
        for phase in phases:
            got = {v: [] for v in VERSIONS}
            for turn in range(args.turns):
                order = VERSIONS if (turn + pair) % 2 == 0 else VERSIONS[::-1]
                for version in order:
                    rewrites.make_room(
                        storage[version],
                        args.seconds + WARMUP_S,
                        AOF_BYTES_PER_S[phase],
                    )
                    rate = TURNS[phase](nodes[version], args.seconds, turn)
                    got[version].append(rate)
                    print(
                        f"  pair {pair + 1} {phase:14s} {version}: {rate:9,.0f} "
                        + UNITS.get(phase, "msgs/s"),
                        flush=True,
                    )
            for version in VERSIONS:
                rates[phase][version].append(got[version])
        return rewrites.count
    finally:
        servers.stop()
        shutil.rmtree(tmp, ignore_errors=True)  # its two data sets


def prepare(port: int) -> None:
    """The topics the turns use, and the backlog consume+ack takes from."""
    for topic in ("ab-single", "ab-backlog"):
        create_topic(port, topic)
    create_wait_topics(port)
    body = request("POST", "/v1/topics/ab-backlog/produce/batch", batch_body())
    run_load(port, BATCH_CLIENTS, 8, constant(body, 202, BATCH))


def produce(node: Node, seconds: float, turn: int) -> float:
    body = request("POST", "/v1/topics/ab-single/produce", BODY)
    return run_load(node.port, CLIENTS, seconds, constant(body, 202, 1))[0]


def consume_ack(node: Node, seconds: float, turn: int) -> float:
    unacked: set[str] = set()
    load = consume_and_ack("ab-backlog", unacked)
    rate, _ = run_load(node.port, CLIENTS, seconds, load)
    ack_all(node.port, "ab-backlog", unacked)
    return rate


def flow(node: Node, seconds: float, turn: int) -> float:
    topic = f"ab-flow-{turn}"
    create_topic(node.port, topic)
    connections = FLOW_PRODUCERS + FLOW_CONSUMERS
    load = batch_flow(f"/v1/topics/{topic}", FLOW_PRODUCERS)
    return run_load(node.port, connections, seconds, load)[0]


@contextmanager
def waiting_crowd(node: Node) -> Iterator[None]:
    """``WAITERS`` idle long polls on ``node``: in the block once all of them
    poll (they connect over one wait); after it, gone, and the polls their
    closed connections left have run out."""
    crowd = Background("waiters", str(node.port), "--count", str(WAITERS))
    try:
        time.sleep(WAIT_S + 1.0)
        yield
    finally:
        crowd.stop()
    time.sleep(WAIT_S + 1.0)


def waiters(node: Node, seconds: float, turn: int) -> float:
    """Long polls answered per second of the workers' CPU, with ``WAITERS``
    idle ones: the workers' CPU is counted over one wait (at least), while
    each of them is answered 204 once."""
    with waiting_crowd(node):
        used = -sum(map(cpu_seconds, node.workers))
        start = time.monotonic()
        time.sleep(max(seconds, WAIT_S))
        used += sum(map(cpu_seconds, node.workers))
        wall = time.monotonic() - start
    return WAITERS / WAIT_S * wall / used


def beside_waiters(node: Node, seconds: float, turn: int) -> float:
    """Single produce while ``WAITERS`` idle long polls wait on the node, as
    in ``bench/messaging.py``."""
    with waiting_crowd(node):
        return produce(node, seconds, turn)


# One turn of a phase on a node (the node, seconds, turn number): its rate.
TURNS: dict[str, Callable[[Node, float, int], float]] = {
    "produce": produce,
    "consume-ack": consume_ack,
    "flow": flow,
    "waiters": waiters,
    "beside-waiters": beside_waiters,
}


def report(phases: list[str], rates: dict[str, dict[str, list[list[float]]]]) -> None:
    print()
    print(f"{'phase':14s} {'old':>10s} {'new':>10s}   new/old per pair -> mean")
    for phase in phases:
        old, new = rates[phase]["old"], rates[phase]["new"]
        ratios = [
            statistics.mean(n) / statistics.mean(o)
            for o, n in zip(old, new, strict=True)
        ]
        spread = statistics.stdev(ratios) if len(ratios) > 1 else 0.0
        print(
            f"{phase:14s} {statistics.mean(chain(*old)):10,.0f} "
            f"{statistics.mean(chain(*new)):10,.0f}   "
            + ", ".join(f"{r:.3f}" for r in ratios)
            + f" -> {statistics.mean(ratios):.3f} (pairs' stdev {spread:.3f})"
        )
    print(f"(msgs/s, means over every turn; {WARMUP_S:g} s warm-up a turn)")
    if "waiters" in phases:
        print(
            f"(waiters: polls answered per second of the workers' CPU, "
            f"{WAITERS:,} idle long polls of {WAIT_S:g} s)"
        )


if __name__ == "__main__":
    import report

    report.run("ab", main)
