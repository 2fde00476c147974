"""The retry rule: what is sent again, how often, and with which key."""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from pathlib import Path

import pytest
from clientfakes import DROP
from clientfakes import FORWARD
from clientfakes import FORWARD_DROP
from clientfakes import FakeServer
from tests.httpclient import ADMIN
from tests.nodes import Node

from narad_client import AsyncClient
from narad_client import Client
from narad_client import Gone
from narad_client import Unavailable
from narad_client._core import Policy

BUSY = (503, {"Content-Type": "application/json"}, b'{"error": "busy, retry"}')
ACCEPTED = (202, {}, b"")
NO_CONTENT = (204, {}, b"")
GONE = (410, {}, b'{"error": "lease unknown or lapsed"}')
MESSAGE = (
    200,
    {"Content-Type": "application/json"},
    b'{"topic":"t","partition":0,"offset":3,"key":null,"timestamp":1,'
    b'"receipt_handle":"h","payload":"x"}\n',
)


def fast(base: str, **kw) -> Client:
    return Client(base, retries=kw.pop("retries", 3), backoff=0.01, **kw)


def keys(fake: FakeServer) -> list[str | None]:
    return [seen.headers.get("idempotency-key") for seen in fake.seen]


def test_produce_503_then_202_reuses_its_key() -> None:
    with FakeServer([BUSY, BUSY, ACCEPTED]) as fake, fast(fake.base) as c:
        produced = c.produce("t", b"body")
    sent = keys(fake)
    assert len(sent) == 3
    assert sent[0] and len(set(sent)) == 1
    assert produced.idempotency_key == sent[0]
    assert {seen.body for seen in fake.seen} == {b"body"}


def test_produce_keeps_the_callers_key() -> None:
    with FakeServer([BUSY, ACCEPTED]) as fake, fast(fake.base) as c:
        c.produce("t", b"body", idempotency_key="order-9")
    assert keys(fake) == ["order-9", "order-9"]


def test_every_call_has_its_own_key() -> None:
    with FakeServer([ACCEPTED]) as fake, fast(fake.base) as c:
        c.produce("t", b"a")
        c.produce("t", b"a")
    first, second = keys(fake)
    assert first and second and first != second


def test_lost_answer_is_retried_for_produce() -> None:
    batch = (202, {}, b'{"accepted": 2, "duplicates": 0}')
    with FakeServer([DROP, batch]) as fake, fast(fake.base) as c:
        assert c.produce_batch("t", [b"a", b"b"]).accepted == 2
    sent = keys(fake)
    assert len(sent) == 2 and sent[0] and sent[0] == sent[1]


def test_batch_with_own_keys_is_retried_only_when_every_message_has_one() -> None:
    keyed = [{"payload": b"a", "idempotency_key": "a"}]
    with (
        FakeServer([BUSY, (202, {}, b'{"accepted": 1}')]) as fake,
        fast(fake.base) as c,
    ):
        assert c.produce_batch("t", keyed).accepted == 1
    assert len(fake.seen) == 2 and keys(fake) == [None, None]
    partly = [*keyed, {"payload": b"b"}]
    with (
        FakeServer([BUSY, ACCEPTED]) as fake,
        fast(fake.base) as c,
        pytest.raises(Unavailable),
    ):
        c.produce_batch("t", partly)
    assert len(fake.seen) == 1


@pytest.mark.parametrize("step", [BUSY, DROP], ids=["503", "lost-answer"])
def test_unsafe_calls_are_not_retried_once_maybe_applied(step) -> None:
    calls = [
        lambda c: c.consume("t", wait=1),
        lambda c: c.consume_batch("t"),
        lambda c: c.create_topic("t"),
        lambda c: c.delete_topic("t"),
        lambda c: c.alter_topic("t", retention_ms=0),
        lambda c: c.set_schema("t", {}),
        lambda c: c.create_user("u", "password-123"),
        lambda c: c.delete_user("u"),
        lambda c: c.set_password("u", "new-password", current_password="old-one"),
        lambda c: c.attach("p", "c"),
        lambda c: c.detach("p", "c"),
    ]
    for call in calls:
        with (
            FakeServer([step, ACCEPTED]) as fake,
            fast(fake.base) as c,
            pytest.raises(Unavailable) as raised,
        ):
            call(c)
        assert len(fake.seen) == 1, fake.seen
        assert raised.value.status == (503 if step is BUSY else 0)


@pytest.mark.parametrize("step", [BUSY, DROP], ids=["503", "lost-answer"])
def test_idempotent_calls_are_retried(step) -> None:
    listing = (200, {}, b'{"topics": [], "next_page_token": null}')
    user = (200, {}, b'{"username": "u", "grants": []}')
    calls = [
        (lambda c: c.topic("t"), user),
        (lambda c: list(c.topics()), listing),
        (lambda c: c.replay("t", 0, 3), MESSAGE),
        (lambda c: c.ack("t", "h"), NO_CONTENT),
        (lambda c: c.extend("t", "h"), NO_CONTENT),
        (lambda c: c.release("t", "h"), NO_CONTENT),
        (lambda c: c.ack_batch("t", ["h"]), (200, {}, b'{"results": ["acked"]}')),
        (lambda c: c.set_grants("u", []), user),
        (lambda c: c.set_password("u", "new-password"), NO_CONTENT),
        (lambda c: c.check_schema("t", {}), (200, {}, b'{"compatible": true}')),
        (lambda c: c.schemas("t"), user),
        (lambda c: c.children("t"), (200, {}, b'{"children": []}')),
        (lambda c: c.user("u"), user),
    ]
    for call, answer in calls:
        with FakeServer([step, answer]) as fake, fast(fake.base) as c:
            call(c)
        assert len(fake.seen) == 2, fake.seen
        assert fake.seen[0].path == fake.seen[1].path


