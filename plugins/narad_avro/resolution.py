"""Can a reader schema read what a writer schema wrote? Avro's resolution rules.

:func:`read_violations` compares a reader and a writer the way Avro's
specification resolves them ("Schema Resolution") and Java's
``SchemaCompatibility`` checks them, and lists every way the reader fails,
each at a JSON pointer into the **new** schema of the two (the reader in a
backward check, the writer in a forward one):

- records match when their unqualified names are equal or the reader lists
  the writer's full name among its aliases (``name_mismatch`` otherwise);
  each reader field reads the writer field of its name or of one of its
  aliases, and a reader field with neither needs a default
  (``field_added_without_default`` when the reader is new,
  ``field_removed_without_default`` when the writer is); writer fields the
  reader lacks are skipped;
- enums match by name; every writer symbol must be a reader symbol unless the
  reader has a default (``enum_symbol_removed`` / ``enum_symbol_added``);
- fixeds match by name and size (``fixed_size_changed``);
- arrays and maps compare their items and values;
- primitives are equal or promoted: int to long, float or double; long to
  float or double; float to double; string to bytes and back
  (``type_changed`` otherwise, and for any two kinds that differ);
- a writer union: each of its branches must be readable (by the reader, or
  by some branch of a reader union); a reader union reads a non-union writer
  when one branch can (``union_branch_missing``). When exactly one reader
  branch is of the writer's kind (the same primitive, or a named type of the
  same name), its own violations are reported instead: more precise than
  "no branch".

Logical types, docs, field order and defaults' values are not part of
resolution (Java's checker ignores them too), so changing them alone is
compatible.

Recursive schemas terminate and cost stays polynomial: every (reader node,
writer node) pair is compared once and memoised, and a pair met again while
it is being compared counts as compatible (the usual coinductive reading of
recursive types; the pair's own violations are reported where it was first
met).
"""

from __future__ import annotations

from dataclasses import dataclass

from narad.quoting import quote
from narad_avro.model import Array
from narad_avro.model import AvroType
from narad_avro.model import Enum
from narad_avro.model import Fixed
from narad_avro.model import Map
from narad_avro.model import Named
from narad_avro.model import Primitive
from narad_avro.model import Record
from narad_avro.model import Union
from narad_avro.parsing import AvroSchema

__all__ = ("PROMOTIONS", "Violation", "read_violations")

#: Writer primitive -> reader primitives that read it.
PROMOTIONS: dict[str, frozenset[str]] = {
    "int": frozenset({"int", "long", "float", "double"}),
    "long": frozenset({"long", "float", "double"}),
    "float": frozenset({"float", "double"}),
    "string": frozenset({"string", "bytes"}),
    "bytes": frozenset({"bytes", "string"}),
}


@dataclass(frozen=True)
class Violation:
    """One way the reader fails to read what the writer wrote.

    Attributes:
        pointer: JSON pointer into the new schema of the two (``""`` is the
            root).
        rule: A short rule name (``field_added_without_default``).
        message: What is wrong, in words, naming old and new.
    """

    pointer: str
    rule: str
    message: str

    @property
    def kind(self) -> str:
        """The rule, under the name Narad's JSON Schema violations use."""
        return self.rule

    @property
    def keyword(self) -> str:
        """The rule again: Avro has no keywords; the shape wants one."""
        return self.rule

    def __str__(self) -> str:
        return f"at {self.pointer or 'the root'}: {self.message}"


def read_violations(
    reader: AvroSchema | AvroType,
    writer: AvroSchema | AvroType,
    *,
    new_is_reader: bool,
) -> list[Violation]:
    """Every violation of reading ``writer``'s data with ``reader``.

    Args:
        reader: The schema reading.
        writer: The schema that wrote.
        new_is_reader: Whether the reader is the new schema (a backward
            check) or the writer is (a forward check): pointers point into
            the new one, and messages call each side old or new.
    """
    r = reader.root if isinstance(reader, AvroSchema) else reader
    w = writer.root if isinstance(writer, AvroSchema) else writer
    found = _Resolver(new_is_reader).pair(r, w)
    unique: dict[Violation, None] = dict.fromkeys(found)
    return list(unique)


def _label(t: AvroType) -> str:
    if isinstance(t, Named):
        kind = type(t).__name__.lower()
        return f"{kind} {quote(t.fullname)}"
    return t.label


def _same_kind(r: AvroType, w: AvroType) -> bool:
    """Whether a reader branch is the one that should read ``w``."""
    if isinstance(r, Primitive) and isinstance(w, Primitive):
        return r.name == w.name
    if isinstance(r, Named) and isinstance(w, Named):
        return type(r) is type(w) and (r.name == w.name or w.fullname in r.aliases)
    return type(r) is type(w) and not isinstance(r, Union)


