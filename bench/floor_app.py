"""The floors for bench/messaging.py: bare falcon endpoints, one EVALSHA each.

``POST /floor`` appends the request body to one list, under the gunicorn
settings ``narad serve`` uses, against the same Valkey: what Narad's produce
costs beyond this is Narad's own overhead.

The full flow's floor is the least a leasing queue does per request, with
the same request shapes as Narad's batch routes: ``POST /floor/produce/batch``
(``{"messages": [{"value": ...}]}``) pushes the values onto a queue,
``GET /floor/consume/batch?max=N&wait=S`` moves up to N of them to a hash of
leased values under new ids (``{"messages": [{"payload", "receipt_handle"}]}``,
polling the queue every 5 ms up to the wait, else 204), and
``POST /floor/ack/batch`` (``{"receipt_handles": [...]}``) deletes them. No
log is kept, no lease lapses, nothing is validated.

The storage floor takes the same requests at ``/storage/<topic>/...`` and
serves them with Narad's own storage calls (``narad_redis``'s append,
reserve_batch and settle_batch, the scripts ``narad serve`` runs) on a topic
created through Narad, and nothing else of Narad: no security, validation,
metrics, access log or long-poll wake-ups (it polls as the floor does).
Between it and the floor is what Narad's scripts cost; between Narad and it,
what the rest of a Narad request costs.

Single consume+ack's floor takes the bodies ``POST /floor`` appended, with
the same request shapes as Narad's single routes: ``GET /floor/consume``
moves one of them to a hash of leased values under a new id
(``{"payload", "receipt_handle"}``, else 204), and ``POST
/floor/ack?receipt_handle=ID`` deletes it (204, or 410 when not leased).

The long poll's floor, ``GET /floor/wait?wait=S``, answers 204 after the
wait, having looked at nothing (as a Narad long poll on a topic its worker
has just seen empty does not), with no wake-up to listen for.

Run: ``PYTHONPATH=.:plugins python bench/floor_app.py BIND REDIS_URL WORKERS``.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from collections.abc import Iterable
from pathlib import Path
from typing import TypeVar

import falcon
import redis
from gunicorn.app.base import BaseApplication

import narad_redis
from narad.broker import now_ms
from narad.broker.receipts import decode
from narad.broker.receipts import encode
from narad.broker.receipts import new_nonces
from narad.config import Config
from narad.serve.server import gunicorn_settings
from narad.storage import Entry
from narad.storage import PayloadKind
from narad.storage import Settle
from narad.storage import Status
from narad.storage import TopicMeta
from narad_redis.storage import RedisStorage

SCRIPTS = Path(__file__).with_name("floor")
QUEUE, LEASED, IDS = "bench:floor:queue", "bench:floor:leased", "bench:floor:ids"
#: Single produce's list, which single consume takes from, and its leased values.
SINGLE, SINGLE_LEASED = "bench:floor", "bench:floor:single:leased"
POLL_S = 0.005
#: One leased message in a consume's answer: its payload and receipt handle.
LEASED_MESSAGE = b'{"payload":%s,"receipt_handle":"%s"}'
T = TypeVar("T")


class Scripts:
    """The floor's scripts, registered per worker on first use (after the fork)."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.client: redis.Redis | None = None
        self.loaded: dict[str, redis.commands.core.Script] = {}

    def __call__(self, name: str, keys: list[str], args: list) -> object:
        script = self.loaded.get(name)
        if script is None:
            if self.client is None:
                self.client = redis.Redis.from_url(self.url, protocol=2)
            source = (SCRIPTS / f"{name}.lua").read_text()
            script = self.loaded[name] = self.client.register_script(source)
        return script(keys=keys, args=args)


class Floor:
    def __init__(self, scripts: Scripts) -> None:
        self.scripts = scripts

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        self.scripts("append", [SINGLE], [req.bounded_stream.read()])
        resp.status = falcon.HTTP_202

    def on_get_consume_one(self, req: falcon.Request, resp: falcon.Response) -> None:
        keys = [SINGLE, SINGLE_LEASED, IDS]
        leased = polled(req, lambda: self.scripts("lease_batch", keys, [1]))
        if not leased:
            resp.status = falcon.HTTP_204
            return
        handle, payload = leased
        resp.data = LEASED_MESSAGE % (payload, handle) + b"\n"

    def on_post_ack_one(self, req: falcon.Request, resp: falcon.Response) -> None:
        handle = req.get_param("receipt_handle", required=True)
        done = self.scripts("ack_batch", [SINGLE_LEASED], [handle])
        resp.status = falcon.HTTP_204 if done[0] else falcon.HTTP_410

    def on_post_produce(self, req: falcon.Request, resp: falcon.Response) -> None:
        values = [m["value"] for m in json.loads(req.bounded_stream.read())["messages"]]
        self.scripts("append_batch", [QUEUE], values)
        resp.status = falcon.HTTP_202
        resp.data = b'{"accepted":%d}' % len(values)

    def on_get_consume(self, req: falcon.Request, resp: falcon.Response) -> None:
        count = req.get_param_as_int("max", default=1)
        keys = [QUEUE, LEASED, IDS]
        leased = polled(req, lambda: self.scripts("lease_batch", keys, [count]))
        if not leased:
            resp.status = falcon.HTTP_204
            return
        resp.data = messages_body(zip(leased[1::2], leased[::2], strict=True))

    def on_get_wait(self, req: falcon.Request, resp: falcon.Response) -> None:
        time.sleep(wait_s(req))
        resp.status = falcon.HTTP_204

    def on_post_ack(self, req: falcon.Request, resp: falcon.Response) -> None:
        handles = json.loads(req.bounded_stream.read())["receipt_handles"]
        done = self.scripts("ack_batch", [LEASED], handles)
        resp.data = results_body(bool(d) for d in done)


