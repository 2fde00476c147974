"""The storage contract: what the broker asks of a backend, and what it gets back.

A backend plugin (hook ``narad_storage_backends``) returns a factory that
builds an object with the methods of :class:`Storage`. This module is public
and covered by the compatibility promise (docs/plugins.md): its names and the
meaning of every method stay as documented here within a major version.
:mod:`narad.testing.storage_contract` is the executable form of this page;
a backend is conforming when it passes that suite.

Rules every backend follows:

- **One step per write.** Every method that changes state applies all of its
  changes or none, as one step no other call can observe half-done (one Lua
  script on Redis, one transaction on a SQL database). Reads need no
  atomicity unless their docstring says so.
- **"Now" is an argument.** Time-dependent methods take ``now_ms`` from the
  caller (wall-clock milliseconds of the node that serves the request) and
  never read a clock of their own, so every replica of a replicated backend
  computes the same result.
- **Epochs fence recreated topics.** A topic's ``epoch`` is a token minted
  when it is created. A write naming a topic also passes the epoch the
  caller knows; when the topic was deleted, or deleted and created again
  under the same name, the epochs differ and the write answers
  :attr:`Status.NO_TOPIC` without changing anything.
- **Statuses, not exceptions.** An expected refusal (a stale epoch, a full
  budget, a lapsed lease) is a :class:`Status` in the result. Exceptions are
  for the backend itself: raise :class:`narad.errors.StorageFull` when the
  server refused a write for lack of memory having stored nothing (the node
  answers 507), :class:`narad.errors.StorageError` when it cannot answer
  once retrying (if the backend retries) gave up (503), and its subclass
  :class:`narad.errors.StorageUncertain` when the link failed after a write
  was sent, so that it may have been applied (503 saying so). A backend runs
  such a write again only where a second run is harmless.
- **Nothing expires by itself.** Leases and retention are times compared
  with ``now_ms``; a backend must not rely on keys or rows expiring.
- **A message is consumable from its timestamp on.** Reserve and read pass
  over a message whose timestamp is after ``now_ms``: a copy in a delay child
  carries the moment it falls due, and timestamps never decrease within a
  partition, so the first such message holds back the ones after it.

Fan-out: a topic (the parent) may have up to ``max_children`` children, each
listed in its record as a :class:`Child`. Every append to the parent copies
each entry to every child in the same step, so a write that changes the
children (attach, detach, delete) and an append never interleave: a message
is in a child exactly when the parent accepted it while the child was
attached. A write that acts on a topic's children is given them as the
caller read them (``meta.children``) and answers :attr:`Status.STALE_CHILDREN`
without changing anything when they moved on; the caller reads the record
again and retries. A child's schema history is its parent's, version for
version, for as long as it is attached (see :meth:`Storage.attach_child`).
A backend that spreads topics over shards must keep a parent and its
children where one step can write them all (the Redis backend's notes say
what that means for a sharded Redis Cluster).
"""

from __future__ import annotations

from collections.abc import Collection
from collections.abc import Iterator
from collections.abc import Sequence
from dataclasses import dataclass
from dataclasses import field
from dataclasses import fields
from enum import Enum
from typing import NamedTuple
from typing import Protocol

__all__ = (
    "DEFAULT_COMPATIBILITY",
    "DEFAULT_ENCODING",
    "DEFAULT_FRAMING",
    "DEFAULT_IDEMPOTENCY",
    "DEFAULT_SCHEMA_TYPE",
    "FAMILY_FIELDS",
    "RETENTION_MARGIN_MS",
    "AppendResult",
    "BatchReserveResult",
    "Capabilities",
    "Child",
    "Entry",
    "Event",
    "Grant",
    "IdempotencyKey",
    "IdempotencyLimits",
    "Lease",
    "Message",
    "Notification",
    "Page",
    "PartitionStats",
    "PayloadKind",
    "ReserveResult",
    "SchemaIdentity",
    "SchemaLimits",
    "SchemaSize",
    "SchemaVersion",
    "SchemaWriteResult",
    "ServerStatus",
    "Settle",
    "Status",
    "Storage",
    "StoredSchema",
    "Subject",
    "TopicChanges",
    "TopicMeta",
    "TopicStats",
    "UserRecord",
)


#: A parent keeps its messages at least this much longer than the delay of
#: any of its children (``retention_ms`` 0, forever, always does).
RETENTION_MARGIN_MS = 3_600_000

#: The compatibility mode of a record that names none (one stored before
#: modes existed): the rulebook's check.
DEFAULT_COMPATIBILITY = "BACKWARD"

#: The schema type and payload encoding of a record that names none (one
#: stored before schema types existed): JSON Schema over JSON texts.
DEFAULT_SCHEMA_TYPE = "JSON"
DEFAULT_ENCODING = "json"
#: The framing of a record that names none (one stored before framing).
DEFAULT_FRAMING = "none"

#: The record fields a child copies from its parent while attached (the
#: writes that link a child, or change a parent's, copy them).
FAMILY_FIELDS = ("compatibility", "schema_type", "encoding", "proto_message")


# -- values -------------------------------------------------------------------


@dataclass(frozen=True)
class Child:
    """A child as its parent's record lists it.

    Attributes:
        name: The child's name.
        epoch: The child's epoch: a child deleted and created again is no
            longer attached.
        partitions: The child's partition count (fixed at create), which
            routes copies without reading the child's record.
        delay_ms: 0 for an immediate child; else how long after the parent's
            commit a copy becomes consumable in the child.
    """

    name: str
    epoch: str
    partitions: int
    delay_ms: int = 0


@dataclass(frozen=True)
class TopicMeta:
    """A topic's record, as stored.

    Attributes:
        name: The topic's name (1 to 249 of ``A-Za-z0-9._-``).
        epoch: Token minted at create; fences writes meant for an earlier
            topic of the same name.
        partitions: Number of partitions, fixed at create (1 to 108).
        retention_ms: How long a message is kept after its timestamp; 0 keeps
            messages forever.
        visibility_timeout_ms: Length of a lease, from reserve or extend.
        max_in_flight_per_partition: Most leased, unacked messages a
            partition may have at once.
        max_acked_ahead_per_partition: Most messages acked out of order above
            a partition's lowest unacked offset.
        created_ms: When the topic was created (the caller's "now").
        schema_version: Current schema version; 0 when the topic has none.
        schema_high_cost: Whether the current version was judged costly to
            validate (the schema service then bounds its validations).
        schema_bytes: Bytes of every stored version of the topic's history.
        parent: The parent this topic is attached to; empty when none.
        fanout_delay_ms: A delay child's delay (fixed while attached); 0 for
            an immediate child and for a topic with no parent.
        children: The topics attached to this one, in the order attached.
        compatibility: The compatibility mode schema changes are checked in
            (a :class:`narad.schematypes.Mode` name; the backend stores it
            as given). A child's is its parent's while it is attached: the
            writes that link a child, or change a parent's mode, copy it.
        owner: The user who created the topic (empty when security was off).
        schema_type: The type of the topic's schema history (a
            :mod:`narad.schematypes` type name: ``JSON``, ``AVRO``,
            ``PROTOBUF``); set at create or with the first version, fixed
            once the topic has a history. Stored as given.
        encoding: How produced payloads are encoded for the type (``json``
            or ``binary``); fixed as the type is.
        proto_message: The full name of the message a ``PROTOBUF`` topic's
            current version validates against; ``""`` otherwise.
            ``schema_type``, ``encoding`` and ``proto_message`` are, like
            ``compatibility``, a child's parent's while it is attached.
        framing: How produced messages are framed: ``"none"``, or
            ``"confluent"`` (magic byte 0, the 4-byte big-endian global
            schema id of a version of the topic's history, then the
            payload). Checked on produce to the topic itself only (a child's
            copies are the parent's accepted messages); not copied to
            children.
    """

    name: str
    epoch: str
    partitions: int
    retention_ms: int
    visibility_timeout_ms: int
    max_in_flight_per_partition: int
    max_acked_ahead_per_partition: int
    created_ms: int
    schema_version: int = 0
    schema_high_cost: bool = False
    schema_bytes: int = 0
    parent: str = ""
    fanout_delay_ms: int = 0
    children: tuple[Child, ...] = ()
    compatibility: str = DEFAULT_COMPATIBILITY
    owner: str = ""
    schema_type: str = DEFAULT_SCHEMA_TYPE
    encoding: str = DEFAULT_ENCODING
    proto_message: str = ""
    framing: str = DEFAULT_FRAMING

    def min_retention_ms(self) -> int:
        """The lowest non-zero ``retention_ms`` this topic's children allow
        it (0 when it has none): its longest delay plus the margin."""
        if not self.children:
            return 0
        return max(c.delay_ms for c in self.children) + RETENTION_MARGIN_MS


