"""narad_protobuf: binary and JSON payloads against the topic's message."""

from __future__ import annotations

import pytest
from google.protobuf import message_factory

from narad_protobuf import ProtobufPayloadError
from narad_protobuf import parse_schema
from narad_protobuf.binary import MAX_DEPTH

ORDER = parse_schema(
    """
syntax = "proto3";
package shop;
import "google/protobuf/timestamp.proto";
message Order {
  string id = 1;
  repeated Item items = 2;
  google.protobuf.Timestamp at = 3;
  map<string, int32> tags = 4;
  repeated int64 codes = 5;
  fixed32 f32 = 6;
  double price = 7;
  Status status = 8;
  oneof pay { string card = 9; bytes iban = 10; }
  Order parent = 11;
  message Item { string sku = 1; int32 qty = 2; }
  enum Status { NEW = 0; PAID = 1; }
}
"""
)
Order = message_factory.GetMessageClass(ORDER.descriptor)

LEGACY = parse_schema(
    'syntax = "proto2"; message R { required int32 a = 1; '
    "optional group G = 2 { optional int32 x = 1; } optional string s = 3; }"
)


def order_bytes() -> bytes:
    order = Order(id="o-1", f32=7, price=2.5, status=1, card="4111")
    order.items.add(sku="apple", qty=3)
    order.tags["gift"] = 1
    order.codes.extend([1, 300, -5])
    order.at.seconds = 1_700_000_000
    order.parent.id = "o-0"
    return order.SerializeToString()


def refusal(
    payload: bytes, encoding: str = "binary", schema=ORDER
) -> ProtobufPayloadError:
    with pytest.raises(ProtobufPayloadError) as caught:
        schema.validate(payload, encoding)
    return caught.value


# -- binary --------------------------------------------------------------------


def test_a_real_message_decodes():
    ORDER.validate(order_bytes())


def test_empty_bytes_pass():
    ORDER.validate(b"")


def test_unknown_fields_pass_of_every_wire_type():
    unknown = (
        b"\xf8\x01\x05"  # 31: varint
        b"\xf9\x01"
        + b"\0" * 8  # 31: fixed64
        + b"\xfa\x01\x02hi"  # 31: length-delimited
        + b"\xfb\x01\x08\x01\xfc\x01"  # 31: a group holding a varint
        + b"\xfd\x01"
        + b"\0" * 4  # 31: fixed32
    )
    ORDER.validate(order_bytes() + unknown)


def test_missing_fields_pass_even_proto2_required_ones():
    LEGACY.validate(b"\x1a\x01x")


def test_unpacked_repeated_scalars_pass_too():
    ORDER.validate(b"\x28\x01\x28\x02")


def test_a_proto2_group_decodes_and_proto2_strings_are_not_utf8_checked():
    LEGACY.validate(b"\x08\x01\x13\x08\x05\x14\x1a\x01\xff")


def test_truncated_payload_names_offset_and_field():
    error = refusal(order_bytes()[:-1])
    assert "at byte" in str(error)
    assert "field 11 (parent)" in str(error)


def test_a_length_past_the_end_is_refused_without_reading_it():
    error = refusal(b"\x12\xff\xff\xff\xff\x0f")
    assert "length 4294967295 runs past the end (0 bytes left)" in str(error)
    assert error.offset == 6
    assert error.path == "2"


def test_invalid_utf8_in_a_nested_string_names_the_path():
    error = refusal(b"\x12\x03\x0a\x01\xff")
    assert "field 2 (items) > field 1 (sku)" in str(error)
    assert "not valid UTF-8" in str(error)
    assert error.offset == 4
    assert error.path == "2.1"


def test_a_known_field_with_another_wire_type_is_refused():
    error = refusal(b"\x08\x01")  # field 1 (a string) as a varint
    assert "field 1 (id)" in str(error)
    assert "wire type varint does not fit" in str(error)


def test_a_malformed_varint_is_refused():
    assert "more than 10 bytes" in str(refusal(b"\x28" + b"\xff" * 11))
    assert "truncated varint" in str(refusal(b"\x28\xff"))


