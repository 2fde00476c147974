"""A local HTTP server that answers from a script, for the retry tests.

Each request takes the next step of the script (the last one repeats):
``(status, headers, body)`` answers so; :data:`DROP` reads the request and
closes the connection without an answer; ``FORWARD`` sends the request on
to a real node and answers with its answer; ``FORWARD_DROP`` sends it on
and then closes the connection without passing the answer back (the node
applied it; the client cannot know). Every request is recorded.
"""

from __future__ import annotations

import http.client
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler
from http.server import ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

DROP = "drop"
FORWARD = "forward"
FORWARD_DROP = "forward-drop"


@dataclass
class Seen:
    """A request the fake server received."""

    method: str
    path: str
    headers: dict[str, str]
    body: bytes


class FakeServer:
    def __init__(self, script: list[Any], upstream: str | None = None) -> None:
        self.script = list(script)
        self.upstream = urlsplit(upstream) if upstream else None
        self.seen: list[Seen] = []
        self._lock = threading.Lock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def _any(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                headers = {k.lower(): v for k, v in self.headers.items()}
                with fake._lock:
                    fake.seen.append(Seen(self.command, self.path, headers, body))
                    step = fake.script[0]
                    if len(fake.script) > 1:
                        fake.script.pop(0)
                if step == DROP:
                    self.close_connection = True
                    return
                if step in (FORWARD, FORWARD_DROP):
                    status, answer_headers, answer = fake.forward(
                        self.command, self.path, headers, body
                    )
                    if step == FORWARD_DROP:
                        self.close_connection = True
                        return
                else:
                    status, answer_headers, answer = step
                self.send_response(status)
                for name, value in answer_headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _any

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.base = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(
            target=self.server.serve_forever, args=(0.05,), daemon=True
        )

    def forward(
        self, method: str, path: str, headers: dict[str, str], body: bytes
    ) -> tuple[int, dict[str, str], bytes]:
        assert self.upstream is not None
        conn = http.client.HTTPConnection(
            self.upstream.hostname, self.upstream.port, timeout=30
        )
        try:
            sent = {k: v for k, v in headers.items() if k not in ("host", "connection")}
            conn.request(method, path, body=body or None, headers=sent)
            response = conn.getresponse()
            data = response.read()
            kept = {
                k: v
                for k, v in response.getheaders()
                if k.lower()
                not in ("content-length", "connection", "transfer-encoding")
            }
            return response.status, kept, data
        finally:
            conn.close()

    def __enter__(self) -> FakeServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
