"""Produce, consume, settle and replay.

A produce is validated (when the topic has a schema) and then appended by one
script that also checks the topic's epoch, schema version and children: if
any moved on since the worker's cached record, the record is refreshed, the
payload validated again, and the append retried. A 202 therefore always means
the message was stored under the schema version it was checked against, and
copied to every child the topic had at that moment (children share their
parent's history, so a copy is never validated against another version).

The HTTP layer gets :class:`Delivery` values with the receipt handle already
encoded, and gives handles back as opaque strings: receipts are this
package's business.
"""

from __future__ import annotations

import itertools
import json
import time
import zlib
from collections.abc import Iterator
from collections.abc import Sequence
from dataclasses import dataclass

from narad.broker import now_ms
from narad.broker.receipts import Receipt
from narad.broker.receipts import decode as decode_receipt
from narad.broker.receipts import new_nonce
from narad.broker.records import TopicRecords
from narad.broker.waiters import Waiters
from narad.errors import AckedAheadFull
from narad.errors import InvalidArgument
from narad.errors import LeaseGone
from narad.errors import MessageNotFound
from narad.errors import PartitionOutOfRange
from narad.errors import ProduceToDelayChild
from narad.errors import TopicKeptChanging
from narad.errors import TopicNotFound
from narad.metrics import FANOUT_COPIES
from narad.metrics import MESSAGES_ACKED
from narad.metrics import MESSAGES_CONSUMED
from narad.metrics import MESSAGES_PRODUCED
from narad.metrics import MESSAGES_REFUSED
from narad.schema.service import SchemaService
from narad.storage import Entry
from narad.storage import Message
from narad.storage import PayloadKind
from narad.storage import Settle
from narad.storage import Status
from narad.storage import Storage
from narad.storage import TopicMeta

WRITE_ATTEMPTS = 4


@dataclass(frozen=True)
class Outgoing:
    """One message to produce, before partition choice and validation."""

    payload: bytes
    key: bytes = b""
    partition: int | None = None


@dataclass(frozen=True)
class Delivery:
    """A message as the consumer gets it; ``receipt_handle`` is ``None`` for
    a replay, which leases nothing."""

    topic: str
    message: Message
    receipt_handle: str | None = None


def classify(payload: bytes) -> PayloadKind:
    """Whether ``payload`` is one JSON text, other UTF-8 text, or binary."""
    try:
        text = payload.decode("utf-8")
    except UnicodeDecodeError:
        return PayloadKind.BINARY
    try:
        _DECODER.decode(text)
    except (ValueError, RecursionError):
        return PayloadKind.TEXT
    return PayloadKind.JSON


def _not_json(name: str) -> None:
    raise ValueError(name)


_DECODER = json.JSONDecoder(parse_constant=_not_json)  # stateless: shared


