"""Compiled keywords: one small class per JSON Schema keyword, named like it.

A keyword is compiled once from its value in the schema. At validation time
:meth:`Keyword.valid` answers for one instance (the fast path, no allocation
beyond what the check needs) and :meth:`Keyword.report` explains a failure,
walking only as far as a :class:`~narad.schema.validation.validator.Report` allows.
``types`` lists the Python types of instances the keyword looks at; a node
skips the others, the way python-jsonschema's keyword functions return early.

``unevaluatedProperties`` and ``unevaluatedItems`` need to know which
properties or items the other keywords of their subschema evaluated. Those
come from :meth:`Keyword.evaluate`, which answers the verdict and the
evaluated names or indices (:data:`Marks`) in one pass over the subschemas it
applies: asking for the verdict and the annotations separately would walk each
subschema twice per level of payload nesting, and time would double with every
level. :meth:`Keyword.report` returns the same marks while it explains.

Numbers are ``int`` or :class:`~decimal.Decimal` (exactly as written) and are
compared exactly; ``multipleOf`` divides with :class:`~fractions.Fraction`.

Loops over subschemas are written out (``noqa: SIM110``) rather than passed
to ``all()``/``any()``: a call through a C builtin costs C stack on every
nested level and a generator per call, while plain Python calls do neither.
"""

from __future__ import annotations

import functools
import threading
from abc import ABC
from abc import abstractmethod
from collections.abc import Callable
from decimal import Decimal
from fractions import Fraction
from typing import TYPE_CHECKING
from typing import Any

from narad.jsontext import json_key
from narad.quoting import QUOTE_LIMIT
from narad.schema.patterns import regex_search

if TYPE_CHECKING:
    from narad.schema.validation.compiler import Node
    from narad.schema.validation.validator import Path
    from narad.schema.validation.validator import Report

NUMBER_TYPES = frozenset({int, Decimal, float})
OBJECT = frozenset({dict})
ARRAY = frozenset({list})
STRING = frozenset({str})

# What a passing subschema evaluated of an object or array: property names or
# item indices, ALL for every one. None, where a Marks is expected, is a fail.
ALL = True
EMPTY: frozenset[Any] = frozenset()
Marks = set[Any] | frozenset[Any] | bool

JSON_TYPES: dict[str, frozenset[type]] = {
    "object": OBJECT,
    "array": ARRAY,
    "string": STRING,
    "number": NUMBER_TYPES,
    "integer": frozenset({int}),
    "boolean": frozenset({bool}),
    "null": frozenset({type(None)}),
}
_TYPE_NAMES = {
    dict: "object",
    list: "array",
    str: "string",
    int: "integer",
    Decimal: "number",
    float: "number",
    bool: "boolean",
    type(None): "null",
}
_SHOW_LIMIT = 2048


class _State(threading.local):
    """Per-thread evaluation state, used only by references.

    ``active`` holds (target node, instance) pairs being evaluated, so a
    reference cycle that revisits a schema at the same instance is failed
    instead of recursing forever. ``scope`` is the dynamic scope: base URIs of
    the resources entered, outermost first.
    """

    def __init__(self) -> None:
        self.active: set[tuple[int, int]] = set()
        self.scope: list[str] = []


STATE = _State()


def show(value: Any) -> str:
    """A short JSON-like rendering of a value for messages.

    Strings and numbers are cut after :data:`~narad.quoting.QUOTE_LIMIT`
    characters, then ``…``: values often come from the payload, and a message
    quotes at most that much of what a client sent.
    """
    if isinstance(value, str):
        if len(value) > QUOTE_LIMIT:
            return "'" + value[:QUOTE_LIMIT] + "'…"
        text = "'" + value + "'"
    elif value is True or value is False:
        text = "true" if value else "false"
    elif value is None:
        text = "null"
    elif isinstance(value, list):
        text = "array"
    elif isinstance(value, dict):
        text = "object"
    else:
        text = str(value)
    return text if len(text) <= QUOTE_LIMIT else text[:QUOTE_LIMIT] + "…"


def show_many(values: Any) -> str:
    """Values joined by commas, stopped once the message is long enough."""
    parts: list[str] = []
    size = 0
    for value in values:
        part = show(value)
        parts.append(part)
        size += len(part) + 2
        if size > _SHOW_LIMIT:
            parts.append("...")
            break
    return ", ".join(parts)


