"""narad_protobuf: compatibility rules, each with a compatible and an
incompatible case, and the seven modes."""

from __future__ import annotations

import pytest

from narad_protobuf import MODES
from narad_protobuf import Direction
from narad_protobuf import ProtobufSchema
from narad_protobuf import check
from narad_protobuf import check_history
from narad_protobuf import parse_schema

BOTH = (Direction.BACKWARD, Direction.FORWARD)


def proto(body: str, syntax: str = "proto3") -> ProtobufSchema:
    return parse_schema(f'syntax = "{syntax}";\npackage shop;\n{body}')


def rules(old: str, new: str, *, directions=BOTH, encoding="binary", syntax="proto3"):
    found = check(
        proto(old, syntax), proto(new, syntax), directions=directions, encoding=encoding
    )
    return {(v.rule, v.pointer) for v in found}


def names(found) -> set[str]:
    return {rule for rule, _ in found}


# -- table 4 -------------------------------------------------------------------


def test_new_field_with_a_new_tag_is_compatible_both_ways():
    assert (
        rules(
            "message Order { string id = 1; }",
            "message Order { string id = 1; int32 qty = 2; }",
        )
        == set()
    )


def test_new_message_type_is_compatible():
    assert (
        rules(
            "message Order { string id = 1; }",
            "message Order { string id = 1; }\nmessage Other { int32 x = 1; }",
        )
        == set()
    )


def test_changed_tag_number_is_incompatible():
    found = rules(
        "message Order { string id = 1; }",
        'message Order { string id = 2; reserved 1; reserved "x"; }',
        directions=(Direction.BACKWARD,),
    )
    assert ("field_number_changed", "/shop.Order/fields/2") in found


def test_incompatible_type_change_is_refused_compatible_one_is_not():
    assert names(
        rules("message Order { int32 qty = 1; }", "message Order { string qty = 1; }")
    ) == {"type_changed"}
    assert (
        rules("message Order { int32 qty = 1; }", "message Order { int64 qty = 1; }")
        == set()
    )


def test_label_change_is_incompatible():
    found = rules(
        "message Order { int32 qty = 1; }", "message Order { repeated int32 qty = 1; }"
    )
    assert ("label_changed", "/shop.Order/fields/1") in found
    # Explicit presence is not a label: proto3 `optional` may come and go.
    assert (
        rules(
            "message Order { int32 qty = 1; }",
            "message Order { optional int32 qty = 1; }",
        )
        == set()
    )


def test_proto2_optional_to_required_is_incompatible():
    found = rules(
        "message Order { optional int32 qty = 1; }",
        "message Order { required int32 qty = 1; }",
        syntax="proto2",
    )
    assert "label_changed" in names(found)


def test_removed_field_needs_its_number_and_name_reserved():
    old = "message Order { string id = 1; int32 qty = 2; }"
    found = rules(old, "message Order { string id = 1; }")
    assert found == {("field_removed_without_reserve", "/shop.Order/fields/2")}
    only_number = rules(old, "message Order { string id = 1; reserved 2; }")
    assert names(only_number) == {"field_removed_without_reserve"}
    assert (
        rules(old, 'message Order { string id = 1; reserved 2; reserved "qty"; }')
        == set()
    )


def test_rename_is_incompatible():
    found = rules(
        "message Order { string id = 1; }", "message Order { string order_id = 1; }"
    )
    assert ("field_renamed", "/shop.Order/fields/1") in found
    assert (
        rules("message Order { string id = 1; }", "message Order { string id = 1; }")
        == set()
    )


def test_rpc_removed_and_signature_changed_are_incompatible():
    a = "message A { int32 x = 1; }\n"
    old = a + "service S { rpc Get(A) returns (A); rpc Put(A) returns (A); }"
    found = rules(old, a + "service S { rpc Get(A) returns (stream A); }")
    assert found == {
        ("rpc_removed", "/shop.S/methods/Put"),
        ("rpc_signature_changed", "/shop.S/methods/Get"),
    }
    added = old.replace("}\n", "}\n", 1).replace(
        "(A); }", "(A); rpc New(A) returns (A); }"
    )
    assert rules(old, added, directions=(Direction.BACKWARD,)) == set()


# -- reservations --------------------------------------------------------------


def test_reusing_a_reserved_number_or_name_is_incompatible():
    old = 'message Order { string id = 1; reserved 2; reserved "qty"; }'
    assert names(rules(old, "message Order { string id = 1; int32 qty = 2; }")) >= {
        "reserved_reused"
    }
    assert (
        rules(
            old,
            'message Order { string id = 1; int32 n = 3; reserved 2; reserved "qty"; }',
        )
        == set()
    )


