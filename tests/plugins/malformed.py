"""Test plugins whose answers are malformed, one object per mistake."""

from __future__ import annotations

from narad import hookimpl
from narad.config import Setting
from narad.config import integer


class UnmarkedRule:
    """A rule for a keyword no draft defines, not marked as an extension."""

    @hookimpl
    def narad_compatibility_rules(self):
        return {"x-never-runs": lambda old, new, ctx: ()}


class NotCallableFormat:
    @hookimpl
    def narad_format_checkers(self):
        return {"acme-odd": "not a function"}


class DraftOfStrings:
    @hookimpl
    def narad_json_schema_drafts(self):
        return ["https://acme.example/draft"]


class MappingForDrafts:
    @hookimpl
    def narad_json_schema_drafts(self):
        return {"acme": None}


class ListForFormats:
    @hookimpl
    def narad_format_checkers(self):
        return [lambda value: True]


class BadDefault:
    @hookimpl
    def narad_settings(self):
        return {"acme": [Setting("limit", 0, integer(1, 9), "a limit")]}


class BadSection:
    @hookimpl
    def narad_settings(self):
        return {"disabled": [Setting("x", 1, integer(0), "clashes")]}


class NotASetting:
    @hookimpl
    def narad_settings(self):
        return {"acme": [("limit", 3)]}
