"""An example third-party Narad plugin: the ``x-unit`` keyword must not change.

``x-unit`` names the unit of a number. A consumer reading ``{"type":
"number", "x-unit": "kg"}`` interprets ``5`` as five kilograms, so every
change to the keyword, adding or removing it included, is refused: a message
valid under both versions would mean something else. No JSON Schema draft
defines ``x-unit``, so the rule is marked as an extension to be applied
whatever the schema's draft.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from narad import hookimpl
from narad.schema.compatibility import ABSENT
from narad.schema.compatibility import Change
from narad.schema.compatibility import Incompatibility
from narad.schema.compatibility import RuleContext
from narad.schema.compatibility import extension
from narad.schema.compatibility import show
from narad.schema.jsontext import json_equal


@extension
def x_unit(old: Any, new: Any, ctx: RuleContext) -> Iterator[Incompatibility]:
    """Must not change; adding or removing it is a change too."""
    if old is not ABSENT and new is not ABSENT and json_equal(old, new):
        return
    if old is ABSENT:
        message = f"x-unit {show(new)} added"
    elif new is ABSENT:
        message = f"x-unit {show(old)} removed"
    else:
        message = f"x-unit changed from {show(old)} to {show(new)}"
    yield Incompatibility(Change.keyword_changed, message)


@hookimpl
def narad_compatibility_rules() -> dict[str, Any]:
    return {"x-unit": x_unit}
