"""The WSGI application: routes, error handling, and the wiring of services.

:func:`create_app` builds it from settings; what gunicorn loads in each
worker is :func:`narad.serve.wsgi.get_app`, which builds it with the settings
the master runs with.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

import falcon

from narad import metrics
from narad.broker.children import ChildrenService
from narad.broker.messages import MessageService
from narad.broker.notifications import Listener
from narad.broker.records import TopicRecords
from narad.broker.stats import TopicMetrics
from narad.broker.topics import TopicService
from narad.broker.waiters import Waiters
from narad.caches import Caches
from narad.config import Config
from narad.errors import Conflict
from narad.errors import Forbidden
from narad.errors import InvalidArgument
from narad.errors import InvalidConfiguration
from narad.errors import LeaseGone
from narad.errors import NaradError
from narad.errors import NotFound
from narad.errors import PayloadTooLarge
from narad.errors import RequestTimeout
from narad.errors import StorageError
from narad.errors import StorageFull
from narad.errors import StorageUncertain
from narad.errors import TooManyRequests
from narad.errors import Unauthorized
from narad.errors import Unavailable
from narad.guard import StorageGuard
from narad.http import error_body
from narad.http.children import Child
from narad.http.children import Children
from narad.http.health import Health
from narad.http.health import Metrics
from narad.http.health import Ready
from narad.http.health import RequestMetrics
from narad.http.health import WriteGuard
from narad.http.messages import Ack
from narad.http.messages import Consume
from narad.http.messages import Produce
from narad.http.middleware import Authenticate
from narad.http.middleware import RequestLog
from narad.http.openapi import PATH as OPENAPI_PATH
from narad.http.openapi import OpenAPI
from narad.http.registry import MEDIA as REGISTRY_MEDIA
from narad.http.registry import SubjectSlashes
from narad.http.registry import add_routes as add_registry_routes
from narad.http.registry import error_body as registry_error_body
from narad.http.registry import is_registry
from narad.http.schemas import SchemaCheck
from narad.http.schemas import SchemaHistory
from narad.http.topics import TopicCollection
from narad.http.topics import TopicItem
from narad.http.users import UserCollection
from narad.http.users import UserItem
from narad.logs import Episode
from narad.plugins import Plugins
from narad.plugins import connect_storage
from narad.plugins import load_plugins
from narad.registry.service import RegistryService
from narad.schema import patterns
from narad.schema.capacity import ValidationCapacity
from narad.schema.service import SchemaService
from narad.security.access import Gate
from narad.security.authn import Authenticator
from narad.security.authn import Hasher
from narad.security.limiter import FailureLimiter
from narad.security.passwords import Scrypt
from narad.security.seed import admin_password_from_env
from narad.security.seed import seed_root_admin
from narad.security.users import UserService
from narad.storage import Event
from narad.storage import IdempotencyLimits
from narad.storage import Storage

log = logging.getLogger(__name__)

#: Requests failing for the storage, logged when they start and stop.
STORAGE_TROUBLE = Episode(log, "requests fail for the storage")

#: The HTTP status of every refusal, by error family: a named error
#: (``TopicBudgetExceeded``) answers with its family's (``Conflict``) status.
STATUS: dict[type[Exception], int] = {
    InvalidArgument: 400,
    Unauthorized: 401,
    Forbidden: 403,
    NotFound: 404,
    Conflict: 409,
    LeaseGone: 410,
    RequestTimeout: 408,
    PayloadTooLarge: 413,
    TooManyRequests: 429,
    Unavailable: 503,
    StorageFull: 507,
    StorageError: 503,
}


def status_of(exc: Exception) -> int:
    """The status :data:`STATUS` maps ``exc``'s class (or a base of it) to."""
    for cls in type(exc).__mro__:
        if cls in STATUS:
            return STATUS[cls]
    raise LookupError(f"{type(exc).__name__} has no HTTP status in narad.app.STATUS")


def capacity_for(config: Config) -> ValidationCapacity:
    directory = config.get("validation.capacity_dir") or str(
        config.data_dir / "capacity"
    )
    return ValidationCapacity(
        Path(directory),
        slots=config.get("validation.capacity_slots") or os.cpu_count() or 1,
        deadline=config.get("validation.capacity_wait_ms") / 1000,
    )


def check_capacity_at_start(config: Config) -> None:
    """In the master, before any worker: make the validation slots' lock files.

    A directory the node cannot write would fail every worker's start, or,
    when it exists, every costly validation with a 500.

    Raises:
        InvalidConfiguration: they cannot be made, naming the setting.
    """
    try:
        capacity = capacity_for(config)
        for path in capacity.paths:
            os.close(os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600))
    except OSError as exc:
        raise InvalidConfiguration(
            "`validation.capacity_dir`: the validation slots' lock files cannot "
            f"be made: {exc}"
        ) from None


