"""Narad's JSON Schema validator: a schema compiled once into small checks.

A :class:`Validator` compiles every subschema of a document into a
:class:`Node` holding its compiled keywords (:mod:`narad.schema.keywords`),
grouped by the Python type of instance each looks at, so validating a value
runs only the checks that apply to it. Compiling walks a work list, never the
call stack, so a long chain of references cannot exhaust it.

Validation answers with a boolean fast path first: that is the verdict. Only a
refused payload is walked again to explain it, and that walk stops once the
report would be larger than anyone can use (see :class:`Report`): the verdict
is the same either way.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from narad.errors import InvalidPayload
from narad.errors import InvalidSchema
from narad.quoting import QUOTE_LIMIT
from narad.schema import keywords as kw
from narad.schema.drafts import Draft
from narad.schema.jsontext import JSONTextError
from narad.schema.jsontext import TooDeep
from narad.schema.jsontext import loads
from narad.schema.resolver import SchemaIndex
from narad.schema.resolver import UnresolvableRef
from narad.schema.resolver import escape
from narad.schema.resolver import join_pointer

__all__ = ("MAX_DEPTH", "MESSAGE_LIMIT", "Node", "Report", "Validator")

MAX_DEPTH = 256
MESSAGE_LIMIT = 2048
# A full report past either bound is "very large": the 400 says so instead.
MAX_VIOLATIONS = 100
MAX_REPORT = 64 * 1024
TOO_MANY = "too many violations to report; validate a smaller part of the payload"
# Python frames one compiled step takes (node, keyword, reference helper).
_FRAMES_PER_STEP = 4
_RECURSION_CEILING = 200_000

# A location in the payload: None for the root, else (parent, token); turned
# into a JSON pointer only when a violation is written.
Path = tuple[Any, str | int] | None

_KINDS: dict[type, type] = {
    dict: dict,
    list: list,
    str: str,
    int: int,
    bool: bool,
    Decimal: Decimal,
    float: float,
    type(None): type(None),
}


def _kind(x: Any) -> type:
    if isinstance(x, bool):
        return bool
    for base in (dict, list, str, int, Decimal, float):
        if isinstance(x, base):
            return base
    return type(None) if x is None else object


def pointer_of(path: Path) -> str:
    tokens: list[str] = []
    while path is not None:
        path, token = path
        token = escape(str(token))
        # Keys come from the payload: quote at most so much of each.
        if len(token) > QUOTE_LIMIT:
            token = token[:QUOTE_LIMIT] + "…"
        tokens.append(token)
    return "".join("/" + token for token in reversed(tokens))


class _Enough(Exception):
    """The report passed its bounds; stop walking."""


class Report:
    """Violations found so far, one line each, within bounds."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.size = 0

    def add(self, path: Path, text: str) -> None:
        line = f"- at '{pointer_of(path)}': {text}"
        self.lines.append(line)
        self.size += len(line) + 1
        if len(self.lines) > MAX_VIOLATIONS or self.size > MAX_REPORT:
            raise _Enough


def _always(x: Any) -> bool:
    return True


def _never(x: Any) -> bool:
    return False


class Node:
    """One compiled subschema."""

    __slots__ = ("base_uri", "by_type", "keywords", "pointer", "schema", "valid")

    def __init__(self, pointer: str, schema: Any, base_uri: str) -> None:
        self.pointer = pointer
        self.schema = schema
        self.base_uri = base_uri
        self.keywords: list[kw.Keyword] = []
        self.by_type: dict[type, tuple[Callable[[Any], bool], ...]] = {}
        self.valid: Callable[[Any], bool] = _never

    def finish(self, keywords: list[kw.Keyword], resource: bool) -> None:
        self.keywords = keywords
        self.by_type = {
            kind: tuple(k.valid for k in keywords if k.types is None or kind in k.types)
            for kind in (*_KINDS, object)
        }
        if not keywords:
            self.valid = _always
        elif self.schema is False:
            self.valid = _never
        elif resource:
            self.valid = self._valid_in_scope
        else:
            self.valid = self._valid

    def _valid(self, x: Any) -> bool:
        checks = self.by_type.get(type(x))
        if checks is None:
            checks = self.by_type[_kind(x)]
        for check in checks:  # noqa: SIM110
            if not check(x):
                return False
        return True

    def _valid_in_scope(self, x: Any) -> bool:
        scope = kw.STATE.scope
        scope.append(self.base_uri)
        try:
            return self._valid(x)
        finally:
            scope.pop()

    def _applicable(self, x: Any) -> list[kw.Keyword]:
        kind = _kind(x)
        return [k for k in self.keywords if k.types is None or kind in k.types]

    def report(self, x: Any, path: Path, out: Report) -> None:
        for keyword in self._applicable(x):
            keyword.report(x, path, out)

    def props(self, x: Any) -> kw.Marks:
        marks: kw.Marks = set()
        for keyword in self._applicable(x):
            marks = kw.union(marks, keyword.props(x))
        return marks

    def marks(self, x: Any) -> kw.Marks:
        marks: kw.Marks = set()
        for keyword in self._applicable(x):
            marks = kw.union(marks, keyword.marks(x))
        return marks


