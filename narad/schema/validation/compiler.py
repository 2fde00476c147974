"""Compiling a schema document into nodes of keyword checks.

Every subschema of a document becomes a :class:`Node` holding its compiled
keywords (:mod:`narad.schema.validation.keywords`), grouped by the Python type of
instance each looks at, so validating a value runs only the checks that apply
to it. Compiling walks a work list, never the call stack, so a long chain of
references cannot exhaust it.

Which keyword compiles to what is the :data:`HANDLERS` table: one function
per keyword, the way python-jsonschema's ``validators={...}`` maps a keyword
to its function. A keyword the document's draft does not define is an
annotation and is not looked up; one with no handler (``title``, ``$defs``)
checks nothing. What a draft does differently with a keyword it shares is
read from the :class:`~narad.schema.drafts.Draft`'s flags.
"""

from __future__ import annotations

from collections.abc import Callable
from collections.abc import Mapping
from decimal import Decimal
from typing import TYPE_CHECKING
from typing import Any

from narad.errors import InvalidSchema
from narad.schema.graphs import strongly_connected_components
from narad.schema.patterns import PatternError
from narad.schema.resolver import SchemaIndex
from narad.schema.resolver import Target
from narad.schema.resolver import UnresolvableRef
from narad.schema.resolver import join_pointer
from narad.schema.validation import keywords as kw

if TYPE_CHECKING:
    from narad.schema.validation.validator import Path
    from narad.schema.validation.validator import Report

__all__ = ("HANDLERS", "Compiler", "Node", "steps_per_level")

_KINDS = (dict, list, str, int, bool, Decimal, float, type(None))


def _kind(x: Any) -> type:
    if isinstance(x, bool):
        return bool
    for base in (dict, list, str, int, Decimal, float):
        if isinstance(x, base):
            return base
    return type(None) if x is None else object


def _always(x: Any) -> bool:
    return True


def _never(x: Any) -> bool:
    return False


def _nothing_evaluated(x: Any) -> kw.Marks | None:
    return kw.EMPTY


def _fails(x: Any) -> kw.Marks | None:
    return None


# In Node.by_type: this kind of value is checked through Node.evaluate.
_EVALUATE: tuple[Any, ...] = (None,)  # never a tuple of checks


