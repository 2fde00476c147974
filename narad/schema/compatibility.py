"""The compatibility engine: may a schema change refuse a message it accepted?

:func:`check` walks the previous and the proposed version of a schema side by
side and, at every subschema pair, calls the rule registered for each keyword
present on either side (the ``narad_compatibility_rules`` hook). The engine
knows how documents are walked and how references resolve; what a keyword
means, and whether a change to it is safe, is the rules' business.

A rule is ``rule(old, new, ctx)``: ``old`` and ``new`` are the keyword's values
(:data:`ABSENT` when a side lacks it, or its draft does not define it) and
``ctx`` is a :class:`RuleContext`. It yields an :class:`Incompatibility` for
every way the change can refuse a message the previous version accepted; the
engine stamps the keyword and location on what the rule yields, as jsonschema
stamps paths on the errors its keyword functions yield. Rules recurse into
subschemas through :meth:`RuleContext.compare`.

Walking rules the engine applies before any rule runs:

- ``$ref`` is resolved on both sides before a pair is compared, when it has no
  sibling that constrains values (see :func:`document_keyword`). A loop of
  nothing but ``$ref`` accepts nothing: anything may replace it, and it may
  replace nothing.
- A pair already being compared further up counts as compatible, the way
  recursive types are compared.
- A part unchanged byte for byte (exact parse: key order and number spelling
  kept, ``$ref`` targets unchanged too) is compatible.
- ``false``, or a loop of ``$ref``, may become anything.
- A nested schema may always become ``true`` or ``{}``; the root may not, since
  ``{}`` is not a widening of a schema with properties.
- A keyword the side's draft does not define is an annotation and is ignored,
  unless its rule is an :func:`extension`. A keyword with no rule may only stay
  identical or be removed.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from collections.abc import Iterable
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from enum import Enum
from enum import unique
from typing import Any
from typing import Literal

from narad.schema.drafts import Draft
from narad.schema.jsontext import json_equal
from narad.schema.jsontext import json_key
from narad.schema.resolver import SchemaIndex
from narad.schema.resolver import UnresolvableRef
from narad.schema.resolver import escape
from narad.schema.resolver import subschema_children

__all__ = (
    "ABSENT",
    "ANNOTATIONS",
    "MAX_DEPTH",
    "Change",
    "Incompatibility",
    "Rule",
    "RuleContext",
    "Side",
    "annotations_only_change",
    "changes_freely",
    "check",
    "document_keyword",
    "extension",
    "identical_or_removed",
    "same_json_value",
    "show",
)

# "Annotations are not a change": the keywords a change may touch and still
# register nothing, wherever a subschema sits.
ANNOTATIONS = frozenset(
    {
        "title",
        "description",
        "examples",
        "$comment",
        "default",
        "deprecated",
        "readOnly",
        "writeOnly",
    }
)

# Pairs of subschemas nested inside one another through rules and $ref; past
# this the change is refused rather than risking the interpreter's stack.
# Documents nest at most 64 levels, so only a changed $ref chain gets here.
MAX_DEPTH = 120

Side = Literal["old", "new"]


class _Absent:
    """The value of a keyword a subschema does not have."""

    _instance: _Absent | None = None

    def __new__(cls) -> _Absent:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "ABSENT"

    def __bool__(self) -> bool:
        return False


ABSENT: Any = _Absent()
_LOOP = object()  # what a loop of nothing but $ref resolves to


@unique
class Change(Enum):
    """Why a change is incompatible; names follow karapace's ``Incompatibility``."""

    type_narrowed = "type_narrowed"
    type_added = "type_added"
    enum_array_narrowed = "enum_array_narrowed"
    enum_added = "enum_added"
    const_changed = "const_changed"
    const_added = "const_added"
    minimum_added = "minimum_added"
    minimum_increased = "minimum_increased"
    minimum_exclusive_added = "minimum_exclusive_added"
    minimum_exclusive_increased = "minimum_exclusive_increased"
    maximum_added = "maximum_added"
    maximum_decreased = "maximum_decreased"
    maximum_exclusive_added = "maximum_exclusive_added"
    maximum_exclusive_decreased = "maximum_exclusive_decreased"
    multiple_added = "multiple_added"
    multiple_changed = "multiple_changed"
    min_length_added = "min_length_added"
    min_length_increased = "min_length_increased"
    max_length_added = "max_length_added"
    max_length_decreased = "max_length_decreased"
    min_items_added = "min_items_added"
    min_items_increased = "min_items_increased"
    max_items_added = "max_items_added"
    max_items_decreased = "max_items_decreased"
    min_properties_added = "min_properties_added"
    min_properties_increased = "min_properties_increased"
    max_properties_added = "max_properties_added"
    max_properties_decreased = "max_properties_decreased"
    min_contains_increased = "min_contains_increased"
    max_contains_added = "max_contains_added"
    max_contains_decreased = "max_contains_decreased"
    pattern_added = "pattern_added"
    pattern_changed = "pattern_changed"
    format_added = "format_added"
    format_changed = "format_changed"
    unique_items_added = "unique_items_added"
    required_attribute_added = "required_attribute_added"
    property_removed = "property_removed"
    additional_properties_added = "additional_properties_added"
    items_added = "items_added"
    tuple_items_changed = "tuple_items_changed"
    additional_items_added = "additional_items_added"
    sum_type_narrowed = "sum_type_narrowed"
    product_type_extended = "product_type_extended"
    keyword_added = "keyword_added"
    keyword_changed = "keyword_changed"
    keyword_removed = "keyword_removed"
    ref_added = "ref_added"
    ref_loop = "ref_loop"
    schema_closed = "schema_closed"
    dialect_changed = "dialect_changed"
    too_deep = "too_deep"