def worker_caches(
    config: Config,
    records: TopicRecords,
    schemas: SchemaService,
    messages: MessageService,
    waiters: Waiters,
) -> Caches:
    """Every cache of the worker, for the metrics; the shared pattern caches
    take their bounds from ``config``."""
    patterns.SEARCHES.resize(
        max_entries=config.get("cache.patterns"),
        max_bytes=config.get("cache.pattern_memory"),
    )
    return Caches(
        records.cache,
        schemas.validators,
        schemas.framed.ids,
        schemas.framed.validators,
        messages.round_robin,
        waiters,
        *patterns.CACHES,
    )


def authenticator_for(
    config: Config, storage: Storage, hasher: Hasher
) -> Authenticator | None:
    """The worker's credential checks; ``None`` while security is off."""
    if not config.get("security.enabled"):
        return None

    def seed() -> None:
        seed_root_admin(storage, config, admin_password_from_env(), hasher.hash)

    return Authenticator(
        storage,
        Listener(storage, events={Event.USER_CHANGED}, name="user notifications"),
        hasher,
        FailureLimiter(
            burst=config.get("security.failures_burst"),
            per_minute=config.get("security.failures_per_minute"),
            share=config.get("server.workers"),
        ),
        FailureLimiter(
            burst=config.get("security.address_failures_burst"),
            per_minute=config.get("security.address_failures_per_minute"),
            share=config.get("server.workers"),
        ),
        users=FailureLimiter(
            burst=config.get("security.user_failures_burst"),
            per_minute=config.get("security.user_failures_per_minute"),
            share=config.get("server.workers"),
        ),
        cache_s=config.get("security.auth_cache_s"),
        seed=seed,
    )


class NaradApp(falcon.App):
    """The falcon app, plus the hooks for when it stops serving."""

    def __init__(self, waiters: Waiters, listener: Listener, **options: Any) -> None:
        super().__init__(**options)
        self._waiters = waiters
        self._listener = listener

    def drain(self) -> None:
        """Answer every waiting consumer now (204): the worker is stopping."""
        self._waiters.stop()

    def close(self) -> None:
        """Drain, and end the notification listener within about a second:
        for an app that serves no more in a process that goes on (tests,
        an embedding). Its ticks write process-wide metrics, so a listener
        left behind would keep publishing an old app's cache sizes."""
        self.drain()
        self._listener.stop()


def create_app(
    config: Config,
    *,
    plugins: Plugins | None = None,
    storage: Storage | None = None,
) -> NaradApp:
    plugins = plugins or load_plugins(config)
    config = plugins.configure(config)
    storage = storage or connect_storage(config, plugins)
    listener = Listener(storage, events={Event.MESSAGES, Event.TOPIC_CHANGED})
    waiters = Waiters(listener, max_topics=config.get("cache.topics"))
    records = TopicRecords(storage, listener, max_entries=config.get("cache.topics"))
    schemas = SchemaService(
        plugins,
        storage,
        records,
        capacity_for(config),
        cached_validators=config.get("cache.validators"),
        validator_memory=config.get("cache.validator_memory"),
    )
    children = ChildrenService(storage, records, schemas)
    topics = TopicService(storage, records, schemas, children)
    messages = MessageService(
        storage,
        records,
        schemas,
        waiters,
        max_wait_ms=config.get("broker.max_wait_ms"),
        batch_max_bytes=config.get("broker.batch_consume_max_bytes"),
        idempotency=IdempotencyLimits(
            window_ms=config.get("broker.idempotency_window_ms"),
            max_keys=config.get("broker.idempotency_max_keys"),
            max_bytes=config.get("broker.idempotency_max_bytes"),
        ),
    )
    caches = worker_caches(config, records, schemas, messages, waiters)
    listener.on_tick(caches.tick)
    # An idle worker writes out what it counted within a second or so.
    listener.on_tick(metrics.TALLY.maybe_flush)
    metrics.start_worker(schemas.capacity.slots)
    topic_metrics = TopicMetrics(
        storage,
        max_topics=config.get("metrics.max_topics"),
        ttl_s=config.get("metrics.topic_stats_ttl_s"),
        wait_s=config.get("metrics.topic_stats_wait_ms") / 1000,
    )

    hasher = Hasher(Scrypt(log2_n=config.get("security.scrypt_log2_n")))
    users = UserService(storage, hasher)

    guard = StorageGuard(storage, relaxed=config.get("storage.durability") == "relaxed")
    listener.on_live(guard.stream_live)
    authenticator = authenticator_for(config, storage, hasher)
    if authenticator is not None:
        caches.add(authenticator.cache)
    authenticate = Authenticate(authenticator, Gate(records))
    app = NaradApp(
        waiters,
        listener,
        media_type=falcon.MEDIA_JSON,
        middleware=[
            RequestLog(config.get("server.access_log")),
            RequestMetrics(STORAGE_TROUBLE, count=config.get("metrics.requests")),
            SubjectSlashes(),
            authenticate,
            WriteGuard(guard),
        ],
    )
    app.req_options.keep_blank_qs_values = True
    app.resp_options.default_media_type = falcon.MEDIA_JSON
    app.set_error_serializer(_serialize_http_error)
    app.add_error_handler(Exception, _unexpected)
    app.add_error_handler(falcon.HTTPError, _http_error)
    app.add_error_handler(StorageError, _refused)
    app.add_error_handler(NaradError, _refused)

    produce = Produce(messages)
    app.add_route("/v1/topics", TopicCollection(topics))
    app.add_route("/v1/topics/{name}", TopicItem(topics))
    app.add_route("/v1/topics/{name}/produce", produce)
    app.add_route("/v1/topics/{name}/produce/batch", produce, suffix="batch")
    consume = Consume(messages)
    app.add_route("/v1/topics/{name}/consume", consume)
    app.add_route("/v1/topics/{name}/consume/batch", consume, suffix="batch")
    ack = Ack(messages)
    app.add_route("/v1/topics/{name}/ack", ack)
    app.add_route("/v1/topics/{name}/ack/batch", ack, suffix="batch")
    app.add_route("/v1/topics/{name}/children", Children(children))
    app.add_route("/v1/topics/{name}/children/{child}", Child(children))
    history = SchemaHistory(topics, schemas)
    app.add_route("/v1/topics/{name}/schemas", history)
    app.add_route(
        "/v1/topics/{name}/schemas/compatibility", SchemaCheck(topics, schemas)
    )
    app.add_route("/v1/topics/{name}/schemas/{version}", history, suffix="version")
    app.add_route("/v1/users", UserCollection(users))
    user = UserItem(users)
    app.add_route("/v1/users/{username}", user)
    app.add_route("/v1/users/{username}/grants", user, suffix="grants")
    app.add_route("/v1/users/{username}/password", user, suffix="password")
    app.add_route(OPENAPI_PATH, OpenAPI())
    add_registry_routes(app, RegistryService(storage, records, schemas, topics))
    app.add_sink(authenticate.unknown_route)  # after every route
    app.add_route("/healthz", Health())
    app.add_route("/readyz", Ready(storage, guard))
    app.add_route(
        "/metrics",
        Metrics(guard, caches, topic_metrics, public=config.get("metrics.public")),
    )
    return app