class Node:
    """One compiled subschema.

    ``valid`` is the verdict alone (the fast path). ``evaluate`` is the
    verdict with the properties or items the subschema evaluated (None for a
    failure), asked only by ``unevaluated*`` and what they apply in place; a
    node with an ``unevaluated*`` keyword answers ``valid`` through it for the
    kind of value that keyword looks at.
    """

    __slots__ = (
        "base_uri",
        "by_type",
        "evaluate",
        "evaluating",
        "finals",
        "keywords",
        "pointer",
        "resource",
        "schema",
        "valid",
    )

    def __init__(self, pointer: str, schema: Any, base_uri: str) -> None:
        self.pointer = pointer
        self.schema = schema
        self.base_uri = base_uri
        self.resource = False
        self.keywords: list[kw.Keyword] = []
        self.finals: list[kw.Final] = []
        self.by_type: dict[type, tuple[Callable[[Any], bool], ...]] = {}
        # Built on first use: most nodes are never asked for annotations.
        self.evaluating: (
            dict[type, tuple[tuple[Any, ...], tuple[kw.Final, ...]]] | None
        ) = None
        self.valid: Callable[[Any], bool] = _never
        self.evaluate: Callable[[Any], kw.Marks | None] = _fails

    def finish(
        self, keywords: list[kw.Keyword], finals: list[kw.Final], resource: bool
    ) -> None:
        self.keywords, self.finals, self.resource = keywords, finals, resource
        only = keywords[0] if len(keywords) == 1 and not finals else None
        if self.schema is False:
            self.valid, self.evaluate = _never, _fails
        elif not keywords and not finals:
            self.valid, self.evaluate = _always, _nothing_evaluated
        elif resource:
            self.valid, self.evaluate = self._valid_in_scope, self._evaluate_in_scope
            self.by_type = self._layout(evaluating=False)
        elif only is not None and only.types is None:
            # One keyword for every kind of value (a bare $ref, an anyOf):
            # the node is that keyword, a call less per value.
            self.valid, self.evaluate = only.valid, only.evaluate
        else:
            self.valid, self.evaluate = self._valid, self._evaluate
            self.by_type = self._layout(evaluating=False)

    def _layout(self, *, evaluating: bool) -> dict[type, Any]:
        """The checks each kind of value runs: for ``valid`` (``by_type``),
        or for ``evaluate`` (``evaluating``: checks and final keywords).

        Kinds that run the same checks share one entry: a validator lives as
        long as its topic is produced to, and most nodes tell one or two
        kinds of value apart from the rest.
        """
        keywords, finals = self.keywords, self.finals
        # One bound method per keyword, however many entries hold it.
        methods = [k.evaluate if evaluating else k.valid for k in keywords]
        layout: dict[type, Any] = {}
        shared: dict[tuple[bool, ...], Any] = {}
        for kind in (*_KINDS, object):
            which = tuple(
                [k.types is None or kind in k.types for k in keywords]
                + [kind in f.types for f in finals]
            )
            entry = shared.get(which)
            if entry is None:
                checks = tuple(m for m, on in zip(methods, which, strict=False) if on)
                last = tuple(
                    f
                    for f, on in zip(finals, which[len(keywords) :], strict=True)
                    if on
                )
                # For valid, a value a final keyword looks at needs its
                # siblings' marks: it goes through evaluate.
                valid = _EVALUATE if last else checks
                entry = shared[which] = (checks, last) if evaluating else valid
            layout[kind] = entry
        return layout

    def _valid(self, x: Any) -> bool:
        checks = self.by_type.get(type(x))
        if checks is None:
            checks = self.by_type[_kind(x)]
        if checks is _EVALUATE:
            return self._evaluate(x) is not None
        for check in checks:  # noqa: SIM110
            if not check(x):
                return False
        return True

    def _evaluate(self, x: Any) -> kw.Marks | None:
        evaluating = self.evaluating
        if evaluating is None:
            evaluating = self.evaluating = self._layout(evaluating=True)
        found = evaluating.get(type(x))
        checks, finals = found if found is not None else evaluating[_kind(x)]
        marks: kw.Marks = kw.EMPTY
        for check in checks:
            more = check(x)
            if more is None:
                return None
            if more:
                marks = kw.union(marks, more)
        for final in finals:
            if not final.valid(x, marks):
                return None
            marks = kw.ALL
        return marks

    def _valid_in_scope(self, x: Any) -> bool:
        scope = kw.STATE.scope
        scope.append(self.base_uri)
        try:
            return self._valid(x)
        finally:
            scope.pop()

    def _evaluate_in_scope(self, x: Any) -> kw.Marks | None:
        scope = kw.STATE.scope
        scope.append(self.base_uri)
        try:
            return self._evaluate(x)
        finally:
            scope.pop()

    def report(self, x: Any, path: Path, out: Report) -> kw.Marks | None:
        """Add every violation of ``x`` to ``out``; return as ``evaluate``.

        A final keyword is reported only when its siblings pass: when they
        fail, their lines explain the refusal.
        """
        if self.schema is False:
            out.add(path, "false schema allows nothing")
            return None
        scope = kw.STATE.scope
        if self.resource:
            scope.append(self.base_uri)
        try:
            kind = _kind(x)
            marks: kw.Marks | None = kw.EMPTY
            for keyword in self.keywords:
                if keyword.types is None or kind in keyword.types:
                    marks = kw.both(marks, keyword.report(x, path, out))
            for final in self.finals:
                if marks is None or kind not in final.types:
                    continue
                if not final.report(x, marks, path, out):
                    return None
                marks = kw.ALL
            return marks
        finally:
            if self.resource:
                scope.pop()


# A handler compiles one keyword of a subschema: (compiler, node, the
# keyword's value, the subschema's keywords in force) -> compiled keywords.
Handler = Callable[["Compiler", Node, Any, dict[str, Any]], list[Any]]