@dataclass(frozen=True)
class Incompatibility:
    """One way a change can refuse a message the previous version accepted.

    Attributes:
        change: What kind of narrowing it is.
        message: The rulebook's wording, e.g. ``type "integer" no longer
            allowed``.
        keyword: The keyword judged; stamped by the engine when a rule leaves
            it empty.
        location: JSON pointer of the subschema in the proposed schema
            (``"/properties/qty"``; ``""`` is the root, shown as "the root";
            through a ``$ref``, its target's pointer); stamped likewise.
    """

    change: Change
    message: str
    keyword: str = ""
    location: str = ""

    def __str__(self) -> str:
        return f"at {self.location or 'the root'}: {self.message}"


Rule = Callable[[Any, Any, "RuleContext"], Iterable[Incompatibility]]


def document_keyword(rule: Rule) -> Rule:
    """Mark ``rule``'s keyword as one that constrains no value where it sits.

    Such keywords describe the document (dialect, identifiers, definitions,
    annotations). They may sit beside a ``$ref`` without making it a ``$ref``
    with siblings, a subschema of nothing else accepts everything, and their
    rule compares them where they are written, before ``$ref`` is resolved.
    """
    rule.narad_document_keyword = True  # type: ignore[attr-defined]
    return rule


def extension(rule: Rule) -> Rule:
    """Mark ``rule``'s keyword as applying whatever the schema's draft.

    A keyword a draft does not define is an annotation there, and unmarked
    rules are not called for it (``const`` in draft-04). A plugin adding its
    own vocabulary marks its rules so that they are.
    """
    rule.narad_extension = True  # type: ignore[attr-defined]
    return rule


@document_keyword
def changes_freely(old: Any, new: Any, ctx: RuleContext) -> Iterable[Incompatibility]:
    """The rule of a keyword that can change freely: it refuses nothing."""
    return ()


def identical_or_removed(
    old: Any, new: Any, ctx: RuleContext
) -> Iterable[Incompatibility]:
    """The rule of a keyword that may only stay identical (following ``$ref``)
    or be removed; also what a keyword with no rule gets."""
    if new is ABSENT or (old is not ABSENT and ctx.identical(old, new)):
        return
    if old is ABSENT:
        yield Incompatibility(Change.keyword_added, f"{ctx.keyword} added")
    else:
        yield Incompatibility(Change.keyword_changed, f"{ctx.keyword} changed")


