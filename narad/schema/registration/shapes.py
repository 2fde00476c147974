"""The schema shapes registration refuses, found in polynomial time.

The document is read as a graph whose nodes are subschemas (JSON pointers)
and whose edges say how the validator moves between them:

- *in place*: the next subschema applies to the same value (``allOf``,
  ``anyOf``, ``oneOf``, ``not``, ``if``/``then``/``else``, dependent schemas,
  and ``$ref``/``$dynamicRef``/``$recursiveRef`` to every target
  :class:`~narad.schema.resolver.SchemaIndex` says they can pick);
- *to a child value*, labelled with which children it reaches: a property
  name, a pattern, "other properties" of a parent, an array index, every item,
  or a property's name (``propertyNames``).

``unevaluatedProperties`` and ``unevaluatedItems`` are child edges too ("other
properties", every item). The annotations they read come from the same single
pass that gives the verdict
(:meth:`narad.schema.validation.keywords.Keyword.evaluate`), so no keyword
re-applies a subschema to the same value beyond the in-place edges above,
and those are all counted, as if every branch of a union ran (they do, where
annotations are collected).

Two child edges can reach the same value only if their labels can name one
child: ``properties/a`` and ``properties/b`` cannot, ``properties/a`` and a
``patternProperties`` pattern matching ``a`` can, ``items`` and any index can.
A key that no ``properties`` names is assumed to match every pattern.

The refused shapes (see :func:`analyse`):

1. Duplicated recursion: from a subschema on a cycle, two paths over one level
   (in-place edges, one child edge, in-place edges) reach the same subschema of
   that cycle for the same child. Each level then doubles the work. Counted
   per starting subschema over its one-level neighbourhood, with in-place
   cycles cut where the validator cuts them (at the first revisit).
2. More than 64 paths: paths to each subschema are counted once over the
   graph with every cycle cut at its first back edge (memoised, in topological
   order), separately for each value, named by the child labels leading to
   it. Recursion is counted once (shape 1 refuses its duplication).
3. A cycle of in-place edges through ``not``, ``if`` or ``oneOf``: found as an
   edge of those keywords inside one strongly connected component of the
   in-place graph.

Nodes are small integers, numbered as the walk from the root first meets
them, and every stage shares the edge lists built once by :class:`_Graph`:
a pointer string is only read back to name a node in a message.

Everything is iterative: ``$ref`` graphs can be far deeper than Python's stack.
Every step is also counted against a budget proportional to the graph (see
:class:`_Graph`), so an input that still finds a super-linear path through
the analysis is refused instead of holding a worker.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from narad.quoting import quote_pointer
from narad.schema.graphs import strongly_connected_components
from narad.schema.patterns import PatternError
from narad.schema.patterns import regex_search
from narad.schema.resolver import REFERENCE_KEYWORDS
from narad.schema.resolver import SchemaIndex
from narad.schema.resolver import UnresolvableRef
from narad.schema.resolver import escape
from narad.schema.resolver import join_pointer
from narad.schema.resolver import lookup

__all__ = ("MAX_PATHS", "MAX_SUBSCHEMAS_PER_VALUE", "Analysis", "ShapeError", "analyse")

MAX_PATHS = 64
MAX_SUBSCHEMAS_PER_VALUE = 64
_CAP = MAX_PATHS + 1  # counts saturate here: only "more than 64" matters
_VALUES_KEPT = 256
# Analysis steps allowed per subschema, and for any document. Each stage is
# linear-ish and takes a few steps per edge; path counting may carry up to
# _VALUES_KEPT values over an edge, but only where many labels meet. 50 per
# subschema leaves a wide margin for every legitimate 256 KiB document we know
# (see bench/register.py) while bounding the worst case at about a second.
_STEPS_PER_SUBSCHEMA = 50
_STEPS_MINIMUM = 100_000

_IN_PLACE_LISTS = frozenset({"allOf", "anyOf", "oneOf"})
_IN_PLACE_SINGLE = frozenset({"not", "if", "then", "else"})
_IN_PLACE_MAPS = frozenset({"dependentSchemas", "dependencies"})
_NEGATING = frozenset({"not", "if", "oneOf"})
_ITEM_KEYWORDS = frozenset({"additionalItems", "unevaluatedItems", "contains"})

# A target's value not read yet (a reference's): looked up by pointer.
_UNKNOWN = object()

Label = tuple[Any, ...]
# One move of the validator: (target node, keyword, where it is written,
# label). The label is None for an in-place edge. A plain tuple: a document
# has tens of thousands of edges, unpacked in every stage's inner loop.
Edge = tuple[int, str, str, Label | None]
# An edge while the graph is built: (target pointer, the value there or
# _UNKNOWN, keyword, where, label).
_RawEdge = tuple[str, Any, str, str, Label | None]


class ShapeError(ValueError):
    """A refused shape; ``str()`` names where, never a reference's text."""


