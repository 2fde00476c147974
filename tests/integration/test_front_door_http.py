"""The front door over raw sockets against ``narad serve``: forwarding headers
trusted only from ``server.forwarded_allow_ips``, no 5xx for any header
value, and client errors that log their access-log line and nothing else.

``proxied_node`` trusts 127.0.0.1 as a proxy (the tests' own address), the
session's ``edge_node`` trusts no one (the default).
"""

from __future__ import annotations

import itertools
import json
import time
import uuid

import pytest

from tests.integration.conftest import EDGE_BODY_TIMEOUT
from tests.nodes import Node
from tests.rawhttp import build
from tests.rawhttp import exchange

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def proxied_node(tmp_path_factory) -> Node:
    started = Node(
        tmp_path_factory.mktemp("proxied"),
        workers=1,
        env={
            "NARAD_SERVER_FORWARDED_ALLOW_IPS": "127.0.0.1,10.0.0.0/8",
            "NARAD_SERVER_BODY_TIMEOUT": str(EDGE_BODY_TIMEOUT),
        },
    )
    started.start()
    yield started
    started.stop()


def _topic(port: int, schema=None) -> str:
    name = f"door-{uuid.uuid4().hex[:12]}"
    body = {"name": name, "partitions": 1}
    if schema is not None:
        body["schema"] = schema
    resp = exchange(port, build("POST", "/v1/topics", json.dumps(body).encode()))
    assert resp.status == 201, resp.body
    return name


# -- forwarding headers --------------------------------------------------------------


def test_a_trusted_proxys_script_name_mounts_the_node(proxied_node):
    port = proxied_node.port
    resp = exchange(
        port,
        build(
            "GET", "/narad/healthz", framing="none", headers={"SCRIPT_NAME": "/narad"}
        ),
    )
    assert resp.status == 200 and resp.json() == {"status": "ok"}


@pytest.mark.parametrize(
    ("script_name", "target"),
    [
        ("/x", "/healthz"),
        ("/v1/topicsX", "/v1/topics"),
        ("/healthz/more", "/healthz"),
        ("\\", "/healthz"),
        ("%2F", "/v1/topics"),
    ],
)
def test_a_script_name_the_path_is_not_under_is_400_not_500(
    proxied_node, script_name, target
):
    """gunicorn answered 500 ("configuration problem"): the value is the
    request's, not the node's."""
    resp = exchange(
        proxied_node.port,
        build("GET", target, framing="none", headers={"SCRIPT_NAME": script_name}),
    )
    assert resp.status == 400, resp.body
    assert resp.headers["content-type"] == "application/json"
    assert "SCRIPT_NAME" in resp.error


def test_an_untrusted_peers_forwarding_headers_change_nothing(edge_node):
    """From the tests' loopback address, which gunicorn trusted by default:
    the path routes as sent, the scheme stays http."""
    headers = {
        "SCRIPT_NAME": "/v1",
        "X-Forwarded-Proto": "https",
        "X-Forwarded-Ssl": "on",
        "X-Forwarded-Protocol": "ssl",
    }
    resp = exchange(
        edge_node.port, build("GET", "/v1/topics", framing="none", headers=headers)
    )
    assert resp.status == 200, resp.body
    assert "topics" in resp.json()


HEADER_NAMES = [
    "Host",
    "Authorization",
    "X-Request-ID",
    "Idempotency-Key",
    "Content-Type",
    "Content-Encoding",
    "Accept",
    "Accept-Encoding",
    "Expect",
    "Connection",
    "Upgrade",
    "Transfer-Encoding",
    "Forwarded",
    "X-Forwarded-For",
    "X-Forwarded-Proto",
    "X-Forwarded-Host",
    "X-Forwarded-Ssl",
    "SCRIPT_NAME",
    "PATH_INFO",
    "Script-Name",
    "Range",
    "If-None-Match",
    "Cookie",
    "TE",
    "Proxy-Authorization",
]
HEADER_VALUES = [
    "",
    " ",
    "\t",
    "/",
    "\\",
    "..",
    "%00",
    "*",
    "https",
    "/v1/topics",
    'a"b,c;d=e',
    "Basic !!!",
    "Basic " + "A" * 3000,
    "\x80\xe9\xff",
    "x" * 6000,
    "-1",
    "9" * 40,
    "close, upgrade",
    "100-continue",
    "chunked",
    "h2c",
]


