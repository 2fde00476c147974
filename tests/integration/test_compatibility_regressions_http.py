"""Issue 19's unsound accepts and crash, over real HTTP: each change was
accepted (or answered 500) though a message the topic already holds would be
refused by the new version. Now the PATCH is a 400 naming the keyword and
where it sits, nothing is stored, and the message still produces."""

from __future__ import annotations

import json

import pytest

from tests.cases import compatibility as cases


def _case(name: str) -> tuple[str, str]:
    [(old, new)] = [(o, n) for n_, o, n, _, _ in cases.CASES if n_ == name]
    return old, new


@pytest.mark.parametrize(
    ("name", "message", "words"),
    [
        (
            "19.5: a success that leant on a failed anyOf candidate is not reused",
            '{"k":[["abcd"]]}',
            "at /$defs/a: maxLength lowered from 5 to 3",
        ),
        (
            "19.6: $dynamicRef reached through a new resource",
            "[1]",
            "at /$defs/m/$defs/l/items: $dynamicRef is accepted only in a part "
            "unchanged byte for byte, reached through the same dynamic scope",
        ),
        (
            "19.7: unevaluatedProperties dropped while adding a property",
            '{"b":1}',
            'at /properties/b: type "integer" no longer allowed',
        ),
        (
            "19.7: a new property restricted by an allOf branch's additionalProperties",
            '{"b":1}',
            'at /properties/b: type "integer" no longer allowed',
        ),
        (
            "19.7: a new property the previous version required takes any value",
            '{"b":1}',
            'at /properties/b: type "string" added',
        ),
        (
            "19.8: a $ref beside type, retargeted, is an answer, not a crash",
            '{"b":[]}',
            'at /properties/b: subschema with $ref "#/$defs/m" beside other keywords '
            "changed: it may only stay identical",
        ),
    ],
    ids=lambda value: value[:40] if isinstance(value, str) else None,
)
def test_refused_and_the_old_message_still_produces(http, topic, name, message, words):
    old, new = _case(name)
    body = '{"name": "' + topic + '", "partitions": 1, "schema": ' + old + "}"
    assert http.post("/v1/topics", body).status == 201
    produce = f"/v1/topics/{topic}/produce"
    assert http.post(produce, message).status == 202
    resp = http.patch(f"/v1/topics/{topic}", '{"schema": ' + new + "}")
    assert resp.status == 400, resp.data[:300]
    assert (
        resp.error == f"invalid argument: schema: incompatible with version 1: {words}"
    )
    history = http.get(f"/v1/topics/{topic}/schemas").json()
    assert [v["version"] for v in history["versions"]] == [1]
    assert json.loads(http.get(f"/v1/topics/{topic}/schemas/1").data) == json.loads(old)
    assert http.post(produce, message).status == 202