@dataclass(frozen=True)
class Analysis:
    """What registration records about the document's shape.

    Attributes:
        applies_many: Some value gets more than 64 subschemas applied to it
            (a union of 64 or more branches does): the high-cost class.
        reached: The pointer of every subschema the validator can reach,
            reference targets in members no keyword owns included.
        targets: The pointers references lead to.
    """

    applies_many: bool
    reached: Sequence[str] = ()
    targets: frozenset[str] = frozenset()


def analyse(index: SchemaIndex) -> Analysis:
    """Check the three shapes on an indexed document.

    Raises:
        ShapeError: a reference leads nowhere, or one of the shapes is found.
    """
    graph = _Graph(index)
    components = strongly_connected_components(graph.order, graph.out)
    sizes = _sizes(components)
    in_place = _in_place_components(graph, components, sizes)
    _check_negated_cycles(graph, in_place)
    _check_duplicated_recursion(graph, components, sizes, in_place)
    order, forward = _topological(graph)
    _check_path_counts(graph, order, forward)
    return Analysis(
        applies_many=_applies_many(graph, order, forward),
        reached=graph.pointers,
        targets=_targets(graph),
    )


def reach(index: SchemaIndex) -> tuple[Sequence[str], frozenset[str]]:
    """The pointers of every subschema the validator can reach, and of those
    references lead to, without checking the shapes.

    Raises:
        ShapeError: a reference leads nowhere.
    """
    graph = _Graph(index)
    return graph.pointers, _targets(graph)


def _targets(graph: _Graph) -> frozenset[str]:
    return frozenset(t for ts in graph.resolved.values() for t in ts)


def _sizes(components: list[int]) -> list[int]:
    """How many nodes each component has, by component id."""
    sizes = [0] * len(components)
    for component in components:
        sizes[component] += 1
    return sizes


# -- The graph -----------------------------------------------------------------


