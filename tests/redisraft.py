"""A local 3-node RedisRaft cluster for tests, when its binaries run here.

The cluster comes from ``cluster.sh`` in the shared RedisRaft directory (see
its README): ``$NARAD_REDISRAFT_DIR``, else ``/work/shared/redisraft``, else
``shared/redisraft`` beside the checkout. When none of them holds binaries
that run on this machine, the tests that need the cluster are not collected
(the session header says so), since nothing can stand in for it.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from functools import cache
from pathlib import Path

import redis

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
        self.wait_whole()
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

    def url(self, first: int | None = None) -> str:
        """A storage URL listing every node, ``first`` (a port) first."""
        ports = sorted(self.ports, key=lambda port: port != first)
        return "redis://" + ",".join(f"127.0.0.1:{p}" for p in ports) + "/0"

    def kill(self, port: int) -> None:
        """SIGKILL the node on ``port``."""
        self._run("kill", str(self.workdir), str(self.ports.index(port) + 1))

    def start(self, port: int) -> None:
        """Restart the node on ``port`` on its data (it rejoins by itself)."""
        self._run("start", str(self.workdir), str(self.ports.index(port) + 1))

    def freeze(self, port: int) -> None:
        """SIGSTOP the node on ``port``: it keeps its port open, answering
        nothing (a hung node), until :meth:`thaw`."""
        os.kill(self._pid(port), signal.SIGSTOP)

    def thaw(self, port: int) -> None:
        os.kill(self._pid(port), signal.SIGCONT)

    def _pid(self, port: int) -> int:
        node = self.workdir / f"n{self.ports.index(port) + 1}"
        return int((node / "pid").read_text())

    def transfer_leader(self) -> int:
        """Ask the leader to hand over (``RAFT.TRANSFER_LEADER``); its port."""
        leader = self.leader()
        with redis.Redis(port=leader, protocol=2) as client:
            client.execute_command("RAFT.TRANSFER_LEADER")
        return leader

    def new_leader(self, old: int, timeout: float = 30.0) -> int:
        """Wait until a node other than ``old`` leads; its port."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            answer = self._run("leader", str(self.workdir)).strip()
            if answer not in ("none", str(old)):
                return int(answer)
            time.sleep(0.02)
        raise RuntimeError(f"no leader other than {old} within {timeout} s")

    def wait_whole(self, timeout: float = 60.0) -> None:
        """Wait until the leader is connected to both other nodes and every
        node knows it, as after ``up``: tests that kill nodes leave it so."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._whole():
                return
            time.sleep(0.1)
        raise RuntimeError("the RedisRaft cluster did not come back whole")

    def _whole(self) -> bool:
        infos = []
        for port in self.ports:
            try:
                with redis.Redis(port=port, protocol=2, socket_timeout=2) as client:
                    infos.append(client.info("raft"))
            except redis.RedisError:
                return False
        leaders = {info.get("raft_leader_id") for info in infos}
        if len(leaders) != 1 or -1 in leaders:
            return False
        [leader] = [info for info in infos if info.get("raft_role") == "leader"] or [{}]
        peers = [v for k, v in leader.items() if re.fullmatch(r"raft_node\d+", k)]
        return len(peers) == 2 and all(p["state"] == "connected" for p in peers)

    def down(self) -> None:
        self._run("down", str(self.workdir))
