"""Compatibility check figures: a typical pair, 256 KiB pairs, deep recursion.

Run from a checkout: ``PYTHONPATH=.:plugins python bench/compat.py``.
Each figure is the best of several runs of :func:`check` on documents already
parsed (parsing is the caller's and is timed by the validation benchmark);
a full report (every violation, as a dry run needs) unless marked "first",
which stops at the first violation as a schema change (PATCH) does.
The target is under 100 ms for a pair of 256 KiB schemas.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

from narad.plugins import Plugins
from narad.plugins import get_plugin_manager
from narad.schema.compatibility import check
from narad.schema.jsontext import loads

PLUGINS = Plugins(get_plugin_manager(load_entry_points=False))
_, DRAFT = PLUGINS.drafts()
RULES = PLUGINS.compatibility_rules()
LIMIT = 256 * 1024


def _parse(document: Any) -> tuple[Any, int]:
    text = json.dumps(document, separators=(",", ":")).encode()
    return loads(text, max_depth=64), len(text)


def _time(old: Any, new: Any, first: bool, runs: int = 5) -> tuple[float, int]:
    best = float("inf")
    for _ in range(runs):
        start = time.perf_counter()
        found = check(
            old, new, old_draft=DRAFT, new_draft=DRAFT, rules=RULES, first=first
        )
        best = min(best, time.perf_counter() - start)
    return best * 1000, len(found)


def _report(
    name: str, make: Callable[[], tuple[Any, Any]], *, first: bool = False
) -> None:
    old, new = make()
    (old_doc, old_size), (new_doc, new_size) = _parse(old), _parse(new)
    ms, found = _time(old_doc, new_doc, first)
    size = f"{old_size / 1024:.0f}/{new_size / 1024:.0f} KiB"
    print(f"{name:<58} {size:>14} {ms:9.2f} ms  {found} refused")


def order(extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """A typical event schema."""
    return {
        "type": "object",
        "required": ["id", "customer", "items"],
        "properties": {
            "id": {"type": "string", "pattern": "^ord_[0-9a-f]{12}$"},
            "customer": {"type": "string", "minLength": 1, "maxLength": 64},
            "status": {"enum": ["new", "paid", "shipped"]},
            "total": {"type": "number", "minimum": 0},
            "items": {
                "type": "array",
                "minItems": 1,
                "items": {
                    "type": "object",
                    "properties": {
                        "sku": {"type": "string"},
                        "qty": {"type": "integer", "minimum": 1},
                    },
                },
            },
            **(extra or {}),
        },
    }


def typical() -> tuple[Any, Any]:
    new = order({"note": {"type": ["string", "null"], "maxLength": 200}})
    new["properties"]["status"]["enum"].append("refunded")
    return order(), new


def wide(widen: Callable[[int, dict[str, Any]], None]) -> tuple[Any, Any]:
    """Just under 256 KiB of properties, each a small object; ``widen`` edits
    the new version's property ``i`` in place."""
    old: dict[str, Any] = {"type": "object", "properties": {}}
    i = 0
    while len(json.dumps(old, separators=(",", ":"))) < LIMIT - 400:
        old["properties"][f"field_{i}"] = {
            "type": "object",
            "required": ["a"],
            "properties": {
                "a": {"type": "string", "maxLength": 10 + i % 50},
                "b": {"enum": [1, 2, 3]},
                "c": {"anyOf": [{"type": "integer"}, {"type": "null"}]},
            },
        }
        i += 1
    new = json.loads(json.dumps(old))
    for n, prop in enumerate(new["properties"].values()):
        widen(n, prop)
    return old, new


def one_leaf(n: int, prop: dict[str, Any]) -> None:
    if n == 1000:
        prop["properties"]["a"]["maxLength"] += 1


def every_leaf(n: int, prop: dict[str, Any]) -> None:
    prop["properties"]["a"]["maxLength"] += 1
    prop["properties"]["c"]["anyOf"].reverse()


def every_leaf_narrowed(n: int, prop: dict[str, Any]) -> None:
    prop["properties"]["a"]["maxLength"] -= 1


def chain(depth: int, leaf: str) -> dict[str, Any]:
    """A chain of definitions, each pointing at the next one, then a cycle."""
    defs = {
        f"d{i}": {"properties": {"x": {"$ref": f"#/$defs/d{i + 1}"}}}
        for i in range(depth)
    }
    defs[f"d{depth}"] = {"type": leaf, "properties": {"up": {"$ref": "#/$defs/d0"}}}
    return {"$defs": defs, "$ref": "#/$defs/d0"}


def tree(leaf: str) -> dict[str, Any]:
    """Mutually recursive definitions, many paths between them."""
    defs = {
        f"n{i}": {
            "type": "object",
            "properties": {
                **{f"to{j}": {"$ref": f"#/$defs/n{j}"} for j in range(40)},
                "v": {"type": leaf},
            },
        }
        for i in range(40)
    }
    return {"$defs": defs, "$ref": "#/$defs/n0"}


def main() -> None:
    _report("typical pair (property and enum value added)", typical)
    _report("256 KiB pair, one leaf widened", lambda: wide(one_leaf))
    _report("256 KiB pair, every property changed", lambda: wide(every_leaf))
    _report("256 KiB pair, identical", lambda: wide(lambda n, p: None))
    _report(
        "256 KiB pair, every property narrowed (every violation)",
        lambda: wide(every_leaf_narrowed),
    )
    _report(
        "256 KiB pair, every property narrowed (first, as a PATCH)",
        lambda: wide(every_leaf_narrowed),
        first=True,
    )
    _report(
        "recursive chain of 100 $defs, leaf widened",
        lambda: (chain(100, "integer"), chain(100, "number")),
    )
    _report(
        "recursive chain of 100 $defs, leaf narrowed",
        lambda: (chain(100, "number"), chain(100, "integer")),
    )
    _report(
        "recursive chain of 5000 $defs, leaf narrowed (past MAX_DEPTH)",
        lambda: (chain(5000, "number"), chain(5000, "integer")),
    )
    _report(
        "40 mutually recursive $defs x 40 refs each, leaf widened",
        lambda: (tree("integer"), tree("number")),
    )


if __name__ == "__main__":
    main()
