"""Plain requests: the common HTTP/1.1 request on a short path through gunicorn.

Nearly every request a node serves is *plain*: an HTTP/1.1 request line
in origin form, a few ordinary fields each given once, and no body or one
of a stated length: a long poll, a produce, a probe. gunicorn's general
parser, WSGI environ and response writer handle every request the protocol
allows (folded lines, forwarding headers, chunked bodies, trailers), at a
cost an idle long poll feels most: 10,000 ``wait=10s`` consumers ask again
1,000 times a second, and what answering them takes, produces from other
clients lose. A long poll costs a worker markedly less CPU through this
path than through gunicorn's, and a head taken apart here without
gunicorn's parse, then answered in one call of the worker's
(:meth:`narad.serve.workers.NaradWorker._respond`), less again:
``bench/ab.py --variant`` measures it against gunicorn's parsers
(``server.plain_requests``, ``server.http_parser``; the benchmarks page).

So a worker (:mod:`narad.serve.workers`) takes a plain request's head apart here
and builds its environ and its response head directly, and hands anything
else to gunicorn's own code, unchanged:

- :func:`plain_head` accepts a head only if gunicorn would accept it and
  read it the same way. It is a strict subset: whatever it leaves (another
  method or version, a ``#`` or ``//`` in the target, a field name with
  ``_`` or a value outside printable ASCII, a repeated field, a field that
  changes framing, the connection or the scheme: ``Transfer-Encoding``,
  ``Expect``, ``Connection``, ``Upgrade``, the secure-scheme headers), and
  a head without ``Host``, goes to gunicorn's parser, with its checks and
  refusals (and the worker's: :meth:`narad.serve.workers.NaradWorker.handle_request`
  refuses an HTTP/1.1 request without ``Host``). The body reader is
  still gunicorn's, set from ``Content-Length`` as for any request.
- :class:`PlainParser` is gunicorn's request parser, which makes a head
  that arrives whole in one read and is plain into a :class:`PlainRequest`
  itself, with the attributes gunicorn's parse would give it, and reads
  the others through gunicorn's ``Request``. A finished body needs no
  draining before the next request; :class:`PlainUnreader` holds what was
  read ahead as bytes, not in a new ``io.BytesIO`` per read.
- :class:`PlainRequest` is gunicorn's ``Request``, parsed by
  :func:`plain_head` when it can be; ``plain`` says which.
- :class:`PlainEnviron` makes the environ gunicorn's ``wsgi.create`` makes
  for such a request, from a per-listener base and the request's fields.
- :class:`PlainResponse` is gunicorn's ``Response``, whose head is checked
  and written in one pass when the app's status and fields are ordinary
  (a stated length or no body); anything else is gunicorn's own path.

``tests/unit/test_plain.py`` checks each against gunicorn's own on generated
requests, connections (pipelined, cut into reads anywhere) and responses:
the same requests, attributes, environ and bytes.
"""

from __future__ import annotations

import os
import re
import weakref
from collections.abc import Container
from typing import Any

from gunicorn import http
from gunicorn import util
from gunicorn.http.body import Body
from gunicorn.http.body import LengthReader
from gunicorn.http.message import Request
from gunicorn.http.parser import RequestParser
from gunicorn.http.unreader import IterUnreader
from gunicorn.http.unreader import SocketUnreader
from gunicorn.http.wsgi import SERVER_SOFTWARE
from gunicorn.http.wsgi import FileWrapper
from gunicorn.http.wsgi import Response
from gunicorn.http.wsgi import WSGIErrorsWrapper
from gunicorn.http.wsgi import _make_early_hints_callback

