"""Checking that what a replay returns is byte for byte what was produced."""

from __future__ import annotations

import base64
import json

_PAYLOAD = b',"payload":'


def _embedded(body: bytes) -> bytes:
    """The payload inside a consume response body: base64 decoded, else raw.

    A JSON payload is embedded verbatim (the text after ``"payload":``), UTF-8
    text as a JSON string. The head before the payload never holds
    ``,"payload":`` unescaped (keys are JSON strings), so its first
    occurrence is the payload's.
    """
    record = json.loads(body)
    if record.get("payload_encoding") == "base64":
        return base64.b64decode(record["payload"], validate=True)
    start = body.index(_PAYLOAD) + len(_PAYLOAD)
    assert body.endswith(b"}\n"), body[-20:]
    return body[start:-2]


def assert_replays_as_sent(body: bytes, sent: bytes) -> None:
    """Fail unless the consume response ``body`` holds exactly ``sent``."""
    raw = _embedded(body)
    if raw == sent:
        return
    # Text that is not one JSON text comes back as a JSON string.
    assert raw.startswith(b'"'), (raw[:200], sent[:200])
    assert json.loads(raw).encode("utf-8") == sent, (raw[:200], sent[:200])
