"""Produce, consume, settle and replay.

A produce is validated (when the topic has a schema) and then appended by one
script that also checks the topic's epoch, schema version and children: if
any moved on since the worker's cached record, the record is refreshed, the
payload validated again, and the append retried. A 202 therefore always means
the message was stored under the schema version it was checked against, and
copied to every child the topic had at that moment (children share their
parent's history, so a copy is never validated against another version).
Small produces to a topic that arrive while its appends are in flight share
the next one (:mod:`narad.broker.group_commit`). So do single acks (or
extends, or give-backs) and single consumes of a topic, all in one group:
its acks settle together and its consumes reserve together (a message
each), both in one round trip to storage. Produces of :data:`ALONE_MESSAGES`
messages or :data:`ALONE_BYTES` bytes or more go alone, at once: their
round trip's fixed part is already small beside them, and waiting for
another would cost them more than sharing saves. So do produces with
idempotency keys: the script refuses a whole append for one reused key,
which must not fail the produces beside it.

A produce may carry idempotency keys (the ``Idempotency-Key`` header for the
whole request, or one per batch entry). Each key travels with a digest of
what it guards (payload, message key, requested partition), and the same
script that appends checks them: a key the topic remembers with the same
digest means the request was stored before (its client did not get the
answer), so nothing is stored (or copied to children) again; with another
digest it is a conflict.

The HTTP layer gets :class:`Delivery` values with the receipt handle already
encoded, and gives handles back as opaque strings: receipts are this
package's business.
"""

from __future__ import annotations

import base64
import hashlib
import itertools
import json
import re
import time
import zlib
from collections.abc import Callable
from collections.abc import Iterator
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

from narad.broker import now_ms
from narad.broker.group_commit import Groups
from narad.broker.receipts import Receipt
from narad.broker.receipts import decode as decode_receipt
from narad.broker.receipts import encode as encode_handle
from narad.broker.receipts import new_nonce
from narad.broker.receipts import new_nonces
from narad.broker.records import TopicRecords
from narad.broker.waiters import Waiters
from narad.broker.waiters import poll_deadline
from narad.caches import BoundedCache
from narad.errors import AckedAheadFull
from narad.errors import IdempotencyKeyReused
from narad.errors import InvalidArgument
from narad.errors import LeaseGone
from narad.errors import MalformedReceipt
from narad.errors import MessageNotFound
from narad.errors import PartitionOutOfRange
from narad.errors import ProduceToDelayChild
from narad.errors import SchemaUnusable
from narad.errors import SchemaVersionNotFound
from narad.errors import TopicKeptChanging
from narad.errors import TopicNotFound
from narad.jsontext import nesting_depth_exceeds
from narad.metrics import ACKS_REPEATED
from narad.metrics import FANOUT_COPIES
from narad.metrics import IDEMPOTENCY_KEYS_EVICTED
from narad.metrics import MESSAGES_ACKED
from narad.metrics import MESSAGES_CONSUMED
from narad.metrics import MESSAGES_DEDUPLICATED
from narad.metrics import MESSAGES_PRODUCED
from narad.metrics import MESSAGES_REFUSED
from narad.metrics import TALLY
from narad.schema.limits import PAYLOAD_DEPTH
from narad.schema.service import SchemaService
from narad.storage import DEFAULT_ENCODING
from narad.storage import DEFAULT_FRAMING
from narad.storage import DEFAULT_IDEMPOTENCY
from narad.storage import AppendResult
from narad.storage import BatchReserveResult
from narad.storage import Entry
from narad.storage import IdempotencyKey
from narad.storage import IdempotencyLimits
from narad.storage import Lease
from narad.storage import Message
from narad.storage import PayloadKind
from narad.storage import Settle
from narad.storage import Status
from narad.storage import Storage
from narad.storage import TopicMeta

WRITE_ATTEMPTS = 4
#: A produce this big (in messages or payload bytes) is not grouped.
ALONE_MESSAGES = 16
ALONE_BYTES = 64 << 10
#: Grouped single settles and reserves of a topic a worker has in flight
#: before the next ones queue; produces keep group_commit.IN_FLIGHT. A
#: reserve or settle is small beside its request's own work, so the worker
#: does not sit idle while one is out, and each member a group takes saves
#: a script call and an fsync'd write: one in flight served single
#: consume+ack faster per core at 4 and at 32 connections than three did
#: (bench/messaging.py, consume+ack phase).
LEASE_CALLS_IN_FLIGHT = 1


