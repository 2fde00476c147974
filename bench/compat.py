"""Compatibility check figures: a typical pair, 256 KiB pairs, deep recursion,
recursive pairs (issue 50's and generated ones that grow), the dry run, and
transitive modes over long histories.

Run from a checkout: ``PYTHONPATH=.:plugins python bench/compat.py``.
Each figure of the first part is the best of several runs of :func:`check` on
documents already parsed (parsing is the caller's and is timed by the
validation benchmark); a full report (every violation, as a dry run needs)
unless marked "first", which stops at the first violation as a schema change
(PATCH) does. The target is under 100 ms for a pair of 256 KiB schemas.

The dry run is timed end to end in-process, with security on (Basic auth of
the root admin, request body read, registration,
the stored version fetched from an embedded Valkey (append-only, fsync
always, as ``narad serve`` runs it) and parsed, the report, the
response), beside a PATCH of the same change through the same app as its
baseline. The transitive figures check a proposed schema against 100 stored
versions, each equivalent to it (so every pair is walked in full, both
directions), beside the same check against the latest version only.
"""

from __future__ import annotations

import json
import logging
import shutil
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import falcon.testing

from narad.jsontext import loads
from narad.plugins import Plugins
from narad.plugins import get_plugin_manager
from narad.schema.compatibility.engine import check
from narad.schema.compatibility.versions import check as check_versions
from narad.schema.modes import Mode

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


# Issue 50's pair: the dry run (every violation) took 5.7 s on it, while a
# PATCH refused the same change in 10 ms; the new version adds
# "type": "array" to $defs/b.
ISSUE_50 = {
    "allOf": [{"$ref": "#/$defs/c"}, {"$ref": "#/$defs/a"}],
    "$defs": {
        "a": {
            "items": {"$ref": "#/$defs/b"},
            "additionalProperties": {"$ref": "#/$defs/b"},
        },
        "b": {
            "properties": {"q": {"$ref": "#/$defs/a"}},
            "additionalProperties": {"$ref": "#/$defs/c"},
            "items": {"$ref": "#/$defs/a"},
        },
        "c": {
            "additionalProperties": {"$ref": "#/$defs/a"},
            "items": {"$ref": "#/$defs/c"},
            "properties": {"w": {"$ref": "#/$defs/a"}},
        },
    },
}


def _changed(old: dict[str, Any], name: str, **change: Any) -> dict[str, Any]:
    new = json.loads(json.dumps(old))
    new["$defs"][name].update(change)
    return new


def issue_50() -> tuple[Any, Any]:
    return ISSUE_50, _changed(ISSUE_50, "b", type="array")


def _ref(i: int) -> dict[str, str]:
    return {"$ref": f"#/$defs/d{i}"}


def ring(n: int) -> tuple[Any, Any]:
    """Issue 50's shape grown: ``n`` definitions, each reaching the next
    through items and properties and the one after through
    additionalProperties, under a root allOf of two; one is narrowed."""
    old = {
        "allOf": [_ref(0), _ref(1)],
        "$defs": {
            f"d{i}": {
                "items": _ref((i + 1) % n),
                "additionalProperties": _ref((i + 2) % n),
                "properties": {"q": _ref((i + 1) % n)},
            }
            for i in range(n)
        },
    }
    return old, _changed(old, f"d{n // 2}", type="array")


def subsets(n: int, leaf: str) -> tuple[Any, Any]:
    """Recursive references reaching one definition with 2**n sets of others
    applying to the same value (a subset construction); the leaf property
    becomes ``leaf`` (``number`` widens it, ``string`` narrows it)."""
    defs: dict[str, Any] = {
        "d0": {"properties": {"a": {"allOf": [_ref(0), _ref(1)]}, "b": _ref(0)}}
    }
    for i in range(1, n):
        defs[f"d{i}"] = {"properties": {"a": _ref(i + 1), "b": _ref(i + 1)}}
    defs[f"d{n}"] = {"properties": {"z": {"type": "integer"}}}
    old = {"$ref": "#/$defs/d0", "$defs": defs}
    return old, _changed(old, f"d{n}", properties={"z": {"type": leaf}})


