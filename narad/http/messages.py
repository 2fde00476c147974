"""Produce, consume, ack and replay under ``/v1/topics/{name}``."""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any

import falcon

from narad.broker.messages import Delivery
from narad.broker.messages import MessageService
from narad.broker.messages import Outgoing
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
from narad.security.access import authorize
from narad.security.grants import Action
from narad.storage import PayloadKind
from narad.storage import Settle

MAX_BATCH = 1000
BATCH_ENTRY_FIELDS = ("value", "value_base64", "key", "partition")


class Produce:
    def __init__(self, messages: MessageService) -> None:
        self.messages = messages

    def on_post(self, req: falcon.Request, resp: falcon.Response, name: str) -> None:
        authorize(req, Action.PRODUCE, check_name(name))
        key = _utf8(param(req, "key") or "", "key")
        partition = query_int(req, "partition")
        body = read_body(req)
        self.messages.produce(name, [Outgoing(body, key, partition)])
        resp.status = falcon.HTTP_202

    def on_post_batch(
        self, req: falcon.Request, resp: falcon.Response, name: str
    ) -> None:
        authorize(req, Action.PRODUCE, check_name(name))
        outgoing = _batch(read_body(req))
        accepted = self.messages.produce(name, outgoing, batch=True)
        resp.status = falcon.HTTP_202
        resp.text = dumps({"accepted": accepted})


def _utf8(text: str, what: str) -> bytes:
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        # A lone surrogate ("\ud800" in JSON): UTF-8 cannot hold it, and
        # storing its CESU-8 bytes would hand consumers invalid UTF-8.
        raise InvalidArgument(
            f"{what} holds a lone surrogate, which UTF-8 cannot store"
        ) from None


def _batch(data: bytes) -> list[Outgoing]:
    body = parse_json(data)
    if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
        raise InvalidArgument('request body must be {"messages": [...]}')
    refuse_unknown(body, ("messages",))
    items = body["messages"]
    if not items:
        raise InvalidArgument("messages must not be empty")
    if len(items) > MAX_BATCH:
        raise InvalidArgument(
            f"messages holds {len(items)} entries; at most {MAX_BATCH}"
        )
    return [_entry(item, f"messages[{i}]: ") for i, item in enumerate(items)]


def _entry(item: Any, where: str) -> Outgoing:
    if not isinstance(item, dict):
        raise InvalidArgument(f"{where}must be an object")
    refuse_unknown(item, BATCH_ENTRY_FIELDS, where)
    if ("value" in item) == ("value_base64" in item):
        raise InvalidArgument(f"{where}give exactly one of value and value_base64")
    if "value" in item:
        if not isinstance(item["value"], str):
            raise InvalidArgument(f"{where}value must be a string")
        payload = _utf8(item["value"], f"{where}value")
    else:
        try:
            payload = base64.b64decode(item["value_base64"], validate=True)
        except (binascii.Error, TypeError, ValueError):
            raise InvalidArgument(f"{where}value_base64 is not base64") from None
    key = item.get("key", "")
    if not isinstance(key, str):
        raise InvalidArgument(f"{where}key must be a string")
    partition = item.get("partition")
    if partition is not None:
        partition = integer(partition, f"{where}partition", low=0)
    return Outgoing(payload, _utf8(key, f"{where}key"), partition)


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
        delivery = self.messages.consume(name, wait_ms=wait_ms, partition=partition)
        if delivery is None:
            resp.status = falcon.HTTP_204
            return
        resp.text = render(delivery)

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
        resp.text = render(delivery)


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


def render(delivery: Delivery) -> str:
    """The consume response; a JSON payload is embedded verbatim."""
    message = delivery.message
    head: dict[str, Any] = {
        "topic": delivery.topic,
        "partition": message.partition,
        "offset": message.offset,
        "key": message.key.decode("utf-8", "replace") if message.key else None,
        "timestamp": message.timestamp,
    }
    if delivery.receipt_handle is not None:
        head["receipt_handle"] = delivery.receipt_handle
    if message.kind is PayloadKind.JSON:
        payload = message.payload.decode("utf-8")
    elif message.kind is PayloadKind.TEXT:
        payload = json.dumps(message.payload.decode("utf-8"), ensure_ascii=False)
    else:
        head["payload_encoding"] = "base64"
        payload = '"' + base64.b64encode(message.payload).decode() + '"'
    return encode(head)[:-1] + ',"payload":' + payload + "}\n"
