"""A client of the Narad ``/v1`` HTTP API, for programs and for the ``narad`` CLI.

One :class:`Client` holds one keep-alive connection pool (httpx) and the
HTTP Basic credentials it sends on every request. Each method is one API
call and returns the server's JSON as plain values; a refusal raises
:class:`Refused` (a 4xx: the request was understood and said no) and a node
that cannot answer raises :class:`Unavailable` (no connection, a timeout, a
5xx), each carrying the server's own ``error`` message::

    from narad.client import Client

    with Client("http://127.0.0.1:7942", user="admin", password="...") as narad:
        narad.create_topic("orders", partitions=3)
        narad.produce("orders", b'{"id": 1}', key="order-1")
        message = narad.consume("orders", wait="5s")
        narad.ack("orders", message["receipt_handle"])
"""

from __future__ import annotations

import json
import re
import ssl
from collections.abc import Iterator
from collections.abc import Mapping
from collections.abc import Sequence
from typing import Any
from urllib.parse import quote

import httpx

__all__ = (
    "DEFAULT_URL",
    "Client",
    "ClientError",
    "Refused",
    "Unavailable",
    "tls_context",
)

DEFAULT_URL = "http://127.0.0.1:7942"
#: Seconds a request may take on top of any long-poll wait it asks for.
TIMEOUT_S = 30.0


class ClientError(Exception):
    """A request that did not succeed.

    Attributes:
        status: The HTTP status, or 0 when no response came.
        message: The server's ``error`` message (or what went wrong).
    """

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


class Refused(ClientError):
    """The node refused the request (a 4xx): retrying it unchanged will not help."""


class Unavailable(ClientError):
    """The node did not answer, or could not serve the request now (a 5xx)."""


def tls_context(
    ca_file: str | None = None,
    client_cert: str | None = None,
    client_key: str | None = None,
) -> ssl.SSLContext | bool:
    """What verifies an ``https://`` node: the public CAs (``True``), or a
    context trusting ``ca_file`` and presenting ``client_cert``.

    Raises:
        ClientError: a file that cannot be read as PEM (status 0).
    """
    if ca_file is None and client_cert is None:
        return True
    try:
        context = ssl.create_default_context(cafile=ca_file)
        if client_cert is not None:
            context.load_cert_chain(client_cert, client_key)
    except (OSError, ssl.SSLError) as exc:
        raise ClientError(0, f"TLS files cannot be used: {exc}") from exc
    return context


def encode_body(body: Any) -> bytes:
    """A request body as JSON; in an object, a member whose value is
    ``bytes`` is taken as JSON text and sent as written (a schema keeps its
    key order and number spellings: the node stores the text it gets)."""
    if not isinstance(body, Mapping) or not any(
        isinstance(v, bytes) for v in body.values()
    ):
        return json.dumps(body).encode()
    members = [
        json.dumps(name).encode()
        + b": "
        + (value if isinstance(value, bytes) else json.dumps(value).encode())
        for name, value in body.items()
    ]
    return b"{" + b", ".join(members) + b"}"


def _path(*segments: str) -> str:
    return "/" + "/".join(quote(s, safe="") for s in segments)


def _params(**values: Any) -> dict[str, Any]:
    """Query parameters, without those left out (None)."""
    return {k: v for k, v in values.items() if v is not None}


