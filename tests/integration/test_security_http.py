"""Users, grants, ownership and Basic auth over real HTTP, on the session node.

Every rule of issue 15 from the outside: 401 against 403, each action on
matching and non-matching names and prefixes, ownership, attempts to grant
more than one holds, password changes and resets, and changes reaching
every worker at once. Names carry a per-test prefix: the node is shared.
"""

from __future__ import annotations

import base64
import json
import os
import secrets
import subprocess
import sys
import threading
import time
import uuid

import pytest
import redis
import yaml

from tests.httpclient import ADMIN
from tests.httpclient import Client
from tests.httpclient import Response
from tests.nodes import ROOT
from tests.nodes import Node
from tests.nodes import tcp_url
from tests.rawhttp import build
from tests.rawhttp import exchange

CHALLENGE = 'Basic realm="narad"'


@pytest.fixture
def p() -> str:
    """A topic-name prefix of this test's own."""
    return f"sec{uuid.uuid4().hex[:10]}"


def new_user(http: Client, grants: list[dict], password: str | None = None):
    name = f"u-{uuid.uuid4().hex[:10]}"
    password = password or secrets.token_urlsafe(12)
    resp = http.post(
        "/v1/users", {"username": name, "password": password, "grants": grants}
    )
    assert resp.status == 201, resp.data
    return name, password


def grant(action: str, *patterns: str) -> dict:
    return {"action": action, "patterns": list(patterns)}


@pytest.fixture
def as_user(node):
    clients = []

    def connect(name: str, password: str) -> Client:
        client = Client(node.base, auth=(name, password))
        clients.append(client)
        return client

    yield connect
    for client in clients:
        client.close()


def make_topic(http: Client, name: str, **settings) -> None:
    resp = http.post("/v1/topics", {"name": name, **settings})
    assert resp.status == 201, resp.data


# -- 401 ---------------------------------------------------------------------------


def test_every_route_but_the_probes_needs_credentials(node, http, p):
    make_topic(http, f"{p}.t")
    anonymous = Client(node.base, auth=None)
    try:
        for path in ("/healthz", "/readyz"):
            assert anonymous.get(path).status == 200
        for method, path in (
            ("GET", "/metrics"),
            ("GET", "/v1/topics"),
            ("POST", "/v1/topics"),
            ("GET", f"/v1/topics/{p}.t"),
            ("POST", f"/v1/topics/{p}.t/produce"),
            ("GET", f"/v1/topics/{p}.t/consume"),
            ("GET", f"/v1/topics/{p}.t/schemas"),
            ("GET", "/v1/users"),
            ("GET", "/no/such/route"),
        ):
            resp = anonymous.request(method, path, b"{}" if method == "POST" else None)
            assert resp.status == 401, (method, path)
            assert resp.headers["www-authenticate"] == CHALLENGE
            assert resp.error.startswith("authentication required")
        # Nothing was produced by the refused request.
        stats = http.get(f"/v1/topics/{p}.t").json()["partition_stats"]
        assert sum(s["next_offset"] for s in stats) == 0
    finally:
        anonymous.close()


def test_wrong_credentials_are_401_alike_for_unknown_users(node, http):
    name, _ = new_user(http, [])
    for auth in ((name, "not-the-password"), (f"nobody-{name}", "whatever-it-is")):
        client = Client(node.base, auth=auth)
        resp = client.get("/v1/topics")
        client.close()
        assert resp.status == 401
        assert resp.headers["www-authenticate"] == CHALLENGE
        assert resp.error == "wrong user name or password"
    for header in ("Bearer abc", "Basic !!!", "Basic " + "bm9jb2xvbg=="):
        resp = http.get("/v1/topics", headers={"Authorization": header})
        assert resp.status == 401
        assert resp.error.startswith("malformed Authorization header")


def test_a_request_id_is_echoed_or_made_on_every_answer(node, http):
    anonymous = Client(node.base, auth=None)
    try:
        for client, path, status in (
            (http, "/v1/topics", 200),
            (http, "/v1/topics/no-such-topic-at-all", 404),
            (anonymous, "/v1/topics", 401),
            (anonymous, "/healthz", 200),
        ):
            resp = client.get(path, headers={"X-Request-ID": "trace-42"})
            assert (resp.status, resp.headers["x-request-id"]) == (status, "trace-42")
            made = client.get(path).headers["x-request-id"]
            assert made and made != "trace-42"
        # An unusable id (spaces) is replaced, not echoed.
        resp = http.get("/healthz", headers={"X-Request-ID": "two words"})
        assert resp.headers["x-request-id"] != "two words"
    finally:
        anonymous.close()


# -- grants -------------------------------------------------------------------------


def test_produce_grant_on_exact_names_and_prefixes(http, as_user, p):
    for name in ("orders", "inv", "inv.a", "inv.a.b", "invx", "other"):
        make_topic(http, f"{p}.{name}")
    user, password = new_user(http, [grant("produce", f"{p}.orders", f"{p}.inv.*")])
    producer = as_user(user, password)
    for name, status in (
        ("orders", 202),
        ("inv.a", 202),
        ("inv.a.b", 202),
        ("inv", 403),
        ("invx", 403),
        ("other", 403),
    ):
        resp = producer.post(f"/v1/topics/{p}.{name}/produce", {"n": 1})
        assert resp.status == status, name
        if status == 403:
            assert resp.error == (
                f"user {user} may not produce to topic {p}.{name}: no produce "
                "grant matches it"
            )
    batch = {"messages": [{"value": "{}"}]}
    assert producer.post(f"/v1/topics/{p}.inv.a/produce/batch", batch).status == 202
    assert producer.post(f"/v1/topics/{p}.other/produce/batch", batch).status == 403
    # A producer may not consume, even from its own topics.
    resp = producer.get(f"/v1/topics/{p}.orders/consume")
    assert resp.status == 403
    assert resp.error == (
        f"user {user} may not consume from topic {p}.orders: no consume grant "
        "matches it"
    )
    resp = producer.post("/v1/topics", {"name": f"{p}.inv.new"})
    assert resp.status == 403
    assert "may not create topic" in resp.error


