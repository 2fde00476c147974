"""narad_protobuf: the three forms of a schema, the topic's message,
idempotency, the budget and hostile schemas."""

from __future__ import annotations

import base64

import pytest
from google.protobuf import descriptor_pb2

from narad_protobuf import MAX_SCHEMA_BYTES
from narad_protobuf import Limits
from narad_protobuf import MessageSource
from narad_protobuf import ProtobufSchemaError
from narad_protobuf import SchemaForm
from narad_protobuf import parse_schema

ORDER = """
syntax = "proto3";
package shop;
import "google/protobuf/timestamp.proto";

// An order.
message Order {
  string id = 1;
  repeated Item items = 2;
  google.protobuf.Timestamp at = 3;
  map<string, int32> tags = 4;
  message Item { string sku = 1; int32 qty = 2; }
}

message Receipt { string order_id = 1; }
"""


def fdp_of(
    schema_text: str, name: str = "order.proto"
) -> descriptor_pb2.FileDescriptorProto:
    parsed = parse_schema(schema_text)
    proto = descriptor_pb2.FileDescriptorProto()
    parsed.pool.FindFileByName("schema.proto").CopyToProto(proto)
    proto.name = name
    return proto


def b64(
    message: descriptor_pb2.FileDescriptorProto | descriptor_pb2.FileDescriptorSet,
) -> str:
    return base64.b64encode(message.SerializeToString()).decode()


# -- .proto source -------------------------------------------------------------


def test_proto3_source_is_compiled_and_its_first_message_is_the_topics():
    schema = parse_schema(ORDER)
    assert schema.form is SchemaForm.PROTO
    assert schema.message_name == "shop.Order"
    assert schema.message_source is MessageSource.FIRST_MESSAGE
    assert schema.descriptor.fields_by_name["at"].message_type.full_name == (
        "google.protobuf.Timestamp"
    )


def test_proto2_source_with_groups_and_required_fields():
    schema = parse_schema(
        'syntax = "proto2"; message R { required int32 a = 1; '
        "optional group G = 2 { optional int32 x = 1; } }"
    )
    assert schema.message_name == "R"
    assert schema.descriptor.fields_by_number[1].is_required


def test_proto_message_names_the_topics_message():
    schema = parse_schema(ORDER, proto_message="shop.Receipt")
    assert schema.message_name == "shop.Receipt"
    assert schema.message_source is MessageSource.PROTO_MESSAGE
    nested = parse_schema(ORDER, proto_message=".shop.Order.Item")
    assert nested.message_name == "shop.Order.Item"


def test_a_syntax_error_names_line_and_column():
    with pytest.raises(ProtobufSchemaError) as caught:
        parse_schema('syntax = "proto3";\nmessage A {\n  int32 x = ;\n}\n')
    assert caught.value.line == 3
    assert caught.value.column == 13
    assert "line 3, column 13" in str(caught.value)


def test_a_type_error_names_line_and_column():
    with pytest.raises(ProtobufSchemaError) as caught:
        parse_schema('syntax = "proto3";\nmessage A {\n  Missing x = 1;\n}\n')
    assert (caught.value.line, caught.value.column) == (3, 3)
    assert '"Missing" is not defined' in str(caught.value)


@pytest.mark.parametrize(
    "imported", ["other.proto", "/etc/passwd", "../../etc/passwd", "schema.proto"]
)
def test_only_well_known_types_can_be_imported(imported):
    with pytest.raises(ProtobufSchemaError) as caught:
        parse_schema(f'syntax = "proto3";\nimport "{imported}";\nmessage A {{}}\n')
    assert caught.value.line == 2
    assert "/tmp" not in str(caught.value)


def test_a_file_without_messages_is_refused():
    with pytest.raises(ProtobufSchemaError, match="declares no message"):
        parse_schema('syntax = "proto3"; enum E { Z = 0; }')


def test_proto_message_missing_from_the_file_is_refused():
    with pytest.raises(
        ProtobufSchemaError, match=r"message shop\.Nope is not in .*shop\.Order"
    ):
        parse_schema(ORDER, proto_message="shop.Nope")
    with pytest.raises(ProtobufSchemaError, match="not a full message name"):
        parse_schema(ORDER, proto_message="shop..Order")


