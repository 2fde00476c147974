"""gunicorn workers that answer like the rest of Narad.

gunicorn refuses some requests itself, before the app sees them: a request
line or header block it cannot parse or that is over its limits, a broken
chunked framing. Its answer is an HTML page; :class:`JSONErrors` makes it
``{"error": ...}`` with the same status, as every other Narad error. It is a
mixin, so it combines with any gunicorn worker class (it only overrides
``Worker.handle_error``, which all of them call); :class:`ThreadWorker`
applies it to gthread, the worker ``narad serve`` runs.

:func:`client_timeout_hook` bounds how long a client may stall mid-body. It
is a ``pre_request`` hook, which every worker class calls, and it sets the
connection's socket timeout: a worker thread (or greenlet) waiting for body
bytes that never come is released, and the app answers 400.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from ssl import SSLError
from typing import Any

from gunicorn import util
from gunicorn.http import errors as http_errors
from gunicorn.http.wsgi import Response
from gunicorn.http.wsgi import default_environ
from gunicorn.workers.gthread import ThreadWorker as GThreadWorker

from narad.http import error_body

MESSAGE_DETAIL = 100

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

    def handle_error(
        self, req: Any, client: Any, addr: Any, exc: BaseException
    ) -> None:
        addr = addr or ("", -1)  # a unix socket
        status, reason, message = refusal(exc)
        if status != 500:
            self.log.warning("Invalid request from ip=%s: %s", addr[0], exc)
        else:
            self.log.exception("Error handling request")
        body = error_body(message)
        if req is None and isinstance(exc, http_errors.InvalidHeader):
            req = getattr(exc, "req", None)
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
            "Content-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n"
        )
        try:
            util.write_nonblock(client, head.encode("latin-1") + body)
        except Exception:
            self.log.debug("Failed to send error message.")


class ThreadWorker(JSONErrors, GThreadWorker):
    """gunicorn's gthread worker, refusing in JSON."""


def client_timeout_hook(seconds: float) -> Callable[[Any, Any], None]:
    """A gunicorn ``pre_request`` hook giving each request's socket a timeout.

    Set once the headers are parsed, it bounds every wait for body bytes (the
    app then refuses the request: see :mod:`narad.http.body`) and the time a
    client may take to receive the response.
    """

    def pre_request(worker: Any, req: Any) -> None:
        sock = getattr(getattr(req, "unreader", None), "sock", None)
        if sock is not None:
            sock.settimeout(seconds)

    return pre_request