class _Compiler:
    """Compiles the nodes of one document from a work list."""

    def __init__(
        self,
        index: SchemaIndex,
        formats: Mapping[str, Callable[[str], bool]],
    ) -> None:
        self.index = index
        self.draft = index.draft
        self.defined = index.draft.keywords
        self.formats = formats
        self.dynamic = index.has_dynamic_refs
        self.nodes: dict[str, Node] = {}
        self.pending: list[Node] = []

    def node_at(self, pointer: str, schema: Any) -> Node:
        node = self.nodes.get(pointer)
        if node is None:
            node = Node(pointer, schema, self.index.base_uri_at(pointer))
            self.nodes[pointer] = node
            self.pending.append(node)
        return node

    def run(self) -> Node:
        root = self.node_at("", self.index.document)
        while self.pending:
            node = self.pending.pop()
            resource = self.dynamic and self.index.resources.get(node.base_uri) == (
                node.pointer
            )
            node.finish(self.keywords(node), resource)
        return root

    def keywords(self, node: Node) -> list[kw.Keyword]:
        schema = node.schema
        if schema is True:
            return []
        if schema is False:
            return [kw.false_()]
        if self.draft.ref_overrides_siblings and "$ref" in schema:
            schema = {"$ref": schema["$ref"]}
        found: list[kw.Keyword] = []
        for name, value in schema.items():
            if name not in self.defined:
                continue
            build = getattr(self, "k_" + name.lstrip("$"), None)
            if build is not None:
                found.extend(build(node, value, schema))
        # unevaluated* look at their siblings' annotations, so they come last.
        found.sort(key=lambda k: isinstance(k, kw.unevaluatedProperties))
        return found

    def child(self, node: Node, value: Any, *tokens: str | int) -> Node:
        return self.node_at(join_pointer(node.pointer, *tokens), value)

    # -- any type

    def k_type(self, node: Node, value: Any, schema: dict) -> list[kw.Keyword]:
        return [kw.type_([value] if isinstance(value, str) else list(value))]

    def k_enum(self, node: Node, value: Any, schema: dict) -> list[kw.Keyword]:
        return [kw.enum(value)]

    def k_const(self, node: Node, value: Any, schema: dict) -> list[kw.Keyword]:
        return [kw.const(value)]

    def k_format(self, node: Node, value: Any, schema: dict) -> list[kw.Keyword]:
        check = self.formats.get(value)
        return [] if check is None else [kw.format_(value, check)]

    # -- numbers

    def k_minimum(self, node: Node, value: Any, schema: dict) -> list[kw.Keyword]:
        if schema.get("exclusiveMinimum") is True:
            return [kw.exclusiveMinimum(value)]
        return [kw.minimum(value)]

    def k_maximum(self, node: Node, value: Any, schema: dict) -> list[kw.Keyword]:
        if schema.get("exclusiveMaximum") is True:
            return [kw.exclusiveMaximum(value)]
        return [kw.maximum(value)]

    def k_exclusiveMinimum(self, node: Node, value: Any, schema: dict) -> list:
        # Draft-04's boolean form only modifies minimum (above).
        return [] if isinstance(value, bool) else [kw.exclusiveMinimum(value)]

    def k_exclusiveMaximum(self, node: Node, value: Any, schema: dict) -> list:
        return [] if isinstance(value, bool) else [kw.exclusiveMaximum(value)]

    def k_multipleOf(self, node: Node, value: Any, schema: dict) -> list:
        return [kw.multipleOf(value)]

    # -- strings

    def k_minLength(self, node: Node, value: Any, schema: dict) -> list:
        return [kw.minLength(value)]

    def k_maxLength(self, node: Node, value: Any, schema: dict) -> list:
        return [kw.maxLength(value)]

    def k_pattern(self, node: Node, value: Any, schema: dict) -> list:
        return [kw.pattern(value)]

    # -- arrays

    def k_minItems(self, node: Node, value: Any, schema: dict) -> list:
        return [kw.minItems(value)]

    def k_maxItems(self, node: Node, value: Any, schema: dict) -> list:
        return [kw.maxItems(value)]

    def k_uniqueItems(self, node: Node, value: Any, schema: dict) -> list:
        return [kw.uniqueItems()] if value is True else []

    def k_prefixItems(self, node: Node, value: Any, schema: dict) -> list:
        nodes = [self.child(node, v, "prefixItems", i) for i, v in enumerate(value)]
        return [kw.prefixItems("prefixItems", nodes)]

    def k_items(self, node: Node, value: Any, schema: dict) -> list:
        if isinstance(value, list):
            nodes = [self.child(node, v, "items", i) for i, v in enumerate(value)]
            return [kw.prefixItems("items", nodes)]
        start = 0
        if "prefixItems" in self.defined and isinstance(
            schema.get("prefixItems"), list
        ):
            start = len(schema["prefixItems"])
        return [kw.items("items", self.child(node, value, "items"), start)]

    def k_additionalItems(self, node: Node, value: Any, schema: dict) -> list:
        tuple_form = schema.get("items")
        if not isinstance(tuple_form, list):
            return []
        child = self.child(node, value, "additionalItems")
        return [kw.items("additionalItems", child, len(tuple_form))]

    def k_contains(self, node: Node, value: Any, schema: dict) -> list:
        low, high = 1, None
        if "minContains" in self.defined:
            low = schema.get("minContains", 1)
            high = schema.get("maxContains")
        marking = "prefixItems" in self.defined  # 2020-12 annotates contains
        child = self.child(node, value, "contains")
        return [kw.contains(child, low, high, marking)]

    # -- objects

    def k_minProperties(self, node: Node, value: Any, schema: dict) -> list:
        return [kw.minProperties(value)]

    def k_maxProperties(self, node: Node, value: Any, schema: dict) -> list:
        return [kw.maxProperties(value)]

    def k_required(self, node: Node, value: Any, schema: dict) -> list:
        return [kw.required(value)] if value else []

    def k_dependentRequired(self, node: Node, value: Any, schema: dict) -> list:
        return [kw.dependentRequired("dependentRequired", value)]

    def k_dependentSchemas(self, node: Node, value: Any, schema: dict) -> list:
        rules = {
            key: self.child(node, v, "dependentSchemas", key)
            for key, v in value.items()
        }
        return [kw.dependentSchemas("dependentSchemas", rules)]

    def k_dependencies(self, node: Node, value: Any, schema: dict) -> list:
        names = {k: v for k, v in value.items() if isinstance(v, list)}
        rules = {
            key: self.child(node, v, "dependencies", key)
            for key, v in value.items()
            if not isinstance(v, list)
        }
        return [
            kw.dependentRequired("dependencies", names),
            kw.dependentSchemas("dependencies", rules),
        ]

    def k_properties(self, node: Node, value: Any, schema: dict) -> list:
        nodes = {k: self.child(node, v, "properties", k) for k, v in value.items()}
        return [kw.properties(nodes)]

    def k_patternProperties(self, node: Node, value: Any, schema: dict) -> list:
        rules = {
            p: self.child(node, v, "patternProperties", p) for p, v in value.items()
        }
        return [kw.patternProperties(rules)]

    def k_additionalProperties(self, node: Node, value: Any, schema: dict) -> list:
        known = schema.get("properties", {}) if "properties" in self.defined else {}
        patterns = (
            schema.get("patternProperties", {})
            if "patternProperties" in self.defined
            else {}
        )
        child = self.child(node, value, "additionalProperties")
        return [kw.additionalProperties(child, set(known), list(patterns))]

    def k_propertyNames(self, node: Node, value: Any, schema: dict) -> list:
        return [kw.propertyNames(self.child(node, value, "propertyNames"))]

    # -- combinators

    def _branches(self, node: Node, name: str, value: list) -> list[Node]:
        return [self.child(node, v, name, i) for i, v in enumerate(value)]

    def k_allOf(self, node: Node, value: Any, schema: dict) -> list:
        return [kw.allOf(self._branches(node, "allOf", value))]

    def k_anyOf(self, node: Node, value: Any, schema: dict) -> list:
        return [kw.anyOf(self._branches(node, "anyOf", value))]

    def k_oneOf(self, node: Node, value: Any, schema: dict) -> list:
        return [kw.oneOf(self._branches(node, "oneOf", value))]

    def k_not(self, node: Node, value: Any, schema: dict) -> list:
        return [kw.not_(self.child(node, value, "not"))]

    def k_if(self, node: Node, value: Any, schema: dict) -> list:
        then = else_ = None
        if "then" in schema:
            then = self.child(node, schema["then"], "then")
        if "else" in schema:
            else_ = self.child(node, schema["else"], "else")
        return [kw.if_(self.child(node, value, "if"), then, else_)]

    # -- references

    def _target(self, node: Node, target: Any) -> Node:
        return self.node_at(target.pointer, target.schema)

    def k_ref(self, node: Node, value: Any, schema: dict) -> list:
        target = self._resolve(lambda: self.index.resolve(value, node.base_uri))
        return [kw.ref(value, self._target(node, target), self.dynamic)]

    def k_dynamicRef(self, node: Node, value: Any, schema: dict) -> list:
        index = self.index
        targets = self._resolve(lambda: index.dynamic_targets(value, node.base_uri))
        first = self._target(node, targets[0])
        name = index.dynamic_anchor_name(value, targets[0])
        by_uri: dict[str, Node] = {}
        if name is not None:
            for key, pointer in index.dynamic_anchors.items():
                uri, _, anchor = key.rpartition("#")
                if anchor == name:
                    by_uri[uri] = self.node_at(pointer, index.subschemas[pointer])
        return [kw.dynamicRef(value, first, by_uri)]

    def k_recursiveRef(self, node: Node, value: Any, schema: dict) -> list:
        targets = self._resolve(lambda: self.index.recursive_targets(node.base_uri))
        first = self._target(node, targets[0])
        by_uri: dict[str, Node] = {}
        if len(targets) > 1 or targets[0].pointer in self.index.recursive_anchors:
            for target in targets:
                by_uri[target.base_uri] = self._target(node, target)
        return [kw.recursiveRef(value, first, by_uri)]

    def _resolve(self, how: Callable[[], Any]) -> Any:
        try:
            return how()
        except UnresolvableRef as exc:
            raise InvalidSchema(f"schema: {exc}") from None

    # -- unevaluated

    def k_unevaluatedProperties(self, node: Node, value: Any, schema: dict) -> list:
        child = self.child(node, value, "unevaluatedProperties")
        return [kw.unevaluatedProperties(child, node)]

    def k_unevaluatedItems(self, node: Node, value: Any, schema: dict) -> list:
        return [kw.unevaluatedItems(self.child(node, value, "unevaluatedItems"), node)]


