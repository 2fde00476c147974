"""Produce, consume, ack and replay under ``/v1/topics/{name}``, one message
at a time or in batches."""

from __future__ import annotations

import base64
import binascii
import json
import re
from typing import Any

import falcon

from narad import jsontext
from narad.broker.messages import Delivery
from narad.broker.messages import MessageService
from narad.broker.messages import Outgoing
from narad.broker.messages import Produced
from narad.errors import InvalidArgument
from narad.http import dumps
from narad.http import encode
from narad.http.body import integer
from narad.http.body import param
from narad.http.body import parse_json
from narad.http.body import query_duration_ms
from narad.http.body import query_int
from narad.http.body import read_body
from narad.http.body import refuse_unknown
from narad.http.topics import check_name
from narad.quoting import quote
from narad.security.access import authorize
from narad.security.access import reauthorize
from narad.security.grants import Action
from narad.storage import PayloadKind
from narad.storage import Settle

MAX_BATCH = 1000
BATCH_ENTRY_FIELDS = ("value", "value_base64", "key", "partition", "idempotency_key")
IDEMPOTENCY_HEADER = "Idempotency-Key"
#: Answered ``true`` when every message of a produce was stored by an earlier
#: attempt with the same idempotency key (nothing was stored this time).
REPLAYED_HEADER = "Idempotent-Replayed"
_IDEMPOTENCY_KEY = re.compile(r"[\x21-\x7e]{1,255}")
DEFAULT_CONSUME_BATCH = 10
MAX_CONSUME_BATCH = 100
MAX_ACK_BATCH = 1000
ACK_BATCH_FIELDS = ("receipt_handles", "extend")
_ENTRY_FIELDS = frozenset(BATCH_ENTRY_FIELDS)
_new_tuple = tuple.__new__
_LEASED_JSON = (
    b'{"topic":"%s","partition":%d,"offset":%d,"key":%s,"timestamp":%d,'
    b'"receipt_handle":"%s","payload":%s}'
)


class Produce:
    def __init__(self, messages: MessageService) -> None:
        self.messages = messages

    def on_post(self, req: falcon.Request, resp: falcon.Response, name: str) -> None:
        authorize(req, Action.PRODUCE, check_name(name))
        key = _utf8(param(req, "key") or "", "key")
        partition = query_int(req, "partition")
        idempotency_key = _request_key(req)
        body = read_body(req)
        produced = self.messages.produce(
            name, [Outgoing(body, key, partition)], idempotency_key=idempotency_key
        )
        _replayed(resp, produced)
        resp.status = falcon.HTTP_202

    def on_post_batch(
        self, req: falcon.Request, resp: falcon.Response, name: str
    ) -> None:
        authorize(req, Action.PRODUCE, check_name(name))
        idempotency_key = _request_key(req)
        outgoing = _batch(read_body(req), keyed_request=idempotency_key is not None)
        produced = self.messages.produce(
            name, outgoing, batch=True, idempotency_key=idempotency_key
        )
        _replayed(resp, produced)
        resp.status = falcon.HTTP_202
        answer = {"accepted": produced.accepted}
        if idempotency_key is not None or any(o.idempotency_key for o in outgoing):
            answer["duplicates"] = produced.repeated
        resp.text = dumps(answer)


def _idempotency_key(value: Any, what: str) -> str:
    if not isinstance(value, str) or not _IDEMPOTENCY_KEY.fullmatch(value):
        shown = quote(value) if isinstance(value, str) else "not a string"
        raise InvalidArgument(
            f"{what} must be 1 to 255 visible ASCII characters, got {shown}"
        )
    return value


def _request_key(req: falcon.Request) -> str | None:
    value = req.get_header(IDEMPOTENCY_HEADER)
    return None if value is None else _idempotency_key(value, IDEMPOTENCY_HEADER)


def _replayed(resp: falcon.Response, produced: Produced) -> None:
    if produced.repeated and not produced.stored:
        resp.set_header(REPLAYED_HEADER, "true")


