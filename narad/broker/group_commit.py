"""Group commit: concurrent produces to one topic share one append.

A worker serves many produces at once, and each append is a storage round
trip whose fixed part (the client's send and receive, the script call, the
topic's record and partition state read and written) costs a small produce
more than its message does. So produces to a topic queue up, per worker: the
one at the front leads, taking with it the produces queued behind it (up to
:data:`MAX_GROUP_ENTRIES` entries and :data:`MAX_GROUP_BYTES` payload bytes)
into one :meth:`~narad.storage.Storage.append`, and then hands the lead to
the next one queued. A produce arriving at an empty queue goes at once; one
arriving while an append of its topic is in flight waits for it, and goes
with whatever else arrived meanwhile. A busy topic's appends grow with its
load; an idle one's add no wait.

The script is all or nothing, so a group is stored whole or not at all, and
each produce in it stays all or nothing, with its own round-robin ticks and
its own validation already done. Members share the append's outcome: a
refusal about the topic (recreated, a new schema version, children come or
gone) is each one's to handle, and an error is raised to each of them.
Produces with idempotency keys go alone: the script refuses a whole append
for one reused key, which must not fail the produces beside it. Only members
holding an equal topic record (same epoch, schema version, children) go
together, since the script checks one.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Sequence
from itertools import islice

from narad.errors import StorageUncertain
from narad.storage import AppendResult
from narad.storage import Entry
from narad.storage import IdempotencyKey
from narad.storage import IdempotencyLimits
from narad.storage import Status
from narad.storage import Storage
from narad.storage import TopicMeta

#: Most entries one grouped append carries (a produce bigger than this on its
#: own still goes, alone).
MAX_GROUP_ENTRIES = 1000
#: Most payload bytes one grouped append carries (as above).
MAX_GROUP_BYTES = 1 << 20


class _Produce:
    """One produce in a topic's queue: what it appends, and its outcome."""

    __slots__ = (
        "entries",
        "error",
        "meta",
        "now_ms",
        "result",
        "size",
        "taken",
        "woken",
    )

    def __init__(self, meta: TopicMeta, entries: Sequence[Entry], now_ms: int) -> None:
        self.meta = meta
        self.entries = entries
        self.now_ms = now_ms
        self.size = sum(len(entry.payload) for entry in entries)
        # Set when the outcome is in, or when this produce is to lead.
        self.woken = threading.Event()
        self.taken = False  # in a group being appended
        self.result: AppendResult | None = None
        self.error: BaseException | None = None


class GroupCommit:
    """Appends for one worker's :class:`~narad.broker.messages.MessageService`,
    grouped per topic. Safe to call from many threads or greenlets."""

    def __init__(self, storage: Storage, limits: IdempotencyLimits) -> None:
        self.storage = storage
        self.limits = limits
        self._lock = threading.Lock()
        # Produces waiting or in flight, per topic; a topic's queue goes when
        # it empties, so topics produced to once cost nothing later.
        self._queues: dict[str, deque[_Produce]] = {}

    def append(
        self,
        meta: TopicMeta,
        entries: Sequence[Entry],
        now_ms: int,
        idempotency: Sequence[IdempotencyKey] = (),
    ) -> AppendResult:
        """Append ``entries`` to ``meta``'s topic under its schema version,
        with others' when they wait too, at ``now_ms`` (a group's latest);
        the outcome as :meth:`~narad.storage.Storage.append` gives it,
        ``count`` being this produce's own entries."""
        if idempotency:
            return self._send(meta, entries, now_ms, idempotency)
        mine = _Produce(meta, entries, now_ms)
        with self._lock:
            queue = self._queues.setdefault(meta.name, deque())
            queue.append(mine)
            leading = len(queue) == 1
        if not leading:
            try:
                mine.woken.wait()
            except BaseException:
                self._abandon(mine)
                raise
            if mine.error is not None:
                raise mine.error
            if mine.result is not None:
                return mine.result
        return self._lead(mine)

    def _lead(self, mine: _Produce) -> AppendResult:
        """Append ``mine`` (at its queue's front) with the produces queued
        behind it that fit, give each its outcome, and pass the lead on."""
        with self._lock:
            group = self._take(self._queues[mine.meta.name])
        try:
            result = self._send(
                mine.meta,
                [entry for member in group for entry in member.entries],
                max(member.now_ms for member in group),
            )
        except Exception as exc:
            self._finish(group, None, exc)
            raise
        except BaseException:
            # Cut short (the worker is stopping): the append may have run.
            self._finish(
                group, None, StorageUncertain("the grouped append was cut short")
            )
            raise
        self._finish(group, result, None)
        return mine.result  # type: ignore[return-value]

    @staticmethod
    def _take(queue: deque[_Produce]) -> list[_Produce]:
        """The leader (the front) and the produces after it that may go with it."""
        leader = queue[0]
        group, count, size = [leader], len(leader.entries), leader.size
        for member in islice(queue, 1, None):
            count += len(member.entries)
            size += member.size
            if (
                member.meta != leader.meta
                or count > MAX_GROUP_ENTRIES
                or size > MAX_GROUP_BYTES
            ):
                break
            group.append(member)
        for member in group:
            member.taken = True
        return group

    def _send(
        self,
        meta: TopicMeta,
        entries: Sequence[Entry],
        now_ms: int,
        idempotency: Sequence[IdempotencyKey] = (),
    ) -> AppendResult:
        return self.storage.append(
            meta,
            entries,
            schema_version=meta.schema_version,
            now_ms=now_ms,
            idempotency=idempotency,
            limits=self.limits,
        )

    def _finish(
        self,
        group: list[_Produce],
        result: AppendResult | None,
        error: BaseException | None,
    ) -> None:
        for index, member in enumerate(group):
            if error is not None:
                member.error = error
            elif result.status is Status.OK:
                # Keys evicted to make room are counted once, by the leader.
                member.result = AppendResult(
                    Status.OK,
                    count=len(member.entries),
                    evicted=result.evicted if index == 0 else 0,
                )
            else:
                member.result = result
        name = group[0].meta.name
        with self._lock:
            queue = self._queues[name]
            for _ in group:
                queue.popleft()
            if queue:
                queue[0].woken.set()  # the next one leads
            else:
                del self._queues[name]
        for member in group[1:]:
            member.woken.set()

    def _abandon(self, mine: _Produce) -> None:
        """``mine`` stopped waiting (its worker is stopping): out of the queue,
        unless an append already took it, and the lead passed on if it had it."""
        with self._lock:
            if mine.taken:
                return
            queue = self._queues[mine.meta.name]
            front = queue[0] is mine
            queue.remove(mine)
            if not queue:
                del self._queues[mine.meta.name]
            elif front:
                queue[0].woken.set()