class Outgoing(NamedTuple):
    """One message to produce, before partition choice and validation;
    ``idempotency_key`` is a batch entry's own key. (A named tuple: one is
    built per message of a batch, at a third of a frozen dataclass's cost.)"""

    payload: bytes
    key: bytes = b""
    partition: int | None = None
    idempotency_key: str | None = None
    #: ``payload`` decoded, when the HTTP layer already holds it (a batch
    #: entry's ``value``): :func:`classify` then need not decode it again.
    text: str | None = None


@dataclass(frozen=True)
class Produced:
    """What a produce did: messages ``stored`` now, and messages ``repeated``
    (stored by an earlier attempt of the same request, not stored again)."""

    stored: int
    repeated: int = 0

    @property
    def accepted(self) -> int:
        return self.stored + self.repeated


#: What a batch settle answers for each receipt handle.
SETTLED = {Settle.ACK: "acked", Settle.EXTEND: "extended", Settle.RELEASE: "released"}
LAPSED = "lapsed"
MALFORMED = "malformed"
ACKED_AHEAD_FULL = "acked_ahead_full"


class Delivery(NamedTuple):
    """A message as the consumer gets it; ``receipt_handle`` is ``None`` for
    a replay, which leases nothing. (A named tuple: one per message of a
    batch.)"""

    topic: str
    message: Message
    receipt_handle: str | None = None


def classify(payload: bytes, text: str | None = None) -> PayloadKind:
    """Whether ``payload`` is one JSON text nesting at most
    :data:`~narad.schema.limits.PAYLOAD_DEPTH` levels, other UTF-8 text, or
    binary. ``text``, when given, is ``payload`` decoded (its UTF-8 bytes
    are ``payload``)."""
    if text is None:
        try:
            text = payload.decode("utf-8")
        except UnicodeDecodeError:
            return PayloadKind.BINARY
    # Depth is judged before parsing: how deep the parser gets depends on the
    # recursion limit, which schema validation raises in a worker, and the
    # same bytes must be classified alike by every worker at any time.
    if nesting_depth_exceeds(payload, PAYLOAD_DEPTH):
        return PayloadKind.TEXT
    # JSONDecoder.decode's steps, without its two Python frames: leading
    # whitespace, one value, trailing whitespace, then the end.
    start = _SPACE(text, 0).end() if text[:1] in _SPACE_CHARS else 0
    try:
        _, end = _SCAN(text, start)
    except (StopIteration, ValueError, RecursionError):
        return PayloadKind.TEXT
    if end != len(text) and _SPACE(text, end).end() != len(text):
        return PayloadKind.TEXT
    return PayloadKind.JSON


def _not_json(name: str) -> None:
    raise ValueError(name)


_DECODER = json.JSONDecoder(parse_constant=_not_json)  # stateless: shared
_new_tuple = tuple.__new__
_SCAN = _DECODER.scan_once
_SPACE = re.compile(r"[ \t\n\r]*").match  # json.decoder.WHITESPACE
_SPACE_CHARS = frozenset(" \t\n\r")


def _topic_of(key: tuple[str, str]) -> str:
    return key[0]


def _same_epoch(key: tuple[str, str], meta: TopicMeta) -> bool:
    return key[1] == meta.epoch


