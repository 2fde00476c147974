"""Topic lifecycle: create, describe, list, alter, delete.

The topic service owns the topic record; every schema write, version 1 at
create included, belongs to the schema service, which this one hands the
schema part of a request to, and a create under a parent belongs to the
children service.

The compatibility mode is a setting of the record, not a schema change: it
is written with the other settings of a request (with a new schema version
when the same PATCH brings one). A child's is its parent's while attached,
so a PATCH giving an attached child another mode is refused (409); the
storage copies a parent's new mode into every child in the same write.

``framing`` (``none`` or ``confluent``: Confluent's wire format, see
:mod:`narad.schema.framing`) is a plain setting of the topic's own, never
copied to children. A framed topic's payloads are in the encoding
Confluent's serializers write for its type (Avro and Protobuf binary, JSON
Schema's JSON texts): a create or PATCH that frames a topic without naming
the encoding gets that one while the topic has no schema yet, and any other
is refused (400).

An alter or delete allowed by owning the topic names the ``epoch`` owned
(:func:`narad.security.access.authorize`): it acts on that incarnation only,
and a topic of the same name created meanwhile is not found (404).
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from collections.abc import Sequence
from dataclasses import replace

from narad.broker import now_ms
from narad.broker.children import ChildrenService
from narad.broker.records import TopicRecords
from narad.errors import BaseVersionWithoutSchema
from narad.errors import InvalidArgument
from narad.errors import ModeManagedByParent
from narad.errors import RetentionTooShort
from narad.errors import SubjectHoldsTopicName
from narad.errors import TopicExists
from narad.errors import TopicKeptChanging
from narad.errors import TopicNotFound
from narad.schema.framing import CONFLUENT
from narad.schema.framing import check_framing
from narad.schema.modes import DEFAULT
from narad.schema.modes import Mode
from narad.schema.service import SchemaService
from narad.schema.service import check_encoding
from narad.schematypes import DEFAULT_TYPE
from narad.storage import PartitionStats
from narad.storage import Status
from narad.storage import Storage
from narad.storage import TopicChanges
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
WRITE_ATTEMPTS = 8


class TopicService:
    def __init__(
        self,
        storage: Storage,
        records: TopicRecords,
        schemas: SchemaService,
        children: ChildrenService,
    ) -> None:
        self.storage = storage
        self.records = records
        self.schemas = schemas
        self.children = children

    def refresh(self, name: str) -> TopicMeta:
        """The topic's record as stored now; ``TopicNotFound`` if none."""
        return self.records.refresh(name)

    def create(
        self,
        name: str,
        settings: dict[str, int],
        schema_raw: bytes | None,
        *,
        schema_settings: Mapping[str, str] | None = None,
        framing: str | None = None,
        parent: str | None = None,
        delay_ms: int = 0,
        mode: Mode | None = None,
        owner: str = "",
        parent_epoch: str | None = None,
    ) -> TopicMeta:
        """Create a topic; under ``parent`` (with ``delay_ms``) it is created
        attached, taking the parent's partition count unless ``settings``
        name one, and the parent's compatibility mode (``mode``, if given,
        must be the parent's); ``parent_epoch`` (owned) pins the parent's
        incarnation.

        ``schema_settings`` names the schema type (default ``JSON``), the
        payload encoding (default the type's) and the Protobuf message; a
        child takes its parent's (and those given must be the parent's).
        ``framing`` (default ``none``) is the topic's own; ``confluent``
        makes the type's framed encoding the default one.
        """
        given = dict(schema_settings or {})
        defaults = {**DEFAULTS, "partitions": 0} if parent else DEFAULTS
        meta = TopicMeta(
            name=name,
            epoch=secrets.token_hex(8),
            created_ms=now_ms(),
            compatibility=(mode or DEFAULT).value,
            owner=owner,
            **{**defaults, **settings},
        )
        if framing is not None:
            meta = replace(meta, framing=framing)
        if parent is not None:
            return self.children.create(
                meta,
                parent,
                delay_ms,
                schema_raw,
                mode,
                parent_epoch=parent_epoch,
                schema_settings=given,
            )
        framed = meta.framing == CONFLUENT
        if given or framed:  # else the record's defaults: JSON over JSON texts
            schema_type = self.schemas.schema_type(
                given.get("schema_type", DEFAULT_TYPE)
            )
            default = (
                schema_type.framed_encoding if framed else schema_type.default_encoding
            )
            encoding = given.get("encoding", default)
            check_encoding(schema_type, encoding)
            check_framing(schema_type, encoding, meta.framing)
            meta = replace(
                meta,
                schema_type=schema_type.name,
                encoding=encoding,
                proto_message=given.get("proto_message", ""),
            )
        heard = self.records.heard
        if schema_raw is not None:
            created = self.schemas.create_topic(meta, schema_raw)
        else:
            status = self.storage.create_topic(meta).status
            if status is Status.EXISTS:
                raise TopicExists(name)
            if status is Status.SUBJECT_EXISTS:
                raise SubjectHoldsTopicName(name)
            created = meta
        # The script wrote exactly this record: no need to read it back.
        self.records.put(created, heard)
        return created

    def describe(self, name: str) -> tuple[TopicMeta, list[PartitionStats]]:
        meta = self.records.refresh(name)
        return meta, self.storage.partition_stats(meta, now_ms=now_ms())

    def list(
        self,
        *,
        after: str,
        limit: int,
        scope: Sequence[tuple[str, bool]] | None = None,
    ) -> tuple[list[TopicMeta], str | None]:
        """A page of topics above ``after``, in name order, and the next token.

        ``scope`` keeps to some names: sorted, disjoint ``(prefix, exact)``
        ranges (``exact``: the prefix is a whole name); ``None`` lists all.
        """
        if scope is None:
            page = self.storage.list_topics(after=after, limit=limit)
            names, next_token = page.names, page.next_token
        else:
            names, next_token = self._scoped(after, limit, scope)
        metas = self.storage.get_topics(names)
        return [m for m in metas if m is not None], next_token

    def _scoped(
        self, after: str, limit: int, scope: Sequence[tuple[str, bool]]
    ) -> tuple[list[str], str | None]:
        # Whole names are looked up at once. The prefix ranges are disjoint
        # and sorted, so walking them in order yields names in order; once
        # they gave one more than a page, later ones cannot make the page.
        exact = [name for name, whole in scope if whole and name > after]
        names = [m.name for m in self.storage.get_topics(exact) if m is not None]
        found = 0
        for prefix, whole in scope:
            if whole or found > limit:
                continue
            if after >= prefix and not after.startswith(prefix):
                continue  # the whole range sorts at or before ``after``
            page = self.storage.list_topics(
                after=after, limit=limit + 1 - found, prefix=prefix
            )
            names += page.names
            found += len(page.names)
        names.sort()
        if len(names) > limit:
            return names[:limit], names[limit - 1]
        return names, None

    def alter(
        self,
        name: str,
        changes: TopicChanges,
        schema_raw: bytes | None,
        base_version: int | None,
        *,
        epoch: str | None = None,
        references: bytes = b"",
    ) -> tuple[TopicMeta, bool]:
        """Apply settings and/or a schema change; say whether a version was added.

        Settings that come with a new schema version are written with it, in
        one step; with no new version (no schema, or one that changes
        nothing), they are written alone. A new schema is checked in the
        compatibility mode the PATCH leaves the topic in. With ``epoch``, only
        that incarnation of the topic is altered. ``references``: the new
        schema's (a registration under the registry's ``<t>-value``).
        """
        meta = self.records.refresh(name, epoch=epoch)
        changes = _check_mode(meta, changes)
        _check_retention(meta, changes)
        changes = self._check_framing(meta, changes, schema_raw is not None)
        added = False
        if schema_raw is not None:
            added = (
                self.schemas.change(meta, schema_raw, base_version, changes, references)
                is not None
            )
        elif base_version is not None:
            raise BaseVersionWithoutSchema()
        else:
            _check_schema_settings(meta, changes)
        # The schema settings change only with a version (service.change).
        changes = replace(changes, schema_type=None, encoding=None, proto_message=None)
        if changes and not added:
            self._alter(meta, changes, epoch)
        return self.records.refresh(name), added

    def _check_framing(
        self, meta: TopicMeta, changes: TopicChanges, with_schema: bool
    ) -> TopicChanges:
        """``changes`` with the encoding a topic framed by them takes (the
        type's framed one, while the topic has no schema and the PATCH names
        none); refused (400) where it would be framed in another one."""
        framing = changes.framing or meta.framing
        if framing != CONFLUENT:
            return changes
        name = changes.schema_type or meta.schema_type
        schema_type = self.schemas.schema_type(name)
        encoding = changes.encoding
        if encoding is None:
            if with_schema and not meta.schema_version:
                encoding = schema_type.framed_encoding
                changes = replace(changes, encoding=encoding)
            elif name == meta.schema_type:
                encoding = meta.encoding
            else:
                encoding = schema_type.default_encoding
        check_framing(schema_type, encoding, framing)
        return changes

    def _alter(self, meta: TopicMeta, changes: TopicChanges, epoch: str | None) -> None:
        for _ in range(WRITE_ATTEMPTS):
            status = self.storage.alter_topic(meta, changes)
            if status is Status.OK:
                return
            if status is Status.NO_TOPIC:
                raise TopicNotFound(meta.name)
            # RETENTION_TOO_SHORT: a delay child came since the check.
            # STALE_CHILDREN: a child came or went (a new mode goes to the
            # children there are now). ATTACHED: the topic became a child.
            meta = self.records.refresh(meta.name, epoch=epoch)
            changes = _check_mode(meta, changes)
            _check_retention(meta, changes)
            if not changes:
                return
        raise TopicKeptChanging(meta.name)

    def delete(self, name: str, *, epoch: str | None = None) -> None:
        """Delete the topic (with ``epoch``, only that incarnation of it); a
        parent's children are detached and keep their data, and a child is
        detached from its parent first."""
        for _ in range(WRITE_ATTEMPTS):
            meta = self.records.refresh(name, epoch=epoch)
            status = self.storage.delete_topic(meta)
            if status is Status.NO_TOPIC:
                raise TopicNotFound(name)
            if status is Status.OK:
                for linked in [meta.parent, *(c.name for c in meta.children)]:
                    self.records.drop(linked)
                self.records.drop(name)
                return
            # STALE_CHILDREN: a child came or went meanwhile.
        raise TopicKeptChanging(name)


def _check_mode(meta: TopicMeta, changes: TopicChanges) -> TopicChanges:
    """``changes`` for ``meta``: an attached child keeps its parent's mode
    (409 for another one; the same one is no change)."""
    mode = changes.compatibility
    if mode is None or not meta.parent:
        return changes
    if mode != meta.compatibility:
        raise ModeManagedByParent(meta.name, meta.parent, meta.compatibility)
    return replace(changes, compatibility=None)


def _check_schema_settings(meta: TopicMeta, changes: TopicChanges) -> None:
    """Refuse schema settings a PATCH without a schema would change: they
    change only with a schema (the same values are no change)."""
    for field in ("schema_type", "encoding", "proto_message"):
        value = getattr(changes, field)
        if value is not None and value != getattr(meta, field):
            raise InvalidArgument(
                f"{field} changes only together with schema: give the schema "
                f"of type {changes.schema_type or meta.schema_type} it applies to"
            )


def _check_retention(meta: TopicMeta, changes: TopicChanges) -> None:
    """A parent's retention stays 0 or above what its delay children need."""
    retention = changes.retention_ms
    if retention and retention < meta.min_retention_ms():
        raise RetentionTooShort(meta.name, retention, meta.min_retention_ms())
