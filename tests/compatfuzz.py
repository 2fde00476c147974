"""Soundness fuzzing of the compatibility check: generators and the oracle.

A trial generates a schema (``old``), mutates it into ``new``, registers both
as a topic would, and asks the check. When it accepts, instances generated
from both schemas are validated: every one ``old`` accepts must be accepted by
``new``, except in the rulebook's one deliberate exception (an optional
property added under an open content model), which :func:`excused` recognises
by what it means: what ``new`` refuses sits under keys whose value ``old`` did
not constrain.

A trial's choices come from a :class:`Chooser` seeded with one number, so the
test suite (hypothesis picking the seeds) and ``bench/fuzz_compat.py`` (for as
long as asked) run the same trials, and any failure replays from its seed."""

from __future__ import annotations

import contextlib
import copy
import itertools
import json
import random
import sys
from collections.abc import Iterator
from collections.abc import Sequence
from dataclasses import dataclass
from dataclasses import field
from decimal import Decimal
from typing import Any
from typing import Protocol

from narad.compatibility import show
from narad.errors import InvalidPayload
from narad.errors import InvalidSchema
from narad.jsontext import loads
from narad.schema.compatibility import engine
from narad.schema.registration.documents import RegisteredSchema
from narad.schema.registration.documents import register
from narad.schema.resolver import LIST_SUBSCHEMAS
from narad.schema.resolver import MAP_SUBSCHEMAS
from narad.schema.resolver import SINGLE_SUBSCHEMA
from narad.schema.validation.validator import Validator
from tests.compatcheck import DEFAULT
from tests.compatcheck import DRAFTS
from tests.compatcheck import PLUGINS
from tests.compatcheck import RULES

FORMATS = PLUGINS.format_checkers()


class Chooser(Protocol):
    def integer(self, low: int, high: int) -> int: ...


class RandomChooser:
    """Choices from a seeded :class:`random.Random`."""

    def __init__(self, seed: int) -> None:
        self.random = random.Random(seed)

    def integer(self, low: int, high: int) -> int:
        return self.random.randint(low, high)


def pick(ch: Chooser, options: Sequence[Any]) -> Any:
    return options[ch.integer(0, len(options) - 1)]


def chance(ch: Chooser, percent: int) -> bool:
    return ch.integer(1, 100) <= percent


def sample(ch: Chooser, options: Sequence[Any], most: int) -> list[Any]:
    """One to ``most`` distinct values of ``options``."""
    chosen: dict[str, Any] = {}
    for _ in range(ch.integer(1, most)):
        value = pick(ch, options)
        chosen.setdefault(dumps(value), value)
    return list(chosen.values())


NAMES = ("a", "b", "c", "ab")
PATTERNS = ("^a", "b$", "^[a-c]$", "c")
STRINGS = ("", "a", "b", "ab", "abc", "ba", "c", "xyz", "2020-01-01", "a@b.c")
NUMBERS = (-2, -1, 0, 1, 2, 3, 5, 10, Decimal("0.5"), Decimal("1.5"), Decimal("2.0"))
VALUES = (None, True, False, 0, 1, 2, Decimal("1.5"), "", "a", "ab", [], [1], {})
TYPES = ("null", "boolean", "integer", "number", "string", "array", "object")
ANNOTATION = ("title", "description", "$comment", "default", "examples")
COUNTS = frozenset(
    {
        "minLength",
        "maxLength",
        "minItems",
        "maxItems",
        "minProperties",
        "maxProperties",
        "minContains",
        "maxContains",
    }
)
D2020 = "https://json-schema.org/draft/2020-12/schema"
D2019 = "https://json-schema.org/draft/2019-09/schema"
D07 = "http://json-schema.org/draft-07/schema#"

# Keywords a generated subschema may carry, the common ones more often.
KEYWORDS = (
    *("type",) * 4,
    *("properties",) * 4,
    "enum",
    "const",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "multipleOf",
    "minLength",
    "maxLength",
    "pattern",
    "format",
    "minItems",
    "maxItems",
    "uniqueItems",
    "minProperties",
    "maxProperties",
    *("required",) * 2,
    "patternProperties",
    *("additionalProperties",) * 2,
    "unevaluatedProperties",
    "unevaluatedItems",
    "propertyNames",
    "dependentRequired",
    "dependentSchemas",
    *("items",) * 2,
    "prefixItems",
    "contains",
    "minContains",
    "maxContains",
    *("anyOf",) * 2,
    *("allOf",) * 2,
    "oneOf",
    "not",
    "if",
    *("$ref",) * 3,
    "$dynamicRef",
    "title",
)


