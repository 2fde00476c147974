"""Where CPU-bound, deeply recursive work runs: off the event loop.

A gevent worker (``narad.serve.workers``) serves all its connections on one thread,
so a schema registration, a compatibility check or a costly validation run
there would stall every other request for as long as it takes. The
validator's recursion also needs a deeper C stack than a greenlet on the main
thread can count on. That work goes to a few native threads with big stacks,
started once per worker process by :func:`start`; the calling greenlet waits
for the result without blocking the loop. Where no pool was started (tests,
tools, other worker classes) the work runs in the caller's thread.

The pool threads hold the GIL while they compute; Python hands it back to the
event loop every ``sys.getswitchinterval()`` (5 ms), so a long validation
slows other requests down by a bounded amount instead of stopping them.

An exception the work raises is handed back to the caller as it is, and
raised there: an invalid schema or a payload nested too deep is the client's
error (a 400 with its access-log line), not a fault for gevent's thread pool
to print with a traceback. The app logs what is a real fault
(:func:`narad.app._unexpected`, with the request id).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from typing import TypeVar

T = TypeVar("T")

# Room for the deepest recursion the validator admits (its recursion limit
# ceiling, a few hundred bytes of C stack per frame). Virtual only: pages are
# committed as they are touched, and there are only a few such threads.
STACK_BYTES = 64 * 1024 * 1024

_pool: Any = None


def start(threads: int) -> None:
    """Start ``threads`` native threads with big stacks in this process.

    Call it in a gevent worker after the fork and the monkey-patching.
    """
    global _pool
    from gevent import monkey
    from gevent.threadpool import ThreadPool

    stack_size = monkey.get_original("_thread", "stack_size")
    pool = ThreadPool(threads)
    previous = stack_size(STACK_BYTES)
    try:
        pool.size = threads  # the threads start now, with the big stack
    finally:
        stack_size(previous)  # other threads (gevent's resolver) keep the default
    _pool = pool


def run(fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
    """``fn(*args, **kwargs)`` on a pool thread; its result or its exception.

    The calling greenlet waits; the event loop goes on serving. Without a
    pool, runs ``fn`` right here.
    """
    if _pool is None:
        return fn(*args, **kwargs)
    result, error = _pool.apply(_outcome, (fn, args, kwargs))
    if error is not None:
        try:
            raise error
        finally:
            del error  # the frames of its traceback, once raised on
    return result


def _outcome(
    fn: Callable[..., T], args: tuple, kwargs: dict
) -> tuple[T | None, Exception | None]:
    """(result, None) or (None, the exception ``fn`` raised), on a pool
    thread: gevent's pool prints the traceback of any exception that leaves
    its task, whoever catches it afterwards."""
    try:
        return fn(*args, **kwargs), None
    except Exception as exc:
        return None, exc
