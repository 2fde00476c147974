"""The example third-party distribution, installed the way a user would."""

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
    shutil.copytree(SOURCE, work / "src")  # keep build leftovers out of the tree
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


@pytest.mark.parametrize(
    ("new", "words"),
    [
        (OLD.replace('"kg"', '"lb"'), 'x-unit changed from "kg" to "lb"'),
        (OLD.replace(',"x-unit":"kg"', ""), 'x-unit "kg" removed'),
    ],
)
def test_a_change_to_x_unit_is_refused_once_installed(rules, new, words):
    found = check_texts(OLD, new, rules)
    assert [str(p) for p in found] == [f"at /properties/weight: {words}"]


def test_adding_x_unit_is_a_change(rules):
    old = '{"properties":{"weight":{"type":"number"}}}'
    [problem] = check_texts(old, OLD, rules)
    assert problem.message == 'x-unit "kg" added'


def test_x_unit_kept_lets_other_changes_through(rules):
    new = OLD.replace('"number"', '["number","null"]')
    assert check_texts(OLD, new, rules) == []


def test_without_the_plugin_x_unit_is_an_annotation():
    assert check_texts(OLD, OLD.replace('"kg"', '"lb"')) == []
    assert check_texts(OLD, OLD.replace(',"x-unit":"kg"', "")) == []
