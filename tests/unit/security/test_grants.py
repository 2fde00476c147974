from __future__ import annotations

import pytest

from narad.errors import InvalidArgument
from narad.security.grants import Action
from narad.security.grants import Permissions
from narad.security.grants import is_full_admin
from narad.security.grants import parse_grants
from narad.security.grants import pattern_covers
from narad.storage import Grant


def perms(*grants: tuple[str, tuple[str, ...]]) -> Permissions:
    return Permissions([Grant(action, patterns) for action, patterns in grants])


@pytest.mark.parametrize(
    ("held", "wanted", "covers"),
    [
        ("a", "a", True),
        ("a", "ab", False),
        ("a", "a*", False),
        ("a*", "a", True),
        ("a*", "ab", True),
        ("a.*", "a", False),
        ("a.*", "a.b.*", True),
        ("a.b.*", "a.*", False),
        ("*", "*", True),
        ("*", "anything", True),
        ("a*", "*", False),
    ],
)
def test_a_pattern_covers_what_it_matches_all_of(held, wanted, covers):
    assert pattern_covers(held, wanted) is covers


def test_grants_match_exact_names_and_prefixes():
    p = perms(("produce", ("orders", "inv.*")), ("consume", ("logs",)))
    assert p.allows(Action.PRODUCE, "orders")
    assert p.allows(Action.PRODUCE, "inv.a.b")
    assert not p.allows(Action.PRODUCE, "inv")
    assert not p.allows(Action.PRODUCE, "orders2")
    assert not p.allows(Action.CONSUME, "orders")
    assert p.allows(Action.CONSUME, "logs")
    assert p.any_matches("inv.x") and p.any_matches("logs")
    assert not p.any_matches("other")
    assert not p.admin and not p.full_admin


def test_admin_grants_every_action_on_what_it_matches():
    p = perms(("admin", ("team.*",)))
    for action in (Action.PRODUCE, Action.CONSUME, Action.CREATE, Action.ADMIN):
        assert p.allows(action, "team.x")
        assert not p.allows(action, "other")
    assert p.admin and not p.full_admin
    assert Permissions.everything().full_admin


def test_covers_asks_for_the_same_action_or_admin():
    p = perms(("produce", ("a.*",)), ("admin", ("b.*",)))
    assert p.covers("produce", "a.x")
    assert p.covers("produce", "a.x.*")
    assert not p.covers("produce", "a*")
    assert not p.covers("consume", "a.x")
    assert p.covers("consume", "b.x")
    assert p.covers("admin", "b.c.*")
    assert not p.covers("admin", "*")
    wanted = [Grant("produce", ("a.1", "c")), Grant("admin", ("*",))]
    assert p.uncovered(wanted) == [("produce", "c"), ("admin", "*")]


def test_listing_ranges_are_sorted_disjoint_and_minimal():
    p = perms(
        ("produce", ("b", "a.x", "ab")),
        ("consume", ("a.*", "a.b.*", "c*")),
        ("create", ("abc*",)),
    )
    # a.x and a.b.* are inside a.*; c* holds any c name.
    assert p.listing_prefixes() == [
        ("a.", False),
        ("ab", True),
        ("abc", False),
        ("b", True),
        ("c", False),
    ]
    assert perms(("consume", ("x",)), ("produce", ("*",))).listing_prefixes() is None
    assert perms().listing_prefixes() == []


def test_parse_grants_merges_actions_and_drops_repeats():
    grants = parse_grants(
        [
            {"action": "produce", "patterns": ["a", "b.*"]},
            {"action": "consume", "patterns": ["c"]},
            {"action": "produce", "patterns": ["b.*", "d"]},
        ]
    )
    assert grants == (
        Grant("produce", ("a", "b.*", "d")),
        Grant("consume", ("c",)),
    )
    assert parse_grants([]) == ()
    assert is_full_admin(parse_grants([{"action": "admin", "patterns": ["x", "*"]}]))
    assert not is_full_admin(parse_grants([{"action": "admin", "patterns": ["x*"]}]))


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ({}, "grants must be a list"),
        ([1], "grants[0] must be an object"),
        ([{"action": "produce"}], "grants[0].patterns must be a non-empty list"),
        ([{"action": "read", "patterns": ["a"]}], "grants[0].action must be one of"),
        # Found by schemathesis: an unhashable action was a 500.
        ([{"action": {}, "patterns": ["*"]}], "action must be one of produce"),
        ([{"action": ["admin"], "patterns": ["*"]}], "got a list"),
        ([{"action": "produce", "patterns": ["a"], "x": 1}], "unknown field 'x'"),
        ([{"action": "produce", "patterns": ["*a"]}], "grants[0].patterns[0]"),
        ([{"action": "produce", "patterns": ["a b"]}], "topic name or a prefix"),
        ([{"action": "produce", "patterns": [""]}], "patterns[0]"),
        ([{"action": "produce", "patterns": ["a" * 250]}], "patterns[0]"),
        ([{"action": "produce", "patterns": [7]}], "patterns[0]"),
        ([{"action": "produce", "patterns": ["a"]}] * 65, "at most 64"),
        (
            [{"action": "produce", "patterns": [f"t{i}" for i in range(257)]}],
            "at most 256 in all",
        ),
    ],
)
def test_parse_grants_names_what_is_wrong(value, message):
    with pytest.raises(InvalidArgument) as err:
        parse_grants(value)
    assert message in str(err.value)