def test_a_bad_packed_run_is_refused():
    assert "mid-varint" in str(refusal(b"\x2a\x02\x01\x80"))
    assert "more than 10 bytes" in str(refusal(b"\x2a\x0b" + b"\xff" * 10 + b"\x01"))


def test_invalid_wire_types_and_field_numbers_are_refused():
    assert "invalid wire type 7" in str(refusal(b"\xff\x01"))
    assert "invalid field number 0" in str(refusal(b"\x00\x01"))


def test_an_unmatched_end_group_is_refused():
    assert "without its start" in str(refusal(b"\xfc\x01"))


def test_an_unterminated_group_is_refused():
    assert "no end-group tag" in str(refusal(b"\xfb\x01\x08\x01"))


def test_deep_nesting_of_messages_is_bounded():
    payload = b""
    for _ in range(MAX_DEPTH + 5):
        payload = b"\x5a" + _varint(len(payload)) + payload
    assert f"deeper than {MAX_DEPTH}" in str(refusal(payload))


def test_deep_nesting_of_unknown_groups_is_bounded():
    payload = b"\xfb\x01" * 100_000 + b"\xfc\x01" * 100_000
    assert f"deeper than {MAX_DEPTH}" in str(refusal(payload))


def test_a_megabyte_of_unknown_fields_is_walked():
    ORDER.validate(b"\xf8\x01\x01" * 350_000)


def _varint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


# -- json ----------------------------------------------------------------------


def test_json_mapping_of_the_message_passes():
    ORDER.validate(
        b'{"id": "o-1", "items": [{"sku": "apple", "qty": 3}], '
        b'"at": "2023-11-14T22:13:20Z", "tags": {"gift": 1}, "codes": ["1", 300], '
        b'"f32": 7, "price": "NaN", "status": "PAID", "card": "4111", '
        b'"parent": {"id": "o-0"}}',
        "json",
    )


def test_json_proto_names_and_missing_fields_pass():
    ORDER.validate(b'{"f32": 1}', "json")
    ORDER.validate(b"{}", "json")


def test_json_unknown_field_is_named():
    error = refusal(b'{"id": "x", "colour": "red"}', "json")
    assert 'no field named "colour"' in str(error)
    assert error.path == "/colour"


def test_json_wrong_type_is_named_with_its_pointer():
    error = refusal(b'{"items": [{"qty": 1}, {"qty": "many"}]}', "json")
    assert "qty" in str(error)
    assert error.path == "/items/1/qty"


def test_json_wrong_map_value_is_named():
    error = refusal(b'{"tags": {"a": 1, "b": "x"}}', "json")
    assert error.path == "/tags/b"


def test_json_fraction_for_an_integer_is_refused():
    assert "1.5" in str(refusal(b'{"codes": [1.5]}', "json"))


def test_json_bool_for_an_integer_and_bad_enum_names_are_refused():
    refusal(b'{"f32": true}', "json")
    error = refusal(b'{"status": "LOST"}', "json")
    assert error.path == "/status"


def test_json_two_members_of_a_oneof_are_refused():
    assert "oneof" in str(refusal(b'{"card": "1", "iban": "AA=="}', "json"))


def test_json_must_be_one_strict_json_object():
    assert "not JSON" in str(refusal(b"\xef\xbb\xbf{}", "json"))
    assert "not JSON" in str(refusal(b'{"id": "x"} {}', "json"))
    assert "written twice" in str(refusal(b'{"id": "x", "id": "y"}', "json"))
    assert "NaN is not JSON" in str(refusal(b'{"price": NaN}', "json"))
    assert "a message is a JSON object" in str(refusal(b"[]", "json"))
    assert "not JSON" in str(refusal(b"", "json"))


def test_json_deep_nesting_is_refused_before_parsing():
    payload = b'{"parent": ' * 200_000 + b"{}" + b"}" * 200_000
    assert "nests deeper than 100" in str(refusal(payload, "json"))


def test_json_nesting_within_the_bound_but_past_the_runtimes_is_refused():
    payload = b'{"parent": ' * 99 + b"{}" + b"}" * 99
    ORDER.validate(payload, "json")


def test_an_unknown_encoding_is_a_programming_error():
    with pytest.raises(ValueError, match="unknown encoding"):
        ORDER.validate(b"", "xml")  # type: ignore[arg-type]
