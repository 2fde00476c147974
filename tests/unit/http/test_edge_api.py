"""Integrity at the HTTP edge, in-process (fakeredis): issue 9's refusals.

The same cases run over raw sockets against a real node in
``tests/integration/test_edge_http.py``; these pin the messages.
"""

from __future__ import annotations

import base64
import json

import pytest

from narad import testing
from tests.plugins import raising_plugin

SURROGATE = '"\\ud800"'


def make(client, name="t", **body):
    resp = client.simulate_post("/v1/topics", json={"name": name, **body})
    assert resp.status_code == 201, resp.text
    return resp


def produce(client, body, name="t", **kw):
    return client.simulate_post(f"/v1/topics/{name}/produce", body=body, **kw)


def replay(client, offset, name="t", partition=0):
    resp = client.simulate_get(
        f"/v1/topics/{name}/consume",
        params={"partition": str(partition), "offset": str(offset)},
    )
    assert resp.status_code == 200, resp.text
    return resp.json


def assert_json_error(resp, status, words=""):
    assert resp.status_code == status, resp.text
    error = json.loads(resp.content.decode("utf-8"))["error"]
    assert words in error, error
    return error


# -- chunked bodies --------------------------------------------------------------------


def test_chunked_produce_stores_the_whole_body(client):
    make(client, partitions=1)
    body = b'{"id": 7, "note": "chunked"}'
    resp = produce(client, body, headers={"Transfer-Encoding": "chunked"})
    assert resp.status_code == 202
    assert json.dumps(replay(client, 0)["payload"]) == json.dumps(json.loads(body))


@pytest.mark.parametrize(
    ("method", "path", "body", "status"),
    [
        ("POST", "/v1/topics", b'{"name": "c", "partitions": 1}', 201),
        ("PATCH", "/v1/topics/t", b'{"retention_ms": 0}', 200),
        ("POST", "/v1/topics/t/produce/batch", b'{"messages": [{"value": "v"}]}', 202),
    ],
)
def test_every_json_route_reads_a_chunked_body(client, method, path, body, status):
    make(client, partitions=1)
    resp = client.simulate_request(
        method, path, body=body, headers={"Transfer-Encoding": "chunked"}
    )
    assert resp.status_code == status, resp.text


def test_gzip_transfer_coding_is_501(client):
    make(client)
    resp = produce(client, b"x", headers={"Transfer-Encoding": "gzip, chunked"})
    assert_json_error(resp, 501, "Transfer-Encoding 'gzip, chunked' is not supported")


@pytest.mark.parametrize("coding", ["gzip", "br", "deflate, gzip"])
def test_a_content_coded_body_is_415_and_stores_nothing(client, coding):
    # The node does not decode bodies: storing the coded bytes would keep
    # something other than what the client meant.
    make(client)
    resp = produce(client, b"\x1f\x8b coded", headers={"Content-Encoding": coding})
    assert_json_error(resp, 415, f"Content-Encoding {coding!r} is not supported")
    assert client.simulate_get("/v1/topics/t/consume").status_code == 204
    plain = produce(client, b"plain", headers={"Content-Encoding": "identity"})
    assert plain.status_code == 202


# -- one strict reader for every JSON body ---------------------------------------------

STRICT = [
    (b'{"name": "d", "name": "e"}', "has duplicate key 'name' in the object at ''"),
    (b"\xef\xbb\xbf{}", "starts with a UTF-8 byte-order mark"),
    ('{"name": "u"}'.encode("utf-16"), "is UTF-16; JSON must be UTF-8"),
    ('{"name": "u"}'.encode("utf-32-le"), "is UTF-32; JSON must be UTF-8"),
    (b'{"retention_ms": NaN}', "has NaN, which is not JSON"),
    (b'{"a": 1} {"b": 2}', "has trailing data"),
    (b"[" * 200 + b"]" * 200, "nests deeper than 128 levels"),
]


@pytest.mark.parametrize(("body", "words"), STRICT)
@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("POST", "/v1/topics"),
        ("PATCH", "/v1/topics/t"),
        ("POST", "/v1/topics/t/produce/batch"),
    ],
)
def test_every_json_body_uses_the_strict_reader(client, method, path, body, words):
    make(client)
    resp = client.simulate_request(method, path, body=body)
    assert_json_error(resp, 400, "request body " + words)


