"""Receipt handles: opaque to clients, bound to one reservation.

A handle names the partition, the offset and the reservation's nonce, a
96-bit random value stored with the lease. It cannot be forged without the
nonce and cannot settle a later lease of the same message, whose nonce
differs. It is ``<partition>.<offset>.<nonce>`` in unpadded URL-safe base64.

Encoding and decoding run once per message of a batch, so they go straight
to :mod:`binascii` rather than through :mod:`base64`'s wrappers.
"""

from __future__ import annotations

import binascii
import re
import secrets

from narad.errors import MalformedReceipt
from narad.storage import Lease

_SHAPE = re.compile(rb"([0-9]{1,6})\.([0-9]{1,19})\.([A-Za-z0-9_-]{16})")
_TO_URLSAFE = bytes.maketrans(b"+/", b"-_")
_FROM_URLSAFE = bytes.maketrans(b"-_", b"+/")
_PADDING = (b"", b"===", b"==", b"=")  # by length % 4


class Receipt(Lease):
    """A handle's lease: what a settle takes, as it is."""

    __slots__ = ()

    def encode(self) -> str:
        return encode(self.partition, self.offset, self.nonce)


def encode(partition: int, offset: int, nonce: str) -> str:
    """The handle of the lease of ``offset`` in ``partition`` under ``nonce``."""
    raw = b"%d.%d.%s" % (partition, offset, nonce.encode())
    return (
        binascii.b2a_base64(raw, newline=False)
        .translate(_TO_URLSAFE)
        .rstrip(b"=")
        .decode()
    )


def new_nonce() -> str:
    return secrets.token_urlsafe(12)


def new_nonces(count: int) -> list[str]:
    """``count`` nonces, from one read of the random source."""
    # 12 random bytes are exactly 16 base64 characters, with no padding.
    raw = binascii.b2a_base64(secrets.token_bytes(12 * count), newline=False)
    text = raw.translate(_TO_URLSAFE).decode()
    return [text[i : i + 16] for i in range(0, 16 * count, 16)]


def decode(handle: str) -> Receipt:
    """Parse a handle; a malformed one is the client's error (400)."""
    try:
        data = handle.encode("ascii")
        # Like base64.urlsafe_b64decode: characters outside the alphabet
        # are skipped, and the shape check below judges what is left.
        raw = binascii.a2b_base64(
            data.translate(_FROM_URLSAFE) + _PADDING[len(data) % 4]
        )
    except (UnicodeEncodeError, binascii.Error, ValueError):
        raise MalformedReceipt() from None
    match = _SHAPE.fullmatch(raw)
    if match is None:
        raise MalformedReceipt()
    return Receipt(int(match[1]), int(match[2]), match[3].decode())
