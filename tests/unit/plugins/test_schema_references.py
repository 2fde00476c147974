"""Schema references in each type (SchemaOptions.references): Avro's named
types, Protobuf's imported files, JSON Schema's $ref URIs, through parse,
load, compile, compile_framed and check. The registry's side:
tests/unit/http/test_registry_references.py."""

from __future__ import annotations

import base64
import json

import pytest
from google.protobuf import descriptor_pb2

from narad.errors import InvalidArgument
from narad.errors import InvalidSchema
from narad.plugins import Plugins
from narad.plugins import get_plugin_manager
from narad.schematypes import Mode
from narad.schematypes import Reference
from narad.schematypes import SchemaOptions
from narad.schematypes import UnusableVersion
from narad.schematypes import walk_references
from narad_avro.schematype import AvroType
from narad_jsonschema.bundling import bundle
from narad_jsonschema.bundling import dump
from narad_protobuf.compiler import compile_proto
from narad_protobuf.schematype import ProtobufType


def ref(name, subject, document, *references, kind="AVRO", version=1):
    text = document if isinstance(document, bytes) else json.dumps(document).encode()
    return Reference(name, subject, version, kind, text, tuple(references))


# -- the walk ------------------------------------------------------------------


def test_walk_gives_each_version_once_after_its_own():
    d = ref("d", "d", {})
    b = ref("b", "b", {}, d)
    c = ref("c", "c", {}, d)
    a = ref("a", "a", {}, b, c)
    # A second reference to d by another name is the same version.
    again = ref("other", "d", {})
    assert [r.subject for r in walk_references((a, again))] == ["d", "b", "c", "a"]


# -- Avro ----------------------------------------------------------------------

ADDRESS = {
    "type": "record",
    "name": "Address",
    "namespace": "shop",
    "fields": [{"name": "street", "type": "string"}],
}
COUNTRY = {"type": "enum", "name": "Country", "namespace": "geo", "symbols": ["NL"]}
PLACE = {
    "type": "record",
    "name": "Place",
    "namespace": "shop",
    "fields": [
        {"name": "address", "type": "shop.Address"},
        {"name": "country", "type": "geo.Country"},
    ],
}
ORDER = {
    "type": "record",
    "name": "Order",
    "namespace": "shop",
    "fields": [
        {"name": "from", "type": "shop.Address"},
        {"name": "to", "type": "shop.Place"},
    ],
}


def avro_refs() -> tuple[Reference, ...]:
    address = ref("shop.Address", "address", ADDRESS)
    country = ref("geo.Country", "country", COUNTRY)
    # Place references Address too: a diamond, defined once.
    place = ref("shop.Place", "place", PLACE, address, country)
    return (address, place)


def test_avro_uses_named_types_of_references_and_theirs():
    avro = AvroType()
    options = SchemaOptions("binary", references=avro_refs())
    parsed = avro.parse(json.dumps(ORDER).encode(), options)
    # The stored document is the one given; the identity holds the types.
    assert json.loads(parsed.stored) == ORDER
    assert b"street" in parsed.identity and b"NL" in parsed.identity
    loaded = avro.load(parsed.stored, options)
    assert loaded.identity == parsed.identity
    validate = avro.compile(loaded, options, "u").validate
    # from.street "a", to.address.street "b", to.country NL (index 0).
    validate(b"\x02a\x02b\x00")
    with pytest.raises(InvalidArgument, match="enum"):
        validate(b"\x02a\x02b\x02")  # enum index 1 of one symbol
    json_check = avro.compile(
        loaded, SchemaOptions("json", references=avro_refs()), "u"
    )
    json_check.validate(
        json.dumps(
            {
                "from": {"street": "a"},
                "to": {"address": {"street": "b"}, "country": "NL"},
            }
        ).encode()
    )


def test_avro_refuses_what_references_do_not_define_or_define_twice():
    avro = AvroType()
    with pytest.raises(InvalidSchema, match=r"unknown type 'shop\.Address'"):
        avro.parse(json.dumps(ORDER).encode(), SchemaOptions("binary"))
    twice = SchemaOptions(
        "binary", references=(ref("shop.Address", "address", ADDRESS),)
    )
    with pytest.raises(InvalidSchema, match=r"'shop\.Address' is defined twice"):
        avro.parse(json.dumps(ADDRESS).encode(), twice)
    broken = SchemaOptions("binary", references=(ref("x", "x", {"type": "nope"}),))
    with pytest.raises(InvalidSchema, match="reference 'x'"):
        avro.parse(b'"string"', broken)


