"""HTTP/1.1 over a raw socket, for requests no polite client sends.

Chunked bodies split anywhere, bodies shorter than their Content-Length,
stalls, malformed framing, raw bytes in the request target: each request
goes out exactly as built, on its own connection.
"""

from __future__ import annotations

import contextlib
import json
import socket
import time
from dataclasses import dataclass
from typing import Any

from tests.httpclient import ADMIN
from tests.httpclient import basic


@dataclass
class RawResponse:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body.decode("utf-8"))

    @property
    def error(self) -> str:
        return self.json()["error"]


def chunked(
    body: bytes, sizes: list[int] | None = None, *, end: bytes = b"0\r\n\r\n"
) -> bytes:
    """``body`` in chunked framing, cut at ``sizes`` (the rest in one chunk)."""
    out = []
    at = 0
    for size in sizes or []:
        piece = body[at : at + size]
        if not piece:
            continue  # a zero-size chunk would end the body
        out.append(b"%x\r\n%s\r\n" % (len(piece), piece))
        at += len(piece)
    if at < len(body):
        out.append(b"%x\r\n%s\r\n" % (len(body) - at, body[at:]))
    return b"".join(out) + end


def build(
    method: str,
    target: str | bytes,
    body: bytes = b"",
    *,
    framing: str = "length",
    chunk_sizes: list[int] | None = None,
    headers: dict[str, str] | None = None,
    announced: int | None = None,
    auth: tuple[str, str] | None = ADMIN,
    close: bool = True,
) -> bytes:
    """A request's bytes. ``framing``: ``length``, ``chunked`` or ``none``;
    ``auth``: the Basic credentials sent (the test nodes' root admin);
    ``close``: ask for the connection to close after the response (without
    it, and without a field gunicorn must read itself, the request is plain:
    :mod:`narad.serve.plain`)."""
    if isinstance(target, str):
        target = target.encode("ascii")
    lines = [b"%s %s HTTP/1.1" % (method.encode(), target), b"Host: narad"]
    if close:
        lines.append(b"Connection: close")
    if auth is not None:
        lines.append(f"Authorization: {basic(*auth)}".encode())
    for name, value in (headers or {}).items():
        lines.append(f"{name}: {value}".encode("latin-1"))
    if framing == "length":
        lines.append(
            b"Content-Length: %d" % (len(body) if announced is None else announced)
        )
        payload = body
    elif framing == "chunked":
        lines.append(b"Transfer-Encoding: chunked")
        payload = chunked(body, chunk_sizes)
    else:
        payload = body
    return b"\r\n".join(lines) + b"\r\n\r\n" + payload


def exchange(
    port: int,
    data: bytes,
    *,
    close_write: bool = False,
    pause: float = 0.0,
    timeout: float = 30.0,
    head: bool = False,
    kept: bool = False,
) -> RawResponse:
    """Send ``data`` on a new connection and read one response.

    Args:
        close_write: half-close after sending, as a client that gives up
            mid-body does.
        pause: wait this long after sending (a client that stalls).
        head: the request was HEAD (a body is announced but never sent).
        kept: the request did not ask to close: a response without a body
            ends with its head, not at the close.
    """
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        # The server may answer before reading everything: read the answer.
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            sock.sendall(data)
        if pause:
            time.sleep(pause)
        if close_write:
            sock.shutdown(socket.SHUT_WR)
        return _read_response(sock, head=head, kept=kept)


def _read_response(sock: socket.socket, *, head: bool, kept: bool) -> RawResponse:
    buf = b""
    while b"\r\n\r\n" not in buf:
        part = _recv(sock)
        if not part:
            raise ConnectionError(f"connection closed before a response: {buf!r}")
        buf += part
    raw_head, _, rest = buf.partition(b"\r\n\r\n")
    status_line, *header_lines = raw_head.decode("latin-1").split("\r\n")
    status = int(status_line.split(" ", 2)[1])
    headers = {}
    for line in header_lines:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    length = int(headers.get("content-length", "0"))
    if head or status in (204, 304):
        # No body may follow: read to the close (if asked for) and hand back
        # whatever came, which should be nothing.
        while not kept and (part := _recv(sock)):
            rest += part
        return RawResponse(status, headers, rest)
    while len(rest) < length:
        part = _recv(sock)
        if not part:
            break
        rest += part
    return RawResponse(status, headers, rest[:length])


def _recv(sock: socket.socket) -> bytes:
    try:
        return sock.recv(65536)
    except ConnectionResetError:
        return b""


@dataclass
class ExpectOutcome:
    """How a node met a request that said ``Expect: 100-continue``."""

    continued: bool  # it answered 100 Continue (and the body was sent then)
    response: RawResponse  # its final answer
    closed: bool | None  # it closed the connection after it (None: not asked)


def expect_continue(
    port: int,
    head: bytes,
    body: bytes,
    *,
    timeout: float = 15.0,
    closes: bool = True,
) -> ExpectOutcome:
    """Send ``head`` (ending in its blank line, with ``Expect: 100-continue``
    and the body's length), and ``body`` only once the node answers
    ``100 Continue``, as a client that keeps its body back does. Reads the
    final answer, then (``closes``) waits for the node to close the
    connection, which it should right after the answer."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(head)
        buf = b""
        while b"\r\n\r\n" not in buf:
            part = _recv(sock)
            if not part:
                raise ConnectionError(f"closed before an answer: {buf!r}")
            buf += part
        continued = buf.startswith(b"HTTP/1.1 100 ")
        if continued:
            buf = buf.partition(b"\r\n\r\n")[2]
            sock.sendall(body)
        reader = _Prefixed(sock, buf)
        response = _read_response(reader, head=False, kept=True)  # type: ignore[arg-type]
        closed = reader.rest_closed() if closes else None
        return ExpectOutcome(continued, response, closed)


class _Prefixed:
    """A socket whose first bytes were read already (``buf``)."""

    def __init__(self, sock: socket.socket, buf: bytes) -> None:
        self.sock = sock
        self.buf = buf

    def recv(self, size: int) -> bytes:
        if self.buf:
            data, self.buf = self.buf, b""
            return data
        return self.sock.recv(size)

    def rest_closed(self) -> bool:
        """Whether the connection ends after the answer (nothing more)."""
        try:
            return _recv(self.sock) == b"" and not self.buf
        except TimeoutError:
            return False