class _Graph:
    """The subschemas the validator can reach from the root, as integer nodes.

    Attributes:
        pointers: Each node's JSON pointer, to name it in a message.
        order: The nodes in the order the walk first expanded them; every
            stage visits them in this order, so the first shape found (and
            its message) does not depend on how nodes are numbered.
        out: Each node's edges, in the order its keywords are written.
        in_place: Each node's in-place edges, as (target, where) pairs.
        resolved: Where each reference leads, by (keyword, text, base URI).
    """

    def __init__(self, index: SchemaIndex) -> None:
        self.index = index
        self._keywords = index.draft.keywords
        self._ref_overrides_siblings = index.draft.ref_overrides_siblings
        self._ref_only = self._keywords & {"$ref"}
        self.pointers: list[str] = []
        self._ids: dict[str, int] = {}
        self.out: list[Sequence[Edge]] = []
        self.order: list[int] = []
        self.patterns: dict[str, Any] = {}
        self.resolved: dict[tuple[str, Any, str], list[str]] = {}
        self._schemas: list[Any] = []  # each node's subschema, until expanded
        self.in_place: list[Sequence[tuple[int, str]]] = []
        self.steps_left = 0
        self._build(self._node("", index.document))
        self.steps_left = _STEPS_PER_SUBSCHEMA * len(self.order) + _STEPS_MINIMUM

    def _node(self, pointer: str, schema: Any) -> int:
        node = self._ids[pointer] = len(self.pointers)
        self.pointers.append(pointer)
        # Most nodes are leaves: their edge lists are made when they have any.
        self.out.append(())
        self.in_place.append(())
        self._schemas.append(schema)
        return node

    def _build(self, root: int) -> None:
        expanded: set[int] = set()
        stack = [root]
        while stack:
            node = stack.pop()
            if node in expanded:
                continue
            expanded.add(node)
            self.order.append(node)
            schema = self._schemas[node]
            if not schema or schema is True:
                continue
            out: list[Edge] = []
            in_place: list[tuple[int, str]] = []
            for target, value, keyword, where, label in self._edges(
                self.pointers[node], schema
            ):
                known = self._ids.get(target)
                if known is None:
                    if value is _UNKNOWN:
                        value = self._schema_at(target)
                    if not isinstance(value, dict | bool):
                        continue
                    known = self._node(target, value)
                    if not value or value is True:
                        # Nothing inside: expanded now, not stacked. Where a
                        # leaf sits in ``order`` decides no stage's outcome.
                        expanded.add(known)
                        self.order.append(known)
                out.append((known, keyword, where, label))
                if label is None:
                    in_place.append((known, where))
                if known not in expanded:
                    stack.append(known)
            self.out[node], self.in_place[node] = out, in_place
        self._schemas.clear()

    def _schema_at(self, pointer: str) -> Any:
        """What a reference target holds (it may be a member no keyword owns)."""
        value = self.index.subschemas.get(pointer, _UNKNOWN)
        if value is not _UNKNOWN:
            return value
        try:
            return lookup(self.index.document, pointer)
        except UnresolvableRef:
            return None

    def _edges(self, pointer: str, schema: Any) -> list[_RawEdge]:
        """The edges out of ``schema``, each with its target's pointer and,
        but for a reference, the value there (read here, not looked up)."""
        edges: list[_RawEdge] = []
        if not isinstance(schema, dict):
            return edges
        keywords = self._keywords
        if self._ref_overrides_siblings and "$ref" in schema:
            keywords = self._ref_only
        for keyword, value in schema.items():
            if keyword not in keywords:
                continue
            at = pointer + "/" + escape(keyword)
            if keyword in REFERENCE_KEYWORDS:
                base = self.index.base_uri_at(pointer)
                for target in self._targets(keyword, value, base, at):
                    edges.append((target, _UNKNOWN, keyword, at, None))
            elif keyword in _IN_PLACE_LISTS and isinstance(value, list):
                for i, item in enumerate(value):
                    where = f"{at}/{i}"
                    edges.append((where, item, keyword, where, None))
            elif keyword in _IN_PLACE_SINGLE:
                edges.append((at, value, keyword, at, None))
            elif keyword in _IN_PLACE_MAPS and isinstance(value, dict):
                for name, item in value.items():
                    where = join_pointer(at, name)
                    edges.append((where, item, keyword, where, None))
            else:
                self._child_edges(edges, schema, keyword, value, at)
        return edges

    def _child_edges(
        self,
        edges: list[_RawEdge],
        schema: dict[str, Any],
        keyword: str,
        value: Any,
        at: str,
    ) -> None:
        if keyword == "properties" and isinstance(value, dict):
            for name, item in value.items():
                where = join_pointer(at, name)
                edges.append((where, item, keyword, where, ("key", name)))
        elif keyword == "patternProperties" and isinstance(value, dict):
            for pattern, item in value.items():
                where = join_pointer(at, pattern)
                edges.append((where, item, keyword, where, ("pattern", pattern)))
        elif keyword == "additionalProperties":
            names = schema.get("properties")
            patterns = schema.get("patternProperties")
            label = (
                "other",
                frozenset(names) if isinstance(names, dict) else frozenset(),
                tuple(patterns) if isinstance(patterns, dict) else (),
            )
            edges.append((at, value, keyword, at, label))
        elif keyword == "unevaluatedProperties":
            edges.append((at, value, keyword, at, ("other", frozenset(), ())))
        elif keyword in ("items", "prefixItems") and isinstance(value, list):
            for i, item in enumerate(value):
                where = f"{at}/{i}"
                edges.append((where, item, keyword, where, ("index", i)))
        elif keyword == "items" or keyword in _ITEM_KEYWORDS:
            edges.append((at, value, keyword, at, ("item",)))
        elif keyword == "propertyNames":
            edges.append((at, value, keyword, at, ("name",)))

    def _targets(self, keyword: str, ref: Any, base: str, at: str) -> list[str]:
        """Where a reference leads; resolved once per reference text and base
        (a document may repeat ``"#"`` thousands of times)."""
        key = (keyword, ref if isinstance(ref, str) else None, base)
        if key not in self.resolved:
            self.resolved[key] = self._resolve(keyword, ref, base, at)
        return self.resolved[key]

    def _resolve(self, keyword: str, ref: Any, base: str, at: str) -> list[str]:
        index = self.index
        try:
            if keyword == "$recursiveRef":
                targets = index.recursive_targets(base)
            elif keyword == "$dynamicRef" and isinstance(ref, str):
                targets = index.dynamic_targets(ref, base)
            elif isinstance(ref, str):
                targets = (index.resolve(ref, base),)
            else:
                return []
        except UnresolvableRef:
            raise ShapeError(
                f"the {keyword} at {quote_pointer(at)} leads nowhere in the document"
            ) from None
        return [target.pointer for target in targets]

    def spend(self, steps: int) -> None:
        """Count analysis steps; fail closed once the budget is spent."""
        self.steps_left -= steps
        if self.steps_left < 0:
            raise ShapeError("too costly to analyse: simplify its references")

    def matches(self, pattern: str, name: str) -> bool:
        if pattern not in self.patterns:
            try:
                # As validation searches: a name may be a lone surrogate.
                self.patterns[pattern] = regex_search(pattern)
            except PatternError:
                self.patterns[pattern] = None
        search = self.patterns[pattern]
        return search is None or search(name)


