"""The walk both payload validators compile a parsed Avro type tree with.

Each validator builds one function per type (a check of a JSON value, a
skip over a binary datum); the walk is theirs in common: a named type is
built once and shared wherever it is referenced, and a record registers its
own forward reference in :attr:`TypeCompiler.named` before its fields are
built, so that a recursive record ends.
"""

from __future__ import annotations

from abc import ABC
from abc import abstractmethod
from typing import Generic
from typing import TypeVar

from narad_avro.model import Array
from narad_avro.model import AvroType
from narad_avro.model import Enum
from narad_avro.model import Fixed
from narad_avro.model import Map
from narad_avro.model import Primitive
from narad_avro.model import Record
from narad_avro.model import Union

F = TypeVar("F")


class TypeCompiler(ABC, Generic[F]):
    """Builds a validator's function for each type of a tree."""

    def __init__(self) -> None:
        self.named: dict[int, F] = {}

    def build(self, t: AvroType) -> F:
        if isinstance(t, Primitive):
            return self.primitive(t)
        if isinstance(t, Record | Enum | Fixed):
            done = self.named.get(id(t))
            if done is not None:
                return done
            if isinstance(t, Record):
                return self.record(t)
            built = self.enum(t) if isinstance(t, Enum) else self.fixed(t)
            self.named[id(t)] = built
            return built
        if isinstance(t, Array):
            return self.array(t)
        if isinstance(t, Map):
            return self.map(t)
        return self.union(t)

    @abstractmethod
    def primitive(self, t: Primitive) -> F: ...

    @abstractmethod
    def record(self, t: Record) -> F:
        """Must put a forward reference in :attr:`named` before building
        its fields (a record may contain itself)."""

    @abstractmethod
    def enum(self, t: Enum) -> F: ...

    @abstractmethod
    def fixed(self, t: Fixed) -> F: ...

    @abstractmethod
    def array(self, t: Array) -> F: ...

    @abstractmethod
    def map(self, t: Map) -> F: ...

    @abstractmethod
    def union(self, t: Union) -> F: ...
