"""The schema service: registration, histories, and validation on produce.

It owns every schema write: version 1 when a topic is created with a schema
(one step with the topic record), each later version, and the settings of a
PATCH that come with one (one step with the version). It reads topic records
through the topic records cache, never from storage directly.

Each change is checked in the topic's compatibility mode
(:mod:`narad.schema.modes`): in one direction or both, against the latest
version or every stored one, or not at all. A dry run (:meth:`SchemaService.
dry_run`) runs the same check, reporting every violation, and stores nothing.

Fan-out children (rulebook, "Fan-out children"): a child's history is its
parent's, version for version, while it is attached, and so is its mode. The
storage writes a parent's new version (and mode) to every child in the same
step, and an attach copies the parent's history into a child that has none,
and its mode into every child; what the storage cannot judge, whether two
histories are the same JSON values, is judged here before an attach
(:meth:`SchemaService.check_attachable`).

Every schema type (:mod:`narad.schematypes`: JSON Schema, Avro, Protobuf,
each from a plugin) goes through the same code: the type parses a document,
says what "no change" means, compiles the payload check of a version and
checks a proposed schema in a mode; the history rules here hold for all. A
topic's history has one type: a PATCH naming another is refused (409), as is
a child of another type under a parent (:meth:`SchemaService.
check_attachable`). The type, the payload encoding and the Protobuf message
are settings of the record, written with the version that first needs them.

Compiled validators are cached per process by (topic, epoch, version): a
produce neither re-reads the schema document nor recompiles it, and a topic
deleted and created again under the same name (new epoch) never reuses the
old one's validators. The cache is bounded by entries and by the validators'
estimated bytes (``[cache] validators`` and ``validator_memory``), and a
topic's validators go when any worker of any node changes the topic
(deletes, recreates or alters it, or adds a schema version: see
:meth:`TopicRecords.attach`). A version the validator cannot use (one it
fails on, stored before registration refused what makes it fail, or one
naming a draft no plugin of the node provides) is cached as such: each
produce gets 409 naming the problem without compiling it again.

Registration, compatibility checks, compiling and costly validations run via
:func:`narad.serve.offload.run` (native threads with big stacks, off the event
loop); validating a small payload against a schema that is not high-cost
stays inline, where it takes microseconds and no thread hand-off. A check
that compares more than :data:`LARGE_CHECK` bytes of documents (a transitive
mode over a long history, say), or schemas with references (recursive ones),
also takes a slot of the node's validation capacity, as a costly validation
does: its cost grows with the history and the recursion, and a dry run is
open to any reader of the topic.
Every check runs within :data:`CHECK_DEADLINE` seconds
(:mod:`narad.schema.deadline`): past it the request gets 503 and nothing is
decided, so no request holds a worker for minutes.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from collections.abc import Iterator
from dataclasses import dataclass
from dataclasses import field
from dataclasses import replace
from typing import Any

from narad import jsontext
from narad import metrics
from narad.broker.records import TopicRecords
from narad.caches import BoundedCache
from narad.errors import CapacityBusy
from narad.errors import ClusterBudgetExceeded
from narad.errors import EncodingFixed
from narad.errors import HistoriesDiffer
from narad.errors import IncompatibleSchema
from narad.errors import InvalidArgument
from narad.errors import InvalidSchema
from narad.errors import ParentHistoryOverBudget
from narad.errors import ParentWithoutSchema
from narad.errors import RetentionTooShort
from narad.errors import SchemaManagedByParent
from narad.errors import SchemaTypesDiffer
from narad.errors import SchemaUnusable
from narad.errors import SchemaVersionConflict
from narad.errors import SchemaVersionNotFound
from narad.errors import SubjectHoldsTopicName
from narad.errors import TooManyVersions
from narad.errors import TopicBudgetExceeded
from narad.errors import TopicExists
from narad.errors import TopicKeptChanging
from narad.errors import TopicNotFound
from narad.plugins import Plugins
from narad.quoting import quote
from narad.schema.capacity import ValidationCapacity
from narad.schema.deadline import run_within
from narad.schema.framing import CONFLUENT
from narad.schema.framing import FramedChecks
from narad.schema.limits import SCHEMA_DEPTH
from narad.schema.modes import Mode
from narad.schema.modes import Report
from narad.schema.references import ReferenceResolver
from narad.schematypes import Compiled
from narad.schematypes import ParsedSchema
from narad.schematypes import Reference
from narad.schematypes import SchemaOptions
from narad.schematypes import SchemaType
from narad.schematypes import UnusableVersion
from narad.serve import offload
from narad.storage import SchemaIdentity
from narad.storage import SchemaLimits
from narad.storage import SchemaSize
from narad.storage import SchemaVersion
from narad.storage import SchemaWriteResult
from narad.storage import Status
from narad.storage import Storage
from narad.storage import TopicChanges
from narad.storage import TopicMeta

_NULL_SCHEMA = "schema: a schema cannot be removed (null); it can only be widened"
MIB = 1024 * 1024
TOPIC_BUDGET = 4 * MIB
CLUSTER_BUDGET = 256 * MIB
MAX_VERSIONS = 1000
LARGE_PAYLOAD = 16 * 1024
LARGE_CHECK = MIB
# Seconds a compatibility check (a PATCH's or a dry run's) may run before it
# gives up with 503: its work is polynomial in the schemas compared, but no
# request holds a worker for minutes.
CHECK_DEADLINE = 10.0
# What a stored schema holds where it refers to a part of itself (JSON
# Schema's references; a string that merely contains one counts too).
_REFERENCES = (b'"$ref"', b'"$dynamicRef"', b'"$recursiveRef"')
CACHED_VALIDATORS = 2048
VALIDATOR_MEMORY = 64 * MIB
CHANGE_ATTEMPTS = 8

ValidatorKey = tuple[str, str, int]  # topic, epoch, schema version

#: What a dry run is checked against: the versions its topic's mode names,
#: the latest one, every stored one, or one version (a number).
Against = str | int | None


@dataclass(frozen=True)
class DryRun:
    """A dry run's answer.

    Attributes:
        mode: The mode the check ran in.
        no_change: The schema equals the current version, or differs from it
            only in annotations: a PATCH would register nothing.
        report: What the check found, and the versions it checked.
    """

    mode: Mode
    no_change: bool
    report: Report


@dataclass(frozen=True)
class History:
    """What a check reads of the history it checks: a topic's, or a registry
    subject's (:mod:`narad.registry`).

    Attributes:
        name: The topic or subject, for error messages.
        schema_type: Its type's name.
        options: Its settings a type reads.
    """

    name: str
    schema_type: str
    options: SchemaOptions


def history_of(meta: TopicMeta) -> History:
    """The history of the topic ``meta``."""
    return History(meta.name, meta.schema_type, options_of(meta))


def fingerprint(
    schema_type: str, parsed: ParsedSchema, references: bytes = b""
) -> SchemaIdentity:
    """The identity a global schema id stands for: the type, and a digest of
    the type's identity of the schema and of its references."""
    digest = hashlib.sha256(schema_type.encode())
    for part in (parsed.identity, references):
        digest.update(len(part).to_bytes(8, "big"))
        digest.update(part)
    return SchemaIdentity(schema_type, digest.hexdigest())


