"""A node as operators run it: start, readiness, concurrent creates, shutdown."""

from __future__ import annotations

import base64
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import narad_redis
from narad.config import Config
from narad.serve.embedded import socket_path
from narad.storage import Entry
from narad.storage import PayloadKind
from tests.httpclient import ADMIN
from tests.httpclient import Client
from tests.nodes import Node

HOUR = 3_600_000


def valkey_pids_under(directory) -> list[int]:
    """PIDs of the embedded valkey-server of the data directory ``directory``.

    Valkey retitles itself ``valkey-server unixsocket:<path>``, so find it by
    the socket its config names.
    """
    sock = socket_path(directory)
    out = subprocess.run(
        ["pgrep", "-f", f"valkey-server unixsocket:{sock}$"],
        capture_output=True,
        text=True,
    ).stdout
    return [int(p) for p in out.split()]


def wait_until(condition, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return False


def test_concurrent_creates_of_one_name_yield_exactly_one_201(node, topic):
    statuses: list[int] = []
    barrier = threading.Barrier(24)

    def create() -> None:
        client = node.client()
        barrier.wait()
        statuses.append(client.post("/v1/topics", {"name": topic}).status)
        client.close()

    threads = [threading.Thread(target=create) for _ in range(24)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(statuses) == [201] + [409] * 23


def test_the_node_logs_its_plugins_once_at_start(node):
    log = node.log.read_text()
    # Each worker binds its own socket (reuse_port): gunicorn's line would
    # name no address.
    assert f"Listening at: http://127.0.0.1:{node.port} (" in log
    assert log.count("plugin narad_redis (narad ") == 1
    assert (
        "storage schemes redis, rediss, unix, redis+cluster, rediss+cluster; "
        "settings [plugins.redis] "
    ) in log
    assert log.count("plugin narad_draft202012 (narad ") == 1


def test_a_plugin_setting_of_the_wrong_shape_stops_start_up(tmp_path):
    node = Node(tmp_path, env={"NARAD_PLUGINS_REDIS_SOCKET_TIMEOUT_MS": "soon"})
    with pytest.raises(RuntimeError):
        node.start(timeout=10)
    assert "`plugins.redis.socket_timeout_ms`" in node.log.read_text()


def test_topics_api_over_http(http, topic):
    resp = http.post("/v1/topics", {"name": topic, "partitions": 2})
    assert resp.status == 201
    assert http.get(f"/v1/topics/{topic}").json()["partition_stats"][1]["index"] == 1
    assert (
        http.patch(f"/v1/topics/{topic}", {"retention_ms": 0}).json()["retention_ms"]
        == 0
    )
    assert http.post("/v1/topics", {"name": topic}).status == 409
    assert http.post("/v1/topics", {"name": "bad name"}).status == 400
    assert http.post("/v1/topics", b"{" + b" " * (1 << 20) + b"}").status == 413
    assert http.delete(f"/v1/topics/{topic}").status == 204
    assert http.get(f"/v1/topics/{topic}").status == 404


def test_a_topics_stats_leave_out_what_retention_no_longer_keeps(
    http, topic, storage_url
):
    # Messages that aged out while nothing wrote to the topic: its record
    # counts only what a replay or a consume could still get.
    created = http.post("/v1/topics", {"name": topic, "retention_ms": HOUR})
    assert created.status == 201
    storage = narad_redis.connect(storage_url, Config.load(env={}))
    try:
        meta = storage.get_topic(topic)
        aged = int(time.time() * 1000) - 2 * HOUR
        entries = [Entry(0, b"", b"old", PayloadKind.TEXT)] * 3
        assert storage.append(meta, entries, schema_version=0, now_ms=aged).count == 3
        leased = storage.reserve(meta, [0], nonce="n" * 16, now_ms=aged)
        assert leased.message.offset == 0
    finally:
        storage.close()
    stats = http.get(f"/v1/topics/{topic}").json()["partition_stats"][0]
    assert stats == {"index": 0, "oldest_offset": 3, "next_offset": 3, "in_flight": 0}
    assert http.get(f"/v1/topics/{topic}/consume?partition=0&offset=0").status == 404


def test_embedded_storage_starts_and_stops_with_the_node(tmp_path):
    node = Node(tmp_path, workers=2).start()  # no storage URL: embedded Valkey
    try:
        data = tmp_path / "data"
        assert (data / "appendonlydir").is_dir()
        conf = (data / "valkey.conf").read_text()
        assert "appendonly yes" in conf
        assert "appendfsync always" in conf
        assert len(valkey_pids_under(data)) == 1
        client = node.client()
        assert client.post("/v1/topics", {"name": "t"}).status == 201
        assert client.post("/v1/topics/t/produce", b"kept").status == 202
        client.close()
    finally:
        node.stop()
    assert node.process.returncode == 0
    assert wait_until(lambda: not valkey_pids_under(tmp_path / "data"))

    # The data survives a restart on the same directory.
    again = Node(tmp_path, workers=1).start()
    try:
        client = again.client()
        message = client.get("/v1/topics/t/consume").json()
        assert message["payload"] == "kept"
        client.close()
    finally:
        again.stop()
    assert wait_until(lambda: not valkey_pids_under(tmp_path / "data"))


def test_embedded_storage_does_not_outlive_a_killed_node(tmp_path):
    node = Node(tmp_path, workers=1).start()
    data = tmp_path / "data"
    assert valkey_pids_under(data)
    os.killpg(node.process.pid, signal.SIGKILL)  # master and workers, no cleanup
    node.process.wait()
    assert wait_until(lambda: not valkey_pids_under(data))


def test_ctrl_c_stops_the_node_before_its_storage(tmp_path):
    # Ctrl-C at a terminal signals the whole foreground process group at once.
    # The embedded server must not take it: it would exit while the workers
    # still serve, and the supervisor would restart it on the way out.
    node = Node(tmp_path, workers=1).start()
    data = tmp_path / "data"
    assert valkey_pids_under(data)
    os.killpg(node.process.pid, signal.SIGINT)
    assert node.process.wait(30) == 0
    log = node.log.read_text()
    assert "embedded Valkey exited" not in log
    assert "restarting embedded Valkey" not in log
    assert wait_until(lambda: not valkey_pids_under(data))


def refused_start(where: Path, storage_url: str, **env: str) -> str:
    """Start a one-worker node that must refuse to: it exits 2 before
    serving. Its log."""
    node = Node(where, storage_url=storage_url, workers=1, env=env)
    try:
        with pytest.raises(RuntimeError, match="node exited"):
            node.start(timeout=20)
    finally:
        node.stop()
    assert node.process.returncode == 2
    return node.log.read_text()


def test_a_node_refuses_a_port_another_node_listens_on(node, storage_url, tmp_path):
    # Each worker binds its own socket with SO_REUSEPORT, which the kernel
    # would let it share with the other node: both would take connections.
    log = refused_start(
        tmp_path, storage_url, NARAD_SERVER_BIND=f"127.0.0.1:{node.port}"
    )
    assert f"`server.bind` 127.0.0.1:{node.port} is in use" in log
    assert "Booting worker" not in log


@pytest.mark.parametrize("where", ["/proc", "a-file/capacity"])
def test_a_capacity_dir_the_node_cannot_write_stops_start_up(
    storage_url, tmp_path, where
):
    # Found at start, naming the setting: not a worker's traceback, nor a 500
    # for every costly validation once the node serves.
    (tmp_path / "a-file").write_text("")
    log = refused_start(
        tmp_path, storage_url, NARAD_VALIDATION_CAPACITY_DIR=str(tmp_path / where)
    )
    assert "`validation.capacity_dir`" in log
    assert "Traceback" not in log


@pytest.mark.parametrize("bind", ["10.255.255.1:7942", "nosuchhost.invalid:7942"])
def test_a_node_refuses_an_address_it_cannot_listen_on(storage_url, tmp_path, bind):
    # Each worker binds for itself: without a check at start they failed and
    # were restarted forever, the node never serving and never exiting.
    log = refused_start(tmp_path, storage_url, NARAD_SERVER_BIND=bind)
    assert f"`server.bind` {bind} cannot be listened on" in log


@pytest.mark.parametrize("where", ["no-such-dir/narad.sock", "a-file"])
def test_a_node_refuses_a_unix_path_it_cannot_listen_on(storage_url, tmp_path, where):
    # As for TCP (README: exit status 2 naming the setting), not gunicorn's
    # five "connection to ... failed" retries and exit status 1, nor its
    # traceback for a file that is not a socket.
    (tmp_path / "a-file").write_text("kept")
    bind = f"unix:{tmp_path / where}"
    log = refused_start(tmp_path, storage_url, NARAD_SERVER_BIND=bind)
    assert f"`server.bind` {bind} cannot be listened on" in log
    assert "Traceback" not in log
    assert (tmp_path / "a-file").read_text() == "kept"


def test_a_node_serves_on_a_unix_socket(storage_url, tmp_path):
    # server.bind = "unix:PATH" (documented): every worker answers on it.
    # Bound per worker with SO_REUSEPORT, as TCP is, it never served.
    import socket

    path = tmp_path / "narad.sock"
    node = Node(
        tmp_path,
        storage_url=storage_url,
        workers=2,
        env={"NARAD_SERVER_BIND": f"unix:{path}"},
    )
    node.process = None
    with node.log.open("ab") as log:
        node.process = subprocess.Popen(
            [sys.executable, "-m", "narad.cli", "serve"],
            env=node.env,
            cwd=tmp_path,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    credentials = base64.b64encode(":".join(ADMIN).encode()).decode()

    def get(route: str) -> bytes:
        with socket.socket(socket.AF_UNIX) as conn:
            conn.settimeout(10)
            conn.connect(str(path))
            conn.sendall(
                f"GET {route} HTTP/1.1\r\nHost: x\r\n"
                f"Authorization: Basic {credentials}\r\n\r\n".encode()
            )
            return conn.recv(4096)

    def ready() -> bool:
        try:
            return get("/readyz").startswith(b"HTTP/1.1 200")
        except OSError:
            return False

    try:
        assert wait_until(ready, timeout=30), node.log.read_text()[-3000:]
        for _ in range(10):
            answer = get("/metrics")
            assert answer.startswith(b"HTTP/1.1 200")
        assert " ERROR " not in node.log.read_text()
        # A second node on the same path is refused, not handed the path.
        log = refused_start(
            tmp_path / "second", storage_url, NARAD_SERVER_BIND=f"unix:{path}"
        )
        assert f"`server.bind` unix:{path} is in use" in log
        assert ready()
    finally:
        node.stop()
    assert node.process.returncode == 0
    assert not path.exists()


def test_readiness_follows_storage(tmp_path):
    from tests.nodes import start_valkey
    from tests.nodes import tcp_url

    storage = start_valkey(tmp_path / "valkey")
    node = Node(
        tmp_path,
        storage_url=tcp_url(storage),
        workers=1,
        env={"NARAD_PLUGINS_REDIS_RETRY_ATTEMPTS": "1"},
    ).start()
    try:
        client = Client(node.base, timeout=10)
        assert client.get("/readyz").status == 200
        storage.kill()
        assert wait_until(lambda: client.get("/readyz").status == 503)
        assert client.get("/healthz").status == 200
        resp = client.get("/v1/topics")
        assert resp.status == 503
        assert resp.json() == {"error": "storage unavailable, retry"}
        storage.start()
        assert wait_until(lambda: client.get("/readyz").status == 200)
        client.close()
    finally:
        node.stop()
        storage.stop()


def test_the_embedded_storage_refuses_an_empty_data_dir(tmp_path):
    # Empty means "no data directory" for an external storage; the embedded
    # one would take over the working directory and its files.
    (tmp_path / "notes.txt").write_text("mine")
    (tmp_path / "notes.txt").chmod(0o644)
    tmp_path.chmod(0o755)
    node = Node(tmp_path, env={"NARAD_STORAGE_DATA_DIR": ""})
    try:
        with pytest.raises(RuntimeError):
            node.start(timeout=10)
    finally:
        node.stop()
    assert node.process.returncode == 2
    assert "`storage.data_dir` is empty" in node.log.read_text()
    assert tmp_path.stat().st_mode & 0o777 == 0o755
    assert (tmp_path / "notes.txt").stat().st_mode & 0o777 == 0o644
    assert not (tmp_path / "appendonlydir").exists()


@pytest.mark.parametrize(
    "setting", ["NARAD_SERVER_WORKERS=zero", "NARAD_STORAGE_URL=nowhere"]
)
def test_bad_setting_stops_start_up_naming_it(tmp_path, setting):
    name, value = setting.split("=")
    node = Node(tmp_path, env={name: value})
    with pytest.raises(RuntimeError):
        node.start(timeout=10)
    key = name.removeprefix("NARAD_").lower().replace("_", ".", 1)
    assert f"`{key}`" in node.log.read_text()


def test_a_reload_with_a_broken_file_leaves_narad_serve_serving(storage_url, tmp_path):
    # `narad serve` keeps the settings it started with; its new workers read
    # the file again and stopped the node at a reload (SIGHUP) after a typo.
    toml = tmp_path / "narad.toml"
    toml.write_text("[server]\nkeepalive = 30\n")
    node = Node(tmp_path, storage_url=storage_url, env={"NARAD_CONFIG": str(toml)})
    node.start()
    try:
        before = set(node.worker_pids())
        toml.write_text("[server\n")
        node.process.send_signal(signal.SIGHUP)
        deadline = time.monotonic() + 60
        while (workers := set(node.worker_pids())) & before or len(workers) != 2:
            assert node.process.poll() is None, node.log.read_text()[-3000:]
            assert time.monotonic() < deadline, node.log.read_text()[-3000:]
            time.sleep(0.05)
        node.wait_ready()
        http = node.client()
        assert http.get("/healthz").status == 200
        http.close()
        assert set(node.worker_pids()) == workers
    finally:
        node.stop()
    assert node.process.returncode == 0
