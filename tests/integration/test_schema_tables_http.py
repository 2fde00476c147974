"""The rulebook case tables, sent over real HTTP to a gunicorn node on Valkey.

Registration cases are topic creates, validation cases are produces, and
compatibility cases are schema changes; each asserts the status and the words
of the error, and that a refused request wrote nothing.
"""

from __future__ import annotations

import json
import uuid

import pytest

from narad import jsontext
from tests.cases import compatibility
from tests.cases import registration
from tests.cases import validation


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


def create_with_schema(http, name: str, schema_text: str):
    body = '{"name": "' + name + '", "partitions": 1, "schema": ' + schema_text + "}"
    return http.post("/v1/topics", body)


def _one_json_text(text: str) -> bool:
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


# A schema that is not one JSON text (trailing data, say) cannot sit inside a
# request body as a member; those cases run through registration directly in
# tests/unit/schema/test_registration.py.
@pytest.mark.parametrize(
    ("schema", "accepted", "words"),
    [
        pytest.param(s, a, w, id=n)
        for n, s, a, w in registration.CASES
        if _one_json_text(s)
    ],
)
def test_registration_case(http, schema, accepted, words):
    name = _name("reg")
    resp = create_with_schema(http, name, schema)
    if accepted:
        assert resp.status == 201, resp.data[:300]
        assert resp.json()["schema_version"] == 1
        stored = http.get(f"/v1/topics/{name}/schemas/1")
        assert stored.status == 200
        assert stored.data == jsontext.compact(schema.encode())
    else:
        assert resp.status == 400, resp.data[:300]
        assert resp.error.startswith("invalid argument: ")
        assert words in resp.error
        assert http.get(f"/v1/topics/{name}").status == 404


@pytest.mark.parametrize(
    ("schema", "payload", "accepted", "words"),
    [pytest.param(s, p, a, w, id=n) for n, s, p, a, w in validation.CASES],
)
def test_validation_case(http, schema, payload, accepted, words):
    name = _name("val")
    created = create_with_schema(http, name, schema)
    assert created.status == 201, created.data[:300]
    resp = http.post(f"/v1/topics/{name}/produce", payload)
    stats = http.get(f"/v1/topics/{name}").json()["partition_stats"][0]
    if accepted:
        assert resp.status == 202, resp.data[:300]
        assert stats["next_offset"] == 1
    else:
        assert resp.status == 400, resp.data[:300]
        assert words in resp.error
        assert len(resp.error.encode()) <= 2048 + len("invalid argument: ")
        assert stats["next_offset"] == 0


@pytest.mark.parametrize(
    ("old", "new", "compatible", "words"),
    [pytest.param(o, n, c, w, id=i) for i, o, n, c, w in compatibility.CASES],
)
def test_compatibility_case(http, old, new, compatible, words):
    name = _name("cmp")
    created = create_with_schema(http, name, old)
    assert created.status == 201, created.data[:300]
    resp = http.patch(f"/v1/topics/{name}", '{"schema": ' + new + "}")
    history = http.get(f"/v1/topics/{name}/schemas").json()
    if compatible:
        assert resp.status == 200, resp.data[:300]
        assert resp.json()["schema_version"] == len(history["versions"])
    else:
        assert resp.status == 400, resp.data[:300]
        assert words in resp.error
        assert [v["version"] for v in history["versions"]] == [1]