@dataclass(frozen=True)
class Grant:
    """A permission: an action on the topics whose names match a pattern.

    Attributes:
        action: ``produce``, ``consume``, ``create`` or ``admin``.
        patterns: Exact topic names, or prefixes followed by ``*``
            (``invoices.*``; ``*`` alone matches every name).
    """

    action: str
    patterns: tuple[str, ...]


@dataclass(frozen=True)
class UserRecord:
    """A user, as stored. The backend stores it and never interprets it.

    Attributes:
        name: The user name (1 to 64 of ``A-Za-z0-9._@-``).
        password_hash: The password's hash in its self-describing text form
            (algorithm, parameters, salt, digest).
        grants: What the user may do.
        admin: Whether the user holds ``admin`` on every topic (pattern
            ``*``); the writes keep at least one such user.
        created_ms: When the user was created (the caller's "now").
        revision: 1 at create, raised by every write to the user; writes
            pass the revision they read, so a change made in between refuses
            them instead of being overwritten.
    """

    name: str
    password_hash: str
    grants: tuple[Grant, ...]
    admin: bool
    created_ms: int
    revision: int = 0


@dataclass(frozen=True)
class TopicChanges:
    """Settings a PATCH changes; ``None`` leaves a setting as it is.

    ``schema_type``, ``encoding`` and ``proto_message`` change only with a
    schema version (:meth:`Storage.append_schema`), never alone.
    """

    retention_ms: int | None = None
    visibility_timeout_ms: int | None = None
    max_in_flight_per_partition: int | None = None
    max_acked_ahead_per_partition: int | None = None
    compatibility: str | None = None
    schema_type: str | None = None
    encoding: str | None = None
    proto_message: str | None = None
    framing: str | None = None

    def items(self) -> list[tuple[str, int | str]]:
        """The settings that change, as ``(TopicMeta field, new value)``."""
        return [
            (f.name, getattr(self, f.name))
            for f in fields(self)
            if getattr(self, f.name) is not None
        ]

    def __bool__(self) -> bool:
        return bool(self.items())


@dataclass(frozen=True)
class PartitionStats:
    """One partition's positions.

    Attributes:
        index: The partition.
        oldest_offset: Lowest offset still retained.
        next_offset: The offset the next appended message gets.
        in_flight: Messages delivered and not yet acked, whether their lease
            is held, lapsed or given back.
    """

    index: int
    oldest_offset: int
    next_offset: int
    in_flight: int


@dataclass(frozen=True)
class TopicStats:
    """A topic's message counts, summed over its partitions, for metrics.

    Positions only grow (until the topic is deleted), so the first three are
    counters. Retention moves them too: a message it no longer keeps before
    anyone took (or acked) it counts as delivered (or acked) from then on,
    trimmed or not.

    Attributes:
        produced: Messages ever appended, copies from a parent included (the
            sum of the partitions' next offsets).
        delivered: Messages delivered at least once (the sum of the
            partitions' delivery cursors); redeliveries do not count again.
        acked: Messages acked (every offset below a partition's lowest
            unacked one, plus those acked above it).
        backlog: Retained messages never delivered, due or not.
        in_flight: Messages delivered and not acked (:attr:`PartitionStats.
            in_flight` summed).
        oldest_unacked_ms: The timestamp of the oldest message not acked:
            the earliest, across partitions, of the message at each
            partition's lowest unacked offset that is still retained; None
            when every retained message is acked.
    """

    produced: int = 0
    delivered: int = 0
    acked: int = 0
    backlog: int = 0
    in_flight: int = 0
    oldest_unacked_ms: int | None = None


class PayloadKind(Enum):
    """What a message's bytes are; the consume response encodes each its way."""

    JSON = "j"  # one JSON text: served verbatim
    TEXT = "t"  # other UTF-8 text: served as a JSON string
    BINARY = "b"  # anything else: served base64-encoded


class Entry(NamedTuple):
    """One message to append: its partition, key (may be empty) and bytes.

    ``route`` places the entry's copy in each child: partition ``route %
    child.partitions``. The broker gives a keyed message its key's hash, so
    the copy lands in the child's partition for that key; ``None`` routes by
    ``partition``. (A named tuple: one is built per message of a batch, at a
    third of a frozen dataclass's cost.)
    """

    partition: int
    key: bytes
    payload: bytes
    kind: PayloadKind
    route: int | None = None


@dataclass(frozen=True)
class IdempotencyKey:
    """A client's key guarding ``entries[start:stop]`` of one append.

    A retried request carries the same key and the same ``digest`` (a hash
    the caller computes over what the guarded entries hold: bytes, keys,
    requested partitions), so the backend can tell a retry, which must store
    nothing new, from a different request reusing the key.

    Attributes:
        key: The client's key (1 to 255 visible ASCII characters); the keys
            of one append are distinct, and the entries they guard do not
            overlap.
        digest: The caller's digest of the guarded entries (at most 64 bytes).
        start: Index of the first guarded entry.
        stop: Index past the last guarded entry (``start < stop``).
    """

    key: str
    digest: str
    start: int
    stop: int


@dataclass(frozen=True)
class IdempotencyLimits:
    """How long, and how many, idempotency keys a topic remembers.

    A key is remembered from the append that stored its entries for
    ``window_ms`` (it counts while ``stored_at + window_ms > now_ms``). A
    topic remembers at most ``max_keys`` keys and ``max_bytes`` bytes of
    them, counted as each key's length plus its digest's plus
    :attr:`KEY_OVERHEAD`; past either bound the keys stored earliest are
    forgotten first, before their window closes.
    """

    KEY_OVERHEAD = 64

    window_ms: int = 600_000
    max_keys: int = 1_000_000
    max_bytes: int = 128 << 20


