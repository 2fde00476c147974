"""Narad's exceptions.

Errors a client can cause subclass :class:`NaradError`. Each is a named class
carrying the data of the refusal (``TopicBudgetExceeded(topic, stored,
limit)``), and its message is built from that data in one place, here. The
HTTP status each maps to lives in one table (:data:`narad.app.STATUS`), keyed
by the families below (``InvalidArgument`` 400, ``NotFound`` 404, ``Conflict``
409, ...); a named class takes its family's status.

Errors of the operator's making (configuration, plugins) and of the
infrastructure (storage) stand apart: they are not the client's fault and
never become a 4xx.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from typing import Self

from narad.quoting import quote

#: The challenge every 401 carries (RFC 7617).
CHALLENGE = 'Basic realm="narad"'

#: How many violations an incompatible change names.
LISTED_VIOLATIONS = 8


class NaradError(Exception):
    """A request Narad refuses; ``str(error)`` is the message clients see.

    Attributes:
        prefix: The family's lead-in (``"invalid argument: "``).
        detail: What is wrong, without the prefix.
        entry: The index of the batch entry at fault, if any; the message
            then names it (``messages[3]: ...``).
        headers: Response headers the refusal carries (a 401's challenge,
            a 429's ``Retry-After``).
    """

    prefix = ""
    headers: dict[str, str] = {}

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail
        self.entry: int | None = None

    def at_entry(self, index: int) -> Self:
        """This error, blamed on entry ``index`` of a batch."""
        self.entry = index
        return self

    @property
    def message(self) -> str:
        where = "" if self.entry is None else f"messages[{self.entry}]: "
        return self.prefix + where + self.detail

    def __str__(self) -> str:
        return self.message


# -- 400 ----------------------------------------------------------------------


class InvalidArgument(NaradError):
    """A request whose parameters or body break the API's rules."""

    prefix = "invalid argument: "


class InvalidPayload(InvalidArgument):
    """A produced body a topic's schema refuses (or that is not one JSON text)."""


class InvalidSchema(InvalidArgument):
    """A schema document the registration rules refuse."""


class IncompatibleSchema(InvalidArgument):
    """A schema change the topic's compatibility mode refuses.

    Attributes:
        findings: Every violation found (each ``str()``-able, as
            :class:`narad.schematypes.Finding` is: ``incompatible with
            version 3: at /properties/qty: type "integer" no longer
            allowed``); the message names the first :data:`LISTED_VIOLATIONS`.
    """

    def __init__(self, findings: Sequence[Any]) -> None:
        self.findings = tuple(findings)
        listed = "; ".join(str(f) for f in self.findings[:LISTED_VIOLATIONS])
        super().__init__(f"schema: {listed}")


class UnknownMode(InvalidArgument):
    """A compatibility mode name that is none of the modes."""

    def __init__(self, field: str, value: str, modes: Sequence[str]) -> None:
        self.field, self.value = field, value
        names = ", ".join(modes)
        super().__init__(f"{field} must be one of {names}, got {quote(value)}")


class CompatibilityRuleFailed(InvalidArgument):
    """A plugin's compatibility rule raised: the change is refused, not judged.

    Attributes:
        keyword: The keyword whose rule raised.
        error: The name of the exception it raised.
    """

    def __init__(self, keyword: str, error: str) -> None:
        self.keyword, self.error = keyword, error
        super().__init__(
            f"schema: the compatibility rule for {keyword!r} failed on this "
            f"change ({error}), so the change is refused"
        )


class PartitionOutOfRange(InvalidArgument):
    def __init__(self, topic: str, partition: int, partitions: int) -> None:
        self.topic, self.partition, self.partitions = topic, partition, partitions
        super().__init__(
            f"partition {partition} is out of range: topic {topic} has partitions "
            f"0..{partitions - 1}"
        )


class MalformedReceipt(InvalidArgument):
    def __init__(self) -> None:
        super().__init__("receipt_handle is malformed")


class SelfAttach(InvalidArgument):
    def __init__(self, topic: str) -> None:
        self.topic = topic
        super().__init__(f"topic {topic} cannot be a child of itself")


# -- 401, 403 -----------------------------------------------------------------


class Unauthorized(NaradError):
    """No credentials, or wrong ones; the answer carries the Basic challenge."""

    headers = {"WWW-Authenticate": CHALLENGE}


class AuthenticationRequired(Unauthorized):
    def __init__(self) -> None:
        super().__init__(
            "authentication required: send HTTP Basic credentials (user name "
            "and password)"
        )


class MalformedCredentials(Unauthorized):
    def __init__(self) -> None:
        super().__init__(
            "malformed Authorization header: expected Basic and the base64 of "
            "UTF-8 user:password"
        )


class BadCredentials(Unauthorized):
    def __init__(self) -> None:
        super().__init__("wrong user name or password")


class Forbidden(NaradError):
    """Credentials that do not allow the request."""


class NotAllowed(Forbidden):
    """The user may not do that to that topic (or to users).

    Attributes:
        user: Who asked.
        action: What they asked, as words (``produce to``).
        topic: The topic, or ``None`` for the Users API.
        reason: What it would take.
    """

    def __init__(self, user: str, action: str, topic: str | None, reason: str) -> None:
        self.user, self.action, self.topic, self.reason = user, action, topic, reason
        target = f"topic {topic}" if topic is not None else "users"
        super().__init__(f"user {user} may not {action} {target}: {reason}")


class GrantNotHeld(Forbidden):
    """A grant or user change reaching beyond what the caller holds.

    Attributes:
        user: Who asked.
        what: What they tried (``grant``, ``change user bob``).
        missing: The (action, pattern) pairs they do not hold.
    """

    def __init__(
        self, user: str, what: str, missing: Sequence[tuple[str, str]]
    ) -> None:
        self.user, self.what, self.missing = user, what, tuple(missing)
        listed = ", ".join(
            f"{action} on {pattern!r}" for action, pattern in missing[:8]
        )
        super().__init__(
            f"user {user} may not {what}: it takes {listed}, which {user} does "
            "not hold (nobody can grant more than they hold)"
        )


class OwnsTopicOutside(Forbidden):
    """A user change by an admin whose grants do not match a topic that user
    name owns: through the user, the admin would take the topic over.

    Attributes:
        user: Who asked.
        what: What they tried (``change user bob``, ``create user bob``).
        owner: The user name that owns the topic.
        topic: One such topic.
    """

    def __init__(self, user: str, what: str, owner: str, topic: str) -> None:
        self.user, self.what, self.owner, self.topic = user, what, owner, topic
        super().__init__(
            f"user {user} may not {what}: {owner} owns topic {topic}, outside "
            f"{user}'s admin grants"
        )


class WrongCurrentPassword(Forbidden):
    def __init__(self) -> None:
        super().__init__("current_password is wrong")


# -- 404 ----------------------------------------------------------------------


class NotFound(NaradError):
    """What the request names does not exist."""


class TopicNotFound(NotFound):
    def __init__(self, topic: str) -> None:
        self.topic = topic
        super().__init__(f"topic {topic} not found")


class SchemaVersionNotFound(NotFound):
    def __init__(self, topic: str, version: int) -> None:
        self.topic, self.version = topic, version
        super().__init__(f"topic {topic} has no schema version {version}")


class UserNotFound(NotFound):
    def __init__(self, user: str) -> None:
        self.user = user
        super().__init__(f"user {user} not found")


class NotAChild(NotFound):
    def __init__(self, parent: str, child: str) -> None:
        self.parent, self.child = parent, child
        super().__init__(f"topic {child} is not a child of {parent}")


class MessageNotFound(NotFound):
    def __init__(self, topic: str, partition: int, offset: int) -> None:
        self.topic, self.partition, self.offset = topic, partition, offset
        super().__init__(
            f"no message at offset {offset} of partition {partition} of topic {topic}"
        )


# -- 409 ----------------------------------------------------------------------


class Conflict(NaradError):
    """The request conflicts with the current state."""


class TopicExists(Conflict):
    def __init__(self, topic: str) -> None:
        self.topic = topic
        super().__init__(f"topic {topic} already exists")


class SubjectHoldsTopicName(Conflict):
    """A topic cannot be created while the registry's standalone subject
    ``<topic>-value`` holds versions: that subject would be the topic's
    history, and the two histories would be two answers for one name."""

    def __init__(self, topic: str) -> None:
        self.topic = topic
        super().__init__(
            f"topic {topic} cannot be created: the registry subject {topic}-value "
            "holds a schema history of its own; delete that subject (DELETE "
            f"/registry/subjects/{topic}-value, then again with ?permanent=true) "
            "or choose another topic name"
        )


class SchemaVersionConflict(Conflict):
    """The history moved on from the ``schema_base_version`` the client gave,
    or kept moving while the change was checked."""

    def __init__(self) -> None:
        super().__init__("schema version conflict")


class IdempotencyKeyReused(Conflict):
    """An idempotency key the topic remembers for a different request.

    Attributes:
        key: The key.
        window_ms: How long the topic remembers a key.
        header: Whether the key came in the ``Idempotency-Key`` header (else
            as a batch entry's ``idempotency_key``).
    """

    def __init__(self, key: str, window_ms: int, *, header: bool) -> None:
        self.key, self.window_ms, self.header = key, window_ms, header
        name, what = (
            ("Idempotency-Key", "request") if header else ("idempotency_key", "message")
        )
        super().__init__(
            f"{name} {quote(key)} was used within the last {window_ms} ms for a "
            f"different {what}; nothing was stored"
        )


class BaseVersionWithoutSchema(Conflict):
    def __init__(self) -> None:
        super().__init__("schema_base_version given without a schema")


class TooManyVersions(Conflict):
    def __init__(self, topic: str, limit: int) -> None:
        self.topic, self.limit = topic, limit
        super().__init__(
            f"schema: topic {topic} holds {limit} versions, the most a topic may hold"
        )


class TopicBudgetExceeded(Conflict):
    """A schema write would pass the topic's byte budget.

    Attributes:
        topic: The topic.
        stored: Bytes its history holds before the write.
        limit: Bytes it may hold.
    """

    def __init__(self, topic: str, stored: int, limit: int) -> None:
        self.topic, self.stored, self.limit = topic, stored, limit
        detail = (
            f"schema: topic budget exceeded: topic {topic} stores {stored} bytes "
            f"of schema versions and may store at most {limit} bytes"
        )
        if stored > limit:
            detail += (
                "; the history is already over the budget, so smaller versions "
                "cannot help: put the new schema on a new topic"
            )
        super().__init__(detail)


class ClusterBudgetExceeded(Conflict):
    """A schema write would pass the cluster's byte budget.

    Attributes:
        stored: Bytes all histories hold before the write.
        limit: Bytes they may hold.
    """

    def __init__(self, stored: int, limit: int) -> None:
        self.stored, self.limit = stored, limit
        super().__init__(
            f"schema: cluster budget exceeded: the cluster stores {stored} bytes of "
            f"schemas and may store at most {limit} bytes; delete topics to make room"
        )


class UserExists(Conflict):
    def __init__(self, user: str) -> None:
        self.user = user
        super().__init__(f"user {user} already exists")


class LastAdmin(Conflict):
    """The change would leave no user with ``admin`` on ``*``."""

    def __init__(self, user: str) -> None:
        self.user = user
        super().__init__(
            f"user {user} is the last admin (admin on '*'): give another user "
            "admin on '*' first"
        )


class ParentHistoryOverBudget(Conflict):
    """A schema-less child would adopt a history already over the topic budget
    (stored before the budgets applied): such a history takes no new
    schema-less child.

    Attributes:
        topic: The parent.
        stored: Bytes its history holds.
        limit: Bytes a topic may hold.
    """

    def __init__(self, topic: str, stored: int, limit: int) -> None:
        self.topic, self.stored, self.limit = topic, stored, limit
        super().__init__(
            f"schema: topic budget exceeded: topic {topic} stores {stored} bytes of "
            f"schema versions and a topic may store at most {limit} bytes; the "
            "history is already over the budget, so it takes no new schema-less "
            "child, which would adopt a copy of it"
        )


# -- 409: fan-out -------------------------------------------------------------


class AlreadyAChild(Conflict):
    def __init__(self, child: str, parent: str) -> None:
        self.child, self.parent = child, parent
        super().__init__(
            f"topic {child} is already a child of {parent}: a child has one "
            "parent; detach it first"
        )


class ParentIsAChild(Conflict):
    def __init__(self, parent: str, grandparent: str) -> None:
        self.parent, self.grandparent = parent, grandparent
        super().__init__(
            f"topic {parent} is a child of {grandparent}, and a child cannot have "
            "children (no chains)"
        )


class ChildIsAParent(Conflict):
    def __init__(self, child: str) -> None:
        self.child = child
        super().__init__(
            f"topic {child} has children, and a parent cannot become a child "
            "(no chains)"
        )


class ChildInAnotherSlot(Conflict):
    """On a sharded storage (a Valkey/Redis Cluster) a parent writes its
    children's messages in the same script as its own, so a family shares
    one hash slot; an existing topic elsewhere cannot join it."""

    def __init__(self, child: str, parent: str) -> None:
        self.child, self.parent = child, parent
        super().__init__(
            f"topic {child} is stored in another hash slot of the cluster than "
            f"{parent}, and a parent and its children must share one (the "
            f"parent's messages are copied to them atomically): create the child "
            f'under {parent} instead (POST /v1/topics with "parent": "{parent}") '
            f"and move its consumers there"
        )


class TooManyChildren(Conflict):
    def __init__(self, parent: str, limit: int) -> None:
        self.parent, self.limit = parent, limit
        super().__init__(
            f"topic {parent} has {limit} children, the most a parent may have"
        )


class RetentionTooShort(Conflict):
    """A parent's retention below what its delay children need.

    Attributes:
        parent: The parent.
        retention_ms: Its retention, as it is or as asked for.
        needed_ms: The least non-zero retention its children allow: the
            longest delay plus one hour.
    """

    def __init__(self, parent: str, retention_ms: int, needed_ms: int) -> None:
        self.parent, self.retention_ms, self.needed_ms = parent, retention_ms, needed_ms
        super().__init__(
            f"topic {parent} would keep messages for retention_ms {retention_ms}: "
            f"a parent keeps them at least an hour longer than its delay children "
            f"wait, so its retention_ms must be 0 or at least {needed_ms}"
        )


class ProduceToDelayChild(Conflict):
    def __init__(self, topic: str, parent: str) -> None:
        self.topic, self.parent = topic, parent
        super().__init__(
            f"topic {topic} is a delay child of {parent}: it takes messages only "
            f"from its parent; produce to {parent}"
        )


class SchemaUnusable(Conflict):
    """A stored schema version this node cannot use: one stored before
    registration refused what it holds, or one naming a draft no plugin of
    this node provides.

    Not the payload's or the proposed schema's fault (a 400 would have it
    dropped as invalid), and no retry helps until the topic (or the node) is
    put right: the topic's state is in the way, as for a produce to a delay
    child.

    Attributes:
        topic: The topic.
        version: The version.
        reason: Why it cannot be used, and what puts it right.
    """

    def __init__(self, topic: str, version: int, reason: str) -> None:
        self.topic, self.version, self.reason = topic, version, reason
        super().__init__(
            f"schema: version {version} of topic {topic} cannot be used, so "
            f"nothing was stored: {reason}"
        )


class SchemaManagedByParent(Conflict):
    def __init__(self, topic: str, parent: str) -> None:
        self.topic, self.parent = topic, parent
        super().__init__(
            f"schema: topic {topic} is a child of {parent}, which manages its "
            f"schema: change the schema of {parent}, or detach {topic} first"
        )


class SchemaSettingManagedByParent(Conflict):
    """A topic created under a parent takes the parent's schema type,
    encoding and Protobuf message; a request naming others is refused.

    Attributes:
        topic: The topic to be created under ``parent``.
        parent: The parent.
        field: ``schema_type``, ``encoding`` or ``proto_message``.
        value: The parent's value, which the child takes.
    """

    def __init__(self, topic: str, parent: str, field: str, value: str) -> None:
        self.topic, self.parent, self.field, self.value = topic, parent, field, value
        super().__init__(
            f"{field}: topic {topic} would be a child of {parent}, whose "
            f"{field} is {value or 'unset'}: a child takes its parent's; leave "
            f"{field} out or give {value or 'none'}"
        )


class ModeManagedByParent(Conflict):
    """A child's compatibility mode is its parent's while it is attached.

    Attributes:
        topic: The child (or the topic to be created under ``parent``).
        parent: The parent.
        mode: The parent's mode, which the child follows.
        creating: The topic is being created under ``parent``.
    """

    def __init__(
        self, topic: str, parent: str, mode: str, *, creating: bool = False
    ) -> None:
        self.topic, self.parent, self.mode = topic, parent, mode
        if creating:
            detail = (
                f"compatibility: topic {topic} would be a child of {parent}, whose "
                f"compatibility mode is {mode}: a child follows its parent's mode; "
                f"leave compatibility out or give {mode}"
            )
        else:
            detail = (
                f"compatibility: topic {topic} is a child of {parent}, whose "
                f"compatibility mode ({mode}) it follows: change the mode of "
                f"{parent}, or detach {topic} first"
            )
        super().__init__(detail)


class ParentWithoutSchema(Conflict):
    def __init__(self, child: str, parent: str) -> None:
        self.child, self.parent = child, parent
        super().__init__(
            f"schema: topic {child} has a schema and {parent} has none: a child "
            "with a schema cannot go under a parent without one"
        )


class SchemaTypesDiffer(Conflict):
    """A schema of one type for a topic whose history is of another, or a
    child whose history is of another type than its parent-to-be's.

    Attributes:
        topic: The topic.
        stored: The type of its history.
        proposed: The other type.
        parent: The parent-to-be (an attach or a create under a parent).
    """

    def __init__(
        self, topic: str, stored: str, proposed: str, *, parent: str = ""
    ) -> None:
        self.topic, self.stored, self.proposed = topic, stored, proposed
        self.parent = parent
        if parent:
            message = (
                f"schema: the schema history of {topic} is of type {stored} and "
                f"that of {parent} of type {proposed}: a child goes only under a "
                "parent whose history has its type"
            )
        else:
            message = (
                f"schema: the schema history of {topic} is of type {stored}: a "
                f"schema of type {proposed} cannot join it (a topic's history "
                "has one type; put it on a new topic)"
            )
        super().__init__(message)


class EncodingFixed(Conflict):
    """Another payload encoding for a topic whose history has one, or a child
    whose encoding is not its parent-to-be's.

    Attributes:
        topic: The topic.
        stored: Its encoding.
        proposed: The other one.
        parent: The parent-to-be (an attach or a create under a parent).
    """

    def __init__(
        self, topic: str, stored: str, proposed: str, *, parent: str = ""
    ) -> None:
        self.topic, self.stored, self.proposed = topic, stored, proposed
        self.parent = parent
        if parent:
            message = (
                f"schema: the payload encoding of {topic} is {stored} and that "
                f"of {parent} {proposed}: a child goes only under a parent "
                "whose payloads it can read"
            )
        else:
            message = (
                f"schema: topic {topic} has a schema with payload encoding "
                f"{stored}; it cannot become {proposed} (its messages are "
                "encoded so: put the other encoding on a new topic)"
            )
        super().__init__(message)


class HistoriesDiffer(Conflict):
    """A child's schema history is not its parent-to-be's, version for version.

    Attributes:
        child: The child.
        parent: The parent.
        version: The first version where they differ (or that one lacks).
    """

    def __init__(self, child: str, parent: str, version: int) -> None:
        self.child, self.parent, self.version = child, parent, version
        super().__init__(
            f"schema: the schema histories of {child} and {parent} differ at "
            f"version {version}: a child goes only under a parent whose history "
            "is the same, version for version; make one the same as the other first"
        )


# -- 410, 413, 429 ------------------------------------------------------------


class LeaseGone(NaradError):
    """The receipt handle's lease lapsed, was settled, or never existed."""

    def __init__(self) -> None:
        super().__init__("lease unknown or lapsed")


class RequestTimeout(NaradError):
    """A client too slow sending its request (``server.*_timeout``); the
    connection is closed after the 408."""


class PayloadTooLarge(NaradError):
    """A request body over its limit."""


class TooManyRequests(NaradError):
    """Refused for a while; ``Retry-After`` says how long."""


class TooManyFailures(TooManyRequests):
    """Too many failed authentications for the user name or the address.

    Attributes:
        retry_after: Whole seconds before the next attempt is checked.
    """

    def __init__(self, retry_after: int) -> None:
        self.retry_after = retry_after
        self.headers = {"Retry-After": str(retry_after)}
        super().__init__(
            "too many failed authentications for this user name or address; "
            f"retry after {retry_after} s"
        )


# -- 503 ----------------------------------------------------------------------


class Unavailable(NaradError):
    """Refused for now; the same request may succeed later."""


class CapacityBusy(Unavailable):
    def __init__(self) -> None:
        super().__init__("schema: validation capacity busy, retry")


class AckedAheadFull(Unavailable):
    def __init__(self, partition: int, limit: int) -> None:
        self.partition, self.limit = partition, limit
        super().__init__(
            f"partition {partition} holds {limit} out-of-order acks; ack the oldest "
            "unacked message first, then retry"
        )


class TopicKeptChanging(Unavailable):
    def __init__(self, topic: str) -> None:
        self.topic = topic
        super().__init__(f"topic {topic} kept changing during the request; retry")


class UserKeptChanging(Unavailable):
    def __init__(self, user: str) -> None:
        self.user = user
        super().__init__(f"user {user} kept changing during the request; retry")


class CredentialChecksBusy(Unavailable):
    """Every credential check slot of the worker is taken, and the queue full."""

    headers = {"Retry-After": "1"}

    def __init__(self) -> None:
        super().__init__("too many credential checks at once; retry")


# -- Not the client's doing ---------------------------------------------------


class InvalidConfiguration(Exception):
    """A setting Narad cannot start with; the message names it in backticks."""


class PluginError(Exception):
    """A plugin that cannot be loaded, gives a malformed answer, or conflicts."""


class PluginConflict(PluginError):
    """Two plugins claim the same key (draft URI, format, keyword, scheme)."""


class StorageError(Exception):
    """The storage server could not be reached, even after retrying."""


class StorageFull(StorageError):
    """The storage refused a write for memory (over ``maxmemory``): nothing stored."""


class StorageUncertain(StorageError):
    """The link to the storage failed after a write was sent, so the write may
    have been applied; it was not sent again (that could apply it twice)."""