def _topic_of(key: ValidatorKey) -> str:
    return key[0]


def _belongs(key: ValidatorKey, meta: TopicMeta) -> bool:
    # Only the current version is produced to; an older one's validator is
    # compiled again in the rare case a produce still asks for it.
    return key[1:] == (meta.epoch, meta.schema_version)


class SchemaService:
    def __init__(
        self,
        plugins: Plugins,
        storage: Storage,
        records: TopicRecords,
        capacity: ValidationCapacity,
        *,
        topic_budget: int = TOPIC_BUDGET,
        cluster_budget: int = CLUSTER_BUDGET,
        cached_validators: int = CACHED_VALIDATORS,
        validator_memory: int = VALIDATOR_MEMORY,
        check_deadline: float = CHECK_DEADLINE,
    ) -> None:
        self.check_deadline = check_deadline
        self.storage = storage
        self.records = records
        self.capacity = capacity
        self.types = {
            name: schema_type.bind(plugins)
            for name, schema_type in plugins.schema_types().items()
        }
        self.topic_budget = topic_budget
        self.cluster_budget = cluster_budget
        # A str where the version cannot be used: why (see _validator).
        self.validators: BoundedCache[ValidatorKey, Compiled | str] = BoundedCache(
            "validators",
            max_entries=cached_validators,
            max_bytes=validator_memory,
            topic_of=_topic_of,
        )
        records.attach(self.validators, _belongs, kept_on_change=False)
        # Framed topics' checks (Confluent's wire format): narad.schema.framing.
        self.framed = FramedChecks(self, large_payload=LARGE_PAYLOAD)
        # Schema references (the registry's): narad.schema.references.
        self.references = ReferenceResolver(storage, records)

    # -- registration --------------------------------------------------------

    def schema_type(self, name: str) -> SchemaType:
        """The type ``name`` names.

        Raises:
            InvalidArgument: no plugin of this node provides it.
        """
        found = self.types.get(name)
        if found is None:
            known = ", ".join(sorted(self.types))
            raise InvalidArgument(
                f"schema_type must be one of {known}, got {quote(name)}"
            )
        return found

    def register(self, meta: TopicMeta, raw: bytes) -> ParsedSchema:
        """``raw`` parsed as a schema of ``meta``'s type and settings."""
        return self.parse(self.schema_type(meta.schema_type), raw, options_of(meta))

    @staticmethod
    def parse(
        schema_type: SchemaType, raw: bytes, options: SchemaOptions
    ) -> ParsedSchema:
        """``raw`` parsed by ``schema_type`` (off the event loop where the
        type asks for it).

        Raises:
            InvalidSchema: naming the rule broken and where.
        """
        if schema_type.offload_parse:
            return offload.run(schema_type.parse, raw, options)
        return schema_type.parse(raw, options)

    def limits(self) -> SchemaLimits:
        return SchemaLimits(self.topic_budget, self.cluster_budget, MAX_VERSIONS)

    def raise_for_budget(
        self, result: SchemaWriteResult, topic: str, *, adopting: bool = False
    ) -> None:
        """Raise the 409 a budget refusal of a write to ``topic`` means (the
        write names another topic, a child's or a parent's, in
        ``result.topic``); ``adopting``: the write would copy a parent's
        history into a new child."""
        if result.status is Status.TOPIC_BUDGET:
            name = result.topic or topic
            error = ParentHistoryOverBudget if adopting else TopicBudgetExceeded
            raise error(name, result.stored_bytes, self.topic_budget)
        if result.status is Status.CLUSTER_BUDGET:
            raise ClusterBudgetExceeded(result.cluster_bytes, self.cluster_budget)

    # -- writes --------------------------------------------------------------

    def create_topic(self, meta: TopicMeta, raw: bytes) -> TopicMeta:
        """Create the topic ``meta`` with ``raw`` as version 1, in one step.

        Returns:
            The record as written.
        """
        registered = self.register(meta, raw)
        message = registered.message_name or meta.proto_message
        meta = replace(meta, proto_message=message)
        first = SchemaVersion(
            1,
            registered.stored,
            registered.high_cost,
            identity=fingerprint(meta.schema_type, registered),
        )
        result = self.storage.create_topic(meta, first, limits=self.limits())
        if result.status is Status.EXISTS:
            raise TopicExists(meta.name)
        if result.status is Status.SUBJECT_EXISTS:
            raise SubjectHoldsTopicName(meta.name)
        self.raise_for_budget(result, meta.name)
        return replace(
            meta,
            schema_version=result.version,
            schema_high_cost=registered.high_cost,
            schema_bytes=result.stored_bytes,
        )

    def change(
        self,
        meta: TopicMeta,
        raw: bytes,
        base_version: int | None,
        changes: TopicChanges,
        references: bytes = b"",
    ) -> SchemaWriteResult | None:
        """Register ``raw`` as the next version, with ``changes`` in the same
        step (and in every child's history): the write's result (its
        ``version`` and ``schema_id``), or None when it is no change (and
        nothing was written).

        ``changes`` may name the schema type, encoding and Protobuf message
        (None: the topic's); a topic with a history keeps its type and
        encoding (409 for others). ``references``: the schema's references
        (a registration under the registry's ``<t>-value``), stored form."""
        if meta.parent:
            raise SchemaManagedByParent(meta.name, meta.parent)
        if raw == b"null":
            raise InvalidSchema(_NULL_SCHEMA)
        typed = self.settle_type(meta, changes)
        new = self.register_change(meta, typed, changes, raw, references)
        changes = replace(
            changes,
            schema_type=typed.schema_type,
            encoding=typed.encoding,
            proto_message=new.message_name or typed.proto_message,
        )
        identity = fingerprint(typed.schema_type, new, references)
        for _ in range(CHANGE_ATTEMPTS):
            current = meta.schema_version
            if base_version is not None and current != base_version:
                raise SchemaVersionConflict()
            self.settle_type(meta, changes)
            # Checked in the mode the PATCH leaves the topic in.
            mode = Mode(changes.compatibility or meta.compatibility)
            if current and not self._is_change(meta, new, mode, references):
                return None
            result = self.storage.append_schema(
                meta,
                SchemaVersion(
                    current + 1,
                    new.stored,
                    new.high_cost,
                    identity=identity,
                    references=references,
                ),
                expected_current=current,
                limits=self.limits(),
                changes=changes,
            )
            if result.status is Status.OK:
                return result
            if result.status is Status.TOO_MANY_VERSIONS:
                raise TooManyVersions(meta.name, MAX_VERSIONS)
            if result.status is Status.NO_TOPIC:
                raise TopicNotFound(meta.name)
            if result.status is Status.ATTACHED:
                raise SchemaManagedByParent(meta.name, result.topic)
            self.raise_for_budget(result, meta.name)
            # BASE_MISMATCH: another change (of the history or the mode)
            # landed first; check again from there. STALE_CHILDREN: a child
            # came or went: the version goes to the children there are now.
            # RETENTION_TOO_SHORT: a delay child came.
            # Deleted and created again: the change was asked (and allowed)
            # for the topic that is gone (404).
            meta = self.records.refresh(meta.name, epoch=meta.epoch)
            retention = changes.retention_ms
            if retention and retention < meta.min_retention_ms():
                raise RetentionTooShort(meta.name, retention, meta.min_retention_ms())
        raise SchemaVersionConflict()

    def settle_type(self, meta: TopicMeta, changes: TopicChanges) -> TopicMeta:
        """``meta`` with the schema type, encoding and Protobuf message a
        schema change ``changes`` leaves it with.

        Raises:
            SchemaTypesDiffer: the topic has a history of another type (409).
            EncodingFixed: the topic has a history in another encoding (409).
            InvalidArgument: a type no plugin provides, or an encoding the
                type does not take.
        """
        name = changes.schema_type or meta.schema_type
        schema_type = self.schema_type(name)
        same_type = name == meta.schema_type
        if meta.schema_version and not same_type:
            raise SchemaTypesDiffer(meta.name, meta.schema_type, name)
        encoding = changes.encoding or (
            meta.encoding if same_type else schema_type.default_encoding
        )
        check_encoding(schema_type, encoding)
        if meta.schema_version and encoding != meta.encoding:
            raise EncodingFixed(meta.name, meta.encoding, encoding)
        proto_message = changes.proto_message
        if proto_message is None:
            proto_message = meta.proto_message if same_type else ""
        return replace(
            meta, schema_type=name, encoding=encoding, proto_message=proto_message
        )

    def register_change(
        self,
        meta: TopicMeta,
        typed: TopicMeta,
        changes: TopicChanges,
        raw: bytes,
        references: bytes = b"",
    ) -> ParsedSchema:
        """``raw`` parsed as the next version of ``meta``, whose settings
        the change leaves as ``typed``: a Protobuf message the PATCH does
        not name is the topic's, kept. ``references``: the schema's, stored
        form (resolved here)."""
        kept = changes.proto_message is None and bool(typed.proto_message)
        schema_type = self.schema_type(typed.schema_type)
        resolved = self.resolve_references(schema_type, references)
        options = SchemaOptions(
            typed.encoding, typed.proto_message, kept, references=resolved
        )
        return self.parse(schema_type, raw, options)

    def resolve_references(
        self, schema_type: SchemaType, references: bytes
    ) -> tuple[Reference, ...]:
        """A registration's references (stored form), resolved for a schema
        of ``schema_type``.

        Raises:
            InvalidSchema: the type takes no references, or they do not
                resolve (:mod:`narad.schema.references`).
        """
        if not references:
            return ()
        if not schema_type.takes_references:
            raise InvalidSchema(
                f"schema references are not supported for schema type "
                f"{schema_type.name}"
            )
        return self.references.resolve(references, schema_type.name)

    def _is_change(
        self, meta: TopicMeta, new: ParsedSchema, mode: Mode, references: bytes
    ) -> bool:
        """False when ``new`` registers nothing over the current version;
        True when ``mode`` lets it be the next one; else the refusal."""
        latest, against = self._versions(meta, mode.transitive)
        no_change, report = self.check(
            history_of(meta), latest, against, new, mode, first=True, shortcut=True
        )
        if no_change:
            # The same schema with other references (naming versions of the
            # same content) is another global id, accepting what it accepts.
            return latest.references != references
        if report.findings:
            raise IncompatibleSchema(report.findings)
        return True

    def _versions(
        self, meta: TopicMeta, every: bool
    ) -> tuple[SchemaVersion, list[SchemaVersion]]:
        """The current version, and the versions to check against: the
        current one, or ``every`` stored one up to it, latest first."""
        current = meta.schema_version
        if not every:
            latest = self.storage.get_schema(meta.name, current)
            if latest is None:
                self._check_still(meta)
                raise SchemaVersionNotFound(meta.name, current)
            return latest, [latest]
        history = self.storage.get_schemas(meta.name)
        against = [v for v in reversed(history) if v.version <= current]
        if not against or against[0].version != current:
            self._check_still(meta)
            raise SchemaVersionNotFound(meta.name, current)
        return against[0], against

    def _check_still(self, meta: TopicMeta) -> None:
        """Raise ``TopicNotFound`` if ``meta``'s topic is gone (deleted, maybe
        created again) since its record was read: its history went with it,
        so a version the record names is missing, and that is no fault of
        the topic there is now."""
        self.records.refresh(meta.name, epoch=meta.epoch)

    def check(
        self,
        history: History,
        latest: SchemaVersion,
        against: list[SchemaVersion],
        new: ParsedSchema,
        mode: Mode,
        *,
        first: bool,
        shortcut: bool,
    ) -> tuple[bool, Report]:
        """:meth:`_judge` off the event loop within :attr:`check_deadline`
        seconds (past it, 503 and nothing decided), under a capacity slot
        when it compares more than :data:`LARGE_CHECK` bytes or schemas with
        references: a recursive pair's work grows faster than its bytes (a
        few KiB can take seconds), and a dry run is open to any reader."""
        size = len(new.stored)
        weight = len(mode.directions) * sum(len(v.document) + size for v in against)
        # References are read here, on the event loop: the check's thread
        # reads no storage.
        loaded = self._with_references(history, [latest, *against])
        latest, against = loaded[0], loaded[1:]
        args = (self.check_deadline, self._judge, history, latest, against, new, mode)
        referring = any(v.references for v in against) or any(
            mark in document
            for document in (new.stored, *(v.document for v in against))
            for mark in _REFERENCES
        )
        if weight <= LARGE_CHECK and not referring:
            return offload.run(run_within, *args, first=first, shortcut=shortcut)
        with self.capacity.slot():
            return offload.run(run_within, *args, first=first, shortcut=shortcut)

    def _judge(
        self,
        history: History,
        latest: SchemaVersion,
        against: list[SchemaVersion],
        new: ParsedSchema,
        mode: Mode,
        *,
        first: bool,
        shortcut: bool,
    ) -> tuple[bool, Report]:
        """Whether ``new`` registers nothing over ``latest``, and what
        ``mode``'s check against ``against`` (of ``history``) finds
        (nothing checked when ``shortcut`` and it registers nothing, as a
        PATCH does)."""
        schema_type = self.schema_type(history.schema_type)
        parsed = self.load(history, latest)
        no_change = schema_type.no_change(new, parsed)
        if no_change and shortcut:
            return True, Report()
        # A schema that registers nothing accepts exactly what ``latest`` does
        # and leaves it current: judge ``latest``, whose walk against itself
        # finds nothing, where the proposed one's annotations would differ in
        # a part the walk wants unchanged byte for byte (unevaluated*).
        subject = parsed if no_change else new

        def loaded() -> Iterator[tuple[int, ParsedSchema]]:
            for stored in against:
                if stored.version == latest.version:
                    yield stored.version, parsed
                else:
                    yield stored.version, self.load(history, stored)

        # A refusal names one violation; a full report is a dry run's.
        report = schema_type.check(
            subject, loaded(), mode, history.options, first=first
        )
        return no_change, report

    def dry_run(
        self, meta: TopicMeta, raw: bytes, against: Against, mode: Mode | None
    ) -> DryRun:
        """What a PATCH of ``meta``'s schema to ``raw`` would meet, with every
        violation reported, storing nothing.

        Args:
            meta: The topic's record.
            raw: The proposed schema document.
            against: None for the versions the mode names, and as a PATCH
                does, nothing checked when the schema registers nothing;
                ``"latest"``, ``"all"`` or a version number to check those
                versions whatever the schema.
            mode: The mode to check in; None for the topic's.

        Raises:
            SchemaManagedByParent: ``meta`` is an attached child.
            InvalidSchema: the registration rules refuse ``raw``.
            SchemaVersionNotFound: ``against`` names a version not stored.
        """
        if meta.parent:
            raise SchemaManagedByParent(meta.name, meta.parent)
        if raw == b"null":
            raise InvalidSchema(_NULL_SCHEMA)
        new = self.register(meta, raw)
        mode = mode or Mode(meta.compatibility)
        current = meta.schema_version
        if isinstance(against, int) and not 0 < against <= current:
            raise SchemaVersionNotFound(meta.name, against)
        if not current:  # a first schema: nothing to be compatible with
            return DryRun(mode, False, Report())
        every = against == "all" or (against is None and mode.transitive)
        latest, versions = self._versions(meta, every)
        if isinstance(against, int) and against != current:
            versions = [self.stored(meta.name, against)]
        no_change, report = self.check(
            history_of(meta),
            latest,
            versions,
            new,
            mode,
            first=False,
            shortcut=against is None,
        )
        return DryRun(mode, no_change, report)

    # -- fan-out -------------------------------------------------------------

    def check_attachable(self, parent: TopicMeta, child: TopicMeta) -> None:
        """Refuse, by their histories, to put ``child`` under ``parent``.

        A child without a history adopts the parent's (or neither has one);
        one with a history needs the parent's to be the same JSON values,
        version for version (key order, whitespace and number spelling do not
        matter), up to the versions the two records name: the storage refuses
        the attach if either moved on since.
        """
        if not child.schema_version:
            return
        if not parent.schema_version:
            raise ParentWithoutSchema(child.name, parent.name)
        if child.schema_type != parent.schema_type:
            raise SchemaTypesDiffer(
                child.name, child.schema_type, parent.schema_type, parent=parent.name
            )
        if child.encoding != parent.encoding:
            raise EncodingFixed(
                child.name, child.encoding, parent.encoding, parent=parent.name
            )
        mine = self.storage.get_schemas(child.name)[: child.schema_version]
        theirs = self.storage.get_schemas(parent.name)[: parent.schema_version]
        version = offload.run(_first_difference, mine, theirs)
        if version is not None:
            raise HistoriesDiffer(child.name, parent.name, version)

    def check_child_schema(self, name: str, parent: TopicMeta, raw: bytes) -> None:
        """Refuse a topic created under ``parent`` with the schema ``raw``
        unless its one-version history would be the parent's (parsed as a
        schema of the parent's type)."""
        new = self.register(parent, raw)
        if not parent.schema_version:
            raise ParentWithoutSchema(name, parent.name)
        first = SchemaVersion(1, new.stored, new.high_cost)
        theirs = self.storage.get_schemas(parent.name)[: parent.schema_version]
        version = offload.run(_first_difference, [first], theirs)
        if version is not None:
            raise HistoriesDiffer(name, parent.name, version)

    # -- reading histories ---------------------------------------------------

    def latest(self, meta: TopicMeta) -> SchemaVersion | None:
        """The current version of the topic ``meta`` was read from, or of the
        topic of that name now if that one went meanwhile; None: no schema.

        Raises:
            TopicNotFound: the topic went, and no other took its name.
            TopicKeptChanging: it went and came back time after time.
        """
        for _ in range(CHANGE_ATTEMPTS):
            if not meta.schema_version:
                return None
            found = self.storage.get_schema(meta.name, meta.schema_version)
            if found is not None:
                return found
            # The history went with the topic (deleted, maybe created again)
            # after its record was read: answer for the topic as it is now.
            fresh = self.records.refresh(meta.name)
            if fresh.epoch == meta.epoch:
                raise SchemaVersionNotFound(meta.name, meta.schema_version)
            meta = fresh
        raise TopicKeptChanging(meta.name)

    def with_ids(self, meta: TopicMeta) -> list[SchemaVersion]:
        """Every version of ``meta``'s history, each with its global schema
        id: versions stored before ids get theirs first (once, by whichever
        node reads them first; the same schema gets the same id anyway).

        Raises:
            TopicNotFound: the topic went meanwhile.
        """
        history = self.storage.get_schemas(meta.name)
        missing = [v for v in history if not v.schema_id]
        if not missing:
            return history
        view = history_of(meta)
        identified = [
            replace(v, identity=fingerprint(meta.schema_type, self.load(view, v)))
            for v in missing
        ]
        if self.storage.assign_schema_ids(meta, identified) is Status.NO_TOPIC:
            raise TopicNotFound(meta.name)
        return self.storage.get_schemas(meta.name)

    def stored(self, name: str, version: int) -> SchemaVersion:
        found = self.storage.get_schema(name, version)
        if found is None:
            raise SchemaVersionNotFound(name, version)
        return found

    def sizes(self, meta: TopicMeta) -> tuple[TopicMeta, list[SchemaSize]]:
        """Every version of the topic's history with its stored bytes, and
        the record they agree with: ``meta`` unless a new version or another
        topic of that name came while the history was read.

        Raises:
            TopicNotFound: the topic went meanwhile.
            TopicKeptChanging: it changed on every read.
        """
        for _ in range(CHANGE_ATTEMPTS):
            sizes = self.storage.schema_sizes(meta.name)
            after = self.records.refresh(meta.name)
            # Versions are only ever added to one topic's history: one
            # unchanged across the read holds exactly those it reports.
            if (after.epoch, after.schema_version) == (meta.epoch, meta.schema_version):
                return after, sizes
            meta = after
        raise TopicKeptChanging(meta.name)

    def load(self, history: History, stored: SchemaVersion) -> ParsedSchema:
        """A stored version of ``history``, read back by its type (its
        references resolved now, unless :meth:`_with_references` did).
        Reads storage only for a version with references not resolved yet:
        call it on the event loop then.

        Raises:
            SchemaUnusable: this node cannot use it.
        """
        try:
            if isinstance(stored, _Resolved):
                options = stored.options
            else:
                options = self.stored_options(
                    history.schema_type, history.options, stored.references
                )
            return self.schema_type(history.schema_type).load(stored.document, options)
        except UnusableVersion as exc:
            raise SchemaUnusable(history.name, stored.version, exc.reason) from None

    def _with_references(
        self, history: History, versions: list[SchemaVersion]
    ) -> list[SchemaVersion]:
        """``versions``, those with references resolved (once per version)
        for :meth:`load` to read off the event loop.

        Raises:
            SchemaUnusable: a version's references no longer resolve.
        """
        if not any(v.references for v in versions):
            return versions
        done: dict[int, _Resolved] = {}
        out: list[SchemaVersion] = []
        for stored in versions:
            if not stored.references or isinstance(stored, _Resolved):
                out.append(stored)
                continue
            if stored.version not in done:
                try:
                    options = self.stored_options(
                        history.schema_type, history.options, stored.references
                    )
                except UnusableVersion as exc:
                    raise SchemaUnusable(
                        history.name, stored.version, exc.reason
                    ) from None
                done[stored.version] = _Resolved(
                    stored.version,
                    stored.document,
                    stored.high_cost,
                    schema_id=stored.schema_id,
                    references=stored.references,
                    deleted=stored.deleted,
                    options=options,
                )
            out.append(done[stored.version])
        return out

    def stored_options(
        self, schema_type: str, options: SchemaOptions, references: bytes
    ) -> SchemaOptions:
        """``options`` for loading a stored version whose references are
        ``references`` (``options`` itself when it has none).

        Raises:
            UnusableVersion: they no longer resolve (a referenced topic
                deleted since, say).
        """
        if not references:
            # What a caller's options held for another schema is not this
            # version's.
            return replace(options, references=()) if options.references else options
        try:
            resolved = self.references.resolve(references, schema_type)
        except InvalidSchema as exc:
            raise UnusableVersion(
                f"its references do not resolve: {exc.detail}"
            ) from None
        return replace(options, references=resolved)

    # -- validation on produce -----------------------------------------------

    def payload_check(self, meta: TopicMeta) -> Callable[[bytes], None]:
        """The check for a produce to ``meta`` at its current schema version,
        counting each outcome (``narad_schema_validations``); on a framed
        topic, under the version each message's schema id names."""
        if meta.framing == CONFLUENT:
            return self.framed.check(meta)
        compiled = self._validator(meta)
        high_cost = meta.schema_high_cost
        key = (meta.name, meta.epoch, meta.schema_version)

        def check(payload: bytes) -> None:
            try:
                if high_cost or len(payload) > LARGE_PAYLOAD:
                    self._bounded(compiled, payload)
                else:
                    # Inline: a small payload validates in less CPU than the
                    # hand-off to a pool thread and back costs (bench/cost.py);
                    # with Python 3.11's inlined calls even 256 levels of a
                    # 63-step schema need well under a 64 KiB C stack, so no
                    # big stack either.
                    compiled.validate(payload)
            except InvalidArgument:
                _count("invalid")
                raise
            except CapacityBusy:
                _count("busy")
                raise
            except UnusableVersion as exc:
                self.validators.put(key, exc.reason, len(exc.reason))
                raise SchemaUnusable(
                    meta.name, meta.schema_version, exc.reason
                ) from None
            _count("valid")

        return check

    def _bounded(self, compiled: Compiled, payload: bytes) -> None:
        with self.capacity.slot():
            offload.run(compiled.validate, payload)

    def _validator(self, meta: TopicMeta) -> Compiled:
        """The compiled current version of ``meta``'s schema.

        Raises:
            SchemaUnusable: the version cannot be used; that outcome is
                cached as a validator is, so each produce does not try again.
        """
        key = (meta.name, meta.epoch, meta.schema_version)
        cached = self.validators.get(key)
        if cached is None:
            stored = self.stored(meta.name, meta.schema_version)
            uri = f"narad://schema/{meta.name}/{meta.schema_version}"
            try:
                # References are read here, on the event loop.
                options = self.stored_options(
                    meta.schema_type, options_of(meta), stored.references
                )
                cached = offload.run(self._compile, meta, stored, uri, options)
                size = cached.estimated_bytes
            except UnusableVersion as exc:
                cached, size = exc.reason, len(exc.reason)
            self.validators.put(key, cached, size)
        if isinstance(cached, str):
            raise SchemaUnusable(meta.name, meta.schema_version, cached)
        return cached

    def _compile(
        self,
        meta: TopicMeta,
        stored: SchemaVersion,
        uri: str,
        options: SchemaOptions,
    ) -> Compiled:
        schema_type = self.types.get(meta.schema_type)
        if schema_type is None:
            raise UnusableVersion(
                f"its schema type {meta.schema_type} is provided by no plugin of "
                "this node: load that type's plugin (see plugins.disabled and "
                "`narad plugins`)"
            )
        loaded = schema_type.load(stored.document, options)
        return schema_type.compile(loaded, options, uri)


