"""``/v1/topics``: create, list, describe, alter, delete."""

from __future__ import annotations

import re
from typing import Any

import falcon

from narad.broker.topics import ALTERABLE
from narad.broker.topics import TopicService
from narad.errors import InvalidArgument
from narad.errors import TopicNotFound
from narad.http import dumps
from narad.http.body import integer
from narad.http.body import param
from narad.http.body import query_int
from narad.http.body import read_object
from narad.http.body import refuse_unknown
from narad.quoting import quote
from narad.schema import jsontext
from narad.security.access import authorize
from narad.security.access import principal
from narad.security.grants import Action
from narad.storage import PartitionStats
from narad.storage import TopicChanges
from narad.storage import TopicMeta

NAME = re.compile(r"[A-Za-z0-9._-]{1,249}")
SETTINGS = ("partitions", *ALTERABLE)
CREATE_FIELDS = ("name", *SETTINGS, "schema", "parent", "fanout_delay_ms")
ALTER_FIELDS = (*ALTERABLE, "schema", "schema_base_version")
MAX_PARTITIONS = 108
MIN_RETENTION_MS = 3_600_000
MAX_PAGE = 1000


def topic_record(meta: TopicMeta) -> dict[str, Any]:
    return {
        "name": meta.name,
        "partitions": meta.partitions,
        "retention_ms": meta.retention_ms,
        "visibility_timeout_ms": meta.visibility_timeout_ms,
        "max_in_flight_per_partition": meta.max_in_flight_per_partition,
        "max_acked_ahead_per_partition": meta.max_acked_ahead_per_partition,
        "created_at_ms": meta.created_ms,
        "schema_version": meta.schema_version or None,
        "owner": meta.owner or None,
    }


def valid_name(name: str) -> bool:
    # "." and ".." are path segments: clients and proxies resolve them away
    # (/v1/topics/../produce), so such a topic could not be reached.
    return NAME.fullmatch(name) is not None and name.strip(".") != ""


def check_name(name: str) -> str:
    """A topic name from the path; one no topic can have is 404."""
    if not valid_name(name):
        raise TopicNotFound(quote(name))
    return name


def _settings(body: dict[str, Any], names: tuple[str, ...]) -> dict[str, int]:
    settings = {}
    for name in names:
        if name not in body:
            continue
        value = body[name]
        if name == "partitions":
            settings[name] = integer(value, name, high=MAX_PARTITIONS)
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


class TopicCollection:
    def __init__(self, topics: TopicService) -> None:
        self.topics = topics

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        body, raw = read_object(req)
        refuse_unknown(body, CREATE_FIELDS)
        for name in ("parent", "fanout_delay_ms"):
            if name in body:
                raise InvalidArgument(
                    f"{name}: fan-out children are not supported by this node"
                )
        name = body.get("name")
        if not isinstance(name, str):
            raise InvalidArgument("name must be a string")
        if not valid_name(name):
            raise InvalidArgument(
                "name must be 1 to 249 letters, digits, '.', '_' or '-', and "
                f"not only dots, got {quote(name)}"
            )
        authorize(req, Action.CREATE, name)
        schema_raw = jsontext.raw_members(raw)["schema"] if "schema" in body else None
        meta = self.topics.create(
            name, _settings(body, SETTINGS), schema_raw, owner=principal(req).name
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
        # A user sees the topics their grants match (see the README).
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
        authorize(req, Action.READ, check_name(name))
        meta, stats = self.topics.describe(name)
        record = topic_record(meta)
        record["partition_stats"] = [_stats(s) for s in stats]
        resp.text = dumps(record)

    on_head = on_get

    def on_patch(self, req: falcon.Request, resp: falcon.Response, name: str) -> None:
        authorize(req, Action.ALTER, check_name(name))
        body, raw = read_object(req)
        if "partitions" in body:
            raise InvalidArgument("partitions cannot be changed")
        refuse_unknown(body, ALTER_FIELDS)
        base = body.get("schema_base_version")
        if base is not None:
            base = integer(base, "schema_base_version", low=0)
        schema_raw = jsontext.raw_members(raw)["schema"] if "schema" in body else None
        changes = TopicChanges(**_settings(body, ALTERABLE))
        meta, _ = self.topics.alter(name, changes, schema_raw, base)
        resp.text = dumps(topic_record(meta))

    def on_delete(self, req: falcon.Request, resp: falcon.Response, name: str) -> None:
        authorize(req, Action.DELETE, check_name(name))
        self.topics.delete(name)
        resp.status = falcon.HTTP_204


def _stats(stats: PartitionStats) -> dict[str, int]:
    return {
        "index": stats.index,
        "oldest_offset": stats.oldest_offset,
        "next_offset": stats.next_offset,
        "in_flight": stats.in_flight,
    }
