"""The WSGI application: routes, error handling, and the wiring of services.

``get_app()`` is what gunicorn loads in each worker (``'narad.app:get_app()'``);
it reads the configuration from ``NARAD_*`` variables (the CLI hands its
resolved settings to the workers that way). Each worker builds its own storage
client, so no connection crosses a fork.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from urllib.parse import urlsplit

import falcon

from narad.broker.messages import MessageService
from narad.broker.topics import TopicService
from narad.broker.waiters import Waiters
from narad.config import Config
from narad.errors import InvalidConfiguration
from narad.errors import NaradError
from narad.errors import StorageError
from narad.errors import StorageFull
from narad.guard import StorageGuard
from narad.http import dumps
from narad.http.health import Health
from narad.http.health import Metrics
from narad.http.health import Ready
from narad.http.health import WriteGuard
from narad.http.messages import Ack
from narad.http.messages import Consume
from narad.http.messages import Produce
from narad.http.schemas import SchemaHistory
from narad.http.topics import TopicCollection
from narad.http.topics import TopicItem
from narad.plugins import Plugins
from narad.plugins import load_plugins
from narad.schema.capacity import ValidationCapacity
from narad.schema.service import SchemaService
from narad.storage import Storage

log = logging.getLogger(__name__)


def connect_storage(config: Config, plugins: Plugins) -> Storage:
    url = config.storage_url
    if not url:
        raise InvalidConfiguration(
            "`storage.url` is empty: `narad serve` starts the embedded server and "
            "sets it; a bare gunicorn needs NARAD_STORAGE_URL"
        )
    scheme = urlsplit(url).scheme
    backends = plugins.storage_backends()
    if scheme not in backends:
        known = ", ".join(sorted(backends))
        raise InvalidConfiguration(
            f"`storage.url` scheme {scheme!r} has no storage plugin (known: {known})"
        )
    return backends[scheme](url, config)


def capacity_for(config: Config) -> ValidationCapacity:
    directory = config.get("validation.capacity_dir") or str(
        config.data_dir / "capacity"
    )
    return ValidationCapacity(
        Path(directory),
        slots=config.get("validation.capacity_slots") or os.cpu_count() or 1,
        deadline=config.get("validation.capacity_wait_ms") / 1000,
    )


def create_app(
    config: Config,
    *,
    plugins: Plugins | None = None,
    storage: Storage | None = None,
) -> falcon.App:
    plugins = plugins or load_plugins(config)
    storage = storage or connect_storage(config, plugins)
    schemas = SchemaService(plugins, storage, capacity_for(config))
    topics = TopicService(storage, schemas)
    messages = MessageService(
        storage,
        topics,
        schemas,
        Waiters(storage),
        max_wait_ms=config.get("broker.max_wait_ms"),
    )

    guard = StorageGuard(storage, relaxed=config.get("storage.durability") == "relaxed")
    app = falcon.App(media_type=falcon.MEDIA_JSON, middleware=[WriteGuard(guard)])
    app.req_options.keep_blank_qs_values = True
    app.resp_options.default_media_type = falcon.MEDIA_JSON
    app.set_error_serializer(_serialize_http_error)
    app.add_error_handler(Exception, _unexpected)
    app.add_error_handler(falcon.HTTPError, _http_error)
    app.add_error_handler(StorageError, _storage_error)
    app.add_error_handler(StorageFull, _storage_full)
    app.add_error_handler(NaradError, _narad_error)

    produce = Produce(messages)
    app.add_route("/v1/topics", TopicCollection(topics))
    app.add_route("/v1/topics/{name}", TopicItem(topics))
    app.add_route("/v1/topics/{name}/produce", produce)
    app.add_route("/v1/topics/{name}/produce/batch", produce, suffix="batch")
    app.add_route("/v1/topics/{name}/consume", Consume(messages))
    app.add_route("/v1/topics/{name}/ack", Ack(messages))
    history = SchemaHistory(topics, schemas)
    app.add_route("/v1/topics/{name}/schemas", history)
    app.add_route("/v1/topics/{name}/schemas/{version}", history, suffix="version")
    app.add_route("/healthz", Health())
    app.add_route("/readyz", Ready(storage, guard))
    app.add_route("/metrics", Metrics(guard))
    return app


def get_app() -> falcon.App:
    """The gunicorn entry point: configuration from the environment."""
    return create_app(Config.load())


def _json_error(resp: falcon.Response, status: int, message: str) -> None:
    resp.status = falcon.code_to_http_status(status)
    resp.content_type = falcon.MEDIA_JSON
    resp.text = dumps({"error": message})


def _narad_error(req, resp, exc: NaradError, params) -> None:
    _json_error(resp, exc.status, exc.message)


def _storage_error(req, resp, exc: StorageError, params) -> None:
    log.warning("storage error: %s", exc)
    _json_error(resp, 503, "storage unavailable, retry")


def _storage_full(req, resp, exc: StorageFull, params) -> None:
    # The gauges narad_storage_memory_* show it; no log line per refused write.
    _json_error(resp, 507, "storage full: nothing was stored")


def _http_error(req, resp, exc: falcon.HTTPError, params) -> None:
    message = exc.description or exc.title or str(exc.status)
    _json_error(resp, exc.status_code, message)
    for name, value in (exc.headers or {}).items():
        resp.set_header(name, value)


def _unexpected(req, resp, exc: Exception, params) -> None:
    log.exception("unexpected error on %s %s", req.method, req.path)
    _json_error(resp, 500, "internal error")


def _serialize_http_error(req, resp, exc: falcon.HTTPError) -> None:
    resp.content_type = falcon.MEDIA_JSON
    resp.text = dumps({"error": exc.description or exc.title})