def _utf8(text: str, what: str, index: int | None = None) -> bytes:
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        # A lone surrogate ("\ud800" in JSON): UTF-8 cannot hold it, and
        # storing its CESU-8 bytes would hand consumers invalid UTF-8.
        where = "" if index is None else f"messages[{index}]: "
        raise InvalidArgument(
            f"{where}{what} holds a lone surrogate, which UTF-8 cannot store"
        ) from None


def _batch(data: bytes, *, keyed_request: bool) -> list[Outgoing]:
    outgoing = _accepted_at_once(data)
    if outgoing is None:
        outgoing = _checked_one_by_one(data)
    first_with: dict[str, int] = {}
    for index, item in enumerate(outgoing):
        key = item.idempotency_key
        if key is None:
            continue
        if keyed_request:
            raise InvalidArgument(
                f"messages[{index}]: idempotency_key given with the "
                f"{IDEMPOTENCY_HEADER} header: give one key for the request or "
                "one per message, not both"
            )
        if key in first_with:
            raise InvalidArgument(
                f"messages[{index}]: idempotency_key {quote(key)} repeats "
                f"messages[{first_with[key]}]'s"
            )
        first_with[key] = index
    return outgoing


def _checked_one_by_one(data: bytes) -> list[Outgoing]:
    """The batch by the strict parser, refusals in their order: the body's
    own (not JSON, a repeated key, too deep...), then its shape, then each
    entry's."""
    _, items = _listed(data, "messages", ("messages",), MAX_BATCH)
    return [_entry(item, index) for index, item in enumerate(items)]


def _listed(
    data: bytes, field: str, fields: tuple[str, ...], most: int
) -> tuple[dict[str, Any], list[Any]]:
    """A batch body ``{field: [...], ...}`` by the strict parser, and its
    list: the body's own refusals first, then its shape, then unknown
    fields (of ``fields``), then an empty list or one over ``most``."""
    body = parse_json(data)
    if not isinstance(body, dict) or not isinstance(body.get(field), list):
        raise InvalidArgument(f'request body must be {{"{field}": [...]}}')
    refuse_unknown(body, fields)
    items = body[field]
    if not items:
        raise InvalidArgument(f"{field} must not be empty")
    if len(items) > most:
        raise InvalidArgument(f"{field} holds {len(items)} entries; at most {most}")
    return body, items


def _accepted_at_once(data: bytes) -> list[Outgoing] | None:
    """The batch when the C first pass (``jsontext.loads_pairs``) proves it
    valid, else None, and the strict path answers (with its refusal).

    Proof that this is the strict path's answer: the text passed every
    rule of ``jsontext.loads`` but three, which are checked here. Repeated
    keys: the envelope has one member and each entry's keys are counted.
    Nesting and long integers: an entry whose value is an object or an
    array, or a number but an in-range ``partition``, is refused by
    :func:`_entry`, and any refusal sends the body to the strict path. So
    an accepted body nests three levels, repeats no key and holds no
    integer beyond 2**53, and its entries are the same dicts.
    """
    body = jsontext.loads_pairs(data)
    if type(body) is not tuple or len(body) != 1:
        return None
    name, items = body[0]
    if name != "messages" or type(items) is not list or not items:
        return None
    if len(items) > MAX_BATCH:
        return None
    outgoing: list[Outgoing] = []
    append = outgoing.append
    try:
        for index, pairs in enumerate(items):
            if type(pairs) is tuple and len(pairs) == 1:
                field, value = pairs[0]
                if field == "value" and type(value) is str:
                    # The common entry, its text kept so that classify need
                    # not decode the bytes again; built by tuple.__new__ with
                    # every field (a named tuple's __new__ is a Python
                    # function, a frame per entry). A lone surrogate
                    # fails the encoding: the strict path words the refusal.
                    append(
                        _new_tuple(Outgoing, (value.encode(), b"", None, None, value))
                    )
                    continue
            if type(pairs) is not tuple:
                return None
            item = dict(pairs)
            if len(item) != len(pairs):
                return None
            append(_entry(item, index))
    except (InvalidArgument, UnicodeEncodeError):
        return None
    return outgoing


