"""What the sync and async clients share: each API call as a plan (method,
path, body, whether it is safe to retry, how to read the answer), the retry
rule, and TLS settings. The clients only send plans and sleep between tries.

The retry rule
--------------

A call is retried, with exponential backoff and jitter, for at most
``retries`` more attempts, when:

- the request never reached the node (connection refused, connect timeout,
  no connection free in the pool): any call, since nothing was applied;
- the outcome is unknown (the connection broke or timed out after the
  request was sent) or the node answered 503: only a call that is
  *idempotent*, which applying twice leaves as applying once.

Idempotent calls: every read (``GET``: topics, users, schemas, children,
replay), the schema dry run, ``ack`` and ``extend`` (the API answers a
repeated ack 204 and a repeated renewal renews), ``release`` (a second give-
back finds the lease gone: after a retry that 410 is taken as done, since
the message is back either way), ``set_grants`` (a replacement), an admin's
``set_password`` (no ``current_password``), and every produce, because the
client always sends an idempotency key (the caller's or a new uuid4, the
same on every attempt of one call), so the node stores a retried message
once. A batch whose messages carry their own keys is retried only when every
message carries one.

Not idempotent, so not retried once they may have been applied: consume and
consume_batch (a lost answer would leave a message leased to nobody until
its visibility timeout), create and delete of topics and users, alter and
set_schema, attach and detach, a user's own ``set_password``. Those raise
:class:`~narad_client.Unavailable` and the caller decides.
"""

from __future__ import annotations

import base64
import enum
import json
import random
import ssl
import uuid
from collections.abc import Callable
from collections.abc import Iterable
from collections.abc import Mapping
from dataclasses import dataclass
from dataclasses import field
from typing import Any
from typing import Generic
from typing import TypeVar
from urllib.parse import quote

import httpx

from narad_client import _wire
from narad_client._errors import NaradError
from narad_client._errors import Unavailable
from narad_client._errors import UnexpectedResponse
from narad_client._errors import error_for
from narad_client._models import Message
from narad_client._models import Produced
from narad_client._models import Schema

T = TypeVar("T")

VERSION = "0.1.0"
USER_AGENT = f"narad-client/{VERSION}"
IDEMPOTENCY_HEADER = "Idempotency-Key"
REPLAYED_HEADER = "Idempotent-Replayed"

#: Default seconds a request may take, on top of a long poll's ``wait``.
TIMEOUT_S = 30.0
#: Default retries after the first attempt.
RETRIES = 4
#: Default first backoff in seconds; it doubles per retry.
BACKOFF_S = 0.1
#: Default longest backoff in seconds.
MAX_BACKOFF_S = 5.0


class Retry(enum.Enum):
    """When a call may be sent again."""

    UNSENT = "unsent"  # only when the request surely never reached the node
    IDEMPOTENT = "idempotent"  # also when the outcome is unknown, and on 503


@dataclass
class Call(Generic[T]):
    """One API call, ready to send (and send again)."""

    method: str
    path: str
    read: Callable[[httpx.Response], T]
    retry: Retry = Retry.IDEMPOTENT
    params: dict[str, Any] = field(default_factory=dict)
    content: bytes | None = None
    headers: dict[str, str] = field(default_factory=dict)
    wait_s: float = 0.0
    #: A 410 after a retry means done (a repeated give-back).
    gone_is_done: bool = False


@dataclass
class Policy:
    """The retry settings of a client."""

    retries: int = RETRIES
    backoff: float = BACKOFF_S
    max_backoff: float = MAX_BACKOFF_S

    def delay(self, retry: int, retry_after: float | None = None) -> float:
        """Seconds to wait before retry number ``retry`` (0 first): half the
        exponential step plus a random part of the other half, so that
        clients failing together spread out; at least a 503's
        ``Retry-After`` (up to ``max_backoff``)."""
        step = min(self.max_backoff, self.backoff * (2.0**retry))
        delay = step / 2 + random.uniform(0, step / 2)
        if retry_after is not None:
            delay = max(delay, min(retry_after, self.max_backoff))
        return delay


