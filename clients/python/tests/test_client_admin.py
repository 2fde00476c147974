"""Topics, users, schemas and children against a live node."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator

import pytest

from narad_client import BadRequest
from narad_client import Client
from narad_client import Conflict
from narad_client import Forbidden
from narad_client import NotFound
from narad_client import Schema
from narad_client import Unauthorized

ORDER = b'{"type": "object", "properties": {"id": {"type": "integer"}}}'


def name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def test_topic_lifecycle(client: Client) -> None:
    topic = name("life")
    record = client.create_topic(
        topic, partitions=2, retention_ms=0, visibility_timeout_ms=5000
    )
    assert (record["name"], record["partitions"]) == (topic, 2)
    assert (record["retention_ms"], record["visibility_timeout_ms"]) == (0, 5000)
    described = client.topic(topic)
    assert [s["index"] for s in described["partition_stats"]] == [0, 1]
    altered = client.alter_topic(topic, visibility_timeout_ms=7000)
    assert altered["visibility_timeout_ms"] == 7000
    with pytest.raises(Conflict, match="already exists"):
        client.create_topic(topic)
    client.delete_topic(topic)
    with pytest.raises(NotFound):
        client.topic(topic)
    with pytest.raises(NotFound):
        client.delete_topic(topic)


def test_topics_iterates_pages(client: Client) -> None:
    prefix = name("page")
    made = [f"{prefix}-{i}" for i in range(5)]
    for topic in made:
        client.create_topic(topic, partitions=1)
    try:
        listed = [t["name"] for t in client.topics(page_size=2)]
        assert [t for t in listed if t.startswith(prefix)] == made
        assert listed == sorted(listed)
    finally:
        for topic in made:
            client.delete_topic(topic)


@pytest.fixture
def schema_topic(client: Client) -> Iterator[str]:
    topic = name("schema")
    client.create_topic(topic, partitions=1, schema=ORDER)
    yield topic
    client.delete_topic(topic)


def test_schemas(client: Client, schema_topic: str) -> None:
    history = client.schemas(schema_topic)
    assert history["current_version"] == 1
    assert [v["version"] for v in history["versions"]] == [1]
    latest = client.schema(schema_topic)
    assert isinstance(latest, Schema)
    assert (latest.version, latest.json()) == (1, json.loads(ORDER))
    assert client.schema(schema_topic, 1) == latest
    with pytest.raises(NotFound):
        client.schema(schema_topic, 9)

    wider = {
        "type": "object",
        "properties": {"id": {"type": "integer"}, "note": {"type": "string"}},
    }
    report = client.check_schema(schema_topic, wider)
    assert report["compatible"] is True
    assert report["violations"] == []
    assert report["checked_versions"] == [1]
    assert client.check_schema(schema_topic, ORDER)["no_change"] is True
    narrower = {"type": "object", "properties": {"id": {"type": "string"}}}
    refused = client.check_schema(schema_topic, narrower, against="all")
    assert refused["compatible"] is False
    assert refused["violations"][0]["against_version"] == 1
    assert client.schemas(schema_topic)["current_version"] == 1  # a dry run

    record = client.set_schema(schema_topic, wider, base_version=1)
    assert record["schema_version"] == 2
    assert client.schema(schema_topic).json() == wider
    with pytest.raises(Conflict):
        client.set_schema(schema_topic, ORDER, base_version=1)
    with pytest.raises(BadRequest, match="schema"):
        client.set_schema(schema_topic, narrower)

    client.produce(schema_topic, b'{"id": 7, "note": "n"}')
    with pytest.raises(BadRequest) as refusal:
        client.produce(schema_topic, b'{"id": "seven"}')
    assert refusal.value.status == 400
    assert "id" in refusal.value.error


def test_users(client: Client, node, topic: str) -> None:
    user = name("user")
    record = client.create_user(
        user, "first-password-1", [{"action": "consume", "patterns": [topic]}]
    )
    assert record["username"] == user
    assert record["grants"] == [{"action": "consume", "patterns": [topic]}]
    assert client.user(user)["username"] == user
    assert user in [u["username"] for u in client.users(page_size=1)]
    with pytest.raises(Conflict):
        client.create_user(user, "first-password-1")

    with Client(node.base, auth=(user, "first-password-1")) as theirs:
        assert theirs.consume(topic) is None
        with pytest.raises(Forbidden) as refused:
            theirs.produce(topic, b"x")
        assert refused.value.status == 403
        theirs.set_password(
            user, "second-password-2", current_password="first-password-1"
        )
    with (
        Client(node.base, auth=(user, "first-password-1"), retries=0) as old,
        pytest.raises(Unauthorized),
    ):
        old.consume(topic)

    granted = client.set_grants(
        user, [{"action": "produce", "patterns": [topic, "orders.*"]}]
    )
    assert granted["grants"] == [{"action": "produce", "patterns": [topic, "orders.*"]}]
    client.set_password(user, "third-password-3")  # an admin's reset
    with Client(node.base, auth=(user, "third-password-3")) as theirs:
        theirs.produce(topic, b"now allowed")
        with pytest.raises(Forbidden):
            theirs.consume(topic)

    client.delete_user(user)
    with pytest.raises(NotFound):
        client.user(user)


def test_children(client: Client) -> None:
    parent, child, delayed = name("parent"), name("child"), name("delayed")
    client.create_topic(parent, partitions=1)
    client.create_topic(child, partitions=1)
    try:
        record = client.attach(parent, child)
        assert record["children"] == [child]
        client.create_topic(delayed, parent=parent, fanout_delay_ms=60_000)
        listed = {c["name"]: c for c in client.children(parent)}
        assert set(listed) == {child, delayed}
        assert listed[delayed]["delay_ms"] == 60_000
        client.produce(parent, b'{"to": "both"}')
        copied = client.consume(child, wait=5)
        assert copied is not None and copied.payload == b'{"to": "both"}'
        client.ack(child, copied)
        assert client.consume(delayed) is None  # due in a minute
        assert client.attach(parent, child)["children"] == [child, delayed]
        with pytest.raises(Conflict, match="no chains"):
            client.attach(delayed, child)
        client.detach(parent, child)
        assert [c["name"] for c in client.children(parent)] == [delayed]
        with pytest.raises(NotFound):
            client.detach(parent, child)
    finally:
        for topic in (delayed, child, parent):
            client.delete_topic(topic)


def test_schema_text_is_sent_as_written(client: Client) -> None:
    topic = name("text")
    text = b'{"type":"object","properties":{"b":{"type":"number","maximum":1.50}}}'
    client.create_topic(topic, partitions=1, schema=text)
    try:
        # Key order and number spellings are the text's (1.50, not 1.5).
        assert client.schema(topic).document == text
    finally:
        client.delete_topic(topic)