class Compiler:
    """Compiles the nodes of one document from a work list.

    Args:
        index: The indexed document.
        formats: Format checkers by name; an unknown format checks nothing.

    Raises:
        InvalidSchema: (from :meth:`run`) a reference leads nowhere, or a
            pattern is not RE2 (registration refuses both first).
    """

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
            try:
                keywords = self.keywords(node)
            except PatternError as exc:
                raise InvalidSchema(f"schema: a pattern {exc}") from None
            node.finish(
                [k for k in keywords if isinstance(k, kw.Keyword)],
                [k for k in keywords if isinstance(k, kw.Final)],
                resource,
            )
        return root

    def keywords(self, node: Node) -> list[Any]:
        schema = node.schema
        if schema is True or schema is False:
            return []
        if self.draft.ref_overrides_siblings and "$ref" in schema:
            schema = {"$ref": schema["$ref"]}
        in_force = {k: v for k, v in schema.items() if k in self.defined}
        found: list[Any] = []
        for name, value in in_force.items():
            handler = HANDLERS.get(name)
            if handler is not None:
                found.extend(handler(self, node, value, in_force))
        return found

    def child(self, node: Node, value: Any, *tokens: str | int) -> Node:
        return self.node_at(join_pointer(node.pointer, *tokens), value)

    def target(self, target: Target) -> Node:
        return self.node_at(target.pointer, target.schema)

    def resolve(self, how: Callable[[], Any]) -> Any:
        try:
            return how()
        except UnresolvableRef as exc:
            raise InvalidSchema(f"schema: {exc}") from None


# -- any type


def _type(c: Compiler, node: Node, value: Any, schema: dict) -> list:
    return [kw.type_([value] if isinstance(value, str) else list(value))]


def _enum(c: Compiler, node: Node, value: Any, schema: dict) -> list:
    return [kw.enum(value)]


def _const(c: Compiler, node: Node, value: Any, schema: dict) -> list:
    return [kw.const(value)]


def _format(c: Compiler, node: Node, value: Any, schema: dict) -> list:
    check = c.formats.get(value)
    return [] if check is None else [kw.format_(value, check)]


# -- numbers


def _minimum(c: Compiler, node: Node, value: Any, schema: dict) -> list:
    if c.draft.boolean_exclusive_bounds and schema.get("exclusiveMinimum") is True:
        return [kw.exclusiveMinimum(value)]
    return [kw.minimum(value)]


def _maximum(c: Compiler, node: Node, value: Any, schema: dict) -> list:
    if c.draft.boolean_exclusive_bounds and schema.get("exclusiveMaximum") is True:
        return [kw.exclusiveMaximum(value)]
    return [kw.maximum(value)]


def _exclusive_minimum(c: Compiler, node: Node, value: Any, schema: dict) -> list:
    # Draft-04's boolean form only modifies minimum (above).
    return [] if isinstance(value, bool) else [kw.exclusiveMinimum(value)]


def _exclusive_maximum(c: Compiler, node: Node, value: Any, schema: dict) -> list:
    return [] if isinstance(value, bool) else [kw.exclusiveMaximum(value)]


def _multiple_of(c: Compiler, node: Node, value: Any, schema: dict) -> list:
    return [kw.multipleOf(value)]


# -- strings


def _min_length(c: Compiler, node: Node, value: Any, schema: dict) -> list:
    return [kw.minLength(value)]


def _max_length(c: Compiler, node: Node, value: Any, schema: dict) -> list:
    return [kw.maxLength(value)]


def _pattern(c: Compiler, node: Node, value: Any, schema: dict) -> list:
    return [kw.pattern(value)]


# -- arrays


def _min_items(c: Compiler, node: Node, value: Any, schema: dict) -> list:
    return [kw.minItems(value)]


def _max_items(c: Compiler, node: Node, value: Any, schema: dict) -> list:
    return [kw.maxItems(value)]


def _unique_items(c: Compiler, node: Node, value: Any, schema: dict) -> list:
    return [kw.uniqueItems()] if value is True else []


def _prefix_items(c: Compiler, node: Node, value: Any, schema: dict) -> list:
    nodes = [c.child(node, v, "prefixItems", i) for i, v in enumerate(value)]
    return [kw.prefixItems("prefixItems", nodes)]


