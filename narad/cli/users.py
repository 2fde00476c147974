"""``narad user ...`` (the Users API: admins, and a user's own password) and
``narad context ...`` (the nodes the CLI knows)."""

from __future__ import annotations

import sys
from datetime import UTC
from datetime import datetime
from typing import Any

import click

from narad.cli.base import PAGE_SIZE
from narad.cli.base import Session
from narad.cli.base import Usage
from narad.cli.base import cli
from narad.cli.base import pass_session
from narad.cli.contexts import Context
from narad.cli.contexts import check_url
from narad.cli.output import note
from narad.cli.output import output_option
from narad.cli.output import print_fields
from narad.cli.output import print_json
from narad.cli.output import print_table
from narad.cli.output import wants_json
from narad.cli.topics import confirm_or_yes

ACTIONS = ("produce", "consume", "create", "admin", "metrics")
#: Grants of the whole node, not of topics: given bare (``metrics``).
NODE_ACTIONS = ("metrics",)


def parse_grant(text: str) -> dict[str, Any]:
    """``produce:orders.*,billing`` as ``{"action": "produce", "patterns":
    ["orders.*", "billing"]}``; ``metrics`` (the node's, not a topic's) as
    ``{"action": "metrics", "patterns": ["*"]}``."""
    if text in NODE_ACTIONS:
        return {"action": text, "patterns": ["*"]}
    action, sep, patterns = text.partition(":")
    if not sep or action not in ACTIONS or not patterns.strip(","):
        raise click.BadParameter(
            f"{text!r}: expected ACTION:PATTERN[,PATTERN...] with ACTION one of "
            f"{', '.join(ACTIONS)} (e.g. produce:orders.*), or metrics alone",
            param_hint="--grant",
        )
    return {"action": action, "patterns": [p for p in patterns.split(",") if p]}


def _grants(texts: tuple[str, ...]) -> list[dict[str, Any]]:
    return [parse_grant(text) for text in texts]


def _shown_grants(grants: list[dict[str, Any]]) -> str:
    return "; ".join(f"{g['action']}:{','.join(g['patterns'])}" for g in grants)


def new_password(password_stdin: bool, whose: str) -> str:
    """A password from standard input's first line, or asked twice at a terminal."""
    if password_stdin:
        line = sys.stdin.readline().rstrip("\r\n")
        if not line:
            raise Usage("--password-stdin: standard input held no password")
        return line
    if not sys.stdin.isatty():
        raise Usage(
            "not at a terminal: give the password on standard input with "
            "--password-stdin"
        )
    return click.prompt(
        f"new password for {whose}",
        hide_input=True,
        confirmation_prompt=True,
        err=True,
    )


password_stdin_option = click.option(
    "--password-stdin",
    is_flag=True,
    help="Read the password from standard input's first line (no prompt).",
)
grant_option = click.option(
    "--grant",
    "-g",
    "grants",
    multiple=True,
    metavar="ACTION:PATTERNS",
    help="produce, consume, create or admin on comma-separated topic names or "
    "prefixes (orders.*), or metrics (reading /metrics); repeat for more.",
)


@cli.group()
def user() -> None:
    """Users and their grants (an admin's), and your own password."""


def _user_fields(record: dict[str, Any]) -> list[tuple[str, Any]]:
    created = record.get("created_at_ms")
    return [
        ("username", record["username"]),
        ("grants", _shown_grants(record.get("grants", []))),
        ("created", _when(created)),
    ]


def _when(ms: int | None) -> str | None:
    if not ms:
        return None
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="seconds")


@user.command("ls")
@output_option
@pass_session
def user_ls(session: Session, as_json: bool | None) -> None:
    """List users (no password material)."""
    users = list(session.client.users(page_size=PAGE_SIZE))
    if wants_json(as_json):
        print_json(users)
        return
    print_table(
        ["username", "grants", "created"],
        (
            (
                u["username"],
                _shown_grants(u.get("grants", [])),
                _when(u.get("created_at_ms")),
            )
            for u in users
        ),
    )


