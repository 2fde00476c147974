"""Write a bench's figures into the generated benchmarks page.

``docs/benchmarks.md`` holds one section per bench, between the markers
``<!-- bench:NAME -->`` and ``<!-- /bench:NAME -->``. A bench rewrites its
own section at the end of a run, and only that section: the figures it
printed, the machine that printed them (CPU model, cores, memory, Python),
the date, the revision and the command, so the page always says what was
measured where, and never holds figures older than a bench's last run.

A bench script ends with::

    if __name__ == "__main__":
        import report

        report.run("datastack", main)

:func:`run` calls ``main()`` with its standard output copied (everything it
prints still reaches the terminal) and, once ``main()`` returned without an
error (``None`` or 0), hands the printed lines to :func:`record`. A failed
or interrupted run leaves the page as it was. :func:`record` can also be
called directly with lines of one's own.
"""

from __future__ import annotations

import datetime
import fcntl
import io
import os
import platform
import shlex
import subprocess
import sys
import tempfile
from collections.abc import Callable
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from typing import TextIO

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "benchmarks.md"

# Section name -> heading. A bench not listed gets its name as its heading.
TITLES = {
    "messaging": "Messaging (`bench/messaging.py`)",
    "storage-cluster": "Messaging on a Valkey Cluster (`bench/messaging.py --storage`)",
    "ab": "A/B against a revision (`bench/ab.py`)",
    "ab-settings": "A/B of settings: HTTP parsers (`bench/ab.py --variant`)",
    "cost": "Instructions per message (`bench/cost.py`)",
    "fanout": "Fan-out (`bench/fanout.py`)",
    "raft": "RedisRaft (`bench/raft.py`)",
    "soak": "Memory and churn (`bench/soak.py`)",
    "validate": "Validation (`bench/validate.py`)",
    "register": "Registration (`bench/register.py`)",
    "compat": "Compatibility checks (`bench/compat.py`)",
    "datastack": "Frame-stack chunk cache (`bench/datastack.py`)",
    "registry": "Schema Registry API (`bench/registry.py`)",
}


def start_marker(section: str) -> str:
    return f"<!-- bench:{section} -->"


def end_marker(section: str) -> str:
    return f"<!-- /bench:{section} -->"


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown CPU"


def _memory() -> str:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                kib = int(line.split()[1])
                return f"{kib / 2**20:.1f} GiB"
    except (OSError, ValueError, IndexError):
        pass
    return "unknown memory"


def _cores() -> str:
    total = os.cpu_count() or 0
    try:
        usable = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        usable = total
    if usable and usable != total:
        return f"{usable} of {total} cores"
    return f"{total} cores"


def machine() -> str:
    """One line naming what the figures were measured on."""
    python = f"{platform.python_implementation()} {platform.python_version()}"
    return (
        f"{_cpu_model()}, {_cores()}, {_memory()}; {python}; "
        f"{platform.system()} {platform.release()}"
    )


def revision() -> str:
    """The checkout's commit, with ``+changes`` when its files differ."""
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return f"{head}+changes" if dirty else head


def this_command() -> str:
    """How this bench was started, as one would type it from the checkout."""
    script = Path(sys.argv[0]).resolve()
    try:
        shown = str(script.relative_to(ROOT))
    except ValueError:
        shown = str(script)
    return "PYTHONPATH=.:plugins python " + shlex.join([shown, *sys.argv[1:]])


def section_text(
    section: str,
    lines: list[str],
    command: str,
    *,
    when: datetime.datetime | None = None,
    on: str | None = None,
    rev: str | None = None,
) -> str:
    """The section as written between (and including) its markers."""
    when = when or datetime.datetime.now(datetime.UTC)
    body = "\n".join(line.rstrip() for line in lines).strip("\n")
    return "\n".join(
        [
            start_marker(section),
            f"## {TITLES.get(section, section)} {{#{section}}}",
            "",
            f"- **Run:** {when:%Y-%m-%d %H:%M} UTC, revision `{rev or revision()}`",
            f"- **Machine:** {on or machine()}",
            f"- **Command:** `{command}`",
            "",
            "```text",
            body,
            "```",
            end_marker(section),
        ]
    )


def replace_section(page: str, section: str, text: str) -> str:
    """``page`` with ``section`` replaced by ``text`` (appended if absent)."""
    start, end = start_marker(section), end_marker(section)
    if start in page:
        head, rest = page.split(start, 1)
        if end not in rest:
            raise ValueError(f"{PAGE.name}: {start} has no {end}")
        tail = rest.split(end, 1)[1]
        return head + text + tail
    return page.rstrip("\n") + "\n\n" + text + "\n"


def record(
    section: str,
    lines: list[str],
    command: str | None = None,
    *,
    page: Path = PAGE,
) -> None:
    """Rewrite ``section`` of the benchmarks page with ``lines``.

    The page is locked while it is rewritten and replaced whole (a temporary
    file renamed over it), so two benches finishing at once both land.
    """
    text = section_text(section, lines, command or this_command())
    page.parent.mkdir(parents=True, exist_ok=True)
    lock_path = Path(tempfile.gettempdir()) / "narad-bench-report.lock"
    with open(lock_path, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        old = page.read_text() if page.exists() else "# Benchmarks\n"
        new = replace_section(old, section, text)
        tmp = page.parent / f".{page.name}.tmp"
        tmp.write_text(new)
        os.replace(tmp, page)


class _Tee(io.TextIOBase):
    """Writes to ``out`` and keeps a copy."""

    def __init__(self, out: TextIO) -> None:
        self.out = out
        self.copy = io.StringIO()

    def write(self, text: str) -> int:
        self.copy.write(text)
        return self.out.write(text)

    def flush(self) -> None:
        self.out.flush()

    def isatty(self) -> bool:
        return self.out.isatty()

    def fileno(self) -> int:
        return self.out.fileno()


@contextmanager
def printed() -> Iterator[_Tee]:
    """Copy what is printed (``sys.stdout``) while the block runs."""
    tee = _Tee(sys.stdout)
    sys.stdout = tee
    try:
        yield tee
    finally:
        sys.stdout = tee.out


def run(section: str, main: Callable[[], Any]) -> Any:
    """Run a bench's ``main()`` and record what it printed if it succeeded."""
    with printed() as tee:
        result = main()
    if result in (None, 0):
        record(section, tee.copy.getvalue().splitlines())
    return result