class MessageService:
    def __init__(
        self,
        storage: Storage,
        records: TopicRecords,
        schemas: SchemaService,
        waiters: Waiters,
        *,
        max_wait_ms: int,
        batch_max_bytes: int | None = None,
        idempotency: IdempotencyLimits = DEFAULT_IDEMPOTENCY,
    ) -> None:
        self.storage = storage
        self.records = records
        self.schemas = schemas
        self.waiters = waiters
        self.max_wait_ms = max_wait_ms
        self.batch_max_bytes = batch_max_bytes
        self.idempotency = idempotency
        self._appends: Groups[_Append, AppendResult] = Groups(
            self._append_together, joins=_same_record
        )
        self._lease_calls: Groups[_Settle | _Reserve, Status | _Look | None] = Groups(
            self._lease_calls_together,
            joins=_same_record,
            in_flight=LEASE_CALLS_IN_FLIGHT,
        )
        # One counter per topic incarnation (name, epoch): topics produced
        # to in turn do not share ticks, so each spreads over all its
        # partitions, and a new topic starts at partition 0 in every worker.
        # As many as the topic records, dropped with them.
        self.round_robin: BoundedCache[tuple[str, str], Iterator[int]] = BoundedCache(
            "round_robin",
            max_entries=records.cache.max_entries,
            topic_of=_topic_of,
        )
        records.attach(self.round_robin, _same_epoch, kept_on_change=True)
        self._consume_start = itertools.count()
        # Without a notification stream nothing is published to wait for:
        # waits are cut to slices, and marks would be writes for nobody.
        self._marks = storage.capabilities.notifications

    # -- produce -------------------------------------------------------------

    def produce(
        self,
        topic: str,
        outgoing: Sequence[Outgoing],
        *,
        batch: bool = False,
        idempotency_key: str | None = None,
    ) -> Produced:
        """Validate and append ``outgoing`` all or nothing.

        ``idempotency_key`` guards the whole request; entries may instead
        carry their own (not both: the HTTP layer refuses that). In a batch,
        errors name the failing entry (``messages[i]: ...``).

        Raises:
            IdempotencyKeyReused: a key the topic remembers for other content.
        """
        guards = _guards(outgoing, idempotency_key)
        meta = self.records.cached(topic)
        for _ in range(WRITE_ATTEMPTS):
            if meta.fanout_delay_ms:
                meta = self.records.refresh(topic)
                if meta.fanout_delay_ms:
                    # A retry of what the topic stored before it became a
                    # delay child is answered as one; anything else is 409.
                    stored = self._stored_before(meta, outgoing, guards)
                    if stored is not None:
                        return stored
                    raise ProduceToDelayChild(meta.name, meta.parent)
            try:
                entries = self._entries(meta, outgoing, batch)
            except (InvalidArgument, SchemaUnusable, SchemaVersionNotFound) as exc:
                # A refusal by a cached version is checked against the current
                # one: a newer version may accept what the cached one refused
                # (or be usable where it was not), and a version gone is one
                # that went with the topic (deleted, maybe created again)
                # before this worker heard.
                fresh = self.records.refresh(topic)
                if (fresh.epoch, fresh.schema_version) == (
                    meta.epoch,
                    meta.schema_version,
                ):
                    if isinstance(exc, SchemaVersionNotFound):
                        raise
                    stored = self._stored_before(meta, outgoing, guards)
                    if stored is not None:
                        return stored
                    TALLY.inc(MESSAGES_REFUSED, ())
                    raise
                meta = fresh
                continue
            result = self._append(meta, entries, guards)
            if result.status is Status.OK:
                TALLY.inc(MESSAGES_PRODUCED, (), result.count)
                if meta.children:
                    TALLY.inc(FANOUT_COPIES, (), result.count * len(meta.children))
                if result.repeated:
                    TALLY.inc(MESSAGES_DEDUPLICATED, (), result.repeated)
                if result.evicted:
                    TALLY.inc(IDEMPOTENCY_KEYS_EVICTED, (), result.evicted)
                return Produced(result.count, result.repeated)
            if result.status is Status.KEY_REUSED:
                guard = guards[result.key_index]
                header = idempotency_key is not None
                error = IdempotencyKeyReused(
                    guard.key, self.idempotency.window_ms, header=header
                )
                if batch and not header:
                    error.at_entry(guard.start)
                raise error
            # Recreated, a new schema version, children come or gone, or
            # attached as a delay child.
            meta = self.records.refresh(topic)
        raise TopicKeptChanging(topic)

    def _stored_before(
        self,
        meta: TopicMeta,
        outgoing: Sequence[Outgoing],
        guards: Sequence[IdempotencyKey],
    ) -> Produced | None:
        """A refused produce that an earlier attempt stored whole (every
        message under a key the topic remembers with the same content): a
        retry, answered 202 as one, although the topic's schema now refuses
        what the first attempt's version accepted, or the topic became a
        delay child. None otherwise.

        The check is an append at schema version -1, which no topic has: the
        storage answers STALE_SCHEMA (or DELAY_CHILD), storing nothing,
        unless every entry is under a remembered key, and then OK, storing
        nothing either.
        """
        if sum(guard.stop - guard.start for guard in guards) < len(outgoing):
            return None
        entries = [
            Entry(0, item.key, item.payload, PayloadKind.BINARY) for item in outgoing
        ]
        result = self.storage.append(
            meta,
            entries,
            schema_version=-1,
            now_ms=now_ms(),
            idempotency=guards,
            limits=self.idempotency,
        )
        if result.status is not Status.OK:
            return None
        TALLY.inc(MESSAGES_DEDUPLICATED, (), result.repeated)
        return Produced(0, result.repeated)

    def _append(
        self,
        meta: TopicMeta,
        entries: Sequence[Entry],
        guards: Sequence[IdempotencyKey],
    ) -> AppendResult:
        if guards or len(entries) >= ALONE_MESSAGES:
            return self._store(meta, entries, now_ms(), guards)
        size = sum(len(entry.payload) for entry in entries)
        if size >= ALONE_BYTES:
            return self._store(meta, entries, now_ms(), guards)
        append = _Append(meta, entries, now_ms())
        return self._appends.call(meta.name, append, len(entries), size)

    def _append_together(self, appends: list[_Append]) -> list[AppendResult]:
        """One append of the produces in ``appends`` (sharing one topic
        record), at the latest of their clocks; each one's result."""
        if len(appends) == 1:  # alone, as most are on a quiet topic
            alone = appends[0]
            return [self._store(alone.meta, alone.entries, alone.now_ms)]
        result = self._store(
            appends[0].meta,
            [entry for append in appends for entry in append.entries],
            max(append.now_ms for append in appends),
        )
        if result.status is not Status.OK:
            return [result] * len(appends)  # about the topic: each handles it
        # Keys evicted to make room are counted once, by the first.
        return [
            AppendResult(
                Status.OK,
                count=len(append.entries),
                evicted=result.evicted if index == 0 else 0,
            )
            for index, append in enumerate(appends)
        ]

    def _store(
        self,
        meta: TopicMeta,
        entries: Sequence[Entry],
        now: int,
        guards: Sequence[IdempotencyKey] = (),
    ) -> AppendResult:
        """One append script call, under the record's schema version."""
        return self.storage.append(
            meta,
            entries,
            schema_version=meta.schema_version,
            now_ms=now,
            idempotency=guards,
            limits=self.idempotency,
        )

    def _entries(
        self, meta: TopicMeta, outgoing: Sequence[Outgoing], batch: bool
    ) -> list[Entry]:
        # A framed topic checks every message's frame, even before its first
        # version (then no id is one of its history's).
        framed = meta.framing != DEFAULT_FRAMING
        checked_by_schema = meta.schema_version or framed
        validate = self.schemas.payload_check(meta) if checked_by_schema else None
        # Partitions and kinds first; round-robin ticks are taken only once
        # every entry passed: a refused produce must not move the next
        # message to another partition.
        partitions = meta.partitions
        json_text = meta.encoding == DEFAULT_ENCODING and not framed
        chosen: list[int | None] = []
        kinds: list[PayloadKind] = []
        round_robin = False
        for index, item in enumerate(outgoing):
            try:
                if item.partition is not None:
                    self._check_partition(meta, item.partition)
                    chosen.append(item.partition)
                elif item.key:
                    chosen.append(zlib.crc32(item.key) % partitions)
                else:
                    chosen.append(None)
                    round_robin = True
                if validate is None:
                    kinds.append(classify(item.payload, item.text))
                else:
                    validate(item.payload)
                    # Stored as sent; a binary encoding (Avro, Protobuf) is
                    # served as such.
                    # (A framed JSON text starts with its frame's bytes.)
                    kinds.append(
                        PayloadKind.JSON
                        if json_text
                        else classify(item.payload, item.text)
                    )
            except InvalidArgument as exc:
                raise (exc.at_entry(index) if batch else exc) from None
        if round_robin:
            ticks = self._ticks(meta)
            chosen = [next(ticks) % partitions if p is None else p for p in chosen]
        if meta.children:
            # A copy in a child goes to the child's partition for its key.
            return [
                Entry(
                    p,
                    item.key,
                    item.payload,
                    kind,
                    zlib.crc32(item.key) if item.key else None,
                )
                for p, item, kind in zip(chosen, outgoing, kinds, strict=True)
            ]
        # Built by tuple.__new__, all five fields given: a named tuple's own
        # __new__ is a Python function, a frame per message of a batch.
        return [
            _new_tuple(Entry, (p, item.key, item.payload, kind, None))
            for p, item, kind in zip(chosen, outgoing, kinds, strict=True)
        ]

    def _ticks(self, meta: TopicMeta) -> Iterator[int]:
        key = (meta.name, meta.epoch)
        ticks = self.round_robin.get(key)
        if ticks is None:
            ticks = itertools.count()
            self.round_robin.put(key, ticks)
        return ticks

    # -- consume -------------------------------------------------------------

    def consume(
        self,
        topic: str,
        *,
        wait_ms: int,
        partition: int | None,
        recheck: Callable[[], None] | None = None,
    ) -> Delivery | None:
        """Reserve one message, long-polling up to ``wait_ms`` for one.

        ``recheck`` runs before every look after a wait and raises to end
        the poll (the caller's access, checked again: a user deleted or a
        grant revoked while the poll waited must lease nothing).
        """
        deliveries = self._lease(topic, 1, wait_ms, partition, recheck)
        return deliveries[0] if deliveries else None

    def consume_batch(
        self,
        topic: str,
        *,
        count: int,
        wait_ms: int,
        partition: int | None,
        recheck: Callable[[], None] | None = None,
    ) -> list[Delivery]:
        """Reserve up to ``count`` messages in one step, long-polling up to
        ``wait_ms`` for the first; an empty list when none came. ``recheck``
        as for :meth:`consume`."""
        return self._lease(topic, count, wait_ms, partition, recheck)

    def _lease(
        self,
        topic: str,
        count: int,
        wait_ms: int,
        partition: int | None,
        recheck: Callable[[], None] | None,
    ) -> list[Delivery]:
        meta = self._record_with(topic, partition)
        self._check_partition(meta, partition)
        wait_ms = min(wait_ms, self.max_wait_ms)
        deadline = poll_deadline(time.monotonic(), wait_ms)
        waiters = self.waiters
        while True:
            if wait_ms and self._marks:
                left_ms = max(round((deadline - time.monotonic()) * 1000), 0)
                marked = self._mark_waiting(meta, left_ms)
                if marked is not meta:
                    meta = marked
                    self._check_partition(meta, partition)
            # Single and batch consumes share the note: both find the same
            # messages, so an empty look by either serves both.
            key = (topic, meta.epoch, partition)
            # A long poll on a topic just seen empty waits without looking
            # again: thousands of idle consumers cost no storage calls.
            note = waiters.known_empty(key, topic, now_ms()) if wait_ms else None
            if note is not None:
                seen, expiry = note
            else:
                seen = waiters.generation(topic) if wait_ms else 0
                status, messages, expiry = self._look(meta, partition, count)
                if status is Status.NO_TOPIC:
                    waiters.forget_empty(key, topic)
                    meta = self.records.refresh(topic)
                    self._check_partition(meta, partition)
                    continue
                if messages:
                    waiters.forget_empty(key, topic)
                    TALLY.inc(MESSAGES_CONSUMED, (), len(messages))
                    return [
                        Delivery(
                            topic,
                            message,
                            encode_handle(
                                message.partition, message.offset, message.nonce
                            ),
                        )
                        for message in messages
                    ]
                if wait_ms:
                    waiters.remember_empty(key, topic, seen, expiry, now_ms())
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return []
            if expiry is not None:
                until_expiry = (expiry - now_ms() + 1) / 1000
                remaining = min(remaining, max(until_expiry, 0.001))
            waiters.wait(topic, seen, remaining)
            if waiters.stopped:
                return []  # the worker is stopping: answer 204 now
            if (
                time.monotonic() >= deadline
                and waiters.quiet(topic, seen)
                and (expiry is None or now_ms() < expiry)
            ):
                return []  # nothing was published and no lease fell due
            if recheck is not None:
                recheck()

    def _mark_waiting(self, meta: TopicMeta, wait_ms: int) -> TopicMeta:
        """Make sure ``meta``'s topic is marked as waited on for ``wait_ms``
        from now (or the topic as it is now, if recreated); its record.

        Called before every look of a consume that may wait, and the write
        completes before the look: an append committed after the look then
        sees the mark and publishes (the consumer's snapshot of the
        generation, taken before the look, moves on), and one committed
        before it is found by the look. A failed write fails the consume.
        """
        for _ in range(WRITE_ATTEMPTS):
            until = self.waiters.mark_until(meta.name, meta.epoch, now_ms(), wait_ms)
            if until is None:
                return meta
            if self.storage.mark_waiting(meta, until) is Status.OK:
                self.waiters.marked(meta.name, meta.epoch, until)
                return meta
            meta = self.records.refresh(meta.name)  # recreated, or gone: 404
        raise TopicKeptChanging(meta.name)

    def _look(
        self, meta: TopicMeta, partition: int | None, count: int
    ) -> tuple[Status, Sequence[Message], int | None]:
        """One reserve: (status, messages leased, and when a message may become
        available without any publish: a lapsing lease, or a copy in a delay
        child falling due)."""
        order = self._order(meta, partition)
        if count == 1:
            look = self._lease_calls.call(
                meta.name, _Reserve(meta, partition, order, now_ms())
            )
            if look is None:  # its group leased less than one a member
                look = self._reserve_alone(meta, order, now_ms())
            return look
        many = self.storage.reserve_batch(
            meta,
            order,
            nonces=new_nonces(count),
            now_ms=now_ms(),
            max_bytes=self.batch_max_bytes,
        )
        return many.status, many.messages, many.next_change_ms

    def _reserve_alone(self, meta: TopicMeta, order: list[int], now: int) -> _Look:
        one = self.storage.reserve(meta, order, nonce=new_nonce(), now_ms=now)
        found = (one.message,) if one.message is not None else ()
        return one.status, found, one.next_change_ms

    def _lease_calls_together(
        self, calls: list[_Settle | _Reserve]
    ) -> list[Status | _Look | None]:
        """One round trip for the single settles and single consumes in
        ``calls`` (of one topic record), at the latest of their clocks: the
        settles of one action settle together, and then the consumes of one
        partition choice reserve together, a message each in the order they
        came (:meth:`Storage.settle_and_reserve`). Settles of another action
        or consumes of another partition choice, rare, go after, one call
        per kind; so do give-backs: a lost link must not take the consumes'
        right to be sent again (a reserve is replayable, a give-back not).

        When a reserve leased fewer than one a member, the topic had no more
        to give: members left without one get ``None`` and look again
        alone, which tells each, if it still finds nothing, when a lease
        lapses or a delayed copy falls due. An empty or failed call is every
        member's.
        """
        settles: dict[Settle, tuple[list[int], list[Lease]]] = {}
        reserves: dict[int | None, tuple[list[int], list[int]]] = {}
        for index, call in enumerate(calls):
            if isinstance(call, _Settle):
                members, leases = settles.setdefault(call.action, ([], []))
                leases.append(call.lease)
            else:
                members, _ = reserves.setdefault(call.partition, ([], call.order))
            members.append(index)
        meta = calls[0].meta
        now = max(call.now_ms for call in calls)
        results: list[Status | _Look | None] = [None] * len(calls)
        paired = next((a for a in settles if a is not Settle.RELEASE), None)
        if paired is not None and reserves:
            settled, leases = settles.pop(paired)
            reserving, order = reserves.pop(next(iter(reserves)))
            ascending = _ascending(leases)
            statuses, many = self.storage.settle_and_reserve(
                meta,
                [leases[i] for i in ascending],
                action=paired,
                partitions=order,
                nonces=new_nonces(len(reserving)),
                now_ms=now,
            )
            for i, status in zip(settled, _given(ascending, statuses), strict=True):
                results[i] = status
            for i, look in zip(reserving, _looks(many, len(reserving)), strict=True):
                results[i] = look
        for action, (settled, leases) in settles.items():
            statuses = self._settle_leases(meta, leases, action, now)
            for i, status in zip(settled, statuses, strict=True):
                results[i] = status
        for reserving, order in reserves.values():
            if len(reserving) == 1:  # alone, as most are on a quiet topic
                results[reserving[0]] = self._reserve_alone(meta, order, now)
                continue
            many = self.storage.reserve_batch(
                meta, order, nonces=new_nonces(len(reserving)), now_ms=now
            )
            for i, look in zip(reserving, _looks(many, len(reserving)), strict=True):
                results[i] = look
        return results

    def _order(self, meta: TopicMeta, partition: int | None) -> list[int]:
        if partition is not None:
            return [partition]
        start = next(self._consume_start) % meta.partitions
        return [(start + i) % meta.partitions for i in range(meta.partitions)]

    def _record_with(self, topic: str, partition: int | None) -> TopicMeta:
        """The topic's record, read again when the cached one lacks
        ``partition``: the topic may have been created again with more
        partitions, and a stale record must not refuse what storage holds."""
        meta = self.records.cached(topic)
        if partition is not None and partition >= meta.partitions:
            meta = self.records.refresh(topic)
        return meta

    @staticmethod
    def _check_partition(meta: TopicMeta, partition: int | None) -> None:
        if partition is not None and not 0 <= partition < meta.partitions:
            raise PartitionOutOfRange(meta.name, partition, meta.partitions)

    def replay(self, topic: str, *, partition: int, offset: int) -> Delivery:
        meta = self._record_with(topic, partition)
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
        meta = self._record_with(topic, receipt.partition)
        for _ in range(2):
            if receipt.partition >= meta.partitions:
                raise LeaseGone()
            status = self._lease_calls.call(
                topic, _Settle(meta, action, receipt, now_ms())
            )
            if status is Status.OK:
                if action is Settle.ACK:
                    TALLY.inc(MESSAGES_ACKED, ())
                return
            if status is Status.REPEATED:
                TALLY.inc(ACKS_REPEATED, ())
                return
            if status is Status.GONE:
                raise LeaseGone()
            if status is Status.ACKED_AHEAD_FULL:
                raise AckedAheadFull(
                    receipt.partition, meta.max_acked_ahead_per_partition
                )
            meta = self.records.refresh(topic)
        raise TopicNotFound(topic)

    def settle_batch(
        self, topic: str, handles: Sequence[str], action: Settle
    ) -> list[str]:
        """Settle every handle in one step; one outcome per handle, in order.

        An outcome is ``acked``, ``extended`` or ``released`` (done; an ack
        of a handle already acked is ``acked`` again), ``lapsed`` (the lease
        is gone), ``acked_ahead_full`` (not acked: the partition holds its
        most out-of-order acks; ack older messages first, then retry it), or
        ``malformed`` (not a receipt handle). One bad handle does not keep
        the others from being settled.
        """
        outcomes: list[str] = [MALFORMED] * len(handles)
        receipts: dict[int, Receipt] = {}
        for index, handle in enumerate(handles):
            try:
                receipts[index] = decode_receipt(handle)
            except MalformedReceipt:
                continue
        highest = max((r.partition for r in receipts.values()), default=None)
        meta = self._record_with(topic, highest)
        for _ in range(2):
            valid = [i for i, r in receipts.items() if r.partition < meta.partitions]
            for index in receipts:
                outcomes[index] = LAPSED
            if not valid:
                return outcomes
            # A receipt is the lease it names.
            statuses = self._settle_leases(
                meta, [receipts[i] for i in valid], action, now_ms()
            )
            if Status.NO_TOPIC in statuses:
                meta = self.records.refresh(topic)
                continue
            for index, status in zip(valid, statuses, strict=True):
                done = status is Status.OK
                outcomes[index] = SETTLED[action] if done else _OUTCOMES[status]
            acked = statuses.count(Status.OK) if action is Settle.ACK else 0
            if acked:
                TALLY.inc(MESSAGES_ACKED, (), acked)
            repeated = statuses.count(Status.REPEATED)
            if repeated:
                TALLY.inc(ACKS_REPEATED, (), repeated)
            return outcomes
        raise TopicNotFound(topic)

    def _settle_leases(
        self, meta: TopicMeta, leases: Sequence[Lease], action: Settle, now: int
    ) -> list[Status]:
        """Settle ``leases`` in one step; each one's status, in their order.

        They go in ascending offsets per partition, which lets the lowest
        unacked offset move before acks above it fill the acked-ahead cap.
        """
        order = _ascending(leases)
        statuses = self.storage.settle_batch(
            meta, [leases[i] for i in order], action=action, now_ms=now
        )
        return _given(order, statuses)


