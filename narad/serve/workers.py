"""The gunicorn worker class of a Narad node.

Consume is a long poll, so a node holds thousands of idle requests at once:
:class:`NaradWorker` is gunicorn's gevent worker, where a connection costs a
greenlet rather than a thread, plus what a node facing clients directly needs:

- **Slow clients are bounded.** A request's line and headers must arrive
  within ``server.header_timeout`` (counted from the connection's start, or
  from the first byte of a later request on a kept-alive connection), its
  body within ``server.body_timeout`` plus one second per
  ``server.body_min_rate`` bytes received. A late request is answered 408
  (JSON) and its connection closed; an idle connection past its allowance is
  closed without a word. Responses are held to the same pace, so a client
  that stops reading cannot keep a connection either.
- **A cap on open connections** (``server.max_connections`` per node, split
  evenly across the workers). A few more are taken past the cap so that
  ``/healthz`` and ``/readyz`` still answer; anything else there gets 503.
- **A graceful stop.** On SIGTERM the listening socket closes at once (new
  connections are refused, not queued), waiting consumers are answered 204
  now (``drain()`` of :class:`narad.app.NaradApp`), idle kept-alive
  connections are closed, and requests in flight finish (up to gunicorn's
  graceful timeout).
- **CPU-bound work off the event loop**: :mod:`narad.serve.offload` starts its
  native threads in each worker.
- **A collector on the worker's clock** (:class:`narad.collector.Ticker`):
  young collections every tenth of a second whatever the allocations, so
  that thousands of long polls never pile up in the young generation and
  pause the worker when it is finally collected; the pauses are timed
  (``narad_gc_pause_seconds``). The policy, by CPython version, is all in
  :mod:`narad.collector`.
- **Plain requests on a short path** (:mod:`narad.serve.plain`): the common
  HTTP/1.1 request's head is read, and its environ and response head made,
  without gunicorn's general code, which still takes every other request.
- **gunicorn's settings read once** (:func:`freeze_settings`), not through
  ``Config.__getattr__`` about twenty times per request, and its ``Date``
  header formatted once a second (:class:`HttpDate`), not per response.
- **Access-log lines a loop turn at a time**
  (:meth:`narad.logs.AccessLines.write_per_turn`): the lines written while
  the event loop runs its greenlets go out in a write or a few once they
  have run, not in one write each.
- **Refusals in JSON.** gunicorn refuses some requests itself, before the app
  sees them (a request line or header block it cannot parse or that is over
  its limits, broken chunked framing); :class:`JSONErrors` makes its answer
  ``{"error": ...}`` with the same status, as every other Narad error. It only
  overrides ``Worker.handle_error``, so it combines with any worker class.
  Each refusal (408, 503 past the cap included) writes its access-log line.

gevent monkey-patches the worker process (gunicorn's ``init_process``) before
the app, redis-py and the metrics are imported there; the master, which
imported some of those modules before forking, starts no thread and holds no
lock across the fork.
"""

from __future__ import annotations

import _socket
import errno
import math
import os
import resource
import signal
import socket
import ssl
import time
import warnings
from collections.abc import Callable
from collections.abc import Iterable
from contextlib import nullcontext
from contextlib import suppress
from dataclasses import dataclass
from datetime import datetime
from datetime import timedelta
from email.utils import formatdate
from functools import partial
from ssl import SSLError
from typing import Any
from typing import NoReturn

import gevent
from gevent import monkey
from gevent.pool import Pool
from gevent.server import StreamServer
from gunicorn import util
from gunicorn.http import errors as http_errors
from gunicorn.http.wsgi import FileWrapper
from gunicorn.http.wsgi import Response
from gunicorn.http.wsgi import default_environ
from gunicorn.workers.base_async import ALREADY_HANDLED
from gunicorn.workers.ggevent import GeventWorker

from narad import collector
from narad.config import Config
from narad.errors import RequestTimeout
from narad.http import EverySecond
from narad.http import error_body
from narad.http import request_id
from narad.serve import offload
from narad.serve import plain
from narad.serve.server import STOP_SIGNALS
from narad.serve.server import node_config
from narad.serve.server import tls_context

