"""Registration: the rules a schema document must meet before a topic stores it.

:func:`register` applies the rulebook's "Schema documents" section in order,
cheapest check first, and records whether the schema belongs to the
high-cost class of "Validation capacity" so produce need not re-analyse it.
Every refusal is :class:`~narad.errors.InvalidSchema` with a message starting
``schema: ``; a message names where in the document the problem sits and never
repeats a reference's text.
"""

from __future__ import annotations

from collections.abc import Iterable
from collections.abc import Iterator
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from narad import jsontext
from narad.collector import collector_paused
from narad.errors import InvalidSchema
from narad.quoting import quote_pointer
from narad.schema.drafts import Draft
from narad.schema.limits import SCHEMA_DEPTH
from narad.schema.patterns import PatternError
from narad.schema.patterns import check_pattern
from narad.schema.registration.shapes import ShapeError
from narad.schema.registration.shapes import analyse
from narad.schema.registration.shapes import reach
from narad.schema.resolver import BASE_URI
from narad.schema.resolver import LIST_SUBSCHEMAS
from narad.schema.resolver import MAP_SUBSCHEMAS
from narad.schema.resolver import REFERENCE_KEYWORDS
from narad.schema.resolver import SINGLE_SUBSCHEMA
from narad.schema.resolver import SchemaIndex
from narad.schema.resolver import join_pointer
from narad.schema.resolver import lookup
from narad.schema.resolver import unescape

__all__ = (
    "BASE_URI",
    "MAX_DEPTH",
    "MAX_NAMES",
    "MAX_PATTERN_PROPERTIES",
    "MAX_SIZE",
    "RegisteredSchema",
    "check_stored",
    "register",
)

MAX_SIZE = 256 * 1024
MAX_DEPTH = SCHEMA_DEPTH
MAX_NAMES = 1024
MAX_PATTERN_PROPERTIES = 64

# Keywords whose values are data, not schemas: a "$ref" inside is just a value.
_DATA = frozenset({"const", "default", "enum", "examples"})


@dataclass(frozen=True)
class RegisteredSchema:
    """A schema document that passed registration.

    Attributes:
        document: The parsed document (exact numbers, see ``jsontext``).
        compact: The document's JSON text without insignificant whitespace,
            every number kept as written: what a topic stores.
        draft: The draft the document is written in.
        high_cost: Validation against it always takes the per-node capacity
            bound (see "Validation capacity").
    """

    document: Any
    compact: bytes
    draft: Draft
    high_cost: bool


def register(
    raw: bytes,
    *,
    drafts: Mapping[str, Draft],
    default_draft: Draft,
    embedded: frozenset[str] = frozenset(),
) -> RegisteredSchema:
    """Check a schema document's JSON text against every registration rule.

    Args:
        raw: The document's own JSON text.
        drafts: Built-in drafts by ``$schema`` URI.
        default_draft: The draft of a document without ``$schema``.
        embedded: Absolute URIs of resources the document embeds (a
            registry schema's references, bundled by the ``JSON`` type): a
            reference to one of them (with a fragment or not) resolves
            inside the document, so it is not refused as loading anything.

    Raises:
        InvalidSchema: the document breaks a rule; the message says which.
    """
    with collector_paused():
        return _register(raw, drafts, default_draft, embedded)


def _register(
    raw: bytes,
    drafts: Mapping[str, Draft],
    default_draft: Draft,
    embedded: frozenset[str] = frozenset(),
) -> RegisteredSchema:
    try:
        document = jsontext.loads(raw, max_depth=MAX_DEPTH)
    except jsontext.JSONTextError as exc:
        raise InvalidSchema(f"schema: {exc}") from None
    if document is False:
        raise InvalidSchema("schema: false is refused, it would refuse every message")
    if not (document is True or isinstance(document, dict)):
        raise InvalidSchema("schema: must be a JSON object or true")
    # The limit is on what is stored: the compacted text, so a client's
    # indentation does not count against it.
    compact = jsontext.compact(raw)
    if len(compact) > MAX_SIZE:
        raise InvalidSchema("schema: is larger than 256 KiB")
    draft = _draft_of(document, drafts, default_draft)
    if document is True:
        return RegisteredSchema(document, compact, draft, high_cost=False)
    survey = _survey(document, draft, embedded=embedded)
    index = SchemaIndex(document, draft=draft, base_uri=BASE_URI)
    if index.duplicates:
        # Which of the two a reference means is left undefined by the spec.
        raise InvalidSchema(f"schema: {min(index.duplicates, key=str)}")
    try:
        analysis = analyse(index)
    except ShapeError as exc:
        raise InvalidSchema(f"schema: {exc}") from None
    # A reference may lead where the survey and the meta-schema do not look
    # (a member no keyword owns, a $defs the draft does not define, data such
    # as const): the validator compiles what it finds there all the same.
    targets = _unchecked_targets(
        document, draft.keywords, analysis.reached, analysis.targets
    )
    for pointer, target in targets.items():
        if not _surveyed(document, pointer):
            more = _survey(target, draft, at=_where_of(pointer), embedded=embedded)
            survey.names += more.names
            survey.pattern_properties += more.pattern_properties
    # Last, because it is the slowest check: the analyses above only follow
    # values of the right types, so they are safe on an invalid document.
    for message in draft.meta_validator(document):
        raise InvalidSchema(
            f"schema: not valid under the {draft.name} meta-schema: {message}"
        )
    _meta_check(targets, draft)
    high_cost = (
        survey.names > MAX_NAMES
        or survey.pattern_properties > MAX_PATTERN_PROPERTIES
        or analysis.applies_many
    )
    return RegisteredSchema(document, compact, draft, high_cost=high_cost)