DEFAULT_IDEMPOTENCY = IdempotencyLimits()


class Lease(NamedTuple):
    """A lease to settle: the message, and the nonce its reservation holds.
    (A named tuple: one is built per handle of a batch ack.)"""

    partition: int
    offset: int
    nonce: str


class Message(NamedTuple):
    """A stored message. (A named tuple, cheaper to build than a frozen
    dataclass: one is built per message of a batch consume.)

    ``timestamp`` is the commit time in milliseconds: the ``now_ms`` of the
    append, raised where needed so that timestamps never decrease within a
    partition. In a delay child it is the moment the copy falls due: the
    parent's commit time plus the delay (raised likewise). ``nonce`` is the
    reservation's nonce for a reserved message and empty for one read by
    offset.
    """

    partition: int
    offset: int
    timestamp: int
    key: bytes
    payload: bytes
    kind: PayloadKind
    nonce: str = ""


@dataclass(frozen=True)
class SchemaVersion:
    """One version of a schema history (a topic's or a registry subject's).

    Attributes:
        version: Its number in the history, from 1.
        document: The compact document bytes, as the schema type stores them.
        high_cost: Validating against it always takes the validation capacity.
        schema_id: Its global schema id (:class:`SchemaIdentity`); 0 in a
            write (the storage assigns it) and for a version stored before
            global ids, until :meth:`Storage.assign_schema_ids` gives it one.
        identity: What makes two versions one global id; required in every
            write that stores a version, empty in reads.
        references: The versions's references, compact JSON (an array of
            ``{"name", "subject", "version"}``), or empty for none.
        deleted: A registry subject's version soft-deleted (never for a
            topic's history, which is append-only).
    """

    version: int
    document: bytes
    high_cost: bool
    # Assigned by the storage: two reads of one version compare equal
    # whatever a write was given.
    schema_id: int = field(default=0, compare=False)
    identity: SchemaIdentity | None = field(default=None, compare=False)
    references: bytes = b""
    deleted: bool = False


@dataclass(frozen=True)
class SchemaIdentity:
    """What one global schema id stands for: a type and a fingerprint.

    Global schema ids (Confluent's wire format carries them) number every
    distinct schema of the cluster from 1; the same schema registered under
    another topic or subject gets the same id, and an id is never reused.
    The storage assigns them in the same step as the version append.

    Attributes:
        schema_type: The type's name (``JSON``, ``AVRO``, ``PROTOBUF``).
        fingerprint: Hex SHA-256 over the type's identity of the document
            and the references: equal exactly when the schemas are the same.
    """

    schema_type: str
    fingerprint: str

    @property
    def key(self) -> str:
        return f"{self.schema_type}:{self.fingerprint}"


@dataclass(frozen=True)
class StoredSchema:
    """A global schema id's schema, as :meth:`Storage.schema_by_id` reads it.

    Attributes:
        schema_id: The id.
        schema_type: The type's name.
        document: The compact document bytes, as first registered.
        references: Compact JSON array of references, or empty.
        uses: Every (subject, version) holding it, soft-deleted versions of
            registry subjects included; a topic's history is the subject
            ``<topic>-value``. Empty once every holder was deleted.
    """

    schema_id: int
    schema_type: str
    document: bytes
    references: bytes
    uses: tuple[tuple[str, int], ...]


@dataclass(frozen=True)
class Subject:
    """A standalone registry subject (one that is not a topic's history).

    Attributes:
        name: The subject's name.
        compatibility: Its own compatibility mode, or ``""`` to follow the
            registry's default (:meth:`Storage.registry_config`).
        versions: Every stored version, ascending, soft-deleted ones
            included (``deleted``).
        latest: The highest version number it ever had: numbering goes on
            after soft deletes (0 for a subject with no versions).
    """

    name: str
    compatibility: str
    versions: tuple[SchemaVersion, ...]
    latest: int


@dataclass(frozen=True)
class SchemaSize:
    """A stored version and the bytes its document takes."""

    version: int
    size: int


@dataclass(frozen=True)
class SchemaLimits:
    """The bounds a schema write must keep, checked in the same step.

    Attributes:
        topic_bytes: Most bytes of documents one topic's history may hold.
        cluster_bytes: Most bytes of documents all topics together may hold.
        max_versions: Most versions one topic's history may hold.
    """

    topic_bytes: int
    cluster_bytes: int
    max_versions: int


class Settle(Enum):
    """What to do with a leased message."""

    ACK = "ack"  # done: never deliver it again
    EXTEND = "extend"  # keep it: the lease runs a full visibility timeout from now
    RELEASE = "release"  # give it back: the next reserve may take it at once


class Status(Enum):
    """The outcome of a write. Each method lists the ones it can return."""

    OK = "ok"
    NO_TOPIC = "no_topic"  # missing, or recreated since the caller's epoch
    EXISTS = "exists"  # a topic of that name exists
    STALE_SCHEMA = "stale_schema"  # schema version moved on since validation
    BASE_MISMATCH = "base_mismatch"  # history moved on since the compatibility check
    TOO_MANY_VERSIONS = "too_many_versions"
    TOPIC_BUDGET = "topic_budget"  # the topic's history would exceed its bytes
    CLUSTER_BUDGET = "cluster_budget"  # all histories would exceed their bytes
    GONE = "gone"  # lease lapsed, settled, or never existed
    ACKED_AHEAD_FULL = "acked_ahead_full"
    NO_USER = "no_user"  # no user of that name
    STALE_USER = "stale_user"  # the user changed since the caller read it
    LAST_ADMIN = "last_admin"  # the write would leave no admin of every topic
    STALE_CHILDREN = "stale_children"  # parent or children moved on since read
    DELAY_CHILD = "delay_child"  # a delay child takes messages only from its parent
    ATTACHED = "attached"  # the topic is a child: its parent manages it
    PARENT_IS_CHILD = "parent_is_child"  # no chains: a child cannot be a parent
    CHILD_IS_PARENT = "child_is_parent"  # no chains: a parent cannot be a child
    TOO_MANY_CHILDREN = "too_many_children"
    RETENTION_TOO_SHORT = "retention_too_short"  # below a child's delay + margin
    SCHEMA_MISMATCH = "schema_mismatch"  # the histories cannot be the same
    NOT_CHILD = "not_child"  # not attached to that parent
    REPEATED = "repeated"  # an ack already applied under the same nonce: no change
    KEY_REUSED = "key_reused"  # an idempotency key remembered for other entries
    SUBJECT_EXISTS = "subject_exists"  # a standalone subject "<t>-value" holds versions
    NO_SUBJECT = "no_subject"  # no registry subject (or version) of that name
    NOT_DELETED = "not_deleted"  # a permanent delete of a version not soft-deleted


