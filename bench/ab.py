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

``--variant NAME:VAR=VALUE,...`` (twice or more, no ``REV``) compares
settings of this checkout instead of two revisions: each pair then starts
one node per variant, with those environment variables (``NARAD_*``
settings; a ``PYTHONPATH`` given is put before the checkout's), the first
variant being the baseline the others are divided by. The HTTP parsers::

    python bench/ab.py --phases produce,waiters,beside-waiters \
        --variant plain: \
        --variant gunicorn:NARAD_SERVER_PLAIN_REQUESTS=false,\
NARAD_SERVER_HTTP_PARSER=python \
        --variant h1c:NARAD_SERVER_PLAIN_REQUESTS=false,\
NARAD_SERVER_HTTP_PARSER=fast,PYTHONPATH=DIR_WITH_GUNICORN_H1C
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


def parse_variant(spec: str) -> tuple[str, dict[str, str]]:
    """``NAME:VAR=VALUE,...`` as (name, environment)."""
    name, _, assignments = spec.partition(":")
    env = {}
    for assignment in filter(None, assignments.split(",")):
        var, equals, value = assignment.partition("=")
        if not equals or not var:
            raise argparse.ArgumentTypeError(f"{assignment!r} is not VAR=VALUE")
        env[var] = value
    if not name:
        raise argparse.ArgumentTypeError(f"{spec!r} has no name before ':'")
    return name, env


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("rev", nargs="?", help="the git revision to compare with")
    parser.add_argument(
        "--variant",
        type=parse_variant,
        action="append",
        default=[],
        help="NAME:VAR=VALUE,... settings of this checkout to compare (no REV)",
    )
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--turns", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=4.0, help="per turn")
    parser.add_argument("--phases", default=",".join(DEFAULT_PHASES))
    parser.add_argument("--workers", type=int, default=default_workers())
    parser.add_argument(
        "--section",
        help="the benchmarks page's section to write (default: ab, or "
        "ab-settings with --variant)",
    )
    args = parser.parse_args()
    stop_nodes_on_sigterm()
    phases = args.phases.split(",")
    unknown = set(phases) - set(PHASES)
    if unknown:
        parser.error(f"unknown phases {sorted(unknown)}; choose from {PHASES}")
    if (args.rev is None) == (len(args.variant) < 2):
        parser.error("give a REV, or two --variant or more (not both)")
    tmp = Path(tempfile.mkdtemp(prefix="narad-bench-ab-"))
    old = tmp / "old"
    try:
        if args.rev is None:
            variants = dict(args.variant)
            for env in variants.values():
                if "PYTHONPATH" in env:
                    env["PYTHONPATH"] += f":{ROOT}:{ROOT / 'plugins'}"
            print(
                "variants of this checkout: "
                + "; ".join(
                    f"{name} ({', '.join(f'{k}={v}' for k, v in env.items()) or '-'})"
                    for name, env in variants.items()
                )
            )
        else:
            label = checkout(args.rev, old)
            variants = {
                "old": {"PYTHONPATH": f"{old}:{old / 'plugins'}"},
                "new": {},
            }
            print(f"old: {label}; new: this checkout")
        print(
            f"{args.pairs} pairs of fresh nodes "
            f"({args.workers} workers, embedded Valkey, fsync always), "
            f"{args.turns} turn(s) a version per phase, {args.seconds:g} s a turn"
        )
        rates = {p: {v: [] for v in variants} for p in phases}
        rewritten = 0
        for pair in range(args.pairs):
            rewritten += run_pair(
                pair, variants, tmp / f"pair{pair}", args, phases, rates
            )
        summarise(phases, rates)
        print(f"Valkey's AOF rewritten {rewritten} times before turns, none within")
    finally:
        if args.rev is not None:
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


def rotated(names: list[str], by: int) -> list[str]:
    """``names`` in turn order ``by``: with two, alternating; with more,
    each first in its turn (and reversed every other round)."""
    by %= 2 * len(names)
    order = names[by % len(names) :] + names[: by % len(names)]
    return order if by < len(names) else order[::-1]


def run_pair(
    pair: int,
    variants: dict[str, dict[str, str]],
    tmp: Path,
    args: argparse.Namespace,
    phases: list[str],
    rates: dict[str, dict[str, list[list[float]]]],
) -> int:
    """Start one node per version (its environment from ``variants``), take
    alternating turns of each phase, and add the pair's rates (one list per
    version and phase); how many AOF rewrites were made before turns."""
    tmp.mkdir()
    servers = Servers(tmp, args.workers)
    rewrites = Rewrites()
    names = list(variants)
    try:
        nodes, storage = {}, {}
        # Which version starts first alternates too.
        for version in rotated(names, pair):
            port, groups, storage[version] = servers.spawn_node(
                version, **variants[version]
            )
            nodes[version] = Node(port, groups["gunicorn workers"])
            prepare(port)
        for phase in phases:
            got = {v: [] for v in names}
            for turn in range(args.turns):
                for version in rotated(names, turn + pair):
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
            for version in names:
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
    load = consume_and_ack("/v1/topics/ab-backlog", unacked)
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


def summarise(
    phases: list[str], rates: dict[str, dict[str, list[list[float]]]]
) -> None:
    """Per phase: each version's mean and median over every turn, and each
    version's ratio to the first one (the baseline) pair by pair, with their
    mean and median."""
    names = list(rates[phases[0]])
    base = names[0]
    print()
    for phase in phases:
        print(f"{phase}:")
        for name in names:
            turns = list(chain(*rates[phase][name]))
            line = (
                f"  {name:10s} mean {statistics.mean(turns):10,.0f}  "
                f"median {statistics.median(turns):10,.0f}"
            )
            if name != base:
                ratios = [
                    statistics.mean(n) / statistics.mean(o)
                    for o, n in zip(rates[phase][base], rates[phase][name], strict=True)
                ]
                spread = statistics.stdev(ratios) if len(ratios) > 1 else 0.0
                line += (
                    f"   /{base} per pair "
                    + ", ".join(f"{r:.3f}" for r in ratios)
                    + f" -> mean {statistics.mean(ratios):.3f}, median "
                    f"{statistics.median(ratios):.3f} (stdev {spread:.3f})"
                )
            print(line)
    print(f"(msgs/s over every turn; {WARMUP_S:g} s warm-up a turn)")
    if "waiters" in phases:
        print(
            f"(waiters: polls answered per second of the workers' CPU, "
            f"{WAITERS:,} idle long polls of {WAIT_S:g} s)"
        )


if __name__ == "__main__":
    import report

    # Settings compared on one checkout have a section of their own, unless
    # --section names another (a revision run from a worktree of its own).
    default = "ab-settings" if "--variant" in sys.argv else "ab"
    named = [a.split("=", 1)[1] for a in sys.argv if a.startswith("--section=")]
    if "--section" in sys.argv[:-1]:
        named.append(sys.argv[sys.argv.index("--section") + 1])
    report.run(named[-1] if named else default, main)
