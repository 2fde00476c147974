"""Avro figures: per-message validation beside fastavro, and compatibility.

Run from a checkout: ``PYTHONPATH=.:plugins python bench/avro.py``.

- the same order message, JSON-encoded: Narad's check (strict reader +
  compiled check) beside ``json.loads`` + fastavro's ``validate``, and the
  strict reader alone (the floor every JSON produce pays);
- the same message as a raw datum: Narad's compiled skipper beside
  fastavro's ``schemaless_reader`` (which builds the values it reads);
- a hostile datum: 1 MiB claiming a 2 GiB string, time and peak memory;
- the compatibility check of two 500-field records (target < 100 ms), of
  plain fields and of union fields with nested records, BACKWARD and FULL.
"""

from __future__ import annotations

import io
import json
import time
import timeit
import tracemalloc
from collections.abc import Callable
from typing import Any

import fastavro
from fastavro.validation import validate as fastavro_validate

from narad.errors import InvalidPayload
from narad.jsontext import loads
from narad_avro import Mode
from narad_avro import check
from narad_avro import compile_validator
from narad_avro import parse

ORDER = {
    "type": "record",
    "name": "Order",
    "namespace": "shop",
    "fields": [
        {"name": "order_id", "type": "long"},
        {"name": "customer_email", "type": "string"},
        {"name": "amount", "type": "double"},
        {"name": "currency", "type": "string", "default": "EUR"},
        {
            "name": "status",
            "type": {"type": "enum", "name": "Status", "symbols": ["NEW", "PAID"]},
        },
        {
            "name": "items",
            "type": {
                "type": "array",
                "items": {
                    "type": "record",
                    "name": "Item",
                    "fields": [
                        {"name": "sku", "type": "string"},
                        {"name": "qty", "type": "int"},
                        {"name": "price", "type": "double"},
                    ],
                },
            },
        },
        {"name": "discount", "type": ["null", "double"], "default": None},
        {
            "name": "created",
            "type": {"type": "long", "logicalType": "timestamp-millis"},
        },
    ],
}
MESSAGE = {
    "order_id": 12345,
    "customer_email": "ada@example.com",
    "amount": 99.5,
    "currency": "EUR",
    "status": "PAID",
    "items": [
        {"sku": "A-1", "qty": 2, "price": 10.25},
        {"sku": "B-2", "qty": 1, "price": 79.0},
    ],
    "discount": None,
    "created": 1_700_000_000_000,
}


def per_call(fn: Callable[[], Any], number: int = 20_000) -> float:
    """Microseconds per call, best of five runs."""
    return min(timeit.repeat(fn, number=number, repeat=5)) / number * 1e6


def validation() -> None:
    schema = parse(ORDER)
    parsed = schema.fastavro
    text = json.dumps(MESSAGE).encode()
    out = io.BytesIO()
    fastavro.schemaless_writer(out, parsed, MESSAGE)
    datum = out.getvalue()
    as_json = compile_validator(schema, "json")
    as_binary = compile_validator(schema, "binary")

    def fastavro_json() -> None:
        fastavro_validate(json.loads(text), parsed)

    def fastavro_binary() -> None:
        fastavro.schemaless_reader(io.BytesIO(datum), parsed, None)

    print(f"order message: {len(text)} bytes as JSON, {len(datum)} as a datum")
    rows = [
        ("json   narad (strict reader + check)", lambda: as_json.validate(text)),
        ("json   strict reader alone", lambda: loads(text, max_depth=256)),
        ("json   json.loads + fastavro validate", fastavro_json),
        ("binary narad (compiled skipper)", lambda: as_binary.validate(datum)),
        ("binary fastavro schemaless_reader", fastavro_binary),
    ]
    for name, fn in rows:
        print(f"  {name:<40} {per_call(fn):7.2f} us/message")


def hostile() -> None:
    schema = parse("string")
    validator = compile_validator(schema, "binary")
    body = b"\x80\x80\x80\x80\x10" + b"x" * (1024 * 1024)  # claims 2 GiB
    message = "accepted (a bug)"
    tracemalloc.start()
    start = time.perf_counter()
    try:
        validator.validate(body)
    except InvalidPayload as exc:
        message = str(exc)
    took = time.perf_counter() - start
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    print(
        f"1 MiB claiming a 2 GiB string: refused in {took * 1e6:.1f} us, "
        f"peak {peak / 1024:.0f} KiB ({message[-40:]!r})"
    )


def _record(name: str, field_type: Callable[[int], Any], extra: bool) -> Any:
    fields = [
        {"name": f"f{i}", "type": field_type(i), "default": None} for i in range(500)
    ]
    if extra:
        fields.append({"name": "added", "type": "int"})
    return parse({"type": "record", "name": name, "fields": fields})


def compatibility() -> None:
    shapes = {
        "500 plain fields (null/long)": lambda i: ["null", "long"],
        "500 union fields, nested records": lambda i: [
            "null",
            "long",
            {
                "type": "record",
                "name": f"Sub{i}",
                "fields": [
                    {"name": "a", "type": "int"},
                    {"name": "b", "type": "string"},
                ],
            },
        ],
    }
    for label, shape in shapes.items():
        old = _record("Big", shape, False)
        new = _record("Big", shape, True)
        for mode in (Mode.BACKWARD, Mode.FULL):
            times = []
            for _ in range(5):
                start = time.perf_counter()
                found = check(new, [(1, old)], mode)
                times.append(time.perf_counter() - start)
            print(
                f"  {label:<34} {mode.value:<9} {min(times) * 1000:6.2f} ms "
                f"({len(found)} violation{'s' if len(found) != 1 else ''})"
            )


def main() -> None:
    print(f"fastavro {fastavro.__version__}")
    validation()
    hostile()
    print("compatibility of two 500-field records (target < 100 ms):")
    compatibility()


if __name__ == "__main__":
    main()
