"""Plain requests (narad.serve.plain) read, answered and framed as gunicorn's own
code does: the same fields, environ and bytes on generated requests, and
every head the short path does not take goes to gunicorn unchanged."""

from __future__ import annotations

import contextlib
import io
import itertools
from unittest import mock

import pytest
from gunicorn import http
from gunicorn import util
from gunicorn.config import Config
from gunicorn.http import wsgi
from gunicorn.http.message import Request
from gunicorn.http.parser import RequestParser
from gunicorn.http.unreader import IterUnreader
from gunicorn.http.unreader import SocketUnreader
from gunicorn.http.wsgi import Response
from hypothesis import HealthCheck
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st

from narad.serve import plain
from narad.serve.plain import PlainEnviron
from narad.serve.plain import PlainParser
from narad.serve.plain import PlainRequest
from narad.serve.plain import PlainResponse
from narad.serve.plain import PlainUnreader

CLIENT = ("127.0.0.2", 40000)
SERVER = ("127.0.0.1", 8080)
EXAMPLES = settings(
    max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)


@pytest.fixture(scope="module")
def cfg() -> Config:
    # Compared with gunicorn's Python parser, which the short path follows,
    # also where its C one is installed (gunicorn-h1c words its refusals
    # differently, and raises them without the request).
    cfg = Config()
    cfg.set("http_parser", "python")
    return cfg


# -- heads ---------------------------------------------------------------------

METHODS = st.sampled_from(
    [b"GET", b"HEAD", b"POST", b"PUT", b"PATCH", b"DELETE", b"OPTIONS", b"get", b"G"]
)
TARGET_CHARS = st.sampled_from(
    [*b"abz09-._~/?=&%+:@!$'()*,;[]", ord("#"), 0x7F, 0x80, 0xE9, 0x20, 0x09]
)
TARGETS = st.one_of(
    st.builds(lambda rest: b"/" + bytes(rest), st.lists(TARGET_CHARS, max_size=30)),
    st.sampled_from([b"//x/y", b"*", b"http://h/p", b"", b"h:80", b"/a%2Fb?q=%41"]),
)
VERSIONS = st.sampled_from([b"HTTP/1.1", b"HTTP/1.0", b"HTTP/2.0", b"http/1.1"])
NAMES = st.one_of(
    st.sampled_from(
        [
            b"Host",
            b"Authorization",
            b"Accept",
            b"Content-Type",
            b"Content-Length",
            b"X-Request-ID",
            b"Idempotency-Key",
            b"Connection",
            b"Transfer-Encoding",
            b"Expect",
            b"Upgrade",
            b"X-Forwarded-Proto",
            b"X-Forwarded-For",
            b"X_Forwarded_For",
            b"Script_Name",
            b"bad name",
            b"",
        ]
    ),
    st.text(alphabet="abcXYZ019-!#$%&'*+.^_`|~", min_size=1, max_size=12).map(
        str.encode
    ),
)
VALUE_CHARS = st.sampled_from(
    [*b"abcXYZ 019:;,/=\"'", 0x09, 0x20, 0x7F, 0x80, 0xFF, 0x00, 0x0A, 0x0D]
)
VALUES = st.one_of(
    st.sampled_from([b"", b"  padded\t ", b"0", b"12", b"-1", b"1_0", b"close"]),
    st.lists(VALUE_CHARS, max_size=20).map(bytes),
)
FIELDS = st.lists(
    st.tuples(NAMES, st.sampled_from([b": ", b":", b" : ", b":\t"]), VALUES),
    max_size=6,
)


def head_bytes(method, target, version, fields) -> bytes:
    lines = [method + b" " + target + b" " + version]
    lines += [name + sep + value for name, sep, value in fields]
    return b"\r\n".join(lines) + b"\r\n\r\n"


