"""Rule plugins, built-in or not, need nothing but the public API."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import narad.compatibility

PLUGINS = Path(__file__).parents[3] / "plugins"
RULE_PLUGINS = sorted(
    [*PLUGINS.glob("narad_rules_*/*.py"), *PLUGINS.glob("narad-example/*/*.py")]
)
PUBLIC = {
    "narad",
    "narad.compatibility",
    "narad.testing",
    "narad.testing.compatibility",
}


def narad_imports(path: Path) -> set[str]:
    modules = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            modules.add(node.module)
        elif isinstance(node, ast.Import):
            modules.update(alias.name for alias in node.names)
    return {m for m in modules if m == "narad" or m.startswith("narad.")}


def test_every_rule_plugin_is_checked():
    assert len(RULE_PLUGINS) >= 8


@pytest.mark.parametrize("path", RULE_PLUGINS, ids=lambda p: p.parent.name)
def test_rule_plugins_import_only_the_public_api(path):
    assert narad_imports(path) <= PUBLIC


def test_the_public_module_says_what_it_exports():
    exported = set(narad.compatibility.__all__)
    assert {
        "ABSENT",
        "Change",
        "RuleContext",
        "Violation",
        "extension",
        "identical_or_removed",
        "is_extension",
        "show",
    } <= exported
    assert all(hasattr(narad.compatibility, name) for name in exported)


def test_kinds_of_change_are_open():
    violation = narad.compatibility.Violation("my_kind", "x-k changed")
    assert violation.kind == "my_kind"
    assert narad.compatibility.Change.type_narrowed == "type_narrowed"


def test_the_extension_mark_is_readable_by_the_host():
    def rule(old, new, ctx):
        return ()

    assert not narad.compatibility.is_extension(rule)
    marked = narad.compatibility.extension(rule)
    assert marked.narad_extension is True
    assert narad.compatibility.is_extension(marked)
