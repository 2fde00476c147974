"""The ``metrics`` grant and who may read ``/metrics`` (issue 50): the grant
parsed and compiled, the CLI's ``--grant metrics``, and the route in process
with security on (fakeredis)."""

from __future__ import annotations

import threading

import click
import falcon
import falcon.testing
import pytest

from narad import testing
from narad.app import _refused
from narad.cli.users import parse_grant
from narad.errors import InvalidArgument
from narad.errors import NaradError
from narad.errors import StorageError
from narad.http.health import Metrics
from narad.security.access import Gate
from narad.security.authn import Principal
from narad.security.grants import Action
from narad.security.grants import Permissions
from narad.security.grants import parse_grants
from narad.storage import Grant
from narad.testing import basic_auth

METRICS = {"action": "metrics", "patterns": ["*"]}


# -- the grant -----------------------------------------------------------------------


def test_a_metrics_grant_is_the_whole_nodes():
    assert parse_grants([METRICS]) == (Grant("metrics", ("*",)),)
    for patterns in (["orders.*"], ["orders"], ["*", "orders"]):
        with pytest.raises(InvalidArgument) as err:
            parse_grants([{"action": "metrics", "patterns": patterns}])
        assert str(err.value) == (
            "invalid argument: grants[0]: a metrics grant is the whole node's: "
            'its patterns must be ["*"]'
        )
    with pytest.raises(InvalidArgument) as err:
        parse_grants([{"action": "metric", "patterns": ["*"]}])
    assert "must be one of produce, consume, create, admin, metrics" in str(err.value)


def test_metrics_reads_the_metrics_and_no_topic():
    scraper = Permissions([Grant("metrics", ("*",))])
    assert scraper.reads_metrics()
    assert not scraper.any_matches("orders")
    assert not scraper.allows(Action.PRODUCE, "orders")
    assert not scraper.allows(Action.ADMIN, "orders")
    assert scraper.listing_prefixes() == []
    assert not scraper.admin
    # Beside a topic grant, it widens neither reading nor listing.
    both = Permissions([Grant("metrics", ("*",)), Grant("consume", ("a.*",))])
    assert both.any_matches("a.x") and not both.any_matches("b")
    assert both.listing_prefixes() == [("a.", False)]


def test_admin_on_everything_reads_the_metrics_a_scoped_admin_does_not():
    assert Permissions([Grant("admin", ("*",))]).reads_metrics()
    assert not Permissions([Grant("admin", ("invoices.*",))]).reads_metrics()
    assert not Permissions([Grant("produce", ("*",))]).reads_metrics()
    assert not Permissions([]).reads_metrics()
    # A grant stored some other way than parse_grants allows is no wider.
    assert not Permissions([Grant("metrics", ("a.*",))]).reads_metrics()


def test_only_who_holds_it_hands_it_out():
    assert Permissions([Grant("admin", ("*",))]).covers("metrics", "*")
    assert Permissions([Grant("metrics", ("*",))]).covers("metrics", "*")
    assert not Permissions([Grant("admin", ("invoices.*",))]).covers("metrics", "*")


def test_the_cli_takes_metrics_bare_or_with_its_pattern():
    assert parse_grant("metrics") == METRICS
    assert parse_grant("metrics:*") == METRICS
    with pytest.raises(click.BadParameter) as err:
        parse_grant("metric")
    assert "one of produce, consume, create, admin, metrics" in err.value.message


# -- /metrics in process ---------------------------------------------------------------


@pytest.fixture
def secure(tmp_path):
    return testing.client(testing.make_config(tmp_path, security__enabled=True))


def add_user(client, name, grants, password="a-good-password"):
    body = {"username": name, "password": password, "grants": grants}
    resp = client.simulate_post("/v1/users", json=body)
    assert resp.status_code == 201, resp.text
    return basic_auth(name, password)


