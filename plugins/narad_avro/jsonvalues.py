"""Validate JSON payloads against an Avro schema, as queue-ti does.

The payload is one JSON text read by Narad's strict reader (exact numbers,
256 levels at most). Each type of the schema is compiled once into a check,
a closure that answers ``None`` for a fitting value, or a :class:`Refusal`
naming the first misfit and the path to it; the path is built only on the
way out of a refusal, so an accepted payload pays for none of it.

What fits what (queue-ti's rules, with Avro's types spelled out):

- a record is a JSON object holding every field without a default; each
  member present must fit its field's type. A member the schema does not
  name is **refused** (``unknown field "x"``), unlike queue-ti, which lets it
  through: Avro records are closed (a binary datum cannot carry such a
  member), and the compatibility check certifies changes by Avro's resolution
  rules, under which adding a field with a default is safe. Were unnamed
  members accepted, an earlier message could carry the new field's name with
  any value, and a consumer on the new version would read it as that field.
  Refusing keeps JSON and binary payloads to the same set of values, and the
  compatibility verdicts true of both;
- ``null``: null; ``boolean``: true or false; ``int`` and ``long``: an
  integer (``1.0`` and ``1e2`` count, as in the rulebook) within 32 or 64
  bits; ``float`` and ``double``: any number that does not round to infinity
  in that width; ``string``: a string; ``bytes``: a string of code points up
  to U+00FF (Avro's JSON encoding); ``fixed``: such a string of its size;
- an enum: one of its symbols; an array: a JSON array; a map: a JSON object;
- a union: the value as it is, not wrapped (``{"string": "x"}`` is Avro's own
  JSON encoding, not queue-ti's); it fits when one of the branches fits;
- logical types: ``date``, ``timestamp-*``, ``local-timestamp-*`` as their
  integer; ``time-millis`` and ``time-micros`` within a day; ``uuid`` a UUID
  string; ``decimal`` a number with at most ``scale`` fraction digits and
  ``precision`` digits in all (or its bytes as a string, Avro's encoding);
  ``duration`` its 12 bytes as a string.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from decimal import Decimal
from typing import Any

from narad import jsontext
from narad.errors import InvalidPayload
from narad.quoting import quote
from narad_avro.compiling import TypeCompiler
from narad_avro.limits import MESSAGE_LIMIT
from narad_avro.limits import PAYLOAD_DEPTH
from narad_avro.model import Array
from narad_avro.model import AvroType
from narad_avro.model import Enum
from narad_avro.model import Fixed
from narad_avro.model import Logical
from narad_avro.model import Map
from narad_avro.model import Primitive
from narad_avro.model import Record
from narad_avro.model import Union
from narad_avro.parsing import DOUBLE_LIMIT
from narad_avro.parsing import FLOAT_LIMIT
from narad_avro.parsing import AvroSchema
from narad_avro.text import escape
from narad_avro.text import json_type
from narad_avro.text import printable

__all__ = ("JsonValidator", "Refusal", "compile_check")

Check = Callable[[Any], "Refusal | None"]

_INT = (-(2**31), 2**31 - 1)
_LONG = (-(2**63), 2**63 - 1)
_DAY_MILLIS = 86_400_000
_UUID = re.compile(
    r"[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}\Z"
)
# Python frames one payload level can take (record, union, field checks);
# the limit is raised to fit 256 levels of them.
_FRAMES_PER_LEVEL = 4


class Refusal:
    """Why a value does not fit, and where (tokens from the value outwards)."""

    __slots__ = ("message", "tokens")

    def __init__(self, message: str) -> None:
        self.message = message
        self.tokens: list[str] = []

    @property
    def pointer(self) -> str:
        return "".join("/" + escape(t) for t in reversed(self.tokens))


class JsonValidator:
    """A schema's JSON payload check, compiled once.

    Args:
        schema: The parsed schema.
    """

    def __init__(self, schema: AvroSchema) -> None:
        self.schema = schema
        self.check = compile_check(schema.root)
        self._record = isinstance(schema.root, Record)
        needed = (PAYLOAD_DEPTH + 2) * _FRAMES_PER_LEVEL + 1000
        if sys.getrecursionlimit() < needed:
            sys.setrecursionlimit(needed)

    def validate(self, payload: bytes) -> Any:
        """Parse ``payload`` as one JSON text and check it; return the value.

        Raises:
            InvalidPayload: not one JSON text (256 levels at most), or a value
                that does not fit; the message says what and where, within
                2 KiB.
        """
        try:
            value = jsontext.loads(payload, max_depth=PAYLOAD_DEPTH)
        except jsontext.TooDeep:
            raise InvalidPayload(
                f"payload nests deeper than {PAYLOAD_DEPTH} levels"
            ) from None
        except jsontext.JSONTextError as exc:
            raise InvalidPayload(f"payload is not one JSON text: {exc}") from None
        refusal = self.check(value)
        if refusal is not None:
            raise InvalidPayload(self.explain(value, refusal))
        return value

    def explain(self, value: Any, refusal: Refusal) -> str:
        if self._record and type(value) is not dict:
            text = "payload is not a valid JSON object"
        else:
            text = f"at '{refusal.pointer}': {refusal.message}"
        return cut(f"schema: payload does not match topic schema: {text}")


def cut(message: str) -> str:
    """``message`` as printable text of at most 2 KiB with its prefix."""
    limit = MESSAGE_LIMIT - len(InvalidPayload.prefix)
    data = printable(message).encode()
    if len(data) <= limit:
        return data.decode()
    return data[:limit].decode(errors="ignore")


def compile_check(root: AvroType) -> Check:
    """The check of ``root``: ``None`` when a value fits, else a refusal."""
    return _Compiler().build(root)


def _expected(what: str, value: Any) -> Refusal:
    return Refusal(f"expected {what}, got {json_type(value)}")


def _show(value: Any) -> str:
    if isinstance(value, str):
        return quote(value)
    text = str(value)
    return text if len(text) <= 40 else text[:40] + "…"


def _integral(value: Any) -> int | None:
    """``value`` as an integer when it is one (``1.0`` and ``1e2`` are)."""
    kind = type(value)
    if kind is int:
        return value
    if kind is Decimal and value == value.to_integral_value():
        return int(value)
    return None


def _is_number(value: Any) -> bool:
    kind = type(value)
    return kind is int or kind is Decimal


class _Compiler(TypeCompiler[Check]):
    # -- primitives ----------------------------------------------------------

    def primitive(self, t: Primitive) -> Check:
        return self.scalar(t.name, t.logical)

    def scalar(self, name: str, logical: Logical | None) -> Check:
        if logical is not None:
            special = self.logical(name, logical)
            if special is not None:
                return special
        if name in ("int", "long"):
            return _integer(name, *(_INT if name == "int" else _LONG))
        if name in ("float", "double"):
            return _floating(name, FLOAT_LIMIT if name == "float" else DOUBLE_LIMIT)
        if name == "string":

            def string(value: Any) -> Refusal | None:
                return None if type(value) is str else _expected("string", value)

            return string
        if name == "boolean":

            def boolean(value: Any) -> Refusal | None:
                if value is True or value is False:
                    return None
                return _expected("boolean", value)

            return boolean
        if name == "null":

            def null(value: Any) -> Refusal | None:
                return None if value is None else _expected("null", value)

            return null
        return _latin1("bytes", None)

    def logical(self, name: str, logical: Logical) -> Check | None:
        kind = logical.name
        if kind == "uuid" and name == "string":

            def uuid(value: Any) -> Refusal | None:
                if type(value) is not str:
                    return _expected("string (uuid)", value)
                if _UUID.match(value) is None:
                    return Refusal(f"expected a UUID, got {_show(value)}")
                return None

            return uuid
        if kind in ("time-millis", "time-micros"):
            scale = 1 if kind == "time-millis" else 1000
            return _integer(f"{name} ({kind})", 0, _DAY_MILLIS * scale - 1)
        if kind == "decimal":
            assert logical.precision is not None and logical.scale is not None
            return _decimal(logical.precision, logical.scale, name)
        return None

    # -- named types ---------------------------------------------------------

    def record(self, t: Record) -> Check:
        # References met while compiling the fields (recursion) go through a
        # forwarder; every other use gets the check itself.
        cell: list[Check] = []
        self.named[id(t)] = lambda value: cell[0](value)
        checks = {f.name: self.build(f.type) for f in t.fields}
        required = frozenset(f.name for f in t.fields if not f.has_default)
        order = [f.name for f in t.fields if not f.has_default]
        label = f"record {quote(t.fullname)}"

        def record(value: Any) -> Refusal | None:
            if type(value) is not dict:
                return _expected(label, value)
            if not value.keys() >= required:
                missing = next(name for name in order if name not in value)
                return Refusal(f"missing required field {_q(missing)}")
            for key, item in value.items():
                check = checks.get(key)
                if check is None:
                    refusal = Refusal(
                        f"unknown field {_q(key)}: the schema does not name it"
                    )
                    refusal.tokens.append(key)
                    return refusal
                refusal = check(item)
                if refusal is not None:
                    if not refusal.tokens:
                        refusal.message = f"field {_q(key)}: {refusal.message}"
                    refusal.tokens.append(key)
                    return refusal
            return None

        cell.append(record)
        self.named[id(t)] = record
        return record

    def enum(self, t: Enum) -> Check:
        symbols = frozenset(t.symbols)
        label = quote(t.fullname)

        def enum(value: Any) -> Refusal | None:
            if type(value) is not str:
                return _expected(f"a symbol of enum {label}", value)
            if value not in symbols:
                return Refusal(f"{_show(value)} is not a symbol of enum {label}")
            return None

        return enum

    def fixed(self, t: Fixed) -> Check:
        if t.logical is not None and t.logical.name == "decimal":
            assert t.logical.precision is not None and t.logical.scale is not None
            return _decimal(t.logical.precision, t.logical.scale, "fixed", t.size)
        if t.logical is not None and t.logical.name == "uuid":
            uuid_text = self.logical("string", t.logical)
            assert uuid_text is not None
            as_bytes = _latin1(f"fixed {quote(t.fullname)}", t.size)

            def uuid(value: Any) -> Refusal | None:
                if type(value) is str and _UUID.match(value):
                    return None
                return as_bytes(value)

            return uuid
        return _latin1(f"fixed {quote(t.fullname)}", t.size)

    # -- containers ----------------------------------------------------------

    def array(self, t: Array) -> Check:
        item_check = self.build(t.items)

        def array(value: Any) -> Refusal | None:
            if type(value) is not list:
                return _expected("array", value)
            for i, item in enumerate(value):
                refusal = item_check(item)
                if refusal is not None:
                    refusal.tokens.append(str(i))
                    return refusal
            return None

        return array

    def map(self, t: Map) -> Check:
        value_check = self.build(t.values)

        def map_(value: Any) -> Refusal | None:
            if type(value) is not dict:
                return _expected("map (a JSON object)", value)
            for key, item in value.items():
                refusal = value_check(item)
                if refusal is not None:
                    refusal.tokens.append(key)
                    return refusal
            return None

        return map_

    def union(self, t: Union) -> Check:
        checks = [self.build(b) for b in t.branches]
        kinds = [_json_kinds(b) for b in t.branches]
        labels = ", ".join(_label(b) for b in t.branches)
        if len(labels) > 200:
            labels = labels[:200] + "…"

        def union(value: Any) -> Refusal | None:
            for check in checks:
                if check(value) is None:
                    return None
            # One branch of the value's JSON type: its own reason says more.
            kind = json_type(value)
            fitting = [c for c, ks in zip(checks, kinds, strict=True) if kind in ks]
            if len(fitting) == 1:
                return fitting[0](value)
            return Refusal(f"expected one of [{labels}], got {kind}")

        return union


def _q(name: str) -> str:
    """A name in queue-ti's quotes (``"order_id"``), cut like other quotes."""
    text = quote(name)
    return '"' + text[1:-1].replace('"', '\\"') + '"' if text[0] == "'" else text


