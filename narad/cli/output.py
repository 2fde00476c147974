"""How commands print: tables for a person at a terminal, JSON for programs.

A command prints JSON when given ``--json``, or when its standard output is
not a terminal (piped, redirected, captured); a table with ``--table``, or on
a terminal. Messages (consume, replay) are always JSON lines. Progress bars
go to standard error, only when it is a terminal (or ``--progress``).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from collections.abc import Iterable
from collections.abc import Iterator
from collections.abc import Sequence
from contextlib import contextmanager
from typing import Any
from typing import TypeVar

import click
from rich.console import Console
from rich.progress import BarColumn
from rich.progress import MofNCompleteColumn
from rich.progress import Progress
from rich.progress import TaskProgressColumn
from rich.progress import TextColumn
from rich.progress import TimeRemainingColumn
from rich.table import Table

F = TypeVar("F", bound=Callable[..., Any])


def output_option(command: F) -> F:
    """``--json`` / ``--table`` on a command: its ``as_json`` argument."""
    return click.option(
        "--json/--table",
        "as_json",
        default=None,
        help="JSON or a table (default: a table on a terminal, JSON otherwise).",
    )(command)


def wants_json(as_json: bool | None) -> bool:
    if as_json is not None:
        return as_json
    return not sys.stdout.isatty()


def print_json(document: Any) -> None:
    click.echo(json.dumps(document, indent=2, ensure_ascii=False))


# A JSON payload is kept as written, line breaks included; in valid JSON a
# line break can only be whitespace between tokens, so a space stands for it.
_ONE_LINE = bytes.maketrans(b"\r\n", b"  ")


def print_line(raw: bytes) -> None:
    """One JSON line, as the server wrote it (payload numbers untouched)."""
    sys.stdout.flush()
    stream = sys.stdout.buffer
    stream.write(raw.rstrip(b"\n").translate(_ONE_LINE) + b"\n")
    stream.flush()


def _console() -> Console:
    return Console(file=sys.stdout, soft_wrap=True)


def print_table(
    columns: Sequence[str], rows: Iterable[Sequence[Any]], *, title: str | None = None
) -> None:
    table = Table(title=title, title_justify="left")
    for column in columns:
        # Wrapped, never cut: a topic name is worth its whole width.
        table.add_column(column, overflow="fold")
    for row in rows:
        table.add_row(*("" if v is None else str(v) for v in row))
    _console().print(table)


def print_fields(fields: Iterable[tuple[str, Any]]) -> None:
    """A record as ``name  value`` lines."""
    table = Table(show_header=False, box=None, pad_edge=False)
    table.add_column(style="bold")
    table.add_column()
    for name, value in fields:
        if value is None or value == [] or value == "":
            continue
        if isinstance(value, list):
            value = ", ".join(str(v) for v in value)
        table.add_row(name, str(value))
    _console().print(table)


def note(text: str) -> None:
    """A line for the person, on standard error."""
    click.echo(text, err=True)


def progress_option(command: F) -> F:
    return click.option(
        "--progress/--no-progress",
        default=None,
        help="A progress bar on standard error (default: when it is a terminal).",
    )(command)


@contextmanager
def progress_bar(
    enabled: bool | None, description: str, *, total: float | None, unit: str
) -> Iterator[tuple[Any, Any]]:
    """A rich progress bar on standard error (or a stand-in that shows
    nothing): ``(progress, task)`` to ``update``/``advance``. ``unit``
    "messages" shows counts, anything else a percentage."""
    if enabled is None:
        enabled = sys.stderr.isatty()
    if not enabled:
        silent = _Silent()
        yield silent, 0
        return
    console = Console(file=sys.stderr, force_terminal=True)
    with Progress(
        TextColumn("[progress.description]{task.description}"),
        BarColumn(),
        MofNCompleteColumn() if unit == "messages" else TaskProgressColumn(),
        TimeRemainingColumn(),
        console=console,
    ) as bar:
        yield bar, bar.add_task(description, total=total)


class _Silent:
    """What a Progress offers, doing nothing."""

    def update(self, task: int, **fields: Any) -> None:
        pass

    def advance(self, task: int, advance: float = 1) -> None:
        pass


def milliseconds(ms: int | None) -> str | None:
    """``3600000`` as ``1h``, ``90000`` as ``90s`` (0 stays 0)."""
    if ms is None:
        return None
    for unit, size in (("d", 86_400_000), ("h", 3_600_000), ("m", 60_000)):
        if ms and ms % size == 0:
            return f"{ms // size}{unit}"
    if ms and ms % 1000 == 0:
        return f"{ms // 1000}s"
    return f"{ms}ms" if ms else "0"