@dataclass
class Vocabulary:
    """What a document being generated offers references: ``$ref`` targets
    (``#`` and definitions, nested ones included), and whether a dynamic
    anchor ``n`` is declared."""

    refs: list[str] = field(default_factory=lambda: ["#"])
    dynamic: bool = False

    @classmethod
    def of(cls, doc: Any) -> Vocabulary:
        refs = ["#"]
        for path in subschema_paths(doc):
            if (
                path
                and path[0] == "$defs"
                and all(token == "$defs" for token in path[::2])
            ):
                refs.append("#/" + "/".join(str(token) for token in path))
        return cls(refs=refs, dynamic="$dynamicAnchor" in dumps(doc))


def schema(ch: Chooser, depth: int, vocab: Vocabulary) -> Any:
    """A subschema nesting at most ``depth`` levels of applicators."""
    if depth <= 0 or chance(ch, 12):
        return pick(ch, (True, {}, False, {"type": pick(ch, TYPES)}))
    if len(vocab.refs) > 1 and chance(ch, 15):
        return {"$ref": pick(ch, vocab.refs)}  # recursion and shared definitions
    out: dict[str, Any] = {}
    for _ in range(ch.integer(1, 3)):
        keyword = pick(ch, KEYWORDS)
        if keyword in out:
            continue
        value = keyword_value(ch, keyword, depth - 1, vocab)
        if value is not None:
            out[keyword] = value
            if keyword == "if":
                for branch in ("then", "else"):
                    if chance(ch, 60):
                        out[branch] = schema(ch, depth - 1, vocab)
            if keyword in ("minContains", "maxContains") and "contains" not in out:
                out["contains"] = schema(ch, depth - 1, vocab)
    return out


def keyword_value(ch: Chooser, keyword: str, depth: int, vocab: Vocabulary) -> Any:
    sub = schema  # recursion into subschemas
    if keyword == "type":
        return pick(ch, TYPES) if chance(ch, 60) else sample(ch, TYPES, 3)
    if keyword == "enum":
        return sample(ch, VALUES, 3)
    if keyword == "const":
        return pick(ch, VALUES)
    if keyword in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"):
        return pick(ch, NUMBERS)
    if keyword == "multipleOf":
        return pick(ch, (1, 2, 3, 4, Decimal("0.5")))
    if keyword in COUNTS:
        return ch.integer(0, 3)
    if keyword == "pattern":
        return pick(ch, PATTERNS)
    if keyword == "format":
        return pick(ch, ("email", "date", "ipv4"))
    if keyword == "uniqueItems":
        return chance(ch, 70)
    if keyword == "required":
        return list(dict.fromkeys(sample(ch, NAMES, 2)))
    if keyword in ("properties", "dependentSchemas"):
        names = list(dict.fromkeys(sample(ch, NAMES, 3)))
        return {name: sub(ch, depth, vocab) for name in names}
    if keyword == "patternProperties":
        return {pick(ch, PATTERNS): sub(ch, depth, vocab)}
    if keyword in ("additionalProperties", "unevaluatedProperties", "unevaluatedItems"):
        return False if chance(ch, 30) else sub(ch, depth, vocab)
    if keyword == "propertyNames":
        return pick(ch, ({"maxLength": 1}, {"pattern": "^[ab]"}, {"enum": ["a", "b"]}))
    if keyword == "dependentRequired":
        return {pick(ch, NAMES): list(dict.fromkeys(sample(ch, NAMES, 2)))}
    if keyword in ("items", "contains", "not", "if"):
        return sub(ch, depth, vocab)
    if keyword in ("prefixItems", "anyOf", "allOf", "oneOf"):
        return [sub(ch, depth, vocab) for _ in range(ch.integer(1, 3))]
    if keyword == "$ref":
        return pick(ch, vocab.refs)
    if keyword == "$dynamicRef":
        return "#n" if vocab.dynamic else None
    if keyword == "title":
        return pick(ch, ("t", "u"))
    raise AssertionError(keyword)


