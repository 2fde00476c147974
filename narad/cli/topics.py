"""``narad topic ...`` and ``narad schema ...``."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click

from narad.cli.base import DURATION
from narad.cli.base import PAGE_SIZE
from narad.cli.base import Refused
from narad.cli.base import Session
from narad.cli.base import Usage
from narad.cli.base import cli
from narad.cli.base import pass_session
from narad.cli.output import milliseconds
from narad.cli.output import output_option
from narad.cli.output import print_fields
from narad.cli.output import print_json
from narad.cli.output import print_table
from narad.cli.output import wants_json

# The node's compatibility modes (narad.schema.modes.Mode, kept equal by a
# test), listed here so that the CLI does not import the schema engine.
COMPATIBILITY = click.Choice(
    [
        "BACKWARD",
        "BACKWARD_TRANSITIVE",
        "FORWARD",
        "FORWARD_TRANSITIVE",
        "FULL",
        "FULL_TRANSITIVE",
        "NONE",
    ],
    case_sensitive=False,
)


def read_schema(source: str) -> bytes:
    """A schema document from a file, ``-`` (standard input) or inline JSON,
    as its bytes: the node stores the text as written."""
    path = Path(source)
    if source == "-":
        text = sys.stdin.buffer.read()
    elif path.exists() and not path.is_dir():  # a pipe too: <(generate-schema)
        text = path.read_bytes()
    elif source.lstrip()[:1] in ("{", "[") or source.strip() in ("true", "false"):
        text = source.encode()
    else:
        raise Usage(f"schema {source!r}: no such file (nor inline JSON)")
    try:
        json.loads(text)
    except ValueError as exc:
        raise Usage(f"schema {source!r} is not JSON: {exc}") from exc
    return text.strip()


def confirm_or_yes(yes: bool, question: str) -> None:
    """Go on with ``--yes``; else ask, at a terminal only."""
    if yes:
        return
    if not sys.stdin.isatty():
        raise Usage(f"{question} Not at a terminal: confirm with --yes.")
    click.confirm(question, abort=True, err=True)


# -- topics -------------------------------------------------------------------


@cli.group()
def topic() -> None:
    """Topics: list, describe, create, alter, delete, fan-out children."""


def _settings_options(command):
    for option in reversed(
        [
            click.option(
                "--retention",
                type=DURATION,
                help="How long messages are kept (7d, 12h...; 0 = forever).",
            ),
            click.option(
                "--visibility-timeout",
                type=DURATION,
                help="Lease of a consumed message before redelivery (30s...).",
            ),
            click.option(
                "--max-in-flight", type=int, help="Leases per partition at most."
            ),
            click.option(
                "--max-acked-ahead",
                type=int,
                help="Acks above a partition's oldest unacked message at most.",
            ),
            click.option(
                "--compatibility",
                type=COMPATIBILITY,
                help="How the schema may evolve (default BACKWARD).",
            ),
        ]
    ):
        command = option(command)
    return command


def _settings(**options: Any) -> dict[str, Any]:
    names = {
        "retention": "retention_ms",
        "visibility_timeout": "visibility_timeout_ms",
        "max_in_flight": "max_in_flight_per_partition",
        "max_acked_ahead": "max_acked_ahead_per_partition",
        "compatibility": "compatibility",
    }
    settings = {names[k]: v for k, v in options.items() if v is not None}
    if "compatibility" in settings:
        settings["compatibility"] = settings["compatibility"].upper()
    return settings


def _record_fields(record: dict[str, Any]) -> list[tuple[str, Any]]:
    return [
        ("name", record["name"]),
        ("partitions", record["partitions"]),
        ("schema version", record.get("schema_version")),
        ("compatibility", record.get("compatibility")),
        ("retention", milliseconds(record["retention_ms"])),
        ("visibility timeout", milliseconds(record["visibility_timeout_ms"])),
        ("max in flight", record["max_in_flight_per_partition"]),
        ("max acked ahead", record["max_acked_ahead_per_partition"]),
        ("owner", record.get("owner")),
        ("parent", record.get("parent")),
        ("fan-out delay", milliseconds(record.get("fanout_delay_ms"))),
        ("children", record.get("children")),
    ]


@topic.command("ls")
@click.option("--limit", type=click.IntRange(1), help="At most this many topics.")
@output_option
@pass_session
def topic_ls(session: Session, limit: int | None, as_json: bool | None) -> None:
    """List topics (every page, in name order)."""
    records = []
    for record in session.client.topics(page_size=PAGE_SIZE):
        records.append(record)
        if limit is not None and len(records) >= limit:
            break
    if wants_json(as_json):
        print_json(records)
        return
    print_table(
        ["name", "partitions", "schema", "retention", "visibility", "parent"],
        (
            (
                r["name"],
                r["partitions"],
                r.get("schema_version"),
                milliseconds(r["retention_ms"]),
                milliseconds(r["visibility_timeout_ms"]),
                r.get("parent"),
            )
            for r in records
        ),
    )


@topic.command("info")
@click.argument("name")
@output_option
@pass_session
def topic_info(session: Session, name: str, as_json: bool | None) -> None:
    """A topic's settings and each partition's positions."""
    record = session.client.topic(name)
    if wants_json(as_json):
        print_json(record)
        return
    print_fields(_record_fields(record))
    stats = record.get("partition_stats", [])
    print_table(
        ["partition", "oldest offset", "next offset", "messages", "in flight"],
        (
            (
                p["index"],
                p["oldest_offset"],
                p["next_offset"],
                p["next_offset"] - p["oldest_offset"],
                p["in_flight"],
            )
            for p in stats
        ),
    )


@topic.command("create")
@click.argument("name")
@click.option("--partitions", type=click.IntRange(1, 108), help="Default 3.")
@_settings_options
@click.option("--schema", "schema_source", help="A JSON Schema: file, - or inline.")
@click.option("--parent", help="Create attached as a fan-out child of this topic.")
@click.option(
    "--delay", type=DURATION, help="With --parent: a delay child (copies due later)."
)
@output_option
@pass_session
def topic_create(
    session: Session,
    name: str,
    partitions: int | None,
    schema_source: str | None,
    parent: str | None,
    delay: int | None,
    as_json: bool | None,
    **settings: Any,
) -> None:
    """Create a topic."""
    body = _settings(**settings)
    if partitions is not None:
        body["partitions"] = partitions
    if parent is not None:
        body["parent"] = parent
    if delay:
        body["fanout_delay_ms"] = delay
    schema = read_schema(schema_source) if schema_source else None
    record = session.client.create_topic(name, schema=schema, **body)
    _show_record(record, as_json, f"created topic {name}")


@topic.command("alter")
@click.argument("name")
@_settings_options
@output_option
@pass_session
def topic_alter(
    session: Session, name: str, as_json: bool | None, **settings: Any
) -> None:
    """Change a topic's settings (its schema: narad schema set)."""
    changes = _settings(**settings)
    if not changes:
        raise Usage("nothing to change: give at least one setting")
    record = session.client.alter_topic(name, **changes)
    _show_record(record, as_json, f"altered topic {name}")


