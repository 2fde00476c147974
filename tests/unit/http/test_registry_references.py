"""Schema references under /registry, in-process over fakeredis: the three
types' references registered, looked up, shown, checked and validated on
produce; referencedby and the delete protection; every refusal with
Confluent's code, and the resolver's bounds (narad.schema.references).
Over a real node, with Confluent's own clients:
tests/integration/test_registry_references_http.py."""

from __future__ import annotations

import json

from narad import testing
from narad.schema import references as bounds
from narad.storage import SchemaIdentity
from narad.storage import SchemaLimits
from narad.storage import SchemaVersion
from narad.testing import basic_auth

ADDRESS = {
    "type": "record",
    "name": "Address",
    "namespace": "shop",
    "fields": [{"name": "street", "type": "string"}],
}
ORDER = {
    "type": "record",
    "name": "Order",
    "namespace": "shop",
    "fields": [
        {"name": "id", "type": "string"},
        {"name": "ship_to", "type": "shop.Address"},
    ],
}
ADDRESS_REF = {"name": "shop.Address", "subject": "shop.Address", "version": 1}
CUSTOMER = {
    "$schema": "http://json-schema.org/draft-07/schema#",
    "type": "object",
    "properties": {"name": {"$ref": "#/definitions/name"}},
    "required": ["name"],
    "definitions": {"name": {"type": "string"}},
}
INVOICE = {
    "$schema": "http://json-schema.org/draft-07/schema#",
    "type": "object",
    "properties": {
        "customer": {"$ref": "customer.json"},
        "payer": {"$ref": "customer.json#/definitions/name"},
    },
    "required": ["customer"],
}
CUSTOMER_REF = {"name": "customer.json", "subject": "customer", "version": 1}
ADDRESS_PROTO = """
syntax = "proto3";
package common;
message Address { string street = 1; }
"""
ORDER_PROTO = """
syntax = "proto3";
package shop;
import "common/address.proto";
import "google/protobuf/timestamp.proto";
message Order {
  string id = 1;
  common.Address ship_to = 2;
  google.protobuf.Timestamp at = 3;
}
"""
PROTO_REF = {"name": "common/address.proto", "version": 1}


def register(client, subject, schema, references=(), kind=None):
    body = {"schema": schema if isinstance(schema, str) else json.dumps(schema)}
    if references:
        body["references"] = list(references)
    if kind:
        body["schemaType"] = kind
    return client.simulate_post(f"/registry/subjects/{subject}/versions", json=body)


def registered(client, subject, schema, references=(), kind=None) -> int:
    resp = register(client, subject, schema, references, kind)
    assert resp.status_code == 200, resp.text
    return resp.json["id"]


def refused(resp, status: int, code: int) -> str:
    assert (resp.status_code, resp.json["error_code"]) == (status, code), resp.text
    return resp.json["message"]


def registry_of(client):
    return client.app._router.find("/registry/subjects/s/versions")[0].registry


def test_an_avro_schema_uses_a_named_type_of_a_referenced_subject(client):
    address = registered(client, "shop.Address", ADDRESS)
    order = registered(client, "shop.Order", ORDER, [ADDRESS_REF])
    assert order != address
    # The same schema with the same references: the same id, no version.
    assert registered(client, "shop.Order", ORDER, [ADDRESS_REF]) == order
    assert client.simulate_get("/registry/subjects/shop.Order/versions").json == [1]
    # Every answer showing the schema shows its references.
    shown = client.simulate_get("/registry/subjects/shop.Order/versions/1").json
    assert shown["references"] == [ADDRESS_REF]
    assert json.loads(shown["schema"]) == ORDER
    by_id = client.simulate_get(f"/registry/schemas/ids/{order}").json
    assert by_id["references"] == [ADDRESS_REF]
    looked = client.simulate_post(
        "/registry/subjects/shop.Order",
        json={"schema": json.dumps(ORDER), "references": [ADDRESS_REF]},
    )
    assert looked.status_code == 200
    assert (looked.json["id"], looked.json["references"]) == (order, [ADDRESS_REF])
    # Without its references the schema names a type nothing defines.
    message = refused(register(client, "shop.Order", ORDER), 422, 42201)
    assert "unknown type 'shop.Address'" in message
    lookup = client.simulate_post(
        "/registry/subjects/shop.Order", json={"schema": json.dumps(ORDER)}
    )
    refused(lookup, 422, 42201)
    # The referenced subject's versions say who references them.
    assert client.simulate_get(
        "/registry/subjects/shop.Address/versions/1/referencedby"
    ).json == [order]
    assert (
        client.simulate_get(
            "/registry/subjects/shop.Order/versions/latest/referencedby"
        ).json
        == []
    )
    missing = client.simulate_get(
        "/registry/subjects/shop.Address/versions/9/referencedby"
    )
    refused(missing, 404, 40402)


