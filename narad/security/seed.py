"""The root admin: ``admin`` with ``admin`` on ``*``, created on first start.

When the storage holds no user at all, the node creates ``admin``. Its
password is ``$NARAD_ADMIN_PASSWORD`` when set (never a setting of the TOML
file: secrets stay out of configuration files); otherwise a random one,
written to ``<data_dir>/admin-password`` (mode 0600) and never logged. With no
data directory (``storage.data_dir`` empty), or one that cannot be written,
the generated password is logged once, at that moment only.

The master seeds at start; should the storage not answer then, the first
worker that meets a login of a user that does not exist seeds instead. Only
one seeding can succeed (the storage script creates the user only into a
store with no user), and only its password is written.
"""

from __future__ import annotations

import logging
import os
import secrets
from collections.abc import Callable
from collections.abc import Mapping
from pathlib import Path

from narad import credentials
from narad.broker import now_ms
from narad.config import Config
from narad.errors import InvalidConfiguration
from narad.errors import StorageError
from narad.security.passwords import MAX_PASSWORD
from narad.security.passwords import MIN_PASSWORD
from narad.security.passwords import Scrypt
from narad.security.passwords import hash_password as scrypt_hash
from narad.storage import Grant
from narad.storage import Status
from narad.storage import Storage
from narad.storage import UserRecord

log = logging.getLogger(__name__)

ROOT = "admin"
PASSWORD_ENV = "NARAD_ADMIN_PASSWORD"
PASSWORD_FILE = "admin-password"
ROOT_GRANTS = (Grant("admin", ("*",)),)


def admin_password_from_env(env: Mapping[str, str] | None = None) -> str | None:
    """``$NARAD_ADMIN_PASSWORD``, else systemd's ``admin-password`` credential
    (:mod:`narad.credentials`), checked; ``None`` when neither is set.

    Raises:
        InvalidConfiguration: a password too short or too long.
    """
    env = os.environ if env is None else env
    password = env.get(PASSWORD_ENV) or None
    where = f"${PASSWORD_ENV}"
    if password is None:
        password = credentials.read(credentials.ADMIN_PASSWORD, env)
        where = f"the credential {credentials.ADMIN_PASSWORD}"
    if password is not None and not MIN_PASSWORD <= len(password) <= MAX_PASSWORD:
        raise InvalidConfiguration(
            f"{where} must be {MIN_PASSWORD} to {MAX_PASSWORD} characters"
        )
    return password


def password_file(config: Config) -> Path | None:
    """Where a generated password goes; ``None`` without a data directory."""
    if not config.get("storage.data_dir"):
        return None
    return config.data_dir / PASSWORD_FILE


def seed_root_admin(
    storage: Storage,
    config: Config,
    password: str | None,
    hash_password: Callable[[str], str],
) -> bool:
    """Create the root admin if the storage holds no user; whether it did.

    Args:
        storage: Where the users live.
        config: For the data directory.
        password: The password to give it; ``None`` generates one.
        hash_password: Makes the stored hash (in a worker, off its event
            loop).
    """
    if storage.list_users(after="", limit=1).names:
        if password is not None:
            log.info("%s not used: the storage holds users already", PASSWORD_ENV)
        return False
    generated = password is None
    password = password or secrets.token_urlsafe(18)
    user = UserRecord(
        name=ROOT,
        password_hash=hash_password(password),
        grants=ROOT_GRANTS,
        admin=True,
        created_ms=now_ms(),
    )
    target = password_file(config) if generated else None
    staged = _stage(target, password) if target is not None else None
    try:
        created = storage.create_user(user, only_if_none=True) is Status.OK
    except BaseException:
        _discard(staged)
        raise
    if not created:
        _discard(staged)
        return False
    if not generated:
        log.info("root admin %r created with the password from $%s", ROOT, PASSWORD_ENV)
    elif staged is not None:
        staged.replace(target)
        log.warning(
            "root admin %r created; its password is in %s (mode 0600)", ROOT, target
        )
    else:
        # No data directory to keep it in: this line is the only copy.
        log.warning(
            "root admin %r created with password %s (shown once; change it with "
            "PUT /v1/users/admin/password)",
            ROOT,
            password,
        )
    return True


def _stage(target: Path, password: str) -> Path | None:
    """The password in a 0600 file next to ``target``, renamed into place
    only once the user exists; ``None`` if the directory cannot take it."""
    staged = target.with_name(f".{target.name}.{os.getpid()}")
    try:
        target.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd = os.open(staged, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as fh:
            fh.write(password + "\n")
            fh.flush()
            os.fsync(fh.fileno())
    except OSError as exc:
        log.warning("cannot write the admin password under %s: %s", target.parent, exc)
        return None
    return staged


def _discard(staged: Path | None) -> None:
    if staged is not None:
        staged.unlink(missing_ok=True)


def prepare_at_start(config: Config) -> None:
    """In the master, before any worker: warn once when security is off, or
    seed the root admin when the storage holds no user.

    Raises:
        InvalidConfiguration: ``$NARAD_ADMIN_PASSWORD`` is unusable.
    """
    if not config.get("security.enabled"):
        log.warning(
            "security is off (security.enabled = false): every route is open to "
            "anyone who can reach %s",
            config.get("server.bind"),
        )
        return
    from narad.plugins import connect_storage
    from narad.plugins import load_plugins

    password = admin_password_from_env()
    storage = connect_storage(config, load_plugins(config))
    try:
        params = Scrypt(log2_n=config.get("security.scrypt_log2_n"))
        seed_root_admin(storage, config, password, lambda p: scrypt_hash(p, params))
    except StorageError as exc:
        log.warning(
            "cannot check for the root admin now (%s): the first worker to meet "
            "a login of a user that does not exist will",
            exc,
        )
    finally:
        storage.close()