ANY_HEADS = st.builds(head_bytes, METHODS, TARGETS, VERSIONS, FIELDS)
# Heads the short path may take: plain parts, so that most of them are plain.
PLAIN_TARGETS = st.builds(
    lambda rest: "/" + rest,
    st.text(
        alphabet=st.characters(min_codepoint=0x21, max_codepoint=0x7E), max_size=40
    ),
).map(str.encode)
PLAIN_NAMES = st.one_of(
    st.sampled_from([b"Host", b"Authorization", b"Content-Type", b"Content-Length"]),
    st.text(alphabet="abcXYZ019-!#$%&'*+.^`|~", min_size=1, max_size=12).map(
        str.encode
    ),
)
PLAIN_VALUES = st.builds(
    lambda pad, value, end: pad + value + end,
    st.sampled_from([b"", b" ", b"\t", b"  "]),
    st.text(
        alphabet=st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=30
    ).map(str.encode),
    st.sampled_from([b"", b" ", b" \t"]),
)
PLAIN_FIELDS = st.lists(
    st.tuples(PLAIN_NAMES, st.sampled_from([b":", b": "]), PLAIN_VALUES),
    min_size=1,
    max_size=6,
    unique_by=lambda field: field[0].lower(),
)
PLAIN_HEADS = st.builds(
    head_bytes,
    st.sampled_from([b"GET", b"HEAD", b"POST", b"PUT", b"PATCH", b"DELETE"]),
    PLAIN_TARGETS,
    st.just(b"HTTP/1.1"),
    PLAIN_FIELDS,
)
HEADS = st.one_of(PLAIN_HEADS, ANY_HEADS)


def parsed(cls: type, cfg: Config, data: bytes):
    """What ``cls`` makes of ``data``: its fields and body, or its error."""
    try:
        req = cls(cfg, IterUnreader([data]), CLIENT, 1)
    except Exception as exc:  # the error is what is compared
        return type(exc), str(exc)
    body = req.body.read()
    return (
        req.method,
        req.uri,
        req.path,
        req.query,
        req.fragment,
        req.version,
        req.headers,
        req.scheme,
        req.should_close(),
        body,
    )


@EXAMPLES
@given(head=HEADS, body=st.sampled_from([b"", b"0123456789", b"GET / HTTP/1.1"]))
def test_a_request_reads_as_gunicorns(cfg, head, body):
    """Plain or not, a head (and what follows it) reads as gunicorn reads it:
    the same fields and body, or the same refusal."""
    assert parsed(PlainRequest, cfg, head + body) == parsed(Request, cfg, head + body)


@EXAMPLES
@given(head=HEADS)
def test_only_heads_gunicorn_reads_alike_are_plain(cfg, head):
    req = None
    with contextlib.suppress(Exception):  # refused by gunicorn's parser
        req = PlainRequest(cfg, IterUnreader([head]), CLIENT, 1)
    if req is not None and req.plain:
        assert req.version == (1, 1)
        assert req.method in {"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"}
        names = [name for name, _ in req.headers]
        assert len(names) == len(set(names))
        assert not {"CONNECTION", "TRANSFER-ENCODING", "EXPECT"} & set(names)


def test_common_requests_are_plain(cfg):
    for head in (
        b"GET /v1/topics/t/consume?wait=10s HTTP/1.1\r\nHost: n\r\n"
        b"Authorization: Basic YTpi\r\n\r\n",
        b"POST /v1/topics/t/produce HTTP/1.1\r\nHost: n\r\n"
        b"Content-Type: application/json\r\nContent-Length: 2\r\n\r\n{}",
        b"GET /healthz HTTP/1.1\r\nHost: n\r\n\r\n",
    ):
        assert PlainRequest(cfg, IterUnreader([head]), CLIENT, 1).plain


@pytest.mark.parametrize(
    "head",
    [
        b"GET / HTTP/1.0\r\nHost: n\r\n\r\n",
        b"GET / HTTP/1.1\r\nHost: n\r\nConnection: close\r\n\r\n",
        b"GET / HTTP/1.1\r\nHost: n\r\nHost: m\r\n\r\n",
        b"GET /a#b HTTP/1.1\r\nHost: n\r\n\r\n",
        b"GET //a HTTP/1.1\r\nHost: n\r\n\r\n",
        b"GET / HTTP/1.1\r\nX_A: 1\r\n\r\n",
        b"GET / HTTP/1.1\r\nX-A: caf\xc3\xa9\r\n\r\n",
        b"GET / HTTP/1.1\r\nX-A: 1\r\n folded\r\n\r\n",
        b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
        b"GET / HTTP/1.1\r\nX-Forwarded-Proto: https\r\n\r\n",
        b"\r\nGET / HTTP/1.1\r\nHost: n\r\n\r\n",
    ],
)
def test_other_requests_go_to_gunicorn(cfg, head):
    """Not plain: gunicorn reads it, or refuses it as it refuses it anyway."""
    assert parsed(PlainRequest, cfg, head) == parsed(Request, cfg, head)
    try:
        req = PlainRequest(cfg, IterUnreader([head]), CLIENT, 1)
    except Exception:  # refused by gunicorn's parser
        return
    assert not req.plain