def type_name(value: Any) -> str:
    return _TYPE_NAMES.get(type(value), type(value).__name__)


def is_integral(value: Any) -> bool:
    if type(value) is int:
        return True
    if isinstance(value, Decimal):
        return value == value.to_integral_value()
    return isinstance(value, float) and value.is_integer()


def number(value: Any) -> int | Decimal:
    """A schema number, exact: a float (from a Python caller) as written."""
    if isinstance(value, float):
        return Decimal(repr(value))
    return value


def union(a: Marks, b: Marks) -> Marks:
    """Both marks together (neither may be None)."""
    if a is ALL or b is ALL:
        return ALL
    if not b:
        return a
    if not a:
        return b
    return a | b  # type: ignore[operator]


def complete(marks: Marks, x: Any) -> bool:
    """Whether ``marks`` holds every property (or index) of ``x`` (they only
    ever hold ``x``'s own); always, for a value that has none."""
    if marks is ALL or type(x) not in _CONTAINERS:
        return True
    return len(marks) >= len(x)  # type: ignore[arg-type]


# Exact types: the parser makes only these (a dict | list union in
# isinstance would be built again on every call of a hot path).
_CONTAINERS = frozenset((dict, list))


def both(a: Marks | None, b: Marks | None) -> Marks | None:
    """What two keywords evaluated together, None if either failed."""
    return None if a is None or b is None else union(a, b)


class Keyword(ABC):
    """One compiled keyword of one subschema (but the :class:`Final` ones)."""

    __slots__ = ()
    name = ""
    types: frozenset[type] | None = None

    @abstractmethod
    def valid(self, x: Any) -> bool:
        """Whether ``x`` passes this keyword (``x`` already of ``types``)."""

    def evaluate(self, x: Any) -> Marks | None:
        """None if ``x`` fails, else the properties or items of ``x`` this
        keyword evaluated (an assertion evaluates none)."""
        return EMPTY if self.valid(x) else None

    def message(self, x: Any) -> str:
        # Assertions say what failed; applicators override ``report`` instead
        # and never get here.
        return f"{self.name}: value not accepted"

    def report(self, x: Any, path: Path, out: Report) -> Marks | None:
        """Add a line per violation to ``out``; return as :meth:`evaluate`."""
        if self.valid(x):
            return EMPTY
        out.add(path, self.message(x))
        return None

    def children(self) -> list[tuple[Node, bool]]:
        """Subschema nodes this keyword applies, each with "same instance"."""
        return []


# -- any type ------------------------------------------------------------------


@functools.cache
def _allowed_types(names: frozenset[str]) -> frozenset[type]:
    # Shared by every type keyword naming the same types: there are 128 sets
    # of the seven JSON type names (registration refuses any other name).
    return frozenset().union(*(JSON_TYPES[n] for n in names))


class type_(Keyword):
    __slots__ = ("allowed", "integer", "names")
    name = "type"

    def __init__(self, names: list[str]) -> None:
        self.names = names
        self.allowed = _allowed_types(frozenset(names))
        self.integer = "integer" in names and "number" not in names

    def valid(self, x: Any) -> bool:
        if type(x) in self.allowed:
            return True
        return self.integer and type(x) is not bool and is_integral(x)

    def message(self, x: Any) -> str:
        return f"got {type_name(x)}, want {' or '.join(self.names)}"


class enum(Keyword):
    __slots__ = ("keys", "strings", "values")
    name = "enum"

    def __init__(self, values: list[Any]) -> None:
        self.values = values
        # One hash lookup per value whatever the enum's size.
        self.keys = frozenset(json_key(v) for v in values)
        self.strings = frozenset(v for v in values if isinstance(v, str))

    def valid(self, x: Any) -> bool:
        if type(x) is str:
            return x in self.strings
        return json_key(x) in self.keys

    def message(self, x: Any) -> str:
        return f"value must be one of {show_many(self.values)}"


class const(Keyword):
    __slots__ = ("key", "value")
    name = "const"

    def __init__(self, value: Any) -> None:
        self.value = value
        self.key = json_key(value)

    def valid(self, x: Any) -> bool:
        return json_key(x) == self.key

    def message(self, x: Any) -> str:
        return f"value must be {show(self.value)}"


