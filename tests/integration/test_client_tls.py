"""narad.client and the narad CLI against a node serving HTTPS: the node's
certificate is verified against a CA file (option, environment or context),
and a client certificate is presented where the node asks for one."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from narad.client import Client
from narad.client import ClientError
from narad.client import Refused
from narad.client import Unavailable
from tests.httpclient import ADMIN
from tests.nodes import ROOT
from tests.nodes import Node
from tests.tlscerts import make_pki


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    return make_pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
def tls_node(pki, storage_url, tmp_path_factory):
    node = Node(tmp_path_factory.mktemp("tls-node"), storage_url=storage_url, tls=pki)
    node.start()
    yield node
    node.stop()


def narad_cli(*args: str, env: dict[str, str], home) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "narad.cli", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={
            "PATH": "/usr/bin:/bin",
            "PYTHONPATH": f"{ROOT}:{ROOT / 'plugins'}",
            "NARAD_CLI_CONFIG": str(home / "contexts.json"),
            **env,
        },
    )


def test_the_client_verifies_the_node_against_its_ca_file(tls_node, pki):
    with Client(
        tls_node.base, user=ADMIN[0], password=ADMIN[1], ca_file=str(pki.ca)
    ) as narad:
        narad.create_topic("tls-orders", partitions=1)
        narad.produce("tls-orders", b'{"id": 1}')
        message = narad.consume("tls-orders", wait="5s")
        assert message["payload"] == {"id": 1}
        narad.ack("tls-orders", message["receipt_handle"])
    # The public CAs do not know the node's: refused, not sent in clear.
    with (
        Client(tls_node.base, user=ADMIN[0], password=ADMIN[1]) as untrusting,
        pytest.raises(Unavailable, match="CERTIFICATE_VERIFY_FAILED"),
    ):
        untrusting.list_topics()


def test_a_ca_file_that_is_not_pem_is_named(tmp_path):
    bad = tmp_path / "ca.pem"
    bad.write_text("not a certificate")
    with pytest.raises(ClientError, match="TLS files cannot be used"):
        Client("https://127.0.0.1:1", ca_file=str(bad))


def test_the_cli_takes_the_ca_file_from_the_option_env_and_context(
    tls_node, pki, tmp_path
):
    auth = {"NARAD_USER": ADMIN[0], "NARAD_PASSWORD": ADMIN[1]}
    env = {**auth, "NARAD_URL": tls_node.base}
    refused = narad_cli("topic", "ls", env=env, home=tmp_path)
    assert refused.returncode == 3, refused.stderr
    assert "CERTIFICATE_VERIFY_FAILED" in refused.stderr
    by_option = narad_cli(
        "--ca-file", str(pki.ca), "topic", "ls", env=env, home=tmp_path
    )
    assert by_option.returncode == 0, by_option.stderr
    by_env = narad_cli(
        "topic", "ls", env={**env, "NARAD_CA_FILE": str(pki.ca)}, home=tmp_path
    )
    assert by_env.returncode == 0, by_env.stderr
    added = narad_cli(
        "context",
        "add",
        "secure",
        "--url",
        tls_node.base,
        "--user",
        ADMIN[0],
        "--no-password",
        "--ca-file",
        str(pki.ca),
        env={},
        home=tmp_path,
    )
    assert added.returncode == 0, added.stderr
    shown = narad_cli("context", "show", "--json", env={}, home=tmp_path)
    assert json.loads(shown.stdout)["ca_file"] == str(pki.ca)
    by_context = narad_cli(
        "topic", "ls", env={"NARAD_PASSWORD": ADMIN[1]}, home=tmp_path
    )
    assert by_context.returncode == 0, by_context.stderr


def test_the_client_presents_its_certificate_where_the_node_asks(
    pki, storage_url, tmp_path
):
    node = Node(tmp_path, storage_url=storage_url, tls=pki, client_ca=True).start()
    try:
        with Client(
            node.base,
            user=ADMIN[0],
            password=ADMIN[1],
            ca_file=str(pki.ca),
            client_cert=str(pki.client_cert),
            client_key=str(pki.client_key),
        ) as narad:
            assert isinstance(narad.list_topics(), dict)
        with (
            Client(
                node.base, user=ADMIN[0], password=ADMIN[1], ca_file=str(pki.ca)
            ) as anonymous,
            pytest.raises(Refused, match="client certificate is required"),
        ):
            anonymous.list_topics()
    finally:
        node.stop()