def test_dropping_a_reservation_is_incompatible():
    old = 'message Order { string id = 1; reserved 2 to 5; reserved "qty"; }'
    found = rules(old, "message Order { string id = 1; reserved 2, 3; }")
    assert ("reserved_removed", "/shop.Order/reserved") in found
    assert names(found) == {"reserved_removed"}
    assert (
        rules(
            old,
            'message Order { string id = 1; reserved 2 to 9; reserved "qty", "x"; }',
        )
        == set()
    )


# -- wire compatibility ----------------------------------------------------------

COMPATIBLE_TYPES = [
    ("int32", "uint32"),
    ("int32", "int64"),
    ("uint64", "bool"),
    ("sint32", "sint64"),
    ("fixed32", "sfixed32"),
    ("fixed64", "sfixed64"),
    ("string", "bytes"),
    ("E", "int32"),
    ("uint64", "E"),
]
INCOMPATIBLE_TYPES = [
    ("int32", "sint32"),
    ("int32", "fixed32"),
    ("fixed32", "fixed64"),
    ("float", "double"),
    ("string", "int32"),
    ("E", "bool"),
    ("E", "sint32"),
    ("bytes", "Item"),
    ("int32", "Item"),
]
TYPES = "enum E { Z = 0; }\nmessage Item { int32 x = 1; }\n"


@pytest.mark.parametrize(("a", "b"), COMPATIBLE_TYPES)
def test_types_sharing_a_wire_encoding_are_compatible(a, b):
    assert (
        rules(
            f"message Order {{ {a} v = 1; }}\n{TYPES}",
            f"message Order {{ {b} v = 1; }}\n{TYPES}",
        )
        == set()
    )


@pytest.mark.parametrize(("a", "b"), INCOMPATIBLE_TYPES)
def test_types_of_other_wire_encodings_are_incompatible(a, b):
    found = rules(
        f"message Order {{ {a} v = 1; }}\n{TYPES}",
        f"message Order {{ {b} v = 1; }}\n{TYPES}",
    )
    assert found == {("type_changed", "/shop.Order/fields/1")}


@pytest.mark.parametrize(
    ("a", "b"), [("bool", "int32"), ("string", "bytes"), ("E", "int32")]
)
def test_json_topics_also_refuse_changes_of_json_spelling(a, b):
    found = rules(
        f"message Order {{ {a} v = 1; }}\n{TYPES}",
        f"message Order {{ {b} v = 1; }}\n{TYPES}",
        encoding="json",
    )
    assert "json_type_changed" in names(found)
    assert (
        rules(
            f"message Order {{ int32 v = 1; }}\n{TYPES}",
            f"message Order {{ int64 v = 1; }}\n{TYPES}",
            encoding="json",
        )
        == set()
    )


def test_integer_to_enum_is_json_compatible_backward():
    found = rules(
        f"message Order {{ int32 v = 1; }}\n{TYPES}",
        f"message Order {{ E v = 1; }}\n{TYPES}",
        directions=(Direction.BACKWARD,),
        encoding="json",
    )
    assert found == set()


def test_group_and_message_do_not_pair():
    found = rules(
        "message Order { optional group G = 1 { optional int32 x = 1; } }",
        "message Order { optional G g = 1; message G { optional int32 x = 1; } }",
        syntax="proto2",
    )
    assert "type_changed" in names(found)


# -- nested, imported, recursive and removed types ---------------------------------


def test_nested_message_changes_are_found_where_they_are():
    old = "message Order { Item item = 1; message Item { int32 qty = 1; } }"
    found = rules(
        old, "message Order { Item item = 1; message Item { string qty = 1; } }"
    )
    assert found == {("type_changed", "/shop.Order.Item/fields/1")}
    grown = old.replace("int32 qty = 1;", "int32 qty = 1; bool s = 2;")
    assert rules(old, grown) == set()


def test_a_named_type_of_another_name_is_incompatible_another_package_is_not():
    old = "message Order { A v = 1; }\nmessage A { int32 x = 1; }"
    assert names(
        rules(old, "message Order { B v = 1; }\nmessage B { int32 x = 1; }")
    ) == {"type_changed"}
    moved = parse_schema('syntax = "proto3"; package other;\n' + old)
    assert check(proto(old), moved, directions=BOTH) == []