def test_the_limits_are_gunicorns(cfg):
    limited = Config()
    limited.set("limit_request_line", 20)
    limited.set("limit_request_fields", 2)
    limited.set("limit_request_field_size", 20)
    for head in (
        b"GET /" + b"a" * 30 + b" HTTP/1.1\r\nHost: n\r\n\r\n",
        b"GET / HTTP/1.1\r\nA: 1\r\nB: 2\r\nC: 3\r\n\r\n",
        b"GET / HTTP/1.1\r\nA: " + b"x" * 30 + b"\r\n\r\n",
    ):
        assert parsed(PlainRequest, limited, head) == parsed(Request, limited, head)
        assert isinstance(parsed(PlainRequest, limited, head)[0], type)


def test_a_head_split_across_reads_goes_to_gunicorn(cfg):
    head = b"GET / HTTP/1.1\r\nHost: n\r\n\r\n"
    req = PlainRequest(cfg, IterUnreader([head[:10], head[10:]]), CLIENT, 1)
    assert not req.plain
    assert (req.method, req.path, req.headers) == ("GET", "/", [("HOST", "n")])


# -- a connection's requests -------------------------------------------------


def with_body(head: bytes, body: bytes) -> bytes:
    """``head`` (its blank line last) with a Content-Length for ``body``."""
    return head[:-2] + b"Content-Length: %d\r\n\r\n" % len(body) + body


def split(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts} | {0, len(data)})
    return [data[a:b] for a, b in itertools.pairwise(points)]


def served(parser_class: type, cfg: Config, chunks: list[bytes], reads: list[bool]):
    """What a worker gets from a connection: each request as :func:`parsed`
    reads it (its body read or, per ``reads``, left for the parser to
    drain), and how the connection ends (closed, or the error)."""
    requests = []
    parser = parser_class(cfg, list(chunks), CLIENT)
    try:
        for i, req in enumerate(parser):
            body = req.body.read() if reads[i % len(reads)] else b"(left)"
            requests.append(
                (
                    req.method,
                    req.uri,
                    req.query,
                    req.version,
                    req.headers,
                    req.scheme,
                    req.should_close(),
                    req.req_number,
                    body,
                )
            )
    except Exception as exc:  # how the connection ended is compared too
        return requests, (type(exc), str(exc))
    return requests, None


@EXAMPLES
@given(
    requests=st.lists(
        st.tuples(HEADS, st.sampled_from([b"", b"{}", b"0123456789" * 3])),
        min_size=1,
        max_size=4,
    ),
    cuts=st.lists(st.integers(min_value=0, max_value=400), max_size=4),
    reads=st.lists(st.booleans(), min_size=1, max_size=3),
    tail=st.sampled_from([b"", b"GET", b"\r\n"]),
)
def test_a_connections_requests_read_as_gunicorns(cfg, requests, cuts, reads, tail):
    """Pipelined requests, plain or not, with or without bodies, however
    the bytes are cut into reads: the same requests in the same order, and
    the connection ends the same way."""
    data = b"".join(with_body(h, b) if b else h for h, b in requests) + tail
    chunks = split(data, cuts)
    assert served(PlainParser, cfg, chunks, reads) == served(
        RequestParser, cfg, chunks, reads
    )


@EXAMPLES
@given(head=PLAIN_HEADS, body=st.sampled_from([b"", b"{}"]))
def test_a_plain_request_made_on_the_short_path_is_gunicorns(cfg, head, body):
    """Every attribute a plain request gets on the short path is the one
    gunicorn's Request sets (the body aside, a reader of the same bytes)."""
    data = with_body(head, body) if body else head
    try:
        expected = PlainRequest(cfg, IterUnreader([data]), CLIENT, 1)
    except Exception:
        return
    if not expected.plain:
        return
    made = next(PlainParser(cfg, [data], CLIENT))
    assert made.plain
    mine, theirs = dict(vars(made)), dict(vars(expected))
    assert type(mine.pop("body")) is type(theirs.pop("body"))
    assert type(mine.pop("unreader")) is type(theirs.pop("unreader"))
    assert mine == theirs
    assert made.body.read() == body


