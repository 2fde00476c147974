"""An example third-party Narad plugin: the ``x-unit`` keyword must not change.

``x-unit`` names the unit of a number. A consumer reading ``{"type":
"number", "x-unit": "kg"}`` interprets ``5`` as five kilograms, so every
change to the keyword, adding or removing it included, is refused: a message
valid under both versions would mean something else. No JSON Schema draft
defines ``x-unit``, so the rule is marked as an extension to be applied
whatever the schema's draft.

It imports only :mod:`narad.compatibility`, the public API for rule plugins,
and its tests (``tests/``) use only :mod:`narad.testing`.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from narad import hookimpl
from narad.compatibility import ABSENT
from narad.compatibility import RuleContext
from narad.compatibility import Violation
from narad.compatibility import extension
from narad.compatibility import json_equal
from narad.compatibility import show

# Plugins name their own kinds of change; any string will do.
UNIT_CHANGED = "unit_changed"


@extension
def x_unit(old: Any, new: Any, ctx: RuleContext) -> Iterator[Violation]:
    """Must not change; adding or removing it is a change too."""
    if old is not ABSENT and new is not ABSENT and json_equal(old, new):
        return
    if old is ABSENT:
        message = f"x-unit {show(new)} added"
    elif new is ABSENT:
        message = f"x-unit {show(old)} removed"
    else:
        message = f"x-unit changed from {show(old)} to {show(new)}"
    yield Violation(UNIT_CHANGED, message)


@hookimpl
def narad_compatibility_rules() -> dict[str, Any]:
    return {"x-unit": x_unit}