def test_avro_references_are_checked_for_compatibility(client):
    registered(client, "shop.Address", ADDRESS)
    wider = {
        **ADDRESS,
        "fields": [*ADDRESS["fields"], {"name": "city", "type": "string"}],
    }
    client.simulate_put("/registry/config/shop.Address", json={"compatibility": "NONE"})
    registered(client, "shop.Address", wider)
    registered(client, "shop.Order", ORDER, [ADDRESS_REF])
    # Version 2 of the address adds a field without a default: an order
    # reading with it cannot read what version 1 wrote.
    newer = {**ADDRESS_REF, "version": 2}
    check = client.simulate_post(
        "/registry/compatibility/subjects/shop.Order/versions/latest?verbose=true",
        json={"schema": json.dumps(ORDER), "references": [newer]},
    )
    assert check.status_code == 200, check.text
    assert check.json["is_compatible"] is False
    assert any("city" in m for m in check.json["messages"])
    refused(register(client, "shop.Order", ORDER, [newer]), 409, 409)
    same = client.simulate_post(
        "/registry/compatibility/subjects/shop.Order/versions/1",
        json={"schema": json.dumps(ORDER), "references": [ADDRESS_REF]},
    )
    assert same.json == {"is_compatible": True}


def test_a_topic_subject_takes_references_and_validates_with_them(client):
    registered(client, "shop.Address", ADDRESS)
    created = client.simulate_post(
        "/v1/topics",
        json={"name": "orders", "partitions": 1, "schema_type": "AVRO"},
    )
    assert created.status_code == 201, created.text
    order = registered(client, "orders-value", ORDER, [ADDRESS_REF])
    shown = client.simulate_get("/registry/subjects/orders-value/versions/1").json
    assert (shown["id"], shown["references"]) == (order, [ADDRESS_REF])
    # /v1 shows the version's references beside its document.
    version = client.simulate_get("/v1/topics/orders/schemas/1")
    assert json.loads(version.headers["narad-schema-references"]) == [ADDRESS_REF]
    assert json.loads(version.text) == ORDER
    # The topic's history holds it; produce validates with the referenced
    # type (Avro's JSON encoding, the topic's default).
    good = client.simulate_post(
        "/v1/topics/orders/produce",
        body=json.dumps({"id": "1", "ship_to": {"street": "Main"}}),
    )
    assert good.status_code == 202, good.text
    bad = client.simulate_post(
        "/v1/topics/orders/produce",
        body=json.dumps({"id": "1", "ship_to": {"street": 7}}),
    )
    assert bad.status_code == 400
    assert "street" in bad.json["error"]
    # A topic's versions can be referenced too.
    invoice = {
        "type": "record",
        "name": "Invoice",
        "namespace": "shop",
        "fields": [{"name": "order", "type": "shop.Order"}],
    }
    ref = {"name": "shop.Order", "subject": "orders-value", "version": 1}
    invoice_id = registered(client, "shop.Invoice", invoice, [ref])
    referrers = client.simulate_get(
        "/registry/subjects/orders-value/versions/1/referencedby"
    )
    assert referrers.json == [invoice_id]


