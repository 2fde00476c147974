"""The validator cache's byte estimate stays close to what validators hold."""

from __future__ import annotations

import gc
import json
import tracemalloc

import pytest

from narad.schema.validation.validator import Validator
from narad.testing import load_plugins

SCHEMAS = {
    "twenty patterns": {
        "type": "object",
        "properties": {
            f"p{j}": {"type": "string", "pattern": f"^[a-z]{{1,8}}-{j}$"}
            for j in range(20)
        },
    },
    "an event": {
        "type": "object",
        "required": ["id", "amount"],
        "properties": {
            "id": {"type": "string", "format": "uuid"},
            "amount": {"type": "number", "minimum": 0},
            "customer": {
                "type": "object",
                "properties": {"email": {"type": "string", "format": "email"}},
            },
            "items": {
                "type": "array",
                "items": {"type": "object", "required": ["sku"]},
            },
        },
    },
    "a large enum": {"enum": [f"value-{i}" for i in range(1000)]},
    "200 properties": {
        "type": "object",
        "properties": {f"k{i}": {"type": "integer", "minimum": i} for i in range(200)},
    },
    "mutual references": {
        "$defs": {
            f"d{i}": {
                "type": "object",
                "properties": {"x": {"$ref": f"#/$defs/d{(i + 1) % 30}"}},
            }
            for i in range(30)
        },
        "$ref": "#/$defs/d0",
    },
    "anyOf branches": {
        "anyOf": [
            {"type": "object", "properties": {"kind": {"const": f"k{i}"}}}
            for i in range(50)
        ]
    },
    "unevaluated": {
        "type": "object",
        "properties": {f"p{i}": {"type": "string"} for i in range(30)},
        "unevaluatedProperties": False,
    },
    "a large const": {"const": {f"k{i}": ["x" * 20] * 5 for i in range(100)}},
    # Many subschemas with one keyword or none (a high-cost union's shape).
    "allOf of empty schemas": {"allOf": [{} for _ in range(1000)]},
    "allOf of true": {"allOf": [True] * 1000},
    "properties of empty schemas": {"properties": {f"p{i}": {} for i in range(1000)}},
    "allOf of one keyword": {"allOf": [{"type": "integer"} for _ in range(1000)]},
}


@pytest.mark.parametrize("name", SCHEMAS)
def test_the_estimate_is_within_a_factor_of_two(name):
    plugins = load_plugins()
    drafts, draft = plugins.drafts()
    formats = plugins.format_checkers()
    text = json.dumps(SCHEMAS[name], separators=(",", ":"))

    def compile_one() -> Validator:
        return Validator(
            json.loads(text),
            draft=draft,
            drafts=drafts,
            formats=formats,
            schema_uri="narad://schema/a-topic-name/1",
        )

    def measure() -> float:
        gc.collect()
        # The suite's heap left out of the collections that follow: they
        # scan only what the compiles made.
        gc.freeze()
        tracemalloc.start()
        try:
            held = [compile_one() for _ in range(5)]
            gc.collect()
            return tracemalloc.get_traced_memory()[0] / len(held)
        finally:
            tracemalloc.stop()
            gc.unfreeze()

    compile_one()  # the shared patterns are compiled once, not per validator
    # tracemalloc counts every thread: the least of three measurements leaves
    # out what another test's background thread held meanwhile.
    measured = min(measure() for _ in range(3))
    estimate = compile_one().estimated_bytes(len(text))
    assert measured / 2 <= estimate <= measured * 2, (estimate, measured)