# Origin form only, without a fragment, not starting "//" (which urllib reads
# as an authority); printable ASCII, as gunicorn requires of every target.
_LINE = re.compile(
    rb"(GET|HEAD|POST|PUT|PATCH|DELETE) (/(?!/)[\x21\x22\x24-\x7e]*) HTTP/1\.1"
)
# A token without "_" (gunicorn refuses or drops those), optional white space
# around a value of printable ASCII, spaces and tabs.
_FIELD = re.compile(
    rb"([!#$%&'*+\-.^`|~0-9A-Za-z]+):[ \t]*"
    rb"((?:[\x21-\x7e](?:[\x20-\x7e\t]*[\x21-\x7e])?)?)[ \t]*"
)
# Fields that change how gunicorn reads the request or the connection.
_NOT_PLAIN = frozenset(
    {"CONNECTION", "EXPECT", "HTTP2-SETTINGS", "TRANSFER-ENCODING", "UPGRADE"}
)
# Response heads the short path writes: gunicorn's STATUS_RE and
# HEADER_VALUE_RE without obs-text (what is beyond goes gunicorn's way).
_STATUS = re.compile(r"([0-9]{3})(?: [ \t\x21-\x7e]*)?")
_RESPONSE_FIELD = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_RESPONSE_VALUE = re.compile(r"[ \t\x21-\x7e]*")
_HOP_BY_HOP = frozenset(util.hop_headers)


def plain_head(
    head: bytes,
    line_limit: int,
    field_limit: int,
    field_size: int,
    scheme_fields: Container[str],
) -> tuple[str, str, str, str, list[tuple[str, str]]] | None:
    """(method, target, path, query, fields) of a plain request's ``head``
    (up to its blank line, not included), field names in upper case and
    values trimmed, as gunicorn reads them; None if it is not plain. The
    limits are gunicorn's (0: none); ``scheme_fields`` holds the names of
    the secure-scheme headers (upper case, as gunicorn matches them), which
    set the scheme when a trusted proxy sends them."""
    lines = head.split(b"\r\n")
    line = _LINE.fullmatch(lines[0])
    if line is None or 0 < line_limit < len(lines[0]):
        return None
    if not 0 < len(lines) - 1 <= field_limit:
        return None
    fields = []
    seen = set()
    for raw in lines[1:]:
        field = _FIELD.fullmatch(raw)
        if field is None or len(raw) + 2 > field_size > 0:
            return None
        name = field[1].decode().upper()
        if name in seen or name in _NOT_PLAIN or name in scheme_fields:
            return None
        seen.add(name)
        fields.append((name, field[2].decode()))
    if "HOST" not in seen:
        return None  # refused (400) on gunicorn's path: RFC 9112 3.2
    target = line[2].decode()
    path, _, query = target.partition("?")
    return line[1].decode(), target, path, query, fields


class PlainRequest(Request):
    """gunicorn's ``Request``, parsed by :func:`plain_head` when plain."""

    plain = False

    def parse(self, unreader: Any) -> bytes:
        buf = bytearray()
        self.read_into(unreader, buf, stop=True)
        mode = self.cfg.proxy_protocol
        if mode != "off":
            if self.req_number == 1:
                buf = self._handle_proxy_protocol(unreader, buf, mode)
        else:
            end = buf.find(b"\r\n\r\n")
            head = None
            if end > 0:
                head = plain_head(
                    bytes(buf[:end]),
                    self.limit_request_line,
                    self.limit_request_fields,
                    self.limit_request_field_size,
                    self.cfg.secure_scheme_headers,
                )
            if head is not None:
                self.method, self.uri, self.path, self.query, self.headers = head
                self.fragment = ""
                self.version = (1, 1)
                self.plain = True
                return bytes(buf[end + 4 :])
        if self._use_fast:
            return self._parse_fast(unreader, buf)
        return self._parse_python(unreader, buf)

    def _peer_is_trusted_proxy(self) -> bool:
        # gunicorn trusts every peer of a unix socket; here only ``*`` in
        # server.forwarded_allow_ips does (narad.serve.server).
        if not isinstance(self.peer_addr, tuple):
            return "*" in self.cfg.forwarded_allow_ips
        return super()._peer_is_trusted_proxy()

    def set_body_reader(self) -> None:
        if self.plain and not any(n == "CONTENT-LENGTH" for n, _ in self.headers):
            # No framing fields: no body (gunicorn's reading, without its
            # pass over the fields and the reader it first makes).
            self.body = Body(LengthReader(self.unreader, 0))
            return
        super().set_body_reader()

    def should_close(self) -> bool:
        # HTTP/1.1 without a Connection field: only a forced close closes.
        if self.plain:
            return self.must_close
        return super().should_close()


