"""Group commit: concurrent storage calls of one kind on one topic share one.

A worker serves many requests at once, and each storage call is a round trip
whose fixed part (the client's send and receive, the script call, the
topic's record and partition state read and written) costs a small produce
or ack more than its own message does. So calls under one key (a topic, and
for settles the action) go up to :data:`IN_FLIGHT` (or a group's own
``in_flight``) at once per worker, as they come; calls arriving while that
many are in flight queue, and when one returns, those queued go together as
the next (up to :data:`MAX_GROUP_MESSAGES` messages and
:data:`MAX_GROUP_BYTES` payload bytes, and only calls that may join the
first of them), led by that first one. A key with few concurrent callers
sees no wait; a busy one's calls grow with its load.

Members share their call's fate: ``send`` gives each its own result, and an
error it raises is raised to each of them. The broker's scripts are all or
nothing, so a member is stored (or settled) with its group or not at all,
as it would be alone.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable
from collections.abc import Hashable
from collections.abc import Sequence
from typing import Generic
from typing import TypeVar

from narad.errors import StorageError
from narad.errors import StorageUncertain

#: Calls under one key a worker has in flight before the next ones queue: a
#: few concurrent callers keep their round trips overlapping, as without
#: grouping (with one, two producers on a worker ran a quarter slower). With
#: two, eight producers per worker left the worker idle while its calls were
#: out: three served them faster, with more produces per append
#: (bench/ab.py, produce phase).
IN_FLIGHT = 3
#: Most messages and payload bytes one grouped call carries.
MAX_GROUP_MESSAGES = 1000
MAX_GROUP_BYTES = 1 << 20

T = TypeVar("T")  # what one caller brings
R = TypeVar("R")  # what it gets back


class _Call(Generic[T, R]):
    """One caller: what it brings, and where it is in its key's queue."""

    __slots__ = (
        "bytes",
        "error",
        "group",
        "item",
        "messages",
        "result",
        "taken",
        "woken",
    )

    def __init__(self, item: T, messages: int, size: int) -> None:
        self.item = item
        self.messages = messages
        self.bytes = size
        # Only while queued: set once its result is in, or once it is to
        # lead ``group``.
        self.woken: threading.Event | None = None
        self.taken = False  # out of the queue, into a group
        self.group: list[_Call[T, R]] | None = None  # the group it leads
        self.result: R | None = None
        self.error: BaseException | None = None


class _Queue(Generic[T, R]):
    """A key's calls in flight in this worker, and the callers queued."""

    __slots__ = ("calls", "in_flight")

    def __init__(self) -> None:
        self.in_flight = 0
        self.calls: deque[_Call[T, R]] = deque()


class Groups(Generic[T, R]):
    """One kind of storage call, grouped per key. Safe to call from many
    threads or greenlets.

    Args:
        send: Makes one storage call for the items of a group (in order),
            and gives back each item's result, in the same order.
        joins: Whether an item may go in a group that ``first`` leads.
        in_flight: Calls under one key in flight before the next ones queue.
    """

    def __init__(
        self,
        send: Callable[[list[T]], Sequence[R]],
        *,
        joins: Callable[[T, T], bool],
        in_flight: int = IN_FLIGHT,
    ) -> None:
        self.send = send
        self.joins = joins
        self.in_flight = in_flight
        self._lock = threading.Lock()
        # Only keys with a call in flight: a topic used once costs nothing later.
        self._queues: dict[Hashable, _Queue[T, R]] = {}

    def call(self, key: Hashable, item: T, messages: int = 1, size: int = 0) -> R:
        """``item``'s result, sent alone or with others queued under ``key``;
        ``messages`` and ``size`` (payload bytes) count against a group's caps."""
        mine: _Call[T, R] = _Call(item, messages, size)
        with self._lock:
            queue = self._queues.get(key)
            if queue is None:
                queue = self._queues[key] = _Queue()
            if queue.in_flight < self.in_flight:
                queue.in_flight += 1
                mine.taken = True
            else:
                mine.woken = threading.Event()
                queue.calls.append(mine)
        if mine.woken is None:
            return self._lead(key, [mine])
        try:
            mine.woken.wait()
        except BaseException:
            self._abandon(key, mine)
            raise
        # Dropped here: a leader in its own group is a reference cycle, which
        # only the cyclic collector would free (with the caller's result).
        group, mine.group = mine.group, None
        if group is None:  # another led it: the result is in
            if mine.error is not None:
                raise mine.error
            return mine.result  # type: ignore[return-value]
        return self._lead(key, group)

    def _lead(self, key: Hashable, group: list[_Call[T, R]]) -> R:
        """Send ``group`` as one call, and give each member its result."""
        try:
            results = self.send([member.item for member in group])
        except Exception as exc:
            self._finish(key, group, None, exc)
            raise
        except BaseException:
            # Cut short (the worker is stopping): the call may have run.
            self._finish(key, group, None, StorageUncertain("grouped call cut short"))
            raise
        self._finish(key, group, results, None)
        return group[0].result  # type: ignore[return-value]

    def _finish(
        self,
        key: Hashable,
        group: list[_Call[T, R]],
        results: Sequence[R] | None,
        error: BaseException | None,
    ) -> None:
        """Give ``group``'s members their results, and send what queued
        meanwhile as the next group."""
        for index, member in enumerate(group):
            if error is not None:
                member.error = error
            else:
                member.result = results[index]  # type: ignore[index]
        with self._lock:
            queue = self._queues[key]
            if queue.calls:
                following = self._take(queue.calls)
                following[0].group = following
            else:
                following = None
                queue.in_flight -= 1
                if not queue.in_flight:
                    del self._queues[key]
        for member in group[1:]:
            member.woken.set()  # type: ignore[union-attr]
        if following is not None:
            following[0].woken.set()  # type: ignore[union-attr]

    def _take(self, calls: deque[_Call[T, R]]) -> list[_Call[T, R]]:
        """The callers at the front of ``calls`` that go together."""
        first = calls.popleft()
        group, messages, size = [first], first.messages, first.bytes
        while calls:
            member = calls[0]
            messages += member.messages
            size += member.bytes
            if (
                messages > MAX_GROUP_MESSAGES
                or size > MAX_GROUP_BYTES
                or not self.joins(first.item, member.item)
            ):
                break
            group.append(calls.popleft())
        for member in group:
            member.taken = True
        return group

    def _abandon(self, key: Hashable, mine: _Call[T, R]) -> None:
        """``mine`` stopped waiting (its worker is stopping): out of the queue;
        if it was to lead a group, that group fails unsent."""
        with self._lock:
            if not mine.taken:
                self._queues[key].calls.remove(mine)
                return
        if mine.group is not None:
            unsent = StorageError("the worker stopped before the call was sent")
            self._finish(key, mine.group, None, unsent)
