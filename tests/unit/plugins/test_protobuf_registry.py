"""The Protobuf type's registry strings and framed checks: ``.proto`` text
rendered from stored descriptors (protoc compiles it back to the same
schema), ``?format=serialized``, and Confluent's message indexes."""

from __future__ import annotations

import base64
import json

import pytest
from google.protobuf import descriptor_pb2

from narad.errors import InvalidPayload
from narad.schematypes import SchemaOptions
from narad_avro.schematype import AvroType
from narad_protobuf.framing import read_indexes
from narad_protobuf.schema import parse_schema
from narad_protobuf.schematype import ProtobufType

PROTO3 = """
syntax = "proto3";
package shop.v1;
import "google/protobuf/timestamp.proto";
option java_package = "com.shop";
option optimize_for = SPEED;
message Order {
  option deprecated = true;
  string id = 1 [json_name = "orderId"];
  repeated Item items = 2;
  map<string, int64> counts = 3;
  oneof pay { string card = 4; bytes token = 5 [deprecated = true]; }
  optional int32 qty = 6;
  google.protobuf.Timestamp at = 7;
  Status status = 8;
  reserved 10, 12 to 15, 100 to max;
  reserved "old", "gone";
  message Item {
    string sku = 1;
    repeated double price = 2 [packed = false];
    enum K { K0 = 0; K1 = 1; }
    K k = 3;
    map<int32, Item> children = 4;
  }
  enum Status {
    option allow_alias = true;
    UNKNOWN = 0; OK = 1; FINE = 1;
    reserved 5 to 7, 9;
    reserved "X";
  }
}
message Zed { Order.Item item = 1; }
service S {
  rpc Get (Order) returns (stream Zed) { option deprecated = true; }
  rpc Put (stream Zed) returns (Order);
}
"""

PROTO2 = r"""
syntax = "proto2";
package legacy;
message A {
  required int32 a = 1 [default = -5];
  optional string s = 2 [default = "he\"llo\n\xff\t'"];
  optional bytes b = 3 [default = "\001\002x"];
  optional float f = 4 [default = inf];
  optional double d = 5 [default = nan];
  optional double neg = 11 [default = -inf];
  optional E e = 6 [default = TWO];
  optional group G = 7 { optional int32 x = 1; }
  repeated int32 packed = 8 [packed = true];
  extensions 100 to 199, 300, 1000 to max;
  enum E { ONE = 1; TWO = 2; }
  oneof o { int32 p = 9; group H = 10 { optional string y = 1; } }
  optional bool flag = 12 [default = true];
}
extend A { optional int32 ext = 100; repeated string tags = 101; }
"""

EDITIONS = """
edition = "2023";
package ed;
option features.field_presence = IMPLICIT;
message M {
  int32 a = 1 [features.field_presence = EXPLICIT];
  string b = 2;
  M child = 3 [features.message_encoding = DELIMITED];
  reserved foo, bar;
  repeated int32 r = 4 [features.repeated_field_encoding = EXPANDED];
  enum E { option features.enum_type = CLOSED; E0 = 0; E1 = 1; }
  E e = 5 [features.field_presence = EXPLICIT];
}
"""

NO_PACKAGE = """
syntax = "proto3";
message First { Second second = 1; }
message Second { string s = 1; }
"""

TYPE = ProtobufType()
OPTIONS = SchemaOptions("binary")


def _stored(source: str, message: str = "") -> bytes:
    options = SchemaOptions("binary", message)
    return TYPE.parse(json.dumps(source).encode(), options).stored


@pytest.mark.parametrize(
    "source", [PROTO3, PROTO2, EDITIONS, NO_PACKAGE], ids=["3", "2", "ed", "nopkg"]
)
def test_rendered_proto_compiles_back_to_the_same_schema(source):
    stored = _stored(source)
    text = TYPE.registry_schema(stored)
    assert text.startswith(("syntax = ", "edition = "))
    original = TYPE.load(stored, OPTIONS)
    again = TYPE.parse(TYPE.registry_document(text), OPTIONS)
    assert again.identity == original.identity
    # And registered again, it stores the same document.
    assert again.stored == stored


def test_rendered_proto_shows_the_declarations():
    text = TYPE.registry_schema(_stored(PROTO3))
    for line in (
        'syntax = "proto3";',
        "package shop.v1;",
        'import "google/protobuf/timestamp.proto";',
        'option java_package = "com.shop";',
        "map<string, int64> counts = 3;",
        "oneof pay {",
        "optional int32 qty = 6;",
        'string id = 1 [json_name = "orderId"];',
        "reserved 10, 12 to 15, 100 to max;",
        'reserved "gone", "old";',
        "rpc Get (.shop.v1.Order) returns (stream .shop.v1.Zed) {",
    ):
        assert line in text, line
    assert "CountsEntry" not in text  # the map's entry is the map
    proto2 = TYPE.registry_schema(_stored(PROTO2))
    assert "optional group G = 7 {" in proto2
    assert "required int32 a = 1 [default = -5];" in proto2
    assert "extend .legacy.A {" in proto2


def test_serialized_format_is_base64_of_the_main_file():
    stored = _stored(PROTO3)
    served = TYPE.registry_schema(stored, "serialized")
    file = descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(served))
    assert file.package == "shop.v1"
    assert [m.name for m in file.message_type] == ["Order", "Zed"]
    # Confluent's serializers register exactly this form: it is the same
    # schema again.
    again = TYPE.parse(TYPE.registry_document(served), OPTIONS)
    assert again.identity == TYPE.load(stored, OPTIONS).identity