# -- base64 FileDescriptorProto (Confluent) ------------------------------------


def test_base64_file_descriptor_proto_is_accepted():
    schema = parse_schema(b64(fdp_of(ORDER)))
    assert schema.form is SchemaForm.FILE_DESCRIPTOR
    assert schema.message_name == "shop.Order"
    assert schema.same_as(parse_schema(ORDER))


def test_base64_with_line_breaks_is_accepted():
    text = b64(fdp_of(ORDER))
    wrapped = "\n".join(text[i : i + 76] for i in range(0, len(text), 76))
    assert parse_schema(wrapped).same_as(parse_schema(ORDER))


@pytest.mark.parametrize("text", ["Zm9v!", "Zm9vY", "abc=def"])
def test_bad_base64_is_refused(text):
    with pytest.raises(ProtobufSchemaError, match="not valid base64"):
        parse_schema(text)


def test_base64_of_something_else_is_refused():
    with pytest.raises(
        ProtobufSchemaError, match="does not decode as a FileDescriptorProto"
    ):
        parse_schema(base64.b64encode(b"\xff\xff\xff").decode())


def test_a_descriptor_that_does_not_build_is_refused():
    proto = fdp_of(ORDER)
    proto.message_type[0].field[1].type_name = ".shop.Nowhere"
    with pytest.raises(ProtobufSchemaError, match="does not build"):
        parse_schema(b64(proto))


def test_a_descriptor_importing_other_files_is_refused():
    proto = fdp_of(ORDER)
    proto.dependency.append("common.proto")
    with pytest.raises(
        ProtobufSchemaError, match=r"imports common\.proto; only google"
    ):
        parse_schema(b64(proto))


def test_the_well_known_package_is_reserved():
    proto = descriptor_pb2.FileDescriptorProto(
        name="t.proto", package="google.protobuf"
    )
    proto.message_type.add(name="Timestamp")
    with pytest.raises(ProtobufSchemaError, match="reserved for the well-known types"):
        parse_schema(b64(proto))


# -- the event store's base64(FileDescriptorSet):Message -----------------------


def test_event_store_form_names_the_message():
    fds = descriptor_pb2.FileDescriptorSet()
    fds.file.append(fdp_of(ORDER))
    schema = parse_schema(f"{b64(fds)}:shop.Receipt")
    assert schema.form is SchemaForm.DESCRIPTOR_SET
    assert schema.message_name == "shop.Receipt"
    assert schema.message_source is MessageSource.SCHEMA


def test_event_store_form_with_several_files_in_any_order():
    common = fdp_of(
        'syntax = "proto3"; package common; message Money { int64 cents = 1; }'
    )
    common.name = "common.proto"
    order = descriptor_pb2.FileDescriptorProto(
        name="order.proto", package="shop", syntax="proto3"
    )
    order.dependency.append("common.proto")
    message = order.message_type.add(name="Order")
    message.field.add(
        name="total",
        number=1,
        label=descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL,
        type=descriptor_pb2.FieldDescriptorProto.TYPE_MESSAGE,
        type_name=".common.Money",
    )
    fds = descriptor_pb2.FileDescriptorSet(file=[order, common])
    schema = parse_schema(f"{b64(fds)}:shop.Order")
    assert (
        schema.descriptor.fields_by_name["total"].message_type.full_name
        == "common.Money"
    )


def test_event_store_form_with_a_missing_message_is_refused():
    fds = descriptor_pb2.FileDescriptorSet(file=[fdp_of(ORDER)])
    with pytest.raises(ProtobufSchemaError, match=r"message shop\.Invoice is not in"):
        parse_schema(f"{b64(fds)}:shop.Invoice")


def test_event_store_form_with_bad_base64_is_refused():
    with pytest.raises(ProtobufSchemaError, match="not valid base64"):
        parse_schema("CqYB*:shop.Order")


def test_event_store_form_disagreeing_with_proto_message_is_refused():
    fds = descriptor_pb2.FileDescriptorSet(file=[fdp_of(ORDER)])
    with pytest.raises(ProtobufSchemaError, match="differs from the message"):
        parse_schema(f"{b64(fds)}:shop.Order", proto_message="shop.Receipt")