def test_consume_grant_covers_consume_ack_and_replay(http, as_user, p):
    make_topic(http, f"{p}.q", partitions=1)
    make_topic(http, f"{p}.r", partitions=1)
    for topic in ("q", "r"):
        assert http.post(f"/v1/topics/{p}.{topic}/produce", {"id": 1}).status == 202
    user, password = new_user(http, [grant("consume", f"{p}.q")])
    consumer = as_user(user, password)
    got = consumer.get(f"/v1/topics/{p}.q/consume")
    assert got.status == 200
    handle = got.json()["receipt_handle"]
    assert consumer.post(f"/v1/topics/{p}.q/ack?receipt_handle={handle}").status == 204
    assert consumer.get(f"/v1/topics/{p}.q/consume?partition=0&offset=0").status == 200
    assert consumer.post(f"/v1/topics/{p}.q/produce", {"id": 2}).status == 403
    # Batch consume and batch ack too.
    assert http.post(f"/v1/topics/{p}.q/produce", {"id": 3}).status == 202
    batch = consumer.get(f"/v1/topics/{p}.q/consume/batch?max=10")
    assert batch.status == 200
    handles = [m["receipt_handle"] for m in batch.json()["messages"]]
    acked = consumer.post(f"/v1/topics/{p}.q/ack/batch", {"receipt_handles": handles})
    assert acked.status == 200
    for path in ("consume", "consume?partition=0&offset=0", "consume/batch"):
        assert consumer.get(f"/v1/topics/{p}.r/{path}").status == 403
    resp = consumer.post(f"/v1/topics/{p}.r/ack?receipt_handle=x")
    assert resp.status == 403
    resp = consumer.post(f"/v1/topics/{p}.r/ack/batch", {"receipt_handles": ["x"]})
    assert resp.status == 403


def test_create_makes_the_creator_the_owner(http, as_user, p):
    creator, password = new_user(http, [grant("create", f"{p}.team.*")])
    owner = as_user(creator, password)
    resp = owner.post("/v1/topics", {"name": f"{p}.team.a"})
    assert resp.status == 201
    assert resp.json()["owner"] == creator
    assert owner.post("/v1/topics", {"name": f"{p}.elsewhere"}).status == 403
    # The owner reads, alters and changes the schema of what it owns...
    assert owner.get(f"/v1/topics/{p}.team.a").json()["owner"] == creator
    assert owner.get(f"/v1/topics/{p}.team.a/schemas").status == 200
    change = {"retention_ms": 0, "schema": {"type": "object"}}
    assert owner.patch(f"/v1/topics/{p}.team.a", change).status == 200
    # ... a user with only a produce grant on it does not ...
    other, other_pw = new_user(http, [grant("produce", f"{p}.team.*")])
    stranger = as_user(other, other_pw)
    resp = stranger.patch(f"/v1/topics/{p}.team.a", {"retention_ms": 0})
    assert resp.status == 403
    assert resp.error == (
        f"user {other} may not alter topic {p}.team.a: only its owner or an admin may"
    )
    resp = stranger.delete(f"/v1/topics/{p}.team.a")
    assert resp.status == 403
    assert "may not delete topic" in resp.error
    # ... nor does another creator under the same prefix, and neither may
    # create a name that exists.
    rival, rival_pw = new_user(http, [grant("create", f"{p}.team.*")])
    resp = as_user(rival, rival_pw).delete(f"/v1/topics/{p}.team.a")
    assert resp.status == 403
    assert owner.delete(f"/v1/topics/{p}.team.a").status == 204
    # An admin may do all of it to anyone's topic.
    assert owner.post("/v1/topics", {"name": f"{p}.team.b"}).status == 201
    assert http.patch(f"/v1/topics/{p}.team.b", {"retention_ms": 0}).status == 200
    assert http.delete(f"/v1/topics/{p}.team.b").status == 204


def test_topics_created_by_the_admin_are_owned_by_it(http, p):
    resp = http.post("/v1/topics", {"name": f"{p}.mine"})
    assert resp.json()["owner"] == "admin"


def test_reading_a_topic_needs_a_grant_matching_it(http, as_user, p):
    make_topic(http, f"{p}.seen")
    make_topic(http, f"{p}.unseen")
    user, password = new_user(http, [grant("produce", f"{p}.seen", f"{p}.maybe.*")])
    reader = as_user(user, password)
    assert reader.get(f"/v1/topics/{p}.seen").status == 200
    assert reader.get(f"/v1/topics/{p}.seen/schemas").status == 200
    resp = reader.get(f"/v1/topics/{p}.unseen")
    assert resp.status == 403
    assert resp.error == (
        f"user {user} may not read topic {p}.unseen: no grant matches it"
    )
    assert reader.get(f"/v1/topics/{p}.unseen/schemas").status == 403
    assert reader.get(f"/v1/topics/{p}.unseen/schemas/latest").status == 403
    # Without a grant, a missing topic is 403 like an existing one (names
    # cannot be probed); with one, it is 404.
    assert reader.get(f"/v1/topics/{p}.never").status == 403
    assert reader.get(f"/v1/topics/{p}.maybe.never").status == 404


def test_a_listing_shows_the_topics_a_users_grants_match(http, as_user, p):
    for name in ("a.1", "a.2", "a.2.x", "ab", "b", "c"):
        make_topic(http, f"{p}.{name}")
    user, password = new_user(
        http, [grant("consume", f"{p}.a.*"), grant("produce", f"{p}.b", f"{p}.z")]
    )
    lister = as_user(user, password)
    expected = [f"{p}.a.1", f"{p}.a.2", f"{p}.a.2.x", f"{p}.b"]
    page = lister.get("/v1/topics").json()
    assert [t["name"] for t in page["topics"]] == expected
    assert page["next_page_token"] is None
    seen, token = [], ""
    while True:
        page = lister.get(f"/v1/topics?limit=1&page_token={token}").json()
        seen += [t["name"] for t in page["topics"]]
        token = page["next_page_token"]
        if token is None:
            break
    assert seen == expected
    nobody, nobody_pw = new_user(http, [])
    assert as_user(nobody, nobody_pw).get("/v1/topics").json()["topics"] == []


# -- the Users API ------------------------------------------------------------------


def test_users_api_is_for_admins(http, as_user):
    user, password = new_user(http, [grant("produce", "x.*")])
    plain = as_user(user, password)
    assert plain.get("/v1/users").status == 403
    resp = plain.post(
        "/v1/users", {"username": "newbie", "password": "long-enough", "grants": []}
    )
    assert resp.status == 403
    assert resp.error == f"user {user} may not manage users: that takes an admin grant"
    assert plain.get("/v1/users/admin").status == 403
    assert plain.delete("/v1/users/admin").status == 403
    # A user reads their own record; nobody sees password material.
    own = plain.get(f"/v1/users/{user}")
    assert own.status == 200
    assert own.json()["grants"] == [grant("produce", "x.*")]
    listed = http.get("/v1/users?limit=1000").json()["users"]
    assert {u["username"] for u in listed} >= {"admin", user}
    assert all(set(u) == {"username", "grants", "created_at_ms"} for u in listed)
    assert http.get("/v1/users/no-such-user-here").status == 404