class format_(Keyword):
    __slots__ = ("check", "format")
    name = "format"
    types = STRING

    def __init__(self, name: str, check: Callable[[str], bool]) -> None:
        self.format = name
        self.check = check

    def valid(self, x: Any) -> bool:
        return bool(self.check(x))

    def message(self, x: Any) -> str:
        return f"{show(x)} is not valid {self.format}"


# -- numbers -------------------------------------------------------------------


class _Bound(Keyword):
    __slots__ = ("limit",)
    types = NUMBER_TYPES
    want = ""

    def __init__(self, limit: Any) -> None:
        self.limit = number(limit)

    def message(self, x: Any) -> str:
        return f"{self.name}: got {show(x)}, want {self.want}{show(self.limit)}"


class minimum(_Bound):
    __slots__ = ()
    name = "minimum"
    want = ">= "

    def valid(self, x: Any) -> bool:
        return x >= self.limit


class maximum(_Bound):
    __slots__ = ()
    name = "maximum"
    want = "<= "

    def valid(self, x: Any) -> bool:
        return x <= self.limit


class exclusiveMinimum(_Bound):
    __slots__ = ()
    name = "exclusiveMinimum"
    want = "> "

    def valid(self, x: Any) -> bool:
        return x > self.limit


class exclusiveMaximum(_Bound):
    __slots__ = ()
    name = "exclusiveMaximum"
    want = "< "

    def valid(self, x: Any) -> bool:
        return x < self.limit


class multipleOf(_Bound):
    __slots__ = ("fraction",)
    name = "multipleOf"
    want = "a multiple of "

    def __init__(self, limit: Any) -> None:
        super().__init__(limit)
        self.fraction = Fraction(self.limit)

    def valid(self, x: Any) -> bool:
        if type(x) is int and type(self.limit) is int:
            return x % self.limit == 0
        return (Fraction(x) / self.fraction).denominator == 1


# -- strings -------------------------------------------------------------------


class minLength(_Bound):
    __slots__ = ()
    name = "minLength"
    types = STRING
    want = ">= "

    def valid(self, x: Any) -> bool:
        return len(x) >= self.limit

    def message(self, x: Any) -> str:
        return f"minLength: got {len(x)} characters, want >= {self.limit}"


class maxLength(_Bound):
    __slots__ = ()
    name = "maxLength"
    types = STRING

    def valid(self, x: Any) -> bool:
        return len(x) <= self.limit

    def message(self, x: Any) -> str:
        return f"maxLength: got {len(x)} characters, want <= {self.limit}"


class pattern(Keyword):
    __slots__ = ("search", "source")
    name = "pattern"
    types = STRING

    def __init__(self, source: str) -> None:
        self.source = source
        self.search = regex_search(source)

    def valid(self, x: Any) -> bool:
        return self.search(x)

    def message(self, x: Any) -> str:
        return f"{show(x)} does not match pattern {show(self.source)}"


# -- arrays --------------------------------------------------------------------


class minItems(_Bound):
    __slots__ = ()
    name = "minItems"
    types = ARRAY

    def valid(self, x: Any) -> bool:
        return len(x) >= self.limit

    def message(self, x: Any) -> str:
        return f"minItems: got {len(x)}, want >= {self.limit}"


class maxItems(_Bound):
    __slots__ = ()
    name = "maxItems"
    types = ARRAY

    def valid(self, x: Any) -> bool:
        return len(x) <= self.limit

    def message(self, x: Any) -> str:
        return f"maxItems: got {len(x)}, want <= {self.limit}"


class uniqueItems(Keyword):
    __slots__ = ()
    name = "uniqueItems"
    types = ARRAY

    def valid(self, x: Any) -> bool:
        return len({json_key(item) for item in x}) == len(x)

    def message(self, x: Any) -> str:
        seen: dict[Any, int] = {}
        for i, item in enumerate(x):
            key = json_key(item)
            if key in seen:
                return f"items at {seen[key]} and {i} are equal"
            seen[key] = i
        return "items are not unique"