def test_json_schema_references_name_the_uris_refs_use(client):
    registered(client, "customer", CUSTOMER, kind="JSON")
    invoice = registered(client, "invoice", INVOICE, [CUSTOMER_REF], kind="JSON")
    shown = client.simulate_get(f"/registry/schemas/ids/{invoice}").json
    assert (shown["schemaType"], shown["references"]) == ("JSON", [CUSTOMER_REF])
    # The stored schema is the one given, not the bundle.
    assert json.loads(shown["schema"]) == INVOICE
    message = refused(register(client, "invoice2", INVOICE, kind="JSON"), 422, 42201)
    assert "does not resolve inside the document" in message
    # A framed topic validates each message under its id with the references.
    created = client.simulate_post(
        "/v1/topics",
        json={"name": "invoices", "partitions": 1, "framing": "confluent"},
    )
    assert created.status_code == 201, created.text
    topic_id = registered(client, "invoices-value", INVOICE, [CUSTOMER_REF], "JSON")

    def produce(value) -> int:
        framed = b"\x00" + topic_id.to_bytes(4, "big") + json.dumps(value).encode()
        return client.simulate_post(
            "/v1/topics/invoices/produce", body=framed
        ).status_code

    assert produce({"customer": {"name": "Ann"}, "payer": "Bob"}) == 202
    assert produce({"customer": {"name": 1}}) == 400
    assert produce({"customer": {}, "payer": "Bob"}) == 400
    assert produce({"customer": {"name": "Ann"}, "payer": 2}) == 400


def test_protobuf_references_are_the_imported_files(client):
    # The reference's name is the import path; its subject any subject.
    registered(client, "common_address.proto", ADDRESS_PROTO, kind="PROTOBUF")
    ref = {**PROTO_REF, "subject": "common_address.proto"}
    order = registered(client, "shop.Order", ORDER_PROTO, [ref], kind="PROTOBUF")
    shown = client.simulate_get("/registry/subjects/shop.Order/versions/1").json
    assert shown["references"] == [ref]
    assert 'import "common/address.proto";' in shown["schema"]
    assert 'import "google/protobuf/timestamp.proto";' in shown["schema"]
    # The same file with the import and without the reference: the import
    # is not found.
    message = refused(register(client, "x", ORDER_PROTO, kind="PROTOBUF"), 422, 42201)
    assert "common/address.proto" in message
    assert registered(client, "shop.Order", ORDER_PROTO, [ref], "PROTOBUF") == order


def test_references_that_do_not_resolve_are_refused(client):
    registered(client, "shop.Address", ADDRESS)
    registered(client, "customer", CUSTOMER, kind="JSON")
    cases = [
        (
            {"name": "a", "subject": "nope", "version": 1},
            'No schema reference found for subject "nope" and version 1',
        ),
        (
            {**ADDRESS_REF, "version": 2},
            'No schema reference found for subject "shop.Address" and version 2',
        ),
        (CUSTOMER_REF, "a AVRO schema can only reference AVRO schemas"),
    ]
    for reference, words in cases:
        message = refused(register(client, "o", ORDER, [reference]), 422, 42201)
        assert words in message.replace("an AVRO", "a AVRO")
    shapes = [
        "not a list",
        [1],
        [{"subject": "shop.Address", "version": 1}],
        [{"name": "", "subject": "shop.Address", "version": 1}],
        [{"name": "n", "subject": "a/b", "version": 1}],
        [{"name": "n", "subject": "shop.Address", "version": 0}],
        [{"name": "n", "subject": "shop.Address", "version": "1"}],
        [{"name": "n", "subject": "shop.Address", "version": True}],
        [ADDRESS_REF, ADDRESS_REF],
        [{**ADDRESS_REF, "name": f"n{i}"} for i in range(bounds.MAX_REFERENCES + 1)],
    ]
    for value in shapes:
        resp = client.simulate_post(
            "/registry/subjects/o/versions",
            json={"schema": json.dumps(ORDER), "references": value},
        )
        refused(resp, 422, 42201)
    # Nothing was registered by any of them.
    refused(client.simulate_get("/registry/subjects/o/versions"), 404, 40401)