class Attempts(Generic[T]):
    """The attempts of one call: what to do after each try."""

    def __init__(self, call: Call[T], policy: Policy, base_url: str) -> None:
        self.call = call
        self.policy = policy
        self.base_url = base_url
        self.tried = 0
        self.unknown = False  # an earlier attempt may have been applied
        self.result: T  # the call's value, once done

    def failed(self, exc: httpx.TransportError) -> float:
        """After a transport error: the seconds to wait before trying again.

        Raises:
            Unavailable: not retried (the error, as the last attempt saw it).
        """
        self.tried += 1
        unsent = isinstance(
            exc, (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout)
        )
        error = Unavailable(_transport_message(self.base_url, exc))
        if unsent and _tls_refused(exc):
            raise error from exc  # a certificate does not get better
        if not unsent:
            self.unknown = True
        if self.tried > self.policy.retries or not (
            unsent or self.call.retry is Retry.IDEMPOTENT
        ):
            raise error from exc
        return self.policy.delay(self.tried - 1)

    def answered(self, response: httpx.Response) -> float | None:
        """After an answer: None when the call is done (its value is
        :attr:`result`), or the seconds to wait before trying again.

        Raises:
            NaradError: the typed error of a refusal not retried.
        """
        self.tried += 1
        status = response.status_code
        if status < 300:
            self.result = self.call.read(response)
            return None
        if status == 410 and self.call.gone_is_done and self.unknown:
            self.result = None  # type: ignore[assignment]  # a settle: T is None
            return None
        error = _error(response)
        if (
            status == 503
            and self.call.retry is Retry.IDEMPOTENT
            and self.tried <= self.policy.retries
        ):
            self.unknown = True
            retry_after = getattr(error, "retry_after", None) or _retry_after(response)
            return self.policy.delay(self.tried - 1, retry_after)
        raise error


def _retry_after(response: httpx.Response) -> float | None:
    value = response.headers.get("retry-after")
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None


def _tls_refused(exc: BaseException) -> bool:
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, ssl.SSLError):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def _transport_message(base_url: str, exc: httpx.TransportError) -> str:
    if isinstance(exc, httpx.TimeoutException):
        return f"{base_url} did not answer in time ({type(exc).__name__}: {exc})"
    return f"cannot reach {base_url} ({type(exc).__name__}: {exc})"


def _error(response: httpx.Response) -> NaradError:
    status = response.status_code
    message = None
    try:
        body = response.json()
        if isinstance(body, dict):
            message = body.get("error") or body.get("description") or body.get("title")
    except ValueError:
        pass
    if 300 <= status < 400:
        # Nothing reached a node (an http:// address a proxy sends on to
        # https://, say): the request's address says which one answered.
        where = response.headers.get("location")
        message = f"{response.request.url} answered HTTP {status}" + (
            f", a redirect to {where} (not followed)" if where else ""
        )
    elif not isinstance(message, str) or not message:
        text = response.text.strip()[:200]
        message = f"HTTP {status}" + (f": {text}" if text else "")
    return error_for(status, message, response.headers)


# -- settings -----------------------------------------------------------------


def tls_verify(
    ca_file: str | None, client_cert: str | None, client_key: str | None
) -> ssl.SSLContext | bool:
    """What verifies an ``https://`` node: the public CAs (True), or a
    context trusting ``ca_file`` and presenting ``client_cert``."""
    if ca_file is None and client_cert is None:
        return True
    context = ssl.create_default_context(cafile=ca_file)
    if client_cert is not None:
        context.load_cert_chain(client_cert, client_key)
    return context


def basic_auth(auth: tuple[str, str] | None) -> httpx.BasicAuth | None:
    return None if auth is None else httpx.BasicAuth(auth[0], auth[1])


# -- reading answers ----------------------------------------------------------


def _not_narad(response: httpx.Response, missing: str) -> UnexpectedResponse:
    """The error of a success that is not the API's answer: another server
    at that address (a wrong port or path)?"""
    return UnexpectedResponse(
        f"{response.request.url} answered {response.status_code} without "
        f"{missing}: is it a Narad node?",
        response.status_code,
        response.headers,
    )


def _json(response: httpx.Response) -> Any:
    try:
        return response.json()
    except ValueError:
        raise _not_narad(response, "JSON") from None


def _nothing(response: httpx.Response) -> None:
    return None


def _text(response: httpx.Response) -> str:
    try:
        return response.content.decode("utf-8")
    except UnicodeDecodeError:
        raise _not_narad(response, "UTF-8 text") from None


def _message(response: httpx.Response) -> Message | None:
    if response.status_code == 204 or not response.content:
        return None
    try:
        return _wire.message(_text(response))
    except UnexpectedResponse as exc:
        raise _not_narad(response, "a Narad message") from exc


