"""Ordinary schemas and instances on which Narad agrees with python-jsonschema.

No edge numbers and no formats: those are where Narad is meant to differ.
"""

from __future__ import annotations

SCHEMAS = [
    {},
    {"type": "object", "required": ["id"]},
    {"type": ["string", "null"], "minLength": 2, "maxLength": 4},
    {"type": "integer", "minimum": 1, "maximum": 10},
    {"multipleOf": 3},
    {"enum": [1, "a", None, [1, 2], {"k": True}]},
    {"enum": list(range(40))},
    {"const": {"a": [1, "x"]}},
    {"pattern": "^[a-z]+[0-9]?$"},
    {
        "properties": {"a": {"type": "string"}, "b": {"type": "integer"}},
        "patternProperties": {"^x-": {"type": "boolean"}},
        "additionalProperties": False,
    },
    {
        "additionalProperties": {"type": "integer"},
        "minProperties": 1,
        "maxProperties": 2,
    },
    {"propertyNames": {"maxLength": 2}},
    {"items": {"type": "integer"}, "minItems": 1, "maxItems": 3, "uniqueItems": True},
    {"contains": {"const": 2}},
    {"allOf": [{"type": "object"}, {"required": ["a"]}]},
    {"anyOf": [{"type": "string"}, {"type": "integer", "minimum": 5}]},
    {"oneOf": [{"type": "integer"}, {"minimum": 2}]},
    {"not": {"type": "array"}},
    {
        "type": "object",
        "properties": {
            "children": {"type": "array", "items": {"$ref": "#"}},
            "name": {"type": "string"},
        },
        "required": ["name"],
    },
    {
        "definitions": {"pos": {"type": "integer", "minimum": 0}},
        "properties": {"n": {"$ref": "#/definitions/pos"}},
    },
]
# Keywords that exist only from some draft on, with the first draft.
SCHEMAS_FROM = {
    "06": [
        {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 3},
        {"const": 3},
        {"propertyNames": {"pattern": "^a"}},
        {"contains": {"type": "string"}},
    ],
    "07": [
        {"if": {"type": "integer"}, "then": {"minimum": 3}, "else": {"type": "string"}},
        {"if": {"required": ["a"]}, "then": {"required": ["b"]}},
    ],
    "2019-09": [
        {"dependentRequired": {"a": ["b", "c"]}},
        {"dependentSchemas": {"a": {"required": ["z"]}}},
        {"contains": {"type": "integer"}, "minContains": 2, "maxContains": 3},
        {"contains": {"type": "integer"}, "minContains": 0},
        {"properties": {"a": {}}, "unevaluatedProperties": False},
        {"allOf": [{"properties": {"a": {}}}], "unevaluatedProperties": False},
        {
            "anyOf": [
                {"properties": {"a": {"type": "integer"}}, "required": ["a"]},
                {"properties": {"b": {}}},
            ],
            "unevaluatedProperties": False,
        },
        {
            "if": {"properties": {"a": {"const": 1}}},
            "then": {"properties": {"b": {}}},
            "else": {"properties": {"c": {}}},
            "unevaluatedProperties": False,
        },
        {
            "$defs": {"base": {"properties": {"a": {}}}},
            "$ref": "#/$defs/base",
            "unevaluatedProperties": {"type": "integer"},
        },
        {"$defs": {"a": {"$anchor": "pos", "minimum": 0}}, "items": {"$ref": "#pos"}},
    ],
    "2020-12": [
        {"prefixItems": [{"type": "integer"}, {"type": "string"}], "items": False},
        {"prefixItems": [{"type": "integer"}], "unevaluatedItems": False},
        {"allOf": [{"prefixItems": [{}]}], "unevaluatedItems": {"type": "string"}},
        {"contains": {"type": "string"}, "unevaluatedItems": {"type": "integer"}},
        {
            "$id": "urn:tree",
            "$dynamicAnchor": "node",
            "type": "object",
            "properties": {
                "kids": {"type": "array", "items": {"$dynamicRef": "#node"}}
            },
        },
        {
            "$id": "urn:strict",
            "$ref": "urn:list",
            "$defs": {
                "node": {"$dynamicAnchor": "item", "type": "integer"},
                "list": {
                    "$id": "urn:list",
                    "type": "array",
                    "items": {"$dynamicRef": "#item"},
                    "$defs": {"any": {"$dynamicAnchor": "item"}},
                },
            },
        },
    ],
    "2019-09-only": [
        {"items": [{"type": "integer"}], "additionalItems": {"type": "string"}},
        {
            "$id": "urn:r",
            "$recursiveAnchor": True,
            "type": "object",
            "properties": {"kids": {"type": "array", "items": {"$recursiveRef": "#"}}},
        },
    ],
    "04-only": [
        {
            "minimum": 1,
            "exclusiveMinimum": True,
            "maximum": 4,
            "exclusiveMaximum": True,
        },
        {"maximum": 4, "exclusiveMaximum": False},
    ],
    "legacy": [
        {"items": [{"type": "integer"}], "additionalItems": False},
        {"dependencies": {"a": ["b"], "c": {"required": ["d"]}}},
    ],
}
INSTANCES = [
    None,
    True,
    False,
    0,
    1,
    2,
    3,
    4,
    5,
    6,
    11,
    -1,
    2.5,
    "",
    "a",
    "ab",
    "abc",
    "abcde",
    "abc1",
    "x-y",
    [],
    [1],
    [1, 2],
    [2, 2],
    [1, "a"],
    [1, 2, 3, 4],
    ["a", 1, 2],
    [1, "a", "b"],
    ["a", "b"],
    {},
    {"a": 1},
    {"a": "s", "b": 2},
    {"a": "s", "x-1": True},
    {"a": "s", "c": 1},
    {"id": 1},
    {"k": True},
    {"a": [1, "x"]},
    {"name": "n"},
    {"name": "n", "children": [{"name": "m"}]},
    {"name": "n", "children": [{}]},
    {"n": 3},
    {"n": -3},
    {"a": 1, "b": 2},
    {"a": 1, "b": 2, "c": 3},
    {"a": 1, "z": 0},
    {"c": 1, "d": 2},
    {"c": 1},
    {"ab": 1, "abc": 2},
    {"kids": [{"kids": []}]},
    {"kids": [1]},
    [[1], 2],
    {"a": 2, "b": 1},
    {"b": 3},
    {"a": 1, "q": 1},
]
