"""Middleware on every request: its id and access-log line, and who it is.

:class:`RequestLog` gives each request an id (the client's ``X-Request-ID``
when it sends a usable one, else a fresh one), echoes it on the response,
puts it on every log line written while the request is served
(:data:`narad.logs.REQUEST_ID`), notes when the request arrived
(``req.context.started``) and writes one access-log line per request.
:class:`Authenticate` puts the request's
:class:`~narad.security.authn.Principal` and the node's
:class:`~narad.security.access.Gate` on ``req.context`` for
:func:`narad.security.access.authorize`, after routing, so the log line
names the route; an unknown path (its sink, :meth:`Authenticate.unknown_route`)
needs credentials as much as a known one.
"""

from __future__ import annotations

import logging
import os
import sys
import time
from collections.abc import Callable

import falcon

from narad.http import EverySecond
from narad.http import encode
from narad.http import request_id
from narad.http.topics import valid_name
from narad.logs import REQUEST_ID
from narad.logs import AccessLines
from narad.security.access import Gate
from narad.security.authn import OPEN
from narad.security.authn import Authenticator

#: Routes the middleware does not authenticate: the probes of load balancers,
#: /metrics, whose resource asks for a metrics grant itself unless
#: ``metrics.public`` opens it (narad.http.health), and the OpenAPI
#: document, which describes the API, not its data (narad.http.openapi).
PUBLIC = frozenset({"/healthz", "/readyz", "/metrics", "/v1/openapi.json"})

access_log = logging.getLogger("narad.access")
_STARTED = time.time()


def _setup_access_log() -> None:
    """The access log goes to standard error as bare lines, whatever the
    root logger's format."""
    if not access_log.handlers:
        access_log.addHandler(AccessLines(sys.stderr))
        access_log.setLevel(logging.INFO)
        access_log.propagate = False


class RequestLog:
    """The request id, and the access log in ``fmt`` (text, json or off)."""

    def __init__(self, fmt: str) -> None:
        self.fmt = fmt
        # "YYYY-MM-DDTHH:MM:SS" of the current second.
        self._second = EverySecond(
            lambda second: time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second))
        )
        if fmt != "off":
            _setup_access_log()

    def write_per_turn(self, schedule: Callable[[Callable[[], None]], object]) -> None:
        """Write the lines of an event loop's turn together, where ``schedule``
        runs a callback at its end (:meth:`narad.logs.AccessLines.write_per_turn`)."""
        for handler in access_log.handlers:
            if isinstance(handler, AccessLines):
                handler.write_per_turn(schedule)

    def _now(self) -> str:
        """Now in UTC, as ``datetime.isoformat(timespec="milliseconds")``
        gives it, at a tenth of its cost."""
        now = time.time()
        second = int(now)
        return f"{self._second.text(second)}.{int((now - second) * 1000):03d}+00:00"

    def process_request(self, req: falcon.Request, resp: falcon.Response) -> None:
        req.context.started = time.perf_counter()
        given = request_id(req.get_header("X-Request-ID"))
        req.context.request_id = given
        # Every log line written while serving the request carries its id.
        req.context.log_token = REQUEST_ID.set(given)
        req.context.principal = None
        resp.set_header("X-Request-ID", given)

    def process_response(
        self,
        req: falcon.Request,
        resp: falcon.Response,
        resource: object,
        req_succeeded: bool,
    ) -> None:
        REQUEST_ID.reset(req.context.log_token)
        if self.fmt == "off" or not access_log.isEnabledFor(logging.INFO):
            return
        elapsed_ms = round((time.perf_counter() - req.context.started) * 1000, 3)
        principal = req.context.principal
        self._write(
            client=req.remote_addr or None,
            user=principal.name or None if principal is not None else None,
            method=req.method,
            route=req.uri_template,
            topic=req.context.get("topic"),
            status=resp.status_code,
            elapsed_ms=elapsed_ms,
            request_id=req.context.request_id,
        )

    def refused(
        self, client: str | None, method: str | None, status: int, request_id: str
    ) -> None:
        """The line of a request the server refused before the app saw it
        (:mod:`narad.serve.workers`): no user, route or topic, no time spent."""
        if self.fmt == "off" or not access_log.isEnabledFor(logging.INFO):
            return
        self._write(
            client=client,
            user=None,
            method=method,
            route=None,
            topic=None,
            status=status,
            elapsed_ms=0.0,
            request_id=request_id,
        )

    def _write(
        self,
        *,
        client: str | None,
        user: str | None,
        method: str | None,
        route: str | None,
        topic: str | None,
        status: int,
        elapsed_ms: float,
        request_id: str,
    ) -> None:
        when = self._now()
        if self.fmt == "json":
            # Like every other JSON line of the node (narad.logs): level,
            # logger and message, so one query reads them all.
            line = encode(
                {
                    "level": "INFO",
                    "logger": access_log.name,
                    "message": f"{method or '-'} {route or '-'} {status}",
                    "time": when,
                    "client": client,
                    "user": user,
                    "method": method,
                    "route": route,
                    "topic": topic,
                    "status": status,
                    "duration_ms": elapsed_ms,
                    "request_id": request_id,
                }
            )
        else:
            line = (
                f"{when} {client or '-'} {user or '-'} {method or '-'} {route or '-'} "
                f"{topic or '-'} {status} {elapsed_ms} {request_id}"
            )
        handlers = access_log.handlers
        if len(handlers) == 1 and type(handlers[0]) is AccessLines:
            handlers[0].write(line)
        else:
            access_log.handle(AccessRecord(line))


