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
