"""Hostile requests over raw sockets against ``narad serve`` (embedded storage).

Every 202 is checked by replaying the message byte for byte; every refusal
must be JSON ``{"error": ...}`` and leave the topic as it was.
"""

from __future__ import annotations

import gzip
import json
import uuid
from urllib.parse import quote as urlquote

import pytest

from tests.httpclient import ADMIN
from tests.integration.conftest import EDGE_BODY_TIMEOUT
from tests.rawhttp import RawResponse
from tests.rawhttp import build
from tests.rawhttp import exchange
from tests.rawhttp import expect_continue
from tests.replay import assert_replays_as_sent

pytestmark = pytest.mark.slow


class Edge:
    def __init__(self, port: int) -> None:
        self.port = port

    def send(self, method, target, body=b"", **kw) -> RawResponse:
        send_kw = {k: kw.pop(k) for k in ("close_write", "pause", "head") if k in kw}
        resp = exchange(self.port, build(method, target, body, **kw), **send_kw)
        assert resp.status < 500, (resp.status, resp.body)
        if resp.status >= 400 and method != "HEAD":
            assert isinstance(resp.error, str) and resp.error
        return resp

    def topic(self, partitions=1, schema=None) -> str:
        name = f"edge-{uuid.uuid4().hex[:12]}"
        body = {"name": name, "partitions": partitions}
        if schema is not None:
            body["schema"] = schema
        resp = self.send("POST", "/v1/topics", json.dumps(body).encode())
        assert resp.status == 201, resp.body
        return name

    def next_offset(self, topic, partition=0) -> int:
        resp = self.send("GET", f"/v1/topics/{topic}")
        return resp.json()["partition_stats"][partition]["next_offset"]

    def assert_stored(self, topic, offset, sent: bytes, partition=0) -> None:
        resp = self.send(
            "GET", f"/v1/topics/{topic}/consume?partition={partition}&offset={offset}"
        )
        assert resp.status == 200, resp.body
        assert_replays_as_sent(resp.body, sent)


@pytest.fixture
def edge(edge_node) -> Edge:
    return Edge(edge_node.port)


# -- 1. chunked bodies -----------------------------------------------------------------


@pytest.mark.parametrize(
    "sizes",
    [[], [1] * 80, [1000], [7] * 12, [2, 64, 1]],
    ids=["one", "bytes", "oversized", "sevens", "mixed"],
)
def test_chunked_produce_stores_the_full_body(edge, sizes):
    topic = edge.topic()
    body = b'{"id": 1, "text": "the whole body, split however the client likes"}'
    resp = edge.send(
        "POST",
        f"/v1/topics/{topic}/produce",
        body,
        framing="chunked",
        chunk_sizes=sizes,
    )
    assert resp.status == 202, resp.body
    edge.assert_stored(topic, 0, body)


def test_chunked_with_extensions_and_trailers(edge):
    topic = edge.topic()
    body = b"binary\x00\xff\xfe and text"
    framed = b"4;name=value\r\n" + body[:4] + b"\r\n"
    framed += b"%x\r\n" % (len(body) - 4) + body[4:] + b"\r\n"
    framed += b"0\r\nX-Trailer: yes\r\n\r\n"
    resp = edge.send(
        "POST",
        f"/v1/topics/{topic}/produce",
        framed,
        framing="none",
        headers={"Transfer-Encoding": "chunked"},
    )
    assert resp.status == 202, resp.body
    edge.assert_stored(topic, 0, body)


def test_every_json_route_reads_chunked_bodies(edge):
    name = f"edge-{uuid.uuid4().hex[:12]}"
    create = json.dumps({"name": name, "partitions": 1}).encode()
    resp = edge.send("POST", "/v1/topics", create, framing="chunked", chunk_sizes=[5])
    assert resp.status == 201, resp.body
    patch = b'{"schema": {"type": "object"}}'
    resp = edge.send(
        "PATCH", f"/v1/topics/{name}", patch, framing="chunked", chunk_sizes=[2, 2]
    )
    assert resp.status == 200 and resp.json()["schema_version"] == 1, resp.body
    batch = json.dumps(
        {"messages": [{"value": '{"n": 1}'}, {"value": '{"n": 2}', "key": "k"}]}
    ).encode()
    resp = edge.send(
        "POST",
        f"/v1/topics/{name}/produce/batch",
        batch,
        framing="chunked",
        chunk_sizes=[1] * 30,
    )
    assert resp.status == 202 and resp.json() == {"accepted": 2}, resp.body
    edge.assert_stored(name, 0, b'{"n": 1}')
    edge.assert_stored(name, 1, b'{"n": 2}')