def _items(c: Compiler, node: Node, value: Any, schema: dict) -> list:
    if isinstance(value, list):  # the tuple form, up to 2019-09
        nodes = [c.child(node, v, "items", i) for i, v in enumerate(value)]
        return [kw.prefixItems("items", nodes)]
    prefix = schema.get("prefixItems")
    start = len(prefix) if isinstance(prefix, list) else 0
    return [kw.items("items", c.child(node, value, "items"), start)]


def _additional_items(c: Compiler, node: Node, value: Any, schema: dict) -> list:
    tuple_form = schema.get("items")
    if not isinstance(tuple_form, list):
        return []
    child = c.child(node, value, "additionalItems")
    return [kw.items("additionalItems", child, len(tuple_form))]


def _contains(c: Compiler, node: Node, value: Any, schema: dict) -> list:
    # minContains/maxContains are in force only where the draft defines them.
    low, high = schema.get("minContains", 1), schema.get("maxContains")
    child = c.child(node, value, "contains")
    return [kw.contains(child, low, high, evaluates=c.draft.contains_evaluates)]


# -- objects


def _min_properties(c: Compiler, node: Node, value: Any, schema: dict) -> list:
    return [kw.minProperties(value)]


def _max_properties(c: Compiler, node: Node, value: Any, schema: dict) -> list:
    return [kw.maxProperties(value)]


def _required(c: Compiler, node: Node, value: Any, schema: dict) -> list:
    return [kw.required(value)] if value else []


def _dependent_required(c: Compiler, node: Node, value: Any, schema: dict) -> list:
    return [kw.dependentRequired("dependentRequired", value)]


def _dependent_schemas(c: Compiler, node: Node, value: Any, schema: dict) -> list:
    rules = {key: c.child(node, v, "dependentSchemas", key) for key, v in value.items()}
    return [kw.dependentSchemas("dependentSchemas", rules)]


def _dependencies(c: Compiler, node: Node, value: Any, schema: dict) -> list:
    names = {k: v for k, v in value.items() if isinstance(v, list)}
    rules = {
        key: c.child(node, v, "dependencies", key)
        for key, v in value.items()
        if not isinstance(v, list)
    }
    return [
        kw.dependentRequired("dependencies", names),
        kw.dependentSchemas("dependencies", rules),
    ]


def _properties(c: Compiler, node: Node, value: Any, schema: dict) -> list:
    nodes = {k: c.child(node, v, "properties", k) for k, v in value.items()}
    return [kw.properties(nodes)]


def _pattern_properties(c: Compiler, node: Node, value: Any, schema: dict) -> list:
    rules = {p: c.child(node, v, "patternProperties", p) for p, v in value.items()}
    return [kw.patternProperties(rules)]


def _additional_properties(c: Compiler, node: Node, value: Any, schema: dict) -> list:
    known = schema.get("properties", {})
    patterns = schema.get("patternProperties", {})
    child = c.child(node, value, "additionalProperties")
    return [kw.additionalProperties(child, set(known), list(patterns))]


def _property_names(c: Compiler, node: Node, value: Any, schema: dict) -> list:
    return [kw.propertyNames(c.child(node, value, "propertyNames"))]


# -- combinators


def _branches(c: Compiler, node: Node, name: str, value: list) -> list[Node]:
    return [c.child(node, v, name, i) for i, v in enumerate(value)]


def _all_of(c: Compiler, node: Node, value: Any, schema: dict) -> list:
    return [kw.allOf(_branches(c, node, "allOf", value))]


def _any_of(c: Compiler, node: Node, value: Any, schema: dict) -> list:
    return [kw.anyOf(_branches(c, node, "anyOf", value))]


def _one_of(c: Compiler, node: Node, value: Any, schema: dict) -> list:
    return [kw.oneOf(_branches(c, node, "oneOf", value))]


def _not(c: Compiler, node: Node, value: Any, schema: dict) -> list:
    return [kw.not_(c.child(node, value, "not"))]


def _if(c: Compiler, node: Node, value: Any, schema: dict) -> list:
    then = else_ = None
    if "then" in schema:
        then = c.child(node, schema["then"], "then")
    if "else" in schema:
        else_ = c.child(node, schema["else"], "else")
    return [kw.if_(c.child(node, value, "if"), then, else_)]


# -- references


def _ref(c: Compiler, node: Node, value: Any, schema: dict) -> list:
    target = c.resolve(lambda: c.index.resolve(value, node.base_uri))
    return [kw.ref(value, c.target(target), c.dynamic)]