class items(Keyword):
    """Every item from ``start`` on (``items``, ``additionalItems``)."""

    __slots__ = ("name", "node", "start")
    types = ARRAY

    def __init__(self, name: str, node: Node, start: int) -> None:
        self.name = name
        self.node = node
        self.start = start

    def valid(self, x: Any) -> bool:
        check = self.node.valid
        for i in range(self.start, len(x)):  # noqa: SIM110
            if not check(x[i]):
                return False
        return True

    def evaluate(self, x: Any) -> Marks | None:
        if not self.valid(x):
            return None
        return ALL if len(x) > self.start else EMPTY

    def report(self, x: Any, path: Path, out: Report) -> Marks | None:
        node = self.node
        failed = False
        for i in range(self.start, len(x)):
            if node.report(x[i], (path, i), out) is None:
                failed = True
        if failed:
            return None
        return ALL if len(x) > self.start else EMPTY

    def children(self) -> list[tuple[Node, bool]]:
        return [(self.node, False)]


class prefixItems(Keyword):
    """Items by position (``prefixItems``, and the array form of ``items``)."""

    __slots__ = ("name", "nodes")
    types = ARRAY

    def __init__(self, name: str, nodes: list[Node]) -> None:
        self.name = name
        self.nodes = nodes

    def valid(self, x: Any) -> bool:
        for node, item in zip(self.nodes, x, strict=False):  # noqa: SIM110
            if not node.valid(item):
                return False
        return True

    def evaluate(self, x: Any) -> Marks | None:
        if not self.valid(x):
            return None
        return set(range(min(len(x), len(self.nodes))))

    def report(self, x: Any, path: Path, out: Report) -> Marks | None:
        failed = False
        for i, (node, item) in enumerate(zip(self.nodes, x, strict=False)):
            if node.report(item, (path, i), out) is None:
                failed = True
        return None if failed else set(range(min(len(x), len(self.nodes))))

    def children(self) -> list[tuple[Node, bool]]:
        return [(node, False) for node in self.nodes]


class contains(Keyword):
    """``contains``, with ``minContains``/``maxContains`` (2019-09 on).

    With ``evaluates`` (2020-12), the items it matches count as evaluated.
    """

    __slots__ = ("evaluates", "high", "low", "node")
    name = "contains"
    types = ARRAY

    def __init__(
        self, node: Node, low: int, high: int | None, *, evaluates: bool
    ) -> None:
        self.node = node
        self.low = low
        self.high = high
        self.evaluates = evaluates

    def valid(self, x: Any) -> bool:
        check = self.node.valid
        found = 0
        for item in x:
            if check(item):
                found += 1
                if found >= self.low and self.high is None:
                    return True
        return found >= self.low and (self.high is None or found <= self.high)

    def evaluate(self, x: Any) -> Marks | None:
        if not self.evaluates:
            return EMPTY if self.valid(x) else None
        check = self.node.valid
        matched = {i for i, item in enumerate(x) if check(item)}
        found = len(matched)
        if found < self.low or (self.high is not None and found > self.high):
            return None
        return matched

    def report(self, x: Any, path: Path, out: Report) -> Marks | None:
        marks = self.evaluate(x)
        if marks is None:
            out.add(path, self.message(x))
        return marks

    def message(self, x: Any) -> str:
        found = sum(1 for item in x if self.node.valid(item))
        if found < self.low:
            if self.low == 1:
                return "contains: no item matches the contains schema"
            return f"minContains: {found} items match contains, want >= {self.low}"
        return f"maxContains: {found} items match contains, want <= {self.high}"

    def children(self) -> list[tuple[Node, bool]]:
        return [(self.node, False)]


# -- objects -------------------------------------------------------------------


class minProperties(_Bound):
    __slots__ = ()
    name = "minProperties"
    types = OBJECT

    def valid(self, x: Any) -> bool:
        return len(x) >= self.limit

    def message(self, x: Any) -> str:
        return f"minProperties: got {len(x)}, want >= {self.limit}"


class maxProperties(_Bound):
    __slots__ = ()
    name = "maxProperties"
    types = OBJECT

    def valid(self, x: Any) -> bool:
        return len(x) <= self.limit

    def message(self, x: Any) -> str:
        return f"maxProperties: got {len(x)}, want <= {self.limit}"