@user.command("info")
@click.argument("name")
@output_option
@pass_session
def user_info(session: Session, name: str, as_json: bool | None) -> None:
    """A user's grants."""
    record = session.client.user(name)
    if wants_json(as_json):
        print_json(record)
    else:
        print_fields(_user_fields(record))


@user.command("create")
@click.argument("name")
@grant_option
@password_stdin_option
@output_option
@pass_session
def user_create(
    session: Session,
    name: str,
    grants: tuple[str, ...],
    password_stdin: bool,
    as_json: bool | None,
) -> None:
    """Create a user (asks for the password)."""
    parsed = _grants(grants)
    password = new_password(password_stdin, name)
    record = session.client.create_user(name, password, parsed)
    if wants_json(as_json):
        print_json(record)
    else:
        note(f"created user {name}")
        print_fields(_user_fields(record))


@user.command("grants")
@click.argument("name")
@grant_option
@click.option("--none", "no_grants", is_flag=True, help="Take every grant away.")
@output_option
@pass_session
def user_grants(
    session: Session,
    name: str,
    grants: tuple[str, ...],
    no_grants: bool,
    as_json: bool | None,
) -> None:
    """Replace a user's grants with those given."""
    if not grants and not no_grants:
        raise Usage("give the new grants with --grant, or --none to take all away")
    if grants and no_grants:
        raise Usage("--none takes every grant away: give it alone")
    record = session.client.set_grants(name, _grants(grants))
    if wants_json(as_json):
        print_json(record)
    else:
        print_fields(_user_fields(record))


@user.command("passwd")
@click.argument("name", required=False)
@password_stdin_option
@pass_session
def user_passwd(session: Session, name: str | None, password_stdin: bool) -> None:
    """Change your own password, or (an admin) reset NAME's."""
    target = session.target()
    me = target.user
    name = name or me
    if not name:
        raise Usage("whose password? give NAME, or a user (--user, NARAD_USER)")
    client = session.client
    if name == me:
        current = target.password
        if current is None:
            if not sys.stdin.isatty():
                raise Usage("your current password: set NARAD_PASSWORD")
            current = click.prompt("current password", hide_input=True, err=True)
        password = new_password(password_stdin, name)
        client.set_password(name, password, current_password=current)
    else:
        client.set_password(name, new_password(password_stdin, name))
    note(f"password of {name} changed")


@user.command("rm")
@click.argument("name")
@click.option("--yes", "-y", is_flag=True, help="Do not ask.")
@pass_session
def user_rm(session: Session, name: str, yes: bool) -> None:
    """Delete a user."""
    confirm_or_yes(yes, f"Delete user {name}?")
    session.client.delete_user(name)
    note(f"deleted user {name}")


# -- contexts -----------------------------------------------------------------


@cli.group()
def context() -> None:
    """Named nodes to talk to (stored in a 0600 file of yours)."""