def test_batch_duplicate_key_names_its_entry(client):
    make(client, partitions=1)
    body = b'{"messages": [{"value": "a"}, {"value": "b", "value": "c"}]}'
    resp = client.simulate_post("/v1/topics/t/produce/batch", body=body)
    assert_json_error(
        resp, 400, "has duplicate key 'value' in the object at '/messages/1'"
    )
    assert client.simulate_get("/v1/topics/t").json["partition_stats"][0] == {
        "index": 0,
        "oldest_offset": 0,
        "next_offset": 0,
        "in_flight": 0,
    }


def test_schema_with_a_repeated_key_is_refused_at_create(client):
    body = b'{"name": "s", "schema": {"type": "object", "type": "string"}}'
    resp = client.simulate_post("/v1/topics", body=body)
    assert_json_error(resp, 400, "duplicate key 'type' in the object at '/schema'")


def test_schema_topic_payload_with_a_repeated_key_is_checked_by_its_last_value(
    client,
):
    # The rulebook: the last value wins, and that value is the one checked.
    make(client, partitions=1, schema={"properties": {"a": {"type": "integer"}}})
    body = b'{"a": "x", "a": 1}'
    assert produce(client, body).status_code == 202
    resp = client.simulate_get(
        "/v1/topics/t/consume", params={"partition": "0", "offset": "0"}
    )
    assert resp.content.endswith(b'"payload":' + body + b"}\n")
    resp = produce(client, b'{"a": 1, "a": "x"}')
    assert resp.status_code == 400
    assert "at '/a'" in resp.json["error"]


def test_schemaless_topic_stores_a_repeated_key_as_sent(client):
    make(client, partitions=1)
    body = b'{"a": 1, "a": 2}'
    assert produce(client, body).status_code == 202
    resp = client.simulate_get(
        "/v1/topics/t/consume", params={"partition": "0", "offset": "0"}
    )
    assert resp.content.endswith(b'"payload":' + body + b"}\n")


# -- integers in paths and query strings -----------------------------------------------


@pytest.mark.parametrize(
    "value", ["\u0663", "\u00b2", "\uff13", "1_0", "+1", " 1", "-1", "1e3"]
)
@pytest.mark.parametrize(
    ("path", "name", "extra"),
    [
        ("/v1/topics/t/consume", "partition", {}),
        ("/v1/topics/t/consume", "offset", {"partition": "0"}),
        ("/v1/topics", "limit", {}),
    ],
)
def test_query_integers_take_ascii_digits_only(client, path, name, extra, value):
    make(client)
    resp = client.simulate_get(path, params={name: value, **extra})
    assert_json_error(resp, 400, f"{name} must be a non-negative integer in digits")


@pytest.mark.parametrize("value", ["\u0663", "\u00b2", "\uff13"])
def test_produce_partition_takes_ascii_digits_only(client, value):
    make(client)
    resp = produce(client, b"x", params={"partition": value})
    assert_json_error(resp, 400, "partition must be a non-negative integer")


@pytest.mark.parametrize("value", ["\u0663s", "\u00b2", "\uff15ms", "1 s"])
def test_wait_takes_ascii_digits_only(client, value):
    make(client)
    resp = client.simulate_get("/v1/topics/t/consume", params={"wait": value})
    assert_json_error(resp, 400, "wait must be a duration such as 500ms or 10s")


@pytest.mark.parametrize("version", ["\u0663", "\u00b2", "\uff13", "1.0", "-1"])
def test_schema_version_takes_ascii_digits_only(client, version):
    make(client, schema={"type": "object"})
    resp = client.simulate_get(f"/v1/topics/t/schemas/{version}")
    assert_json_error(resp, 400, "version must be a positive integer or latest")


@pytest.mark.parametrize("version", ["1000000000", "99999999999999999999", "2" * 5000])
def test_a_schema_version_too_high_to_exist_is_not_found(client, version):
    # A positive integer all the same: no such version (404), as version 2 is.
    make(client, schema={"type": "object"})
    resp = client.simulate_get(f"/v1/topics/t/schemas/{version}")
    assert_json_error(resp, 404, "topic t has no schema version")


def test_a_parameter_given_twice_is_refused(client):
    make(client)
    resp = client.simulate_get(
        "/v1/topics/t/consume", query_string="partition=0&partition=1"
    )
    assert_json_error(resp, 400, "partition is given more than once")


def test_a_key_that_is_not_utf8_is_refused_and_a_utf8_one_is_kept(client):
    make(client, partitions=1)
    resp = produce(client, b"x", query_string="key=%FF")
    assert_json_error(resp, 400, "query string is not UTF-8 once percent-decoded")
    assert produce(client, b"x", query_string="key=%C3%A9%EF%BF%BD").status_code == 202
    assert replay(client, 0)["key"] == "é\ufffd"


