"""A test plugin implementing every hook, as a third party would.

It adds a draft (a copy of 2020-12 under its own URI), a format, a rule for
its own keyword, the toy in-memory storage backend, and two settings.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import narad_draft202012
from narad import hookimpl
from narad.compatibility import ABSENT
from narad.compatibility import Change
from narad.compatibility import Violation
from narad.compatibility import extension
from narad.config import Setting
from narad.config import integer
from narad.config import text
from tests.contract import memory

DRAFT_URI = "https://acme.example/draft/2020-12-copy"


@extension
def frozen(old: Any, new: Any, ctx: Any) -> Iterator[Violation]:
    """``x-acme-frozen`` may never change once there."""
    if old is not ABSENT and old != new:
        yield Violation(Change.keyword_changed, "x-acme-frozen changed")


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