def test_a_referenced_version_is_not_deleted(client):
    address = registered(client, "shop.Address", ADDRESS)
    order = registered(client, "shop.Order", ORDER, [ADDRESS_REF])
    for path in (
        "/registry/subjects/shop.Address/versions/1",
        "/registry/subjects/shop.Address",
    ):
        message = refused(client.simulate_delete(path), 422, 42206)
        assert message == (
            "One or more references exist to the schema "
            "{magic=1,keytype=SCHEMA,subject=shop.Address,version=1}."
        )
    # Once the referring version is soft-deleted, a soft delete may go on;
    # a permanent one waits until the referrer is gone for good.
    assert client.simulate_delete("/registry/subjects/shop.Order/versions/1").json == 1
    assert (
        client.simulate_get(
            "/registry/subjects/shop.Address/versions/1/referencedby"
        ).json
        == []
    )
    assert client.simulate_delete("/registry/subjects/shop.Address").json == [1]
    permanent = "/registry/subjects/shop.Address/versions/1?permanent=true"
    refused(client.simulate_delete(permanent), 422, 42206)
    gone = client.simulate_delete("/registry/subjects/shop.Order?permanent=true")
    assert gone.json == [1]
    assert client.simulate_delete(permanent).json == 1
    refused(client.simulate_get(f"/registry/schemas/ids/{order}"), 404, 40403)
    assert address


def test_a_version_of_a_subject_may_reference_another_of_the_same(client):
    registered(client, "shop.Address", ADDRESS)
    client.simulate_put("/registry/config/s", json={"compatibility": "NONE"})
    registered(client, "s", ADDRESS)
    ref = {"name": "shop.Address", "subject": "s", "version": 1}
    registered(client, "s", {**ORDER, "name": "Other"}, [ref])
    # Deleting the whole subject deletes the referrer with it.
    assert client.simulate_delete("/registry/subjects/s").json == [1, 2]


def chain(storage, links: dict[str, str]) -> None:
    """Standalone subjects written straight to the storage, each version 1
    referencing the next subject's version 1 (what the registry's checks
    would never store: a cycle)."""
    limits = SchemaLimits(4 << 20, 256 << 20, 1000)
    for subject, target in links.items():
        document = json.dumps({**ADDRESS, "name": subject.capitalize()}).encode()
        refs = json.dumps([{"name": target, "subject": target, "version": 1}])
        version = SchemaVersion(
            0,
            document,
            False,
            identity=SchemaIdentity("AVRO", subject),
            references=refs.encode(),
        )
        result = storage.register_subject_version(
            subject, version, expected_latest=0, topic="", limits=limits
        )
        assert result.status.name == "OK"


def test_a_cycle_of_references_is_refused(client):
    chain(registry_of(client).storage, {"a": "b", "b": "a"})
    ref = {"name": "A", "subject": "a", "version": 1}
    message = refused(register(client, "c", ADDRESS, [ref]), 422, 42201)
    assert (
        message == "references form a cycle: a version 1 -> b version 1 -> a version 1"
    )