def _dynamic_ref(c: Compiler, node: Node, value: Any, schema: dict) -> list:
    index = c.index
    targets = c.resolve(lambda: index.dynamic_targets(value, node.base_uri))
    first = c.target(targets[0])
    name = index.dynamic_anchor_name(value, targets[0])
    by_uri: dict[str, Node] = {}
    if name is not None:
        for key, pointer in index.dynamic_anchors.items():
            uri, _, anchor = key.rpartition("#")
            if anchor == name:
                by_uri[uri] = c.node_at(pointer, index.subschemas[pointer])
    return [kw.dynamicRef(value, first, by_uri)]


def _recursive_ref(c: Compiler, node: Node, value: Any, schema: dict) -> list:
    targets = c.resolve(lambda: c.index.recursive_targets(node.base_uri))
    first = c.target(targets[0])
    by_uri: dict[str, Node] = {}
    if len(targets) > 1 or targets[0].pointer in c.index.recursive_anchors:
        for target in targets:
            by_uri[target.base_uri] = c.target(target)
    return [kw.recursiveRef(value, first, by_uri)]


# -- unevaluated


def _unevaluated_properties(c: Compiler, node: Node, value: Any, schema: dict) -> list:
    child = c.child(node, value, "unevaluatedProperties")
    return [kw.unevaluatedProperties(child)]


def _unevaluated_items(c: Compiler, node: Node, value: Any, schema: dict) -> list:
    return [kw.unevaluatedItems(c.child(node, value, "unevaluatedItems"))]


HANDLERS: dict[str, Handler] = {
    "$dynamicRef": _dynamic_ref,
    "$recursiveRef": _recursive_ref,
    "$ref": _ref,
    "additionalItems": _additional_items,
    "additionalProperties": _additional_properties,
    "allOf": _all_of,
    "anyOf": _any_of,
    "const": _const,
    "contains": _contains,
    "dependencies": _dependencies,
    "dependentRequired": _dependent_required,
    "dependentSchemas": _dependent_schemas,
    "enum": _enum,
    "exclusiveMaximum": _exclusive_maximum,
    "exclusiveMinimum": _exclusive_minimum,
    "format": _format,
    "if": _if,
    "items": _items,
    "maxItems": _max_items,
    "maxLength": _max_length,
    "maxProperties": _max_properties,
    "maximum": _maximum,
    "minItems": _min_items,
    "minLength": _min_length,
    "minProperties": _min_properties,
    "minimum": _minimum,
    "multipleOf": _multiple_of,
    "not": _not,
    "oneOf": _one_of,
    "pattern": _pattern,
    "patternProperties": _pattern_properties,
    "prefixItems": _prefix_items,
    "properties": _properties,
    "propertyNames": _property_names,
    "required": _required,
    "type": _type,
    "unevaluatedItems": _unevaluated_items,
    "unevaluatedProperties": _unevaluated_properties,
    "uniqueItems": _unique_items,
}


def steps_per_level(nodes: Mapping[str, Node]) -> int:
    """Bound the compiled steps one instance level can stack up.

    Steps at one instance follow same-instance edges (combinators,
    references); a reference cycle is cut on its second visit, so each
    strongly connected component counts twice its size. The bound is the
    heaviest path through the components, plus the step into a child value.
    """
    order = list(nodes.values())
    number = {id(node): i for i, node in enumerate(order)}
    graph = [
        [
            (number[id(child)],)
            for k in (*node.keywords, *node.finals)
            for child, same in k.children()
            if same
        ]
        for node in order
    ]
    component = strongly_connected_components(range(len(order)), graph)
    members: dict[int, list[int]] = {}
    for node, c in enumerate(component):
        members.setdefault(c, []).append(node)
    weight = [0] * len(order)
    for c in sorted(members):  # sinks first
        group = members[c]
        cyclic = len(group) > 1 or any((m,) in graph[m] for m in group)
        own = 2 * len(group) if cyclic else 1
        below = max(
            (weight[t] for m in group for (t,) in graph[m] if component[t] != c),
            default=0,
        )
        for m in group:
            weight[m] = own + below
    return max(weight, default=0) + 1
