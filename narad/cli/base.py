"""The root command group, the session every client command gets, and errors."""

from __future__ import annotations

import os
import re
import sys
from typing import Any

import click
import httpx
from narad_client import Client
from narad_client import NaradError
from narad_client import UnexpectedResponse

from narad import __version__
from narad.cli.contexts import ContextFile
from narad.cli.contexts import ContextsFileError
from narad.cli.contexts import Target
from narad.cli.contexts import resolve

#: Exit statuses scripts can rely on.
OK, REFUSED, USAGE, UNAVAILABLE = 0, 1, 2, 3
#: Retries of a call that is safe to repeat (narad_client's rule) after the
#: first attempt: with narad_client's backoff, at most 1.5 s of waiting
#: before a node that cannot be reached is reported unavailable.
RETRIES = 4
#: Records a list command asks for per request (the node's largest page).
PAGE_SIZE = 1000


class CommandError(click.ClickException):
    """A command that failed, shown as ``narad: <message>``."""

    def show(self, file: Any = None) -> None:
        click.echo(f"narad: {self.format_message()}", err=True)


class Refused(CommandError):
    """The node refused (a 4xx), or a check found the answer is no."""

    exit_code = REFUSED


class Unavailable(CommandError):
    """No answer, or a node that cannot serve now (a 5xx)."""

    exit_code = UNAVAILABLE


class Usage(CommandError):
    """Arguments or settings that cannot work, found past click's parsing."""

    exit_code = USAGE


def unavailable(exc: NaradError) -> bool:
    """Whether a failed call found no node able to serve it: no answer, a
    5xx, or a success that is not the API's (another server at that
    address). A refusal (4xx) or a redirect (not followed) is no such case."""
    if isinstance(exc, UnexpectedResponse):
        return not 300 <= exc.status < 400
    return exc.status == 0 or exc.status >= 500


def cli_error(exc: NaradError) -> CommandError:
    """The CLI's error for a failed API call, with the server's message."""
    message = exc.error
    if exc.status == 401:
        message += (
            " (give credentials: `narad context add NAME --url URL --user USER`, "
            "or NARAD_USER and NARAD_PASSWORD)"
        )
    return Unavailable(message) if unavailable(exc) else Refused(message)


class NaradGroup(click.Group):
    """A group whose API errors end the command with the server's message."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except NaradError as exc:
            raise cli_error(exc) from exc
        except ContextsFileError as exc:
            raise Usage(str(exc)) from exc
        except UnicodeEncodeError as exc:
            # An argument with bytes that are not UTF-8 (Python's surrogate
            # escapes): a name, key or header cannot carry it.
            try:
                shown = repr(os.fsencode(exc.object))
            except (TypeError, UnicodeError):
                shown = repr(exc.object)
            raise Usage(f"an argument is not UTF-8 text: {shown}") from exc


class Session:
    """What the global options say, and the client built from them on first use."""

    def __init__(
        self,
        *,
        context: str | None = None,
        url: str | None = None,
        user: str | None = None,
        ca_file: str | None = None,
        retries: int | None = None,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.context = context
        self.url = url
        self.user = user
        self.ca_file = ca_file
        self.retries = RETRIES if retries is None else retries
        self.contexts = ContextFile()
        # Tests drive an app in-process (httpx.WSGITransport).
        self.transport = transport
        self._client: Client | None = None

    def target(self) -> Target:
        try:
            return resolve(
                self.contexts,
                context=self.context,
                url=self.url,
                user=self.user,
                ca_file=self.ca_file,
            )
        except (LookupError, ValueError) as exc:
            raise Usage(str(exc)) from exc

    @property
    def client(self) -> Client:
        if self._client is None:
            target = self.target()
            password = target.password
            if target.user and password is None and sys.stdin.isatty():
                password = click.prompt(
                    f"password of {target.user} at {target.url}",
                    hide_input=True,
                    err=True,
                )
            try:
                self._client = Client(
                    target.url,
                    (target.user, password or "") if target.user else None,
                    transport=self.transport,
                    ca_file=target.ca_file,
                    client_cert=target.client_cert,
                    client_key=target.client_key,
                    retries=self.retries,
                )
            except OSError as exc:  # ssl.SSLError too: not PEM
                raise Usage(f"TLS files cannot be used: {exc}") from exc
        return self._client

    def close(self) -> None:
        if self._client is not None:
            self._client.close()


pass_session = click.make_pass_decorator(Session)


@click.group(cls=NaradGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="narad")
@click.option(
    "--context",
    "-c",
    envvar="NARAD_CONTEXT",
    help="Context to use (narad context ls); default: the current one.",
)
@click.option("--url", help="Node URL (overrides NARAD_URL and the context).")
@click.option("--user", help="User name (overrides NARAD_USER and the context).")
@click.option(
    "--ca-file",
    type=click.Path(dir_okay=False),
    help="PEM CA certificates an https:// node's certificate must chain to "
    "(overrides NARAD_CA_FILE and the context); default: the public CAs.",
)
@click.option(
    "--retries",
    type=click.IntRange(0, 20),
    envvar="NARAD_RETRIES",
    help="Retries, with backoff, of a call that is safe to repeat, when no "
    f"answer came or the node answered 503 (overrides NARAD_RETRIES; default "
    f"{RETRIES}, 0 fails at once).",
)
@click.pass_context
def cli(
    ctx: click.Context,
    context: str | None,
    url: str | None,
    user: str | None,
    ca_file: str | None,
    retries: int | None,
):
    """Narad: run a node (serve, config, plugins) and drive one over HTTP.

    Exit status: 0 done, 1 refused (the node said no), 2 usage, 3 unavailable
    (no answer, or a 5xx).

    Calls that are safe to repeat are retried when no answer came or the
    node answered 503 (reads, acks, and every produce: it carries an
    idempotency key, so a retried message is stored once); a consume,
    create or delete is tried again only when it surely never reached the
    node.
    """
    # A test may hand in a session (with an in-process transport).
    session = ctx.obj if isinstance(ctx.obj, Session) else Session()
    session.context = context or session.context
    session.url = url or session.url
    session.user = user or session.user
    session.ca_file = ca_file or session.ca_file
    if retries is not None:
        session.retries = retries
    ctx.obj = session
    ctx.call_on_close(session.close)


_DURATION = re.compile(r"(\d+)(ms|s|m|h|d)?")
_UNIT_MS = {None: 1, "ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}


class Duration(click.ParamType):
    """Milliseconds, written ``500ms``, ``30s``, ``5m``, ``1h``, ``7d`` or as a
    bare number of milliseconds."""

    name = "duration"

    def convert(self, value: Any, param: Any, ctx: Any) -> int:
        if isinstance(value, int):
            return value
        match = _DURATION.fullmatch(str(value).strip())
        if match is None:
            self.fail(f"{value!r} is not a duration such as 500ms, 30s, 1h or 7d")
        return int(match[1]) * _UNIT_MS[match[2]]


DURATION = Duration()
