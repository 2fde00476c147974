"""Validation figures: a typical order, and the rulebook's adversarial inputs.

Run from a checkout: ``PYTHONPATH=.:plugins python bench/validate.py``.
Each section is one function printing its own figures; ``main()`` runs them.
"""

from __future__ import annotations

import json
import sys
import time
import timeit
import tracemalloc
from collections.abc import Callable
from typing import Any

import jsonschema
import jsonschema_rs

from narad.errors import InvalidPayload
from narad.jsontext import loads
from narad.plugins import Plugins
from narad.plugins import get_plugin_manager
from narad.schema.validation.validator import Validator

ORDER_SCHEMA = {
    "type": "object",
    "required": ["id", "customer", "status", "created_at", "items"],
    "additionalProperties": False,
    "properties": {
        "id": {"type": "string", "pattern": "^ord_[0-9a-f]{12}$"},
        "customer": {"type": "string", "minLength": 1, "maxLength": 64},
        "status": {"enum": [f"status_{i}" for i in range(19)] + ["paid"]},
        "created_at": {"type": "string", "format": "date-time"},
        "currency": {"type": "string", "minLength": 3, "maxLength": 3},
        "total": {"type": "number", "minimum": 0},
        "note": {"type": ["string", "null"], "maxLength": 200},
        "items": {
            "type": "array",
            "minItems": 1,
            "items": {
                "type": "object",
                "required": ["sku", "qty", "price"],
                "properties": {
                    "sku": {"type": "string"},
                    "qty": {"type": "integer", "minimum": 1},
                    "price": {"type": "number", "minimum": 0},
                },
            },
        },
    },
}
ORDER = (
    b'{"id": "ord_0123456789ab", "customer": "customer-42", "status": "paid",'
    b' "created_at": "2026-09-28T19:31:44Z", "currency": "EUR", "total": 59.97,'
    b' "note": null, "items": [{"sku": "SKU-1", "qty": 1, "price": 19.99},'
    b' {"sku": "SKU-2", "qty": 2, "price": 19.99}]}'
)
PLUGINS = Plugins(get_plugin_manager(load_entry_points=False))
BY_URI, DEFAULT = PLUGINS.drafts()
FORMATS = PLUGINS.format_checkers()


def narad_validator(schema: Any) -> Validator:
    return Validator(
        schema,
        draft=DEFAULT,
        drafts=BY_URI,
        formats=FORMATS,
        schema_uri="narad://schema/bench/1",
    )


def per_call_us(fn: Callable[[], Any]) -> float:
    timer = timeit.Timer(fn)
    loops, _ = timer.autorange()
    return min(timer.repeat(5, loops)) / loops * 1e6


def typical_order() -> None:
    print(f"typical order ({len(ORDER)} bytes), microseconds per validation")
    ours = narad_validator(ORDER_SCHEMA)
    value = loads(ORDER, max_depth=256)
    reference = jsonschema.Draft202012Validator(
        ORDER_SCHEMA, format_checker=jsonschema.FormatChecker()
    )
    rust = jsonschema_rs.validator_for(ORDER_SCHEMA, validate_formats=True)
    plain = json.loads(ORDER)
    rows = [
        ("narad parse+validate", lambda: ours.validate(ORDER)),
        ("narad validate only", lambda: ours.is_valid(value)),
        ("narad parse only (jsontext)", lambda: loads(ORDER, max_depth=256)),
        ("python-jsonschema (validate only)", lambda: reference.is_valid(plain)),
        ("jsonschema-rs (validate only)", lambda: rust.is_valid(plain)),
    ]
    for name, fn in rows:
        print(f"  {name:36s} {per_call_us(fn):9.2f} us")


def _measure(schema: Any, payload: bytes) -> tuple[float, float, str]:
    validator = narad_validator(schema)
    started = time.perf_counter()
    verdict = _verdict(validator, payload)
    elapsed = time.perf_counter() - started
    # Memory in a second run: tracemalloc slows allocation-heavy code a lot.
    tracemalloc.start()
    _verdict(validator, payload)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return elapsed, peak / 2**20, verdict


def _verdict(validator: Validator, payload: bytes) -> str:
    try:
        validator.validate(payload)
    except InvalidPayload as exc:
        return "refused: " + str(exc).split("\n")[-1][:60]
    return "accepted"