def _steps_per_level(nodes: dict[str, Node]) -> int:
    """Bound the compiled steps one instance level can stack up.

    Steps at one instance follow same-instance edges (combinators,
    references); a reference cycle is cut on its second visit, so each
    strongly connected component counts twice its size. The bound is the
    heaviest path through the components, plus the step into a child value.
    """
    graph = {
        id(node): [
            id(child) for k in node.keywords for child, same in k.children() if same
        ]
        for node in nodes.values()
    }
    components = _components(graph)
    weight: dict[int, int] = {}
    for members in components:  # reverse topological order: sinks first
        member_set = set(members)
        cyclic = len(members) > 1 or any(m in graph[m] for m in members)
        own = 2 * len(members) if cyclic else 1
        below = 0
        for m in members:
            for child in graph[m]:
                if child not in member_set:
                    below = max(below, weight[child])
        for m in members:
            weight[m] = own + below
    return max(weight.values(), default=0) + 1


def _components(graph: dict[int, list[int]]) -> list[list[int]]:
    """Tarjan's strongly connected components, iteratively, sinks first."""
    index: dict[int, int] = {}
    low: dict[int, int] = {}
    stack: list[int] = []
    on_stack: set[int] = set()
    result: list[list[int]] = []
    for start in graph:
        if start in index:
            continue
        work = [(start, 0)]
        while work:
            v, i = work.pop()
            if i == 0:
                index[v] = low[v] = len(index)
                stack.append(v)
                on_stack.add(v)
            edges = graph[v]
            if i < len(edges):
                work.append((v, i + 1))
                w = edges[i]
                if w not in index:
                    work.append((w, 0))
                elif w in on_stack:
                    low[v] = min(low[v], index[w])
                continue
            if low[v] == index[v]:
                members = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    members.append(w)
                    if w == v:
                        break
                result.append(members)
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[v])
    return result