@pytest.mark.parametrize(
    "length", [b"1x", b"-1", b"", b"1 1", b"99999999999999999999x"]
)
def test_a_refused_length_leaves_the_request_gunicorn_leaves(cfg, length):
    """The request a refusal carries (for its answer and access-log line)
    is the one gunicorn's parse leaves."""
    data = b"POST / HTTP/1.1\r\nHost: n\r\nContent-Length: " + length + b"\r\n\r\n"
    refusals = []
    for parser_class in (PlainParser, RequestParser):
        with pytest.raises(http.errors.InvalidHeader) as refused:
            next(parser_class(cfg, [data], CLIENT))
        refusals.append(refused.value.req)
    mine, theirs = (dict(vars(req)) for req in refusals)
    assert type(mine.pop("unreader")) is type(theirs.pop("unreader"))
    assert mine.pop("plain") and "plain" not in theirs
    assert mine == theirs


class ChunkSocket:
    """A socket whose reads return the given chunks, then nothing."""

    def __init__(self, chunks: list[bytes]) -> None:
        self.chunks = list(chunks)
        self.asked: list[int] = []

    def recv(self, size: int) -> bytes:
        self.asked.append(size)
        if not self.chunks:
            return b""
        chunk = self.chunks.pop(0)
        if len(chunk) > size:
            self.chunks.insert(0, chunk[size:])
            chunk = chunk[:size]
        return chunk


UNREADER_STEPS = st.lists(
    st.one_of(
        st.tuples(
            st.just("read"),
            st.sampled_from([None, 0, -1, 1, 3, 10, 9000]),
            st.sampled_from([None, 0, 5, 20000]),
        ),
        st.tuples(
            st.just("unread"), st.sampled_from([b"", b"x", b"abc" * 5]), st.none()
        ),
        st.tuples(st.just("take"), st.none(), st.none()),
    ),
    max_size=12,
)


@EXAMPLES
@given(
    chunks=st.lists(st.binary(min_size=1, max_size=12), max_size=6),
    steps=UNREADER_STEPS,
)
def test_the_unreader_reads_and_unreads_as_gunicorns(chunks, steps):
    def run(cls: type):
        sock = ChunkSocket(chunks)
        unreader = cls(sock)
        out = []
        for op, a, b in steps:
            if op == "read":
                out.append(unreader.read(a, read_ahead=b))
            elif op == "unread":
                unreader.unread(a)
            else:
                out.append(unreader.take_buffered())
        return out, sock.asked

    assert run(PlainUnreader) == run(SocketUnreader)


def test_a_socket_connection_reads_through_the_bytes_unreader(cfg):
    parser = PlainParser(
        cfg, ChunkSocket([b"GET / HTTP/1.1\r\nHost: n\r\n\r\n"]), CLIENT
    )
    assert type(parser.unreader) is PlainUnreader
    assert next(parser).plain


def test_a_large_body_in_small_reads_is_read_in_linear_time(cfg):
    """Each read appends to one buffer: a body of 1-byte reads is not
    copied again on each of them."""
    body = b"x" * 200_000
    sock = ChunkSocket([b"POST / HTTP/1.1\r\nContent-Length: 200000\r\n\r\n"])
    sock.chunks += [b"x"] * len(body)
    req = next(PlainParser(cfg, sock, CLIENT))
    assert req.body.read() == body


# -- environ -------------------------------------------------------------------

OBJECTS = ("wsgi.errors", "wsgi.input", "gunicorn.socket", "wsgi.early_hints")


@EXAMPLES
@given(head=PLAIN_HEADS)
def test_a_plain_requests_environ_is_gunicorns(cfg, head):
    try:
        req = PlainRequest(cfg, IterUnreader([head]), CLIENT, 1)
    except Exception:
        return
    if not req.plain:
        return
    sock = io.BytesIO()
    resp, expected = wsgi.create(req, sock, CLIENT, SERVER, cfg)
    expected["wsgi.multithread"] = True  # as gunicorn's async workers set it
    made = PlainEnviron(cfg).make(req, sock, CLIENT, SERVER, resp)
    assert {k: v for k, v in made.items() if k not in OBJECTS} == {
        k: v for k, v in expected.items() if k not in OBJECTS
    }
    assert made.keys() == expected.keys()
    assert made["wsgi.input"] is expected["wsgi.input"]
    assert made["gunicorn.socket"] is sock
    assert type(made["wsgi.errors"]) is type(expected["wsgi.errors"])
    assert callable(made["wsgi.early_hints"])


