"""Each hook, end to end: a test plugin's answer changes what the node does.

Written as a plugin author would, with :mod:`narad.testing` only; the
meta-test in test_plugins.py checks that every hookspec has its
``test_hook_<name>`` here.
"""

from __future__ import annotations

import threading
import time

import pytest

from narad import jsontext
from narad import testing
from narad.errors import InvalidConfiguration
from tests.plugins import acme

PLUGINS = {"acme": acme}


@pytest.fixture
def http(tmp_path):
    return testing.client(testing.make_config(tmp_path), plugins=PLUGINS)


def create(http, schema, name="t"):
    return http.simulate_post("/v1/topics", json={"name": name, "schema": schema})


def test_hook_narad_json_schema_drafts(http):
    resp = create(http, {"$schema": acme.DRAFT_URI, "type": "integer"})
    assert resp.status_code == 201, resp.text
    assert http.simulate_post("/v1/topics/t/produce", body=b"1").status_code == 202
    refused = create(http, {"$schema": acme.DRAFT_URI + "#nope"}, name="u")
    assert refused.status_code == 400


def test_hook_narad_format_checkers(http):
    create(http, {"type": "string", "format": "acme-even"})
    assert http.simulate_post("/v1/topics/t/produce", body=b'"ab"').status_code == 202
    resp = http.simulate_post("/v1/topics/t/produce", body=b'"abc"')
    assert resp.status_code == 400
    assert "acme-even" in resp.json["error"]


def test_hook_narad_compatibility_rules(http):
    create(http, {"type": "object", "x-acme-frozen": 1})
    resp = http.simulate_patch(
        "/v1/topics/t", json={"schema": {"type": "object", "x-acme-frozen": 2}}
    )
    assert resp.status_code == 400
    assert "x-acme-frozen changed" in resp.json["error"]


def test_hook_narad_schema_types(http):
    resp = http.simulate_post(
        "/v1/topics",
        json={"name": "t", "schema_type": "ACME_TEXT", "schema": {"max": 4}},
    )
    assert resp.status_code == 201, resp.text
    assert resp.json["schema_type"] == "ACME_TEXT"
    assert resp.json["encoding"] == "binary"  # the type's first, its default
    assert http.simulate_post("/v1/topics/t/produce", body=b"abcd").status_code == 202
    refused = http.simulate_post("/v1/topics/t/produce", body=b"abcde")
    assert refused.status_code == 400
    assert "text over 4 bytes" in refused.json["error"]
    # Its check, through the generic history rules: shrinking is refused,
    # the same identity registers nothing, growing is a version.
    shrink = http.simulate_patch("/v1/topics/t", json={"schema": {"max": 3}})
    assert shrink.status_code == 400
    assert "max shrank" in shrink.json["error"]
    same = http.simulate_patch("/v1/topics/t", json={"schema": {"max": 4}})
    assert same.json["schema_version"] == 1
    grown = http.simulate_patch("/v1/topics/t", json={"schema": {"max": 8}})
    assert grown.json["schema_version"] == 2
    other = http.simulate_patch(
        "/v1/topics/t", json={"schema_type": "JSON", "schema": {}}
    )
    assert other.status_code == 409
    assert "ACME_TEXT" in other.json["error"] and "JSON" in other.json["error"]


@pytest.mark.parametrize("query", ["", "?notifications=0"])
def test_hook_narad_storage_backends(tmp_path, query):
    url = f"memory://{tmp_path.name}{query}"
    config = testing.make_config(tmp_path, storage__url=url)
    http = testing.client(config, plugins=PLUGINS)
    assert create(http, {"type": "object"}).status_code == 201
    answers = []
    waiter = threading.Thread(
        target=lambda: answers.append(
            http.simulate_get("/v1/topics/t/consume", params={"wait": "10s"})
        )
    )
    waiter.start()
    time.sleep(0.2)  # let the consumer start waiting: the produce must wake it
    assert http.simulate_post("/v1/topics/t/produce", body=b"{}").status_code == 202
    waiter.join()
    [got] = answers
    assert got.status_code == 200
    handle = got.json["receipt_handle"]
    ack = http.simulate_post("/v1/topics/t/ack", params={"receipt_handle": handle})
    assert ack.status_code == 204
    assert http.simulate_get("/v1/topics/t/consume").status_code == 204
    schemas = http.simulate_get("/v1/topics/t/schemas/1")
    assert jsontext.loads(schemas.content, max_depth=8) == {"type": "object"}


def test_hook_narad_settings(tmp_path, monkeypatch):
    plugins = testing.load_plugins(PLUGINS)
    config = plugins.configure(
        testing.make_config(tmp_path, plugins__acme__greeting="hi")
    )
    assert config.plugin("acme") == {"greeting": "hi", "limit": 3}
    bad = testing.make_config(tmp_path, **{"plugins__acme__limit": "ten"})
    with pytest.raises(InvalidConfiguration, match=r"`plugins\.acme\.limit`"):
        plugins.configure(bad)
    declared = [s.key for s in config.settings if s.section == "plugins.acme"]
    assert declared == ["plugins.acme.greeting", "plugins.acme.limit"]