# -- lone surrogates -------------------------------------------------------------------

SURROGATE_SCHEMAS = [
    '{"const": "\\ud800"}',
    '{"enum": ["\\ud800", 1]}',
    '{"required": ["\\ud800"]}',
    '{"properties": {"\\ud800": {"type": "integer"}}}',
    '{"propertyNames": {"maxLength": 1}}',
    '{"dependentRequired": {"\\ud800": ["\\udc00"]}}',
    '{"type": "string", "maxLength": 1}',
    '{"format": "email"}',
    '{"format": "idn-hostname"}',
    '{"format": "regex"}',
    '{"format": "uri"}',
    '{"format": "date-time"}',
    '{"pattern": "^a"}',
]
SURROGATE_PAYLOADS = [
    b'"\\ud800"',
    b'"a\\udc00b"',
    b'{"\\ud800": "x"}',
    b'{"\\ud800": 1, "a": ["\\udfff"]}',
    b'["\\ud800\\ud800"]',
    b'"x@\\ud800.com"',
]


@pytest.mark.parametrize("schema", SURROGATE_SCHEMAS)
def test_lone_surrogates_in_schemas_and_payloads_never_give_500(client, schema):
    body = '{"name": "s", "partitions": 1, "schema": ' + schema + "}"
    resp = client.simulate_post("/v1/topics", body=body.encode())
    assert resp.status_code == 201, resp.text
    accepted = 0
    for payload in SURROGATE_PAYLOADS:
        resp = produce(client, payload, name="s")
        if resp.status_code == 202:
            # Stored exactly as sent, escapes and all.
            got = client.simulate_get(
                "/v1/topics/s/consume",
                params={"partition": "0", "offset": str(accepted)},
            )
            assert got.content.endswith(b'"payload":' + payload + b"}\n")
            accepted += 1
        else:
            assert_json_error(resp, 400)


@pytest.mark.parametrize(
    "schema",
    [
        '{"pattern": "\\ud800"}',
        '{"patternProperties": {"\\udc00+": {}}}',
        '{"propertyNames": {"pattern": "a\\ud800"}}',
    ],
)
def test_a_pattern_re2_cannot_take_is_refused_at_registration(client, schema):
    body = '{"name": "s", "schema": ' + schema + "}"
    resp = client.simulate_post("/v1/topics", body=body.encode())
    assert_json_error(resp, 400, "holds a lone surrogate, which RE2 cannot take")


def test_error_quoting_a_surrogate_is_valid_json(client):
    resp = client.simulate_post("/v1/topics", body=b'{"\\ud800": 1}')
    error = assert_json_error(resp, 400, "unknown field")
    assert "\\ud800" in error


def test_batch_entries_with_a_lone_surrogate_are_refused(client):
    make(client, partitions=1)
    entries = {
        "value": '{"value": ' + SURROGATE + "}",
        "key": '{"value": "v", "key": ' + SURROGATE + "}",
    }
    for field, entry in entries.items():
        body = '{"messages": [' + entry + "]}"
        resp = client.simulate_post("/v1/topics/t/produce/batch", body=body.encode())
        assert_json_error(resp, 400, f"messages[0]: {field} holds a lone surrogate")


# -- plugins that raise ----------------------------------------------------------------


@pytest.fixture
def raising_client(config):
    return testing.client(config, plugins={"raising_plugin": raising_plugin})


def test_a_format_checker_that_raises_refuses_the_value(raising_client):
    client = raising_client
    make(client, schema={"format": "x-calm"})
    assert produce(client, b'"calm"').status_code == 202
    resp = produce(client, b'"boom!"')
    assert_json_error(resp, 400, "is not valid x-calm")


def test_a_compatibility_rule_that_raises_refuses_the_change(raising_client):
    client = raising_client
    make(client, schema={"x-calm": 1})
    resp = client.simulate_patch("/v1/topics/t", json={"schema": {"x-calm": 2}})
    assert_json_error(
        resp, 400, "the compatibility rule for 'x-calm' failed on this change"
    )
    assert client.simulate_get("/v1/topics/t").json["schema_version"] == 1


# -- errors: short, unambiguous --------------------------------------------------------


