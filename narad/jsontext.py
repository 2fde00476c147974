"""Narad's strict JSON reader: exact JSON text handling (public).

Shared by the HTTP layer, schema registration and validation, and the
schema types (Avro's and Protobuf's JSON encodings); public for plugins
under the compatibility promise (docs/plugins.md).

Numbers are never rounded: an integer literal becomes an ``int`` and any
literal with a fraction or an exponent becomes a :class:`~decimal.Decimal`
holding exactly what was written. Comparisons between ``int`` and ``Decimal``
are exact in Python, so validators compare numbers without floats.

Two bounds keep arithmetic on hostile numbers cheap: an exponent beyond
+-1000 (the rulebook's bound) and a mantissa longer than Python's own
integer-string limit (4,300 digits) are refused as invalid JSON.

Every JSON body Narad reads (topic create and alter, batch produce, produce
to a topic with a schema, schema registration) goes through :func:`loads`,
so all of them follow the same rules: one JSON text, strict UTF-8 without a
byte-order mark, no ``NaN``/``Infinity`` and bounded nesting.

Repeated keys: Narad's own request bodies (topic create and PATCH, schema
documents, users and grants, ack/batch, the batch produce envelope, the
dry run's body) refuse an object key written twice (I-JSON, RFC 7493 2.3):
Narad reads them, and a second reader keeping the first value would
disagree with it about what was asked. A produce payload on a topic with a
schema follows the rulebook instead ("When an object repeats a key, the
last value wins, and that value is the one checked"): the validator parses
it with ``allow_duplicate_keys=True`` and the message is stored byte for
byte as sent (issue 50). Lone surrogates (``"\\ud800"``) are valid JSON and
are kept; the schema engine and error rendering cope with them.
"""

from __future__ import annotations

import json
import re
from array import array
from collections.abc import Callable
from decimal import Decimal
from decimal import InvalidOperation
from fractions import Fraction
from itertools import accumulate
from typing import Any

from narad.quoting import quote

__all__ = (
    "MAX_DIGITS",
    "MAX_EXPONENT",
    "DuplicateKey",
    "JSONTextError",
    "TooDeep",
    "compact",
    "decode",
    "json_equal",
    "json_key",
    "loads",
    "loads_pairs",
    "nesting_depth_exceeds",
    "raw_members",
)

MAX_EXPONENT = 1000
MAX_DIGITS = 4300

_BOM = "\ufeff"

# A JSON string literal, written as an unrolled loop so ``re`` walks it in
# linear time without backtracking.
_STRING = rb'"[^"\\]*(?:\\.[^"\\]*)*"'
_STRING_OR_SPACE = re.compile(rb"(" + _STRING + rb")|[ \t\n\r]+", re.DOTALL)
_SPACES = (b" ", b"\t", b"\n", b"\r")

# bytes.translate tables: brackets as +1 (open) and -1 (close); what to drop
# to keep only quotes and brackets.
_NESTING = bytes.maketrans(b"[{]}", b"\x01\x01\xff\xff")
_NOT_STRUCTURE = bytes(b for b in range(256) if b not in b'"[]{}')


class JSONTextError(ValueError):
    """The bytes are not one JSON text Narad accepts; ``str()`` says why."""