# -- responses -----------------------------------------------------------------


class Sink:
    def __init__(self) -> None:
        self.data = b""

    def sendall(self, data: bytes) -> None:
        self.data += data

    send = sendall


STATUSES = st.sampled_from(
    [
        "200 OK",
        "201 Created",
        "202 Accepted",
        "204 No Content",
        "304 Not Modified",
        "404 Not Found",
        "503 Service Unavailable",
        "100 Continue",
        "200",
        "2000 Odd",
        "200 caf\xe9",
        "abc",
    ]
)
RESPONSE_FIELDS = st.lists(
    st.tuples(
        st.sampled_from(
            [
                "Content-Type",
                "Content-Length",
                "X-Request-ID",
                "Retry-After",
                "Connection",
                "Server",
                "Date",
                "Transfer-Encoding",
                "Bad Name",
                "content-length",
            ]
        ),
        st.sampled_from(["application/json", "2", " 5 ", "abc", "", "x\r\ny", "\xe9"]),
    ),
    max_size=5,
)


def answered(cls: type, cfg: Config, method: str, status, fields, chunks, version):
    req = PlainRequest(
        cfg,
        IterUnreader([f"{method} / HTTP/1.{version}\r\nHost: n\r\n\r\n".encode()]),
        CLIENT,
        1,
    )
    sink = Sink()
    resp = cls(req, sink, cfg)
    try:
        write = resp.start_response(status, list(fields))
        for chunk in chunks:
            write(chunk)
        resp.close()
    except Exception as exc:  # the error is what is compared
        return type(exc), sink.data
    return sink.data, resp.should_close(), resp.response_length, resp.status_code


@EXAMPLES
@given(
    method=st.sampled_from(["GET", "HEAD", "POST"]),
    status=STATUSES,
    fields=RESPONSE_FIELDS,
    chunks=st.lists(st.sampled_from([b"", b"ab", b"{}\n", b"hello"]), max_size=3),
    version=st.sampled_from([0, 1]),
)
def test_a_response_is_written_as_gunicorn_writes_it(
    cfg, method, status, fields, chunks, version
):
    date = "Fri, 04 Dec 2026 00:00:00 GMT"
    with mock.patch.object(util, "http_date", lambda: date):
        assert answered(
            PlainResponse, cfg, method, status, fields, chunks, version
        ) == answered(Response, cfg, method, status, fields, chunks, version)


def test_ordinary_responses_take_the_one_pass_head(cfg):
    req = PlainRequest(
        cfg, IterUnreader([b"GET / HTTP/1.1\r\nHost: n\r\n\r\n"]), CLIENT, 1
    )
    for status, fields in (
        ("204 No Content", [("X-Request-ID", "a")]),
        ("200 OK", [("Content-Type", "application/json"), ("Content-Length", "3")]),
    ):
        resp = PlainResponse(req, Sink(), cfg)
        resp.start_response(status, fields)
        assert resp._plain_head
    chunked = PlainResponse(req, Sink(), cfg)
    chunked.start_response("200 OK", [("Content-Type", "text/plain")])
    assert not chunked._plain_head and chunked.chunked


# -- installing ------------------------------------------------------------------


def test_install_gives_http1_connections_the_plain_parser(cfg, monkeypatch):
    monkeypatch.setattr(http, "get_parser", http.get_parser)
    served = plain.install(cfg)
    parser = http.get_parser(cfg, [b"GET / HTTP/1.1\r\nHost: n\r\n\r\n"], CLIENT)
    assert type(parser) is PlainParser
    req = next(parser)
    assert req.plain
    assert served.takes(req, SERVER)
    resp, environ = served.create(req, io.BytesIO(), CLIENT, SERVER)
    assert type(resp) is PlainResponse
    assert environ["PATH_INFO"] == "/"
    # A unix-socket listener, or a request gunicorn parsed: gunicorn's own.
    assert not served.takes(req, "/run/narad.sock")
    other = next(http.get_parser(cfg, [b"GET / HTTP/1.0\r\n\r\n"], CLIENT))
    assert not other.plain
    assert not served.takes(other, SERVER)