def test_event_store_form_missing_an_import_is_refused():
    proto = fdp_of(ORDER)
    proto.dependency.append("common.proto")
    fds = descriptor_pb2.FileDescriptorSet(file=[proto])
    with pytest.raises(ProtobufSchemaError, match="the descriptors do not include"):
        parse_schema(f"{b64(fds)}:shop.Order")


def test_an_empty_set_is_refused():
    with pytest.raises(ProtobufSchemaError, match="holds no file"):
        parse_schema(":shop.Order")


# -- idempotency -----------------------------------------------------------------

REWRITTEN = """
// Same contract: other comments, spacing, order and spelling.
syntax = "proto3";
package shop;
import "google/protobuf/timestamp.proto";
message Receipt{string order_id=1;}
message Order {
  /* tags */ map<string,int32> tags = 4;
  .google.protobuf.Timestamp at = 3;
  repeated .shop.Order.Item items = 2;
  string id = 1 [json_name = "id"];
  message Item { int32 qty = 2; string sku = 1; }
}
"""


def test_comments_whitespace_order_and_spelling_are_the_same_schema():
    assert parse_schema(REWRITTEN, proto_message="shop.Order").same_as(
        parse_schema(ORDER)
    )


def test_a_real_change_is_another_schema():
    changed = ORDER.replace("int32 qty = 2;", "int64 qty = 2;")
    assert not parse_schema(changed).same_as(parse_schema(ORDER))
    renamed = ORDER.replace("string id = 1;", 'string id = 1 [json_name = "ident"];')
    assert not parse_schema(renamed).same_as(parse_schema(ORDER))


def test_another_topic_message_is_another_schema():
    assert not parse_schema(ORDER, proto_message="shop.Receipt").same_as(
        parse_schema(ORDER)
    )


def test_reserved_ranges_written_apart_are_the_same_schema():
    one = parse_schema(
        'syntax = "proto3"; message A { reserved 9, 10 to 12; int32 x = 1; }'
    )
    two = parse_schema(
        'syntax = "proto3"; message A { int32 x = 1; reserved 9 to 12; }'
    )
    assert one.same_as(two)


def test_compiled_form_loads_back_to_the_same_schema():
    schema = parse_schema(ORDER, proto_message="shop.Receipt")
    again = parse_schema(schema.compiled)
    assert again.same_as(schema)
    assert again.canonical == schema.canonical
    assert again.fingerprint == schema.fingerprint


# -- budgets and hostile schemas ---------------------------------------------------


def test_a_schema_over_256_kib_is_refused_and_one_at_it_is_not():
    head = 'syntax = "proto3"; message A { int32 x = 1; }\n'
    at_limit = head + "/" * (MAX_SCHEMA_BYTES - len(head) - 1) + "\n"
    assert parse_schema(at_limit).message_name == "A"
    with pytest.raises(ProtobufSchemaError, match="over the budget of 262144"):
        parse_schema(at_limit + "\n")


def test_an_empty_schema_is_refused():
    with pytest.raises(ProtobufSchemaError, match="empty"):
        parse_schema("  \n")


def test_a_compile_past_its_wall_clock_is_refused():
    with pytest.raises(ProtobufSchemaError, match=r"did not compile within 0\.001 s"):
        parse_schema(ORDER, limits=Limits(wall_seconds=0.001))


def test_a_compile_past_its_memory_is_refused():
    with pytest.raises(
        ProtobufSchemaError,
        match=r"did not compile within the compiler.s time and memory",
    ):
        parse_schema(ORDER, limits=Limits(memory_bytes=8 << 20))


def test_deeply_nested_messages_are_refused_not_crashing():
    depth = 2000
    text = 'syntax = "proto3";\n' + "message M {" * depth + "}" * depth
    with pytest.raises(ProtobufSchemaError, match="line"):
        parse_schema(text)


def test_a_descriptor_nested_past_the_decoders_limit_is_refused():
    proto = descriptor_pb2.FileDescriptorProto(name="x.proto")
    message = proto.message_type.add(name="M0")
    for i in range(1, 150):
        message = message.nested_type.add(name=f"M{i}")
    with pytest.raises(ProtobufSchemaError):
        parse_schema(b64(proto))
