"""Fan-out children: attach, detach, create as a child, list with lag.

A child gets a copy of every message its parent commits while attached, made
by the parent's own append script (:meth:`narad.storage.Storage.append`): a
202 from the parent means every child already holds the message, so an
immediate child never lags. A delay child holds each copy from the same
moment, stamped with when it falls due; its lag is the copies not due yet.

A child follows its parent's compatibility mode while attached: a create
under a parent, or an attach, gives the child the parent's mode (a create
that names another is refused), the storage copies a parent's new mode into
its children, and a detached child keeps the mode it had.

Each write is checked twice: here, against the records as read, for an error
that names what is wrong; then by the storage, against what is stored, which
refuses if anything moved on since. The service then reads again and decides
afresh, so a refusal always names the state that caused it.

Every public method acts on one parent (plus, for an attach or a create, one
child): whoever may manage that parent may call it, and the HTTP resource
checks that once per request before calling. When owning a topic is what
allowed it, the resource names the epoch owned, and the service acts on
that incarnation only (another of the same name is not found: 404).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from dataclasses import replace

from narad.broker import now_ms
from narad.broker.records import TopicRecords
from narad.errors import AlreadyAChild
from narad.errors import ChildIsAParent
from narad.errors import ModeManagedByParent
from narad.errors import NotAChild
from narad.errors import ParentIsAChild
from narad.errors import RetentionTooShort
from narad.errors import SchemaSettingManagedByParent
from narad.errors import SelfAttach
from narad.errors import SubjectHoldsTopicName
from narad.errors import TooManyChildren
from narad.errors import TopicExists
from narad.errors import TopicKeptChanging
from narad.schema.modes import Mode
from narad.schema.service import SchemaService
from narad.storage import RETENTION_MARGIN_MS
from narad.storage import Child
from narad.storage import SchemaWriteResult
from narad.storage import Status
from narad.storage import Storage
from narad.storage import TopicMeta

MAX_CHILDREN = 108
MAX_DELAY_MS = 365 * 24 * 3_600_000  # one year
LINK_ATTEMPTS = 8


@dataclass(frozen=True)
class ChildLag:
    """A child and how far it trails its parent.

    Attributes:
        child: The child as the parent lists it.
        lag_messages: Copies the child holds that are not consumable yet
            (not due, in a delay child); 0 for an immediate child.
        lag_complete: Whether ``lag_messages`` counts every such copy; the
            copies are made in the parent's append, so the count is exact.
    """

    child: Child
    lag_messages: int
    lag_complete: bool = True


class ChildrenService:
    def __init__(
        self, storage: Storage, records: TopicRecords, schemas: SchemaService
    ) -> None:
        self.storage = storage
        self.records = records
        self.schemas = schemas

    def attach(
        self,
        parent_name: str,
        child_name: str,
        delay_ms: int,
        *,
        parent_epoch: str | None = None,
        child_epoch: str | None = None,
    ) -> TopicMeta:
        """Attach ``child_name`` to ``parent_name``; the parent's record after.

        Attaching a child again to the parent it has, with the same delay,
        changes nothing (a retry after a lost answer). ``parent_epoch`` and
        ``child_epoch`` (owned) pin those incarnations.
        """
        if parent_name == child_name:
            raise SelfAttach(parent_name)
        for _ in range(LINK_ATTEMPTS):
            parent = self.records.refresh(parent_name, epoch=parent_epoch)
            child = self.records.refresh(child_name, epoch=child_epoch)
            if child.parent == parent.name and child.fanout_delay_ms == delay_ms:
                return parent
            _check_parent(parent)
            if child.children:
                raise ChildIsAParent(child.name)
            if child.parent:
                raise AlreadyAChild(child.name, child.parent)
            _check_room(parent, delay_ms)
            self.schemas.check_attachable(parent, child)
            result = self.storage.attach_child(
                parent,
                child,
                delay_ms=delay_ms,
                limits=self.schemas.limits(),
                max_children=MAX_CHILDREN,
            )
            if result.status is Status.OK:
                self.records.drop(child_name)
                return self.records.refresh(parent_name)
            self._raise_for_budget(result, child)
        raise TopicKeptChanging(parent_name)

    def create(
        self,
        meta: TopicMeta,
        parent_name: str,
        delay_ms: int,
        schema_raw: bytes | None,
        mode: Mode | None = None,
        *,
        parent_epoch: str | None = None,
        schema_settings: Mapping[str, str] | None = None,
    ) -> TopicMeta:
        """Create ``meta`` attached to ``parent_name``: all or nothing.

        ``meta.partitions`` 0 takes the parent's count. With ``schema_raw``
        the new topic's history (that one version) must be the parent's, and
        with ``mode`` its compatibility mode must be the parent's; it takes
        the parent's mode either way; so with ``schema_settings`` (schema
        type, encoding, Protobuf message), each must be the parent's.
        ``parent_epoch`` (owned) pins the parent's incarnation.
        """
        if parent_name == meta.name:
            raise SelfAttach(meta.name)
        for _ in range(LINK_ATTEMPTS):
            parent = self.records.refresh(parent_name, epoch=parent_epoch)
            _check_parent(parent)
            _check_room(parent, delay_ms)
            if mode is not None and mode != parent.compatibility:
                raise ModeManagedByParent(
                    meta.name, parent.name, parent.compatibility, creating=True
                )
            for field, value in (schema_settings or {}).items():
                if value != getattr(parent, field):
                    raise SchemaSettingManagedByParent(
                        meta.name, parent.name, field, getattr(parent, field)
                    )
            if schema_raw is not None:
                self.schemas.check_child_schema(meta.name, parent, schema_raw)
            child = replace(meta, partitions=meta.partitions or parent.partitions)
            heard = self.records.heard
            result = self.storage.create_child(
                child,
                parent,
                delay_ms=delay_ms,
                limits=self.schemas.limits(),
                max_children=MAX_CHILDREN,
            )
            if result.status is Status.EXISTS:
                raise TopicExists(meta.name)
            if result.status is Status.SUBJECT_EXISTS:
                raise SubjectHoldsTopicName(meta.name)
            if result.status is Status.OK:
                self.records.drop(parent_name)
                # STALE_SCHEMA otherwise: the parent's mode is as read.
                created = replace(
                    child,
                    schema_version=result.version,
                    schema_high_cost=parent.schema_high_cost,
                    schema_bytes=result.stored_bytes,
                    parent=parent.name,
                    fanout_delay_ms=delay_ms,
                    compatibility=parent.compatibility,
                    schema_type=parent.schema_type,
                    encoding=parent.encoding,
                    proto_message=parent.proto_message,
                )
                self.records.put(created, heard)  # the script wrote exactly this
                return created
            self._raise_for_budget(result, child)
        raise TopicKeptChanging(parent_name)

    def _raise_for_budget(self, result: SchemaWriteResult, child: TopicMeta) -> None:
        # Only a child without a history adopts one, so a budget refusal of
        # an attach or a create is about the copy it would adopt.
        self.schemas.raise_for_budget(result, child.name, adopting=True)

    def detach(
        self, parent_name: str, child_name: str, *, parent_epoch: str | None = None
    ) -> None:
        """Detach ``child_name`` from ``parent_name`` (with ``parent_epoch``,
        owned: only from that incarnation of it)."""
        for _ in range(LINK_ATTEMPTS):
            parent = self.records.refresh(parent_name, epoch=parent_epoch)
            status = self.storage.detach_child(parent, child_name)
            if status is Status.NOT_CHILD:
                raise NotAChild(parent_name, child_name)
            if status is Status.OK:
                self.records.drop(parent_name)
                self.records.drop(child_name)
                return
            # NO_TOPIC: deleted (the refresh says so) or created again.
        raise TopicKeptChanging(parent_name)

    def children(self, parent_name: str) -> tuple[TopicMeta, list[ChildLag]]:
        """The parent's record and each child with its lag."""
        parent = self.records.refresh(parent_name)
        delayed = [c for c in parent.children if c.delay_ms]
        metas = self.storage.get_topics([c.name for c in delayed])
        metas = [meta for meta in metas if meta is not None]  # deleted meanwhile
        counts = self.storage.count_not_due(metas, now_ms=now_ms())
        lag = {meta.name: count for meta, count in zip(metas, counts, strict=True)}
        return parent, [ChildLag(c, lag.get(c.name, 0)) for c in parent.children]


def _check_parent(parent: TopicMeta) -> None:
    if parent.parent:
        raise ParentIsAChild(parent.name, parent.parent)


def _check_room(parent: TopicMeta, delay_ms: int) -> None:
    if len(parent.children) >= MAX_CHILDREN:
        raise TooManyChildren(parent.name, MAX_CHILDREN)
    needed = delay_ms + RETENTION_MARGIN_MS
    if parent.retention_ms and parent.retention_ms < needed:
        raise RetentionTooShort(parent.name, parent.retention_ms, needed)