def test_attacker_input_is_quoted_short(client):
    name = "n" * 10_000
    resp = client.simulate_post("/v1/topics", json={"name": "t", name: 1})
    error = assert_json_error(resp, 400, "unknown field 'nnn")
    assert error.endswith("'…")
    assert len(error) < 160
    resp = client.simulate_get("/v1/topics", params={"limit": "\u0663" * 5000})
    assert len(assert_json_error(resp, 400)) < 200


@pytest.mark.parametrize(
    ("schema", "payload"),
    [
        ({"pattern": "^a+$"}, "b" * 10_000),
        ({"format": "email"}, "c" * 10_000),
        ({"additionalProperties": False}, {"k" * 10_000: 1}),
        ({"additionalProperties": {"type": "string"}}, {"k" * 10_000: 1}),
        ({"propertyNames": {"maxLength": 3}}, {"n" * 10_000: 1}),
        ({"maximum": 1}, int("9" * 1000)),
    ],
)
def test_validation_errors_quote_payload_values_short(client, schema, payload):
    make(client, schema=schema)
    resp = produce(client, json.dumps(payload).encode())
    error = assert_json_error(resp, 400)
    assert len(error) < 400, error
    assert "…" in error


@pytest.mark.parametrize("name", [".", "..", "...", "." * 249])
def test_names_of_only_dots_are_refused(client, name):
    resp = client.simulate_post("/v1/topics", json={"name": name})
    assert_json_error(resp, 400, "not only dots")


def test_names_with_dots_and_more_are_fine(client):
    make(client, name=".a.")
    make(client, name="a..b")


def test_a_path_name_no_topic_can_have_is_404_quoted(client):
    resp = client.simulate_get("/v1/topics/..")
    assert_json_error(resp, 404, "topic '..' not found")


# -- HEAD ------------------------------------------------------------------------------


def test_head_works_wherever_get_does(client):
    make(client, partitions=1, schema={"type": "object"})
    assert produce(client, b"{}").status_code == 202
    for path, params in [
        ("/healthz", None),
        ("/readyz", None),
        ("/metrics", None),
        ("/v1/topics", None),
        ("/v1/topics/t", None),
        ("/v1/topics/t/schemas", None),
        ("/v1/topics/t/schemas/latest", None),
        ("/v1/topics/t/schemas/1", None),
        ("/v1/topics/t/consume", {"partition": "0", "offset": "0"}),
    ]:
        got = client.simulate_get(path, params=params)
        head = client.simulate_head(path, params=params)
        assert got.status_code == 200, path
        assert head.status_code == 200, path
        assert head.content == b""
        if path != "/metrics":  # counters move between the two requests
            assert head.headers["content-length"] == str(len(got.content)), path


def test_head_of_a_leasing_consume_is_refused(client):
    make(client, partitions=1)
    assert produce(client, b"x").status_code == 202
    resp = client.simulate_head("/v1/topics/t/consume")
    assert resp.status_code == 400
    # Nothing was leased: a consume still gets the message.
    assert client.simulate_get("/v1/topics/t/consume").status_code == 200


# -- round-robin -----------------------------------------------------------------------


def test_a_refused_produce_takes_no_round_robin_tick(client):
    make(client, partitions=3, schema={"type": "object", "required": ["id"]})
    for _ in range(5):
        assert produce(client, b'{"amount": 5}').status_code == 400
    body = b'{"messages": [{"value": "{\\"id\\": 1}"}, {"value": "{}"}]}'
    assert (
        client.simulate_post("/v1/topics/t/produce/batch", body=body).status_code == 400
    )
    assert produce(client, b'{"id": 2}').status_code == 202
    assert replay(client, 0, partition=0)["payload"] == {"id": 2}


def test_topics_produced_in_turn_each_use_every_partition(client):
    make(client, name="a", partitions=2)
    make(client, name="b", partitions=2)
    for _ in range(2):
        for name in ("a", "b"):
            assert produce(client, b"x", name=name).status_code == 202
    for name in ("a", "b"):
        stats = client.simulate_get(f"/v1/topics/{name}").json["partition_stats"]
        assert [s["next_offset"] for s in stats] == [1, 1]


def test_base64_batch_values_are_stored_exactly(client):
    make(client, partitions=1)
    raw = bytes(range(256))
    body = {"messages": [{"value_base64": base64.b64encode(raw).decode()}]}
    resp = client.simulate_post("/v1/topics/t/produce/batch", json=body)
    assert resp.status_code == 202
    assert base64.b64decode(replay(client, 0)["payload"]) == raw
