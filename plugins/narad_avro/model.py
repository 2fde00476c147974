"""The parsed form of an Avro schema: one node per type, named types shared.

:mod:`narad_avro.parsing` builds these from a schema document; validation
(:mod:`~narad_avro.jsonvalues`, :mod:`~narad_avro.binary`) and resolution
(:mod:`~narad_avro.resolution`) read them. A named type is one node wherever
it is referenced, so a recursive record is a cycle of nodes, and walkers
memoise by node identity.

Every node keeps ``pointer``, the JSON pointer of the place in the document
that defines it (a reference by name points at the definition), so errors and
compatibility violations can say where.
"""

from __future__ import annotations

from dataclasses import dataclass
from dataclasses import field
from typing import Any

__all__ = (
    "NO_DEFAULT",
    "PRIMITIVES",
    "Array",
    "AvroType",
    "Enum",
    "Field",
    "Fixed",
    "Logical",
    "Map",
    "Named",
    "Primitive",
    "Record",
    "Union",
)

PRIMITIVES = frozenset(
    {"null", "boolean", "int", "long", "float", "double", "bytes", "string"}
)


class _NoDefault:
    """The default of a field that declares none."""

    def __repr__(self) -> str:
        return "NO_DEFAULT"


#: What :attr:`Field.default` holds when the field has no ``default``.
NO_DEFAULT: Any = _NoDefault()


@dataclass(frozen=True)
class Logical:
    """A known logical type on a primitive or fixed (unknown ones are ignored,
    as the specification asks, and leave ``logical`` ``None``)."""

    name: str
    precision: int | None = None
    scale: int | None = None


@dataclass(eq=False)
class Primitive:
    name: str
    pointer: str
    logical: Logical | None = None

    @property
    def label(self) -> str:
        return self.name


@dataclass(eq=False)
class Named:
    """What records, enums and fixeds share: a full name and aliases."""

    fullname: str
    pointer: str
    aliases: tuple[str, ...]
    doc: str | None = None

    @property
    def name(self) -> str:
        """The unqualified name (resolution compares these, as Avro does)."""
        return self.fullname.rpartition(".")[2]

    @property
    def label(self) -> str:
        return self.fullname


@dataclass(eq=False)
class Field:
    name: str
    type: AvroType
    pointer: str
    default: Any = NO_DEFAULT
    aliases: tuple[str, ...] = ()
    doc: str | None = None

    @property
    def has_default(self) -> bool:
        return self.default is not NO_DEFAULT


@dataclass(eq=False)
class Record(Named):
    fields: list[Field] = field(default_factory=list)


@dataclass(eq=False)
class Enum(Named):
    symbols: tuple[str, ...] = ()
    default: str | None = None


@dataclass(eq=False)
class Fixed(Named):
    size: int = 0
    logical: Logical | None = None


@dataclass(eq=False)
class Array:
    items: AvroType
    pointer: str

    @property
    def label(self) -> str:
        return "array"


@dataclass(eq=False)
class Map:
    values: AvroType
    pointer: str

    @property
    def label(self) -> str:
        return "map"


@dataclass(eq=False)
class Union:
    branches: list[AvroType]
    pointer: str

    @property
    def label(self) -> str:
        return "union"


AvroType = Primitive | Record | Enum | Fixed | Array | Map | Union
