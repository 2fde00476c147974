"""Smoke test of an installed release: run by ``scripts/release-check`` with
the Python of a fresh virtualenv that holds only the built wheel, from a
directory outside the source tree, so nothing of the checkout can stand in
for what the wheel misses.

    python smoke.py NARAD_EXECUTABLE PLUGIN [PLUGIN ...]

It starts ``narad serve`` (embedded storage, a free port, security on),
and checks readiness, a schema topic created, a produce accepted and a bad
one refused with 400, a consume and its ack, 401 without credentials, and
that ``narad plugins`` lists every built-in plugin. Only the standard
library is used here: the client side must not borrow the artifact's code.
"""

from __future__ import annotations

import base64
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

READY_WITHIN_S = 60


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class Node:
    def __init__(self, base: str, password_file: Path) -> None:
        self.base = base
        self.password_file = password_file
        self.auth: str | None = None

    def login(self) -> None:
        password = self.password_file.read_text().strip()
        token = base64.b64encode(f"admin:{password}".encode()).decode()
        self.auth = f"Basic {token}"

    def call(
        self, method: str, path: str, body: bytes | None = None, auth: bool = True
    ) -> tuple[int, bytes]:
        request = urllib.request.Request(self.base + path, data=body, method=method)
        if auth and self.auth:
            request.add_header("Authorization", self.auth)
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                return response.status, response.read()
        except urllib.error.HTTPError as refusal:
            return refusal.code, refusal.read()


class Failed(Exception):
    """A check that did not pass; the node's log is shown with it."""


def expect(what: str, got: int, wanted: int, body: bytes = b"") -> None:
    if got != wanted:
        raise Failed(f"{what}: {got} (wanted {wanted}) {body[:300]!r}")
    print(f"smoke: {what}: {got}")


def wait_ready(node: Node, server: subprocess.Popen) -> None:
    deadline = time.monotonic() + READY_WITHIN_S
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise Failed(f"narad serve exited {server.returncode} before ready")
        try:
            if node.call("GET", "/readyz", auth=False)[0] == 200:
                return
        except OSError:
            pass
        time.sleep(0.2)
    raise Failed(f"not ready within {READY_WITHIN_S} s")


def check_node(node: Node) -> None:
    status, body = node.call("GET", "/v1/topics", auth=False)
    expect("no credentials", status, 401, body)
    node.login()
    schema = {
        "type": "object",
        "required": ["id"],
        "properties": {"id": {"type": "integer"}},
    }
    create = json.dumps({"name": "orders", "partitions": 1, "schema": schema})
    status, body = node.call("POST", "/v1/topics", create.encode())
    expect("schema topic created", status, 201, body)
    status, body = node.call("POST", "/v1/topics/orders/produce", b'{"id": 1}')
    expect("produce accepted", status, 202, body)
    status, body = node.call("POST", "/v1/topics/orders/produce", b'{"id": "x"}')
    expect("produce refused by the schema", status, 400, body)
    status, body = node.call("GET", "/v1/topics/orders/consume?wait=5s")
    expect("consume", status, 200, body)
    message = json.loads(body)
    if message["payload"] != {"id": 1}:
        raise Failed(f"consumed {message['payload']!r}, not the produced message")
    handle = urllib.request.quote(message["receipt_handle"], safe="")
    status, body = node.call("POST", f"/v1/topics/orders/ack?receipt_handle={handle}")
    expect("ack", status, 204, body)


def check_plugins(narad: str, plugins: list[str]) -> None:
    listed = subprocess.run(
        [narad, "plugins"], capture_output=True, text=True, check=True
    ).stdout
    names = {line.split(" ", 1)[0] for line in listed.splitlines() if line}
    missing = sorted(set(plugins) - names)
    if missing:
        raise Failed(f"narad plugins does not list {', '.join(missing)}")
    print(f"smoke: narad plugins lists all {len(plugins)} built-in plugins")


def main(narad: str, plugins: list[str]) -> None:
    with tempfile.TemporaryDirectory(prefix="narad-smoke-") as workdir:
        port = free_port()
        log = Path(workdir, "serve.log")
        env = {
            **{k: v for k, v in os.environ.items() if not k.startswith("NARAD_")},
            "NARAD_SERVER_WORKERS": "2",
        }
        server = subprocess.Popen(
            [narad, "serve", "--bind", f"127.0.0.1:{port}"],
            cwd=workdir,
            env=env,
            stdout=log.open("wb"),
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            node = Node(
                f"http://127.0.0.1:{port}", Path(workdir, "narad-data/admin-password")
            )
            wait_ready(node, server)
            check_node(node)
        except Failed as failure:
            sys.stderr.write(log.read_text(errors="replace"))
            sys.exit(f"smoke: {failure}")
        finally:
            server.send_signal(signal.SIGTERM)
            try:
                server.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(server.pid, signal.SIGKILL)
                server.wait()
        if server.returncode != 0:
            sys.stderr.write(log.read_text(errors="replace"))
            sys.exit(f"smoke: narad serve exited {server.returncode} on SIGTERM")
    try:
        check_plugins(narad, plugins)
    except Failed as failure:
        sys.exit(f"smoke: {failure}")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
