"""The app with security on, in process (fakeredis): the same rules as the
integration tests, plus what is easier to see from inside (log lines)."""

from __future__ import annotations

import json
import logging
import time

import pytest

from narad import testing
from narad.http.middleware import access_log
from narad.security.access import Gate
from narad.testing import basic_auth


@pytest.fixture
def secure(tmp_path):
    return testing.client(testing.make_config(tmp_path, security__enabled=True))


def add_user(client, name, grants, password="a-good-password"):
    body = {"username": name, "password": password, "grants": grants}
    resp = client.simulate_post("/v1/users", json=body)
    assert resp.status_code == 201, resp.text
    return basic_auth(name, password)


def test_security_is_on_by_default():
    from narad.config import Config

    assert Config.load(env={}).get("security.enabled") is True


def test_the_test_client_sends_the_root_admins_credentials(secure):
    assert secure.simulate_get("/v1/topics").status_code == 200
    resp = secure.simulate_get("/v1/topics", headers={"Authorization": ""})
    assert resp.status_code == 401
    assert resp.headers["www-authenticate"] == 'Basic realm="narad"'
    assert secure.simulate_get(
        "/healthz", headers={"Authorization": ""}
    ).status_code == (200)


def test_owner_and_grants_in_process(secure):
    producer = add_user(secure, "prod", [{"action": "produce", "patterns": ["t.*"]}])
    creator = add_user(secure, "maker", [{"action": "create", "patterns": ["t.*"]}])
    resp = secure.simulate_post("/v1/topics", json={"name": "t.1"}, headers=creator)
    assert resp.status_code == 201
    assert resp.json["owner"] == "maker"
    assert (
        secure.simulate_post("/v1/topics/t.1/produce", body=b"x", headers=producer)
    ).status_code == 202
    resp = secure.simulate_delete("/v1/topics/t.1", headers=producer)
    assert resp.status_code == 403
    assert resp.json["error"] == (
        "user prod may not delete topic t.1: only its owner or an admin may"
    )
    assert secure.simulate_delete("/v1/topics/t.1", headers=creator).status_code == 204


def test_security_off_owns_nothing_and_opens_everything(client):
    resp = client.simulate_post("/v1/topics", json={"name": "open"})
    assert (resp.status_code, resp.json["owner"]) == (201, None)
    assert client.simulate_get("/v1/users").status_code == 200
    # The Users API works while security is off, to prepare users.
    body = {"username": "later", "password": "a-good-password", "grants": []}
    assert client.simulate_post("/v1/users", json=body).status_code == 201


def test_access_log_lines_in_json(tmp_path):
    config = testing.make_config(
        tmp_path, security__enabled=True, server__access_log="json"
    )
    client = testing.client(config)
    lines = []

    class Collect(logging.Handler):
        def emit(self, record):
            lines.append(record.getMessage())

    handler = Collect()
    access_log.addHandler(handler)
    try:
        client.simulate_post("/v1/topics", json={"name": "logged"})
        client.simulate_post(
            "/v1/topics/logged/produce",
            body=b"{}",
            headers={"X-Request-ID": "abc-123"},
        )
        client.simulate_get("/v1/topics/logged", headers={"Authorization": ""})
    finally:
        access_log.removeHandler(handler)
    produced, refused = json.loads(lines[1]), json.loads(lines[2])
    assert set(produced) == {
        "level",
        "logger",
        "message",
        "time",
        "client",
        "user",
        "method",
        "route",
        "topic",
        "status",
        "duration_ms",
        "request_id",
    }
    assert produced["user"] == "admin"
    assert produced["message"] == "POST /v1/topics/{name}/produce 202"
    assert produced["route"] == "/v1/topics/{name}/produce"
    assert (produced["topic"], produced["status"]) == ("logged", 202)
    assert produced["request_id"] == "abc-123"
    assert (refused["user"], refused["status"]) == (None, 401)
    assert refused["topic"] == "logged"


def test_a_password_in_the_file_is_refused_with_a_hint(tmp_path):
    from narad.config import Config
    from narad.errors import InvalidConfiguration

    path = tmp_path / "narad.toml"
    path.write_text('[security]\nadmin_password = "hunter2"\n')
    with pytest.raises(InvalidConfiguration) as err:
        Config.load(path, env={})
    assert "secrets are never read from the file" in str(err.value)
    assert "hunter2" not in str(err.value)


