"""Narad's JSON Schema validator: a schema compiled once into small checks.

:mod:`narad.schema.validation.compiler` turns the document into nodes of
keyword checks. Validation answers with a boolean fast path first: that is
the verdict. Only a refused payload is walked again to explain it, and that
walk stops once the report would be larger than anyone can use (see
:class:`Report`): the verdict is the same either way.

Validation time is polynomial in the payload: every keyword applies each of
its subschemas once per value, the annotations ``unevaluated*`` need
included (see :mod:`narad.schema.validation.keywords`), and registration refuses the
shapes that would reach one value through many paths
(:mod:`narad.schema.registration.shapes`).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from collections.abc import Mapping
from typing import Any

from narad.errors import InvalidPayload
from narad.jsontext import JSONTextError
from narad.jsontext import TooDeep
from narad.jsontext import loads
from narad.jsontext import nesting_depth_exceeds
from narad.quoting import cut_pointer
from narad.schema.drafts import Draft
from narad.schema.limits import PAYLOAD_DEPTH
from narad.schema.resolver import BASE_URI
from narad.schema.resolver import SchemaIndex
from narad.schema.resolver import escape
from narad.schema.validation.compiler import Compiler
from narad.schema.validation.compiler import Node
from narad.schema.validation.compiler import steps_per_level

__all__ = ("MAX_DEPTH", "MESSAGE_LIMIT", "Node", "Report", "Validator")

MAX_DEPTH = PAYLOAD_DEPTH
MESSAGE_LIMIT = 2048
# A full report past this size is "very large" (the rulebook: a megabyte of
# failing values, many items each missing a long required list): the 400
# says so instead. Many small violations are not: the 400 names them.
MAX_REPORT = 64 * 1024
TOO_MANY = "too many violations to report; validate a smaller part of the payload"
# Python frames one compiled step takes (node, keyword, reference helper),
# and two more where annotations are collected (see Node.evaluate).
_FRAMES_PER_STEP = 4
_FRAMES_PER_EVALUATED_STEP = 6
_RECURSION_CEILING = 200_000
# What a compiled validator holds, measured with tracemalloc over varied
# schemas (20 pattern properties, a typical event, 200 properties, enums and
# consts of thousands of bytes, 30 mutual references, 50 anyOf branches,
# unevaluatedProperties, thousands of subschemas with one keyword or none):
# per subschema, per compiled keyword, and per byte of the compact document
# (enum and const values, names). Within a factor of two of the measure
# either way (tests/unit/schema/test_validator_size.py); a flat 1,500 bytes
# per subschema counted an empty one three times over, so a 255 KiB union of
# them (40 MiB) passed the cache's 64 MiB and was compiled for every produce.
# Compiled patterns are shared and counted by the pattern cache instead.
BYTES_PER_NODE = 500
BYTES_PER_KEYWORD = 350
BYTES_PER_DOCUMENT_BYTE = 14

# A location in the payload: None for the root, else (parent, token); turned
# into a JSON pointer only when a violation is written.
Path = tuple[Any, str | int] | None


def pointer_of(path: Path) -> str:
    tokens: list[str] = []
    while path is not None:
        path, token = path
        tokens.append(escape(str(token)))
    # Keys come from the payload: quote at most so much of each.
    return cut_pointer("".join("/" + token for token in reversed(tokens)))


def printable(text: str) -> str:
    """``text`` with each lone surrogate (JSON's ``"\\ud800"``) written as
    that escape, so the message encodes as UTF-8."""
    try:
        text.encode()
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode()
    return text


class _Enough(Exception):
    """The report passed its bounds; stop walking."""


class Report:
    """Violations found so far, one line each, within bounds."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.size = 0

    def add(self, path: Path, text: str) -> None:
        line = printable(f"- at '{pointer_of(path)}': {text}")
        self.lines.append(line)
        self.size += len(line) + 1
        if self.size > MAX_REPORT:
            raise _Enough


class Validator:
    """A schema document compiled once; validates payloads against it.

    Args:
        document: The parsed schema (``jsontext.loads``), a dict or a bool.
        draft: The draft the document is written in.
        drafts: Every known draft by ``$schema`` URI (kept for callers that
            pick the draft from the document).
        formats: Format checkers by format name; unknown formats are ignored.
        schema_uri: The schema's URI, e.g. ``narad://schema/payments/1``,
            named in error messages. The document's base URI is registration's
            (:data:`~narad.schema.resolver.BASE_URI`), so both resolve its
            references alike.

    Raises:
        InvalidSchema: a reference leads nowhere in the document, or a pattern
            is not valid RE2 (registration refuses both first).
    """

    def __init__(
        self,
        document: Any,
        *,
        draft: Draft,
        drafts: Mapping[str, Draft],
        formats: Mapping[str, Callable[[str], bool]],
        schema_uri: str,
    ) -> None:
        self.document = document
        self.draft = draft
        self.drafts = drafts
        self.schema_uri = schema_uri
        self.index = SchemaIndex(document, draft=draft, base_uri=BASE_URI)
        compiler = Compiler(self.index, formats)
        self.root = compiler.run()
        self.nodes = compiler.nodes
        self._keywords = sum(
            len(node.keywords) + len(node.finals) for node in self.nodes.values()
        )
        self.steps_per_level = steps_per_level(self.nodes)
        evaluates = any(node.finals for node in self.nodes.values())
        self._frames = _FRAMES_PER_EVALUATED_STEP if evaluates else _FRAMES_PER_STEP
        # The deepest payload whose validation fits under the recursion
        # ceiling; only schemas of thousands of chained references go below 256.
        per_level = self.steps_per_level * self._frames
        self.max_depth = min(MAX_DEPTH, (_RECURSION_CEILING - 1000) // per_level - 1)
        self._header = f"schema: jsonschema validation failed with '{schema_uri}#'"

    def estimated_bytes(self, document_bytes: int) -> int:
        """About how many bytes this validator holds, given the size of its
        compact document (what the validator cache is bounded by)."""
        return (
            BYTES_PER_NODE * len(self.nodes)
            + BYTES_PER_KEYWORD * self._keywords
            + BYTES_PER_DOCUMENT_BYTE * document_bytes
        )

    def validate(self, payload: bytes) -> Any:
        """Parse ``payload`` as one JSON text and validate it; return the value.

        Nesting is measured on the text before it is parsed (brackets inside
        strings do not count): deeper than 256 levels, or than this schema's
        ``max_depth``, is refused without parsing. An object that repeats a
        key holds its last value, and that value is the one checked.

        Raises:
            InvalidPayload: the payload is not one JSON text (nesting over 256
                levels included) or the schema refuses it; the message names
                each violation, cut at 2 KiB.
        """
        try:
            # The rulebook: when an object repeats a key, the last value wins,
            # and that value is the one checked (the payload is stored as
            # sent). Narad's own request bodies refuse repeats (jsontext).
            value = loads(payload, max_depth=self.max_depth, allow_duplicate_keys=True)
        except TooDeep:
            if self.max_depth < MAX_DEPTH and not nesting_depth_exceeds(
                payload, MAX_DEPTH
            ):
                raise InvalidPayload(
                    f"schema: payload nests deeper than the {self.max_depth} "
                    "levels this schema can validate"
                ) from None
            raise InvalidPayload(
                f"payload nests deeper than {MAX_DEPTH} levels"
            ) from None
        except JSONTextError as exc:
            raise InvalidPayload(f"payload is not one JSON text: {exc}") from None
        if not self.is_valid(value):
            raise InvalidPayload(self._explain(value))
        return value

    def is_valid(self, value: Any) -> bool:
        """The verdict for an already parsed value (at most ``max_depth`` deep)."""
        # Python frames grow with payload depth times the in-place steps of
        # the schema; raise the limit to what this validation can need.
        needed = (self.max_depth + 1) * self.steps_per_level * self._frames + 1000
        if sys.getrecursionlimit() < needed:
            sys.setrecursionlimit(needed)
        return self.root.valid(value)

    def _explain(self, value: Any) -> str:
        report = Report()
        try:
            self.root.report(value, None, report)
        except _Enough:
            return printable(f"{self._header}\n- {TOO_MANY}")
        lines = report.lines or ["- at '': value does not match the schema"]
        return _cut("\n".join([printable(self._header), *lines]))


def _cut(message: str) -> str:
    limit = MESSAGE_LIMIT - len(InvalidPayload.prefix)
    # A lone surrogate quoted from the payload shows as its escape (\ud800).
    data = message.encode("utf-8", "backslashreplace")
    if len(data) <= limit:
        return data.decode()
    return data[:limit].decode(errors="ignore")
