"""Client deadlines on one connection, and the offload pool under gevent."""

from __future__ import annotations

import socket
import subprocess
import sys
import textwrap
import threading
import time
from email.utils import parsedate_to_datetime
from pathlib import Path

import gunicorn.config
import gunicorn.workers.sync
import pytest

from narad.errors import RequestTimeout
from narad.serve import offload
from narad.serve.workers import Connection
from narad.serve.workers import HttpDate
from narad.serve.workers import Limits
from narad.serve.workers import freeze_settings
from narad.serve.workers import refusal

ROOT = Path(__file__).resolve().parents[2]
LIMITS = Limits(header=0.2, keepalive=0.4, body=0.2, min_rate=1000)


class Request:
    must_close = False

    def force_close(self) -> None:
        self.must_close = True


@pytest.fixture
def pair():
    server, client = socket.socketpair()
    yield Connection(server, LIMITS, probes_only=False), client
    server.close()
    client.close()


def test_nothing_sent_reads_as_the_end_of_the_connection(pair):
    conn, _ = pair
    assert conn.recv(100) == b""


def test_a_head_started_but_not_finished_in_time_is_late(pair):
    conn, client = pair
    client.sendall(b"GET / HTTP/1.1\r\n")
    assert conn.recv(100) == b"GET / HTTP/1.1\r\n"
    with pytest.raises(RequestTimeout, match=r"server\.header_timeout"):
        conn.recv(100)


def test_a_body_keeps_going_at_the_minimum_rate_and_no_slower(pair):
    conn, client = pair
    request = Request()
    conn.begin_request(request)
    client.sendall(b"x" * 500)  # half a second's worth of allowance
    assert conn.recv(1000) == b"x" * 500
    with pytest.raises(RequestTimeout, match=r"server\.body_min_rate"):
        conn.recv(1000)
    assert request.must_close


def test_time_before_the_body_is_read_is_not_the_clients(pair):
    """The app may take a while before it reads the body (a storage call, a
    password hash); a body the client sent at once is not late for that."""
    conn, client = pair
    conn.begin_request(Request())
    client.sendall(b"x" * 100)
    time.sleep(LIMITS.body * 1.5)
    assert conn.recv(1000) == b"x" * 100
    # From the first read on, the body's own deadlines hold.
    with pytest.raises(RequestTimeout, match=r"server\.body_min_rate"):
        conn.recv(1000)


def test_a_body_cut_short_ends_like_a_closed_socket(pair):
    # The body reader (narad.http.body) counts the bytes and refuses it.
    conn, client = pair
    conn.begin_request(Request())
    client.close()
    assert conn.recv(100) == b""


def test_after_a_request_the_next_one_may_idle_for_keepalive(pair):
    conn, client = pair
    conn.begin_request(Request())
    conn.end_request()
    client.sendall(b"G")
    assert conn.recv(1) == b"G"  # the head's own allowance starts now
    client.sendall(b"ET / HTTP/1.1\r\n\r\n")
    assert conn.recv(100) == b"ET / HTTP/1.1\r\n\r\n"


def test_100_continue_goes_out_at_the_bodys_first_read_and_once(pair):
    """Expect: 100-continue is answered when the app reads the body, after
    its checks: not held like a response head, not sent twice."""
    conn, client = pair
    client.settimeout(1)
    conn.begin_request(Request(), expects_continue=True)
    assert conn.awaits_continue
    client.sendall(b"abc")
    assert conn.recv(100) == b"abc"
    assert client.recv(100) == b"HTTP/1.1 100 Continue\r\n\r\n"
    assert not conn.awaits_continue
    client.sendall(b"def")
    assert conn.recv(100) == b"def"
    conn.sendall(b"HTTP/1.1 202 Accepted\r\n\r\n")  # the held head
    conn.flush()
    assert client.recv(100) == b"HTTP/1.1 202 Accepted\r\n\r\n"


