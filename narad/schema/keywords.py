"""Compiled keywords: one small class per JSON Schema keyword, named like it.

A keyword is compiled once from its value in the schema. At validation time
:meth:`Keyword.valid` answers for one instance (the fast path, no allocation
beyond what the check needs) and :meth:`Keyword.report` explains a failure,
walking only as far as a :class:`~narad.schema.validator.Report` allows.
``types`` lists the Python types of instances the keyword looks at; a node
skips the others, the way python-jsonschema's keyword functions return early.

Numbers are ``int`` or :class:`~decimal.Decimal` (exactly as written) and are
compared exactly; ``multipleOf`` divides with :class:`~fractions.Fraction`.

Loops over subschemas are written out (``noqa: SIM110``) rather than passed
to ``all()``/``any()``: a call through a C builtin costs C stack on every
nested level and a generator per call, while plain Python calls do neither.
"""

from __future__ import annotations

import threading
from abc import ABC
from abc import abstractmethod
from collections.abc import Callable
from decimal import Decimal
from fractions import Fraction
from typing import TYPE_CHECKING
from typing import Any

import re2
from re2 import _re2

from narad.quoting import QUOTE_LIMIT
from narad.schema.jsontext import json_key

if TYPE_CHECKING:
    from narad.schema.validator import Node
    from narad.schema.validator import Path
    from narad.schema.validator import Report

NUMBER_TYPES = frozenset({int, Decimal, float})
OBJECT = frozenset({dict})
ARRAY = frozenset({list})
STRING = frozenset({str})

# Everything "evaluated" (an annotation set standing for all names/indices).
ALL = True
Marks = set[Any] | bool

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
_UNANCHORED = _re2.RE2.Anchor.UNANCHORED


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


def compile_pattern(pattern: str) -> Any:
    """Compile an RE2 pattern quietly (RE2 would log a refusal to stderr)."""
    options = re2.Options()
    options.log_errors = False
    return re2.compile(pattern, options)


def regex_search(pattern: str) -> Callable[[str], bool]:
    """A function telling whether ``pattern`` (RE2) matches anywhere in a string.

    The public ``search`` maps byte offsets back to characters and builds a
    match object on every call (about 4 us for a short string); asking the
    compiled RE2 object directly for a match in the UTF-8 bytes costs about
    0.5 us, and a yes/no is all validation needs.
    """
    compiled = compile_pattern(pattern)
    regexp = getattr(compiled, "_regexp", None)
    if regexp is None:  # a google-re2 without the internal object
        return lambda text: compiled.search(text) is not None
    match = regexp.Match
    unanchored = _UNANCHORED

    def search(text: str) -> bool:
        data = text.encode("utf-8", "surrogatepass")
        return match(unanchored, data, 0, len(data))[0][0] >= 0

    return search


def union(a: Marks, b: Marks) -> Marks:
    if a is ALL or b is ALL:
        return ALL
    if not b:
        return a
    if not a:
        return b
    return a | b  # type: ignore[operator]


class Keyword(ABC):
    """One compiled keyword of one subschema."""

    __slots__ = ()
    name = ""
    types: frozenset[type] | None = None

    @abstractmethod
    def valid(self, x: Any) -> bool:
        """Whether ``x`` passes this keyword (``x`` already of ``types``)."""

    def message(self, x: Any) -> str:
        # Assertions say what failed; applicators override ``report`` instead
        # and never get here.
        return f"{self.name}: value not accepted"

    def report(self, x: Any, path: Path, out: Report) -> None:
        if not self.valid(x):
            out.add(path, self.message(x))

    def children(self) -> list[tuple[Node, bool]]:
        """Subschema nodes this keyword applies, each with "same instance"."""
        return []

    def props(self, x: Any) -> Marks:
        """Property names of object ``x`` this keyword evaluates."""
        return set()

    def marks(self, x: Any) -> Marks:
        """Indices of array ``x`` this keyword evaluates."""
        return set()


# -- any type ------------------------------------------------------------------


class type_(Keyword):
    __slots__ = ("allowed", "integer", "names")
    name = "type"

    def __init__(self, names: list[str]) -> None:
        self.names = names
        self.allowed = frozenset().union(*(JSON_TYPES[n] for n in names))
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


class false_(Keyword):
    __slots__ = ()
    name = "false"

    def valid(self, x: Any) -> bool:
        return False

    def message(self, x: Any) -> str:
        return "false schema allows nothing"


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

    def report(self, x: Any, path: Path, out: Report) -> None:
        node = self.node
        for i in range(self.start, len(x)):
            node.report(x[i], (path, i), out)

    def children(self) -> list[tuple[Node, bool]]:
        return [(self.node, False)]

    def marks(self, x: Any) -> Marks:
        return ALL if len(x) > self.start else set()


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

    def report(self, x: Any, path: Path, out: Report) -> None:
        for i, (node, item) in enumerate(zip(self.nodes, x, strict=False)):
            node.report(item, (path, i), out)

    def children(self) -> list[tuple[Node, bool]]:
        return [(node, False) for node in self.nodes]

    def marks(self, x: Any) -> Marks:
        return set(range(min(len(x), len(self.nodes))))


