"""The embedded Valkey is private: no TCP port, nothing another user can open.

The tests run as root; the other user is ``nobody`` through ``setpriv``. The
nodes live in a world-traversable directory, so that only the permissions the
node sets itself keep the other user out (pytest's own temporary directories
are private already and would prove nothing).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
import redis

from narad.serve.embedded import EmbeddedValkey
from narad.serve.embedded import socket_path
from tests.nodes import Node

pytestmark = pytest.mark.slow

NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]

# Run as the other user: try the socket, every file, and listing every
# directory; print what happened to each.
PROBE = r"""
import json, os, socket, sys
sock, paths = sys.argv[1], sys.argv[2:]
out = {}
try:
    s = socket.socket(socket.AF_UNIX)
    s.connect(sock)
    s.sendall(b"PING\r\n")
    out[sock] = "connected: " + s.recv(64).decode()
except OSError as exc:
    out[sock] = exc.__class__.__name__
for path in paths:
    try:
        if os.path.isdir(path):
            os.listdir(path)
        else:
            open(path, "rb").read(1)
        out[path] = "read"
    except OSError as exc:
        out[path] = exc.__class__.__name__
print(json.dumps(out))
"""


@pytest.fixture
def open_dir():
    base = Path(tempfile.mkdtemp(prefix="narad-open-", dir="/tmp"))
    base.chmod(0o755)
    yield base
    shutil.rmtree(base, ignore_errors=True)


def as_other_user(sock: Path, paths: list[Path]) -> dict[str, str]:
    done = subprocess.run(
        [*NOBODY, sys.executable, "-I", "-c", PROBE, str(sock), *map(str, paths)],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(done.stdout)


def tcp_listeners(pid: int) -> list[str]:
    """The TCP sockets process ``pid`` listens on (by socket inode)."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        target = os.readlink(fd)
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A" and fields[9] in inodes:  # LISTEN
                found.append(fields[1])
    return found


def assert_private(data: Path, sock: Path, secret: bytes) -> None:
    """Only the owner can reach the server or read what it wrote."""
    assert stat.S_IMODE(data.stat().st_mode) == 0o700
    assert stat.S_IMODE(sock.parent.stat().st_mode) == 0o700
    assert stat.S_IMODE(sock.stat().st_mode) == 0o700
    files = [p for p in data.rglob("*") if p.is_file()]
    aof = [p for p in files if secret in p.read_bytes()]
    assert aof, "the produced body is on disk"
    loose = {str(p): oct(p.stat().st_mode) for p in files if p.stat().st_mode & 0o077}
    assert not loose, loose

    seen = as_other_user(sock, [data, *files])
    assert seen.pop(str(sock)) == "PermissionError"
    assert set(seen.values()) == {"PermissionError"}, seen

    owner = redis.Redis(unix_socket_path=str(sock))
    try:
        assert owner.config_get("port") == {"port": "0"}
        assert owner.info("server")["tcp_port"] == 0
        assert not tcp_listeners(owner.info("server")["process_id"])
    finally:
        owner.close()


def test_the_probe_sees_what_others_may_read(open_dir):
    """The other user does read what is world-readable: the denials below are
    the node's doing."""
    shared = open_dir / "shared.txt"
    shared.write_text("public")
    shared.chmod(0o644)
    seen = as_other_user(open_dir / "no.sock", [shared, open_dir])
    assert seen == {
        str(open_dir / "no.sock"): "FileNotFoundError",
        str(shared): "read",
        str(open_dir): "read",
    }


def test_another_user_can_neither_connect_nor_read_the_data(open_dir):
    node = Node(open_dir / "node", workers=1).start()
    try:
        http = node.client()
        assert http.post("/v1/topics", {"name": "t"}).status == 201
        assert http.post("/v1/topics/t/produce", b"top-secret-body").status == 202
        http.close()
        data = open_dir / "node" / "data"
        sock = socket_path(data)
        assert sock == data / "valkey.sock"
        assert_private(data, sock, b"top-secret-body")
    finally:
        node.stop()


def test_a_long_data_path_keeps_the_socket_private_and_tidy(open_dir):
    """A data directory too deep for sun_path puts the socket in a private
    directory of its own, still without TCP; a killed node's one is removed
    by the next start."""
    deep = open_dir / ("d" * 100)
    node = Node(deep, workers=1).start()
    data = deep / "data"
    sock = socket_path(data)
    assert sock.parent != data
    assert len(os.fsencode(sock)) <= 100
    try:
        http = node.client()
        assert http.post("/v1/topics", {"name": "t"}).status == 201
        assert http.post("/v1/topics/t/produce", b"deep-secret-body").status == 202
        http.close()
        assert_private(data, sock, b"deep-secret-body")
    finally:
        os.killpg(node.process.pid, signal.SIGKILL)  # no cleanup: a leftover
        node.process.wait()
    assert sock.parent.exists()

    again = Node(deep, workers=1).start()
    try:
        assert not sock.parent.exists()
        http = again.client()
        assert http.get("/v1/topics/t/consume").json()["payload"] == "deep-secret-body"
        http.close()
        moved = socket_path(data)
    finally:
        again.stop()
    assert again.process.returncode == 0
    assert not moved.parent.exists()  # a clean stop removes it too


def test_a_data_path_with_spaces_and_quotes_starts(tmp_path):
    """Its configuration quotes the paths: a space no longer splits them."""
    data = tmp_path / 'my "narad" data'
    server = EmbeddedValkey(data, max_memory=64 << 20)
    url = server.start()
    try:
        client = redis.Redis(unix_socket_path=str(server.socket_path))
        assert client.ping()
        assert client.config_get("dir")["dir"] == str(data)
        assert socket_path(data) == server.socket_path
        client.close()
    finally:
        server.stop()
    assert url.startswith("unix://")
