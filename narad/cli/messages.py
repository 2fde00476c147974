"""``narad produce``, ``narad consume``, ``narad replay``."""

from __future__ import annotations

import base64
import json
import os
import re
import sys
from collections.abc import Callable
from collections.abc import Iterator
from typing import IO

import click
from narad_client import Client
from narad_client import Message
from narad_client import NaradError
from narad_client import NotFound

from narad.cli.base import DURATION
from narad.cli.base import Refused
from narad.cli.base import Session
from narad.cli.base import Unavailable
from narad.cli.base import Usage
from narad.cli.base import cli
from narad.cli.base import cli_error
from narad.cli.base import pass_session
from narad.cli.output import note
from narad.cli.output import output_option
from narad.cli.output import print_json
from narad.cli.output import print_line
from narad.cli.output import progress_bar
from narad.cli.output import progress_option
from narad.cli.output import wants_json

MAX_PRODUCE_BATCH = 1000
#: The node's request body limit (narad.http.body.MAX_BODY, kept equal by a test).
MAX_REQUEST_BYTES = 1024 * 1024
_BATCH_OVERHEAD = len(b'{"messages":[]}')
MAX_CONSUME_BATCH = 100
#: The long poll of ``consume --follow``, in seconds (the node caps it at
#: broker.max_wait_ms).
FOLLOW_WAIT_S = 30.0
_ENTRY = re.compile(r"messages\[(\d+)\]: ")


# -- produce ------------------------------------------------------------------


@cli.command()
@click.argument("topic")
@click.argument("body", required=False)
@click.option(
    "--file",
    "-f",
    "source",
    type=click.File("rb"),
    help="One message per line of this file (- for standard input).",
)
@click.option("--key", help="Message key (same key, same partition).")
@click.option("--partition", type=click.IntRange(0), help="Partition to write to.")
@click.option(
    "--idempotency-key",
    help="Safe to run again: a message stored under this key is not stored "
    "twice (each line gets KEY-<line number>).",
)
@click.option(
    "--batch-size",
    type=click.IntRange(1, MAX_PRODUCE_BATCH),
    default=100,
    show_default=True,
    help="Lines per request.",
)
@progress_option
@output_option
@pass_session
def produce(
    session: Session,
    topic: str,
    body: str | None,
    source: IO[bytes] | None,
    key: str | None,
    partition: int | None,
    idempotency_key: str | None,
    batch_size: int,
    progress: bool | None,
    as_json: bool | None,
) -> None:
    """Produce BODY to TOPIC, or one message per line of --file or standard input.

    Lines go in batches of --batch-size, each stored all or nothing; empty
    lines are skipped. On a refusal the command stops and says which line,
    and how many were stored before it.
    """
    if body is not None and source is not None:
        raise Usage("give BODY or --file, not both")
    if body is not None:
        produced = session.client.produce(
            topic,
            # As the shell passed it: bytes that are not UTF-8 too.
            os.fsencode(body),
            key=key,
            partition=partition,
            idempotency_key=idempotency_key,
        )
        _produced(topic, 1, int(produced.replayed), as_json)
        return
    stream = source or sys.stdin.buffer
    if stream.isatty():
        note("reading messages from the terminal, one per line; end with Ctrl-D")
    accepted = duplicates = 0
    try:
        total = os.fstat(stream.fileno()).st_size if stream.seekable() else None
    except (OSError, ValueError):
        total = None
    unit = "bytes" if total else "messages"

    def entry(line: bytes, number: int) -> dict[str, object]:
        return _entry(line, key, partition, idempotency_key, number)

    with progress_bar(progress, "producing", total=total, unit=unit) as (bar, task):
        for batch, consumed in _batches(stream, batch_size, entry):
            try:
                # Without --idempotency-key narad_client gives the batch a
                # key of its own, so a retry after a lost answer (no answer,
                # a 503) stores nothing twice.
                produced = session.client.produce_batch(topic, [e for _, e in batch])
            except NaradError as exc:
                raise _at_line(exc, batch, accepted) from exc
            accepted += produced.accepted
            duplicates += produced.duplicates
            bar.update(task, completed=consumed if total else accepted)
    _produced(topic, accepted, duplicates, as_json)


