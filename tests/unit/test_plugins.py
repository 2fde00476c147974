"""The plugin host: built-ins, entry points, checks, conflicts, visibility."""

from __future__ import annotations

import configparser
import json
import logging
import re
from importlib.metadata import EntryPoint
from pathlib import Path

import pytest

from narad import hookimpl
from narad import hookspecs
from narad import plugins as host
from narad import testing
from narad.errors import PluginConflict
from narad.errors import PluginError
from narad.plugins import DEFAULT_PLUGINS
from narad.plugins import Plugins
from narad.plugins import get_plugin_manager
from narad.plugins import load_plugins
from tests.plugins import acme
from tests.plugins import conflicting_formats
from tests.plugins import failing_hook
from tests.plugins import malformed
from tests.plugins import unknown_hook

ROOT = Path(__file__).resolve().parents[2]
HOOKS = sorted(name for name in dir(hookspecs) if name.startswith("narad_"))


def builtins_only() -> Plugins:
    return Plugins(get_plugin_manager(load_entry_points=False))


def entry_point_names() -> set[str]:
    setup = configparser.ConfigParser()
    setup.read(ROOT / "setup.cfg")
    return {
        line.split("=")[0].strip()
        for line in setup["options.entry_points"]["narad"].strip().splitlines()
    }


# -- meta-tests ----------------------------------------------------------------


def test_every_hookspec_is_documented_implemented_by_a_builtin_and_tested():
    pm = get_plugin_manager(load_entry_points=False)
    readme = (ROOT / "README.md").read_text()
    tests = "\n".join(p.read_text() for p in (ROOT / "tests").rglob("test_*.py"))
    assert HOOKS
    for name in HOOKS:
        assert (getattr(hookspecs, name).__doc__ or "").strip(), name
        assert f"`{name}`" in readme, f"{name} is not in the README"
        assert getattr(pm.hook, name).get_hookimpls(), f"no built-in implements {name}"
        assert f"def test_hook_{name}(" in tests, f"{name} has no test_hook_{name}"


def test_every_builtin_is_registered_and_declared_as_an_entry_point():
    pm = get_plugin_manager(load_entry_points=False)
    assert all(pm.has_plugin(name) for name in DEFAULT_PLUGINS)
    assert entry_point_names() == set(DEFAULT_PLUGINS)


def test_the_fakeredis_backend_is_for_tests_only():
    assert "narad_fakeredis" not in entry_point_names()
    assert "fakeredis" not in builtins_only().storage_backends()
    assert "fakeredis" in testing.load_plugins().storage_backends()


def test_every_lua_script_is_used_and_documents_its_keys_and_args():
    scripts = ROOT / "plugins" / "narad_redis" / "scripts"
    # The cluster storage (sharded.py) runs the scripts of its global steps.
    storage = "".join(
        (ROOT / "plugins" / "narad_redis" / module).read_text()
        for module in ("storage.py", "sharded.py")
    )
    names = sorted(p.stem for p in scripts.glob("*.lua"))
    assert names
    for name in names:
        header = (scripts / f"{name}.lua").read_text().split("\n\n")[0]
        assert "-- KEYS[1]" in header, name
        assert "-- ARGV[1]" in header, name
        assert "-- returns" in header, name
        assert f'"{name}"' in storage, f"{name}.lua is never run"


# -- loading and merging -------------------------------------------------------


def test_builtins_provide_drafts_formats_rules_storage_and_settings():
    plugins = builtins_only()
    by_uri, default = plugins.drafts()
    assert default.name == "2020-12"
    assert "https://json-schema.org/draft/2020-12/schema" in by_uri
    assert "date-time" in plugins.format_checkers()
    assert "type" in plugins.compatibility_rules()
    schemes = {"redis", "rediss", "unix", "redis+cluster", "rediss+cluster"}
    assert schemes == set(plugins.storage_backends())
    assert [s.name for s in plugins.settings()["redis"]][:1] == ["retry_attempts"]


def test_two_plugins_claiming_one_key_are_refused_naming_both():
    pm = get_plugin_manager(load_entry_points=False)
    pm.register(conflicting_formats, name="conflicting_formats")
    with pytest.raises(PluginConflict) as info:
        Plugins(pm).format_checkers()
    message = str(info.value)
    assert "'narad_formats'" in message
    assert "'conflicting_formats'" in message
    assert "'email'" in message


def test_two_plugins_claiming_one_settings_section_are_refused():
    class Imitator:
        @hookimpl
        def narad_settings(self):
            return {"acme": []}

    with pytest.raises(PluginConflict, match="the settings section 'acme'"):
        load_plugins(
            load_entry_points=False, extra={"acme": acme, "imitator": Imitator()}
        )


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
    pm = get_plugin_manager(disabled=["narad_redis"], load_entry_points=False)
    assert not pm.has_plugin("narad_redis")
    plugins = Plugins(pm)
    assert plugins.storage_backends() == {}
    assert "redis" not in plugins.settings()


def test_a_disabled_name_that_is_no_plugin_is_warned_of(caplog):
    # A misspelt name leaves the plugin meant running: the log says so.
    with caplog.at_level(logging.WARNING, logger="narad.plugins"):
        pm = get_plugin_manager(
            disabled=["narad_redis", "narad_rediss"], load_entry_points=False
        )
    assert not pm.has_plugin("narad_redis")
    warned = [r.getMessage() for r in caplog.records]
    assert warned == [
        "plugins.disabled names 'narad_rediss', which is no plugin here: it "
        "disables nothing"
    ]