def adversarial() -> None:
    print("adversarial inputs: time, peak traced memory (target < 1 s, < 200 MiB)")
    enum_45k = {"enum": list(range(45_000))}
    required_1024 = {"items": {"required": [f"field_{i:04d}" for i in range(1024)]}}
    cases = [
        (
            "1 MiB string vs pattern",
            {"pattern": "^[a-z]+$"},
            b'"' + b"a" * (1 << 20) + b'"',
        ),
        (
            "1 MiB string vs unanchored pattern",
            {"pattern": "[0-9]{3}x"},
            b'"' + b"1" * (1 << 20) + b'"',
        ),
        ("45,000-value enum, 1 value", enum_45k, b"44999"),
        (
            "45,000-value enum, 100k values",
            {"items": enum_45k},
            b"[" + b",".join([b"44999"] * 100_000) + b"]",
        ),
        ("20 KB nested 9,990 deep", True, b"[" * 9990 + b"]" * 9990),
        (
            "1 MiB of failing values",
            {"items": {"type": "string"}},
            b"[" + b",".join([b"1"] * 500_000) + b"]",
        ),
        (
            "items missing 1,024 required names",
            required_1024,
            b"[" + b",".join([b"{}"] * 20_000) + b"]",
        ),
        (
            "256 levels through a recursive schema",
            {"type": "array", "items": {"$ref": "#"}},
            b"[" * 256 + b"]" * 256,
        ),
    ]
    for name, schema, payload in cases:
        elapsed, peak, verdict = _measure(schema, payload)
        print(f"  {name:40s} {elapsed * 1e3:9.1f} ms {peak:8.1f} MiB  {verdict}")
    slowest = max(
        (_time_checker(name, value), name) for name in FORMATS for value in HOSTILE
    )
    print(
        f"  {'format checkers, 1 MiB hostile strings':40s} "
        f"{slowest[0] * 1e3:9.1f} ms (slowest: {slowest[1]}, of "
        f"{len(FORMATS)} formats x {len(HOSTILE)} strings)"
    )


# Strings that make naive format checkers backtrack or go quadratic.
HOSTILE = [
    "a" * (1 << 20),
    "1" * (1 << 20),
    "P" + "1" * (1 << 20),
    "/" + "~" * (1 << 20),
    "{" + "a," * (1 << 19),
    "http://x/" + "%" * (1 << 20),
    "a@" + "b." * (1 << 19),
    "1998-12-31T23:59:60." + "1" * (1 << 20),
]


def _time_checker(name: str, value: str) -> float:
    started = time.perf_counter()
    FORMATS[name](value)
    return time.perf_counter() - started


MIB = 1 << 20


def _fill(head: bytes, item: bytes, tail: bytes) -> bytes:
    """``head`` + items joined by commas + ``tail``, as near 1 MiB as fits."""
    count = (MIB - len(head) - len(tail)) // (len(item) + 1)
    return head + b",".join([item] * count) + tail


def _union_tree() -> bytes:
    """A binary tree of objects keyed by the union's last two names: each
    passes every branch before the two that evaluate its properties."""
    tree = b"{}"
    while len(tree) * 2 + 16 <= MIB:
        tree = b'{"p61":' + tree + b',"p62":' + tree + b"}"
    return tree


def _distinct_keys(head: bytes, tail: bytes) -> bytes:
    """``head`` + members "k0": 1, "k1": 1... + ``tail``, near 1 MiB."""
    members = []
    size = len(head) + len(tail)
    while size < MIB - 16:
        member = f'"k{len(members)}":1'.encode()
        members.append(member)
        size += len(member) + 1
    return head + b",".join(members) + tail


def unevaluated() -> None:
    """Issue 19: unevaluated* beside an applicator that recurses, on the
    worst 1 MiB payloads for each (each level used to double the work)."""
    print("unevaluated* beside applicators, 1 MiB payloads (target < 1 s)")
    items = {"anyOf": [{"prefixItems": [{"$ref": "#"}]}], "unevaluatedItems": False}
    by_c = {"properties": {"c": {"$ref": "#"}}}
    deep_c = b'{"c":' * 254
    wide_object = _distinct_keys(b'{"x":{', b"}}")
    branches = [{"properties": {f"p{i}": {"$ref": "#"}}} for i in range(63)]
    union = {"anyOf": branches, "unevaluatedProperties": False}
    every = {"allOf": branches}
    cases = [
        (
            "anyOf+prefixItems, 256 deep, 1 MiB left over",
            items,
            _fill(b"[" * 256 + b"]" * 255 + b",", b"1", b"]"),
        ),
        (
            "anyOf+properties, 256 deep, 1 MiB at the bottom",
            {"anyOf": [by_c], "unevaluatedProperties": False},
            deep_c + wide_object + b"}" * 254,
        ),
        (
            "oneOf+properties, 256 deep, 1 MiB at the bottom",
            {"oneOf": [by_c], "unevaluatedProperties": False},
            deep_c + wide_object + b"}" * 254,
        ),
        (
            "if+properties, 256 deep, 1 MiB at the bottom",
            {"if": by_c, "unevaluatedProperties": False},
            deep_c + wide_object + b"}" * 254,
        ),
        (
            "anyOf+contains, 1 MiB of nested arrays",
            {"anyOf": [{"contains": {"$ref": "#"}}], "unevaluatedItems": False},
            _fill(b"[", b"[[1,1],[1]]", b"]"),
        ),
        # The most a union below the high-cost class applies to one value,
        # and the same work on the fast path (an allOf), for comparison.
        ("63-branch recursive anyOf, 1 MiB tree", union, _union_tree()),
        ("  the same as allOf, no unevaluated*", every, _union_tree()),
    ]
    for name, schema, payload in cases:
        elapsed, peak, verdict = _measure(schema, payload)
        print(f"  {name:48s} {elapsed * 1e3:9.1f} ms {peak:8.1f} MiB  {verdict}")
    # CPython frees a frame-stack chunk when the frame at its start returns:
    # without narad._datastack the row above took 1 s to 9 s by the depth
    # of the caller's stack (a recursion back and forth over a chunk edge).
    validator = narad_validator(union)
    payload = _union_tree()
    times = []
    for depth in range(0, 25, 3):
        started = time.perf_counter()
        _at_depth(depth, lambda: validator.validate(payload))
        times.append(time.perf_counter() - started)
    name = "  the union called from caller depths 0..24"
    print(f"  {name:48s} {min(times) * 1e3:9.1f} ms to {max(times) * 1e3:.1f} ms")