# A plain head, parsed the long way once per configuration: what gunicorn's
# Request sets that is the same for every plain request (its limits, scheme).
_TEMPLATE_HEAD = b"GET / HTTP/1.1\r\nHost: t\r\n\r\n"
# What each plain request sets itself.
_OWN = frozenset(
    {"method", "uri", "path", "query", "headers", "trailers", "body"}
    | {"unreader", "peer_addr", "remote_addr", "req_number"}
)
_templates: weakref.WeakKeyDictionary[Any, dict[str, Any] | None] = (
    weakref.WeakKeyDictionary()
)


def _template(cfg: Any) -> dict[str, Any] | None:
    """The attributes every plain request under ``cfg`` shares, or None
    when the short path does not apply (a proxy-protocol header first)."""
    try:
        return _templates[cfg]
    except KeyError:
        pass
    template = None
    if cfg.proxy_protocol == "off":
        req = PlainRequest(cfg, IterUnreader([_TEMPLATE_HEAD]), None, 1)
        if req.plain:
            template = {k: v for k, v in vars(req).items() if k not in _OWN}
    _templates[cfg] = template
    return template


class PlainParser(RequestParser):
    """gunicorn's request parser, which reads a plain head itself.

    A head that arrives whole in one read and is plain becomes a
    :class:`PlainRequest` without gunicorn's parse: its attributes are the
    ones gunicorn's would have (the shared ones from a request parsed once,
    :func:`_template`). Anything else is put back and read by gunicorn's
    Request, which takes a plain head split across reads too. A finished
    ``Content-Length`` body needs no draining before the next request.
    """

    mesg_class = PlainRequest

    def __init__(self, cfg: Any, source: Any, source_addr: Any) -> None:
        super().__init__(cfg, source, source_addr)
        if type(self.unreader) is SocketUnreader:
            self.unreader = PlainUnreader(source)
        self._template = template = _template(cfg)
        if template is not None:
            self._limits = (
                template["limit_request_line"],
                template["limit_request_fields"],
                template["limit_request_field_size"],
                cfg.secure_scheme_headers,
            )

    def __next__(self) -> Request:
        mesg = self.mesg
        if mesg is not None:
            if mesg.should_close():
                raise StopIteration()
            body = mesg.body
            reader = body.reader
            finished = (
                type(reader) is LengthReader and not reader.length and not body.failed
            )
            if not finished and not self.finish_body():
                raise StopIteration()
        self.req_count += 1
        if self._template is not None:
            req = self._plain_request()
            if req is not None:
                self.mesg = req
                return req
        self.mesg = self.mesg_class(
            self.cfg, self.unreader, self.source_addr, self.req_count
        )
        return self.mesg

    next = __next__

    def _plain_request(self) -> PlainRequest | None:
        unreader = self.unreader
        data = unreader.read()
        end = data.find(b"\r\n\r\n")
        head = plain_head(data[:end], *self._limits) if end > 0 else None
        if head is None:
            unreader.unread(data)
            return None
        if end + 4 < len(data):
            unreader.unread(data[end + 4 :])
        req = PlainRequest.__new__(PlainRequest)
        own = vars(req)
        own.update(self._template)  # type: ignore[arg-type]
        own["method"], own["uri"], own["path"], own["query"], own["headers"] = head
        own["trailers"] = []
        own["body"] = None  # as gunicorn leaves it when the framing is refused
        own["unreader"] = unreader
        own["peer_addr"] = own["remote_addr"] = self.source_addr
        own["req_number"] = self.req_count
        req.set_body_reader()
        return req


