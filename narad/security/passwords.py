"""Password hashes: scrypt from the standard library, salted per user.

A hash is stored as text that says how it was made,
``scrypt$<log2 n>$<r>$<p>$<salt>$<digest>`` (salt and digest in unpadded
base64), so a node verifies a hash made under other parameters and the cost
can be raised without invalidating stored passwords.

scrypt is memory-hard: each hash fills ``128 * r * n`` bytes (16 MiB with
the default ``n = 2**14, r = 8``) and makes ``p`` passes over it (``p = 5``:
OWASP's minimum for that memory). ``security.scrypt_log2_n`` sets ``n`` for
new hashes. It is CPU-bound and releases the GIL, so
:mod:`narad.security.authn` runs it on :mod:`narad.serve.offload`'s native threads,
never on the event loop, and bounds how many run at once.
"""

from __future__ import annotations

import base64
import ctypes
import ctypes.util
import functools
import hashlib
import hmac
import secrets
from dataclasses import dataclass

SALT_BYTES = 16
DIGEST_BYTES = 32
R = 8
P = 5
DEFAULT_LOG2_N = 14
# What a stored hash may ask for: a corrupt or hostile record must not make
# a worker allocate without bound.
MAX_LOG2_N, MAX_R, MAX_P = 20, 16, 16
MIN_PASSWORD, MAX_PASSWORD = 8, 1024  # characters
# glibc's mallopt(M_MMAP_THRESHOLD, bytes); allocations this large or larger
# are mapped on their own and unmapped when freed.
_M_MMAP_THRESHOLD = -3
_MMAP_THRESHOLD = 4 << 20


@functools.cache
def return_hash_memory() -> bool:
    """Make each hash's memory go back to the system when the hash is done.

    glibc raises its mmap threshold once a large mapped block is freed, so
    the next scrypt block comes from the arena of whichever thread runs it
    and stays there: a worker grows by 16 MiB for every thread that ever
    hashed (32 MiB more per worker within minutes under churn). A fixed
    threshold keeps blocks of 4 MiB and more mapped. Whether it applied
    (``False`` where the C library has no ``mallopt``).
    """
    name = ctypes.util.find_library("c")
    mallopt = getattr(ctypes.CDLL(name), "mallopt", None) if name else None
    return bool(mallopt and mallopt(_M_MMAP_THRESHOLD, _MMAP_THRESHOLD))


@dataclass(frozen=True)
class Scrypt:
    """scrypt parameters: ``n = 2**log2_n``, block size ``r``, passes ``p``."""

    log2_n: int = DEFAULT_LOG2_N
    r: int = R
    p: int = P

    @property
    def memory(self) -> int:
        """Bytes one hash fills."""
        return 128 * self.r * (1 << self.log2_n)

    def derive(self, password: str, salt: bytes) -> bytes:
        return hashlib.scrypt(
            password.encode(),
            salt=salt,
            n=1 << self.log2_n,
            r=self.r,
            p=self.p,
            # OpenSSL's bound counts a little more than the block memory.
            maxmem=self.memory + (1 << 20) + 128 * self.r * self.p,
            dklen=DIGEST_BYTES,
        )


def hash_password(password: str, params: Scrypt | None = None) -> str:
    """A fresh salt, and the hash of ``password`` under ``params``."""
    params = params or Scrypt()
    salt = secrets.token_bytes(SALT_BYTES)
    digest = params.derive(password, salt)
    return "$".join(
        (
            "scrypt",
            str(params.log2_n),
            str(params.r),
            str(params.p),
            _b64(salt),
            _b64(digest),
        )
    )


def verify_password(password: str, stored: str | None, params: Scrypt) -> bool:
    """Whether ``password`` hashes to ``stored``; compared in constant time.

    ``stored`` is ``None`` for a user that does not exist: then, as for a
    malformed hash (or one asking for more than the bounds), the answer is
    no, after a hash of the node's own cost ``params``, so that a wrong user
    name takes as long as a wrong password and its timing reveals nothing.
    """
    parsed = _parse(stored) if stored is not None else None
    if parsed is None:
        params.derive(password, bytes(SALT_BYTES))
        return False
    stored_params, salt, digest = parsed
    return hmac.compare_digest(stored_params.derive(password, salt), digest)


def _parse(stored: str) -> tuple[Scrypt, bytes, bytes] | None:
    parts = stored.split("$")
    if len(parts) != 6 or parts[0] != "scrypt":
        return None
    try:
        log2_n, r, p = (int(x) for x in parts[1:4])
        salt, digest = _unb64(parts[4]), _unb64(parts[5])
    except ValueError:
        return None
    if not (1 <= log2_n <= MAX_LOG2_N and 1 <= r <= MAX_R and 1 <= p <= MAX_P):
        return None
    return Scrypt(log2_n, r, p), salt, digest


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode().rstrip("=")


def _unb64(text: str) -> bytes:
    return base64.b64decode(text + "=" * (-len(text) % 4), validate=True)
