"""Registration time: a typical schema, a legitimate 256 KiB one, each
refused shape at the largest size the 256 KiB limit allows, and adversarial
shapes for the analysis itself (long recursive chains, wide and deep ones).

Run: PYTHONPATH=.:plugins .venv/bin/python bench/register.py
Prints one line per document: its compacted size, the verdict, and the best
of five registration times. The target is under 200 ms for every one.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable

from narad.errors import InvalidSchema
from narad.plugins import Plugins
from narad.plugins import get_plugin_manager
from narad.schema.registration.documents import MAX_SIZE
from narad.schema.registration.documents import register
from tests.cases.registration import recursive_properties_chain

DRAFTS, DEFAULT = Plugins(get_plugin_manager(load_entry_points=False)).drafts()


def _text(document: object) -> bytes:
    return json.dumps(document, separators=(",", ":")).encode()


def _largest(build: Callable[[int], object]) -> bytes:
    """The largest ``build(n)`` whose compacted text fits in 256 KiB."""
    low, high = 1, 2
    while len(_text(build(high))) <= MAX_SIZE:
        low, high = high, high * 2
    while high - low > 1:
        middle = (low + high) // 2
        if len(_text(build(middle))) <= MAX_SIZE:
            low = middle
        else:
            high = middle
    return _text(build(low))


def typical() -> object:
    return {
        "type": "object",
        "required": ["id", "amount", "currency", "customer"],
        "properties": {
            "id": {"type": "string", "format": "uuid"},
            "amount": {"type": "integer", "minimum": 1},
            "currency": {"enum": ["EUR", "USD", "GBP", "INR"]},
            "customer": {"$ref": "#/$defs/customer"},
            "lines": {"type": "array", "items": {"$ref": "#/$defs/line"}},
            "tags": {
                "type": "array",
                "items": {"type": "string", "pattern": "^[a-z]+$"},
            },
        },
        "$defs": {
            "customer": {
                "type": "object",
                "properties": {
                    "email": {"type": "string", "format": "email"},
                    "name": {"type": "string", "maxLength": 200},
                },
            },
            "line": {
                "type": "object",
                "properties": {"sku": {"type": "string"}, "qty": {"type": "integer"}},
            },
        },
    }


def legitimate(n: int) -> object:
    """Many definitions that reference each other, a recursive tree, patterns."""
    defs: dict[str, object] = {}
    for i in range(n):
        defs[f"entity{i}"] = {
            "type": "object",
            "required": ["id", "kind"],
            "properties": {
                "id": {"type": "string", "pattern": f"^e{i}-[0-9a-f]{{8}}$"},
                "kind": {"const": f"entity{i}"},
                "parent": {"$ref": f"#/$defs/entity{max(i - 1, 0)}"},
                "money": {"$ref": "#/$defs/money"},
                "children": {"type": "array", "items": {"$ref": "#/$defs/tree"}},
            },
        }
    defs["money"] = {"type": "object", "properties": {"amount": {"type": "integer"}}}
    defs["tree"] = {
        "properties": {
            "left": {"$ref": "#/$defs/tree"},
            "right": {"$ref": "#/$defs/tree"},
        }
    }
    return {
        "anyOf": [{"$ref": f"#/$defs/entity{i}"} for i in range(0, n, max(n // 60, 1))],
        "$defs": defs,
    }


def same_value_twice(n: int) -> object:
    return {"anyOf": [{"items": {"$ref": "#"}} for _ in range(n)]}


def doubling_chain(n: int) -> object:
    defs = {f"d{i}": {"allOf": [{"$ref": f"#/$defs/d{i + 1}"}] * 2} for i in range(n)}
    defs[f"d{n}"] = {"type": "string"}
    return {"$ref": "#/$defs/d0", "$defs": defs}


def negated_cycle(n: int) -> object:
    defs = {f"d{i}": {"allOf": [{"$ref": f"#/$defs/d{i + 1}"}]} for i in range(n)}
    defs[f"d{n}"] = {"not": {"$ref": "#/$defs/d0"}}
    return {"$ref": "#/$defs/d0", "$defs": defs}


def recursive_chain(n: int) -> object:
    """A chain of single-branch allOf links whose last one recurses by items."""
    defs: dict[str, object] = {
        f"d{i}": {"allOf": [{"$ref": f"#/$defs/d{i + 1}"}]} for i in range(n)
    }
    defs[f"d{n}"] = {"type": ["array", "integer"], "items": {"$ref": "#"}}
    return {"$defs": defs, "$ref": "#/$defs/d0"}


def skipping_chain(n: int) -> object:
    """Each entry an anyOf of two references to the next-but-one."""
    defs: dict[str, object] = {
        f"d{i}": {"anyOf": [{"$ref": f"#/$defs/d{i + 2}"}] * 2} for i in range(n)
    }
    defs[f"d{n}"] = defs[f"d{n + 1}"] = {"type": "string"}
    return {"$ref": "#/$defs/d0", "$defs": defs}


def wide(n: int) -> object:
    return {
        "type": "object",
        "properties": {f"p{i}": {"type": "string"} for i in range(n)},
    }


def deep(copies: int) -> object:
    """``copies`` properties, each nesting down to the 64-level limit."""
    inner: dict[str, object] = {}
    for _ in range(61):
        inner = {"items": inner}
    return {"properties": {f"p{i}": inner for i in range(copies)}}


def unevaluated_ring(n: int, branches: int = 4) -> object:
    """A ring of definitions, each a union of branches recursing to the next
    under their own names (and by position), beside unevaluatedProperties and
    unevaluatedItems: issue 19's shape, as large as 256 KiB holds."""

    def following(i: int) -> dict[str, str]:
        return {"$ref": f"#/$defs/u{(i + 1) % n}"}

    defs = {
        f"u{i}": {
            "anyOf": [{"properties": {f"p{j}": following(i)}} for j in range(branches)]
            + [{"prefixItems": [following(i)]}],
            "unevaluatedProperties": False,
            "unevaluatedItems": False,
        }
        for i in range(n)
    }
    return {"$ref": "#/$defs/u0", "$defs": defs}


