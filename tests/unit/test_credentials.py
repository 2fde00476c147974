"""narad.credentials: secrets from systemd's $CREDENTIALS_DIRECTORY."""

from __future__ import annotations

import pytest

from narad import credentials
from narad.config import Config
from narad.errors import InvalidConfiguration
from narad.security.seed import admin_password_from_env


@pytest.fixture
def directory(tmp_path):
    (tmp_path / "admin-password").write_text("from-the-credential\n")
    (tmp_path / "storage-password").write_text("s3cr/t@x\n")
    return tmp_path


def test_a_credential_is_its_file_without_the_newline(directory):
    env = {"CREDENTIALS_DIRECTORY": str(directory)}
    assert credentials.read("admin-password", env) == "from-the-credential"
    assert credentials.read("tls-key", env) is None
    assert credentials.read("admin-password", {}) is None


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("unix://narad@/run/s.sock", "unix://narad:s3cr%2Ft%40x@/run/s.sock"),
        (
            "redis://narad@10.0.0.1:6379,10.0.0.2:6379/0",
            "redis://narad:s3cr%2Ft%40x@10.0.0.1:6379,10.0.0.2:6379/0",
        ),
        ("redis://10.0.0.1:6379/0", "redis://:s3cr%2Ft%40x@10.0.0.1:6379/0"),
        # A password in the URL wins; no storage URL stays the embedded one.
        ("redis://narad:given@h:6379/0", "redis://narad:given@h:6379/0"),
        ("", ""),
    ],
)
def test_the_storage_password_goes_into_the_url(url, expected):
    assert credentials.with_password(url, "s3cr/t@x") == expected


def test_the_storage_url_takes_the_credential(directory, monkeypatch):
    config = Config.load(env={"NARAD_STORAGE_URL": "redis://narad@h:6379/0"})
    assert config.storage_url == "redis://narad@h:6379/0"
    monkeypatch.setenv("CREDENTIALS_DIRECTORY", str(directory))
    assert config.storage_url == "redis://narad:s3cr%2Ft%40x@h:6379/0"
    # What `narad config` prints is the setting, without the secret.
    assert config.get("storage.url") == "redis://narad@h:6379/0"


def test_the_admin_password_comes_from_the_environment_then_the_credential(
    directory,
):
    env = {"CREDENTIALS_DIRECTORY": str(directory)}
    assert admin_password_from_env(env) == "from-the-credential"
    env["NARAD_ADMIN_PASSWORD"] = "from-the-environment"
    assert admin_password_from_env(env) == "from-the-environment"
    assert admin_password_from_env({}) is None


def test_a_short_admin_credential_is_refused_by_its_name(tmp_path):
    (tmp_path / "admin-password").write_text("short\n")
    with pytest.raises(InvalidConfiguration, match="credential admin-password"):
        admin_password_from_env({"CREDENTIALS_DIRECTORY": str(tmp_path)})