def _label(t: AvroType) -> str:
    if isinstance(t, Primitive):
        return t.name
    return t.label


def _json_kinds(t: AvroType) -> frozenset[str]:
    if isinstance(t, Primitive):
        return {
            "null": frozenset({"null"}),
            "boolean": frozenset({"boolean"}),
            "string": frozenset({"string"}),
            "bytes": frozenset({"string", "number"}),
        }.get(t.name, frozenset({"number"}))
    if isinstance(t, Record):
        return frozenset({"object"})
    if isinstance(t, Map):
        return frozenset({"object"})
    if isinstance(t, Array):
        return frozenset({"array"})
    if isinstance(t, Fixed):
        return frozenset({"string", "number"})
    return frozenset({"string"})


def _integer(name: str, low: int, high: int) -> Check:
    def integer(value: Any) -> Refusal | None:
        if type(value) is int and low <= value <= high:
            return None
        number = _integral(value)
        if number is None:
            if type(value) is Decimal:
                return Refusal(f"expected {name}, got a fraction {_show(value)}")
            return _expected(name, value)
        if not low <= number <= high:
            return Refusal(f"expected {name}, got {_show(value)}, out of range")
        return None

    return integer


def _floating(name: str, limit: int) -> Check:
    # Decimal against Decimal: comparing one with a 300-digit int converts
    # the int on every call.
    decimal_limit = Decimal(limit)

    def floating(value: Any) -> Refusal | None:
        kind = type(value)
        if kind is Decimal:
            if -decimal_limit < value < decimal_limit:
                return None
        elif kind is int:
            if -limit < value < limit:
                return None
        else:
            return _expected(name, value)
        return Refusal(f"expected {name}, got {_show(value)}, out of range")

    return floating