@dataclass(frozen=True, slots=True)
class _Append:
    """A produce's part of a grouped append."""

    meta: TopicMeta
    entries: Sequence[Entry]
    now_ms: int


@dataclass(frozen=True, slots=True)
class _Reserve:
    """A single consume's part of a grouped reserve: the partition it asked
    for (None: any), and the order partitions are tried in."""

    meta: TopicMeta
    partition: int | None
    order: list[int]
    now_ms: int


#: What one look found: (status, messages leased, when a message may become
#: available without a publish).
_Look = tuple[Status, Sequence[Message], int | None]


@dataclass(frozen=True, slots=True)
class _Settle:
    """A single settle's part of a grouped batch settle."""

    meta: TopicMeta
    action: Settle
    lease: Lease
    now_ms: int


def _same_record(
    first: _Append | _Settle | _Reserve, other: _Append | _Settle | _Reserve
) -> bool:
    """Whether ``other`` may go with ``first``: the script checks one topic
    record (epoch, schema version, children) for the whole call."""
    return other.meta == first.meta


def _ascending(leases: Sequence[Lease]) -> list[int]:
    """The indexes of ``leases`` by partition and offset: the order a
    settle takes them in, which lets the lowest unacked offset move before
    acks above it fill the acked-ahead cap."""
    return sorted(
        range(len(leases)), key=lambda i: (leases[i].partition, leases[i].offset)
    )


