"""Confluent's framing header (narad.schema.framing.split_frame)."""

from __future__ import annotations

import pytest

from narad.errors import InvalidPayload
from narad.schema.framing import split_frame


@pytest.mark.parametrize(
    ("payload", "schema_id", "rest"),
    [
        (b"\x00\x00\x00\x00\x01{}", 1, b"{}"),
        (b"\x00\x00\x00\x01\x00", 256, b""),
        (b"\x00\xff\xff\xff\xff\x00\x02", 2**32 - 1, b"\x00\x02"),
    ],
)
def test_header_read(payload, schema_id, rest):
    assert split_frame(payload) == (schema_id, rest)


@pytest.mark.parametrize(
    ("payload", "words"),
    [
        (b"", "payload is not framed: a message to a topic with framing"),
        (b'{"a": 1}', "got byte 0x7b"),
        (b"\x01\x00\x00\x00\x01", "got byte 0x01"),
        (b"\x00", "payload is 1 bytes, shorter than the framing header"),
        (b"\x00\x00\x00\x01", "payload is 4 bytes, shorter than the framing header"),
    ],
)
def test_header_refused(payload, words):
    with pytest.raises(InvalidPayload) as caught:
        split_frame(payload)
    assert words in caught.value.detail
