"""Per-message cost of produce, consume, ack and the full flow, beside the floor.

``bench/messaging.py --cost`` runs this on its own (a few minutes): the same
``narad serve`` (security on, embedded Valkey, fsync always) and
``bench/floor_app.py`` as the rest of that bench, and fixed amounts of work
instead of fixed times, so that each figure is a counter's delta divided by
the messages the phase handled:

- **worker CPU**: utime + stime of the side's gunicorn workers (``/proc``);
- **Valkey CPU**: the valkey-server process's utime + stime, all threads;
- **Valkey's event loop**: the time its one main loop spent on its turns
  (``eventloop_duration_sum``: commands, reading and writing sockets, and
  the fsync after each turn that wrote), and within that on commands
  (``eventloop_duration_cmd_sum``). Every side's every call goes through that
  loop one turn at a time, so when it is busy all the time the rate follows
  its time per message, not the CPU (Valkey 8 and later; 0 elsewhere);
- **write syscalls**: ``syscw`` of Valkey's ``/proc/<pid>/io`` (socket
  replies and AOF writes alike), and its AOF's growth (``aof_current_size``);
- **storage commands**: ``INFO commandstats`` deltas of the commands that
  write (``COMMAND INFO``'s ``write`` flag), run inside the scripts;
- **memory**: ``used_memory`` delta, what a leased message holds while it is
  leased (and gives back when acked);
- **replies**: Valkey's output bytes (``total_net_output_bytes``) and the
  HTTP responses' bytes (head and body) as the load generator read them.

Phases, each on Narad and on the floor, alternating which side goes first,
``--rounds`` times: batch produce of ``--messages`` (batches of 100, 8
connections), batch consume of all of them (``max=100``, leases held), batch
ack of every handle in the order leased (100 per request); then the full
flow in batches (``bench/messaging.py``'s, counted per acked message) for
half of ``--seconds`` a turn; then single produce, single consume and single
ack of ``--singles`` messages (the floor's single consume takes from what
its single produce appended). Narad's topics for the first phases have long
leases and caps above what the phase holds (``visibility_timeout_ms`` 10
minutes, both caps at a million), so that no lease lapses and no ack is
refused between the consume phase and the ack phase; the flow's topics are
created as shipped.

After the flow's turns, one more turn a side runs with every command in
Valkey's slow log (threshold 0; not counted in the figures above, since
logging slows it): each script's calls and time per acked message, split
into its own Lua's (its arguments and replies made into Lua values and
back, and its logic) and each command's it ran.

With ``--profile``, last, every Narad worker is sampled by ``py-spy`` (if on
the ``PATH`` or in the venv) for ``--seconds`` while connections consume
and ack batches from a backlog, and the samples are summed: by the layer the
sampled (innermost) frame belongs to, and by Narad's functions, inclusive.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import selectors
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from dataclasses import field
from pathlib import Path

import redis

_HANDLE = re.compile(rb'"receipt_handle":"([^"]+)"')
_LENGTH = re.compile(rb"\r\ncontent-length:[ \t]*(\d+)", re.IGNORECASE)
BATCH = 100
CONNECTIONS = 8
#: The single phases, produce first.
SINGLES = ("single produce", "single consume", "single ack")
LONG_LEASES = {
    "visibility_timeout_ms": 600_000,
    "max_in_flight_per_partition": 1_000_000,
    "max_acked_ahead_per_partition": 1_000_000,
}


def _stat_times(pid: int) -> tuple[float, float]:
    """``pid``'s CPU time in user space and in the kernel (``stat``'s clock
    ticks)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except FileNotFoundError:
        return 0.0, 0.0
    tick = os.sysconf("SC_CLK_TCK")
    return int(fields[11]) / tick, int(fields[12]) / tick


def _run_seconds(pid: int) -> float:
    """CPU time of all of ``pid``'s threads, in nanoseconds' resolution
    (``schedstat``), falling back on ``stat``'s clock ticks."""
    try:
        tasks = list(Path(f"/proc/{pid}/task").iterdir())
        return sum(int((t / "schedstat").read_text().split()[0]) for t in tasks) / 1e9
    except (OSError, ValueError, IndexError):
        return sum(_stat_times(pid))