def test_five_mib_chunked_body_is_413_and_nothing_is_stored(edge):
    topic = edge.topic()
    resp = edge.send(
        "POST",
        f"/v1/topics/{topic}/produce",
        b"x" * (5 * 1024 * 1024),
        framing="chunked",
        chunk_sizes=[65536] * 80,
    )
    assert resp.status == 413
    assert resp.error == "request body is over 1048576 bytes"
    assert edge.next_offset(topic) == 0


def test_chunked_body_of_exactly_one_mib_is_stored(edge):
    topic = edge.topic()
    body = bytes(range(256)) * 4096
    resp = edge.send(
        "POST",
        f"/v1/topics/{topic}/produce",
        body,
        framing="chunked",
        chunk_sizes=[100_000] * 10,
    )
    assert resp.status == 202
    edge.assert_stored(topic, 0, body)


def test_content_length_over_one_mib_is_413(edge):
    topic = edge.topic()
    resp = edge.send(
        "POST",
        f"/v1/topics/{topic}/produce",
        b"x" * 100,
        announced=2 * 1024 * 1024,
        close_write=True,
    )
    assert resp.status == 413
    assert edge.next_offset(topic) == 0


# -- 2. short bodies -------------------------------------------------------------------


def test_a_body_shorter_than_its_length_is_refused_and_not_stored(edge):
    topic = edge.topic()
    resp = edge.send(
        "POST",
        f"/v1/topics/{topic}/produce",
        b"0123456789",
        announced=100,
        close_write=True,
    )
    assert resp.status == 400
    assert resp.error == (
        "invalid argument: request body ended after 10 of the 100 bytes its "
        "Content-Length announced; nothing was stored"
    )
    assert edge.next_offset(topic) == 0


def http10(data: bytes) -> bytes:
    line, rest = data.split(b"\r\n", 1)
    return line.replace(b" HTTP/1.1", b" HTTP/1.0") + b"\r\n" + rest


def test_an_http10_body_without_content_length_is_refused(edge):
    """RFC 1945 8.3: an HTTP/1.0 POST needs Content-Length. Without it the
    node read an empty body: 202, and an empty message stored instead of
    the bytes sent."""
    topic = edge.topic()
    target = f"/v1/topics/{topic}/produce"
    sent = build("POST", target, b"hello world", framing="none")
    resp = exchange(edge.port, http10(sent), close_write=True)
    assert resp.status == 400
    assert "Content-Length" in resp.error
    assert edge.next_offset(topic) == 0
    framed = build("POST", target, b"hello world")
    assert exchange(edge.port, http10(framed)).status == 202
    edge.assert_stored(topic, 0, b"hello world")


def test_a_stalled_body_is_refused_after_the_body_timeout(edge):
    topic = edge.topic()
    resp = edge.send(
        "POST",
        f"/v1/topics/{topic}/produce",
        b"0123456789",
        announced=100,
        pause=EDGE_BODY_TIMEOUT + 1,
    )
    assert resp.status == 408
    assert "server.body_timeout" in resp.error
    assert edge.next_offset(topic) == 0


@pytest.mark.parametrize(
    ("framed", "words"),
    [
        (b"5\r\nabc", "chunked request body ended before its last chunk"),
        (b"a\r\n0123456789\r\n", "chunked request body ended before its last chunk"),
        (b"zz\r\nabc\r\n0\r\n\r\n", "chunked request body is malformed: Invalid chunk"),
        (b"3\r\nabcXX0\r\n\r\n", "chunked request body is malformed"),
    ],
)
def test_a_broken_chunked_body_is_refused(edge, framed, words):
    topic = edge.topic()
    resp = edge.send(
        "POST",
        f"/v1/topics/{topic}/produce",
        framed,
        framing="none",
        headers={"Transfer-Encoding": "chunked"},
        close_write=True,
    )
    assert resp.status == 400
    assert words in resp.error
    assert edge.next_offset(topic) == 0


