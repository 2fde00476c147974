"""A fuzzer over real HTTP: generated requests on every route, one real node.

Requests go over raw sockets to ``narad serve`` on its embedded storage, on
every route (the Users API's included), with the root admin's credentials or
now and then with credentials no user holds, malformed or wrong. They carry
hostile Unicode (lone surrogates, non-ASCII digits, long strings) in path
segments, query strings and JSON bodies; repeated keys, byte-order marks,
UTF-16, NaN; chunked framing split anywhere, bodies shorter than announced.
Whatever is sent:

- no answer is 5xx;
- every error body is JSON with an ``error`` string;
- every 202 stored exactly the bytes sent, checked by replaying each new
  offset, and every refused produce stored nothing.

Half the requests ask to close their connection, which takes gunicorn's
request path; the others do not, so that their heads are read by
:mod:`narad.serve.plain` when plain.

``NARAD_FUZZ_EXAMPLES`` sets the number of generated examples (each one to
four requests): small by default to keep the suite short; a long run is e.g.
``NARAD_FUZZ_EXAMPLES=20000 pytest tests/integration/test_fuzz_http.py``.
"""

from __future__ import annotations

import base64
import json
import os
import uuid
from dataclasses import dataclass
from dataclasses import field
from urllib.parse import quote

import pytest
from hypothesis import HealthCheck
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st

from tests.rawhttp import RawResponse
from tests.rawhttp import build
from tests.rawhttp import exchange
from tests.replay import assert_replays_as_sent

pytestmark = pytest.mark.slow

EXAMPLES = int(os.environ.get("NARAD_FUZZ_EXAMPLES", "200"))

RUN = uuid.uuid4().hex[:8]
PLAIN = f"fz-plain-{RUN}"  # no schema: stores any bytes
TYPED = f"fz-typed-{RUN}"  # a schema that accepts much and refuses some
TYPED_SCHEMA = {
    "properties": {
        "id": {"type": "integer", "maximum": 1000},
        "name": {"type": "string", "pattern": "^[a-z]*$", "maxLength": 20},
        "mail": {"format": "email"},
        "tag": {"enum": ["a", "\ud800", 1]},
    },
    "items": {"not": {"const": "\udc00"}},
    "maxItems": 8,
}
# Topics whose offsets the fuzzer tracks; it never deletes or re-schemas them.
TRACKED = (PLAIN, TYPED)

# -- strings ---------------------------------------------------------------------------

HOSTILE_CHARS = st.characters(codec=None, exclude_categories=())
hostile_text = st.one_of(
    st.text(HOSTILE_CHARS, max_size=12),
    st.sampled_from(
        [
            "\ud800",
            "\udfff",
            "a\udc00b",
            "\u0663",
            "\u00b2",
            "\uff13",
            "\ufeff",
            "\x00",
            "\u2028",
            "..",
            ".",
            "%",
            "é",
            "😀",
        ]
    ),
    st.text(st.sampled_from("ab\ud800"), min_size=150, max_size=400),
)
digits = st.one_of(
    st.integers(0, 12).map(str),
    st.sampled_from(["\u0663", "\u00b2", "\uff13", "1\u0663", "01", "-1", "1e2"]),
    st.integers(0, 10**30).map(str),
)


def utf8(text: str) -> bytes:
    # Lone surrogates become CESU-8 bytes: invalid UTF-8 on the wire.
    return text.encode("utf-8", "surrogatepass")


# -- JSON ------------------------------------------------------------------------------

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(10**20), 10**20),
    st.floats(allow_nan=False, allow_infinity=False),
    hostile_text,
)
json_values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(hostile_text, inner, max_size=4),
    ),
    max_leaves=12,
)


@st.composite
def json_text(draw, value=None) -> bytes:
    """A JSON text for ``value``, written in one of several hostile ways."""
    if value is None:
        value = draw(json_values)
    # Mostly well-formed, so that enough requests get as far as storage.
    how = draw(
        st.sampled_from(
            ["ascii"] * 6 + ["utf8"] * 3 + ["spaced", "bom", "utf16", "nan", "dup"]
        )
    )
    if how == "utf8":
        return utf8(json.dumps(value, ensure_ascii=False))
    if how == "spaced":
        return json.dumps(value, indent=2).encode() + b"\n"
    if how == "bom":
        return b"\xef\xbb\xbf" + json.dumps(value).encode()
    if how == "utf16":
        return json.dumps(value).encode("utf-16")
    if how == "nan":
        return b'{"n": NaN, "v": ' + json.dumps(value).encode() + b"}"
    if how == "dup" and isinstance(value, dict) and value:
        key = next(iter(value))
        extra = json.dumps({key: draw(scalars)})[1:]
        return json.dumps(value).encode()[:-1] + b", " + extra.encode()
    return json.dumps(value).encode()