@topic.command("rm")
@click.argument("name")
@click.option("--yes", "-y", is_flag=True, help="Do not ask.")
@pass_session
def topic_rm(session: Session, name: str, yes: bool) -> None:
    """Delete a topic with its messages and schema history."""
    confirm_or_yes(yes, f"Delete topic {name} and every message in it?")
    session.client.delete_topic(name)
    click.echo(f"deleted topic {name}", err=True)


@topic.command("children")
@click.argument("parent")
@output_option
@pass_session
def topic_children(session: Session, parent: str, as_json: bool | None) -> None:
    """A parent's fan-out children, with how far each lags."""
    answer = {"parent": parent, "children": session.client.children(parent)}
    if wants_json(as_json):
        print_json(answer)
        return
    print_table(
        ["child", "delay", "lag (messages)", "lag complete"],
        (
            (
                c["name"],
                milliseconds(c["delay_ms"]),
                c["lag_messages"],
                "yes" if c["lag_complete"] else "no",
            )
            for c in answer["children"]
        ),
        title=f"children of {answer['parent']}",
    )


@topic.command("attach")
@click.argument("parent")
@click.argument("child")
@click.option("--delay", type=DURATION, default=0, help="A delay child (1h...).")
@output_option
@pass_session
def topic_attach(
    session: Session, parent: str, child: str, delay: int, as_json: bool | None
) -> None:
    """Attach CHILD under PARENT: it gets a copy of every later message."""
    record = session.client.attach(parent, child, delay_ms=delay or None)
    _show_record(record, as_json, f"attached {child} to {parent}")


