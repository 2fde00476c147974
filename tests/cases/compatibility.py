"""Schema changes and their verdicts, one or more per sentence of the
rulebook's "Compatibility" section, for the unit tests and the HTTP tests.

Each case is ``(name, old_schema_text, new_schema_text, compatible, words)``:
``compatible`` is whether the change is accepted (an idempotent or
annotation-only change is accepted and registers nothing), and ``words`` is a
substring the refusal's message must contain (None when accepted).
"""

from __future__ import annotations

from narad.schema.modes import Mode

D04 = '"$schema":"http://json-schema.org/draft-04/schema#",'
D06 = '"$schema":"http://json-schema.org/draft-06/schema#",'
D07 = '"$schema":"http://json-schema.org/draft-07/schema#",'
D2019 = '"$schema":"https://json-schema.org/draft/2019-09/schema",'
D2020 = '"$schema":"https://json-schema.org/draft/2020-12/schema",'

QTY_INT = '{"properties":{"qty":{"type":"integer"}}}'
LIST_INT = (
    '{"$defs":{"node":{"type":"object","properties":{"value":{"type":"integer"},'
    '"next":{"$ref":"#/$defs/node"}}}},"$ref":"#/$defs/node"}'
)
LOOP = (
    '{"$defs":{"a":{"$ref":"#/$defs/b"},"b":{"$ref":"#/$defs/a"}},'
    '"properties":{"x":{"$ref":"#/$defs/a"}}}'
)
NOT_X = '{"$defs":{"x":{"type":"string"}},"not":{"$ref":"#/$defs/x"}}'
REF_SIBLING = (
    '{"$defs":{"a":{"type":"integer"}},'
    '"properties":{"q":{"$ref":"#/$defs/a","maximum":5}}}'
)
# Issue 19's minimised findings: unsound accepts and a crash.
CACHED = (
    '{"anyOf":[{"$ref":"#/$defs/a"},{}],"properties":{"k":{"$ref":"#/$defs/c"}},'
    '"$defs":{"a":{"items":{"$ref":"#/$defs/b"},"properties":{"z":'
    '{"$ref":"#/$defs/c"}},"maxLength":5},"b":{"items":{"$ref":"#/$defs/a"}},'
    '"c":{"items":{"$ref":"#/$defs/b"}}}}'
)
DYNAMIC_SCOPE = (
    '{"$defs":{"m":{"$id":"urn:m","$defs":{"s":{"$dynamicAnchor":"n",'
    '"type":"string"},"l":{"$id":"urn:l","$dynamicAnchor":"n","items":'
    '{"$dynamicRef":"#n"}}},"$ref":"#/$defs/l"}},"$ref":"#/$defs/m/$defs/l"}'
)
SELF_REF_SIBLING = "{" + D2020 + '"properties":{"b":{"type":"array","$ref":"#"}}}'
UNEVALUATED = (
    '{"properties":{"a":{"properties":{"n":{"maximum":10}},'
    '"unevaluatedProperties":false},"b":{"type":"string"}}}'
)

