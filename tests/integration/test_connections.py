"""Many idle long polls and slow clients on one node (gevent worker class).

A lean CI version of ``bench/messaging.py``'s waiters and slowloris phases:
hundreds of connections instead of thousands, short timeouts, no timing
assertions (the bench measures those).
"""

from __future__ import annotations

import json
import os
import resource
import selectors
import signal
import socket
import threading
import time
from collections import Counter
from email.utils import parsedate_to_datetime
from pathlib import Path

import pytest
import redis

from tests.httpclient import ADMIN
from tests.httpclient import basic
from tests.nodes import Node
from tests.nodes import tcp_url

WAITERS = 300
# The head of every request but the probes: the test node's root admin.
HEAD = f"Host: t\r\nAuthorization: {basic(*ADMIN)}\r\n"


def raw(node: Node) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", node.port), timeout=30)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def read_response(sock: socket.socket) -> tuple[int, dict[str, str], bytes]:
    """One response off ``sock``: (status, lowercased headers, body)."""
    buf = b""
    while b"\r\n\r\n" not in buf:
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError(f"closed after {buf!r}")
        buf += chunk
    head, _, body = buf.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = dict(
        (name.strip().lower(), value.strip())
        for name, _, value in (line.partition(":") for line in lines[1:])
    )
    length = int(headers.get("content-length", 0))
    while len(body) < length:
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError("closed mid-body")
        body += chunk
    return int(lines[0].split()[1]), headers, body


def closed(sock: socket.socket) -> bool:
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True


def stored(http, topic: str) -> int:
    stats = http.get(f"/v1/topics/{topic}").json()["partition_stats"]
    return sum(p["next_offset"] for p in stats)


def storage_clients(valkey) -> int:
    client = redis.Redis(port=valkey.port)
    try:
        return len(client.client_list())
    finally:
        client.close()


@pytest.fixture(scope="module")
def strict_node(valkey, tmp_path_factory):
    """A node with short client deadlines and a small connection cap."""
    node = Node(
        tmp_path_factory.mktemp("strict"),
        storage_url=tcp_url(valkey),
        workers=1,
        env={
            "NARAD_SERVER_HEADER_TIMEOUT": "1",
            "NARAD_SERVER_BODY_TIMEOUT": "1",
            "NARAD_SERVER_BODY_MIN_RATE": "1000",
            "NARAD_SERVER_KEEPALIVE": "5",
            "NARAD_SERVER_MAX_CONNECTIONS": "600",
            "NARAD_PLUGINS_REDIS_POOL_SIZE": "8",
        },
    ).start()
    yield node
    node.stop()


def make(http, topic: str) -> None:
    assert http.post("/v1/topics", {"name": topic, "partitions": 2}).status == 201


def test_hundreds_of_idle_waiters_hold_no_storage_connection(
    strict_node, valkey, topic
):
    http = strict_node.client()
    make(http, topic)
    make(http, topic + "-other")
    before = storage_clients(valkey)
    request = (
        f"GET /v1/topics/{topic}/consume?wait=3s HTTP/1.1\r\n{HEAD}\r\n"
    ).encode()
    socks = []
    for _ in range(WAITERS):
        sock = raw(strict_node)
        sock.sendall(request)
        socks.append(sock)
    time.sleep(0.5)  # let them reach their long poll
    # Thousands of greenlets wait; health and other clients' produces pass.
    assert http.get("/healthz").status == 200
    assert http.get("/readyz").status == 200
    assert http.post(f"/v1/topics/{topic}-other/produce", b"{}").status == 202
    # Waiting holds no storage connection: the pool (8) bounds them all.
    assert storage_clients(valkey) <= before + 8 + 1
    statuses = Counter(read_response(sock)[0] for sock in socks)
    assert statuses == {204: WAITERS}
    # And woken at once when a message comes: exactly one of them gets it.
    for sock in socks:
        sock.sendall(request)
    time.sleep(0.5)
    assert http.post(f"/v1/topics/{topic}/produce", b'{"n": 1}').status == 202
    answers = [read_response(sock) for sock in socks]
    assert Counter(a[0] for a in answers) == {200: 1, 204: WAITERS - 1}
    for sock in socks:
        sock.close()
    http.close()


