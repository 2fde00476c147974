from __future__ import annotations

from decimal import Decimal

import pytest

from narad.plugins import Plugins
from narad.plugins import get_plugin_manager
from narad.schema.drafts import DRAFT4_KEYWORDS
from narad.schema.drafts import DRAFT6_KEYWORDS
from narad.schema.drafts import DRAFT7_KEYWORDS
from narad.schema.drafts import DRAFT201909_KEYWORDS
from narad.schema.drafts import DRAFT202012_KEYWORDS
from narad.schema.validation.compiler import HANDLERS

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


@pytest.mark.parametrize(
    ("flag", "drafts"),
    [
        ("ref_overrides_siblings", {"04", "06", "07"}),
        ("id_fragment_anchors", {"04", "06", "07"}),
        ("boolean_exclusive_bounds", {"04"}),
        ("contains_evaluates", {"2020-12"}),
        ("fraction_integers", {"06", "07", "2019-09", "2020-12"}),
    ],
)
def test_draft_differences_are_flags(flag, drafts):
    assert {name for name, d in DRAFTS.items() if getattr(d, flag)} == drafts


def test_each_draft_changes_the_one_before():
    order = [DRAFT4_KEYWORDS, DRAFT6_KEYWORDS, DRAFT7_KEYWORDS]
    order += [DRAFT201909_KEYWORDS, DRAFT202012_KEYWORDS]
    assert [DRAFTS[n].keywords for n in ["04", "06", "07", "2019-09", "2020-12"]] == (
        order
    )
    assert {
        "$id",
        "const",
        "contains",
        "examples",
        "propertyNames",
    } == DRAFT6_KEYWORDS - DRAFT4_KEYWORDS


# Keywords that check nothing themselves: identifiers, containers and
# annotations, and those their siblings' handlers read (then, minContains...).
NO_HANDLER = frozenset(
    {
        "$anchor",
        "$comment",
        "$defs",
        "$dynamicAnchor",
        "$id",
        "$recursiveAnchor",
        "$schema",
        "$vocabulary",
        "contentEncoding",
        "contentMediaType",
        "contentSchema",
        "default",
        "definitions",
        "deprecated",
        "description",
        "else",
        "examples",
        "id",
        "maxContains",
        "minContains",
        "readOnly",
        "then",
        "title",
        "writeOnly",
    }
)


def test_every_keyword_has_a_handler_or_checks_nothing():
    defined = frozenset().union(*(d.keywords for d in DRAFTS.values()))
    assert set(HANDLERS) | NO_HANDLER == defined
    assert not set(HANDLERS) & NO_HANDLER
