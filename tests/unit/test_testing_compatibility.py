"""narad.testing.compatibility: a schema change's verdict, outside a node."""

from __future__ import annotations

import re
import sys
import types
from pathlib import Path

import pytest

from narad import hookimpl
from narad.compatibility import Change
from narad.compatibility import Violation
from narad.compatibility import extension
from narad.errors import InvalidSchema
from narad.plugins import Plugins
from narad.plugins import get_plugin_manager
from narad.testing.compatibility import check_compatibility

BUILT_INS = Plugins(get_plugin_manager(load_entry_points=False))
QTY = '{"properties":{"qty":{"type":"integer"},"note":{"type":"string"}}}'


def test_reports_every_violation_with_its_data():
    new = '{"properties":{"qty":{"type":"string"},"note":{"maxLength":3}}}'
    found = check_compatibility(QTY, new, plugins=BUILT_INS)
    assert [(v.pointer, v.keyword, v.kind) for v in found] == [
        ("/properties/qty", "type", Change.type_narrowed),
        ("/properties/note", "maxLength", Change.max_length_added),
    ]
    assert str(found[0]) == 'at /properties/qty: type "integer" no longer allowed'
    assert check_compatibility(QTY, new, plugins=BUILT_INS, first=True) == found[:1]


def test_takes_texts_bytes_or_parsed_documents():
    widened = {"properties": {"qty": {"type": "number"}, "note": {}}}
    assert check_compatibility(QTY.encode(), widened, plugins=BUILT_INS) == []


def test_an_annotation_only_change_registers_nothing():
    new = QTY.replace('"string"', '"string","description":"free text"')
    assert check_compatibility(QTY, new, plugins=BUILT_INS) == []


def test_a_document_narad_would_not_register_is_refused():
    with pytest.raises(InvalidSchema, match="names no built-in draft"):
        check_compatibility(QTY, '{"$schema":"urn:nope"}', plugins=BUILT_INS)


def test_uses_the_installed_plugins_by_default():
    assert check_compatibility(QTY, QTY.replace('"integer"', '"null"'))


class FixedKeyword:
    """A plugin object: x-fixed may not change."""

    @staticmethod
    @extension
    def fixed(old, new, ctx):
        if old != new:
            yield Violation("fixed_changed", "x-fixed changed")

    @hookimpl
    def narad_compatibility_rules(self):
        return {"x-fixed": self.fixed}


def test_takes_your_plugins_by_name():
    old, new = '{"x-fixed":1}', '{"x-fixed":2}'
    [violation] = check_compatibility(old, new, plugins={"fixed": FixedKeyword()})
    assert (violation.kind, violation.keyword) == ("fixed_changed", "x-fixed")
    assert check_compatibility(old, new, plugins=BUILT_INS) == []


# -- the README's rule-plugin examples, run as written -------------------------


def readme_python_blocks() -> list[str]:
    text = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    return re.findall(r"```python\n(.*?)```", text, re.DOTALL)


def test_the_readme_rule_plugin_examples_pass(monkeypatch):
    blocks = readme_python_blocks()
    [rules_src] = [b for b in blocks if b.startswith("# my_rules/__init__.py")]
    my_rules = types.ModuleType("my_rules")
    exec(rules_src, my_rules.__dict__)
    monkeypatch.setitem(sys.modules, "my_rules", my_rules)
    tests = [b for b in blocks if "def test_dropping_sensitivity" in b]
    assert len(tests) == 2
    scope: dict = {}  # the second snippet goes on from the first
    for src in tests:
        exec(src, scope)
    ran = [test() for name, test in scope.items() if name.startswith("test_")]
    assert len(ran) == 2