class Client:
    """The Narad HTTP API over one connection pool.

    Args:
        url: The node (or load balancer), e.g. ``http://127.0.0.1:7942``.
        user: User name for HTTP Basic auth; None sends no credentials.
        password: Its password.
        timeout: Seconds each request may take, on top of a long poll's wait.
        transport: An httpx transport (tests pass ``httpx.WSGITransport`` to
            drive an app in-process).
        ca_file: PEM file of the CA certificates an ``https://`` node's
            certificate must chain to; None trusts the usual public CAs.
            Certificates are always verified, host names included.
        client_cert: PEM certificate (chain) to present to a node that asks
            for one (``server.tls_client_ca``); its key is ``client_key``,
            or in the same file.
        client_key: PEM private key of ``client_cert``.
    """

    def __init__(
        self,
        url: str = DEFAULT_URL,
        *,
        user: str | None = None,
        password: str | None = None,
        timeout: float = TIMEOUT_S,
        transport: httpx.BaseTransport | None = None,
        ca_file: str | None = None,
        client_cert: str | None = None,
        client_key: str | None = None,
    ) -> None:
        self.url = url.rstrip("/")
        self.user = user
        self.timeout = timeout
        auth = httpx.BasicAuth(user, password or "") if user else None
        self._http = httpx.Client(
            base_url=self.url,
            auth=auth,
            timeout=timeout,
            transport=transport,
            headers={"User-Agent": "narad-cli"},
            verify=tls_context(ca_file, client_cert, client_key),
        )

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- plumbing ------------------------------------------------------------

    def request(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, Any] | None = None,
        json_body: Any = None,
        content: bytes | None = None,
        headers: Mapping[str, str] | None = None,
        wait_s: float = 0.0,
    ) -> httpx.Response:
        """Send one request; the response if its status is 2xx.

        Raises:
            Refused: a 4xx answer, with the server's message, or a redirect
                (3xx, not followed).
            Unavailable: no answer (connection refused or lost, timeout) or
                a 5xx answer.
        """
        if json_body is not None:
            content = encode_body(json_body)
            headers = {"Content-Type": "application/json", **(headers or {})}
        try:
            response = self._http.request(
                method,
                path,
                params=params,
                content=content,
                headers=headers,
                timeout=self.timeout + wait_s,
            )
        except httpx.TimeoutException as exc:
            raise Unavailable(0, f"{self.url} did not answer in time ({exc})") from exc
        except httpx.TransportError as exc:
            raise Unavailable(0, f"cannot reach {self.url}: {exc}") from exc
        if response.status_code < 300:
            return response
        if response.status_code < 400:
            # Not followed: nothing reached a node (an http:// address that
            # a proxy sends to https://, say), so it is no success.
            where = response.headers.get("Location")
            moved = f", moved to {where}" if where else ""
            raise Refused(
                response.status_code,
                f"{self.url} answered HTTP {response.status_code}{moved}",
            )
        message = _error_message(response)
        if response.status_code >= 500:
            raise Unavailable(response.status_code, message)
        raise Refused(response.status_code, message)

    def _json(self, method: str, path: str, **kwargs: Any) -> Any:
        response = self.request(method, path, **kwargs)
        if not response.content:
            return None
        try:
            return response.json()
        except ValueError as exc:
            raise self._not_narad(response) from exc

    def _not_narad(self, response: httpx.Response) -> Unavailable:
        """What to raise for a success that is not the API's JSON: another
        server at that address (a wrong port or path)."""
        return Unavailable(
            response.status_code,
            f"{self.url} answered {response.request.url.path} with "
            f"HTTP {response.status_code} but not JSON: is it a Narad node?",
        )

    # -- health --------------------------------------------------------------

    def ready(self) -> dict[str, Any]:
        """``/readyz``: raises :class:`Unavailable` (503) with the reason when
        the node cannot take writes."""
        return self._json("GET", "/readyz")

    def metrics(self) -> str:
        """``/metrics`` in the Prometheus text format."""
        return self.request("GET", "/metrics").text

    # -- topics --------------------------------------------------------------

    def list_topics(
        self, *, limit: int | None = None, page_token: str | None = None
    ) -> dict[str, Any]:
        """One page: ``{"topics": [...], "next_page_token": ...}``."""
        return self._json(
            "GET", "/v1/topics", params=_params(limit=limit, page_token=page_token)
        )

    def _pages(self, path: str, key: str, size: int) -> Iterator[dict[str, Any]]:
        """Every item of a keyset-paginated list (``{key: [...],
        "next_page_token": ...}``), one request per page."""
        token = None
        while True:
            page = self._json("GET", path, params=_params(limit=size, page_token=token))
            yield from page[key]
            token = page.get("next_page_token")
            if not token:
                return

    def iter_topics(self, *, page_size: int = 1000) -> Iterator[dict[str, Any]]:
        """Every topic record, page after page."""
        return self._pages("/v1/topics", "topics", page_size)

    def topic(self, name: str) -> dict[str, Any]:
        """The topic's record with its ``partition_stats``."""
        return self._json("GET", _path("v1", "topics", name))

    def create_topic(
        self, name: str, *, schema: Any = None, **settings: Any
    ) -> dict[str, Any]:
        """Create ``name`` with ``settings`` (``partitions``, ``retention_ms``,
        ``parent``...) and ``schema`` (a JSON value, or its text as bytes);
        the new record."""
        body = {"name": name, **settings}
        if schema is not None:
            body["schema"] = schema
        return self._json("POST", "/v1/topics", json_body=body)

    def alter_topic(self, name: str, **changes: Any) -> dict[str, Any]:
        """PATCH the topic's settings (or ``schema``); the new record."""
        return self._json("PATCH", _path("v1", "topics", name), json_body=changes)

    def delete_topic(self, name: str) -> None:
        self.request("DELETE", _path("v1", "topics", name))

    # -- fan-out -------------------------------------------------------------

    def children(self, parent: str) -> dict[str, Any]:
        """``{"parent": ..., "children": [{"name", "delay_ms", "lag_messages",
        "lag_complete"}, ...]}``."""
        return self._json("GET", _path("v1", "topics", parent, "children"))

    def attach(self, parent: str, child: str, *, delay_ms: int = 0) -> dict[str, Any]:
        """Attach ``child`` under ``parent``; the parent's record."""
        body = {"child": child}
        if delay_ms:
            body["delay_ms"] = delay_ms
        return self._json(
            "POST", _path("v1", "topics", parent, "children"), json_body=body
        )

    def detach(self, parent: str, child: str) -> None:
        self.request("DELETE", _path("v1", "topics", parent, "children", child))

    # -- schemas -------------------------------------------------------------

    def schemas(self, name: str) -> dict[str, Any]:
        """The history: ``{"topic", "current_version", "total_bytes",
        "versions": [{"version", "size"}, ...]}``."""
        return self._json("GET", _path("v1", "topics", name, "schemas"))

    def schema(self, name: str, version: int | str = "latest") -> tuple[int, bytes]:
        """``(version, document)``: the stored document, byte for byte."""
        response = self.request(
            "GET", _path("v1", "topics", name, "schemas", str(version))
        )
        return int(response.headers["Narad-Schema-Version"]), response.content

    def check_schema(
        self,
        name: str,
        schema: Any,
        *,
        against: int | str | None = None,
        mode: str | None = None,
    ) -> dict[str, Any]:
        """The dry run: would ``schema`` (a JSON value, or its text as bytes)
        be accepted? ``{"compatible", "mode", "violations": [...], ...}``;
        nothing is stored. ``against`` (``"latest"``, ``"all"`` or a
        version) and ``mode`` default to what the topic's mode checks."""
        body: dict[str, Any] = {"schema": schema}
        if against is not None:
            body["against"] = against
        if mode is not None:
            body["mode"] = mode
        return self._json(
            "POST",
            _path("v1", "topics", name, "schemas", "compatibility"),
            json_body=body,
        )

    def set_schema(
        self, name: str, schema: Any, *, base_version: int | None = None
    ) -> dict[str, Any]:
        """A new schema version (PATCH; ``schema`` a JSON value, or its text
        as bytes); the topic's record."""
        body: dict[str, Any] = {"schema": schema}
        if base_version is not None:
            body["schema_base_version"] = base_version
        return self.alter_topic(name, **body)

    # -- messages ------------------------------------------------------------

    def produce(
        self,
        topic: str,
        body: bytes,
        *,
        key: str | None = None,
        partition: int | None = None,
        idempotency_key: str | None = None,
    ) -> bool:
        """Produce one message; True when an earlier attempt with the same
        ``idempotency_key`` had stored it (nothing was stored this time)."""
        headers = {"Idempotency-Key": idempotency_key} if idempotency_key else None
        response = self.request(
            "POST",
            _path("v1", "topics", topic, "produce"),
            params=_params(key=key, partition=partition),
            content=body,
            headers=headers,
        )
        return response.headers.get("Idempotent-Replayed") == "true"

    def produce_batch(
        self,
        topic: str,
        messages: Sequence[Mapping[str, Any]],
        *,
        idempotency_key: str | None = None,
    ) -> dict[str, Any]:
        """Produce up to 1,000 messages all or nothing: ``{"accepted": n}``
        (and ``"duplicates"`` when idempotency keys were given). Each
        message is ``{"value" or "value_base64", "key", "partition",
        "idempotency_key"}``."""
        headers = {"Idempotency-Key": idempotency_key} if idempotency_key else None
        return self._json(
            "POST",
            _path("v1", "topics", topic, "produce", "batch"),
            json_body={"messages": list(messages)},
            headers=headers,
        )

    def consume(
        self, topic: str, *, wait: str | None = None, partition: int | None = None
    ) -> dict[str, Any] | None:
        """Lease one message, or None when there is none (after ``wait``,
        a duration such as ``"5s"``)."""
        return self._json(
            "GET",
            _path("v1", "topics", topic, "consume"),
            params=_params(wait=wait, partition=partition),
            wait_s=_seconds(wait),
        )

    def consume_batch(
        self,
        topic: str,
        *,
        max_messages: int = 10,
        wait: str | None = None,
        partition: int | None = None,
    ) -> list[dict[str, Any]]:
        """Lease up to ``max_messages`` (at most 100); [] when none came."""
        raw = self.consume_batch_raw(
            topic, max_messages=max_messages, wait=wait, partition=partition
        )
        return [json.loads(message) for message in raw]

    def consume_batch_raw(
        self,
        topic: str,
        *,
        max_messages: int = 10,
        wait: str | None = None,
        partition: int | None = None,
    ) -> list[bytes]:
        """:meth:`consume_batch`, each message as the JSON text the node
        wrote (a JSON payload byte for byte, which decoding and encoding
        again could change: ``1e400``, ``1.50``)."""
        response = self.request(
            "GET",
            _path("v1", "topics", topic, "consume", "batch"),
            params=_params(max=max_messages, wait=wait, partition=partition),
            wait_s=_seconds(wait),
        )
        if not response.content:
            return []
        if not response.content.lstrip().startswith(b"{"):
            raise self._not_narad(response)
        return raw_elements(response.content)

    def ack(self, topic: str, receipt_handle: str) -> None:
        self.request(
            "POST",
            _path("v1", "topics", topic, "ack"),
            params={"receipt_handle": receipt_handle},
        )

    def settle_batch(
        self,
        topic: str,
        receipt_handles: Sequence[str],
        *,
        extend: bool | int | None = None,
    ) -> list[str]:
        """Ack (``extend`` None), renew (True) or give back (0) up to 1,000
        leases at once: one result per handle (``acked``, ``lapsed``...)."""
        body: dict[str, Any] = {"receipt_handles": list(receipt_handles)}
        if extend is not None:
            body["extend"] = extend
        answer = self._json(
            "POST", _path("v1", "topics", topic, "ack", "batch"), json_body=body
        )
        return answer["results"]

    def read(self, topic: str, partition: int, offset: int) -> dict[str, Any] | None:
        """Replay: the message at ``offset`` (no lease), or None when the
        offset holds none (never written, trimmed, or not due yet)."""
        raw = self.read_raw(topic, partition, offset)
        return None if raw is None else json.loads(raw)

    def read_raw(self, topic: str, partition: int, offset: int) -> bytes | None:
        """:meth:`read` as the JSON text the node wrote."""
        try:
            response = self.request(
                "GET",
                _path("v1", "topics", topic, "consume"),
                params={"partition": partition, "offset": offset},
            )
        except Refused as exc:
            if exc.status == 404 and f"no message at offset {offset}" in exc.message:
                return None
            raise
        return response.content.rstrip(b"\n")

    # -- users ---------------------------------------------------------------

    def users(self) -> Iterator[dict[str, Any]]:
        """Every user (no password material), page after page."""
        return self._pages("/v1/users", "users", 1000)

    def get_user(self, name: str) -> dict[str, Any]:
        """A user's record: ``{"username", "grants", "created_at_ms"}``."""
        return self._json("GET", _path("v1", "users", name))

    def create_user(
        self, name: str, password: str, grants: Sequence[Mapping[str, Any]] = ()
    ) -> dict[str, Any]:
        """Create a user; ``grants`` are ``{"action", "patterns": [...]}``."""
        return self._json(
            "POST",
            "/v1/users",
            json_body={"username": name, "password": password, "grants": list(grants)},
        )

    def set_grants(
        self, name: str, grants: Sequence[Mapping[str, Any]]
    ) -> dict[str, Any]:
        return self._json(
            "PUT", _path("v1", "users", name, "grants"), json_body={"grants": grants}
        )

    def set_password(
        self, name: str, password: str, *, current_password: str | None = None
    ) -> None:
        """A user's own change (with ``current_password``), or an admin's reset."""
        body = {"password": password}
        if current_password is not None:
            body["current_password"] = current_password
        self.request("PUT", _path("v1", "users", name, "password"), json_body=body)

    def delete_user(self, name: str) -> None:
        self.request("DELETE", _path("v1", "users", name))