@pytest.mark.parametrize("which", ["edge", "proxied"])
def test_no_header_value_gets_a_5xx(request, which):
    """Any value of any field, on gunicorn's path (Connection: close) and
    the plain one (kept alive): never 5xx (but 501 for an unknown transfer
    coding), and every refusal JSON."""
    node = request.getfixturevalue(f"{which}_node")
    topic = _topic(node.port)
    targets = itertools.cycle(
        [
            ("GET", f"/v1/topics/{topic}"),
            ("GET", "/healthz"),
            ("POST", f"/v1/topics/{topic}/produce"),
            ("GET", f"/v1/topics/{topic}/consume?wait=0"),
        ]
    )
    for name in HEADER_NAMES:
        for n, value in enumerate(HEADER_VALUES):
            method, target = next(targets)
            close = n % 2 == 0
            if name == "Host":
                # build() sends one: this replaces it.
                data = build(method, target, b"{}", close=close)
                data = data.replace(b"Host: narad", f"Host: {value}".encode("latin-1"))
            else:
                data = build(method, target, b"{}", close=close, headers={name: value})
            resp = exchange(node.port, data, kept=not close)
            if name == "Transfer-Encoding" and resp.status == 501:
                # RFC 9112 6.1's answer to a transfer coding the server does
                # not know (the README's too): the one 5xx of a header value.
                assert "transfer coding" in resp.error
                continue
            assert resp.status < 500, (name, value, resp.status, resp.body)
            if resp.status >= 400:
                assert isinstance(resp.error, str), (name, value, resp.body)


# -- client errors log no tracebacks -------------------------------------------------


def _deep(levels: int) -> bytes:
    return b"[" * levels + b"]" * levels


def test_client_errors_write_their_access_line_and_nothing_else(proxied_node):
    """An invalid or too-deep schema (create, compatibility dry run), a
    too-deep payload (small, and large enough to validate on the offload
    threads), gunicorn's refusals, 401, 404: each writes one access-log line;
    none writes a traceback, a warning or anything else."""
    port = proxied_node.port
    topic = _topic(port, schema={"type": "array"})
    deep_schema = b'{"items": ' * 400 + b"{}" + b"}" * 400
    requests = [
        build(
            "POST",
            "/v1/topics",
            json.dumps({"name": "bad", "schema": {"type": 5}}).encode(),
        ),
        build(
            "POST", "/v1/topics", b'{"name": "deep", "schema": ' + deep_schema + b"}"
        ),
        build(
            "POST",
            f"/v1/topics/{topic}/schemas/compatibility",
            b'{"schema": {"type": "strin"}}',
        ),
        build(
            "POST",
            f"/v1/topics/{topic}/schemas/compatibility",
            b'{"schema": ' + deep_schema + b"}",
        ),
        build("POST", f"/v1/topics/{topic}/produce", _deep(300)),
        build("POST", f"/v1/topics/{topic}/produce", _deep(12_000)),  # 24 KB
        build("POST", f"/v1/topics/{topic}/produce/batch", b'{"messages": [' * 2),
        build("GET", "/v1/topics/no-such-topic-here"),
        build("GET", "/v1/topics", auth=None),
        build("GET", "/v1/topics", auth=("admin", "not-the-password")),
        b"GET /healthz HTTP/1.1\r\nConnection: close\r\n\r\n",
        b"NOT HTTP\r\n\r\n",
        b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1_0\r\n\r\n",
        build("GET", "/narad/healthz", framing="none", headers={"SCRIPT_NAME": "/x"}),
    ]
    # The topic's create was answered; its access line may come later (a
    # worker writes them in batches): wait for it, so that it falls before.
    deadline = time.monotonic() + 10
    while f" {topic} 201 " not in proxied_node.log.read_text(errors="replace"):
        assert time.monotonic() < deadline, "the create's access line never came"
        time.sleep(0.05)
    before = proxied_node.log.stat().st_size
    ids = []
    for data in requests:
        resp = exchange(port, data)
        assert 400 <= resp.status < 500, (data[:80], resp.status, resp.body)
        ids.append(resp.headers["x-request-id"])
    for request_id in ids:
        assert len(proxied_node.access_lines(request_id)) == 1, request_id
    time.sleep(0.5)  # anything written after its access line, too
    with proxied_node.log.open("rb") as log:
        log.seek(before)
        written = log.read().decode(errors="replace")
    assert "Traceback" not in written, written
    lines = written.splitlines()
    assert len(lines) == len(ids), written
    assert all(any(line.endswith(i) for i in ids) for line in lines), written
