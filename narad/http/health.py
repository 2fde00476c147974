"""Liveness, readiness, metrics, and the guard that refuses writes while the
storage cannot keep them."""

from __future__ import annotations

import threading
import time

import falcon

from narad import metrics
from narad.broker.stats import TopicMetrics
from narad.caches import Caches
from narad.errors import StorageError
from narad.errors import Unavailable
from narad.guard import StorageGuard
from narad.http import dumps
from narad.logs import Episode
from narad.security.authn import Authenticator
from narad.security.authn import Principal
from narad.security.grants import Action
from narad.storage import Storage

_WRITES = frozenset({"POST", "PUT", "PATCH", "DELETE"})


class Health:
    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        resp.text = dumps({"status": "ok"})

    on_head = on_get


class Ready:
    """200 while the storage answers and may take writes; else 503 and why.

    A replicated storage (RedisRaft) is ready only while its leader answers
    (:meth:`narad.storage.Storage.ping`): a follower answers without one.
    """

    def __init__(self, storage: Storage, guard: StorageGuard) -> None:
        self.storage = storage
        self.guard = guard

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        if not self.storage.ping():
            resp.status = falcon.HTTP_503
            resp.text = dumps({"error": "storage is not answering (or has no leader)"})
        elif reason := self.guard.refusal():
            resp.status = falcon.HTTP_503
            resp.text = dumps({"error": reason})
        else:
            resp.text = dumps({"status": "ready"})

    on_head = on_get


class Metrics:
    """``/metrics``: every worker's series and every topic's.

    They name every topic and count failed logins and users made, so unless
    ``public`` (``metrics.public``) they are for a user with a ``metrics``
    grant or admin on ``*`` (:attr:`Action.METRICS`), as Prometheus's
    ``basic_auth`` sends them. Checked here, not by the authentication
    middleware (which leaves the probes' routes alone), and before anything
    is read. While security is off the route is open, as every route is.
    """

    def __init__(
        self,
        guard: StorageGuard,
        caches: Caches,
        topics: TopicMetrics,
        *,
        public: bool = False,
    ) -> None:
        self.guard = guard
        self.caches = caches
        self.topics = topics
        self.public = public

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        authenticator = req.context.get("authenticator")
        if not self.public and authenticator is not None:
            req.context.principal = self._scraper(req, authenticator)
            req.context.gate.check(req.context.principal, Action.METRICS, None)
        # The storage gauges, fresh for this scrape if the storage answers
        # within the per-topic read's bound: a stalled storage would hold the
        # scrape for its socket timeout, past the scraper's own.
        refresh = threading.Thread(
            target=self.guard.status, name="narad-storage-status", daemon=True
        )
        refresh.start()
        refresh.join(self.topics.wait_s)
        self.caches.publish()  # this worker's; the others publish every few s
        # Per-topic series: read from the storage now (cached, bounded).
        resp.data, resp.content_type = metrics.render([self.topics])

    on_head = on_get

    def _scraper(self, req: falcon.Request, authenticator: Authenticator) -> Principal:
        """Who scrapes: :meth:`Authenticator.authenticate`, which may read the
        user from the storage. Credentials this worker verified before do
        not wait for that read past the per-topic read's bound, nor fail
        with it: a stalled or unreachable storage must not fail the scrape
        (its figures are wanted most then), so they serve as they were (a
        change of the user announced since has dropped them)."""
        header = req.get_header("Authorization")
        address = req.remote_addr or ""
        remembered = authenticator.remembered(header)
        if remembered is None:
            return authenticator.authenticate(header, address)
        outcome: list = []

        def check() -> None:
            try:
                outcome.append(authenticator.authenticate(header, address))
            except BaseException as exc:  # handed to the request's thread
                outcome.append(exc)

        checking = threading.Thread(target=check, name="narad-scraper", daemon=True)
        checking.start()
        checking.join(self.topics.wait_s)
        if not outcome:
            return remembered
        if isinstance(outcome[0], Unavailable | StorageError):
            return remembered
        if isinstance(outcome[0], BaseException):
            raise outcome[0]
        return outcome[0]


class RequestMetrics:
    """Middleware: counts every request by route template, method and
    status, and times it (``narad_http_*``, through :data:`metrics.TALLY`)
    unless ``count`` is false (``metrics.requests``); a request under ``/v1``
    answered below 500 ends ``trouble``, a run of storage failures. It runs
    after :class:`narad.http.middleware.RequestLog`, which notes when the
    request arrived."""

    def __init__(self, trouble: Episode, *, count: bool = True) -> None:
        self.trouble = trouble
        self.count = count

    def process_response(
        self, req: falcon.Request, resp: falcon.Response, resource, req_succeeded
    ) -> None:
        status = resp.status_code
        route = req.uri_template
        if self.count:
            metrics.record_request(
                route, req.method, status, time.perf_counter() - req.context.started
            )
        if self.trouble.active and status < 500 and route and route.startswith("/v1"):
            self.trouble.recovered()


class WriteGuard:
    """Middleware: every write answers 503 while the storage cannot keep it
    (not durable, or not yet checked since it came back), so no 202 is given
    that the storage might lose. Reads go on."""

    def __init__(self, guard: StorageGuard) -> None:
        self.guard = guard

    def process_resource(
        self, req: falcon.Request, resp: falcon.Response, resource, params
    ) -> None:
        # After routing: an unknown path stays a 404.
        if resource is None or req.method not in _WRITES:
            return
        if reason := self.guard.refusal():
            raise Unavailable(reason)