schemas = st.one_of(
    st.just({"type": "object"}),
    st.builds(lambda v: {"const": v}, hostile_text),
    st.builds(lambda v: {"enum": v}, st.lists(scalars, min_size=1, max_size=3)),
    st.builds(lambda v: {"required": v}, st.lists(hostile_text, max_size=3)),
    st.builds(lambda v: {"pattern": v}, hostile_text),
    st.builds(lambda k: {"properties": {k: {"type": "integer"}}}, hostile_text),
    st.builds(lambda k: {"patternProperties": {k: {}}}, hostile_text),
    st.builds(
        lambda f: {"format": f},
        st.sampled_from(["email", "regex", "uri", "date-time", "idn-hostname"]),
    ),
    json_values,
)

# -- requests --------------------------------------------------------------------------


@dataclass
class Plan:
    method: str
    target: bytes
    body: bytes = b""
    framing: str = "length"  # length, chunked, short, broken-chunk, none
    chunk_sizes: list[int] = field(default_factory=list)
    topic: str = ""
    produce: str = ""  # "", "one" or "batch"
    authorization: str | None = None  # None: the root admin's credentials
    plain: bool = False  # not asking to close: narad.serve.plain reads the head


def segment(name: str) -> bytes:
    return quote(utf8(name), safe="").encode()


topic_names = st.one_of(
    st.sampled_from(TRACKED),
    st.sampled_from(TRACKED),
    hostile_text,
    st.builds(lambda n: f"fz-{RUN}-{n}", st.integers(0, 30)),
)


@st.composite
def query(draw, names: list[str]) -> bytes:
    pairs = []
    for name in draw(st.lists(st.sampled_from(names), max_size=3)):
        if name == "wait":
            # A valid long wait would hold the example for seconds.
            value = draw(st.sampled_from(["0", "1ms", "5ms", "\u0663s", "\u00b2", "x"]))
        elif name in ("partition", "offset", "limit", "max"):
            value = draw(digits)
        else:
            value = draw(hostile_text)
        pairs.append(segment(name) + b"=" + segment(value))
    return b"?" + b"&".join(pairs) if pairs else b""


safe_text = st.text(st.characters(codec="utf-8"), max_size=20)


@st.composite
def batch_body(draw) -> bytes:
    entries = []
    hostile = draw(st.integers(0, 4)) == 0  # else every entry is acceptable
    for _ in range(draw(st.integers(1 - hostile, 4))):
        entry: dict = {}
        if draw(st.booleans()):
            text = hostile_text if hostile else safe_text
            entry["value"] = draw(st.one_of(text, json_values.map(json.dumps)))
        else:
            data = base64.b64encode(draw(st.binary(max_size=40))).decode()
            entry["value_base64"] = data
        if draw(st.booleans()):
            entry["key"] = draw(hostile_text if hostile else safe_text)
        if draw(st.booleans()):
            choices = [0, -1, 1, "0", None] if hostile else [0]
            entry["partition"] = draw(st.sampled_from(choices))
        entries.append(entry)
    return draw(json_text({"messages": entries}))


# Credentials no user holds: malformed (checked for free) or wrong (a hash).
authorizations = st.one_of(
    st.sampled_from(["", "Basic", "Bearer abc", "Basic !!!", "basic    "]),
    st.binary(max_size=40).map(lambda b: "Basic " + base64.b64encode(b).decode()),
    st.text(st.characters(min_codepoint=32, max_codepoint=126), max_size=30).map(
        lambda t: "Basic " + t
    ),
    st.just("Basic " + base64.b64encode(b"fz-nobody:wrong-password").decode()),
)
# The root admin is never a target: a fuzzed delete or reset of it would
# lock the fuzzer out (when another admin exists to allow it).
user_names = st.one_of(
    st.sampled_from(["fz-user", "fz.user@x", "a" * 64, "a" * 65]),
    hostile_text,
).map(lambda name: "fz-admin" if name == "admin" else name)
grant_lists = st.lists(
    st.fixed_dictionaries(
        {
            "action": st.one_of(
                st.sampled_from(["produce", "consume", "create", "admin"]),
                hostile_text,
            ),
            "patterns": st.lists(
                st.one_of(st.sampled_from(["fz.*", "*", "a*b"]), hostile_text),
                max_size=3,
            ),
        }
    ),
    max_size=3,
)