class AccessRecord(logging.LogRecord):
    """An access-log line as a log record, for the ``narad.access`` logger's
    handlers and filters.

    Made without what ``Logger.info`` gathers for a record and no access-log
    format uses (the caller's file and line, thread and process names),
    which cost about twice the rest of writing the line: a tenth of a small
    produce under a gevent worker.
    """

    def __init__(self, line: str) -> None:
        now = time.time()
        self.name = access_log.name
        self.msg = line
        self.args = ()
        self.levelname = "INFO"
        self.levelno = logging.INFO
        self.pathname = self.filename = self.module = __name__
        self.lineno = 0
        self.funcName = None
        self.exc_info = self.exc_text = self.stack_info = None
        self.created = now
        self.msecs = int((now - int(now)) * 1000) + 0.0
        self.relativeCreated = (now - _STARTED) * 1000
        self.thread = self.threadName = self.processName = self.taskName = None
        self.process = os.getpid()


def _encoded_slash(req: falcon.Request) -> bool:
    """Whether the path as sent holds ``%2F``, which routing saw as ``/``
    (not a ``/registry`` subject's, which routing saw as sent:
    :class:`narad.http.registry.SubjectSlashes`)."""
    if getattr(req.context, "subject_slashes", False):
        return False
    raw = req.env.get("RAW_URI") or req.env.get("REQUEST_URI") or ""
    path = raw.partition("?")[0]
    return "%2" in path and "%2f" in path.lower()


class Authenticate:
    """Who the request is: checked credentials, or everyone while security
    is off (``authenticator`` ``None``)."""

    def __init__(self, authenticator: Authenticator | None, gate: Gate) -> None:
        self.authenticator = authenticator
        self.gate = gate

    def process_resource(
        self, req: falcon.Request, resp: falcon.Response, resource, params
    ) -> None:
        req.context.gate = self.gate
        req.context.authenticator = self.authenticator
        if resource is not None and _encoded_slash(req):
            # The server decodes the path before routing: /v1/topics/t%2Fproduce
            # would produce, past a proxy's rules on paths. No route has it.
            self.unknown_route(req, resp)
        # Only a name a topic can have: the path arrives percent-decoded, and
        # a newline in it would forge access-log lines.
        if resource is not None and valid_name(params.get("name", "")):
            req.context.topic = params["name"]
        if self.authenticator is None:
            req.context.principal = OPEN
        elif req.uri_template not in PUBLIC:
            self._authenticate(req)

    def unknown_route(self, req: falcon.Request, resp: falcon.Response) -> None:
        """The sink of paths no route matches: 404, but only to a user (the
        routes a node serves are not told to anyone who asks)."""
        if self.authenticator is not None:
            self._authenticate(req)
        raise falcon.HTTPNotFound()

    def _authenticate(self, req: falcon.Request) -> None:
        req.context.principal = self.authenticator.authenticate(
            req.get_header("Authorization"), req.remote_addr or ""
        )