@dataclass(frozen=True)
class AppendResult:
    """The outcome of :meth:`Storage.append`.

    Attributes:
        status: OK, NO_TOPIC, DELAY_CHILD, KEY_REUSED, STALE_SCHEMA or
            STALE_CHILDREN.
        schema_version: With STALE_SCHEMA, the current schema version.
        count: With OK, the entries stored in the topic itself by this call.
        repeated: With OK, the entries not stored again because their
            idempotency key was remembered with the same digest.
        evicted: With OK, the keys forgotten before their window closed to
            keep the topic within its :class:`IdempotencyLimits`.
        key_index: With KEY_REUSED, the index (in the ``idempotency``
            argument) of the first key remembered with another digest.
    """

    status: Status
    schema_version: int = 0
    count: int = 0
    repeated: int = 0
    evicted: int = 0
    key_index: int = 0


@dataclass(frozen=True)
class ReserveResult:
    """:attr:`Status.OK` with a ``message``, or with none and
    ``next_lease_expiry_ms``, the earliest deadline among the leases of the
    partitions looked at (``None`` when none is leased): the first moment a
    lapsed lease could make a message available without a new append; and
    ``next_due_ms``, the earliest timestamp after ``now_ms`` of a message
    held back only by it (``None`` when none is): when the next copy in a
    delay child falls due. Or :attr:`Status.NO_TOPIC`."""

    status: Status
    message: Message | None = None
    next_lease_expiry_ms: int | None = None
    next_due_ms: int | None = None

    @property
    def next_change_ms(self) -> int | None:
        """The first moment a message may become available without a new
        append or give-back: a lease lapsing or a copy falling due."""
        return _earliest(self.next_lease_expiry_ms, self.next_due_ms)


@dataclass(frozen=True)
class BatchReserveResult:
    """:attr:`Status.OK` with the ``messages`` leased (in the order they
    were taken), and, when there are none, ``next_lease_expiry_ms`` and
    ``next_due_ms`` as in :class:`ReserveResult`. Or :attr:`Status.NO_TOPIC`."""

    status: Status
    messages: tuple[Message, ...] = ()
    next_lease_expiry_ms: int | None = None
    next_due_ms: int | None = None

    @property
    def next_change_ms(self) -> int | None:
        """As :attr:`ReserveResult.next_change_ms`."""
        return _earliest(self.next_lease_expiry_ms, self.next_due_ms)


def _earliest(*times: int | None) -> int | None:
    known = [t for t in times if t is not None]
    return min(known) if known else None


@dataclass(frozen=True)
class SchemaWriteResult:
    """The outcome of a write that may store a schema version.

    Attributes:
        status: See the method that returned it.
        version: With OK, the topic's schema version after the write (0 for a
            topic created without a schema); with BASE_MISMATCH or
            TOO_MANY_VERSIONS, the current version.
        stored_bytes: The topic's history bytes: after the write with OK,
            before it with a budget status.
        cluster_bytes: All histories' bytes, likewise.
        topic: The topic a refusal is about, where a write involves more than
            one (a parent and its children): the missing one with NO_TOPIC,
            the one whose budget would be passed with TOPIC_BUDGET, a
            child's present parent with ATTACHED.
        schema_id: With OK, the global id of the version written (0 when
            the write stored none).
    """

    status: Status
    version: int = 0
    stored_bytes: int = 0
    cluster_bytes: int = 0
    topic: str = ""
    schema_id: int = 0


@dataclass(frozen=True)
class Page:
    """Names (of topics, or users) in ascending order, and the ``after`` for
    the next page."""

    names: list[str] = field(default_factory=list)
    next_token: str | None = None


@dataclass(frozen=True)
class ServerStatus:
    """What the storage server reports about its durability and memory.

    Attributes:
        durable: Every write is on disk (or on a majority) before its reply.
        detail: Why it is, or is not, in words for logs and error messages.
        memory_used: Bytes the server uses.
        memory_limit: Bytes it may use; 0 for no limit.
    """

    durable: bool
    detail: str
    memory_used: int
    memory_limit: int


# -- notifications ------------------------------------------------------------


class Event(Enum):
    """What a :class:`Notification` says."""

    LISTENING = "listening"
    """The stream is live: nothing published from here on is missed. Events
    published before it (or while no stream was open) may have been, so a
    consumer treats it as "anything may have changed"."""

    MESSAGES = "messages"
    """The topic may have a message to reserve: an append, a give-back, or
    an ack that lets a partition's next message past a flow-control cap.

    Published only while some consumer may be waiting on the topic: for
    every append and give-back made while a :meth:`Storage.mark_waiting`
    mark of the topic is live. A backend may publish it more often (always,
    say), never less."""

    TOPIC_CHANGED = "topic_changed"
    """The topic's record changed: created, settings or schema altered, or
    deleted. Whatever a worker holds about the topic may be stale."""

    USER_CHANGED = "user_changed"
    """A user was created or deleted, or their password or grants changed
    (the notification's ``topic`` is the user name). Credentials a worker
    verified for that user may be stale."""


@dataclass(frozen=True)
class Notification:
    """One event of :meth:`Storage.notifications`; ``topic`` is the topic,
    the user name for :attr:`Event.USER_CHANGED`, and empty for
    :attr:`Event.LISTENING`."""

    event: Event
    topic: str = ""


@dataclass(frozen=True)
class Capabilities:
    """What a backend offers beyond the required methods, said in one place.

    The broker and the contract suite both read it: a backend that cannot
    offer something declares it here, and the suite leaves out the tests of
    that feature instead of failing them.

    Attributes:
        notifications: :meth:`Storage.notifications` delivers events from
            every worker of every node. Without it, long polls look for
            messages in short slices (and mark no topic: see
            :meth:`Storage.mark_waiting`) and caches are dropped only by
            epoch.
        topic_stats: :meth:`Storage.topic_stats` is offered. Without it the
            node's metrics leave out the per-topic message counts (a backend
            written before the method existed declares nothing and still
            conforms).
    """

    notifications: bool = True
    topic_stats: bool = False


# -- the interface ------------------------------------------------------------


