"""Schema histories over real HTTP: versions, change requests, budgets, effect."""

from __future__ import annotations

import itertools
import json
import threading

import pytest

import narad_redis
from narad import jsontext
from narad.config import Config
from narad.storage import SchemaLimits
from narad.testing.storage_contract import schema_version
from tests.nodes import Node

OBJECT_WITH_ID = {
    "type": "object",
    "required": ["id"],
    "properties": {"id": {"type": "integer"}},
}


def make(http, topic: str, schema=None):
    body = {"name": topic, "partitions": 1}
    if schema is not None:
        body["schema"] = schema
    resp = http.post("/v1/topics", body)
    assert resp.status == 201, resp.data
    return resp.json()


def change(http, topic: str, schema, **extra):
    return http.patch(f"/v1/topics/{topic}", {"schema": schema, **extra})


def widened(n: int) -> dict:
    """Version n of a history where every step adds an optional property."""
    props = {f"p{i}": {"type": "string"} for i in range(n)}
    return {"type": "object", "properties": props}


def test_history_grows_and_is_readable(http, topic):
    make(http, topic, widened(1))
    for n in (2, 3):
        resp = change(http, topic, widened(n))
        assert resp.status == 200
        assert resp.json()["schema_version"] == n
    history = http.get(f"/v1/topics/{topic}/schemas").json()
    assert [v["version"] for v in history["versions"]] == [1, 2, 3]
    for v in history["versions"]:
        doc = http.get(f"/v1/topics/{topic}/schemas/{v['version']}")
        assert len(doc.data) == v["size"]
        assert json.loads(doc.data) == widened(v["version"])
    latest = http.get(f"/v1/topics/{topic}/schemas/latest")
    assert json.loads(latest.data) == widened(3)
    assert http.get(f"/v1/topics/{topic}/schemas/4").status == 404
    assert http.get(f"/v1/topics/{topic}/schemas/zero").status == 400


def test_versions_stored_compacted_with_numbers_as_written(http, topic):
    text = '{ "type" : "number",\n  "maximum" : 1e2 , "multipleOf": 0.50 }'
    resp = http.post("/v1/topics", '{"name": "' + topic + '", "schema": ' + text + "}")
    assert resp.status == 201
    stored = http.get(f"/v1/topics/{topic}/schemas/1").data
    assert stored == b'{"type":"number","maximum":1e2,"multipleOf":0.50}'


def test_idempotent_change_registers_nothing(http, topic):
    make(http, topic, {"type": "object", "maximum": 10, "required": ["a", "b"]})
    same = '{"required": ["a", "b"],\n "maximum": 1e1, "type": "object"}'
    resp = http.patch(f"/v1/topics/{topic}", '{"schema": ' + same + "}")
    assert resp.status == 200
    assert resp.json()["schema_version"] == 1
    assert len(http.get(f"/v1/topics/{topic}/schemas").json()["versions"]) == 1


def test_annotation_only_change_registers_nothing(http, topic):
    make(http, topic, {"title": "a", "properties": {"description": {"type": "string"}}})
    resp = change(
        http,
        topic,
        {
            "title": "b",
            "description": "docs",
            "$comment": "c",
            "properties": {"description": {"type": "string", "examples": ["x"]}},
        },
    )
    assert resp.status == 200
    assert resp.json()["schema_version"] == 1
    # A property named description is a property, not an annotation.
    resp = change(http, topic, {"title": "a", "properties": {}})
    assert resp.status == 400


def test_true_documented_as_an_object_registers_a_version(http, topic):
    # true accepts what {} does, but it is another JSON value, not an
    # annotation: {} becoming true registers a version (issue 50), and so
    # does true becoming an object that documents it. Documenting the
    # object again is no change.
    make(http, topic, {"properties": {"a": True}})
    resp = change(http, topic, {"properties": {"a": {"description": "any value"}}})
    assert resp.status == 200
    assert resp.json()["schema_version"] == 2
    resp = change(http, topic, {"properties": {"a": {"description": "anything"}}})
    assert resp.status == 200
    assert resp.json()["schema_version"] == 2
    assert len(http.get(f"/v1/topics/{topic}/schemas").json()["versions"]) == 2


def test_conditional_change(http, topic):
    make(http, topic, widened(1))
    resp = change(http, topic, widened(2), schema_base_version=0)
    assert resp.status == 409
    assert resp.error == "schema version conflict"
    assert change(http, topic, widened(2), schema_base_version=1).status == 200
    assert change(http, topic, widened(3), schema_base_version=1).status == 409
    assert (
        change(http, topic, widened(3), schema_base_version=2).json()["schema_version"]
        == 3
    )


