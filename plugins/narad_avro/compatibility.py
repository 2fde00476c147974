"""Compatibility modes over Avro's resolution rules.

The modes are Narad's (:class:`narad.schematypes.Mode`, Confluent's and
Apicurio's names), composed from :func:`~narad_avro.resolution.read_violations`:

- ``BACKWARD``: the new schema reads what the latest version wrote (reader
  new, writer old); ``FORWARD``: the latest version reads what the new one
  writes; ``FULL``: both;
- ``*_TRANSITIVE``: the same against every version given, latest first;
- ``NONE``: nothing is checked.

Every violation is reported with the version it breaks and the direction;
pointers always point into the new schema.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from narad.schematypes import Direction
from narad.schematypes import Mode
from narad_avro.parsing import AvroSchema
from narad_avro.resolution import Violation
from narad_avro.resolution import read_violations

__all__ = ("Direction", "Finding", "Mode", "check", "violations")


@dataclass(frozen=True)
class Finding:
    """A violation found against one stored version, in one direction.

    Attributes:
        violation: What broke, at a pointer into the new schema.
        against_version: The stored version it breaks.
        direction: Backward (the new schema reads the version's data) or
            forward (the version reads the new schema's data).
    """

    violation: Violation
    against_version: int
    direction: Direction

    @property
    def pointer(self) -> str:
        return self.violation.pointer

    @property
    def rule(self) -> str:
        return self.violation.rule

    @property
    def message(self) -> str:
        return self.violation.message

    def __str__(self) -> str:
        way = "" if self.direction is Direction.BACKWARD else " forward"
        return (
            f"incompatible with version {self.against_version}{way}: {self.violation}"
        )


def violations(
    new: AvroSchema, old: AvroSchema, direction: Direction
) -> list[Violation]:
    """Every violation of ``new`` against ``old`` in one direction."""
    if direction is Direction.BACKWARD:
        return read_violations(new, old, new_is_reader=True)
    return read_violations(old, new, new_is_reader=False)


def check(
    new: AvroSchema,
    against: Iterable[tuple[int, AvroSchema]],
    mode: Mode | str,
    *,
    first: bool = False,
) -> list[Finding]:
    """Check ``new`` under ``mode`` against stored versions.

    Args:
        new: The proposed schema.
        against: ``(version, schema)`` of the stored versions, latest first;
            a non-transitive mode reads only the first. An iterator is read
            only as far as the check goes.
        mode: A :class:`Mode` or its name.
        first: Stop at the first violation (a verdict); else report all.

    Returns:
        Every finding, version by version (latest first), each version's
        backward findings before its forward ones. Empty means compatible.
    """
    mode = Mode(mode)
    directions = mode.directions
    if not directions:
        return []
    found: list[Finding] = []
    for version, old in against:
        for direction in directions:
            for violation in violations(new, old, direction):
                found.append(Finding(violation, version, direction))
                if first:
                    return found
        if not mode.transitive:
            break
    return found
