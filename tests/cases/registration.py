"""Every example and sentence of the rulebook's "Schema documents" section.

Each case is ``(name, schema_json_text, accepted, words)``: the schema
document's own JSON text, whether registration accepts it, and for a refusal a
substring the error message must contain (the message follows
``invalid argument: ``). The unit tests run the table through
:func:`narad.schema.registration.documents.register`; the HTTP tests send
each text as the ``schema`` of a topic create.
"""

from __future__ import annotations

import json

UUID = "[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
KIB_256 = 256 * 1024
OUTSIDE = "does not resolve inside the document"
TWO_PATHS = "reached by two paths at one level"
MANY_PATHS = "through more than 64 paths"
NEGATED = "re-applies a schema to the same value"
COSTLY = "can cost more than 32 steps per input byte"
TWICE = "is declared twice in one resource"


def _text(document: object) -> str:
    return json.dumps(document, separators=(",", ":"))


def _padded(size: int) -> str:
    """A schema whose compacted text is exactly ``size`` bytes."""
    return '{"description":"' + "x" * (size - len('{"description":""}')) + '"}'


def _nested(levels: int) -> str:
    """``levels`` levels of objects: ``{"items": ...}`` around an empty schema."""
    return '{"items":' * (levels - 1) + "{}" + "}" * (levels - 1)


def doubling_chain(
    length: int, how: str = "allOf", form: str = "pointer", *, dialect: str = ""
) -> str:
    """$defs entries that each apply the next one twice: 2**length paths.

    ``form`` is how each reference is written: a pointer, an ``$anchor``, a
    ``$dynamicAnchor``, an ``$id`` fragment, a draft-04 ``id`` fragment, a
    pointer into a member no keyword owns, or a ``$dynamicRef``.
    """
    container = {
        "pointer": "$defs",
        "anchor": "$defs",
        "dynamic": "$defs",
        "dynamicref": "$defs",
        "id": "definitions",
        "id4": "definitions",
        "member": "x-parts",
    }[form]
    ref_keyword = "$dynamicRef" if form == "dynamicref" else "$ref"

    def ref(i: int) -> dict[str, str]:
        if form in ("pointer", "member"):
            return {ref_keyword: f"#/{container}/d{i}"}
        return {ref_keyword: f"#d{i}"}

    def named(i: int, schema: dict) -> dict:
        names = {
            "anchor": "$anchor",
            "dynamic": "$dynamicAnchor",
            "dynamicref": "$dynamicAnchor",
            "id": "$id",
            "id4": "id",
        }
        if form in names:
            value = f"#d{i}" if form in ("id", "id4") else f"d{i}"
            return {names[form]: value, **schema}
        return schema

    parts = {f"d{i}": named(i, {how: [ref(i + 1), ref(i + 1)]}) for i in range(length)}
    parts[f"d{length}"] = named(length, {"type": "string"})
    document: dict = {**ref(0), container: parts}
    if dialect:
        document = {"$schema": dialect, **document}
    return _text(document)


def recursive_properties_chain(n: int) -> dict:
    """Each link applies the next in place and recurses to the root under its
    own property name: ordinary recursion, reached once per level."""
    defs: dict = {
        f"d{i}": {
            "allOf": [{"$ref": f"#/$defs/d{i + 1}"}],
            "properties": {f"p{i}": {"$ref": "#"}},
        }
        for i in range(n)
    }
    defs[f"d{n}"] = {}
    return {"$ref": "#/$defs/d0", "$defs": defs}


def nested_resources(length: int) -> str:
    """A doubling chain where each link is a nested resource with its own $id."""
    inner: dict = {"$id": f"https://example.com/d{length}", "type": "string"}
    for i in reversed(range(length)):
        inner = {
            "$id": f"https://example.com/d{i}",
            "allOf": [{"$ref": "#/$defs/next"}, {"$ref": "#/$defs/next"}],
            "$defs": {"next": inner},
        }
    return _text(inner)


def union(branches: int) -> str:
    """An anyOf of ``branches`` branches that each reference one base."""
    return _text(
        {
            "anyOf": [{"$ref": "#/$defs/base"} for _ in range(branches)],
            "$defs": {"base": {"type": "object", "required": ["id"]}},
        }
    )


