"""The public API for compatibility rule plugins.

A schema change is compatible when every message the previous version accepted
stays valid. Narad's engine walks the previous and the proposed version side
by side and, at every pair of subschemas, calls the rule registered for each
keyword present on either side (hook ``narad_compatibility_rules``, see
:mod:`narad.hookspecs`). A rule knows what its keyword means; the engine knows
how documents are walked and where references lead.

A rule is a function ``rule(old, new, ctx)``:

- ``old`` and ``new`` are the keyword's values in the previous and the
  proposed subschema, :data:`ABSENT` where a side lacks the keyword;
- ``ctx`` is the :class:`RuleContext`: where the pair sits, both subschemas,
  both drafts, and the engine's services (recurse with
  :meth:`RuleContext.compare`, test sameness with :meth:`RuleContext.identical`);
- it yields a :class:`Violation` for every way the change can refuse a message
  the previous version accepted, and never raises for an incompatible change.
  Leave ``keyword`` and ``pointer`` empty: the engine fills them in.

Example, a rule for a custom keyword ``x-sensitive`` that may never be dropped::

    from narad import hookimpl
    from narad.compatibility import ABSENT, Violation, extension

    @extension  # no JSON Schema draft defines x-sensitive
    def x_sensitive(old, new, ctx):
        if old is True and new is not True:
            yield Violation("sensitivity_dropped", "x-sensitive dropped")

    @hookimpl
    def narad_compatibility_rules():
        return {"x-sensitive": x_sensitive}

Compatibility promise: the names in ``__all__`` keep their meaning and
signatures within a major version of Narad. New optional arguments, new
:class:`RuleContext` attributes and new :class:`Change` members may be added.
Everything under ``narad.schema`` is internal and may change at any release.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from collections.abc import Iterable
from dataclasses import dataclass
from decimal import Decimal
from enum import StrEnum
from enum import unique
from typing import TYPE_CHECKING
from typing import Any
from typing import Literal

from narad.jsontext import json_equal
from narad.jsontext import json_key
from narad.quoting import cut_pointer
from narad.schema.patterns import PatternError
from narad.schema.patterns import regex_search
from narad.schema.resolver import LIST_SUBSCHEMAS
from narad.schema.resolver import MAP_SUBSCHEMAS
from narad.schema.resolver import escape

if TYPE_CHECKING:
    from narad.schema.compatibility.engine import Walk
    from narad.schema.drafts import Draft

__all__ = (
    "ABSENT",
    "ANNOTATIONS",
    "IN_PLACE",
    "UNKNOWN",
    "Change",
    "InPlace",
    "Rule",
    "RuleContext",
    "Side",
    "Violation",
    "changes_freely",
    "document_keyword",
    "extension",
    "identical_or_opened",
    "identical_or_removed",
    "is_document_keyword",
    "is_extension",
    "json_equal",
    "json_key",
    "pattern_matches",
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


#: The value a rule receives for a keyword a side lacks (falsy; compare with
#: ``is``). Also what :meth:`RuleContext.resolve` answers for a reference that
#: leads nowhere.
ABSENT: Any = _Absent()


@unique
class Change(StrEnum):
    """The kinds of change the built-in rules report (karapace's names).

    A :class:`Violation`'s ``kind`` is any string: a plugin may use these
    members or name its own kinds (a plain string or its own ``StrEnum``).
    """

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
    sum_type_narrowed = "sum_type_narrowed"
    product_type_extended = "product_type_extended"
    keyword_added = "keyword_added"
    keyword_changed = "keyword_changed"
    keyword_removed = "keyword_removed"
    ref_added = "ref_added"
    ref_changed = "ref_changed"
    ref_loop = "ref_loop"
    schema_closed = "schema_closed"
    dialect_changed = "dialect_changed"
    too_deep = "too_deep"


@dataclass(frozen=True)
class Violation:
    """One way a change can refuse a message the previous version accepted.

    Attributes:
        kind: What kind of narrowing it is: a :class:`Change` member or a
            plugin's own name.
        message: The rulebook's wording, e.g. ``type "integer" no longer
            allowed``; it names the keyword.
        keyword: The keyword judged; the engine fills it in when a rule
            leaves it empty.
        pointer: JSON pointer into the **proposed** (new) schema of the
            subschema the keyword is judged at (``"/properties/qty"``; ``""``
            is the root). Where a ``$ref`` led, it is its target's pointer, so
            it always names where the proposed schema says it. The engine
            fills it in when a rule leaves it empty.
    """

    kind: str
    message: str
    keyword: str = ""
    pointer: str = ""

    def __str__(self) -> str:
        return f"at {cut_pointer(self.pointer) or 'the root'}: {self.message}"


class RuleContext:
    """What a rule knows besides the two values of its keyword.

    The engine creates one per pair of subschemas; rules read it and call its
    methods, and never build one.

    Attributes:
        keyword: The keyword being judged.
        pointer: JSON pointer of this subschema in the proposed schema (where
            a ``$ref`` led, the pointer of its target).
        old: The previous subschema's keywords in force: those its draft
            defines, plus :func:`extension` keywords (``true`` reads as
            ``{}``), after ``$ref`` resolution.
        new: The same for the proposed subschema.
        old_schema: The previous subschema as written (after ``$ref``
            resolution), annotations included.
        new_schema: The same for the proposed subschema.
        old_draft: The draft of the previous version.
        new_draft: The draft of the proposed version.
        old_applying: Every previous subschema known to apply to the same
            instance value as ``old_schema`` (itself included): those it
            applies in place of (through :meth:`compare` with
            ``in_place=True``), and those the rule that descended here named
            (``compare(applying=...)``); :data:`UNKNOWN` among them stands for
            constraints the check cannot name. :meth:`InPlace.of` gathers
            everything they apply. What the previous version said about a
            value is found from here.
    """

    __slots__ = (
        "_walk",
        "keyword",
        "new",
        "new_draft",
        "new_schema",
        "old",
        "old_applying",
        "old_draft",
        "old_schema",
        "pointer",
    )

    def __init__(
        self,
        walk: Walk,
        pointer: str,
        old_schema: Any,
        new_schema: Any,
        old_applying: tuple[Any, ...],
    ) -> None:
        self._walk = walk
        self.keyword = ""
        self.pointer = pointer
        self.old_schema = old_schema
        self.new_schema = new_schema
        self.old = walk.in_force(old_schema, "old")
        self.new = walk.in_force(new_schema, "new")
        self.old_draft: Draft = walk.old.draft
        self.new_draft: Draft = walk.new.draft
        self.old_applying = old_applying

    def at(self, *tokens: str | int) -> str:
        """The pointer of a place below this subschema, e.g. ``at("items")``."""
        # join_pointer's loop, inline: this runs for every pair compared.
        pointer = self.pointer
        for token in tokens:
            pointer += "/" + (escape(token) if isinstance(token, str) else str(token))
        return pointer

    def compare(
        self,
        old: Any,
        new: Any,
        pointer: str,
        *,
        in_place: bool = False,
        applying: Iterable[Any] = (),
        first: bool = False,
    ) -> list[Violation]:
        """Compare a previous subschema with a proposed one sitting at ``pointer``.

        Args:
            old: A subschema of the previous version (a part of the document
                as the engine handed it, or ``True``: pairs are remembered by
                identity, so never a copy).
            new: A subschema of the proposed version, the same way.
            pointer: Where ``new`` sits in the proposed schema.
            in_place: True when the pair applies to the same instance value
                as this one (``allOf``, ``anyOf`` branches); False when it
                applies to a value inside it (``properties``, ``items``).
            applying: With ``in_place`` False, the other previous subschemas
                that may apply to that inner value besides ``old`` (another
                ``allOf`` branch's ``items``, say), or :data:`UNKNOWN`; they
                become the pair's :attr:`old_applying`. Naming them keeps a
                rule below from taking the value as unconstrained.
            first: The rule needs only whether the pair is compatible and,
                if not, one reason (the first violation, as a PATCH's check
                finds it), not every violation below it: a full report (a
                dry run) then spends nothing on the pair's other ones. Pass
                it where the rule does not yield what the pair found.

        Returns:
            What refuses a message ``old`` accepted (with ``first``, at most
            the first of it). Results are remembered per pair, so a rule may
            try pairs (``anyOf`` does) at little cost.
        """
        return self._walk.compare(
            old,
            new,
            pointer,
            nested=True,
            in_place=in_place,
            applying=applying,
            first=first,
        )

    def identical(self, old: Any, new: Any, *, keyword: str | None = None) -> bool:
        """Whether two subschemas (or, with ``keyword``, two values of that
        keyword) are identical: the same JSON value, every ``$ref`` (and
        dynamic reference) leading to identical targets.

        Differences that constrain nothing do not count: annotations
        (:data:`ANNOTATIONS`), identifiers and definitions, and keywords the
        draft does not define, wherever a subschema sits. As with
        :meth:`compare`, pass parts of the documents, never copies.
        """
        return self._walk.identical(old, new, keyword)

    def unchanged(self, old: Any, new: Any) -> bool:
        """Like :meth:`identical`, but byte for byte: key order, number
        spelling (``10`` is not ``1e1``) and annotations count, in reference
        targets too, and dynamic references must be reached through the same
        dynamic scope."""
        return self._walk.same(old, new, exact=True)

    def resolve(self, ref: str, side: Side, written_in: Any = None) -> Any:
        """The subschema the reference ``ref`` leads to on ``side``, or
        :data:`ABSENT` if it leads nowhere.

        Args:
            ref: The reference, as written.
            side: ``"old"`` or ``"new"``.
            written_in: The subschema of that side holding the reference,
                whose base URI it is resolved against; this pair's subschema
                of that side by default.
        """
        if written_in is None:
            written_in = self.old_schema if side == "old" else self.new_schema
        return self._walk.side(side).resolve(ref, written_in)

    def accepts_everything(self, schema: Any, side: Side) -> bool:
        """Whether ``schema`` (as on ``side``) accepts every JSON value: ``true``,
        ``{}``, or nothing but annotations and document keywords."""
        return self._walk.accepts_everything(schema, side)


Rule = Callable[[Any, Any, RuleContext], Iterable[Violation]]


#: The keywords by which a subschema applies others to its own instance value:
#: what :meth:`InPlace.of` follows.
IN_PLACE = frozenset(
    {
        "$ref",
        "$dynamicRef",
        "$recursiveRef",
        "allOf",
        "anyOf",
        "oneOf",
        "not",
        "if",
        "dependentSchemas",
        "dependencies",
    }
)


class _Unknown:
    def __repr__(self) -> str:
        return "UNKNOWN"


#: In :attr:`RuleContext.old_applying` and ``compare(applying=...)``: the
#: previous version constrains the value in a way the check cannot name.
UNKNOWN: Any = _Unknown()


@dataclass
class InPlace:
    """What the previous version applies to one instance value, gathered from
    :attr:`RuleContext.old_applying` through the keywords that apply a
    subschema to the same value.

    Attributes:
        positive: The subschemas (dicts) the value must satisfy, all or, for
            ``anyOf`` branches, ``then``/``else`` and ``dependentSchemas``,
            some of them: reached through ``$ref``, ``allOf``, ``anyOf``,
            ``then``, ``else``, ``dependentSchemas`` and draft-07's
            ``dependencies``.
        turning: The subschemas (dicts) whose verdict is negated or decides
            between others: under ``not``, ``oneOf`` or ``if``, and what
            applies in place of them. A part of the value they look at may
            be constrained in ways no single subschema says.
        unknown: Constraints the check cannot name apply (:data:`UNKNOWN`, or
            a dynamic reference whose target the scope decides).
    """

    positive: list[dict[str, Any]]
    turning: list[dict[str, Any]]
    unknown: bool

    @classmethod
    def of(cls, ctx: RuleContext) -> InPlace:
        """Everything the previous version applies to this pair's value."""
        schema = ctx.old_schema
        applying = ctx.old_applying
        if len(applying) == 1 and applying[0] is schema:
            if not isinstance(schema, dict):
                return cls([], [], False)
            if IN_PLACE.isdisjoint(schema):
                return cls([schema], [], False)
        # Gathered once per check for each subschema and what applies with
        # it: every rule of a pair asks, and recursive schemas reach one
        # subschema in the same company many times.
        memo = getattr(ctx._walk, "in_place", None)
        if memo is None:
            return cls._gather(ctx)
        key = (id(schema), *map(id, applying))
        found = memo.get(key)
        if found is None:
            found = memo[key] = cls._gather(ctx)
        return cls(list(found.positive), list(found.turning), found.unknown)

    @classmethod
    def _gather(cls, ctx: RuleContext) -> InPlace:
        draft = ctx.old_draft
        keywords = draft.keywords
        found = cls([], [], False)
        seen: set[tuple[int, bool]] = set()
        pending = [(schema, False) for schema in (*ctx.old_applying, ctx.old_schema)]
        while pending:
            schema, turning = pending.pop()
            if schema is UNKNOWN:
                found.unknown = True
            if not isinstance(schema, dict) or (id(schema), turning) in seen:
                continue
            seen.add((id(schema), turning))
            ref = schema.get("$ref") if "$ref" in keywords else None
            if isinstance(ref, str):
                pending.append((ctx.resolve(ref, "old", schema), turning))
                if draft.ref_overrides_siblings:
                    continue
            (found.turning if turning else found.positive).append(schema)
            if not {"$dynamicRef", "$recursiveRef"}.isdisjoint(schema):
                found.unknown = True
            for keyword, value in schema.items():
                if keyword not in keywords:
                    continue
                if keyword in ("allOf", "anyOf", "oneOf") and isinstance(value, list):
                    negated = turning or keyword == "oneOf"
                    pending.extend((branch, negated) for branch in value)
                elif keyword in ("dependentSchemas", "dependencies") and isinstance(
                    value, dict
                ):
                    pending.extend((branch, turning) for branch in value.values())
                elif keyword in ("not", "if"):
                    pending.append((value, True))
                elif keyword in ("then", "else") and "if" in schema:
                    pending.append((value, turning))
        return found


def extension(rule: Rule) -> Rule:
    """Mark ``rule``'s keyword as applying whatever the schema's draft.

    A keyword a draft does not define is an annotation there, and unmarked
    rules are not called for it (``const`` in draft-04). A plugin adding its
    own vocabulary (``x-unit``) marks its rules so that they are.
    """
    rule.narad_extension = True  # type: ignore[attr-defined]
    return rule


def is_extension(rule: Rule) -> bool:
    """Whether ``rule`` is marked with :func:`extension`."""
    return getattr(rule, "narad_extension", False) is True


def document_keyword(rule: Rule) -> Rule:
    """Mark ``rule``'s keyword as one that constrains no value where it sits.

    Such keywords describe the document (dialect, identifiers, definitions,
    annotations). They may sit beside a ``$ref`` without making it a ``$ref``
    with siblings, a subschema of nothing else accepts everything, sameness
    (:meth:`RuleContext.identical`) ignores them, and their rule compares
    them where they are written, before ``$ref`` is resolved.
    """
    rule.narad_document_keyword = True  # type: ignore[attr-defined]
    return rule


def is_document_keyword(rule: Rule) -> bool:
    """Whether ``rule`` is marked with :func:`document_keyword`."""
    return getattr(rule, "narad_document_keyword", False) is True


@document_keyword
def changes_freely(old: Any, new: Any, ctx: RuleContext) -> Iterable[Violation]:
    """The rule of a keyword that can change freely: it refuses nothing."""
    return ()


def identical_or_removed(old: Any, new: Any, ctx: RuleContext) -> Iterable[Violation]:
    """The rule of a construct the check cannot reason about: it may only stay
    identical (:meth:`RuleContext.identical`) or be removed. It is also what a
    keyword with no rule gets."""
    if new is ABSENT or (
        old is not ABSENT and ctx.identical(old, new, keyword=ctx.keyword)
    ):
        return
    if old is ABSENT:
        yield Violation(Change.keyword_added, f"{ctx.keyword} added")
    else:
        yield Violation(Change.keyword_changed, f"{ctx.keyword} changed")


def identical_or_opened(old: Any, new: Any, ctx: RuleContext) -> Iterable[Violation]:
    """As :func:`identical_or_removed`, and each subschema the keyword holds
    may also become one that accepts everything (``true``, ``{}``): the
    rulebook's "a nested schema may always become true or {}".

    Only for keywords where accepting everything at a subschema's position
    can only widen (``then``, ``else``, ``propertyNames``, the values of
    ``dependentSchemas``...); not ``not``, ``if`` or ``oneOf``, whose
    subschemas turn or decide the verdict. A keyword holding subschemas by
    name or position keeps its names and positions; a list of names (draft-07
    ``dependencies``) stays as it was.
    """
    if new is ABSENT or old is ABSENT or ctx.identical(old, new, keyword=ctx.keyword):
        yield from identical_or_removed(old, new, ctx)
        return
    keyword = ctx.keyword
    if keyword in LIST_SUBSCHEMAS and isinstance(old, list):
        same_shape = isinstance(new, list) and len(old) == len(new)
        pairs = list(zip(old, new, strict=True)) if same_shape else []
    elif keyword in MAP_SUBSCHEMAS and isinstance(old, dict):
        same_shape = isinstance(new, dict) and old.keys() == new.keys()
        pairs = [(old[name], new[name]) for name in old] if same_shape else []
    else:
        same_shape, pairs = True, [(old, new)]
    if same_shape and all(_opened(a, b, ctx) for a, b in pairs):
        return
    yield Violation(Change.keyword_changed, f"{keyword} changed")


def _opened(old: Any, new: Any, ctx: RuleContext) -> bool:
    """Whether subschema ``new`` is ``old`` or accepts everything."""
    if isinstance(old, list) or isinstance(new, list):  # names, not a subschema
        return json_equal(old, new)
    return ctx.identical(old, new) or ctx.accepts_everything(new, "new")


def pattern_matches(pattern: str, text: str) -> bool:
    """Whether the RE2 ``pattern`` matches anywhere in ``text``, as the
    validator runs it (shared compiled patterns; lone surrogates allowed).

    A pattern that cannot run counts as matching, so a rule that asks "could
    this name be governed by that pattern?" fails closed.
    """
    try:
        return regex_search(pattern)(text)
    except PatternError:
        return True


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
