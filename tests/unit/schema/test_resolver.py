from __future__ import annotations

import pytest

from narad.plugins import Plugins
from narad.plugins import get_plugin_manager
from narad.schema.resolver import SchemaIndex
from narad.schema.resolver import UnresolvableRef
from narad.schema.resolver import escape
from narad.schema.resolver import lookup
from narad.schema.resolver import unescape
from narad.schema.resolver import urljoin

BY_URI, DEFAULT = Plugins(get_plugin_manager(load_entry_points=False)).drafts()
DRAFT4 = BY_URI["http://json-schema.org/draft-04/schema#"]
DRAFT7 = BY_URI["http://json-schema.org/draft-07/schema#"]
DRAFT2019 = BY_URI["https://json-schema.org/draft/2019-09/schema"]
BASE = "narad://schema/orders/1"


@pytest.mark.parametrize(
    ("base", "ref", "expected"),
    [
        (BASE, "#/a", (BASE, "/a")),
        (BASE, "x.json#b", ("narad://schema/orders/x.json", "b")),
        ("http://a/b/c/d;p?q", "../../g", ("http://a/g", "")),
        ("http://a/b/c/d;p?q", "g/./h/../i", ("http://a/b/c/g/i", "")),
        ("http://a/b/c/d;p?q", "//x/y", ("http://x/y", "")),
        ("urn:example:root", "#f", ("urn:example:root", "f")),
    ],
)
def test_urljoin_follows_rfc3986_for_every_scheme(base, ref, expected):
    assert urljoin(base, ref) == expected


def test_index_ids_anchors_and_pointers():
    doc = {
        "$id": "http://ex.com/root.json",
        "$defs": {
            "A": {"$anchor": "foo"},
            "B": {
                "$id": "other.json",
                "$defs": {"X": {"$id": "t/inner.json"}, "Y": {"$dynamicAnchor": "n"}},
            },
        },
        "x": {"y": {"type": "string"}},
    }
    index = SchemaIndex(doc, draft=DEFAULT, base_uri=BASE)
    root = index.root_uri
    assert root == "http://ex.com/root.json"
    assert index.resolve("#foo", root).pointer == "/$defs/A"
    assert index.resolve("", root).pointer == ""
    assert index.resolve(BASE + "#/x", BASE).pointer == "/x"
    inner = index.resolve("other.json#/$defs/X", root)
    assert inner.pointer == "/$defs/B/$defs/X"
    assert inner.base_uri == "http://ex.com/t/inner.json"
    assert index.resolve("http://ex.com/t/inner.json", root).pointer == inner.pointer
    unowned = index.resolve("#/x/y", root)
    assert (unowned.pointer, unowned.schema) == ("/x/y", {"type": "string"})
    assert index.resolve("#/$defs/B/$defs/Y", root).base_uri.endswith("other.json")
    for bad in ("#nope", "#/nope", "http://elsewhere/x", "#/x/y/type"):
        with pytest.raises(UnresolvableRef):
            index.resolve(bad, root)


def test_pointer_tokens_are_unescaped():
    doc = {"$defs": {"a/b": {"type": "integer"}, "c~d": {}, "%25": {}}}
    index = SchemaIndex(doc, draft=DEFAULT, base_uri=BASE)
    assert index.resolve("#/$defs/a~1b", BASE).schema == {"type": "integer"}
    assert index.resolve("#/$defs/c~0d", BASE).pointer == "/$defs/c~0d"
    assert index.resolve("#/$defs/%2525", BASE).pointer == "/$defs/%25"