def test_avro_checks_compatibility_through_referenced_types():
    avro = AvroType()
    old = avro.parse(
        json.dumps(ORDER).encode(), SchemaOptions("binary", references=avro_refs())
    )
    wider = {
        **ADDRESS,
        "fields": [*ADDRESS["fields"], {"name": "zip", "type": "string"}],
    }
    address = ref("shop.Address", "address", wider, version=2)
    country = ref("geo.Country", "country", COUNTRY)
    changed = (address, ref("shop.Place", "place", PLACE, address, country))
    options = SchemaOptions("binary", references=changed)
    new = avro.parse(json.dumps(ORDER).encode(), options)
    report = avro.check(new, [(1, old)], Mode("BACKWARD"), options, first=False)
    assert report.findings and "zip" in str(report.findings[0])
    assert not avro.check(
        new, [(1, old)], Mode("FORWARD"), options, first=False
    ).findings


# -- Protobuf ------------------------------------------------------------------

ADDRESS_PROTO = """
syntax = "proto3";
package common;
import "common/geo.proto";
message Address { string street = 1; common.Country country = 2; }
"""
GEO_PROTO = """
syntax = "proto3";
package common;
message Country { string code = 1; }
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


def proto_refs() -> tuple[Reference, ...]:
    protobuf = ProtobufType()
    geo = protobuf.parse(json.dumps(GEO_PROTO).encode(), SchemaOptions("binary"))
    geo_ref = ref("common/geo.proto", "geo", geo.stored, kind="PROTOBUF")
    address = protobuf.parse(
        json.dumps(ADDRESS_PROTO).encode(),
        SchemaOptions("binary", references=(geo_ref,)),
    )
    return (
        ref(
            "common/address.proto", "address", address.stored, geo_ref, kind="PROTOBUF"
        ),
    )


def test_protobuf_references_give_the_imported_files():
    protobuf = ProtobufType()
    options = SchemaOptions("binary", references=proto_refs())
    parsed = protobuf.parse(json.dumps(ORDER_PROTO).encode(), options)
    assert parsed.message_name == "shop.Order"
    names = [f.name for f in parsed.value.declared.file]
    assert names == ["common/address.proto", "common/geo.proto", "schema.proto"]
    # Stored with its dependencies: it loads and validates with none given.
    loaded = protobuf.load(parsed.stored, SchemaOptions("binary"))
    assert loaded.identity == parsed.identity
    message = b"\x0a\x011\x12\x07\x0a\x01s\x12\x02\x0a\x00"
    protobuf.compile(loaded, SchemaOptions("binary"), "u").validate(message)
    protobuf.compile_framed(loaded, SchemaOptions("binary"), "u").validate(
        b"\x00" + message
    )
    with pytest.raises(Exception, match="ship_to"):
        protobuf.compile(loaded, SchemaOptions("binary"), "u").validate(b"\x12\x01\xff")
    served = protobuf.registry_schema(parsed.stored)
    assert 'import "common/address.proto";' in served


def test_protobuf_takes_confluents_file_descriptor_with_references():
    protobuf = ProtobufType()
    references = proto_refs()
    deps = descriptor_pb2.FileDescriptorSet()
    for name, text in (("common/geo.proto", GEO_PROTO), ("common/address.proto", None)):
        if text is None:
            file = descriptor_pb2.FileDescriptorSet.FromString(
                compile_proto(ADDRESS_PROTO, dependencies=deps.SerializeToString())
            ).file[-1]
        else:
            file = descriptor_pb2.FileDescriptorSet.FromString(
                compile_proto(text)
            ).file[-1]
        file.name = name
        deps.file.append(file)
    main = descriptor_pb2.FileDescriptorSet.FromString(
        compile_proto(ORDER_PROTO, dependencies=deps.SerializeToString())
    ).file[-1]
    main.name = "shop/order.proto"
    text = base64.b64encode(main.SerializeToString()).decode()
    options = SchemaOptions("binary", references=references)
    parsed = protobuf.parse(json.dumps(text).encode(), options)
    assert parsed.message_name == "shop.Order"
    # What Confluent's deserializers are served is the main file alone.
    served = base64.b64decode(protobuf.registry_schema(parsed.stored, "serialized"))
    assert (
        descriptor_pb2.FileDescriptorProto.FromString(served).name == "shop/order.proto"
    )
    with pytest.raises(InvalidSchema, match="give a schema reference named"):
        protobuf.parse(json.dumps(text).encode(), SchemaOptions("binary"))


def test_protobuf_refuses_a_reference_named_as_the_compiled_file():
    protobuf = ProtobufType()
    (address,) = proto_refs()
    clash = Reference(
        "schema.proto", "a", 1, "PROTOBUF", address.document, address.references
    )
    with pytest.raises(InvalidSchema, match=r"schema\.proto"):
        protobuf.parse(
            json.dumps(ORDER_PROTO).encode(),
            SchemaOptions("binary", references=(clash,)),
        )


# -- JSON Schema ---------------------------------------------------------------

DRAFT7 = "http://json-schema.org/draft-07/schema#"
NAME = {"$schema": DRAFT7, "type": "string", "minLength": 1}
CUSTOMER = {
    "$schema": DRAFT7,
    "$id": "https://example.com/schemas/customer.json",
    "type": "object",
    "properties": {
        "name": {"$ref": "name.json"},
        "tier": {"$ref": "#/definitions/tier"},
    },
    "required": ["name"],
    "definitions": {"tier": {"enum": ["gold", "silver"]}},
}
INVOICE = {
    "$schema": DRAFT7,
    "$id": "https://example.com/schemas/invoice.json",
    "type": "object",
    "properties": {
        "customer": {"$ref": "customer.json"},
        "tier": {"$ref": "https://example.com/schemas/customer.json#/definitions/tier"},
        "payer": {"$ref": "name.json"},
        "amount": {"type": "number", "multipleOf": 0.01},
        "const": {"const": {"$ref": "customer.json"}},
    },
    "required": ["customer"],
}


@pytest.fixture(scope="module")
def json_type():
    plugins = Plugins(get_plugin_manager(load_entry_points=False))
    return plugins.schema_types()["JSON"].bind(plugins)


def json_refs() -> tuple[Reference, ...]:
    # name.json is referenced by the invoice and by the customer: a diamond.
    name = ref("name.json", "name", NAME, kind="JSON")
    customer = ref(
        "https://example.com/schemas/customer.json",
        "customer",
        CUSTOMER,
        name,
        kind="JSON",
    )
    return (
        customer,
        ref("https://example.com/schemas/name.json", "name", NAME, kind="JSON"),
    )


def test_json_references_resolve_through_the_bundle(json_type):
    options = SchemaOptions("json", references=json_refs())
    parsed = json_type.parse(json.dumps(INVOICE).encode(), options)
    assert json.loads(parsed.stored) == INVOICE
    loaded = json_type.load(parsed.stored, options)
    validate = json_type.compile(loaded, options, "narad://schema/t/1").validate
    validate(
        b'{"customer": {"name": "Ann", "tier": "gold"}, "tier": "silver", '
        b'"payer": "Bob", "amount": 1.25, "const": {"$ref": "customer.json"}}'
    )
    for bad in (
        b'{"customer": {"name": ""}}',
        b'{"customer": {"name": "A", "tier": "bronze"}}',
        b'{"customer": {"name": "A"}, "tier": "x"}',
        b'{"customer": {"name": "A"}, "payer": ""}',
        b'{"customer": {"name": "A"}, "amount": 1.001}',
    ):
        with pytest.raises(Exception, match="jsonschema validation failed"):
            validate(bad)


def test_json_bundle_embeds_each_version_once_and_keeps_data(json_type):
    bundled, embedded = bundle(
        INVOICE, json_refs(), json_type.draft_of(INVOICE), json_type.drafts
    )
    defs = bundled["$defs"]
    assert sorted(defs) == ["customer version 1", "name version 1"]
    assert embedded == {"narad://reference/0", "narad://reference/1"}
    props = bundled["properties"]
    assert props["customer"] == {"$ref": defs["customer version 1"]["$id"]}
    assert props["tier"]["$ref"].endswith("#/definitions/tier")
    # A "$ref" member of data is data.
    assert props["const"] == {"const": {"$ref": "customer.json"}}
    # Numbers stay exact through the text registration checks.
    assert b'"multipleOf":0.01' in dump(bundled)
    # The given document is not changed.
    assert "$defs" not in INVOICE


def test_json_schema_without_references_takes_the_usual_path(json_type):
    plain = json_type.parse(json.dumps(NAME).encode(), SchemaOptions("json"))
    assert plain.value[0] == NAME
    with pytest.raises(InvalidSchema, match="does not resolve inside the document"):
        json_type.parse(json.dumps(INVOICE).encode(), SchemaOptions("json"))


def test_json_checks_compatibility_through_references(json_type):
    options = SchemaOptions("json", references=json_refs())
    old = json_type.parse(json.dumps(INVOICE).encode(), options)
    stricter = {**NAME, "maxLength": 3}
    changed = (
        json_refs()[0],
        ref(
            "https://example.com/schemas/name.json",
            "name",
            stricter,
            kind="JSON",
            version=2,
        ),
    )
    new_options = SchemaOptions("json", references=changed)
    new = json_type.parse(json.dumps(INVOICE).encode(), new_options)
    report = json_type.check(
        new, [(1, old)], Mode("BACKWARD"), new_options, first=False
    )
    assert report.findings
    assert "maxLength" in str(report.findings[0])


def test_json_references_are_of_the_schemas_draft(json_type):
    # The same draft by another of its URIs: one document, one draft.
    same = {**NAME, "$schema": "http://json-schema.org/draft-07/schema"}
    options = SchemaOptions("json", references=(ref("n.json", "n", same, kind="JSON"),))
    main = {"$schema": DRAFT7, "properties": {"n": {"$ref": "n.json"}}}
    parsed = json_type.parse(json.dumps(main).encode(), options)
    validate = json_type.compile(parsed, options, "narad://schema/t/1").validate
    with pytest.raises(Exception, match="jsonschema validation failed"):
        validate(b'{"n": ""}')
    other = {**main, "$schema": "https://json-schema.org/draft/2020-12/schema"}
    with pytest.raises(InvalidSchema, match="written in draft 07 and the schema in"):
        json_type.parse(json.dumps(other).encode(), options)


STATUS_PROTO = """
syntax = "proto3";
package common;
enum Status { UNKNOWN = 0; OK = 1; }
"""


def test_a_registry_subjects_protobuf_file_may_declare_no_message():
    protobuf = ProtobufType()
    text = json.dumps(STATUS_PROTO).encode()
    # A topic's payloads need a message; a registry subject's file need not
    # declare one (enums other files import).
    with pytest.raises(InvalidSchema, match="declares no message"):
        protobuf.parse(text, SchemaOptions("binary"))
    standalone = SchemaOptions("binary", payloads=False)
    status = protobuf.parse(text, standalone)
    assert status.message_name == ""
    loaded = protobuf.load(status.stored, standalone)
    assert loaded.identity == status.identity
    assert "enum Status {" in protobuf.registry_schema(status.stored)
    with pytest.raises(UnusableVersion, match="declares no message"):
        protobuf.compile(loaded, standalone, "u")
    # Its versions are checked by the enum rules.
    renamed = json.dumps(STATUS_PROTO.replace("OK", "DONE")).encode()
    new = protobuf.parse(renamed, standalone)
    report = protobuf.check(
        new, [(1, loaded)], Mode("BACKWARD"), standalone, first=False
    )
    assert [f.violation.kind for f in report.findings] == ["enum_value_renamed"]
    # And a file importing it validates with it.
    reference = ref("common/status.proto", "s", status.stored, kind="PROTOBUF")
    order = 'syntax = "proto3";\npackage shop;\nimport "common/status.proto";\n'
    order += "message O { common.Status s = 1; }\n"
    options = SchemaOptions("binary", references=(reference,))
    parsed = protobuf.parse(json.dumps(order).encode(), options)
    protobuf.compile(parsed, options, "u").validate(b"\x08\x01")
