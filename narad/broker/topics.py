"""Topic lifecycle: create, describe, list, alter, delete.

Workers keep each topic's record in a small per-process cache so a produce
costs one storage round trip. The cache is never trusted for a write: every
script checks the topic's epoch (and, for produce, its schema version) and
the caller refreshes and retries when the record moved on.
"""

from __future__ import annotations

import secrets
from dataclasses import replace

from narad.broker import now_ms
from narad.errors import Conflict
from narad.errors import TopicExists
from narad.errors import TopicNotFound
from narad.schema.service import SchemaService
from narad.storage import PartitionStats
from narad.storage import SchemaVersion
from narad.storage import Status
from narad.storage import Storage
from narad.storage import TopicMeta

DEFAULTS = {
    "partitions": 3,
    "retention_ms": 7 * 24 * 3_600_000,
    "visibility_timeout_ms": 30_000,
    "max_in_flight_per_partition": 1024,
    "max_acked_ahead_per_partition": 1024,
}
ALTERABLE = (
    "retention_ms",
    "visibility_timeout_ms",
    "max_in_flight_per_partition",
    "max_acked_ahead_per_partition",
)


class TopicService:
    def __init__(self, storage: Storage, schemas: SchemaService) -> None:
        self.storage = storage
        self.schemas = schemas
        self._cache: dict[str, TopicMeta] = {}

    # -- the per-process record cache ----------------------------------------

    def cached(self, name: str) -> TopicMeta:
        meta = self._cache.get(name)
        return meta if meta is not None else self.refresh(name)

    def refresh(self, name: str) -> TopicMeta:
        meta = self.storage.get_topic(name)
        if meta is None:
            self._cache.pop(name, None)
            raise TopicNotFound(name)
        if len(self._cache) > 10_000:
            self._cache.clear()
        self._cache[name] = meta
        return meta

    # -- operations ----------------------------------------------------------

    def create(
        self, name: str, settings: dict[str, int], schema_raw: bytes | None
    ) -> TopicMeta:
        schema = None
        if schema_raw is not None:
            registered = self.schemas.register(schema_raw)
            schema = SchemaVersion(1, registered.compact, registered.high_cost)
        meta = TopicMeta(
            name=name,
            epoch=secrets.token_hex(8),
            created_ms=now_ms(),
            **{**DEFAULTS, **settings},
        )
        result = self.storage.create_topic(meta, schema, budget=self.schemas.budgets())
        if result.status is Status.EXISTS:
            raise TopicExists(name)
        self.schemas.raise_for_budget(result, name)
        # The script wrote exactly this record: no need to read it back.
        created = replace(
            meta,
            schema_version=result.version,
            schema_high_cost=bool(schema and schema.high_cost),
            schema_bytes=result.stored_bytes,
        )
        self._cache[name] = created
        return created

    def describe(self, name: str) -> tuple[TopicMeta, list[PartitionStats]]:
        meta = self.refresh(name)
        return meta, self.storage.partition_stats(meta, now_ms=now_ms())

    def list(self, *, after: str, limit: int) -> tuple[list[TopicMeta], str | None]:
        page = self.storage.list_topics(after=after, limit=limit)
        metas = self.storage.get_topics(page.names)
        return [m for m in metas if m is not None], page.next_token

    def alter(
        self,
        name: str,
        changes: dict[str, int],
        schema_raw: bytes | None,
        base_version: int | None,
    ) -> tuple[TopicMeta, bool]:
        """Apply settings and/or a schema change; say whether a version was added."""
        meta = self.refresh(name)
        added = False
        if schema_raw is not None:
            added = self.schemas.change(meta, schema_raw, base_version)
        elif base_version is not None:
            raise Conflict("schema_base_version given without a schema")
        if changes:
            status = self.storage.alter_topic(name, meta.epoch, changes)
            if status is Status.NO_TOPIC:
                raise TopicNotFound(name)
        return self.refresh(name), added

    def delete(self, name: str) -> None:
        meta = self.refresh(name)
        if self.storage.delete_topic(meta) is Status.NO_TOPIC:
            raise TopicNotFound(name)
        self._cache.pop(name, None)
        self.schemas.forget(name)
