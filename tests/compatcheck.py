"""Run the compatibility check on schema texts, with the built-in plugins."""

from __future__ import annotations

from typing import Any

from narad.compatibility import Violation
from narad.jsontext import loads
from narad.plugins import Plugins
from narad.plugins import get_plugin_manager
from narad.schema.compatibility.engine import check
from narad.schema.drafts import Draft

PLUGINS = Plugins(get_plugin_manager(load_entry_points=False))
DRAFTS, DEFAULT = PLUGINS.drafts()
RULES = PLUGINS.compatibility_rules()


def parse(text: str) -> Any:
    return loads(text.encode(), max_depth=64)


def draft_of(document: Any) -> Draft:
    if isinstance(document, dict) and "$schema" in document:
        return DRAFTS[document["$schema"]]
    return DEFAULT


def check_texts(
    old: str, new: str, rules: dict[str, Any] | None = None, *, first: bool = False
) -> list[Violation]:
    old_doc, new_doc = parse(old), parse(new)
    return check(
        old_doc,
        new_doc,
        old_draft=draft_of(old_doc),
        new_draft=draft_of(new_doc),
        rules=RULES if rules is None else rules,
        first=first,
    )
