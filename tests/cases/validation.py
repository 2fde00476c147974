"""Every example and sentence of the rulebook's "Validation on produce" section.

Each case is ``(name, schema_json_text, payload_bytes, accepted, words)``:
the topic's schema, the produced body, whether produce accepts it, and for a
refusal a substring the error message must contain (None: any message). The
unit tests run the table through
:class:`narad.schema.validation.validator.Validator`; the HTTP tests run it
through produce.
"""

from __future__ import annotations

OBJECT_ID = '{"type": "object", "required": ["id"]}'
BIG_ENUM = '{"enum": [' + ", ".join(str(i) for i in range(45_000)) + "]}"
WORDS_ENUM = '{"enum": [' + ", ".join(f'"w{i}"' for i in range(20)) + "]}"
# Issue 19: unevaluated* beside an applicator that recurses. Each level of
# payload nesting used to double the work (20 levels took seconds).
UNEVALUATED_ANY_OF_ITEMS = (
    '{"anyOf":[{"prefixItems":[{"$ref":"#"}]}],"unevaluatedItems":false}'
)
UNEVALUATED_ANY_OF_PROPERTIES = (
    '{"anyOf":[{"properties":{"c":{"$ref":"#"}}}],"unevaluatedProperties":false}'
)
UNEVALUATED_ONE_OF = (
    '{"oneOf":[{"properties":{"c":{"$ref":"#"}}}],"unevaluatedProperties":false}'
)
UNEVALUATED_IF = (
    '{"if":{"properties":{"c":{"$ref":"#"}}},"unevaluatedProperties":false}'
)
UNEVALUATED_CONTAINS = '{"anyOf":[{"contains":{"$ref":"#"}}],"unevaluatedItems":false}'


def nested_c(levels: int, inner: bytes = b"{}") -> bytes:
    """``levels`` objects nested through ``"c"`` around ``inner``."""
    return b'{"c":' * levels + inner + b"}" * levels


# Issue 19: a chain of 200 references leaves room for 244 levels of payload.
REF_CHAIN_200 = (
    '{"$ref":"#/$defs/d0","$defs":{'
    + ",".join(f'"d{i}":{{"$ref":"#/$defs/d{i + 1}"}}' for i in range(200))
    + ',"d200":{}}}'
)
ITEMS_REQUIRED = (
    '{"items": {"required": ['
    + ", ".join(f'"field_{i:04d}"' for i in range(1024))
    + "]}}"
)