@topic.command("detach")
@click.argument("parent")
@click.argument("child")
@pass_session
def topic_detach(session: Session, parent: str, child: str) -> None:
    """Detach CHILD from PARENT (it keeps its messages)."""
    session.client.detach(parent, child)
    click.echo(f"detached {child} from {parent}", err=True)


def _show_record(record: dict[str, Any], as_json: bool | None, done: str) -> None:
    if wants_json(as_json):
        print_json(record)
    else:
        click.echo(done, err=True)
        print_fields(_record_fields(record))


# -- schemas ------------------------------------------------------------------


@cli.group()
def schema() -> None:
    """A topic's schema history: list, get, check (dry run), set."""


@schema.command("ls")
@click.argument("topic_name", metavar="TOPIC")
@output_option
@pass_session
def schema_ls(session: Session, topic_name: str, as_json: bool | None) -> None:
    """The versions of a topic's schema."""
    history = session.client.schemas(topic_name)
    if wants_json(as_json):
        print_json(history)
        return
    current = history.get("current_version")
    print_table(
        ["version", "bytes", "current"],
        (
            (v["version"], v["size"], "*" if v["version"] == current else "")
            for v in history["versions"]
        ),
        title=f"{history['topic']}: {history['total_bytes']} bytes in all",
    )


@schema.command("get")
@click.argument("topic_name", metavar="TOPIC")
@click.argument("version", default="latest")
@pass_session
def schema_get(session: Session, topic_name: str, version: str) -> None:
    """Print a schema version (default: latest) exactly as stored."""
    stored = session.client.schema(topic_name, version)
    sys.stdout.buffer.write(stored.document.rstrip(b"\n") + b"\n")
    click.echo(f"version {stored.version}", err=True)


@schema.command("check")
@click.argument("topic_name", metavar="TOPIC")
@click.argument("source", metavar="SCHEMA")
@click.option(
    "--against",
    help="latest, all, or a version number (default: what the topic's mode checks).",
)
@click.option(
    "--mode",
    type=COMPATIBILITY,
    help="Check under this compatibility mode (default: the topic's).",
)
@output_option
@pass_session
def schema_check(
    session: Session,
    topic_name: str,
    source: str,
    against: str | None,
    mode: str | None,
    as_json: bool | None,
) -> None:
    """Would SCHEMA (a file, - or inline JSON) be accepted? Stores nothing.

    Exit status 0 when it would, 1 when not, with every violation listed.
    """
    target: str | int | None = against
    if against is not None:
        # ASCII digits only: str.isdigit() also takes "²", which int() refuses.
        digits = against.isascii() and against.isdigit()
        target = int(against) if digits else against.lower()  # as --mode is
    report = session.client.check_schema(
        topic_name, read_schema(source), against=target, mode=mode and mode.upper()
    )
    if wants_json(as_json):
        print_json(report)
    elif report["compatible"]:
        click.echo(f"compatible ({report['mode']})")
    else:
        print_table(
            ["against", "pointer", "keyword", "message"],
            (
                (v.get("against_version"), v["pointer"], v["keyword"], v["message"])
                for v in report["violations"]
            ),
            title=f"not compatible ({report['mode']})",
        )
    if not report["compatible"]:
        count = len(report["violations"])
        raise Refused(f"not compatible: {count} violation{'s' * (count != 1)}")


@schema.command("set")
@click.argument("topic_name", metavar="TOPIC")
@click.argument("source", metavar="SCHEMA")
@click.option(
    "--base-version",
    type=int,
    help="Refuse unless the current version is this one (optimistic locking).",
)
@output_option
@pass_session
def schema_set(
    session: Session,
    topic_name: str,
    source: str,
    base_version: int | None,
    as_json: bool | None,
) -> None:
    """Make SCHEMA (a file, - or inline JSON) the topic's next version."""
    record = session.client.set_schema(
        topic_name, read_schema(source), base_version=base_version
    )
    _show_record(
        record, as_json, f"{topic_name}: schema version {record['schema_version']}"
    )