class contains(Keyword):
    __slots__ = ("high", "low", "marking", "node")
    name = "contains"
    types = ARRAY

    def __init__(self, node: Node, low: int, high: int | None, marking: bool) -> None:
        self.node = node
        self.low = low
        self.high = high
        self.marking = marking

    def valid(self, x: Any) -> bool:
        check = self.node.valid
        found = 0
        for item in x:
            if check(item):
                found += 1
                if found >= self.low and self.high is None:
                    return True
        return found >= self.low and (self.high is None or found <= self.high)

    def message(self, x: Any) -> str:
        found = sum(1 for item in x if self.node.valid(item))
        if found < self.low:
            if self.low == 1:
                return "contains: no item matches the contains schema"
            return f"minContains: {found} items match contains, want >= {self.low}"
        return f"maxContains: {found} items match contains, want <= {self.high}"

    def children(self) -> list[tuple[Node, bool]]:
        return [(self.node, False)]

    def marks(self, x: Any) -> Marks:
        if not self.marking:
            return set()
        return {i for i, item in enumerate(x) if self.node.valid(item)}


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

    def report(self, x: Any, path: Path, out: Report) -> None:
        for key, names in self.rules:
            if key in x and any(name not in x for name in names):
                out.add(path, f"{_missing(names, x)}, required by {show(key)}")


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

    def report(self, x: Any, path: Path, out: Report) -> None:
        for key, node in self.rules:
            if key in x:
                node.report(x, path, out)

    def children(self) -> list[tuple[Node, bool]]:
        return [(node, True) for _, node in self.rules]

    def props(self, x: Any) -> Marks:
        marks: Marks = set()
        for key, node in self.rules:
            if key in x:
                marks = union(marks, node.props(x))
        return marks

    def marks(self, x: Any) -> Marks:
        return set()


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

    def report(self, x: Any, path: Path, out: Report) -> None:
        for name, node in self.nodes:
            if name in x:
                node.report(x[name], (path, name), out)

    def children(self) -> list[tuple[Node, bool]]:
        return [(node, False) for _, node in self.nodes]

    def props(self, x: Any) -> Marks:
        return {name for name, _ in self.nodes if name in x}


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

    def report(self, x: Any, path: Path, out: Report) -> None:
        for key, value in x.items():
            for search, node in self.rules:
                if search(key):
                    node.report(value, (path, key), out)

    def children(self) -> list[tuple[Node, bool]]:
        return [(node, False) for _, node in self.rules]

    def props(self, x: Any) -> Marks:
        return {k for k in x if any(search(k) for search, _ in self.rules)}


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

    def report(self, x: Any, path: Path, out: Report) -> None:
        extra = [k for k in x if self._additional(k)]
        if self.node.schema is False and extra:
            out.add(path, f"additional properties {show_many(extra)} not allowed")
            return
        for key in extra:
            self.node.report(x[key], (path, key), out)

    def children(self) -> list[tuple[Node, bool]]:
        return [(self.node, False)]

    def props(self, x: Any) -> Marks:
        return ALL


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

    def report(self, x: Any, path: Path, out: Report) -> None:
        for key in x:
            if not self.node.valid(key):
                out.add(path, f"invalid property name {show(key)}")

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

    def report(self, x: Any, path: Path, out: Report) -> None:
        for node in self.nodes:
            node.report(x, path, out)

    def children(self) -> list[tuple[Node, bool]]:
        return [(node, True) for node in self.nodes]

    def props(self, x: Any) -> Marks:
        marks: Marks = set()
        for node in self.nodes:
            marks = union(marks, node.props(x))
        return marks

    def marks(self, x: Any) -> Marks:
        marks: Marks = set()
        for node in self.nodes:
            marks = union(marks, node.marks(x))
        return marks


class anyOf(allOf):
    __slots__ = ()
    name = "anyOf"

    def valid(self, x: Any) -> bool:
        for node in self.nodes:  # noqa: SIM110
            if node.valid(x):
                return True
        return False

    def report(self, x: Any, path: Path, out: Report) -> None:
        if not self.valid(x):
            out.add(path, f"anyOf: value matches none of {len(self.nodes)} schemas")

    def props(self, x: Any) -> Marks:
        marks: Marks = set()
        for node in self.nodes:
            if node.valid(x):
                marks = union(marks, node.props(x))
        return marks

    def marks(self, x: Any) -> Marks:
        marks: Marks = set()
        for node in self.nodes:
            if node.valid(x):
                marks = union(marks, node.marks(x))
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

    def report(self, x: Any, path: Path, out: Report) -> None:
        matched = [i for i, node in enumerate(self.nodes) if node.valid(x)]
        if not matched:
            out.add(path, f"oneOf: value matches none of {len(self.nodes)} schemas")
        elif len(matched) > 1:
            out.add(path, f"oneOf: value matches schemas {matched[0]} and {matched[1]}")


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
    __slots__ = ("else_", "if_", "then")
    name = "if"

    def __init__(self, if_: Node, then: Node | None, else_: Node | None) -> None:
        self.if_ = if_
        self.then = then
        self.else_ = else_

    def _branch(self, x: Any) -> tuple[bool, Node | None]:
        matched = self.if_.valid(x)
        return matched, self.then if matched else self.else_

    def valid(self, x: Any) -> bool:
        branch = self._branch(x)[1]
        return branch is None or branch.valid(x)

    def report(self, x: Any, path: Path, out: Report) -> None:
        branch = self._branch(x)[1]
        if branch is not None:
            branch.report(x, path, out)

    def children(self) -> list[tuple[Node, bool]]:
        nodes = [self.if_, self.then, self.else_]
        return [(node, True) for node in nodes if node is not None]

    def props(self, x: Any) -> Marks:
        matched, branch = self._branch(x)
        marks = self.if_.props(x) if matched else set()
        return marks if branch is None else union(marks, branch.props(x))

    def marks(self, x: Any) -> Marks:
        matched, branch = self._branch(x)
        marks = self.if_.marks(x) if matched else set()
        return marks if branch is None else union(marks, branch.marks(x))


