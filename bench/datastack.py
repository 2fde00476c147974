"""What narad._datastack saves: a deep payload validated with and without it.

Run from a checkout: ``PYTHONPATH=.:plugins python bench/datastack.py``.

The chunk cache is process-wide and cannot be taken out again, so each side
runs in a process of its own: the 63-branch recursive union of
``bench/validate.py`` on its 1 MiB tree, called from caller depths 0 to 24
(where the recursion crosses a frame-stack chunk's edge depends on the
caller's depth). Without the cache, a CPython that lacks gh-142183 maps and
unmaps a chunk on every crossing.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

DEPTHS = range(0, 25, 3)


def measure(install: bool) -> list[float]:
    """Seconds per validation at each caller depth, in this process."""
    from validate import _at_depth
    from validate import _union_tree
    from validate import narad_validator

    from narad import _datastack

    if install:
        _datastack.install()
    branches = [{"properties": {f"p{i}": {"$ref": "#"}}} for i in range(63)]
    validator = narad_validator({"anyOf": branches, "unevaluatedProperties": False})
    payload = _union_tree()
    times = []
    for depth in DEPTHS:
        started = time.perf_counter()
        _at_depth(depth, lambda: validator.validate(payload))
        times.append(time.perf_counter() - started)
    return times


def main() -> None:
    from narad import datastack

    print(
        f"narad._datastack on CPython {sys.version.split()[0]} "
        f"(needed here: {datastack.needed()}): the 63-branch union, 1 MiB tree, "
        f"from caller depths {DEPTHS.start}..{DEPTHS.stop - 1}"
    )
    rows = {}
    for side in ("with", "without"):
        ran = subprocess.run(
            [sys.executable, __file__, side],
            capture_output=True,
            text=True,
            check=True,
            cwd=Path(__file__).parent,
        )
        rows[side] = json.loads(ran.stdout)
    for side, times in rows.items():
        median = sorted(times)[len(times) // 2]
        print(
            f"  {side + ' the chunk cache':28s} {min(times) * 1e3:9.1f} ms to "
            f"{max(times) * 1e3:9.1f} ms (median {median * 1e3:.1f} ms)"
        )
    print(
        f"  worst depth, without/with: {max(rows['without']) / max(rows['with']):.1f}x"
    )


if __name__ == "__main__":
    if len(sys.argv) == 2:
        print(json.dumps(measure(sys.argv[1] == "with")))
    else:
        import report

        report.run("datastack", main)