def test_registry_document_is_the_json_string_of_the_text():
    assert TYPE.registry_document('a "b"\n') == b'"a \\"b\\"\\n"'


def test_json_and_avro_registry_strings_are_the_documents():
    avro = AvroType()
    document = b'{"type":"record","name":"R","fields":[{"name":"a","type":"long"}]}'
    assert avro.registry_schema(document) == document.decode()
    assert avro.registry_schema(document, "serialized") == document.decode()
    assert avro.registry_document(document.decode()) == document


# -- framed messages -----------------------------------------------------------


def _zigzag(values: list[int]) -> bytes:
    out = bytearray()
    for value in values:
        n = (value << 1) ^ (value >> 63)
        while True:
            byte = n & 0x7F
            n >>= 7
            if n:
                out.append(byte | 0x80)
            else:
                out.append(byte)
                break
    return bytes(out)


@pytest.mark.parametrize(
    ("data", "indexes", "offset"),
    [
        (b"\x00rest", (0,), 1),
        (_zigzag([1, 0]) + b"x", (0,), 2),
        (_zigzag([2, 1, 3]), (1, 3), 3),
        (_zigzag([1, 300]), (300,), 3),
    ],
)
def test_message_indexes_read(data, indexes, offset):
    assert read_indexes(data) == (indexes, offset)


@pytest.mark.parametrize(
    ("data", "words"),
    [
        (b"", "cut short"),
        (_zigzag([2, 1]), "cut short: message index 2 of 2"),
        (b"\x80", "cut short"),
        (b"\xff" * 11, "longer than 10 bytes"),
        (_zigzag([-1]), "a count of -1"),
        (_zigzag([101]), "a count of 101"),
        (_zigzag([1, -2]), "index -2 (at byte 1) is negative"),
    ],
)
def test_bad_message_indexes_are_refused(data, words):
    with pytest.raises(InvalidPayload, match="message indexes") as caught:
        read_indexes(data)
    assert words in caught.value.detail


def _framed_check(source: str):
    stored = _stored(source)
    loaded = TYPE.load(stored, OPTIONS)
    return TYPE.compile_framed(loaded, SchemaOptions("json"), "narad://t/1").validate


def test_framed_check_validates_the_message_the_indexes_name():
    check = _framed_check(PROTO3)
    schema = parse_schema(PROTO3)
    order = schema.pool.FindMessageTypeByName("shop.v1.Order")
    zed = schema.pool.FindMessageTypeByName("shop.v1.Zed")
    from google.protobuf.message_factory import GetMessageClass

    order_bytes = GetMessageClass(order)(id="o1").SerializeToString()
    zed_bytes = GetMessageClass(zed)(item={"sku": "a"}).SerializeToString()
    check(b"\x00" + order_bytes)  # [0]: Order, the file's first
    check(_zigzag([1, 0]) + order_bytes)
    check(_zigzag([1, 1]) + zed_bytes)
    # Order.Item is [0, 1] (Order's nested: CountsEntry, Item, in that order).
    check(_zigzag([2, 0, 1]) + b"\x0a\x01a")
    # The json encoding of the topic does not matter: framed is binary.
    with pytest.raises(InvalidPayload, match=r"does not decode as shop\.v1\.Zed"):
        check(_zigzag([1, 1]) + b"\x0a\x05ab")  # item's length past the end
    with pytest.raises(InvalidPayload, match=r"indexes \[2\] name no message"):
        check(_zigzag([1, 2]) + zed_bytes)
    with pytest.raises(InvalidPayload, match=r"indexes \[1, 0\] name no message"):
        check(_zigzag([2, 1, 0]) + zed_bytes)
    with pytest.raises(InvalidPayload, match="cut short"):
        check(b"")


UNSORTED = """
syntax = "proto3";
package shop;
message Order { string id = 1; Address to = 2; }
message Address { string street = 1; int32 zip = 2; }
"""


def test_indexes_count_messages_in_the_order_declared():
    # Confluent's serializers take indexes from the client's own file:
    # Order, declared first, is [0] although Address sorts before it.
    stored = _stored(UNSORTED)
    served = TYPE.registry_schema(stored, "serialized")
    file = descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(served))
    assert [m.name for m in file.message_type] == ["Order", "Address"]
    assert TYPE.registry_schema(stored).index("message Order") < TYPE.registry_schema(
        stored
    ).index("message Address")
    check = _framed_check(UNSORTED)
    order = b"\x0a\x02o1\x12\x04\x0a\x02st"  # id "o1", to {street "st"}
    check(b"\x00" + order)
    address = b"\x10\x07"  # zip 7
    check(_zigzag([1, 1]) + address)
    with pytest.raises(InvalidPayload, match=r"does not decode as shop\.Order"):
        check(b"\x00" + address)  # zip's varint where Order has a string


def test_declaration_order_is_no_new_schema_but_is_stored():
    swapped = UNSORTED.replace(
        "message Order { string id = 1; Address to = 2; }\n", ""
    ).replace(
        "int32 zip = 2; }\n",
        "int32 zip = 2; }\nmessage Order { string id = 1; Address to = 2; }\n",
    )
    assert swapped.index("message Address") < swapped.index("message Order")
    options = SchemaOptions("binary", "shop.Order")
    first = TYPE.parse(json.dumps(UNSORTED).encode(), options)
    second = TYPE.parse(json.dumps(swapped).encode(), options)
    assert first.identity == second.identity  # the same schema: no new version
    assert first.stored != second.stored  # each stored as declared
