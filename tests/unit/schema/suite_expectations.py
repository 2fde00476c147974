"""Where Narad deliberately differs from the JSON-Schema-Test-Suite, case by case.

The suite (vendored in ``tests/json-schema-test-suite``) is run through
registration and then the validator with the built-in format checkers, as a
topic would run it. Every case or test that does not end as the suite says is
listed here with the reason, and ``test_json_schema_test_suite`` checks that
each one still ends exactly as listed (a stale entry fails too). The reasons
are the rulebook's deliberate differences:

- Only ``#`` references are registered ("$ref resolves only inside the
  document"): a remote reference, and a reference through an ``$id`` URI,
  are refused. Where every reference still leads inside the document, the
  engine is also run on the document directly and must agree with the suite.
- ``false`` is refused as a topic's schema ("it would refuse every message").
- ``pattern`` is RE2, and so is the ``regex`` format, not ECMA 262.
- ``format`` is asserted on every draft.
- The shapes refused at registration are found conservatively (every target
  a ``$recursiveRef`` can pick counts).
- ``$schema`` must name a built-in draft: custom meta-schemas are refused.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ("DIFFERS", "REFUSED", "Refused")


@dataclass(frozen=True)
class Refused:
    """Registration refuses the case's schema.

    Attributes:
        why: The rulebook's reason.
        words: What the refusal's message says.
        engine: What the validator does with the document given directly:
            ``"agrees"`` (with the suite, on every test), ``"refuses"`` (it
            cannot compile it either), or ``"not run"`` (the document is
            written for a dialect Narad does not have).
    """

    why: str
    words: str
    engine: str


_OUTSIDE = "does not resolve inside the document"
IN_DOCUMENT = Refused(
    "a reference that is not a '#' fragment is refused, even one that leads "
    "inside the document through an $id",
    _OUTSIDE,
    "agrees",
)
REMOTE = Refused("a remote reference is refused", _OUTSIDE, "refuses")
FALSE_ROOT = Refused(
    "false is refused as a topic's schema", "false is refused", "agrees"
)
SHAPE = Refused(
    "shape 1 counts every target a $recursiveRef can pick",
    "reached by two paths at one level",
    "agrees",
)
NOT_RE2 = Refused(
    "patterns are RE2, which has no \\p{Letter}", "not valid RE2 syntax", "refuses"
)
OTHER_DIALECT = Refused(
    "$schema must name a built-in draft", "names no built-in draft", "not run"
)

_BY_REASON: dict[Refused, dict[str, tuple[str, ...]]] = {
    IN_DOCUMENT: {
        "draft4/ref.json": (
            "$ref prevents a sibling id from changing the base uri",
            "Recursive references between schemas",
            "Location-independent identifier with base URI change in subschema",
            "id must be resolved against nearest parent, not just immediate parent",
        ),
        "draft6/ref.json": (
            "$ref prevents a sibling $id from changing the base uri",
            "Recursive references between schemas",
            "Reference an anchor with a non-relative URI",
            "Location-independent identifier with base URI change in subschema",
            "refs with relative uris and defs",
            "relative refs with absolute uris and defs",
            "simple URN base URI with $ref via the URN",
            "URN base URI with URN and JSON pointer ref",
            "URN base URI with URN and anchor ref",
            "ref with absolute-path-reference",
        ),
        "draft7/ref.json": (
            "$ref prevents a sibling $id from changing the base uri",
            "Recursive references between schemas",
            "Reference an anchor with a non-relative URI",
            "Location-independent identifier with base URI change in subschema",
            "refs with relative uris and defs",
            "relative refs with absolute uris and defs",
            "$id must be resolved against nearest parent, not just immediate parent",
            "simple URN base URI with $ref via the URN",
            "URN base URI with URN and JSON pointer ref",
            "URN base URI with URN and anchor ref",
            "ref to if",
            "ref to then",
            "ref to else",
            "ref with absolute-path-reference",
        ),
        "draft2019-09/anchor.json": (
            "Location-independent identifier with absolute URI",
            "Location-independent identifier with base URI change in subschema",
            "same $anchor with different base uri",
        ),
        "draft2019-09/recursiveRef.json": (
            "multiple dynamic paths to the $recursiveRef keyword",
            "dynamic $recursiveRef destination (not predictable at schema compile time)",  # noqa: E501
        ),
        "draft2019-09/ref.json": (
            "Recursive references between schemas",
            "refs with relative uris and defs",
            "relative refs with absolute uris and defs",
            "$id must be resolved against nearest parent, not just immediate parent",
            "order of evaluation: $id and $ref",
            "order of evaluation: $id and $ref on nested schema",
            "simple URN base URI with $ref via the URN",
            "URN base URI with URN and JSON pointer ref",
            "URN base URI with URN and anchor ref",
            "URN ref with nested pointer ref",
            "ref to if",
            "ref to then",
            "ref to else",
            "ref with absolute-path-reference",
            "$ref with $recursiveAnchor",
        ),
        "draft2019-09/unevaluatedItems.json": ("unevaluatedItems with $recursiveRef",),
        "draft2019-09/unevaluatedProperties.json": (
            "unevaluatedProperties with $recursiveRef",
        ),
        "draft2020-12/anchor.json": (
            "Location-independent identifier with absolute URI",
            "Location-independent identifier with base URI change in subschema",
            "same $anchor with different base uri",
        ),
        "draft2020-12/dynamicRef.json": (
            "A $dynamicRef resolves to the first $dynamicAnchor still in scope that is encountered when the schema is evaluated",  # noqa: E501
            "A $dynamicRef without anchor in fragment behaves identical to $ref",
            "A $dynamicRef with intermediate scopes that don't include a matching $dynamicAnchor does not affect dynamic scope resolution",  # noqa: E501
            "An $anchor with the same name as a $dynamicAnchor is not used for dynamic scope resolution",  # noqa: E501
            "A $dynamicRef without a matching $dynamicAnchor in the same schema resource behaves like a normal $ref to $anchor",  # noqa: E501
            "A $dynamicRef with a non-matching $dynamicAnchor in the same schema resource behaves like a normal $ref to $anchor",  # noqa: E501
            "A $dynamicRef that initially resolves to a schema with a matching $dynamicAnchor resolves to the first $dynamicAnchor in the dynamic scope",  # noqa: E501
            "A $dynamicRef that initially resolves to a schema without a matching $dynamicAnchor behaves like a normal $ref to $anchor",  # noqa: E501
            "multiple dynamic paths to the $dynamicRef keyword",
            "after leaving a dynamic scope, it is not used by a $dynamicRef",
            "$dynamicRef skips over intermediate resources - direct reference",
            "$dynamicRef avoids the root of each schema, but scopes are still registered",  # noqa: E501
        ),
        "draft2020-12/ref.json": (
            "Recursive references between schemas",
            "refs with relative uris and defs",
            "relative refs with absolute uris and defs",
            "$id must be resolved against nearest parent, not just immediate parent",
            "order of evaluation: $id and $ref",
            "order of evaluation: $id and $ref on nested schema",
            "simple URN base URI with $ref via the URN",
            "URN base URI with URN and JSON pointer ref",
            "URN base URI with URN and anchor ref",
            "URN ref with nested pointer ref",
            "ref to if",
            "ref to then",
            "ref to else",
            "ref with absolute-path-reference",
        ),
        "draft2020-12/unevaluatedItems.json": ("unevaluatedItems with $dynamicRef",),
        "draft2020-12/unevaluatedProperties.json": (
            "unevaluatedProperties with $dynamicRef",
        ),
    },
    REMOTE: {
        "draft4/definitions.json": ("validate definition against metaschema",),
        "draft4/ref.json": ("remote ref, containing refs itself",),
        "draft4/refRemote.json": (
            "remote ref",
            "fragment within remote ref",
            "ref within remote ref",
            "base URI change",
            "base URI change - change folder",
            "base URI change - change folder in subschema",
            "root ref in remote ref",
            "Location-independent identifier in remote ref",
        ),
        "draft6/definitions.json": ("validate definition against metaschema",),
        "draft6/ref.json": ("remote ref, containing refs itself",),
        "draft6/refRemote.json": (
            "remote ref",
            "fragment within remote ref",
            "ref within remote ref",
            "base URI change",
            "base URI change - change folder",
            "base URI change - change folder in subschema",
            "root ref in remote ref",
            "remote ref with ref to definitions",
            "Location-independent identifier in remote ref",
            "retrieved nested refs resolve relative to their URI not $id",
            "$ref to $ref finds location-independent $id",
        ),
        "draft7/definitions.json": ("validate definition against metaschema",),
        "draft7/ref.json": ("remote ref, containing refs itself",),
        "draft7/refRemote.json": (
            "remote ref",
            "fragment within remote ref",
            "ref within remote ref",
            "base URI change",
            "base URI change - change folder",
            "base URI change - change folder in subschema",
            "root ref in remote ref",
            "remote ref with ref to definitions",
            "Location-independent identifier in remote ref",
            "retrieved nested refs resolve relative to their URI not $id",
            "$ref to $ref finds location-independent $id",
        ),
        "draft2019-09/defs.json": ("validate definition against metaschema",),
        "draft2019-09/ref.json": ("remote ref, containing refs itself",),
        "draft2019-09/refRemote.json": (
            "remote ref",
            "fragment within remote ref",
            "anchor within remote ref",
            "ref within remote ref",
            "base URI change",
            "base URI change - change folder",
            "base URI change - change folder in subschema",
            "root ref in remote ref",
            "remote ref with ref to defs",
            "Location-independent identifier in remote ref",
            "retrieved nested refs resolve relative to their URI not $id",
            "remote HTTP ref with different $id",
            "remote HTTP ref with different URN $id",
            "remote HTTP ref with nested absolute ref",
            "$ref to $ref finds detached $anchor",
        ),
        "draft2020-12/defs.json": ("validate definition against metaschema",),
        "draft2020-12/dynamicRef.json": (
            "strict-tree schema, guards against misspelled properties",
            "tests for implementation dynamic anchor and reference link",
            "$ref and $dynamicAnchor are independent of order - $defs first",
            "$ref and $dynamicAnchor are independent of order - $ref first",
            "$ref to $dynamicRef finds detached $dynamicAnchor",
        ),
        "draft2020-12/ref.json": ("remote ref, containing refs itself",),
        "draft2020-12/refRemote.json": (
            "remote ref",
            "fragment within remote ref",
            "anchor within remote ref",
            "ref within remote ref",
            "base URI change",
            "base URI change - change folder",
            "base URI change - change folder in subschema",
            "root ref in remote ref",
            "remote ref with ref to defs",
            "Location-independent identifier in remote ref",
            "retrieved nested refs resolve relative to their URI not $id",
            "remote HTTP ref with different $id",
            "remote HTTP ref with different URN $id",
            "remote HTTP ref with nested absolute ref",
            "$ref to $ref finds detached $anchor",
        ),
    },
    FALSE_ROOT: {
        "draft6/boolean_schema.json": ("boolean schema 'false'",),
        "draft7/boolean_schema.json": ("boolean schema 'false'",),
        "draft2019-09/boolean_schema.json": ("boolean schema 'false'",),
        "draft2020-12/boolean_schema.json": ("boolean schema 'false'",),
    },
    SHAPE: {
        "draft2019-09/recursiveRef.json": ("$recursiveRef with nesting",),
    },
    NOT_RE2: {
        "draft2020-12/pattern.json": (
            "pattern with Unicode property escape requires unicode mode",
        ),
        "draft2020-12/patternProperties.json": (
            "patternProperties with Unicode property escape",
        ),
    },
    OTHER_DIALECT: {
        "draft2019-09/vocabulary.json": (
            "schema that uses custom metaschema with with no validation vocabulary",
            "ignore unrecognized optional vocabulary",
        ),
        "draft2020-12/vocabulary.json": (
            "schema that uses custom metaschema with with no validation vocabulary",
            "ignore unrecognized optional vocabulary",
        ),
    },
}
# File (relative to the suite's tests folder) -> case description -> why.
REFUSED: dict[str, dict[str, Refused]] = {}
for _reason, _files in _BY_REASON.items():
    for _file, _cases in _files.items():
        REFUSED.setdefault(_file, {}).update(dict.fromkeys(_cases, _reason))

FORMAT_ASSERTED = "format is asserted on every draft"
RE2_REGEX = "the regex format is RE2 syntax, as pattern uses, not ECMA 262"
IDNA2008 = "hostname follows IDNA2008 (RFC 5891) on every draft"
_FORMATS = [
    "email",
    "idn-email",
    "regex",
    "ipv4",
    "ipv6",
    "idn-hostname",
    "hostname",
    "date",
    "date-time",
    "time",
    "json-pointer",
    "relative-json-pointer",
    "iri",
    "iri-reference",
    "uri",
    "uri-reference",
    "uri-template",
    "uuid",
    "duration",
]
_ECMA = {
    "\\a is not an ECMA 262 control escape": ["when used as a pattern"],
    "Python-specific regular expression syntax is not valid ECMA 262": [
        "Python named group (?P<name>...) is not ECMA 262"
    ],
    "global inline flag groups are not valid ECMA 262": [
        "a single global inline flag (?i)",
        "multiple global inline flags (?ims)",
    ],
    "ECMA 262 named groups and backreferences are valid": [
        "an ECMA 262 named backreference \\k<name>"
    ],
    "ECMA 262 lookbehind is valid, including variable width": [
        "a variable-width lookbehind (ES2018)"
    ],
    "ECMA 262 character classes and escapes": [
        "an empty character class is valid ECMA 262",
        "a negated empty character class is valid ECMA 262",
        "a control escape \\cA is valid ECMA 262",
    ],
}
# File -> (case description, test description) -> why Narad's verdict is the
# opposite of the suite's.
DIFFERS: dict[str, dict[tuple[str, str], str]] = {
    "draft4/optional/format/hostname.json": {
        ("validation of host names", "hostname with consecutive hyphens (RFC1123)"): (
            IDNA2008
        ),
    },
    "draft6/optional/format/hostname.json": {
        ("validation of host names", "hostname with consecutive hyphens (RFC1123)"): (
            IDNA2008
        ),
    },
    "draft2020-12/format.json": {
        (f"{name} format", f"invalid {name} string is only an annotation by default"): (
            FORMAT_ASSERTED
        )
        for name in _FORMATS
    },
}
for _draft in ("draft7", "draft2019-09", "draft2020-12"):
    DIFFERS[f"{_draft}/optional/format/ecmascript-regex.json"] = {
        (case, test): RE2_REGEX for case, tests in _ECMA.items() for test in tests
    }