@dataclass(frozen=True)
class _Resolved(SchemaVersion):
    """A stored version with its references resolved (:meth:`SchemaService.
    _with_references`): the options its type loads it with."""

    options: SchemaOptions = field(default_factory=lambda: SchemaOptions(""))


def options_of(meta: TopicMeta) -> SchemaOptions:
    """The settings of ``meta`` a schema type reads."""
    return SchemaOptions(meta.encoding, meta.proto_message)


def check_encoding(schema_type: SchemaType, encoding: str) -> None:
    """Refuse an encoding ``schema_type`` does not take (400)."""
    if encoding not in schema_type.encodings:
        raise InvalidArgument(
            f"encoding must be one of {', '.join(schema_type.encodings)} for "
            f"schema_type {schema_type.name}, got {quote(encoding)}"
        )


def _count(outcome: str) -> None:
    metrics.TALLY.inc(metrics.SCHEMA_VALIDATIONS, (outcome,))


def _first_difference(
    mine: list[SchemaVersion], theirs: list[SchemaVersion]
) -> int | None:
    """The first version where two histories differ as JSON values, or that
    only one of them holds; None when they are the same."""
    for a, b in zip(mine, theirs, strict=False):
        if a.document != b.document and not jsontext.json_equal(
            _parse(a.document), _parse(b.document)
        ):
            return a.version
    if len(mine) != len(theirs):
        return min(len(mine), len(theirs)) + 1
    return None


def _parse(document: bytes) -> Any:
    # A version stored before repeated keys were refused may hold one.
    return jsontext.loads(document, max_depth=SCHEMA_DEPTH, allow_duplicate_keys=True)