def _batches(
    stream: IO[bytes], size: int, entry: Callable[[bytes, int], dict[str, object]]
) -> Iterator[tuple[list[tuple[int, dict[str, object]]], int]]:
    """Non-empty lines as batch entries, at most ``size`` of them and
    MAX_REQUEST_BYTES of request body a batch (a line too big for any batch
    goes alone, for the node to refuse): ([(line number, entry)], bytes read
    so far)."""
    batch: list[tuple[int, dict[str, object]]] = []
    consumed = 0
    encoded = _BATCH_OVERHEAD
    for number, line in enumerate(stream, 1):
        read = len(line)
        line = line.rstrip(b"\r\n")
        if line:
            item = entry(line, number)
            cost = _cost(line, item)
            if batch and encoded + cost > MAX_REQUEST_BYTES:
                yield batch, consumed
                batch, encoded = [], _BATCH_OVERHEAD
            batch.append((number, item))
            encoded += cost
        consumed += read
        if len(batch) == size:
            yield batch, consumed
            batch, encoded = [], _BATCH_OVERHEAD
    if batch:
        yield batch, consumed


def _entry(
    line: bytes,
    key: str | None,
    partition: int | None,
    idempotency_key: str | None,
    number: int,
) -> dict[str, object]:
    """A message of narad_client's produce_batch."""
    entry: dict[str, object] = {"payload": line}
    if key is not None:
        entry["key"] = key
    if partition is not None:
        entry["partition"] = partition
    if idempotency_key is not None:
        entry["idempotency_key"] = f"{idempotency_key}-{number}"
    return entry


def _cost(line: bytes, entry: dict[str, object]) -> int:
    """Bytes the batch entry of ``line`` takes in the request body at most,
    with the ", " before it: narad_client sends a UTF-8 payload as a JSON
    string (here with every non-ASCII character escaped, which is never
    shorter), any other as base64."""
    try:
        value: dict[str, object] = {"value": line.decode("utf-8")}
    except UnicodeDecodeError:
        value = {"value_base64": base64.b64encode(line).decode()}
    rest = {name: v for name, v in entry.items() if name != "payload"}
    return len(json.dumps({**value, **rest})) + 2


def _at_line(
    exc: NaradError, batch: list[tuple[int, dict[str, object]]], stored: int
) -> click.ClickException:
    """The error of a refused batch, naming the line the node named."""
    error = cli_error(exc)
    message = exc.error
    if match := _ENTRY.search(message):
        index = int(match[1])
        if index < len(batch):
            line = f"line {batch[index][0]}: "
            message = message[: match.start()] + line + message[match.end() :]
    first, last = batch[0][0], batch[-1][0]
    if isinstance(error, Unavailable):
        # No answer, or a 5xx: the batch may have been stored all the same.
        after = f"lines {first} to {last} may or may not be stored"
        message += (
            f" ({stored} messages stored before line {first}; {after}; "
            f"none from line {last + 1} on)"
        )
    else:
        message += (
            f" ({stored} messages stored before line {first}; "
            f"none from line {first} on)"
        )
    return type(error)(message)


def _produced(topic: str, accepted: int, duplicates: int, as_json: bool | None):
    if wants_json(as_json):
        print_json({"topic": topic, "accepted": accepted, "duplicates": duplicates})
    else:
        again = f" ({duplicates} already stored before)" if duplicates else ""
        click.echo(f"produced {accepted} messages to {topic}{again}")


# -- consume ------------------------------------------------------------------