def test_schema_cannot_be_removed(http, topic):
    make(http, topic, widened(1))
    resp = http.patch(f"/v1/topics/{topic}", '{"schema": null}')
    assert resp.status == 400
    assert "null" in resp.error


def test_incompatible_change_names_keyword_and_place(http, topic):
    make(http, topic, {"properties": {"qty": {"type": "integer"}}})
    resp = change(http, topic, {"properties": {"qty": {"type": "string"}}})
    assert resp.status == 400
    assert 'at /properties/qty: type "integer" no longer allowed' in resp.error


def test_refusals_quote_a_long_property_name_short(http, topic):
    # A property name is the client's text: a refusal that names where it
    # sits quotes at most 100 characters of it, at create and at a change.
    long = "p" * 100_000
    resp = http.post(
        "/v1/topics",
        {"name": topic, "schema": {"properties": {long: {"pattern": "(?=a)"}}}},
    )
    assert resp.status == 400
    assert len(resp.error) < 300
    assert "/properties/" + "p" * 100 + "…/pattern" in resp.error
    make(http, topic, {"properties": {long: {"type": "integer"}}})
    resp = change(http, topic, {"properties": {long: {"type": "string"}}})
    assert resp.status == 400
    assert len(resp.error) < 300
    assert "at /properties/" + "p" * 100 + '…: type "integer"' in resp.error


def test_schema_added_to_a_topic_without_one(http, topic):
    make(http, topic)
    assert http.post(f"/v1/topics/{topic}/produce", b"not json").status == 202
    resp = change(http, topic, {"type": "object"})
    assert resp.status == 200
    assert resp.json()["schema_version"] == 1
    assert http.post(f"/v1/topics/{topic}/produce", b"not json").status == 400


def test_other_settings_leave_the_schema_alone(http, topic):
    make(http, topic, widened(1))
    resp = http.patch(f"/v1/topics/{topic}", {"retention_ms": 0})
    assert resp.json()["schema_version"] == 1


def test_delete_deletes_history(http, topic):
    make(http, topic, widened(1))
    change(http, topic, widened(2))
    assert http.delete(f"/v1/topics/{topic}").status == 204
    assert make(http, topic)["schema_version"] is None
    assert http.get(f"/v1/topics/{topic}/schemas").json()["versions"] == []
    http.delete(f"/v1/topics/{topic}")
    assert make(http, topic, OBJECT_WITH_ID)["schema_version"] == 1
    assert len(http.get(f"/v1/topics/{topic}/schemas").json()["versions"]) == 1


def outcome(resp) -> tuple[int, str]:
    return resp.status, resp.error if resp.status >= 400 else ""


def racing_recreates(http, node, topic, request, judge=outcome) -> set:
    """What ``judge`` made of the answers ``request(client)`` got from 4
    clients while ``topic`` was deleted and created again 60 times, with a
    schema every other time."""
    make(http, topic, {"type": "object"})
    answers: set[tuple[int, str]] = set()
    done = threading.Event()

    def repeat() -> None:
        client = node.client()
        while not done.is_set():
            answers.add(judge(request(client)))
        client.close()

    threads = [threading.Thread(target=repeat) for _ in range(4)]
    for thread in threads:
        thread.start()
    for n in range(60):
        assert http.delete(f"/v1/topics/{topic}").status == 204
        make(http, topic, {"type": "object"} if n % 2 else None)
    done.set()
    for thread in threads:
        thread.join()
    return answers


def test_produces_racing_a_delete_and_recreate_never_miss_the_schema(http, topic, node):
    # A worker that still held the record of a deleted topic read "version
    # 1" of a history that was gone and answered 404 "topic ... has no
    # schema version 1", where the topic was gone (404 topic not found) or
    # created again (without a schema: the produce is stored).
    answers = racing_recreates(
        http,
        node,
        topic,
        lambda client: client.post(f"/v1/topics/{topic}/produce", b'{"x": 1}'),
    )
    kept_changing = f"topic {topic} kept changing during the request; retry"
    allowed = {(202, ""), (404, f"topic {topic} not found"), (503, kept_changing)}
    assert answers <= allowed


def test_the_latest_schema_racing_a_delete_and_recreate(http, topic, node):
    # The record read said version 1, and the history went with the topic
    # before it was read: 404 "topic ... has no schema version 1".
    answers = racing_recreates(
        http,
        node,
        topic,
        lambda client: client.get(f"/v1/topics/{topic}/schemas/latest"),
    )
    allowed = {
        (200, ""),
        (404, f"topic {topic} not found"),
        (404, f"topic {topic} has no schema"),
        (503, f"topic {topic} kept changing during the request; retry"),
    }
    assert answers <= allowed


