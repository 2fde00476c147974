"""Load generators for bench/messaging.py, each run as its own process.

Run: ``python bench/loadgen.py MODE PORT [options]``. Every mode prints one
JSON line ``{"ready": ...}`` once its connections are up, runs until its
standard input closes, then prints one JSON line of results and exits.

- ``waiters``: ``--count`` keep-alive connections long-polling
  ``consume?wait=10s`` on ``--topics`` topics (round robin), asking again
  after every answer (``--path`` another route: ``{topic}`` in it is the
  topic's number). They connect evenly over ``--ramp`` seconds (the wait,
  by default), so their deadlines, and so their next polls, are spread as
  those of consumers started at different times: the node sees a steady
  count/wait polls per second. Reports the answers by status and how long
  each 204 took.
- ``slowloris N``: N connections that never finish a request: half send a
  request line and then one header byte every ``--every`` seconds, half send
  a whole head announcing a 1000-byte produce body and then trickle the body.
  Each one closed by the server is replaced at once. Reports what the server
  answered before closing and after how long.
- ``probe``: ``GET /healthz`` on a fresh connection every 20 ms, as a load
  balancer's health checker would. Reports the latency percentiles.

One thread, non-blocking sockets on an epoll loop (``selectors``), so ten
thousand connections cost one process a fraction of a core. Client sockets
bind to 127.0.0.2-127.0.0.9 in turn, so they never run short of source ports.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import itertools
import json
import resource
import selectors
import socket
import statistics
import sys
import time
from collections import Counter

SOURCES = [f"127.0.0.{i}" for i in range(2, 10)]
PROBE_EVERY_S = 0.02
CONNECT_BURST = 500  # connections opened per loop turn while ramping up


def raise_open_files_limit() -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def open_socket(port: int, index: int) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setblocking(False)
    sock.bind((SOURCES[index % len(SOURCES)], 0))
    err = sock.connect_ex(("127.0.0.1", port))
    if err not in (0, errno.EINPROGRESS):
        sock.close()
        raise OSError(err, f"connect: {errno.errorcode.get(err, err)}")
    return sock


def parse(buf: bytearray) -> tuple[int, int] | None:
    """(status, bytes the whole response takes) once ``buf`` holds one."""
    end = buf.find(b"\r\n\r\n")
    if end < 0:
        return None
    head = bytes(buf[:end]).lower()
    length = 0
    at = head.find(b"\r\ncontent-length:")
    if at >= 0:
        length = int(head[at + 17 :].split(b"\r\n", 1)[0])
    if len(buf) < end + 4 + length:
        return None
    return int(head[9:12]), end + 4 + length


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    values = sorted(values)
    return values[min(len(values) - 1, int(len(values) * q))]


class Loop:
    """An epoll loop that also notices standard input closing."""

    def __init__(self) -> None:
        self.sel = selectors.DefaultSelector()
        self.sel.register(sys.stdin, selectors.EVENT_READ, None)
        self.running = True

    def events(self, timeout: float):
        for key, mask in self.sel.select(timeout):
            if key.data is None:
                if not sys.stdin.buffer.read1(4096):
                    self.running = False
                continue
            yield key.data, mask


# -- waiters ------------------------------------------------------------------


class Waiter:
    __slots__ = ("buf", "path", "sent", "sock")

    def __init__(self, sock: socket.socket, path: bytes) -> None:
        self.sock, self.path, self.buf, self.sent = sock, path, bytearray(), 0.0
        # sent stays 0.0 until the connection is up and its first request out


def credentials(authorization: str | None) -> str:
    """The header line a request carries its credentials in, or nothing."""
    return f"Authorization: {authorization}\r\n" if authorization else ""


def waiters(
    port: int, count: int, topics: int, path: str, wait: str, ramp: float, auth: str
) -> dict:
    loop = Loop()
    started = time.monotonic()
    requests = [
        f"GET {path.format(topic=i)}?wait={wait} HTTP/1.1\r\n"
        f"Host: bench\r\n{auth}\r\n".encode()
        for i in range(topics)
    ]
    statuses: Counter = Counter()
    waited: list[float] = []
    errors: Counter = Counter()
    pending: list[int] = []  # replacements for connections lost
    replacements = itertools.count(count)
    waiting = 0  # connections up, with a request out
    ready_sent = False

    def send(w: Waiter) -> None:
        nonlocal waiting
        if not w.sent:
            waiting += 1
        w.sent = time.monotonic()
        try:
            w.sock.send(w.path)  # a few dozen bytes: the socket buffer takes them
        except OSError as exc:
            lost(w, exc.strerror or "send error")

    def lost(w: Waiter, why: str) -> None:
        nonlocal waiting
        errors[why] += 1
        loop.sel.unregister(w.sock)
        w.sock.close()
        if w.sent:
            waiting -= 1
        pending.append(next(replacements))

    opened = 0  # of the first count connections
    while loop.running:
        due = count
        if ramp > 0:
            due = min(count, int(count * (time.monotonic() - started) / ramp) + 1)
        batch = list(range(opened, min(due, opened + CONNECT_BURST)))
        opened += len(batch)
        batch += pending  # replacements go at once
        pending.clear()
        for index in batch:
            try:
                sock = open_socket(port, index)
            except OSError as exc:
                errors[f"connect {exc.strerror}"] += 1
                pending.append(next(replacements))
                continue
            w = Waiter(sock, requests[index % topics])
            loop.sel.register(sock, selectors.EVENT_WRITE, w)
        for w, mask in loop.events(0.01 if opened < count else 1.0):
            if mask & selectors.EVENT_WRITE:  # connected (or failed)
                err = w.sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
                if err:
                    lost(w, f"connect {errno.errorcode.get(err, err)}")
                    continue
                loop.sel.modify(w.sock, selectors.EVENT_READ, w)
                send(w)
                continue
            try:
                chunk = w.sock.recv(65536)
            except OSError as exc:
                lost(w, exc.strerror or "recv error")
                continue
            if not chunk:
                lost(w, "closed by server")
                continue
            w.buf += chunk
            parsed = parse(w.buf)
            if parsed is None:
                continue
            status, size = parsed
            del w.buf[:size]
            statuses[status] += 1
            if status == 204:
                waited.append(time.monotonic() - w.sent)
            send(w)
        if not ready_sent and waiting >= count:
            print(json.dumps({"ready": waiting}), flush=True)
            ready_sent = True
    return {
        "connections": waiting,
        "statuses": {str(k): v for k, v in statuses.items()},
        "errors": dict(errors),
        "wait_204_s": {
            "min": min(waited, default=float("nan")),
            "p50": percentile(waited, 0.5),
            "max": max(waited, default=float("nan")),
        },
    }


# -- slowloris ----------------------------------------------------------------


class Slow:
    __slots__ = ("buf", "opened", "sock")

    def __init__(self, sock: socket.socket) -> None:
        self.sock, self.buf, self.opened = sock, bytearray(), time.monotonic()


def slowloris(port: int, count: int, every: float, auth: str) -> dict:
    loop = Loop()
    heads = [
        b"GET /healthz HTTP/1.1\r\nHost: bench\r\nX-Slow: ",
        b"POST /v1/topics/bench-slow/produce HTTP/1.1\r\nHost: bench\r\n"
        + auth.encode()
        + b"Content-Length: 1000\r\n\r\n{",
    ]
    answers: Counter = Counter()
    lifetimes: list[float] = []
    errors: Counter = Counter()
    conns: dict[socket.socket, Slow] = {}
    pending = list(range(count))
    ready_sent = False
    next_drip = time.monotonic() + every

    def close(s: Slow, answer: str) -> None:
        answers[answer] += 1
        lifetimes.append(time.monotonic() - s.opened)
        loop.sel.unregister(s.sock)
        s.sock.close()
        del conns[s.sock]
        pending.append(len(lifetimes))  # replace it at once

    while loop.running:
        for index in pending[:CONNECT_BURST]:
            try:
                sock = open_socket(port, index)
            except OSError as exc:
                errors[f"connect {exc.strerror}"] += 1
                continue
            s = conns[sock] = Slow(sock)
            s.buf = bytearray(heads[index % 2])  # still to send
            loop.sel.register(sock, selectors.EVENT_WRITE, s)
        del pending[:CONNECT_BURST]
        for s, mask in loop.events(0.05 if pending else 0.5):
            if mask & selectors.EVENT_WRITE:
                err = s.sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
                if err:
                    errors[f"connect {errno.errorcode.get(err, err)}"] += 1
                    close(s, "not connected")
                    continue
                try:
                    s.sock.send(s.buf)
                except OSError:
                    close(s, "closed, no answer")
                    continue
                s.buf = bytearray()
                loop.sel.modify(s.sock, selectors.EVENT_READ, s)
                continue
            try:
                chunk = s.sock.recv(65536)
            except OSError:
                chunk = b""
            if chunk:
                s.buf += chunk
                continue
            parsed = parse(s.buf)
            close(s, str(parsed[0]) if parsed else "closed, no answer")
        now = time.monotonic()
        if now >= next_drip:
            next_drip = now + every
            for s in list(conns.values()):
                if not s.buf:  # the server said nothing yet
                    with contextlib.suppress(OSError):  # closed: the read side tells
                        s.sock.send(b"x")
        if not ready_sent and not pending and len(conns) >= count:
            print(json.dumps({"ready": len(conns)}), flush=True)
            ready_sent = True
    return {
        "connections": len(conns),
        "closed_by_server": dict(answers),
        "errors": dict(errors),
        "lifetime_s": {
            "min": min(lifetimes, default=float("nan")),
            "p50": percentile(lifetimes, 0.5),
            "max": max(lifetimes, default=float("nan")),
        },
    }


# -- probe --------------------------------------------------------------------


def probe(port: int) -> dict:
    latencies: list[float] = []
    failures: Counter = Counter()
    request = b"GET /healthz HTTP/1.1\r\nHost: bench\r\nConnection: close\r\n\r\n"
    sel = selectors.DefaultSelector()
    sel.register(sys.stdin, selectors.EVENT_READ)
    print(json.dumps({"ready": 1}), flush=True)
    next_at = time.monotonic()
    index = 0
    while True:
        if sel.select(max(0.0, next_at - time.monotonic())):
            if not sys.stdin.buffer.read1(4096):
                break
            continue
        next_at += PROBE_EVERY_S
        index += 1
        start = time.perf_counter()
        try:
            with socket.create_connection(
                ("127.0.0.1", port),
                timeout=10,
                source_address=(SOURCES[index % len(SOURCES)], 0),
            ) as sock:
                sock.sendall(request)
                buf = bytearray()
                while (parsed := parse(buf)) is None:
                    chunk = sock.recv(4096)
                    if not chunk:
                        break
                    buf += chunk
        except OSError as exc:
            failures[exc.strerror or type(exc).__name__] += 1
            continue
        if parsed is None or parsed[0] != 200:
            failures[f"status {parsed and parsed[0]}"] += 1
            continue
        latencies.append(time.perf_counter() - start)
        next_at = max(next_at, time.monotonic())
    ms = [x * 1000 for x in latencies]
    return {
        "probes": len(ms),
        "failures": dict(failures),
        "p50_ms": statistics.median(ms) if ms else float("nan"),
        "p99_ms": percentile(ms, 0.99),
        "max_ms": max(ms, default=float("nan")),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", choices=("waiters", "slowloris", "probe"))
    parser.add_argument("port", type=int)
    parser.add_argument("--count", type=int, default=10_000)
    parser.add_argument("--topics", type=int, default=10)
    parser.add_argument("--path", default="/v1/topics/bench-wait-{topic}/consume")
    parser.add_argument("--wait", default="10s")
    parser.add_argument("--ramp", type=float, help="seconds (default: the wait)")
    parser.add_argument("--every", type=float, default=2.0)
    parser.add_argument(
        "--authorization", help="Authorization header of the waiters and slowloris"
    )
    args = parser.parse_args()
    raise_open_files_limit()
    if args.mode == "waiters":
        ramp = args.ramp
        if ramp is None:
            ramp = int(args.wait[:-1]) if args.wait.endswith("s") else 0
        auth = credentials(args.authorization)
        result = waiters(
            args.port, args.count, args.topics, args.path, args.wait, ramp, auth
        )
    elif args.mode == "slowloris":
        auth = credentials(args.authorization)
        result = slowloris(args.port, args.count, args.every, auth)
    else:
        result = probe(args.port)
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