@st.composite
def user_plans(draw) -> Plan:
    name = draw(user_names)
    base = b"/v1/users/" + segment(name)
    password = draw(st.one_of(st.just("fz-password-1"), hostile_text, scalars))
    kind = draw(st.sampled_from(["create", "list", "get", "delete", "grants", "pw"]))
    if kind == "create":
        record = {"username": name, "password": password, "grants": draw(grant_lists)}
        if draw(st.booleans()):
            record[draw(hostile_text)] = draw(scalars)
        return Plan("POST", b"/v1/users", draw(json_text(record)))
    if kind == "list":
        target = b"/v1/users" + draw(query(["limit", "page_token"]))
        return Plan(draw(st.sampled_from(["GET", "HEAD"])), target, framing="none")
    if kind in ("get", "delete"):
        method = (
            "DELETE" if kind == "delete" else draw(st.sampled_from(["GET", "HEAD"]))
        )
        return Plan(method, base, framing="none")
    if kind == "grants":
        body = draw(json_text({"grants": draw(grant_lists)}))
        return Plan("PUT", base + b"/grants", body)
    record = {"password": password}
    if draw(st.booleans()):
        record["current_password"] = draw(st.one_of(hostile_text, scalars))
    return Plan("PUT", base + b"/password", draw(json_text(record)))


@st.composite
def plans(draw) -> Plan:
    topic = draw(topic_names)
    base = b"/v1/topics/" + segment(topic)
    route = draw(
        st.sampled_from(
            [
                "produce",
                "produce",
                "produce",
                "batch",
                "batch",
                "create",
                "patch",
                "list",
                "describe",
                "delete",
                "consume",
                "replay",
                "ack",
                "schemas",
                "health",
                "users",
                "users",
                "unknown",
            ]
        )
    )
    if route == "produce":
        body = draw(st.one_of(json_text(), st.binary(max_size=200)))
        target = base + b"/produce" + draw(query(["key", "partition"]))
        plan = Plan("POST", target, body, topic=topic, produce="one")
    elif route == "batch":
        body = draw(st.one_of(batch_body(), json_text()))
        plan = Plan(
            "POST", base + b"/produce/batch", body, topic=topic, produce="batch"
        )
    elif route == "create":
        if draw(st.integers(0, 2)) == 0:  # hostile, else acceptable bar the schema
            record: dict = {"name": draw(topic_names)}
            if draw(st.booleans()):
                record["partitions"] = draw(scalars)
            record[draw(hostile_text)] = draw(scalars)
            body = draw(json_text(record))
        else:
            n = draw(st.integers(0, 10**9))
            record = {"name": f"fz-{RUN}-c{n}", "partitions": draw(st.integers(1, 3))}
            if draw(st.booleans()):
                record["schema"] = draw(schemas)
            body = json.dumps(record).encode()
        plan = Plan("POST", b"/v1/topics", body)
    elif route == "patch":
        if topic == PLAIN:
            topic = f"fz-{RUN}-patched"  # PLAIN keeps storing any bytes
            base = b"/v1/topics/" + segment(topic)
        record = {}
        if draw(st.booleans()):
            record["schema"] = draw(schemas)
        if draw(st.booleans()):
            record["retention_ms"] = draw(st.sampled_from([0, 3_600_000, 5, -1]))
        if draw(st.booleans()):
            record[draw(hostile_text)] = draw(scalars)
        plan = Plan("PATCH", base, draw(json_text(record)), topic=topic)
    elif route == "list":
        method = draw(st.sampled_from(["GET", "HEAD"]))
        target = b"/v1/topics" + draw(query(["limit", "page_token"]))
        plan = Plan(method, target, framing="none")
    elif route == "describe":
        plan = Plan(draw(st.sampled_from(["GET", "HEAD"])), base, framing="none")
    elif route == "delete":
        if topic in TRACKED:
            topic = f"fz-{RUN}-{draw(st.integers(0, 20))}"
            base = b"/v1/topics/" + segment(topic)
        plan = Plan("DELETE", base, framing="none")
    elif route == "consume":
        target = base + b"/consume" + draw(query(["partition", "wait", "offset"]))
        plan = Plan(draw(st.sampled_from(["GET", "HEAD"])), target, framing="none")
    elif route == "replay":
        target = base + b"/consume?partition=0&offset=" + segment(draw(digits))
        plan = Plan(draw(st.sampled_from(["GET", "HEAD"])), target, framing="none")
    elif route == "ack":
        target = base + b"/ack" + draw(query(["receipt_handle", "extend"]))
        plan = Plan("POST", target, framing="none")
    elif route == "schemas":
        version = draw(st.one_of(digits, st.just("latest"), hostile_text))
        suffix = draw(st.sampled_from([b"/schemas", b"/schemas/" + segment(version)]))
        plan = Plan(
            draw(st.sampled_from(["GET", "HEAD"])), base + suffix, framing="none"
        )
    elif route == "health":
        target = draw(st.sampled_from([b"/healthz", b"/readyz", b"/metrics"]))
        plan = Plan(draw(st.sampled_from(["GET", "HEAD"])), target, framing="none")
    elif route == "users":
        plan = draw(user_plans())
    else:
        method = draw(st.sampled_from(["GET", "PUT", "POST", "DELETE", "OPTIONS"]))
        plan = Plan(method, b"/" + segment(draw(hostile_text)), framing="none")
    if draw(st.integers(0, 9)) == 0:
        plan.authorization = draw(authorizations)
    if plan.method in ("POST", "PATCH", "PUT") and plan.body:
        plan.framing = draw(
            st.sampled_from(["length"] * 4 + ["chunked"] * 3 + ["short", "broken"])
        )
        plan.chunk_sizes = draw(st.lists(st.integers(1, 64), max_size=6))
    plan.plain = draw(st.booleans())
    return plan