def test_user_creation_is_checked(http):
    good = {"username": "ok-name", "password": "long-enough", "grants": []}
    for body, wanted in (
        ({**good, "username": "a:b"}, "username must be"),
        # Path segments: clients resolve /v1/users/.. away, so no such user.
        ({**good, "username": "."}, "not only dots"),
        ({**good, "username": ".."}, "not only dots"),
        ({**good, "password": "short"}, "password must be 8 to"),
        ({**good, "grants": [{"action": "read", "patterns": ["x"]}]}, "action must"),
        ({**good, "grants": [{"action": "produce", "patterns": ["a*b"]}]}, "patterns"),
        ({**good, "grants": [{"action": "produce", "patterns": []}]}, "non-empty"),
        ({**good, "extra": 1}, "unknown field"),
    ):
        resp = http.post("/v1/users", body)
        assert resp.status == 400, body
        assert wanted in resp.error
    name, _ = new_user(http, [])
    again = http.post("/v1/users", {**good, "username": name})
    assert (again.status, again.error) == (409, f"user {name} already exists")


def test_nobody_grants_more_than_they_hold(http, as_user, p):
    scoped, scoped_pw = new_user(http, [grant("admin", f"{p}.*")])
    sub_admin = as_user(scoped, scoped_pw)
    # Within what it holds: fine.
    name, password = new_user(sub_admin, [grant("produce", f"{p}.x.*")])
    for grants, missing in (
        ([grant("admin", "*")], "admin on '*'"),
        ([grant("produce", "*")], "produce on '*'"),
        ([grant("produce", f"{p}*")], f"produce on '{p}*'"),
        ([grant("consume", "elsewhere")], "consume on 'elsewhere'"),
    ):
        body = {"username": f"e-{uuid.uuid4().hex[:8]}", "password": "long-enough"}
        resp = sub_admin.post("/v1/users", {**body, "grants": grants})
        assert resp.status == 403
        assert missing in resp.error
        resp = sub_admin.put(f"/v1/users/{name}/grants", {"grants": grants})
        assert resp.status == 403
    # Nor may it touch a user whose grants reach beyond its own: the root
    # admin can be neither demoted, nor deleted, nor have its password reset.
    resp = sub_admin.put("/v1/users/admin/grants", {"grants": []})
    assert resp.status == 403
    assert "change user admin" in resp.error
    assert sub_admin.delete("/v1/users/admin").status == 403
    assert sub_admin.put("/v1/users/admin/password", {"password": "x" * 12}).status == (
        403
    )
    # A producer granting itself admin, or a wider pattern.
    user = as_user(name, password)
    for grants in ([grant("admin", "*")], [grant("produce", "*")]):
        resp = user.put(f"/v1/users/{name}/grants", {"grants": grants})
        assert resp.status == 403
    assert http.get(f"/v1/users/{name}").json()["grants"] == [
        grant("produce", f"{p}.x.*")
    ]


def test_a_scoped_admin_cannot_take_over_topics_through_their_owner(http, as_user, p):
    """Ownership goes by user name: an admin manages a user only when its own
    admin patterns also match every topic that name owns, or it could reset
    the owner's password (or create the name anew) and act as them."""
    scoped, scoped_pw = new_user(http, [grant("admin", f"{p}.p.*")])
    sub_admin = as_user(scoped, scoped_pw)
    bob, bob_pw = new_user(http, [grant("create", f"{p}.q")])
    assert as_user(bob, bob_pw).post("/v1/topics", {"name": f"{p}.q"}).status == 201
    narrowed = [grant("produce", f"{p}.p.x")]
    assert http.put(f"/v1/users/{bob}/grants", {"grants": narrowed}).status == 200
    assert sub_admin.delete(f"/v1/topics/{p}.q").status == 403
    # Its admin covers bob's grants now, but not the topic bob owns.
    refusal = (
        f"user {scoped} may not change user {bob}: {bob} owns topic {p}.q, "
        f"outside {scoped}'s admin grants"
    )
    for resp in (
        sub_admin.put(f"/v1/users/{bob}/password", {"password": "taken-over!"}),
        sub_admin.put(
            f"/v1/users/{bob}/grants", {"grants": [grant("produce", f"{p}.p.y")]}
        ),
        sub_admin.delete(f"/v1/users/{bob}"),
    ):
        assert (resp.status, resp.error) == (403, refusal)
    time.sleep(1.0)  # had anything changed, every worker would know by now
    bob_client = as_user(bob, bob_pw)
    record = bob_client.get(f"/v1/users/{bob}")
    assert record.status == 200
    assert record.json()["grants"] == narrowed
    assert bob_client.get(f"/v1/topics/{p}.q").json()["owner"] == bob
    # Bob's own password stays bob's business.
    body = {"password": "bobs-own-choice", "current_password": bob_pw}
    assert bob_client.put(f"/v1/users/{bob}/password", body).status == 204

    # Deleted, the name still owns the topic: creating it anew is refused.
    assert http.delete(f"/v1/users/{bob}").status == 204
    anew = {"username": bob, "password": "taken-over!", "grants": narrowed}
    resp = sub_admin.post("/v1/users", anew)
    assert (resp.status, resp.error) == (
        403,
        refusal.replace(f"change user {bob}", f"create user {bob}"),
    )
    assert http.get(f"/v1/users/{bob}").status == 404

    # The root admin does all four.
    assert http.post("/v1/users", anew).status == 201
    reset = http.put(f"/v1/users/{bob}/password", {"password": "reset-by-root"})
    assert reset.status == 204
    assert http.put(f"/v1/users/{bob}/grants", {"grants": []}).status == 200
    assert http.delete(f"/v1/users/{bob}").status == 204

    # A user whose topics all lie within the scoped admin's reach is its to manage.
    carol, carol_pw = new_user(http, [grant("create", f"{p}.p.*")])
    made = as_user(carol, carol_pw).post("/v1/topics", {"name": f"{p}.p.c"})
    assert made.status == 201
    path = f"/v1/users/{carol}"
    assert sub_admin.put(
        path + "/password", {"password": "reset-by-scoped"}
    ).status == (204)
    assert sub_admin.put(path + "/grants", {"grants": narrowed}).status == 200
    assert sub_admin.delete(path).status == 204
    again = {"username": carol, "password": "made-by-scoped", "grants": narrowed}
    assert sub_admin.post("/v1/users", again).status == 201
    time.sleep(1.0)
    assert as_user(carol, "made-by-scoped").get(path).status == 200


def test_grant_changes_hold_at_once(http, as_user, p):
    make_topic(http, f"{p}.t")
    name, password = new_user(http, [grant("consume", f"{p}.t")])
    user = as_user(name, password)
    assert user.post(f"/v1/topics/{p}.t/produce", {"a": 1}).status == 403
    resp = http.put(
        f"/v1/users/{name}/grants", {"grants": [grant("produce", f"{p}.*")]}
    )
    assert resp.status == 200
    assert resp.json()["grants"] == [grant("produce", f"{p}.*")]
    time.sleep(1.0)  # the promise: every worker within a second
    assert user.post(f"/v1/topics/{p}.t/produce", {"a": 1}).status == 202
    assert user.get(f"/v1/topics/{p}.t/consume").status == 403