class Validator:
    """A schema document compiled once; validates payloads against it.

    Args:
        document: The parsed schema (``jsontext.loads``), a dict or a bool.
        draft: The draft the document is written in.
        drafts: Every known draft by ``$schema`` URI (kept for callers that
            pick the draft from the document).
        formats: Format checkers by format name; unknown formats are ignored.
        schema_uri: The schema's URI, e.g. ``narad://schema/payments/1``; it
            is the document's base URI and is named in error messages.

    Raises:
        InvalidSchema: a reference leads nowhere in the document, or a pattern
            is not valid RE2 (registration refuses both first).
    """

    def __init__(
        self,
        document: Any,
        *,
        draft: Draft,
        drafts: Mapping[str, Draft],
        formats: Mapping[str, Callable[[str], bool]],
        schema_uri: str,
    ) -> None:
        self.document = document
        self.draft = draft
        self.drafts = drafts
        self.schema_uri = schema_uri
        self.index = SchemaIndex(document, draft=draft, base_uri=schema_uri)
        compiler = _Compiler(self.index, formats)
        try:
            self.root = compiler.run()
        except kw.re2.error as exc:
            raise InvalidSchema(f"schema: pattern is not valid RE2: {exc}") from None
        self.nodes = compiler.nodes
        self.steps_per_level = _steps_per_level(self.nodes)
        # The deepest payload whose validation fits under the recursion
        # ceiling; only schemas of thousands of chained references go below 256.
        per_level = self.steps_per_level * _FRAMES_PER_STEP
        self.max_depth = min(MAX_DEPTH, (_RECURSION_CEILING - 1000) // per_level - 1)
        self._header = f"schema: jsonschema validation failed with '{schema_uri}#'"

    def validate(self, payload: bytes) -> Any:
        """Parse ``payload`` as one JSON text and validate it; return the value.

        Raises:
            InvalidPayload: the payload is not one JSON text (nesting over 256
                levels included) or the schema refuses it; the message names
                each violation, cut at 2 KiB.
        """
        try:
            value = loads(payload, max_depth=MAX_DEPTH)
        except TooDeep:
            raise InvalidPayload(
                f"payload nests deeper than {MAX_DEPTH} levels"
            ) from None
        except JSONTextError as exc:
            raise InvalidPayload(f"payload is not one JSON text: {exc}") from None
        depth = min(MAX_DEPTH, payload.count(b"[") + payload.count(b"{"))
        if depth > self.max_depth:
            raise InvalidPayload(
                f"schema: payload nests deeper than the {self.max_depth} levels "
                "this schema can validate"
            )
        self._ensure_stack(depth)
        if not self.root.valid(value):
            raise InvalidPayload(self._explain(value))
        return value

    def is_valid(self, value: Any) -> bool:
        """The verdict for an already parsed value (at most ``max_depth`` deep)."""
        self._ensure_stack(self.max_depth)
        return self.root.valid(value)

    def _ensure_stack(self, depth: int) -> None:
        # Python frames grow with payload depth times the in-place steps of
        # the schema; raise the limit to what this validation can need.
        needed = (depth + 1) * self.steps_per_level * _FRAMES_PER_STEP + 1000
        if sys.getrecursionlimit() < needed:
            sys.setrecursionlimit(needed)

    def _explain(self, value: Any) -> str:
        report = Report()
        try:
            self.root.report(value, None, report)
        except _Enough:
            return f"{self._header}\n- {TOO_MANY}"
        lines = report.lines or ["- at '': value does not match the schema"]
        return _cut("\n".join([self._header, *lines]))


def _cut(message: str) -> str:
    limit = MESSAGE_LIMIT - len(InvalidPayload.prefix)
    # A lone surrogate quoted from the payload shows as its escape (\ud800).
    data = message.encode("utf-8", "backslashreplace")
    if len(data) <= limit:
        return data.decode()
    return data[:limit].decode(errors="ignore")