class PlainUnreader(SocketUnreader):
    """gunicorn's ``SocketUnreader`` over a bytes buffer: the same reads and
    unreads, without the ``io.BytesIO`` it makes for each unread and read."""

    def __init__(self, sock: Any, max_chunk: int = 8192) -> None:
        self.sock = sock
        self.mxchunk = max_chunk
        self.held = b""

    def read(self, size: int | None = None, read_ahead: int | None = None) -> bytes:
        if size is not None and not isinstance(size, int):
            raise TypeError("size parameter must be an int or long.")
        if size is not None:
            if size == 0:
                return b""
            if size < 0:
                size = None
        held = self.held
        if size is None:
            if held:
                self.held = b""
                return held
            return self.chunk(read_ahead)
        if len(held) < size:
            buf = bytearray(held)
            while len(buf) < size:
                chunk = self.chunk(max(size, read_ahead or 0) - len(buf))
                if not chunk:
                    self.held = b""
                    return bytes(buf)
                buf += chunk
            held = bytes(buf)
        self.held = held[size:]
        return held[:size]

    def unread(self, data: bytes) -> None:
        self.held = bytes(data) + self.held

    def take_buffered(self) -> bytes:
        held, self.held = self.held, b""
        return held


def install(cfg: Any) -> Plain:
    """Read plain requests on the short path in this worker process, and
    return what serves them (the worker answers them itself with it:
    :meth:`narad.serve.workers.NaradWorker._respond`).

    gunicorn's workers look up ``gunicorn.http.get_parser`` when a
    connection opens: HTTP/1 connections get a :class:`PlainParser`, the
    others gunicorn's own, as before.
    """
    get_parser = http.get_parser

    def plain_get_parser(
        cfg: Any, source: Any, source_addr: Any, http2_connection: bool = False
    ) -> Any:
        if http2_connection or getattr(cfg, "protocol", "http") != "http":
            return get_parser(cfg, source, source_addr, http2_connection)
        return PlainParser(cfg, source, source_addr)

    http.get_parser = plain_get_parser
    return Plain(cfg)


class Plain:
    """A worker's environ and response for plain requests."""

    __slots__ = ("_cfg", "_environ", "_mounted")

    def __init__(self, cfg: Any) -> None:
        self._cfg = cfg
        self._environ = PlainEnviron(cfg)
        # gunicorn reads it from the environment per request; a worker's
        # does not change once it runs.
        self._mounted = bool(os.environ.get("SCRIPT_NAME"))

    def takes(self, req: Any, server: Any) -> bool:
        """Whether ``req`` arriving on ``server`` (the listener's address)
        is served here: plain, on a TCP listener, no ``SCRIPT_NAME``."""
        return (
            getattr(req, "plain", False) and type(server) is tuple and not self._mounted
        )

    def create(
        self, req: PlainRequest, sock: Any, client: Any, server: Any
    ) -> tuple[PlainResponse, dict[str, Any]]:
        """What ``gunicorn.http.wsgi.create`` makes, for a request
        :meth:`takes` takes."""
        resp = PlainResponse(req, sock, self._cfg)
        return resp, self._environ.make(req, sock, client, server, resp)