# -- passwords, deletion ------------------------------------------------------------


def test_a_user_changes_their_own_password(node, http, as_user):
    name, old = new_user(http, [])
    user = as_user(name, old)
    assert user.get("/v1/topics").status == 200
    path = f"/v1/users/{name}/password"
    resp = user.put(path, {"password": "brand-new-pass"})
    assert (resp.status, resp.error) == (
        400,
        "invalid argument: current_password is required to change your own password",
    )
    resp = user.put(path, {"password": "brand-new-pass", "current_password": "nope"})
    assert (resp.status, resp.error) == (403, "current_password is wrong")
    body = {"password": "brand-new-pass", "current_password": old}
    assert user.put(path, body).status == 204
    time.sleep(1.0)
    assert user.get("/v1/topics").status == 401
    assert as_user(name, "brand-new-pass").get("/v1/topics").status == 200
    # Someone else's password takes an admin.
    other, other_pw = new_user(http, [])
    resp = as_user(other, other_pw).put(path, {"password": "hijacked-pass"})
    assert resp.status == 403


def test_an_admin_resets_a_password_without_the_current_one(http, as_user):
    name, old = new_user(http, [])
    assert as_user(name, old).get("/v1/topics").status == 200
    resp = http.put(f"/v1/users/{name}/password", {"password": "reset-by-admin"})
    assert resp.status == 204
    time.sleep(1.0)
    assert as_user(name, old).get("/v1/topics").status == 401
    assert as_user(name, "reset-by-admin").get("/v1/topics").status == 200


def test_a_change_reaches_every_worker_within_a_second(node, http):
    """Credentials cached on every worker stop working once the user is
    changed or deleted, within a second, long before the cache would lapse."""
    for change in ("password", "delete"):
        name, password = new_user(http, [])
        # Many connections: with two workers, some land on each.
        clients = [Client(node.base, auth=(name, password)) for _ in range(16)]
        try:
            for client in clients:
                assert client.get("/v1/topics").status == 200
            if change == "delete":
                assert http.delete(f"/v1/users/{name}").status == 204
            else:
                body = {"password": "something-else"}
                assert http.put(f"/v1/users/{name}/password", body).status == 204
            time.sleep(1.0)
            statuses = [client.get("/v1/topics").status for client in clients]
            assert statuses == [401] * len(clients), change
        finally:
            for client in clients:
                client.close()
    assert http.get(f"/v1/users/{name}").status == 404


@pytest.mark.parametrize(("change", "status"), [("delete", 401), ("revoke", 403)])
def test_a_long_poll_leases_nothing_once_its_user_is_gone(
    http, as_user, p, change, status
):
    """A consumer long-polling when its user is deleted (or its consume
    grant revoked) gets no message produced after the change is seen."""
    topic = f"{p}.t"
    make_topic(http, topic, partitions=1)
    name, password = new_user(http, [grant("consume", topic)])
    user = as_user(name, password)
    assert user.get(f"/v1/topics/{topic}/consume").status == 204  # cached
    answers = []
    poll = threading.Thread(
        target=lambda: answers.append(user.get(f"/v1/topics/{topic}/consume?wait=8s"))
    )
    poll.start()
    try:
        time.sleep(1.0)  # the poll is waiting
        if change == "delete":
            assert http.delete(f"/v1/users/{name}").status == 204
        else:
            grants = {"grants": [grant("produce", topic)]}
            assert http.put(f"/v1/users/{name}/grants", grants).status == 200
        time.sleep(1.0)  # the promise: every worker within a second
        assert http.post(f"/v1/topics/{topic}/produce", b"after").status == 202
    finally:
        poll.join()
    assert answers[0].status == status
    assert http.get(f"/v1/topics/{topic}/consume").json()["offset"] == 0


def test_deleting_a_user_keeps_their_topics_owner(http, as_user, p):
    name, password = new_user(http, [grant("create", f"{p}.*")])
    assert as_user(name, password).post("/v1/topics", {"name": f"{p}.kept"}).status == (
        201
    )
    assert http.delete(f"/v1/users/{name}").status == 204
    assert http.delete(f"/v1/users/{name}").status == 404
    assert http.get(f"/v1/topics/{p}.kept").json()["owner"] == name


def test_the_access_log_has_a_line_per_request(node, http, p):
    make_topic(http, f"{p}.logged")
    request_id = f"trace-{uuid.uuid4().hex}"
    resp = http.post(
        f"/v1/topics/{p}.logged/produce", b"{}", headers={"X-Request-ID": request_id}
    )
    assert resp.status == 202
    deadline = time.monotonic() + 10
    while True:
        lines = [ln for ln in node.log.read_text().splitlines() if request_id in ln]
        if lines or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert len(lines) == 1
    fields = lines[0].split(" ")
    # time, client, user, method, route, topic, status, duration, request id
    assert fields[1:7] == [
        "127.0.0.1",
        "admin",
        "POST",
        "/v1/topics/{name}/produce",
        f"{p}.logged",
        "202",
    ]
    assert float(fields[7]) >= 0
    assert fields[8] == request_id


def test_a_path_cannot_write_lines_into_the_access_log(node):
    # The topic segment arrives percent-decoded: %0A would end the line and
    # start a forged one (here, an admin's delete).
    request_id = f"trace-{uuid.uuid4().hex}"
    forged = "2026-01-01T00:00:00.000+00:00 127.0.0.1 admin DELETE - payments 204"
    target = "/v1/topics/x%0A" + forged.replace(" ", "%20") + "/consume"
    request = build("GET", target, auth=None, headers={"X-Request-ID": request_id})
    assert exchange(node.port, request).status == 401
    deadline = time.monotonic() + 10
    while request_id not in node.log.read_text() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert forged not in node.log.read_text()
    lines = [ln for ln in node.log.read_text().splitlines() if request_id in ln]
    assert len(lines) == 1
    assert lines[0].split(" ")[1:7] == [
        "127.0.0.1",
        "-",
        "GET",
        "/v1/topics/{name}/consume",
        "-",
        "401",
    ]


# -- nodes of their own -------------------------------------------------------------


def metric(client: Client, name: str) -> float:
    text = client.get("/metrics").data.decode()
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith(name)
    )


