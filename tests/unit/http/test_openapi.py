"""The OpenAPI document (narad.http.openapi) against the app it describes:
every route and method the falcon app serves is in it and nothing else, it
is a valid OpenAPI 3.1 document, and it is served without credentials.
Whether the server's answers conform to it is
tests/integration/test_openapi_fuzz_http.py's (schemathesis)."""

from __future__ import annotations

import json
import re

import falcon.inspect
import pytest
from openapi_spec_validator import OpenAPIV31SpecValidator
from openapi_spec_validator import validate

from narad import testing
from narad.http import children
from narad.http import messages
from narad.http import openapi
from narad.http import schemas
from narad.http import topics
from narad.http import users
from narad.http.middleware import PUBLIC
from narad.http.registry import MEDIA as REGISTRY_MEDIA
from narad.testing import basic_auth

METHODS = ("get", "head", "post", "put", "patch", "delete", "options", "trace")


@pytest.fixture
def secure(tmp_path):
    return testing.client(testing.make_config(tmp_path, security__enabled=True))


def served_operations(app: falcon.App) -> set[tuple[str, str]]:
    """(path template, method) of every responder the app's router holds,
    falcon's own (405, OPTIONS) left out."""
    found = set()
    for route in falcon.inspect.inspect_routes(app):
        for method in route.methods:
            if not method.internal:
                found.add((route.path, method.method.lower()))
    return found


def documented_operations(document: dict) -> set[tuple[str, str]]:
    return {
        (path, method)
        for path, item in document["paths"].items()
        for method in item
        if method in METHODS
    }


def test_every_route_and_method_is_documented_and_nothing_else(secure):
    served = served_operations(secure.app)
    documented = documented_operations(openapi.document())
    assert served - documented == set(), "served but not in the document"
    assert documented - served == set(), "in the document but not served"
    # The walk sees the routes (not an empty router).
    assert ("/v1/topics/{name}/produce", "post") in served
    assert len(served) > 30


def test_the_walk_would_see_a_route_missing_from_the_document(secure):
    document = openapi.document()
    del document["paths"]["/v1/topics/{name}/ack"]
    del document["paths"]["/v1/users"]["post"]
    missing = served_operations(secure.app) - documented_operations(document)
    assert missing == {("/v1/topics/{name}/ack", "post"), ("/v1/users", "post")}


def test_the_document_is_valid_openapi_3_1():
    document = openapi.document()
    assert document["openapi"].startswith("3.1.")
    validate(document, cls=OpenAPIV31SpecValidator)


def test_the_validator_refuses_a_broken_document():
    document = openapi.document()
    document["paths"]["/v1/topics"]["get"]["responses"]["200"] = {"content": 1}
    with pytest.raises(Exception, match=r"description|content"):
        validate(document, cls=OpenAPIV31SpecValidator)


def test_every_reference_resolves():
    document = openapi.document()
    text = json.dumps(document)
    for ref in set(re.findall(r'"\$ref": "#/([^"]+)"', text)):
        node = document
        for part in ref.split("/"):
            assert part in node, f"#/{ref} does not resolve"
            node = node[part]


def test_every_operation_names_its_error_shape_and_security():
    document = openapi.document()
    ids = set()
    for path, item in document["paths"].items():
        for method, operation in item.items():
            ids.add(operation["operationId"])
            statuses = set(operation["responses"])
            # HEAD of consume/batch never succeeds: it would lease messages.
            if operation["operationId"] != "consumeBatchHead":
                assert any(s.startswith("2") for s in statuses), (path, method)
            public = path in PUBLIC and path != "/metrics"
            registry = path.startswith("/registry")
            if public:
                assert operation["security"] == [], (path, method)
            else:
                # The shared error responses name the 401 with its challenge.
                assert "401" in statuses, (path, method)
            for status, response in operation["responses"].items():
                if "$ref" in response:
                    name = response["$ref"].rsplit("/", 1)[1]
                    response = document["components"]["responses"][name]
                if status >= "400" and method != "head" and registry:
                    # Confluent's error shape under /registry.
                    schema = response["content"][REGISTRY_MEDIA]["schema"]
                    assert schema == {"$ref": "#/components/schemas/RegistryError"}
                elif status >= "400" and method != "head":
                    schema = response["content"]["application/json"]["schema"]
                    assert schema == {"$ref": "#/components/schemas/Error"}
                if method == "head":
                    assert "content" not in response, (path, method, status)
    assert len(ids) == len(documented_operations(document)), "operationIds repeat"
    metrics = document["paths"]["/metrics"]["get"]
    assert metrics["security"] == [{"basic": []}, {}]


def test_topic_fields_name_the_schema_settings():
    schemas = openapi.document()["components"]["schemas"]
    for name in ("TopicCreate", "TopicAlter", "Topic", "TopicDescription"):
        assert {"schema_type", "encoding", "proto_message"} <= set(
            schemas[name]["properties"]
        ), name
    assert set(schemas["TopicCreate"]["properties"]["encoding"]["enum"]) == {
        "json",
        "binary",
    }


def test_served_without_credentials_as_the_document(secure):
    resp = secure.simulate_get(openapi.PATH, headers={"Authorization": ""})
    assert resp.status_code == 200
    assert resp.headers["content-type"].startswith("application/json")
    assert resp.json == openapi.document()
    head = secure.simulate_head(openapi.PATH, headers={"Authorization": ""})
    assert head.status_code == 200
    # Wrong credentials do not matter either: nothing is checked.
    wrong = secure.simulate_get(openapi.PATH, headers=basic_auth("admin", "nope"))
    assert wrong.status_code == 200
    # The rest of /v1 still needs them.
    assert (
        secure.simulate_get("/v1/topics", headers={"Authorization": ""}).status_code
        == 401
    )


def test_stated_bounds_are_the_checks_bounds(secure):
    """A bound the document states is the one the resource enforces: one
    past it is refused, the bound itself is not."""
    schemas = openapi.document()["components"]["schemas"]
    high = schemas["TopicCreate"]["properties"]["partitions"]["maximum"]
    ok = secure.simulate_post("/v1/topics", json={"name": "a", "partitions": high})
    assert ok.status_code == 201, ok.text
    over = secure.simulate_post(
        "/v1/topics", json={"name": "b", "partitions": high + 1}
    )
    assert over.status_code == 400
    assert "partitions" in over.json["error"]


@pytest.mark.parametrize(
    ("schema", "fields"),
    [
        ("TopicCreate", topics.CREATE_FIELDS),
        ("TopicAlter", topics.ALTER_FIELDS),
        ("BatchEntry", messages.BATCH_ENTRY_FIELDS),
        ("AckBatch", messages.ACK_BATCH_FIELDS),
        ("Attach", children.ATTACH_FIELDS),
        ("CompatibilityCheck", schemas.CHECK_FIELDS),
        ("UserCreate", users.CREATE_FIELDS),
        ("PasswordChange", users.PASSWORD_FIELDS),
    ],
)
def test_request_bodies_name_the_fields_the_resources_take(schema, fields):
    """A field a resource starts taking (or stops) changes the document."""
    body = openapi.document()["components"]["schemas"][schema]
    assert set(body["properties"]) == set(fields)
    assert body["additionalProperties"] is False
