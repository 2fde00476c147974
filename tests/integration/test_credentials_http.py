"""Secrets as systemd credentials: a node given ``$CREDENTIALS_DIRECTORY``
(as ``LoadCredential=`` sets it) takes its root admin's password and its
storage's password from there, with none of them in its environment."""

from __future__ import annotations

import pytest

from tests.httpclient import Client
from tests.nodes import Node
from tests.nodes import start_valkey

STORAGE_PASSWORD = "storage-secret-from-systemd"
ADMIN_PASSWORD = "admin-secret-from-systemd"


@pytest.fixture
def guarded_valkey(tmp_path):
    """A Valkey that lets Narad's user in with its password only."""
    server = start_valkey(
        tmp_path / "valkey",
        extra=(f"user narad on >{STORAGE_PASSWORD} ~* &* +@all",),
    )
    yield server
    server.stop()


def test_a_node_takes_its_passwords_from_its_credentials(guarded_valkey, tmp_path):
    credentials = tmp_path / "credentials"
    credentials.mkdir(mode=0o700)
    (credentials / "admin-password").write_text(ADMIN_PASSWORD + "\n")
    (credentials / "storage-password").write_text(STORAGE_PASSWORD + "\n")
    node = Node(
        tmp_path / "node",
        storage_url=f"redis://narad@127.0.0.1:{guarded_valkey.port}/0",
        workers=1,
        env={"NARAD_ADMIN_PASSWORD": "", "CREDENTIALS_DIRECTORY": str(credentials)},
    ).start()
    try:
        admin = Client(node.base, auth=("admin", ADMIN_PASSWORD))
        assert admin.get("/v1/topics").status == 200
        assert admin.post("/v1/topics", {"name": "from-credentials"}).status == 201
        admin.close()
        stranger = Client(node.base, auth=("admin", "not-the-credential"))
        assert stranger.get("/v1/topics").status == 401
        stranger.close()
        # Generated nowhere: the credential was the password.
        assert not (tmp_path / "node" / "data" / "admin-password").exists()
        assert STORAGE_PASSWORD not in node.log.read_text()
    finally:
        node.stop()
