"""The example third-party distribution, installed the way a user would.

The rule's behaviour is tested by the distribution's own tests
(``plugins/narad-example/tests``, run by ``scripts/test``); these check the
host's side: discovery through the entry point, and nothing without it.
"""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from narad.plugins import Plugins
from narad.plugins import get_plugin_manager
from tests.compatcheck import check_texts

SOURCE = Path(__file__).parents[3] / "plugins" / "narad-example"
OLD = '{"properties":{"weight":{"type":"number","x-unit":"kg"}}}'


@pytest.fixture(scope="module", name="installed")
def fixture_installed(tmp_path_factory) -> Path:
    work = tmp_path_factory.mktemp("narad-example")
    # Built from a copy, without any earlier build's leftovers, keeping new
    # ones out of the tree.
    leftovers = shutil.ignore_patterns("build", "*.egg-info", "__pycache__")
    shutil.copytree(SOURCE, work / "src", ignore=leftovers)
    target = work / "site"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "-q",
            "--no-deps",
            "--target",
            str(target),
            str(work / "src"),
        ],
        check=True,
    )
    return target


@pytest.fixture(name="rules")
def fixture_rules(installed, monkeypatch):
    monkeypatch.syspath_prepend(str(installed))
    yield Plugins(get_plugin_manager()).compatibility_rules()
    sys.modules.pop("narad_example", None)


def test_not_importable_unless_installed():
    assert importlib.util.find_spec("narad_example") is None


def test_installed_plugin_is_found_through_its_entry_point(rules):
    assert rules["x-unit"].__module__ == "narad_example"


def test_its_rule_runs_in_a_check_once_installed(rules):
    [problem] = check_texts(OLD, OLD.replace('"kg"', '"lb"'), rules)
    assert (problem.kind, problem.keyword) == ("unit_changed", "x-unit")


def test_without_the_plugin_x_unit_is_an_annotation():
    assert check_texts(OLD, OLD.replace('"kg"', '"lb"')) == []
    assert check_texts(OLD, OLD.replace(',"x-unit":"kg"', "")) == []
