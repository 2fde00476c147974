"""Compatibility modes: which stored versions a schema change is checked
against, and in which direction.

Shared by every schema type (the service stores and applies a topic's mode;
a type's :meth:`~narad.schematypes.SchemaType.check` answers in a
:class:`Report`). The rulebook's check (every message the previous version
accepted stays valid) is one direction, *backward*: the proposed schema reads
what the stored version wrote. The modes are composed from it, above the
rules, the way karapace composes them (Confluent Schema Registry and Apicurio
name them the same way):

========================  ==========================  =====================
mode                      direction(s)                against
========================  ==========================  =====================
``BACKWARD`` (default)    backward                    the latest version
``BACKWARD_TRANSITIVE``   backward                    every stored version
``FORWARD``               forward                     the latest version
``FORWARD_TRANSITIVE``    forward                     every stored version
``FULL``                  backward, then forward      the latest version
``FULL_TRANSITIVE``       backward, then forward      every stored version
``NONE``                  none: any registrable       nothing
                          schema is accepted
========================  ==========================  =====================

How JSON Schema runs a forward check, through the same engine with the
sides swapped, is :mod:`narad.schema.compatibility.versions`.

Transitive modes walk the history from the latest version down; a check that
needs only a verdict (a PATCH) stops at the first violation, a report (the dry
run) collects every violation of each version it checks, up to a bound on what
one report may hold.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from enum import unique

from narad.compatibility import Violation

__all__ = (
    "DEFAULT",
    "MAX_REPORTED",
    "MAX_REPORT_BYTES",
    "Direction",
    "Finding",
    "Mode",
    "Report",
)

#: The most violations one report lists, and the most bytes their pointers
#: and messages may take together (one is always listed): past either, the
#: report is cut and says so, and no further version is checked.
MAX_REPORTED = 100
MAX_REPORT_BYTES = 64 * 1024


@unique
class Direction(StrEnum):
    """Which way a stored version and the proposed schema are compared."""

    BACKWARD = "backward"
    """Every message the stored version accepts, the proposed one accepts
    (the rulebook's check): consumers on the new schema read old messages."""

    FORWARD = "forward"
    """Every message the proposed version accepts, the stored one accepts:
    consumers still on the stored schema read new messages."""


@unique
class Mode(StrEnum):
    """A topic's compatibility mode (see the module's table)."""

    BACKWARD = "BACKWARD"
    BACKWARD_TRANSITIVE = "BACKWARD_TRANSITIVE"
    FORWARD = "FORWARD"
    FORWARD_TRANSITIVE = "FORWARD_TRANSITIVE"
    FULL = "FULL"
    FULL_TRANSITIVE = "FULL_TRANSITIVE"
    NONE = "NONE"

    @property
    def directions(self) -> tuple[Direction, ...]:
        """The directions checked, in the order they are checked."""
        base = self.value.removesuffix("_TRANSITIVE")
        if base == "NONE":
            return ()
        if base == "FULL":
            return (Direction.BACKWARD, Direction.FORWARD)
        return (Direction(base.lower()),)

    @property
    def transitive(self) -> bool:
        """Whether a change is checked against every stored version."""
        return self.value.endswith("_TRANSITIVE")


#: The mode of a topic that names none: the rulebook's check.
DEFAULT = Mode.BACKWARD


@dataclass(frozen=True)
class Finding:
    """A violation found against one stored version, in one direction.

    Attributes:
        violation: What the engine reported; its ``pointer`` points into the
            proposed schema (backward) or into version ``version`` (forward).
        version: The stored version it was found against.
        direction: The direction of the check that found it.
        swapped: A forward finding reads as the JSON type's do: its pointer
            points into version ``version`` and its words describe the change
            from the new schema to that version. False for types whose
            forward findings point into the new schema and name both sides
            themselves (Avro, Protobuf).
    """

    violation: Violation
    version: int
    direction: Direction
    swapped: bool = True

    def __str__(self) -> str:
        # Backward keeps the rulebook's wording; forward says which way the
        # engine's words read, and where its pointer points.
        v = self.version
        if self.direction is Direction.BACKWARD:
            return f"incompatible with version {v}: {self.violation}"
        if not self.swapped:
            return f"incompatible with version {v} forward: {self.violation}"
        return (
            f"incompatible with version {v} forward (version {v} must accept "
            f"every message the new schema accepts; read as a change from the "
            f"new schema to version {v}, at places in version {v}): "
            f"{self.violation}"
        )


@dataclass(frozen=True)
class Report:
    """What a check found.

    Attributes:
        findings: The violations, version by version (latest first), each
            version's backward ones before its forward ones.
        checked: The versions checked, in the order checked.
        truncated: The report was cut at :data:`MAX_REPORTED` violations or
            :data:`MAX_REPORT_BYTES` bytes: more may exist, in the last version
            checked or in versions not checked.
    """

    findings: tuple[Finding, ...] = ()
    checked: tuple[int, ...] = ()
    truncated: bool = False

    @property
    def compatible(self) -> bool:
        """Whether the check found nothing (a cut report never is)."""
        return not self.findings