def test_no_100_continue_unless_awaited_or_before_the_body_is_read(pair):
    conn, client = pair
    client.setblocking(False)
    conn.begin_request(Request())
    client.sendall(b"x")
    assert conn.recv(100) == b"x"
    with pytest.raises(BlockingIOError):
        client.recv(100)
    conn.end_request()
    conn.begin_request(Request(), expects_continue=True)
    conn.end_request()  # answered without reading the body
    assert not conn.awaits_continue
    with pytest.raises(BlockingIOError):
        client.recv(100)


def test_a_client_not_taking_its_response_is_dropped():
    server, client = socket.socketpair()
    fast = Limits(header=0.2, keepalive=0.4, body=0.2, min_rate=1e9)
    conn = Connection(server, fast, probes_only=False)
    with pytest.raises(BrokenPipeError):
        conn.sendall(b"x" * 10_000_000)  # never read by the client
    server.close()
    client.close()


def test_a_response_larger_than_the_socket_buffer_arrives_whole():
    server, client = socket.socketpair()
    conn = Connection(
        server, Limits(header=1, keepalive=1, body=5, min_rate=1e6), probes_only=False
    )
    data = bytes(range(256)) * 40_000  # 10 MB: one send takes part of it
    received = bytearray()

    def read():
        while chunk := client.recv(1 << 20):
            received.extend(chunk)

    reader = threading.Thread(target=read)
    reader.start()
    conn.sendall(data)
    server.close()
    reader.join(10)
    client.close()
    assert received == data


class Sends:
    """A socket that records each send."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.sent: list[bytes] = []

    def settimeout(self, seconds: float) -> None:
        self.sock.settimeout(seconds)

    def send(self, data: bytes) -> int:
        self.sent.append(bytes(data))
        return self.sock.send(data)

    def sendall(self, data: bytes) -> None:
        self.sent.append(bytes(data))
        self.sock.sendall(data)


def test_a_response_head_goes_out_with_the_first_body_bytes(pair):
    conn, _ = pair
    conn.sock = sends = Sends(conn.sock)
    conn.begin_request(Request())
    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\n")
    assert sends.sent == []
    conn.sendall(b"body")
    conn.sendall(b"more")
    conn.flush()
    assert sends.sent == [b"HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nbody", b"more"]


def test_a_head_without_a_body_goes_out_at_the_end_of_the_response(pair):
    conn, client = pair
    conn.sock = sends = Sends(conn.sock)
    conn.begin_request(Request())
    conn.sendall(b"HTTP/1.1 202 Accepted\r\n\r\n")
    conn.flush()
    assert sends.sent == [b"HTTP/1.1 202 Accepted\r\n\r\n"]
    conn.refuse(408, "Request Timeout", "late")  # after the response: not held
    assert len(sends.sent) == 2
    assert client.recv(1000).startswith(b"HTTP/1.1 202 Accepted\r\n\r\nHTTP/1.1 408")


def test_a_held_head_goes_out_before_a_file_sent_from_disk(pair, tmp_path):
    conn, client = pair
    (tmp_path / "f").write_bytes(b"file")
    conn.begin_request(Request())
    conn.sendall(b"HTTP/1.1 200 OK\r\n\r\n")
    with (tmp_path / "f").open("rb") as file:
        conn.sendfile(file)
    expected = b"HTTP/1.1 200 OK\r\n\r\nfile"
    received = b""
    while len(received) < len(expected):
        received += client.recv(1000)
    assert received == expected


def test_without_a_pool_work_runs_in_the_caller():
    assert offload.run(sum, [1, 2, 3]) == 6


def test_the_pool_runs_work_on_native_threads_and_keeps_the_loop_going():
    script = textwrap.dedent(
        """
        from gevent import monkey; monkey.patch_all()
        import _thread, gevent, threading
        from narad.serve import offload
        from narad.errors import InvalidPayload

        offload.start(2)
        assert monkey.get_original("_thread", "stack_size")() == 0  # restored
        main = threading.get_ident()
        ticks = []

        def tick():
            while True:
                ticks.append(1)
                gevent.sleep(0.001)

        def spin():
            import time
            end = time.monotonic() + 0.3
            while time.monotonic() < end:
                pass
            return monkey.get_original("_thread", "get_ident")()

        gevent.spawn(tick)
        assert offload.run(spin) != main
        assert len(ticks) >= 2, ticks  # the loop ran while the thread computed

        def refuse():
            raise InvalidPayload("no")

        try:
            offload.run(refuse)
        except InvalidPayload as exc:
            assert "no" in str(exc)
        else:
            raise AssertionError("the exception did not come back")
        print("ok")
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={"PYTHONPATH": f"{ROOT}:{ROOT / 'plugins'}", "PATH": "/usr/bin:/bin"},
        timeout=60,
    )
    assert out.stdout.strip() == "ok", out.stderr
    # The client's error came back to the caller: nothing printed it (gevent's
    # pool prints a traceback for any exception that leaves its task).
    assert "Traceback" not in out.stderr and "InvalidPayload" not in out.stderr