class MessageService:
    def __init__(
        self,
        storage: Storage,
        records: TopicRecords,
        schemas: SchemaService,
        waiters: Waiters,
        *,
        max_wait_ms: int,
    ) -> None:
        self.storage = storage
        self.records = records
        self.schemas = schemas
        self.waiters = waiters
        self.max_wait_ms = max_wait_ms
        # One counter per topic incarnation (name, epoch): topics produced
        # to in turn do not share ticks, so each spreads over all its
        # partitions, and a new topic starts at partition 0 in every worker.
        self._round_robin: dict[tuple[str, str], Iterator[int]] = {}
        self._consume_start = itertools.count()

    # -- produce -------------------------------------------------------------

    def produce(
        self, topic: str, outgoing: Sequence[Outgoing], *, batch: bool = False
    ) -> int:
        """Validate and append ``outgoing`` all or nothing; return the count.

        In a batch, errors name the failing entry (``messages[i]: ...``).
        """
        meta = self.records.cached(topic)
        for _ in range(WRITE_ATTEMPTS):
            if meta.fanout_delay_ms:
                meta = self._refuse_delay_child(meta)
            try:
                entries = self._entries(meta, outgoing, batch)
            except InvalidArgument:
                # A refusal by a cached version is checked against the current
                # one: a newer version may accept what the cached one refused.
                fresh = self.records.refresh(topic)
                if (fresh.epoch, fresh.schema_version) == (
                    meta.epoch,
                    meta.schema_version,
                ):
                    MESSAGES_REFUSED.inc()
                    raise
                meta = fresh
                continue
            result = self.storage.append(
                meta, entries, schema_version=meta.schema_version, now_ms=now_ms()
            )
            if result.status is Status.OK:
                MESSAGES_PRODUCED.inc(result.count)
                if meta.children:
                    FANOUT_COPIES.inc(result.count * len(meta.children))
                return result.count
            # Recreated, a new schema version, children come or gone, or
            # attached as a delay child.
            meta = self.records.refresh(topic)
        raise TopicKeptChanging(topic)

    def _refuse_delay_child(self, meta: TopicMeta) -> TopicMeta:
        """Refuse a produce to a delay child (checking a cached record
        against the stored one first); the record when it is none."""
        meta = self.records.refresh(meta.name)
        if meta.fanout_delay_ms:
            raise ProduceToDelayChild(meta.name, meta.parent)
        return meta

    def _entries(
        self, meta: TopicMeta, outgoing: Sequence[Outgoing], batch: bool
    ) -> list[Entry]:
        validate = self.schemas.payload_check(meta) if meta.schema_version else None
        checked: list[tuple[int | None, Outgoing, PayloadKind]] = []
        for index, item in enumerate(outgoing):
            try:
                partition = self._partition(meta, item)
                if validate is None:
                    kind = classify(item.payload)
                else:
                    validate(item.payload)
                    kind = PayloadKind.JSON
            except InvalidArgument as exc:
                raise (exc.at_entry(index) if batch else exc) from None
            checked.append((partition, item, kind))
        # Round-robin ticks are taken only once every entry passed: a refused
        # produce must not move the next message to another partition.
        ticks = self._ticks(meta)
        entries = []
        for partition, item, kind in checked:
            if partition is None:
                partition = next(ticks) % meta.partitions
            # A copy in a child goes to the child's partition for its key.
            route = zlib.crc32(item.key) if item.key and meta.children else None
            entries.append(Entry(partition, item.key, item.payload, kind, route))
        return entries

    def _partition(self, meta: TopicMeta, item: Outgoing) -> int | None:
        """The partition ``item`` must go to; None for round-robin."""
        if item.partition is not None:
            self._check_partition(meta, item.partition)
            return item.partition
        if item.key:
            return zlib.crc32(item.key) % meta.partitions
        return None

    def _ticks(self, meta: TopicMeta) -> Iterator[int]:
        key = (meta.name, meta.epoch)
        ticks = self._round_robin.get(key)
        if ticks is None:
            if len(self._round_robin) > 10_000:
                self._round_robin.clear()
            ticks = self._round_robin.setdefault(key, itertools.count())
        return ticks

    # -- consume -------------------------------------------------------------

    def consume(
        self, topic: str, *, wait_ms: int, partition: int | None
    ) -> Delivery | None:
        """Reserve one message, long-polling up to ``wait_ms`` for one."""
        meta = self.records.cached(topic)
        self._check_partition(meta, partition)
        wait_ms = min(wait_ms, self.max_wait_ms)
        deadline = time.monotonic() + wait_ms / 1000
        waiters = self.waiters
        while True:
            key = (topic, meta.epoch, partition)
            # A long poll on a topic just seen empty waits without looking
            # again: thousands of idle consumers cost no storage calls.
            note = waiters.known_empty(key, topic, now_ms()) if wait_ms else None
            if note is not None:
                seen, expiry = note
            else:
                seen = waiters.generation(topic) if wait_ms else 0
                result = self.storage.reserve(
                    meta,
                    self._order(meta, partition),
                    nonce=new_nonce(),
                    now_ms=now_ms(),
                )
                if result.status is Status.NO_TOPIC:
                    waiters.forget_empty(key)
                    meta = self.records.refresh(topic)
                    self._check_partition(meta, partition)
                    continue
                if result.message is not None:
                    waiters.forget_empty(key)
                    MESSAGES_CONSUMED.inc()
                    message = result.message
                    receipt = Receipt(message.partition, message.offset, message.nonce)
                    return Delivery(topic, message, receipt.encode())
                # A lapsing lease, or a copy in a delay child falling due,
                # makes a message available without any publish: wake then.
                expiry = result.next_change_ms
                if wait_ms:
                    waiters.remember_empty(key, topic, seen, expiry, now_ms())
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            if expiry is not None:
                until_expiry = (expiry - now_ms() + 1) / 1000
                remaining = min(remaining, max(until_expiry, 0.001))
            waiters.wait(topic, seen, remaining)
            if waiters.stopped:
                return None  # the worker is stopping: answer 204 now
            if (
                time.monotonic() >= deadline
                and waiters.quiet(topic, seen)
                and (expiry is None or now_ms() < expiry)
            ):
                return None  # nothing was published and no lease fell due

    def _order(self, meta: TopicMeta, partition: int | None) -> list[int]:
        if partition is not None:
            return [partition]
        start = next(self._consume_start) % meta.partitions
        return [(start + i) % meta.partitions for i in range(meta.partitions)]

    @staticmethod
    def _check_partition(meta: TopicMeta, partition: int | None) -> None:
        if partition is not None and not 0 <= partition < meta.partitions:
            raise PartitionOutOfRange(meta.name, partition, meta.partitions)

    def replay(self, topic: str, *, partition: int, offset: int) -> Delivery:
        meta = self.records.cached(topic)
        self._check_partition(meta, partition)
        message = self.storage.read(meta, partition, offset, now_ms=now_ms())
        if message is None:
            raise MessageNotFound(topic, partition, offset)
        return Delivery(topic, message)

    # -- settle --------------------------------------------------------------

    def settle(self, topic: str, handle: str, action: Settle) -> None:
        """Ack, extend or give back the lease ``handle`` (from a
        :class:`Delivery`) holds."""
        receipt = decode_receipt(handle)
        meta = self.records.cached(topic)
        for _ in range(2):
            if receipt.partition >= meta.partitions:
                raise LeaseGone()
            status = self.storage.settle(
                meta,
                receipt.partition,
                receipt.offset,
                receipt.nonce,
                action=action,
                now_ms=now_ms(),
            )
            if status is Status.OK:
                if action is Settle.ACK:
                    MESSAGES_ACKED.inc()
                return
            if status is Status.GONE:
                raise LeaseGone()
            if status is Status.ACKED_AHEAD_FULL:
                raise AckedAheadFull(
                    receipt.partition, meta.max_acked_ahead_per_partition
                )
            meta = self.records.refresh(topic)
        raise TopicNotFound(topic)