@context.command("add")
@click.argument("name")
@click.option("--url", required=True, help="The node, e.g. http://10.0.0.5:7942.")
@click.option("--user", "user_name", help="User name for HTTP Basic auth.")
@password_stdin_option
@click.option(
    "--no-password",
    is_flag=True,
    help="Store no password (it comes from NARAD_PASSWORD or a prompt each time).",
)
@click.option(
    "--ca-file",
    type=click.Path(dir_okay=False, exists=True, resolve_path=True),
    help="PEM CA certificates the node's https:// certificate must chain to.",
)
@click.option(
    "--client-cert",
    type=click.Path(dir_okay=False, exists=True, resolve_path=True),
    help="PEM client certificate, for a node that asks for one.",
)
@click.option(
    "--client-key",
    type=click.Path(dir_okay=False, exists=True, resolve_path=True),
    help="PEM key of --client-cert (if not in the same file).",
)
@click.option("--use/--no-use", default=True, help="Make it current (default).")
@pass_session
def context_add(
    session: Session,
    name: str,
    url: str,
    user_name: str | None,
    password_stdin: bool,
    no_password: bool,
    ca_file: str | None,
    client_cert: str | None,
    client_key: str | None,
    use: bool,
) -> None:
    """Add (or replace) a context; asks for the user's password unless
    --no-password or --password-stdin."""
    try:
        check_url(url, "--url")
    except ValueError as exc:
        raise Usage(str(exc)) from exc
    password = None
    if user_name and not no_password:
        if password_stdin or sys.stdin.isatty():
            password = _password(password_stdin, user_name)
        else:
            raise Usage(
                "not at a terminal: give the password with --password-stdin, "
                "or store none with --no-password"
            )
    current, known = session.contexts.load()
    known[name] = Context(
        name,
        url.rstrip("/"),
        user_name,
        password,
        ca_file=ca_file,
        client_cert=client_cert,
        client_key=client_key,
    )
    session.contexts.save(name if use else current, known)
    stored = " (password stored)" if password else ""
    note(f"context {name}: {url} as {user_name or 'nobody'}{stored}")


def _password(password_stdin: bool, user_name: str) -> str:
    if password_stdin:
        return new_password(True, user_name)
    return click.prompt(f"password of {user_name}", hide_input=True, err=True)


@context.command("ls")
@output_option
@pass_session
def context_ls(session: Session, as_json: bool | None) -> None:
    """The contexts, the current one marked."""
    current, known = session.contexts.load()
    rows = [
        {
            "name": c.name,
            "current": c.name == current,
            "url": c.url,
            "user": c.user,
            "password_stored": bool(c.password),
        }
        for c in known.values()
    ]
    if wants_json(as_json):
        print_json(rows)
        return
    print_table(
        ["", "name", "url", "user", "password"],
        (
            (
                "*" if r["current"] else "",
                r["name"],
                r["url"],
                r["user"],
                "stored" if r["password_stored"] else "",
            )
            for r in rows
        ),
    )


@context.command("use")
@click.argument("name")
@pass_session
def context_use(session: Session, name: str) -> None:
    """Make NAME the current context."""
    _, known = session.contexts.load()
    if name not in known:
        names = ", ".join(sorted(known)) or "none"
        raise Usage(f"no context {name!r} (known: {names})")
    session.contexts.save(name, known)
    note(f"now using context {name}")


@context.command("rm")
@click.argument("name")
@pass_session
def context_rm(session: Session, name: str) -> None:
    """Forget a context (and its stored password)."""
    current, known = session.contexts.load()
    if known.pop(name, None) is None:
        raise Usage(f"no context {name!r}")
    session.contexts.save(None if current == name else current, known)
    note(f"removed context {name}")


@context.command("show")
@output_option
@pass_session
def context_show(session: Session, as_json: bool | None) -> None:
    """Where commands go now, and which setting says so."""
    target = session.target()
    shown = {
        "context": target.context,
        "url": target.url,
        "user": target.user,
        "password": "set" if target.password else None,
        "ca_file": target.ca_file,
        "client_cert": target.client_cert,
        "from": target.sources,
        "file": str(session.contexts.path),
    }
    if wants_json(as_json):
        print_json(shown)
        return
    print_fields(
        [
            ("context", target.context),
            ("url", f"{target.url}  ({target.sources['url']})"),
            ("user", target.user and f"{target.user}  ({target.sources['user']})"),
            ("password", target.password and f"set ({target.sources['password']})"),
            (
                "ca file",
                target.ca_file and f"{target.ca_file}  ({target.sources['ca_file']})",
            ),
            (
                "client cert",
                target.client_cert
                and f"{target.client_cert}  ({target.sources['client_cert']})",
            ),
            ("file", str(session.contexts.path)),
        ]
    )
    if session.contexts.readable_by_others():
        note(f"warning: {session.contexts.path} is readable by others: chmod 600 it")
