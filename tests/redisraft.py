"""A local 3-node RedisRaft cluster for tests, when its binaries run here.

The cluster comes from ``cluster.sh`` in the shared RedisRaft directory (see
its README): ``$NARAD_REDISRAFT_DIR``, else ``/work/shared/redisraft``, else
``shared/redisraft`` beside the checkout. When none of them holds binaries
that run on this machine, the tests that need the cluster are not collected
(the session header says so), since nothing can stand in for it.
"""

from __future__ import annotations

import os
import subprocess
import time
from functools import cache
from pathlib import Path

from tests.nodes import free_port

ROOT = Path(__file__).resolve().parent.parent


@cache
def redisraft_dir() -> Path | None:
    """The RedisRaft directory whose binaries run here, or None."""
    candidates = [
        os.environ.get("NARAD_REDISRAFT_DIR", ""),
        "/work/shared/redisraft",
        str(ROOT.parent / "shared" / "redisraft"),
    ]
    for candidate in filter(None, candidates):
        directory = Path(candidate)
        server = directory / "bin" / "redis-server"
        if not (directory / "cluster.sh").is_file() or not server.is_file():
            continue
        try:
            ran = subprocess.run(
                [str(server), "--version"], capture_output=True, timeout=10
            )
        except OSError:
            continue
        if ran.returncode == 0:
            return directory
    return None


def free_base_port() -> int:
    """A port P such that P+1..P+3 look free (cluster.sh uses those)."""
    for _ in range(50):
        base = free_port()
        if base + 3 < 65536 and all(_free(base + n) for n in (1, 2, 3)):
            return base
    raise RuntimeError("no three consecutive free ports")


def _free(port: int) -> bool:
    import socket

    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


class RaftCluster:
    """``cluster.sh up`` in ``workdir``; stopped with :meth:`down`."""

    def __init__(self, directory: Path, workdir: Path) -> None:
        self.script = directory / "cluster.sh"
        self.workdir = workdir
        self.ports: list[int] = []

    def _run(self, *args: str, timeout: float = 60) -> str:
        done = subprocess.run(
            [str(self.script), *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=True,
        )
        return done.stdout

    def up(self) -> RaftCluster:
        out = self._run("up", str(self.workdir), str(free_base_port()))
        for line in out.splitlines():
            if line.startswith("ports "):
                self.ports = [int(p) for p in line.split()[1:]]
        return self

    def leader(self, timeout: float = 15.0) -> int:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            answer = self._run("leader", str(self.workdir)).strip()
            if answer != "none":
                return int(answer)
            time.sleep(0.1)
        raise RuntimeError("the RedisRaft cluster elected no leader")

    def follower(self) -> int:
        leader = self.leader()
        return next(port for port in self.ports if port != leader)

    def down(self) -> None:
        self._run("down", str(self.workdir))