def test_failed_logins_are_rate_limited(valkey, tmp_path):
    """Against four workers, a burst of wrong passwords for one user gets the
    node's burst of 401s (each a real check), then 429 with Retry-After, not
    a check; so does one address trying many user names."""
    node = Node(
        tmp_path,
        storage_url=tcp_url(valkey),
        workers=4,
        env={
            "NARAD_SECURITY_FAILURES_BURST": "8",
            "NARAD_SECURITY_FAILURES_PER_MINUTE": "1",
            "NARAD_SECURITY_ADDRESS_FAILURES_BURST": "12",
            "NARAD_SECURITY_ADDRESS_FAILURES_PER_MINUTE": "1",
        },
    ).start()
    admin = node.client()
    try:
        name, password = new_user(admin, [])
        victim = Client(node.base, auth=(name, password), source="127.0.0.3")
        assert victim.get("/v1/topics").status == 200  # verified, kept alive
        statuses = []
        for _ in range(200):
            wrong = (name, "guess-" + secrets.token_hex(4))
            guess = Client(node.base, auth=wrong, source="127.0.0.2")
            resp = guess.get("/v1/topics")
            guess.close()
            statuses.append(resp.status)
            if resp.status == 429:
                assert int(resp.headers["retry-after"]) >= 1
                assert resp.error.startswith("too many failed authentications")
        # At most the node's burst were checked; the rest were refused unchecked.
        assert 1 <= statuses.count(401) <= 8
        assert statuses.count(429) == 200 - statuses.count(401)
        # The right password from the attacker's address is refused too...
        attacker = Client(node.base, auth=(name, password), source="127.0.0.2")
        assert attacker.get("/v1/topics").status == 429
        attacker.close()
        # ... while the user's own connection, already verified, goes on.
        assert victim.get("/v1/topics").status == 200
        victim.close()
        # One address trying many user names is held back by its own limit.
        sprayed = []
        for n in range(100):
            wrong = (f"sprayed-{n}", "spray-password")
            spray = Client(node.base, auth=wrong, source="127.0.0.4")
            sprayed.append(spray.get("/v1/topics").status)
            spray.close()
        assert 1 <= sprayed.count(401) <= 12
        assert sprayed.count(429) == 100 - sprayed.count(401)
        # Each worker writes its counts out within a second or so.
        for reason in ("wrong", "rate_limited"):
            series = f'narad_auth_failures_total{{reason="{reason}"}}'
            deadline = time.monotonic() + 15
            while metric(admin, series) < 1 and time.monotonic() < deadline:
                time.sleep(0.2)
            assert metric(admin, series) >= 1
    finally:
        admin.close()
        node.stop()


def test_ipv4_clients_of_a_dual_stack_bind_are_limited_apart(valkey, tmp_path):
    """Bound to ``[::]``, IPv4 clients arrive as ``::ffff:a.b.c.d``: each is
    still its own address, not one /64 shared by every IPv4 client."""
    node = Node(tmp_path, storage_url=tcp_url(valkey), workers=1)
    node.env.update(
        {
            "NARAD_SERVER_BIND": f"[::]:{node.port}",
            "NARAD_SECURITY_ADDRESS_FAILURES_BURST": "3",
            "NARAD_SECURITY_ADDRESS_FAILURES_PER_MINUTE": "1",
        }
    )
    node.start()
    admin = node.client()
    try:
        name, password = new_user(admin, [])
        statuses = []
        for n in range(6):
            guess = Client(
                node.base, auth=(f"guess-{n}", "wrong-pass"), source="127.0.0.5"
            )
            statuses.append(guess.get("/v1/topics").status)
            guess.close()
        assert statuses == [401] * 3 + [429] * 3
        # Another IPv4 client, with credentials no worker has verified yet.
        other = Client(node.base, auth=(name, password), source="127.0.0.6")
        assert other.get("/v1/topics").status == 200
        other.close()
    finally:
        admin.close()
        node.stop()


def readme_walkthrough() -> str:
    text = (ROOT / "README.md").read_text()
    section = text.split("## Walkthrough", 1)[1]
    return section.split("```sh\n", 1)[1].split("```", 1)[0]


def run_walkthrough(node: Node, cwd) -> str:
    """The README's walkthrough as written, but for the node's address; its
    ``narad-data`` is the node's data directory."""
    (cwd / "narad-data").symlink_to(node.tmp / "data")
    script = readme_walkthrough().replace(
        "NARAD=http://127.0.0.1:7942", f"NARAD={node.base}"
    )
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_root_admin_is_seeded_once_with_a_password_file(tmp_path):
    env = {"NARAD_ADMIN_PASSWORD": ""}  # none: the node makes one
    node = Node(tmp_path / "node", workers=2, env=env).start()
    secret = tmp_path / "node" / "data" / "admin-password"
    try:
        assert secret.stat().st_mode & 0o777 == 0o600
        password = secret.read_text().strip()
        assert len(password) >= 16
        # The README walkthrough works as written against it.
        out = run_walkthrough(node, tmp_path)
        assert '"authentication required: send HTTP Basic credentials' in out
        assert '"owner":"admin"' in out
        # Every output the README shows for the walkthrough is what it prints.
        shown = [
            line.removeprefix("# ")
            for line in readme_walkthrough().splitlines()
            if line.startswith('# {"')
        ]
        assert shown and all(line in out for line in shown), shown
        assert "user shop may not consume from topic payments" in out
        assert "user shop may not delete topic payments" in out
        assert "202" in out.splitlines()  # shop's produce
        assert out.endswith("204\n204\n")  # shop and payments deleted
        admin = Client(node.base, auth=("admin", password))
        assert admin.get("/v1/users/admin").json()["grants"] == [grant("admin", "*")]
        # The last admin can be neither deleted nor demoted...
        resp = admin.delete("/v1/users/admin")
        assert (resp.status, resp.error) == (
            409,
            "user admin is the last admin (admin on '*'): give another user admin "
            "on '*' first",
        )
        demote = {"grants": [grant("produce", "*")]}
        assert admin.put("/v1/users/admin/grants", demote).status == 409
        # ... until there is another.
        second, second_pw = new_user(admin, [grant("admin", "*")])
        assert admin.put("/v1/users/admin/grants", demote).status == 200
        other = Client(node.base, auth=(second, second_pw))
        assert other.delete(f"/v1/users/{second}").status == 409
        other.close()
        admin.close()
    finally:
        node.stop()
    assert password not in node.log.read_text()
    # A restart keeps the users and the file; nothing is seeded again.
    again = Node(tmp_path / "node", workers=1, env=env).start()
    try:
        assert secret.read_text().strip() == password
        admin = Client(again.base, auth=("admin", password))
        assert admin.get("/v1/topics").status == 200
        admin.close()
    finally:
        again.stop()
    assert "root admin" not in again.log.read_text()