def show(value: Any, limit: int = 60) -> str:
    """``value`` as compact JSON for a message, numbers as written, cut short."""
    text = _json_text(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _json_text(value: Any) -> str:
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, list):
        return "[" + ",".join(_json_text(item) for item in value) + "]"
    if isinstance(value, dict):
        members = (
            json.dumps(k, ensure_ascii=False) + ":" + _json_text(v)
            for k, v in value.items()
        )
        return "{" + ",".join(members) + "}"
    return json.dumps(value, ensure_ascii=False)


def same_json_value(old: Any, new: Any) -> bool:
    """Whether two parsed documents are the same JSON value (idempotent change)."""
    return json_equal(old, new)


def annotations_only_change(old: Any, new: Any, *, draft: Draft) -> bool:
    """Whether ``old`` and ``new`` differ at most in :data:`ANNOTATIONS`.

    Annotations are removed from every subschema, wherever it sits; a member
    of ``properties`` named ``description`` is a property, not an annotation,
    and is kept. Equal documents count as differing only in annotations.
    """
    return json_key(_strip(old, draft.keywords)) == json_key(
        _strip(new, draft.keywords)
    )


def _strip(schema: Any, keywords: frozenset[str]) -> Any:
    if not isinstance(schema, dict):
        return schema
    stripped = {k: v for k, v in schema.items() if k not in ANNOTATIONS}
    for tokens, child in subschema_children(schema, keywords):
        key = tokens[0]
        if len(tokens) == 1:
            stripped[key] = _strip(child, keywords)
            continue
        if stripped[key] is schema[key]:
            stripped[key] = (list if isinstance(schema[key], list) else dict)(
                schema[key]
            )
        stripped[key][tokens[1]] = _strip(child, keywords)
    return stripped


def check(
    old: Any,
    new: Any,
    *,
    old_draft: Draft,
    new_draft: Draft,
    rules: Mapping[str, Rule],
) -> list[Incompatibility]:
    """Every way ``new`` can refuse a message ``old`` accepted; empty if none.

    Args:
        old: The current version, parsed by :func:`narad.schema.jsontext.loads`.
        new: The proposed version, parsed the same way.
        old_draft: The draft ``old`` is written in.
        new_draft: The draft ``new`` is written in.
        rules: Keyword to rule, as merged from ``narad_compatibility_rules``.
    """
    walk = _Walk(_Document(old, old_draft), _Document(new, new_draft), rules)
    found = walk.compare(old, new, "", nested=False)
    return list(dict.fromkeys(found))


class _Document:
    """One side of the comparison: the document and where its references lead.

    The index of the document is built on the first reference followed, so a
    change to a schema without references never pays for it.
    """

    def __init__(self, document: Any, draft: Draft) -> None:
        self.document = document
        self.draft = draft
        self._index: SchemaIndex | None = None
        self.bases: dict[int, str] = {}
        self.pointers: dict[int, str] = {}  # of subschemas reached by reference

    @property
    def index(self) -> SchemaIndex:
        if self._index is None:
            index = SchemaIndex(self.document, draft=self.draft, base_uri="narad:")
            self.bases.update(
                (id(schema), index.base_uris[pointer])
                for pointer, schema in index.subschemas.items()
                if isinstance(schema, dict)
            )
            self._index = index
        return self._index

    def base(self, schema: Any) -> str:
        index = self.index
        return self.bases.get(id(schema), index.root_uri)

    def resolve(self, ref: str, written_in: Any) -> Any:
        try:
            target = self.index.resolve(ref, self.base(written_in))
        except UnresolvableRef:
            return ABSENT
        self.bases.setdefault(id(target.schema), target.base_uri)
        self.pointers.setdefault(id(target.schema), target.pointer)
        return target.schema

    def dynamic_targets(self, holder: dict[str, Any], keyword: str) -> list[Any]:
        """Every target a dynamic reference in ``holder`` can pick."""
        base = self.base(holder)
        try:
            if keyword == "$recursiveRef":
                targets = self.index.recursive_targets(base)
            else:
                targets = self.index.dynamic_targets(holder[keyword], base)
        except UnresolvableRef:
            return [ABSENT]
        return [target.schema for target in targets]


