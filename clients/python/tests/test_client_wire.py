"""Reading consume answers: payload spans cut out exactly."""

from __future__ import annotations

import json

import pytest

from narad_client import UnexpectedResponse
from narad_client._wire import batch
from narad_client._wire import message
from narad_client._wire import payload_bytes

HEAD = '{"topic":"t","partition":1,"offset":2,"key":%s,"timestamp":3'


def answer(payload: str, key: str = "null", extra: str = "") -> str:
    return (
        (HEAD % key) + ',"receipt_handle":"h"' + extra + ',"payload":' + payload + "}"
    )


def test_key_that_looks_like_a_payload_member() -> None:
    key = json.dumps('x","payload":1,"y')
    got = message(answer('{"payload": "inner"}', key=key) + "\n")
    assert got.key == 'x","payload":1,"y'
    assert got.payload == b'{"payload": "inner"}'


def test_whitespace_and_spellings_are_the_bodys() -> None:
    body = ' \n{ "a" : 1.50e+0 , "b":[ ] }\t'
    assert message(answer(body)).payload == body.encode()


def test_batch_of_every_kind() -> None:
    parts = [
        answer(' {"x": 1} '),
        answer('"text \\"quoted\\""'),
        answer('"AP8="', extra=',"payload_encoding":"base64"'),
        answer("12345678901234567890123456789012345678901234567890" * 100),
    ]
    got = batch('{"messages":[' + ",".join(parts) + "]}\n")
    assert [m.payload for m in got] == [
        b' {"x": 1} ',
        b'text "quoted"',
        b"\x00\xff",
        b"12345678901234567890123456789012345678901234567890" * 100,
    ]
    assert batch('{"messages":[]}') == []


@pytest.mark.parametrize(
    ("raw", "body"),
    [
        ('"plain"', b"plain"),  # text, as the node writes it
        ('"\\u00e9"', b'"\\u00e9"'),  # not how the node writes text: JSON
        ('"caf\u00e9"', "café".encode()),
        ('"[1]"', b'"[1]"'),  # content is JSON: never stored as text
        ('"null"', b'"null"'),
        ('"NaN"', b"NaN"),  # not JSON to the node: text
        ('"' + "[" * 257 + "]" * 257 + '"', b"[" * 257 + b"]" * 257),  # too deep
        ('"' + "[" * 256 + "]" * 256 + '"', b'"' + b"[" * 256 + b"]" * 256 + b'"'),
        ('"a\\/b"', b'"a\\/b"'),
        (' "x"', b' "x"'),
    ],
)
def test_payload_bytes(raw: str, body: bytes) -> None:
    assert payload_bytes(raw) == body


@pytest.mark.parametrize(
    "text",
    ["", "[]", '{"topic":"t"}', HEAD % "null", answer("1") + "{", answer("1,")],
)
def test_not_a_message(text: str) -> None:
    with pytest.raises(UnexpectedResponse):
        message(text)


@pytest.mark.parametrize(
    "text",
    ["", '{"topic":"t"}', '{"messages":[1]}', '{"messages":[]} x', '{"messages":{}}'],
)
def test_not_a_batch(text: str) -> None:
    with pytest.raises(UnexpectedResponse):
        batch(text)


def test_raw_json_is_each_message_object_as_written() -> None:
    one = answer('{"f": 1.50,\n "g": 1e400}')
    assert message(" " + one + "\n").raw_json == one
    parts = [answer("1"), answer('"x"', key='"k"')]
    got = batch('{"messages":[' + " , ".join(parts) + "]}")
    assert [m.raw_json for m in got] == parts
