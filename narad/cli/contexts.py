"""Contexts: named nodes (or clusters) the CLI talks to, in a user config file.

The file is ``$NARAD_CLI_CONFIG``, else ``$XDG_CONFIG_HOME/narad/contexts.json``
(``~/.config/narad/contexts.json``): JSON, written mode 0600 in a 0700
directory, since a context may hold a password. Which node a command talks
to, most specific first:

- ``--url`` / ``--user`` / ``--ca-file`` on the command line;
- ``NARAD_URL``, ``NARAD_USER``, ``NARAD_PASSWORD``, ``NARAD_CA_FILE``,
  ``NARAD_CLIENT_CERT``, ``NARAD_CLIENT_KEY``;
- the context named by ``--context`` or ``NARAD_CONTEXT``, else the current
  one (``narad context use``);
- ``http://127.0.0.1:7942`` without credentials.

An ``https://`` node's certificate is always verified: against the public
CAs, or the CA certificates in the PEM file ``ca_file`` names (a node with a
certificate of your own CA). A context may also name a client certificate
and key, for a node that asks for one (``server.tls_client_ca``).

A password is never taken from the command line (it would sit in the shell's
history and in ``ps``): it comes from ``NARAD_PASSWORD``, the context, a
prompt when standard input is a terminal, or ``--password-stdin``.
"""

from __future__ import annotations

import json
import os
import stat
import tempfile
from collections.abc import Mapping
from dataclasses import asdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

__all__ = ("DEFAULT_URL", "Context", "ContextFile", "Target", "resolve")

ENV_FILE = "NARAD_CLI_CONFIG"
#: Where commands go when neither an option, the environment nor a context
#: names a node: one on this machine, on the default port.
DEFAULT_URL = "http://127.0.0.1:7942"


@dataclass(frozen=True)
class Context:
    """One named node: where it is, and as whom."""

    name: str
    url: str
    user: str | None = None
    password: str | None = None
    ca_file: str | None = None
    client_cert: str | None = None
    client_key: str | None = None


@dataclass(frozen=True)
class Target:
    """Where a command goes, and why (for ``narad context show``)."""

    url: str
    user: str | None
    password: str | None
    context: str | None
    sources: dict[str, str]
    ca_file: str | None = None
    client_cert: str | None = None
    client_key: str | None = None


class ContextsFileError(ValueError):
    """The contexts file cannot be read, or is not one."""


def _context(name: str, fields: Any) -> Context:
    if not isinstance(fields, dict):
        raise TypeError(f"context {name!r} is not an object")
    context = Context(name=name, **fields)
    optional = (
        context.user,
        context.password,
        context.ca_file,
        context.client_cert,
        context.client_key,
    )
    if not isinstance(context.url, str) or not all(
        isinstance(v, str | None) for v in optional
    ):
        raise TypeError(f"context {name!r}: its fields must be strings")
    return context


class ContextFile:
    """The contexts file: read whole, written whole (atomically, 0600)."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path or default_path()

    def load(self) -> tuple[str | None, dict[str, Context]]:
        """(the current context's name, every context by name)."""
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return None, {}
        except (OSError, ValueError) as exc:
            raise ContextsFileError(f"{self.path} cannot be read: {exc}") from exc
        try:
            data = json.loads(text)
            contexts = {
                name: _context(name, fields)
                for name, fields in data.get("contexts", {}).items()
            }
            current = data.get("current")
            if not isinstance(current, str | None):
                raise TypeError(f"current is {current!r}, not a context's name")
        except (ValueError, TypeError, AttributeError) as exc:
            raise ContextsFileError(
                f"{self.path} is not a contexts file: {exc}"
            ) from exc
        return current, contexts

    def save(self, current: str | None, contexts: Mapping[str, Context]) -> None:
        data = {
            "current": current,
            "contexts": {
                name: {k: v for k, v in asdict(c).items() if k != "name" and v}
                for name, c in sorted(contexts.items())
            },
        }
        self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd, temporary = tempfile.mkstemp(prefix=".contexts-", dir=self.path.parent)
        try:
            os.fchmod(fd, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                json.dump(data, out, indent=2)
                out.write("\n")
            os.replace(temporary, self.path)
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise

    def readable_by_others(self) -> bool:
        try:
            mode = self.path.stat().st_mode
        except FileNotFoundError:
            return False
        return bool(mode & (stat.S_IRWXG | stat.S_IRWXO))


def default_path() -> Path:
    if explicit := os.environ.get(ENV_FILE):
        return Path(explicit)
    base = os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config"
    return Path(base) / "narad" / "contexts.json"


def check_url(url: str, origin: str) -> None:
    """Raise ValueError, naming ``origin``, unless ``url`` is an http(s) URL."""
    problem = ""
    if not url.startswith(("http://", "https://")):
        problem = "must start with http:// or https://"
    else:
        try:
            httpx.URL(url)
        except httpx.InvalidURL as exc:
            problem = f"is not a URL ({exc})"
    if problem:
        raise ValueError(f"{origin}: the node's URL {problem}, got {url!r}")


def resolve(
    contexts: ContextFile,
    *,
    context: str | None,
    url: str | None,
    user: str | None,
    ca_file: str | None = None,
    env: Mapping[str, str] = os.environ,
) -> Target:
    """Where a command goes (see the module docstring for the order).

    Raises:
        LookupError: ``context`` names no context.
        ValueError: the URL is not an http(s) URL.
    """
    current, known = contexts.load()
    chosen_name = context or env.get("NARAD_CONTEXT") or current
    chosen: Context | None = None
    if chosen_name:
        chosen = known.get(chosen_name)
        if chosen is None and (context or env.get("NARAD_CONTEXT")):
            names = ", ".join(sorted(known)) or "none yet"
            raise LookupError(f"no context {chosen_name!r} (known: {names})")
    sources: dict[str, str] = {}

    def pick(field: str, flag: str | None, var: str, default: Any) -> Any:
        if flag:
            sources[field] = f"--{field.replace('_', '-')}"
            return flag
        if env.get(var):
            sources[field] = var
            return env[var]
        stored = getattr(chosen, field, None) if chosen else None
        if stored:
            sources[field] = f"context {chosen.name}"
            return stored
        sources[field] = "default"
        return default

    target_url = pick("url", url, "NARAD_URL", DEFAULT_URL)
    check_url(target_url, sources["url"])
    target_user = pick("user", user, "NARAD_USER", None)
    password = None
    if env.get("NARAD_PASSWORD"):
        password, sources["password"] = env["NARAD_PASSWORD"], "NARAD_PASSWORD"
    elif chosen and chosen.password and chosen.user == target_user:
        # A stored password belongs to the context's own user only.
        password, sources["password"] = chosen.password, f"context {chosen.name}"
    return Target(
        target_url,
        target_user,
        password,
        chosen.name if chosen else None,
        sources,
        ca_file=pick("ca_file", ca_file, "NARAD_CA_FILE", None),
        client_cert=pick("client_cert", None, "NARAD_CLIENT_CERT", None),
        client_key=pick("client_key", None, "NARAD_CLIENT_KEY", None),
    )