def _json_error(
    resp: falcon.Response,
    status: int,
    message: str,
    req: falcon.Request | None = None,
    exc: Exception | None = None,
) -> None:
    if req is not None and is_registry(req):
        # Confluent's shape and codes under /registry (narad.registry.errors).
        status, body = registry_error_body(exc or Exception(message), status)
        resp.status = falcon.code_to_http_status(status)
        resp.content_type = REGISTRY_MEDIA
        resp.data = body
        return
    resp.status = falcon.code_to_http_status(status)
    resp.content_type = falcon.MEDIA_JSON
    resp.data = error_body(message)


def _refused(req, resp, exc: NaradError | StorageError, params) -> None:
    if isinstance(exc, StorageFull):
        # The gauges narad_storage_memory_* show it; no log line per refused write.
        message = "storage full: nothing was stored"
        _storage_error("full")
    elif isinstance(exc, StorageError):
        # The details are the operator's business, not the client's: logged
        # once per run of failures, counted each time.
        STORAGE_TROUBLE.failed(exc)
        message = "storage unavailable, retry"
        if isinstance(exc, StorageUncertain):
            message += ": the write may have been applied"
            _storage_error("uncertain")
        else:
            _storage_error("unavailable")
    else:
        message = exc.message
        for name, value in exc.headers.items():
            resp.set_header(name, value)
        _json_error(resp, status_of(exc), message, req, exc)
        return
    _json_error(resp, status_of(exc), message, req, _Refusal(message))


def _storage_error(kind: str) -> None:
    metrics.TALLY.inc(metrics.STORAGE_ERRORS, (kind,))


def _http_error(req, resp, exc: falcon.HTTPError, params) -> None:
    message = exc.description or exc.title or str(exc.status)
    _json_error(resp, exc.status_code, message, req, _Refusal(message))
    for name, value in (exc.headers or {}).items():
        resp.set_header(name, value)


def _unexpected(req, resp, exc: Exception, params) -> None:
    # A server fault: the one kind of failed request that logs a traceback
    # (with the request id, narad.logs.REQUEST_ID). A client's error is its
    # 4xx and access-log line only. The path is quoted: it arrives decoded,
    # and a newline in it would forge log lines.
    log.exception("unexpected error on %s %r", req.method, req.path)
    _json_error(resp, 500, "internal error", req, _Refusal("internal error"))


class _Refusal(Exception):
    """A refusal's message alone, for its Confluent body under /registry."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def _serialize_http_error(req, resp, exc: falcon.HTTPError) -> None:
    resp.content_type = falcon.MEDIA_JSON
    message = exc.description or exc.title
    if is_registry(req):
        resp.content_type = REGISTRY_MEDIA
        _, resp.data = registry_error_body(_Refusal(message), exc.status_code)
        return
    resp.data = error_body(message)
