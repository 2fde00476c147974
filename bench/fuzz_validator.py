"""Differential fuzzing of Narad's validator against python-jsonschema.

Generates schemas and instances (``tests/unit/schema/differential.py``: what
the two are meant to disagree on is left out by construction) for as long as
asked, compares every verdict, and prints what it checked. On a disagreement
it prints hypothesis's minimal example and exits 1.

Run: PYTHONPATH=.:plugins .venv/bin/python bench/fuzz_validator.py --seconds 600
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings

from hypothesis import HealthCheck
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st

from tests.unit.schema.differential import JSON_VALUES
from tests.unit.schema.differential import ORDER
from tests.unit.schema.differential import Tally
from tests.unit.schema.differential import compare
from tests.unit.schema.differential import schemas

BATCH = 500


def run(seconds: float, drafts: list[str]) -> Tally:
    tally = Tally()

    @settings(
        max_examples=BATCH,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(data=st.data())
    def one_batch(data: st.DataObject) -> None:
        name = data.draw(st.sampled_from(drafts), label="draft")
        schema = data.draw(schemas(name), label="schema")
        instances = data.draw(st.lists(JSON_VALUES, min_size=1, max_size=8))
        compare(name, schema, instances, tally)

    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        one_batch()
    return tally


def report(tally: Tally, elapsed: float) -> None:
    compared = sum(tally.schemas.values())
    refused = sum(tally.refused.values())
    rejected = tally.instances - tally.accepted
    print(f"{elapsed:.0f} s, no disagreement:")
    print(f"  {compared} schemas compared ({refused} more refused at registration)")
    print(f"  {tally.instances} instances: {tally.accepted} valid, {rejected} invalid")
    print("schemas compared (refused) per draft:")
    for name in ORDER:
        if tally.schemas[name] or tally.refused[name]:
            print(f"  {name:8} {tally.schemas[name]:8} ({tally.refused[name]})")
    print("keywords in compared schemas (occurrences):")
    for keyword, count in sorted(tally.keywords.items()):
        print(f"  {keyword:24} {count:9}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--draft", action="append", choices=ORDER)
    args = parser.parse_args()
    # The validator raises the recursion limit to what a schema can need, and
    # hypothesis warns that it will not restore it: harmless here.
    warnings.filterwarnings("ignore", "The recursion limit will not be reset")
    started = time.monotonic()
    try:
        tally = run(args.seconds, args.draft or ORDER)
    except AssertionError as exc:
        print(f"DISAGREEMENT after {time.monotonic() - started:.0f} s:\n{exc}")
        return 1
    report(tally, time.monotonic() - started)
    return 0


if __name__ == "__main__":
    sys.exit(main())
