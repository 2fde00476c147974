"""A produce payload that repeats a key, over real HTTP (issue 50, item 1).

The rulebook ("What 'one JSON text' means"): "When an object repeats a key,
the last value wins, and that value is the one checked." On a topic with a
schema, single and batch produce follow it, and the message is stored byte
for byte as sent. Narad's own request bodies still refuse a repeated key.
"""

from __future__ import annotations

import json
import uuid

import pytest

A_IS_STRING = {"properties": {"a": {"type": "string"}}}


def make(http, topic: str, schema=None) -> None:
    body = {"name": topic, "partitions": 1}
    if schema is not None:
        body["schema"] = schema
    resp = http.post("/v1/topics", body)
    assert resp.status == 201, resp.data


def stored(http, topic: str) -> list[bytes]:
    """The raw consume response of every message of partition 0, by offset."""
    [stats] = http.get(f"/v1/topics/{topic}").json()["partition_stats"]
    found = []
    for offset in range(stats["oldest_offset"], stats["next_offset"]):
        resp = http.get(f"/v1/topics/{topic}/consume?partition=0&offset={offset}")
        assert resp.status == 200, resp.data
        found.append(resp.data)
    return found


def test_the_last_value_wins_and_is_the_one_checked(http, topic):
    make(http, topic, A_IS_STRING)
    sent = b'{"a": 1, "a": "x"}'
    assert http.post(f"/v1/topics/{topic}/produce", sent).status == 202
    refused = http.post(f"/v1/topics/{topic}/produce", b'{"a": "x", "a": 1}')
    assert refused.status == 400
    assert "- at '/a': got integer, want string" in refused.error
    assert "duplicate" not in refused.error
    [message] = stored(http, topic)
    # Stored byte for byte as sent, repeat and spacing kept.
    assert b'"payload":' + sent + b"}" in message


def test_repeats_nested_and_in_arrays(http, topic):
    schema = {
        "type": "object",
        "required": ["items"],
        "properties": {
            "items": {
                "type": "array",
                "items": {"properties": {"qty": {"type": "integer", "minimum": 1}}},
            }
        },
    }
    make(http, topic, schema)
    good = b'{"items": [{"qty": 0, "qty": 2}, {"qty": 1}], "items": [{"qty": 3}]}'
    assert http.post(f"/v1/topics/{topic}/produce", good).status == 202
    good = b'{"items": 7, "items": [{"qty": "a", "qty": 5}]}'
    assert http.post(f"/v1/topics/{topic}/produce", good).status == 202
    bad = b'{"items": [{"qty": 3, "qty": 0}]}'
    refused = http.post(f"/v1/topics/{topic}/produce", bad)
    assert refused.status == 400
    assert "- at '/items/0/qty'" in refused.error
    assert len(stored(http, topic)) == 2


def test_a_batch_checks_each_message_by_its_last_values(http, topic):
    make(http, topic, A_IS_STRING)
    first, second = '{"a": 1, "a": "x"}', '{"b": {"c": 1, "c": 2}, "a": "y"}'
    batch = {"messages": [{"value": first}, {"value": second}]}
    resp = http.post(f"/v1/topics/{topic}/produce/batch", batch)
    assert (resp.status, resp.json()) == (202, {"accepted": 2})
    bad = {"messages": [{"value": first}, {"value": '{"a": "x", "a": null}'}]}
    resp = http.post(f"/v1/topics/{topic}/produce/batch", bad)
    assert resp.status == 400
    assert "messages[1]" in resp.error
    assert "- at '/a': got null, want string" in resp.error
    messages = stored(http, topic)
    assert len(messages) == 2  # all or nothing: the refused batch stored none
    assert b'"payload":' + first.encode() + b"}" in messages[0]
    assert b'"payload":' + second.encode() + b"}" in messages[1]


def test_a_topic_without_a_schema_stores_repeats_as_sent(http, topic):
    make(http, topic)
    sent = b'{"a": 1, "a": 2}'
    assert http.post(f"/v1/topics/{topic}/produce", sent).status == 202
    [message] = stored(http, topic)
    assert b'"payload":' + sent + b"}" in message


def test_narads_own_bodies_still_refuse_repeated_keys(http, topic):
    make(http, topic, A_IS_STRING)
    name = f"rk-{uuid.uuid4().hex[:12]}"
    refusals = [
        # Topic create, and a schema inside it.
        ("POST", "/v1/topics", '{"name": "NAME", "name": "NAME-b"}'),
        (
            "POST",
            "/v1/topics",
            '{"name": "NAME", "schema": {"type": "object", "type": "array"}}',
        ),
        # PATCH, and a schema inside it.
        ("PATCH", f"/v1/topics/{topic}", '{"retention_ms": 0, "retention_ms": 0}'),
        (
            "PATCH",
            f"/v1/topics/{topic}",
            '{"schema": {"required": [], "required": []}}',
        ),
        # The batch envelope and its entries.
        (
            "POST",
            f"/v1/topics/{topic}/produce/batch",
            '{"messages": [], "messages": []}',
        ),
        (
            "POST",
            f"/v1/topics/{topic}/produce/batch",
            '{"messages": [{"value": "{}", "value": "{}"}]}',
        ),
        (
            "POST",
            f"/v1/topics/{topic}/ack/batch",
            '{"receipt_handles": [], "receipt_handles": []}',
        ),
        # The dry run's body.
        (
            "POST",
            f"/v1/topics/{topic}/schemas/compatibility",
            '{"schema": {}, "schema": true}',
        ),
        # Users.
        (
            "POST",
            "/v1/users",
            '{"username": "NAME", "username": "x", "password": "long-enough-1"}',
        ),
    ]
    for method, path, body in refusals:
        resp = http.request(method, path, body.replace("NAME", name).encode())
        assert resp.status == 400, (method, path, resp.data)
        assert "duplicate key" in resp.error, (method, path, resp.error)
    assert http.get(f"/v1/topics/{name}").status == 404
    assert stored(http, topic) == []
    versions = http.get(f"/v1/topics/{topic}/schemas").json()["versions"]
    assert len(versions) == 1


@pytest.mark.parametrize(
    ("payload", "accepted"),
    [
        (b'{"a": "x", "a": "y"}', True),
        (b'{"a": null, "a": "y"}', True),
        (b'{"a": "y", "a": null}', False),
        (b'[{"a": 1, "a": 2}]', True),  # not an object: properties do not apply
    ],
)
def test_each_verdict_is_the_last_values(http, topic, payload, accepted):
    make(http, topic, A_IS_STRING)
    resp = http.post(f"/v1/topics/{topic}/produce", payload)
    assert resp.status == (202 if accepted else 400), resp.data
    messages = stored(http, topic)
    assert len(messages) == (1 if accepted else 0)
    if accepted:
        assert b'"payload":' + payload + b"}" in messages[0]
        # A consumer's parser sees the last value too.
        assert json.loads(messages[0])["payload"] == json.loads(payload)
