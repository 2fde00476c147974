"""The narad CLI against a node serving HTTPS: the node's certificate is
verified against a CA file (option, environment or context), and a client
certificate is presented where the node asks for one. narad_client's own
TLS tests are in clients/python/tests/test_client_tls.py."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

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


def test_the_cli_round_trips_over_https(tls_node, pki, tmp_path):
    env = {
        "NARAD_USER": ADMIN[0],
        "NARAD_PASSWORD": ADMIN[1],
        "NARAD_URL": tls_node.base,
        "NARAD_CA_FILE": str(pki.ca),
    }
    created = narad_cli(
        "topic", "create", "tls-orders", "--partitions", "1", env=env, home=tmp_path
    )
    assert created.returncode == 0, created.stderr
    produced = narad_cli(
        "produce", "tls-orders", '{"id": 1.50}', env=env, home=tmp_path
    )
    assert produced.returncode == 0, produced.stderr
    consumed = narad_cli(
        "consume", "tls-orders", "--wait", "5s", env=env, home=tmp_path
    )
    assert consumed.returncode == 0, consumed.stderr
    assert '"payload":{"id": 1.50}' in consumed.stdout


@pytest.mark.parametrize("kind", ["not PEM", "missing"])
def test_a_ca_file_that_cannot_be_used_is_a_usage_error(kind, tmp_path):
    bad = tmp_path / "ca.pem"
    if kind == "not PEM":
        bad.write_text("not a certificate")
    ran = narad_cli(
        "--ca-file",
        str(bad),
        "--url",
        "https://127.0.0.1:1",
        "topic",
        "ls",
        env={},
        home=tmp_path,
    )
    assert ran.returncode == 2, ran.stderr
    assert ran.stderr.startswith("narad: TLS files cannot be used: ")


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


def test_the_cli_presents_its_certificate_where_the_node_asks(
    pki, storage_url, tmp_path
):
    node = Node(tmp_path, storage_url=storage_url, tls=pki, client_ca=True).start()
    env = {
        "NARAD_USER": ADMIN[0],
        "NARAD_PASSWORD": ADMIN[1],
        "NARAD_URL": node.base,
        "NARAD_CA_FILE": str(pki.ca),
    }
    try:
        presented = narad_cli(
            "topic",
            "ls",
            env={
                **env,
                "NARAD_CLIENT_CERT": str(pki.client_cert),
                "NARAD_CLIENT_KEY": str(pki.client_key),
            },
            home=tmp_path,
        )
        assert presented.returncode == 0, presented.stderr
        assert isinstance(json.loads(presented.stdout), list)
        anonymous = narad_cli("topic", "ls", env=env, home=tmp_path)
        assert anonymous.returncode == 1
        assert "client certificate is required" in anonymous.stderr
    finally:
        node.stop()
