from __future__ import annotations

import logging

import pytest

from narad import testing
from narad.config import boolean
from narad.errors import InvalidConfiguration
from narad.security.passwords import Scrypt
from narad.security.passwords import hash_password
from narad.security.passwords import verify_password
from narad.security.seed import admin_password_from_env
from narad.security.seed import seed_root_admin
from tests.contract.memory import MemoryStorage

CHEAP = Scrypt(log2_n=10)


def cheap(password: str) -> str:
    return hash_password(password, CHEAP)


def test_a_generated_password_goes_to_a_private_file(tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="narad.security.seed")
    config = testing.make_config(tmp_path)
    storage = MemoryStorage()
    assert seed_root_admin(storage, config, None, cheap) is True
    secret = config.data_dir / "admin-password"
    password = secret.read_text().strip()
    assert secret.stat().st_mode & 0o777 == 0o600
    assert list(secret.parent.glob(".admin-password*")) == []  # no staged file left
    admin = storage.get_user("admin")
    assert admin.admin and verify_password(password, admin.password_hash, CHEAP)
    assert password not in caplog.text
    assert str(secret) in caplog.text
    # Seeded once: a second start changes nothing.
    assert seed_root_admin(storage, config, None, cheap) is False
    assert secret.read_text().strip() == password


def test_a_given_password_writes_no_file(tmp_path):
    config = testing.make_config(tmp_path)
    storage = MemoryStorage()
    assert seed_root_admin(storage, config, "from-the-env", cheap) is True
    assert not (config.data_dir / "admin-password").exists()
    assert verify_password(
        "from-the-env", storage.get_user("admin").password_hash, CHEAP
    )


def test_without_a_data_directory_the_password_is_logged_once(tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="narad.security.seed")
    config = testing.make_config(tmp_path, storage__data_dir="")
    storage = MemoryStorage()
    assert seed_root_admin(storage, config, None, cheap) is True
    [line] = [r.getMessage() for r in caplog.records if "with password" in r.message]
    password = line.split("with password ")[1].split(" ")[0]
    assert verify_password(password, storage.get_user("admin").password_hash, CHEAP)


def test_no_seeding_into_a_store_with_users(tmp_path):
    config = testing.make_config(tmp_path)
    storage = MemoryStorage()
    seed_root_admin(storage, config, "first-password", cheap)
    assert seed_root_admin(storage, config, "other-password", cheap) is False
    assert verify_password(
        "first-password", storage.get_user("admin").password_hash, CHEAP
    )


def test_the_env_password_is_checked():
    assert admin_password_from_env({}) is None
    assert admin_password_from_env({"NARAD_ADMIN_PASSWORD": ""}) is None
    assert admin_password_from_env({"NARAD_ADMIN_PASSWORD": "long-enough"}) == (
        "long-enough"
    )
    with pytest.raises(InvalidConfiguration) as err:
        admin_password_from_env({"NARAD_ADMIN_PASSWORD": "short"})
    assert "short" not in str(err.value)


@pytest.mark.parametrize(
    ("value", "parsed"),
    [(True, True), ("false", False), ("False", False), ("1", True), ("off", False)],
)
def test_booleans(value, parsed):
    assert boolean(value) is parsed


def test_a_boolean_is_not_anything_else():
    with pytest.raises(ValueError):
        boolean("maybe")
