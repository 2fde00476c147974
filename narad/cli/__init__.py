"""The ``narad`` command: run a node, and drive one over HTTP.

``narad serve``, ``config`` and ``plugins`` run or inspect a node on this
machine (:mod:`narad.cli.node`). Every other command is a thin wrapper over
``narad_client.Client`` (the ``narad-client`` distribution, in
``clients/python``): topics and schemas (:mod:`narad.cli.topics`),
produce, consume and replay (:mod:`narad.cli.messages`), users and contexts
(:mod:`narad.cli.users`, :mod:`narad.cli.contexts`). Output and exit statuses
follow :mod:`narad.cli.output` and :mod:`narad.cli.base`.
"""

from __future__ import annotations

import os
import sys

import click

from narad.cli import messages  # noqa: F401 (registers its commands)
from narad.cli import node  # noqa: F401
from narad.cli import topics  # noqa: F401
from narad.cli import users  # noqa: F401
from narad.cli.base import USAGE
from narad.cli.base import cli

__all__ = ("cli", "main")


def main(argv: list[str] | None = None) -> int:
    """Run the command line ``argv`` (default: ``sys.argv[1:]``); its exit status."""
    try:
        status = cli.main(args=argv, prog_name="narad", standalone_mode=False)
    except click.ClickException as exc:
        exc.show()
        return exc.exit_code
    except click.exceptions.Abort as exc:
        click.echo("Aborted.", err=True)
        # Ctrl-C is no refusal (1): 130, as for `narad consume`.
        return 130 if isinstance(exc.__cause__, KeyboardInterrupt) else 1
    except BrokenPipeError:
        # The reader went away (| head): stop quietly.
        _drop_stdout()
        return 1
    except OSError as exc:
        # Output or a file that cannot be written (a full disk...).
        click.echo(f"narad: {exc}", err=True)
        _drop_stdout()
        return USAGE
    return status if isinstance(status, int) else 0


def _drop_stdout() -> None:
    """What is left in standard output's buffer goes nowhere, so that the
    flush at exit does not fail again."""
    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
