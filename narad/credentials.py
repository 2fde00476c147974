"""Secrets handed to the node by systemd as credentials.

Under systemd, the units pass secrets with ``LoadCredential=`` (systemd.exec(5),
"Credentials"): each is a file in ``$CREDENTIALS_DIRECTORY``, readable by the
service's user only, never in the environment that every child process
inherits or ``/proc/<pid>/environ`` shows. Narad reads two:

- ``admin-password``: the root admin's password on first start, as
  ``$NARAD_ADMIN_PASSWORD`` (which wins when both are set);
- ``storage-password``: the storage's password, for a ``storage.url`` that
  names a user (or nothing) but no password.

Outside systemd (no ``$CREDENTIALS_DIRECTORY``) there are none.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from urllib.parse import quote
from urllib.parse import urlsplit
from urllib.parse import urlunsplit

__all__ = (
    "ADMIN_PASSWORD",
    "DIRECTORY_ENV",
    "STORAGE_PASSWORD",
    "read",
    "with_password",
)

DIRECTORY_ENV = "CREDENTIALS_DIRECTORY"
ADMIN_PASSWORD = "admin-password"
STORAGE_PASSWORD = "storage-password"


def read(name: str, env: Mapping[str, str] = os.environ) -> str | None:
    """The credential ``name`` without its trailing newline; ``None`` when
    there is no credentials directory or no such credential."""
    directory = env.get(DIRECTORY_ENV)
    if not directory:
        return None
    try:
        text = Path(directory, name).read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    return text.rstrip("\r\n") or None


def with_password(url: str, password: str | None) -> str:
    """``url`` with ``password`` in its user part, unless it has one already
    (or is empty, or no password is given). Hosts stay as written, so a
    RedisRaft cluster's comma-separated nodes are kept."""
    if not url or not password:
        return url
    parts = urlsplit(url)
    userinfo, at, hosts = parts.netloc.rpartition("@")
    if ":" in userinfo:
        return url
    netloc = f"{userinfo}:{quote(password, safe='')}@{hosts if at else parts.netloc}"
    return urlunsplit(parts._replace(netloc=netloc))