def test_a_scoped_listing_pages_through_names_and_prefixes(secure):
    for name in ("a", "a.1", "a.2", "a.3", "ab", "b", "c", "zz"):
        assert (
            secure.simulate_post("/v1/topics", json={"name": name}).status_code == 201
        )
    grants = [
        {"action": "consume", "patterns": ["a.*", "zz", "missing"]},
        {"action": "produce", "patterns": ["b", "a.2"]},
    ]
    lister = add_user(secure, "lister", grants)
    seen, token, pages = [], "", 0
    while token is not None:
        resp = secure.simulate_get(
            "/v1/topics", params={"limit": "2", "page_token": token}, headers=lister
        )
        page = resp.json
        seen += [t["name"] for t in page["topics"]]
        token, pages = page["next_page_token"], pages + 1
    assert seen == ["a.1", "a.2", "a.3", "b", "zz"]
    assert pages == 3


def test_topics_a_user_name_owns_are_found_on_any_page(secure, monkeypatch):
    monkeypatch.setattr("narad.security.users.OWNED_PAGE", 2)
    grants = [{"action": "admin", "patterns": ["s.*"]}]
    scoped = add_user(
        secure, "sa", [*grants, {"action": "create", "patterns": ["x.own"]}]
    )
    bob = add_user(secure, "bob", [{"action": "create", "patterns": ["s.b", "x.q"]}])
    owned = [("sa", "x.own", scoped), ("bob", "s.b", bob), ("bob", "x.q", bob)]
    for _, topic, auth in owned:
        resp = secure.simulate_post("/v1/topics", json={"name": topic}, headers=auth)
        assert resp.status_code == 201
    for topic in ("m.1", "m.2", "m.3", "m.4", "m.5", "s.a"):
        assert secure.simulate_post("/v1/topics", json={"name": topic}).status_code == (
            201
        )
    narrow = {"grants": [{"action": "produce", "patterns": ["s.b"]}]}
    assert secure.simulate_put("/v1/users/bob/grants", json=narrow).status_code == 200
    # x.q sits on the fifth page of two names, after pages owned by others.
    resp = secure.simulate_delete("/v1/users/bob", headers=scoped)
    assert (resp.status_code, resp.json["error"]) == (
        403,
        "user sa may not change user bob: bob owns topic x.q, outside sa's admin "
        "grants",
    )
    # The admin's own user is its own business, whatever it owns.
    resp = secure.simulate_put(
        "/v1/users/sa/grants", json={"grants": grants}, headers=scoped
    )
    assert resp.status_code == 200
    # Once x.q is gone, bob owns only s.b, which sa's admin grant matches.
    assert secure.simulate_delete("/v1/topics/x.q").status_code == 204
    assert secure.simulate_delete("/v1/users/bob", headers=scoped).status_code == 204


def _replaced_after_the_check(secure, monkeypatch, topic, owner, rival):
    """Make ``topic`` deleted (by the admin) and created again by ``rival``
    right after the gate found ``owner`` owning it: the race of an owner's
    request with another user's recreate, made deterministic."""
    original = Gate._owns

    def owns(self, principal, name):
        epoch = original(self, principal, name)
        if principal.name == owner and name == topic and epoch is not None:
            monkeypatch.setattr(Gate, "_owns", original)  # once
            assert secure.simulate_delete(f"/v1/topics/{topic}").status_code == 204
            again = {"name": topic, "retention_ms": 0}
            resp = secure.simulate_post("/v1/topics", json=again, headers=rival)
            assert resp.status_code == 201
        return epoch

    monkeypatch.setattr(Gate, "_owns", owns)


