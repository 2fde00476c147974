from __future__ import annotations

from decimal import Decimal

import pytest

from narad.plugins import Plugins
from narad.plugins import get_plugin_manager

BY_URI, DEFAULT = Plugins(get_plugin_manager(load_entry_points=False)).drafts()
DRAFTS = {draft.name: draft for draft in BY_URI.values()}


def test_hook_narad_json_schema_drafts():
    assert sorted(DRAFTS) == ["04", "06", "07", "2019-09", "2020-12"]
    assert DEFAULT.name == "2020-12"
    assert [d.name for d in DRAFTS.values() if d.default] == ["2020-12"]


@pytest.mark.parametrize("draft", DRAFTS.values(), ids=DRAFTS)
def test_uris_with_and_without_hash(draft):
    assert len(draft.uris) == 2
    assert draft.uris[1] == draft.uris[0] + "#"
    assert (
        draft.meta_schema.get("$id", draft.meta_schema.get("id")).rstrip("#")
        == (draft.uris[0])
    )


@pytest.mark.parametrize(
    ("keyword", "drafts"),
    [
        ("const", {"06", "07", "2019-09", "2020-12"}),
        ("if", {"07", "2019-09", "2020-12"}),
        ("prefixItems", {"2020-12"}),
        ("additionalItems", {"04", "06", "07", "2019-09"}),
        ("$recursiveRef", {"2019-09"}),
        ("$dynamicRef", {"2020-12"}),
        ("definitions", {"04", "06", "07"}),
        ("$defs", {"2019-09", "2020-12"}),
        ("dependencies", {"04", "06", "07"}),
        ("dependentRequired", {"2019-09", "2020-12"}),
        ("id", {"04"}),
        ("$id", {"06", "07", "2019-09", "2020-12"}),
        ("format", {"04", "06", "07", "2019-09", "2020-12"}),
        ("contentMediaType", {"07", "2019-09", "2020-12"}),
    ],
)
def test_keywords(keyword, drafts):
    assert {name for name, d in DRAFTS.items() if keyword in d.keywords} == drafts


def test_ref_overrides_siblings_and_id_keyword():
    assert {n for n, d in DRAFTS.items() if d.ref_overrides_siblings} == {
        "04",
        "06",
        "07",
    }
    assert DRAFTS["04"].id_keyword == "id"


@pytest.mark.parametrize("draft", DRAFTS.values(), ids=DRAFTS)
def test_meta_validator(draft):
    assert list(draft.meta_validator({"type": "string", "minLength": 1})) == []
    messages = list(draft.meta_validator({"minLength": -1, "type": 5}))
    assert messages
    assert all("meta-schema" in m for m in messages)


def test_integral_decimals_are_integers_from_draft_06():
    schema = {"minLength": Decimal("1.0")}
    assert list(DRAFTS["06"].meta_validator(schema)) == []
    assert list(DRAFTS["2020-12"].meta_validator(schema)) == []
    assert list(DRAFTS["04"].meta_validator(schema))