def unevaluated_chain(n: int) -> object:
    """The same ring with one branch a link: the largest the analysis takes."""
    return unevaluated_ring(n, branches=0)


def unevaluated_union(branches: int) -> object:
    """A union of recursive branches beside unevaluatedProperties."""
    return {
        "anyOf": [{"properties": {f"p{i}": {"$ref": "#"}}} for i in range(branches)],
        "unevaluatedProperties": False,
    }


def many_empty(n: int) -> object:
    """The most subschemas 256 KiB holds: an allOf of empty schemas."""
    return {"allOf": [{}] * n}


def _time(raw: bytes) -> tuple[str, float]:
    best = float("inf")
    verdict = ""
    for _ in range(5):
        started = time.perf_counter()
        try:
            registered = register(raw, drafts=DRAFTS, default_draft=DEFAULT)
            verdict = "accepted, high cost" if registered.high_cost else "accepted"
        except InvalidSchema as exc:
            verdict = "refused: " + exc.message.removeprefix("invalid argument: ")[:60]
        best = min(best, time.perf_counter() - started)
    return verdict, best * 1000


def main() -> None:
    documents = [
        ("typical schema", _text(typical())),
        ("legitimate 256 KiB schema", _largest(legitimate)),
        ("shape 1: anyOf of items->#", _largest(same_value_twice)),
        ("shape 2: doubling $defs chain", _largest(doubling_chain)),
        ("shape 3: not through a $ref cycle", _largest(negated_cycle)),
        ("recursive allOf chain, n=1000", _text(recursive_chain(1000))),
        ("recursive allOf chain, n=5000", _text(recursive_chain(5000))),
        ("anyOf of two refs to next-but-one", _largest(skipping_chain)),
        ("recursive properties chain, n=400", _text(recursive_properties_chain(400))),
        ("recursive properties chain, largest", _largest(recursive_properties_chain)),
        ("10,000 properties", _text(wide(10_000))),
        ("64-level nesting, repeated", _largest(deep)),
        ("allOf of empty schemas", _largest(many_empty)),
        ("unevaluated* beside unions, ring", _largest(unevaluated_ring)),
        ("unevaluated* beside anyOf, ring", _largest(unevaluated_chain)),
        ("unevaluated* beside 63 branches", _text(unevaluated_union(63))),
        ("unevaluated* beside 64 branches", _text(unevaluated_union(64))),
    ]
    for name, raw in documents:
        verdict, ms = _time(raw)
        print(f"{name:36} {len(raw) / 1024:7.1f} KiB {ms:8.1f} ms  {verdict}")


if __name__ == "__main__":
    import report

    report.run("register", main)