def _at_depth(depth: int, call: Callable[[], object]) -> object:
    """``call()`` from ``depth`` more Python frames."""
    return call() if depth == 0 else _at_depth(depth - 1, call)


def schema_types() -> None:
    """Per-message validation of one order message by each schema type's
    engine beside its reference library, and the Avro compatibility check of
    two 500-field records (``bench/avro.py``, ``bench/protobuf.py``)."""
    import avro as avro_bench
    import fastavro
    import protobuf as protobuf_bench

    print(f"AVRO (fastavro {fastavro.__version__} beside):")
    avro_bench.validation()
    print("AVRO compatibility of two 500-field records (target < 100 ms):")
    avro_bench.compatibility()
    print()
    print("PROTOBUF (the protobuf runtime beside):")
    protobuf_bench.figures(seconds=0.5)


def _typed_topics() -> dict[str, tuple[dict[str, Any], bytes]]:
    """Topic name -> (create body, the order message it takes)."""
    import avro as avro_bench
    import protobuf as protobuf_bench

    avro_order = json.dumps(avro_bench.MESSAGE).encode()
    return {
        "plain": ({}, ORDER),
        "orders": ({"schema": ORDER_SCHEMA}, ORDER),
        "avro": ({"schema_type": "AVRO", "schema": avro_bench.ORDER}, avro_order),
        "protobuf": (
            {"schema_type": "PROTOBUF", "schema": protobuf_bench.ORDER},
            protobuf_bench.order_message(),
        ),
    }


ROWS = {
    "plain": "without a schema",
    "orders": "JSON Schema (the typical schema)",
    "avro": "AVRO, json encoding",
    "protobuf": "PROTOBUF, binary encoding",
}


def produce_ratio(seconds: float = 5.0, rounds: int = 2) -> None:
    """End to end: produce of the typical order with its schema vs without,
    and of the same order to an AVRO (JSON-encoded) and a PROTOBUF (binary)
    topic.

    A real node (``narad serve``, gunicorn, embedded Valkey) and the
    load generator of ``bench/messaging.py``; the topics are measured in
    alternation so drift in the machine's load hits all alike.
    """
    import shutil
    import tempfile
    from pathlib import Path

    from messaging import CLIENTS
    from messaging import Servers
    from messaging import call
    from messaging import constant
    from messaging import create_topic
    from messaging import request
    from messaging import run_load

    tmp = Path(tempfile.mkdtemp(prefix="narad-bench-validate-"))
    servers = Servers(tmp, workers=4)
    try:
        servers.start()
        topics = _typed_topics()
        create_topic(servers.port, "plain")
        for topic, (settings, _) in topics.items():
            if not settings:
                continue
            body = json.dumps({"name": topic, **settings}).encode()
            status, data = call(servers.port, "POST", "/v1/topics", body)
            assert status == 201, data
        rates: dict[str, list[float]] = {topic: [] for topic in topics}
        for _ in range(rounds):
            for topic, (_, payload) in topics.items():
                load = constant(
                    request("POST", f"/v1/topics/{topic}/produce", payload), 202, 1
                )
                rate, statuses = run_load(servers.port, CLIENTS, seconds, load)
                assert set(statuses) == {202}, statuses
                rates[topic].append(rate)
        plain = max(rates["plain"])
        print(
            f"produce of the order, {CLIENTS} keep-alive clients, best of "
            f"{rounds} x {seconds:g} s (ratio: to the topic without a schema):"
        )
        for topic, (_, payload) in topics.items():
            rate = max(rates[topic])
            label = f"{ROWS[topic]} ({len(payload)} B)"
            print(f"  {label:44s} {rate:9.0f} msgs/s {rate / plain:6.2f}")
        orders = max(rates["orders"])
        verdict = "PASS" if orders >= 0.8 * plain else "MISS"
        label = "JSON Schema ratio (target >= 0.80)"
        print(f"  {label:44s} {orders / plain:9.2f}    {verdict}")
    finally:
        servers.stop()
        shutil.rmtree(tmp, ignore_errors=True)


def main() -> None:
    typical_order()
    print()
    adversarial()
    print()
    unevaluated()
    print()
    schema_types()
    print()
    produce_ratio()


if __name__ == "__main__":
    import report

    sys.exit(report.run("validate", main))
