"""Start real Narad nodes (gunicorn) and storage servers for integration tests."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from narad.embedded import EmbeddedValkey
from narad.embedded import free_port
from tests.httpclient import Client

ROOT = Path(__file__).resolve().parent.parent


class Node:
    """``narad serve`` in a subprocess, on a free port."""

    def __init__(
        self,
        tmp: Path,
        *,
        storage_url: str = "",
        workers: int = 2,
        env: dict[str, str] | None = None,
    ) -> None:
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.tmp = tmp
        self.log = tmp / f"node-{self.port}.log"
        self.env = {
            **os.environ,
            "NARAD_SERVER_BIND": f"127.0.0.1:{self.port}",
            "NARAD_SERVER_WORKERS": str(workers),
            "NARAD_STORAGE_URL": storage_url,
            "NARAD_STORAGE_DATA_DIR": str(tmp / "data"),
            "NARAD_VALIDATION_CAPACITY_DIR": str(tmp / "capacity"),
            "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "plugins")]),
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
        client = Client(self.base, timeout=2)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"node exited: {self.log.read_text()[-3000:]}")
            try:
                if client.get("/readyz").status == 200:
                    return
            except OSError:
                pass
            finally:
                client.close()
            time.sleep(0.05)
        raise RuntimeError(f"node not ready: {self.log.read_text()[-3000:]}")

    def client(self) -> Client:
        return Client(self.base)

    def worker_pids(self) -> list[int]:
        out = subprocess.run(
            ["pgrep", "-P", str(self.process.pid)], capture_output=True, text=True
        ).stdout
        return [int(p) for p in out.split()]

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()


def start_valkey(data_dir: Path, port: int = 0) -> EmbeddedValkey:
    server = EmbeddedValkey(data_dir, port=port)
    server.start()
    return server


def tcp_url(server: EmbeddedValkey) -> str:
    return f"redis://127.0.0.1:{server.port}/0"