# -- Which children a label reaches ---------------------------------------------


def _classes(labels: list[Label]) -> list[Label]:
    """One representative child per group of labels that can name the same one."""
    classes = dict.fromkeys([("key", None), ("index", None), ("name",)])
    classes.update((label, None) for label in labels if label[0] in ("key", "index"))
    return list(classes)


def _reaches(graph: _Graph, label: Label, child: Label) -> bool:
    """Whether an edge labelled ``label`` applies to the child ``child``."""
    kind, name = label[0], child[1] if len(child) > 1 else None
    if kind in ("key", "index"):
        return label == child
    if kind == "item":
        return child[0] == "index"
    if kind == "name":
        return child[0] == "name"
    if child[0] != "key":
        return False
    if name is None:  # a key no `properties` names: assume it matches anything
        return True
    if kind == "pattern":
        return graph.matches(label[1], name)
    _, names, patterns = label
    return name not in names and not any(graph.matches(p, name) for p in patterns)


# -- Shape 3: in-place cycles through not, if, oneOf ---------------------------


def _in_place_components(
    graph: _Graph, components: list[int], sizes: list[int]
) -> list[int]:
    """Components of the in-place graph (ids unrelated to ``components``).

    An in-place cycle is a cycle of the graph, so only the graph's components
    of more than one node are searched; every other node is a component of
    its own.
    """
    roots = [node for node in graph.order if sizes[components[node]] > 1]
    found = strongly_connected_components(roots, graph.in_place, components)
    return [-1 - node if c < 0 else c for node, c in enumerate(found)]


def _check_negated_cycles(graph: _Graph, component: list[int]) -> None:
    """Refuse shape 3, given the components of the in-place graph."""
    for node in graph.order:
        for target, keyword, where, label in graph.out[node]:
            if (
                label is None
                and keyword in _NEGATING
                and component[target] == component[node]
            ):
                raise ShapeError(
                    f"the $ref cycle through {quote_pointer(where)} re-applies a "
                    f"schema to the same value under {keyword}"
                )


# -- Shape 1: the same value reached twice at one level ------------------------


