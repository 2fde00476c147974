from __future__ import annotations

import os
import tomllib
from pathlib import Path

import pytest

from narad.config import SETTINGS
from narad.config import Config
from narad.config import Setting
from narad.config import default_workers
from narad.config import integer
from narad.errors import InvalidConfiguration
from narad.plugins import load_plugins

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = load_plugins(load_entry_points=False)  # the production plugin set


def resolved(path=None, env=None) -> Config:
    return SHIPPED.configure(Config.load(path, env=env or {}))


def test_defaults():
    config = resolved()
    assert config.get("server.bind") == "127.0.0.1:7942"
    assert config.storage_url == ""
    assert config.get("server.workers") == default_workers()
    assert config.plugin("redis")["retry_attempts"] == 8


@pytest.mark.parametrize(("cores", "workers"), [(1, 2), (2, 2), (8, 8)])
def test_default_workers_are_one_per_core_at_least_two(monkeypatch, cores, workers):
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(cores)))
    assert default_workers() == workers
    assert resolved(env={"NARAD_SERVER_WORKERS": "0"}).get("server.workers") == workers
    assert resolved(env={"NARAD_SERVER_WORKERS": "3"}).get("server.workers") == 3


def test_example_file_documents_every_setting_with_its_default():
    example = tomllib.loads((ROOT / "conf/narad.toml").read_text())
    listed = set()
    for section, table in example.items():
        for name, value in table.items():
            if isinstance(value, dict):  # [plugins.<section>]
                listed |= {f"{section}.{name}.{key}" for key in value}
            else:
                listed.add(f"{section}.{name}")
    config = resolved()
    assert listed == {s.key for s in config.settings}
    from_file = resolved(ROOT / "conf/narad.toml")
    for setting in config.settings:
        assert from_file.get(setting.key) == config.get(setting.key), setting.key


def test_file_then_environment(tmp_path):
    path = tmp_path / "n.toml"
    path.write_text(
        '[server]\nworkers = 7\n[storage]\nurl = "redis://h:1/0"\n'
        "[plugins.redis]\nretry_attempts = 3\nsocket_timeout_ms = 500\n"
    )
    env = {"NARAD_SERVER_WORKERS": "9", "NARAD_PLUGINS_REDIS_RETRY_ATTEMPTS": "4"}
    config = resolved(path, env)
    assert config.get("server.workers") == 9
    assert config.storage_url == "redis://h:1/0"
    assert config.plugin("redis")["retry_attempts"] == 4
    assert config.get("plugins.redis.socket_timeout_ms") == 500


def test_every_setting_has_an_environment_override():
    for setting in resolved().settings:
        assert setting.env.startswith("NARAD_")
        flat = setting.key.replace(".", "_").upper()
        assert setting.env == f"NARAD_{flat}"
    assert Setting("x", 0, int, "", section="plugins.redis").env == (
        "NARAD_PLUGINS_REDIS_X"
    )


def test_plugin_settings_travel_to_workers_as_environment():
    config = resolved(env={"NARAD_PLUGINS_REDIS_RETRY_BACKOFF_MS": "7"})
    again = resolved(env=config.as_env())
    assert again.get("plugins.redis.retry_backoff_ms") == 7


@pytest.mark.parametrize(
    ("env", "words"),
    [
        ({"NARAD_SERVER_WORKERS": "many"}, "`server.workers` ($NARAD_SERVER_WORKERS)"),
        ({"NARAD_SERVER_WORKERS": "-1"}, "`server.workers`"),
        ({"NARAD_STORAGE_URL": "localhost"}, "`storage.url`"),
        ({"NARAD_SERVER_BIND": "nowhere"}, "`server.bind`"),
        ({"NARAD_BROKER_MAX_WAIT_MS": "-5"}, "`broker.max_wait_ms`"),
        (
            {"NARAD_PLUGINS_REDIS_RETRY_ATTEMPTS": "lots"},
            "`plugins.redis.retry_attempts` ($NARAD_PLUGINS_REDIS_RETRY_ATTEMPTS)",
        ),
    ],
)
def test_a_bad_value_names_the_setting(env, words):
    with pytest.raises(InvalidConfiguration) as info:
        resolved(env=env)
    assert words in str(info.value)


def test_a_bad_plugin_value_in_the_file_names_the_setting(tmp_path):
    path = tmp_path / "n.toml"
    path.write_text("[plugins.redis]\nsocket_timeout_ms = 1\n")
    with pytest.raises(InvalidConfiguration) as info:
        resolved(path)
    assert f"`plugins.redis.socket_timeout_ms` ({path})" in str(info.value)


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ("[server]\nwokers = 3\n", "server.wokers"),
        ("[plugins.redis]\nretry_atempts = 3\n", "plugins.redis.retry_atempts"),
        ("[plugins.nosuch]\nx = 1\n", "plugins.nosuch.x"),
    ],
)
def test_unknown_setting_in_file_is_refused(tmp_path, text, key):
    path = tmp_path / "n.toml"
    path.write_text(text)
    with pytest.raises(InvalidConfiguration, match=f"`{key}`"):
        resolved(path)


