"""narad.serve.server's TLS settings: the context, its refusals at start, and the
warning of a node that would take passwords in clear."""

from __future__ import annotations

import logging
import ssl
import time

import pytest

from narad.config import Config
from narad.errors import InvalidConfiguration
from narad.serve.server import _local
from narad.serve.server import check_tls_at_start
from narad.serve.server import gunicorn_settings
from narad.serve.server import tls_context
from tests.tlscerts import make_pki


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    return make_pki(tmp_path_factory.mktemp("pki"))


def config(**settings) -> Config:
    env = {f"NARAD_SERVER_{k.upper()}": str(v) for k, v in settings.items()}
    return Config.load(env=env)


def test_no_tls_without_files():
    assert tls_context(config()) is None


def test_a_context_serves_the_certificate_and_asks_no_client_certificate(pki):
    context = tls_context(config(tls_cert=pki.server_cert, tls_key=pki.server_key))
    assert context.verify_mode == ssl.CERT_NONE
    assert context.minimum_version >= ssl.TLSVersion.TLSv1_2


def test_a_client_ca_asks_for_client_certificates_and_verifies_them(pki):
    context = tls_context(
        config(tls_cert=pki.server_cert, tls_key=pki.server_key, tls_client_ca=pki.ca)
    )
    # Optional in the handshake (probes answer without one), verified if given.
    assert context.verify_mode == ssl.CERT_OPTIONAL
    assert len(context.get_ca_certs()) == 1


@pytest.mark.parametrize(
    ("settings", "words"),
    [
        ({"tls_cert": "/no/such/cert.pem", "tls_key": "/no/such/key.pem"}, "tls_cert"),
        ({"tls_cert": "CERT"}, "go together"),
        ({"tls_key": "KEY"}, "go together"),
        ({"tls_client_ca": "CA"}, "needs `server.tls_cert`"),
        ({"tls_cert": "CERT", "tls_key": "CLIENT_KEY"}, "cannot be loaded"),
        (
            {"tls_cert": "CERT", "tls_key": "KEY", "tls_client_ca": "/no/ca.pem"},
            "tls_client_ca",
        ),
    ],
)
def test_tls_files_that_do_not_load_are_refused(pki, settings, words):
    files = {
        "CERT": pki.server_cert,
        "KEY": pki.server_key,
        "CLIENT_KEY": pki.client_key,
        "CA": pki.ca,
    }
    given = {k: files.get(v, v) for k, v in settings.items()}
    with pytest.raises(InvalidConfiguration, match=words):
        tls_context(config(**given))
    with pytest.raises(InvalidConfiguration, match=words):
        check_tls_at_start(config(**given))


def test_gunicorn_takes_the_https_scheme_from_the_files(pki):
    settings = gunicorn_settings(
        config(tls_cert=pki.server_cert, tls_key=pki.server_key)
    )
    assert (settings["certfile"], settings["keyfile"]) == (
        str(pki.server_cert),
        str(pki.server_key),
    )


@pytest.mark.parametrize(
    ("bind", "local"),
    [
        ("127.0.0.1:7942", True),
        ("127.0.0.2:7942", True),
        ("[::1]:7942", True),
        ("localhost:7942", True),
        ("unix:/run/narad.sock", True),
        ("0.0.0.0:7942", False),
        ("[::]:7942", False),
        ("10.0.0.5:7942", False),
        ("no-such-host.invalid:7942", False),
    ],
)
def test_which_binds_are_local(bind, local):
    assert _local(bind) is local


def _warnings(caplog, **settings) -> list[str]:
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="narad.serve.server"):
        check_tls_at_start(config(**settings))
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]


def test_security_on_beyond_loopback_without_tls_warns_once(caplog, pki):
    (warning,) = _warnings(caplog, bind="0.0.0.0:7942")
    assert "0.0.0.0:7942" in warning and "in clear" in warning
    assert "server.tls_cert" in warning
    assert _warnings(caplog, bind="127.0.0.1:7942") == []
    assert (
        _warnings(
            caplog,
            bind="0.0.0.0:7942",
            tls_cert=pki.server_cert,
            tls_key=pki.server_key,
        )
        == []
    )
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="narad.serve.server"):
        check_tls_at_start(
            Config.load(
                env={
                    "NARAD_SERVER_BIND": "0.0.0.0:7942",
                    "NARAD_SECURITY_ENABLED": "false",
                }
            )
        )
    assert caplog.records == []  # no passwords to leak


class _Unreader:
    def __init__(self) -> None:
        self.held = b""

    def unread(self, data: bytes) -> None:
        self.held = data + self.held


class _Request:
    def __init__(self) -> None:
        self.unreader = _Unreader()


@pytest.fixture
def tls_pair(pki):
    """(server side as a worker's Connection, client side) of a TLS connection."""
    import socket
    import threading

    from narad.serve.workers import Connection
    from narad.serve.workers import Limits

    server_context = tls_context(
        config(tls_cert=pki.server_cert, tls_key=pki.server_key)
    )
    raw_server, raw_client = socket.socketpair()
    client_side = {}

    def connect():
        client_side["sock"] = pki.client_context().wrap_socket(
            raw_client, server_hostname="localhost"
        )

    connecting = threading.Thread(target=connect)
    connecting.start()
    server = server_context.wrap_socket(raw_server, server_side=True)
    connecting.join()
    conn = Connection(
        server, Limits(header=1, keepalive=1, body=1, min_rate=1000), probes_only=False
    )
    conn.begin_request(_Request())
    yield conn, client_side["sock"]
    server.close()
    client_side["sock"].close()


def test_a_tls_client_still_there_has_not_hung_up(tls_pair):
    conn, _ = tls_pair
    assert conn.tls
    assert not conn.hung_up()


def test_a_tls_clients_next_request_is_kept_for_the_parser(tls_pair):
    conn, client = tls_pair
    client.sendall(b"GET /next HTTP/1.1\r\n\r\n")
    deadline = time.monotonic() + 5
    while conn.request.unreader.held == b"" and time.monotonic() < deadline:
        assert not conn.hung_up()
    assert conn.request.unreader.held == b"GET /next HTTP/1.1\r\n\r\n"


def test_a_tls_client_that_closed_has_hung_up(tls_pair):
    conn, client = tls_pair
    client.close()  # close_notify, then the connection's end
    deadline = time.monotonic() + 5
    while not conn.hung_up():
        assert time.monotonic() < deadline


def test_a_tls_client_that_said_close_notify_has_hung_up(tls_pair):
    import contextlib
    import threading

    conn, client = tls_pair

    def unwrap():  # waits for the node's close_notify, which never comes
        with contextlib.suppress(OSError, ValueError):
            client.unwrap()

    threading.Thread(target=unwrap, daemon=True).start()
    deadline = time.monotonic() + 5
    while not conn.hung_up():
        assert time.monotonic() < deadline