def _messages(response: httpx.Response) -> list[Message]:
    if response.status_code == 204 or not response.content:
        return []
    try:
        return _wire.batch(_text(response))
    except UnexpectedResponse as exc:
        raise _not_narad(response, "a Narad message batch") from exc


def _member(name: str) -> Callable[[httpx.Response], Any]:
    def read(response: httpx.Response) -> Any:
        body = _json(response)
        if not isinstance(body, dict) or name not in body:
            raise _not_narad(response, f"{name!r} in its JSON")
        return body[name]

    return read


def _schema(response: httpx.Response) -> Schema:
    version = response.headers.get("narad-schema-version", "")
    if not version.isdigit():
        raise _not_narad(response, "a Narad-Schema-Version")
    return Schema(int(version), response.content)


# -- building calls -----------------------------------------------------------


def path(*segments: str) -> str:
    """``/v1/...`` with each segment percent-encoded."""
    return "/v1/" + "/".join(quote(str(s), safe="") for s in segments)


def _params(**values: Any) -> dict[str, Any]:
    return {k: v for k, v in values.items() if v is not None}


def _wait(wait: float | None) -> tuple[str | None, float]:
    """A long poll's ``wait`` in seconds: the query value (milliseconds) and
    the seconds to add to the request's timeout."""
    if wait is None:
        return None, 0.0
    if wait < 0:
        raise ValueError("wait must be at least 0 seconds")
    ms = round(wait * 1000)
    return f"{ms}ms", ms / 1000


def json_body(body: Mapping[str, Any]) -> bytes:
    """A JSON object; a member whose value is ``bytes`` is JSON text sent as
    written (a schema keeps its key order and number spellings: the node
    stores the text it gets)."""
    parts = []
    for name, value in body.items():
        if isinstance(value, (bytes, bytearray, memoryview)):
            text = bytes(value)
        else:
            text = json.dumps(value, ensure_ascii=False).encode("utf-8")
        parts.append(json.dumps(name).encode() + b":" + text)
    return b"{" + b",".join(parts) + b"}"


_JSON = {"Content-Type": "application/json"}


def _payload(payload: Any, what: str = "payload") -> bytes:
    if isinstance(payload, (bytes, bytearray, memoryview)):
        return bytes(payload)
    raise TypeError(
        f"{what} must be bytes, not {type(payload).__name__}"
        + (
            " (encode text first, e.g. text.encode())"
            if isinstance(payload, str)
            else ""
        )
    )


def new_idempotency_key() -> str:
    """A fresh idempotency key: a uuid4 in hex."""
    return uuid.uuid4().hex