def document(ch: Chooser) -> Any:
    """A root schema, with ``$defs`` that reference one another."""
    names = [f"d{i}" for i in range(ch.integer(0, 3))]
    vocab = Vocabulary(refs=["#", *(f"#/$defs/{name}" for name in names)])
    if names and chance(ch, 12):
        # A resource "m" holding two declarations of the dynamic anchor "n",
        # one of them a resource "l" of its own: the dynamic scope decides
        # which one a "$dynamicRef": "#n" picks.
        vocab.dynamic = True
        vocab.refs += ["#/$defs/m", "#/$defs/m/$defs/l", "#/$defs/m/$defs/s"]
    root = schema(ch, 3, vocab)
    if not isinstance(root, dict):
        return root if root is True else {}
    defs = {name: schema(ch, 2, vocab) for name in names}
    if vocab.dynamic:
        inner = {
            "s": {"$dynamicAnchor": "n", **as_dict(schema(ch, 1, vocab))},
            "l": {
                "$id": "urn:l",
                "$dynamicAnchor": "n",
                **as_dict(schema(ch, 2, vocab)),
            },
        }
        defs["m"] = {"$id": "urn:m", "$defs": inner}
        if chance(ch, 50):
            defs["m"]["$ref"] = "#/$defs/l"
    if defs:
        root["$defs"] = defs
    draft = ch.integer(1, 20)
    if draft == 1:
        root = {"$schema": D07, **root}
    elif draft == 2:
        root = {"$schema": D2019, **root}
    elif draft == 3:
        root = {"$schema": D2020, **root}
    return root


def as_dict(schema: Any) -> dict[str, Any]:
    return schema if isinstance(schema, dict) else {}


# -- mutation ------------------------------------------------------------------


def subschema_paths(doc: Any) -> list[tuple[Any, ...]]:
    """The path (tokens) of every subschema in keyword position."""
    paths: list[tuple[Any, ...]] = []
    stack: list[tuple[tuple[Any, ...], Any]] = [((), doc)]
    while stack:
        path, value = stack.pop()
        paths.append(path)
        if not isinstance(value, dict):
            continue
        for key, child in value.items():
            if key in LIST_SUBSCHEMAS and isinstance(child, list):
                stack.extend(((*path, key, i), c) for i, c in enumerate(child))
            elif key in MAP_SUBSCHEMAS and isinstance(child, dict):
                stack.extend(((*path, key, k), c) for k, c in child.items())
            elif key in SINGLE_SUBSCHEMA and isinstance(child, dict | bool):
                stack.append(((*path, key), child))
    return sorted(paths, key=lambda p: json.dumps(p))


def at(doc: Any, path: tuple[Any, ...]) -> Any:
    for token in path:
        doc = doc[token]
    return doc


def replaced(doc: Any, path: tuple[Any, ...], value: Any) -> Any:
    if not path:
        return value
    at(doc, path[:-1])[path[-1]] = value
    return doc


def mutate(ch: Chooser, old: Any) -> Any:
    """``old`` with one to three random edits."""
    new = copy.deepcopy(old)
    vocab = Vocabulary.of(new)
    # One edit mostly: more of them are refused for one reason or another,
    # and only accepted changes test soundness.
    for _ in range(1 if chance(ch, 60) else ch.integer(2, 3)):
        paths = subschema_paths(new)
        path = pick(ch, paths)
        new = replaced(new, path, edit(ch, at(new, path), vocab, path == ()))
    return new


def edit(ch: Chooser, target: Any, vocab: Vocabulary, root: bool) -> Any:
    if not isinstance(target, dict) or chance(ch, 10):
        if root:
            return target if not isinstance(target, dict) else {}
        return pick(ch, (True, {}, False, schema(ch, 2, vocab)))
    target = dict(target)
    keys = [k for k in target if k not in ("$schema", "$defs", "$id")]
    op = ch.integer(1, 10)
    if op == 1 and keys:
        del target[pick(ch, keys)]
    elif op in (2, 3):
        keyword = pick(ch, KEYWORDS)
        value = keyword_value(ch, keyword, 2, vocab)
        if value is not None:
            target[keyword] = value
    elif op == 4:
        target[pick(ch, ANNOTATION)] = pick(ch, ("x", 1, [2]))
    elif op == 5:
        members = target.get("properties")
        members = dict(members) if isinstance(members, dict) else {}
        members[pick(ch, NAMES)] = schema(ch, 2, vocab)
        target["properties"] = members
    elif keys:
        keyword = pick(ch, keys)
        target[keyword] = tweak(ch, keyword, target[keyword], vocab)
    return target


