"""What calls return: consumed messages, produce outcomes, schema versions."""

from __future__ import annotations

import json
from dataclasses import dataclass
from dataclasses import field
from typing import Any

__all__ = ("Message", "Produced", "Schema")


@dataclass(frozen=True)
class Message:
    """One consumed (or replayed) message.

    Attributes:
        topic: The topic it was read from.
        partition: Its partition.
        offset: Its offset in the partition.
        key: Its key, or None when it was produced without one.
        timestamp: When the node stored it, in milliseconds since the epoch.
        payload: The produced body, byte for byte (see :attr:`payload_json`
            for the one case the API leaves open).
        receipt_handle: The lease to :meth:`~narad_client.Client.ack`,
            ``extend`` or ``release``; None for a replay, which leases nothing.
        payload_json: The ``payload`` member of the node's answer, as the
            node wrote it: the body itself when it was JSON, a JSON string
            when it was other UTF-8 text, base64 in a JSON string when binary.
            The API does not say whether a JSON string stood for a body that
            was that JSON text (``"hi"`` with its quotes) or for plain text
            (``hi``); :attr:`payload` takes plain text unless the string is
            written in a way the node never writes text, or its content is
            itself JSON (which the node never stores as text). A topic
            whose bodies are JSON strings (a ``{"type": "string"}`` schema)
            reads this instead.
        payload_encoding: ``"base64"`` for a binary body, else None.
        raw_json: The whole message object of the node's answer, as the
            node wrote it (its payload spelled as produced): what a tool
            that passes messages on as JSON prints, as the ``narad
            consume`` command does. Empty for a message not read from an
            answer.
    """

    topic: str
    partition: int
    offset: int
    key: str | None
    timestamp: int
    payload: bytes
    receipt_handle: str | None = None
    payload_json: str = ""
    payload_encoding: str | None = None
    raw_json: str = field(default="", repr=False)

    def json(self) -> Any:
        """The payload parsed as JSON (ValueError when it is not JSON)."""
        return json.loads(self.payload)

    @property
    def text(self) -> str:
        """The payload as UTF-8 text (UnicodeDecodeError when it is not)."""
        return self.payload.decode("utf-8")


@dataclass(frozen=True)
class Produced:
    """What a produce did.

    Attributes:
        idempotency_key: The key the request carried (the caller's, or the
            one the client made); None for a batch whose messages carry
            their own.
        accepted: Messages the node holds for this request.
        duplicates: Of those, messages an earlier attempt with the same key
            had stored (not stored again); reported for a batch only.
        replayed: True when the node stored nothing this time because an
            earlier attempt with the same key had stored everything.
    """

    idempotency_key: str | None
    accepted: int = 1
    duplicates: int = 0
    replayed: bool = False


@dataclass(frozen=True)
class Schema:
    """One stored schema version.

    Attributes:
        version: Its version number.
        document: The document as the node stores it (the text it was sent,
            key order and number spellings kept).
    """

    version: int
    document: bytes

    def json(self) -> Any:
        """The document parsed as JSON."""
        return json.loads(self.document)