# How long reads of one connection may go on without letting the event loop
# turn (see Connection.recv): the other connections' wait, at most.
LOOP_TURN_S = 0.005
# Connections a worker takes past its share of server.max_connections, only
# to answer health probes; past those, new connections wait in the kernel's
# accept queue.
PROBE_CONNECTIONS = 16
PROBES = frozenset({"/healthz", "/readyz"})
# Descriptors a worker keeps for other things than client connections:
# listening socket, storage connections, logs, metric files, pipes.
OTHER_FDS = 256
# After a response, an unread request body up to this size is read and
# dropped (at the body's pace) to keep the connection; past it the
# connection closes, lingering a moment so the client can read the answer.
DRAIN_LIMIT = 4 * 1024 * 1024
LINGER_S = 2.0


MESSAGE_DETAIL = 100
CONTINUE = b"HTTP/1.1 100 Continue\r\n\r\n"
# The first byte of a TLS connection: a handshake record (ClientHello).
TLS_HANDSHAKE = b"\x16"

# (exception classes, status, reason phrase, what the message starts with);
# the first row that matches wins. Anything else is gunicorn's or the app's
# own failure: 500, logged with its traceback.
_REFUSALS: tuple[tuple[tuple[type[BaseException], ...], int, str, str], ...] = (
    (
        (http_errors.InvalidResponseHeader, http_errors.InvalidResponseHeaderName),
        500,
        "Internal Server Error",
        "",
    ),
    ((http_errors.LimitRequestLine,), 414, "URI Too Long", "request line too long"),
    (
        (http_errors.LimitRequestHeaders,),
        431,
        "Request Header Fields Too Large",
        "request header fields too large",
    ),
    (
        (http_errors.UnsupportedTransferCoding,),
        501,
        "Not Implemented",
        "transfer coding not implemented",
    ),
    (
        (http_errors.ExpectationFailed,),
        417,
        "Expectation Failed",
        "expectation failed",
    ),
    (
        # A SCRIPT_NAME (from a trusted proxy, or the environment) that the
        # path does not start with: the request's, not a server fault.
        (http_errors.ConfigurationProblem,),
        400,
        "Bad Request",
        "path outside SCRIPT_NAME",
    ),
    (
        (http_errors.ForbiddenProxyRequest, SSLError),
        403,
        "Forbidden",
        "forbidden",
    ),
    (
        (
            http_errors.InvalidRequestLine,
            http_errors.InvalidRequestMethod,
            http_errors.InvalidHTTPVersion,
            http_errors.InvalidHeader,
            http_errors.InvalidHeaderName,
            http_errors.ObsoleteFolding,
            http_errors.InvalidProxyLine,
            http_errors.InvalidSchemeHeaders,
            http_errors.InvalidChunkSize,
            http_errors.ChunkMissingTerminator,
            http_errors.InvalidChunkExtension,
            http_errors.InvalidH2CPreface,
        ),
        400,
        "Bad Request",
        "malformed request",
    ),
)


def refusal(exc: BaseException) -> tuple[int, str, str]:
    """(status, reason phrase, error message) for an error gunicorn hit."""
    for classes, status, reason, what in _REFUSALS:
        if isinstance(exc, classes):
            if not what:
                break  # the app's fault, not the client's
            # gunicorn's own text, which quotes the offending input with %r.
            detail = str(exc)
            if len(detail) > MESSAGE_DETAIL:
                detail = detail[:MESSAGE_DETAIL] + "…"
            return status, reason, f"{what}: {detail}"
    return 500, "Internal Server Error", "internal error"


class JSONErrors:
    """Mixin for a gunicorn worker: its own refusals as JSON ``{"error": ...}``."""

    cfg: Any
    log: Any
    # Narad's access log (narad.http.middleware.RequestLog), where the worker
    # keeps one: a refused request gets its line there too.
    access: Any = None

    def handle_error(
        self, req: Any, client: Any, addr: Any, exc: BaseException
    ) -> None:
        addr = addr or ("", -1)  # a unix socket
        status, reason, message = refusal(exc)
        body = error_body(message)
        if req is None and isinstance(exc, http_errors.InvalidHeader):
            req = getattr(exc, "req", None)
        request_id = _request_id(req)
        if status != 500:
            # The client's error: its access-log line says it (and this at
            # debug level, for whoever looks into one).
            self.log.debug("Invalid request from ip=%s: %s", addr[0], exc)
        else:
            self.log.exception(
                "Error handling request", extra={"request_id": request_id}
            )
        if req is not None:
            environ = default_environ(req, client, self.cfg)
            environ["REMOTE_ADDR"] = addr[0]
            environ["REMOTE_PORT"] = str(addr[1])
            resp = Response(req, client, self.cfg)
            resp.status = f"{status} {reason}"
            resp.response_length = len(body)
            self.log.access(resp, req, environ, timedelta(0))
        head = (
            f"HTTP/1.1 {status} {reason}\r\n"
            "Connection: close\r\n"
            f"X-Request-ID: {request_id}\r\n"
            "Content-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n"
        )
        try:
            util.write_nonblock(client, head.encode("latin-1") + body)
        except Exception:
            self.log.debug("Failed to send error message.")
        self.access_line(req, addr, status, request_id)

    def access_line(self, req: Any, addr: Any, status: int, request_id: str) -> None:
        """The access-log line of a request answered here, not by the app."""
        if self.access is not None:
            method = getattr(req, "method", None)
            self.access.refused(addr[0] if addr else None, method, status, request_id)