def test_metrics_need_credentials_of_a_scraper_or_a_full_admin(secure):
    secure.simulate_post("/v1/topics", json={"name": "secret.topic"})
    for method in (secure.simulate_get, secure.simulate_head):
        resp = method("/metrics", headers={"Authorization": ""})
        assert resp.status_code == 401
        assert resp.headers["www-authenticate"] == 'Basic realm="narad"'
        assert b"secret.topic" not in resp.content
    scraper = add_user(secure, "scraper", [METRICS])
    resp = secure.simulate_get("/metrics", headers=scraper)
    assert resp.status_code == 200
    assert 'topic="secret.topic"' in resp.text
    assert secure.simulate_get("/metrics").status_code == 200  # the root admin
    # The scraper reads nothing else.
    assert secure.simulate_get("/v1/topics", headers=scraper).json == {
        "topics": [],
        "next_page_token": None,
    }
    resp = secure.simulate_get("/v1/topics/secret.topic", headers=scraper)
    assert resp.status_code == 403
    for grants in (
        [{"action": "produce", "patterns": ["*"]}],
        [{"action": "admin", "patterns": ["secret.*"]}],
    ):
        other = add_user(secure, f"u{len(grants[0]['action'])}", grants)
        resp = secure.simulate_get("/metrics", headers=other)
        assert resp.status_code == 403
        assert resp.json["error"].endswith(
            "may not read the metrics: that takes a metrics grant or admin on '*'"
        )
        assert b"secret.topic" not in resp.content
    resp = secure.simulate_get(
        "/metrics", headers=basic_auth("scraper", "not-the-password")
    )
    assert resp.status_code == 401


def test_a_scoped_admin_cannot_make_a_scraper(secure):
    scoped = add_user(secure, "scoped", [{"action": "admin", "patterns": ["a.*"]}])
    body = {"username": "s2", "password": "a-good-password", "grants": [METRICS]}
    resp = secure.simulate_post("/v1/users", json=body, headers=scoped)
    assert resp.status_code == 403
    assert "metrics on '*'" in resp.json["error"]


def test_metrics_public_opens_the_route(tmp_path):
    config = testing.make_config(tmp_path, security__enabled=True, metrics__public=True)
    client = testing.client(config)
    resp = client.simulate_get("/metrics", headers={"Authorization": ""})
    assert resp.status_code == 200
    assert "narad_http_requests_total" in resp.text
    # Every other route still asks.
    resp = client.simulate_get("/v1/topics", headers={"Authorization": ""})
    assert resp.status_code == 401


def test_security_off_leaves_the_route_open(client):
    assert client.simulate_get("/metrics").status_code == 200


# -- a scrape while the storage stalls ---------------------------------------------


class _Stalled:
    """An authenticator whose check reads a storage that does not answer."""

    def __init__(self, remembered, unreachable=False):
        self._remembered = remembered
        self.unreachable = unreachable
        self.release = threading.Event()

    def remembered(self, header):
        return self._remembered

    def authenticate(self, header, address):
        if self.unreachable:
            raise StorageError("connection refused")
        self.release.wait(10)
        raise AssertionError("the scrape waited for the storage")


class _Topics:
    wait_s = 0.05

    def collect(self):
        return []


def stalled_scrape(remembered, unreachable=False) -> falcon.testing.Result:
    authenticator = _Stalled(remembered, unreachable)

    class Context:
        def process_request(self, req, resp):
            req.context.authenticator = authenticator
            req.context.gate = Gate(None)

    guard = type("Guard", (), {"status": lambda self: None})()
    caches = type("Caches", (), {"publish": lambda self: None})()
    app = falcon.App(middleware=[Context()])
    app.add_error_handler(NaradError, _refused)
    app.add_route("/metrics", Metrics(guard, caches, _Topics()))
    try:
        return falcon.testing.TestClient(app).simulate_get(
            "/metrics", headers=basic_auth("scraper", "a-good-password")
        )
    finally:
        authenticator.release.set()


def test_a_scrape_with_verified_credentials_does_not_wait_for_a_stalled_storage():
    scraper = Principal("scraper", Permissions([Grant("metrics", ("*",))]))
    resp = stalled_scrape(scraper)
    assert resp.status_code == 200
    assert "narad_auth_delayed_total" in resp.text
    # Remembered credentials without the grant are refused all the same.
    resp = stalled_scrape(Principal("bob", Permissions([Grant("produce", ("*",))])))
    assert resp.status_code == 403


def test_a_scrape_with_verified_credentials_survives_an_unreachable_storage():
    # The gauges say the storage is gone: the scrape must be answered.
    scraper = Principal("scraper", Permissions([Grant("metrics", ("*",))]))
    resp = stalled_scrape(scraper, unreachable=True)
    assert resp.status_code == 200
    assert "narad_storage_durable" in resp.text