def _missing(names: list[str], x: dict[str, Any]) -> str:
    missing = [name for name in names if name not in x]
    if len(missing) == 1:
        return f"missing property {show(missing[0])}"
    return "missing properties " + ", ".join(show(name) for name in missing)


class required(Keyword):
    __slots__ = ("names",)
    name = "required"
    types = OBJECT

    def __init__(self, names: list[str]) -> None:
        self.names = list(dict.fromkeys(names))

    def valid(self, x: Any) -> bool:
        for name in self.names:  # noqa: SIM110
            if name not in x:
                return False
        return True

    def message(self, x: Any) -> str:
        return _missing(self.names, x)


class dependentRequired(Keyword):
    """``dependentRequired``, and the array form of ``dependencies``."""

    __slots__ = ("name", "rules")
    types = OBJECT

    def __init__(self, name: str, rules: dict[str, list[str]]) -> None:
        self.name = name
        self.rules = list(rules.items())

    def valid(self, x: Any) -> bool:
        for key, names in self.rules:
            if key in x:
                for name in names:
                    if name not in x:
                        return False
        return True

    def report(self, x: Any, path: Path, out: Report) -> Marks | None:
        failed = False
        for key, names in self.rules:
            if key in x and any(name not in x for name in names):
                out.add(path, f"{_missing(names, x)}, required by {show(key)}")
                failed = True
        return None if failed else EMPTY


class dependentSchemas(Keyword):
    """``dependentSchemas``, and the schema form of ``dependencies``."""

    __slots__ = ("name", "rules")
    types = OBJECT

    def __init__(self, name: str, rules: dict[str, Node]) -> None:
        self.name = name
        self.rules = list(rules.items())

    def valid(self, x: Any) -> bool:
        for key, node in self.rules:  # noqa: SIM110
            if key in x and not node.valid(x):
                return False
        return True

    def evaluate(self, x: Any) -> Marks | None:
        marks: Marks = EMPTY
        for key, node in self.rules:
            if key in x:
                found = node.evaluate(x)
                if found is None:
                    return None
                marks = union(marks, found)
        return marks

    def report(self, x: Any, path: Path, out: Report) -> Marks | None:
        marks: Marks | None = EMPTY
        for key, node in self.rules:
            if key in x:
                marks = both(marks, node.report(x, path, out))
        return marks

    def children(self) -> list[tuple[Node, bool]]:
        return [(node, True) for _, node in self.rules]


class properties(Keyword):
    __slots__ = ("nodes",)
    name = "properties"
    types = OBJECT

    def __init__(self, nodes: dict[str, Node]) -> None:
        self.nodes = list(nodes.items())

    def valid(self, x: Any) -> bool:
        for name, node in self.nodes:
            if name in x and not node.valid(x[name]):
                return False
        return True

    def evaluate(self, x: Any) -> Marks | None:
        # No set of its own until a name matches: in a wide union most
        # branches evaluate nothing of a given object.
        names: Marks = EMPTY
        for name, node in self.nodes:
            if name in x:
                if not node.valid(x[name]):
                    return None
                if names is EMPTY:
                    names = {name}
                else:
                    names.add(name)  # type: ignore[union-attr]
        return names

    def report(self, x: Any, path: Path, out: Report) -> Marks | None:
        names: set[str] | None = set()
        for name, node in self.nodes:
            if name in x:
                if node.report(x[name], (path, name), out) is None:
                    names = None
                elif names is not None:
                    names.add(name)
        return names

    def children(self) -> list[tuple[Node, bool]]:
        return [(node, False) for _, node in self.nodes]


class patternProperties(Keyword):
    __slots__ = ("rules",)
    name = "patternProperties"
    types = OBJECT

    def __init__(self, rules: dict[str, Node]) -> None:
        self.rules = [(regex_search(p), node) for p, node in rules.items()]

    def valid(self, x: Any) -> bool:
        for key, value in x.items():
            for search, node in self.rules:
                if search(key) and not node.valid(value):
                    return False
        return True

    def evaluate(self, x: Any) -> Marks | None:
        names = set()
        for key, value in x.items():
            for search, node in self.rules:
                if search(key):
                    if not node.valid(value):
                        return None
                    names.add(key)
        return names

    def report(self, x: Any, path: Path, out: Report) -> Marks | None:
        names: set[str] | None = set()
        for key, value in x.items():
            for search, node in self.rules:
                if search(key):
                    if node.report(value, (path, key), out) is None:
                        names = None
                    elif names is not None:
                        names.add(key)
        return names

    def children(self) -> list[tuple[Node, bool]]:
        return [(node, False) for _, node in self.rules]