def test_the_date_header_is_formatted_once_a_second_as_gunicorn_formats_it():
    date = HttpDate()
    before = int(time.time())
    first = date()
    again = date()
    assert before <= parsedate_to_datetime(first).timestamp() <= time.time()
    # Within the second, the text formatted at its start; after it, a later one.
    assert again is first or parsedate_to_datetime(again) > parsedate_to_datetime(first)
    assert date(1_700_000_000.5) == gunicorn.util.http_date(1_700_000_000.5)
    assert date(1_700_000_000.5) == "Tue, 14 Nov 2023 22:13:20 GMT"


def test_a_worker_reads_each_gunicorn_setting_once():
    cfg = gunicorn.config.Config()
    cfg.set("workers", 3)
    cfg.set("keepalive", 7)
    freeze_settings(cfg)
    assert vars(cfg)["workers"] == 3 and vars(cfg)["keepalive"] == 7
    assert cfg.workers == 3  # found without Config.__getattr__
    for name, setting in cfg.settings.items():
        if not hasattr(gunicorn.config.Config, name):
            assert vars(cfg)[name] is setting.get()
    # Properties named after a setting still derive from it.
    assert cfg.worker_class is gunicorn.workers.sync.SyncWorker
    assert not cfg.is_ssl


# -- a plain request answered by the worker itself ------------------------------


class Wire:
    """A client socket that records what the worker does with it."""

    def __init__(self) -> None:
        self.events: list[object] = []

    def sendall(self, data: bytes) -> None:
        self.events.append(bytes(data))

    def shutdown(self, how: int) -> None:
        self.events.append("shutdown")

    def close(self) -> None:
        self.events.append("close")


class Boom(Exception):
    pass


def _body_then_boom(environ, start_response):
    start_response("200 OK", [("Content-Length", "10")])
    yield b"first"
    raise Boom


class _Closing(list):
    """A response iterable with ``close``, which the server must call."""

    closes: list[str] = []

    def close(self) -> None:
        self.closes.append("closed")


APPS = {
    "ok": lambda env, sr: [sr("200 OK", [("Content-Length", "2")]) and b"", b"ok"],
    "no content": lambda env, sr: [sr("204 No Content", [("X-A", "1")]) and b""],
    "chunked": lambda env, sr: [sr("200 OK", []) and b"", b"abc"],
    "raises before the head": lambda env, sr: (_ for _ in ()).throw(Boom()),
    "raises after the head": _body_then_boom,
    "exits before the head": lambda env, sr: (_ for _ in ()).throw(SystemExit()),
    "already handled": lambda env, sr: gunicorn.workers.base_async.ALREADY_HANDLED,
    "closable": lambda env, sr: _Closing([sr("200 OK", []) and b"", b"x"]),
}