def test_retries_are_bounded() -> None:
    with (
        FakeServer([BUSY]) as fake,
        fast(fake.base, retries=3) as c,
        pytest.raises(Unavailable) as raised,
    ):
        c.topic("t")
    assert len(fake.seen) == 4
    assert raised.value.error == "busy, retry"
    with (
        FakeServer([BUSY]) as fake,
        fast(fake.base, retries=0) as c,
        pytest.raises(Unavailable),
    ):
        c.ack("t", "h")
    assert len(fake.seen) == 1


def test_release_gone_after_a_retry_is_done() -> None:
    with FakeServer([DROP, GONE]) as fake, fast(fake.base) as c:
        c.release("t", "h")  # the first attempt gave it back
    assert len(fake.seen) == 2
    with FakeServer([GONE]) as fake, fast(fake.base) as c, pytest.raises(Gone):
        c.release("t", "h")  # lapsed before: said so
    with FakeServer([DROP, GONE]) as fake, fast(fake.base) as c, pytest.raises(Gone):
        c.ack("t", "h")  # a repeated ack is 204: a 410 is the truth


def test_backoff_grows_with_jitter_and_heeds_retry_after() -> None:
    policy = Policy(retries=10, backoff=0.1, max_backoff=1.0)
    for retry, (low, high) in enumerate([(0.05, 0.1), (0.1, 0.2), (0.2, 0.4)]):
        delays = [policy.delay(retry) for _ in range(200)]
        assert all(low <= d <= high for d in delays)
        assert len(set(delays)) > 100  # jitter: clients spread out
    assert all(0.5 <= policy.delay(9) <= 1.0 for _ in range(50))
    assert policy.delay(0, retry_after=0.7) >= 0.7
    assert policy.delay(0, retry_after=60) <= 1.0


def test_retry_after_of_a_503_is_waited() -> None:
    busy = (503, {"Retry-After": "1"}, b'{"error": "busy"}')
    with FakeServer([busy, (200, {}, b"{}")]) as fake, fast(fake.base) as c:
        started = time.monotonic()
        c.topic("t")
        waited = time.monotonic() - started
    assert len(fake.seen) == 2
    assert waited >= 0.9


def test_async_503_then_202_reuses_its_key() -> None:
    async def main() -> None:
        async with AsyncClient(fake.base, retries=3, backoff=0.01) as c:
            await c.produce("t", b"body")
            with pytest.raises(Unavailable):
                await c.consume("t")

    with FakeServer([BUSY, DROP, ACCEPTED, BUSY]) as fake:
        asyncio.run(main())
    sent = keys(fake)
    assert len(sent) == 4
    assert sent[0] and sent[0] == sent[1] == sent[2]
    assert sent[3] is None and fake.seen[3].path.startswith("/v1/topics/t/consume")


def test_node_applied_but_answer_lost_stores_once(client: Client, topic: str) -> None:
    """A proxy hands the first produce to the node and drops its answer: the
    client retries with the same key, the node stores nothing new and says
    so, and the topic holds one message."""
    with (
        FakeServer([FORWARD_DROP, FORWARD], upstream=client.base_url) as proxy,
        Client(proxy.base, auth=ADMIN, retries=3, backoff=0.01) as c,
    ):
        produced = c.produce(topic, b'{"once": true}')
        assert produced.replayed is True
        batch = c.produce_batch(topic, [b"a", b"b"])
    assert (batch.accepted, batch.duplicates) == (2, 0)
    assert len(proxy.seen) == 3
    assert keys(proxy)[0] == keys(proxy)[1] == produced.idempotency_key
    stats = client.topic(topic)["partition_stats"]
    assert stats[0]["next_offset"] == 3
    assert [m.payload for m in client.consume_batch(topic, max=10)] == [
        b'{"once": true}',
        b"a",
        b"b",
    ]


def restart_soon(node: Node, after: float) -> threading.Thread:
    def restart() -> None:
        time.sleep(after)
        node.start()

    thread = threading.Thread(target=restart)
    thread.start()
    return thread


@pytest.fixture
def own_node(tmp_path: Path):
    started = Node(tmp_path, workers=1).start()
    try:
        yield started
    finally:
        started.stop()


def test_node_stopped_and_started_mid_call(own_node: Node) -> None:
    topic = f"restart-{uuid.uuid4().hex[:8]}"
    patient = {"retries": 60, "backoff": 0.05, "max_backoff": 0.5}
    with Client(own_node.base, auth=ADMIN, **patient) as c:
        c.create_topic(topic, partitions=1)
        own_node.stop()
        thread = restart_soon(own_node, 0.5)
        produced = c.produce(topic, b"survives a restart")  # retried until up
        thread.join()
        assert produced.replayed is False
        message = c.consume(topic)
        assert message is not None and message.payload == b"survives a restart"
        c.ack(topic, message)
        assert c.consume(topic) is None

        async def main() -> None:
            async with AsyncClient(own_node.base, auth=ADMIN, **patient) as a:
                own_node.stop()
                thread = restart_soon(own_node, 0.5)
                try:
                    await a.produce(topic, b"async too")
                finally:
                    await asyncio.to_thread(thread.join)
                taken = await a.consume(topic)
                assert taken is not None and taken.payload == b"async too"
                await a.ack(topic, taken)

        asyncio.run(main())
        assert c.topic(topic)["partition_stats"][0]["next_offset"] == 2
