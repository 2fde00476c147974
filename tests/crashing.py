"""A test-only storage plugin whose worker dies right after a write returns.

``crashing+redis://host:port/db?markers=<dir>`` is the Redis backend with one
difference: after an ``append`` or a settle has been applied and answered by
the storage, and before the worker can answer its client, the worker kills
itself with SIGKILL if it can claim a marker file ``<dir>/<what>`` (``append``
or ``settle``). Claiming is an unlink, so exactly one worker dies per marker
and the client's retry (on a fresh worker) runs normally: the test decides,
deterministically, which request dies between the script and the reply.

A node loads it as any third-party plugin: :func:`install` writes a
distribution's metadata with an entry point in group ``narad`` to a
directory that goes on the node's ``PYTHONPATH``.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs
from urllib.parse import urlsplit
from urllib.parse import urlunsplit

import narad_redis
from narad import hookimpl
from narad.config import Config

SCHEME = "crashing+redis"


class CrashingStorage:
    """Delegates to a real backend; dies after a claimed write."""

    def __init__(self, inner: Any, markers: Path) -> None:
        self._inner = inner
        self._markers = markers

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def _maybe_die(self, what: str) -> None:
        try:
            (self._markers / what).unlink()
        except FileNotFoundError:
            return
        os.kill(os.getpid(), signal.SIGKILL)

    def append(self, *args: Any, **kwargs: Any) -> Any:
        result = self._inner.append(*args, **kwargs)
        self._maybe_die("append")
        return result

    def settle(self, *args: Any, **kwargs: Any) -> Any:
        result = self._inner.settle(*args, **kwargs)
        self._maybe_die("settle")
        return result

    def settle_batch(self, *args: Any, **kwargs: Any) -> Any:
        result = self._inner.settle_batch(*args, **kwargs)
        self._maybe_die("settle")
        return result

    def settle_and_reserve(self, *args: Any, **kwargs: Any) -> Any:
        result = self._inner.settle_and_reserve(*args, **kwargs)
        self._maybe_die("settle")
        return result


def connect(url: str, config: Config) -> CrashingStorage:
    parts = urlsplit(url)
    markers = Path(parse_qs(parts.query)["markers"][0])
    inner_url = urlunsplit(("redis", parts.netloc, parts.path, "", ""))
    return CrashingStorage(narad_redis.connect(inner_url, config), markers)


@hookimpl
def narad_storage_backends():
    return {SCHEME: connect}


def install(directory: Path) -> Path:
    """Make this module a plugin distribution found on ``directory``; return it."""
    info = directory / "narad_crashing_test-0.dist-info"
    info.mkdir(parents=True, exist_ok=True)
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: narad-crashing-test\nVersion: 0\n"
    )
    (info / "entry_points.txt").write_text(f"[narad]\ncrashing = {__name__}\n")
    return directory
