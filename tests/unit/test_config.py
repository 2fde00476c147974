from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from narad.config import SETTINGS
from narad.config import Config
from narad.errors import InvalidConfiguration

ROOT = Path(__file__).resolve().parents[2]


def test_defaults():
    config = Config.load(env={})
    assert config.get("server.bind") == "127.0.0.1:7942"
    assert config.storage_url == ""
    assert config.get("server.workers") > 1


def test_example_file_documents_every_setting_with_its_default():
    example = tomllib.loads((ROOT / "conf/narad.toml").read_text())
    declared = {s.key for s in SETTINGS}
    listed = {f"{sec}.{name}" for sec, table in example.items() for name in table}
    assert listed == declared
    config = Config.load(ROOT / "conf/narad.toml", env={})
    for setting in SETTINGS:
        assert config.get(setting.key) == Config.load(env={}).get(setting.key)


def test_file_then_environment(tmp_path):
    path = tmp_path / "n.toml"
    path.write_text('[server]\nworkers = 7\n[storage]\nurl = "redis://h:1/0"\n')
    config = Config.load(path, env={"NARAD_SERVER_WORKERS": "9"})
    assert config.get("server.workers") == 9
    assert config.storage_url == "redis://h:1/0"


def test_every_setting_has_an_environment_override():
    for setting in SETTINGS:
        assert setting.env.startswith("NARAD_")
        assert setting.env == f"NARAD_{setting.section}_{setting.name}".upper()


@pytest.mark.parametrize(
    ("env", "words"),
    [
        ({"NARAD_SERVER_WORKERS": "many"}, "`server.workers` ($NARAD_SERVER_WORKERS)"),
        ({"NARAD_SERVER_WORKERS": "0"}, "`server.workers`"),
        ({"NARAD_STORAGE_URL": "localhost"}, "`storage.url`"),
        ({"NARAD_SERVER_BIND": "nowhere"}, "`server.bind`"),
        ({"NARAD_BROKER_MAX_WAIT_MS": "-5"}, "`broker.max_wait_ms`"),
    ],
)
def test_a_bad_value_names_the_setting(env, words):
    with pytest.raises(InvalidConfiguration) as info:
        Config.load(env=env)
    assert words in str(info.value)


def test_unknown_setting_in_file_is_refused(tmp_path):
    path = tmp_path / "n.toml"
    path.write_text("[server]\nwokers = 3\n")
    with pytest.raises(InvalidConfiguration, match=r"`server\.wokers`"):
        Config.load(path, env={})


def test_bad_value_stops_the_cli(capsys):
    import os

    from narad.cli import main

    os.environ["NARAD_SERVER_MAX_CONNECTIONS"] = "lots"
    try:
        assert main(["config"]) == 2
    finally:
        del os.environ["NARAD_SERVER_MAX_CONNECTIONS"]
    assert "`server.max_connections`" in capsys.readouterr().err