class Calls:
    """Every API call as a :class:`Call`."""

    # topics

    @staticmethod
    def create_topic(
        name: str, partitions: int | None, schema: Any, settings: Mapping[str, Any]
    ) -> Call[dict[str, Any]]:
        body: dict[str, Any] = {"name": name, **settings}
        if partitions is not None:
            body["partitions"] = partitions
        if schema is not None:
            body["schema"] = schema
        return Call(
            "POST",
            "/v1/topics",
            _json,
            Retry.UNSENT,
            content=json_body(body),
            headers=dict(_JSON),
        )

    @staticmethod
    def delete_topic(name: str) -> Call[None]:
        return Call("DELETE", path("topics", name), _nothing, Retry.UNSENT)

    @staticmethod
    def topic(name: str) -> Call[dict[str, Any]]:
        return Call("GET", path("topics", name), _json)

    @staticmethod
    def topics_page(limit: int, token: str | None) -> Call[dict[str, Any]]:
        return Call(
            "GET", "/v1/topics", _json, params=_params(limit=limit, page_token=token)
        )

    @staticmethod
    def alter_topic(name: str, changes: Mapping[str, Any]) -> Call[dict[str, Any]]:
        return Call(
            "PATCH",
            path("topics", name),
            _json,
            Retry.UNSENT,
            content=json_body(changes),
            headers=dict(_JSON),
        )

    # messages

    @staticmethod
    def produce(
        topic: str,
        payload: bytes,
        key: str | None,
        partition: int | None,
        idempotency_key: str | None,
    ) -> Call[Produced]:
        body = _payload(payload)
        token = idempotency_key or new_idempotency_key()

        def read(response: httpx.Response) -> Produced:
            replayed = response.headers.get(REPLAYED_HEADER) == "true"
            return Produced(token, 1, 1 if replayed else 0, replayed)

        return Call(
            "POST",
            path("topics", topic, "produce"),
            read,
            params=_params(key=key or None, partition=partition),
            content=body,
            headers={
                "Content-Type": "application/octet-stream",
                IDEMPOTENCY_HEADER: token,
            },
        )

    @staticmethod
    def produce_batch(
        topic: str, messages: Iterable[Any], idempotency_key: str | None
    ) -> Call[Produced]:
        entries = [_entry(item, i) for i, item in enumerate(messages)]
        keyed = [e for e in entries if "idempotency_key" in e]
        headers = dict(_JSON)
        token: str | None = None
        if keyed:
            if idempotency_key is not None:
                raise ValueError(
                    "give one idempotency_key for the batch or one per message, "
                    "not both"
                )
            retry = Retry.IDEMPOTENT if len(keyed) == len(entries) else Retry.UNSENT
        else:
            token = idempotency_key or new_idempotency_key()
            headers[IDEMPOTENCY_HEADER] = token
            retry = Retry.IDEMPOTENT

        def read(response: httpx.Response) -> Produced:
            body = _json(response)
            return Produced(
                token,
                int(body.get("accepted", len(entries))),
                int(body.get("duplicates", 0)),
                response.headers.get(REPLAYED_HEADER) == "true",
            )

        return Call(
            "POST",
            path("topics", topic, "produce", "batch"),
            read,
            retry,
            content=json_body({"messages": entries}),
            headers=headers,
        )

    @staticmethod
    def consume(
        topic: str, wait: float | None, partition: int | None
    ) -> Call[Message | None]:
        value, seconds = _wait(wait)
        return Call(
            "GET",
            path("topics", topic, "consume"),
            _message,
            Retry.UNSENT,
            params=_params(wait=value, partition=partition),
            wait_s=seconds,
        )

    @staticmethod
    def consume_batch(
        topic: str, max: int | None, wait: float | None, partition: int | None
    ) -> Call[list[Message]]:
        value, seconds = _wait(wait)
        return Call(
            "GET",
            path("topics", topic, "consume", "batch"),
            _messages,
            Retry.UNSENT,
            params=_params(max=max, wait=value, partition=partition),
            wait_s=seconds,
        )

    @staticmethod
    def replay(topic: str, partition: int, offset: int) -> Call[Message]:
        def read(response: httpx.Response) -> Message:
            message = _message(response)
            if message is None:
                raise UnexpectedResponse(
                    "replay answered no message", response.status_code
                )
            return message

        return Call(
            "GET",
            path("topics", topic, "consume"),
            read,
            params={"partition": partition, "offset": offset},
        )

    @staticmethod
    def settle(topic: str, handle: str, extend: str | None) -> Call[None]:
        return Call(
            "POST",
            path("topics", topic, "ack"),
            _nothing,
            params=_params(receipt_handle=handle, extend=extend),
            gone_is_done=extend == "0",
        )

    @staticmethod
    def settle_batch(
        topic: str, handles: Iterable[str], extend: bool | int | None
    ) -> Call[list[str]]:
        body: dict[str, Any] = {"receipt_handles": list(handles)}
        if extend is not None:
            body["extend"] = extend
        return Call(
            "POST",
            path("topics", topic, "ack", "batch"),
            _member("results"),
            content=json_body(body),
            headers=dict(_JSON),
        )

    # users

    @staticmethod
    def create_user(
        username: str, password: str, grants: Iterable[Mapping[str, Any]]
    ) -> Call[dict[str, Any]]:
        body = {
            "username": username,
            "password": password,
            "grants": [dict(g) for g in grants],
        }
        return Call(
            "POST",
            "/v1/users",
            _json,
            Retry.UNSENT,
            content=json_body(body),
            headers=dict(_JSON),
        )

    @staticmethod
    def delete_user(username: str) -> Call[None]:
        return Call("DELETE", path("users", username), _nothing, Retry.UNSENT)

    @staticmethod
    def user(username: str) -> Call[dict[str, Any]]:
        return Call("GET", path("users", username), _json)

    @staticmethod
    def users_page(limit: int, token: str | None) -> Call[dict[str, Any]]:
        return Call(
            "GET", "/v1/users", _json, params=_params(limit=limit, page_token=token)
        )

    @staticmethod
    def set_grants(
        username: str, grants: Iterable[Mapping[str, Any]]
    ) -> Call[dict[str, Any]]:
        body = {"grants": [dict(g) for g in grants]}
        return Call(
            "PUT",
            path("users", username, "grants"),
            _json,
            content=json_body(body),
            headers=dict(_JSON),
        )

    @staticmethod
    def set_password(
        username: str, password: str, current_password: str | None
    ) -> Call[None]:
        body = {"password": password}
        if current_password is not None:
            body["current_password"] = current_password
        return Call(
            "PUT",
            path("users", username, "password"),
            _nothing,
            Retry.IDEMPOTENT if current_password is None else Retry.UNSENT,
            content=json_body(body),
            headers=dict(_JSON),
        )

    # schemas

    @staticmethod
    def schemas(topic: str) -> Call[dict[str, Any]]:
        return Call("GET", path("topics", topic, "schemas"), _json)

    @staticmethod
    def schema(topic: str, version: int | str) -> Call[Schema]:
        return Call("GET", path("topics", topic, "schemas", str(version)), _schema)

    @staticmethod
    def set_schema(
        topic: str, schema: Any, base_version: int | None
    ) -> Call[dict[str, Any]]:
        changes: dict[str, Any] = {"schema": schema}
        if base_version is not None:
            changes["schema_base_version"] = base_version
        return Calls.alter_topic(topic, changes)

    @staticmethod
    def check_schema(
        topic: str, schema: Any, against: int | str | None, mode: str | None
    ) -> Call[dict[str, Any]]:
        body: dict[str, Any] = {"schema": schema}
        if against is not None:
            body["against"] = against
        if mode is not None:
            body["mode"] = mode

        def read(response: httpx.Response) -> dict[str, Any]:
            report: dict[str, Any] = _json(response)
            checked = response.headers.get("narad-checked-versions")
            report["checked_versions"] = (
                [int(v) for v in checked.split(",")] if checked else []
            )
            report["no_change"] = response.headers.get("narad-no-change") == "true"
            report["truncated"] = (
                response.headers.get("narad-report-truncated") == "true"
            )
            return report

        return Call(
            "POST",
            path("topics", topic, "schemas", "compatibility"),
            read,
            content=json_body(body),
            headers=dict(_JSON),
        )

    # children

    @staticmethod
    def attach(parent: str, child: str, delay_ms: int | None) -> Call[dict[str, Any]]:
        body: dict[str, Any] = {"child": child}
        if delay_ms is not None:
            body["delay_ms"] = delay_ms
        return Call(
            "POST",
            path("topics", parent, "children"),
            _json,
            Retry.UNSENT,
            content=json_body(body),
            headers=dict(_JSON),
        )

    @staticmethod
    def detach(parent: str, child: str) -> Call[None]:
        return Call(
            "DELETE", path("topics", parent, "children", child), _nothing, Retry.UNSENT
        )

    @staticmethod
    def children(parent: str) -> Call[list[dict[str, Any]]]:
        return Call("GET", path("topics", parent, "children"), _member("children"))