def test_a_short_json_body_is_refused_on_every_route(edge):
    topic = edge.topic()
    for method, target in [
        ("POST", "/v1/topics"),
        ("PATCH", f"/v1/topics/{topic}"),
        ("POST", f"/v1/topics/{topic}/produce/batch"),
    ]:
        resp = edge.send(method, target, b'{"na', announced=50, close_write=True)
        assert resp.status == 400
        assert "request body ended after 4 of the 50 bytes" in resp.error


# -- 3. one strict JSON reader ---------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "words"),
    [
        (
            b'{"messages": [{"value": "a", "value": "b"}]}',
            "has duplicate key 'value' in the object at '/messages/0'",
        ),
        (b'{"messages": [], "messages": []}', "has duplicate key 'messages'"),
        (b'\xef\xbb\xbf{"messages": [{"value": "a"}]}', "UTF-8 byte-order mark"),
        ('{"messages": [{"value": "a"}]}'.encode("utf-16"), "is UTF-16"),
        ('{"messages": [{"value": "a"}]}'.encode("utf-16-be"), "is UTF-16"),
        ('{"messages": [{"value": "a"}]}'.encode("utf-32"), "is UTF-32"),
        (b'{"messages": [{"value": "a", "partition": NaN}]}', "has NaN"),
        (b'{"messages": [{"value": "a", "partition": Infinity}]}', "has Infinity"),
    ],
)
def test_batch_bodies_are_read_strictly(edge, body, words):
    topic = edge.topic()
    resp = edge.send("POST", f"/v1/topics/{topic}/produce/batch", body)
    assert resp.status == 400
    assert words in resp.error
    assert edge.next_offset(topic) == 0


def test_duplicate_keys_refused_in_narads_bodies_last_wins_in_payloads(edge):
    name = f"edge-{uuid.uuid4().hex[:12]}"
    body = b'{"name": "%s", "partitions": 1, "partitions": 2}' % name.encode()
    resp = edge.send("POST", "/v1/topics", body)
    assert resp.status == 400 and "duplicate key 'partitions'" in resp.error
    topic = edge.topic(schema={"type": "object"})
    resp = edge.send(
        "PATCH",
        f"/v1/topics/{topic}",
        b'{"schema": {"properties": {"a": {}, "a": {}}}}',
    )
    assert resp.status == 400
    assert "duplicate key 'a' in the object at '/schema/properties'" in resp.error
    # A produced payload is the rulebook's JSON text: the last value wins,
    # and the message is stored as sent.
    resp = edge.send("POST", f"/v1/topics/{topic}/produce", b'{"id": 1, "id": 2}')
    assert resp.status == 202
    assert edge.next_offset(topic) == 1


# -- 4. no 500 from input --------------------------------------------------------------


@pytest.mark.parametrize("digits", ["\u0663", "\u00b2", "\uff13", "\u07c3"])
def test_non_ascii_digits_are_400(edge, digits):
    topic = edge.topic(schema={"type": "object"})
    encoded = urlquote(digits)
    for method, target in [
        ("POST", f"/v1/topics/{topic}/produce?partition={encoded}"),
        ("GET", f"/v1/topics/{topic}/consume?partition={encoded}"),
        ("GET", f"/v1/topics/{topic}/consume?partition=0&offset={encoded}"),
        ("GET", f"/v1/topics/{topic}/consume?wait={encoded}s"),
        ("GET", f"/v1/topics?limit={encoded}"),
        ("GET", f"/v1/topics/{topic}/schemas/{encoded}"),
    ]:
        resp = edge.send(method, target, b"{}")
        assert resp.status == 400, (target, resp.body)
    assert edge.next_offset(topic) == 0


def test_raw_non_ascii_bytes_in_the_target_are_refused_as_json(edge):
    topic = edge.topic()
    resp = exchange(
        edge.port,
        build(
            "GET", f"/v1/topics/{topic}/consume?partition=".encode() + "\u0663".encode()
        ),
    )
    assert 400 <= resp.status < 500
    assert resp.error


SURROGATE_SCHEMAS = [
    {"const": "\ud800"},
    {"enum": ["\ud800", "\udfff", 1]},
    {"required": ["\ud800"]},
    {"properties": {"\ud800": {"type": "integer"}}},
    {"type": "object", "propertyNames": {"maxLength": 1}},
    {"type": "string", "format": "email"},
    {"type": "string", "format": "regex"},
    {"type": "string", "format": "idn-hostname"},
    {"type": "string", "pattern": "^[a-z]+$"},
]


