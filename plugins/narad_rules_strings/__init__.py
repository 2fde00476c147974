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
from narad.compatibility import ABSENT
from narad.compatibility import Change
from narad.compatibility import RuleContext
from narad.compatibility import Violation
from narad.compatibility import json_equal
from narad.compatibility import show


def pattern(old: Any, new: Any, ctx: RuleContext) -> Iterator[Violation]:
    """Keep identical or drop."""
    yield from _identical_or_dropped(
        old, new, ctx, Change.pattern_added, Change.pattern_changed
    )


def format_(old: Any, new: Any, ctx: RuleContext) -> Iterator[Violation]:
    """Keep identical or drop."""
    yield from _identical_or_dropped(
        old, new, ctx, Change.format_added, Change.format_changed
    )


def _identical_or_dropped(
    old: Any, new: Any, ctx: RuleContext, added: Change, changed: Change
) -> Iterator[Violation]:
    if new is ABSENT or (old is not ABSENT and json_equal(old, new)):
        return
    if old is ABSENT:
        yield Violation(added, f"{ctx.keyword} {show(new)} added")
    else:
        message = f"{ctx.keyword} changed from {show(old)} to {show(new)}"
        yield Violation(changed, message)


@hookimpl
def narad_compatibility_rules() -> dict[str, Any]:
    return {"pattern": pattern, "format": format_}