def test_a_worker_mounted_under_a_script_name_keeps_gunicorns_environ(cfg, monkeypatch):
    """gunicorn splits PATH_INFO by ``SCRIPT_NAME`` from the environment,
    which the short path does not: a worker started with one uses
    gunicorn's environ for every request."""
    monkeypatch.setattr(http, "get_parser", http.get_parser)
    monkeypatch.setenv("SCRIPT_NAME", "/narad")
    served = plain.install(cfg)
    req = next(
        http.get_parser(cfg, [b"GET /narad/x HTTP/1.1\r\nHost: n\r\n\r\n"], CLIENT)
    )
    assert req.plain
    assert not served.takes(req, SERVER)
    resp, environ = wsgi.create(req, io.BytesIO(), CLIENT, SERVER, cfg)
    assert type(resp) is Response
    assert (environ["SCRIPT_NAME"], environ["PATH_INFO"]) == ("/narad", "/x")


def test_a_head_without_host_is_not_plain(cfg):
    """RFC 9112 3.2: HTTP/1.1 without Host is 400; the worker refuses it on
    gunicorn's path (narad.serve.workers), so the short path leaves it there."""
    head = b"GET /healthz HTTP/1.1\r\nAccept: */*\r\n\r\n"
    assert plain.plain_head(head[:-4], 0, 100, 0, ()) is None
    assert not PlainRequest(cfg, IterUnreader([head]), CLIENT, 1).plain
    with_host = b"GET /healthz HTTP/1.1\r\nHost: n\r\n\r\n"
    assert PlainRequest(cfg, IterUnreader([with_host]), CLIENT, 1).plain


@pytest.mark.parametrize(
    ("allowed", "peer", "trusted"),
    [
        ("", ("127.0.0.1", 1), False),
        ("", "", False),  # a unix socket's peer: gunicorn trusts it
        ("10.0.0.0/8", ("10.1.2.3", 1), True),
        ("10.0.0.0/8", ("127.0.0.1", 1), False),
        ("10.0.0.0/8", "", False),
        ("*", "", True),
        ("*", ("192.0.2.1", 1), True),
    ],
)
def test_forwarding_headers_are_trusted_from_the_allowed_peers_only(
    allowed, peer, trusted
):
    cfg = Config()
    cfg.set("forwarded_allow_ips", allowed)
    head = (
        b"GET /narad/healthz HTTP/1.1\r\nHost: n\r\nX-Forwarded-Proto: https\r\n"
        b"SCRIPT_NAME: /narad\r\n\r\n"
    )
    req = PlainRequest(cfg, IterUnreader([head]), peer, 1)
    assert (req.scheme == "https") is trusted
    assert any(name == "SCRIPT_NAME" for name, _ in req.headers) is trusted


@pytest.mark.parametrize("parser", ["python", "auto"])
def test_the_short_path_sets_every_attribute_gunicorns_parse_sets(parser):
    """narad.serve.plain makes a plain request without gunicorn's parse, by
    copying the attributes gunicorn's Request set on one it parsed: a
    gunicorn that sets another attribute, or drops one, fails here before a
    worker serves requests missing it (setup.cfg bounds gunicorn at the
    minor version tested). With ``auto``, gunicorn's C parser where it is
    installed (server.http_parser)."""
    cfg = Config()
    cfg.set("http_parser", parser)
    data = (
        b"POST /v1/topics/t/produce?key=a HTTP/1.1\r\nHost: h\r\n"
        b"Authorization: Basic eDp5\r\nContent-Length: 2\r\n\r\n{}"
    )
    theirs = vars(Request(cfg, IterUnreader([data]), CLIENT, 1))
    made = next(PlainParser(cfg, [data], CLIENT))
    assert made.plain
    mine = vars(made)
    # Only the short path's own mark is more.
    assert set(mine) - set(theirs) == {"plain"}
    assert set(theirs) - set(mine) == set()
    for name in set(theirs) - {"body", "unreader"}:
        assert mine[name] == theirs[name], name
    assert made.body.read() == b"{}"