CASES: list[tuple[str, str, bytes, bool, str | None]] = [
    # The rulebook's request example and its exact error line.
    (
        "missing required property",
        OBJECT_ID,
        b'{"amount": 5}',
        False,
        "schema: jsonschema validation failed with 'narad://schema/",
    ),
    (
        "missing required names the property",
        OBJECT_ID,
        b'{"amount": 5}',
        False,
        "- at '': missing property 'id'",
    ),
    ("required present", OBJECT_ID, b'{"id": 1}', True, None),
    # One JSON text, in valid UTF-8.
    ("not JSON", OBJECT_ID, b"id=1", False, "not one JSON text"),
    ("binary", "true", b"\x00\x01\xfe\xff", False, "not one JSON text"),
    ("empty body", "true", b"", False, "not one JSON text"),
    ("trailing data", OBJECT_ID, b'{"id":1} {"id":2}', False, "trailing data"),
    ("byte-order mark", "true", b'\xef\xbb\xbf{"id":1}', False, "byte-order mark"),
    (
        "raw control character in a string",
        "true",
        b'"a\x01b"',
        False,
        "not one JSON text",
    ),
    ("invalid UTF-8 in a string", "true", b'"a\xffb"', False, "UTF-8"),
    ("NaN", "true", b"NaN", False, "not one JSON text"),
    ("Infinity", "true", b"[Infinity]", False, "not one JSON text"),
    # Any JSON value can be the payload.
    (
        "array payload checked",
        '{"type": "array", "items": {"type": "integer"}}',
        b"[1,2]",
        True,
        None,
    ),
    (
        "array payload refused",
        '{"type": "array", "items": {"type": "integer"}}',
        b'[1,"2"]',
        False,
        "- at '/1': got string, want integer",
    ),
    ("string payload", '{"type": "string"}', b'"text"', True, None),
    (
        "string payload refused",
        '{"type": "object"}',
        b'"text"',
        False,
        "got string, want object",
    ),
    ("schema true accepts any JSON", "true", b'"text"', True, None),
    ("schema {} accepts any JSON", "{}", b"[1,2]", True, None),
    ("schema {} still needs JSON", "{}", b"[1,2", False, "not one JSON text"),
    # Duplicate keys: "When an object repeats a key, the last value wins,
    # and that value is the one checked" (issue 50; Narad's own request
    # bodies still refuse repeats).
    (
        "repeated key: the last value wins and is the one checked",
        '{"properties": {"a": {"type": "integer"}}}',
        b'{"a": "x", "a": 1}',
        True,
        None,
    ),
    (
        "repeated key: the last value is refused, where it sits",
        '{"properties": {"a": {"type": "integer"}}}',
        b'{"b": [{"a": 1, "a": "x"}], "a": 1, "a": "y"}',
        False,
        "- at '/a': got string, want integer",
    ),
    # Nesting: at most 256 levels, checked before validation.
    (
        "[[1]] nests two",
        '{"items": {"items": {"type": "integer"}}}',
        b"[[1]]",
        True,
        None,
    ),
    ("256 levels accepted", "true", b"[" * 256 + b"]" * 256, True, None),
    (
        "257 levels refused",
        "true",
        b"[" * 257 + b"]" * 257,
        False,
        "payload nests deeper than 256 levels",
    ),
    (
        "20 KB nested 9,990 deep",
        "true",
        b"[" * 9990 + b"]" * 9990,
        False,
        "payload nests deeper than 256 levels",
    ),
    # Exact numbers.
    (
        "9007199254740993 is odd",
        '{"multipleOf": 2}',
        b"9007199254740993",
        False,
        "multipleOf",
    ),
    ("9007199254740992 is even", '{"multipleOf": 2}', b"9007199254740992", True, None),
    (
        "2^63 over int64 maximum",
        '{"maximum": 9223372036854775807}',
        b"9223372036854775808",
        False,
        "maximum",
    ),
    (
        "int64 maximum itself",
        '{"maximum": 9223372036854775807}',
        b"9223372036854775807",
        True,
        None,
    ),
    ("1e400 is a valid number", '{"type": "number"}', b"1e400", True, None),
    ("1.0 is an integer", '{"type": "integer"}', b"1.0", True, None),
    ("1e2 is an integer", '{"type": "integer"}', b"1e2", True, None),
    (
        "1.5 is not an integer",
        '{"type": "integer"}',
        b"1.5",
        False,
        "got number, want integer",
    ),
    (
        "1e1001 refused as invalid payload",
        "true",
        b"1e1001",
        False,
        "not one JSON text",
    ),
    (
        "1e-1001 refused as invalid payload",
        "true",
        b"[1e-1001]",
        False,
        "not one JSON text",
    ),
    (
        "an exponent past what Decimal can hold refused as invalid payload",
        "true",
        b"[1e999999999999999999999, 1E-999999999999999999999]",
        False,
        "exponent is beyond",
    ),
    ("exact decimal multipleOf", '{"multipleOf": 0.01}', b"19.99", True, None),
    (
        "a subschema in an unknown keyword applies where referenced",
        '{"$ref": "#/x-lib/a", "x-lib": {"a": {"type": "string"}}}',
        b"1",
        False,
        "got integer, want string",
    ),
    (
        "exact decimal multipleOf refused",
        '{"multipleOf": 0.01}',
        b"19.999",
        False,
        "multipleOf",
    ),
    (
        "schema number bound exact",
        '{"minimum": 0.30000000000000001}',
        b"0.3",
        False,
        "minimum",
    ),
    (
        "enum of big ints exact",
        '{"enum": [9007199254740993]}',
        b"9007199254740992",
        False,
        "value must be one of",
    ),
    ("enum 1 equals 1.0", '{"enum": [1, 2]}', b"1.0", True, None),
    ("enum true is not 1", '{"enum": [1]}', b"true", False, "value must be one of"),
    ("const 1e2 equals 100", '{"const": 100}', b"1e2", True, None),
    (
        "const exact",
        '{"const": 9223372036854775807}',
        b"9223372036854775806",
        False,
        "value must be 9223372036854775807",
    ),
    # Lengths count Unicode characters, not bytes.
    ("maxLength counts characters", '{"maxLength": 3}', '"äöü"'.encode(), True, None),
    (
        "minLength counts characters",
        '{"minLength": 4}',
        '"äöü"'.encode(),
        False,
        "minLength",
    ),
    (
        "escaped pair is one character",
        '{"maxLength": 1}',
        b'"\\ud83d\\ude00"',
        True,
        None,
    ),
    # pattern and patternProperties on RE2.
    ("pattern searches", '{"pattern": "[0-9]{3}"}', b'"ab123"', True, None),
    (
        "pattern refuses",
        '{"pattern": "^[a-z]+$"}',
        b'"ab1"',
        False,
        "does not match pattern",
    ),
    (
        "patternProperties",
        '{"patternProperties": {"^n_": {"type": "integer"}}}',
        b'{"n_a": "x"}',
        False,
        "- at '/n_a'",
    ),
    (
        "1 MiB string against a pattern",
        '{"pattern": "^[a-z]+$"}',
        b'"' + b"a" * ((1 << 20) - 2) + b'"',  # the whole body is 1 MiB
        True,
        None,
    ),
    # enum by hash.
    ("45,000-value enum hit", BIG_ENUM, b"44999", True, None),
    ("45,000-value enum miss", BIG_ENUM, b"45000", False, "value must be one of"),
    ("20-value enum", WORDS_ENUM, b'"w19"', True, None),
    # format asserts on every draft; unknown formats are ignored.
    (
        "email refused",
        '{"format": "email"}',
        b'"not an email"',
        False,
        "is not valid email",
    ),
    (
        "date-time refused",
        '{"format": "date-time"}',
        b'"2024-02-30T00:00:00Z"',
        False,
        "is not valid date-time",
    ),
    (
        "date-time accepted",
        '{"format": "date-time"}',
        b'"2024-02-29T10:00:00Z"',
        True,
        None,
    ),
    ("uuid refused", '{"format": "uuid"}', b'"1234"', False, "uuid"),
    ("ipv4 refused", '{"format": "ipv4"}', b'"256.0.0.1"', False, "ipv4"),
    ("uri refused", '{"format": "uri"}', b'"no scheme"', False, "uri"),
    (
        "format asserts on draft-07",
        '{"$schema": "http://json-schema.org/draft-07/schema#", "format": "uuid"}',
        b'"x"',
        False,
        "uuid",
    ),
    ("format ignores non-strings", '{"format": "email"}', b"12", True, None),
    ("unknown format ignored", '{"format": "no-such-format"}', b'"x"', True, None),
    # Very large reports are not built; the verdict is the same.
    (
        "1 MiB of failing values",
        '{"items": {"type": "string"}}',
        b"[" + b",".join([b"1"] * 500_000) + b"]",
        False,
        "too many violations",
    ),
    (
        "101 small violations are still named",
        '{"items": {"type": "string"}}',
        b"[" + b",".join(b"%d" % i for i in range(101)) + b"]",
        False,
        "- at '/0': got integer, want string",
    ),
    (
        "many items missing a long required list",
        ITEMS_REQUIRED,
        b"[" + b",".join([b"{}"] * 200) + b"]",
        False,
        "too many violations",
    ),
    ("huge enum message is cut", BIG_ENUM, b'"x"', False, "value must be one of 0"),
    # unevaluated* beside anyOf, oneOf, if and contains: one pass per value.
    (
        "unevaluatedItems beside anyOf, 20 levels",
        UNEVALUATED_ANY_OF_ITEMS,
        b"[" * 20 + b"]" * 20,
        True,
        None,
    ),
    (
        "unevaluatedItems beside anyOf, 256 levels",
        UNEVALUATED_ANY_OF_ITEMS,
        b"[" * 256 + b"]" * 256,
        True,
        None,
    ),
    (
        "unevaluatedItems beside anyOf, refused at the bottom",
        UNEVALUATED_ANY_OF_ITEMS,
        b"[" * 255 + b"1,2" + b"]" * 255,
        False,
        "- at '': anyOf: value matches none of 1 schemas",
    ),
    (
        "unevaluatedItems beside anyOf, refused at the top",
        UNEVALUATED_ANY_OF_ITEMS,
        b"[[[]]," + b",".join([b"1"] * 100_000) + b"]",
        False,
        "unevaluated items at 1, 2, 3",
    ),
    (
        "unevaluatedProperties beside anyOf, 16 levels",
        UNEVALUATED_ANY_OF_PROPERTIES,
        nested_c(16),
        True,
        None,
    ),
    (
        "unevaluatedProperties beside anyOf, 255 levels",
        UNEVALUATED_ANY_OF_PROPERTIES,
        nested_c(255),
        True,
        None,
    ),
    (
        "unevaluatedProperties beside anyOf, refused at the bottom",
        UNEVALUATED_ANY_OF_PROPERTIES,
        nested_c(255, b'{"x":1}'),
        False,
        "anyOf: value matches none of 1 schemas",
    ),
    (
        "unevaluatedProperties beside anyOf, refused at the top",
        UNEVALUATED_ANY_OF_PROPERTIES,
        b'{"c":{},"x":1}',
        False,
        "- at '': unevaluated properties 'x' not allowed",
    ),
    (
        "unevaluatedProperties beside oneOf, 255 levels",
        UNEVALUATED_ONE_OF,
        nested_c(255),
        True,
        None,
    ),
    (
        "unevaluatedProperties beside oneOf, refused",
        UNEVALUATED_ONE_OF,
        nested_c(255, b'{"x":1}'),
        False,
        "oneOf: value matches none of 1 schemas",
    ),
    (
        "unevaluatedProperties beside if, 255 levels",
        UNEVALUATED_IF,
        nested_c(255),
        True,
        None,
    ),
    (
        "unevaluatedProperties beside if, refused",
        UNEVALUATED_IF,
        nested_c(255, b'{"x":1}'),
        False,
        "- at '': unevaluated properties 'c' not allowed",
    ),
    (
        "unevaluatedItems beside contains, 256 levels",
        UNEVALUATED_CONTAINS,
        b"[" * 255 + b"1" + b"]" * 255,
        True,
        None,
    ),
    (
        "unevaluatedItems beside contains, wide",
        UNEVALUATED_CONTAINS,
        b"[" + b",".join([b"[[1,1],[1]]"] * 50_000) + b"]",
        True,
        None,
    ),
    (
        "unevaluatedItems beside contains, refused",
        UNEVALUATED_CONTAINS,
        b"[" * 256 + b"]" * 256,
        False,
        "anyOf: value matches none of 1 schemas",
    ),
    # Nesting is the depth of objects and arrays, not a count of brackets.
    (
        "brackets in a string do not nest",
        REF_CHAIN_200,
        b'"' + b"[" * 300 + b'"',
        True,
        None,
    ),
    (
        "siblings do not nest",
        REF_CHAIN_200,
        b"[" + b",".join([b"[]"] * 300) + b"]",
        True,
        None,
    ),
    (
        "as deep as a long reference chain allows",
        REF_CHAIN_200,
        b"[" * 244 + b"]" * 244,
        True,
        None,
    ),
    (
        "deeper than a long reference chain allows",
        REF_CHAIN_200,
        b"[" * 245 + b"]" * 245,
        False,
        "payload nests deeper than the 244 levels this schema can validate",
    ),
    (
        "deeper than 256 levels, whatever the schema",
        REF_CHAIN_200,
        b"[" * 257 + b"]" * 257,
        False,
        "payload nests deeper than 256 levels",
    ),
    # A $ref loop of nothing but $ref accepts nothing.
    ("loop of nothing but $ref", '{"$ref": "#"}', b"1", False, "cycle"),
    (
        "recursive schema through items",
        '{"type": "array", "items": {"$ref": "#"}}',
        b"[[[]],[]]",
        True,
        None,
    ),
]