def test_headers_too_slow_get_408_json_and_a_closed_connection(strict_node):
    sock = raw(strict_node)
    sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: t\r\nX-Slow: ")
    other = strict_node.client()
    assert other.get("/healthz").status == 200  # others notice nothing
    status, headers, body = read_response(sock)
    assert status == 408
    assert headers["connection"] == "close"
    assert "server.header_timeout" in json.loads(body)["error"]
    assert closed(sock)
    [line] = strict_node.access_lines(headers["x-request-id"])
    assert " 408 " in line
    other.close()


def test_a_connection_that_sends_nothing_is_closed_quietly(strict_node):
    sock = raw(strict_node)
    assert sock.recv(1) == b""  # no response: nothing of a request came


def test_body_too_slow_gets_408_and_nothing_is_stored(strict_node, topic):
    http = strict_node.client()
    make(http, topic)
    sock = raw(strict_node)
    sock.sendall(
        f"POST /v1/topics/{topic}/produce HTTP/1.1\r\n{HEAD}"
        f"Content-Length: 100000\r\n\r\n{{".encode()
    )
    status, headers, body = read_response(sock)
    assert status == 408
    assert headers["connection"] == "close"
    assert "server.body_timeout" in json.loads(body)["error"]
    assert closed(sock)
    assert stored(http, topic) == 0
    http.close()


def test_a_storage_stall_before_the_body_is_read_is_not_a_slow_client(tmp_path):
    """A user's first request reads their record before its body; while the
    storage stalls past body_timeout, a body sent at once must not get 408
    (the client was not slow: the server had not read it yet)."""
    from tests.nodes import start_valkey

    storage = start_valkey(tmp_path / "valkey")
    node = Node(
        tmp_path,
        storage_url=tcp_url(storage),
        workers=1,
        env={"NARAD_SERVER_BODY_TIMEOUT": "1"},
    ).start()
    http = node.client()
    try:
        make(http, "stalled")
        user = {"action": "produce", "patterns": ["stalled"]}
        created = http.post(
            "/v1/users",
            {"username": "bob", "password": "bob-password", "grants": [user]},
        )
        assert created.status == 201, created.data
        payload = json.dumps({"x": "a" * 200_000}).encode()
        pid = storage.process.pid
        os.kill(pid, signal.SIGSTOP)
        # Past body_timeout, well within the storage client's socket timeout.
        resume = threading.Timer(2.0, os.kill, (pid, signal.SIGCONT))
        resume.start()
        try:
            sock = raw(node)
            sock.sendall(
                b"POST /v1/topics/stalled/produce HTTP/1.1\r\nHost: x\r\n"
                b"Authorization: " + basic("bob", "bob-password").encode() + b"\r\n"
                b"Content-Length: %d\r\n\r\n%s" % (len(payload), payload)
            )
            status, _, body = read_response(sock)
            sock.close()
        finally:
            resume.join()
            os.kill(pid, signal.SIGCONT)
        assert status == 202, body
        assert stored(http, "stalled") == 1
    finally:
        http.close()
        node.stop()
        storage.stop()


def test_a_body_at_the_minimum_rate_is_accepted(strict_node, topic):
    http = strict_node.client()
    make(http, topic)
    payload = b'"' + b"x" * 1998 + b'"'
    sock = raw(strict_node)
    sock.sendall(
        f"POST /v1/topics/{topic}/produce HTTP/1.1\r\n{HEAD}"
        f"Content-Length: {len(payload)}\r\n\r\n".encode()
    )
    # 2,000 bytes over ~2 s: past body_timeout (1 s), but each second of it
    # brings the 1,000 bytes body_min_rate asks for.
    for start in range(0, len(payload), 250):
        sock.sendall(payload[start : start + 250])
        time.sleep(0.2)
    assert read_response(sock)[0] == 202
    assert stored(http, topic) == 1
    sock.close()
    http.close()


def test_a_body_cut_short_is_not_stored(strict_node, topic):
    http = strict_node.client()
    make(http, topic)
    sock = raw(strict_node)
    sock.sendall(
        f"POST /v1/topics/{topic}/produce HTTP/1.1\r\n{HEAD}"
        f'Content-Length: 100\r\n\r\n{{"cut": '.encode()
    )
    sock.close()
    time.sleep(0.5)
    assert stored(http, topic) == 0
    http.close()


def test_kept_alive_connection_idles_past_header_timeout_then_is_served(
    strict_node,
):
    sock = raw(strict_node)
    sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n")
    assert read_response(sock)[0] == 200
    time.sleep(1.5)  # idle longer than header_timeout, within keepalive
    sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n")
    assert read_response(sock)[0] == 200
    sock.close()