def recursive_pairs() -> None:
    """The dry run's full report of recursive pairs, beside the first-stop
    check (a PATCH's) as its baseline: best of five runs each."""
    cases: list[tuple[str, Callable[[], tuple[Any, Any]]]] = [
        ("issue 50's recursive pair", issue_50),
        *((f"ring of {n} $defs, one narrowed", partial(ring, n)) for n in (3, 12, 48)),
        *(
            (f"{n} levels of subsets, leaf narrowed", partial(subsets, n, "string"))
            for n in (8, 16, 24)
        ),
        *(
            (f"{n} levels of subsets, leaf widened", partial(subsets, n, "number"))
            for n in (8, 16, 24)
        ),
    ]
    print(
        f"{'recursive pair':<44} {'size':>8} {'first (PATCH)':>14} {'full report':>14}"
    )
    for name, make in cases:
        old, new = make()
        (old_doc, size), (new_doc, _) = _parse(old), _parse(new)
        first_ms, _ = _time(old_doc, new_doc, True)
        full_ms, found = _time(old_doc, new_doc, False)
        print(
            f"{name:<44} {size / 1024:>4.1f} KiB {first_ms:>11.2f} ms "
            f"{full_ms:>11.2f} ms  {found} refused"
        )


def _best(run: Callable[[], Any], runs: int = 5) -> tuple[float, Any]:
    best, result = float("inf"), None
    for _ in range(runs):
        start = time.perf_counter()
        result = run()
        best = min(best, time.perf_counter() - start)
    return best * 1000, result


def dry_runs() -> None:
    """The dry run of a 256 KiB change, end to end in-process, beside a PATCH."""
    from narad.serve.embedded import EmbeddedValkey
    from narad.testing import client
    from narad.testing import make_config

    directory = tempfile.mkdtemp(prefix="narad-bench-compat-")
    valkey = EmbeddedValkey(Path(directory) / "data")
    try:
        # Security on, as shipped: every request carries the root admin's
        # credentials, the PATCH baseline's as well.
        config = make_config(
            directory,
            security__enabled=True,
            storage__url=valkey.start(),
            storage__durability="strict",
        )
        _dry_runs(client(config))
    finally:
        # The app's listeners outlive it: their storage going away is expected.
        logging.getLogger("narad.broker.notifications").setLevel(logging.ERROR)
        valkey.stop()
        shutil.rmtree(directory, ignore_errors=True)


def _dry_runs(http: falcon.testing.TestClient) -> None:
    _recursive_dry_runs(http)
    cases = [
        ("every property widened", wide(every_leaf)),
        ("every property narrowed", wide(every_leaf_narrowed)),
    ]
    for n, (what, (old, new)) in enumerate(cases):
        new_text = json.dumps(new, separators=(",", ":"))
        for mode in ("BACKWARD", "FULL"):
            name = f"t{n}-{mode}"
            created = http.simulate_post(
                "/v1/topics",
                json={"name": name, "schema": old, "compatibility": mode},
            )
            assert created.status_code == 201, created.text
            body = '{"schema":' + new_text + "}"
            path = f"/v1/topics/{name}/schemas/compatibility"
            ms, resp = _best(partial(http.simulate_post, path, body=body))
            report = resp.json
            cut = ", cut" if "narad-report-truncated" in resp.headers else ""
            found = f"{len(report['violations'])} reported{cut}"
            label = f"dry run {mode}, 256 KiB pair, {what}"
            print(f"{label:<64} {len(body) / 1024:>10.0f} KiB {ms:9.2f} ms  {found}")
        if what.endswith("narrowed"):
            # The baseline: the same change as a PATCH, refused at the first.
            patch = partial(http.simulate_patch, f"/v1/topics/t{n}-BACKWARD", body=body)
            ms, resp = _best(patch)
            assert resp.status_code == 400
            label = f"PATCH BACKWARD, 256 KiB pair, {what} (refused)"
            print(f"{label:<64} {len(body) / 1024:>10.0f} KiB {ms:9.2f} ms")


def _recursive_dry_runs(http: falcon.testing.TestClient) -> None:
    """Issue 50's pair and a grown one, end to end: the dry run beside a
    PATCH of the same change (refused at the first violation)."""
    for n, (what, (old, new)) in enumerate(
        [("issue 50's recursive pair", issue_50()), ("ring of 48 $defs", ring(48))]
    ):
        name = f"r{n}"
        created = http.simulate_post("/v1/topics", json={"name": name, "schema": old})
        assert created.status_code == 201, created.text
        body = '{"schema":' + json.dumps(new, separators=(",", ":")) + "}"
        path = f"/v1/topics/{name}/schemas/compatibility"
        ms, resp = _best(partial(http.simulate_post, path, body=body))
        found = f"{len(resp.json['violations'])} reported"
        label = f"dry run BACKWARD, {what}"
        print(f"{label:<64} {len(body) / 1024:>10.1f} KiB {ms:9.2f} ms  {found}")
        patch = partial(http.simulate_patch, f"/v1/topics/{name}", body=body)
        ms, resp = _best(patch)
        assert resp.status_code == 400
        label = f"PATCH BACKWARD, {what} (refused)"
        print(f"{label:<64} {len(body) / 1024:>10.1f} KiB {ms:9.2f} ms")


