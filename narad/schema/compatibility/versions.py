"""JSON Schema's compatibility modes: the engine run against stored versions.

:func:`check` composes :func:`narad.schema.compatibility.engine.check` (the
rulebook's one direction, *backward*) into a topic's mode
(:class:`~narad.schema.modes.Mode`): each stored version in turn, in each of
the mode's directions, into one :class:`~narad.schema.modes.Report`.

*Forward* is the same engine and the same rules with the two sides swapped:
the proposed schema takes the place of the previous version and the stored
version the place of the proposed one, so the check asks whether every message
the proposed schema accepts is accepted by the stored version. Rules never
know which direction they run in, so a third-party rule works in every mode.
What that means, read through the swap:

- Each side keeps its own draft: the proposed schema's draft is the "old"
  draft of a forward check.
- A violation's ``pointer`` points into the schema the check reads as the
  newer one: the proposed schema in a backward check, the stored version in a
  forward one. Its message describes the change from the older-read to the
  newer-read schema, so a forward message reads as if the stored version were
  the change (``type "string" no longer allowed`` at ``/properties/qty`` of
  version 3: version 3 does not allow a string the proposed schema allows).
  A :class:`~narad.schema.modes.Finding` carries the version and the
  direction, and its text says both.
- The rulebook's one deliberate exception (an optional property added under
  an open content model is allowed) reads, forward, as: an optional property
  *removed* under an open content model is allowed, though a message the new
  version accepts with that key of another type is refused by the previous
  one. And "never remove a property" reads, forward, as "never add one",
  even under an open content model, where adding one could be safe: the check
  fails closed there, where Apicurio's forward check accepts it.
"""

from __future__ import annotations

from collections.abc import Iterable
from collections.abc import Mapping
from typing import Any

from narad.compatibility import Rule
from narad.schema.compatibility import engine
from narad.schema.drafts import Draft
from narad.schema.modes import MAX_REPORT_BYTES
from narad.schema.modes import MAX_REPORTED
from narad.schema.modes import Direction
from narad.schema.modes import Finding
from narad.schema.modes import Report

__all__ = ("check",)


def check(
    new: Any,
    new_draft: Draft,
    against: Iterable[tuple[int, Any, Draft]],
    *,
    directions: tuple[Direction, ...],
    rules: Mapping[str, Rule],
    first: bool,
) -> Report:
    """Check the proposed schema ``new`` against stored versions.

    Args:
        new: The proposed schema, parsed.
        new_draft: Its draft.
        against: ``(version, document, draft)`` of the versions to check
            against, parsed, in the order to check them (latest first); an
            iterator is consumed only as far as the check goes, so it may
            parse each one when its turn comes.
        directions: The directions to check each version in (a
            :attr:`~narad.schema.modes.Mode.directions`).
        rules: Keyword to rule, as merged from ``narad_compatibility_rules``.
        first: Stop at the first violation (a PATCH); else report every
            violation of each version checked, within the report's bounds.

    Returns:
        The report.
    """
    if not directions:
        return Report()
    findings: list[Finding] = []
    checked: list[int] = []
    size = 0
    for version, old, old_draft in against:
        checked.append(version)
        for direction in directions:
            if direction is Direction.BACKWARD:
                found = engine.check(
                    old,
                    new,
                    old_draft=old_draft,
                    new_draft=new_draft,
                    rules=rules,
                    first=first,
                )
            else:
                found = engine.check(
                    new,
                    old,
                    old_draft=new_draft,
                    new_draft=old_draft,
                    rules=rules,
                    first=first,
                )
            for violation in found:
                size += len(violation.pointer) + len(violation.message)
                if findings and (
                    len(findings) >= MAX_REPORTED or size > MAX_REPORT_BYTES
                ):
                    return Report(tuple(findings), tuple(checked), truncated=True)
                findings.append(Finding(violation, version, direction))
                if first:
                    return Report(tuple(findings), tuple(checked))
    return Report(tuple(findings), tuple(checked))
