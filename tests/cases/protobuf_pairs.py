"""Protobuf schema pairs with stated verdicts, one compatible and one
incompatible case per rule family (Apicurio's table 4 where it speaks,
Protobuf's "Updating a message type" where it is silent).

Each case is ``(name, new, encoding, compatible)``: ``new`` replaces
:data:`BASE` (BACKWARD, the topic's ``encoding``).
"""

from __future__ import annotations

BASE = """syntax = "proto3";
package shop;

enum Status {
  UNKNOWN = 0;
  PAID = 1;
  SHIPPED = 2;
}

message Line {
  string sku = 1;
  int32 qty = 2;
}

message Order {
  string order_id = 1;
  int32 qty = 2;
  Status status = 3;
  repeated Line lines = 4;
  string note = 5;
}

message Unused {
  string x = 1;
}
"""


def edit(*pairs: tuple[str, str]) -> str:
    text = BASE
    for old, new in pairs:
        assert old in text, old
        text = text.replace(old, new, 1)
    return text


CASES: list[tuple[str, str, str, bool]] = [
    # new fields, new tags
    (
        "field_added",
        edit(("  string note = 5;", "  string note = 5;\n  int64 at = 6;")),
        "binary",
        True,
    ),
    ("tag_changed", edit(("string note = 5;", "string note = 7;")), "binary", False),
    # types: same wire encoding or not
    (
        "int32_to_int64",
        edit(("int32 qty = 2;\n  Status", "int64 qty = 2;\n  Status")),
        "binary",
        True,
    ),
    (
        "int32_to_string",
        edit(("int32 qty = 2;\n  Status", "string qty = 2;\n  Status")),
        "binary",
        False,
    ),
    (
        "int32_to_bool_json",
        edit(("int32 qty = 2;\n  Status", "bool qty = 2;\n  Status")),
        "json",
        False,
    ),
    # labels
    (
        "label_kept",
        edit(("  string note = 5;", "  optional string note = 5;")),
        "binary",
        True,
    ),
    (
        "label_changed",
        edit(("int32 qty = 2;\n  Status", "repeated int32 qty = 2;\n  Status")),
        "binary",
        False,
    ),
    # removal, with and without reserved
    (
        "removed_reserved",
        edit(("  string note = 5;", '  reserved 5;\n  reserved "note";')),
        "binary",
        True,
    ),
    ("removed_unreserved", edit(("  string note = 5;\n", "")), "binary", False),
    # renames
    ("renamed", edit(("string note = 5;", "string remark = 5;")), "binary", False),
    # enums
    (
        "enum_value_added",
        edit(("  SHIPPED = 2;", "  SHIPPED = 2;\n  LOST = 3;")),
        "json",
        True,
    ),
    ("enum_value_removed_json", edit(("  SHIPPED = 2;\n", "")), "json", False),
    ("enum_value_removed_binary", edit(("  SHIPPED = 2;\n", "")), "binary", True),
    # oneofs
    (
        "oneof_new_fields",
        edit(
            (
                "  string note = 5;",
                "  string note = 5;\n  oneof pay { string card = 6; string iban = 7; }",
            )
        ),
        "binary",
        True,
    ),
    (
        "fields_moved_into_oneof",
        edit(
            (
                "  string order_id = 1;\n  int32 qty = 2;",
                "  oneof id { string order_id = 1; int32 qty = 2; }",
            )
        ),
        "binary",
        False,
    ),
    # nested message types
    (
        "nested_field_added",
        edit(("  int32 qty = 2;\n}", "  int32 qty = 2;\n  string name = 3;\n}")),
        "binary",
        True,
    ),
    (
        "nested_type_changed",
        edit(("  string sku = 1;", "  int64 sku = 1;")),
        "binary",
        False,
    ),
    # a message the topic's message does not reach
    (
        "unreached_removed",
        edit(("message Unused {\n  string x = 1;\n}\n", "")),
        "binary",
        True,
    ),
]