class PlainEnviron:
    """The environ ``gunicorn.http.wsgi.create`` makes for a plain request
    on a TCP listener, without a proxy-protocol header or ``SCRIPT_NAME``
    (:meth:`Plain.takes` leaves the others to gunicorn)."""

    __slots__ = ("_base", "_errors")

    def __init__(self, cfg: Any) -> None:
        # One wrapper for the worker's life: it writes to the error log.
        self._errors = WSGIErrorsWrapper(cfg)
        self._base: dict[Any, dict[str, Any]] = {}

    def make(
        self, req: PlainRequest, sock: Any, client: Any, server: Any, resp: Response
    ) -> dict[str, Any]:
        base = self._base.get(server)
        if base is None:
            base = self._base[server] = {
                "wsgi.errors": self._errors,
                "wsgi.version": (1, 0),
                "wsgi.multithread": True,  # as gunicorn's async workers set it
                "wsgi.multiprocess": req.cfg.workers > 1,
                "wsgi.run_once": False,
                "wsgi.file_wrapper": FileWrapper,
                "wsgi.input_terminated": True,
                "SERVER_SOFTWARE": SERVER_SOFTWARE,
                "SERVER_PROTOCOL": "HTTP/1.1",
                "SERVER_NAME": server[0],
                "SERVER_PORT": str(server[1]),
                "SCRIPT_NAME": "",
            }
        environ = base.copy()
        environ["wsgi.input"] = req.body
        environ["gunicorn.socket"] = sock
        environ["REQUEST_METHOD"] = req.method
        environ["QUERY_STRING"] = req.query
        environ["RAW_URI"] = req.uri
        for name, value in req.headers:
            if name == "CONTENT-TYPE":
                environ["CONTENT_TYPE"] = value
            elif name == "CONTENT-LENGTH":
                environ["CONTENT_LENGTH"] = value
            else:
                environ["HTTP_" + name.replace("-", "_")] = value
        environ["wsgi.url_scheme"] = req.scheme
        environ["REMOTE_ADDR"] = client[0]
        environ["REMOTE_PORT"] = str(client[1])
        path = req.path
        # A plain target is ASCII: without an escape it decodes to itself.
        environ["PATH_INFO"] = util.unquote_to_wsgi_str(path) if "%" in path else path
        environ["wsgi.early_hints"] = _make_early_hints_callback(req, sock, resp)
        return environ


class PlainResponse(Response):
    """gunicorn's ``Response``, with an ordinary head checked and written in
    one pass: a status and fields of printable ASCII, none hop-by-hop, and one
    ``Content-Length`` or no body (HEAD, 1xx, 204, 304). Anything else takes
    gunicorn's ``start_response`` (chunked bodies, its checks and refusals)."""

    _plain_head = False

    def start_response(self, status: str, headers: list, exc_info: Any = None):
        match = _STATUS.fullmatch(status) if type(status) is str else None
        if exc_info is not None or self.status is not None or match is None:
            return super().start_response(status, headers, exc_info)
        code = int(match[1])
        omits_body = self._response_omits_body(self.req.method, code)
        # RFC 9110 6.4.2: no Content-Length on 1xx and 204 (gunicorn drops it).
        forbids_length = code == 204 or 100 <= code < 200
        length = None
        kept = []
        for name, value in headers:
            if (
                type(name) is not str
                or type(value) is not str
                or not _RESPONSE_FIELD.fullmatch(name)
                or not _RESPONSE_VALUE.fullmatch(value)
            ):
                return super().start_response(status, headers, exc_info)
            lname = name.lower()
            if lname in _HOP_BY_HOP:
                return super().start_response(status, headers, exc_info)
            value = value.strip(" \t")
            if lname == "content-length":
                if length is not None or not value.isdigit():
                    return super().start_response(status, headers, exc_info)
                length = int(value)
                if forbids_length:
                    continue
            kept.append((name, value))
        if forbids_length:
            length = None
        elif length is None and not omits_body:
            return super().start_response(status, headers, exc_info)  # chunked
        self.status = status
        self.status_code = code
        self.headers = kept
        self.response_length = length
        self._omits_body = omits_body
        self._plain_head = True
        return self.write

    def send_headers(self) -> None:
        if not self._plain_head or self.headers_sent:
            return super().send_headers()
        fields = "".join([f"{name}: {value}\r\n" for name, value in self.headers])
        major, minor = self.req.version
        head = (
            f"HTTP/{major}.{minor} {self.status}\r\nServer: {self.version}\r\n"
            f"Date: {util.http_date()}\r\n"
            f"Connection: {'close' if self.should_close() else 'keep-alive'}\r\n"
            f"{fields}\r\n"
        )
        util.write(self.sock, head.encode("latin-1"))
        self.headers_sent = True
