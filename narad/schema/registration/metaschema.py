"""A draft's meta-schema check, compiled once and linear in the document.

python-jsonschema follows the meta-schema's references anew for every
subschema of a document, resolving 2020-12's ``$dynamicRef`` through the
dynamic scope each time: seconds for a 256 KiB document. Yet a meta-schema
recurses only to say "this member is again a schema", and its dynamic
references always land on its own root: validation starts there, so the root
is the outermost resource in scope, and it declares the anchor.

:class:`MetaSchema` therefore resolves every reference once, when it is
built, into a graph of small nodes: a reference is the node it leads to, and
an ``allOf`` branch (the vocabulary meta-schemas of 2019-09 and 2020-12) is
merged into its parent, so the root holds one ``properties`` map of every
keyword. Checking a document is one walk in which each value meets a constant
number of nodes.

Keywords mean what python-jsonschema makes of them, for the keywords
meta-schemas use: ``format`` is an annotation, ``pattern`` a Python regular
expression, and ``1.0`` an integer only when the draft's ``fraction_integers``
says so (draft-06 on). One deliberate difference: ``uniqueItems`` compares
JSON values by hashing (:func:`~narad.jsontext.json_key`), where
python-jsonschema sorts and compares neighbours, which is quadratic on items
that do not sort and misses a duplicate that sorts apart
(``[[1], [true], [1]]``). A meta-schema using any other keyword is refused
when built.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from collections.abc import Iterator
from collections.abc import Mapping
from dataclasses import replace
from decimal import Decimal
from typing import Any

import jsonschema_specifications

from narad.jsontext import json_key
from narad.quoting import quote_pointer
from narad.schema.drafts import Draft
from narad.schema.resolver import REFERENCE_KEYWORDS
from narad.schema.resolver import escape
from narad.schema.resolver import lookup
from narad.schema.resolver import urljoin

__all__ = ("MetaSchema",)

# Where a check failed in the document: tokens from its root, as a linked list
# built on the way out of the walk (only ever for a failure).
Path = tuple[str | int, "Path"] | None
# (where, the meta-schema keyword that failed, that keyword's value)
Failure = tuple[Path, str, Any]
Rule = Callable[[Any], Failure | None]

_ANNOTATIONS = frozenset(
    {
        "$comment",
        "$defs",
        "$dynamicAnchor",
        "$id",
        "$recursiveAnchor",
        "$schema",
        "$vocabulary",
        "default",
        "definitions",
        "deprecated",
        "description",
        "format",
        "id",
        "title",
    }
)
_NUMBERS = (int, Decimal, float)
_TYPES: dict[str, tuple[type, ...]] = {
    "array": (list,),
    "boolean": (bool,),
    "integer": (int,),
    "null": (type(None),),
    "number": _NUMBERS,
    "object": (dict,),
    "string": (str,),
}
_RULE_LIMIT = 40


class _Node:
    """One meta-schema subschema, its ``allOf`` branches merged in."""

    __slots__ = ("done", "properties", "rules")

    def __init__(self) -> None:
        self.rules: list[Rule] = []
        self.properties: dict[str, list[_Node]] = {}
        self.done = False

    def merge(self, other: _Node) -> None:
        """Take ``other``'s checks as this node's own (``allOf``)."""
        if not other.done:  # a cycle back into a node still being built
            self.rules.append(other.check)
            return
        # A rule already here has run first: a second copy never changes the
        # outcome (every vocabulary meta-schema repeats the same "type").
        self.rules.extend(rule for rule in other.rules if rule not in self.rules)
        for name, nodes in other.properties.items():
            self.properties.setdefault(name, []).extend(nodes)

    def check(self, x: Any) -> Failure | None:
        for rule in self.rules:
            failure = rule(x)
            if failure is not None:
                return failure
        if self.properties and type(x) is dict:
            properties = self.properties
            for key, value in x.items():
                for node in properties.get(key, ()):
                    failure = node.check(value)
                    if failure is not None:
                        return (key, failure[0]), failure[1], failure[2]
        return None


class MetaSchema:
    """A draft's meta-schema, compiled for checking schema documents.

    Args:
        draft: The draft; its ``meta_schema`` is the root, its
            ``id_keyword`` and ``ref_overrides_siblings`` say how the
            meta-schema itself is read, and ``fraction_integers`` whether
            ``1.0`` and ``1e2`` count as integers.
        lookup: The meta-schema resources the root refers to, by URI (for
            instance ``jsonschema_specifications.REGISTRY.contents``).

    Raises:
        ValueError: the meta-schema uses a keyword or reference this module
            does not compile.
    """

    def __init__(
        self,
        draft: Draft,
        lookup: Callable[[str], Mapping[str, Any]],
    ) -> None:
        self._draft = draft
        self._lookup = lookup
        self._fraction_integers = draft.fraction_integers
        self._root_schema = draft.meta_schema
        self._nodes: dict[int, _Node] = {}
        self._types: dict[str | tuple[str, ...], Rule] = {}
        base = self._base(draft.meta_schema, "")
        self._resources: dict[str, Mapping[str, Any]] = {base: draft.meta_schema}
        self._root = self._compile(draft.meta_schema, base)

    def errors(self, document: Any) -> Iterator[str]:
        """Yield a message for the first violation found, if any.

        The message names where the document fails and the meta-schema
        keyword and value it fails, never the document's own values (they
        could repeat a reference).
        """
        failure = self._root.check(document)
        if failure is None:
            return
        path, keyword, value = failure
        where = ""
        while path is not None:
            token, path = path
            where += "/" + escape(str(token))
        rule = json.dumps(value)
        rule = rule if len(rule) <= _RULE_LIMIT else "..."
        yield f"at {quote_pointer(where)}: fails the meta-schema ({keyword} {rule})"

    # -- compiling

    def _base(self, schema: Mapping[str, Any], base: str) -> str:
        declared = schema.get(self._draft.id_keyword)
        if isinstance(declared, str) and not declared.startswith("#"):
            return urljoin(base, declared)[0]
        return base

    def _compile(self, schema: Any, base: str) -> _Node:
        # Keyed by identity: the meta-schema documents live as long as self.
        key = id(schema)
        node = self._nodes.get(key)
        if node is not None:
            return node
        if schema is True:
            node = self._nodes[key] = _Node()
            node.done = True
            return node
        if not isinstance(schema, Mapping):
            raise ValueError(f"meta-schema: cannot compile the subschema {schema!r}")
        base = self._base(schema, base)
        if self._draft.ref_overrides_siblings and "$ref" in schema:
            schema = {"$ref": schema["$ref"]}
        assertions = [name for name in schema if name not in _ANNOTATIONS]
        if len(assertions) == 1 and assertions[0] in REFERENCE_KEYWORDS:
            # A bare reference is the node it leads to.
            target, target_base = self._resolve(assertions[0], schema, base)
            node = self._nodes[key] = self._compile(target, target_base)
            return node
        node = self._nodes[key] = _Node()
        for keyword in assertions:
            self._keyword(node, keyword, schema, base)
        node.done = True
        return node

    def _keyword(
        self, node: _Node, keyword: str, schema: Mapping[str, Any], base: str
    ) -> None:
        value = schema[keyword]
        if keyword in REFERENCE_KEYWORDS:
            node.merge(self._compile(*self._resolve(keyword, schema, base)))
        elif keyword == "allOf":
            for branch in value:
                node.merge(self._compile(branch, base))
        elif keyword == "properties":
            for name, sub in value.items():
                node.properties.setdefault(name, []).append(self._compile(sub, base))
        elif keyword == "anyOf":
            node.rules.append(_any_of([self._compile(b, base) for b in value], value))
        elif keyword in ("items", "additionalProperties", "propertyNames"):
            rule = _APPLICATORS[keyword](self._compile(value, base), schema)
            node.rules.append(rule)
        elif keyword == "type":
            rule = self._type(value)
            if rule in node.rules:
                node.rules.remove(rule)
            node.rules.insert(0, rule)
        elif keyword in _ASSERTIONS:
            rule_for = _ASSERTIONS[keyword]
            rule = rule_for(value, schema)
            if rule is not None:
                node.rules.append(rule)
        else:
            raise ValueError(f"meta-schema: the keyword {keyword} is not supported")

    def _resolve(
        self, keyword: str, schema: Mapping[str, Any], base: str
    ) -> tuple[Any, str]:
        """The subschema a reference leads to, and the base URI there."""
        ref = schema[keyword]
        if keyword != "$ref":
            return self._dynamic_target(keyword, ref, base)
        uri, fragment = urljoin(base, ref)
        if fragment and not fragment.startswith("/"):
            raise ValueError("meta-schema: a $ref to an anchor is not supported")
        return lookup(self._resource(uri), fragment), uri

    def _dynamic_target(self, keyword: str, ref: str, base: str) -> tuple[Any, str]:
        # The dynamic scope of a meta-schema check always starts at its root,
        # so a dynamic reference whose static target is dynamically anchored
        # lands on the root, provided the root carries the same anchor.
        here = self._resource(urljoin(base, ref)[0])
        root = self._root_schema
        if keyword == "$recursiveRef":
            anchored = ref == "#" and here.get("$recursiveAnchor") is True
            anchored = anchored and root.get("$recursiveAnchor") is True
        else:
            name = urljoin(base, ref)[1]
            anchored = here.get("$dynamicAnchor") == name == root.get("$dynamicAnchor")
        if not anchored:
            raise ValueError(f"meta-schema: this {keyword} is not supported")
        return root, self._base(root, "")

    def _resource(self, uri: str) -> Mapping[str, Any]:
        if uri not in self._resources:
            self._resources[uri] = self._lookup(uri)
        return self._resources[uri]

    def _type(self, names: Any) -> Rule:
        """The rule for ``names``: one per list of names, so merges can tell
        the same rule again."""
        key = names if isinstance(names, str) else tuple(names)
        if key not in self._types:
            self._types[key] = self._new_type(names)
        return self._types[key]

    def _new_type(self, names: Any) -> Rule:
        listed = [names] if isinstance(names, str) else list(names)
        allowed = frozenset(kind for name in listed for kind in _TYPES[name])
        # An integer written 1.0 or 1e2 parses as a Decimal.
        fractions = (
            self._fraction_integers and "integer" in listed and "number" not in listed
        )

        def rule(x: Any) -> Failure | None:
            if type(x) in allowed or (fractions and _integral(x)):
                return None
            return None, "type", names

        return rule


def _integral(x: Any) -> bool:
    if isinstance(x, Decimal):
        return x == x.to_integral_value()
    return isinstance(x, float) and x.is_integer()


def _is_number(x: Any) -> bool:
    return type(x) in _NUMBERS


# -- applicators -----------------------------------------------------------------


def _any_of(branches: list[_Node], value: Any) -> Rule:
    def rule(x: Any) -> Failure | None:
        failures = []
        for branch in branches:
            failure = branch.check(x)
            if failure is None:
                return None
            failures.append(failure)
        return _most_relevant(failures) or (None, "anyOf", value)

    return rule


def _most_relevant(failures: list[Failure]) -> Failure | None:
    """The one failure of a branch made for this kind of value, if just one.

    A branch that fails on ``type`` right here was for another kind of
    value; what a single remaining branch says is the useful message.
    """
    fitting = [f for f in failures if not (f[0] is None and f[1] == "type")]
    return fitting[0] if len(fitting) == 1 else None


def _items(node: _Node, schema: Mapping[str, Any]) -> Rule:
    def rule(x: Any) -> Failure | None:
        if type(x) is not list:
            return None
        for i, item in enumerate(x):
            failure = node.check(item)
            if failure is not None:
                return (i, failure[0]), failure[1], failure[2]
        return None

    return rule


def _additional_properties(node: _Node, schema: Mapping[str, Any]) -> Rule:
    if "patternProperties" in schema:
        raise ValueError("meta-schema: patternProperties is not supported")
    known = frozenset(schema.get("properties", ()))

    def rule(x: Any) -> Failure | None:
        if type(x) is not dict:
            return None
        for key, value in x.items():
            if key not in known:
                failure = node.check(value)
                if failure is not None:
                    return (key, failure[0]), failure[1], failure[2]
        return None

    return rule


def _property_names(node: _Node, schema: Mapping[str, Any]) -> Rule:
    def rule(x: Any) -> Failure | None:
        if type(x) is not dict:
            return None
        for key in x:
            failure = node.check(key)
            if failure is not None:
                return None, failure[1], failure[2]
        return None

    return rule


_APPLICATORS: dict[str, Callable[[_Node, Mapping[str, Any]], Rule]] = {
    "items": _items,
    "additionalProperties": _additional_properties,
    "propertyNames": _property_names,
}


# -- assertions --------------------------------------------------------------------


def _enum(values: Any, schema: Mapping[str, Any]) -> Rule:
    keys = frozenset(json_key(v) for v in values)

    def rule(x: Any) -> Failure | None:
        return None if json_key(x) in keys else (None, "enum", values)

    return rule


def _pattern(pattern: Any, schema: Mapping[str, Any]) -> Rule:
    search = re.compile(pattern).search

    def rule(x: Any) -> Failure | None:
        if type(x) is not str or search(x):
            return None
        return None, "pattern", pattern

    return rule


def _minimum(limit: Any, schema: Mapping[str, Any]) -> Rule:
    # Draft-04 makes minimum exclusive with "exclusiveMinimum": true.
    exclusive = schema.get("exclusiveMinimum") is True

    def rule(x: Any) -> Failure | None:
        if not _is_number(x) or x > limit or (x == limit and not exclusive):
            return None
        return None, "minimum", limit

    return rule


def _exclusive_minimum(limit: Any, schema: Mapping[str, Any]) -> Rule | None:
    if isinstance(limit, bool):  # draft-04's modifier, read by minimum
        return None

    def rule(x: Any) -> Failure | None:
        if not _is_number(x) or x > limit:
            return None
        return None, "exclusiveMinimum", limit

    return rule


def _min_items(limit: Any, schema: Mapping[str, Any]) -> Rule:
    def rule(x: Any) -> Failure | None:
        if type(x) is not list or len(x) >= limit:
            return None
        return None, "minItems", limit

    return rule


def _unique_items(unique: Any, schema: Mapping[str, Any]) -> Rule | None:
    if unique is not True:
        return None

    def rule(x: Any) -> Failure | None:
        if type(x) is not list or len({json_key(item) for item in x}) == len(x):
            return None
        return None, "uniqueItems", unique

    return rule


def _dependencies(value: Any, schema: Mapping[str, Any]) -> Rule:
    if not all(isinstance(names, list) for names in value.values()):
        raise ValueError("meta-schema: schema dependencies are not supported")

    def rule(x: Any) -> Failure | None:
        if type(x) is not dict:
            return None
        for key, names in value.items():
            if key in x and any(name not in x for name in names):
                return None, "dependencies", value
        return None

    return rule


_ASSERTIONS: dict[str, Callable[[Any, Mapping[str, Any]], Rule | None]] = {
    "dependencies": _dependencies,
    "enum": _enum,
    "exclusiveMinimum": _exclusive_minimum,
    "minItems": _min_items,
    "minimum": _minimum,
    "pattern": _pattern,
    "uniqueItems": _unique_items,
}


def specification_draft(
    name: str,
    uri: str,
    keywords: frozenset[str],
    **flags: Any,
) -> Draft:
    """A :class:`Draft` for a dialect whose meta-schema
    ``jsonschema_specifications`` ships, with its compiled meta-schema check.

    ``uri`` selects the draft with and without a trailing ``#``; ``flags``
    are the :class:`Draft` fields that say how the draft differs (e.g.
    ``ref_overrides_siblings=True``) and ``default``. Draft plugins (built-in
    or not) call this once at import.
    """
    lookup = jsonschema_specifications.REGISTRY.contents
    draft = Draft(
        name=name,
        uris=(uri, uri + "#"),
        meta_schema=lookup(uri),
        keywords=keywords,
        **flags,
    )
    meta = MetaSchema(draft, lookup)
    return replace(draft, meta_validator=meta.errors)