class RuleContext:
    """What a rule knows besides the two values of its keyword.

    Attributes:
        keyword: The keyword being judged.
        location: JSON pointer of this subschema in the proposed schema
            (where a ``$ref`` led, the pointer of its target).
        old: The previous subschema's keywords in force: those its draft
            defines, plus :func:`extension` keywords (``true`` reads as ``{}``),
            after ``$ref`` resolution.
        new: The same for the proposed subschema.
        old_schema: The previous subschema as written (after ``$ref``
            resolution), annotations included.
        new_schema: The same for the proposed subschema.
        old_draft: The draft of the previous version.
        new_draft: The draft of the proposed version.
    """

    __slots__ = (
        "_walk",
        "keyword",
        "location",
        "new",
        "new_draft",
        "new_schema",
        "old",
        "old_draft",
        "old_schema",
    )

    def __init__(
        self, walk: _Walk, location: str, old_schema: Any, new_schema: Any
    ) -> None:
        self._walk = walk
        self.keyword = ""
        self.location = location
        self.old_schema = old_schema
        self.new_schema = new_schema
        self.old = walk.in_force(old_schema, "old")
        self.new = walk.in_force(new_schema, "new")
        self.old_draft = walk.old.draft
        self.new_draft = walk.new.draft

    def at(self, *tokens: str | int) -> str:
        """The pointer of a place below this subschema, e.g. ``at("items")``."""
        location = self.location
        for token in tokens:  # called per subschema pair: no generator
            location += "/" + (escape(token) if isinstance(token, str) else str(token))
        return location

    def compare(self, old: Any, new: Any, location: str) -> list[Incompatibility]:
        """Compare a previous subschema with a proposed one sitting at ``location``.

        Returns what refuses a message ``old`` accepted. Results are memoised
        by pair, so a rule may try pairs (``anyOf`` does) at little cost.
        """
        return self._walk.compare(old, new, location, nested=True)

    def identical(self, old: Any, new: Any) -> bool:
        """Whether ``old`` and ``new`` are the same JSON value, and every
        ``$ref`` (and dynamic reference) in them leads to identical targets."""
        return self._walk.same(old, new, exact=False)

    def unchanged(self, old: Any, new: Any) -> bool:
        """Like :meth:`identical`, but byte for byte: key order and number
        spelling count (``10`` is not ``1e1``), in reference targets too."""
        return self._walk.same(old, new, exact=True)

    def resolve(self, ref: str, side: Side) -> Any:
        """The subschema ``ref`` leads to from here on ``side``, or ABSENT."""
        holder = self.old_schema if side == "old" else self.new_schema
        return self._walk.side(side).resolve(ref, holder)

    def accepts_everything(self, schema: Any, side: Side) -> bool:
        """Whether ``schema`` (as on ``side``) accepts every JSON value: ``true``,
        ``{}``, or nothing but annotations and document keywords."""
        return self._walk.accepts_everything(schema, side)