CASES: list[tuple[str, str, str, bool, str | None]] = [
    # -- The four rules about the change request ------------------------------
    (
        "idempotent: key order and whitespace",
        '{"type":"object","properties":{"a":{"type":"integer"}}}',
        '{ "properties" : { "a" : { "type" : "integer" } },\n "type" : "object" }',
        True,
        None,
    ),
    ("idempotent: 10 and 1e1", '{"maximum":10}', '{"maximum":1e1}', True, None),
    (
        "annotations are not a change, wherever a subschema sits",
        '{"title":"a","properties":{"q":{"type":"integer","description":"x"}}}',
        '{"title":"b","$comment":"c","properties":{"q":{"type":"integer",'
        '"description":"y","examples":[1],"default":2,"deprecated":true,'
        '"readOnly":true,"writeOnly":false}}}',
        True,
        None,
    ),
    (
        "annotations are not a change: true may gain them",
        '{"properties":{"a":true}}',
        '{"properties":{"a":{"description":"any value"}},"title":"t"}',
        True,
        None,
    ),
    (
        "a property named description is a property: removed",
        '{"properties":{"description":{"type":"string"},"id":{}}}',
        '{"properties":{"id":{}}}',
        False,
        'property "description" removed',
    ),
    (
        "a property named description is a property: narrowed",
        '{"properties":{"description":{"type":"string"}}}',
        '{"properties":{"description":{"type":"integer"}}}',
        False,
        'at /properties/description: type "string" no longer allowed',
    ),
    (
        "{} is not a widening of a schema with properties",
        '{"type":"object","properties":{"id":{"type":"integer"}}}',
        "{}",
        False,
        'property "id" removed',
    ),
    (
        "true is not a widening of a schema with properties",
        '{"properties":{"id":{"type":"integer"}}}',
        "true",
        False,
        'property "id" removed',
    ),
    (
        "{} at the root widens a schema without properties",
        '{"type":"object"}',
        "{}",
        True,
        None,
    ),
    # -- type -----------------------------------------------------------------
    (
        "the rulebook's example",
        QTY_INT,
        '{"properties":{"qty":{"type":"string"}}}',
        False,
        'at /properties/qty: type "integer" no longer allowed',
    ),
    (
        "type: integer may become number",
        QTY_INT,
        '{"properties":{"qty":{"type":"number"}}}',
        True,
        None,
    ),
    (
        "type: add types to the set",
        '{"type":"string"}',
        '{"type":["string","null"]}',
        True,
        None,
    ),
    (
        "type: drop a type",
        '{"type":["string","null"]}',
        '{"type":"string"}',
        False,
        'type "null" no longer allowed',
    ),
    (
        "type: number may not become integer",
        '{"type":"number"}',
        '{"type":"integer"}',
        False,
        'type "number" no longer allowed',
    ),
    ("type: drop the keyword", '{"type":"string"}', "{}", True, None),
    (
        "type: never add",
        '{"minLength":1}',
        '{"minLength":1,"type":"string"}',
        False,
        'type "string" added',
    ),
    # -- enum, const ----------------------------------------------------------
    ("enum: add values", '{"enum":[1,2]}', '{"enum":[1,2,3]}', True, None),
    (
        "enum: remove a value",
        '{"enum":[1,2,3]}',
        '{"enum":[1,2]}',
        False,
        "enum value 3 no longer allowed",
    ),
    ("enum: drop", '{"enum":[1,2]}', "{}", True, None),
    (
        "enum: never add",
        '{"type":"integer"}',
        '{"type":"integer","enum":[1]}',
        False,
        "enum added",
    ),
    (
        "enum: values compare as JSON values",
        '{"enum":[1,"a"]}',
        '{"enum":[1.0,"a",null]}',
        True,
        None,
    ),
    (
        "const may become an enum that contains it",
        '{"const":5}',
        '{"enum":[5,6]}',
        True,
        None,
    ),
    (
        "const may not become an enum without it",
        '{"const":5}',
        '{"enum":[6,7]}',
        False,
        "value 5 no longer allowed",
    ),
    (
        "const: change",
        '{"const":5}',
        '{"const":6}',
        False,
        "const value 5 no longer allowed",
    ),
    ("const: drop", '{"const":5}', "{}", True, None),
    (
        "const: never add",
        '{"type":"integer"}',
        '{"type":"integer","const":5}',
        False,
        "const added",
    ),
    (
        "enum and const count as their intersection",
        '{"enum":[1,2,3],"const":2}',
        '{"enum":[2,4]}',
        True,
        None,
    ),
    (
        "enum and const intersection: new pair",
        '{"enum":[1,2],"const":1}',
        '{"enum":[1,3],"const":1}',
        True,
        None,
    ),
    (
        "enum and const intersection: narrowed",
        '{"enum":[1,2]}',
        '{"enum":[1,2],"const":1}',
        False,
        "const value 2 no longer allowed",
    ),
    # -- bounds ---------------------------------------------------------------
    ("minimum: loosen", '{"minimum":2}', '{"minimum":1.5}', True, None),
    (
        "minimum: tighten",
        '{"minimum":1}',
        '{"minimum":2}',
        False,
        "minimum raised from 1 to 2",
    ),
    ("minimum: drop", '{"minimum":1}', "{}", True, None),
    ("minimum: never add", "{}", '{"minimum":0}', False, "minimum 0 added"),
    (
        "exclusiveMinimum: loosen",
        '{"exclusiveMinimum":2}',
        '{"exclusiveMinimum":1}',
        True,
        None,
    ),
    (
        "exclusiveMinimum: tighten",
        '{"exclusiveMinimum":1}',
        '{"exclusiveMinimum":1.5}',
        False,
        "exclusiveMinimum raised from 1 to 1.5",
    ),
    (
        "exclusiveMinimum: never add",
        "{}",
        '{"exclusiveMinimum":0}',
        False,
        "exclusiveMinimum 0 added",
    ),
    ("maximum: loosen", '{"maximum":10}', '{"maximum":11}', True, None),
    (
        "maximum: tighten",
        '{"maximum":10}',
        '{"maximum":5}',
        False,
        "maximum lowered from 10 to 5",
    ),
    (
        "maximum: exact on big numbers",
        '{"maximum":9223372036854775807}',
        '{"maximum":9223372036854775806}',
        False,
        "maximum lowered from 9223372036854775807 to 9223372036854775806",
    ),
    (
        "maximum: loosen past 64 bits",
        '{"maximum":9223372036854775807}',
        '{"maximum":9223372036854775808}',
        True,
        None,
    ),
    (
        "maximum: never add",
        '{"type":"number"}',
        '{"type":"number","maximum":5}',
        False,
        "maximum 5 added",
    ),
    (
        "exclusiveMaximum: loosen",
        '{"exclusiveMaximum":1e2}',
        '{"exclusiveMaximum":101}',
        True,
        None,
    ),
    (
        "exclusiveMaximum: tighten",
        '{"exclusiveMaximum":100}',
        '{"exclusiveMaximum":99}',
        False,
        "exclusiveMaximum lowered from 100 to 99",
    ),
    ("exclusiveMaximum: drop", '{"exclusiveMaximum":100}', "{}", True, None),
    (
        "draft-04 exclusiveMaximum: true may go",
        "{" + D04 + '"maximum":5,"exclusiveMaximum":true}',
        "{" + D04 + '"maximum":5}',
        True,
        None,
    ),
    (
        "draft-04 exclusiveMaximum: true may not appear",
        "{" + D04 + '"maximum":5}',
        "{" + D04 + '"maximum":5,"exclusiveMaximum":true}',
        False,
        "maximum 5 made exclusive",
    ),
    (
        "draft-04 exclusiveMinimum: loosen the bound while exclusive",
        "{" + D04 + '"minimum":5,"exclusiveMinimum":true}',
        "{" + D04 + '"minimum":4,"exclusiveMinimum":true}',
        True,
        None,
    ),
    # -- multipleOf -----------------------------------------------------------
    (
        "multipleOf: a divisor, on big numbers",
        '{"multipleOf":18014398509481986}',
        '{"multipleOf":9007199254740993}',
        True,
        None,
    ),
    (
        "multipleOf: not a divisor, on big numbers",
        '{"multipleOf":9007199254740993}',
        '{"multipleOf":18014398509481986}',
        False,
        "multipleOf 18014398509481986 does not divide 9007199254740993",
    ),
    (
        "multipleOf: decimal divisor",
        '{"multipleOf":0.5}',
        '{"multipleOf":0.25}',
        True,
        None,
    ),
    (
        "multipleOf: decimal non-divisor",
        '{"multipleOf":0.5}',
        '{"multipleOf":0.3}',
        False,
        "multipleOf 0.3 does not divide 0.5",
    ),
    ("multipleOf: drop", '{"multipleOf":3}', "{}", True, None),
    ("multipleOf: never add", "{}", '{"multipleOf":2}', False, "multipleOf 2 added"),
    # -- min*, max* -----------------------------------------------------------
    ("minLength: decrease", '{"minLength":3}', '{"minLength":2}', True, None),
    (
        "minLength: increase",
        '{"minLength":1}',
        '{"minLength":2}',
        False,
        "minLength raised from 1 to 2",
    ),
    ("minLength: drop", '{"minLength":1}', "{}", True, None),
    ("minLength: new only as 0", "{}", '{"minLength":0}', True, None),
    ("minLength: new as 1", "{}", '{"minLength":1}', False, "minLength 1 added"),
    (
        "minItems: increase",
        '{"minItems":1}',
        '{"minItems":2}',
        False,
        "minItems raised from 1 to 2",
    ),
    ("minItems: new only as 0", "{}", '{"minItems":0}', True, None),
    ("minItems: new as 1", "{}", '{"minItems":1}', False, "minItems 1 added"),
    (
        "minProperties: decrease to 0",
        '{"minProperties":2}',
        '{"minProperties":0}',
        True,
        None,
    ),
    (
        "minProperties: new as 1",
        "{}",
        '{"minProperties":1}',
        False,
        "minProperties 1 added",
    ),
    ("maxLength: increase", '{"maxLength":3}', '{"maxLength":4}', True, None),
    (
        "maxLength: decrease",
        '{"maxLength":3}',
        '{"maxLength":2}',
        False,
        "maxLength lowered from 3 to 2",
    ),
    ("maxLength: drop", '{"maxLength":3}', "{}", True, None),
    ("maxLength: never add", "{}", '{"maxLength":10}', False, "maxLength 10 added"),
    (
        "maxItems: decrease",
        '{"maxItems":3}',
        '{"maxItems":2}',
        False,
        "maxItems lowered from 3 to 2",
    ),
    ("maxItems: never add", "{}", '{"maxItems":3}', False, "maxItems 3 added"),
    (
        "maxProperties: increase",
        '{"maxProperties":3}',
        '{"maxProperties":30}',
        True,
        None,
    ),
    (
        "maxProperties: never add",
        "{}",
        '{"maxProperties":3}',
        False,
        "maxProperties 3 added",
    ),
    # -- pattern, format ------------------------------------------------------
    (
        "pattern: identical",
        '{"pattern":"^a","maxLength":3}',
        '{"pattern":"^a","maxLength":4}',
        True,
        None,
    ),
    ("pattern: drop", '{"pattern":"^a"}', "{}", True, None),
    (
        "pattern: change, even to a wider one",
        '{"pattern":"^ab"}',
        '{"pattern":"^a"}',
        False,
        'pattern changed from "^ab" to "^a"',
    ),
    ("pattern: never add", "{}", '{"pattern":"^a"}', False, 'pattern "^a" added'),
    (
        "format: identical",
        '{"format":"email","maxLength":3}',
        '{"format":"email","maxLength":4}',
        True,
        None,
    ),
    ("format: drop", '{"format":"email"}', "{}", True, None),
    (
        "format: change",
        '{"format":"email"}',
        '{"format":"idn-email"}',
        False,
        'format changed from "email" to "idn-email"',
    ),
    ("format: never add", "{}", '{"format":"uuid"}', False, 'format "uuid" added'),
    # -- uniqueItems ----------------------------------------------------------
    (
        "uniqueItems: true may become false",
        '{"uniqueItems":true}',
        '{"uniqueItems":false}',
        True,
        None,
    ),
    ("uniqueItems: true may go", '{"uniqueItems":true}', "{}", True, None),
    (
        "uniqueItems: never add",
        '{"uniqueItems":false}',
        '{"uniqueItems":true}',
        False,
        "uniqueItems added",
    ),
    # -- required -------------------------------------------------------------
    (
        "required: remove names",
        '{"required":["a","b"]}',
        '{"required":["a"]}',
        True,
        None,
    ),
    (
        "required: never add",
        '{"required":["a"]}',
        '{"required":["a","b"]}',
        False,
        'required property "b" added',
    ),
    (
        "required: never add the keyword",
        "{}",
        '{"required":["a"]}',
        False,
        'required property "a" added',
    ),
    # -- properties -----------------------------------------------------------
    (
        "properties: add an optional property (open content model)",
        '{"type":"object"}',
        '{"type":"object","properties":{"a":{"type":"string"}}}',
        True,
        None,
    ),
    (
        "properties: never remove one",
        '{"properties":{"a":{},"b":{"type":"string"}}}',
        '{"properties":{"a":{}}}',
        False,
        'property "b" removed',
    ),
    (
        "properties: each existing one checked with the same rules",
        '{"properties":{"a":{"properties":{"b":{"maxLength":5}}}}}',
        '{"properties":{"a":{"properties":{"b":{"maxLength":4}}}}}',
        False,
        "at /properties/a/properties/b: maxLength lowered from 5 to 4",
    ),
    (
        "properties: new one matching a pattern accepts what the pattern did",
        '{"patternProperties":{"^x-":{"type":"string"}}}',
        '{"patternProperties":{"^x-":{"type":"string"}},'
        '"properties":{"x-a":{"type":["string","null"]}}}',
        True,
        None,
    ),
    (
        "properties: new one matching a pattern narrows it",
        '{"patternProperties":{"^x-":{"type":"string"}}}',
        '{"patternProperties":{"^x-":{"type":"string"}},'
        '"properties":{"x-a":{"type":"integer"}}}',
        False,
        'at /properties/x-a: type "string" no longer allowed',
    ),
    (
        "properties: new one not matching the pattern is free",
        '{"patternProperties":{"^x-":{"type":"string"}}}',
        '{"patternProperties":{"^x-":{"type":"string"}},'
        '"properties":{"a":{"type":"integer"}}}',
        True,
        None,
    ),
    (
        "properties: new one under an additionalProperties schema",
        '{"additionalProperties":{"type":"string"}}',
        '{"additionalProperties":{"type":"string"},"properties":{"a":{"type":"integer"}}}',
        False,
        'at /properties/a: type "string" no longer allowed',
    ),
    (
        "properties: new one under a closed model",
        '{"additionalProperties":false}',
        '{"additionalProperties":false,"properties":{"a":{"type":"integer"}}}',
        True,
        None,
    ),
    # -- additionalProperties -------------------------------------------------
    (
        "additionalProperties: false may go",
        '{"additionalProperties":false}',
        "{}",
        True,
        None,
    ),
    (
        "additionalProperties: false may become true",
        '{"additionalProperties":false}',
        '{"additionalProperties":true}',
        True,
        None,
    ),
    (
        "additionalProperties: false may become a schema",
        '{"additionalProperties":false}',
        '{"additionalProperties":{"type":"string"}}',
        True,
        None,
    ),
    (
        "additionalProperties: a schema may widen",
        '{"additionalProperties":{"type":"string"}}',
        '{"additionalProperties":{"type":["string","number"]}}',
        True,
        None,
    ),
    (
        "additionalProperties: a schema may not narrow",
        '{"additionalProperties":{"type":["string","number"]}}',
        '{"additionalProperties":{"type":"string"}}',
        False,
        'at /additionalProperties: type "number" no longer allowed',
    ),
    (
        "additionalProperties: a closed model may not appear",
        "{}",
        '{"additionalProperties":false}',
        False,
        "additionalProperties false added",
    ),
    (
        "additionalProperties: true may not close",
        '{"additionalProperties":true}',
        '{"additionalProperties":false}',
        False,
        "additionalProperties false added",
    ),
    (
        "additionalProperties: a schema may not appear",
        '{"type":"object"}',
        '{"type":"object","additionalProperties":{"type":"string"}}',
        False,
        'additionalProperties {"type":"string"} added',
    ),
    # -- items ----------------------------------------------------------------
    (
        "items: widen",
        '{"items":{"type":"integer"}}',
        '{"items":{"type":"number"}}',
        True,
        None,
    ),
    (
        "items: narrow",
        '{"items":{"type":"number"}}',
        '{"items":{"type":"integer"}}',
        False,
        'at /items: type "number" no longer allowed',
    ),
    ("items: drop", '{"items":{"type":"integer"}}', "{}", True, None),
    (
        "items: never add",
        '{"type":"array"}',
        '{"type":"array","items":{"type":"integer"}}',
        False,
        "items added",
    ),
    (
        "items: tuples may stay identical",
        "{" + D07 + '"items":[{"type":"integer"}],"maxItems":3}',
        "{" + D07 + '"items":[{"type":"integer"}],"maxItems":4}',
        True,
        None,
    ),
    (
        "items: tuples are not supported",
        "{" + D07 + '"items":[{"type":"integer"}]}',
        "{" + D07 + '"items":[{"type":"number"}]}',
        False,
        "array form (tuples)",
    ),
    (
        "items: tuples may be dropped",
        "{" + D07 + '"items":[{"type":"integer"}]}',
        '{"$schema":"http://json-schema.org/draft-07/schema#"}',
        True,
        None,
    ),
    # -- anyOf, allOf ---------------------------------------------------------
    (
        "anyOf: add a branch",
        '{"anyOf":[{"type":"string"}]}',
        '{"anyOf":[{"type":"string"},{"type":"null"}]}',
        True,
        None,
    ),
    (
        "anyOf: branches may reorder",
        '{"anyOf":[{"type":"string"},{"type":"null"}]}',
        '{"anyOf":[{"type":"null"},{"type":"string"}]}',
        True,
        None,
    ),
    (
        "anyOf: widen a branch",
        '{"anyOf":[{"type":"integer"},{"type":"null"}]}',
        '{"anyOf":[{"type":"number"},{"type":"null"}]}',
        True,
        None,
    ),
    (
        "anyOf: remove a branch",
        '{"anyOf":[{"type":"string"},{"type":"null"}]}',
        '{"anyOf":[{"type":"string"}]}',
        False,
        "anyOf branch 1 not covered by any new branch",
    ),
    (
        "anyOf: narrow a branch",
        '{"anyOf":[{"type":"number"}]}',
        '{"anyOf":[{"type":"integer"}]}',
        False,
        'anyOf branch 0 not covered by any new branch (at /anyOf/0: type "number"',
    ),
    ("anyOf: drop", '{"anyOf":[{"type":"string"}]}', "{}", True, None),
    ("anyOf: never add", "{}", '{"anyOf":[{"type":"string"}]}', False, "anyOf added"),
    (
        "allOf: remove a branch",
        '{"allOf":[{"type":"string"},{"minLength":1}]}',
        '{"allOf":[{"type":"string"}]}',
        True,
        None,
    ),
    (
        "allOf: widen a branch",
        '{"allOf":[{"minLength":2}]}',
        '{"allOf":[{"minLength":1}]}',
        True,
        None,
    ),
    (
        "allOf: add a branch",
        '{"allOf":[{"type":"string"}]}',
        '{"allOf":[{"type":"string"},{"minLength":1}]}',
        False,
        "allOf branch 1 not implied by any previous branch",
    ),
    (
        "allOf: never add",
        "{}",
        '{"allOf":[{"type":"string"}]}',
        False,
        "allOf branch 0 not implied",
    ),
    # -- $ref -----------------------------------------------------------------
    (
        "$ref: resolved before comparing (ref to inline)",
        '{"$defs":{"q":{"type":"integer"}},"properties":{"q":{"$ref":"#/$defs/q"}}}',
        '{"properties":{"q":{"type":"number"}}}',
        True,
        None,
    ),
    (
        "$ref: resolved before comparing (inline to ref)",
        '{"properties":{"q":{"type":"number"}}}',
        '{"$defs":{"q":{"type":"integer"}},"properties":{"q":{"$ref":"#/$defs/q"}}}',
        False,
        'at /$defs/q: type "number" no longer allowed',
    ),
    (
        "$ref: annotations beside it are no siblings",
        '{"$defs":{"q":{"type":"integer"}},'
        '"properties":{"q":{"$ref":"#/$defs/q","description":"x"}}}',
        '{"$defs":{"q":{"type":"integer"}},'
        '"properties":{"q":{"$ref":"#/$defs/q","description":"y","title":"t"}}}',
        True,
        None,
    ),
    (
        "$ref: a target narrowed",
        '{"$defs":{"q":{"type":"number"}},"properties":{"q":{"$ref":"#/$defs/q"}}}',
        '{"$defs":{"q":{"type":"integer"}},"properties":{"q":{"$ref":"#/$defs/q"}}}',
        False,
        'type "number" no longer allowed',
    ),
    (
        "$ref: recursive schemas compared like recursive types",
        LIST_INT,
        LIST_INT.replace('"value":{"type":"integer"}', '"value":{"type":"number"}'),
        True,
        None,
    ),
    (
        "$ref: recursive schemas, narrowed",
        LIST_INT,
        LIST_INT.replace('"value":{"type":"integer"}', '"value":{"type":"string"}'),
        False,
        'at /$defs/node/properties/value: type "integer" no longer allowed',
    ),
    (
        "$ref: recursive against its inlined unrolling",
        LIST_INT,
        '{"type":"object","properties":{"value":{"type":"integer"},'
        '"next":{"$ref":"#"}}}',
        True,
        None,
    ),
    (
        "$ref: a loop of nothing but $ref may become anything",
        LOOP,
        '{"properties":{"x":{"type":"string"}}}',
        True,
        None,
    ),
    (
        "$ref: a loop of nothing but $ref may replace nothing",
        '{"properties":{"x":{"type":"string"}}}',
        LOOP,
        False,
        "a loop of nothing but $ref accepts nothing",
    ),
    (
        "$ref: a root of nothing but $ref to itself",
        '{"$ref":"#"}',
        '{"type":"string"}',
        True,
        None,
    ),
    # A $ref with real siblings may only stay identical (or become true/{}).
    (
        "$ref with siblings: identical but for annotations",
        REF_SIBLING,
        REF_SIBLING.replace('"maximum":5', '"maximum":5,"title":"q"'),
        True,
        None,
    ),
    (
        "$ref with siblings: a widened sibling is refused",
        REF_SIBLING,
        REF_SIBLING.replace('"maximum":5', '"maximum":6'),
        False,
        'subschema with $ref "#/$defs/a" beside other keywords changed',
    ),
    (
        "$ref with siblings: a widened target is refused",
        REF_SIBLING,
        REF_SIBLING.replace('"integer"', '"number"'),
        False,
        "beside other keywords changed: it may only stay identical",
    ),
    (
        "$ref with siblings: dropping the $ref is refused",
        REF_SIBLING,
        REF_SIBLING.replace('"$ref":"#/$defs/a",', ""),
        False,
        '$ref "#/$defs/a" removed from beside other keywords',
    ),
    (
        "$ref with siblings: may become {}",
        REF_SIBLING,
        '{"$defs":{"a":{"type":"integer"}},"properties":{"q":{}}}',
        True,
        None,
    ),
    (
        "$ref with siblings: never added",
        '{"$defs":{"a":{}},"properties":{"q":{"maximum":5}}}',
        '{"$defs":{"a":{}},"properties":{"q":{"$ref":"#/$defs/a","maximum":5}}}',
        False,
        '$ref "#/$defs/a" added',
    ),
    # -- $schema --------------------------------------------------------------
    (
        "$schema: must not change",
        "{" + D07 + '"type":"string"}',
        "{" + D2020 + '"type":"string"}',
        False,
        "$schema changed from 07 to 2020-12",
    ),
    (
        "$schema: a nested one naming the document's draft may go",
        '{"allOf":[{' + D2020 + '"type":"string"}]}',
        '{"allOf":[{"type":["string","null"]}]}',
        True,
        None,
    ),
    (
        "$schema: naming the default draft is no change",
        '{"type":"string"}',
        "{" + D2020 + '"type":["string","null"]}',
        True,
        None,
    ),
    # -- the other keywords ---------------------------------------------------
    (
        "oneOf: identical",
        '{"oneOf":[{"type":"string"}],"maxLength":1}',
        '{"oneOf":[{"type":"string"}],"maxLength":2}',
        True,
        None,
    ),
    (
        "oneOf: changed, even widened",
        '{"oneOf":[{"type":"integer"}]}',
        '{"oneOf":[{"type":"number"}]}',
        False,
        "oneOf changed",
    ),
    ("oneOf: removed", '{"oneOf":[{"type":"string"}]}', "{}", True, None),
    (
        "oneOf: annotations inside it are no change",
        '{"oneOf":[{"type":"string","title":"a"},{"type":"null"}]}',
        '{"oneOf":[{"type":"string","title":"b","description":"c"},'
        '{"type":"null","examples":[null],"$comment":"d"}]}',
        True,
        None,
    ),
    (
        "oneOf: a property named title is no annotation",
        '{"oneOf":[{"properties":{"title":{"type":"string"}}}]}',
        '{"oneOf":[{"properties":{}}]}',
        False,
        "oneOf changed",
    ),
    (
        "oneOf: an enum value is data, not an annotation",
        '{"oneOf":[{"enum":[{"title":"a"}]}]}',
        '{"oneOf":[{"enum":[{"title":"b"}]}]}',
        False,
        "oneOf changed",
    ),
    ("oneOf: never added", "{}", '{"oneOf":[{"type":"string"}]}', False, "oneOf added"),
    (
        "not: changed",
        '{"not":{"type":"string"}}',
        '{"not":{"type":"number"}}',
        False,
        "not changed",
    ),
    ("not: removed", '{"not":{"type":"string"}}', "{}", True, None),
    (
        "not: annotations inside it, through $ref, are no change",
        NOT_X,
        NOT_X.replace('"x":{"type":"string"}', '"x":{"type":"string","default":"s"}'),
        True,
        None,
    ),
    (
        "not: identical follows $ref",
        NOT_X,
        NOT_X.replace('"x":{"type":"string"}', '"x":{"type":"integer"}'),
        False,
        "not changed",
    ),
    (
        "$defs can change freely where nothing uses the change",
        NOT_X,
        NOT_X.replace('"$defs":{', '"$defs":{"unused":{"type":"null"},'),
        True,
        None,
    ),
    (
        "if/then/else: changed",
        '{"if":{"required":["a"]},"then":{"required":["b"]}}',
        '{"if":{"required":["a"]},"then":{"required":["c"]}}',
        False,
        "then changed",
    ),
    (
        "if/then/else: else added",
        '{"if":{"required":["a"]},"then":{}}',
        '{"if":{"required":["a"]},"then":{},"else":{"required":["b"]}}',
        False,
        "else added",
    ),
    (
        "if/then/else: annotations inside are no change",
        '{"if":{"required":["a"]},"then":{"required":["b"]}}',
        '{"if":{"required":["a"],"title":"t"},'
        '"then":{"required":["b"],"deprecated":true,"readOnly":true}}',
        True,
        None,
    ),
    (
        "if/then/else: removed",
        '{"if":{"required":["a"]},"then":{"required":["b"]}}',
        "{}",
        True,
        None,
    ),
    (
        "contains: changed",
        '{"contains":{"type":"string"}}',
        '{"contains":{"type":"integer"}}',
        False,
        "contains changed",
    ),
    ("contains: removed", '{"contains":{"type":"string"}}', "{}", True, None),
    (
        "contains: annotations inside are no change",
        '{"contains":{"type":"string"},"maxItems":3}',
        '{"contains":{"type":"string","writeOnly":true},"maxItems":4}',
        True,
        None,
    ),
    # minContains and maxContains are named by neither the table nor the
    # list: they may stay identical, or go where that can only widen.
    (
        "minContains: removed where the implicit 1 is no stricter",
        '{"contains":{"type":"string"},"minContains":2}',
        '{"contains":{"type":"string"}}',
        True,
        None,
    ),
    (
        "minContains: a looser value is still a change",
        '{"contains":{"type":"string"},"minContains":3}',
        '{"contains":{"type":"string"},"minContains":2}',
        False,
        "minContains changed",
    ),
    (
        "minContains: added, even as the implicit 1",
        '{"contains":{"type":"string"}}',
        '{"contains":{"type":"string"},"minContains":1}',
        False,
        "minContains added",
    ),
    (
        "minContains: 0 not removed while contains stays",
        '{"contains":{"type":"string"},"minContains":0}',
        '{"contains":{"type":"string"}}',
        False,
        "minContains 0 removed while contains stays",
    ),
    (
        "minContains: 0 removed together with contains",
        '{"contains":{"type":"string"},"minContains":0}',
        "{}",
        True,
        None,
    ),
    (
        "maxContains: removed",
        '{"contains":{"type":"string"},"maxContains":2}',
        '{"contains":{"type":"string"}}',
        True,
        None,
    ),
    (
        "maxContains: a higher value is still a change",
        '{"contains":{"type":"string"},"maxContains":2}',
        '{"contains":{"type":"string"},"maxContains":3}',
        False,
        "maxContains changed",
    ),
    (
        "maxContains: never add",
        '{"contains":{"type":"string"}}',
        '{"contains":{"type":"string"},"maxContains":2}',
        False,
        "maxContains added",
    ),
    (
        "propertyNames: changed",
        '{"propertyNames":{"maxLength":3}}',
        '{"propertyNames":{"maxLength":4}}',
        False,
        "propertyNames changed",
    ),
    ("propertyNames: removed", '{"propertyNames":{"maxLength":3}}', "{}", True, None),
    (
        "propertyNames: annotations inside are no change",
        '{"propertyNames":{"maxLength":3},"maxProperties":3}',
        '{"propertyNames":{"maxLength":3,"description":"d"},"maxProperties":4}',
        True,
        None,
    ),
    (
        "patternProperties: annotations inside are no change",
        '{"patternProperties":{"^a":{"type":"string"}},"maxProperties":3}',
        '{"patternProperties":{"^a":{"type":"string","title":"t"}},"maxProperties":4}',
        True,
        None,
    ),
    (
        "dependentRequired: changed",
        '{"dependentRequired":{"a":["b"]}}',
        '{"dependentRequired":{"a":["b","c"]}}',
        False,
        "dependentRequired changed",
    ),
    (
        "dependentRequired: removed",
        '{"dependentRequired":{"a":["b"]}}',
        "{}",
        True,
        None,
    ),
    (
        "dependentSchemas: changed",
        '{"dependentSchemas":{"a":{"required":["b"]}}}',
        '{"dependentSchemas":{"a":{"required":["c"]}}}',
        False,
        "dependentSchemas changed",
    ),
    (
        "dependentSchemas: removed",
        '{"dependentSchemas":{"a":{"required":["b"]}}}',
        "{}",
        True,
        None,
    ),
    (
        "dependencies: changed (draft-07)",
        "{" + D07 + '"dependencies":{"a":["b"]}}',
        "{" + D07 + '"dependencies":{"a":["c"]}}',
        False,
        "dependencies changed",
    ),
    (
        "patternProperties: changed",
        '{"patternProperties":{"^a":{"type":"string"}}}',
        '{"patternProperties":{"^a":{"type":["string","null"]}}}',
        False,
        "patternProperties changed",
    ),
    (
        "patternProperties: removed while additionalProperties stays open",
        '{"patternProperties":{"^a":{"type":"string"}}}',
        "{}",
        True,
        None,
    ),
    (
        "patternProperties: not removed while additionalProperties is closed",
        '{"patternProperties":{"^a":{"type":"string"}},"additionalProperties":false}',
        '{"additionalProperties":false}',
        False,
        "patternProperties removed while additionalProperties is not open",
    ),
    (
        "prefixItems: identical",
        '{"prefixItems":[{"type":"string"}],"maxItems":3}',
        '{"prefixItems":[{"type":"string"}],"maxItems":4}',
        True,
        None,
    ),
    (
        "prefixItems: changed",
        '{"prefixItems":[{"type":"string"}]}',
        '{"prefixItems":[{"type":["string","null"]}]}',
        False,
        "prefixItems changed",
    ),
    (
        "prefixItems: removed together with items",
        '{"prefixItems":[{"type":"string"}],"items":{"type":"integer"}}',
        "{}",
        True,
        None,
    ),
    (
        "prefixItems: not removed while items stays",
        '{"prefixItems":[{"type":"string"}],"items":{"type":"integer"}}',
        '{"items":{"type":"integer"}}',
        False,
        "prefixItems removed while items stays",
    ),
    (
        "a keyword with no rule may stay identical",
        '{"contentMediaType":"text/csv","maxLength":3}',
        '{"contentMediaType":"text/csv","maxLength":4}',
        True,
        None,
    ),
    (
        "a keyword with no rule may be removed",
        '{"contentMediaType":"text/csv"}',
        "{}",
        True,
        None,
    ),
    (
        "a keyword with no rule may not change",
        '{"contentMediaType":"text/csv"}',
        '{"contentMediaType":"text/plain"}',
        False,
        "contentMediaType changed",
    ),
    # -- a nested schema may always become true or {} -------------------------
    (
        "a nested schema may become true",
        '{"properties":{"a":{"type":"string","minLength":3,"not":{"const":"x"}}}}',
        '{"properties":{"a":true}}',
        True,
        None,
    ),
    (
        "a nested schema may become {}",
        '{"items":{"enum":[1],"pattern":"^a"}}',
        '{"items":{}}',
        True,
        None,
    ),
    (
        "a nested schema may become true: under then and else",
        '{"if":{"required":["a"]},"then":{"required":["b"]},"else":{"maxProperties":1}}',
        '{"if":{"required":["a"]},"then":true,"else":{}}',
        True,
        None,
    ),
    (
        "a nested schema may become true: under propertyNames",
        '{"propertyNames":{"maxLength":3}}',
        '{"propertyNames":true}',
        True,
        None,
    ),
    (
        "a nested schema may become {}: a patternProperties value, patterns kept",
        '{"patternProperties":{"^a":{"type":"string"},"^b":{"type":"integer"}}}',
        '{"patternProperties":{"^a":{},"^b":{"type":"integer"}}}',
        True,
        None,
    ),
    (
        "patternProperties: opening one and renaming another is a change",
        '{"patternProperties":{"^a":{"type":"string"},"^b":{"type":"integer"}}}',
        '{"patternProperties":{"^a":{},"^c":{"type":"integer"}}}',
        False,
        "patternProperties changed",
    ),
    (
        "a nested schema may become true: a dependentSchemas value",
        '{"dependentSchemas":{"a":{"required":["b"]}}}',
        '{"dependentSchemas":{"a":true}}',
        True,
        None,
    ),
    (
        "a nested schema may become {}: a dependencies schema (draft-07)",
        "{" + D07 + '"dependencies":{"a":{"required":["b"]},"c":["d"]}}',
        "{" + D07 + '"dependencies":{"a":{},"c":["d"]}}',
        True,
        None,
    ),
    (
        "dependencies: a list of names is no subschema to open (draft-07)",
        "{" + D07 + '"dependencies":{"a":["b"]}}',
        "{" + D07 + '"dependencies":{"a":[]}}',
        False,
        "dependencies changed",
    ),
    (
        "a nested schema may become true: a prefixItems entry",
        '{"prefixItems":[{"type":"string"},{"type":"integer"}]}',
        '{"prefixItems":[true,{"type":"integer"}]}',
        True,
        None,
    ),
    (
        "prefixItems: opening an entry while dropping another is a change",
        '{"prefixItems":[{"type":"string"},{"type":"integer"}]}',
        '{"prefixItems":[true]}',
        False,
        "prefixItems changed",
    ),
    (
        "a nested schema may become {}: contains, with no maxContains",
        '{"contains":{"type":"string"},"minContains":2}',
        '{"contains":{},"minContains":2}',
        True,
        None,
    ),
    # Where accepting everything would narrow or turn the verdict, a nested
    # schema may not: every message accepted before must stay valid.
    (
        "contains may not become {} beside maxContains (at most N elements)",
        '{"contains":{"type":"string"},"maxContains":2}',
        '{"contains":{},"maxContains":2}',
        False,
        "contains changed",
    ),
    (
        "not may not become true (it would refuse everything)",
        '{"not":{"type":"string"}}',
        '{"not":true}',
        False,
        "not changed",
    ),
    (
        "if may not become true (it turns which branch applies)",
        '{"if":{"required":["a"]},"then":{"required":["b"]}}',
        '{"if":true,"then":{"required":["b"]}}',
        False,
        "if changed",
    ),
    (
        "a oneOf branch may not become true (exactly one must match)",
        '{"oneOf":[{"type":"string"},{"type":"integer"}]}',
        '{"oneOf":[{"type":"string"},true]}',
        False,
        "oneOf changed",
    ),
    (
        "a nested schema may not become false",
        '{"properties":{"a":{"type":"string"}}}',
        '{"properties":{"a":false}}',
        False,
        "at /properties/a: schema false",
    ),
    (
        "a nested false may become anything",
        '{"properties":{"a":false}}',
        '{"properties":{"a":{"type":"string"}}}',
        True,
        None,
    ),
    # -- keywords the draft does not define are annotations -------------------
    (
        "const before draft-06 is an annotation",
        "{" + D04 + '"const":5}',
        "{" + D04 + '"const":6}',
        True,
        None,
    ),
    (
        "const from draft-06 on is a keyword",
        "{" + D06 + '"const":5}',
        "{" + D06 + '"const":6}',
        False,
        "const value 5 no longer allowed",
    ),
    (
        "if/then/else before draft-07 are annotations",
        "{" + D06 + '"if":{"required":["a"]},"then":{"required":["b"]}}',
        "{" + D06 + '"if":{"required":["a"]},"then":{"required":["c"]}}',
        True,
        None,
    ),
    (
        "prefixItems before 2020-12 is an annotation",
        "{" + D2019 + '"prefixItems":[{"type":"string"}]}',
        "{" + D2019 + '"prefixItems":[{"type":"integer"}]}',
        True,
        None,
    ),
    (
        "additionalItems from 2020-12 on is an annotation",
        '{"additionalItems":{"type":"string"}}',
        '{"additionalItems":false}',
        True,
        None,
    ),
    (
        "additionalItems before 2020-12 is a keyword",
        "{" + D2019 + '"items":[{}],"additionalItems":{"type":"string"}}',
        "{" + D2019 + '"items":[{}],"additionalItems":false}',
        False,
        "additionalItems changed",
    ),
    (
        "additionalItems: widening is still a change",
        "{" + D2019 + '"items":[{}],"additionalItems":{"type":"string"}}',
        "{" + D2019 + '"items":[{}],"additionalItems":{"type":["string","null"]}}',
        False,
        "additionalItems changed",
    ),
    (
        "additionalItems: removed",
        "{" + D2019 + '"items":[{}],"additionalItems":{"type":"string"}}',
        "{" + D2019 + '"items":[{}]}',
        True,
        None,
    ),
    (
        "an unknown keyword is an annotation",
        '{"x-unit":"kg","type":"number"}',
        '{"x-unit":"lb","type":"number"}',
        True,
        None,
    ),
    # -- unevaluated*, $dynamicRef only where unchanged byte for byte ---------
    (
        "unevaluatedProperties in an unchanged part",
        UNEVALUATED,
        UNEVALUATED.replace('"b":{"type":"string"}', '"b":{}'),
        True,
        None,
    ),
    (
        "unevaluatedProperties in a changed part",
        UNEVALUATED,
        UNEVALUATED.replace('"maximum":10', '"maximum":11'),
        False,
        "unevaluatedProperties is accepted only in a part unchanged byte for byte",
    ),
    (
        "unevaluatedProperties: number spelling is a change",
        UNEVALUATED,
        UNEVALUATED.replace('"maximum":10', '"maximum":1e1').replace(
            '"b":{"type":"string"}', '"b":{}'
        ),
        False,
        "unevaluatedProperties is accepted only",
    ),
    (
        "unevaluatedProperties: never added",
        '{"type":"object"}',
        '{"type":"object","unevaluatedProperties":false}',
        False,
        "unevaluatedProperties is accepted only",
    ),
    (
        "unevaluatedItems in a changed part",
        '{"prefixItems":[{}],"unevaluatedItems":false,"maxItems":3}',
        '{"prefixItems":[{}],"unevaluatedItems":false,"maxItems":4}',
        False,
        "unevaluatedItems is accepted only",
    ),
    (
        "$dynamicRef in an unchanged part",
        '{"$defs":{"t":{"$dynamicAnchor":"t","type":"string"}},'
        '"properties":{"a":{"$dynamicRef":"#t"},"b":{"type":"string"}}}',
        '{"$defs":{"t":{"$dynamicAnchor":"t","type":"string"}},'
        '"properties":{"a":{"$dynamicRef":"#t"},"b":{}}}',
        True,
        None,
    ),
    (
        "$dynamicRef whose target changed",
        '{"$defs":{"t":{"$dynamicAnchor":"t","type":"string"}},'
        '"properties":{"a":{"$dynamicRef":"#t"}}}',
        '{"$defs":{"t":{"$dynamicAnchor":"t","type":["string","null"]}},'
        '"properties":{"a":{"$dynamicRef":"#t"}}}',
        False,
        "$dynamicRef is accepted only in a part unchanged byte for byte",
    ),
    # -- issue 19: unsound accepts and a crash, minimised ---------------------
    (
        "19.5: a success that leant on a failed anyOf candidate is not reused",
        CACHED,
        CACHED.replace('"maxLength":5', '"maxLength":3'),
        False,
        "at /$defs/a: maxLength lowered from 5 to 3",
    ),
    (
        "19.6: $dynamicRef reached through a new resource",
        DYNAMIC_SCOPE,
        DYNAMIC_SCOPE.replace('"$ref":"#/$defs/m/$defs/l"}', '"$ref":"#/$defs/m"}'),
        False,
        "$dynamicRef is accepted only in a part unchanged byte for byte, "
        "reached through the same dynamic scope",
    ),
    (
        "19.6: $dynamicRef reached through the same resources",
        DYNAMIC_SCOPE,
        DYNAMIC_SCOPE.replace('{"m":', '{"unused":{"type":"null"},"m":'),
        True,
        None,
    ),
    (
        "19.7: unevaluatedProperties dropped while adding a property",
        '{"unevaluatedProperties":{"type":"integer"}}',
        '{"properties":{"b":{"type":"string"}}}',
        False,
        'at /properties/b: type "integer" no longer allowed',
    ),
    (
        "19.7: unevaluatedProperties false dropped while adding a property",
        '{"properties":{"a":{}},"unevaluatedProperties":false}',
        '{"properties":{"a":{},"b":{"type":"string"}}}',
        True,
        None,
    ),
    (
        "19.7: a new property the previous version required takes any value",
        '{"required":["b"]}',
        '{"required":["b"],"properties":{"b":{"type":"string"}}}',
        False,
        'at /properties/b: type "string" added',
    ),
    (
        "19.7: a new property the previous version required, accepting all",
        '{"required":["b"]}',
        '{"required":["b"],"properties":{"b":{"description":"any"}}}',
        True,
        None,
    ),
    (
        "19.7: a new property restricted by an allOf branch's additionalProperties",
        '{"allOf":[{"additionalProperties":{"type":"integer"}}]}',
        '{"allOf":[{"additionalProperties":{"type":"integer"}}],'
        '"properties":{"b":{"type":"string"}}}',
        False,
        'at /properties/b: type "integer" no longer allowed',
    ),
    (
        "19.7: a new property an allOf branch declared may widen it",
        '{"allOf":[{"$ref":"#/$defs/base"}],'
        '"$defs":{"base":{"properties":{"b":{"type":"string"}}}}}',
        '{"allOf":[{"$ref":"#/$defs/base"}],"properties":{"b":{"type":["string",'
        '"null"]}},"$defs":{"base":{"properties":{"b":{"type":"string"}}}}}',
        True,
        None,
    ),
    (
        "19.7: a property added in a branch, constrained by the parent",
        '{"allOf":[{"properties":{"a":{}}}],'
        '"unevaluatedProperties":{"type":"integer"}}',
        '{"allOf":[{"properties":{"a":{},"b":{"type":"string"}}}]}',
        False,
        "allOf branch 0 not implied by any previous branch",
    ),
    (
        "19.7: a property added in a branch, declared by another",
        '{"allOf":[{"properties":{"b":{"type":"string"}}},{"minProperties":1}]}',
        '{"allOf":[{"properties":{"b":{"type":"string"}}},'
        '{"minProperties":1,"properties":{"b":{"type":"integer"}}}]}',
        False,
        "allOf branch 1 not implied by any previous branch",
    ),
    (
        "19.7: a property added in a branch's items, governed by the parent's",
        '{"anyOf":[{"items":{"maxLength":0}}],'
        '"items":{"additionalProperties":{"enum":[false,null]}}}',
        '{"anyOf":[{"items":{"maxLength":0,"properties":{"b":false}}}],'
        '"items":{"additionalProperties":{"enum":[false,null]}}}',
        False,
        "anyOf branch 0 not covered by any new branch",
    ),
    (
        "19.7: a property added in a member governed by a pattern too",
        '{"properties":{"ab":{}},"patternProperties":{"^a":'
        '{"additionalProperties":{"type":"string"}}}}',
        '{"properties":{"ab":{"properties":{"z":{"type":"integer"}}}},'
        '"patternProperties":{"^a":{"additionalProperties":{"type":"string"}}}}',
        False,
        'at /properties/ab/properties/z: type "string" no longer allowed',
    ),
    (
        "19.7: a property added under a nullable object (anyOf) stays allowed",
        '{"properties":{"addr":{"anyOf":[{"type":"null"},'
        '{"type":"object","properties":{"street":{"type":"string"}}}]}}}',
        '{"properties":{"addr":{"anyOf":[{"type":"null"},'
        '{"type":"object","properties":{"street":{"type":"string"},'
        '"city":{"type":"string"}}}]}}}',
        True,
        None,
    ),
    (
        "19.7: a new property whose value could decide a not",
        '{"not":{"properties":{"b":{"type":"string"}},"required":["b"]}}',
        '{"not":{"properties":{"b":{"type":"string"}},"required":["b"]},'
        '"properties":{"b":{"type":"integer"}}}',
        False,
        'at /properties/b: type "integer" added',
    ),
    (
        "19.7: a new property a not says nothing about",
        '{"not":{"required":["x"]}}',
        '{"not":{"required":["x"]},"properties":{"b":{"type":"integer"}}}',
        True,
        None,
    ),
    (
        "19.7: the open content model holds through an allOf branch",
        '{"allOf":[{"properties":{"a":{}}}]}',
        '{"allOf":[{"properties":{"a":{},"b":{"type":"integer"}}}]}',
        True,
        None,
    ),
    (
        "19.8: a $ref beside type, retargeted, is an answer, not a crash",
        SELF_REF_SIBLING,
        SELF_REF_SIBLING.replace('"$ref":"#"}}', '"$ref":"#/$defs/m"}},')[:-1]
        + '"$defs":{"m":{"type":"object"}}}',
        False,
        'at /properties/b: subschema with $ref "#/$defs/m" beside other keywords',
    ),
    # -- the two limits -------------------------------------------------------
    (
        "limit: an optional property added under an open content model",
        '{"properties":{"a":{}}}',
        '{"properties":{"a":{},"b":{"type":"integer"}}}',
        True,
        None,
    ),
    (
        "limit: no reasoning across keywords",
        '{"const":5}',
        '{"minimum":3}',
        False,
        "minimum 3 added",
    ),
]