@dataclass(frozen=True)
class Limits:
    """How long a client may take over each part of an exchange, in seconds."""

    header: float
    keepalive: float
    body: float
    min_rate: float

    @classmethod
    def from_config(cls, config: Config) -> Limits:
        return cls(
            header=config.get("server.header_timeout"),
            keepalive=config.get("server.keepalive"),
            body=config.get("server.body_timeout"),
            min_rate=config.get("server.body_min_rate"),
        )


class Connection:
    """A client socket that holds every read and write to :class:`Limits`.

    gunicorn's parser and responses use it as the socket. Between requests it
    waits up to ``keepalive`` for a first byte (``header`` for the first
    request); once one arrives, the head must be complete within ``header``;
    a body gets ``body`` seconds plus one per ``min_rate`` bytes received,
    counted from its first read: the time the app takes before it reads
    (waiting on the storage, hashing a password) is the server's, not the
    client's, whose bytes wait in the socket meanwhile.

    A response's head (gunicorn sends it on its own) is held and goes out
    with the body's first bytes: one send, not two. Each send on a TCP socket
    costs a system call and a pass through the network stack; :meth:`flush`
    sends a head that no body followed.
    """

    __slots__ = (
        "awaits_continue",
        "deadline",
        "first",
        "held",
        "hold",
        "idle",
        "limits",
        "linger",
        "probes_only",
        "reading",
        "request",
        "sock",
        "tls",
        "turned",
        "uncertified",
    )

    def __init__(
        self,
        sock: socket.socket,
        limits: Limits,
        *,
        probes_only: bool,
        uncertified: bool = False,
    ):
        self.sock = sock
        self.limits = limits
        self.probes_only = probes_only  # over the cap: answer health probes only
        # A client certificate is required (server.tls_client_ca) and this
        # connection gave none: health probes only, anything else 403.
        self.uncertified = uncertified
        self.tls = isinstance(sock, ssl.SSLSocket)
        self.request: Any = None  # gunicorn's Request while one is being served
        self.reading = False  # the request's body is being read: its clock runs
        self.idle = True  # no byte of the next request yet
        self.first = True  # the first request counts from the connection's start
        self.linger = False  # closing with request bytes unread
        self.hold = False  # the next send is a response head: hold it
        self.held = b""  # a response head not sent yet
        self.awaits_continue = False  # Expect: 100-continue, not answered yet
        self.deadline = time.monotonic() + limits.header
        self.turned = 0.0  # when a read of this connection last let the loop turn

    def __getattr__(self, name: str) -> Any:
        return getattr(self.sock, name)

    # gunicorn's parser asks for these around every request (finish_body).
    def gettimeout(self) -> float | None:
        return self.sock.gettimeout()

    def settimeout(self, timeout: float | None) -> None:
        self.sock.settimeout(timeout)

    def hung_up(self) -> bool:
        """Whether the client has closed (or reset) the connection, with no
        byte of a next request before that: an answer would go nowhere. A
        client that only shut down its sending side reads as gone too.

        Under TLS the bytes waiting are records: read without waiting, a
        close_notify reads as gone, and a next request's bytes go back to
        the request's reader, for the parser.
        """
        if self.tls:
            return self._tls_hung_up()
        timeout = self.sock.gettimeout()
        self.sock.settimeout(0)
        try:
            return self.sock.recv(1, socket.MSG_PEEK) == b""
        except BlockingIOError:
            return False  # connected, nothing sent since the request
        except OSError:
            return True
        finally:
            self.sock.settimeout(timeout)

    def _tls_hung_up(self) -> bool:
        if self.sock.pending():
            return False  # a next request, decrypted already
        try:
            if _peek(self.sock.fileno()) == b"":
                return True
        except BlockingIOError:
            return False  # connected, nothing sent since the request
        except OSError:
            return True
        timeout = self.sock.gettimeout()
        self.sock.settimeout(0)
        try:
            data = self.sock.recv(65536)
        except (ssl.SSLWantReadError, ssl.SSLWantWriteError, BlockingIOError):
            return False  # part of a record: more is on its way
        except OSError:
            return True
        finally:
            self.sock.settimeout(timeout)
        if not data:
            return True  # the client's close_notify
        if self.request is not None:
            self.request.unreader.unread(data)
        return False

    def begin_request(self, request: Any, *, expects_continue: bool = False) -> None:
        """Serve ``request``; ``expects_continue``: its client awaits
        ``100 Continue`` before sending the body (sent at its first read)."""
        self.request = request
        self.reading = False
        self.hold = True
        self.awaits_continue = expects_continue

    def end_request(self) -> None:
        self.request = None
        self.awaits_continue = False
        self.idle = True
        self.first = False
        self.deadline = time.monotonic() + self.limits.keepalive

    def recv(self, size: int) -> bytes:
        if self.request is not None and not self.reading:
            self.reading = True
            self.deadline = time.monotonic() + self.limits.body
            if self.awaits_continue:
                self._continue()
        remaining = self.deadline - time.monotonic()
        if remaining <= 0:
            return self._late()
        self.sock.settimeout(remaining)
        try:
            data = self.sock.recv(size)
        except TimeoutError:
            return self._late()
        if len(data) == size and time.monotonic() - self.turned >= LOOP_TURN_S:
            # More is waiting: a read of buffered bytes does not yield, and
            # a client sending faster than it is parsed (a body of 1-byte
            # chunks) would hold the event loop until it stops. A positive
            # sleep lets one turn of the loop, its I/O included, go first
            # (sleep(0) may not poll; idle() may wait long on a busy loop).
            # At most one per LOOP_TURN_S: an ordinary body pays one, not one
            # per buffer.
            gevent.sleep(1e-6)
            self.turned = time.monotonic()
        if self.request is not None:
            # A body cut short ends here like a closed socket; the body
            # reader (narad.http.body) counts the bytes and refuses it.
            self.deadline += len(data) / self.limits.min_rate
        elif self.idle and data:
            self.idle = False
            if not self.first:
                self.deadline = time.monotonic() + self.limits.header
        return data

    def _continue(self) -> None:
        """``100 Continue``: the app reads the body, so the request passed
        every check made before it (RFC 9110 10.1.1); not held like a
        response head, and only once."""
        self.awaits_continue = False
        self.sock.settimeout(self.limits.body)
        try:
            self.sock.sendall(CONTINUE)
        except TimeoutError:
            raise BrokenPipeError(
                errno.EPIPE, "client not taking 100 Continue"
            ) from None

    def _late(self) -> bytes:
        if self.request is not None:
            self.request.force_close()
            raise RequestTimeout(
                f"request body slower than {self.limits.min_rate:g} bytes/s after "
                f"{self.limits.body:g} s (server.body_timeout, server.body_min_rate)"
            )
        if self.idle:
            return b""  # nothing of a request: close quietly, as at its end
        raise RequestTimeout(
            f"request line and headers not received within "
            f"{self.limits.header:g} s (server.header_timeout)"
        )

    def sendall(self, data: bytes) -> None:
        if self.hold:
            self.hold = False
            self.held = data
            return
        if self.held:
            data = self.held + data
            self.held = b""
        allowed = self.limits.body + len(data) / self.limits.min_rate
        deadline = time.monotonic() + allowed
        self.sock.settimeout(allowed)
        try:
            # One send takes a response that fits the socket's buffer; gevent's
            # sendall would first ask the socket for the buffer's size, a
            # system call more per response.
            sent = self.sock.send(data)
            if sent < len(data):
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError
                self.sock.settimeout(left)
                self.sock.sendall(memoryview(data)[sent:])
        except TimeoutError:
            # gunicorn drops a connection on EPIPE without logging a traceback.
            raise BrokenPipeError(
                errno.EPIPE, "client not taking its response"
            ) from None

    def flush(self) -> None:
        """Send a held response head; stop holding (the response is over)."""
        self.hold = False
        if self.held:
            self.sendall(b"")

    def sendfile(self, file: Any, offset: int = 0, count: int | None = None) -> int:
        self.flush()
        return self.sock.sendfile(file, offset, count)

    def refuse(self, status: int, reason: str, message: str, req: Any = None) -> str:
        """Answer ``{"error": message}`` to ``req`` (None: its head did not
        arrive) and ask to close (before any response); the answer's
        request id."""
        body = error_body(message)
        request_id = _request_id(req)
        head = (
            f"HTTP/1.1 {status} {reason}\r\nConnection: close\r\n"
            f"X-Request-ID: {request_id}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
        )
        with suppress(OSError):
            self.sendall(head.encode() + body)
        return request_id

    def close(self) -> None:
        if self.linger:
            # Closing with unread bytes resets the connection, which can
            # destroy the response before the client reads it: stop sending,
            # take what the client still sends for a moment, then close.
            with suppress(OSError):
                self.sock.shutdown(socket.SHUT_WR)
                end = time.monotonic() + LINGER_S
                while (left := end - time.monotonic()) > 0:
                    self.sock.settimeout(left)
                    if not self.sock.recv(65536):
                        break
        self.sock.close()

    def close_if_idle(self) -> None:
        """Shut the socket if it waits for a next request (graceful stop)."""
        if self.request is None and self.idle:
            with suppress(OSError):
                self.sock.shutdown(socket.SHUT_RDWR)


