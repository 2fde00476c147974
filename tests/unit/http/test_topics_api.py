"""The topics API: field rules, errors, pagination (in-process, fakeredis)."""

from __future__ import annotations

import re
import time

import pytest

from narad.storage import Status
from narad_redis import RedisStorage


def create(client, **body):
    return client.simulate_post("/v1/topics", json=body)


def test_create_with_defaults_and_get(client):
    resp = create(client, name="orders")
    assert resp.status_code == 201
    assert resp.headers["location"] == "/v1/topics/orders"
    record = resp.json
    assert record["partitions"] == 3
    assert record["visibility_timeout_ms"] == 30000
    assert record["max_in_flight_per_partition"] == 1024
    assert record["max_acked_ahead_per_partition"] == 1024
    assert record["schema_version"] is None
    got = client.simulate_get("/v1/topics/orders").json
    assert got["partition_stats"] == [
        {"index": i, "oldest_offset": 0, "next_offset": 0, "in_flight": 0}
        for i in range(3)
    ]


def test_create_with_every_setting(client):
    resp = create(
        client,
        name="a.b_c-1",
        partitions=108,
        retention_ms=3_600_000,
        visibility_timeout_ms=5,
        max_in_flight_per_partition=2,
        max_acked_ahead_per_partition=3,
    )
    assert resp.status_code == 201, resp.text
    assert resp.json["partitions"] == 108
    assert resp.json["retention_ms"] == 3_600_000


@pytest.mark.parametrize(
    ("body", "words"),
    [
        ({"name": ""}, "name must be 1 to 249"),
        ({"name": "x" * 250}, "name must be 1 to 249"),
        ({"name": "a/b"}, "name must be 1 to 249"),
        ({"name": "a b"}, "name must be 1 to 249"),
        ({"name": 5}, "name must be a string"),
        ({}, "name must be a string"),
        ({"name": "t", "partitions": 0}, "partitions must be from 1 to 108"),
        ({"name": "t", "partitions": 109}, "partitions must be from 1 to 108"),
        ({"name": "t", "partitions": "3"}, "partitions must be an integer"),
        ({"name": "t", "partitions": 3.5}, "partitions must be an integer"),
        ({"name": "t", "partitions": True}, "partitions must be an integer"),
        ({"name": "t", "retention_ms": 1000}, "retention_ms must be 0"),
        ({"name": "t", "retention_ms": -1}, "retention_ms must be from 0"),
        (
            {"name": "t", "visibility_timeout_ms": 0},
            "visibility_timeout_ms must be from 1",
        ),
        (
            {"name": "t", "max_in_flight_per_partition": 0},
            "max_in_flight_per_partition",
        ),
        (
            {"name": "t", "max_acked_ahead_per_partition": -3},
            "max_acked_ahead_per_partition",
        ),
        ({"name": "t", "colour": "red"}, "unknown field 'colour'"),
    ],
)
def test_create_refuses_bad_fields(client, body, words):
    resp = client.simulate_post("/v1/topics", json=body)
    assert resp.status_code == 400
    assert words in resp.json["error"]
    assert client.simulate_get("/v1/topics").json["topics"] == []


@pytest.mark.parametrize(
    ("body", "words"),
    [
        (b"not json", "request body is not JSON"),
        (b"[1]", "must be a JSON object"),
        (b"", "request body empty"),
        (b'{"name": "t"} {"name": "u"}', "trailing data"),
    ],
)
def test_create_refuses_bad_bodies(client, body, words):
    resp = client.simulate_post("/v1/topics", body=body)
    assert resp.status_code == 400
    assert words in resp.json["error"]


def test_retention_zero_keeps_forever(client):
    assert create(client, name="t", retention_ms=0).json["retention_ms"] == 0


def test_duplicate_name_is_409(client):
    assert create(client, name="t").status_code == 201
    resp = create(client, name="t")
    assert resp.status_code == 409
    assert resp.json == {"error": "topic t already exists"}


def test_unknown_topic_is_404(client):
    for resp in (
        client.simulate_get("/v1/topics/nope"),
        client.simulate_patch("/v1/topics/nope", json={"retention_ms": 0}),
        client.simulate_delete("/v1/topics/nope"),
        client.simulate_post("/v1/topics/nope/produce", body=b"x"),
        client.simulate_get("/v1/topics/nope/consume"),
    ):
        assert resp.status_code == 404
        assert resp.json == {"error": "topic nope not found"}


def test_body_over_one_mib_is_413_before_reading(client):
    resp = client.simulate_post("/v1/topics", body=b"{" + b" " * (1024 * 1024) + b"}")
    assert resp.status_code == 413
    assert "error" in resp.json


