"""Plain requests (narad.serve.plain) over real sockets against ``narad serve``.

The edge suite asks every request to close its connection, which takes
gunicorn's path; these keep connections alive, as clients do, so that the
short path serves them: several requests on one connection, pipelined or
not, mixed with requests gunicorn reads, bodies cut short or sent slowly.
"""

from __future__ import annotations

import json
import socket
import time
import uuid

import pytest

from tests.httpclient import ADMIN
from tests.httpclient import basic
from tests.integration.conftest import EDGE_BODY_TIMEOUT
from tests.replay import assert_replays_as_sent

pytestmark = pytest.mark.slow

AUTH = f"Authorization: {basic(*ADMIN)}".encode()


def request(method: str, target: str, body: bytes = b"", *extra: bytes) -> bytes:
    """A plain request: HTTP/1.1, no Connection field."""
    lines = [f"{method} {target} HTTP/1.1".encode(), b"Host: narad", AUTH, *extra]
    if body or method in {"POST", "PUT"}:
        lines.append(b"Content-Type: application/json")
        lines.append(b"Content-Length: %d" % len(body))
    return b"\r\n".join(lines) + b"\r\n\r\n" + body


class Conn:
    """One kept-alive connection that reads responses one at a time."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=15)
        self.buf = b""

    def close(self) -> None:
        self.sock.close()

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def response(self, *, head: bool = False) -> tuple[int, dict[str, str], bytes]:
        while b"\r\n\r\n" not in self.buf:
            self._more()
        raw, _, self.buf = self.buf.partition(b"\r\n\r\n")
        status_line, *lines = raw.decode("latin-1").split("\r\n")
        headers = {}
        for line in lines:
            name, _, value = line.partition(":")
            assert name.lower() not in headers, raw  # every field once
            headers[name.lower()] = value.strip()
        status = int(status_line.split(" ", 2)[1])
        assert status_line.startswith("HTTP/1.1 "), status_line
        length = 0 if head else int(headers.get("content-length", "0"))
        assert "transfer-encoding" not in headers
        while len(self.buf) < length:
            self._more()
        body, self.buf = self.buf[:length], self.buf[length:]
        return status, headers, body

    def _more(self) -> None:
        part = self.sock.recv(65536)
        if not part:
            raise ConnectionError(f"closed by the server: {self.buf!r}")
        self.buf += part

    def closed_by_server(self) -> bool:
        self.sock.settimeout(5)
        return self.sock.recv(1) == b""


def next_offset(port: int, topic: str) -> int:
    c = Conn(port)
    try:
        c.send(request("GET", f"/v1/topics/{topic}"))
        return json.loads(c.response()[2])["partition_stats"][0]["next_offset"]
    finally:
        c.close()


@pytest.fixture
def conn(edge_node):
    c = Conn(edge_node.port)
    yield c
    c.close()


@pytest.fixture
def topic(edge_node) -> str:
    name = f"plain-{uuid.uuid4().hex[:12]}"
    c = Conn(edge_node.port)
    c.send(
        request(
            "POST", "/v1/topics", json.dumps({"name": name, "partitions": 1}).encode()
        )
    )
    assert c.response()[0] == 201
    c.close()
    return name


def test_requests_on_one_kept_alive_connection(conn, topic):
    bodies = [json.dumps({"n": n}).encode() for n in range(3)]
    for body in bodies:
        conn.send(request("POST", f"/v1/topics/{topic}/produce", body))
        status, headers, answer = conn.response()
        assert status == 202, answer
        assert headers["connection"] == "keep-alive"
        assert headers["server"] and headers["date"] and headers["x-request-id"]
        assert int(headers["content-length"]) == len(answer)
    for n, body in enumerate(bodies):
        conn.send(request("GET", f"/v1/topics/{topic}/consume?partition=0&offset={n}"))
        status, _, answer = conn.response()
        assert status == 200, answer
        assert_replays_as_sent(answer, body)


def test_pipelined_requests_are_answered_in_order(conn, topic):
    body = b'{"pipelined": true}'
    conn.send(
        request("POST", f"/v1/topics/{topic}/produce", body)
        + request("GET", "/healthz")
        + request("HEAD", f"/v1/topics/{topic}")
        + request("GET", f"/v1/topics/{topic}/consume?partition=0&offset=0")
        + request("GET", f"/v1/topics/{topic}/consume?wait=0")
    )
    assert conn.response()[0] == 202
    assert conn.response()[2] == b'{"status":"ok"}\n'
    status, headers, rest = conn.response(head=True)
    assert status == 200 and int(headers["content-length"]) > 0 and rest == b""
    status, _, answer = conn.response()
    assert status == 200
    assert_replays_as_sent(answer, body)
    status, headers, answer = conn.response()
    assert status == 200, answer  # leased: the message is there to lease
    assert "content-length" in headers


def test_an_empty_long_poll_answers_204_without_a_length(conn, topic):
    conn.send(request("GET", f"/v1/topics/{topic}/consume?wait=50ms"))
    status, headers, body = conn.response()
    assert (status, body) == (204, b"")
    assert "content-length" not in headers
    assert headers["connection"] == "keep-alive"
    conn.send(request("GET", "/healthz"))
    assert conn.response()[0] == 200


def test_plain_and_other_requests_share_a_connection(conn, topic):
    """A request gunicorn reads (a repeated field, chunked framing) between
    plain ones: each answered, the connection kept."""
    chunked = (
        f"POST /v1/topics/{topic}/produce HTTP/1.1\r\nHost: narad\r\n".encode()
        + AUTH
        + b"\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
        + b'4\r\n{"a"\r\n4\r\n: 1}\r\n0\r\n\r\n'
    )
    conn.send(request("GET", "/healthz") + chunked + request("GET", "/healthz"))
    assert conn.response()[0] == 200
    status, headers, answer = conn.response()
    assert status == 202, answer
    assert headers["connection"] == "keep-alive"
    assert conn.response()[0] == 200
    conn.send(request("GET", f"/v1/topics/{topic}/consume?partition=0&offset=0"))
    status, _, answer = conn.response()
    assert status == 200
    assert_replays_as_sent(answer, b'{"a": 1}')


def test_a_repeated_field_is_refused_by_gunicorn(conn, topic):
    conn.send(
        request(
            "POST",
            f"/v1/topics/{topic}/produce",
            b"{}",
            b"Idempotency-Key: k1",
            b"Idempotency-Key: k1",
        )
    )
    status, headers, answer = conn.response()
    assert status == 400
    assert "more than once" in json.loads(answer)["error"]
    assert headers["connection"] == "close"


def test_a_body_cut_short_is_refused_and_nothing_stored(edge_node, topic):
    c = Conn(edge_node.port)
    try:
        whole = request("POST", f"/v1/topics/{topic}/produce", b'{"cut": "short"}')
        c.send(whole[:-5])
        c.sock.shutdown(socket.SHUT_WR)
        status, _, answer = c.response()
        assert status == 400, answer
        assert "Content-Length" in json.loads(answer)["error"]
    finally:
        c.close()
    assert next_offset(edge_node.port, topic) == 0


def test_a_slow_body_is_refused_408_and_nothing_stored(edge_node, topic):
    c = Conn(edge_node.port)
    try:
        whole = request("POST", f"/v1/topics/{topic}/produce", b'{"slow": true}')
        head_end = whole.index(b"\r\n\r\n") + 4
        c.send(whole[:head_end])
        started = time.monotonic()
        status, _, answer = c.response()
        assert status == 408, answer
        assert time.monotonic() - started < EDGE_BODY_TIMEOUT + 5
        assert c.closed_by_server()
    finally:
        c.close()
    assert next_offset(edge_node.port, topic) == 0


def test_bytes_past_the_body_are_the_next_request(conn, topic):
    """What follows a body of the announced length is read as a request:
    here not one, so gunicorn refuses it and closes."""
    conn.send(
        request("POST", f"/v1/topics/{topic}/produce", b"{}") + b"garbage\r\n\r\n"
    )
    assert conn.response()[0] == 202
    status, headers, answer = conn.response()
    assert status == 400, answer
    assert headers["connection"] == "close"
    assert conn.closed_by_server()


def test_a_request_without_host_is_400_on_a_kept_alive_connection(conn, topic):
    """RFC 9112 3.2: HTTP/1.1 without Host is 400, after plain requests too
    (a head without Host is not plain: gunicorn's path, then the worker's
    refusal)."""
    conn.send(request("GET", "/healthz"))
    assert conn.response()[0] == 200
    hostless = request("POST", f"/v1/topics/{topic}/produce", b"{}").replace(
        b"Host: narad\r\n", b""
    )
    conn.send(hostless)
    status, headers, answer = conn.response()
    assert status == 400, answer
    assert headers["content-type"] == "application/json"
    assert "Host" in json.loads(answer)["error"]
    assert headers["connection"] == "close"
    assert conn.closed_by_server()
    assert next_offset(conn.sock.getpeername()[1], topic) == 0


def test_expect_100_continue_keeps_the_connection_once_the_body_is_read(conn, topic):
    body = b'{"expected": 1}'
    conn.send(
        request("POST", f"/v1/topics/{topic}/produce", body, b"Expect: 100-continue")[
            : -len(body)
        ]
    )
    status, _, _ = conn.response()
    assert status == 100  # invited: authorized, within the limit
    conn.send(body)
    status, headers, answer = conn.response()
    assert status == 202, answer
    assert headers["connection"] == "keep-alive"
    conn.send(request("GET", f"/v1/topics/{topic}/consume?partition=0&offset=0"))
    status, _, answer = conn.response()
    assert status == 200
    assert_replays_as_sent(answer, body)


def test_expect_100_continue_without_credentials_closes_without_the_body(conn, topic):
    body = b'{"never": "sent"}'
    whole = request(
        "POST", f"/v1/topics/{topic}/produce", body, b"Expect: 100-continue"
    )
    conn.send(whole.replace(AUTH + b"\r\n", b"")[: -len(body)])
    status, headers, answer = conn.response()
    assert status == 401, answer  # no 100 Continue first: the body stays put
    assert headers["connection"] == "close"
    assert conn.closed_by_server()
    assert next_offset(conn.sock.getpeername()[1], topic) == 0
