"""The AVRO and PROTOBUF types check every version the service hands them,
as the JSON type does: a dry run "against all" in a non-transitive mode
names each version it broke, not only the latest."""

from __future__ import annotations

import json

from narad.schematypes import Mode
from narad.schematypes import SchemaOptions
from narad_avro.schematype import AvroType
from narad_protobuf.schematype import ProtobufType


def record(*fields: str) -> bytes:
    return json.dumps(
        {
            "type": "record",
            "name": "Order",
            "fields": [{"name": f, "type": "string"} for f in fields],
        }
    ).encode()


def test_avro_checks_every_version_given():
    avro, options = AvroType(), SchemaOptions("json")
    v1, v2 = (avro.parse(record("a"), options), avro.parse(record("a"), options))
    new = avro.parse(record("a", "b"), options)  # b has no default
    report = avro.check(new, [(2, v2), (1, v1)], Mode.BACKWARD, options, first=False)
    assert report.checked == (2, 1)
    assert {f.version for f in report.findings} == {1, 2}
    none = avro.check(new, [(2, v2)], Mode.NONE, options, first=False)
    assert not none.findings


def test_protobuf_checks_every_version_given():
    proto, options = ProtobufType(), SchemaOptions("binary")

    def schema(field_type: str) -> bytes:
        text = f'syntax = "proto3"; message Order {{ {field_type} id = 1; }}'
        return json.dumps(text).encode()

    v1, v2 = (
        proto.parse(schema("string"), options),
        proto.parse(schema("string"), options),
    )
    new = proto.parse(schema("double"), options)
    report = proto.check(new, [(2, v2), (1, v1)], Mode.BACKWARD, options, first=False)
    assert report.checked == (2, 1)
    assert {f.version for f in report.findings} == {1, 2}