class _Resolver:
    def __init__(self, new_is_reader: bool) -> None:
        self.new_is_reader = new_is_reader
        self.reader_is = "the new schema" if new_is_reader else "the old schema"
        self.writer_is = "the old schema" if new_is_reader else "the new schema"
        self.memo: dict[tuple[int, int], list[Violation]] = {}
        self.active: set[tuple[int, int]] = set()

    def at(self, r: AvroType, w: AvroType, suffix: str = "") -> str:
        return (r if self.new_is_reader else w).pointer + suffix

    def pair(self, r: AvroType, w: AvroType) -> list[Violation]:
        key = (id(r), id(w))
        done = self.memo.get(key)
        if done is not None:
            return done
        if key in self.active:
            return []  # being compared further up: assumed to hold
        self.active.add(key)
        try:
            found = self.compare(r, w)
        finally:
            self.active.discard(key)
        self.memo[key] = found
        return found

    def compare(self, r: AvroType, w: AvroType) -> list[Violation]:
        if isinstance(w, Union):
            return self.writer_union(r, w)
        if isinstance(r, Union):
            return self.reader_union(r, w)
        if isinstance(r, Primitive) and isinstance(w, Primitive):
            if r.name == w.name or r.name in PROMOTIONS.get(w.name, ()):
                return []
            return [self.type_changed(r, w)]
        if type(r) is not type(w):
            return [self.type_changed(r, w)]
        if isinstance(r, Array):
            assert isinstance(w, Array)
            return self.pair(r.items, w.items)
        if isinstance(r, Map):
            assert isinstance(w, Map)
            return self.pair(r.values, w.values)
        assert isinstance(r, Named) and isinstance(w, Named)
        if r.name != w.name and w.fullname not in r.aliases:
            return [
                Violation(
                    self.at(r, w, "/name"),
                    "name_mismatch",
                    f"{self.writer_is} writes {_label(w)}, {self.reader_is} "
                    f"reads {_label(r)}, which neither has its name nor lists "
                    "it among its aliases",
                )
            ]
        if isinstance(r, Record):
            assert isinstance(w, Record)
            return self.record(r, w)
        if isinstance(r, Enum):
            assert isinstance(w, Enum)
            return self.enum(r, w)
        assert isinstance(r, Fixed) and isinstance(w, Fixed)
        if r.size != w.size:
            return [
                Violation(
                    self.at(r, w, "/size"),
                    "fixed_size_changed",
                    f"{_label(r)} is {r.size} bytes in {self.reader_is} and "
                    f"{w.size} in {self.writer_is}",
                )
            ]
        return []

    def type_changed(self, r: AvroType, w: AvroType) -> Violation:
        return Violation(
            self.at(r, w),
            "type_changed",
            f"{self.writer_is} writes {_label(w)}, which {self.reader_is} "
            f"cannot read as {_label(r)}",
        )

    def record(self, r: Record, w: Record) -> list[Violation]:
        found: list[Violation] = []
        written = {f.name: f for f in w.fields}
        for i, field in enumerate(r.fields):
            source = written.get(field.name)
            if source is None:
                source = next((written[a] for a in field.aliases if a in written), None)
            if source is not None:
                found.extend(self.pair(field.type, source.type))
            elif not field.has_default:
                found.append(self.missing_field(r, w, i))
        return found

    def missing_field(self, r: Record, w: Record, index: int) -> Violation:
        name = quote(r.fields[index].name)
        if self.new_is_reader:
            return Violation(
                f"{r.pointer}/fields/{index}",
                "field_added_without_default",
                f"field {name} of {_label(r)} has no default, and the old "
                "schema writes no field of its name or aliases",
            )
        return Violation(
            f"{w.pointer}/fields",
            "field_removed_without_default",
            f"the new schema writes no field {name} (nor one of its aliases) "
            f"in {_label(w)}, and the old schema reads it without a default",
        )

    def enum(self, r: Enum, w: Enum) -> list[Violation]:
        if r.default is not None:
            return []  # unknown symbols read as the default
        known = set(r.symbols)
        found = []
        for j, symbol in enumerate(w.symbols):
            if symbol in known:
                continue
            if self.new_is_reader:
                where, rule = f"{r.pointer}/symbols", "enum_symbol_removed"
            else:
                where, rule = f"{w.pointer}/symbols/{j}", "enum_symbol_added"
            found.append(
                Violation(
                    where,
                    rule,
                    f"{self.writer_is} writes symbol {quote(symbol)} of "
                    f"{_label(w)}, which {self.reader_is} lacks and has no "
                    "default for",
                )
            )
        return found

    def writer_union(self, r: AvroType, w: Union) -> list[Violation]:
        found: list[Violation] = []
        for i, branch in enumerate(w.branches):
            if isinstance(r, Union):
                found.extend(self.reader_union(r, branch, w, i))
            else:
                found.extend(self.branch_unreadable(r, branch, w, i))
        return found

    def branch_unreadable(
        self, r: AvroType, branch: AvroType, w: Union, index: int
    ) -> list[Violation]:
        inner = self.pair(r, branch)
        if not inner or _same_kind(r, branch):
            return inner
        where = r.pointer if self.new_is_reader else f"{w.pointer}/{index}"
        return [
            Violation(
                where,
                "union_branch_missing",
                f"{self.writer_is} writes {_label(branch)} (branch {index} of "
                f"its union), which {self.reader_is} cannot read as "
                f"{_label(r)}",
            )
        ]

    def reader_union(
        self,
        r: Union,
        w: AvroType,
        union: Union | None = None,
        index: int | None = None,
    ) -> list[Violation]:
        matching = []
        for branch in r.branches:
            inner = self.pair(branch, w)
            if not inner:
                return []
            if _same_kind(branch, w):
                matching.append(inner)
        if len(matching) == 1:
            return matching[0]
        which = "" if index is None else f" (branch {index} of its union)"
        if self.new_is_reader or union is None or index is None:
            where = self.at(r, w)
        else:
            where = f"{union.pointer}/{index}"
        return [
            Violation(
                where,
                "union_branch_missing",
                f"{self.writer_is} writes {_label(w)}{which}, which no branch "
                f"of {self.reader_is}'s union reads",
            )
        ]