# -- compatibility modes ------------------------------------------------------

MODES = tuple(mode.value for mode in Mode)
FORWARD_MODES = ("FORWARD", "FORWARD_TRANSITIVE", "FULL", "FULL_TRANSITIVE")
BACKWARD_MODES = ("BACKWARD", "BACKWARD_TRANSITIVE", "FULL", "FULL_TRANSITIVE")

T_INT = '{"type":"integer"}'
T_INT_STR = '{"type":["integer","string"]}'
OBJ = '{"type":"object","properties":{"id":{"type":"integer"}}}'
OBJ_NOTE = (
    '{"type":"object","properties":{"id":{"type":"integer"},"note":{"type":"string"}}}'
)
CLOSED_A = '{"additionalProperties":false,"properties":{"a":{}}}'
CLOSED_AB = '{"additionalProperties":false,"properties":{"a":{},"b":{}}}'
A_STR = '{"properties":{"a":{"type":"string"}}}'
A_INT = '{"properties":{"a":{"type":"integer"}}}'
A_STR_NULL = '{"properties":{"a":{"type":["string","null"]}}}'
A_STR_MIN = '{"properties":{"a":{"type":"string","minLength":1}}}'
# A history whose middle version differs from the others (written in NONE).
MIDDLE_DIFFERS = [A_STR, A_INT, A_STR]


