from __future__ import annotations

import time

import pytest
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st

from narad.schema.patterns import MAX_STEPS_PER_BYTE
from narad.schema.patterns import PatternError
from narad.schema.patterns import check_pattern
from narad.schema.patterns import pattern_cost
from narad.schema.patterns import regex_search

UUID = "[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"


@pytest.mark.parametrize(
    "pattern",
    ["a.{1000}b", r"(?:\B){1000}x", "(?:abc){300}", "(a|aa){0,1000}", "x.{40}"],
)
def test_costly_patterns_are_refused(pattern):
    with pytest.raises(PatternError, match="more than 32 steps per input byte"):
        check_pattern(pattern)


@pytest.mark.parametrize(
    "pattern",
    ["^a.{1000}b", r"^(?:\B){1000}x", "a.{10}b", UUID, "^[a-z]+$", r"\d{3}-\d{4}"],
)
def test_cheap_patterns_are_accepted(pattern):
    check_pattern(pattern)


def test_unanchored_uuid_costs_about_a_dozen():
    assert 6 <= pattern_cost(UUID) <= 16


@pytest.mark.parametrize(
    ("pattern", "words"),
    [
        ("(?=a)b", "lookaround"),
        ("(?!a)b", "lookaround"),
        ("(?<=a)b", "lookaround"),
        (r"(a)\1", "backreference"),
        ("(?P<x>a)(?P=x)", "backreference"),
        ("[a", "not valid RE2 syntax"),
    ],
)
def test_not_re2(pattern, words):
    with pytest.raises(PatternError, match=words):
        check_pattern(pattern)


def test_flags_and_unicode_classes_parse():
    for pattern in [r"(?i)k\pL\p{Greek}[[:alpha:]]", r"\Qa.b\E", "(?<n>a)", "[]a]"]:
        assert pattern_cost(pattern) <= MAX_STEPS_PER_BYTE


_atoms = st.sampled_from(["a", "b", ".", "[a-z]", r"\d", r"\b", "^", "$", "x"])


@st.composite
def _patterns(draw) -> str:
    parts = draw(st.lists(_atoms, min_size=1, max_size=6))
    text = "".join(parts)
    shape = draw(st.sampled_from(["{n}", "{0,n}", "*", "+", "(?:|y)"]))
    count = draw(st.integers(min_value=1, max_value=1000))
    text = "(?:" + text + ")" + shape.replace("n", str(count))
    return draw(st.sampled_from(["", "^"])) + text


@settings(max_examples=60, deadline=None)
@given(_patterns())
def test_estimate_stays_cheap_on_any_pattern(pattern):
    try:
        started = time.perf_counter()
        check_pattern(pattern)
    except PatternError:
        pass
    assert time.perf_counter() - started < 1.0


@pytest.mark.parametrize("pattern", ["\ud800", "^a\udc00+$"])
def test_a_lone_surrogate_is_refused_not_crashed_on(pattern):
    with pytest.raises(PatternError, match="lone surrogate"):
        check_pattern(pattern)


def test_search_matches_a_lone_surrogate_as_one_character():
    assert regex_search("^.$")("\ud800")
    assert not regex_search("^..$")("\ud800")