def test_imported_well_known_types_compare_by_full_name():
    imports = (
        'import "google/protobuf/timestamp.proto";\n'
        'import "google/protobuf/duration.proto";\n'
    )
    old = imports + "message Order { google.protobuf.Timestamp at = 1; }"
    assert rules(old, old) == set()
    found = rules(old, imports + "message Order { google.protobuf.Duration at = 1; }")
    assert names(found) == {"type_changed"}


def test_recursive_messages_terminate_and_report_once():
    old = "message Node { repeated Node children = 1; int32 v = 2; }"
    new = "message Node { repeated Node children = 1; string v = 2; }"
    found = check(proto(old), proto(new), directions=(Direction.BACKWARD,))
    assert [(v.rule, v.pointer) for v in found] == [
        ("type_changed", "/shop.Node/fields/2")
    ]


def test_mutually_recursive_messages_terminate():
    old = "message A { B b = 1; }\nmessage B { A a = 1; int32 x = 2; }"
    new = "message A { B b = 1; }\nmessage B { A a = 1; int32 x = 2; int32 y = 3; }"
    assert rules(old, new) == set()


def test_removing_a_message_the_topic_no_longer_reaches_is_compatible():
    old = "message Order { Item item = 1; }\nmessage Item { int32 x = 1; }"
    found = rules(old, 'message Order { reserved 1; reserved "item"; }')
    assert found == set()


def test_changing_the_topics_message_is_reported():
    old = proto("message Order { int32 x = 1; }\nmessage Invoice { int32 x = 1; }")
    new = proto("message Order { int32 x = 1; }\nmessage Invoice { int32 x = 1; }")
    moved = parse_schema(new.compiled.rsplit(":", 1)[0] + ":shop.Invoice")
    found = check(old, moved, directions=BOTH)
    assert [(v.rule, v.pointer) for v in found] == [
        ("message_changed", "/shop.Invoice")
    ]


# -- oneofs ------------------------------------------------------------------------


def test_one_field_into_a_new_oneof_is_compatible_two_are_not():
    old = "message Order { string a = 1; string b = 2; }"
    assert (
        rules(
            old,
            "message Order { string a = 1; oneof o { string b = 2; int32 c = 3; } }",
        )
        == set()
    )
    found = rules(
        old,
        "message Order { oneof o { string a = 1; string b = 2; } }",
        directions=(Direction.BACKWARD,),
    )
    assert found == {("fields_moved_into_oneof", "/shop.Order/oneofs/o")}


def test_a_field_into_an_existing_oneof_is_incompatible():
    old = "message Order { string a = 1; oneof o { string b = 2; } }"
    found = rules(
        old,
        "message Order { oneof o { string a = 1; string b = 2; } }",
        directions=(Direction.BACKWARD,),
    )
    assert found == {("field_moved_into_existing_oneof", "/shop.Order/oneofs/o")}


def test_adding_to_a_oneof_is_backward_compatible_removing_from_it_is_not():
    small = "message Order { oneof o { string a = 1; string b = 2; } }"
    large = "message Order { oneof o { string a = 1; string b = 2; int32 c = 3; } }"
    assert rules(small, large, directions=(Direction.BACKWARD,)) == set()
    found = rules(large, small + "", directions=(Direction.BACKWARD,))
    assert ("oneof_field_removed", "/shop.Order/fields/3") in found


def test_a_field_out_of_a_oneof_is_compatible():
    old = "message Order { oneof o { string a = 1; } }"
    assert (
        rules(old, "message Order { string a = 1; }", directions=(Direction.BACKWARD,))
        == set()
    )


# -- required fields and enums -----------------------------------------------------


def test_required_fields_added_or_removed_are_incompatible():
    old = "message Order { optional int32 a = 1; }"
    added = rules(
        old,
        "message Order { optional int32 a = 1; required int32 b = 2; }",
        directions=(Direction.BACKWARD,),
        syntax="proto2",
    )
    assert added == {("required_field_added", "/shop.Order/fields/2")}
    removed = rules(
        "message Order { optional int32 a = 1; required int32 b = 2; }",
        'message Order { optional int32 a = 1; reserved 2; reserved "b"; }',
        directions=(Direction.BACKWARD,),
        syntax="proto2",
    )
    assert removed == {("required_field_removed", "/shop.Order/fields/2")}
    assert (
        rules(
            old,
            "message Order { optional int32 a = 1; optional int32 b = 2; }",
            syntax="proto2",
        )
        == set()
    )


