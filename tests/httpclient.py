"""A small stdlib HTTP client for tests against a real server.

Test nodes run with security on and a known root admin password
(:data:`ADMIN`): the client sends those credentials unless told otherwise.
"""

from __future__ import annotations

import base64
import http.client
import json
import threading
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

#: The root admin of every test node (tests/nodes.py sets its password).
ADMIN = ("admin", "narad-test-admin-password")


def basic(user: str, password: str) -> str:
    """An ``Authorization`` header value of HTTP Basic credentials."""
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


@dataclass
class Response:
    """A response; ``headers`` are keyed by lowercase name."""

    status: int
    headers: dict[str, str]
    data: bytes

    def __post_init__(self) -> None:
        self.headers = {k.lower(): v for k, v in self.headers.items()}

    def json(self) -> Any:
        return json.loads(self.data)

    @property
    def error(self) -> str:
        return self.json()["error"]


class Client:
    """One keep-alive connection per thread to ``base`` (http://host:port).

    A request that finds its kept-alive connection closed is sent once more
    on a fresh one, POSTs included: fine for ordinary tests, wrong for tests
    that kill servers mid-request and count outcomes (those use their own
    client that never resends). Every request carries ``auth`` (the root
    admin by default; ``None`` for none) unless its headers name their own
    ``Authorization``.
    """

    def __init__(
        self,
        base: str,
        timeout: float = 30.0,
        auth: tuple[str, str] | None = ADMIN,
        source: str | None = None,
    ) -> None:
        parts = urlsplit(base)
        self.host, self.port = parts.hostname, parts.port
        self.timeout = timeout
        self.source = (source, 0) if source else None  # a loopback address
        self.authorization = basic(*auth) if auth is not None else None
        self._local = threading.local()

    def _conn(self) -> http.client.HTTPConnection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = http.client.HTTPConnection(
                self.host, self.port, timeout=self.timeout, source_address=self.source
            )
            self._local.conn = conn
        return conn

    def request(
        self,
        method: str,
        path: str,
        body: bytes | str | dict | None = None,
        headers: dict[str, str] | None = None,
    ) -> Response:
        if isinstance(body, dict):
            body = json.dumps(body)
        if isinstance(body, str):
            body = body.encode()
        headers = self.with_auth(headers)
        for attempt in range(2):
            conn = self._conn()
            try:
                conn.request(method, path, body=body, headers=headers)
                raw = conn.getresponse()
                data = raw.read()
                if raw.getheader("connection", "").lower() == "close":
                    self.close()
                return Response(raw.status, dict(raw.getheaders()), data)
            except (
                http.client.RemoteDisconnected,
                ConnectionResetError,
                BrokenPipeError,
            ):
                self.close()
                if attempt:
                    raise
        raise AssertionError("unreachable")

    def with_auth(self, headers: dict[str, str] | None) -> dict[str, str]:
        """``headers`` plus the client's credentials, unless they name some."""
        headers = dict(headers or {})
        if self.authorization is not None and not any(
            name.lower() == "authorization" for name in headers
        ):
            headers["Authorization"] = self.authorization
        return headers

    def get(self, path: str, **kw: Any) -> Response:
        return self.request("GET", path, **kw)

    def post(self, path: str, body: Any = None, **kw: Any) -> Response:
        return self.request("POST", path, body, **kw)

    def patch(self, path: str, body: Any = None, **kw: Any) -> Response:
        return self.request("PATCH", path, body, **kw)

    def put(self, path: str, body: Any = None, **kw: Any) -> Response:
        return self.request("PUT", path, body, **kw)

    def delete(self, path: str, **kw: Any) -> Response:
        return self.request("DELETE", path, **kw)

    def close(self) -> None:
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None