def test_each_response_carries_the_date_it_was_sent(strict_node):
    sock = raw(strict_node)
    dates = []
    for _ in range(2):
        before = time.time()
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n")
        status, headers, _ = read_response(sock)
        after = time.time()
        assert status == 200
        sent = parsedate_to_datetime(headers["date"]).timestamp()
        assert int(before) <= sent <= after
        dates.append(sent)
        time.sleep(1.1)
    assert dates[1] > dates[0]  # formatted again once the second moved on
    sock.close()


@pytest.mark.parametrize(
    "connection",
    [
        "Connection: TE, close",
        "Connection: keep-alive, close",
        "Connection: TE\r\nConnection: close",
    ],
    ids=["te-close", "keep-alive-close", "two-fields"],
)
def test_close_among_other_connection_options_is_honoured(strict_node, connection):
    """RFC 9112 9.6: a ``close`` option (Perl's LWP sends ``TE, close``)
    closes the connection after the response, however the field lists it."""
    sock = raw(strict_node)
    sock.settimeout(3)  # under the node's keepalive (5 s)
    sock.sendall(f"GET /healthz HTTP/1.1\r\nHost: t\r\n{connection}\r\n\r\n".encode())
    status, headers, _ = read_response(sock)
    assert (status, headers["connection"]) == (200, "close")
    assert closed(sock)
    sock.close()


@pytest.fixture
def capped_node(valkey, tmp_path):
    node = Node(
        tmp_path,
        storage_url=tcp_url(valkey),
        workers=1,
        env={"NARAD_SERVER_MAX_CONNECTIONS": "20"},
    ).start()
    yield node
    node.stop()


def test_past_the_connection_cap_only_health_is_answered(capped_node, topic):
    http = capped_node.client()
    make(http, topic)
    request = f"GET /v1/topics/{topic}/consume?wait=5s HTTP/1.1\r\n{HEAD}\r\n"
    held = []
    for _ in range(20):  # with http's own: one past the cap
        sock = raw(capped_node)
        sock.sendall(request.encode())
        held.append(sock)
    time.sleep(0.5)
    for path in ("/healthz", "/readyz"):
        probe = raw(capped_node)
        probe.sendall(f"GET {path} HTTP/1.1\r\nHost: t\r\n\r\n".encode())
        status, headers, _ = read_response(probe)
        assert status == 200
        assert headers["connection"] == "close"
        probe.close()
    extra = raw(capped_node)
    head = f"GET /v1/topics/{topic} HTTP/1.1\r\nX-Request-ID: trace-7\r\n{HEAD}\r\n"
    extra.sendall(head.encode())
    status, headers, body = read_response(extra)
    assert (status, headers["x-request-id"]) == (503, "trace-7")
    assert "server.max_connections" in json.loads(body)["error"]
    [line] = capped_node.access_lines(headers["x-request-id"])
    assert " GET - - 503 " in line
    for sock in held:
        sock.close()
    http.close()


def test_sigterm_answers_waiters_now_and_refuses_new_connections(valkey, tmp_path):
    node = Node(tmp_path, storage_url=tcp_url(valkey), workers=2).start()
    topic = "shutdown"
    http = node.client()
    make(http, topic)
    http.close()
    request = f"GET /v1/topics/{topic}/consume?wait=10s HTTP/1.1\r\n{HEAD}\r\n"
    waiters = []
    for _ in range(50):
        sock = raw(node)
        sock.sendall(request.encode())
        waiters.append(sock)
    idle = raw(node)  # a kept-alive connection between requests
    idle.sendall(b"GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n")
    assert read_response(idle)[0] == 200
    time.sleep(0.5)
    node.process.send_signal(signal.SIGTERM)
    sel = selectors.DefaultSelector()
    for sock in waiters:
        sel.register(sock, selectors.EVENT_READ)
    # Every waiter is answered long before its 10 s wait is over.
    answered = 0
    while answered < len(waiters) and sel.select(timeout=5):
        for key, _ in sel.select(timeout=0):
            status, headers, _ = read_response(key.fileobj)
            assert status == 204
            assert headers["connection"] == "close"
            sel.unregister(key.fileobj)
            answered += 1
    assert answered == len(waiters)
    assert closed(idle)  # idle keep-alive connections are closed
    # A new connection is refused at once, or served: never left waiting.
    try:
        late = raw(node)
    except ConnectionRefusedError:
        pass
    else:
        late.sendall(b"GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n")
        assert read_response(late)[0] == 200
        late.close()
    node.process.wait(20)
    for sock in waiters:
        sock.close()