def _entry(item: Any, index: int) -> Outgoing:
    # Once per message of a batch: the common entry ({"value": ...}) takes
    # the fewest checks, and error messages are built only when needed.
    if type(item) is not dict:
        raise InvalidArgument(f"messages[{index}]: must be an object")
    if not _ENTRY_FIELDS.issuperset(item):
        refuse_unknown(item, BATCH_ENTRY_FIELDS, f"messages[{index}]: ")
    value = item.get("value")
    if ("value" in item) == ("value_base64" in item):
        raise InvalidArgument(
            f"messages[{index}]: give exactly one of value and value_base64"
        )
    if type(value) is str:
        payload = _utf8(value, "value", index)
    elif "value" in item:
        raise InvalidArgument(f"messages[{index}]: value must be a string")
    else:
        try:
            payload = base64.b64decode(item["value_base64"], validate=True)
        except (binascii.Error, TypeError, ValueError):
            raise InvalidArgument(
                f"messages[{index}]: value_base64 is not base64"
            ) from None
    key = item.get("key", "")
    if type(key) is not str:
        raise InvalidArgument(f"messages[{index}]: key must be a string")
    partition = item.get("partition")
    if partition is not None:
        partition = integer(partition, f"messages[{index}]: partition", low=0)
    idempotency_key = item.get("idempotency_key")
    if idempotency_key is not None:
        idempotency_key = _idempotency_key(
            idempotency_key, f"messages[{index}]: idempotency_key"
        )
    return Outgoing(
        payload,
        _utf8(key, "key", index) if key else b"",
        partition,
        idempotency_key,
        value if type(value) is str else None,
    )


def _still_wanted(req: falcon.Request, name: str) -> None:
    """Before a long poll looks again after a wait: end it if its user lost
    access (401/403), or with 204 if its client hung up, so that nothing is
    leased to a connection gone (a leased message would stay invisible for
    the visibility timeout)."""
    reauthorize(req, Action.CONSUME, name)
    hung_up = getattr(req.env.get("gunicorn.socket"), "hung_up", None)
    if hung_up is not None and hung_up():
        raise falcon.HTTPStatus(falcon.HTTP_204)


class Consume:
    def __init__(self, messages: MessageService) -> None:
        self.messages = messages

    def on_get(self, req: falcon.Request, resp: falcon.Response, name: str) -> None:
        authorize(req, Action.CONSUME, check_name(name))
        partition = query_int(req, "partition")
        offset = query_int(req, "offset")
        if offset is not None:
            self._replay(resp, name, partition, offset)
            return
        wait_ms = query_duration_ms(req, "wait")
        delivery = self.messages.consume(
            name,
            wait_ms=wait_ms,
            partition=partition,
            recheck=lambda: _still_wanted(req, name),
        )
        if delivery is None:
            resp.status = falcon.HTTP_204
            return
        resp.data = render(delivery)

    def on_get_batch(
        self, req: falcon.Request, resp: falcon.Response, name: str
    ) -> None:
        authorize(req, Action.CONSUME, check_name(name))
        if param(req, "offset") is not None:
            raise InvalidArgument(
                "consume/batch leases messages; replay by offset is "
                "consume?partition=&offset="
            )
        partition = query_int(req, "partition")
        count = query_int(req, "max", low=1, high=MAX_CONSUME_BATCH)
        wait_ms = query_duration_ms(req, "wait")
        deliveries = self.messages.consume_batch(
            name,
            count=DEFAULT_CONSUME_BATCH if count is None else count,
            wait_ms=wait_ms,
            partition=partition,
            recheck=lambda: _still_wanted(req, name),
        )
        if not deliveries:
            resp.status = falcon.HTTP_204
            return
        resp.data = render_batch(deliveries)

    def on_head_batch(
        self, req: falcon.Request, resp: falcon.Response, name: str
    ) -> None:
        """HEAD is safe: a batch consume would lease messages."""
        authorize(req, Action.CONSUME, check_name(name))
        raise InvalidArgument(
            "HEAD of consume/batch is not served: it would lease messages; "
            "replay one by HEAD of consume?partition=&offset="
        )

    def on_head(self, req: falcon.Request, resp: falcon.Response, name: str) -> None:
        """HEAD is safe: it may replay but never lease a message."""
        authorize(req, Action.CONSUME, check_name(name))
        partition = query_int(req, "partition")
        offset = query_int(req, "offset")
        if offset is None:
            raise InvalidArgument(
                "HEAD of consume needs partition and offset (a replay): a "
                "consume would lease a message"
            )
        self._replay(resp, name, partition, offset)

    def _replay(
        self, resp: falcon.Response, name: str, partition: int | None, offset: int
    ) -> None:
        if partition is None:
            raise InvalidArgument("offset needs partition")
        delivery = self.messages.replay(name, partition=partition, offset=offset)
        resp.data = render(delivery)


