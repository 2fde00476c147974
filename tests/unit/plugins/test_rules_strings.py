from __future__ import annotations

import narad_rules_strings
from narad.compatibility import Change
from tests.compatcheck import check_texts


def test_claims_its_keywords():
    assert set(narad_rules_strings.narad_compatibility_rules()) == {
        "pattern",
        "format",
    }


def test_pattern_changed_and_format_added_are_named():
    [problem] = check_texts('{"pattern":"a"}', '{"pattern":"b"}')
    assert problem.kind is Change.pattern_changed
    [problem] = check_texts("{}", '{"format":"email"}')
    assert problem.kind is Change.format_added