# -- sending and checking --------------------------------------------------------------


def send(port: int, plan: Plan) -> RawResponse:
    body = plan.body
    auth: dict = {"close": not plan.plain}
    if plan.authorization is not None:
        auth |= {"auth": None, "headers": {"Authorization": plan.authorization}}
    if plan.framing in ("length", "none"):
        data = build(plan.method, plan.target, body, framing=plan.framing, **auth)
        return exchange(port, data, head=plan.method == "HEAD", kept=plan.plain)
    if plan.framing == "chunked":
        data = build(
            plan.method,
            plan.target,
            body,
            framing="chunked",
            chunk_sizes=plan.chunk_sizes,
            **auth,
        )
        return exchange(port, data, kept=plan.plain)
    if plan.framing == "short":
        data = build(plan.method, plan.target, body, announced=len(body) + 7, **auth)
        return exchange(port, data, close_write=True)
    # broken: a chunked body cut off inside its last data chunk
    data = build(plan.method, plan.target, body, framing="chunked", **auth)
    return exchange(port, data[: -len(b"\r\n0\r\n\r\n") - 1], close_write=True)


def next_offset(port: int, topic: str) -> int:
    resp = exchange(port, build("GET", f"/v1/topics/{topic}", framing="none"))
    assert resp.status == 200, resp.body
    return resp.json()["partition_stats"][0]["next_offset"]


def sent_messages(plan: Plan) -> list[bytes]:
    """The payloads an accepted produce promised to store, in order."""
    if plan.produce == "one":
        return [plan.body]
    entries = json.loads(plan.body)["messages"]
    return [
        utf8(e["value"]) if "value" in e else base64.b64decode(e["value_base64"])
        for e in entries
    ]


def check(port: int, plan: Plan) -> None:
    tracked = plan.produce and plan.topic in TRACKED
    before = next_offset(port, plan.topic) if tracked else 0
    resp = send(port, plan)
    assert resp.status < 500, (plan, resp)
    if resp.status >= 400 and plan.method != "HEAD":
        error = resp.json()["error"]
        assert isinstance(error, str) and error, (plan, resp)
    if plan.framing in ("short", "broken"):
        assert resp.status >= 400, (plan, resp)
    if not tracked:
        return
    after = next_offset(port, plan.topic)
    if resp.status != 202:
        assert after == before, (plan, resp)
        return
    messages = sent_messages(plan)
    assert after == before + len(messages), (plan, resp)
    for offset, sent in enumerate(messages, start=before):
        replay = exchange(
            port,
            build(
                "GET",
                f"/v1/topics/{plan.topic}/consume?partition=0&offset={offset}",
                framing="none",
            ),
        )
        assert replay.status == 200, replay
        assert_replays_as_sent(replay.body, sent)


@pytest.fixture(scope="module")
def fuzz_port(edge_node) -> int:
    for name, schema in ((PLAIN, None), (TYPED, TYPED_SCHEMA)):
        record = {"name": name, "partitions": 1}
        if schema is not None:
            record["schema"] = schema
        body = json.dumps(record).encode()
        resp = exchange(edge_node.port, build("POST", "/v1/topics", body))
        assert resp.status == 201, resp.body
    return edge_node.port


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.function_scoped_fixture,
    ],
)
@given(st.lists(plans(), min_size=1, max_size=4))
def test_fuzz_every_route(fuzz_port, requests):
    for plan in requests:
        check(fuzz_port, plan)
