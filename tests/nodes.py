"""Start real Narad nodes (gunicorn) and storage servers for integration tests."""

from __future__ import annotations

import http.client
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from narad.serve.embedded import EmbeddedValkey
from tests.httpclient import ADMIN
from tests.httpclient import Client

ROOT = Path(__file__).resolve().parent.parent


def free_port() -> int:
    """A port no socket holds at any address, IPv4 or IPv6: a node bound to
    ``[::]`` needs that, and one found free on 127.0.0.1 alone may be held
    at another address (a dual-stack test's node once failed to start so)."""
    try:
        with socket.socket(socket.AF_INET6) as s:
            s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
            s.bind(("::", 0))
            return s.getsockname()[1]
    except OSError:  # no IPv6 here: every IPv4 address
        with socket.socket() as s:
            s.bind(("", 0))
            return s.getsockname()[1]


class Node:
    """``narad serve`` in a subprocess, on a free port.

    Security is on, as by default, with the root admin's password
    :data:`tests.httpclient.ADMIN` (clients send it) and cheap password
    hashes; failed logins from the tests' one address are allowed a large
    burst, so that tests of refusals do not lock the others out (the rate
    limit has a test of its own). ``env`` overrides any of it.

    ``tls`` (a :class:`tests.tlscerts.Pki`) serves HTTPS with its server
    certificate; ``client_ca`` also asks clients for certificates its CA
    signed. :meth:`client_context` verifies the node.
    """

    def __init__(
        self,
        tmp: Path,
        *,
        storage_url: str = "",
        workers: int = 2,
        env: dict[str, str] | None = None,
        tls: Any = None,
        client_ca: bool = False,
    ) -> None:
        self.port = free_port()
        self.tls = tls
        scheme = "https" if tls is not None else "http"
        self.base = f"{scheme}://127.0.0.1:{self.port}"
        tls_env = {}
        if tls is not None:
            tls_env = {
                "NARAD_SERVER_TLS_CERT": str(tls.server_cert),
                "NARAD_SERVER_TLS_KEY": str(tls.server_key),
            }
            if client_ca:
                tls_env["NARAD_SERVER_TLS_CLIENT_CA"] = str(tls.ca)
        self.tmp = tmp
        tmp.mkdir(parents=True, exist_ok=True)
        self.log = tmp / f"node-{self.port}.log"
        self.env = {
            **os.environ,
            "NARAD_SERVER_BIND": f"127.0.0.1:{self.port}",
            "NARAD_SERVER_WORKERS": str(workers),
            "NARAD_STORAGE_URL": storage_url,
            "NARAD_STORAGE_DATA_DIR": str(tmp / "data"),
            "NARAD_VALIDATION_CAPACITY_DIR": str(tmp / "capacity"),
            "NARAD_ADMIN_PASSWORD": ADMIN[1],
            "NARAD_SECURITY_SCRYPT_LOG2_N": "10",
            "NARAD_SECURITY_FAILURES_BURST": "100000",
            "NARAD_SECURITY_ADDRESS_FAILURES_BURST": "100000",
            "NARAD_SECURITY_USER_FAILURES_BURST": "100000",
            "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "plugins")]),
            **tls_env,
            **(env or {}),
        }
        self.process: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 30.0) -> Node:
        with self.log.open("ab") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "narad.cli", "serve"],
                env=self.env,
                cwd=self.tmp,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self.wait_ready(timeout)
        return self

    def wait_ready(self, timeout: float = 30.0) -> None:
        context = self.client_context() if self.tls is not None else None
        wait_ready(self.base, self.process, self.log, timeout, context=context)

    def client_context(self, **kw: Any) -> Any:
        """An ``ssl.SSLContext`` that verifies this node's certificate
        (``kw``: :meth:`tests.tlscerts.Pki.client_context`'s)."""
        return self.tls.client_context(**kw)

    def client(self) -> Client:
        return Client(self.base)

    def access_lines(self, request_id: str, timeout: float = 5.0) -> list[str]:
        """The node's access-log lines for ``request_id``, once one shows."""
        deadline = time.monotonic() + timeout
        while True:
            log = self.log.read_text(errors="replace")
            lines = [line for line in log.splitlines() if line.endswith(request_id)]
            if lines or time.monotonic() >= deadline:
                return lines
            time.sleep(0.05)

    def worker_pids(self) -> list[int]:
        """The gunicorn workers (the embedded Valkey is a child too)."""
        out = subprocess.run(
            ["pgrep", "-P", str(self.process.pid)], capture_output=True, text=True
        ).stdout
        pids = [int(p) for p in out.split()]
        return [p for p in pids if not _command(p).startswith("valkey")]

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()


def wait_ready(
    base: str,
    process: subprocess.Popen,
    log: Path,
    timeout: float = 30.0,
    *,
    context: Any = None,
) -> None:
    """Wait until the node at ``base`` answers /readyz 200; RuntimeError with
    the end of its ``log`` if ``process`` exits first or time runs out.
    ``context``: the ``ssl.SSLContext`` of an HTTPS node."""
    client = Client(base, timeout=2)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"node exited: {log.read_text()[-3000:]}")
        if context is not None:
            if _https_ready(base, context):
                return
            time.sleep(0.05)
            continue
        try:
            if client.get("/readyz").status == 200:
                return
        except OSError:
            pass
        finally:
            client.close()
        time.sleep(0.05)
    raise RuntimeError(f"node not ready: {log.read_text()[-3000:]}")


def _https_ready(base: str, context: Any) -> bool:
    parts = urlsplit(base)
    conn = http.client.HTTPSConnection(
        parts.hostname, parts.port, timeout=2, context=context
    )
    try:
        conn.request("GET", "/readyz")
        return conn.getresponse().status == 200
    except OSError:
        return False
    finally:
        conn.close()


def _command(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


class TcpValkey(EmbeddedValkey):
    """A Valkey on a TCP port of loopback, standing in for an external storage
    server (the embedded one has no TCP port). ``extra`` lines override its
    configuration; ``start()`` again after ``kill()`` restarts it on its data."""

    def __init__(self, data_dir: Path, port: int = 0, extra: tuple = ()) -> None:
        super().__init__(data_dir, max_memory=256 << 20)
        self.port = port or free_port()
        self.extra = extra

    def config_lines(self) -> list[str]:
        return [
            *super().config_lines(),
            f"port {self.port}",
            "bind 127.0.0.1",
            *self.extra,
        ]

    @property
    def tcp_url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"


def start_valkey(data_dir: Path, port: int = 0, extra: tuple = ()) -> TcpValkey:
    server = TcpValkey(data_dir, port, extra)
    server.start()
    return server


def tcp_url(server: TcpValkey) -> str:
    return server.tcp_url