def _io(pid: int) -> dict[str, int]:
    try:
        text = Path(f"/proc/{pid}/io").read_text()
    except OSError:
        return {}
    return {k: int(v) for k, v in (line.split(": ") for line in text.splitlines())}


# -- counters ------------------------------------------------------------------


@dataclass
class Snapshot:
    worker_cpu: float
    valkey_cpu: float
    syscw: int
    aof: int
    net_out: int
    memory: int
    keys: int
    calls: dict[str, int]
    loop: int = 0  # microseconds
    loop_commands: int = 0
    turns: int = 0  # of Valkey's event loop
    valkey_system: float = 0.0
    aof_file: tuple[Path | None, int] = (None, 0)


class Counters:
    """What one side's processes and the shared Valkey have done so far."""

    def __init__(self, url: str, valkey: int) -> None:
        self.client = redis.Redis.from_url(url, decode_responses=True)
        self.valkey = valkey
        self.writes: set[str] = set()
        for name, spec in self.client.command().items():
            if "write" in spec.get("flags", ()):
                self.writes.add(name.lower())

    def aof_file(self) -> tuple[Path | None, int]:
        """The AOF file Valkey appends to now, and its size."""
        folder = (
            Path(self.client.config_get("dir")["dir"])
            / (self.client.config_get("appenddirname")["appenddirname"])
        )
        files = sorted(folder.glob("*.incr.aof"), key=lambda f: f.stat().st_mtime)
        if not files:
            return None, 0
        return files[-1], files[-1].stat().st_size

    def snapshot(self, workers: list[int]) -> Snapshot:
        info = self.client.info("all")
        calls = {
            key.removeprefix("cmdstat_").lower(): value["calls"]
            for key, value in info.items()
            if key.startswith("cmdstat_")
        }
        return Snapshot(
            worker_cpu=sum(map(_run_seconds, workers)),
            valkey_cpu=_run_seconds(self.valkey),
            syscw=_io(self.valkey).get("syscw", 0),
            aof=info.get("aof_current_size", 0),
            net_out=info["total_net_output_bytes"],
            memory=info["used_memory"],
            keys=sum(v["keys"] for k, v in info.items() if re.fullmatch(r"db\d+", k)),
            calls=calls,
            loop=info.get("eventloop_duration_sum", 0),
            loop_commands=info.get("eventloop_duration_cmd_sum", 0),
            turns=info.get("eventloop_cycles", 0),
            valkey_system=_stat_times(self.valkey)[1],
            aof_file=self.aof_file(),
        )


@dataclass
class Cost:
    """Per-message figures of one phase (summed over rounds, then divided)."""

    messages: int = 0
    seconds: float = 0.0
    worker_cpu: float = 0.0
    valkey_cpu: float = 0.0
    syscw: int = 0
    aof: int = 0
    net_out: int = 0
    memory: int = 0
    keys: int = 0
    http_bytes: int = 0
    requests: int = 0
    scripts: int = 0
    aof_messages: int = 0
    rewritten: int = 0
    loop: float = 0.0  # seconds
    loop_commands: float = 0.0
    turns: int = 0
    valkey_system: float = 0.0
    calls: Counter = field(default_factory=Counter)
    # From the AOF's new bytes: commands logged, and entries they write.
    logged: Counter = field(default_factory=Counter)
    entries: Counter = field(default_factory=Counter)

    def add(self, a: Snapshot, b: Snapshot, run: Run, writes: set[str]) -> None:
        self.messages += run.messages
        self.seconds += run.seconds
        self.worker_cpu += b.worker_cpu - a.worker_cpu
        self.valkey_cpu += b.valkey_cpu - a.valkey_cpu
        self.syscw += b.syscw - a.syscw
        self.net_out += b.net_out - a.net_out
        self.memory += b.memory - a.memory
        self.keys += b.keys - a.keys
        self.http_bytes += run.reply_bytes
        self.loop += (b.loop - a.loop) / 1e6
        self.loop_commands += (b.loop_commands - a.loop_commands) / 1e6
        self.turns += b.turns - a.turns
        self.valkey_system += b.valkey_system - a.valkey_system
        self.requests += run.requests
        for name in ("evalsha", "eval", "fcall"):
            self.scripts += b.calls.get(name, 0) - a.calls.get(name, 0)
        for name, n in b.calls.items():
            if name in writes and n > a.calls.get(name, 0):
                self.calls[name] += n - a.calls.get(name, 0)
        (path, start), (path_b, end) = a.aof_file, b.aof_file
        if path is None or path != path_b:
            # Rewritten meanwhile (a new file): the round is left out of the
            # AOF's figures.
            self.rewritten += 1
            return
        with path.open("rb") as f:
            f.seek(start)
            logged, entries = aof_commands(f.read(end - start))
        self.aof += end - start
        self.aof_messages += run.messages
        self.logged.update(logged)
        self.entries.update(entries)

    def per(self, value: float) -> float:
        return value / max(self.messages, 1)

    def per_logged(self, value: float) -> float:
        """Per message of the rounds whose AOF was read."""
        return value / max(self.aof_messages, 1)