class StorageFloor:
    """The flow's batch routes over Narad's storage calls, one call each."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.storage: RedisStorage | None = None
        self.topics: dict[str, TopicMeta] = {}
        self.turn = 0  # round-robin, as Narad places messages without a key

    def _meta(self, topic: str) -> tuple[RedisStorage, TopicMeta]:
        if self.storage is None:  # per worker, after the fork
            self.storage = narad_redis.connect(self.url, Config.load(env={}))
        meta = self.topics.get(topic)
        if meta is None:
            meta = self.topics[topic] = self.storage.get_topic(topic)
        return self.storage, meta

    def on_post_produce(
        self, req: falcon.Request, resp: falcon.Response, topic: str
    ) -> None:
        values = [m["value"] for m in json.loads(req.bounded_stream.read())["messages"]]
        storage, meta = self._meta(topic)
        entries = []
        for value in values:
            partition = self.turn % meta.partitions
            entries.append(Entry(partition, b"", value.encode(), PayloadKind.JSON))
            self.turn += 1
        result = storage.append(meta, entries, schema_version=0, now_ms=now_ms())
        resp.status = falcon.HTTP_202
        resp.data = b'{"accepted":%d}' % result.count

    def on_get_consume(
        self, req: falcon.Request, resp: falcon.Response, topic: str
    ) -> None:
        count = req.get_param_as_int("max", default=1)
        storage, meta = self._meta(topic)
        partitions = list(range(meta.partitions))
        leased = polled(
            req,
            lambda: (
                storage.reserve_batch(
                    meta, partitions, nonces=new_nonces(count), now_ms=now_ms()
                ).messages
            ),
        )
        if not leased:
            resp.status = falcon.HTTP_204
            return
        resp.data = messages_body(
            (m.payload, encode(m.partition, m.offset, m.nonce).encode()) for m in leased
        )

    def on_post_ack(
        self, req: falcon.Request, resp: falcon.Response, topic: str
    ) -> None:
        handles = json.loads(req.bounded_stream.read())["receipt_handles"]
        storage, meta = self._meta(topic)
        done = storage.settle_batch(
            meta, [decode(h) for h in handles], action=Settle.ACK, now_ms=now_ms()
        )
        resp.data = results_body(d is Status.OK for d in done)


def polled(req: falcon.Request, take: Callable[[], T]) -> T | None:
    """What ``take()`` gives, polled every ``POLL_S`` until it gives
    something or the request's ``wait`` runs out (then ``None``)."""
    deadline = time.monotonic() + wait_s(req)
    while not (got := take()):
        if time.monotonic() >= deadline:
            return None
        time.sleep(POLL_S)  # gevent's, under the worker
    return got


def messages_body(leased: Iterable[tuple[bytes, bytes]]) -> bytes:
    """A batch consume's answer: (payload, receipt handle) per message."""
    messages = [LEASED_MESSAGE % (payload, handle) for payload, handle in leased]
    return b'{"messages":[' + b",".join(messages) + b"]}"


def results_body(acked: Iterable[bool]) -> bytes:
    """A batch ack's answer."""
    return json.dumps({"results": ["acked" if a else "lapsed" for a in acked]}).encode()


def wait_s(req: falcon.Request) -> float:
    """``wait``, in seconds (``"10s"``)."""
    return float(req.get_param("wait", default="0s").removesuffix("s"))


class FloorApplication(BaseApplication):
    def __init__(self, bind: str, url: str, workers: int) -> None:
        self.bind, self.url, self.workers = bind, url, workers
        super().__init__()

    def load_config(self) -> None:
        config = Config.load(
            env={},
            overrides={"server.bind": self.bind, "server.workers": self.workers},
        )
        settings = gunicorn_settings(config)
        # Narad's hooks: its metrics and its storage check; nothing to do here.
        settings.pop("child_exit")
        settings.pop("on_starting")
        settings["proc_name"] = "narad-floor"
        for key, value in settings.items():
            self.cfg.set(key, value)

    def load(self) -> falcon.App:
        app = falcon.App()
        floor = Floor(Scripts(self.url))
        app.add_route("/floor", floor)
        app.add_route("/floor/consume", floor, suffix="consume_one")
        app.add_route("/floor/ack", floor, suffix="ack_one")
        app.add_route("/floor/produce/batch", floor, suffix="produce")
        app.add_route("/floor/consume/batch", floor, suffix="consume")
        app.add_route("/floor/ack/batch", floor, suffix="ack")
        app.add_route("/floor/wait", floor, suffix="wait")
        storage = StorageFloor(self.url)
        for route in ("produce", "consume", "ack"):
            app.add_route(f"/storage/{{topic}}/{route}/batch", storage, suffix=route)
        return app


if __name__ == "__main__":
    FloorApplication(sys.argv[1], sys.argv[2], int(sys.argv[3])).run()