def test_a_compatibility_check_racing_a_delete_and_recreate(http, topic, node):
    # The record read said version 1, and the history went with the topic
    # before the check read it: 404 "topic ... has no schema version 1".
    answers = racing_recreates(
        http,
        node,
        topic,
        lambda client: client.post(
            f"/v1/topics/{topic}/schemas/compatibility", {"schema": {"type": "array"}}
        ),
    )
    allowed = {(200, ""), (404, f"topic {topic} not found")}
    assert answers <= allowed


def test_a_history_racing_a_delete_and_recreate_is_one_topics(http, topic, node):
    # The record and the history were two reads: "current_version": 1 came
    # with no versions, or none with version 1.
    def judge(resp):
        if resp.status != 200:
            return outcome(resp)
        history = resp.json()
        versions = [v["version"] for v in history["versions"]]
        return 200, versions == list(range(1, (history["current_version"] or 0) + 1))

    answers = racing_recreates(
        http,
        node,
        topic,
        lambda client: client.get(f"/v1/topics/{topic}/schemas"),
        judge,
    )
    assert answers <= {(200, True), (404, f"topic {topic} not found")}


def test_a_topic_holds_at_most_1000_versions(http, topic):
    make(http, topic, {"enum": [0]})
    for n in range(2, 1001):
        resp = change(http, topic, {"enum": list(range(n))})
        assert resp.status == 200, (n, resp.data)
    resp = change(http, topic, {"enum": list(range(1001))})
    assert resp.status == 409
    assert "1000 versions" in resp.error


def test_topic_byte_budget(http, topic):
    pad = "x" * 240_000

    def version(n):
        return {
            "description": pad + str(n),
            "properties": {f"p{i}": {} for i in range(n)},
        }

    make(http, topic, version(1))
    n = 1
    while True:
        n += 1
        resp = change(http, topic, version(n))
        if resp.status != 200:
            break
    assert resp.status == 409
    assert "topic budget" in resp.error
    assert "4194304" in resp.error
    sizes = http.get(f"/v1/topics/{topic}/schemas").json()
    assert sizes["total_bytes"] <= 4 * 1024 * 1024
    assert (
        sizes["total_bytes"] + len(jsontext.compact(json.dumps(version(n)).encode()))
        > 4 * 1024 * 1024
    )


def test_new_version_takes_effect_on_every_worker_at_once(http, topic, node):
    make(http, topic, {"type": "object", "properties": {"id": {"type": "integer"}}})
    clients = [node.client() for _ in range(8)]
    for c in clients:  # warm every connection's worker cache with version 1
        assert c.post(f"/v1/topics/{topic}/produce", b'{"id": 1}').status == 202
        assert c.post(f"/v1/topics/{topic}/produce", b'{"id": "x"}').status == 400
    resp = change(
        http,
        topic,
        {"type": "object", "properties": {"id": {"type": ["integer", "string"]}}},
    )
    assert resp.status == 200
    for c in clients:
        assert c.post(f"/v1/topics/{topic}/produce", b'{"id": "x"}').status == 202
        c.close()


