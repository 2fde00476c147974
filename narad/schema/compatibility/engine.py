"""The compatibility engine (internal): may a schema change refuse a message?

:func:`check` walks the previous and the proposed version of a schema side by
side and, at every subschema pair, calls the rule registered for each keyword
present on either side (the ``narad_compatibility_rules`` hook). The engine
knows how documents are walked and how references resolve; what a keyword
means, and whether a change to it is safe, is the rules' business. Rules, and
the types they use, are the public API in :mod:`narad.compatibility`; this
module is not part of it.

Walking rules the engine applies before any rule runs:

- ``$ref`` is resolved on both sides before a pair is compared, when it has no
  sibling that constrains values (see :func:`narad.compatibility.document_keyword`).
  A loop of nothing but ``$ref`` accepts nothing: anything may replace it, and
  it may replace nothing.
- A pair already being compared further up counts as compatible, the way
  recursive types are compared. A verdict that leant on such an assumption is
  remembered only as long as the pair it leant on is not refused.
- A part unchanged byte for byte (exact parse: key order and number spelling
  kept, ``$ref`` targets unchanged too) is compatible. A dynamic reference
  whose target the dynamic scope decides counts as unchanged only when it is
  reached through the same dynamic scope on both sides (the same resources
  declaring dynamic anchors, entered in the same order).
- ``false``, or a loop of ``$ref``, may become anything.
- A nested schema may always become ``true`` or ``{}``; the root may not, since
  ``{}`` is not a widening of a schema with properties.
- Each pair carries the old subschemas known to apply to its instance value
  (``RuleContext.old_applying``): those it applies in place of, and those the
  rule that descended named; the memo keys pairs by them too, since a rule's
  verdict (a property added under an open content model) depends on them.
- A keyword the side's draft does not define is an annotation and is ignored,
  unless its rule is an :func:`~narad.compatibility.extension`. A keyword with
  no rule may only stay identical or be removed.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from narad.compatibility import ABSENT
from narad.compatibility import ANNOTATIONS
from narad.compatibility import UNKNOWN
from narad.compatibility import Change
from narad.compatibility import Rule
from narad.compatibility import RuleContext
from narad.compatibility import Side
from narad.compatibility import Violation
from narad.compatibility import identical_or_removed
from narad.jsontext import json_equal
from narad.schema.deadline import CheckPastDeadline
from narad.schema.deadline import current
from narad.schema.deadline import passed
from narad.schema.drafts import Draft
from narad.schema.resolver import LIST_SUBSCHEMAS
from narad.schema.resolver import MAP_SUBSCHEMAS
from narad.schema.resolver import REFERENCE_KEYWORDS
from narad.schema.resolver import SINGLE_SUBSCHEMA
from narad.schema.resolver import SchemaIndex
from narad.schema.resolver import Target
from narad.schema.resolver import UnresolvableRef
from narad.schema.resolver import subschema_children

__all__ = ("MAX_DEPTH", "annotations_only_change", "check", "no_change")

# Pairs of subschemas nested inside one another through rules and $ref; past
# this the change is refused rather than risking the interpreter's stack.
# Documents nest at most 64 levels, so only a changed $ref chain gets here.
MAX_DEPTH = 120

_LOOP = object()  # what a loop of nothing but $ref resolves to
_PENDING = object()  # what a success leans on that may yet change
# The most sets of other previous subschemas applying to its value (see
# RuleContext.old_applying) one pair is judged with. Each set is a pair of
# its own, since a rule's verdict depends on it, and recursive references
# can reach one pair with exponentially many sets (as a subset construction
# does: {"a": {"allOf": [x, y]}} under properties, again and again): past
# this many, the pair is judged as if the previous version constrained its
# value in ways the check cannot name (UNKNOWN), which can only refuse more.
MAX_CONTEXTS = 8
# Pairs judged between two looks at the clock.
_TICKS = 64
_FRAMES_PER_LEVEL = 12


def _too_deep(pointer: str) -> Violation:
    deep = f"nested deeper than {MAX_DEPTH} levels through $ref to compare"
    return Violation(Change.too_deep, deep, "$ref", pointer)


def check(
    old: Any,
    new: Any,
    *,
    old_draft: Draft,
    new_draft: Draft,
    rules: Mapping[str, Rule],
    first: bool = False,
    deadline: float | None = None,
) -> list[Violation]:
    """Every way ``new`` can refuse a message ``old`` accepted; empty if none.

    Args:
        old: The current version, parsed by :func:`narad.jsontext.loads`.
        new: The proposed version, parsed the same way.
        old_draft: The draft ``old`` is written in.
        new_draft: The draft ``new`` is written in.
        rules: Keyword to rule, as merged from ``narad_compatibility_rules``.
        first: Stop at the first violation (at most one is returned), for a
            caller that needs only the verdict and one reason. The verdict,
            and that violation, are the same as the first of a full report.
        deadline: A ``time.monotonic()`` instant past which the check gives
            up (checked every few dozen pairs judged); by default the one
            set on this thread (:func:`narad.schema.deadline.run_within`).

    Returns:
        The violations, in document order, each once.

    Raises:
        CheckPastDeadline: ``deadline`` passed before the check was done.
    """
    # Python frames one level of pairs takes (the engine's and a rule's), at
    # most MAX_DEPTH levels deep, above whatever called the check.
    needed = MAX_DEPTH * _FRAMES_PER_LEVEL + 1000
    if sys.getrecursionlimit() < needed:
        sys.setrecursionlimit(needed)
    old_doc, new_doc = _Document(old, old_draft), _Document(new, new_draft)
    if deadline is None:
        deadline = current()
    walk = {"rules": rules, "first": first, "deadline": deadline}
    try:
        found = Walk(old_doc, new_doc, scoped=False, **walk).run()
    except _Rescope:
        # A dynamic reference whose target depends on the dynamic scope: walk
        # again, this time following the scope on both sides.
        found = Walk(old_doc, new_doc, scoped=True, **walk).run()
    return list(dict.fromkeys(found))


def no_change(old: Any, new: Any, *, draft: Draft) -> bool:
    """Whether ``new`` registers nothing over ``old``: the same JSON value, or
    a difference only in annotations (:func:`annotations_only_change`).

    "The same JSON value" is JSON Schema's equality, the one a child's
    history is matched with on attach (:func:`~narad.jsontext.
    json_equal`): key order, whitespace and the spelling of a number (``10``,
    ``1e1``, ``10.0``) do not matter; a type does (``true`` is not ``{}``,
    ``1`` is not ``true``)."""
    return json_equal(old, new) or annotations_only_change(old, new, draft=draft)


def annotations_only_change(old: Any, new: Any, *, draft: Draft) -> bool:
    """Whether ``old`` and ``new`` differ at most in annotations.

    Annotations are removed from every subschema, wherever it sits; a member
    of ``properties`` named ``description`` is a property, not an annotation,
    and is kept. What remains must be the same JSON value: a subschema
    ``true`` stays ``true``, so ``{}`` becoming ``true`` (or ``true`` becoming
    ``{"title": "t"}``) is a change, though both accept the same: the
    rulebook names the keywords that are no change, and ``true`` for an
    object is a different JSON value, not an annotation. Equal documents
    count as differing only in annotations.
    """
    old, new = _strip(old, draft.keywords), _strip(new, draft.keywords)
    return json_equal(old, new)


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


class _Rescope(BaseException):
    """A scope-dependent dynamic reference met by a walk not following scopes.

    It unwinds the walk through the rules that called back into the engine,
    so, like ``GeneratorExit``, it is no ``Exception``: the plugin host's
    containment of a failing rule (and any rule's own ``except Exception``)
    lets it through.
    """


class _Document:
    """One side of the comparison: the document and where its references lead.

    The index of the document is built on the first reference followed, so a
    change to a schema without references never pays for it.
    """

    def __init__(self, document: Any, draft: Draft) -> None:
        self.document = document
        self.draft = draft
        self._index: SchemaIndex | None = None
        self._declaring: frozenset[str] | None = None
        self.bases: dict[int, str] = {}
        self.pointers: dict[int, str] = {}  # of subschemas reached by reference
        self.resolved: dict[tuple[str, str], Any] = {}  # (reference, base)

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
        # Rules resolve the same references again and again (every pair
        # gathering what applies to its value): each is worked out once.
        base = self.base(written_in)
        found = self.resolved.get((ref, base))
        if found is not None:
            return found
        try:
            target = self.index.resolve(ref, base)
        except UnresolvableRef:
            self.resolved[ref, base] = ABSENT
            return ABSENT
        self.bases.setdefault(id(target.schema), target.base_uri)
        self.pointers.setdefault(id(target.schema), target.pointer)
        self.resolved[ref, base] = target.schema
        return target.schema

    def dynamic_targets(self, holder: dict[str, Any], keyword: str) -> list[Target]:
        """Every target a dynamic reference in ``holder`` can pick; empty when
        it leads nowhere."""
        base = self.base(holder)
        try:
            if keyword == "$recursiveRef":
                return list(self.index.recursive_targets(base))
            return list(self.index.dynamic_targets(holder[keyword], base))
        except UnresolvableRef:
            return []

    # -- dynamic scope -------------------------------------------------------

    @property
    def declaring(self) -> frozenset[str]:
        """Pointers of the resources declaring a dynamic (or recursive) anchor:
        the only ones whose presence in the dynamic scope can matter."""
        if self._declaring is None:
            index = self.index
            self._declaring = frozenset(
                index.resources.get(key.rpartition("#")[0], "")
                for key in index.dynamic_anchors
            ) | frozenset(index.recursive_anchors)
        return self._declaring

    def places(self, targets: list[Target]) -> tuple[tuple[str, str], ...]:
        """Each target's pointer and the pointer of its resource."""
        resources = self.index.resources
        return tuple((t.pointer, resources.get(t.base_uri, "")) for t in targets)

    def enter(self, scope: tuple[str, ...], schemas: list[Any]) -> tuple[str, ...]:
        """``scope`` after evaluation entered ``schemas``, in order; only the
        first entry of each resource declaring an anchor counts, since the
        outermost declaration wins."""
        resources, declaring = self.index.resources, self.declaring
        for schema in schemas:
            resource = resources.get(self.base(schema))
            if resource is not None and resource in declaring and resource not in scope:
                scope = (*scope, resource)
        return scope


class Walk:
    """One comparison of two documents, with its memo of subschema pairs."""

    def __init__(
        self,
        old: _Document,
        new: _Document,
        rules: Mapping[str, Rule],
        *,
        first: bool,
        scoped: bool,
        deadline: float | None = None,
    ) -> None:
        self.old = old
        self.new = new
        self.rules = rules
        self.first = first
        # Following the dynamic scope of both sides (see _Document.enter).
        self.scoped = scoped
        self.scopes: list[tuple[tuple[str, ...], tuple[str, ...]]] = [((), ())]
        self.extensions, self.document_keywords = _marked(rules)
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
        # The solver (see compare): each pair's verdict, with the first
        # violation (a check that stops there keeps only that one).
        self.done: dict[tuple[Any, ...], list[Violation]] = {}
        self.args: dict[tuple[Any, ...], tuple[Any, ...]] = {}
        self.contexts: dict[tuple[Any, ...], set[tuple[int, ...]]] = {}
        # Pairs under comparison, with their depth, and per open pair the
        # shallowest depth it leant on (its own when none further up).
        self.active: dict[tuple[Any, ...], int] = {}
        self.solving: list[tuple[Any, ...]] = []
        self.lows: list[int] = []
        # Successes that leant on an assumption, and the pair each leans on
        # (_PENDING: on one that may still fail); who read each of them as
        # compatible; pairs to judge again because one they read failed.
        self.lean: dict[tuple[Any, ...], Any] = {}
        self.readers: dict[tuple[Any, ...], set[tuple[Any, ...]]] = {}
        self.worklist: list[tuple[Any, ...]] = []
        self.flips = 0
        # The full report: every violation of each refused pair, once.
        self.collecting = False
        self.collected: dict[tuple[Any, ...], list[Violation]] = {}
        self.reporting: set[tuple[Any, ...]] = set()
        self.report_depth = 0
        self.deadline = deadline
        self.ticks = 0
        # The old subschemas known to apply to each open pair's instance value.
        self.applying: list[tuple[Any, ...]] = []
        # Per (exactness, scope matches), of pairs of values.
        self.same_memo: dict[tuple[bool, bool], dict[tuple[Any, ...], bool]] = {
            (exact, scope_ok): {}
            for exact in (True, False)
            for scope_ok in (True, False)
        }
        self.exact_memo: dict[tuple[int, int], Any] = {}
        self.in_place: dict[tuple[int, ...], Any] = {}  # see InPlace.of
        self.open_memo: dict[tuple[int, str], bool] = {}  # accepts_everything
        self.blind_memo: dict[tuple[int, int], Any] = {}
        self.by_repr = True  # see exactly_equal

    def run(self) -> list[Violation]:
        pair = self.pair(self.old.document, self.new.document, "", nested=False)
        if isinstance(pair, list):
            return pair
        key, args = pair
        found = self.solve(key, args)
        if self.first and found:
            return found  # a refusal is final: nothing judged later changes it
        self.drain()
        if self.first:
            return self.done[key]
        self.collecting = True
        return self.collect(key, args)

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
        if not isinstance(schema, dict):
            return schema is True
        key = (id(schema), side)
        found = self.open_memo.get(key)
        if found is None:
            target = self.deref(schema, side)
            found = target is True or (
                isinstance(target, dict) and self.constraining[side].isdisjoint(target)
            )
            self.open_memo[key] = found
        return found

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

    def chain(self, schema: Any, side: Side) -> list[Any]:
        """``schema`` and every subschema its bare ``$ref`` chain enters."""
        chain = [schema]
        while self.is_bare_ref(schema, side) and len(chain) <= MAX_DEPTH:
            schema = self.side(side).resolve(schema["$ref"], schema)
            if schema is ABSENT:
                break
            chain.append(schema)
        return chain

    # -- comparing -----------------------------------------------------------

    def compare(
        self,
        old: Any,
        new: Any,
        pointer: str,
        *,
        nested: bool,
        in_place: bool = False,
        applying: Iterable[Any] = (),
        first: bool = False,
    ) -> list[Violation]:
        pair = self.pair(
            old, new, pointer, nested=nested, in_place=in_place, applying=applying
        )
        if isinstance(pair, list):
            return pair
        if not self.collecting:
            return self.solve(*pair)
        if first:  # the rule needs the verdict and one reason, no more
            return self.verdict(*pair)
        return self.collect(*pair)

    def pair(
        self,
        old: Any,
        new: Any,
        pointer: str,
        *,
        nested: bool,
        in_place: bool = False,
        applying: Iterable[Any] = (),
    ) -> list[Violation] | tuple[tuple[Any, ...], tuple[Any, ...]]:
        """The verdict on ``old`` and ``new`` where the walking rules decide
        it without the rules of their keywords; else the pair's memo key and
        what judging it takes."""
        if self.same(old, new, exact=True):
            return []
        old_target, new_target = self.deref(old, "old"), self.deref(new, "new")
        if old_target is _LOOP or old_target is False:
            return []
        if new_target is _LOOP:
            loop = "a loop of nothing but $ref accepts nothing"
            return [Violation(Change.ref_loop, loop, "$ref", pointer)]
        if new_target is False:
            closed = "schema false accepts nothing"
            return [Violation(Change.schema_closed, closed, "false", pointer)]
        if nested and self.accepts_everything(new_target, "new"):
            return []
        # Report where the proposed schema says it, not the $ref path to it.
        pointer = self.new.pointers.get(id(new_target), pointer)
        if in_place and self.applying:
            also = _others(self.applying[-1], old_target)
        else:
            also = _others(applying, old_target) if applying else ()
        key: tuple[Any, ...] = (id(old_target), id(new_target))
        shared: tuple[Any, ...] = (old_target,)
        if also:
            context = tuple(sorted(map(id, also)))
            seen = self.contexts.setdefault(key, set())
            if context not in seen:
                if len(seen) < MAX_CONTEXTS:
                    seen.add(context)
                else:  # fail closed: see MAX_CONTEXTS
                    also, context = (UNKNOWN,), (id(UNKNOWN),)
            key, shared = (*key, *context), (old_target, *also)
        scope = None
        if self.scoped:
            outer = self.scopes[-1]
            scope = (
                self.old.enter(outer[0], self.chain(old, "old")),
                self.new.enter(outer[1], self.chain(new, "new")),
            )
            key = (*key, scope)
        return key, (old, new, old_target, new_target, pointer, shared, scope)

    # -- the verdict ---------------------------------------------------------
    #
    # Each pair's verdict is the greatest fixed point of the rules, as for
    # recursive types: a pair already under comparison further up counts as
    # compatible, and a success that leant on such an assumption is judged
    # again (not forgotten with everything after it, as before: forgetting
    # made the work exponential in the nesting of recursive references) if
    # the pair it leant on is refused. Refusals only spread: a pair is
    # judged at most once more per pair it read that was refused later, so
    # the work is polynomial in the number of pairs.

    def solve(self, key: tuple[Any, ...], args: tuple[Any, ...]) -> list[Violation]:
        found = self.done.get(key)
        if found is not None:
            if not found and key in self.lean:
                self.read(key, self.resolve(key))
            return found
        if key in self.active:
            self.read(key, self.active[key])
            return []
        if len(self.solving) + self.report_depth >= MAX_DEPTH:
            return [_too_deep(args[4])]
        return self.judge(key, args)

    def judge(self, key: tuple[Any, ...], args: tuple[Any, ...]) -> list[Violation]:
        """Run the rules on the pair ``key`` (stopping at the first violation)
        and remember the verdict; a refusal sends every pair that read this
        one as compatible to be judged again."""
        old, new, old_target, new_target, pointer, shared, scope = args
        self.args[key] = args
        depth = len(self.solving)
        flips = self.flips
        self.active[key] = depth
        self.solving.append(key)
        self.lows.append(depth)
        self.applying.append(shared)
        if scope is not None:
            self.scopes.append(scope)
        try:
            found = self.dispatch(
                old, new, old_target, new_target, pointer, shared, first=True
            )
        finally:
            del self.active[key]
            self.solving.pop()
            low = self.lows.pop()
            self.applying.pop()
            if scope is not None:
                self.scopes.pop()
        self.done[key] = found
        if found:
            self.lean.pop(key, None)
            readers = self.readers.pop(key, ())
            again = [r for r in readers if r != key and not self.done.get(r, True)]
            if again:
                self.worklist.extend(again)
                self.flips += 1
        elif low >= depth and flips == self.flips:
            # Leant on nothing further up, and nothing it read was refused
            # meanwhile: final, and so is every success that leant on it.
            self.lean.pop(key, None)
            self.readers.pop(key, None)
        else:
            self.lean[key] = self.solving[low] if 0 <= low < depth else _PENDING
            self.read(key, low if low < depth else -1)
        return found

    def read(self, key: tuple[Any, ...], low: int | None) -> None:
        """The open pair reads ``key`` as compatible, an assumption that
        holds as long as the pair at depth ``low`` does (-1: as long as
        pairs no longer open do; None: for good)."""
        if low is None or not self.solving:
            return
        self.readers.setdefault(key, set()).add(self.solving[-1])
        if low < self.lows[-1]:
            self.lows[-1] = low

    def resolve(self, key: tuple[Any, ...]) -> int | None:
        """What the remembered success ``key`` still leans on: the depth of
        an open pair, -1 for a pair that may yet be refused, or None when it
        is final."""
        path = []
        lean = self.lean.get(key)
        while lean is not None:
            if lean is _PENDING:
                return -1
            if lean in self.active:
                return self.active[lean]
            if self.done[lean]:
                return -1  # refused: ``key`` waits to be judged again
            path.append(key)
            key, lean = lean, self.lean.get(lean)
        for settled in path:  # leant on a success that is final now
            del self.lean[settled]
            self.readers.pop(settled, None)
        return None

    def drain(self) -> None:
        """Judge again every success that read a pair refused since, until
        no verdict changes: then every remembered verdict is final."""
        while self.worklist:
            key = self.worklist.pop()
            if not self.done[key]:
                self.judge(key, self.args[key])

    # -- the report ----------------------------------------------------------

    def verdict(self, key: tuple[Any, ...], args: tuple[Any, ...]) -> list[Violation]:
        """The final verdict on the pair ``key`` (with its first violation),
        judged now if no verdict was reached on it yet."""
        found = self.done.get(key)
        if found is not None:
            return found
        self.collecting = False
        try:
            found = self.solve(key, args)
            self.drain()
        finally:
            self.collecting = True
        return self.done.get(key, found)  # not remembered: too deep here

    def collect(self, key: tuple[Any, ...], args: tuple[Any, ...]) -> list[Violation]:
        """Every violation of the pair ``key``, its first one first: the
        rules run once more on each refused pair, with every verdict final,
        so the report costs about what the verdict did."""
        found = self.collected.get(key)
        if found is not None:
            return found
        if key in self.reporting:
            return self.done[key]  # refused, and reported further up
        verdict = self.verdict(key, args)
        if not verdict or key not in self.done:  # compatible, or too deep
            return verdict
        old, new, old_target, new_target, pointer, shared, scope = args
        self.reporting.add(key)
        self.report_depth += 1
        self.applying.append(shared)
        if scope is not None:
            self.scopes.append(scope)
        try:
            found = self.dispatch(
                old, new, old_target, new_target, pointer, shared, first=False
            )
        finally:
            self.reporting.discard(key)
            self.report_depth -= 1
            self.applying.pop()
            if scope is not None:
                self.scopes.pop()
        found = list(dict.fromkeys([*verdict, *found]))
        self.collected[key] = found
        return found

    def dispatch(
        self,
        old: Any,
        new: Any,
        old_target: Any,
        new_target: Any,
        pointer: str,
        applying: tuple[Any, ...],
        *,
        first: bool,
    ) -> list[Violation]:
        self.ticks += 1
        if not self.ticks % _TICKS and passed(self.deadline):
            raise CheckPastDeadline()
        ctx = RuleContext(self, pointer, old_target, new_target, applying)
        if old is old_target and new is new_target:
            # Nothing resolved: every keyword is judged where it is written,
            # and a keyword not in force on either side has no value.
            olds, news = ctx.old, ctx.new
            keywords: Iterable[str] = {**olds, **news}
        else:
            olds, news, keywords = self.written(old, new, ctx)
        rules = self.rules
        # Each violation once: a rule passes up what the pairs below found,
        # and pairs are shared (recursive references, several branches or
        # members reaching one pair), so a list of every path's copies
        # would double at each level (71 million entries for a 0.5 KB
        # recursive pair); as a set, each pair's list is at most the
        # distinct violations of the proposed schema's places.
        found: dict[Violation, None] = {}
        for keyword in keywords:
            old_value = olds.get(keyword, ABSENT)
            new_value = news.get(keyword, ABSENT)
            if old_value is ABSENT and new_value is ABSENT:
                continue
            ctx.keyword = keyword
            rule = rules.get(keyword, identical_or_removed)
            for problem in rule(old_value, new_value, ctx):
                if not (problem.keyword and problem.pointer):
                    problem = Violation(
                        problem.kind,
                        problem.message,
                        problem.keyword or keyword,
                        problem.pointer or pointer,
                    )
                found[problem] = None
                if first:
                    return [problem]
        return list(found)

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

    def identical(self, old: Any, new: Any, keyword: str | None) -> bool:
        kind = "schema" if keyword is None else _KINDS.get(keyword, "data")
        return self.same(old, new, exact=False, kind=kind)

    def same(self, old: Any, new: Any, *, exact: bool, kind: str = "schema") -> bool:
        """Equal values whose references lead to equal targets: byte for byte
        (``exact``), or constraining keywords only (see :meth:`blind`).

        Explores every pair of reference targets reachable from the pair and
        decides them all at once (a pair fails when it differs or leads to a
        pair that fails), so each pair is explored once per check.
        """
        scope_ok = not self.scoped or self.scope_ok()
        memo = self.same_memo[exact, scope_ok]
        top: tuple[Any, ...] = (id(old), id(new))
        if kind != "schema":
            top = (*top, kind)
        if top in memo:
            return memo[top]
        if exact:
            verdict = self.exactly_equal(old, new)
            if verdict is not None:
                memo[top] = verdict
                return verdict
        holders = self.equal(old, new, exact, kind)
        if not holders:  # different, or equal with nothing to follow
            memo[top] = holders is not None
            return memo[top]
        leads_here: dict[tuple[Any, ...], list[tuple[Any, ...]]] = {top: []}
        failed: list[tuple[Any, ...]] = []
        pending = [(old, new, top)]
        while pending:
            a, b, key = pending.pop()
            holders = self.equal(a, b, exact, kind if key is top else "schema")
            if holders is None:
                failed.append(key)
                continue
            for pair in self.targets(holders, scope_ok):
                target = (id(pair[0]), id(pair[1]))
                if memo.get(target) is False:
                    failed.append(key)
                elif target not in memo:
                    if target not in leads_here:
                        leads_here[target] = []
                        pending.append((*pair, target))
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

    def scope_ok(self) -> bool:
        """Whether both sides reached this point through the same dynamic scope."""
        old_scope, new_scope = self.scopes[-1]
        return old_scope == new_scope

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

    def equal(self, a: Any, b: Any, exact: bool, kind: str) -> tuple[Any, ...] | None:
        """None if ``a`` and ``b`` differ, else the pairs of dicts within them
        that hold references."""
        return self.exact(a, b) if exact else self.blind(a, b, kind)

    def exact(self, a: Any, b: Any) -> tuple[Any, ...] | None:
        """Byte-for-byte equality (memoised per pair of dicts)."""
        if isinstance(a, dict):
            key = (id(a), id(b))
            if key not in self.exact_memo:
                self.exact_memo[key] = self.exact_dicts(a, b)
            return self.exact_memo[key]
        if isinstance(a, list):
            if not isinstance(b, list) or len(a) != len(b):
                return None
            holders: list[Any] = []
            for x, y in zip(a, b, strict=True):
                found = self.exact(x, y)
                if found is None:
                    return None
                holders.extend(found)
            return tuple(holders)
        if a is ABSENT or b is ABSENT or type(a) is not type(b):
            return () if a is b else None
        if isinstance(a, Decimal):
            return () if a.as_tuple() == b.as_tuple() else None
        return () if a == b else None

    def exact_dicts(self, a: dict[str, Any], b: Any) -> tuple[Any, ...] | None:
        if not isinstance(b, dict) or len(a) != len(b) or list(a) != list(b):
            return None
        holders: list[Any] = []
        if any(isinstance(a.get(k), str) for k in REFERENCE_KEYWORDS):
            holders.append((a, b))
        for key, value in a.items():
            found = self.exact(value, b[key])
            if found is None:
                return None
            holders.extend(found)
        return tuple(holders)

    def blind(self, a: Any, b: Any, kind: str) -> tuple[Any, ...] | None:
        """Equality of what constrains values: in subschemas, only keywords in
        force that are not document keywords (annotations, identifiers,
        definitions) are compared, in any order; other values are compared as
        JSON values. ``kind`` says where ``a`` and ``b`` sit: ``"schema"``
        (a subschema, or a list of them), ``"map"`` (a map of them), or
        ``"data"``."""
        if kind == "schema":
            if isinstance(a, dict) and isinstance(b, dict):
                key = (id(a), id(b))
                if key not in self.blind_memo:
                    self.blind_memo[key] = self.blind_dicts(a, b)
                return self.blind_memo[key]
            if isinstance(a, list) and isinstance(b, list):
                return self.blind_members(a, b, range(len(a)), len(a) == len(b))
        elif kind == "map" and isinstance(a, dict) and isinstance(b, dict):
            return self.blind_members(a, b, a, a.keys() == b.keys())
        if a is ABSENT or b is ABSENT:
            return () if a is b else None
        return () if json_equal(a, b) else None

    def blind_members(
        self, a: Any, b: Any, keys: Iterable[Any], alike: bool
    ) -> tuple[Any, ...] | None:
        if not alike:
            return None
        holders: list[Any] = []
        for key in keys:
            x = a[key]
            found = self.blind(x, b[key], "schema" if isinstance(x, dict) else "data")
            if found is None:
                return None
            holders.extend(found)
        return tuple(holders)

    def blind_dicts(self, a: dict[str, Any], b: dict[str, Any]) -> Any:
        old_keys, new_keys = self.constraining["old"], self.constraining["new"]
        compared = [k for k in a if k in old_keys]
        if {k for k in b if k in new_keys} != set(compared):
            return None
        holders: list[Any] = []
        if any(isinstance(a.get(k), str) for k in REFERENCE_KEYWORDS if k in old_keys):
            holders.append((a, b))
        for key in compared:
            found = self.blind(a[key], b[key], _KINDS.get(key, "data"))
            if found is None:
                return None
            holders.extend(found)
        return tuple(holders)

    def targets(
        self, holders: tuple[Any, ...], scope_ok: bool
    ) -> Iterable[tuple[Any, Any]]:
        """Pairs of targets of the references pairs of equal subschemas hold."""
        for old_holder, new_holder in holders:
            yield from self.holder_targets(old_holder, new_holder, scope_ok)

    def holder_targets(
        self, old_holder: dict[str, Any], new_holder: dict[str, Any], scope_ok: bool
    ) -> Iterable[tuple[Any, Any]]:
        for keyword in REFERENCE_KEYWORDS:
            if not isinstance(old_holder.get(keyword), str):
                continue
            if keyword == "$ref":
                yield (
                    self.old.resolve(old_holder[keyword], old_holder),
                    self.new.resolve(new_holder[keyword], new_holder),
                )
                continue
            old_targets = self.old.dynamic_targets(old_holder, keyword)
            new_targets = self.new.dynamic_targets(new_holder, keyword)
            if len(old_targets) > 1 or len(new_targets) > 1:
                # The dynamic scope picks the target: the same candidates
                # must sit in the same places, reached the same way.
                if not self.scoped:
                    raise _Rescope
                same_places = self.old.places(old_targets) == self.new.places(
                    new_targets
                )
                if not (scope_ok and same_places):
                    yield ABSENT, None  # never equal
                    continue
            elif len(old_targets) != len(new_targets):
                yield ABSENT, None
                continue
            for old_target, new_target in zip(old_targets, new_targets, strict=True):
                yield old_target.schema, new_target.schema


# How a member named after one of them starts in the ``repr`` of a dict.
_REFERENCE_MARKS = tuple(f"'{keyword}': " for keyword in REFERENCE_KEYWORDS)
# Where a keyword's value holds subschemas, for sameness blind to annotations.
_KINDS = {
    **dict.fromkeys(SINGLE_SUBSCHEMA | LIST_SUBSCHEMAS, "schema"),
    **dict.fromkeys(MAP_SUBSCHEMAS, "map"),
}


def _marked(rules: Mapping[str, Rule]) -> tuple[frozenset[str], frozenset[str]]:
    """The keywords whose rules are marked as extensions, and as document
    keywords (one pass, inline: this runs for every check)."""
    extensions, document = [], []
    for keyword, rule in rules.items():
        if getattr(rule, "narad_extension", False) is True:
            extensions.append(keyword)
        if getattr(rule, "narad_document_keyword", False) is True:
            document.append(keyword)
    return frozenset(extensions), frozenset(document)


def _others(applying: Iterable[Any], schema: Any) -> tuple[Any, ...]:
    """``applying`` without ``schema`` and repeats, in order."""
    if type(applying) is tuple and len(applying) == 1:  # the common case
        return () if applying[0] is schema else applying
    seen = {id(schema)}
    others = []
    for other in applying:
        if id(other) not in seen:
            seen.add(id(other))
            others.append(other)
    return tuple(others)


def _as_dict(schema: Any) -> dict[str, Any]:
    return schema if isinstance(schema, dict) else {}