# Entries a logged command writes, from its argument count (name and key
# excluded): field-value or score-member pairs, or one per argument.
PAIRS = {"hset", "zadd", "hmset", "mset", "xadd"}
ONE_EACH = {"hdel", "zrem", "rpush", "lpush", "del", "unlink", "srem", "sadd"}


def aof_commands(data: bytes) -> tuple[Counter, Counter]:
    """The commands in a stretch of AOF (RESP arrays), and the entries
    (hash fields, sorted-set members, list values...) they write, by name."""
    logged: Counter = Counter()
    entries: Counter = Counter()
    i, end = 0, len(data)
    while i < end and data[i : i + 1] == b"*":
        nl = data.index(b"\r\n", i)
        argc = int(data[i + 1 : nl])
        i = nl + 2
        name = b""
        for k in range(argc):
            nl = data.index(b"\r\n", i)
            size = int(data[i + 1 : nl])
            if k == 0:
                name = data[nl + 2 : nl + 2 + size]
            i = nl + 2 + size + 2
        command = name.decode().lower()
        logged[command] += 1
        if command in PAIRS:
            entries[command] += (argc - 2) // 2
        elif command in ONE_EACH:
            entries[command] += argc - 2
        elif command not in ("multi", "exec", "select"):
            entries[command] += 1
    return logged, entries


# -- a fixed amount of work ----------------------------------------------------


@dataclass
class Run:
    messages: int = 0
    requests: int = 0
    reply_bytes: int = 0
    seconds: float = 0.0
    statuses: Counter = field(default_factory=Counter)


def run_requests(
    port: int,
    connections: int,
    next_request: Callable[[], bytes | None],
    on_response: Callable[[int, bytes], int],
) -> Run:
    """Send what ``next_request`` gives (``None``: no more) over
    ``connections`` keep-alive connections, one request in flight each;
    ``on_response`` says how many messages a response accounts for."""
    sel = selectors.DefaultSelector()
    run = Run()
    started = time.monotonic()
    open_conns = 0

    def send(sock: socket.socket, buf: bytearray) -> bool:
        data = next_request()
        if data is None:
            sel.unregister(sock)
            sock.close()
            return False
        sock.setblocking(True)
        sock.sendall(data)
        sock.setblocking(False)
        buf.clear()
        return True

    for _ in range(connections):
        sock = socket.create_connection(("127.0.0.1", port))
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        buf = bytearray()
        sel.register(sock, selectors.EVENT_READ, buf)
        open_conns += send(sock, buf)
    while open_conns:
        for key, _ in sel.select(timeout=5.0):
            buf = key.data
            chunk = key.fileobj.recv(1 << 20)
            if not chunk:
                raise ConnectionError("server closed a keep-alive connection")
            buf += chunk
            end = buf.find(b"\r\n\r\n")
            if end < 0:
                continue
            head = bytes(buf[:end])
            match = _LENGTH.search(head)
            length = int(match[1]) if match else 0
            if len(buf) < end + 4 + length:
                continue
            status = int(head[9:12])
            run.requests += 1
            run.reply_bytes += end + 4 + length
            run.statuses[status] += 1
            run.messages += on_response(status, bytes(buf[end + 4 : end + 4 + length]))
            if not send(key.fileobj, buf):
                open_conns -= 1
    sel.close()
    run.seconds = time.monotonic() - started
    return run


def countdown(requests: list[bytes]) -> Callable[[], bytes | None]:
    it = iter(requests)
    return lambda: next(it, None)