def _latin1(name: str, size: int | None) -> Check:
    def latin1(value: Any) -> Refusal | None:
        if type(value) is not str:
            return _expected(name, value)
        if value and max(value) > "\xff":
            return Refusal(
                f"expected {name}, got a string with a code point past U+00FF "
                "(bytes are written as U+0000 to U+00FF)"
            )
        if size is not None and len(value) != size:
            return Refusal(f"expected {name} of {size} bytes, got {len(value)}")
        return None

    return latin1


def _decimal(
    precision: int, scale: int, underlying: str, size: int | None = None
) -> Check:
    bound = 10 ** (precision - scale)
    as_bytes = _latin1(underlying, size)
    name = f"decimal({precision},{scale})"

    def decimal(value: Any) -> Refusal | None:
        kind = type(value)
        if kind is str:
            return as_bytes(value)
        if kind is int:
            if -bound < value < bound:
                return None
            return Refusal(f"expected {name}, got {_show(value)}, too many digits")
        if kind is not Decimal:
            return _expected(f"{name} (a number)", value)
        _, digits, exponent = value.as_tuple()
        assert isinstance(exponent, int)  # loads never makes NaN or Infinity
        trailing = len(digits) - len("".join(map(str, digits)).rstrip("0") or "0")
        if -exponent - trailing > scale:
            return Refusal(
                f"expected {name}, got {_show(value)}, more than {scale} "
                "fraction digits"
            )
        if not -bound < value < bound:
            return Refusal(f"expected {name}, got {_show(value)}, too many digits")
        return None

    return decimal