def test_concurrent_changes_on_two_nodes_give_a_gapless_checked_history(
    storage_url, node, tmp_path, topic
):
    from narad.plugins import Plugins
    from narad.plugins import get_plugin_manager
    from narad.schema.compatibility import engine

    other = Node(tmp_path, storage_url=storage_url).start()
    try:
        http = node.client()
        make(http, topic, {"enum": [0]})
        outcomes: list[int] = []

        def propose(client, seed: int) -> None:
            for k in range(6):
                # Each client widens or narrows in its own way; only changes
                # compatible with whatever is current may land.
                values = sorted({0, seed, seed + 100 * k, *range(k)})
                resp = client.patch(f"/v1/topics/{topic}", {"schema": {"enum": values}})
                outcomes.append(resp.status)

        threads = [
            threading.Thread(target=propose, args=(n.client(), seed))
            for seed, n in enumerate([node, other] * 4, start=1)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert set(outcomes) <= {200, 400}
        history = http.get(f"/v1/topics/{topic}/schemas").json()
        versions = [v["version"] for v in history["versions"]]
        assert versions == list(range(1, len(versions) + 1))
        assert len(versions) > 1
        plugins = Plugins(get_plugin_manager(load_entry_points=False))
        _, draft = plugins.drafts()
        docs = [
            jsontext.loads(
                http.get(f"/v1/topics/{topic}/schemas/{v}").data, max_depth=64
            )
            for v in versions
        ]
        for old, new in itertools.pairwise(docs):
            assert not engine.check(
                old,
                new,
                old_draft=draft,
                new_draft=draft,
                rules=plugins.compatibility_rules(),
            )
    finally:
        other.stop()


# Versions an older node stored before registration meta-checked what a
# reference leads to (8181a34): each breaks the validator in its own place.
UNCHECKED_TARGETS = [
    b'{"$ref":"#/x-lib","x-lib":{"type":"bogus"}}',  # compiling
    b'{"$ref":"#/x-lib","x-lib":{"items":{"properties":5}}}',  # compiling
    b'{"$ref":"#/x-lib","x-lib":{"minimum":"a"}}',  # validating
    b'{"$ref":"#/x-lib","x-lib":{"multipleOf":0}}',  # validating
    b'{"$ref":"#/x-lib/const","x-lib":{"const":{"pattern":"(?=a)"}}}',  # data
]


@pytest.fixture
def storage(storage_url):
    backend = narad_redis.connect(storage_url, Config.load(env={}))
    yield backend
    backend.close()


@pytest.mark.parametrize(
    "stored", UNCHECKED_TARGETS, ids=["type", "properties", "minimum", "zero", "data"]
)
def test_a_stored_version_that_cannot_be_used_refuses_produce_until_replaced(
    http, topic, storage, stored
):
    make(http, topic, {"type": "integer"})
    written = storage.append_schema(
        storage.get_topic(topic),
        schema_version(2, stored, False),
        expected_current=1,
        limits=SchemaLimits(1 << 40, 1 << 40, 1000),
    )
    assert written.version == 2
    for _ in range(2):  # the second from the cached outcome
        resp = http.post(f"/v1/topics/{topic}/produce", b"1")
        assert resp.status == 409, resp.data
        assert f"version 2 of topic {topic}" in resp.error
        assert "cannot be used" in resp.error
        assert "register a new version" in resp.error
    batch = {"messages": [{"value": "1"}]}
    resp = http.post(f"/v1/topics/{topic}/produce/batch", batch)
    assert resp.status == 409 and "cannot be used" in resp.error
    stats = http.get(f"/v1/topics/{topic}").json()["partition_stats"]
    assert sum(s["next_offset"] for s in stats) == 0
    assert http.get(f"/v1/topics/{topic}/schemas/2").data == stored
    resp = http.post(
        f"/v1/topics/{topic}/schemas/compatibility?against=all", {"schema": True}
    )
    assert resp.status == 200 and resp.json()["compatible"], resp.data
    resp = change(http, topic, True)
    assert resp.status == 200 and resp.json()["schema_version"] == 3, resp.data
    assert http.post(f"/v1/topics/{topic}/produce", b"1").status == 202


def test_a_stored_version_the_validator_can_use_keeps_working(http, topic, storage):
    make(http, topic, {"type": "string"})
    # Registration refuses minLength -1 there today, but the validator reads
    # it as it always did: no limit.
    stored = b'{"$ref":"#/x-lib","x-lib":{"minLength":-1}}'
    storage.append_schema(
        storage.get_topic(topic),
        schema_version(2, stored, False),
        expected_current=1,
        limits=SchemaLimits(1 << 40, 1 << 40, 1000),
    )
    for body in (b'""', b"1", b"{}"):
        assert http.post(f"/v1/topics/{topic}/produce", body).status == 202


def test_a_version_whose_draft_this_node_lacks_is_refused_by_name(
    http, storage_url, tmp_path, topic
):
    d4 = "http://json-schema.org/draft-04/schema#"
    make(http, topic, {"$schema": d4, "type": "integer"})
    # A node started without the draft-04 plugin, over the same storage.
    lacking = Node(
        tmp_path,
        storage_url=storage_url,
        env={"NARAD_PLUGINS_DISABLED": "narad_draft4"},
    ).start()
    try:
        other = lacking.client()
        for resp in (
            other.post(f"/v1/topics/{topic}/produce", b"1"),
            other.post(f"/v1/topics/{topic}/produce", b"2"),
            other.post(f"/v1/topics/{topic}/schemas/compatibility", {"schema": True}),
            change(other, topic, True),
        ):
            assert resp.status == 409, resp.data
            assert f"version 1 of topic {topic} cannot be used" in resp.error
            assert f"$schema '{d4}' names a draft no plugin" in resp.error
        assert json.loads(other.get(f"/v1/topics/{topic}/schemas/1").data)["type"]
        stats = other.get(f"/v1/topics/{topic}").json()["partition_stats"]
        assert sum(s["next_offset"] for s in stats) == 0
        assert change(http, topic, {"$schema": d4, "type": "number"}).status == 200
        assert http.post(f"/v1/topics/{topic}/produce", b"1.5").status == 202
    finally:
        lacking.stop()