class TooDeep(JSONTextError):
    """The text nests objects and arrays deeper than the limit."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"nests deeper than {limit} levels")
        self.limit = limit


class DuplicateKey(JSONTextError):
    """An object of the text has the same key twice."""

    def __init__(self, key: str, pointer: str) -> None:
        super().__init__(
            f"has duplicate key {quote(key)} in the object at {quote(pointer)}"
        )
        self.key = key
        self.pointer = pointer


# Byte-order marks, then RFC 4627's rule: JSON starts with two ASCII
# characters, so the NUL bytes among the first four tell the encoding.
_WIDE_BOMS = (
    (b"\x00\x00\xfe\xff", "UTF-32"),
    (b"\xff\xfe\x00\x00", "UTF-32"),
    (b"\xfe\xff", "UTF-16"),
    (b"\xff\xfe", "UTF-16"),
)


def _wide_encoding(data: bytes) -> str | None:
    for bom, name in _WIDE_BOMS:
        if data.startswith(bom):
            return name
    head = data[:4]
    if len(head) == 4 and head.count(0) == 3:
        return "UTF-32"
    if len(head) >= 2 and (head[0] == 0) != (head[1] == 0):
        return "UTF-16"
    return None


def decode(data: bytes) -> str:
    """Decode ``data`` as strict UTF-8 and refuse a byte-order mark or nothing."""
    wide = _wide_encoding(data)
    if wide is not None:
        raise JSONTextError(f"is {wide}; JSON must be UTF-8")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise JSONTextError(f"not valid UTF-8 at byte {exc.start}") from None
    if text.startswith(_BOM):
        raise JSONTextError("starts with a UTF-8 byte-order mark")
    if not text.strip(" \t\n\r"):
        raise JSONTextError("empty")
    return text


def _openers(data: bytes) -> int:
    """How many ``[`` and ``{`` ``data`` holds, strings included. A bracket
    found at most once is told by two searches (memchr, many times faster
    than a count): a batch body has one ``[``, a payload often one ``{``."""
    total = 0
    for bracket in (b"[", b"{"):
        first = data.find(bracket)
        if first < 0:
            continue
        if data.find(bracket, first + 1) < 0:
            total += 1
        else:
            total += data.count(bracket)
    return total


def nesting_depth_exceeds(data: bytes, limit: int) -> bool:
    """Tell whether ``data`` nests arrays/objects deeper than ``limit``.

    Works on the raw text without recursion and without building any value,
    in a few passes of C over the bytes: escape pairs go first (so ``\\"``
    never ends a string), then everything but quotes and brackets, then what
    sits between quotes (string contents); the remaining brackets become
    +1/-1 and the running sum's maximum is the depth. The common case, a
    text with no more than ``limit`` opening brackets in all, answers from
    two counts. On a text that is not JSON the count is right up to where
    it stops being JSON, which is as far as the parser gets before refusing.
    """
    if len(data) <= limit or _openers(data) <= limit:
        return False
    if b"\\" in data:
        data = data.replace(b"\\\\", b"").replace(b'\\"', b"")
    quoted = data.translate(None, _NOT_STRUCTURE).split(b'"')
    brackets = b"".join(quoted[::2])
    if brackets.count(b"[") + brackets.count(b"{") <= limit:
        return False
    steps = array("b", brackets.translate(_NESTING))
    return max(accumulate(steps)) > limit


def _parse_int(literal: str) -> int:
    if len(literal.lstrip("-")) > MAX_EXPONENT + 1:
        raise JSONTextError("has a number whose exponent is beyond +-1000")
    return int(literal)


def _parse_decimal(literal: str) -> Decimal:
    try:
        number = Decimal(literal)
    except InvalidOperation:  # an exponent past what Decimal holds (1e10**18)
        raise JSONTextError("has a number whose exponent is beyond +-1000") from None
    exponent = number.adjusted()
    if not -MAX_EXPONENT <= exponent <= MAX_EXPONENT:
        raise JSONTextError("has a number whose exponent is beyond +-1000")
    if len(number.as_tuple().digits) > MAX_DIGITS:
        raise JSONTextError(f"has a number longer than {MAX_DIGITS} digits")
    return number


def _refuse_constant(name: str) -> Any:
    raise JSONTextError(f"has {name}, which is not JSON")


class _Repeated(ValueError):
    """Raised inside the parser at the first object with a repeated key."""


def _unique_object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj = dict(pairs)
    if len(obj) != len(pairs):
        raise _Repeated
    return obj


def _decoder(
    *, checked_ints: bool, pairs_hook: Callable[[list[tuple[str, Any]]], Any] | None
) -> json.JSONDecoder:
    return json.JSONDecoder(
        parse_int=_parse_int if checked_ints else None,
        parse_float=_parse_decimal,
        parse_constant=_refuse_constant,
        object_pairs_hook=pairs_hook,
        strict=True,
    )


# Integer literals go through the C parser unless the text holds a run of
# digits long enough to break the exponent bound (rare): a Python call per
# integer is most of the parse time of a typical payload. Likewise a text
# with no object never pays for the repeated-key check. Decoders are
# stateless and shared: (checked ints, unique keys) -> decoder.
_DECODERS = {
    (checked, unique): _decoder(
        checked_ints=checked, pairs_hook=_unique_object if unique else None
    )
    for checked in (False, True)
    for unique in (False, True)
}
# A run of digits longer than the exponent bound allows, found by mapping
# digits to "0" and all else to " " and searching: a regex scan of a large
# payload costs many times more.
_DIGITS_ONLY = bytes(0x30 if 0x30 <= b <= 0x39 else 0x20 for b in range(256))
_LONG_DIGIT_RUN = b"0" * (MAX_EXPONENT + 2)


def _has_long_digit_run(data: bytes) -> bool:
    return len(data) > MAX_EXPONENT + 1 and _LONG_DIGIT_RUN in data.translate(
        _DIGITS_ONLY
    )


# Nesting the C parser may meet before the text is known to be shallow
# enough: its recursion is a few hundred bytes of stack per level.
PARSE_SAFE_DEPTH = 5000
# Walking a parsed container costs about what scanning this many bytes of
# text does.
_BYTES_PER_CONTAINER = 100


def loads(data: bytes, *, max_depth: int, allow_duplicate_keys: bool = False) -> Any:
    """Parse ``data`` as exactly one JSON text, with exact numbers.

    Args:
        data: The raw text.
        max_depth: The deepest nesting of arrays and objects accepted.
        allow_duplicate_keys: Let a repeated key's last value win instead of
            refusing the text: for produce payloads (the rulebook's rule)
            and for reading back documents stored before repeats were
            refused.

    Raises:
        TooDeep: nesting beyond ``max_depth``, whatever else is wrong.
        DuplicateKey: an object has the same key twice; names the key and
            the object's JSON Pointer.
        JSONTextError: anything else that is not one JSON text in UTF-8:
            invalid UTF-8, UTF-16 or UTF-32, a byte-order mark, an empty body,
            trailing data, raw control characters in strings,
            ``NaN``/``Infinity``, numbers beyond the bounds above.
    """
    text = decode(data)
    objects = data.count(b"{")
    openers = data.count(b"[") + objects  # strings included: an upper bound
    measure_value = False
    if openers > max_depth:
        # Either the text is measured before parsing, or the parsed value
        # after: the text when the parser could recurse too deep for comfort
        # or when the value holds many containers; the value when strings
        # hold most of the brackets (a batch of JSON messages), where a
        # bracket count is cheap and scanning the strings is not.
        if openers > PARSE_SAFE_DEPTH or openers * _BYTES_PER_CONTAINER > len(data):
            if nesting_depth_exceeds(data, max_depth):
                raise TooDeep(max_depth)
        else:
            measure_value = True
    checked = _has_long_digit_run(data)
    unique = objects > 0 and not allow_duplicate_keys
    try:
        value = _DECODERS[checked, unique].decode(text)
    except (ValueError, RecursionError) as exc:
        if measure_value and nesting_depth_exceeds(data, max_depth):
            raise TooDeep(max_depth) from None
        raise _refusal(exc, text, checked) from None
    if measure_value and _deeper_than(value, max_depth):
        raise TooDeep(max_depth)
    return value


# Objects as tuples of their (key, value) pairs, in order, repeats kept:
# the C parser calls ``tuple`` on each object's pairs without a Python frame,
# and arrays stay lists, so the two never look alike.
_PAIRS_DECODER = _decoder(checked_ints=False, pairs_hook=tuple)


def loads_pairs(data: bytes) -> Any | None:
    """A first pass at ``data`` in C, for a caller that checks the rest.

    The value with every object as a tuple of its ``(key, value)`` pairs,
    in order and with repeated keys kept, numbers as :func:`loads` gives
    them but integers unbounded; ``None`` when the text is not one JSON
    text by :func:`loads`' other rules (UTF-8, constants, fractions'
    bounds, trailing data) or nests too many brackets to parse here safely.

    The caller must not take a value from here that :func:`loads` might
    refuse: it must reject (and ask :func:`loads` for the answer) any
    object whose keys repeat, any integer longer than :data:`MAX_EXPONENT`
    digits and any nesting deeper than its limit. What is left is exactly
    what :func:`loads` accepts, with the same values.
    """
    try:
        text = decode(data)
    except JSONTextError:
        return None
    if len(data) > PARSE_SAFE_DEPTH and _openers(data) > PARSE_SAFE_DEPTH:
        return None
    try:
        return _PAIRS_DECODER.decode(text)
    except (ValueError, RecursionError):
        return None


def _refusal(exc: Exception, text: str, checked_ints: bool) -> JSONTextError:
    if isinstance(exc, JSONTextError):
        return exc
    if isinstance(exc, _Repeated):
        return _locate_repeat(text, checked_ints)
    if isinstance(exc, json.JSONDecodeError):
        reason = "has trailing data" if exc.msg == "Extra data" else "is not JSON"
        return JSONTextError(
            f"{reason} ({exc.msg.lower()}: line {exc.lineno} column {exc.colno})"
        )
    return JSONTextError(f"is not JSON ({exc})")


def _deeper_than(value: Any, limit: int) -> bool:
    """Whether a parsed value nests arrays/objects deeper than ``limit``.

    Level by level, so each container costs one comprehension and no stack
    entry of its own.
    """
    level = [value] if type(value) in _CONTAINERS else []
    depth = 0
    while level:
        depth += 1
        if depth > limit:
            return True
        level = [
            item
            for container in level
            for item in (container.values() if type(container) is dict else container)
            if type(item) in _CONTAINERS
        ]
    return False


_CONTAINERS = frozenset((dict, list))


class _Members:
    """An object's members in order, repeats kept, when locating a repeat."""

    __slots__ = ("pairs", "repeated")

    def __init__(self, pairs: list[tuple[str, Any]], repeated: str | None) -> None:
        self.pairs = pairs
        self.repeated = repeated


def _locate_repeat(text: str, checked_ints: bool) -> DuplicateKey:
    """Parse ``text`` again, keeping every member, and find the repeat.

    Only the error path pays for this. The parse that raised stopped at the
    first object to close with a repeated key; this one marks that same
    object and keeps all members (a later repeat of an enclosing key must not
    drop it), so a walk from the root can give its JSON Pointer.
    """
    found = False

    def members(pairs: list[tuple[str, Any]]) -> _Members:
        nonlocal found
        repeated = None
        if not found and len({key for key, _ in pairs}) != len(pairs):
            found = True
            seen: set[str] = set()
            for key, _ in pairs:
                if key in seen:
                    repeated = key
                    break
                seen.add(key)
        return _Members(pairs, repeated)

    decoder = _decoder(checked_ints=checked_ints, pairs_hook=members)
    stack: list[tuple[Any, str]] = [(decoder.decode(text), "")]
    while stack:
        value, pointer = stack.pop()
        if isinstance(value, _Members):
            if value.repeated is not None:
                return DuplicateKey(value.repeated, pointer)
            stack.extend((v, f"{pointer}/{_escape(k)}") for k, v in value.pairs)
        elif isinstance(value, list):
            stack.extend((v, f"{pointer}/{i}") for i, v in enumerate(value))
    raise AssertionError("a repeated key was reported but not found")


def _escape(key: str) -> str:
    """A key as a JSON Pointer reference token (RFC 6901)."""
    return key.replace("~", "~0").replace("/", "~1")


def compact(data: bytes) -> bytes:
    """Remove insignificant whitespace from a valid JSON text.

    Strings and numbers are kept byte for byte as written, so ``1e2`` stays
    ``1e2`` and escapes stay escaped.
    """
    if not any(space in data for space in _SPACES):
        return data  # already compact (four scans in C, not a regex per string)
    return _STRING_OR_SPACE.sub(lambda m: m.group(1) or b"", data)


def json_key(value: Any) -> Any:
    """A hashable key such that equal keys mean equal JSON values.

    Follows JSON Schema equality: ``1``, ``1.0`` and ``1e0`` are equal;
    ``true`` is not ``1``; object key order does not matter.
    """
    if value is True or value is False:
        return ("b", value)
    if isinstance(value, int):
        return ("n", value)
    if isinstance(value, str):
        return ("s", value)
    if value is None:
        return ("z",)
    if isinstance(value, Decimal | float):
        fraction = Fraction(value)
        return ("n", fraction.numerator if fraction.denominator == 1 else fraction)
    if isinstance(value, list):
        return ("a", tuple(json_key(item) for item in value))
    if isinstance(value, dict):
        return ("o", frozenset((k, json_key(v)) for k, v in value.items()))
    raise TypeError(f"not a JSON value: {type(value).__name__}")


def json_equal(a: Any, b: Any) -> bool:
    """JSON Schema equality of two parsed values (see :func:`json_key`)."""
    # Python's own equality, in C, is coarser (True == 1): values it tells
    # apart differ as JSON values too, so only the ones it equates need keys.
    return a == b and json_key(a) == json_key(b)


_MEMBER_TOKENS = re.compile(rb"(" + _STRING + rb")|[\[\]{},:]", re.DOTALL)


def raw_members(data: bytes) -> dict[str, bytes]:
    """The raw text of each top-level member of a valid JSON object text.

    Lets a request body carry a schema whose numbers must be stored exactly
    as written: the caller parses the body with :func:`loads` (which refuses
    a repeated key), then takes the member's own bytes from here.
    """
    members: dict[str, bytes] = {}
    depth = 0
    key: str | None = None
    start = 0
    expect_key = False
    for match in _MEMBER_TOKENS.finditer(data):
        token = match.group()
        if match.group(1) is not None:
            if depth == 1 and expect_key:
                key = json.loads(token)
                expect_key = False
            continue
        if token in b"[{":
            depth += 1
            if depth == 1:
                expect_key = True
        elif token == b":" and depth == 1:
            start = match.end()
        elif (token == b"," and depth == 1) or (token in b"]}" and depth == 1):
            if key is not None:
                members[key] = data[start : match.start()].strip(b" \t\n\r")
                key = None
            expect_key = True
        if token in b"]}":
            depth -= 1
    return members