def test_enum_value_renamed_is_incompatible_added_is_not():
    old = "enum S { NEW = 0; PAID = 1; }\nmessage Order { S s = 1; }"
    found = rules(old, "enum S { NEW = 0; SETTLED = 1; }\nmessage Order { S s = 1; }")
    assert ("enum_value_renamed", "/shop.S/values/1") in found
    added = "enum S { NEW = 0; PAID = 1; LOST = 2; }\nmessage Order { S s = 1; }"
    assert rules(old, added, directions=(Direction.BACKWARD,)) == set()


def test_enum_value_removed_matters_to_json_topics_only():
    old = "enum S { NEW = 0; PAID = 1; }\nmessage Order { S s = 1; }"
    new = "enum S { NEW = 0; reserved 1; }\nmessage Order { S s = 1; }"
    assert rules(old, new, directions=(Direction.BACKWARD,)) == set()
    found = rules(old, new, directions=(Direction.BACKWARD,), encoding="json")
    assert found == {("enum_value_removed", "/shop.S/values/1")}


# -- directions and modes ------------------------------------------------------------


def test_forward_reads_the_other_way_and_points_into_the_stored_version():
    old = proto("message Order { int32 a = 1; }")
    new = proto(
        "message Order { int32 a = 1; required_like c = 2; }\nmessage required_like {}"
    )
    assert check(old, new, directions=(Direction.BACKWARD,)) == []
    small = proto("message Order { oneof o { int32 a = 1; } }")
    large = proto("message Order { oneof o { int32 a = 1; int32 b = 2; } }")
    found = check(small, large, directions=(Direction.FORWARD,))
    assert [(v.rule, v.pointer) for v in found] == [
        ("oneof_field_removed", "/shop.Order/fields/2")
    ]


def test_every_violation_is_reported_with_a_record():
    found = check(
        proto("message Order { int32 a = 1; int32 b = 2; string c = 3; }"),
        proto("message Order { string a = 1; repeated int32 b = 2; string cc = 3; }"),
    )
    assert [v.rule for v in found] == ["type_changed", "label_changed", "field_renamed"]
    record = found[0].as_dict(against_version=4)
    assert record == {
        "pointer": "/shop.Order/fields/1",
        "rule": "type_changed",
        "message": record["message"],
        "against_version": 4,
    }
    assert "int32" in record["message"]
    assert "string" in record["message"]


V1 = proto("message Order { string id = 1; }")
V2 = proto("message Order { string id = 1; int32 qty = 2; }")
V3 = proto(
    'message Order { string id = 1; reserved 2; reserved "qty"; int64 total = 3; }'
)
BAD = proto("message Order { int32 id = 1; }")


@pytest.mark.parametrize("mode", MODES)
def test_every_mode_accepts_a_compatible_change(mode):
    assert list(check_history(V3, [(2, V2), (1, V1)], mode)) == []


@pytest.mark.parametrize("mode", [m for m in MODES if m != "NONE"])
def test_every_mode_but_none_refuses_an_incompatible_change(mode):
    found = list(check_history(BAD, [(2, V2), (1, V1)], mode))
    versions = sorted({version for version, _ in found})
    assert versions == ([1, 2] if mode.endswith("_TRANSITIVE") else [2])
    assert all(
        v.rule in {"type_changed", "field_removed_without_reserve"} for _, v in found
    )


def test_none_checks_nothing():
    assert list(check_history(BAD, [(1, V1)], "NONE")) == []


def test_transitive_finds_a_break_only_an_older_version_shows():
    # v2 dropped qty with reservations, v3 reuses the number: fine against v2
    # (it no longer knows qty) but not against v1.
    v1 = proto("message Order { string id = 1; int32 qty = 2; }")
    v2 = proto('message Order { string id = 1; reserved 2; reserved "qty"; }')
    v3 = proto("message Order { string id = 1; string note = 2; }")
    assert names(
        {
            (v.rule, v.pointer)
            for _, v in check_history(v3, [(2, v2), (1, v1)], "BACKWARD")
        }
    ) == {"reserved_reused", "reserved_removed"}
    transitive = list(check_history(v3, [(2, v2), (1, v1)], "BACKWARD_TRANSITIVE"))
    assert {(version, v.rule) for version, v in transitive if version == 1} >= {
        (1, "type_changed"),
        (1, "field_renamed"),
    }


def test_an_unknown_mode_is_refused():
    with pytest.raises(ValueError, match="unknown compatibility mode"):
        list(check_history(V2, [(1, V1)], "SIDEWAYS"))
