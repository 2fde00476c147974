"""``/v1/topics``: create, list, describe, alter, delete."""

from __future__ import annotations

import re
from typing import Any

import falcon

from narad import jsontext
from narad.broker.children import MAX_DELAY_MS
from narad.broker.topics import ALTERABLE
from narad.broker.topics import TopicService
from narad.errors import InvalidArgument
from narad.errors import TopicNotFound
from narad.errors import UnknownMode
from narad.http import dumps
from narad.http.body import integer
from narad.http.body import param
from narad.http.body import query_int
from narad.http.body import read_object
from narad.http.body import refuse_unknown
from narad.quoting import quote
from narad.schema.framing import FRAMINGS
from narad.schema.modes import Mode
from narad.schematypes import ENCODINGS
from narad.security.access import authorize
from narad.security.access import confirm_read
from narad.security.access import principal
from narad.security.grants import Action
from narad.storage import PartitionStats
from narad.storage import TopicChanges
from narad.storage import TopicMeta

NAME = re.compile(r"[A-Za-z0-9._-]{1,249}")
SETTINGS = ("partitions", *ALTERABLE)
#: A topic's schema settings: its history's type, payload encoding and
#: Protobuf message (:mod:`narad.schematypes`).
SCHEMA_SETTINGS = ("schema_type", "encoding", "proto_message")
CREATE_FIELDS = (
    "name",
    *SETTINGS,
    "compatibility",
    "schema",
    *SCHEMA_SETTINGS,
    "framing",
    "parent",
    "fanout_delay_ms",
)
ALTER_FIELDS = (
    *ALTERABLE,
    "compatibility",
    "schema",
    *SCHEMA_SETTINGS,
    "framing",
    "schema_base_version",
)
TYPE_NAME = re.compile(r"[A-Z][A-Z0-9_]{0,31}")
MAX_PROTO_MESSAGE = 1024
MAX_PARTITIONS = 108
MIN_RETENTION_MS = 3_600_000
MAX_PAGE = 1000


def topic_record(meta: TopicMeta) -> dict[str, Any]:
    record: dict[str, Any] = {
        "name": meta.name,
        "partitions": meta.partitions,
        "retention_ms": meta.retention_ms,
        "visibility_timeout_ms": meta.visibility_timeout_ms,
        "max_in_flight_per_partition": meta.max_in_flight_per_partition,
        "max_acked_ahead_per_partition": meta.max_acked_ahead_per_partition,
        "created_at_ms": meta.created_ms,
        "schema_version": meta.schema_version or None,
        "compatibility": meta.compatibility,
        "schema_type": meta.schema_type,
        "encoding": meta.encoding,
        "framing": meta.framing,
        "owner": meta.owner or None,
    }
    if meta.schema_type == "PROTOBUF" or meta.proto_message:
        record["proto_message"] = meta.proto_message or None
    # Fan-out fields appear where they apply, as the Go Narad shows them.
    if meta.parent:
        record["parent"] = meta.parent
    if meta.fanout_delay_ms:
        record["fanout_delay_ms"] = meta.fanout_delay_ms
    if meta.children:
        record["children"] = [child.name for child in meta.children]
    return record


def valid_name(name: str) -> bool:
    # "." and ".." are path segments: clients and proxies resolve them away
    # (/v1/topics/../produce), so such a topic could not be reached.
    return NAME.fullmatch(name) is not None and name.strip(".") != ""


def check_name(name: str) -> str:
    """A topic name from the path; one no topic can have is 404."""
    if not valid_name(name):
        raise TopicNotFound(quote(name))
    return name


def topic_name(value: Any, field: str) -> str:
    """A topic name given in a request body."""
    if not isinstance(value, str):
        raise InvalidArgument(f"{field} must be a string")
    if not valid_name(value):
        raise InvalidArgument(
            f"{field} must be 1 to 249 letters, digits, '.', '_' or '-', and "
            f"not only dots, got {quote(value)}"
        )
    return value