def check_stored(document: Any, draft: Draft) -> None:
    """Check what a stored version's references lead to, as :func:`register`
    does: why the validator failed on a version stored before that check.

    A version stored before registration meta-checked reference targets
    outside the meta-schema's reach (a member no keyword owns, data such as
    ``const``) may hold one the validator cannot compile or run. The rest of
    a stored version met the rules of its day and is not checked again.

    Raises:
        InvalidSchema: a reference leads nowhere, or to a subschema the
            draft's meta-schema refuses; the message says where.
    """
    if not isinstance(document, dict):
        return
    index = SchemaIndex(document, draft=draft, base_uri=BASE_URI)
    try:
        reached, targets = reach(index)
    except ShapeError as exc:
        raise InvalidSchema(f"schema: {exc}") from None
    _meta_check(_unchecked_targets(document, draft.keywords, reached, targets), draft)


def _meta_check(targets: Mapping[str, Any], draft: Draft) -> None:
    """Meta-check each of ``targets`` (subschemas by pointer) on its own."""
    for pointer, target in targets.items():
        for message in draft.meta_validator(target):
            raise InvalidSchema(
                f"schema: not valid under the {draft.name} meta-schema: the "
                f"subschema at {quote_pointer(pointer)}, which a reference leads "
                f"to, {message}"
            )


def _draft_of(document: Any, drafts: Mapping[str, Draft], default: Draft) -> Draft:
    if not isinstance(document, dict) or "$schema" not in document:
        return default
    draft = (
        drafts.get(document["$schema"])
        if isinstance(document["$schema"], str)
        else None
    )
    if draft is None:
        names = ", ".join(sorted({d.name for d in drafts.values()}, reverse=True))
        raise InvalidSchema(f"schema: $schema names no built-in draft ({names})")
    return draft


@dataclass
class _Survey:
    names: int = 0
    pattern_properties: int = 0


# Where an object sits, as a linked list of reference tokens from the root
# (innermost first): cheap to extend, and spelled out only for a message.
_Where = tuple[str | int, "_Where"] | None
_NAMING = frozenset({"dependencies", "dependentRequired", "required"})
# The keywords the survey reads: an object with none of them is only walked.
_REFERENCING = frozenset(REFERENCE_KEYWORDS)
_SURVEYED = _REFERENCING | _NAMING | {"$schema", "pattern", "patternProperties"}


def _survey(
    document: Any,
    draft: Draft,
    at: _Where = None,
    *,
    embedded: frozenset[str] = frozenset(),
) -> _Survey:
    """Check references, patterns and nested ``$schema``; count cost drivers.

    Every object outside data keywords counts as a schema, wherever it sits
    (an unreferenced ``$defs`` entry, an unknown keyword): a pointer can reach
    any of them. ``at``: where ``document`` sits, when it is a part of the
    document a reference leads into.
    """
    survey = _Survey()
    # Each check runs only on an object that has its keywords: most have none.
    for where, schema in _schemas(document, at):
        if _SURVEYED.isdisjoint(schema):
            continue
        if not _REFERENCING.isdisjoint(schema):
            _check_references(where, schema, embedded)
        if "pattern" in schema or "patternProperties" in schema:
            _check_patterns(where, schema)
        nested = schema.get("$schema")
        if where is not None and nested is not None and nested not in draft.uris:
            at = _pointer(("$schema", where))
            raise InvalidSchema(
                f"schema: the $schema at {quote_pointer(at)} is not the document's"
            )
        if not _NAMING.isdisjoint(schema):
            survey.names += _names(schema)
        patterns = schema.get("patternProperties")
        if isinstance(patterns, dict):
            survey.pattern_properties += len(patterns)
    return survey


def _schemas(document: Any, where: _Where) -> Iterator[tuple[_Where, dict[str, Any]]]:
    """Every object in schema position, with where it sits (iterative)."""
    stack: list[tuple[_Where, Any]] = [(where, document)]
    while stack:
        where, value = stack.pop()
        if isinstance(value, list):
            stack.extend(((i, where), item) for i, item in enumerate(value))
            continue
        if not isinstance(value, dict):
            continue
        yield where, value
        for key, item in value.items():
            # Only objects and arrays can hold an object: scalars are not stacked.
            if key in _DATA or not isinstance(item, dict | list):
                continue
            at = (key, where)
            if key in MAP_SUBSCHEMAS and isinstance(item, dict):
                stack.extend(((name, at), sub) for name, sub in item.items())
            else:
                stack.append((at, item))


