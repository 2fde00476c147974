"""The shipped RedisRaft setup (conf/redisraft.conf, systemd/narad-raft.service
and the narad.service drop-in) serves Narad, with least privilege.

Three nodes run conf/redisraft.conf with only its addresses, paths and
passwords filled in, as the README tells an operator to; the cluster is set up
as the README says (``RAFT.CLUSTER INIT`` / ``JOIN`` as the admin user), and a
node reaches it as the ACL user ``narad`` through a seed list.
"""

from __future__ import annotations

import re
import secrets
import subprocess
import time

import pytest
import redis

from tests.nodes import ROOT
from tests.nodes import Node
from tests.redisraft import free_base_port
from tests.redisraft import redisraft_dir

pytestmark = pytest.mark.slow

UNIT_CONF = "/etc/narad/redisraft.conf"


def _fill(conf: str, moves: dict[str, str]) -> str:
    for line, moved in moves.items():
        assert conf.count(line + "\n") == 1, line
        conf = conf.replace(line + "\n", moved + "\n")
    assert "CHANGE-ME-" not in conf
    return conf


@pytest.fixture
def shipped_cluster(tmp_path):
    """Three nodes from conf/redisraft.conf, joined as the README says."""
    binaries = redisraft_dir() / "bin"
    base = free_base_port()
    ports = [base + n for n in (1, 2, 3)]
    passwords = {who: secrets.token_hex(8) for who in ("cluster", "narad", "admin")}
    template = (ROOT / "conf" / "redisraft.conf").read_text()
    for name, password in passwords.items():
        template = template.replace(f"CHANGE-ME-{name}", password)
    processes = []
    try:
        for port in ports:
            data = tmp_path / str(port)
            data.mkdir(mode=0o700)
            conf = _fill(
                template,
                {
                    "port 6379": f"port {port}",
                    "bind 10.0.0.1": "bind 127.0.0.1",
                    "dir /var/lib/narad-raft": f"dir {data}",
                    "loadmodule /usr/local/lib/redis/modules/redisraft.so": (
                        f"loadmodule {binaries / 'redisraft.so'}"
                    ),
                    "raft.addr 10.0.0.1:6379": f"raft.addr 127.0.0.1:{port}",
                },
            )
            (data / "node.conf").write_text(conf + f"logfile {data / 'redis.log'}\n")
            processes.append(
                subprocess.Popen(
                    [str(binaries / "redis-server"), str(data / "node.conf")],
                    cwd=data,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
            )
        admins = [
            redis.Redis(
                port=port,
                username="admin",
                password=passwords["admin"],
                protocol=2,
                decode_responses=True,
            )
            for port in ports
        ]
        for admin in admins:
            _eventually(admin.ping)
        admins[0].execute_command("RAFT.CLUSTER", "INIT")
        for admin in admins[1:]:
            _eventually(
                lambda a=admin: a.execute_command(
                    "RAFT.CLUSTER", "JOIN", f"127.0.0.1:{ports[0]}"
                )
            )
        _eventually(lambda: _connected_peers(admins[0]) == 2 or None)
        yield ports, passwords
        for admin in admins:
            admin.close()
    finally:
        for process in processes:
            process.terminate()
        for process in processes:
            process.wait(30)


def _connected_peers(client: redis.Redis) -> int:
    info = client.info("raft")
    return sum(
        1
        for key, peer in info.items()
        if re.fullmatch(r"raft_node\d+", key) and peer["state"] == "connected"
    )


def _eventually(attempt, timeout: float = 30.0):
    deadline = time.monotonic() + timeout
    while True:
        try:
            result = attempt()
            if result is not None:
                return result
        except redis.RedisError:
            if time.monotonic() > deadline:
                raise
        assert time.monotonic() < deadline, "gave up waiting"
        time.sleep(0.1)


def test_the_shipped_redisraft_setup_serves_narad_with_least_privilege(
    tmp_path, shipped_cluster
):
    ports, passwords = shipped_cluster
    seeds = ",".join(f"127.0.0.1:{p}" for p in reversed(ports))  # a follower first
    url = f"redis://narad:{passwords['narad']}@{seeds}/0"
    node = Node(tmp_path / "node", storage_url=url, workers=1).start()
    try:
        http = node.client()
        topic = {"name": "t", "partitions": 2, "schema": {"type": "object"}}
        assert http.post("/v1/topics", topic).status == 201
        assert http.post("/v1/topics/t/produce?key=k", {"id": 1}).status == 202
        batch = {"messages": [{"value": '{"id": 2}'}, {"value": '{"id": 3}'}]}
        assert http.post("/v1/topics/t/produce/batch", batch).status == 202
        taken = http.get("/v1/topics/t/consume?wait=2s").json()
        ack = f"/v1/topics/t/ack?receipt_handle={taken['receipt_handle']}"
        assert http.post(ack).status == 204
        assert http.get("/readyz").status == 200
        metrics = http.get("/metrics").data.decode()
        assert re.search(r"^narad_storage_durable 1\.0$", metrics, re.M)
        http.close()
    finally:
        node.stop()
    assert "storage at redis://narad:***@" in node.log.read_text()

    narad = redis.Redis(
        port=ports[0], username="narad", password=passwords["narad"], protocol=2
    )
    with pytest.raises(redis.exceptions.NoPermissionError):
        narad.execute_command("RAFT.TRANSFER_LEADER")
    with pytest.raises(redis.exceptions.NoPermissionError):
        narad.flushall()
    with pytest.raises(redis.exceptions.NoPermissionError):
        narad.get("not-narads")
    with pytest.raises(redis.exceptions.NoPermissionError):
        narad.config_get("raft.cluster-password")
    narad.close()
    with pytest.raises(redis.exceptions.AuthenticationError):
        redis.Redis(port=ports[0], protocol=2).set("narad:x", 1)


def test_the_units_run_the_shipped_config():
    unit = (ROOT / "systemd" / "narad-raft.service").read_text()
    assert re.search(rf"^ExecStart=\S+redis-server {UNIT_CONF}$", unit, re.M)
    drop_in = (ROOT / "systemd" / "narad.service.d" / "redisraft.conf").read_text()
    # The nodes and the user in the unit; the password as a credential.
    assert re.search(
        r"^Environment=NARAD_STORAGE_URL=redis://narad@\S+,\S+$", drop_in, re.M
    )
    assert re.search(
        r"^LoadCredential=storage-password:/etc/narad/credentials/storage-password$",
        drop_in,
        re.M,
    )
    conf = (ROOT / "conf" / "redisraft.conf").read_text()
    assert re.search(r"^dir /var/lib/narad-raft$", conf, re.M)
    assert "StateDirectory=narad-raft" in unit
