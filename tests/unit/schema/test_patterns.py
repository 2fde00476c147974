from __future__ import annotations

import pytest
import re2
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st

from narad.caches import BoundedCache
from narad.schema import patterns
from narad.schema.patterns import MAX_STEPS_PER_BYTE
from narad.schema.patterns import PatternError
from narad.schema.patterns import check_pattern
from narad.schema.patterns import compile_pattern
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
    assert pattern_cost(pattern) <= MAX_STEPS_PER_BYTE
    check_pattern(pattern)  # and registration takes it: no PatternError


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
def test_estimate_ends_on_any_pattern(pattern):
    # What it costs is bench/register.py's business, not a test's: here, that
    # the estimate ends, and that registration's verdict is the estimate's.
    try:
        compile_pattern(pattern)
    except PatternError:  # RE2 itself refuses it (its program is too large)
        with pytest.raises(PatternError, match="not valid RE2 syntax"):
            check_pattern(pattern)
        return
    cost = pattern_cost(pattern)
    assert cost >= 1
    if cost > MAX_STEPS_PER_BYTE:
        with pytest.raises(PatternError, match="more than 32 steps per input byte"):
            check_pattern(pattern)
    else:
        check_pattern(pattern)  # accepted: no PatternError


@pytest.mark.parametrize("pattern", ["\ud800", "^a\udc00+$"])
def test_a_lone_surrogate_is_refused_not_crashed_on(pattern):
    with pytest.raises(PatternError, match="lone surrogate"):
        check_pattern(pattern)


def test_search_matches_a_lone_surrogate_as_one_character():
    assert regex_search("^.$")("\ud800")
    assert not regex_search("^..$")("\ud800")


# -- shared compiled patterns ---------------------------------------------------


def test_validators_share_one_compiled_pattern():
    from narad.schema.validation.validator import Validator
    from narad.testing import load_plugins

    drafts, draft = load_plugins().drafts()
    schema = {"properties": {"a": {"pattern": "^shared-[0-9]+$"}}}
    one, two = (
        Validator(schema, draft=draft, drafts=drafts, formats={}, schema_uri=uri)
        for uri in ("narad://schema/a/1", "narad://schema/b/1")
    )
    [first] = [k for n in one.nodes.values() for k in n.keywords if k.name == "pattern"]
    [second] = [
        k for n in two.nodes.values() for k in n.keywords if k.name == "pattern"
    ]
    assert first.search is second.search
    assert patterns.regex_search("^shared-[0-9]+$") is first.search


def test_the_pattern_cache_is_bounded_by_entries_and_bytes(monkeypatch):
    cache = BoundedCache("patterns", max_entries=3, max_bytes=1 << 20)
    monkeypatch.setattr(patterns, "SEARCHES", cache)
    for i in range(5):
        assert patterns.regex_search(f"^p{i}$")(f"p{i}")
    assert list(cache) == ["^p2$", "^p3$", "^p4$"]
    each = cache.nbytes // 3
    cache.resize(max_entries=3, max_bytes=2 * each)
    assert list(cache) == ["^p3$", "^p4$"]


def test_a_pattern_too_large_for_the_validation_budget_still_validates():
    # RE2 compiles \p{L}{100} under its default 8 MiB budget, not under the
    # 1 MiB validation budget: validation falls back to the default.
    big = r"^\p{L}{100}$"
    patterns.check_pattern(big)
    with pytest.raises(re2.error):
        re2.compile(big, patterns._VALIDATION_OPTIONS)
    search = patterns.regex_search(big)
    assert search("é" * 100)
    assert not search("é" * 99)