def history(count: int, size: int) -> tuple[list[bytes], bytes]:
    """``count`` stored versions of about ``size`` bytes each and a proposed
    one, all equivalent (each lists its enums in another order), so a FULL
    check of any pair passes and walks it whole."""

    def version(turn: int) -> bytes:
        doc: dict[str, Any] = {"type": "object", "properties": {}}
        i = 0
        while len(json.dumps(doc, separators=(",", ":"))) < size - 200:
            values = [1, 2, 3, 4]
            k = (turn + i) % 4
            doc["properties"][f"field_{i}"] = {
                "type": "object",
                "properties": {
                    "a": {"type": "string", "maxLength": 10 + i % 50},
                    "b": {"enum": values[k:] + values[:k]},
                },
            }
            i += 1
        return json.dumps(doc, separators=(",", ":")).encode()

    return [version(turn) for turn in range(count)], version(count)


def transitive(count: int, size: int) -> None:
    stored, proposed = history(count, size)
    new = loads(proposed, max_depth=64)

    def run(mode: Mode, parse_each: bool, parsed: list[Any]) -> Any:
        latest_first = range(count, 0, -1)
        if not mode.transitive:
            latest_first = latest_first[:1]
        against = (
            (
                v,
                loads(stored[v - 1], max_depth=64) if parse_each else parsed[v - 1],
                DRAFT,
            )
            for v in latest_first
        )
        return check_versions(
            new, DRAFT, against, directions=mode.directions, rules=RULES, first=True
        )

    parsed = [loads(text, max_depth=64) for text in stored]
    total = sum(map(len, stored)) / 1024
    for mode, parse_each in [
        (Mode.BACKWARD, False),
        (Mode.FULL, False),
        (Mode.FULL_TRANSITIVE, False),
        (Mode.FULL_TRANSITIVE, True),
    ]:
        ms, report = _best(partial(run, mode, parse_each, parsed), runs=3)
        assert report.compatible and len(report.checked) in (1, count)
        parsing = " (parsing each)" if parse_each else ""
        label = f"{mode.value} over {count} versions of {size // 1024} KiB{parsing}"
        kib = f"{total if mode.transitive else total / count:.0f} KiB"
        print(f"{label:<64} {kib:>14} {ms:9.2f} ms  0 refused")


def transitive_worst() -> None:
    """The costliest transitive check found: a topic's 4 MiB budget filled with
    versions that each add a property, and a compatible 256 KiB proposal
    adding ~1,500 more, so every version walks every new property."""
    stored: list[bytes] = []
    total = 0
    while True:
        count = len(stored) + 1
        text = json.dumps(
            {
                "type": "object",
                "properties": {f"x{j}": {"type": "integer"} for j in range(count)},
            },
            separators=(",", ":"),
        ).encode()
        if total + len(text) > 4 * 1024 * 1024:
            break
        stored.append(text)
        total += len(text)
    _, proposed = wide(every_leaf)
    proposed["properties"].update(
        {f"x{j}": {"type": "integer"} for j in range(len(stored))}
    )
    proposed_text = json.dumps(proposed, separators=(",", ":")).encode()
    new = loads(proposed_text, max_depth=64)
    parsed = [loads(text, max_depth=64) for text in stored]
    versions = range(len(stored), 0, -1)

    def run(mode: Mode) -> Any:
        against = ((v, parsed[v - 1], DRAFT) for v in versions)
        return check_versions(
            new, DRAFT, against, directions=mode.directions, rules=RULES, first=True
        )

    ms, report = _best(partial(run, Mode.BACKWARD_TRANSITIVE), runs=1)
    assert report.compatible
    label = (
        f"BACKWARD_TRANSITIVE, {len(proposed_text) // 1024} KiB proposal "
        f"over {len(stored)} versions"
    )
    print(f"{label:<64} {total / 1024:>10.0f} KiB {ms:9.2f} ms  0 refused")


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
    recursive_pairs()
    dry_runs()
    transitive(100, 1024)
    transitive(100, 40 * 1024)
    transitive_worst()


if __name__ == "__main__":
    import report

    report.run("compat", main)