def _json(value) -> bytes:
    # ensure_ascii keeps lone surrogates as \ud800 escapes: valid JSON text.
    return json.dumps(value).encode("ascii")


@pytest.mark.parametrize("schema", SURROGATE_SCHEMAS, ids=str)
def test_lone_surrogates_in_schemas_and_payloads(edge, schema):
    topic = edge.topic(schema=schema)
    offset = 0
    for payload in [
        b'"\\ud800"',
        b'"\\udfff"',
        b'"ab\\udc00"',
        b'{"\\ud800": 1}',
        b'{"\\ud800": "\\ud800"}',
        b'["\\ud800"]',
        b'"x@\\ud800.com"',
        b'"abc"',
    ]:
        resp = edge.send("POST", f"/v1/topics/{topic}/produce", payload)
        if resp.status == 202:
            edge.assert_stored(topic, offset, payload)
            offset += 1
        else:
            assert resp.status == 400
    assert edge.next_offset(topic) == offset


def test_a_surrogate_pattern_is_refused_at_registration(edge):
    for schema in [{"pattern": "\ud800"}, {"patternProperties": {"\udc00": {}}}]:
        body = _json({"name": f"edge-{uuid.uuid4().hex[:8]}", "schema": schema})
        resp = edge.send("POST", "/v1/topics", body)
        assert resp.status == 400
        assert "lone surrogate, which RE2 cannot take" in resp.error


def test_an_error_quoting_a_surrogate_is_valid_json(edge):
    resp = edge.send("POST", "/v1/topics", b'{"name": "x", "\\ud800": 1}')
    assert resp.status == 400
    assert resp.error == "invalid argument: unknown field '\\ud800'"
    topic = edge.topic(schema={"properties": {"a": {"const": "\ud800"}}})
    resp = edge.send("POST", f"/v1/topics/{topic}/produce", b'{"a": "\\udc00"}')
    assert resp.status == 400
    assert "\\ud800" in resp.error


# -- 5. errors: JSON, short, HEAD, dots, gunicorn's refusals ---------------------------


def test_head_works_wherever_get_does(edge):
    topic = edge.topic(schema={"type": "object"})
    assert edge.send("POST", f"/v1/topics/{topic}/produce", b"{}").status == 202
    for target in [
        "/healthz",
        "/readyz",
        "/metrics",
        "/v1/topics",
        f"/v1/topics/{topic}",
        f"/v1/topics/{topic}/schemas",
        f"/v1/topics/{topic}/schemas/latest",
        f"/v1/topics/{topic}/schemas/1",
        f"/v1/topics/{topic}/consume?partition=0&offset=0",
    ]:
        got = edge.send("GET", target, framing="none")
        head = edge.send("HEAD", target, framing="none", head=True)
        assert (got.status, head.status) == (200, 200), target
        assert head.body == b""
        if target != "/metrics":  # counters move between the two requests
            assert head.headers["content-length"] == str(len(got.body)), target


@pytest.mark.parametrize("name", [".", "..", "...."])
def test_names_of_only_dots_are_refused_at_create(edge, name):
    resp = edge.send("POST", "/v1/topics", _json({"name": name}))
    assert resp.status == 400
    assert "not only dots" in resp.error


def test_long_input_is_quoted_short(edge):
    resp = edge.send("POST", "/v1/topics", _json({"name": "x", "f" * 100_000: 1}))
    assert resp.status == 400
    assert len(resp.error) < 200 and resp.error.endswith("…")


@pytest.mark.parametrize(
    ("data", "status", "words"),
    [
        (build("GET", "/" + "a" * 5000, framing="none"), 414, "request line too long"),
        (
            b"GET / HTTP/1.1\r\nHost: x\r\n"
            + b"".join(b"X-%d: y\r\n" % i for i in range(200))
            + b"\r\n",
            431,
            "request header fields too large",
        ),
        (
            b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
            400,
            "malformed request",
        ),
        (b"GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 1_0\r\n\r\n", 400, "malformed"),
        (b"NOT HTTP\r\n\r\n", 400, "malformed request"),
        (
            b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: br\r\n\r\n",
            501,
            "transfer coding not implemented",
        ),
    ],
    ids=["414", "431", "cl-and-te", "bad-cl", "request-line", "501"],
)
def test_gunicorns_refusals_are_json(edge, data, status, words):
    resp = exchange(edge.port, data)
    assert resp.status == status
    assert resp.headers["content-type"] == "application/json"
    assert words in resp.error


