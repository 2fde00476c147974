"""The deadline of costly schema work: past it, the work gives up with 503.

A compatibility check runs on a pool thread (:mod:`narad.serve.offload`)
and its cost grows with the schemas compared; however bounded, one request
must never hold a worker for minutes. The caller sets a deadline around the work
on the thread that runs it (:func:`run_within`), and the engine looks at the
clock every few dozen steps (:func:`passed`) and raises
:class:`CheckPastDeadline`, whatever schema type's checker is running, so a
checker plugin needs no argument of its own for it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextvars import ContextVar
from typing import Any
from typing import TypeVar

from narad.errors import Unavailable

__all__ = ("CheckPastDeadline", "current", "passed", "run_within")

T = TypeVar("T")

_DEADLINE: ContextVar[float | None] = ContextVar("narad_schema_deadline", default=None)


class CheckPastDeadline(Unavailable):
    """A compatibility check ran past its deadline; nothing was decided."""

    def __init__(self) -> None:
        super().__init__(
            "schema: the compatibility check ran past its deadline and decided "
            "nothing; retry, or check a smaller change"
        )


def current() -> float | None:
    """The ``time.monotonic()`` instant the work on this thread must end
    by, or None for no deadline."""
    return _DEADLINE.get()


def passed(deadline: float | None) -> bool:
    """Whether ``deadline`` (a ``time.monotonic()`` instant) has passed."""
    return deadline is not None and time.monotonic() > deadline


def run_within(seconds: float, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
    """``fn(*args, **kwargs)`` with a deadline ``seconds`` from now, on this
    thread (pass it to :func:`narad.serve.offload.run` to set it on the pool
    thread that does the work)."""
    token = _DEADLINE.set(time.monotonic() + seconds)
    try:
        return fn(*args, **kwargs)
    finally:
        _DEADLINE.reset(token)
