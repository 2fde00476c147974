"""The plugin host: built-ins, entry points, conflicts and broken plugins."""

from __future__ import annotations

import configparser
from importlib.metadata import EntryPoint
from pathlib import Path

import pytest

from narad import plugins as host
from narad.errors import PluginConflict
from narad.errors import PluginError
from narad.plugins import DEFAULT_PLUGINS
from narad.plugins import Plugins
from narad.plugins import get_plugin_manager
from tests.plugins import conflicting_formats
from tests.plugins import failing_hook
from tests.plugins import unknown_hook

ROOT = Path(__file__).resolve().parents[2]


def builtins_only() -> Plugins:
    return Plugins(get_plugin_manager(load_entry_points=False))


def test_every_builtin_is_registered_and_declared_as_an_entry_point():
    pm = get_plugin_manager(load_entry_points=False)
    assert all(pm.has_plugin(name) for name in DEFAULT_PLUGINS)
    setup = configparser.ConfigParser()
    setup.read(ROOT / "setup.cfg")
    declared = {
        line.split("=")[0].strip()
        for line in setup["options.entry_points"]["narad"].strip().splitlines()
    }
    assert declared == set(DEFAULT_PLUGINS)


def test_builtins_provide_drafts_formats_rules_and_storage():
    plugins = builtins_only()
    by_uri, default = plugins.drafts()
    assert default.name == "2020-12"
    assert "https://json-schema.org/draft/2020-12/schema" in by_uri
    assert "date-time" in plugins.format_checkers()
    assert "type" in plugins.compatibility_rules()
    assert {"redis", "rediss", "unix"} == set(plugins.storage_backends())


def test_two_plugins_claiming_one_key_are_refused_naming_both():
    pm = get_plugin_manager(load_entry_points=False)
    pm.register(conflicting_formats, name="conflicting_formats")
    with pytest.raises(PluginConflict) as info:
        Plugins(pm).format_checkers()
    message = str(info.value)
    assert "'narad_formats'" in message
    assert "'conflicting_formats'" in message
    assert "'email'" in message


def test_a_hook_that_raises_names_its_plugin():
    pm = get_plugin_manager(load_entry_points=False)
    pm.register(failing_hook, name="failing_hook")
    with pytest.raises(
        PluginError, match="plugin 'failing_hook' failed in narad_format_checkers"
    ):
        Plugins(pm).format_checkers()


def test_an_entry_point_that_cannot_load_names_itself(monkeypatch):
    broken = EntryPoint(name="broken", value="narad_no_such_module", group="narad")
    monkeypatch.setattr(host, "entry_points", lambda group: [broken])
    with pytest.raises(PluginError) as info:
        get_plugin_manager()
    assert "entry point 'broken' (narad_no_such_module)" in str(info.value)
    assert "failed to load" in str(info.value)


def test_a_plugin_with_an_unknown_hook_is_refused(monkeypatch):
    ep = EntryPoint(
        name="unknown_hook", value="tests.plugins.unknown_hook", group="narad"
    )
    monkeypatch.setattr(host, "entry_points", lambda group: [ep])
    with pytest.raises(PluginError, match="unknown_hook"):
        get_plugin_manager()
    assert unknown_hook.narad_no_such_hook() == {}


def test_disabled_plugins_are_not_loaded():
    pm = get_plugin_manager(disabled=["narad_fakeredis"], load_entry_points=False)
    assert not pm.has_plugin("narad_fakeredis")
    assert "fakeredis" not in Plugins(pm).storage_backends()


def test_every_hookspec_is_documented_and_implemented_by_a_builtin():
    from narad import hookspecs

    pm = get_plugin_manager(load_entry_points=False)
    specs = [name for name in dir(hookspecs) if name.startswith("narad_")]
    assert specs
    for name in specs:
        assert (getattr(hookspecs, name).__doc__ or "").strip(), name
        assert getattr(pm.hook, name).get_hookimpls(), name


def test_every_lua_script_is_used_and_documents_its_keys_and_args():
    scripts = ROOT / "plugins" / "narad_redis" / "scripts"
    storage = (ROOT / "plugins" / "narad_redis" / "storage.py").read_text()
    names = sorted(p.stem for p in scripts.glob("*.lua"))
    assert names
    for name in names:
        header = (scripts / f"{name}.lua").read_text().split("\n\n")[0]
        assert "-- KEYS[1]" in header, name
        assert "-- ARGV[1]" in header, name
        assert "-- returns" in header, name
        assert f'"{name}"' in storage, f"{name}.lua is never run"