class Storage(Protocol):
    """The backend interface; ``narad_redis`` is the reference implementation.

    One object serves one worker process and may be called from many threads
    at once. Writes are documented by what they check (in order: the first
    failing check decides the status), what they change in one step, and the
    statuses they return.
    """

    capabilities: Capabilities

    # -- health --------------------------------------------------------------

    def ping(self) -> bool:
        """Whether the backend can serve writes right now (readiness).

        Never raises: an unreachable backend is ``False``. A replicated
        backend answers ``True`` only while a node that accepts writes (a
        leader) answers.
        """
        ...

    def server_status(self) -> ServerStatus | None:
        """Durability and memory as the server reports them, in one short
        round trip without retries (the node polls it; with
        ``storage.durability = "strict"`` it serves writes only while
        ``durable``); ``None`` when the server does not answer."""
        ...

    def close(self) -> None:
        """Release connections; the object is not used afterwards."""
        ...

    # -- topics --------------------------------------------------------------

    def create_topic(
        self,
        meta: TopicMeta,
        schema: SchemaVersion | None = None,
        *,
        limits: SchemaLimits | None = None,
    ) -> SchemaWriteResult:
        """Create the topic ``meta`` describes, with version 1 of its history.

        Checks: no topic named ``meta.name`` exists (EXISTS); the standalone
        registry subject ``<name>-value`` holds no version (SUBJECT_EXISTS);
        with a schema (``limits`` then given), that all histories plus the document fit
        ``limits.cluster_bytes`` (CLUSTER_BUDGET) and the document alone fits
        ``limits.topic_bytes`` (TOPIC_BUDGET). ``schema_version``,
        ``schema_high_cost`` and ``schema_bytes`` of ``meta`` are ignored: the
        write derives them; so are ``parent``, ``fanout_delay_ms`` and
        ``children`` (a topic is created unlinked: see :meth:`create_child`).

        Changes, in one step: stores the record (schema version 1 with a
        schema, else 0; ``compatibility``, ``schema_type``, ``encoding`` and
        ``proto_message`` as given), the document as version
        1 with its global schema id, adds the document's bytes to the
        cluster total, lists the topic for :meth:`list_topics`, and
        publishes :attr:`Event.TOPIC_CHANGED`.

        Returns:
            OK (``version``, ``stored_bytes``, ``cluster_bytes`` after the
            write, ``schema_id``), EXISTS, SUBJECT_EXISTS, CLUSTER_BUDGET or
            TOPIC_BUDGET.
        """
        ...

    def create_child(
        self,
        meta: TopicMeta,
        parent: TopicMeta,
        *,
        delay_ms: int,
        limits: SchemaLimits,
        max_children: int,
    ) -> SchemaWriteResult:
        """Create the topic ``meta`` describes attached to ``parent``, in one step.

        Checks, in order: no topic named ``meta.name`` exists (EXISTS); the
        standalone subject ``<name>-value`` holds no version
        (SUBJECT_EXISTS); ``parent.epoch`` is the parent's (NO_TOPIC,
        ``topic`` the parent); the parent has no parent itself
        (PARENT_IS_CHILD); it has fewer than
        ``max_children`` children (TOO_MANY_CHILDREN); its retention is 0 or
        at least ``delay_ms`` plus :data:`RETENTION_MARGIN_MS`
        (RETENTION_TOO_SHORT); its schema version is
        ``parent.schema_version`` and its compatibility mode
        ``parent.compatibility`` (STALE_SCHEMA); with a history to adopt,
        that the parent's history fits ``limits.topic_bytes`` (TOPIC_BUDGET,
        ``topic`` the parent) and all histories plus a copy of it fit
        ``limits.cluster_bytes`` (CLUSTER_BUDGET).

        Changes, in one step: what :meth:`create_topic` does without a
        schema; the new topic adopts the parent's whole history (every
        version, document, ``high_cost`` and global id as stored, the same current
        version; its bytes added to the cluster total) and the parent's
        :data:`FAMILY_FIELDS`: compatibility mode, schema type, encoding and
        Protobuf message (``meta``'s are ignored); it records the
        parent and ``delay_ms``, and the parent lists it last among its
        children as
        ``Child(meta.name, meta.epoch, meta.partitions, delay_ms)``;
        publishes :attr:`Event.TOPIC_CHANGED` for both.

        Returns:
            OK (``version``, ``stored_bytes``, ``cluster_bytes`` after the
            write), or the status of the first failing check.
        """
        ...

    def get_topic(self, name: str) -> TopicMeta | None:
        """The topic's record, or ``None`` when there is no such topic."""
        ...

    def get_topics(self, names: Sequence[str]) -> list[TopicMeta | None]:
        """:meth:`get_topic` for each name, in order, in one round trip."""
        ...

    def list_topics(self, *, after: str, limit: int, prefix: str = "") -> Page:
        """Up to ``limit`` topic names above ``after`` in code-point order.

        ``after=""`` starts at the first name; only names that start with
        ``prefix`` count. ``next_token`` is the last name returned when more
        such names follow, else ``None``.
        """
        ...

    def topic_owners(self, names: Sequence[str]) -> list[str | None]:
        """The ``owner`` of each named topic, in order, in one round trip:
        ``""`` for a topic made while security was off, ``None`` for no such
        topic.

        Lighter than :meth:`get_topics`: the Users API reads it for pages of
        :meth:`list_topics` when it looks for the topics a user name owns.
        """
        ...

    def alter_topic(self, meta: TopicMeta, changes: TopicChanges) -> Status:
        """Change the settings named in ``changes`` (not the schema).

        Checks, in order: ``meta.epoch`` is the topic's (NO_TOPIC); with a
        ``compatibility`` change, the topic has no parent, whose mode it
        follows (ATTACHED), and its children are ``meta.children``
        (STALE_CHILDREN); a new non-zero ``retention_ms`` is at least every
        child's delay plus :data:`RETENTION_MARGIN_MS`, for the children the
        topic has now (RETENTION_TOO_SHORT). Changes, in one step: the
        settings; a new ``compatibility`` in every child too; and publishes
        :attr:`Event.TOPIC_CHANGED` for the topic and each child it changed.

        Returns:
            OK, NO_TOPIC, ATTACHED, STALE_CHILDREN or RETENTION_TOO_SHORT.
        """
        ...

    def delete_topic(self, meta: TopicMeta) -> Status:
        """Delete the topic with its messages, leases and schema history.

        Checks: ``meta.epoch`` is the topic's (NO_TOPIC); its parent and
        children are ``meta.parent`` and ``meta.children`` (STALE_CHILDREN).
        Changes, in one step: removes everything the topic holds (its
        :meth:`mark_waiting` mark too), takes its history's bytes off the
        cluster total, unlists it, detaches it from its parent or detaches
        its children (who keep their messages and history), and publishes
        :attr:`Event.TOPIC_CHANGED` for it and for each topic it was linked
        to. The name is free at once.

        Returns:
            OK, NO_TOPIC or STALE_CHILDREN.
        """
        ...

    def partition_stats(self, meta: TopicMeta, *, now_ms: int) -> list[PartitionStats]:
        """One :class:`PartitionStats` per partition, in index order.

        A read: it neither trims nor checks the epoch, yet what retention
        no longer keeps at ``now_ms`` (``meta.retention_ms``) is left out,
        leases included, as a write would trim it.
        """
        ...

    # -- fan-out -------------------------------------------------------------

    def attach_child(
        self,
        parent: TopicMeta,
        child: TopicMeta,
        *,
        delay_ms: int,
        limits: SchemaLimits,
        max_children: int,
    ) -> SchemaWriteResult:
        """Attach ``child`` to ``parent``: from this step on, every append to
        the parent is copied to the child. Nothing appended before is.

        The caller has compared the two histories where both have one (as
        JSON values, which a backend cannot be asked to do): the write relies
        on them being unchanged since, which the versions vouch for, since a
        history only grows.

        Checks, in order: each epoch is its topic's (NO_TOPIC, ``topic`` the
        missing one); the parent has no parent (PARENT_IS_CHILD); the child
        has no children (CHILD_IS_PARENT); the child has no parent
        (ATTACHED, ``topic`` its parent); the parent has fewer than
        ``max_children`` children (TOO_MANY_CHILDREN); its retention is 0 or
        at least ``delay_ms`` plus :data:`RETENTION_MARGIN_MS`
        (RETENTION_TOO_SHORT); both schema versions are those of ``parent``
        and ``child``, and the parent's compatibility mode is
        ``parent.compatibility`` (STALE_SCHEMA); a child with a history has as many
        versions as the parent (SCHEMA_MISMATCH); a child without one, under
        a parent with one, can adopt it: the parent's history fits
        ``limits.topic_bytes`` (TOPIC_BUDGET, ``topic`` the parent) and all
        histories plus a copy fit ``limits.cluster_bytes`` (CLUSTER_BUDGET).

        Changes, in one step: the child adopts the parent's history when it
        has none (as :meth:`create_child`) and the parent's
        :data:`FAMILY_FIELDS` (compatibility mode, schema type, encoding,
        Protobuf message) in any case, records the parent and ``delay_ms``; the parent
        lists it last among its children; publishes
        :attr:`Event.TOPIC_CHANGED` for both.

        Returns:
            OK (the child's ``version``, ``stored_bytes`` and
            ``cluster_bytes`` after the write), or the status of the first
            failing check.
        """
        ...

    def detach_child(self, parent: TopicMeta, child: str) -> Status:
        """Detach ``child`` from ``parent``: no later append is copied to it.

        Checks, in order: ``parent.epoch`` is the parent's (NO_TOPIC);
        ``child`` is among its children (NOT_CHILD). Changes, in one step:
        the parent no longer lists the child; the child forgets its parent
        and delay and keeps its messages (copies not yet due still fall due
        when they would have), its history and its compatibility mode, which
        it manages again;
        publishes :attr:`Event.TOPIC_CHANGED` for both.

        Returns:
            OK, NO_TOPIC or NOT_CHILD.
        """
        ...

    def count_not_due(self, metas: Sequence[TopicMeta], *, now_ms: int) -> list[int]:
        """For each topic, in order, how many of its retained messages have a
        timestamp after ``now_ms``: the copies a delay child holds that are
        not due yet. A read, in a bounded number of round trips however many
        topics."""
        ...

    def topic_stats(
        self, metas: Sequence[TopicMeta], *, now_ms: int
    ) -> list[TopicStats]:
        """A :class:`TopicStats` per topic, in order, for the metrics.

        A read in one round trip however many topics (the caller bounds the
        batch), that neither trims nor checks epochs: a topic gone since
        ``metas`` were read counts as empty. Yet what retention no longer
        keeps at ``now_ms`` (each meta's ``retention_ms``) counts as a trim
        would leave it, as in :meth:`partition_stats`. It must work while
        the storage refuses writes for lack of memory. Only called when
        ``capabilities.topic_stats`` is true.
        """
        ...

    # -- schemas -------------------------------------------------------------

    def append_schema(
        self,
        meta: TopicMeta,
        version: SchemaVersion,
        *,
        expected_current: int,
        limits: SchemaLimits,
        changes: TopicChanges | None = None,
    ) -> SchemaWriteResult:
        """Append the next version of the topic's schema history.

        ``version.version`` is ignored: the new version is the current one
        plus one. Checks, in order: ``meta.epoch`` is the topic's (NO_TOPIC);
        it has no parent (ATTACHED, ``topic`` the parent); its children are
        ``meta.children`` (STALE_CHILDREN); the current version is
        ``expected_current`` and the compatibility mode
        ``meta.compatibility``, the version and the mode the caller's check
        started from (BASE_MISMATCH); the history holds fewer than
        ``limits.max_versions`` (TOO_MANY_VERSIONS); the topic's history, and
        each child's, plus the document fits ``limits.topic_bytes``
        (TOPIC_BUDGET, ``topic`` a child's name when it is the child's); all
        histories plus a copy of the document per topic fit
        ``limits.cluster_bytes`` (CLUSTER_BUDGET); a new non-zero
        ``retention_ms`` in ``changes`` keeps the children's margin
        (RETENTION_TOO_SHORT, as :meth:`alter_topic`).

        Changes, in one step: stores the version, makes it current (with its
        ``high_cost``), adds its bytes to the topic's and the cluster's
        totals, does the same in every child's history, applies ``changes``
        (a PATCH that alters settings and the schema together is all or
        nothing; a new value of any of :data:`FAMILY_FIELDS` reaches every
        child too), and
        publishes :attr:`Event.TOPIC_CHANGED` for the topic and each child.

        Returns:
            OK (new ``version`` and byte totals), NO_TOPIC, ATTACHED,
            STALE_CHILDREN, RETENTION_TOO_SHORT, BASE_MISMATCH or
            TOO_MANY_VERSIONS (with the current ``version``), TOPIC_BUDGET or
            CLUSTER_BUDGET (with the byte totals before the write).
        """
        ...

    def get_schema(self, name: str, version: int) -> SchemaVersion | None:
        """One version of the topic's history, or ``None`` if not stored."""
        ...

    def schema_sizes(self, name: str) -> list[SchemaSize]:
        """Every stored version of the topic's history, ascending."""
        ...

    def get_schemas(self, name: str) -> list[SchemaVersion]:
        """Every stored version of the topic's history, ascending, in one
        round trip (empty for a topic without one, or no topic), each with
        its ``schema_id`` and ``references``."""
        ...

    # -- global schema ids and registry subjects ------------------------------
    #
    # Every write below that stores a version is given the version's
    # ``identity`` and gives it its global id in the same step (as do
    # create_topic, create_child, attach_child and append_schema): the id
    # of an identity stored before, or the next unused one. A topic's history
    # is the registry subject ``<topic>-value``; the subjects below are the
    # others (standalone).

    def assign_schema_ids(
        self, meta: TopicMeta, versions: Sequence[SchemaVersion]
    ) -> Status:
        """Give each of ``versions`` (with ``identity``) of the topic's
        history that has no global id yet (one stored before ids) its id.

        Returns:
            OK, or NO_TOPIC (``meta.epoch`` is not the topic's).
        """
        ...

    def schema_by_id(self, schema_id: int) -> StoredSchema | None:
        """The schema a global id stands for, or ``None`` for an id never
        assigned."""
        ...

    def schema_id_of(self, identity: SchemaIdentity) -> int:
        """The global id of ``identity``, or 0 when none was assigned."""
        ...

    def get_subject(self, name: str) -> Subject | None:
        """A standalone subject, or ``None`` when none of that name has a
        version or a compatibility of its own."""
        ...

    def list_subjects(self, *, prefix: str = "") -> list[str]:
        """Every standalone subject holding a version (soft-deleted ones
        count) whose name starts with ``prefix``, ascending."""
        ...

    def register_subject_version(
        self,
        name: str,
        version: SchemaVersion,
        *,
        expected_latest: int,
        topic: str,
        limits: SchemaLimits,
    ) -> SchemaWriteResult:
        """Append the next version to a standalone subject (creating it).

        ``version.version`` is ignored: the new version is the subject's
        ``latest`` plus one. Checks, in order: no topic named ``topic``
        exists (EXISTS; ``topic`` is ``<t>`` for a subject ``<t>-value``,
        else empty); the subject's ``latest`` is ``expected_latest``
        (BASE_MISMATCH, with ``version`` the current latest); it holds
        fewer than ``limits.max_versions`` versions (TOO_MANY_VERSIONS);
        its documents plus this one fit ``limits.topic_bytes``
        (TOPIC_BUDGET); every history fits ``limits.cluster_bytes``
        (CLUSTER_BUDGET).

        Changes, in one step: stores the version with its global id, adds
        its bytes to the subject's and the cluster's totals.

        Returns:
            OK (with ``version`` and ``schema_id``), EXISTS, BASE_MISMATCH,
            TOO_MANY_VERSIONS, TOPIC_BUDGET or CLUSTER_BUDGET.
        """
        ...

    def delete_subject_versions(
        self, name: str, versions: Sequence[int], *, permanent: bool
    ) -> Status:
        """Delete versions of a standalone subject, all or none.

        Soft (``permanent`` false): marks each ``deleted``; a version
        soft-deleted already stays so. Permanent: each must be soft-deleted
        already (NOT_DELETED otherwise); removes it, its bytes from the
        subject's and the cluster's totals, and its use of its global id
        (the id itself is never reused). A subject left without versions
        is removed, its compatibility included.

        Returns:
            OK, NO_SUBJECT (no such subject, or a version it lacks), or
            NOT_DELETED.
        """
        ...

    def set_subject_compatibility(self, name: str, mode: str) -> Status:
        """Set a standalone subject's own mode (``""``: follow the registry
        default), creating the subject without versions if it has none.

        Returns:
            OK.
        """
        ...

    def registry_config(self) -> str:
        """The registry's default mode for standalone subjects, ``""`` when
        never set."""
        ...

    def set_registry_config(self, mode: str) -> Status:
        """Set the registry's default mode (``""`` clears it). Returns OK."""
        ...

    # -- messages ------------------------------------------------------------

    def append(
        self,
        meta: TopicMeta,
        entries: Sequence[Entry],
        *,
        schema_version: int,
        now_ms: int,
        idempotency: Sequence[IdempotencyKey] = (),
        limits: IdempotencyLimits = DEFAULT_IDEMPOTENCY,
    ) -> AppendResult:
        """Append ``entries`` to their partitions, all or nothing, storing
        nothing twice for a retried request that carries idempotency keys.

        Checks, in order: ``meta.epoch`` is the topic's (NO_TOPIC); each
        key of ``idempotency`` the topic remembers (stored within
        ``limits.window_ms`` before ``now_ms``) was remembered with the same
        digest (KEY_REUSED, with the index of the first that was not); then,
        if any entry is left to store (entries under a remembered key are
        not), the topic is not a delay child, whose messages come only from
        its parent (DELAY_CHILD), its current schema version is
        ``schema_version``, the one the payloads were validated against, 0
        for none (STALE_SCHEMA), and its children are ``meta.children``
        (STALE_CHILDREN). A retry whose keys were all remembered is
        therefore answered OK even after the schema or the children moved on,
        or the topic became a delay child.

        Changes, in one step: gives each entry left to store the next offset
        of its partition, in the order given, with timestamp ``max(now_ms,
        the partition's last timestamp)``; copies each of them to every
        child, in the same order, key, bytes and kind unchanged (never
        validated again), to partition ``route % child.partitions`` (see
        :class:`Entry`), with timestamp ``max(the entry's timestamp +
        child.delay_ms, that partition's last timestamp)`` whatever the
        child's flow-control caps; remembers each key not remembered yet
        with its digest at ``now_ms``; forgets keys whose window closed and,
        past ``limits.max_keys`` or ``limits.max_bytes``, the keys stored
        earliest (at most 2 per key of ``idempotency`` plus 100 in one call:
        after the bounds are lowered the excess goes over several calls);
        drops messages of every touched partition whose timestamp
        plus its topic's ``retention_ms`` is at or before ``now_ms`` (with
        their leases and acks; it may stop after a bounded number and leave
        the rest to later writes); and, when it stored anything, publishes
        :attr:`Event.MESSAGES` for the topic and each child, at least when
        one of their marks is live at ``now_ms`` (see :meth:`mark_waiting`;
        one event naming them all may be published then). Forgetting
        expired keys is bounded per call the same way; a key past its
        window counts as forgotten whether or not it was dropped yet.

        Returns:
            OK with ``count``, ``repeated`` and ``evicted``; NO_TOPIC;
            DELAY_CHILD; KEY_REUSED with ``key_index``; STALE_SCHEMA with
            the current ``schema_version``; or STALE_CHILDREN.
        """
        ...

    def reserve(
        self,
        meta: TopicMeta,
        partitions: Sequence[int],
        *,
        nonce: str,
        now_ms: int,
    ) -> ReserveResult:
        """Lease one message from the first of ``partitions`` that has one.

        Checks: ``meta.epoch`` is the topic's (NO_TOPIC). Then, partition by
        partition in the order given, after dropping what retention no
        longer keeps (as :meth:`append` does; what a bounded drop leaves for
        later calls is never offered either), a partition offers:

        - when ``max_acked_ahead_per_partition`` messages are acked out of
          order, only the message at its lowest unacked offset (if its lease
          lapsed, or if it was never delivered);
        - otherwise the message whose lease lapsed first (the earliest
          deadline at or before ``now_ms``; a message given back comes before
          them all), else the next message never
          delivered, the latter only while fewer than
          ``max_in_flight_per_partition`` leases are held;
        - a message never delivered only once its timestamp is at or before
          ``now_ms`` (its due time, in a delay child).

        Changes, in one step: leases the message until ``now_ms +
        visibility_timeout_ms`` under ``nonce`` (which replaces any earlier
        nonce of that message), and the retention trimming.

        Returns:
            OK with the message (its ``nonce`` set), OK without one and with
            ``next_lease_expiry_ms`` and ``next_due_ms``, or NO_TOPIC.
        """
        ...

    def reserve_batch(
        self,
        meta: TopicMeta,
        partitions: Sequence[int],
        *,
        nonces: Sequence[str],
        now_ms: int,
        max_bytes: int | None = None,
    ) -> BatchReserveResult:
        """Lease up to ``len(nonces)`` messages, in one step.

        The same as calling :meth:`reserve` once per nonce, in order, until
        one finds nothing, each with the same ``now_ms``: a partition gives
        what it offers (by the rules of :meth:`reserve`, so the caps, the
        acked-ahead frontier and due times hold per message) before the
        next partition is looked at. The k-th message leased gets
        ``nonces[k]``.

        With ``max_bytes``, it also stops before the first message that
        would take the keys and payloads leased past ``max_bytes`` bytes
        (the first message is leased whatever its size), so the answer is
        bounded whatever the messages' sizes. That message and everything
        after it are left as they were: the next reserve offers them, in
        the same order.

        Returns:
            OK with the messages (possibly none, then with
            ``next_lease_expiry_ms`` and ``next_due_ms``), or NO_TOPIC.
        """
        ...

    def settle(
        self,
        meta: TopicMeta,
        partition: int,
        offset: int,
        nonce: str,
        *,
        action: Settle,
        now_ms: int,
    ) -> Status:
        """Ack, extend or give back the lease ``nonce`` holds on a message.

        Checks, in order: ``meta.epoch`` is the topic's (NO_TOPIC); for an
        ACK, whether the message was acked under this very ``nonce`` and is
        still retained (REPEATED: an ack that is retried, changing nothing);
        the message is leased under ``nonce`` with a deadline after
        ``now_ms`` (GONE: lapsed, settled, given back, leased again, or never
        leased; an EXTEND or RELEASE of an acked message is GONE); for an ACK
        of a message above the partition's lowest unacked offset, fewer than
        ``max_acked_ahead_per_partition`` messages are acked out of order
        (ACKED_AHEAD_FULL), where what retention no longer keeps at
        ``now_ms`` counts as acked, trimmed or not (its ack ends the lease).

        Changes, in one step: ACK ends the lease and marks the message acked
        under ``nonce`` (the lowest unacked offset moves past every acked
        message; the fact is kept until retention drops the message);
        EXTEND moves the deadline to ``now_ms + visibility_timeout_ms``;
        RELEASE makes the message available to the next reserve at once and
        publishes :attr:`Event.MESSAGES` (at least while the topic's mark is
        live at ``now_ms``, see :meth:`mark_waiting`); so does an ACK that
        lets the partition's next message past a flow-control cap (its
        leases fall below ``max_in_flight_per_partition``, or its lowest
        unacked offset moves while ``max_acked_ahead_per_partition``
        messages are acked above it), since a consumer may wait for it.

        Returns:
            OK, REPEATED, GONE, ACKED_AHEAD_FULL or NO_TOPIC.
        """
        ...

    def settle_batch(
        self,
        meta: TopicMeta,
        leases: Sequence[Lease],
        *,
        action: Settle,
        now_ms: int,
    ) -> list[Status]:
        """:meth:`settle` for each lease, in the order given, in one step.

        Each lease is judged on its own, after the ones before it (acking
        offsets in ascending order lets the lowest unacked offset move
        before the acked-ahead cap is reached): its status is one
        :meth:`settle` would return. Every ``lease.partition`` is a
        partition of the topic. :attr:`Event.MESSAGES` is published once if
        any lease would have it published by :meth:`settle`.

        Returns:
            One status per lease; every one NO_TOPIC when the epoch is stale.
        """
        ...

    def settle_and_reserve(
        self,
        meta: TopicMeta,
        leases: Sequence[Lease],
        *,
        action: Settle,
        partitions: Sequence[int],
        nonces: Sequence[str],
        now_ms: int,
    ) -> tuple[list[Status], BatchReserveResult]:
        """:meth:`settle_batch` of ``leases``, then :meth:`reserve_batch` of
        ``len(nonces)`` messages from ``partitions``, both at ``now_ms``: each
        part's result is what its own call would return, the reserve seeing
        what the settle did. Both parts are non-empty.

        A backend sends both in one round trip where it can (Redis: two
        scripts pipelined on one connection, which the server also makes
        durable together): a worker's single acks and single consumes of a
        topic then share one wait for storage.
        """
        ...

    def mark_waiting(self, meta: TopicMeta, until_ms: int) -> Status:
        """Say that consumers may wait on the topic until ``until_ms``.

        The topic keeps one mark: the latest ``until_ms`` any caller gave.
        While it is live for a writer (``until_ms`` at or after the
        writer's ``now_ms``), every :meth:`append` to the topic (or to its
        parent: the copies), every give-back and every ack that frees a
        capped partition (see :meth:`settle`) publishes
        :attr:`Event.MESSAGES` for it; once it ran out they may publish
        nothing, which spares every worker of every node an event per
        message when nobody waits. A consumer that may wait therefore
        marks the topic before it looks for a message: a write committed
        after the look is then published. The mark goes with the topic
        (a topic created again starts without one) and needs no cleanup.

        Checks: ``meta.epoch`` is the topic's (NO_TOPIC).
        Changes, in one step: the mark becomes ``max(mark, until_ms)``.

        Returns:
            OK or NO_TOPIC.
        """
        ...

    def read(
        self, meta: TopicMeta, partition: int, offset: int, *, now_ms: int
    ) -> Message | None:
        """The message at ``offset`` (without a nonce), for replay.

        A read: leases are untouched. ``None`` when the offset was never
        written, was trimmed, is past retention at ``now_ms`` (whether or
        not a write trimmed it yet), or is not due yet (its timestamp is
        after ``now_ms``).
        """
        ...

    # -- users ---------------------------------------------------------------

    def create_user(self, user: UserRecord, *, only_if_none: bool = False) -> Status:
        """Create ``user`` (its ``revision`` is ignored: a new user has 1).

        Checks: no user named ``user.name`` exists, and with
        ``only_if_none`` (seeding the first admin) no user at all (EXISTS).
        Changes, in one step: stores the record, lists it for
        :meth:`list_users`, counts it among the admins when ``user.admin``,
        and publishes :attr:`Event.USER_CHANGED`.

        Returns:
            OK or EXISTS.
        """
        ...

    def get_user(self, name: str) -> UserRecord | None:
        """The user's record, or ``None`` when there is no such user."""
        ...

    def get_users(self, names: Sequence[str]) -> list[UserRecord | None]:
        """:meth:`get_user` for each name, in order, in one round trip."""
        ...

    def list_users(self, *, after: str, limit: int) -> Page:
        """Up to ``limit`` user names above ``after`` in code-point order,
        paged as :meth:`list_topics` pages topic names."""
        ...

    def replace_grants(
        self, name: str, grants: Sequence[Grant], *, admin: bool, revision: int
    ) -> Status:
        """Replace the user's grants (and their ``admin`` standing).

        Checks, in order: the user exists (NO_USER); its revision is
        ``revision`` (STALE_USER); when the user is an admin and ``admin`` is
        false, another admin exists (LAST_ADMIN). Changes, in one step: the
        grants, the admin standing, the revision (plus one), and publishes
        :attr:`Event.USER_CHANGED`.

        Returns:
            OK, NO_USER, STALE_USER or LAST_ADMIN.
        """
        ...

    def set_password(self, name: str, password_hash: str, *, revision: int) -> Status:
        """Replace the user's password hash.

        Checks, in order: the user exists (NO_USER); its revision is
        ``revision`` (STALE_USER). Changes, in one step: the hash, the
        revision (plus one), and publishes :attr:`Event.USER_CHANGED`.

        Returns:
            OK, NO_USER or STALE_USER.
        """
        ...

    def delete_user(self, name: str, *, revision: int) -> Status:
        """Delete the user.

        Checks, in order: the user exists (NO_USER); its revision is
        ``revision`` (STALE_USER); when the user is an admin, another admin
        exists (LAST_ADMIN). Changes, in one step: removes the record,
        unlists it, and publishes :attr:`Event.USER_CHANGED`. Topics the user
        owns keep their ``owner``.

        Returns:
            OK, NO_USER, STALE_USER or LAST_ADMIN.
        """
        ...

    # -- notifications -------------------------------------------------------

    def notifications(
        self, events: Collection[Event] | None = None
    ) -> Iterator[Notification | None]:
        """A live stream of events published by every worker of every node.

        ``events`` names the events the consumer handles (``None``: all of
        them); a backend may leave the others out of the stream, so that,
        say, a stream for user changes does not carry an event per message.
        The iterator first yields :attr:`Event.LISTENING` once nothing
        published afterwards can be missed, then each event as published
        (at least once each; possibly merged or repeated), and ``None`` after
        about a second without events, so its consumer can decide to stop.
        It ends by raising :class:`narad.errors.StorageError` when the
        stream is lost; the consumer then opens a new one (which starts with
        LISTENING again). Closing the generator releases its connection.

        Only called when ``capabilities.notifications`` is true.
        """
        ...