class Ack:
    def __init__(self, messages: MessageService) -> None:
        self.messages = messages

    def on_post(self, req: falcon.Request, resp: falcon.Response, name: str) -> None:
        authorize(req, Action.CONSUME, check_name(name))
        handle = param(req, "receipt_handle")
        if not handle:
            raise InvalidArgument("receipt_handle is required")
        extend = param(req, "extend")
        if extend in (None, "", "false"):
            action = Settle.ACK
        elif extend == "true":
            action = Settle.EXTEND
        elif extend == "0":
            action = Settle.RELEASE
        else:
            raise InvalidArgument(
                "extend must be true (renew the lease) or 0 (give the message back)"
            )
        self.messages.settle(name, handle, action)
        resp.status = falcon.HTTP_204

    def on_post_batch(
        self, req: falcon.Request, resp: falcon.Response, name: str
    ) -> None:
        authorize(req, Action.CONSUME, check_name(name))
        body, handles = _listed(
            read_body(req), "receipt_handles", ACK_BATCH_FIELDS, MAX_ACK_BATCH
        )
        for index, handle in enumerate(handles):
            if not isinstance(handle, str):
                raise InvalidArgument(f"receipt_handles[{index}] must be a string")
        extend = body.get("extend")
        if extend is None or extend is False:
            action = Settle.ACK
        elif extend is True:
            action = Settle.EXTEND
        elif extend == 0 and type(extend) is int:
            action = Settle.RELEASE
        else:
            raise InvalidArgument(
                "extend must be true (renew the leases) or 0 (give the messages back)"
            )
        results = self.messages.settle_batch(name, handles, action)
        resp.text = dumps({"results": results})


def render_batch(deliveries: list[Delivery]) -> bytes:
    """The batch consume response: ``{"messages": [...]}``, each message as
    :func:`render` writes it."""
    return b'{"messages":[' + b",".join(map(_render, deliveries)) + b"]}\n"


def render(delivery: Delivery) -> bytes:
    """The consume response; a JSON payload is embedded verbatim."""
    return _render(delivery) + b"\n"


def _render(delivery: Delivery) -> bytes:
    # Written by hand, once per message of a batch: the topic name and the
    # handle need no escaping (their alphabets are [A-Za-z0-9._-]), the
    # numbers none, and only the key goes through the JSON encoder.
    message = delivery.message
    key = (
        encode(message.key.decode("utf-8", "replace")).encode()
        if message.key
        else b"null"
    )
    if message.kind is PayloadKind.JSON and delivery.receipt_handle is not None:
        # A leased JSON message, as most are: one formatting, one copy of
        # the payload (the general case below concatenates three times).
        return _LEASED_JSON % (
            delivery.topic.encode(),
            message.partition,
            message.offset,
            key,
            message.timestamp,
            delivery.receipt_handle.encode(),
            message.payload,
        )
    head = b'{"topic":"%s","partition":%d,"offset":%d,"key":%s,"timestamp":%d' % (
        delivery.topic.encode(),
        message.partition,
        message.offset,
        key,
        message.timestamp,
    )
    if delivery.receipt_handle is not None:
        head += b',"receipt_handle":"%s"' % delivery.receipt_handle.encode()
    if message.kind is PayloadKind.JSON:
        payload = message.payload
    elif message.kind is PayloadKind.TEXT:
        text = message.payload.decode("utf-8")
        payload = json.dumps(text, ensure_ascii=False).encode()
    else:
        head += b',"payload_encoding":"base64"'
        payload = b'"' + base64.b64encode(message.payload) + b'"'
    return head + b',"payload":' + payload + b"}"