def tweak(ch: Chooser, keyword: str, value: Any, vocab: Vocabulary) -> Any:
    """A small change to one keyword's value, widening or narrowing."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, int | Decimal):
        if keyword == "multipleOf":
            return pick(ch, (value * 2, Decimal(value) / 2, 1))
        moved = value + pick(ch, (-1, 1, 2))
        return max(moved, 0) if keyword in COUNTS else moved
    if keyword == "type":
        types = [value] if isinstance(value, str) else list(value)
        op = ch.integer(1, 3)
        if op == 1 and len(types) > 1:
            types.remove(pick(ch, types))
        elif op == 2:
            types = [pick(ch, TYPES)]
        else:
            types.append(pick(ch, TYPES))
        types = list(dict.fromkeys(types))
        return types[0] if len(types) == 1 and chance(ch, 50) else types
    if keyword in ("enum", "required", "prefixItems", "anyOf", "allOf", "oneOf"):
        items = list(value) if isinstance(value, list) else []
        op = ch.integer(1, 3)
        if op == 1 and len(items) > 1:
            items.pop(ch.integer(0, len(items) - 1))
        elif op == 2:
            items.reverse()
        elif keyword == "enum":
            items.append(pick(ch, VALUES))
        elif keyword == "required":
            items.append(pick(ch, NAMES))
        else:
            items.append(schema(ch, 2, vocab))
        if keyword == "required":
            items = list(dict.fromkeys(items))
        return items or value
    if keyword in (
        "properties",
        "patternProperties",
        "dependentSchemas",
    ) and isinstance(value, dict):
        members = dict(value)
        if members and chance(ch, 40):
            name = pick(ch, list(members))
            members[name] = edit(ch, members[name], vocab, False)
        elif members and chance(ch, 30):
            del members[pick(ch, list(members))]
        else:
            name = pick(ch, PATTERNS if keyword == "patternProperties" else NAMES)
            members[name] = schema(ch, 2, vocab)
        return members
    if keyword == "$ref":
        return pick(ch, vocab.refs)
    if isinstance(value, dict | bool):
        return edit(ch, value, vocab, False)
    if isinstance(value, str):
        return pick(ch, (*PATTERNS, "email", "date"))
    return value


# -- instances -----------------------------------------------------------------


def instances(ch: Chooser, doc: Any, count: int) -> Iterator[Any]:
    """``count`` values shaped after ``doc`` (many of them valid, some not)."""
    for _ in range(count):
        yield instance(ch, doc, doc, 3)


def instance(ch: Chooser, doc: Any, schema: Any, depth: int) -> Any:
    if not isinstance(schema, dict) or depth <= 0 or chance(ch, 10):
        return pick(ch, VALUES) if chance(ch, 50) else scalar(ch, None, {})
    ref = schema.get("$ref")
    if isinstance(ref, str) and chance(ch, 70):
        return instance(ch, doc, resolve(doc, ref), depth - 1)
    for keyword in ("allOf", "anyOf", "oneOf"):
        branches = schema.get(keyword)
        if isinstance(branches, list) and branches and chance(ch, 40):
            branch = pick(ch, branches)
            merged = {**schema, **branch} if isinstance(branch, dict) else schema
            merged = {k: v for k, v in merged.items() if k != keyword}
            return instance(ch, doc, merged, depth)
    for keyword in ("enum", "const"):
        if keyword in schema and chance(ch, 70):
            values = schema["enum"] if keyword == "enum" else [schema["const"]]
            if isinstance(values, list) and values:
                return copy.deepcopy(pick(ch, values))
    types = schema.get("type", pick(ch, TYPES))
    kind = types if isinstance(types, str) else pick(ch, list(types) or TYPES)
    if kind == "object" or (
        "type" not in schema and ("properties" in schema or "required" in schema)
    ):
        return obj(ch, doc, schema, depth)
    if kind == "array" or ("type" not in schema and "items" in schema):
        return array(ch, doc, schema, depth)
    return scalar(ch, kind, schema)


def obj(ch: Chooser, doc: Any, schema: dict[str, Any], depth: int) -> Any:
    props = (
        schema.get("properties") if isinstance(schema.get("properties"), dict) else {}
    )
    required = (
        schema.get("required") if isinstance(schema.get("required"), list) else []
    )
    names = list(dict.fromkeys([*required, *props]))
    names += [name for name in NAMES if chance(ch, 25)]
    out = {}
    for name in names:
        if name not in required and chance(ch, 30):
            continue
        sub = props.get(name, schema.get("additionalProperties", True))
        out[name] = instance(ch, doc, sub, depth - 1)
    return out


def array(ch: Chooser, doc: Any, schema: dict[str, Any], depth: int) -> Any:
    prefix = (
        schema.get("prefixItems") if isinstance(schema.get("prefixItems"), list) else []
    )
    items = schema.get("items", True)
    out = []
    for i in range(ch.integer(0, 3)):
        sub = prefix[i] if i < len(prefix) else items
        if isinstance(sub, list):  # tuple form
            sub = sub[i] if i < len(sub) else True
        if "contains" in schema and chance(ch, 40):
            sub = schema["contains"]
        out.append(instance(ch, doc, sub, depth - 1))
    return out


def scalar(ch: Chooser, kind: str | None, schema: dict[str, Any]) -> Any:
    kind = kind or pick(ch, ("null", "boolean", "integer", "number", "string"))
    if kind == "null":
        return None
    if kind == "boolean":
        return chance(ch, 50)
    if kind == "string":
        return pick(ch, STRINGS)
    bounds = [
        schema[k]
        for k in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum")
        if isinstance(schema.get(k), int | Decimal) and not isinstance(schema[k], bool)
    ]
    if bounds and chance(ch, 60):
        return pick(ch, bounds) + pick(ch, (-1, 0, 1))
    number = pick(ch, NUMBERS)
    if kind == "integer" and isinstance(number, Decimal):
        return int(number)
    return number


def resolve(doc: Any, ref: str) -> Any:
    """Where a ``#`` or ``#/...`` reference of ``doc`` leads (roughly: the
    instance generator only needs a shape to follow)."""
    target = doc
    for token in ref[2:].split("/") if ref.startswith("#/") else ():
        if not isinstance(target, dict) or token not in target:
            return True
        target = target[token]
    return target


# -- the oracle ----------------------------------------------------------------

# One value of every type, and some nested ones, unlike generated values.
PROBES = (None, True, 987, Decimal("-3.25"), "", "zz", [], {}, ["zz"], {"zz": 0})


def excused(old: Validator, new: Validator, new_doc: Any, value: Any) -> bool:
    """Whether ``value`` (valid under ``old``, refused by ``new``) falls under
    the open-content-model exception: what ``new`` refuses sits under keys
    whose value ``old`` did not constrain (probes there keep ``value``
    valid).

    Those keys are given other values (or left out, or renamed, which keeps
    counts such as ``minProperties``) to satisfy ``new``: each
    key alone first, then all of them, deepest first, each taking the choice
    that leaves ``new`` the fewest violations. Failing that, ``new`` must
    accept ``value`` once every property it declares under such a name is
    opened to any value (names free wherever ``value`` uses them, so that a
    narrowing elsewhere is not hidden): a new property may accept nothing.
    """
    free = [path for path in member_paths(value) if unconstrained(old, value, path)]
    if not free:
        return False
    choices = (ABSENT_MEMBER, RENAMED_MEMBER, *PROBES)
    for path in free:
        for probe in choices:
            if new.is_valid(changed(value, path, probe)):
                return True
    candidate = value
    for path in sorted(free, key=len, reverse=True):
        options = [changed(candidate, path, probe) for probe in choices]
        candidate = min([candidate, *options], key=lambda v: violations(new, v))
    if new.is_valid(candidate):
        return True
    used = {path[-1] for path in member_paths(value)}
    names = {
        name
        for name in used
        if all(
            unconstrained(old, value, path)
            for path in member_paths(value)
            if path[-1] == name
        )
    }
    return opened(new_doc, names, new.draft).is_valid(value)


def changed(value: Any, path: tuple[Any, ...], probe: Any) -> Any:
    """A copy of ``value`` with the member at ``path`` set to ``probe`` (or
    removed), unchanged if an earlier change removed its object."""
    value = copy.deepcopy(value)
    with contextlib.suppress(KeyError, IndexError, TypeError):
        set_member(value, path, probe)
    return value


def violations(validator: Validator, value: Any) -> int:
    """How many violations ``validator`` reports for ``value``."""
    try:
        validator.validate(dumps(value).encode())
    except InvalidPayload as refused:
        return max(str(refused).count("\n- "), 1)
    return 0


def opened(doc: Any, names: set[str], draft: Any) -> Validator:
    """A validator of ``doc`` with every ``properties`` entry named in
    ``names`` accepting anything."""
    doc = copy.deepcopy(doc)
    for path in subschema_paths(doc):
        schema = at(doc, path)
        if isinstance(schema, dict) and isinstance(schema.get("properties"), dict):
            for name in names & schema["properties"].keys():
                schema["properties"][name] = True
    return Validator(
        doc, draft=draft, drafts=DRAFTS, formats=FORMATS, schema_uri="narad:opened"
    )


ABSENT_MEMBER = object()  # the member left out
RENAMED_MEMBER = object()  # the member kept under a name no schema here uses


def member_paths(value: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """The path of every object member, at any depth."""
    if isinstance(value, dict):
        for key, member in value.items():
            yield (*path, key)
            yield from member_paths(member, (*path, key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from member_paths(item, (*path, i))


def set_member(value: Any, path: tuple[Any, ...], probe: Any) -> None:
    parent = at(value, path[:-1])
    if probe is ABSENT_MEMBER:
        del parent[path[-1]]
    elif probe is RENAMED_MEMBER:
        parent[f"zz{len(parent)}"] = parent.pop(path[-1])
    else:
        parent[path[-1]] = copy.deepcopy(probe)


def unconstrained(old: Validator, value: Any, path: tuple[Any, ...]) -> bool:
    """Whether ``old`` leaves the member at ``path`` any value: every probe
    keeps ``value`` valid, but for two at most, which may merely repeat a
    sibling under ``uniqueItems``."""
    refused = 0
    for probe in PROBES:
        refused += not old.is_valid(changed(value, path, probe))
        if refused > 2:
            return False
    return True


# -- a trial -------------------------------------------------------------------


@dataclass
class Tally:
    """What a run of trials checked."""

    pairs: int = 0
    unregistrable: int = 0
    accepted: int = 0
    refused: int = 0
    instances: int = 0
    old_valid: int = 0
    excused: int = 0

    def __str__(self) -> str:
        return (
            f"{self.pairs} pairs ({self.unregistrable} not registrable, "
            f"{self.accepted} accepted, {self.refused} refused); "
            f"{self.instances} instances checked on accepted pairs, "
            f"{self.old_valid} valid before, {self.excused} excused as the "
            "open-content-model exception"
        )


@dataclass
class Unsound(AssertionError):
    """An accepted change that refuses a message the previous version accepted."""

    old: Any
    new: Any
    value: Any

    def __str__(self) -> str:
        return (
            "accepted, but a message valid before is refused now:\n"
            f"old:   {dumps(self.old)}\nnew:   {dumps(self.new)}\n"
            f"value: {dumps(self.value)}"
        )


def dumps(value: Any) -> str:
    """Compact JSON text, ``Decimal`` numbers as written."""
    return show(value, limit=sys.maxsize)


def trial(ch: Chooser, tally: Tally, per_pair: int = 40) -> None:
    """One generated pair and, if the check accepts it, its instances.

    Raises:
        Unsound: the check accepted a change that refuses an old-valid value.
        AssertionError: stopping at the first violation disagrees with the
            full report.
    """
    tally.pairs += 1
    old_doc = document(ch)
    new_doc = mutate(ch, old_doc)
    try:
        old = registered(old_doc)
        new = registered(new_doc)
    except InvalidSchema:
        tally.unregistrable += 1
        return
    if engine.no_change(old.document, new.document, draft=old.draft):
        found = []
    else:
        found, first = (
            engine.check(
                old.document,
                new.document,
                old_draft=old.draft,
                new_draft=new.draft,
                rules=RULES,
                first=stop,
            )
            for stop in (False, True)
        )
        assert first == found[:1], (dumps(old_doc), dumps(new_doc), first, found)
    if found:
        tally.refused += 1
        return
    tally.accepted += 1
    old_validator, new_validator = validator(old), validator(new)
    shaped = itertools.chain(
        instances(ch, old_doc, per_pair // 2), instances(ch, new_doc, per_pair // 2)
    )
    for value in shaped:
        value = loads(dumps(value).encode(), max_depth=64)
        tally.instances += 1
        if not old_validator.is_valid(value):
            continue
        tally.old_valid += 1
        if new_validator.is_valid(value):
            continue
        if excused(old_validator, new_validator, new.document, value):
            tally.excused += 1
            continue
        raise Unsound(old_doc, new_doc, value)


def registered(doc: Any) -> RegisteredSchema:
    return register(dumps(doc).encode(), drafts=DRAFTS, default_draft=DEFAULT)


def validator(schema: RegisteredSchema) -> Validator:
    return Validator(
        schema.document,
        draft=schema.draft,
        drafts=DRAFTS,
        formats=FORMATS,
        schema_uri="narad://schema/fuzz/1",
    )
