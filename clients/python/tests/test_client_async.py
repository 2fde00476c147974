"""The asyncio twin: the same methods, the same answers."""

from __future__ import annotations

import asyncio
import inspect
import uuid

import pytest
from tests.httpclient import ADMIN

from narad_client import AsyncClient
from narad_client import Client
from narad_client import Conflict
from narad_client import Gone
from narad_client import NotFound
from narad_client import Unauthorized

PUBLIC = sorted(
    name
    for name, _ in inspect.getmembers(Client, inspect.isfunction)
    if not name.startswith("_")
)


def test_same_methods_and_arguments() -> None:
    twin = sorted(
        name
        for name, _ in inspect.getmembers(AsyncClient, inspect.isfunction)
        if not name.startswith("_")
    )
    assert set(twin) - set(PUBLIC) == {"aclose"}
    assert set(PUBLIC) <= set(twin)
    for name in PUBLIC:
        sync, coro = getattr(Client, name), getattr(AsyncClient, name)
        assert list(inspect.signature(sync).parameters) == list(
            inspect.signature(coro).parameters
        ), name
        defaults = [p.default for p in inspect.signature(sync).parameters.values()]
        assert defaults == [
            p.default for p in inspect.signature(coro).parameters.values()
        ], name
        if name in ("topics", "users"):
            assert inspect.isasyncgenfunction(AsyncClient._pages)
        else:
            assert inspect.iscoroutinefunction(coro), name
        assert coro.__doc__, name
    assert list(inspect.signature(Client).parameters) == list(
        inspect.signature(AsyncClient).parameters
    )


def test_async_round_trip(node) -> None:
    asyncio.run(_round_trip(node.base))


async def _round_trip(base: str) -> None:
    suffix = uuid.uuid4().hex[:8]
    topic, child, user = f"a-{suffix}", f"a-child-{suffix}", f"a-user-{suffix}"
    schema = {"type": "object"}
    async with AsyncClient(base, auth=ADMIN, retries=2, backoff=0.01) as narad:
        created = await narad.create_topic(topic, partitions=1, schema=schema)
        assert created["schema_version"] == 1
        await narad.create_topic(child, partitions=1)
        assert (await narad.topic(topic))["name"] == topic
        assert topic in [t["name"] async for t in narad.topics(page_size=1)]
        altered = await narad.alter_topic(topic, visibility_timeout_ms=9000)
        assert altered["visibility_timeout_ms"] == 9000

        payloads = [b'{"a":  1.0}', b'{"b": [1, 2]}', b'{"c": "x"}']
        one = await narad.produce(topic, payloads[0], key="k")
        again = await narad.produce(
            topic, payloads[0], key="k", idempotency_key=one.idempotency_key
        )
        assert again.replayed
        done = await narad.produce_batch(topic, payloads[1:])
        assert done.accepted == 2
        first = await narad.consume(topic, wait=1)
        assert first is not None
        assert (first.payload, first.key, first.offset) == (payloads[0], "k", 0)
        rest = await narad.consume_batch(topic, max=10, wait=1)
        assert [m.payload for m in rest] == payloads[1:]
        await narad.extend(topic, first)
        await narad.ack(topic, first)
        await narad.release(topic, rest[0])
        with pytest.raises(Gone):
            await narad.release(topic, rest[0])
        assert await narad.extend_batch(topic, [rest[1]]) == ["extended"]
        assert await narad.release_batch(topic, [rest[1]]) == ["released"]
        back = await narad.consume_batch(topic, max=10)
        assert sorted(m.offset for m in back) == [1, 2]
        assert await narad.ack_batch(topic, back) == ["acked", "acked"]
        assert await narad.consume(topic) is None
        replayed = await narad.replay(topic, 0, 1)
        assert replayed.payload == payloads[1] and replayed.receipt_handle is None

        assert (await narad.schemas(topic))["current_version"] == 1
        assert (await narad.schema(topic, 1)).json() == schema
        wider = {"type": "object", "properties": {"a": {"type": "number"}}}
        report = await narad.check_schema(topic, wider, against="latest")
        assert report["compatible"] is True
        assert (await narad.set_schema(topic, wider))["schema_version"] == 2

        attached = await narad.attach(topic, child, delay_ms=0)
        assert attached["children"] == [child]
        with pytest.raises(Conflict):
            await narad.attach(child, topic)  # no chains
        assert [c["name"] for c in await narad.children(topic)] == [child]
        await narad.detach(topic, child)
        assert await narad.children(topic) == []

        await narad.create_user(user, "password-one-1")
        assert (await narad.user(user))["username"] == user
        assert user in [u["username"] async for u in narad.users(page_size=1)]
        granted = await narad.set_grants(
            user, [{"action": "consume", "patterns": [topic]}]
        )
        assert granted["grants"][0]["action"] == "consume"
        await narad.set_password(user, "password-two-2")
        async with AsyncClient(base, auth=(user, "password-one-1")) as old:
            with pytest.raises(Unauthorized):
                await old.consume(topic)
        await narad.delete_user(user)
        with pytest.raises(NotFound):
            await narad.user(user)

        await narad.delete_topic(child)
        await narad.delete_topic(topic)
        with pytest.raises(NotFound):
            await narad.topic(topic)