@pytest.mark.parametrize(
    ("data", "status"),
    [
        (build("GET", "/" + "a" * 5000, framing="none"), 414),
        (b"NOT HTTP\r\n\r\n", 400),
        (b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: br\r\n\r\n", 501),
    ],
    ids=["414", "request-line", "501"],
)
def test_gunicorns_refusals_write_an_access_line(edge_node, data, status):
    """README: each request writes one access-log line, with the request id
    its response carries; gunicorn's refusals wrote none."""
    resp = exchange(edge_node.port, data)
    assert resp.status == status
    lines = edge_node.access_lines(resp.headers["x-request-id"])
    assert len(lines) == 1
    assert f" {status} " in lines[0]


def test_a_refusal_echoes_the_clients_request_id(edge_node):
    """README: every response carries the client's X-Request-ID when it sent
    a usable one; gunicorn's refusals of a parsed head sent a fresh one."""
    data = (
        b"POST / HTTP/1.1\r\nHost: x\r\nX-Request-ID: trace-42\r\n"
        b"Content-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"
    )
    resp = exchange(edge_node.port, data)
    assert resp.status == 400
    assert resp.headers["x-request-id"] == "trace-42"


# -- 6. round-robin fairness: the README walkthrough, twice ----------------------------


def test_readme_walkthrough_replays_partition_0_on_every_run(edge):
    name = f"payments-{uuid.uuid4().hex[:8]}"
    schema = {
        "type": "object",
        "required": ["id"],
        "properties": {"id": {"type": "integer"}},
    }
    for _ in range(2):
        create = _json({"name": name, "partitions": 3, "schema": schema})
        assert edge.send("POST", "/v1/topics", create).status == 201
        produce = f"/v1/topics/{name}/produce"
        assert edge.send("POST", produce + "?key=order-1", b'{"id": 1}').status == 202
        assert edge.send("POST", produce, b'{"amount": 5}').status == 400
        batch = _json(
            {
                "messages": [
                    {"value": '{"id": 2}'},
                    {"value": '{"id": 3}', "key": "order-3"},
                ]
            }
        )
        assert edge.send("POST", produce + "/batch", batch).status == 202
        edge.assert_stored(name, 0, b'{"id": 2}', partition=0)
        assert edge.send("DELETE", f"/v1/topics/{name}", framing="none").status == 204


def test_a_content_coded_produce_is_415_and_stores_nothing(edge):
    topic = edge.topic()
    resp = edge.send(
        "POST",
        f"/v1/topics/{topic}/produce",
        gzip.compress(b"hello"),
        headers={"Content-Encoding": "gzip"},
    )
    assert resp.status == 415 and "Content-Encoding 'gzip'" in resp.error
    assert edge.next_offset(topic) == 0


@pytest.mark.parametrize("slash", ["%2F", "%2f"])
def test_an_encoded_slash_in_the_path_routes_nowhere(edge, slash):
    # Decoded before routing, t%2Fproduce would be topic t's produce route,
    # which a proxy's rules on paths never saw.
    topic = edge.topic()
    resp = edge.send("POST", f"/v1/topics/{topic}{slash}produce", b"x")
    assert resp.status == 404
    assert edge.next_offset(topic) == 0
    # In the query it is only a character.
    assert edge.send("GET", f"/v1/topics/{topic}?x=a{slash}b").status == 200


def test_an_idempotency_key_given_twice_is_400_and_stores_nothing(edge):
    # Joined into "k1,k1", it would not match a retry's single field.
    topic = edge.topic()
    sent = build(
        "POST", f"/v1/topics/{topic}/produce", b"x", headers={"Idempotency-Key": "k1"}
    )
    head, _, body = sent.partition(b"\r\n\r\n")
    resp = exchange(edge.port, head + b"\r\nIdempotency-Key: k1\r\n\r\n" + body)
    assert resp.status == 400
    assert "Idempotency-Key is given more than once" in resp.error
    assert edge.next_offset(topic) == 0


# -- 7. Host, Expect, forwarding headers (gunicorn's path: Connection: close) ----------


@pytest.mark.parametrize(
    "data",
    [
        b"GET /healthz HTTP/1.1\r\nConnection: close\r\n\r\n",
        b"POST /v1/topics HTTP/1.1\r\nConnection: close\r\nContent-Length: 2\r\n\r\n{}",
    ],
    ids=["get", "post"],
)
def test_an_http11_request_without_host_is_400(edge_node, data):
    """RFC 9112 3.2: a server MUST answer 400 to HTTP/1.1 without Host."""
    resp = exchange(edge_node.port, data)
    assert resp.status == 400
    assert resp.headers["content-type"] == "application/json"
    assert "Host" in resp.error
    assert len(edge_node.access_lines(resp.headers["x-request-id"])) == 1


def test_an_http10_request_needs_no_host(edge):
    resp = exchange(edge.port, b"GET /healthz HTTP/1.0\r\n\r\n")
    assert resp.status == 200


def _expecting(topic: str, body: bytes, auth=ADMIN, length=None) -> bytes:
    head = build(
        "POST",
        f"/v1/topics/{topic}/produce",
        b"",
        headers={"Expect": "100-continue"},
        auth=auth,
        announced=len(body) if length is None else length,
    )
    return head


def test_expect_100_continue_invites_the_body_of_an_authorized_request(edge):
    topic = edge.topic()
    body = b'{"invited": true}'
    outcome = expect_continue(edge.port, _expecting(topic, body), body)
    assert outcome.continued
    assert outcome.response.status == 202, outcome.response.body
    edge.assert_stored(topic, 0, body)


@pytest.mark.parametrize(
    ("auth", "status"),
    [(None, 401), (("admin", "a-wrong-password"), 401)],
    ids=["no-credentials", "bad-password"],
)
def test_expect_100_continue_is_refused_before_the_body_without_credentials(
    edge, auth, status
):
    topic = edge.topic()
    body = b"x" * 1000
    outcome = expect_continue(edge.port, _expecting(topic, body, auth=auth), body)
    assert not outcome.continued  # no invitation: the body never left the client
    assert outcome.response.status == status
    assert outcome.response.headers["connection"] == "close"
    assert outcome.response.error
    assert outcome.closed
    assert edge.next_offset(topic) == 0


def test_expect_100_continue_is_refused_before_the_body_without_a_grant(edge):
    topic = edge.topic()
    user = f"edge-{uuid.uuid4().hex[:8]}"
    created = edge.send(
        "POST",
        "/v1/users",
        _json({"username": user, "password": "long-enough-pw", "grants": []}),
    )
    assert created.status == 201, created.body
    body = b"y" * 100
    outcome = expect_continue(
        edge.port, _expecting(topic, body, auth=(user, "long-enough-pw")), body
    )
    assert not outcome.continued
    assert outcome.response.status == 403
    assert outcome.closed
    assert edge.next_offset(topic) == 0


def test_expect_100_continue_over_the_body_limit_is_413_without_the_body(edge):
    topic = edge.topic()
    outcome = expect_continue(
        edge.port, _expecting(topic, b"", length=5 * 1024 * 1024), b"z"
    )
    assert not outcome.continued
    assert outcome.response.status == 413
    assert outcome.closed


def test_a_forwarded_script_name_from_loopback_is_not_trusted(edge):
    """gunicorn trusts forwarding headers from 127.0.0.1 by default: a
    SCRIPT_NAME from any local client gave 500, or rerouted the request."""
    for script_name in ("/x", "/v1", "/v1/topics", "\\", "/" * 50):
        for target in ("/healthz", "/v1/topics", "/v1/topics/nope"):
            resp = exchange(
                edge.port,
                build(
                    "GET",
                    target,
                    framing="none",
                    headers={"SCRIPT_NAME": script_name, "Script-Name": script_name},
                ),
            )
            assert resp.status in (200, 404), (script_name, target, resp.body)
            # Routed by the path as sent: /v1/topics lists, /healthz answers.
            if target == "/healthz":
                assert resp.json() == {"status": "ok"}
            elif target == "/v1/topics":
                assert "topics" in resp.json()