_TOKENS = re.compile(rb'"(?:[^"\\]|\\.)*"|[\[\]{},]')


def raw_elements(document: bytes) -> list[bytes]:
    """The text of each element of the array in a one-member JSON object
    (``{"messages": [...]}``), as written."""
    elements: list[bytes] = []
    depth, start = 0, -1
    for match in _TOKENS.finditer(document):
        token = match.group()
        if token[:1] == b'"':
            continue
        if token in b"[{":
            depth += 1
            if depth == 2 and token == b"[":
                start = match.end()
        elif token in b"]}":
            if depth == 2 and token == b"]":
                item = document[start : match.start()].strip()
                if item:
                    elements.append(item)
            depth -= 1
        elif depth == 2:  # a comma between elements
            elements.append(document[start : match.start()].strip())
            start = match.end()
    return elements


def _error_message(response: httpx.Response) -> str:
    try:
        error = response.json().get("error")
    except (ValueError, AttributeError):
        error = None
    if isinstance(error, str) and error:
        return error
    text = response.text.strip()[:200]
    return f"HTTP {response.status_code}" + (f": {text}" if text else "")


def _seconds(duration: str | None) -> float:
    """Seconds in a wait such as ``500ms``, ``5s`` or ``5000`` (milliseconds),
    to lengthen the request's timeout; the server checks the value itself."""
    text = (duration or "").strip()
    scale = 0.001
    if text.endswith("ms"):
        text = text[:-2]
    elif text.endswith("s"):
        text, scale = text[:-1], 1.0
    return int(text) * scale if text.isdigit() else 0.0