class NaradWorker(JSONErrors, GeventWorker):
    """gunicorn's gevent worker with Narad's connection limits and stop."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # In the master, before the fork: its settings, not the file's now.
        config = node_config()
        self.config = config
        self.tls: ssl.SSLContext | None = None  # HTTPS: made in the worker
        self.limits = Limits.from_config(config)
        self.access_format = config.get("server.access_log")
        self.cap = math.ceil(config.get("server.max_connections") / self.cfg.workers)
        self.offload_threads = (
            config.get("validation.capacity_slots") or os.cpu_count() or 1
        )
        self.connections: set[Connection] = set()
        self._application: Callable[..., Iterable[bytes]] | None = None

    def init_process(self) -> None:
        # The master held the stop signals across the fork (narad.serve.server's
        # pre_fork): one sent since then is taken here, and one sent until
        # gunicorn sets the worker's own handlers (gevent's patching, first,
        # is the slowest part of a start) stops the worker too.
        for stop in STOP_SIGNALS:
            signal.signal(stop, self._stop_while_starting)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)
        super().init_process()

    def _stop_while_starting(self, signum: int, frame: Any) -> None:
        self.alive = False  # run() then stops at once, gracefully

    def patch(self) -> None:
        # The master imported redis-py, whose (unused) asyncio client binds
        # ssl names at import: gevent warns about that module at every start.
        # Any other module named in the warning still shows.
        warnings.filterwarnings(
            "ignore",
            message=r"Monkey-patching ssl after ssl has already been imported.*"
            r"\(NOT patched\): \['redis\.asyncio\.connection \([^']*\)'\]\.\s*$",
            category=monkey.MonkeyPatchWarning,
        )
        super().patch()

    def load_wsgi(self) -> None:
        # After the fork and the monkey-patching, before the app is built.
        self.cap = self._fit_cap(self.cap)
        collector.tune()
        collector.watch_pauses()
        freeze_settings(self.cfg)
        util.http_date = HttpDate()
        # server.plain_requests off: gunicorn parses every request (the
        # configuration bench/ab.py --variant compares with).
        plain_requests = self.config.get("server.plain_requests")
        self.plain = plain.install(self.cfg) if plain_requests else None
        # After gevent's patching: its SSLContext, whose sockets yield.
        self.tls = tls_context(self.config)
        offload.start(self.offload_threads)
        super().load_wsgi()
        # What the loaded app holds (modules, plugins, settings) lasts the
        # worker's life.
        collector.freeze_survivors()
        self._application, self.wsgi = self.wsgi, self._serve
        # Imported here, as the app is: after gevent's patching.
        from narad.http.middleware import RequestLog

        self.access = RequestLog(self.access_format)
        self.access.write_per_turn(gevent.get_hub().loop.run_callback)

    def _fit_cap(self, cap: int) -> int:
        soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
        room = soft - OTHER_FDS - PROBE_CONNECTIONS
        if soft != resource.RLIM_INFINITY and room < cap:
            self.log.warning(
                "open files limit %d holds %d connections per worker, not the "
                "%d of server.max_connections: raise the limit (ulimit -n)",
                soft,
                max(room, 1),
                cap,
            )
            return max(room, 1)
        return cap

    def timeout_ctx(self) -> nullcontext:
        return nullcontext()  # Connection enforces the deadlines

    def run(self) -> None:
        servers = [self._server(listener) for listener in self.sockets]
        for server in servers:
            server.start()
        beat = 0.0
        ticker = collector.Ticker()
        while self.alive:
            if time.monotonic() >= beat:
                self.notify()
                beat = time.monotonic() + 1.0
            gevent.sleep(collector.TICK_S)  # notice SIGTERM within a tick
            ticker.tick()
        self._stop(servers)

    def _server(self, listener: socket.socket) -> StreamServer:
        listener.setblocking(True)
        # No ssl_context: under TLS, handle() makes the handshake itself,
        # within server.header_timeout.
        return StreamServer(
            listener,
            handle=partial(self.handle, listener),
            spawn=Pool(self.cap + PROBE_CONNECTIONS),
        )

    def _stop(self, servers: list[StreamServer]) -> None:
        for server in servers:
            server.close()  # new connections are refused from now on
        drain = getattr(self._application, "drain", None)
        if drain is not None:
            drain()
        for conn in list(self.connections):
            conn.close_if_idle()
        deadline = time.monotonic() + self.cfg.graceful_timeout
        while self.connections and time.monotonic() < deadline:
            self.notify()
            gevent.sleep(0.1)
        if self.connections:
            self.log.warning(
                "graceful timeout: closing %d connections", len(self.connections)
            )
            for server in servers:
                server.pool.kill(block=True, timeout=1)

    def handle(self, listener: socket.socket, client: socket.socket, addr: Any):
        uncertified = False
        if self.tls is not None:
            client = self._handshake(client, addr)
            if client is None:
                return
            uncertified = (
                self.tls.verify_mode != ssl.CERT_NONE and not client.getpeercert()
            )
        conn = Connection(
            client,
            self.limits,
            probes_only=len(self.connections) >= self.cap,
            uncertified=uncertified,
        )
        self.connections.add(conn)
        try:
            super().handle(listener, conn, addr)
        finally:
            self.connections.discard(conn)

    def _handshake(self, client: Any, addr: Any) -> Any:
        """``client`` under TLS once its handshake is made, within
        ``server.header_timeout``; None when it is not (the connection is
        closed: a client certificate the CA does not verify, a timeout...).

        Plain HTTP to the TLS port is not served: a first byte that does not
        open a TLS handshake record is answered 400 in plain text, so that
        whoever sent it reads why.
        """
        client.settimeout(self.limits.header)
        try:
            first = client.recv(1, socket.MSG_PEEK)
            if first and first != TLS_HANDSHAKE:
                self._refuse_plain(client, addr)
                return None
            if first:
                tls = self.tls.wrap_socket(
                    client, server_side=True, do_handshake_on_connect=False
                )
                try:
                    tls.do_handshake()
                except BaseException:
                    tls.close()
                    raise
                return tls
        except (OSError, ValueError) as exc:  # ssl.SSLError is an OSError
            self.log.debug("TLS handshake with %s failed: %s", addr, exc)
        client.close()
        return None

    def _refuse_plain(self, client: Any, addr: Any) -> None:
        """Answer 400 to plain HTTP on the TLS port, and close (lingering
        over what the client still sends, so the answer is not reset)."""
        conn = Connection(client, self.limits, probes_only=True)
        conn.linger = True
        request_id = conn.refuse(
            400,
            "Bad Request",
            "plain HTTP sent to the node's HTTPS port (server.tls_cert): use https://",
        )
        conn.close()
        self.access_line(None, addr, 400, request_id)

    def handle_request(self, listener_name: Any, req: Any, sock: Any, addr: Any):
        if sock.probes_only or sock.uncertified:
            if sock.probes_only:
                req.force_close()
            if req.path not in PROBES:
                if sock.probes_only:
                    self._refuse(
                        req,
                        sock,
                        addr,
                        503,
                        "Service Unavailable",
                        "node at its connection limit (server.max_connections); retry",
                    )
                self._refuse(
                    req,
                    sock,
                    addr,
                    403,
                    "Forbidden",
                    "a client certificate is required (server.tls_client_ca), "
                    "and this connection presented none",
                )
        # A plain request (narad.serve.plain) has a Host field, no Connection or
        # Expect field, none twice: these checks are for the others only.
        plain_request = self.plain is not None and getattr(req, "plain", False)
        expects = False
        if not plain_request:
            expects = self._check_head(req, sock, addr)
        sock.begin_request(req, expects_continue=expects)
        try:
            try:
                if plain_request and self.plain.takes(req, listener_name):
                    self._respond(listener_name, req, sock, addr)
                else:
                    super().handle_request(listener_name, req, sock, addr)
            finally:
                sock.flush()
            _drain(req)  # still in the body's deadlines
        finally:
            sock.end_request()

    def _check_head(self, req: Any, sock: Any, addr: Any) -> bool:
        """Refuse a head that is not plain (:mod:`narad.serve.plain`) for what
        gunicorn lets through; whether the client awaits ``100 Continue``
        before its body.

        gunicorn sends ``100 Continue`` as the response begins, before the
        app has looked at the request: an unauthenticated client would be
        invited to send its megabyte. The worker takes that over
        (:meth:`Connection.recv`): it is sent when the app first reads the
        body, once the request has passed every check made before that
        (credentials, grants, the topic, the announced length); a request
        answered without its body is closed, the body unread.
        """
        if _asks_to_close(req):
            req.force_close()
        if req.version >= (1, 1) and not any(name == "HOST" for name, _ in req.headers):
            # RFC 9112 3.2: a server MUST answer 400 to an HTTP/1.1 request
            # without Host (gunicorn refuses two, not none).
            self._refuse(
                req,
                sock,
                addr,
                400,
                "Bad Request",
                "an HTTP/1.1 request needs a Host field (RFC 9112 3.2)",
            )
        if _repeated(req, "IDEMPOTENCY-KEY"):
            # Joined into one value ("k1,k1") it would be another key than a
            # retry's single field: the retry would store a duplicate.
            self._refuse(
                req,
                sock,
                addr,
                400,
                "Bad Request",
                "Idempotency-Key is given more than once; nothing was stored",
            )
        expects = req._expected_100_continue
        req._expected_100_continue = False  # gunicorn's wsgi.create would send it
        return expects

    def _respond(self, listener_name: Any, req: Any, sock: Any, addr: Any) -> None:
        """gunicorn's ``handle_request`` (AsyncWorker's, in GeventWorker's
        wrapper) for a plain request, in one call: the same hooks, restart
        after ``max_requests``, closing and error handling, the environ and
        response made by :mod:`narad.serve.plain`, and the request timed only for
        a gunicorn access log that is kept (``narad serve`` keeps none:
        :class:`narad.serve.server.GunicornLogger`)."""
        cfg = self.cfg
        timed = self.log.access_log_enabled
        started = datetime.now() if timed else None
        environ: dict[str, Any] = {}
        resp = None
        try:
            cfg.pre_request(self, req)
            resp, environ = self.plain.create(req, sock, addr, listener_name)
            self.nr += 1
            if self.nr >= self.max_requests and self.alive:
                self.log.info("Autorestarting worker after current request.")
                self.alive = False
            if not self.alive or not cfg.keepalive:
                resp.force_close()
            respiter = self.wsgi(environ, resp.start_response)
            if respiter is ALREADY_HANDLED:
                return
            try:
                if isinstance(respiter, FileWrapper):
                    resp.write_file(respiter)
                else:
                    for item in respiter:
                        resp.write(item)
                resp.close()
            finally:
                if timed:
                    self.log.access(resp, req, environ, datetime.now() - started)
                if hasattr(respiter, "close"):
                    respiter.close()
            if resp.should_close():
                raise StopIteration()
        except (StopIteration, OSError):
            raise
        except (Exception, SystemExit) as exc:
            if resp is not None and resp.headers_sent:
                # A 500 written after the head would corrupt the response.
                self.log.exception(
                    "Error handling request",
                    extra={"request_id": _response_id(resp)},
                )
                with suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
                    sock.close()
                raise StopIteration() from None
            if not isinstance(exc, SystemExit):
                raise  # answered 500 by handle_error
        except gevent.GreenletExit:
            pass  # the greenlet was killed (the graceful timeout ran out)
        finally:
            try:
                cfg.post_request(self, req, environ, resp)
            except Exception:
                self.log.exception("Exception in post_request hook")

    def _refuse(
        self, req: Any, sock: Any, addr: Any, status: int, reason: str, message: str
    ) -> NoReturn:
        """Answer a parsed head ``{"error": message}`` without the app, log
        it, and close the connection (lingering over a body left unread)."""
        req.force_close()
        sock.linger = _unread_body(req) > 0
        request_id = sock.refuse(status, reason, message, req)
        self.access_line(req, addr, status, request_id)
        raise StopIteration

    def handle_error(self, req: Any, client: Any, addr: Any, exc: Exception):
        if isinstance(exc, RequestTimeout):
            self.log.debug("slow client %s: %s", addr, exc)
            request_id = client.refuse(408, "Request Timeout", exc.message)
            self.access_line(req, addr, 408, request_id)
            return
        super().handle_error(req, client, addr, exc)

    def _serve(self, environ: dict, start_response: Callable) -> Iterable[bytes]:
        """The app; then, before the response head goes out, decide to close
        (the worker is stopping, or a large body was left unread)."""
        result = self._application(environ, start_response)
        conn = environ["gunicorn.socket"]
        if not self.alive:
            conn.request.force_close()
        unread = _unread_body(conn.request)
        if unread > DRAIN_LIMIT or (unread and conn.awaits_continue):
            # Too much to drain, or a body the client holds back until a
            # 100 Continue that the app's answer (401, 403, 404, 413...)
            # never invited: close without reading it.
            conn.request.force_close()
            conn.linger = True
        return result


def freeze_settings(cfg: Any) -> None:
    """Store each of gunicorn's settings on ``cfg`` (a ``gunicorn.config.Config``)
    as it reads now, where attribute lookup finds it.

    gunicorn reads about twenty settings per request, each through
    ``Config.__getattr__`` and the setting's ``get``: some 40 of a long
    poll's ~620 Python calls. A worker's settings do not change once it
    runs (a reload starts new workers), so each is read once, after the fork.
    """
    for name, setting in cfg.settings.items():
        if not hasattr(type(cfg), name):  # a property (worker_class) derives its own
            vars(cfg)[name] = setting.get()


class HttpDate:
    """``gunicorn.util.http_date``, formatted once a second.

    gunicorn formats each response's ``Date`` header through
    ``email.utils.formatdate``, an order of magnitude dearer than a cached
    string (timeit it); the header has a second's resolution (RFC 9110
    5.6.7), so a worker formats it when the second changes. gunicorn's
    responses call it without a timestamp; one given a timestamp is
    formatted as gunicorn's.
    """

    __slots__ = ("_second",)

    def __init__(self) -> None:
        self._second = EverySecond(lambda second: formatdate(second, usegmt=True))

    def __call__(self, timestamp: float | None = None) -> str:
        if timestamp is not None:
            return formatdate(timestamp, usegmt=True)
        return self._second.text(int(time.time()))


def _drain(request: Any) -> None:
    """Read and drop what the app left of the body; close if that is too much."""
    if not _unread_body(request):
        return
    left = DRAIN_LIMIT
    try:
        while left > 0:
            data = request.body.read(min(left, 65536))
            if not data:
                return
            left -= len(data)
    except (RequestTimeout, OSError):
        pass
    raise StopIteration  # gunicorn closes the connection


def _asks_to_close(request: Any) -> bool:
    """Whether a Connection field lists ``close`` (RFC 9112 9.6: the server
    must close after its response). gunicorn reads only the first field, and
    only when ``close`` is its whole value, not ``TE, close``."""
    return any(
        name == "CONNECTION"
        and any(option.strip(" \t").lower() == "close" for option in value.split(","))
        for name, value in request.headers
    )


def _repeated(request: Any, field: str) -> bool:
    """Whether the head holds ``field`` (upper case, as gunicorn keeps names)
    more than once."""
    return sum(name == field for name, _ in request.headers) > 1


def _request_id(request: Any) -> str:
    """The id of a response the worker writes: the client's, if its head
    arrived with a usable one."""
    given = None
    for name, value in getattr(request, "headers", ()):
        if name == "X-REQUEST-ID":
            given = value if given is None else f"{given},{value}"
    return request_id(given)


def _peek(fd: int) -> bytes:
    """The next byte waiting on socket ``fd``, left there; b"" at its end
    (BlockingIOError: none yet). Beneath a TLS socket, which peeks at
    nothing itself."""
    raw = _socket.socket(fileno=fd)
    try:
        return raw.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT)
    finally:
        raw.detach()


def _response_id(resp: Any) -> str | None:
    """The request id a response's head carries (the app sets it)."""
    for name, value in resp.headers:
        if name.lower() == "x-request-id":
            return value
    return None


def _unread_body(request: Any) -> float:
    """Bytes of the request body still on the socket (inf: unknown, chunked)."""
    reader = request.body.reader
    if getattr(reader, "parser", None) is not None:  # chunked, not finished
        return math.inf
    return getattr(reader, "length", 0)