@pytest.mark.parametrize(
    ("method", "path", "body", "replaced"),
    [
        ("DELETE", "/v1/topics/t.x", None, "t.x"),
        ("PATCH", "/v1/topics/t.x", {"retention_ms": 3_600_000}, "t.x"),
        ("PATCH", "/v1/topics/t.x", {"schema": {"type": "object"}}, "t.x"),
        ("POST", "/v1/topics", {"name": "t.kid", "parent": "t.x"}, "t.x"),
        ("POST", "/v1/topics/t.x/children", {"child": "t.loose"}, "t.x"),
        ("POST", "/v1/topics/t.other/children", {"child": "t.x"}, "t.x"),
        ("DELETE", "/v1/topics/t.x/children/t.kid", None, "t.x"),
    ],
)
def test_an_owner_acts_only_on_the_incarnation_it_owns(
    secure, monkeypatch, method, path, body, replaced
):
    # The gate judged ownership on one record and the service acted on
    # whatever the name held when it read it again: a user could delete,
    # alter or link the topic another user had just created under that name.
    grants = [{"action": "create", "patterns": ["t.*"]}]
    owner = add_user(secure, "owner", grants)
    rival = add_user(secure, "rival", grants)
    for name in ("t.x", "t.loose", "t.other"):
        resp = secure.simulate_post("/v1/topics", json={"name": name}, headers=owner)
        assert resp.status_code == 201
    child = {"name": "t.kid", "parent": "t.x"}
    if method == "DELETE" and "children" in path:
        resp = secure.simulate_post("/v1/topics", json=child, headers=owner)
        assert resp.status_code == 201
    _replaced_after_the_check(secure, monkeypatch, replaced, "owner", rival)
    resp = secure.simulate_request(method, path, json=body, headers=owner)
    assert resp.status_code == 404, resp.text
    assert resp.json["error"] == f"topic {replaced} not found"
    # The rival's topic is as its creator made it: no schema, no children,
    # not attached, its own retention.
    record = secure.simulate_get(f"/v1/topics/{replaced}").json
    assert record["owner"] == "rival"
    assert record["retention_ms"] == 0
    assert record["schema_version"] is None
    assert record.get("parent") is None
    children = secure.simulate_get(f"/v1/topics/{replaced}/children").json
    assert children["children"] == []
    assert secure.simulate_get("/v1/topics/t.kid").status_code == (
        200 if "children" in path and method == "DELETE" else 404
    )


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("GET", "/v1/topics/t.x", None),
        ("GET", "/v1/topics/t.x/schemas", None),
        ("GET", "/v1/topics/t.x/schemas/latest", None),
        ("GET", "/v1/topics/t.x/children", None),
        ("POST", "/v1/topics/t.x/schemas/compatibility", {"schema": {}}),
    ],
)
def test_an_owner_without_a_grant_reads_only_the_incarnation_it_owns(
    secure, monkeypatch, method, path, body
):
    # Owning t.x is what lets a user whose grants no longer match it read
    # it; the topic another user created under that name meanwhile was
    # answered to it (its record, schema and children).
    grants = [{"action": "create", "patterns": ["t.*"]}]
    owner = add_user(secure, "owner", grants)
    rival = add_user(secure, "rival", grants)
    mine = {"name": "t.x", "schema": {"type": "array"}}
    resp = secure.simulate_post("/v1/topics", json=mine, headers=owner)
    assert resp.status_code == 201
    elsewhere = {"grants": [{"action": "produce", "patterns": ["z.*"]}]}
    resp = secure.simulate_put("/v1/users/owner/grants", json=elsewhere)
    assert resp.status_code == 200
    # Once the worker heard of the new grants (z.* matches, t.* does not).
    deadline = time.monotonic() + 10
    while secure.simulate_get("/v1/topics/z.none", headers=owner).status_code != 404:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    resp = secure.simulate_request(method, path, json=body, headers=owner)
    assert resp.status_code == 200
    original = Gate._owns

    def owns(self, principal, name):
        epoch = original(self, principal, name)
        if principal.name == "owner" and epoch is not None:
            monkeypatch.setattr(Gate, "_owns", original)  # once
            assert secure.simulate_delete("/v1/topics/t.x").status_code == 204
            again = {"name": "t.x", "schema": {"type": "object"}}
            resp = secure.simulate_post("/v1/topics", json=again, headers=rival)
            assert resp.status_code == 201
        return epoch

    monkeypatch.setattr(Gate, "_owns", owns)
    resp = secure.simulate_request(method, path, json=body, headers=owner)
    assert resp.status_code == 403, resp.text
    assert resp.json["error"] == (
        "user owner may not read topic t.x: no grant matches it"
    )