class _Walk:
    """One comparison of two documents, with its memo of subschema pairs."""

    def __init__(self, old: _Document, new: _Document, rules: Mapping[str, Rule]):
        self.old = old
        self.new = new
        self.rules = rules
        self.extensions = _marked(rules, "narad_extension")
        self.document_keywords = _marked(rules, "narad_document_keyword")
        # Per side, as sets to test a whole subschema's keys at once: those in
        # effect, those constraining values, those that make a $ref not bare.
        self.effective = {
            side: doc.draft.keywords | self.extensions
            for side, doc in (("old", old), ("new", new))
        }
        self.constraining = {
            side: keywords - self.document_keywords
            for side, keywords in self.effective.items()
        }
        self.ref_siblings = {
            side: keywords - {"$ref"} for side, keywords in self.constraining.items()
        }
        self.done: dict[tuple[int, int], list[Incompatibility]] = {}
        # Pairs under comparison, by depth; ``low`` is the shallowest of them
        # the current comparison assumed compatible.
        self.active: dict[tuple[int, int], int] = {}
        self.low = 0
        self.provisional: list[tuple[int, int]] = []
        # Per exactness (False: same JSON value, True: byte for byte).
        self.same_memo: dict[bool, dict[tuple[int, int], bool]] = {
            False: {},
            True: {},
        }
        self.equal_memo: dict[bool, dict[tuple[int, int], Any]] = {
            False: {},
            True: {},
        }
        self.by_repr = True  # see exactly_equal

    def side(self, side: Side) -> _Document:
        return self.old if side == "old" else self.new

    # -- keywords ------------------------------------------------------------

    def in_force(self, schema: Any, side: Side) -> dict[str, Any]:
        if not isinstance(schema, dict):
            return {}
        effective = self.effective[side]
        if effective.issuperset(schema):
            return dict(schema)
        return {k: v for k, v in schema.items() if k in effective}

    def accepts_everything(self, schema: Any, side: Side) -> bool:
        schema = self.deref(schema, side)
        if schema is True:
            return True
        return isinstance(schema, dict) and self.constraining[side].isdisjoint(schema)

    # -- references ----------------------------------------------------------

    def is_bare_ref(self, schema: Any, side: Side) -> bool:
        if not isinstance(schema, dict) or not isinstance(schema.get("$ref"), str):
            return False
        if "$ref" not in self.effective[side]:
            return False
        if self.side(side).draft.ref_overrides_siblings:
            return True
        return self.ref_siblings[side].isdisjoint(schema)

    def deref(self, schema: Any, side: Side) -> Any:
        """Follow bare ``$ref`` to a subschema; ``_LOOP`` for a loop of them."""
        if not self.is_bare_ref(schema, side):
            return schema
        seen: set[int] = set()
        while self.is_bare_ref(schema, side):
            if id(schema) in seen:
                return _LOOP
            seen.add(id(schema))
            target = self.side(side).resolve(schema["$ref"], schema)
            if target is ABSENT:
                break  # unresolvable: the $ref rule judges it as written
            schema = target
        return schema

    # -- comparing -----------------------------------------------------------

    def compare(
        self, old: Any, new: Any, location: str, *, nested: bool
    ) -> list[Incompatibility]:
        if self.same(old, new, exact=True):
            return []
        old_target, new_target = self.deref(old, "old"), self.deref(new, "new")
        if old_target is _LOOP or old_target is False:
            return []
        if new_target is _LOOP:
            loop = "a loop of nothing but $ref accepts nothing"
            return [Incompatibility(Change.ref_loop, loop, "$ref", location)]
        if new_target is False:
            closed = "schema false accepts nothing"
            return [Incompatibility(Change.schema_closed, closed, "false", location)]
        if nested and self.accepts_everything(new_target, "new"):
            return []
        # Report where the proposed schema says it, not the $ref path to it.
        location = self.new.pointers.get(id(new_target), location)
        key = (id(old_target), id(new_target))
        if key in self.done:
            return self.done[key]
        if key in self.active:
            self.low = min(self.low, self.active[key])
            return []
        depth = len(self.active)
        if depth >= MAX_DEPTH:
            deep = f"nested deeper than {MAX_DEPTH} levels through $ref to compare"
            return [Incompatibility(Change.too_deep, deep, "$ref", location)]
        outer_low, self.low = self.low, depth
        mark = len(self.provisional)
        self.active[key] = depth
        try:
            found = self.dispatch(old, new, old_target, new_target, location)
        finally:
            del self.active[key]
        self.settle(key, found, depth, mark)
        self.low = min(outer_low, self.low)
        return found

    def settle(
        self, key: tuple[int, int], found: list[Incompatibility], depth: int, mark: int
    ) -> None:
        """Remember a verdict, and decide the ones that leant on this pair.

        A failure always holds. A success that assumed a pair still open
        further up is provisional until that pair is decided: if this pair
        failed, every success remembered since it opened may have leant on it
        and is forgotten; if it succeeded leaning on nothing further up,
        they all hold.
        """
        if found:
            for provisional in self.provisional[mark:]:
                del self.done[provisional]
            del self.provisional[mark:]
        elif self.low >= depth:
            del self.provisional[mark:]
        else:
            self.provisional.append(key)
        self.done[key] = found

    def dispatch(
        self, old: Any, new: Any, old_target: Any, new_target: Any, location: str
    ) -> list[Incompatibility]:
        ctx = RuleContext(self, location, old_target, new_target)
        if old is old_target and new is new_target:
            # Nothing resolved: every keyword is judged where it is written,
            # and a keyword not in force on either side has no value.
            olds, news = ctx.old, ctx.new
            keywords: Iterable[str] = {**olds, **news}
        else:
            olds, news, keywords = self.written(old, new, ctx)
        rules = self.rules
        found: list[Incompatibility] = []
        for keyword in keywords:
            old_value = olds.get(keyword, ABSENT)
            new_value = news.get(keyword, ABSENT)
            if old_value is ABSENT and new_value is ABSENT:
                continue
            ctx.keyword = keyword
            rule = rules.get(keyword, identical_or_removed)
            for problem in rule(old_value, new_value, ctx):
                if not problem.keyword:
                    problem = Incompatibility(
                        problem.change, problem.message, keyword, location
                    )
                found.append(problem)
        return found

    def written(
        self, old: Any, new: Any, ctx: RuleContext
    ) -> tuple[dict[str, Any], dict[str, Any], Iterable[str]]:
        """Each side's keyword values where a ``$ref`` was resolved, and the
        keywords of both sides, in order."""
        written_old, written_new = _as_dict(old), _as_dict(new)
        keywords = dict.fromkeys([*ctx.old, *ctx.new])
        keywords.update(dict.fromkeys(k for k in written_old if k != "$ref"))
        keywords.update(dict.fromkeys(k for k in written_new if k != "$ref"))
        olds = self.values(ctx.old, written_old, "old")
        news = self.values(ctx.new, written_new, "new")
        return olds, news, keywords

    def values(
        self, in_force: dict[str, Any], written: dict[str, Any], side: Side
    ) -> dict[str, Any]:
        """Document keywords' values where the ``$ref`` is written (if in
        effect there), the others' at its target."""
        document, effective = self.document_keywords, self.effective[side]
        values = {k: v for k, v in in_force.items() if k not in document}
        values.update(
            (k, v) for k, v in written.items() if k in document and k in effective
        )
        return values

    # -- sameness ------------------------------------------------------------

    def same(self, old: Any, new: Any, *, exact: bool) -> bool:
        """Equal values whose references lead to equal targets.

        Explores every pair of reference targets reachable from the pair and
        decides them all at once (a pair fails when it differs or leads to a
        pair that fails), so each pair is explored once per check.
        """
        memo = self.same_memo[exact]
        top = (id(old), id(new))
        if top in memo:
            return memo[top]
        if exact:
            verdict = self.exactly_equal(old, new)
            if verdict is not None:
                memo[top] = verdict
                return verdict
        holders = self.equal(old, new, exact)
        if not holders:  # different, or equal with nothing to follow
            memo[top] = holders is not None
            return memo[top]
        leads_here: dict[tuple[int, int], list[tuple[int, int]]] = {top: []}
        failed: list[tuple[int, int]] = []
        pending = [(old, new)]
        while pending:
            a, b = pending.pop()
            key = (id(a), id(b))
            holders = self.equal(a, b, exact)
            if holders is None:
                failed.append(key)
                continue
            for pair in self.targets(holders):
                target = (id(pair[0]), id(pair[1]))
                if memo.get(target) is False:
                    failed.append(key)
                elif target not in memo:
                    if target not in leads_here:
                        leads_here[target] = []
                        pending.append(pair)
                    leads_here[target].append(key)
        bad = set(failed)
        while failed:
            for key in leads_here[failed.pop()]:
                if key not in bad:
                    bad.add(key)
                    failed.append(key)
        memo.update((key, key not in bad) for key in leads_here)
        if exact and not memo[top]:
            self.by_repr = False  # see exactly_equal
        return memo[top]

    def exactly_equal(self, old: Any, new: Any) -> bool | None:
        """Whether ``old`` and ``new`` are equal byte for byte, or None when
        only :meth:`equal`'s walk can tell (as when they hold references).

        Python's own comparison, in C, rejects most differences; the ``repr``
        of parsed JSON keeps key order, types and number spelling, so equal
        ones mean equal parts. A pair equal under ``==`` yet found to differ
        (written apart, or through its references) is compared part by part
        next, where ``repr`` would go over the same text again at every level
        of nesting: from then on the walk, whose memo keeps it linear, decides.
        """
        if old is ABSENT or new is ABSENT or old != new:
            return old is new
        if not isinstance(old, dict | list):
            if type(old) is not type(new):
                return False
            return not isinstance(old, Decimal) or old.as_tuple() == new.as_tuple()
        if not self.by_repr:
            return None
        text = repr(old)
        if text != repr(new):
            self.by_repr = False
            return False
        return None if any(mark in text for mark in _REFERENCE_MARKS) else True

    def equal(self, a: Any, b: Any, exact: bool) -> tuple[Any, ...] | None:
        """None if ``a`` and ``b`` differ, else the pairs of dicts within them
        that hold references (memoised per pair of dicts)."""
        if isinstance(a, dict):
            memo = self.equal_memo[exact]
            key = (id(a), id(b))
            if key not in memo:
                memo[key] = self.equal_dicts(a, b, exact)
            return memo[key]
        if isinstance(a, list):
            if not isinstance(b, list) or len(a) != len(b):
                return None
            holders: list[Any] = []
            for x, y in zip(a, b, strict=True):
                found = self.equal(x, y, exact)
                if found is None:
                    return None
                holders.extend(found)
            return tuple(holders)
        if a is ABSENT or b is ABSENT:
            return () if a is b else None
        if exact:
            if type(a) is not type(b):
                return None
            if isinstance(a, Decimal):
                return () if a.as_tuple() == b.as_tuple() else None
            return () if a == b else None
        return () if json_key(a) == json_key(b) else None

    def equal_dicts(
        self, a: dict[str, Any], b: Any, exact: bool
    ) -> tuple[Any, ...] | None:
        if not isinstance(b, dict) or len(a) != len(b):
            return None
        if exact and list(a) != list(b):
            return None
        holders: list[Any] = []
        if any(isinstance(a.get(k), str) for k in _REFERENCES):
            holders.append((a, b))
        for key, value in a.items():
            if key not in b:
                return None
            found = self.equal(value, b[key], exact)
            if found is None:
                return None
            holders.extend(found)
        return tuple(holders)

    def targets(self, holders: tuple[Any, ...]) -> Iterable[tuple[Any, Any]]:
        """Pairs of targets of the references pairs of equal subschemas hold."""
        for old_holder, new_holder in holders:
            yield from self.holder_targets(old_holder, new_holder)

    def holder_targets(
        self, old_holder: dict[str, Any], new_holder: dict[str, Any]
    ) -> Iterable[tuple[Any, Any]]:
        for keyword in _REFERENCES:
            if not isinstance(old_holder.get(keyword), str):
                continue
            if keyword == "$ref":
                old_targets = [self.old.resolve(old_holder[keyword], old_holder)]
                new_targets = [self.new.resolve(new_holder[keyword], new_holder)]
            else:
                old_targets = self.old.dynamic_targets(old_holder, keyword)
                new_targets = self.new.dynamic_targets(new_holder, keyword)
            if len(old_targets) != len(new_targets):
                yield ABSENT, None  # never equal: the dynamic scope changed
            yield from zip(old_targets, new_targets, strict=False)


# The keywords by which a subschema points elsewhere in the document.
_REFERENCES = ("$ref", "$dynamicRef", "$recursiveRef")
# How a member named after one of them starts in the ``repr`` of a dict.
_REFERENCE_MARKS = tuple(f"'{keyword}': " for keyword in _REFERENCES)


def _marked(rules: Mapping[str, Rule], mark: str) -> frozenset[str]:
    return frozenset(k for k, rule in rules.items() if getattr(rule, mark, False))


def _as_dict(schema: Any) -> dict[str, Any]:
    return schema if isinstance(schema, dict) else {}