def handle_of(handle: str | Message) -> str:
    """The receipt handle ``handle`` is or carries."""
    if isinstance(handle, Message):
        if handle.receipt_handle is None:
            raise ValueError("a replayed message holds no lease")
        return handle.receipt_handle
    return handle


def _entry(item: Any, index: int) -> dict[str, Any]:
    """A batch entry of the API from ``bytes`` or a mapping with ``payload``
    and optional ``key``, ``partition``, ``idempotency_key``."""
    if isinstance(item, (bytes, bytearray, memoryview)):
        item = {"payload": item}
    if not isinstance(item, Mapping):
        raise TypeError(
            f"messages[{index}] must be bytes or a mapping with a payload, not "
            f"{type(item).__name__}"
        )
    unknown = set(item) - {"payload", "key", "partition", "idempotency_key"}
    if unknown:
        raise TypeError(f"messages[{index}]: unknown field {sorted(unknown)[0]!r}")
    payload = _payload(item.get("payload"), f"messages[{index}].payload")
    entry: dict[str, Any]
    try:
        entry = {"value": payload.decode("utf-8")}
    except UnicodeDecodeError:
        entry = {"value_base64": base64.b64encode(payload).decode("ascii")}
    for name in ("key", "partition", "idempotency_key"):
        if item.get(name) is not None and item.get(name) != "":
            entry[name] = item[name]
    return entry
