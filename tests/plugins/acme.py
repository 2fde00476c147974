"""A test plugin implementing every hook, as a third party would.

It adds a draft (a copy of 2020-12 under its own URI), a format, a rule for
its own keyword, a schema type (``ACME_TEXT``: a schema ``{"max": n}`` takes
UTF-8 texts of at most n bytes, and may only grow), the toy in-memory storage
backend, and two settings.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import narad_draft202012
from narad import hookimpl
from narad import jsontext
from narad import schematypes
from narad.compatibility import ABSENT
from narad.compatibility import Change
from narad.compatibility import Violation
from narad.compatibility import extension
from narad.config import Setting
from narad.config import integer
from narad.config import text
from narad.errors import InvalidPayload
from narad.errors import InvalidSchema
from tests.contract import memory

DRAFT_URI = "https://acme.example/draft/2020-12-copy"


@extension
def frozen(old: Any, new: Any, ctx: Any) -> Iterator[Violation]:
    """``x-acme-frozen`` may never change once there."""
    if old is not ABSENT and old != new:
        yield Violation(Change.keyword_changed, "x-acme-frozen changed")


class TextType(schematypes.SchemaType):
    """``ACME_TEXT``: payloads are UTF-8 texts of at most ``max`` bytes."""

    name = "ACME_TEXT"
    encodings = ("binary",)

    def parse(self, raw, options):
        try:
            document = jsontext.loads(raw, max_depth=8)
        except jsontext.JSONTextError as exc:
            raise InvalidSchema(f"schema: {exc}") from None
        limit = document.get("max") if isinstance(document, dict) else None
        if type(limit) is not int or limit < 0:
            raise InvalidSchema("schema: /max: must be a count of bytes")
        stored = jsontext.compact(raw)
        return schematypes.ParsedSchema(stored, str(limit).encode(), False, limit)

    def compile(self, schema, options, uri):
        def validate(payload: bytes) -> None:
            if len(payload) > schema.value:
                raise InvalidPayload(f"text over {schema.value} bytes")
            try:
                payload.decode()
            except UnicodeDecodeError:
                raise InvalidPayload("not UTF-8 text") from None

        return schematypes.Compiled(validate, 64)

    def check(self, new, against, mode, options, *, first):
        def found(stored):
            for direction in mode.directions:
                smaller, larger = (new, stored)
                if direction is schematypes.Direction.FORWARD:
                    smaller, larger = stored, new
                if smaller.value < larger.value:
                    yield schematypes.Finding(
                        schematypes.Violation("max", "max shrank", "max", "/max"),
                        0,
                        direction,
                        swapped=False,
                    )

        def per_version():
            for version, stored in against:
                yield version, (replace(f, version=version) for f in found(stored))
                if not mode.transitive:
                    return

        return schematypes.collect(per_version(), first=first)


@hookimpl
def narad_schema_types():
    return [TextType()]


@hookimpl
def narad_json_schema_drafts():
    draft = narad_draft202012.DRAFT
    return [replace(draft, name="acme", uris=(DRAFT_URI,), default=False)]


@hookimpl
def narad_format_checkers():
    return {"acme-even": lambda value: len(value) % 2 == 0}


@hookimpl
def narad_compatibility_rules():
    return {"x-acme-frozen": frozen}


@hookimpl
def narad_storage_backends():
    return {"memory": memory.connect}


@hookimpl
def narad_settings():
    return {
        "acme": [
            Setting("greeting", "hello", text, "what acme says"),
            Setting("limit", 3, integer(1, 9), "how much acme takes"),
        ]
    }