def _given(order: list[int], statuses: Sequence[Status]) -> list[Status]:
    """``statuses`` of leases settled in ``order`` (their indexes, as
    :func:`_ascending` gives them), back in the order the leases came."""
    answers = [Status.OK] * len(order)
    for index, status in zip(order, statuses, strict=True):
        answers[index] = status
    return answers


def _looks(many: BatchReserveResult, members: int) -> list[_Look | None]:
    """What each of ``members`` single consumes gets of one reserve of as
    many messages: a message each in order, then None (look again alone);
    an empty or failed call is every member's."""
    if many.status is not Status.OK or not many.messages:
        return [(many.status, (), many.next_change_ms)] * members
    looks: list[_Look | None] = [
        (Status.OK, (message,), None) for message in many.messages
    ]
    return looks + [None] * (members - len(looks))


_OUTCOMES = {
    Status.REPEATED: SETTLED[Settle.ACK],
    Status.GONE: LAPSED,
    Status.ACKED_AHEAD_FULL: ACKED_AHEAD_FULL,
}


def _guards(
    outgoing: Sequence[Outgoing], request_key: str | None
) -> list[IdempotencyKey]:
    """The idempotency keys of a produce, each with the digest of what it
    guards: the request's key guards every entry, an entry's key its own."""
    if request_key is not None:
        return [IdempotencyKey(request_key, _digest(outgoing), 0, len(outgoing))]
    return [
        IdempotencyKey(item.idempotency_key, _digest([item]), index, index + 1)
        for index, item in enumerate(outgoing)
        if item.idempotency_key is not None
    ]


def _digest(items: Sequence[Outgoing]) -> str:
    """What a retry must send again for its key to match: each message's
    requested partition, key and payload (lengths framed, so no two
    different requests hash alike by shifting bytes between fields)."""
    h = hashlib.blake2b(digest_size=16)
    for item in items:
        partition = -1 if item.partition is None else item.partition
        h.update(b"%d,%d,%d:" % (partition, len(item.key), len(item.payload)))
        h.update(item.key)
        h.update(item.payload)
    return base64.urlsafe_b64encode(h.digest()).rstrip(b"=").decode()
