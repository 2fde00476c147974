"""schemathesis against a live node: every operation of the OpenAPI document
(narad.http.openapi; the node serves the same at ``/v1/openapi.json``),
over a real Valkey, security on, as the root admin.

Each operation is a test: its examples and a bounded number of generated
cases (:data:`MAX_EXAMPLES`), valid and invalid. Every response must come
without a 5xx and conform to the document (status code, content type,
headers, body schema); invalid requests must be refused, requests without
credentials must get 401, methods not described must get 405, and valid
requests must not be refused as invalid (except where :data:`CROSS_FIELD`
says why the document cannot tell). The topics and the user the
document's examples name exist before each operation, so the fuzzer
reaches past 404.
"""

from __future__ import annotations

import json

import pytest
import schemathesis
from hypothesis import HealthCheck
from hypothesis import settings
from schemathesis.checks import positive_data_acceptance

from narad.http import openapi
from tests.httpclient import ADMIN
from tests.nodes import Node
from tests.nodes import start_valkey
from tests.nodes import tcp_url

#: Generated cases per operation, past its examples and coverage cases.
#: About 40 operations: the whole run stays well under a minute on 2 cores.
MAX_EXAMPLES = 30

#: Operations whose rules join fields or need stored state, which OpenAPI
#: cannot state: a request valid by the document may still be a 400 there,
#: so schemathesis's positive_data_acceptance is left out for them (every
#: other check runs, the 400's body included).
CROSS_FIELD = {
    # parent names the topic itself; fanout_delay_ms without parent; a
    # schema the schema type cannot parse; proto_message on a JSON topic
    "POST /v1/topics",
    "PATCH /v1/topics/{name}",
    "POST /v1/topics/{name}/schemas/compatibility",
    # the payload must be what the topic's schema accepts
    "POST /v1/topics/{name}/produce",
    # an idempotency_key per message and the Idempotency-Key header at once;
    # a value the topic's schema refuses
    "POST /v1/topics/{name}/produce/batch",
    # offset needs partition; a partition past the topic's count
    "GET /v1/topics/{name}/consume",
    "HEAD /v1/topics/{name}/consume",
    "GET /v1/topics/{name}/consume/batch",
    # never served: a batch consume would lease messages (always 400)
    "HEAD /v1/topics/{name}/consume/batch",
    # a receipt handle is opaque: one the node did not issue is malformed
    "POST /v1/topics/{name}/ack",
    # a topic cannot be its own child
    "POST /v1/topics/{name}/children",
    # one's own password needs current_password
    "PUT /v1/users/{username}/password",
    # at most 256 patterns in all of a user's grants
    "POST /v1/users",
    "PUT /v1/users/{username}/grants",
    # the registry's schema strings must parse as the subject's type; a
    # version or subject must exist; a topic's subject refuses deletes
    "POST /registry/subjects/{subject}",
    "POST /registry/subjects/{subject}/versions",
    "POST /registry/compatibility/subjects/{subject}/versions",
    "POST /registry/compatibility/subjects/{subject}/versions/{version}",
    "DELETE /registry/subjects/{subject}",
    "DELETE /registry/subjects/{subject}/versions/{version}",
    "DELETE /registry/config/{subject}",
}

SCHEMA = {"type": "object", "properties": {"id": {"type": "integer"}}}


@pytest.fixture(scope="module")
def fuzzed(tmp_path_factory):
    """A node over a Valkey of its own: the fuzzer creates and deletes
    topics and users at random, which no other test should see. Long polls
    are capped short, so a generated ``wait`` costs little."""
    tmp = tmp_path_factory.mktemp("openapi-fuzz")
    valkey = start_valkey(tmp / "valkey")
    node = Node(
        tmp,
        storage_url=tcp_url(valkey),
        env={"NARAD_BROKER_MAX_WAIT_MS": "50", "NARAD_SERVER_ACCESS_LOG": "off"},
    ).start()
    client = node.client()
    try:
        served = client.get("/v1/openapi.json", headers={"Authorization": ""})
        assert served.status == 200
        assert served.json() == openapi.document()
    finally:
        client.close()
    yield node
    node.stop()
    valkey.stop()


def seed(client) -> None:
    """What the document's examples name: a topic with a schema and
    messages, a child, a user. Again before each operation, since the
    fuzzer may have deleted them: what exists already is left as it is."""
    for body in (
        {"name": "orders", "partitions": 2, "schema": SCHEMA},
        {"name": "orders.audit", "parent": "orders"},
    ):
        resp = client.post("/v1/topics", json.dumps(body).encode())
        assert resp.status in (201, 409), resp.data
    for i in range(3):
        # The fuzzer may have made the topic's schema refuse these: a 400
        # is fine, a server error is not.
        resp = client.post("/v1/topics/orders/produce", json.dumps({"id": i}).encode())
        assert resp.status < 500, resp.data
    user = {
        "username": "reader",
        "password": "reader-password",
        "grants": [{"action": "consume", "patterns": ["orders*"]}],
    }
    resp = client.post("/v1/users", json.dumps(user).encode())
    assert resp.status in (201, 409), resp.data


@pytest.fixture
def seeded(fuzzed):
    client = fuzzed.client()
    try:
        seed(client)
    finally:
        client.close()
    return fuzzed


#: The document as the node serves it (the fixture checks they agree);
#: loaded here so that each operation is a test of its own.
schema = schemathesis.openapi.from_dict(openapi.document())
# The root admin's credentials on every case but those that test their
# absence (schemathesis then expects the 401).
schema.config.update(basic_auth=ADMIN)


@schema.parametrize()
@settings(
    max_examples=MAX_EXAMPLES,
    deadline=None,
    suppress_health_check=list(HealthCheck),
    derandomize=True,
    database=None,
)
def test_every_operation_conforms(case, seeded):
    excluded = [positive_data_acceptance] if case.operation.label in CROSS_FIELD else []
    case.call_and_validate(base_url=seeded.base, timeout=30, excluded_checks=excluded)