def test_the_root_admin_password_can_come_from_the_environment(valkey, tmp_path):
    url = tcp_url(valkey)[:-1] + "2"  # a database with no user yet
    redis.Redis.from_url(url).flushdb()
    node = Node(tmp_path, storage_url=url, workers=1).start()  # tests' password
    try:
        assert node.client().get("/v1/users/admin").status == 200
        assert not (tmp_path / "data" / "admin-password").exists()
    finally:
        node.stop()
    # With no data directory, a generated password is logged, once.
    redis.Redis.from_url(url).flushdb()
    bare = Node(
        tmp_path / "bare",
        storage_url=url,
        workers=2,
        env={"NARAD_ADMIN_PASSWORD": "", "NARAD_STORAGE_DATA_DIR": ""},
    ).start()
    try:
        lines = [
            ln for ln in bare.log.read_text().splitlines() if "with password" in ln
        ]
        assert len(lines) == 1
        password = lines[0].split("with password ")[1].split(" ")[0]
        admin = Client(bare.base, auth=("admin", password))
        assert admin.get("/v1/topics").status == 200
        admin.close()
    finally:
        bare.stop()


def test_the_root_admin_is_seeded_once_the_storage_takes_writes(valkey, tmp_path):
    """A first start on a storage refusing writes (full) seeds no admin; the
    workers seed it on a later login, once the storage takes writes again."""
    url = tcp_url(valkey)[:-1] + "3"  # a database with no user yet
    server = redis.Redis.from_url(url)
    server.flushdb()
    limit = server.config_get("maxmemory")["maxmemory"]
    server.config_set("maxmemory", 1)  # every write refused for memory
    node = Node(tmp_path, storage_url=url, workers=1)
    try:
        node.start()
        admin = node.client()
        assert admin.get("/v1/topics").status == 507  # the seeding's write
        server.config_set("maxmemory", limit)
        assert admin.get("/v1/topics").status == 200
        admin.close()
    finally:
        server.config_set("maxmemory", limit)
        node.stop()


def test_security_off_opens_every_route_and_says_so(valkey, tmp_path):
    node = Node(
        tmp_path,
        storage_url=tcp_url(valkey),
        workers=2,
        env={"NARAD_SECURITY_ENABLED": "false"},
    ).start()
    try:
        anonymous = Client(node.base, auth=None)
        name = f"open-{uuid.uuid4().hex[:8]}"
        resp = anonymous.post("/v1/topics", {"name": name})
        assert resp.status == 201
        assert resp.json()["owner"] is None
        assert anonymous.post(f"/v1/topics/{name}/produce", b"x").status == 202
        anonymous.close()
    finally:
        node.stop()
    assert node.log.read_text().count("security is off") == 1


def test_basic_credentials_are_utf8(http, as_user):
    password = "pässwörd-ünïcode"
    name, _ = new_user(http, [], password=password)
    assert as_user(name, password).get("/v1/topics").status == 200
    # The same password in Latin-1 is not UTF-8: malformed, not a guess.
    raw = name.encode() + b":" + password.encode("latin-1")
    header = "Basic " + base64.b64encode(raw).decode()
    resp = http.get("/v1/topics", headers={"Authorization": header})
    assert resp.status == 401
    assert resp.error.startswith("malformed Authorization header")


def test_credentials_with_bytes_beyond_ascii_are_malformed(node):
    # A header's bytes reach the app as Latin-1 text; base64 has none of them.
    for header in (
        "Basic \xe9\xe9\xe9\xe9",
        "Basic YWRtaW46\xff",
        "Basic YWRtaW46eA\xa0",
    ):
        request = build(
            "GET", "/v1/topics", auth=None, headers={"Authorization": header}
        )
        resp = exchange(node.port, request)
        assert resp.status == 401, (header, resp.body)
        assert resp.headers["www-authenticate"] == CHALLENGE
        assert resp.error.startswith("malformed Authorization header")


def test_fan_out_children_are_their_parents_owners_business(http, as_user, p):
    owner, owner_pw = new_user(http, [grant("create", f"{p}.*")])
    mine = as_user(owner, owner_pw)
    assert mine.post("/v1/topics", {"name": f"{p}.parent"}).status == 201
    # Create-as-child: create on the child's name, and the parent's owner.
    resp = mine.post("/v1/topics", {"name": f"{p}.kid", "parent": f"{p}.parent"})
    assert resp.status == 201
    assert resp.json()["owner"] == owner
    other, other_pw = new_user(http, [grant("create", f"{p}.*")])
    theirs = as_user(other, other_pw)
    resp = theirs.post("/v1/topics", {"name": f"{p}.kid2", "parent": f"{p}.parent"})
    assert resp.status == 403
    assert resp.error == (
        f"user {other} may not manage the fan-out children of topic {p}.parent: "
        "only its owner or an admin may"
    )
    # Attach and detach: the parent's owner; an attach also alters the child.
    assert theirs.post("/v1/topics", {"name": f"{p}.loose"}).status == 201
    attach = {"child": f"{p}.loose"}
    resp = theirs.post(f"/v1/topics/{p}.parent/children", attach)
    assert resp.status == 403
    resp = mine.post(f"/v1/topics/{p}.parent/children", attach)
    assert resp.status == 403
    assert resp.error == (
        f"user {owner} may not alter topic {p}.loose: only its owner or an admin may"
    )
    assert http.post(f"/v1/topics/{p}.parent/children", attach).status == 200
    assert mine.get(f"/v1/topics/{p}.parent/children").status == 200
    assert theirs.get(f"/v1/topics/{p}.parent/children").status == 200  # a grant
    assert theirs.delete(f"/v1/topics/{p}.parent/children/{p}.kid").status == 403
    assert mine.delete(f"/v1/topics/{p}.parent/children/{p}.kid").status == 204
    assert mine.delete(f"/v1/topics/{p}.parent/children/{p}.loose").status == 204