# -- the phases ----------------------------------------------------------------


@dataclass
class Side:
    """Narad or the floor: its port, workers, and each route's request."""

    name: str
    port: int
    workers: list[int]
    produce_batch: Callable[[str], bytes]
    consume_batch: Callable[[str], bytes]
    ack_batch: Callable[[str, list[bytes]], bytes]
    produce: Callable[[str], bytes]
    consume: Callable[[str], bytes]
    ack: Callable[[str, bytes], bytes]


def produce_phase(side: Side, topic: str, body: bytes, n: int) -> Run:
    requests = [side.produce_batch(topic)] * (n // BATCH)
    return run_requests(
        side.port,
        CONNECTIONS,
        countdown(requests),
        lambda status, _: BATCH if status == 202 else 0,
    )


def consume_phase(side: Side, topic: str, n: int, handles: list[bytes]) -> Run:
    """Lease ``n`` messages in batches; their handles land in ``handles``."""
    request = side.consume_batch(topic)
    asked = 0

    def next_request() -> bytes | None:
        nonlocal asked
        if asked >= n:
            return None
        asked += BATCH
        return request

    def on_response(status: int, body: bytes) -> int:
        nonlocal asked
        got = _HANDLE.findall(body) if status == 200 else []
        handles.extend(got)
        asked -= BATCH - len(got)  # ask again for what did not come
        return len(got)

    return run_requests(side.port, CONNECTIONS, next_request, on_response)


def ack_phase(side: Side, topic: str, handles: list[bytes]) -> Run:
    chunks = [handles[i : i + BATCH] for i in range(0, len(handles), BATCH)]
    requests = [side.ack_batch(topic, chunk) for chunk in chunks]
    return run_requests(
        side.port,
        CONNECTIONS,
        countdown(requests),
        lambda status, body: json.loads(body)["results"].count("acked"),
    )


def single_produce(side: Side, topic: str, n: int) -> Run:
    return run_requests(
        side.port,
        2 * CONNECTIONS,
        countdown([side.produce(topic)] * n),
        lambda status, _: 1 if status == 202 else 0,
    )


def single_consume(side: Side, topic: str, n: int, handles: list[bytes]) -> Run:
    """Lease ``n`` messages one at a time; their handles land in ``handles``."""
    request = side.consume(topic)
    asked = 0

    def next_request() -> bytes | None:
        nonlocal asked
        if asked >= n:
            return None
        asked += 1
        return request

    def on_response(status: int, body: bytes) -> int:
        nonlocal asked
        if status != 200:
            asked -= 1
            return 0
        handles.append(_HANDLE.search(body)[1])
        return 1

    return run_requests(side.port, 2 * CONNECTIONS, next_request, on_response)


def single_ack(side: Side, topic: str, handles: list[bytes]) -> Run:
    return run_requests(
        side.port,
        2 * CONNECTIONS,
        countdown([side.ack(topic, h) for h in handles]),
        lambda status, _: 1 if status == 204 else 0,
    )


# -- each script's time, from Valkey's slow log ---------------------------------


def script_names(*folders: Path) -> dict[bytes, str]:
    """Each script's file name by its SHA1, the name EVALSHA gives it."""
    return {
        hashlib.sha1(path.read_bytes()).hexdigest().encode(): path.name
        for folder in folders
        for path in sorted(folder.glob("*.lua"))
    }


def logged(url: str, fn: Callable[[], Run]) -> tuple[Run, list]:
    """``fn()``, with every command Valkey runs meanwhile in its slow log
    (threshold 0), and the log's entries: a script's own commands are
    logged, each with its time, just before the script's EVALSHA, from the
    same client, and the EVALSHA's time includes theirs."""
    client = redis.Redis.from_url(url)
    try:
        saved = client.config_get("slowlog-*")
        client.config_set("slowlog-max-len", 4_000_000)
        client.config_set("slowlog-log-slower-than", 0)
        client.slowlog_reset()
        try:
            run = fn()
        finally:
            client.config_set(
                "slowlog-log-slower-than", saved["slowlog-log-slower-than"]
            )
        entries = client.execute_command("SLOWLOG", "GET", -1)
        client.slowlog_reset()
        client.config_set("slowlog-max-len", saved["slowlog-max-len"])
        return run, entries
    finally:
        client.close()


@dataclass
class ScriptTimes:
    """Per script (by file name): its calls, the microseconds of its own Lua
    (its EVALSHA's time less its commands'), and of each command it ran."""

    calls: Counter = field(default_factory=Counter)
    own: Counter = field(default_factory=Counter)
    commands: dict[str, Counter] = field(default_factory=dict)


def script_times(entries: list, names: dict[bytes, str]) -> ScriptTimes:
    """What each script cost, from slow-log ``entries`` (id, time, duration,
    arguments, client, ...): the run of commands just before an EVALSHA from
    its client are its own (nothing else runs while a script does)."""
    times = ScriptTimes()
    run: list[tuple[bytes, int]] = []  # (command, us), consecutive, one client
    client = None
    for entry in sorted(entries, key=lambda e: e[0]):
        duration, arguments, addr = entry[2], entry[3], entry[4]
        if addr != client:
            run, client = [], addr
        command = arguments[0].lower()
        if command != b"evalsha":
            run.append((command, duration))
            continue
        name = names.get(arguments[1], "other scripts")
        times.calls[name] += 1
        spent = times.commands.setdefault(name, Counter())
        for inner, us in run:
            spent[inner.decode()] += us
        times.own[name] += duration - sum(us for _, us in run)
        run = []
    return times


def script_lines(side: str, times: ScriptTimes, messages: int) -> list[str]:
    """One line per script: calls per 100 messages, its microseconds per
    message, its own Lua's, and its top commands'."""
    lines = []
    for name, calls in times.calls.most_common():
        spent = times.commands[name]
        total = times.own[name] + spent.total()
        top = ", ".join(
            f"{command} {us / messages:.2f}" for command, us in spent.most_common(4)
        )
        per = 100 * calls / messages
        lines.append(
            f"  {side:6} {name:18} {per:6.2f} {total / messages:7.2f}"
            f" {times.own[name] / messages:7.2f}   {top}"
        )
    return lines


# -- profiling -----------------------------------------------------------------


def py_spy() -> str | None:
    return shutil.which("py-spy") or shutil.which(
        "py-spy", path=str(Path(sys.executable).parent)
    )


def profile(workers: list[int], seconds: float, load: Callable[[], object]) -> dict:
    """Sample ``workers`` with py-spy while ``load()`` runs: the raw samples,
    merged (``{"stack": count}``)."""
    tool = py_spy()
    if tool is None:
        return {}
    tmp = Path(tempfile.mkdtemp(prefix="narad-pyspy-"))
    spies = [
        subprocess.Popen(
            [
                tool,
                "record",
                "--pid",
                str(pid),
                "--duration",
                str(int(seconds)),
                "--rate",
                "200",
                "--nonblocking",
                "--format",
                "raw",
                "--output",
                str(tmp / f"{pid}.txt"),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for pid in workers
    ]
    try:
        time.sleep(0.5)
        load()
    finally:
        for spy in spies:
            try:
                spy.wait(seconds + 30)
            except subprocess.TimeoutExpired:
                spy.terminate()
                spy.wait()
    stacks: Counter = Counter()
    for path in tmp.glob("*.txt"):
        for line in path.read_text().splitlines():
            stack, _, count = line.rpartition(" ")
            if stack:
                stacks[stack] += int(count)
    shutil.rmtree(tmp, ignore_errors=True)
    return stacks


_FRAME = re.compile(r"^(.*) \((.*?)(?::\d+)?\)$")

# The layer a sampled frame's file belongs to, first match wins.
LAYERS = (
    ("narad_redis/", "narad storage (plugins/narad_redis)"),
    ("narad/http/", "narad HTTP resources (narad/http)"),
    ("narad/serve/", "narad server glue (narad/serve)"),
    ("narad/", "narad other (services, security, metrics...)"),
    ("redis/", "redis-py client"),
    ("falcon/", "falcon"),
    ("gunicorn/", "gunicorn"),
    ("gevent/", "gevent (hub, sockets)"),
    ("json/", "json (stdlib)"),
    ("socket.py", "socket (stdlib)"),
    ("hashlib", "hashlib"),
    ("logging/", "logging (stdlib)"),
)


def layer(path: str) -> str:
    for marker, name in LAYERS:
        if marker in path:
            return name
    return "other (stdlib, C)"


def frames(stack: str) -> list[tuple[str, str]]:
    out = []
    for frame in stack.split(";"):
        match = _FRAME.match(frame.strip())
        if match:
            out.append((match[1], match[2]))
    return out


def profile_lines(stacks: Counter, top: int = 18) -> list[str]:
    total = sum(stacks.values())
    if not total:
        return ["  (no samples: py-spy missing or not permitted to attach)"]
    by_layer: Counter = Counter()
    inclusive: Counter = Counter()
    own: Counter = Counter()
    for stack, count in stacks.items():
        fs = frames(stack)
        if not fs:
            continue
        # The innermost frame of Python code: time in C (a socket send, a
        # json encoder) counts to the Python function that called it.
        by_layer[layer(fs[-1][1])] += count
        own[f"{fs[-1][0]} ({short(fs[-1][1])})"] += count
        seen = set()
        for func, path in fs:
            if "narad" in path:
                name = f"{func} ({short(path)})"
                if name not in seen:
                    seen.add(name)
                    inclusive[name] += count
    pct = lambda n: f"{100 * n / total:5.1f}%"  # noqa: E731
    lines = [f"  {total:,} samples of the workers while busy (py-spy, 200 Hz)"]
    lines.append("  by the layer of the innermost Python frame:")
    lines += [f"    {pct(n)}  {name}" for name, n in by_layer.most_common()]
    lines.append(f"  Narad's functions, inclusive (top {top}):")
    lines += [f"    {pct(n)}  {name}" for name, n in inclusive.most_common(top)]
    lines.append(f"  innermost frames, own time (top {top}):")
    lines += [f"    {pct(n)}  {name}" for name, n in own.most_common(top)]
    return lines


def short(path: str) -> str:
    for marker in ("site-packages/", "/plugins/", "/work/main/", "lib/python3"):
        if marker in path:
            return path.split(marker, 1)[1]
    return path


# -- the report ----------------------------------------------------------------


def cost_table(costs: dict[tuple[str, str], Cost], order: list[str]) -> list[str]:
    """Per-message figures, Narad's beside the floor's."""

    def us(value: float) -> str:
        return f"{1e6 * value:6.1f}"

    head = (
        f"{'phase':<16} {'side':<6} {'msgs':>7} {'msgs/s':>7} {'wrk us':>6} "
        f"{'vk us':>6} {'vk sys':>6} {'sum us':>6} {'syscw':>5} {'aof B':>6} "
        f"{'mem B':>6} {'vk out':>6} {'http B':>6} {'evals':>5} {'turns':>5} "
        f"{'loop us':>7} {'cmd us':>6} "
        f"{'busy':>4} "
        "AOF per msg: entries written (commands)"
    )
    lines = [head, "-" * len(head)]
    for phase in order:
        for side in ("narad", "floor"):
            c = costs.get((phase, side))
            if c is None or not c.messages:
                continue
            writes = ", ".join(
                f"{name} {c.per_logged(n):.2f} ({c.per_logged(c.logged[name]):.2f})"
                for name, n in c.entries.most_common(6)
            )
            lines.append(
                f"{phase:<16} {side:<6} {c.messages:>7,} "
                f"{c.messages / max(c.seconds, 1e-9):>7,.0f} "
                f"{us(c.per(c.worker_cpu))} {us(c.per(c.valkey_cpu))} "
                f"{us(c.per(c.valkey_system))} "
                f"{us(c.per(c.worker_cpu + c.valkey_cpu))} {c.per(c.syscw):>5.2f} "
                f"{c.per_logged(c.aof):>6.0f} {c.per(c.memory):>6.0f} "
                f"{c.per(c.net_out):>6.0f} {c.per(c.http_bytes):>6.0f} "
                f"{c.per(c.scripts):>5.2f} {c.per(c.turns):>5.2f} "
                f"{us(c.per(c.loop)):>7} "
                f"{us(c.per(c.loop_commands))} {c.loop / max(c.seconds, 1e-9):>4.0%} "
                f"{writes}"
                + (f" [AOF rewritten in {c.rewritten} rounds]" if c.rewritten else "")
            )
        narad, floor = costs.get((phase, "narad")), costs.get((phase, "floor"))
        if narad and floor and narad.messages and floor.messages:
            w = narad.per(narad.worker_cpu) / max(floor.per(floor.worker_cpu), 1e-12)
            v = narad.per(narad.valkey_cpu) / max(floor.per(floor.valkey_cpu), 1e-12)
            s = narad.per(narad.syscw) / max(floor.per(floor.syscw), 1e-12)
            lines.append(
                f"{'':<16} {'':<6} narad/floor: worker CPU x{w:.2f}, "
                f"Valkey CPU x{v:.2f}, write syscalls x{s:.2f}"
            )
    return lines


def bounds(costs: dict[tuple[str, str], Cost]) -> list[str]:
    """What the table says of issue 57's two targets, by CPU per message:
    the flow's parts against the floor's, the flow as it would be with the
    lease and the ack at the floor's cost and the produce as it is (on
    cores the sides share, the rate follows the CPU a message takes), the
    flow by Valkey's event loop (:func:`loop_bounds`: what the rate follows
    instead once that loop is busy all the time, as it is in the flow on
    two cores), and single consume+ack against single produce, Narad's and
    the floor's."""

    def total(phase: str, side: str) -> float | None:
        c = costs.get((phase, side))
        if c is None or not c.messages:
            return None
        return 1e6 * c.per(c.worker_cpu + c.valkey_cpu)

    parts = ("batch produce", "batch consume", "batch ack")
    narad = [total(p, "narad") for p in parts]
    floor = [total(p, "floor") for p in parts]
    flow, floor_flow = (
        total("flow (per ack)", "narad"),
        total("flow (per ack)", "floor"),
    )
    lines = []
    if None not in narad and None not in floor and flow and floor_flow:
        # The lease and the ack at the floor's cost, the produce as it is.
        leaner = flow - narad[1] - narad[2] + floor[1] + floor[2]
        lines += [
            "worker + Valkey CPU per message, narad (floor): produce "
            f"{narad[0]:.1f} ({floor[0]:.1f}), lease {narad[1]:.1f} ({floor[1]:.1f}), "
            f"ack {narad[2]:.1f} ({floor[2]:.1f}) us; flow per acked message "
            f"{flow:.1f} ({floor_flow:.1f}) us: {100 * floor_flow / flow:.0f}% of the "
            "floor's rate by CPU",
            f"  85% of the floor's rate takes at most {floor_flow / 0.85:.1f} us a "
            "message; with the lease and the ack at the floor's cost and the "
            f"produce as it is, the flow would take {leaner:.1f} us: "
            f"{100 * floor_flow / leaner:.0f}% at most; the produce alone is "
            f"{narad[0] - floor[0]:+.1f} us beside the floor's",
        ]
        # The other way round: the produce at the floor's cost, the lease
        # and the ack as they are; and what the three parts must shed
        # together, beside what the produce alone can.
        no_produce_gap = flow - narad[0] + floor[0]
        over = flow - floor_flow / 0.85
        lines += [
            f"  with the produce at the floor's cost and the lease and the ack as "
            f"they are, the flow would take {no_produce_gap:.1f} us: "
            f"{100 * floor_flow / no_produce_gap:.0f}% at most; 85% takes "
            f"{over:.1f} us less a message, of which the produce's gap is "
            f"{narad[0] - floor[0]:.1f} and the lease's and the ack's "
            f"{narad[1] - floor[1] + narad[2] - floor[2]:.1f}",
        ]
    lines += loop_bounds(
        costs.get(("flow (per ack)", "narad")), costs.get(("flow (per ack)", "floor"))
    )
    produce, consume, ack = (total(phase, "narad") for phase in SINGLES)
    if produce and consume and ack:
        lines.append(
            f"single consume + ack {consume:.1f} + {ack:.1f} = {consume + ack:.1f} us "
            f"a message against single produce's {produce:.1f} us: "
            f"{100 * produce / (consume + ack):.0f}% of its rate by CPU (60% takes "
            f"at most {produce / 0.6:.1f} us)"
        )
        floor_consume, floor_ack = (total(phase, "floor") for phase in SINGLES[1:])
        if floor_consume and floor_ack:
            bare = floor_consume + floor_ack
            lines.append(
                f"  the floor's consume + ack {floor_consume:.1f} + {floor_ack:.1f} "
                f"= {bare:.1f} us: {100 * produce / bare:.0f}% of Narad's single "
                f"produce by CPU; Narad's take {(consume + ack) / bare:.2f} times it"
            )
        # Each turn that wrote ends in an fsync, whatever it carried.
        single = {p.split()[1]: costs[(p, "narad")] for p in SINGLES}
        lines.append(
            "  Valkey's turns a message: "
            + ", ".join(f"{n} {c.per(c.turns):.2f}" for n, c in single.items())
            + "; its kernel time a turn: "
            + ", ".join(
                f"{n} {1e6 * c.valkey_system / max(c.turns, 1):.0f} us"
                for n, c in single.items()
            )
        )
    return lines


def loop_bounds(narad: Cost | None, floor: Cost | None) -> list[str]:
    """The flow by Valkey's event loop: each side's share of time it kept
    the loop busy, and its loop time per message, commands and the rest
    (sockets, the fsync after each turn that wrote); with the loop busy all
    the time, the rate is what that time per message allows, whatever CPU
    is left. Then the flow with Narad's commands at the floor's cost and
    the rest of its turns as they are."""
    if not (narad and floor and narad.loop and floor.loop):
        return []

    def parts(c: Cost) -> tuple[float, float, float]:
        commands = 1e6 * c.per(c.loop_commands)
        return 1e6 * c.per(c.loop), commands, 1e6 * c.per(c.loop - c.loop_commands)

    (n_loop, n_cmd, n_rest), (f_loop, f_cmd, f_rest) = parts(narad), parts(floor)
    at_floor_commands = n_rest + f_cmd
    return [
        f"the flow by Valkey's event loop, busy {narad.loop / narad.seconds:.0%} "
        f"(floor {floor.loop / floor.seconds:.0%}) of the time: {n_loop:.1f} us a "
        f"message, {n_cmd:.1f} in commands and {n_rest:.1f} in the rest of its "
        f"turns (floor {f_loop:.1f}: {f_cmd:.1f} and {f_rest:.1f}): "
        f"{100 * f_loop / n_loop:.0f}% of the floor's rate by loop time",
        f"  with Narad's commands at the floor's cost and the rest as it is, "
        f"{at_floor_commands:.1f} us: {100 * f_loop / at_floor_commands:.0f}% at "
        f"most; 85% takes at most {f_loop / 0.85:.1f} us a message",
    ]


def run_drivers(
    port: int,
    connections: int,
    seconds: float,
    factory: Callable[[], Callable[[tuple[int, bytes] | None], tuple[bytes, int]]],
) -> Run:
    """``bench/messaging.py``'s drivers for ``seconds``, every response
    counted (no warm-up left out: the counters around it see it all)."""
    drivers = {}
    run = Run()
    started = time.monotonic()
    until = started + seconds
    sel = selectors.DefaultSelector()
    for _ in range(connections):
        sock = socket.create_connection(("127.0.0.1", port))
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        driver = factory()
        drivers[sock] = driver
        sock.sendall(driver(None)[0])
        sock.setblocking(False)
        sel.register(sock, selectors.EVENT_READ, bytearray())
    while drivers:
        for key, _ in sel.select(timeout=5.0):
            sock, buf = key.fileobj, key.data
            chunk = sock.recv(1 << 20)
            if not chunk:
                raise ConnectionError("server closed a keep-alive connection")
            buf += chunk
            end = buf.find(b"\r\n\r\n")
            if end < 0:
                continue
            head = bytes(buf[:end])
            match = _LENGTH.search(head)
            length = int(match[1]) if match else 0
            if len(buf) < end + 4 + length:
                continue
            status = int(head[9:12])
            body = bytes(buf[end + 4 : end + 4 + length])
            del buf[: end + 4 + length]
            run.requests += 1
            run.reply_bytes += end + 4 + length
            run.statuses[status] += 1
            data, count = drivers[sock]((status, body))
            run.messages += count
            if time.monotonic() >= until:
                sel.unregister(sock)
                sock.close()
                del drivers[sock]
            else:
                sock.setblocking(True)
                sock.sendall(data)
                sock.setblocking(False)
    sel.close()
    run.seconds = time.monotonic() - started
    return run