def test_dynamic_targets_list_every_dynamic_anchor_of_the_name():
    doc = {
        "$id": "urn:root",
        "$dynamicAnchor": "node",
        "$ref": "urn:list",
        "$defs": {
            "list": {
                "$id": "urn:list",
                "$dynamicAnchor": "node",
                "items": {"$dynamicRef": "#node"},
            },
            "other": {"$id": "urn:other", "$dynamicAnchor": "node"},
            "plain": {"$id": "urn:plain", "$anchor": "node"},
        },
    }
    index = SchemaIndex(doc, draft=DEFAULT, base_uri=BASE)
    assert index.has_dynamic_refs
    targets = index.dynamic_targets("#node", "urn:list")
    assert [t.pointer for t in targets] == ["/$defs/list", "", "/$defs/other"]
    static = index.dynamic_targets("#node", "urn:plain")
    assert [t.pointer for t in static] == ["/$defs/plain"]


def test_recursive_targets_2019_09():
    doc = {
        "$recursiveAnchor": True,
        "$defs": {"tree": {"$id": "tree", "$recursiveAnchor": True}},
        "items": {"$recursiveRef": "#"},
    }
    index = SchemaIndex(doc, draft=DRAFT2019, base_uri=BASE)
    targets = index.recursive_targets(BASE)
    assert [t.pointer for t in targets] == ["", "/$defs/tree"]


def test_draft4_id_and_fragment_ids():
    doc = {
        "id": "http://ex.com/s.json",
        "definitions": {"a": {"id": "#alpha"}, "b": {"id": "b.json"}},
    }
    index = SchemaIndex(doc, draft=DRAFT4, base_uri=BASE)
    assert index.resolve("#alpha", index.root_uri).pointer == "/definitions/a"
    assert index.resolve("b.json", index.root_uri).pointer == "/definitions/b"


def test_ref_hides_sibling_id_before_2019_09():
    doc = {"definitions": {"a": {"$id": "a.json", "$ref": "#/definitions/b"}, "b": {}}}
    index = SchemaIndex(doc, draft=DRAFT7, base_uri=BASE)
    assert "narad://schema/orders/a.json" not in index.resources
    assert index.base_uris["/definitions/a"] == BASE


@pytest.mark.parametrize(
    ("pointer", "expected"),
    [
        ("", {"a/b": [10, {"~": 2}], "0": 3}),
        ("/a~1b/0", 10),
        ("/a~1b/1/~0", 2),
        ("/0", 3),
    ],
)
def test_lookup_follows_json_pointers(pointer, expected):
    document = {"a/b": [10, {"~": 2}], "0": 3}
    assert lookup(document, pointer) == expected


@pytest.mark.parametrize(
    "pointer", ["/missing", "/a~1b/2", "/a~1b/01", "/a~1b/-", "/0/x"]
)
def test_lookup_refuses_what_is_not_there(pointer):
    with pytest.raises(UnresolvableRef):
        lookup({"a/b": [10, {"~": 2}], "0": 3}, pointer)


def test_escape_and_unescape_are_inverse():
    for token in ["plain", "a/b", "~", "~1", "/~0/"]:
        assert unescape(escape(token)) == token


def test_duplicates_are_recorded_in_document_order():
    doc = {
        "$defs": {
            "y": {"$anchor": "a"},
            "x": {"$anchor": "a"},
            "r": {"$id": "urn:r", "$defs": {"a": {"$anchor": "a"}}},
            "s": {"$id": "urn:r"},
            "both": {"$anchor": "b", "$dynamicAnchor": "b"},
        }
    }
    index = SchemaIndex(doc, draft=DEFAULT, base_uri=BASE)
    assert sorted(map(str, index.duplicates)) == [
        "the anchor 'a' is declared twice in one resource: by the $anchor at "
        "'/$defs/x' and the $anchor at '/$defs/y'",
        "the resource 'urn:r' is declared twice: by the $id at '/$defs/r' and "
        "the $id at '/$defs/s'",
    ]


def test_id_fragments_are_anchors_only_where_the_draft_says():
    doc = {"definitions": {"x": {"$id": "#a"}}}
    assert f"{BASE}#a" in SchemaIndex(doc, draft=DRAFT7, base_uri=BASE).anchors
    assert f"{BASE}#a" not in SchemaIndex(doc, draft=DEFAULT, base_uri=BASE).anchors