def test_workers_reserve_well_under_a_gibibyte_of_virtual_memory(node):
    for pid in node.worker_pids():
        status = Path(f"/proc/{pid}/status").read_text()
        if "valkey" in Path(f"/proc/{pid}/comm").read_text():
            continue
        size_kib = int(status.split("VmSize:")[1].split()[0])
        assert size_kib * 1024 < 2**30, (pid, size_kib)


def test_open_files_limit_is_raised_for_the_workers(node):
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    for pid in node.worker_pids():
        limits = Path(f"/proc/{pid}/limits").read_text()
        line = next(x for x in limits.splitlines() if x.startswith("Max open files"))
        assert int(line.split()[3]) == hard, line


# A 64-branch oneOf: high-cost, so its validations go to the capacity slots
# and the native thread pool. Each branch walks every property: ~2 s for the
# payload below.
UNION = {
    "oneOf": [
        {
            "type": "object",
            "additionalProperties": {"type": "string", "pattern": "^x+$"},
            "required": [f"k{i}"],
        }
        for i in range(64)
    ]
}


def test_a_long_validation_does_not_hold_up_the_event_loop(strict_node, topic):
    http = strict_node.client()
    assert (
        http.post("/v1/topics", {"name": topic, "partitions": 1, "schema": UNION})
    ).status == 201
    payload = json.dumps(
        {"k7": "x", **{f"f{i}": "x" * 64 for i in range(3000)}}
    ).encode()
    producer = raw(strict_node)
    producer.sendall(
        f"POST /v1/topics/{topic}/produce HTTP/1.1\r\n{HEAD}"
        f"Content-Length: {len(payload)}\r\n\r\n".encode()
        + payload
    )
    time.sleep(0.2)  # the validation is under way
    # One worker: health and topic reads are served while it runs.
    assert http.get("/healthz").status == 200
    assert http.get(f"/v1/topics/{topic}").status == 200
    sel = selectors.DefaultSelector()
    sel.register(producer, selectors.EVENT_READ)
    assert not sel.select(timeout=0), "the long validation finished first"
    assert read_response(producer)[0] == 202
    producer.close()
    http.close()


def test_a_body_of_tiny_chunks_does_not_hold_up_the_event_loop(strict_node, topic):
    """A client that sends 1 MiB as 1-byte chunks (6 MiB of framing) faster
    than the worker parses it: its reads never waited, and the worker's other
    connections waited seconds, until the whole body was parsed."""
    http = strict_node.client()
    make(http, topic)
    head = (
        f"POST /v1/topics/{topic}/produce HTTP/1.1\r\n{HEAD}"
        "Transfer-Encoding: chunked\r\n\r\n"
    )
    body = b"1\r\nx\r\n" * (1024 * 1024) + b"0\r\n\r\n"
    producer = raw(strict_node)
    producer.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 65536)
    sender = threading.Thread(target=producer.sendall, args=(head.encode() + body,))
    sender.start()
    time.sleep(0.2)  # the body is being parsed
    # One worker: health is answered while the body still arrives.
    assert http.get("/healthz").status == 200
    assert sender.is_alive(), "the whole body was read first"
    sender.join()
    assert read_response(producer)[0] == 202
    producer.close()
    http.close()


def test_a_worker_told_to_stop_while_it_starts_stops(valkey, tmp_path):
    """A reload (HUP) starts new workers; one told to stop (TERM) before it
    set its own signal handlers must stop too, not serve on until the
    graceful timeout (20 s) has it killed."""
    node = Node(tmp_path, storage_url=tcp_url(valkey), workers=1).start()
    try:
        before = set(node.worker_pids())
        node.process.send_signal(signal.SIGHUP)
        deadline = time.monotonic() + 10
        while not (fresh := set(node.worker_pids()) - before):
            assert time.monotonic() < deadline, "no new worker"
            time.sleep(0.001)
        (worker,) = fresh
        os.kill(worker, signal.SIGTERM)  # within its start: gevent patches first
        deadline = time.monotonic() + 10
        while Path(f"/proc/{worker}").exists() and _running(worker):
            assert time.monotonic() < deadline, "the worker served on"
            time.sleep(0.05)
    finally:
        node.stop()


def _running(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie waiting for its parent does not)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"