class additionalProperties(Keyword):
    __slots__ = ("known", "node", "patterns")
    name = "additionalProperties"
    types = OBJECT

    def __init__(self, node: Node, known: set[str], patterns: list[str]) -> None:
        self.node = node
        self.known = frozenset(known)
        self.patterns = [regex_search(p) for p in patterns]

    def _additional(self, key: str) -> bool:
        if key in self.known:
            return False
        return not any(search(key) for search in self.patterns)

    def valid(self, x: Any) -> bool:
        check = self.node.valid
        for key, value in x.items():
            if self._additional(key) and not check(value):
                return False
        return True

    def evaluate(self, x: Any) -> Marks | None:
        # Its siblings properties and patternProperties evaluate the rest.
        return ALL if self.valid(x) else None

    def report(self, x: Any, path: Path, out: Report) -> Marks | None:
        extra = [k for k in x if self._additional(k)]
        if self.node.schema is False and extra:
            out.add(path, f"additional properties {show_many(extra)} not allowed")
            return None
        failed = False
        for key in extra:
            if self.node.report(x[key], (path, key), out) is None:
                failed = True
        return None if failed else ALL

    def children(self) -> list[tuple[Node, bool]]:
        return [(self.node, False)]


class propertyNames(Keyword):
    __slots__ = ("node",)
    name = "propertyNames"
    types = OBJECT

    def __init__(self, node: Node) -> None:
        self.node = node

    def valid(self, x: Any) -> bool:
        check = self.node.valid
        for key in x:  # noqa: SIM110
            if not check(key):
                return False
        return True

    def report(self, x: Any, path: Path, out: Report) -> Marks | None:
        failed = False
        for key in x:
            if not self.node.valid(key):
                out.add(path, f"invalid property name {show(key)}")
                failed = True
        return None if failed else EMPTY

    def children(self) -> list[tuple[Node, bool]]:
        return [(self.node, False)]


# -- combinators ---------------------------------------------------------------


class allOf(Keyword):
    __slots__ = ("nodes",)
    name = "allOf"

    def __init__(self, nodes: list[Node]) -> None:
        self.nodes = nodes

    def valid(self, x: Any) -> bool:
        for node in self.nodes:  # noqa: SIM110
            if not node.valid(x):
                return False
        return True

    def evaluate(self, x: Any) -> Marks | None:
        marks: Marks = EMPTY
        for node in self.nodes:
            found = node.evaluate(x)
            if found is None:
                return None
            marks = union(marks, found)
        return marks

    def report(self, x: Any, path: Path, out: Report) -> Marks | None:
        marks: Marks | None = EMPTY
        for node in self.nodes:
            marks = both(marks, node.report(x, path, out))
        return marks

    def children(self) -> list[tuple[Node, bool]]:
        return [(node, True) for node in self.nodes]


class anyOf(allOf):
    __slots__ = ()
    name = "anyOf"

    def valid(self, x: Any) -> bool:
        for node in self.nodes:  # noqa: SIM110
            if node.valid(x):
                return True
        return False

    def evaluate(self, x: Any) -> Marks | None:
        # Each branch that passes adds what it evaluated, until nothing of x
        # is left to add: into a set of this call's own, grown in place (a
        # new set per branch costs quadratic copying in wide unions).
        marks: Marks | None = None
        gathered: set[Any] | None = None
        size = len(x) if type(x) in _CONTAINERS else 0
        for node in self.nodes:
            found = node.evaluate(x)
            if found is None:
                continue
            if found is ALL:
                return ALL
            if marks is None:
                marks = found
            elif found:
                if gathered is None:
                    marks = gathered = set(marks)  # type: ignore[arg-type]
                gathered |= found
            if len(marks) >= size:  # type: ignore[arg-type]
                break
        return marks

    def report(self, x: Any, path: Path, out: Report) -> Marks | None:
        marks = self.evaluate(x)
        if marks is None:
            out.add(path, f"anyOf: value matches none of {len(self.nodes)} schemas")
        return marks


