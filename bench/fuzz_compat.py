"""Soundness fuzzing of the compatibility check, for as long as asked.

Run from a checkout:
``PYTHONPATH=.:plugins .venv/bin/python bench/fuzz_compat.py --seconds 600``

Each trial generates a schema, mutates it, registers both, asks the check,
and when it accepts, validates instances shaped after both versions: every
message the previous version accepts must stay valid, except under the
rulebook's open-content-model exception (see ``tests/compatfuzz.py``). Trial
``n`` is seeded with ``n``, so a failure is replayed with ``--seed n
--trials 1``. Progress is printed every 10 seconds and what was checked at the
end; the first unsound accept, or a crash, is printed and ends the run with
status 1.
"""

from __future__ import annotations

import argparse
import sys
import time
import traceback

from tests.compatfuzz import RandomChooser
from tests.compatfuzz import Tally
from tests.compatfuzz import Unsound
from tests.compatfuzz import trial


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--trials", type=int, default=None, help="stop after these")
    parser.add_argument("--seed", type=int, default=0, help="seed of the first trial")
    parser.add_argument("--per-pair", type=int, default=40, help="instances per pair")
    args = parser.parse_args()

    tally = Tally()
    start = time.monotonic()
    shown = start
    seed = args.seed
    while time.monotonic() - start < args.seconds and (
        args.trials is None or seed < args.seed + args.trials
    ):
        try:
            trial(RandomChooser(seed), tally, args.per_pair)
        except Unsound as unsound:
            print(f"seed {seed}: {unsound}")
            return _done(tally, start, args.seed, seed, status=1)
        except Exception:
            print(f"seed {seed}: the trial crashed")
            traceback.print_exc(file=sys.stdout)
            return _done(tally, start, args.seed, seed, status=1)
        seed += 1
        if time.monotonic() - shown >= 10:
            shown = time.monotonic()
            print(f"{shown - start:6.0f} s  {tally}", flush=True)
    return _done(tally, start, args.seed, seed - 1, status=0)


def _done(tally: Tally, start: float, first: int, last: int, *, status: int) -> int:
    elapsed = time.monotonic() - start
    rate = tally.pairs / elapsed if elapsed else 0.0
    verdict = "no unsound accept" if status == 0 else "UNSOUND"
    print(
        f"seeds {first}..{last} in {elapsed:.0f} s ({rate:.0f} pairs/s): {tally}; "
        f"{verdict}"
    )
    return status


if __name__ == "__main__":
    sys.exit(main())
