"""Compatibility rules for the combinators.

Rows of the rulebook's keyword table:

- ``anyOf``: every old branch must be covered by some new branch.
- ``allOf``: every new branch must be implied by some old branch.

And from the paragraphs after it: ``oneOf``, ``not`` and ``if``/``then``/
``else`` may stay identical or be removed; "identical" follows ``$ref``, and a
difference only in annotations inside them is no change. ``then`` and ``else``
may also become ``true`` or ``{}`` ("a nested schema may always become true or
{}"): that can only widen. ``not``, ``if`` and a ``oneOf`` branch may not:
there it would refuse everything, or turn which branch applies.

Each rule needs only whether a pair of branches is compatible, and one
reason when it is not (``compare(first=True)``): a dry run's full report
spends nothing on the other violations of branches tried and refused.

Branches apply to the same instance value as the subschema holding them, so
they are compared ``in_place``: a property a branch adds is then judged against
everything the previous version said about that value, not only the branch.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from narad import hookimpl
from narad.compatibility import ABSENT
from narad.compatibility import Change
from narad.compatibility import RuleContext
from narad.compatibility import Violation
from narad.compatibility import identical_or_opened
from narad.compatibility import identical_or_removed


def any_of(old: Any, new: Any, ctx: RuleContext) -> Iterator[Violation]:
    """Every old branch must be covered by some new branch."""
    if new is ABSENT:
        return
    if old is ABSENT:
        if not any(ctx.accepts_everything(branch, "new") for branch in new):
            yield Violation(Change.keyword_added, "anyOf added")
        return
    for i, branch in enumerate(old):
        covered, why = _covered(branch, i, new, ctx)
        if not covered:
            message = f"anyOf branch {i} not covered by any new branch{why}"
            yield Violation(Change.sum_type_narrowed, message)


def _covered(branch: Any, i: int, new: list[Any], ctx: RuleContext) -> tuple[bool, str]:
    """Whether some new branch covers old branch ``i``; else why the one at
    the same index does not."""
    # The branch at the same index is the likely cover: try it first.
    same_index: list[Violation] = []
    for j in sorted(range(len(new)), key=lambda j: j != i):
        at = ctx.at("anyOf", j)
        problems = ctx.compare(branch, new[j], at, in_place=True, first=True)
        if not problems:
            return True, ""
        if j == i:
            same_index = problems
    return False, f" ({same_index[0]})" if same_index else ""


def all_of(old: Any, new: Any, ctx: RuleContext) -> Iterator[Violation]:
    """Every new branch must be implied by some old branch."""
    if new is ABSENT:
        return
    before = [] if old is ABSENT else old
    for j, branch in enumerate(new):
        if ctx.accepts_everything(branch, "new"):
            continue
        at = ctx.at("allOf", j)
        if all(ctx.compare(b, branch, at, in_place=True, first=True) for b in before):
            message = f"allOf branch {j} not implied by any previous branch"
            yield Violation(Change.product_type_extended, message)


@hookimpl
def narad_compatibility_rules() -> dict[str, Any]:
    return {
        "anyOf": any_of,
        "allOf": all_of,
        "oneOf": identical_or_removed,
        "not": identical_or_removed,
        "if": identical_or_removed,
        "then": identical_or_opened,
        "else": identical_or_opened,
    }