SHARED_DEFINITION = _text(
    {
        "type": "object",
        "properties": {f"field{i}": {"$ref": "#/$defs/money"} for i in range(200)},
        "$defs": {
            "money": {
                "type": "object",
                "properties": {
                    "amount": {"type": "integer"},
                    "currency": {"type": "string"},
                },
            }
        },
    }
)
TREE = _text(
    {
        "type": "object",
        "properties": {"left": {"$ref": "#"}, "right": {"$ref": "#"}, "value": {}},
    }
)
JSON_VALUE = _text(
    {
        "anyOf": [
            {"type": ["null", "boolean", "number", "string"]},
            {"type": "array", "items": {"$ref": "#"}},
            {"type": "object", "additionalProperties": {"$ref": "#"}},
        ],
    }
)

D2020 = "https://json-schema.org/draft/2020-12/schema"
D2019 = "https://json-schema.org/draft/2019-09/schema"
D7 = "http://json-schema.org/draft-07/schema#"
D6 = "http://json-schema.org/draft-06/schema#"
D4 = "http://json-schema.org/draft-04/schema#"

CASES: list[tuple[str, str, bool, str | None]] = [
    # It is a JSON object or true.
    ("object", '{"type": "object", "required": ["id"]}', True, None),
    ("empty object", "{}", True, None),
    ("true", "true", True, None),
    ("false refuses every message", "false", False, "false is refused"),
    ("null", "null", False, "must be a JSON object or true"),
    ("string", '"object"', False, "must be a JSON object or true"),
    ("number", "1", False, "must be a JSON object or true"),
    ("array", "[{}]", False, "must be a JSON object or true"),
    ("not JSON", '{"type": }', False, "is not JSON"),
    ("trailing data", "{} {}", False, "trailing data"),
    # At most 256 KiB and 64 levels.
    ("256 KiB exactly", _padded(KIB_256), True, None),
    ("over 256 KiB", _padded(KIB_256 + 1), False, "larger than 256 KiB"),
    (
        "whitespace does not count",
        _padded(KIB_256).replace(":", ": " + " " * 5000),
        True,
        None,
    ),
    ("64 levels", _nested(64), True, None),
    ("65 levels", _nested(65), False, "nests deeper than 64 levels"),
    # Numbers beyond +-1000 exponent.
    ("exponent 400", '{"minimum": 1e400}', True, None),
    ("exponent 1001", '{"minimum": 1e1001}', False, "exponent is beyond"),
    ("exponent -1001", '{"multipleOf": 1e-1001}', False, "exponent is beyond"),
    (
        "exponent past what Decimal can hold",
        '{"minimum": 1e999999999999999999999}',
        False,
        "exponent is beyond",
    ),
    ("1.0 is an integer", '{"minLength": 1.0}', True, None),
    # $schema names a built-in draft.
    ("2020-12", _text({"$schema": D2020}), True, None),
    ("2020-12 with #", _text({"$schema": D2020 + "#"}), True, None),
    ("2019-09", _text({"$schema": D2019}), True, None),
    ("07", _text({"$schema": D7}), True, None),
    ("07 without #", _text({"$schema": D7.rstrip("#")}), True, None),
    ("06", _text({"$schema": D6}), True, None),
    ("04", _text({"$schema": D4}), True, None),
    (
        "draft-03",
        '{"$schema": "http://json-schema.org/draft-03/schema#"}',
        False,
        "$schema names no built-in draft",
    ),
    (
        "unknown dialect",
        '{"$schema": "https://example.com/my-dialect"}',
        False,
        "$schema names no built-in draft",
    ),
    (
        "$schema not a string",
        '{"$schema": 7}',
        False,
        "$schema names no built-in draft",
    ),
    # Valid against its draft's meta-schema.
    ("bad type", '{"type": 5}', False, "meta-schema"),
    ("negative minLength", '{"minLength": -1}', False, "meta-schema"),
    (
        "properties not an object",
        '{"properties": [{"type": "string"}]}',
        False,
        "meta-schema",
    ),
    ("const is an annotation in 04", _text({"$schema": D4, "const": 1}), True, None),
    # A reference may lead into a member no keyword owns, or into data: what
    # it leads to is a subschema the validator compiles, checked the same way.
    (
        "schema in an unknown keyword, referenced",
        '{"$ref": "#/x-lib/a", "x-lib": {"a": {"type": "string"}}}',
        True,
        None,
    ),
    (
        "bad type in an unknown keyword, referenced",
        '{"$ref": "#/x-lib/a", "x-lib": {"a": {"type": "bogus"}}}',
        False,
        "meta-schema",
    ),
    (
        "multipleOf 0 in an unknown keyword, referenced",
        '{"properties": {"p": {"$ref": "#/x-lib"}}, "x-lib": {"multipleOf": 0}}',
        False,
        "meta-schema",
    ),
    (
        "bad items deep in an unknown keyword, referenced",
        '{"$ref": "#/x-lib", "x-lib": {"items": {"properties": 5}}}',
        False,
        "meta-schema",
    ),
    (
        "$defs of draft-07, referenced",
        _text({"$schema": D7, "$ref": "#/$defs/a", "$defs": {"a": {"type": "string"}}}),
        True,
        None,
    ),
    (
        "bad type in $defs of draft-07, referenced",
        _text({"$schema": D7, "$ref": "#/$defs/a", "$defs": {"a": {"type": "bogus"}}}),
        False,
        "meta-schema",
    ),
    ("schema in const, referenced", '{"$ref": "#/const", "const": {}}', True, None),
    (
        "bad type in const, referenced",
        '{"$ref": "#/const", "const": {"type": "bogus"}}',
        False,
        "meta-schema",
    ),
    (
        "lookaround in enum data, referenced",
        '{"$ref": "#/enum/0", "enum": [{"pattern": "(?=a)"}]}',
        False,
        "lookaround",
    ),
    (
        "remote $ref in default data, referenced",
        '{"$ref": "#/default", "default": {"$ref": "https://example.com/s"}}',
        False,
        "leads nowhere in the document",
    ),
    # $ref resolves only inside the document.
    (
        "pointer to $defs",
        '{"$ref": "#/$defs/a", "$defs": {"a": {"type": "string"}}}',
        True,
        None,
    ),
    (
        "anchor",
        '{"$ref": "#a", "$defs": {"x": {"$anchor": "a", "type": "string"}}}',
        True,
        None,
    ),
    (
        "$dynamicRef",
        '{"$dynamicAnchor": "node", "properties": {"next": {"$dynamicRef": "#node"}}}',
        True,
        None,
    ),
    ("http", '{"$ref": "http://example.com/s.json"}', False, OUTSIDE),
    ("https", '{"$ref": "https://example.com/s.json#/a"}', False, OUTSIDE),
    ("file", '{"$ref": "file:///etc/passwd"}', False, OUTSIDE),
    ("relative path", '{"$ref": "other.json"}', False, OUTSIDE),
    ("relative path with fragment", '{"$ref": "other.json#/a"}', False, OUTSIDE),
    ("empty $ref", '{"$ref": ""}', False, OUTSIDE),
    (
        "own $id",
        '{"$id": "https://example.com/s", "$ref": "https://example.com/s"}',
        False,
        OUTSIDE,
    ),
    (
        "own $id with pointer",
        '{"$id": "https://example.com/s", "$defs": {"a": {}}, '
        '"$ref": "https://example.com/s#/$defs/a"}',
        False,
        OUTSIDE,
    ),
    (
        "in an unreferenced $defs entry",
        '{"$defs": {"later": {"$ref": "https://example.com/later.json"}}}',
        False,
        OUTSIDE,
    ),
    (
        "deep in properties",
        '{"properties": {"a": {"items": {"$ref": "file:///tmp/x"}}}}',
        False,
        OUTSIDE,
    ),
    (
        "$dynamicRef outside",
        '{"$dynamicRef": "https://example.com/s#node"}',
        False,
        OUTSIDE,
    ),
    # One anchor, one subschema: two declarations of an anchor in one resource
    # would leave a reference's target undefined (issue 19).
    (
        "duplicate $anchor",
        '{"$defs": {"x": {"$anchor": "a", "type": "string"},'
        ' "y": {"$anchor": "a", "type": "integer"}}, "$ref": "#a"}',
        False,
        "the anchor 'a' is declared twice in one resource: by the $anchor at "
        "'/$defs/x' and the $anchor at '/$defs/y'",
    ),
    (
        "duplicate $anchor nothing refers to",
        '{"$defs": {"x": {"$anchor": "a"}, "y": {"$anchor": "a"}}}',
        False,
        TWICE,
    ),
    (
        "duplicate $dynamicAnchor",
        '{"$defs": {"x": {"$dynamicAnchor": "n", "type": "string"},'
        ' "y": {"$dynamicAnchor": "n", "type": "integer"}},'
        ' "items": {"$dynamicRef": "#n"}}',
        False,
        "the anchor 'n' is declared twice in one resource: by the $dynamicAnchor",
    ),
    (
        "$anchor and $dynamicAnchor of one name apart",
        '{"$defs": {"x": {"$anchor": "n"}, "y": {"$dynamicAnchor": "n"}}}',
        False,
        "by the $anchor at '/$defs/x' and the $dynamicAnchor at '/$defs/y'",
    ),
    (
        "$anchor and $dynamicAnchor of one name on one subschema",
        '{"$defs": {"x": {"$anchor": "n", "$dynamicAnchor": "n"}}, "$ref": "#n"}',
        True,
        None,
    ),
    (
        "one anchor name in two resources",
        '{"$defs": {"x": {"$id": "urn:x", "$defs": {"a": {"$anchor": "a"}}},'
        ' "y": {"$id": "urn:y", "$defs": {"a": {"$anchor": "a"}}}}}',
        True,
        None,
    ),
    (
        "duplicate $anchor in 2019-09",
        _text(
            {"$schema": D2019, "$defs": {"x": {"$anchor": "a"}, "y": {"$anchor": "a"}}}
        ),
        False,
        TWICE,
    ),
    (
        "duplicate $id fragment in 07",
        _text({"$schema": D7, "definitions": {"x": {"$id": "#a"}, "y": {"$id": "#a"}}}),
        False,
        "the anchor 'a' is declared twice in one resource: by the $id",
    ),
    (
        "duplicate id fragment in 04",
        _text({"$schema": D4, "definitions": {"x": {"id": "#a"}, "y": {"id": "#a"}}}),
        False,
        TWICE,
    ),
    (
        "one $id on two subschemas",
        '{"$defs": {"x": {"$id": "https://example.com/x"},'
        ' "y": {"$id": "https://example.com/x"}}}',
        False,
        "the resource 'https://example.com/x' is declared twice: by the $id at",
    ),
    ("leads nowhere", '{"$ref": "#/$defs/missing"}', False, "leads nowhere"),
    ("anchor that does not exist", '{"$ref": "#nothing"}', False, "leads nowhere"),
    (
        "$ref inside enum is data",
        '{"enum": [{"$ref": "http://example.com"}]}',
        True,
        None,
    ),
    (
        "$id loads nothing",
        '{"$id": "https://example.com/never-fetched.json", "type": "object"}',
        True,
        None,
    ),
    (
        "draft-04 id loads nothing",
        _text({"$schema": D4, "id": "http://example.com/x#"}),
        True,
        None,
    ),
    # Patterns: RE2 syntax, no lookaround or backreference, bounded cost.
    ("unanchored a.{1000}b", '{"pattern": "a.{1000}b"}', False, COSTLY),
    ("assertions walked", '{"pattern": "(?:\\\\B){1000}x"}', False, COSTLY),
    ("anchored a.{1000}b", '{"pattern": "^a.{1000}b"}', True, None),
    ("anchored assertions", '{"pattern": "^(?:\\\\B){1000}x"}', True, None),
    ("short repetition", '{"pattern": "a.{10}b"}', True, None),
    ("unanchored UUID", _text({"pattern": UUID}), True, None),
    ("lookahead", '{"pattern": "^(?=a)"}', False, "lookaround"),
    ("negative lookbehind", '{"pattern": "(?<!a)b"}', False, "lookaround"),
    ("backreference", '{"pattern": "(a)\\\\1"}', False, "backreference"),
    (
        "patternProperties lookahead",
        '{"patternProperties": {"^(?!x)": {}}}',
        False,
        "lookaround",
    ),
    (
        "patternProperties costly",
        '{"patternProperties": {"a.{1000}b": {}}}',
        False,
        COSTLY,
    ),
    ("not RE2", '{"pattern": "a{2,1}"}', False, "not valid RE2 syntax"),
    # Shape 1: the same value reached by more than one path at one level.
    (
        "a property named by a lone surrogate, beside a pattern it misses",
        '{"properties": {"\\ud800": {"$ref": "#"}},'
        ' "patternProperties": {"^a": {"$ref": "#"}}}',
        True,
        None,
    ),
    (
        "a property named by a lone surrogate, beside a pattern it matches",
        '{"properties": {"\\ud800": {"$ref": "#"}},'
        ' "patternProperties": {".": {"$ref": "#"}}}',
        False,
        TWO_PATHS,
    ),
    (
        "allOf items twice",
        '{"allOf": [{"items": {"$ref": "#"}}, {"items": {"$ref": "#"}}]}',
        False,
        "'/allOf/0/items/$ref' and '/allOf/1/items/$ref'",
    ),
    (
        "anyOf same recursive $ref twice",
        '{"type": "object", "properties": {"next": '
        '{"anyOf": [{"$ref": "#"}, {"$ref": "#"}]}}}',
        False,
        TWO_PATHS,
    ),
    (
        "four branches",
        '{"anyOf": [' + ", ".join(['{"items": {"$ref": "#"}}'] * 4) + "]}",
        False,
        TWO_PATHS,
    ),
    (
        "properties and matching patternProperties",
        '{"properties": {"a": {"$ref": "#"}},'
        ' "patternProperties": {"^a$": {"$ref": "#"}}}',
        False,
        TWO_PATHS,
    ),
    ("recursion through property names", TREE, True, None),
    ("recursion through items and additionalProperties", JSON_VALUE, True, None),
    # Shape 2: more than 64 paths to one subschema for one value.
    ("chain through allOf", doubling_chain(7, "allOf"), False, MANY_PATHS),
    ("chain through anyOf", doubling_chain(7, "anyOf"), False, MANY_PATHS),
    ("chain through oneOf", doubling_chain(7, "oneOf"), False, MANY_PATHS),
    ("chain of 6 is 64 paths", doubling_chain(6), True, None),
    ("chain by $anchor", doubling_chain(7, form="anchor"), False, MANY_PATHS),
    ("chain by $dynamicAnchor", doubling_chain(7, form="dynamic"), False, MANY_PATHS),
    ("chain by $dynamicRef", doubling_chain(7, form="dynamicref"), False, MANY_PATHS),
    (
        "chain by $id fragment",
        doubling_chain(7, form="id", dialect=D7),
        False,
        MANY_PATHS,
    ),
    (
        "chain by draft-04 id",
        doubling_chain(7, form="id4", dialect=D4),
        False,
        MANY_PATHS,
    ),
    (
        "chain through a member no keyword owns",
        doubling_chain(7, form="member"),
        False,
        MANY_PATHS,
    ),
    ("chain of nested resources", nested_resources(7), False, MANY_PATHS),
    ("the error names the subschema", doubling_chain(7), False, "'/$defs/d"),
    ("shared definition under many names", SHARED_DEFINITION, True, None),
    ("union of 64 branches on one base", union(64), True, None),
    ("union of 65 branches on one base", union(65), False, "'/$defs/base' is checked"),
    # Shape 3: a $ref cycle on the same value through not, if or oneOf.
    ("not", '{"not": {"$ref": "#"}}', False, NEGATED),
    ("if", '{"if": {"$ref": "#"}, "then": {"type": "string"}}', False, NEGATED),
    ("oneOf", '{"oneOf": [{"$ref": "#"}, {"type": "string"}]}', False, NEGATED),
    (
        "not through $defs",
        '{"$ref": "#/$defs/a", "$defs": {"a": {"not": {"$ref": "#/$defs/a"}}}}',
        False,
        NEGATED,
    ),
    ("allOf", '{"allOf": [{"$ref": "#"}]}', True, None),
    ("anyOf", '{"anyOf": [{"$ref": "#"}, {"type": "string"}]}', True, None),
    ("then", '{"if": {"type": "string"}, "then": {"$ref": "#"}}', True, None),
    ("else", '{"if": {"type": "string"}, "else": {"$ref": "#"}}', True, None),
    (
        "a loop of nothing but $ref",
        '{"$ref": "#/$defs/a", "$defs": {"a": '
        '{"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}}}',
        True,
        None,
    ),
    (
        "not on a child is fine",
        '{"properties": {"a": {"not": {"$ref": "#"}}}}',
        True,
        None,
    ),
]
