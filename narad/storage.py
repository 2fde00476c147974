"""What the broker asks of a storage backend, and the values it gets back.

A backend plugin (``narad_storage_backends``) returns an object with these
methods. Every method that changes state is one atomic step on the server
(a Lua script for Redis), takes "now" from the caller, and checks the topic's
``epoch`` (a token minted at create) so that a write meant for a deleted topic
never lands in one created again under the same name.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from dataclasses import field
from enum import Enum
from typing import Protocol


@dataclass(frozen=True)
class TopicMeta:
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


@dataclass(frozen=True)
class PartitionStats:
    index: int
    oldest_offset: int
    next_offset: int
    in_flight: int


@dataclass(frozen=True)
class Entry:
    """One message to append: its partition, key (may be empty) and bytes."""

    partition: int
    key: bytes
    payload: bytes
    kind: str  # "j" JSON text, "t" other UTF-8 text, "b" binary


@dataclass(frozen=True)
class Message:
    partition: int
    offset: int
    timestamp: int
    key: bytes
    payload: bytes
    kind: str
    nonce: str = ""


@dataclass(frozen=True)
class SchemaVersion:
    version: int
    document: bytes
    high_cost: bool


class Status(Enum):
    OK = "ok"
    NO_TOPIC = "no_topic"  # missing, or recreated since the caller's epoch
    EXISTS = "exists"
    STALE_SCHEMA = "stale_schema"  # schema version moved on since validation
    BASE_MISMATCH = "base_mismatch"
    TOO_MANY_VERSIONS = "too_many_versions"
    TOPIC_BUDGET = "topic_budget"
    CLUSTER_BUDGET = "cluster_budget"
    GONE = "gone"  # lease lapsed, settled or unknown
    ACKED_AHEAD_FULL = "acked_ahead_full"


@dataclass(frozen=True)
class AppendResult:
    status: Status
    schema_version: int = 0
    count: int = 0


@dataclass(frozen=True)
class ReserveResult:
    status: Status
    message: Message | None = None
    next_lease_expiry_ms: int | None = None  # when to look again at the latest


@dataclass(frozen=True)
class SchemaWriteResult:
    status: Status
    version: int = 0
    stored_bytes: int = 0
    cluster_bytes: int = 0


@dataclass(frozen=True)
class Page:
    names: list[str] = field(default_factory=list)
    next_token: str | None = None


@dataclass(frozen=True)
class ServerStatus:
    """What the storage server reports about its durability and memory."""

    durable: bool  # every write is on disk (or on a majority) before its reply
    detail: str  # why it is, or is not, in words for logs and error messages
    memory_used: int
    memory_limit: int  # 0: no limit


class Storage(Protocol):
    """The storage backend interface; see ``narad_redis`` for the reference."""

    def ping(self) -> bool: ...

    def server_status(self) -> ServerStatus | None:
        """Durability and memory as the server reports them; None if unreachable."""
        ...

    def close(self) -> None: ...

    # topics
    def create_topic(
        self, meta: TopicMeta, schema: SchemaVersion | None, *, budget: tuple[int, int]
    ) -> SchemaWriteResult: ...

    def get_topic(self, name: str) -> TopicMeta | None: ...

    def get_topics(self, names: Sequence[str]) -> list[TopicMeta | None]: ...

    def list_topics(self, *, after: str, limit: int) -> Page: ...

    def alter_topic(self, name: str, epoch: str, changes: dict[str, int]) -> Status: ...

    def delete_topic(self, meta: TopicMeta) -> Status: ...

    def partition_stats(
        self, meta: TopicMeta, *, now_ms: int
    ) -> list[PartitionStats]: ...

    # schemas
    def append_schema(
        self,
        meta: TopicMeta,
        version: SchemaVersion,
        *,
        expected_current: int,
        budget: tuple[int, int],
        max_versions: int,
    ) -> SchemaWriteResult: ...

    def get_schema(self, name: str, version: int) -> SchemaVersion | None: ...

    def schema_sizes(self, name: str) -> list[tuple[int, int]]: ...

    # messages
    def append(
        self,
        meta: TopicMeta,
        entries: Sequence[Entry],
        *,
        schema_version: int,
        now_ms: int,
    ) -> AppendResult: ...

    def reserve(
        self,
        meta: TopicMeta,
        partitions: Sequence[int],
        *,
        nonce: str,
        now_ms: int,
    ) -> ReserveResult: ...

    def settle(
        self,
        meta: TopicMeta,
        partition: int,
        offset: int,
        nonce: str,
        *,
        action: str,
        now_ms: int,
    ) -> Status: ...

    def read(
        self, meta: TopicMeta, partition: int, offset: int, *, now_ms: int
    ) -> Message | None: ...

    def wake_channel(self, topic: str) -> str: ...

    def listen(self, pattern: str): ...