@pytest.mark.parametrize(
    "text", ["server = 3\n", "foo = 1\n", 'storage = "x"\n', 'plugins = ["x"]\n']
)
def test_a_value_where_a_table_belongs_is_named(tmp_path, text):
    # Was "unknown setting `server.`" (a section is not a setting), or a
    # traceback for `plugins`.
    path = tmp_path / "n.toml"
    path.write_text(text)
    section = text.split()[0]
    with pytest.raises(InvalidConfiguration) as info:
        resolved(path)
    assert str(info.value).startswith(f"`{section}` ({path}): expected a table")


@pytest.mark.parametrize(
    "name",
    ["NARAD_STORAGE_RETRY_ATTEMPTS", "NARAD_SERVER_WOKERS", "NARAD_PLUGINS_REDIS_X"],
)
def test_an_environment_variable_naming_no_setting_is_refused(name):
    with pytest.raises(InvalidConfiguration, match=f"`\\${name}`"):
        resolved(env={name: "1"})


def test_declared_settings_are_resolved_for_any_section():
    declared = {"mine": (Setting("limit", 5, integer(1, 9), "a limit"),)}
    config = Config.load(env={"NARAD_PLUGINS_MINE_LIMIT": "6"})
    assert config.with_plugin_settings(declared).plugin("mine") == {"limit": 6}
    replaced = config.replace(plugins__mine__limit=2)
    assert replaced.with_plugin_settings(declared).plugin("mine") == {"limit": 2}


def test_core_settings_are_declared_once():
    keys = [s.key for s in SETTINGS]
    assert len(keys) == len(set(keys))


def test_bad_value_stops_the_cli(capsys, monkeypatch):
    from narad.cli import main

    monkeypatch.setenv("NARAD_SERVER_MAX_CONNECTIONS", "lots")
    assert main(["config"]) == 2
    assert "`server.max_connections`" in capsys.readouterr().err


def test_config_command_shows_plugin_settings(capsys, monkeypatch):
    from narad.cli import main

    monkeypatch.setenv("NARAD_PLUGINS_REDIS_RETRY_ATTEMPTS", "5")
    assert main(["config"]) == 0
    shown = capsys.readouterr().out
    assert "retry_attempts = 5  # backoff waits of one storage call" in shown
    assert "[plugins.redis]\nretry_attempts = 5" in shown
    assert '[server]\nbind = "127.0.0.1:7942"' in shown
    document = tomllib.loads(shown)  # the output is TOML
    assert document["plugins"]["redis"]["socket_timeout_ms"] == 15000


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("redis://:s3cret@db:6379/0", "redis://:***@db:6379/0"),
        ("rediss://narad:s3cret@a:1,b:2/0", "rediss://narad:***@a:1,b:2/0"),
        (
            "redis://db:6379/0?password=s3cret&db=1",
            "redis://db:6379/0?password=***&db=1",
        ),
        ("redis://db:6379/0", "redis://db:6379/0"),
    ],
)
def test_config_command_hides_a_storage_password(capsys, monkeypatch, url, shown):
    from narad.cli import main

    monkeypatch.setenv("NARAD_STORAGE_URL", url)
    assert main(["config"]) == 0
    out = capsys.readouterr().out
    assert "s3cret" not in out
    assert f'url = "{shown}"' in out


def test_forwarded_allow_ips_trust_no_one_by_default_and_parse_networks():
    assert resolved().get("server.forwarded_allow_ips") == ()
    env = {"NARAD_SERVER_FORWARDED_ALLOW_IPS": "10.0.0.5, 10.1.0.0/16,::1"}
    assert resolved(env=env).get("server.forwarded_allow_ips") == (
        "10.0.0.5",
        "10.1.0.0/16",
        "::1",
    )
    assert resolved(env={"NARAD_SERVER_FORWARDED_ALLOW_IPS": "*"}).get(
        "server.forwarded_allow_ips"
    ) == ("*",)
    for bad in ("proxy.example", "10.0.0.1/8", "10.0.0.300"):
        with pytest.raises(InvalidConfiguration, match="forwarded_allow_ips"):
            resolved(env={"NARAD_SERVER_FORWARDED_ALLOW_IPS": bad})


def test_gunicorn_trusts_the_forwarded_allow_ips_only():
    from narad.serve.server import gunicorn_settings

    assert gunicorn_settings(resolved())["forwarded_allow_ips"] == ""
    env = {"NARAD_SERVER_FORWARDED_ALLOW_IPS": "10.0.0.5,10.1.0.0/16"}
    settings = gunicorn_settings(resolved(env=env))
    assert settings["forwarded_allow_ips"] == "10.0.0.5,10.1.0.0/16"
    assert settings["certfile"] is None and settings["keyfile"] is None


def test_tls_settings_come_from_the_environment():
    env = {
        "NARAD_SERVER_TLS_CERT": "/etc/narad/tls/cert.pem",
        "NARAD_SERVER_TLS_KEY": "/etc/narad/tls/key.pem",
        "NARAD_SERVER_TLS_CLIENT_CA": "/etc/narad/tls/clients.pem",
    }
    config = resolved(env=env)
    assert config.get("server.tls_cert") == "/etc/narad/tls/cert.pem"
    assert config.get("server.tls_key") == "/etc/narad/tls/key.pem"
    assert config.get("server.tls_client_ca") == "/etc/narad/tls/clients.pem"
    assert resolved().get("server.tls_cert") == ""
