"""The blocking client."""

from __future__ import annotations

import time
from collections.abc import Iterable
from collections.abc import Iterator
from collections.abc import Mapping
from types import TracebackType
from typing import Any
from typing import TypeVar

import httpx

from narad_client._core import BACKOFF_S
from narad_client._core import MAX_BACKOFF_S
from narad_client._core import RETRIES
from narad_client._core import TIMEOUT_S
from narad_client._core import USER_AGENT
from narad_client._core import Attempts
from narad_client._core import Call
from narad_client._core import Calls
from narad_client._core import Policy
from narad_client._core import basic_auth
from narad_client._core import handle_of
from narad_client._core import tls_verify
from narad_client._models import Message
from narad_client._models import Produced
from narad_client._models import Schema

T = TypeVar("T")


class Client:
    """A Narad node's ``/v1`` API over one keep-alive connection pool.

    Every method is one API call (or, for :meth:`topics` and :meth:`users`,
    one per page). Refusals raise the :class:`~narad_client.NaradError`
    subclass of their status; calls are retried as the package's docs say
    (connection errors and 503, with backoff, only where retrying is safe).

    Args:
        base_url: The node or load balancer, e.g. ``http://127.0.0.1:7942``.
        auth: ``(user, password)`` for HTTP Basic; None sends none.
        timeout: Seconds a request may take, on top of a long poll's wait.
        ca_file: PEM file of the CAs an ``https://`` node's certificate must
            chain to; None trusts the usual public CAs. Host names are
            always verified.
        client_cert: PEM certificate to present to a node that asks for one;
            its key is ``client_key``, or in the same file.
        client_key: PEM private key of ``client_cert``.
        retries: Attempts after the first for a call that may be retried.
        backoff: Seconds of the first backoff step; it doubles per retry,
            half of each step is random (jitter).
        max_backoff: The longest step, in seconds.
        transport: An httpx transport to use instead of the network (tests).

    Raises:
        OSError: ``ca_file``, ``client_cert`` or ``client_key`` cannot be
            read, or is not PEM (:class:`ssl.SSLError`).
    """

    def __init__(
        self,
        base_url: str,
        auth: tuple[str, str] | None = None,
        *,
        timeout: float = TIMEOUT_S,
        ca_file: str | None = None,
        client_cert: str | None = None,
        client_key: str | None = None,
        retries: int = RETRIES,
        backoff: float = BACKOFF_S,
        max_backoff: float = MAX_BACKOFF_S,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout
        self.policy = Policy(retries, backoff, max_backoff)
        self._http = httpx.Client(
            base_url=self.base_url,
            auth=basic_auth(auth),
            timeout=timeout,
            headers={"User-Agent": USER_AGENT},
            verify=tls_verify(ca_file, client_cert, client_key),
            transport=transport,
        )

    def close(self) -> None:
        """Close the connections."""
        self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def _run(self, call: Call[T]) -> T:
        attempts = Attempts(call, self.policy, self.base_url)
        while True:
            try:
                response = self._http.request(
                    call.method,
                    call.path,
                    params=call.params,
                    content=call.content,
                    headers=call.headers,
                    timeout=self.timeout + call.wait_s,
                )
            except httpx.TransportError as exc:
                delay = attempts.failed(exc)
            else:
                retry_in = attempts.answered(response)
                if retry_in is None:
                    return attempts.result
                delay = retry_in
            time.sleep(delay)

    def _pages(self, page: Any, key: str, size: int) -> Iterator[dict[str, Any]]:
        token = None
        while True:
            body = self._run(page(size, token))
            yield from body[key]
            token = body.get("next_page_token")
            if not token:
                return

    # -- topics --------------------------------------------------------------

    def create_topic(
        self,
        name: str,
        *,
        partitions: int | None = None,
        schema: Any = None,
        **settings: Any,
    ) -> dict[str, Any]:
        """Create topic ``name``; the new record.

        Args:
            partitions: 1 to 108 (the node's default is 3).
            schema: A JSON Schema as a JSON value, or its text as ``bytes``
                (sent as written: the node stores the text it gets).
            settings: Other fields of the API: ``retention_ms``,
                ``visibility_timeout_ms``, ``max_in_flight_per_partition``,
                ``max_acked_ahead_per_partition``, ``compatibility``,
                ``parent``, ``fanout_delay_ms``.
        """
        return self._run(Calls.create_topic(name, partitions, schema, settings))

    def delete_topic(self, name: str) -> None:
        """Delete a topic with its messages and schema history."""
        self._run(Calls.delete_topic(name))

    def topic(self, name: str) -> dict[str, Any]:
        """A topic's record, with ``partition_stats`` (per partition:
        ``index``, ``oldest_offset``, ``next_offset``, ``in_flight``)."""
        return self._run(Calls.topic(name))

    def topics(self, *, page_size: int = 100) -> Iterator[dict[str, Any]]:
        """Every topic record the caller may see, fetched a page at a time."""
        return self._pages(Calls.topics_page, "topics", page_size)

    def alter_topic(self, name: str, **changes: Any) -> dict[str, Any]:
        """Change a topic's settings (``retention_ms``,
        ``visibility_timeout_ms``, the caps, ``compatibility``, ``schema``
        with ``schema_base_version``); the new record."""
        return self._run(Calls.alter_topic(name, changes))

    # -- messages ------------------------------------------------------------

    def produce(
        self,
        topic: str,
        payload: bytes,
        *,
        key: str | None = None,
        partition: int | None = None,
        idempotency_key: str | None = None,
    ) -> Produced:
        """Produce one message; its body is ``payload``, byte for byte.

        Args:
            key: Routes the message to the key's partition.
            partition: Puts it in this partition instead.
            idempotency_key: Identifies the message for the node: a second
                produce with the same key stores nothing. When None, the
                client makes one (a uuid4) and sends it on every attempt of
                this call, so retries never store the message twice.
        """
        return self._run(Calls.produce(topic, payload, key, partition, idempotency_key))

    def produce_batch(
        self,
        topic: str,
        messages: Iterable[bytes | Mapping[str, Any]],
        *,
        idempotency_key: str | None = None,
    ) -> Produced:
        """Produce up to 1,000 messages, all or none.

        Args:
            messages: Each ``bytes`` (the body), or a mapping with
                ``payload`` (bytes) and optional ``key``, ``partition`` and
                ``idempotency_key`` (a key per message instead of one for
                the batch).
            idempotency_key: The batch's key; made by the client when none
                is given and no message carries its own.
        """
        return self._run(Calls.produce_batch(topic, messages, idempotency_key))

    def consume(
        self, topic: str, *, wait: float | None = None, partition: int | None = None
    ) -> Message | None:
        """Lease the next message, or None when there is none.

        Args:
            wait: Seconds to wait for a message (a long poll); None or 0
                answers at once.
            partition: Take only from this partition.
        """
        return self._run(Calls.consume(topic, wait, partition))

    def consume_batch(
        self,
        topic: str,
        *,
        max: int | None = None,
        wait: float | None = None,
        partition: int | None = None,
    ) -> list[Message]:
        """Lease up to ``max`` messages (1 to 100; the node's default is 10);
        an empty list when none came within ``wait`` seconds."""
        return self._run(Calls.consume_batch(topic, max, wait, partition))

    def ack(self, topic: str, handle: str | Message) -> None:
        """Acknowledge a message: it is done. Acking again is harmless.

        Raises:
            Gone: the lease lapsed (the message went back to the queue).
        """
        self._run(Calls.settle(topic, handle_of(handle), None))

    def ack_batch(self, topic: str, handles: Iterable[str | Message]) -> list[str]:
        """Acknowledge up to 1,000 messages; one result per handle, in order:
        ``acked``, ``lapsed``, ``acked_ahead_full`` or ``malformed``."""
        return self._run(Calls.settle_batch(topic, map(handle_of, handles), None))

    def extend(self, topic: str, handle: str | Message) -> None:
        """Renew a lease for the topic's visibility timeout, from now.

        Raises:
            Gone: the lease lapsed.
        """
        self._run(Calls.settle(topic, handle_of(handle), "true"))

    def extend_batch(self, topic: str, handles: Iterable[str | Message]) -> list[str]:
        """Renew up to 1,000 leases; one result per handle (``extended``...)."""
        return self._run(Calls.settle_batch(topic, map(handle_of, handles), True))

    def release(self, topic: str, handle: str | Message) -> None:
        """Give a message back (``extend=0``): the next consume may take it.

        Raises:
            Gone: the lease had lapsed already (on the first attempt; a 410
                after a retry means an earlier attempt gave it back).
        """
        self._run(Calls.settle(topic, handle_of(handle), "0"))

    def release_batch(self, topic: str, handles: Iterable[str | Message]) -> list[str]:
        """Give back up to 1,000 messages; one result per handle
        (``released``, or ``lapsed`` also when a retried attempt finds an
        earlier one gave it back)."""
        return self._run(Calls.settle_batch(topic, map(handle_of, handles), 0))

    def replay(self, topic: str, partition: int, offset: int) -> Message:
        """Read the message at ``offset`` of ``partition`` without leasing it.

        Raises:
            NotFound: no message there (never written, trimmed, not due yet),
                or no such topic.
        """
        return self._run(Calls.replay(topic, partition, offset))

    # -- users ---------------------------------------------------------------

    def create_user(
        self,
        username: str,
        password: str,
        grants: Iterable[Mapping[str, Any]] = (),
    ) -> dict[str, Any]:
        """Create a user; its record (``username``, ``grants``,
        ``created_at_ms``). ``grants`` are ``{"action": "produce" |
        "consume" | "create" | "admin" | "metrics", "patterns": [...]}``,
        a pattern a topic name or a prefix ending in ``*``."""
        return self._run(Calls.create_user(username, password, grants))

    def delete_user(self, username: str) -> None:
        """Delete a user."""
        self._run(Calls.delete_user(username))

    def user(self, username: str) -> dict[str, Any]:
        """A user's record (no password material)."""
        return self._run(Calls.user(username))

    def users(self, *, page_size: int = 100) -> Iterator[dict[str, Any]]:
        """Every user's record, fetched a page at a time."""
        return self._pages(Calls.users_page, "users", page_size)

    def set_grants(
        self, username: str, grants: Iterable[Mapping[str, Any]]
    ) -> dict[str, Any]:
        """Replace a user's grants; the new record."""
        return self._run(Calls.set_grants(username, grants))

    def set_password(
        self, username: str, password: str, *, current_password: str | None = None
    ) -> None:
        """Set a password: one's own (with ``current_password``), or any
        user's as an admin."""
        self._run(Calls.set_password(username, password, current_password))

    # -- schemas -------------------------------------------------------------

    def schemas(self, topic: str) -> dict[str, Any]:
        """The schema history: ``{"topic", "current_version", "total_bytes",
        "versions": [{"version", "size"}, ...]}``."""
        return self._run(Calls.schemas(topic))

    def schema(self, topic: str, version: int | str = "latest") -> Schema:
        """One schema version (``"latest"`` by default), its document as the
        node stores it."""
        return self._run(Calls.schema(topic, version))

    def set_schema(
        self, topic: str, schema: Any, *, base_version: int | None = None
    ) -> dict[str, Any]:
        """Register a new schema version (a JSON value, or its text as
        ``bytes``); the topic's record.

        Args:
            base_version: The version the change was made from: a
                :class:`~narad_client.Conflict` if the history moved on.
        """
        return self._run(Calls.set_schema(topic, schema, base_version))

    def check_schema(
        self,
        topic: str,
        schema: Any,
        *,
        against: int | str | None = None,
        mode: str | None = None,
    ) -> dict[str, Any]:
        """The dry run: would ``schema`` be accepted? Nothing is stored.

        Returns ``{"compatible", "mode", "violations": [{"pointer",
        "keyword", "message", "against_version"}, ...]}`` plus, from the
        answer's headers, ``checked_versions``, ``no_change`` and
        ``truncated``.

        Args:
            against: ``"latest"``, ``"all"`` or a version number.
            mode: A compatibility mode instead of the topic's.
        """
        return self._run(Calls.check_schema(topic, schema, against, mode))

    # -- fan-out -------------------------------------------------------------

    def attach(
        self, parent: str, child: str, *, delay_ms: int | None = None
    ) -> dict[str, Any]:
        """Attach ``child`` under ``parent`` (messages produced to the parent
        are copied to it, ``delay_ms`` later); the parent's record."""
        return self._run(Calls.attach(parent, child, delay_ms))

    def detach(self, parent: str, child: str) -> None:
        """Detach ``child`` from ``parent``."""
        self._run(Calls.detach(parent, child))

    def children(self, parent: str) -> list[dict[str, Any]]:
        """A parent's children with their lag: ``{"name", "delay_ms",
        "lag_messages", "lag_complete"}`` each."""
        return self._run(Calls.children(parent))
