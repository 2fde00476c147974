"""Generated schemas and instances on which Narad must agree with python-jsonschema.

Used by ``test_validator_differential`` (a small budget in the suite) and by
``bench/fuzz_validator.py`` (as long as asked). What the two validators are
meant to disagree on is left out by construction, not filtered afterwards:

- numbers are small integers and halves, exact as binary floats too (Narad's
  exact numbers differ from python-jsonschema's floats only beyond that), and
  no float is integral (draft-04 counts ``1.0`` as a number there, Narad as
  an integer on every draft);
- patterns come from a list that RE2 and Python's ``re`` read alike, and no
  string holds a newline (where ``$`` differs);
- ``format`` is never generated (Narad asserts it, python-jsonschema does not
  by default);
- ``$ref`` to the root sits only where it moves to a child value, and
  ``$ref`` to a definition only reaches definitions without references, so
  no reference cycle revisits a schema in place (Narad fails such a cycle
  where python-jsonschema recurses without end);
- a schema registration refuses (a shape the rulebook refuses) is not
  compared: Narad never validates against it.

Each draft gets the keywords it defines (``const`` from 06, ``if`` from 07,
``dependentSchemas`` and ``minContains`` from 2019-09, ``prefixItems`` in
2020-12, the array form of ``items`` before it), but ``unevaluated*`` only in
2020-12: python-jsonschema's 2019-09 version of them is wrong (it counts the
items ``contains`` matched, and reads an ``additionalProperties`` or nested
``unevaluatedProperties`` subschema as a list of property names). Narad runs
the same code for both drafts but for ``contains``, and the vendored
JSON-Schema-Test-Suite covers 2019-09's.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from dataclasses import field
from functools import cache
from typing import Any

import jsonschema
from hypothesis import strategies as st

from narad.errors import InvalidPayload
from narad.errors import InvalidSchema
from narad.jsontext import json_key
from narad.plugins import Plugins
from narad.plugins import get_plugin_manager
from narad.schema.registration.documents import register
from narad.schema.validation.validator import Validator

BY_URI, _ = Plugins(get_plugin_manager(load_entry_points=False)).drafts()
DRAFTS = {draft.name: draft for draft in BY_URI.values()}
ORDER = ["04", "06", "07", "2019-09", "2020-12"]
REFERENCE = {
    "04": jsonschema.Draft4Validator,
    "06": jsonschema.Draft6Validator,
    "07": jsonschema.Draft7Validator,
    "2019-09": jsonschema.Draft201909Validator,
    "2020-12": jsonschema.Draft202012Validator,
}

_KEYWORDS = frozenset().union(*(draft.keywords for draft in DRAFTS.values()))
NAMES = ["a", "b", "c", "x-1"]
STRINGS = ["", "a", "b", "ab", "abc", "b1", "x-1", "\u00e9", "a\u00e9b"]
# Read alike by RE2 and Python's re (no newline ever reaches them).
PATTERNS = ["^a", "b$", "^[a-c]*$", "1", "^.{2}$", "\u00e9", "^x-", "[0-9]"]
NUMBERS = st.integers(-3, 6) | st.sampled_from([-1.5, 0.5, 2.5, 4.5])

JSON_VALUES = st.recursive(
    st.none() | st.booleans() | NUMBERS | st.sampled_from(STRINGS),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(st.sampled_from(NAMES), inner, max_size=4)
    ),
    max_leaves=16,
)


def _names(min_size: int = 0) -> st.SearchStrategy[list[str]]:
    """Property names without repeats (every meta-schema wants them unique)."""
    return st.lists(st.sampled_from(NAMES), min_size=min_size, max_size=3, unique=True)


def _since(draft: str, first: str) -> bool:
    return ORDER.index(draft) >= ORDER.index(first)


def _assertions(draft: str) -> st.SearchStrategy[dict[str, Any]]:
    """Schemas of assertion keywords only (any type, numbers, strings,
    arrays and objects), each keyword optional."""
    types = ["null", "boolean", "integer", "number", "string", "array", "object"]
    optional: dict[str, st.SearchStrategy[Any]] = {
        "type": st.sampled_from(types)
        | st.lists(st.sampled_from(types), min_size=1, unique=True),
        "enum": st.lists(JSON_VALUES, min_size=1, max_size=4, unique_by=json_key),
        "minimum": NUMBERS,
        "maximum": NUMBERS,
        "multipleOf": st.sampled_from([1, 2, 3, 0.5]),
        "minLength": st.integers(0, 3),
        "maxLength": st.integers(0, 3),
        "pattern": st.sampled_from(PATTERNS),
        "minItems": st.integers(0, 3),
        "maxItems": st.integers(0, 3),
        "uniqueItems": st.booleans(),
        "minProperties": st.integers(0, 3),
        "maxProperties": st.integers(0, 3),
        "required": _names(min_size=1),
    }
    if _since(draft, "06"):
        optional["const"] = JSON_VALUES
        optional["exclusiveMinimum"] = NUMBERS
        optional["exclusiveMaximum"] = NUMBERS
    else:
        optional["exclusiveMinimum"] = st.booleans()
        optional["exclusiveMaximum"] = st.booleans()
    if _since(draft, "2019-09"):
        optional["dependentRequired"] = st.dictionaries(
            st.sampled_from(NAMES), _names()
        )
    return _some_of(optional).map(_draft4_bounds if draft == "04" else _same)


def _draft4_bounds(schema: dict[str, Any]) -> dict[str, Any]:
    """Draft-04's boolean exclusive bounds need their bound (its meta-schema)."""
    for exclusive, bound in (
        ("exclusiveMinimum", "minimum"),
        ("exclusiveMaximum", "maximum"),
    ):
        if exclusive in schema and bound not in schema:
            del schema[exclusive]
    return schema


