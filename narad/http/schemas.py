"""``/v1/topics/{name}/schemas``: a topic's schema history, read-only."""

from __future__ import annotations

import falcon

from narad.broker.topics import TopicService
from narad.errors import InvalidArgument
from narad.errors import NotFound
from narad.http import dumps
from narad.http.body import ascii_digits
from narad.http.topics import check_name
from narad.quoting import quote
from narad.schema.service import SchemaService
from narad.security.access import authorize
from narad.security.grants import Action


class SchemaHistory:
    def __init__(self, topics: TopicService, schemas: SchemaService) -> None:
        self.topics = topics
        self.schemas = schemas

    def on_get(self, req: falcon.Request, resp: falcon.Response, name: str) -> None:
        authorize(req, Action.READ, check_name(name))
        meta = self.topics.refresh(name)
        sizes = self.schemas.sizes(meta.name)
        resp.text = dumps(
            {
                "topic": meta.name,
                "current_version": meta.schema_version or None,
                "total_bytes": meta.schema_bytes,
                "versions": [{"version": s.version, "size": s.size} for s in sizes],
            }
        )

    on_head = on_get

    def on_get_version(
        self, req: falcon.Request, resp: falcon.Response, name: str, version: str
    ) -> None:
        authorize(req, Action.READ, check_name(name))
        meta = self.topics.refresh(name)
        if version == "latest":
            if not meta.schema_version:
                raise NotFound(f"topic {meta.name} has no schema")
            number = meta.schema_version
        elif ascii_digits(version) and len(version) < 10:
            number = int(version)
        else:
            raise InvalidArgument(
                f"version must be a positive integer or latest, got {quote(version)}"
            )
        stored = self.schemas.stored(meta.name, number)
        resp.content_type = falcon.MEDIA_JSON
        resp.set_header("Narad-Schema-Version", str(stored.version))
        resp.data = stored.document

    on_head_version = on_get_version
