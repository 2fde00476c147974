"""Compatibility rules for string shape: pattern and format.

Row of the rulebook's keyword table:

- ``pattern``, ``format``: keep identical or drop.

Two patterns are not compared for the strings they match (that is undecidable
in general, and costly where it is not), so any other change is refused.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from narad import hookimpl
from narad.schema.compatibility import ABSENT
from narad.schema.compatibility import Change
from narad.schema.compatibility import Incompatibility
from narad.schema.compatibility import RuleContext
from narad.schema.compatibility import show
from narad.schema.jsontext import json_equal


def pattern(old: Any, new: Any, ctx: RuleContext) -> Iterator[Incompatibility]:
    """Keep identical or drop."""
    yield from _identical_or_dropped(
        old, new, ctx, Change.pattern_added, Change.pattern_changed
    )


def format_(old: Any, new: Any, ctx: RuleContext) -> Iterator[Incompatibility]:
    """Keep identical or drop."""
    yield from _identical_or_dropped(
        old, new, ctx, Change.format_added, Change.format_changed
    )


def _identical_or_dropped(
    old: Any, new: Any, ctx: RuleContext, added: Change, changed: Change
) -> Iterator[Incompatibility]:
    if new is ABSENT or (old is not ABSENT and json_equal(old, new)):
        return
    if old is ABSENT:
        yield Incompatibility(added, f"{ctx.keyword} {show(new)} added")
    else:
        message = f"{ctx.keyword} changed from {show(old)} to {show(new)}"
        yield Incompatibility(changed, message)


@hookimpl
def narad_compatibility_rules() -> dict[str, Any]:
    return {"pattern": pattern, "format": format_}
