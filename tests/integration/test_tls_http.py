"""HTTPS on the client port (``server.tls_cert``, ``server.tls_key``,
``server.tls_client_ca``) against ``narad serve``, with a CA and certificates
made for the run (:mod:`tests.tlscerts`).

Both of a worker's paths serve under TLS: requests that keep their
connection take the plain one (:mod:`narad.serve.plain`), those that ask to close
take gunicorn's.
"""

from __future__ import annotations

import http.client
import json
import socket
import ssl
import threading
import time
import uuid

import pytest

from tests.httpclient import ADMIN
from tests.httpclient import basic
from tests.nodes import Node
from tests.replay import assert_replays_as_sent
from tests.tlscerts import Pki
from tests.tlscerts import make_pki

pytestmark = pytest.mark.slow

AUTH = {"Authorization": basic(*ADMIN)}
WARNING = "TLS is off: passwords (HTTP Basic)"


@pytest.fixture(scope="module")
def pki(tmp_path_factory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
def tls_node(tmp_path_factory, pki) -> Node:
    """HTTPS, bound to every address (so a node without TLS would warn)."""
    started = Node(tmp_path_factory.mktemp("tls"), workers=2, tls=pki)
    started.env["NARAD_SERVER_BIND"] = f"0.0.0.0:{started.port}"
    started.start()
    yield started
    started.stop()


@pytest.fixture(scope="module")
def mtls_node(tmp_path_factory, pki) -> Node:
    """HTTPS that asks for client certificates signed by the test CA."""
    started = Node(tmp_path_factory.mktemp("mtls"), workers=1, tls=pki, client_ca=True)
    started.start()
    yield started
    started.stop()


def https(node: Node, **context) -> http.client.HTTPSConnection:
    return http.client.HTTPSConnection(
        "127.0.0.1", node.port, timeout=15, context=node.client_context(**context)
    )


def call(conn, method, path, body=None, *, close=False, auth=True):
    headers = dict(AUTH) if auth else {}
    if close:
        headers["Connection"] = "close"
    if body is not None:
        headers["Content-Type"] = "application/json"
    conn.request(method, path, body=body, headers=headers)
    resp = conn.getresponse()
    return resp.status, dict(resp.getheaders()), resp.read()


@pytest.mark.parametrize("close", [False, True], ids=["kept-plain", "close-gunicorn"])
def test_produce_consume_and_ack_over_https(tls_node, close):
    conn = https(tls_node)
    try:
        name = f"tls-{uuid.uuid4().hex[:10]}"
        body = json.dumps({"name": name, "partitions": 1, "schema": {"type": "object"}})
        status, _, answer = call(conn, "POST", "/v1/topics", body, close=close)
        assert status == 201, answer
        sent = b'{"over": "tls", "n": 1}'
        status, _, answer = call(
            conn, "POST", f"/v1/topics/{name}/produce", sent, close=close
        )
        assert status == 202, answer
        status, _, answer = call(
            conn, "POST", f"/v1/topics/{name}/produce", b"[1]", close=close
        )
        assert status == 400, answer  # the schema still holds
        status, _, answer = call(
            conn, "GET", f"/v1/topics/{name}/consume?wait=1s", close=close
        )
        assert status == 200, answer
        assert_replays_as_sent(answer, sent)
        handle = json.loads(answer)["receipt_handle"]
        status, _, answer = call(
            conn, "POST", f"/v1/topics/{name}/ack?receipt_handle={handle}", close=close
        )
        assert status == 204, answer
        status, _, answer = call(
            conn, "GET", f"/v1/topics/{name}/consume?wait=50ms", close=close
        )
        assert status == 204, answer
    finally:
        conn.close()


def test_a_long_poll_over_https_is_woken_by_a_produce(tls_node):
    """A waiting consumer looks again after its wait (and asks whether its
    client is still there, which a TLS socket answers its own way)."""
    name = f"tls-{uuid.uuid4().hex[:10]}"
    conn = https(tls_node)
    try:
        body = json.dumps({"name": name, "partitions": 1})
        assert call(conn, "POST", "/v1/topics", body)[0] == 201
        results = []
        waiter = threading.Thread(
            target=lambda: results.append(
                call(https(tls_node), "GET", f"/v1/topics/{name}/consume?wait=10s")
            )
        )
        waiter.start()
        deadline = time.monotonic() + 20
        while waiter.is_alive() and time.monotonic() < deadline:
            assert call(conn, "POST", f"/v1/topics/{name}/produce", b'"x"')[0] == 202
            waiter.join(0.3)
        waiter.join()
        status, _, answer = results[0]
        assert status == 200, answer
    finally:
        conn.close()


def test_many_requests_on_one_tls_connection_take_the_plain_path(tls_node):
    """Kept alive, pipelined on one TLS connection: each answered in order."""
    context = tls_node.client_context()
    raw = socket.create_connection(("127.0.0.1", tls_node.port), timeout=15)
    with context.wrap_socket(raw, server_hostname="127.0.0.1") as sock:
        one = b"GET /healthz HTTP/1.1\r\nHost: narad\r\n\r\n"
        sock.sendall(one * 5)
        received = b""
        while received.count(b'{"status":"ok"}') < 5:
            part = sock.recv(65536)
            assert part, received
            received += part
        assert received.count(b"HTTP/1.1 200 OK") == 5
        assert b"Connection: keep-alive" in received


def test_health_probes_answer_over_https(tls_node):
    conn = https(tls_node)
    try:
        for probe in ("/healthz", "/readyz"):
            status, _, answer = call(conn, "GET", probe, auth=False)
            assert status == 200, answer
    finally:
        conn.close()


def test_a_client_that_does_not_trust_the_ca_fails_the_handshake(tls_node):
    conn = http.client.HTTPSConnection(
        "127.0.0.1", tls_node.port, timeout=15, context=ssl.create_default_context()
    )
    with pytest.raises(ssl.SSLCertVerificationError):
        conn.request("GET", "/healthz")
    conn.close()


@pytest.mark.parametrize("close", [True, False], ids=["close", "kept"])
def test_plain_http_to_the_tls_port_is_not_served(tls_node, close):
    request = b"GET /v1/topics HTTP/1.1\r\nHost: narad\r\n"
    request += f"Authorization: {basic(*ADMIN)}\r\n".encode()
    if close:
        request += b"Connection: close\r\n"
    request += b"\r\n"
    with socket.create_connection(("127.0.0.1", tls_node.port), timeout=15) as sock:
        sock.sendall(request)
        received = b""
        while part := sock.recv(65536):
            received += part  # to the close: the node ends the connection
    head, _, body = received.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 400 "), received
    assert b"Connection: close" in head
    assert "https://" in json.loads(body)["error"]
    assert b"topics" not in body


def test_a_node_on_every_address_with_tls_does_not_warn(tls_node):
    assert WARNING not in tls_node.log.read_text()


def test_a_node_on_every_address_without_tls_warns_once(tmp_path):
    node = Node(tmp_path / "clear", workers=1)
    node.env["NARAD_SERVER_BIND"] = f"0.0.0.0:{node.port}"
    node.start()
    try:
        log = node.log.read_text()
    finally:
        node.stop()
    assert log.count(WARNING) == 1, log
    line = next(line for line in log.splitlines() if WARNING in line)
    assert " WARNING " in line and "0.0.0.0" in line and "server.tls_cert" in line


def test_a_loopback_node_without_tls_does_not_warn(edge_node):
    assert WARNING not in edge_node.log.read_text()


def test_tls_files_that_do_not_load_stop_the_node_at_start(tmp_path, pki):
    node = Node(tmp_path / "bad", workers=1)
    node.env["NARAD_SERVER_TLS_CERT"] = str(pki.server_cert)
    node.env["NARAD_SERVER_TLS_KEY"] = str(pki.client_key)  # not its key
    with pytest.raises(RuntimeError, match="node exited"):
        node.start(timeout=60)
    assert node.process.wait(30) == 2
    assert "`server.tls_cert`" in node.log.read_text()


# -- client certificates (server.tls_client_ca) -------------------------------------


def test_a_client_certificate_from_the_ca_is_served(mtls_node):
    conn = https(mtls_node, cert=True)
    try:
        for close in (False, True):
            status, _, answer = call(conn, "GET", "/v1/topics", close=close)
            assert status == 200, answer
    finally:
        conn.close()


@pytest.mark.parametrize("close", [False, True], ids=["kept", "close"])
def test_without_a_client_certificate_only_probes_answer(mtls_node, close):
    conn = https(mtls_node)
    try:
        status, _, answer = call(conn, "GET", "/healthz", auth=False, close=close)
        assert status == 200, answer
        status, headers, answer = call(conn, "GET", "/v1/topics", close=close)
        assert status == 403, answer
        assert "client certificate" in json.loads(answer)["error"]
        assert headers["Connection"] == "close"
    finally:
        conn.close()


def test_a_client_certificate_from_another_ca_fails_the_handshake(mtls_node):
    conn = https(mtls_node, stranger=True)
    try:
        # TLS 1.3: the client learns of the refusal at its first read.
        with pytest.raises((ssl.SSLError, ConnectionError)):
            call(conn, "GET", "/healthz", auth=False)
    finally:
        conn.close()