def mode(value: Any, field: str = "compatibility") -> Mode:
    """A compatibility mode, by its exact name."""
    if not isinstance(value, str):
        raise InvalidArgument(f"{field} must be a string naming a compatibility mode")
    try:
        return Mode(value)
    except ValueError:
        raise UnknownMode(field, value, list(Mode)) from None


def delay_ms(value: Any, field: str) -> int:
    """A fan-out delay: 0 (immediate) or 1 ms up to one year."""
    return integer(value, field, low=0, high=MAX_DELAY_MS)


def _settings(
    body: dict[str, Any], names: tuple[str, ...], *, inherit: bool = False
) -> dict[str, int]:
    """The settings ``names`` in ``body``; ``inherit``: partitions 0 takes the
    parent's count."""
    settings = {}
    for name in names:
        if name not in body:
            continue
        value = body[name]
        if name == "partitions":
            low = 0 if inherit else 1
            settings[name] = integer(value, name, low=low, high=MAX_PARTITIONS)
        elif name == "retention_ms":
            value = integer(value, name, low=0)
            if 0 < value < MIN_RETENTION_MS:
                raise InvalidArgument(
                    f"retention_ms must be 0 (keep forever) or at least "
                    f"{MIN_RETENTION_MS} (one hour), got {value}"
                )
            settings[name] = value
        else:
            settings[name] = integer(value, name)
    return settings


def schema_settings(body: dict[str, Any]) -> dict[str, str]:
    """The schema settings ``body`` names (:data:`SCHEMA_SETTINGS`), each
    checked for its form; whether the type takes them is the schema
    service's to say."""
    found: dict[str, str] = {}
    if "schema_type" in body:
        value = body["schema_type"]
        if not isinstance(value, str) or not TYPE_NAME.fullmatch(value):
            raise InvalidArgument(
                'schema_type must be a schema type\'s name ("JSON", "AVRO", '
                f'"PROTOBUF"), got {quote(str(value)[:100])}'
            )
        found["schema_type"] = value
    if "encoding" in body:
        value = body["encoding"]
        if value not in ENCODINGS:
            raise InvalidArgument(
                f"encoding must be one of {', '.join(ENCODINGS)}, got "
                f"{quote(str(value)[:100])}"
            )
        found["encoding"] = value
    if "proto_message" in body:
        value = body["proto_message"]
        if not isinstance(value, str) or not 0 < len(value) <= MAX_PROTO_MESSAGE:
            raise InvalidArgument(
                "proto_message must be a message's full name (shop.Order), "
                f"a string of 1 to {MAX_PROTO_MESSAGE} characters"
            )
        found["proto_message"] = value
    return found


def framing_setting(body: dict[str, Any]) -> str | None:
    """The ``framing`` setting in ``body``, if it has one: ``"none"`` or
    ``"confluent"`` (Confluent's wire format, :mod:`narad.schema.framing`)."""
    if "framing" not in body:
        return None
    value = body["framing"]
    if value not in FRAMINGS:
        shown = quote(value[:100]) if isinstance(value, str) else "not a string"
        raise InvalidArgument(
            f"framing must be one of {', '.join(FRAMINGS)} (magic byte 0 and a "
            f"4-byte schema id before each message), got {shown}"
        )
    return value


def _mode_setting(body: dict[str, Any]) -> Mode | None:
    """The ``compatibility`` setting in ``body``, if it has one."""
    return mode(body["compatibility"]) if "compatibility" in body else None


