"""Parse and normalise an Avro schema document.

:func:`parse` walks the document (a JSON value: a type name, an object, a
union array) into :mod:`narad_avro.model` nodes and checks every rule of the
specification on the way, so that a refusal names the problem and where it
sits (``/fields/2/default: expected int, got string``). fastavro then parses
the same document as a second opinion (:func:`_second_opinion`): whatever it
refuses that the walk let through is refused too.

Rules beyond what fastavro checks, all from the specification:

- names are ``[A-Za-z_][A-Za-z0-9_]*`` (dotted for full names); a named type
  is defined once and before it is referenced (document order; a record may
  reference itself inside its own fields); no named type is called like a
  primitive;
- field names are unique in a record, enum symbols unique and valid names;
- a union has at least one branch, no union directly inside it, and at most
  one branch of each unnamed type and of each full name;
- a fixed's size is a non-negative integer;
- a default is valid for its field's type in Avro's JSON encoding (a union's
  default for its first branch; bytes and fixed as strings of code points up
  to U+00FF; ``int``/``long`` as integer literals in range; a record's
  members each valid, missing ones only where the field has a default);
- a known logical type sits on the type it annotates (``date`` on ``int``,
  ``decimal`` on ``bytes`` or ``fixed`` with ``0 <= scale <= precision`` and a
  precision the fixed can hold, ...). The specification asks readers to
  ignore a malformed logical type; a registry refuses it instead, because
  ignoring it would silently turn off the checks its writer asked for.
  Unknown logical type names are kept and ignored, as the specification asks.

Bounds: the compacted document is at most 256 KiB and nests at most 64
levels (the rulebook's limits for every schema type); both are measured
before the walk, which then recurses at most 64 levels.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from dataclasses import field
from decimal import Decimal
from functools import cached_property
from typing import Any

from narad import jsontext
from narad.errors import InvalidSchema
from narad.quoting import cut_pointer
from narad.quoting import quote
from narad_avro.limits import SCHEMA_DEPTH
from narad_avro.limits import SCHEMA_SIZE
from narad_avro.model import NO_DEFAULT
from narad_avro.model import PRIMITIVES
from narad_avro.model import Array
from narad_avro.model import AvroType
from narad_avro.model import Enum
from narad_avro.model import Field
from narad_avro.model import Fixed
from narad_avro.model import Logical
from narad_avro.model import Map
from narad_avro.model import Named
from narad_avro.model import Primitive
from narad_avro.model import Record
from narad_avro.model import Union
from narad_avro.text import dumps
from narad_avro.text import escape
from narad_avro.text import json_type

__all__ = ("AvroSchema", "Known", "parse", "parse_references", "parse_text")

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_ORDERS = frozenset({"ascending", "descending", "ignore"})
_INT_RANGE = (-(2**31), 2**31 - 1)
_LONG_RANGE = (-(2**63), 2**63 - 1)
# Past these a value rounds to infinity: the midpoint between the largest
# finite float32/float64 and the next power of two.
FLOAT_LIMIT = 2**128 - 2**103
DOUBLE_LIMIT = 2**1024 - 2**970

# Logical type -> the types it may annotate ("fixed" with a required size).
_LOGICAL_ON: dict[str, tuple[str, ...]] = {
    "decimal": ("bytes", "fixed"),
    "big-decimal": ("bytes",),
    "uuid": ("string", "fixed"),
    "date": ("int",),
    "time-millis": ("int",),
    "time-micros": ("long",),
    "timestamp-millis": ("long",),
    "timestamp-micros": ("long",),
    "timestamp-nanos": ("long",),
    "local-timestamp-millis": ("long",),
    "local-timestamp-micros": ("long",),
    "local-timestamp-nanos": ("long",),
    "duration": ("fixed",),
}
_FIXED_SIZE = {"uuid": 16, "duration": 12}


class SchemaError(Exception):
    """A rule the document breaks, at a JSON pointer into it."""

    def __init__(self, pointer: str, message: str) -> None:
        super().__init__(f"{cut_pointer(pointer) or '/'}: {message}")
        self.pointer = pointer
        self.message = message


@dataclass(frozen=True, eq=False)
class AvroSchema:
    """A parsed, checked Avro schema.

    Attributes:
        root: The schema's top type.
        document: The document as given (parsed JSON).
        stored: The compact form to store (insignificant whitespace removed;
            key order and number spelling as written).
        canonical: Avro's Parsing Canonical Form (what resolution and wire
            compatibility depend on; no docs, defaults, aliases, logical types).
        identity: What "the same schema" means for idempotent registration:
            the canonical form plus defaults, aliases, logical types and docs,
            in a fixed order. Equal identities register nothing; a change of
            docs alone is a new version (resolution ignores docs, so it is
            always compatible). Field ``order`` and other properties are not
            part of it (issue 52's definition of "the same").
    """

    root: AvroType
    document: Any
    stored: bytes
    canonical: str
    identity: str
    named: dict[str, Named] = field(repr=False)

    def same_as(self, other: AvroSchema) -> bool:
        """Whether registering this over ``other`` registers nothing."""
        return self.identity == other.identity

    @cached_property
    def fingerprint(self) -> int:
        """The CRC-64-AVRO (Rabin) fingerprint of the canonical form."""
        from fastavro.schema import fingerprint

        return int(fingerprint(self.canonical, "CRC-64-AVRO"), 16)

    @cached_property
    def fastavro(self) -> Any:
        """fastavro's parsed schema (its writer, reader and validate take it)."""
        from fastavro.schema import parse_schema

        return parse_schema(_for_fastavro(self.document))


def parse_text(raw: bytes, known: Known | None = None) -> AvroSchema:
    """Parse a schema from its JSON text (the strict reader, 64 levels deep).

    ``known``: the named types of the schemas it references (Confluent's
    schema references, :func:`parse_references`), which it may use by name
    but not define again.

    Raises:
        InvalidSchema: not one JSON text, too large or deep, or a rule broken;
            the message names the rule and where (``schema: /fields/0: ...``).
    """
    try:
        document = jsontext.loads(raw, max_depth=SCHEMA_DEPTH)
    except jsontext.TooDeep:
        raise InvalidSchema(
            f"schema: nests deeper than {SCHEMA_DEPTH} levels"
        ) from None
    except jsontext.JSONTextError as exc:
        raise InvalidSchema(f"schema: {exc}") from None
    compact = jsontext.compact(raw)
    if len(compact) > SCHEMA_SIZE:
        raise InvalidSchema("schema: is larger than 256 KiB")
    return _parse(document, compact, known)


def parse(document: Any) -> AvroSchema:
    """Parse a schema given as a parsed JSON value (``jsontext.loads``).

    Raises:
        InvalidSchema: too large or deep, or a rule broken; the message names
            the rule and where (``schema: /fields/2/default: ...``).
    """
    if _deeper_than(document, SCHEMA_DEPTH):
        raise InvalidSchema(f"schema: nests deeper than {SCHEMA_DEPTH} levels")
    stored = dumps(document).encode()
    if len(stored) > SCHEMA_SIZE:
        raise InvalidSchema("schema: is larger than 256 KiB")
    return _parse(document, stored)


@dataclass(frozen=True)
class Known:
    """The named types referenced schemas define, for :func:`parse_text`.

    Attributes:
        named: Each named type by full name (the referenced schemas' nodes).
        documents: The referenced documents, dependencies first, for
            fastavro's second opinion.
    """

    named: dict[str, Named]
    documents: tuple[Any, ...]


def parse_references(documents: list[tuple[str, bytes]]) -> Known:
    """The named types a schema's references define: ``documents`` are the
    referenced versions' ``(reference name, stored text)``, each after those
    it references; each may use the types defined before it. A name is
    defined once in all.

    Raises:
        InvalidSchema: a referenced document does not parse with those
            before it, or defines a name defined before (naming the
            reference).
    """
    named: dict[str, Named] = {}
    parsed: list[Any] = []
    for name, raw in documents:
        try:
            document = jsontext.loads(raw, max_depth=SCHEMA_DEPTH)
        except jsontext.JSONTextError as exc:
            raise InvalidSchema(f"schema: reference {quote(name)}: {exc}") from None
        parser = _Parser(named)
        try:
            parser.type(document, "", "")
        except SchemaError as exc:
            raise InvalidSchema(f"schema: reference {quote(name)}: {exc}") from None
        named = parser.named
        parsed.append(document)
    return Known(named, tuple(parsed))


def _parse(document: Any, stored: bytes, known: Known | None = None) -> AvroSchema:
    parser = _Parser(known.named if known is not None else None)
    try:
        root = parser.type(document, "", "")
    except SchemaError as exc:
        raise InvalidSchema(f"schema: {exc}") from None
    _second_opinion(document, known)
    return AvroSchema(
        root=root,
        document=document,
        stored=stored,
        canonical=dumps(_canonical(root, set(), identity=False)),
        identity=dumps(_canonical(root, set(), identity=True)),
        named=parser.named,
    )


def _deeper_than(value: Any, limit: int) -> bool:
    level = [value] if isinstance(value, dict | list) else []
    depth = 0
    while level:
        depth += 1
        if depth > limit:
            return True
        level = [
            item
            for node in level
            for item in (node.values() if isinstance(node, dict) else node)
            if isinstance(item, dict | list)
        ]
    return False


def _second_opinion(document: Any, known: Known | None = None) -> None:
    from fastavro.schema import parse_schema

    try:
        if known is None:
            parse_schema(_for_fastavro(document))
            return
        named: dict[str, Any] = {}
        for referenced in known.documents:
            parse_schema(_for_fastavro(referenced), named_schemas=named)
        parse_schema(_for_fastavro(document), named_schemas=named)
    except Exception as exc:  # any refusal of the library's is a refusal
        raise InvalidSchema(f"schema: fastavro refuses it: {exc}") from None


def _for_fastavro(value: Any) -> Any:
    """The document with exact numbers as floats, which fastavro expects."""
    if isinstance(value, dict):
        return {k: _for_fastavro(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_for_fastavro(v) for v in value]
    if isinstance(value, Decimal):
        return float(value)
    return value


class _Parser:
    def __init__(self, known: dict[str, Named] | None = None) -> None:
        # The referenced schemas' types: a copy, so what this document
        # defines stays its own.
        self.named: dict[str, Named] = dict(known) if known else {}

    # -- types ---------------------------------------------------------------

    def type(self, value: Any, ptr: str, namespace: str) -> AvroType:
        if isinstance(value, str):
            return self.reference(value, ptr, namespace)
        if isinstance(value, list):
            return self.union(value, ptr, namespace)
        if not isinstance(value, dict):
            raise SchemaError(
                ptr,
                f"a type is a name, an object or a union array, "
                f"not a {json_type(value)}",
            )
        if "type" not in value:
            raise SchemaError(ptr, 'a type object needs "type"')
        kind = value["type"]
        if not isinstance(kind, str):
            raise SchemaError(
                ptr + "/type", f'"type" must be a type name, not a {json_type(kind)}'
            )
        if kind in PRIMITIVES:
            return Primitive(kind, ptr, self.logical(value, kind, ptr))
        if kind in ("record", "error"):
            return self.record(value, ptr, namespace)
        if kind == "enum":
            return self.enum(value, ptr, namespace)
        if kind == "fixed":
            return self.fixed(value, ptr, namespace)
        if kind == "array":
            if "items" not in value:
                raise SchemaError(ptr, 'an array needs "items"')
            return Array(self.type(value["items"], ptr + "/items", namespace), ptr)
        if kind == "map":
            if "values" not in value:
                raise SchemaError(ptr, 'a map needs "values"')
            return Map(self.type(value["values"], ptr + "/values", namespace), ptr)
        return self.reference(kind, ptr + "/type", namespace)

    def reference(self, name: str, ptr: str, namespace: str) -> AvroType:
        if name in PRIMITIVES:
            return Primitive(name, ptr)
        found = None
        if "." not in name and namespace:
            found = self.named.get(f"{namespace}.{name}")
        if found is None:
            found = self.named.get(name)
        if found is None:
            raise SchemaError(
                ptr,
                f"unknown type {quote(name)} (a named type is defined before "
                "it is used)",
            )
        return found  # type: ignore[return-value]

    def union(self, value: list[Any], ptr: str, namespace: str) -> Union:
        if not value:
            raise SchemaError(ptr, "a union needs at least one branch")
        branches: list[AvroType] = []
        seen: dict[str, int] = {}
        for i, item in enumerate(value):
            where = f"{ptr}/{i}"
            if isinstance(item, list):
                raise SchemaError(where, "a union may not directly contain a union")
            branch = self.type(item, where, namespace)
            if isinstance(branch, Union):
                raise SchemaError(where, "a union may not directly contain a union")
            key = branch.label
            if key in seen:
                raise SchemaError(
                    where,
                    f"the union already has a branch of type {quote(key)} "
                    f"(branch {seen[key]})",
                )
            seen[key] = i
            branches.append(branch)
        return Union(branches, ptr)

    # -- named types ---------------------------------------------------------

    def fullname(self, value: dict[str, Any], ptr: str, namespace: str) -> str:
        if "name" not in value:
            raise SchemaError(ptr, f'a {value["type"]} needs "name"')
        name = value["name"]
        if not isinstance(name, str):
            raise SchemaError(ptr + "/name", "a name must be a string")
        if "." in name:
            full = name
        else:
            space = value.get("namespace", namespace)
            if space is None:
                space = ""
            if not isinstance(space, str):
                raise SchemaError(ptr + "/namespace", "a namespace must be a string")
            if space:
                _check_fullname(space, ptr + "/namespace", "namespace")
            full = f"{space}.{name}" if space else name
        _check_fullname(full, ptr + "/name", "name")
        if full in PRIMITIVES:
            raise SchemaError(
                ptr + "/name", f"{quote(full)} is a primitive type, not a name"
            )
        if full in self.named:
            raise SchemaError(ptr + "/name", f"{quote(full)} is defined twice")
        self.doc(value, ptr)
        return full

    def aliases(self, value: dict[str, Any], ptr: str, namespace: str) -> tuple:
        aliases = value.get("aliases", [])
        where = ptr + "/aliases"
        if not isinstance(aliases, list):
            raise SchemaError(where, "aliases must be an array of names")
        out = []
        for i, alias in enumerate(aliases):
            if not isinstance(alias, str):
                raise SchemaError(f"{where}/{i}", "an alias must be a string")
            full = alias if "." in alias or not namespace else f"{namespace}.{alias}"
            _check_fullname(full, f"{where}/{i}", "alias")
            out.append(full)
        return tuple(out)

    def record(self, value: dict[str, Any], ptr: str, namespace: str) -> Record:
        full = self.fullname(value, ptr, namespace)
        space = full.rpartition(".")[0]
        record = Record(full, ptr, self.aliases(value, ptr, space), value.get("doc"))
        self.named[full] = record  # before the fields: they may refer to it
        fields = value.get("fields")
        if not isinstance(fields, list):
            raise SchemaError(
                ptr + ("/fields" if "fields" in value else ""),
                'a record needs "fields", an array of fields',
            )
        names: dict[str, int] = {}
        for i, spec in enumerate(fields):
            where = f"{ptr}/fields/{i}"
            item = self.field(spec, where, space)
            if item.name in names:
                raise SchemaError(
                    where + "/name",
                    f"field {quote(item.name)} is already field {names[item.name]}",
                )
            names[item.name] = i
            record.fields.append(item)
        return record

    def field(self, spec: Any, ptr: str, namespace: str) -> Field:
        if not isinstance(spec, dict):
            raise SchemaError(ptr, f"a field is an object, not a {json_type(spec)}")
        name = spec.get("name")
        if not isinstance(name, str):
            raise SchemaError(
                ptr + ("/name" if "name" in spec else ""),
                'a field needs "name", a string',
            )
        if not _NAME.match(name):
            raise SchemaError(ptr + "/name", f"{quote(name)} is not a valid name")
        if "type" not in spec:
            raise SchemaError(ptr, f'field {quote(name)} needs "type"')
        avro_type = self.type(spec["type"], ptr + "/type", namespace)
        self.doc(spec, ptr)
        order = spec.get("order", "ascending")
        if order not in _ORDERS:
            raise SchemaError(
                ptr + "/order", 'order must be "ascending", "descending" or "ignore"'
            )
        aliases = spec.get("aliases", [])
        if not isinstance(aliases, list):
            raise SchemaError(ptr + "/aliases", "aliases must be an array of names")
        for i, alias in enumerate(aliases):
            if not isinstance(alias, str) or not _NAME.match(alias):
                raise SchemaError(f"{ptr}/aliases/{i}", "an alias must be a name")
        default = spec.get("default", NO_DEFAULT)
        if default is not NO_DEFAULT:
            reason = default_refusal(avro_type, default, ptr + "/default")
            if reason is not None:
                raise SchemaError(*reason)
        return Field(name, avro_type, ptr, default, tuple(aliases), spec.get("doc"))

    def enum(self, value: dict[str, Any], ptr: str, namespace: str) -> Enum:
        full = self.fullname(value, ptr, namespace)
        aliases = self.aliases(value, ptr, full.rpartition(".")[0])
        symbols = value.get("symbols")
        if not isinstance(symbols, list):
            raise SchemaError(
                ptr + ("/symbols" if "symbols" in value else ""),
                'an enum needs "symbols", an array of names',
            )
        seen: dict[str, int] = {}
        for i, symbol in enumerate(symbols):
            where = f"{ptr}/symbols/{i}"
            if not isinstance(symbol, str) or not _NAME.match(symbol):
                raise SchemaError(where, "a symbol must be a name")
            if symbol in seen:
                raise SchemaError(
                    where, f"symbol {quote(symbol)} is already symbol {seen[symbol]}"
                )
            seen[symbol] = i
        default = value.get("default")
        if default is not None and default not in seen:
            raise SchemaError(
                ptr + "/default", "the default must be one of the symbols"
            )
        enum = Enum(full, ptr, aliases, value.get("doc"), tuple(symbols), default)
        self.named[full] = enum
        return enum

    def fixed(self, value: dict[str, Any], ptr: str, namespace: str) -> Fixed:
        full = self.fullname(value, ptr, namespace)
        aliases = self.aliases(value, ptr, full.rpartition(".")[0])
        size = value.get("size")
        if not _is_int(size) or size < 0:
            raise SchemaError(
                ptr + ("/size" if "size" in value else ""),
                'a fixed needs "size", a non-negative integer',
            )
        fixed = Fixed(full, ptr, aliases, value.get("doc"), size)
        fixed.logical = self.logical(value, "fixed", ptr, size)
        self.named[full] = fixed
        return fixed

    # -- annotations ---------------------------------------------------------

    def doc(self, value: dict[str, Any], ptr: str) -> None:
        if "doc" in value and not isinstance(value["doc"], str):
            raise SchemaError(ptr + "/doc", "doc must be a string")

    def logical(
        self, value: dict[str, Any], kind: str, ptr: str, size: int = 0
    ) -> Logical | None:
        name = value.get("logicalType")
        if name is None:
            return None
        where = ptr + "/logicalType"
        if not isinstance(name, str):
            raise SchemaError(where, "logicalType must be a string")
        allowed = _LOGICAL_ON.get(name)
        if allowed is None:
            return None  # unknown: ignored, as the specification asks
        if kind not in allowed:
            raise SchemaError(
                where,
                f"logical type {quote(name)} annotates {' or '.join(allowed)}, "
                f"not {kind}",
            )
        if kind == "fixed" and name in _FIXED_SIZE and size != _FIXED_SIZE[name]:
            raise SchemaError(
                where,
                f"logical type {quote(name)} needs a fixed of size "
                f"{_FIXED_SIZE[name]}, not {size}",
            )
        if name != "decimal":
            return Logical(name)
        precision = value.get("precision")
        if not _is_int(precision) or precision < 1:
            raise SchemaError(
                ptr + ("/precision" if "precision" in value else ""),
                "a decimal needs a precision, a positive integer",
            )
        scale = value.get("scale", 0)
        if not _is_int(scale) or not 0 <= scale <= precision:
            raise SchemaError(
                ptr + "/scale",
                "a decimal's scale is an integer from 0 to its precision",
            )
        if kind == "fixed":
            most = len(str(2 ** (8 * size - 1) - 1)) - 1 if size else 0
            if precision > most:
                raise SchemaError(
                    ptr + "/precision",
                    f"a fixed of {size} bytes holds at most {most} decimal digits",
                )
        return Logical(name, precision, scale)


def _check_fullname(full: str, ptr: str, what: str) -> None:
    if not all(_NAME.match(part) for part in full.split(".")):
        raise SchemaError(ptr, f"{quote(full)} is not a valid {what}")


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


# -- defaults -----------------------------------------------------------------


def default_refusal(
    avro_type: AvroType, value: Any, ptr: str
) -> tuple[str, str] | None:
    """Why ``value`` is not a valid default for ``avro_type``, and where, or
    ``None``. Defaults use Avro's JSON encoding; a union's is its first
    branch's. Recursion follows the default value, which nests at most as
    deep as the document."""
    if isinstance(avro_type, Union):
        first = avro_type.branches[0]
        reason = default_refusal(first, value, ptr)
        if reason is not None and reason[0] == ptr:
            return ptr, f"{reason[1]} (a union's default is for its first branch)"
        return reason
    check = _DEFAULT_CHECKS.get(type(avro_type))
    assert check is not None
    return check(avro_type, value, ptr)


def _expected(what: str, value: Any) -> str:
    return f"expected {what}, got {json_type(value)}"


def _primitive_default(t: Any, value: Any, ptr: str) -> tuple[str, str] | None:
    name = t.name
    if name == "null":
        ok = value is None
    elif name == "boolean":
        ok = value is True or value is False
    elif name in ("int", "long"):
        if not _is_int(value):
            return ptr, _expected(f"an integer ({name})", value)
        low, high = _INT_RANGE if name == "int" else _LONG_RANGE
        if not low <= value <= high:
            return ptr, f"{value} is out of {name} range"
        return None
    elif name in ("float", "double"):
        if not (_is_int(value) or isinstance(value, Decimal | float)):
            return ptr, _expected(f"a number ({name})", value)
        limit = FLOAT_LIMIT if name == "float" else DOUBLE_LIMIT
        if not -limit < value < limit:
            return ptr, f"the number is out of {name} range"
        return None
    elif name == "string":
        ok = isinstance(value, str)
    else:  # bytes
        if isinstance(value, str):
            return _latin1(value, ptr)
        ok = False
    return None if ok else (ptr, _expected(name, value))


def _latin1(value: str, ptr: str) -> tuple[str, str] | None:
    if value and max(value) > "\xff":
        return ptr, "bytes are written as code points U+0000 to U+00FF"
    return None


def _record_default(t: Any, value: Any, ptr: str) -> tuple[str, str] | None:
    if not isinstance(value, dict):
        return ptr, _expected(f"an object (record {t.fullname})", value)
    for item in t.fields:
        if item.name in value:
            reason = default_refusal(
                item.type, value[item.name], f"{ptr}/{escape(item.name)}"
            )
            if reason is not None:
                return reason
        elif not item.has_default:
            return ptr, f"missing field {quote(item.name)}, which has no default"
    return None


def _enum_default(t: Any, value: Any, ptr: str) -> tuple[str, str] | None:
    if not isinstance(value, str):
        return ptr, _expected(f"a symbol of enum {t.fullname}", value)
    if value not in t.symbols:
        return ptr, f"{quote(value)} is not a symbol of enum {t.fullname}"
    return None


def _fixed_default(t: Any, value: Any, ptr: str) -> tuple[str, str] | None:
    if not isinstance(value, str):
        return ptr, _expected(f"a string (fixed {t.fullname})", value)
    if len(value) != t.size:
        return (
            ptr,
            f"fixed {t.fullname} holds {t.size} bytes, the string has {len(value)}",
        )
    return _latin1(value, ptr)


def _array_default(t: Any, value: Any, ptr: str) -> tuple[str, str] | None:
    if not isinstance(value, list):
        return ptr, _expected("an array", value)
    for i, item in enumerate(value):
        reason = default_refusal(t.items, item, f"{ptr}/{i}")
        if reason is not None:
            return reason
    return None


def _map_default(t: Any, value: Any, ptr: str) -> tuple[str, str] | None:
    if not isinstance(value, dict):
        return ptr, _expected("an object (map)", value)
    for key, item in value.items():
        reason = default_refusal(t.values, item, f"{ptr}/{escape(key)}")
        if reason is not None:
            return reason
    return None


_DEFAULT_CHECKS: dict[type, Callable[[Any, Any, str], tuple[str, str] | None]] = {
    Primitive: _primitive_default,
    Record: _record_default,
    Enum: _enum_default,
    Fixed: _fixed_default,
    Array: _array_default,
    Map: _map_default,
}


# -- canonical forms ----------------------------------------------------------


def _canonical(t: AvroType, seen: set[str], *, identity: bool) -> Any:
    """Avro's Parsing Canonical Form as a JSON value; with ``identity``, also
    the defaults, aliases, known logical types and docs (appended after the
    canonical members, in a fixed order, so key order never matters)."""
    if isinstance(t, Primitive):
        if identity and t.logical is not None:
            return {"type": t.name, **_logical(t.logical)}
        return t.name
    if isinstance(t, Array):
        return {"type": "array", "items": _canonical(t.items, seen, identity=identity)}
    if isinstance(t, Map):
        return {"type": "map", "values": _canonical(t.values, seen, identity=identity)}
    if isinstance(t, Union):
        return [_canonical(b, seen, identity=identity) for b in t.branches]
    if t.fullname in seen:
        return t.fullname
    seen.add(t.fullname)
    out: dict[str, Any] = {"name": t.fullname}
    if isinstance(t, Record):
        out["type"] = "record"
        fields = []
        for item in t.fields:
            member: dict[str, Any] = {
                "name": item.name,
                "type": _canonical(item.type, seen, identity=identity),
            }
            if identity:
                if item.aliases:
                    member["aliases"] = sorted(item.aliases)
                if item.has_default:
                    member["default"] = _normal(item.default)
                if item.doc is not None:
                    member["doc"] = item.doc
            fields.append(member)
        out["fields"] = fields
    elif isinstance(t, Enum):
        out["type"] = "enum"
        out["symbols"] = list(t.symbols)
        if identity and t.default is not None:
            out["default"] = t.default
    else:
        out["type"] = "fixed"
        out["size"] = t.size
        if identity and t.logical is not None:
            out.update(_logical(t.logical))
    if identity and t.aliases:
        out["aliases"] = sorted(t.aliases)
    if identity and t.doc is not None:
        out["doc"] = t.doc
    return out


def _logical(logical: Logical) -> dict[str, Any]:
    out: dict[str, Any] = {"logicalType": logical.name}
    if logical.precision is not None:
        out["precision"] = logical.precision
        out["scale"] = logical.scale
    return out


def _normal(value: Any) -> Any:
    """A default in one spelling per value: ``1.0`` and ``1`` are one number,
    key order does not matter (objects are sorted when dumped)."""
    if isinstance(value, dict):
        return {k: _normal(v) for k, v in sorted(value.items())}
    if isinstance(value, list):
        return [_normal(v) for v in value]
    if isinstance(value, Decimal | float) and not isinstance(value, bool):
        number = Decimal(value)
        if number == number.to_integral_value():
            return int(number)
        return number.normalize()
    return value