def test_an_owner_never_deletes_the_topic_another_user_created_again(http, as_user, p):
    # Concurrent deletes by a topic's owner, while another user creates the
    # name again: the gate judged ownership on the owner's topic and the
    # delete took whatever the name held next, so a second delete (after the
    # first) removed the other user's new topic. Each delete now acts on
    # the incarnation its user owns: one delete of it, never two.
    grants = [grant("create", f"{p}.*")]
    owner, rival = new_user(http, grants), new_user(http, grants)
    deleters = [as_user(*owner) for _ in range(6)]
    creators = [as_user(*rival) for _ in range(3)]
    topic = f"/v1/topics/{p}.x"

    def delete(client, deleted):
        deleted.append(client.delete(topic).status)

    def create(client, created):
        for _ in range(3):
            status = client.post("/v1/topics", {"name": f"{p}.x"}).status
            created.append(status)
            if status == 201:
                return

    for _ in range(40):
        assert deleters[0].post("/v1/topics", {"name": f"{p}.x"}).status == 201
        deleted, created = [], []
        threads = [threading.Thread(target=delete, args=(c, deleted)) for c in deleters]
        threads += [
            threading.Thread(target=create, args=(c, created)) for c in creators
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert deleted.count(204) == 1, (deleted, created)
        if 201 in created:
            assert http.get(topic).json()["owner"] == rival[0]
        assert http.delete(topic).status in (204, 404)


def test_an_owner_without_a_grant_never_reads_another_users_topic(http, as_user, p):
    # Owning a topic is what lets a user no grant of whom matches it read
    # it: while the name was deleted and created again by another user,
    # such reads answered that user's topic (its owner, its schema).
    owner, owner_pw = new_user(http, [grant("create", f"{p}.*")])
    rival = new_user(http, [grant("create", f"{p}.*")])
    mine = as_user(owner, owner_pw)
    theirs = as_user(*rival)
    names = [f"{p}.x{i}" for i in range(40)]
    for name in names:
        assert mine.post("/v1/topics", {"name": name}).status == 201
    elsewhere = {"grants": [grant("produce", f"{p}-elsewhere.*")]}
    assert http.put(f"/v1/users/{owner}/grants", elsewhere).status == 200
    # A new password: no worker remembers the credentials with old grants.
    reset = {"password": secrets.token_urlsafe(12)}
    assert http.put(f"/v1/users/{owner}/password", reset).status == 204
    mine = as_user(owner, reset["password"])
    seen: set = set()

    def read(name: str, done: threading.Event) -> None:
        while not done.is_set():
            resp = mine.get(f"/v1/topics/{name}")
            seen.add(resp.json()["owner"] if resp.status == 200 else resp.status)

    for name in names:
        done = threading.Event()
        readers = [threading.Thread(target=read, args=(name, done)) for _ in range(4)]
        for reader in readers:
            reader.start()
        assert http.delete(f"/v1/topics/{name}").status == 204
        assert theirs.post("/v1/topics", {"name": name}).status == 201
        done.set()
        for reader in readers:
            reader.join()
    assert rival[0] not in seen, seen


# -- issue 50: failed logins never lock an owner out; /metrics for scrapers ------------


def auth_counts(client: Client) -> dict[str, float]:
    """narad_auth_failures_total by reason, and narad_auth_delayed_total."""
    counts = {
        reason: metric(client, f'narad_auth_failures_total{{reason="{reason}"}}')
        for reason in ("wrong", "rate_limited")
    }
    counts["delayed"] = metric(client, "narad_auth_delayed_total")
    return counts


def attempt(node: Node, auth: tuple[str, str], source: str) -> Response:
    """One request on a connection of its own from ``source``: it may reach
    either worker, as a new client's does."""
    client = Client(node.base, auth=auth, source=source)
    try:
        return client.get("/v1/topics")
    finally:
        client.close()


def test_wrong_passwords_from_one_address_never_lock_the_owner_out(valkey, tmp_path):
    """Twenty wrong passwords for a user from one address, then the right one
    from another: 200 at once (neither delayed nor refused), every time,
    remembered by a worker or not; the guessing address stays refused, and
    an address guessing many names is still throttled."""
    node = Node(
        tmp_path,
        storage_url=tcp_url(valkey),
        workers=2,
        env={
            # The shipped limits per name and address, and an address limit
            # the spray below reaches; the limit of a name from everywhere at
            # its tightest: once it has failed, a failing address's attempt
            # waits a minute's turn, past the longest delay, so it is refused,
            # not delayed, and any delay counted would be the owner's.
            "NARAD_SECURITY_FAILURES_BURST": "10",
            "NARAD_SECURITY_FAILURES_PER_MINUTE": "10",
            "NARAD_SECURITY_ADDRESS_FAILURES_BURST": "40",
            "NARAD_SECURITY_ADDRESS_FAILURES_PER_MINUTE": "1",
            "NARAD_SECURITY_USER_FAILURES_BURST": "1",
            "NARAD_SECURITY_USER_FAILURES_PER_MINUTE": "1",
        },
    ).start()
    admin = node.client()
    try:
        name, password = new_user(admin, [])
        kept = Client(node.base, auth=(name, password), source="127.0.0.3")
        assert kept.get("/v1/topics").status == 200  # verified, kept alive
        guessed: list[int] = []
        owner: list[int] = []
        for round_ in range(3):
            for _ in range(20):
                wrong = (name, "guess-" + secrets.token_hex(4))
                resp = attempt(node, wrong, "127.0.0.2")
                guessed.append(resp.status)
                if resp.status == 429:
                    assert int(resp.headers["retry-after"]) >= 1
            # New addresses, new connections: whichever worker takes them,
            # the password is checked there (or was, by an earlier round).
            for n in range(4):
                resp = attempt(node, (name, password), f"127.0.1.{10 * round_ + n}")
                owner.append(resp.status)
                assert resp.status == 200, resp.data
            assert kept.get("/v1/topics").status == 200
        assert set(guessed) == {401, 429}
        assert guessed[-20:] == [429] * 20
        # The right password from the guessing address: refused like a guess.
        assert attempt(node, (name, password), "127.0.0.2").status == 429
        kept.close()
        # One address trying many user names is held back by its own limit.
        sprayed = [
            attempt(node, (f"sprayed-{n}", "spray-password"), "127.0.0.4").status
            for n in range(60)
        ]
        assert sprayed.count(401) <= 41
        assert sprayed[-5:] == [429] * 5
        # Every refusal was the guessers': once each worker has written out
        # its counts (a second or so), they are all there, and no check was
        # ever delayed.
        wrong = guessed.count(401) + sprayed.count(401)
        refused = guessed.count(429) + 1 + sprayed.count(429)
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            counts = auth_counts(admin)
            if (counts["wrong"], counts["rate_limited"]) == (wrong, refused):
                break
            time.sleep(0.2)
        time.sleep(2.5)  # a last write-out of each worker's counts
        assert auth_counts(admin) == {
            "wrong": wrong,
            "rate_limited": refused,
            "delayed": 0,
        }
    finally:
        admin.close()
        node.stop()


def test_a_name_guessed_from_many_addresses_delays_only_the_failing_ones(
    valkey, tmp_path
):
    """The limit of a name from everywhere: once spent, an address that has
    been failing waits its turn (counted in narad_auth_delayed_total), while
    the owner's new address is answered at once. One worker, whose scrape
    writes out its own counts: the figures are exact."""
    node = Node(
        tmp_path,
        storage_url=tcp_url(valkey),
        workers=1,
        env={
            "NARAD_SECURITY_FAILURES_BURST": "100",
            "NARAD_SECURITY_ADDRESS_FAILURES_BURST": "100",
            "NARAD_SECURITY_USER_FAILURES_BURST": "2",
            "NARAD_SECURITY_USER_FAILURES_PER_MINUTE": "60",  # a turn a second
        },
    ).start()
    admin = node.client()
    try:
        name, password = new_user(admin, [])
        for source in ("127.0.0.2", "127.0.0.3", "127.0.0.2", "127.0.0.3"):
            wrong = (name, "guess-" + secrets.token_hex(4))
            assert attempt(node, wrong, source).status == 401
        # The first two spent the allowance; the next two, from addresses
        # that had failed, waited their turns.
        assert auth_counts(admin) == {"wrong": 4, "rate_limited": 0, "delayed": 2}
        # The owner from an address that has not failed: neither.
        assert attempt(node, (name, password), "127.0.0.9").status == 200
        assert auth_counts(admin) == {"wrong": 4, "rate_limited": 0, "delayed": 2}
    finally:
        admin.close()
        node.stop()


def cli(node: Node, *args: str, stdin: str | None = None) -> str:
    """``narad ARGS`` as the root admin against ``node``: its output."""
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "plugins")]),
        "NARAD_URL": node.base,
        "NARAD_USER": ADMIN[0],
        "NARAD_PASSWORD": ADMIN[1],
        "NARAD_CLI_CONFIG": str(node.tmp / "contexts.json"),
    }
    done = subprocess.run(
        [sys.executable, "-m", "narad.cli", *args, "--json"],
        input=stdin,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_metrics_are_for_scrapers_and_full_admins(node, http, as_user, p):
    # Per-topic series cover the first metrics.max_topics names: the shared
    # node holds many topics, so this one's name sorts before theirs.
    secret = f"0{p}.secret"
    make_topic(http, secret)
    anonymous = Client(node.base, auth=None)
    try:
        for method in ("GET", "HEAD"):
            resp = anonymous.request(method, "/metrics")
            assert resp.status == 401
            assert resp.headers["www-authenticate"] == CHALLENGE
            assert p.encode() not in resp.data
            assert b"narad_" not in resp.data
    finally:
        anonymous.close()
    # A user for Prometheus, made with the command line's bare grant.
    name, password = f"scraper-{p}", secrets.token_urlsafe(12)
    made = json.loads(
        cli(
            node,
            "user",
            "create",
            name,
            "--grant",
            "metrics",
            "--password-stdin",
            stdin=password + "\n",
        )
    )
    assert made["grants"] == [grant("metrics", "*")]
    scraper = as_user(name, password)
    resp = scraper.get("/metrics")
    assert resp.status == 200
    assert "narad_auth_failures_total" in resp.data.decode()
    # The per-topic figures come from a read cached for a while
    # (metrics.topic_stats_ttl_s): the new topic shows once it is read again.
    deadline = time.monotonic() + 30
    while f'topic="{secret}"' not in scraper.get("/metrics").data.decode():
        assert time.monotonic() < deadline, "the topic's series never appeared"
        time.sleep(0.2)
    # It reads nothing else.
    assert scraper.get("/v1/topics").json()["topics"] == []
    assert scraper.get(f"/v1/topics/{secret}").status == 403
    assert scraper.post(f"/v1/topics/{secret}/produce", "x").status == 403
    assert scraper.get("/v1/users").status == 403
    assert http.get("/metrics").status == 200  # the root admin
    # Nobody else, however much of the topics they hold.
    for grants in ([grant("produce", "*")], [grant("admin", f"0{p}.*")]):
        other = as_user(*new_user(http, grants))
        resp = other.get("/metrics")
        assert resp.status == 403
        assert resp.error.endswith(
            "may not read the metrics: that takes a metrics grant or admin on '*'"
        )
        assert p.encode() not in resp.data
    assert as_user(name, "not-the-password").get("/metrics").status == 401
    # The grant is given and taken like any other, and must be the node's.
    shown = json.loads(
        cli(
            node,
            "user",
            "grants",
            name,
            "--grant",
            "metrics",
            "--grant",
            f"consume:{p}.*",
        )
    )
    assert shown["grants"] == [grant("metrics", "*"), grant("consume", f"{p}.*")]
    resp = http.put(
        f"/v1/users/{name}/grants", {"grants": [grant("metrics", f"{p}.*")]}
    )
    assert (resp.status, resp.error) == (
        400,
        "invalid argument: grants[0]: a metrics grant is the whole node's: its "
        'patterns must be ["*"]',
    )
    cli(node, "user", "grants", name, "--grant", f"consume:{p}.*")
    assert as_user(name, password).get("/metrics").status == 403


def test_the_shipped_scrape_config_reads_a_node(node, http, tmp_path):
    """conf/prometheus/prometheus.yml as Prometheus reads it: job narad,
    the alerts, and the basic_auth of a user with the metrics grant, whose
    password file gets the node's series."""
    config = yaml.safe_load((ROOT / "conf/prometheus/prometheus.yml").read_text())
    assert any("narad-alerts" in path for path in config["rule_files"])
    (job,) = config["scrape_configs"]
    assert (job["job_name"], job["metrics_path"]) == ("narad", "/metrics")
    auth = job["basic_auth"]
    assert set(auth) == {"username", "password_file"}
    user, secret = auth["username"], secrets.token_urlsafe(16)
    resp = http.post(
        "/v1/users",
        {"username": user, "password": secret, "grants": [grant("metrics", "*")]},
    )
    if resp.status == 409:  # made by an earlier run against this storage
        assert (
            http.put(f"/v1/users/{user}/password", {"password": secret}).status == 204
        )
        grants = {"grants": [grant("metrics", "*")]}
        assert http.put(f"/v1/users/{user}/grants", grants).status == 200
    else:
        assert resp.status == 201, resp.data
    password_file = tmp_path / "narad-password"
    password_file.write_text(secret + "\n")
    # Prometheus strips the file's trailing newline, as this does.
    scrape = Client(node.base, auth=(user, password_file.read_text().rstrip("\n")))
    try:
        resp = scrape.get(job["metrics_path"])
        assert resp.status == 200
        assert "narad_storage_durable" in resp.data.decode()
    finally:
        scrape.close()


def test_metrics_public_opens_metrics_and_nothing_else(valkey, tmp_path):
    node = Node(
        tmp_path,
        storage_url=tcp_url(valkey),
        workers=1,
        env={"NARAD_METRICS_PUBLIC": "true"},
    ).start()
    anonymous = Client(node.base, auth=None)
    try:
        resp = anonymous.get("/metrics")
        assert resp.status == 200
        assert "narad_http_requests_total" in resp.data.decode()
        assert anonymous.get("/v1/topics").status == 401
        assert anonymous.get("/v1/users").status == 401
    finally:
        anonymous.close()
        node.stop()