def _check_duplicated_recursion(
    graph: _Graph, component: list[int], sizes: list[int], in_place: list[int]
) -> None:
    """Refuse the first subschema on a cycle that reaches its cycle twice.

    Only paths inside the start's strongly connected component can end there
    (a node on a path between two of its members is one), so each run stays
    inside it. A start whose only edge is one in-place edge within its
    component (a bare ``$ref``, a one-branch ``allOf``) reaches every node
    through the same paths as that edge's target, so it gets the target's
    verdict and message without another run: a chain of such links is
    analysed once, not once per link.

    Where a component has no in-place cycle, path counts do not depend on
    where the walk starts, and every one-level path from a node the start
    reaches in place extends to a distinct one from the start: an accepted
    start vouches for all of them, which are then skipped.
    """
    cyclic = [
        node
        for node in graph.order
        if sizes[component[node]] > 1 or (graph.out[node] and _loops(graph, node))
    ]
    looping = {
        component[node]
        for node in cyclic
        for target, _ in graph.in_place[node]
        if in_place[target] == in_place[node]
    }
    level = _Level(graph, component)
    verdicts: dict[int, str | None] = {}
    representatives: dict[int, int] = {}
    for node in cyclic:
        if node not in level.accepted:
            start = _representative(graph, node, component, representatives)
            if start not in verdicts:
                vouch = component[start] not in looping
                verdicts[start] = level.verdict(start, vouch=vouch)
            if verdicts[start] is not None:
                raise ShapeError(verdicts[start])


def _loops(graph: _Graph, node: int) -> bool:
    return any(edge[0] == node for edge in graph.out[node])


def _representative(
    graph: _Graph, node: int, component: list[int], known: dict[int, int]
) -> int:
    """Follow single in-place edges within the component to a node to analyse.

    ``known`` remembers the answer for every node on the way, so each link of
    a chain is followed once in all.
    """
    way = [node]
    on_way = {node}
    while node not in known:
        edges = graph.out[node]
        if len(edges) != 1 or edges[0][3] is not None:
            break
        target = edges[0][0]
        if component[target] != component[node] or target in on_way:
            break
        way.append(target)
        on_way.add(target)
        node = target
    found = known.get(node, node)
    for passed in way:
        known[passed] = found
    return found


class _Paths:
    """How many paths reach a node (saturating), and the first two of them.

    A path is kept as a linked list, ``(last step, rest)``, so extending one
    costs the same however long it is.
    """

    __slots__ = ("count", "shown")

    def __init__(self) -> None:
        self.count = 0
        self.shown: list[_Steps] = []

    def add(self, other: _Paths, step: str) -> None:
        count = self.count + other.count
        self.count = count if count < _CAP else _CAP
        shown = self.shown
        if len(shown) < 2:
            for path in other.shown[: 2 - len(shown)]:
                shown.append((step, path))


_Steps = tuple[str, "_Steps"] | None


class _Level:
    """Shape 1 per start, with what one start learns kept for the others.

    ``settled`` holds the seed lists (in order, one path each) whose in-place
    walk within their component reached no node twice: that walk depends on
    nothing else, and many starts and children share it (every property
    recursing to the root seeds the root alone).
    """

    def __init__(self, graph: _Graph, component: list[int]) -> None:
        self.graph = graph
        self.component = component
        self.accepted: set[int] = set()
        self.settled: set[tuple[int, ...]] = set()
        self.ends: dict[int, int] = {}

    def verdict(self, start: int, *, vouch: bool) -> str | None:
        """Why ``start`` reaches a node of its cycle twice one level down, or None.

        Every child edge names a child (the order of children decides which
        two paths a refusal names), but only those into the component can lead
        back. With ``vouch``, an accepted start accepts every node of its
        component it reaches in place.
        """
        graph, component = self.graph, self.component
        within = component[start]
        origin = _Paths()
        origin.count, origin.shown = 1, [None]
        here = _in_place_paths(graph, {start: origin})
        steps = [
            (edge, paths)
            for node, paths in here.items()
            for edge in graph.out[node]
            if edge[3] is not None
        ]
        inward = [
            (edge, paths) for edge, paths in steps if component[edge[0]] == within
        ]
        exact, other = _by_label(inward)
        # Many edges share a label (every "items"): each is judged once.
        other_labels = {inward[i][0][3] for i in other}
        for child in _classes([edge[3] for edge, _ in steps if edge[3]]):
            chosen = exact.get(child, [])
            graph.spend(len(chosen) + len(other))
            hits = {label for label in other_labels if _reaches(graph, label, child)}
            chosen = chosen + [i for i in other if inward[i][0][3] in hits]
            seeds: dict[int, _Paths] = {}
            for i in sorted(chosen):
                (target, _, where, _), paths = inward[i]
                seeds.setdefault(target, _Paths()).add(paths, where)
            message = self._twice(seeds, within, alone=vouch)
            if message is not None:
                return message
        if vouch:
            self.accepted.update(node for node in here if component[node] == within)
        return None

    def _twice(
        self, seeds: dict[int, _Paths], within: int, *, alone: bool
    ) -> str | None:
        """Why ``seeds`` reach a node twice in place, or None.

        With ``alone`` (no in-place cycle in the component), a lone seed
        whose only in-place edge in the component is one link reaches nodes
        exactly as often as the link's target does: the walk is keyed by the
        end of such a chain.
        """
        key = tuple(seeds)
        if alone and len(key) == 1:
            key = (self._chain_end(key[0], within),)
        # A seed reached twice is refused; only single paths are remembered.
        once = all(paths.count == 1 for paths in seeds.values())
        if once and key in self.settled:
            return None
        reached = _in_place_paths(self.graph, seeds, (self.component, within))
        for paths in reached.values():
            if paths.count > 1:
                first, second = sorted(_last_apart(*paths.shown[:2]))
                return (
                    "the same value is reached by two paths at one level, through "
                    f"{quote_pointer(first)} and {quote_pointer(second)}"
                )
        self.settled.add(key)
        return None

    def _chain_end(self, node: int, within: int) -> int:
        """Follow lone in-place edges inside the component (which has no
        in-place cycle), remembering the end for every node passed."""
        way = []
        while node not in self.ends:
            links = [
                target
                for target, _ in self.graph.in_place[node]
                if self.component[target] == within
            ]
            self.graph.spend(len(links) + 1)
            if len(links) != 1:
                break
            way.append(node)
            node = links[0]
        end = self.ends.get(node, node)
        self.ends.update(dict.fromkeys(way, end))
        return end