class oneOf(anyOf):
    __slots__ = ()
    name = "oneOf"

    def valid(self, x: Any) -> bool:
        found = False
        for node in self.nodes:
            if node.valid(x):
                if found:
                    return False
                found = True
        return found

    def _matches(self, x: Any) -> list[tuple[int, Marks]]:
        matched = []
        for i, node in enumerate(self.nodes):
            found = node.evaluate(x)
            if found is not None:
                matched.append((i, found))
        return matched

    def evaluate(self, x: Any) -> Marks | None:
        marks: Marks | None = None
        nodes = self.nodes
        for i, node in enumerate(nodes):
            marks = node.evaluate(x)
            if marks is not None:
                # The others only need to fail: the fast path tells.
                for other in nodes[i + 1 :]:
                    if other.valid(x):
                        return None
                return marks
        return None

    def report(self, x: Any, path: Path, out: Report) -> Marks | None:
        matched = self._matches(x)
        if not matched:
            out.add(path, f"oneOf: value matches none of {len(self.nodes)} schemas")
        elif len(matched) > 1:
            first, second = matched[0][0], matched[1][0]
            out.add(path, f"oneOf: value matches schemas {first} and {second}")
        return matched[0][1] if len(matched) == 1 else None


class not_(Keyword):
    __slots__ = ("node",)
    name = "not"

    def __init__(self, node: Node) -> None:
        self.node = node

    def valid(self, x: Any) -> bool:
        return not self.node.valid(x)

    def message(self, x: Any) -> str:
        return "not: value must not match the schema"

    def children(self) -> list[tuple[Node, bool]]:
        return [(self.node, True)]


class if_(Keyword):
    """``if``/``then``/``else``: what ``if`` evaluated counts when it passes."""

    __slots__ = ("else_", "if_", "then")
    name = "if"

    def __init__(self, if_: Node, then: Node | None, else_: Node | None) -> None:
        self.if_ = if_
        self.then = then
        self.else_ = else_

    def valid(self, x: Any) -> bool:
        branch = self.then if self.if_.valid(x) else self.else_
        return branch is None or branch.valid(x)

    def evaluate(self, x: Any) -> Marks | None:
        marks = self.if_.evaluate(x)
        branch = self.else_ if marks is None else self.then
        marks = EMPTY if marks is None else marks
        if branch is None:
            return marks
        found = branch.evaluate(x)
        return None if found is None else union(marks, found)

    def report(self, x: Any, path: Path, out: Report) -> Marks | None:
        marks = self.if_.evaluate(x)
        branch = self.else_ if marks is None else self.then
        marks = EMPTY if marks is None else marks
        if branch is None:
            return marks
        return both(marks, branch.report(x, path, out))

    def children(self) -> list[tuple[Node, bool]]:
        nodes = [self.if_, self.then, self.else_]
        return [(node, True) for node in nodes if node is not None]


# -- references ----------------------------------------------------------------


class ref(Keyword):
    """``$ref``: apply the target, failing a cycle that revisits it in place."""

    __slots__ = ("dynamic", "node", "ref", "static")
    name = "$ref"

    def __init__(self, ref: str, node: Node, dynamic: bool) -> None:
        self.ref = ref
        self.node = node
        self.dynamic = dynamic  # push the target's resource on the dynamic scope
        self.static = True  # the target is node (no pick() call on the hot path)

    def pick(self) -> Node:
        return self.node

    def valid(self, x: Any) -> bool:
        # The hot path of recursive schemas: written out, no helper call.
        node = self.node if self.static else self.pick()
        key = (id(node), id(x))
        active = STATE.active
        if key in active:
            return False
        active.add(key)
        if not self.dynamic:
            try:
                return node.valid(x)
            finally:
                active.discard(key)
        scope = STATE.scope
        scope.append(node.base_uri)
        try:
            return node.valid(x)
        finally:
            active.discard(key)
            scope.pop()

    def evaluate(self, x: Any) -> Marks | None:
        # As valid, for the annotation path (one frame less than a helper).
        node = self.node if self.static else self.pick()
        key = (id(node), id(x))
        active = STATE.active
        if key in active:
            return None
        active.add(key)
        scope = STATE.scope
        if self.dynamic:
            scope.append(node.base_uri)
        try:
            return node.evaluate(x)
        finally:
            active.discard(key)
            if self.dynamic:
                scope.pop()

    def report(self, x: Any, path: Path, out: Report) -> Marks | None:
        node = self.node if self.static else self.pick()
        key = (id(node), id(x))
        active = STATE.active
        if key in active:
            out.add(path, f"{self.name} {show(self.ref)} revisits a schema in a cycle")
            return None
        active.add(key)
        scope = STATE.scope
        if self.dynamic:
            scope.append(node.base_uri)
        try:
            return node.report(x, path, out)
        finally:
            active.discard(key)
            if self.dynamic:
                scope.pop()

    def children(self) -> list[tuple[Node, bool]]:
        return [(self.node, True)]


