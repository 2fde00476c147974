"""Group commit: concurrent small produces to one topic share one append.

A worker serves many produces at once, and each append is a storage round
trip whose fixed part (the client's send and receive, the script call, the
topic's record and partition state read and written) costs a small produce
more than its message does. So, per worker and topic, up to
:data:`IN_FLIGHT` appends go at once, as they come; produces arriving while
that many are in flight queue, and when one append returns, the produces
queued go together as the next (up to :data:`MAX_GROUP_ENTRIES` entries and
:data:`MAX_GROUP_BYTES` payload bytes), led by the first of them. A topic
with few concurrent producers sees no wait; a busy one's appends grow with
its load.

Produces of :data:`ALONE_ENTRIES` entries or :data:`ALONE_BYTES` bytes or
more go alone, at once: their fixed part is already small beside them, and
waiting for another append would cost them more than sharing saves. So do
produces with idempotency keys: the script refuses a whole append for one
reused key, which must not fail the produces beside it.

The script is all or nothing, so a group is stored whole or not at all, and
each produce in it stays all or nothing, with its own round-robin ticks and
its own validation already done. Members share the append's outcome: a
refusal about the topic (recreated, a new schema version, children come or
gone) is each one's to handle, and an error is raised to each of them. Only
produces holding an equal topic record (same epoch, schema version,
children) go together, since the script checks one.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Sequence

from narad.errors import StorageError
from narad.errors import StorageUncertain
from narad.storage import AppendResult
from narad.storage import Entry
from narad.storage import IdempotencyKey
from narad.storage import IdempotencyLimits
from narad.storage import Status
from narad.storage import Storage
from narad.storage import TopicMeta

#: Appends of one topic a worker has in flight before produces queue: a few
#: producers keep their round trips overlapping, as without grouping.
IN_FLIGHT = 2
#: Most entries and payload bytes one grouped append carries.
MAX_GROUP_ENTRIES = 1000
MAX_GROUP_BYTES = 1 << 20
#: A produce this big (in entries or payload bytes) goes alone.
ALONE_ENTRIES = 16
ALONE_BYTES = 64 << 10


class _Produce:
    """One produce: what it appends, and where it is in its topic's queue."""

    __slots__ = (
        "entries",
        "error",
        "group",
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
        # Set once its outcome is in, or once it is to lead ``group``.
        self.woken = threading.Event()
        self.taken = False  # out of the queue, into a group
        self.group: list[_Produce] | None = None  # the group it leads
        self.result: AppendResult | None = None
        self.error: BaseException | None = None


class _Topic:
    """A topic's appends in flight in this worker, and the produces queued."""

    __slots__ = ("in_flight", "queue")

    def __init__(self) -> None:
        self.in_flight = 0
        self.queue: deque[_Produce] = deque()


class GroupCommit:
    """Appends for one worker's :class:`~narad.broker.messages.MessageService`,
    grouped per topic. Safe to call from many threads or greenlets."""

    def __init__(self, storage: Storage, limits: IdempotencyLimits) -> None:
        self.storage = storage
        self.limits = limits
        self._lock = threading.Lock()
        # Only topics with an append in flight: a topic produced to once
        # costs nothing later.
        self._topics: dict[str, _Topic] = {}

    def append(
        self,
        meta: TopicMeta,
        entries: Sequence[Entry],
        now_ms: int,
        idempotency: Sequence[IdempotencyKey] = (),
    ) -> AppendResult:
        """Append ``entries`` to ``meta``'s topic under its schema version,
        with others' when they queue together, at ``now_ms`` (a group's
        latest); the outcome as :meth:`~narad.storage.Storage.append` gives
        it, ``count`` being this produce's own entries."""
        mine = _Produce(meta, entries, now_ms)
        if idempotency or len(entries) >= ALONE_ENTRIES or mine.size >= ALONE_BYTES:
            return self._send(meta, entries, now_ms, idempotency)
        with self._lock:
            topic = self._topics.get(meta.name)
            if topic is None:
                topic = self._topics[meta.name] = _Topic()
            if topic.in_flight < IN_FLIGHT:
                topic.in_flight += 1
                mine.taken = True
                mine.group = [mine]
            else:
                topic.queue.append(mine)
        if mine.group is None:
            try:
                mine.woken.wait()
            except BaseException:
                self._abandon(mine)
                raise
            if mine.group is None:  # another led it: the outcome is in
                if mine.error is not None:
                    raise mine.error
                return mine.result  # type: ignore[return-value]
        return self._lead(mine.group)

    def _lead(self, group: list[_Produce]) -> AppendResult:
        """Append ``group`` as one, and give each member its outcome."""
        leader = group[0]
        try:
            result = self._send(
                leader.meta,
                [entry for member in group for entry in member.entries],
                max(member.now_ms for member in group),
            )
        except Exception as exc:
            self._finish(group, None, exc)
            raise
        except BaseException:
            # Cut short (the worker is stopping): the append may have run.
            self._finish(group, None, StorageUncertain("grouped append cut short"))
            raise
        self._finish(group, result, None)
        return leader.result  # type: ignore[return-value]

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
        """Give ``group``'s members their outcome, and send what queued
        meanwhile as the next group."""
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
            topic = self._topics[name]
            if topic.queue:
                following = self._take(topic.queue)
                following[0].group = following
            else:
                following = None
                topic.in_flight -= 1
                if not topic.in_flight:
                    del self._topics[name]
        for member in group[1:]:
            member.woken.set()
        if following is not None:
            following[0].woken.set()

    @staticmethod
    def _take(queue: deque[_Produce]) -> list[_Produce]:
        """The produces at the front of ``queue`` that go together."""
        first = queue.popleft()
        group, count, size = [first], len(first.entries), first.size
        while queue:
            member = queue[0]
            count += len(member.entries)
            size += member.size
            if (
                member.meta != first.meta
                or count > MAX_GROUP_ENTRIES
                or size > MAX_GROUP_BYTES
            ):
                break
            group.append(queue.popleft())
        for member in group:
            member.taken = True
        return group

    def _abandon(self, mine: _Produce) -> None:
        """``mine`` stopped waiting (its worker is stopping): out of the queue;
        if it was to lead a group, that group fails unsent."""
        with self._lock:
            if not mine.taken:
                self._topics[mine.meta.name].queue.remove(mine)
                return
        if mine.group is not None:
            unsent = StorageError("the worker stopped before the append was sent")
            self._finish(mine.group, None, unsent)