def _surveyed(document: Any, pointer: str) -> bool:
    """Whether the survey walked the value at ``pointer`` (it skips data)."""
    value, in_map = document, False
    for token in map(unescape, pointer.split("/")[1:]):
        if isinstance(value, list):
            value, in_map = value[int(token)], False
            continue
        if not in_map and token in _DATA:
            return False
        child = value[token]
        in_map = not in_map and token in MAP_SUBSCHEMAS and isinstance(child, dict)
        value = child
    return True


def _unchecked_targets(
    document: Any,
    keywords: frozenset[str],
    reached: Iterable[str],
    targets: Iterable[str],
) -> dict[str, Any]:
    """The reference targets the meta-schema check of the document does not
    cover, by pointer.

    The meta-schema checks the subschemas in positions of the draft's own
    keywords, from the root down. A subschema the validator reaches other
    than by a reference sits in such a position of one it reaches: only a
    reference target can be outside them. A target is covered when the way
    to it from the nearest reached subschema above it (itself covered, or
    checked here) goes only through those positions.
    """
    above = set(reached)
    leads = set(targets)
    kept: dict[str, Any] = {}
    # In the order the checks have always run: shorter pointers first.
    for pointer in sorted((p for p in reached if p in leads), key=len):
        base, end = "", len(pointer)
        while (end := pointer.rfind("/", 0, end)) > 0:
            if pointer[:end] in above:
                base = pointer[:end]
                break
        start = lookup(document, base) if base else document
        if _through_keywords(start, pointer[len(base) :], keywords) is None:
            kept[pointer] = lookup(document, pointer)
    return kept


def _through_keywords(schema: Any, way: str, keywords: frozenset[str]) -> Any:
    """The subschema the pointer ``way`` leads to from ``schema``, or None if
    it goes anywhere but through subschema positions of ``keywords``."""
    value, position = schema, "schema"
    for token in map(unescape, way.split("/")[1:]):
        if position == "list":
            value, position = value[int(token)], "schema"
        elif position == "map":
            value, position = value[token], "schema"
        elif not isinstance(value, dict) or token not in keywords:
            return None
        else:
            value = value[token]
            if token in LIST_SUBSCHEMAS and isinstance(value, list):
                position = "list"
            elif token in MAP_SUBSCHEMAS and isinstance(value, dict):
                position = "map"
            elif token not in SINGLE_SUBSCHEMA or not isinstance(value, dict | bool):
                return None
    return value if position == "schema" else None


def _where_of(pointer: str) -> _Where:
    where: _Where = None
    for token in pointer.split("/")[1:]:
        where = (unescape(token), where)
    return where


def _pointer(where: _Where) -> str:
    tokens: list[str | int] = []
    while where is not None:
        token, where = where
        tokens.append(token)
    return join_pointer("", *reversed(tokens))


def _check_references(
    where: _Where, schema: dict[str, Any], embedded: frozenset[str] = frozenset()
) -> None:
    for keyword in REFERENCE_KEYWORDS:
        ref = schema.get(keyword)
        # Only a fragment resolves inside the document; anything else (a URL,
        # a relative path, "", even the document's own $id) would load, but
        # for a resource the registry embedded.
        if (
            isinstance(ref, str)
            and not ref.startswith("#")
            and ref.partition("#")[0] not in embedded
        ):
            at = _pointer((keyword, where))
            raise InvalidSchema(
                f"schema: the {keyword} at {quote_pointer(at)} does not resolve "
                "inside the document (only #/$defs/..., #anchor and $dynamicRef do)"
            )


def _check_patterns(where: _Where, schema: dict[str, Any]) -> None:
    places: list[tuple[_Where, str]] = []
    if isinstance(schema.get("pattern"), str):
        places.append((("pattern", where), schema["pattern"]))
    patterns = schema.get("patternProperties")
    if isinstance(patterns, dict):
        at = ("patternProperties", where)
        places.extend(((key, at), key) for key in patterns)
    for place, pattern in places:
        try:
            check_pattern(pattern)
        except PatternError as exc:
            at = _pointer(place)
            raise InvalidSchema(
                f"schema: the pattern at {quote_pointer(at)} {exc}"
            ) from None


def _names(schema: dict[str, Any]) -> int:
    """Names listed by ``required``, ``dependentRequired`` and ``dependencies``."""
    count = 0
    if isinstance(schema.get("required"), list):
        count += len(schema["required"])
    for keyword in ("dependentRequired", "dependencies"):
        value = schema.get(keyword)
        if isinstance(value, dict):
            count += sum(
                len(names) for names in value.values() if isinstance(names, list)
            )
    return count