class dynamicRef(ref):
    """``$dynamicRef``: the outermost resource in scope with the anchor wins."""

    __slots__ = ("by_uri",)
    name = "$dynamicRef"

    def __init__(self, ref: str, node: Node, by_uri: dict[str, Node]) -> None:
        super().__init__(ref, node, True)
        self.by_uri = by_uri
        self.static = False

    def pick(self) -> Node:
        for uri in STATE.scope:
            node = self.by_uri.get(uri)
            if node is not None:
                return node
        return self.node

    def children(self) -> list[tuple[Node, bool]]:
        return [(self.node, True)] + [(node, True) for node in self.by_uri.values()]


class recursiveRef(dynamicRef):
    """``$recursiveRef`` (2019-09): walk out while resources are anchored."""

    __slots__ = ()
    name = "$recursiveRef"

    def pick(self) -> Node:
        if not self.by_uri:
            return self.node
        picked = self.node
        for uri in reversed(STATE.scope):
            node = self.by_uri.get(uri)
            if node is None:
                break
            picked = node
        return picked


# -- unevaluated ---------------------------------------------------------------


class Final(ABC):
    """A keyword that applies its subschema to what its siblings left
    unevaluated: its node runs it last, with the siblings' marks.

    One pass over the siblings gives both their verdict and their marks
    (:meth:`Keyword.evaluate`), so a final keyword adds no walk of its own
    over the subschemas they apply.
    """

    __slots__ = ("node",)
    name = ""
    types: frozenset[type]

    def __init__(self, node: Node) -> None:
        self.node = node

    @abstractmethod
    def rest(self, x: Any, marks: Marks) -> list[Any]:
        """The property names or indices of ``x`` not in ``marks``."""

    @abstractmethod
    def refusal(self, rest: list[Any]) -> str:
        """The line for ``rest`` when the subschema is ``false``."""

    def valid(self, x: Any, marks: Marks) -> bool:
        if marks is ALL:
            return True
        check = self.node.valid
        for key in self.rest(x, marks):  # noqa: SIM110
            if not check(x[key]):
                return False
        return True

    def report(self, x: Any, marks: Marks, path: Path, out: Report) -> bool:
        rest = [] if marks is ALL else self.rest(x, marks)
        if self.node.schema is False and rest:
            out.add(path, self.refusal(rest))
            return False
        passed = True
        for key in rest:
            if self.node.report(x[key], (path, key), out) is None:
                passed = False
        return passed

    def children(self) -> list[tuple[Node, bool]]:
        return [(self.node, False)]


class unevaluatedProperties(Final):
    __slots__ = ()
    name = "unevaluatedProperties"
    types = OBJECT

    def rest(self, x: Any, marks: Marks) -> list[Any]:
        return [key for key in x if key not in marks]  # type: ignore[operator]

    def refusal(self, rest: list[Any]) -> str:
        return f"unevaluated properties {show_many(rest)} not allowed"


class unevaluatedItems(Final):
    __slots__ = ()
    name = "unevaluatedItems"
    types = ARRAY

    def rest(self, x: Any, marks: Marks) -> list[Any]:
        if complete(marks, x):
            return []
        return [i for i in range(len(x)) if i not in marks]  # type: ignore[operator]

    def refusal(self, rest: list[Any]) -> str:
        return f"unevaluated items at {show_many(rest)} not allowed"