def _each(modes: tuple[str, ...], refusal: tuple[int, str, str]):
    return dict.fromkeys(modes, refusal)


# Each case is ``(name, history, new, refusals)``: ``history`` the stored
# versions, oldest first (written in mode NONE); ``new`` the proposed schema;
# ``refusals`` maps each mode that refuses the change to ``(version,
# direction, words)``: the version and direction of the first violation a
# PATCH names (latest version first, backward before forward) and words of
# it. Modes not listed accept the change; NONE accepts every one.
MODE_CASES: list[tuple[str, list[str], str, dict[str, tuple[int, str, str]]]] = [
    (
        "widen a type: backward only",
        [T_INT],
        T_INT_STR,
        _each(FORWARD_MODES, (1, "forward", 'type "string" no longer allowed')),
    ),
    (
        "narrow a type: forward only",
        [T_INT_STR],
        T_INT,
        _each(BACKWARD_MODES, (1, "backward", 'type "string" no longer allowed')),
    ),
    (
        "the exception: an optional property added under an open content model",
        [OBJ],
        OBJ_NOTE,
        _each(FORWARD_MODES, (1, "forward", 'at the root: property "note" removed')),
    ),
    (
        "the exception forward: an optional property removed under an open model",
        [OBJ_NOTE],
        OBJ,
        _each(BACKWARD_MODES, (1, "backward", 'property "note" removed')),
    ),
    (
        "a property added under a closed content model",
        [CLOSED_A],
        CLOSED_AB,
        _each(FORWARD_MODES, (1, "forward", 'property "b" removed')),
    ),
    (
        "a property made required",
        ['{"properties":{"id":{}}}'],
        '{"properties":{"id":{}},"required":["id"]}',
        _each(BACKWARD_MODES, (1, "backward", 'required property "id" added')),
    ),
    (
        "a maximum raised: the forward message reads from the new schema",
        ['{"maximum":10}'],
        '{"maximum":20}',
        _each(FORWARD_MODES, (1, "forward", "maximum lowered from 20 to 10")),
    ),
    ("equivalent: const to a one-value enum", ['{"const":5}'], '{"enum":[5]}', {}),
    (
        "equivalent: a reordered type list",
        [T_INT_STR],
        '{"type":["string","integer"]}',
        {},
    ),
    (
        "equivalent: annotations only",
        [A_STR],
        '{"title":"t","properties":{"a":{"type":"string","description":"d"}}}',
        {},
    ),
    ("idempotent", [A_STR], '{ "properties" : {"a": {"type": "string"}} }', {}),
    (
        "transitive: the middle version refuses backward",
        MIDDLE_DIFFERS,
        A_STR_NULL,
        {
            "BACKWARD_TRANSITIVE": (
                2,
                "backward",
                'at /properties/a: type "integer" no longer allowed',
            ),
            **_each(FORWARD_MODES, (3, "forward", 'type "null" no longer allowed')),
        },
    ),
    (
        "transitive: the middle version refuses forward",
        MIDDLE_DIFFERS,
        A_STR_MIN,
        {
            **_each(BACKWARD_MODES, (3, "backward", "minLength 1 added")),
            "FORWARD_TRANSITIVE": (
                2,
                "forward",
                'at /properties/a: type "string" no longer allowed',
            ),
        },
    ),
]
