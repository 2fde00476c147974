"""The batch produce body's C first pass gives the strict parser's answer.

``narad.http.messages._batch`` takes a batch the C parser proves valid
(``jsontext.loads_pairs``) and sends anything else to the strict path; both
must agree on every body, accepted or refused, to the error's wording.
"""

from __future__ import annotations

import json

import pytest

from narad import jsontext
from narad.broker.messages import PayloadKind
from narad.broker.messages import classify
from narad.errors import InvalidArgument
from narad.http.messages import _accepted_at_once
from narad.http.messages import _batch
from narad.http.messages import _checked_one_by_one

BODIES = [
    b'{"messages": [{"value": "a"}]}',
    b'{"messages": [{"value": "{\\"a\\": 1}"}, {"value": "x", "key": "k"}]}',
    b' \n{"messages":[{"value":"a","partition":0},{"value":"b","partition":2}]} ',
    b'{"messages": [{"value_base64": "AAE="}, {"value": "\\u00e9"}]}',
    b'{"messages": [{"value": "a", "idempotency_key": "k1"}, {"value": "b"}]}',
    b'{"messages": [{"value": "a", "partition": null, "idempotency_key": null}]}',
    # Refused, each its own way: the strict path's refusal is the answer.
    b'{"messages": [{"value": "a", "value": "b"}]}',
    b'{"messages": [{"value": "a"}], "messages": [{"value": "b"}]}',
    b'{"messages": [{"value": "a", "key": {"x": 1, "x": 2}}]}',
    b'{"messages": [{"value": "a", "key": [{"x": 1, "x": 2}]}]}',
    b'{"messages": [{"value": "a", "partition": ' + b"9" * 1100 + b"}]}",
    b'{"messages": [{"value": "a", "partition": ' + b"9" * 5000 + b"}]}",
    b'{"messages": [{"value": "a", "partition": 9007199254740992}]}',
    b'{"messages": [{"value": "a", "partition": -0}]}',
    b'{"messages": [{"value": "a", "partition": 1.0}]}',
    b'{"messages": [{"value": "a", "partition": 1e5000}]}',
    b'{"messages": [{"value": "a", "partition": true}]}',
    b'{"messages": [{"value": "a", "x": NaN}]}',
    b'{"messages": [{"value": NaN}]}',
    b'{"messages": [{"value": "\\ud800"}]}',
    b'{"messages": [{"value": "a", "key": "\\udc00"}]}',
    b'{"messages": [{"value": 1}]}',
    b'{"messages": [{"value": null}]}',
    b'{"messages": [{"value": "a", "value_base64": "AA=="}]}',
    b'{"messages": [{"value_base64": "not base64!"}]}',
    b'{"messages": [{"value_base64": ["AA=="]}]}',
    b'{"messages": [{}]}',
    b'{"messages": [[["value", "a"]]]}',
    b'{"messages": ["a"]}',
    b'{"messages": []}',
    b'{"messages": {}}',
    b'{"messages": {"value": "a"}}',
    b'{"messages": [{"value": "a"}], "extra": 1}',
    b'{"message": [{"value": "a"}]}',
    b"[]",
    b"{}",
    b'{"messages": [{"value": "a"}]} x',
    b'{"messages": [{"value": "a"}]}{}',
    b'\xef\xbb\xbf{"messages": [{"value": "a"}]}',
    '{"messages": [{"value": "a"}]}'.encode("utf-16"),
    b'{"messages": [{"value": "\xff"}]}',
    b'{"messages": [{"value": "a\nb"}]}',
    b"",
    b'{"messages": [{"value": "a", "key": ' + b"[" * 200 + b"]" * 200 + b"}]}",
    b'{"messages": [{"value": "a", "key": ' + b"[" * 6000 + b"]" * 6000 + b"}]}",
    b'{"messages": [' + b",".join([b'{"value": "a"}'] * 1001) + b"]}",
    b'{"messages": [{"value": "a", "idempotency_key": "k"}, '
    b'{"value": "b", "idempotency_key": "k"}]}',
    b'{"messages": [{"value": "a", "idempotency_key": "bad key"}]}',
    b'{"messages": [{"value": "a", "idempotency_key": ""}]}',
]


def _answer(fn, data: bytes, **kwargs):
    try:
        return ("ok", fn(data, **kwargs))
    except InvalidArgument as exc:
        return ("refused", str(exc))


def _strict(data: bytes, *, keyed_request: bool):
    """``_batch`` with its first pass left out."""
    import narad.http.messages as messages

    saved = messages._accepted_at_once
    messages._accepted_at_once = lambda data: None
    try:
        return messages._batch(data, keyed_request=keyed_request)
    finally:
        messages._accepted_at_once = saved


@pytest.mark.parametrize("data", BODIES)
@pytest.mark.parametrize("keyed", [False, True])
def test_the_first_pass_answers_as_the_strict_path(data, keyed):
    assert _answer(_batch, data, keyed_request=keyed) == _answer(
        _strict, data, keyed_request=keyed
    )


@pytest.mark.parametrize("data", BODIES)
def test_what_the_first_pass_takes_the_strict_path_takes_alike(data):
    taken = _accepted_at_once(data)
    if taken is not None:
        assert taken == _checked_one_by_one(data)


def test_the_first_pass_takes_the_common_batch():
    data = json.dumps(
        {"messages": [{"value": json.dumps({"n": i})} for i in range(100)]}
    ).encode()
    taken = _accepted_at_once(data)
    assert taken is not None
    assert [o.payload for o in taken] == [b'{"n": %d}' % i for i in range(100)]
    assert [o.text for o in taken] == [json.dumps({"n": i}) for i in range(100)]


def test_the_first_pass_leaves_repeats_and_deep_bodies_to_the_strict_path():
    assert _accepted_at_once(b'{"messages": [{"value": "a", "value": "b"}]}') is None
    deep = b'{"messages": [{"value": "a", "key": ' + b"[" * 6000 + b"]" * 6000 + b"}]}"
    assert jsontext.loads_pairs(deep) is None
    assert jsontext.loads_pairs(b'{"a": 1, "a": 2}') == (("a", 1), ("a", 2))


PAYLOADS = [
    b"{}",
    b' {"a": [1, 2.5, "x"]} ',
    b"\t1\n",
    b"12 34",
    b"",
    b" ",
    b"null",
    b"nul",
    b'"text"',
    b"NaN",
    b"[Infinity]",
    b"plain text",
    b'{"a": 1} trailing',
    b"[" * 257 + b"]" * 257,
    b"[" * 256 + b"]" * 256,
    b'"' + b"[" * 300 + b'"',
    "é".encode(),
    '"é"'.encode(),
    b"\xff\xfe",
    b'{"a": "\\ud800"}',
]


@pytest.mark.parametrize("payload", PAYLOADS)
def test_classify_with_the_text_given_answers_alike(payload):
    try:
        text = payload.decode("utf-8")
    except UnicodeDecodeError:
        assert classify(payload) is PayloadKind.BINARY
        return
    assert classify(payload, text) is classify(payload)
    expected = _kind_by_json_module(payload, text)
    assert classify(payload) is expected


def _kind_by_json_module(payload: bytes, text: str) -> PayloadKind:
    if jsontext.nesting_depth_exceeds(payload, 256):
        return PayloadKind.TEXT
    try:
        json.loads(text, parse_constant=_refuse)
    except (ValueError, RecursionError):
        return PayloadKind.TEXT
    return PayloadKind.JSON


def _refuse(name: str) -> None:
    raise ValueError(name)