@cli.command()
@click.argument("topic")
@click.option(
    "--follow", is_flag=True, help="Keep waiting for messages (Ctrl-C to stop)."
)
@click.option(
    "--ack/--no-ack",
    default=True,
    show_default=True,
    help="Ack each message once printed; --no-ack gives the leases back at the end.",
)
@click.option("--max", "max_messages", type=click.IntRange(1), help="Stop after N.")
@click.option(
    "--wait",
    type=DURATION,
    default=0,
    help="Without --follow: how long to wait for the first message (5s...).",
)
@click.option("--partition", type=click.IntRange(0), help="Only this partition.")
@click.option(
    "--batch-size",
    type=click.IntRange(1, MAX_CONSUME_BATCH),
    default=MAX_CONSUME_BATCH,
    show_default=True,
    help="Messages leased per request.",
)
@pass_session
def consume(
    session: Session,
    topic: str,
    follow: bool,
    ack: bool,
    max_messages: int | None,
    wait: int,
    partition: int | None,
    batch_size: int,
) -> None:
    """Consume messages as JSON lines on standard output.

    Each message is printed, then acked (delivery is at least once: a message
    printed but not acked, because the command was stopped, is given back to
    be delivered again, or comes back after the topic's visibility timeout
    when the node cannot be told). Without --follow the command ends when
    no message is left; with it, it waits for more until Ctrl-C or --max.
    """
    client = session.client
    # Leases not acked: given back however the command ends (--no-ack, or
    # stopped by Ctrl-C, a reader gone away, an error), not held until
    # their visibility timeout.
    held: list[Message] = []
    taken = 0
    first = True
    try:
        while max_messages is None or taken < max_messages:
            want = batch_size
            if max_messages is not None:
                want = min(want, max_messages - taken)
            # Without --follow only the first request waits (--wait).
            poll = (
                FOLLOW_WAIT_S if follow else (wait / 1000 if first and wait else None)
            )
            first = False
            messages = client.consume_batch(
                topic, max=want, wait=poll, partition=partition
            )
            if not messages:
                if follow:
                    continue
                break
            held += messages
            for message in messages:
                # As the node wrote it: a JSON payload keeps its spelling.
                print_line(message.raw_json.encode())
            taken += len(messages)
            if ack:
                _settle(client, topic, messages, True)
                held.clear()
    except KeyboardInterrupt:
        raise click.exceptions.Exit(130) from None
    finally:
        _release(client, topic, held)


def _settle(client: Client, topic: str, leased: list[Message], ack: bool) -> None:
    """Ack the leased messages, or give them back (``ack`` False)."""
    settle = client.ack_batch if ack else client.release_batch
    results = settle(topic, leased)
    lost = sum(1 for r in results if r == "lapsed")
    if lost:
        note(
            f"{lost} of {len(leased)} leases lapsed before they were settled: "
            "those messages are delivered again"
        )
    full = sum(1 for r in results if r == "acked_ahead_full")
    if full:
        note(f"{full} acks refused (acked_ahead_full): those messages come back")


def _release(client: Client, topic: str, leased: list[Message]) -> None:
    """Give back the leases of --no-ack, so the messages are delivered again now."""
    for start in range(0, len(leased), 1000):
        try:
            _settle(client, topic, leased[start : start + 1000], False)
        except NaradError as exc:
            note(f"could not give back leases ({exc.error}): they lapse by themselves")
            return


# -- replay -------------------------------------------------------------------


@cli.command()
@click.argument("topic")
@click.option("--partition", "-p", type=click.IntRange(0), required=True)
@click.option(
    "--from", "start", type=click.IntRange(0), default=0, help="First offset."
)
@click.option("--to", "end", type=click.IntRange(0), help="Last offset (included).")
@click.option("--max", "max_messages", type=click.IntRange(1), help="At most N.")
@progress_option
@pass_session
def replay(
    session: Session,
    topic: str,
    partition: int,
    start: int,
    end: int | None,
    max_messages: int | None,
    progress: bool | None,
) -> None:
    """Print a partition's retained messages from an offset on, as JSON lines.

    A read: no lease is taken and nothing is acked. It stops at the
    partition's end as it was when the command started (or --to, --max).
    """
    client = session.client
    record = client.topic(topic)
    stats = record["partition_stats"]
    if partition >= len(stats):
        raise Refused(
            f"topic {topic} has {len(stats)} partitions (0 to {len(stats) - 1})"
        )
    oldest, stop = stats[partition]["oldest_offset"], stats[partition]["next_offset"]
    if start < oldest:
        note(f"offsets {start} to {oldest - 1} are no longer retained; from {oldest}")
        start = oldest
    if end is not None:
        stop = min(stop, end + 1)
    if max_messages is not None:
        stop = min(stop, start + max_messages)
    total = max(0, stop - start)
    with progress_bar(progress, "replaying", total=total, unit="messages") as (
        bar,
        task,
    ):
        for offset in range(start, stop):
            try:
                message = client.replay(topic, partition, offset)
            except NotFound as exc:
                # Trimmed since, or a delay child's copy not due yet: none.
                if f"no message at offset {offset}" not in exc.error:
                    raise _replay_error(exc, offset) from exc
            except NaradError as exc:
                raise _replay_error(exc, offset) from exc
            else:
                print_line(message.raw_json.encode())
            bar.advance(task)


def _replay_error(exc: NaradError, offset: int) -> click.ClickException:
    error = cli_error(exc)
    stopped = f"{exc.error} (stopped at offset {offset})"
    return Unavailable(stopped) if isinstance(error, Unavailable) else Refused(stopped)