def _by_label(
    inward: list[tuple[Edge, _Paths]],
) -> tuple[dict[Label, list[int]], list[int]]:
    """Positions of the edges naming one key or index, and of all the others."""
    exact: dict[Label, list[int]] = {}
    other: list[int] = []
    for i, (edge, _) in enumerate(inward):
        label = edge[3]
        if label is not None and label[0] in ("key", "index"):
            exact.setdefault(label, []).append(i)
        else:
            other.append(i)
    return exact, other


def _last_apart(a: _Steps, b: _Steps) -> tuple[str, str]:
    """The last step where two paths differ, to name each one."""
    while a is not None and b is not None:
        if a[0] != b[0]:
            return a[0], b[0]
        a, b = a[1], b[1]
    return (a[0] if a else "/", b[0] if b else "/")


def _in_place_paths(
    graph: _Graph,
    seeds: dict[int, _Paths],
    inside: tuple[list[int], int] | None = None,
) -> dict[int, _Paths]:
    """Paths over in-place edges from ``seeds``, cut where the validator cuts.

    A back edge (to a node already on the way) is where the validator stops a
    cycle, so only the other edges carry paths, in topological order. With
    ``inside`` (components and one of them), only that component is walked.
    """
    order = _postorder(graph, list(seeds), in_place=True, inside=inside)
    position = {node: i for i, node in enumerate(order)}
    paths = {node: seed for node, seed in seeds.items() if node in position}
    out, in_place = graph.out, graph.in_place
    steps = 0
    for node in reversed(order):
        mine = paths.get(node)
        if mine is None:
            continue
        steps += len(out[node])
        here = position[node]
        for target, where in in_place[node]:
            there = position.get(target)
            if there is not None and there < here:
                reached = paths.get(target)
                if reached is None:
                    reached = paths[target] = _Paths()
                reached.add(mine, where)
    # Spent once per walk: a walk meets each node once, so it is bounded.
    graph.spend(steps)
    return paths


