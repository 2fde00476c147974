"""Receipt handles: opaque to clients, bound to one reservation.

A handle names the partition, the offset and the reservation's nonce, a
96-bit random value stored with the lease. It cannot be forged without the
nonce and cannot settle a later lease of the same message, whose nonce
differs.
"""

from __future__ import annotations

import base64
import binascii
import re
import secrets
from dataclasses import dataclass

from narad.errors import MalformedReceipt

_SHAPE = re.compile(r"(\d{1,6})\.(\d{1,19})\.([A-Za-z0-9_-]{16})")


@dataclass(frozen=True)
class Receipt:
    partition: int
    offset: int
    nonce: str

    def encode(self) -> str:
        raw = f"{self.partition}.{self.offset}.{self.nonce}".encode()
        return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def new_nonce() -> str:
    return secrets.token_urlsafe(12)


def new_nonces(count: int) -> list[str]:
    """``count`` nonces, from one read of the random source."""
    # 12 random bytes are exactly 16 base64 characters, with no padding.
    raw = base64.urlsafe_b64encode(secrets.token_bytes(12 * count)).decode()
    return [raw[i : i + 16] for i in range(0, 16 * count, 16)]


def decode(handle: str) -> Receipt:
    """Parse a handle; a malformed one is the client's error (400)."""
    try:
        raw = base64.urlsafe_b64decode(handle + "=" * (-len(handle) % 4)).decode()
    except (binascii.Error, UnicodeDecodeError, ValueError):
        raise MalformedReceipt() from None
    match = _SHAPE.fullmatch(raw)
    if match is None:
        raise MalformedReceipt()
    return Receipt(int(match[1]), int(match[2]), match[3])