def _same(schema: dict[str, Any]) -> dict[str, Any]:
    return schema


@st.composite
def _some_of(draw: Any, optional: dict[str, st.SearchStrategy[Any]]) -> dict:
    """A dict holding a few of ``optional``'s keys (most schemas are small)."""
    chosen = draw(st.lists(st.sampled_from(sorted(optional)), max_size=3, unique=True))
    return {key: draw(optional[key]) for key in chosen}


def _applicators(
    draft: str, inner: st.SearchStrategy[Any], child: st.SearchStrategy[Any]
) -> st.SearchStrategy[dict[str, Any]]:
    """Schemas of applicators over ``inner`` (in place) and ``child`` (child
    values, where a reference to the root may sit), with a few assertions."""
    branches = st.lists(inner, min_size=1, max_size=3)
    names = st.sampled_from(NAMES)
    optional: dict[str, st.SearchStrategy[Any]] = {
        "allOf": branches,
        "anyOf": branches,
        "oneOf": branches,
        "not": inner,
        "properties": st.dictionaries(names, child, max_size=3),
        "patternProperties": st.dictionaries(
            st.sampled_from(PATTERNS), child, max_size=2
        ),
        "additionalProperties": child,
        "items": child,
    }
    if _since(draft, "06"):
        optional["contains"] = child
        optional["propertyNames"] = child
    if _since(draft, "07"):
        optional["if"] = inner
        optional["then"] = inner
        optional["else"] = inner
    if draft == "2020-12":
        optional["unevaluatedProperties"] = child
        optional["unevaluatedItems"] = child
    if _since(draft, "2019-09"):
        optional["dependentSchemas"] = st.dictionaries(names, inner, max_size=2)
        optional["minContains"] = st.integers(0, 2)
        optional["maxContains"] = st.integers(0, 2)
    else:
        optional["dependencies"] = st.dictionaries(
            names, inner | _names(min_size=int(draft == "04")), max_size=2
        )
    if draft == "2020-12":
        optional["prefixItems"] = st.lists(child, min_size=1, max_size=3)
    else:
        optional["items"] = child | st.lists(child, min_size=1, max_size=3)
        optional["additionalItems"] = child
    return st.tuples(_some_of(optional), _assertions(draft)).map(_merge)


def _merge(parts: tuple[dict[str, Any], dict[str, Any]]) -> dict[str, Any]:
    applicators, assertions = parts
    schema = {**assertions, **applicators}
    if isinstance(schema.get("items"), bool):
        # python-jsonschema takes len() of a boolean items beside it.
        schema.pop("additionalItems", None)
    return schema


@cache
def schemas(name: str) -> st.SearchStrategy[dict[str, Any]]:
    """Schema documents of draft ``name`` (see the module docstring): a body
    that may reference the root (from child values) and two definitions."""
    container = "$defs" if _since(name, "2019-09") else "definitions"
    refs = [{"$ref": f"#/{container}/{key}"} for key in ("d0", "d1")]
    leaf = _assertions(name) | st.sampled_from(refs)
    if name != "04":  # boolean schemas came with draft-06
        leaf = leaf | st.booleans()
    root_ref = st.just({"$ref": "#"})

    def extend(inner: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
        return _applicators(name, inner, inner | root_ref)

    def document(parts: tuple[Any, dict, dict]) -> dict[str, Any]:
        body, d0, d1 = parts
        if not isinstance(body, dict) or "$ref" in body:
            body = {"allOf": [body]}
        body[container] = {"d0": d0, "d1": d1}
        if name != "2020-12":
            body = {"$schema": DRAFTS[name].uris[0], **body}
        return body

    body = st.recursive(leaf, extend, max_leaves=8)
    return st.tuples(body, _assertions(name), _assertions(name)).map(document)


@dataclass
class Tally:
    """What a run compared."""

    schemas: Counter[str] = field(default_factory=Counter)
    refused: Counter[str] = field(default_factory=Counter)
    instances: int = 0
    accepted: int = 0
    keywords: Counter[str] = field(default_factory=Counter)

    def count_keywords(self, schema: Any) -> None:
        if isinstance(schema, dict):
            self.keywords.update(k for k in schema if k in _KEYWORDS)
            for value in schema.values():
                self.count_keywords(value)
        elif isinstance(schema, list):
            for item in schema:
                self.count_keywords(item)


def compare(name: str, schema: dict, instances: list[Any], tally: Tally) -> None:
    """Assert Narad's verdict is python-jsonschema's for every instance.

    A schema registration refuses is counted and not compared.
    """
    text = json.dumps(schema).encode()
    try:
        registered = register(text, drafts=BY_URI, default_draft=DRAFTS["2020-12"])
    except InvalidSchema:
        tally.refused[name] += 1
        return
    tally.schemas[name] += 1
    tally.count_keywords(schema)
    ours = Validator(
        registered.document,
        draft=registered.draft,
        drafts=BY_URI,
        formats={},
        schema_uri="narad://schema/differential/1",
    )
    reference = REFERENCE[name](schema)
    for instance in instances:
        payload = json.dumps(instance).encode()
        try:
            ours.validate(payload)
            verdict = True
        except InvalidPayload:
            verdict = False
        expected = reference.is_valid(instance)
        assert verdict is expected, (
            f"draft {name}: Narad says {verdict}, python-jsonschema {expected}\n"
            f"schema:   {json.dumps(schema)}\ninstance: {payload.decode()}"
        )
        tally.instances += 1
        tally.accepted += verdict