def _postorder(
    graph: _Graph,
    roots: list[int],
    *,
    in_place: bool,
    inside: tuple[list[int], int] | None = None,
) -> list[int]:
    """Nodes reachable from ``roots`` in depth-first post-order (iterative).

    Every edge of a visited node counts as a step, followed or not. With
    ``inside`` (components and one of them), only that one is walked.
    """
    edges = graph.in_place if in_place else graph.out
    component, within = inside if inside is not None else (None, 0)
    out = graph.out
    order: list[int] = []
    seen: set[int] = set()
    steps = 0
    for root in roots:
        if root in seen or (component is not None and component[root] != within):
            continue
        seen.add(root)
        steps += len(out[root])
        work = [iter(edges[root])]
        stack = [root]
        while work:
            for edge in work[-1]:
                target = edge[0]
                if target in seen or (
                    component is not None and component[target] != within
                ):
                    continue
                seen.add(target)
                steps += len(out[target])
                if not edges[target]:  # a leaf is finished at once
                    order.append(target)
                    continue
                work.append(iter(edges[target]))
                stack.append(target)
                break
            else:
                work.pop()
                order.append(stack.pop())
    graph.spend(steps)  # once per walk, which meets each node once
    return order


# -- Shape 2 and the cost class: counting paths ---------------------------------


def _topological(graph: _Graph) -> tuple[list[int], list[Sequence[Edge]]]:
    """Nodes in topological order, each with its edges that are not back edges."""
    order = _postorder(graph, [0], in_place=False)[::-1]
    position = [0] * len(graph.out)
    for i, node in enumerate(order):
        position[node] = i
    # A leaf keeps its empty edge tuple rather than get a list of its own.
    forward = [
        edges and [edge for edge in edges if position[edge[0]] > position[node]]
        for node, edges in enumerate(graph.out)
    ]
    return order, forward


def _check_path_counts(
    graph: _Graph, order: list[int], forward: list[Sequence[Edge]]
) -> None:
    """Count paths per subschema and value; refuse more than :data:`MAX_PATHS`.

    A value is named by the labels of the child edges that led to it, interned
    as small integers, so paths add up only when they reach the same value.
    A node keeps at most :data:`_VALUES_KEPT` values; beyond that the rest
    fold into one fresh value holding their largest count.

    A leaf with one edge into it gets the counts of that edge's source, which
    passed: it is not counted at all (its steps still are).
    """
    labels: dict[Label, int] = {}
    sources = [0] * len(forward)
    for edges in forward:
        for target, _, _, label in edges:
            sources[target] += 1
            if label is not None:
                labels.setdefault(label, len(labels))
    # A child value is keyed by its parent value and its label's number as
    # one integer (a bijection, since numbers are below ``width``): cheaper
    # to hash than a tuple. New values are numbered by the size of ``values``.
    width = len(labels) + 1
    values: dict[Any, int] = {}
    counts: dict[int, dict[int, int]] = {0: {0: 1}}
    for node in order:
        here = counts.pop(node, None)
        if not here:  # a leaf skipped below
            continue
        if max(here.values()) > MAX_PATHS:
            raise ShapeError(
                f"{quote_pointer(graph.pointers[node] or '/')} is checked against "
                f"one value through more than {MAX_PATHS} paths"
            )
        graph.spend(len(here) * len(forward[node]))
        for target, _, _, label in forward[node]:
            if sources[target] == 1 and not forward[target]:
                continue
            moved = here
            if label is not None:
                step = labels[label]
                moved = {}
                for value, count in here.items():
                    key = value * width + step
                    moved[values.setdefault(key, len(values) + 1)] = count
            there = counts.get(target)
            if there is None:
                # A copy of ``here``, which other edges still read.
                there = counts[target] = dict(here) if moved is here else moved
            else:
                for value, count in moved.items():
                    there[value] = min(there.get(value, 0) + count, _CAP)
            if len(there) > _VALUES_KEPT:
                counts[target] = {-len(values) - 1: max(there.values())}
                values[("fold", len(values))] = len(values) + 1


def _applies_many(
    graph: _Graph, order: list[int], forward: list[Sequence[Edge]]
) -> bool:
    """Whether some value gets more than 64 subschemas applied to it: every
    subschema its in-place edges reach from one subschema, counted along
    every path (the high-cost class of "Validation capacity")."""
    applied = [1] * len(graph.out)  # what a node without edges applies
    for node in reversed(order):
        if not forward[node]:
            continue
        total = 1
        for target, keyword, _, label in forward[node]:
            if label is None:
                # A reference and its target are one subschema applied.
                hop = keyword in REFERENCE_KEYWORDS
                total = min(total + applied[target] - hop, _CAP)
        applied[node] = total
    return max(applied) > MAX_SUBSCHEMAS_PER_VALUE