class TopicCollection:
    def __init__(self, topics: TopicService) -> None:
        self.topics = topics

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        body, raw = read_object(req)
        refuse_unknown(body, CREATE_FIELDS)
        name = topic_name(body.get("name"), "name")
        parent = body.get("parent")
        if parent is not None:
            parent = topic_name(parent, "parent")
        delay = body.get("fanout_delay_ms")
        if delay is not None:
            if parent is None:
                raise InvalidArgument("fanout_delay_ms needs parent")
            delay = delay_ms(delay, "fanout_delay_ms")
        owned = None
        if parent is not None:
            owned = authorize(req, Action.MANAGE_CHILDREN, parent)
        authorize(req, Action.CREATE, name)
        settings = _settings(body, SETTINGS, inherit=parent is not None)
        compatibility = _mode_setting(body)
        schema_raw = jsontext.raw_members(raw)["schema"] if "schema" in body else None
        meta = self.topics.create(
            name,
            settings,
            schema_raw,
            schema_settings=schema_settings(body),
            framing=framing_setting(body),
            parent=parent,
            delay_ms=delay or 0,
            mode=compatibility,
            owner=principal(req).name,
            parent_epoch=owned,
        )
        resp.status = falcon.HTTP_201
        resp.location = f"/v1/topics/{meta.name}"
        resp.text = dumps(topic_record(meta))

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        limit = query_int(req, "limit", low=1, high=MAX_PAGE) or 100
        token = param(req, "page_token") or ""
        if token and not NAME.fullmatch(token):
            raise InvalidArgument(
                "page_token must be the next_page_token of the previous page, "
                f"got {quote(token)}"
            )
        # A user sees the topics their grants match (docs/security.md).
        scope = principal(req).permissions.listing_prefixes()
        metas, next_token = self.topics.list(after=token, limit=limit, scope=scope)
        resp.text = dumps(
            {
                "topics": [topic_record(m) for m in metas],
                "next_page_token": next_token,
            }
        )

    on_head = on_get


class TopicItem:
    def __init__(self, topics: TopicService) -> None:
        self.topics = topics

    def on_get(self, req: falcon.Request, resp: falcon.Response, name: str) -> None:
        owned = authorize(req, Action.READ, check_name(name))
        meta, stats = self.topics.describe(name)
        confirm_read(req, name, owned)
        record = topic_record(meta)
        record["partition_stats"] = [_stats(s) for s in stats]
        resp.text = dumps(record)

    on_head = on_get

    def on_patch(self, req: falcon.Request, resp: falcon.Response, name: str) -> None:
        owned = authorize(req, Action.ALTER, check_name(name))
        body, raw = read_object(req)
        if "partitions" in body:
            raise InvalidArgument("partitions cannot be changed")
        if "fanout_delay_ms" in body:
            raise InvalidArgument(
                "fanout_delay_ms cannot be changed: it is fixed at attach; detach "
                "the child and attach it again with the new delay"
            )
        if "parent" in body:
            raise InvalidArgument(
                "parent cannot be changed here: attach and detach with "
                "/v1/topics/{parent}/children"
            )
        refuse_unknown(body, ALTER_FIELDS)
        base = body.get("schema_base_version")
        if base is not None:
            base = integer(base, "schema_base_version", low=0)
        schema_raw = jsontext.raw_members(raw)["schema"] if "schema" in body else None
        compatibility = _mode_setting(body)
        changes = TopicChanges(
            **_settings(body, ALTERABLE),
            compatibility=compatibility and compatibility.value,
            **schema_settings(body),
            framing=framing_setting(body),
        )
        meta, _ = self.topics.alter(name, changes, schema_raw, base, epoch=owned)
        resp.text = dumps(topic_record(meta))

    def on_delete(self, req: falcon.Request, resp: falcon.Response, name: str) -> None:
        owned = authorize(req, Action.DELETE, check_name(name))
        self.topics.delete(name, epoch=owned)
        resp.status = falcon.HTTP_204


def _stats(stats: PartitionStats) -> dict[str, int]:
    return {
        "index": stats.index,
        "oldest_offset": stats.oldest_offset,
        "next_offset": stats.next_offset,
        "in_flight": stats.in_flight,
    }