def test_list_is_paginated_by_name(client):
    for name in ["c", "a", "e", "b", "d"]:
        create(client, name=name)
    page = client.simulate_get("/v1/topics", params={"limit": 2}).json
    assert [t["name"] for t in page["topics"]] == ["a", "b"]
    page = client.simulate_get(
        "/v1/topics", params={"limit": 2, "page_token": page["next_page_token"]}
    ).json
    assert [t["name"] for t in page["topics"]] == ["c", "d"]
    page = client.simulate_get(
        "/v1/topics", params={"limit": 2, "page_token": page["next_page_token"]}
    ).json
    assert [t["name"] for t in page["topics"]] == ["e"]
    assert page["next_page_token"] is None


def test_alter_settings(client):
    create(client, name="t")
    resp = client.simulate_patch(
        "/v1/topics/t",
        json={
            "retention_ms": 0,
            "visibility_timeout_ms": 100,
            "max_in_flight_per_partition": 7,
        },
    )
    assert resp.status_code == 200, resp.text
    assert resp.json["retention_ms"] == 0
    assert resp.json["visibility_timeout_ms"] == 100
    assert client.simulate_get("/v1/topics/t").json["max_in_flight_per_partition"] == 7


@pytest.mark.parametrize(
    ("body", "words"),
    [
        ({"partitions": 5}, "partitions cannot be changed"),
        ({"name": "u"}, "unknown field 'name'"),
        ({"retention_ms": 5}, "retention_ms must be 0"),
        ({"visibility_timeout_ms": "1"}, "must be an integer"),
    ],
)
def test_alter_refuses_bad_fields(client, body, words):
    create(client, name="t")
    resp = client.simulate_patch("/v1/topics/t", json=body)
    assert resp.status_code == 400
    assert words in resp.json["error"]


def test_delete_removes_topic_and_messages(client):
    create(client, name="t", partitions=1)
    client.simulate_post("/v1/topics/t/produce", body=b"hello")
    assert client.simulate_delete("/v1/topics/t").status_code == 204
    assert client.simulate_get("/v1/topics/t").status_code == 404
    create(client, name="t", partitions=1)
    assert client.simulate_get("/v1/topics/t/consume").status_code == 204


def test_health_and_readiness(client):
    assert client.simulate_get("/healthz").status_code == 200
    assert client.simulate_get("/readyz").status_code == 200
    assert (
        b"narad_schema_validations_in_flight" in client.simulate_get("/metrics").content
    )


def test_readiness_is_503_when_storage_does_not_answer(config):
    from narad import testing
    from tests.nodes import free_port

    dead = config.replace(
        storage__url=f"redis://127.0.0.1:{free_port()}/0",
        plugins__redis__retry_attempts=0,
    )
    client = testing.client(dead)
    assert client.simulate_get("/healthz").status_code == 200
    assert client.simulate_get("/readyz").status_code == 503
    resp = client.simulate_get("/v1/topics/t")
    assert resp.status_code == 503
    assert resp.json == {"error": "storage unavailable, retry"}


def test_unknown_route_is_json_404(client):
    resp = client.simulate_get("/v2/nothing")
    assert resp.status_code == 404
    assert "error" in resp.json


def cache_entries(client, cache: str) -> int:
    text = client.simulate_get("/metrics").text
    match = re.search(rf'^narad_cache_entries\{{cache="{cache}"\}} (\S+)$', text, re.M)
    assert match, f"no narad_cache_entries for {cache}"
    return int(float(match[1]))


def test_metrics_show_the_caches_and_a_delete_empties_them(client):
    schema = {"properties": {"id": {"type": "string", "pattern": "^[a-z]+$"}}}
    client.simulate_post("/v1/topics", json={"name": "t", "schema": schema})
    # The create's own notification, or the listener going live, may land
    # after a produce and drop what it cached (the validator at once, the
    # round-robin counter after a grace): produce until both are held.
    deadline = time.monotonic() + 10
    while True:
        resp = client.simulate_post("/v1/topics/t/produce", body=b'{"id": "a"}')
        assert resp.status_code == 202
        held = cache_entries(client, "validators"), cache_entries(client, "round_robin")
        if held == (1, 1):
            break
        assert time.monotonic() < deadline, held
        time.sleep(0.05)
    assert cache_entries(client, "patterns") >= 1
    assert client.simulate_delete("/v1/topics/t").status_code == 204
    assert cache_entries(client, "validators") == 0
    assert cache_entries(client, "topic_records") == 0


@pytest.mark.parametrize(
    ("method", "write", "body"),
    [
        ("DELETE", "delete_topic", None),
        ("PATCH", "alter_topic", {"compatibility": "NONE"}),
    ],
)
def test_a_topic_that_keeps_changing_names_the_request_to_retry(
    client, monkeypatch, method, write, body
):
    # Every write finds the topic moved on (children come and go each time).
    assert create(client, name="busy").status_code == 201
    monkeypatch.setattr(RedisStorage, write, lambda *_: Status.STALE_CHILDREN)
    resp = client.simulate_request(method, "/v1/topics/busy", json=body)
    assert resp.status_code == 503
    assert resp.json == {"error": "topic busy kept changing during the request; retry"}