def test_references_are_bounded(client, monkeypatch):
    registered(client, "r0", ADDRESS)
    for n in range(1, 4):
        ref = {"name": "shop.Address", "subject": f"r{n - 1}", "version": 1}
        registered(client, f"r{n}", {**ADDRESS, "name": f"A{n}"}, [ref])
    deepest = {"name": "shop.Address", "subject": "r3", "version": 1}
    monkeypatch.setattr(bounds, "MAX_REFERENCE_DEPTH", 3)
    message = refused(register(client, "x", ADDRESS, [deepest]), 422, 42201)
    assert message.startswith("references nest deeper than 3 levels")
    monkeypatch.setattr(bounds, "MAX_REFERENCE_DEPTH", 16)
    monkeypatch.setattr(bounds, "MAX_REFERENCED", 3)
    message = refused(register(client, "x", ADDRESS, [deepest]), 422, 42201)
    assert "more than 3 versions" in message
    monkeypatch.setattr(bounds, "MAX_REFERENCED", 256)
    monkeypatch.setattr(bounds, "MAX_REFERENCED_BYTES", 300)
    message = refused(register(client, "x", ADDRESS, [deepest]), 422, 42201)
    assert "larger than 0 KiB" in message
    monkeypatch.setattr(bounds, "MAX_REFERENCED_BYTES", 1 << 20)
    assert registered(client, "x", {**ADDRESS, "name": "X"}, [deepest])


def test_referencing_a_subject_takes_reading_it(tmp_path):
    secure = testing.client(testing.make_config(tmp_path, security__enabled=True))
    registered(secure, "shop.Address", ADDRESS)
    registered(secure, "team.Address", {**ADDRESS, "namespace": "team"})
    body = {"username": "creator", "password": "a-good-password"}
    grants = [{"action": "create", "patterns": ["team.*"]}]
    made = secure.simulate_post("/v1/users", json={**body, "grants": grants})
    assert made.status_code == 201
    creator = basic_auth("creator", "a-good-password")
    order = {**ORDER, "namespace": "team"}
    order["fields"] = [order["fields"][0], {"name": "to", "type": "team.Address"}]
    team_ref = {"name": "team.Address", "subject": "team.Address", "version": 1}
    ok = secure.simulate_post(
        "/registry/subjects/team.Order/versions",
        json={"schema": json.dumps(order), "references": [team_ref]},
        headers=creator,
    )
    assert ok.status_code == 200, ok.text
    for path in (
        "/registry/subjects/team.Other/versions",
        "/registry/subjects/team.Order",
        "/registry/compatibility/subjects/team.Order/versions/latest",
    ):
        resp = secure.simulate_post(
            path,
            json={"schema": json.dumps(ORDER), "references": [ADDRESS_REF]},
            headers=creator,
        )
        message = refused(resp, 403, 40301)
        assert "may not reference subject shop.Address" in message


def test_a_subject_may_hold_a_slash_sent_encoded(client):
    # Confluent's Protobuf serializer names an imported file's subject by
    # its import path. The server decodes the path before routing; the
    # request as sent (RAW_URI) keeps the "%2F" inside its segment.
    def sent(method, path, **kw):
        return client.simulate_request(method, path, extras={"RAW_URI": path}, **kw)

    subject = "/registry/subjects/common%2Faddress.proto"
    made = sent(
        "POST",
        subject + "/versions",
        json={"schema": ADDRESS_PROTO, "schemaType": "PROTOBUF"},
    )
    assert made.status_code == 200, made.text
    assert client.simulate_get("/registry/subjects").json == ["common/address.proto"]
    shown = sent("GET", subject + "/versions/1")
    assert shown.json["subject"] == "common/address.proto"
    ref = {**PROTO_REF, "subject": "common/address.proto"}
    assert registered(client, "shop.Order", ORDER_PROTO, [ref], "PROTOBUF")
    assert sent("GET", subject + "/versions/1/referencedby").status_code == 200
    # Elsewhere an encoded slash still routes nowhere, and one sent plain
    # is a path boundary.
    for path in (
        "/registry%2Fsubjects",
        "/registry/subjects/common/address.proto/versions",
        "/registry/subjects/shop.Order/versions/1%2F2",
    ):
        assert sent("GET", path).status_code in (404, 422), path
    assert sent("POST", "/v1/topics/t%2Fproduce", body=b"x").status_code == 404