# -- start-up checks -----------------------------------------------------------


@pytest.mark.parametrize(
    ("plugin", "words"),
    [
        (
            malformed.UnmarkedRule(),
            "'x-never-runs', a keyword no installed draft defines",
        ),
        (malformed.NotCallableFormat(), "the format checker for 'acme-odd' is not"),
        (malformed.DraftOfStrings(), "malformed draft record"),
        (malformed.MappingForDrafts(), "must return a list of Draft records"),
        (malformed.ListForFormats(), "must return a mapping keyed by strings"),
        (malformed.BadDefault(), "`plugins.acme.limit`: its default 0 does not"),
        (malformed.BadSection(), "settings section 'disabled' must be"),
        (malformed.NotASetting(), "is not a narad.config.Setting"),
    ],
)
def test_a_malformed_answer_stops_start_up_naming_the_plugin(plugin, words):
    with pytest.raises(PluginError) as info:
        load_plugins(load_entry_points=False, extra={"culprit": plugin})
    assert "plugin 'culprit'" in str(info.value)
    assert words in str(info.value)


def test_an_unmarked_rule_only_warns_while_a_plugin_is_disabled(caplog):
    # Its keyword may be a disabled draft's: disabling draft-04 leaves the
    # built-in rule for its "id" without a draft.
    plugins = load_plugins(
        load_entry_points=False,
        extra={"culprit": malformed.UnmarkedRule()},
        config=testing.make_config(plugins__disabled=("narad_draft4",)),
    )
    assert "x-never-runs" in plugins.compatibility_rules()
    assert "'x-never-runs', a keyword no installed draft defines" in caplog.text
    assert "disabled plugins: ['narad_draft4']" in caplog.text


def test_a_rule_for_its_own_keyword_is_accepted_when_marked_as_an_extension():
    plugins = load_plugins(load_entry_points=False, extra={"acme": acme})
    assert "x-acme-frozen" in plugins.compatibility_rules()


# -- visibility ----------------------------------------------------------------


def test_hooks_are_called_through_pluggy_with_keyword_arguments():
    pm = get_plugin_manager(load_entry_points=False)
    calls = []
    pm.add_hookcall_monitoring(
        lambda hook, impls, kwargs: calls.append(
            (hook, [i.plugin_name for i in impls], dict(kwargs))
        ),
        lambda outcome, hook, impls, kwargs: None,
    )
    Plugins(pm).storage_backends()
    assert calls == [("narad_storage_backends", ["narad_redis"], {})]


def test_trace_writes_every_hook_call(monkeypatch, capsys):
    monkeypatch.setenv(host.TRACE_ENV, "1")
    Plugins(get_plugin_manager(load_entry_points=False)).storage_backends()
    err = capsys.readouterr().err
    assert "narad: hook narad_storage_backends() -> narad_redis" in err
    assert "narad: hook narad_storage_backends returned [{" in err


def test_describe_lists_each_plugin_its_distribution_and_claims():
    infos = {i.name: i for i in testing.load_plugins({"acme": acme}).describe()}
    redis = infos["narad_redis"]
    schemes = ("redis", "rediss", "unix", "redis+cluster", "rediss+cluster")
    assert (redis.distribution, redis.schemes) == ("narad", schemes)
    assert "plugins.redis.retry_attempts" in redis.settings
    assert redis.hooks == ("narad_settings", "narad_storage_backends")
    assert infos["narad_draft7"].drafts == ("07",)
    assert "date-time" in infos["narad_formats"].formats
    assert "pattern" in infos["narad_rules_strings"].keywords
    assert infos["narad_fakeredis"].schemes == ("fakeredis",)
    line = infos["acme"].describe()
    assert line.startswith("acme (not installed): drafts acme; formats acme-even;")
    assert "rule keywords x-acme-frozen; storage schemes memory;" in line
    assert line.endswith("settings [plugins.acme] greeting, limit")


def test_plugins_command_lists_the_loaded_plugins(capsys):
    from narad.cli import main

    assert main(["plugins"]) == 0
    lines = capsys.readouterr().out.splitlines()
    redis = next(line for line in lines if line.startswith("narad_redis "))
    assert re.fullmatch(
        r"narad_redis \(narad [\w.]+\): storage schemes redis, rediss, unix, "
        r"redis\+cluster, rediss\+cluster; "
        r"settings \[plugins\.redis\] retry_attempts, .*",
        redis,
    )
    assert {line.split()[0] for line in lines} >= set(DEFAULT_PLUGINS)


def test_plugins_command_as_json(capsys, monkeypatch):
    from narad.cli import main

    monkeypatch.setenv("NARAD_PLUGINS_DISABLED", "narad_draft4")
    assert main(["plugins", "--json"]) == 0
    listed = {p["name"]: p for p in json.loads(capsys.readouterr().out)["plugins"]}
    assert "narad_draft4" not in listed
    assert listed["narad_draft6"]["drafts"] == ["06"]
    assert listed["narad_redis"]["version"]