# -- references ----------------------------------------------------------------


class ref(Keyword):
    """``$ref``: apply the target, failing a cycle that revisits it in place."""

    __slots__ = ("dynamic", "node", "ref")
    name = "$ref"

    def __init__(self, ref: str, node: Node, dynamic: bool) -> None:
        self.ref = ref
        self.node = node
        self.dynamic = dynamic  # push the target's resource on the dynamic scope

    def pick(self) -> Node:
        return self.node

    def _apply(self, x: Any, how: Callable[[Node], Any], cycle: Any) -> Any:
        node = self.pick()
        key = (id(node), id(x))
        active = STATE.active
        if key in active:
            return cycle
        active.add(key)
        scope = STATE.scope
        if self.dynamic:
            scope.append(node.base_uri)
        try:
            return how(node)
        finally:
            active.discard(key)
            if self.dynamic:
                scope.pop()

    def valid(self, x: Any) -> bool:
        # _apply inlined: this is the hot path of recursive schemas.
        node = self.pick()
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

    def report(self, x: Any, path: Path, out: Report) -> None:
        if self._apply(x, lambda node: node.report(x, path, out), True) is True:
            out.add(path, f"{self.name} {show(self.ref)} revisits a schema in a cycle")

    def children(self) -> list[tuple[Node, bool]]:
        return [(self.node, True)]

    def props(self, x: Any) -> Marks:
        return self._apply(x, lambda node: node.props(x), set())

    def marks(self, x: Any) -> Marks:
        return self._apply(x, lambda node: node.marks(x), set())


class dynamicRef(ref):
    """``$dynamicRef``: the outermost resource in scope with the anchor wins."""

    __slots__ = ("by_uri", "others")
    name = "$dynamicRef"

    def __init__(self, ref: str, node: Node, by_uri: dict[str, Node]) -> None:
        super().__init__(ref, node, True)
        self.by_uri = by_uri

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


class unevaluatedProperties(Keyword):
    __slots__ = ("node", "owner")
    name = "unevaluatedProperties"
    types = OBJECT

    def __init__(self, node: Node, owner: Node) -> None:
        self.node = node
        self.owner = owner

    def _unevaluated(self, x: Any) -> list[str]:
        seen: Marks = set()
        for keyword in self.owner.keywords:
            if keyword is not self:
                seen = union(seen, keyword.props(x))
                if seen is ALL:
                    return []
        return [key for key in x if key not in seen]  # type: ignore[operator]

    def valid(self, x: Any) -> bool:
        check = self.node.valid
        for key in self._unevaluated(x):  # noqa: SIM110
            if not check(x[key]):
                return False
        return True

    def report(self, x: Any, path: Path, out: Report) -> None:
        extra = self._unevaluated(x)
        if self.node.schema is False and extra:
            out.add(path, f"unevaluated properties {show_many(extra)} not allowed")
            return
        for key in extra:
            self.node.report(x[key], (path, key), out)

    def children(self) -> list[tuple[Node, bool]]:
        return [(self.node, False)]

    def props(self, x: Any) -> Marks:
        return ALL


class unevaluatedItems(unevaluatedProperties):
    __slots__ = ()
    name = "unevaluatedItems"
    types = ARRAY

    def _unevaluated(self, x: Any) -> list[int]:  # type: ignore[override]
        seen: Marks = set()
        for keyword in self.owner.keywords:
            if keyword is not self:
                seen = union(seen, keyword.marks(x))
                if seen is ALL:
                    return []
        return [i for i in range(len(x)) if i not in seen]  # type: ignore[operator]

    def report(self, x: Any, path: Path, out: Report) -> None:
        extra = self._unevaluated(x)
        if self.node.schema is False and extra:
            out.add(path, f"unevaluated items at {show_many(extra)} not allowed")
            return
        for i in extra:
            self.node.report(x[i], (path, i), out)

    def props(self, x: Any) -> Marks:
        return set()

    def marks(self, x: Any) -> Marks:
        return ALL