class AccessLog(gunicorn.glogging.Logger):
    """gunicorn's logger with its access log kept: each line's request."""

    access_log_enabled = True

    def __init__(self, cfg) -> None:
        super().__init__(cfg)
        self.lines: list[tuple] = []

    def access(self, resp, req, environ, request_time) -> None:
        self.lines.append((resp.status, req.path, environ["PATH_INFO"]))
        assert request_time.total_seconds() >= 0


def _outcome(
    respond, app, *, max_requests: int, keepalive: int, alive: bool, access=False
):
    """What serving one plain request through ``respond`` does: what goes
    out on the socket, how the call ends, and the worker's state after."""
    from gunicorn.workers.ggevent import GeventWorker

    from narad.serve import plain
    from narad.serve.workers import NaradWorker

    cfg = gunicorn.config.Config()
    cfg.set("keepalive", keepalive)
    freeze_settings(cfg)
    hooks: list[str] = []
    vars(cfg)["pre_request"] = lambda worker, req: hooks.append("pre")
    vars(cfg)["post_request"] = lambda worker, req, env, resp: hooks.append(
        f"post {type(resp).__name__ if resp else None}"
    )
    worker = NaradWorker.__new__(NaradWorker)
    worker.cfg, worker.nr, worker.max_requests, worker.alive = (
        cfg,
        0,
        max_requests,
        alive,
    )
    worker.log = (AccessLog if access else gunicorn.glogging.Logger)(cfg)
    worker.wsgi = app
    worker.plain = plain.Plain(cfg)
    parser = plain.PlainParser(cfg, [b"GET /x HTTP/1.1\r\nHost: n\r\n\r\n"], ("c", 1))
    req = next(parser)
    wire = Wire()
    create = gunicorn.http.wsgi.create
    gunicorn.http.wsgi.create = lambda req, sock, client, server, cfg, *a: (
        worker.plain.create(req, sock, client, server)
    )
    try:
        if respond == "gunicorn":
            GeventWorker.handle_request(worker, ("127.0.0.1", 80), req, wire, ("c", 1))
        else:
            worker._respond(("127.0.0.1", 80), req, wire, ("c", 1))
        ended = "returned"
    except BaseException as exc:  # how it ends is compared
        ended = type(exc).__name__
    finally:
        gunicorn.http.wsgi.create = create
    closed, _Closing.closes[:] = list(_Closing.closes), []
    lines = getattr(worker.log, "lines", None)
    return wire.events, ended, hooks, worker.nr, worker.alive, closed, lines


@pytest.mark.parametrize("app", list(APPS))
@pytest.mark.parametrize(
    ("max_requests", "keepalive", "alive"),
    [(1000, 2, True), (1, 2, True), (1000, 0, True), (1000, 2, False)],
)
@pytest.mark.parametrize("access", [False, True])
def test_a_plain_request_is_answered_as_gunicorns_handle_request_answers_it(
    app, max_requests, keepalive, alive, access, monkeypatch
):
    """The worker's own answer to a plain request (NaradWorker._respond) and
    gunicorn's (GeventWorker.handle_request) write the same bytes, end the
    same way (returning, StopIteration to close, the app's error for a 500),
    run the same hooks and leave the worker in the same state."""
    monkeypatch.setattr(gunicorn.util, "http_date", lambda: "Fri, 04 Dec 2026 GMT")
    outcomes = [
        _outcome(
            way,
            APPS[app],
            max_requests=max_requests,
            keepalive=keepalive,
            alive=alive,
            access=access,
        )
        for way in ("gunicorn", "narad")
    ]
    assert outcomes[0] == outcomes[1]
    if access and APPS[app] is APPS["ok"]:
        assert outcomes[1][-1] == [("200 OK", "/x", "/x")]


def test_a_script_name_the_path_is_not_under_is_the_clients_400():
    from gunicorn.http.errors import ConfigurationProblem

    status, _, message = refusal(
        ConfigurationProblem("Request path '/a' does not start with SCRIPT_NAME '/b'")
    )
    assert status == 400 and "SCRIPT_NAME" in message
