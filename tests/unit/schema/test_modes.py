"""Compatibility modes composed over the one engine: the case tables per mode."""

from __future__ import annotations

import pytest

from narad.compatibility import Violation
from narad.compatibility import extension
from narad.schema.compatibility.versions import check as check_versions
from narad.schema.modes import DEFAULT
from narad.schema.modes import MAX_REPORT_BYTES
from narad.schema.modes import MAX_REPORTED
from narad.schema.modes import Direction
from narad.schema.modes import Finding
from narad.schema.modes import Mode
from narad.schema.modes import Report
from tests.cases.compatibility import CASES
from tests.cases.compatibility import MODE_CASES
from tests.cases.compatibility import MODES
from tests.compatcheck import RULES
from tests.compatcheck import draft_of
from tests.compatcheck import parse

NO_CHANGE = {
    "idempotent: key order and whitespace",
    "idempotent: 10 and 1e1",
    "annotations are not a change, wherever a subschema sits",
}


def run(
    mode: str,
    history: list[str],
    new: str,
    *,
    first: bool = False,
    every: bool | None = None,
    rules=RULES,
) -> Report:
    """``new`` checked in ``mode`` against ``history`` (oldest first) as the
    schema service checks it: the latest version, or every one, latest first."""
    mode = Mode(mode)
    docs = [parse(text) for text in history]
    versions = range(len(docs), 0, -1)
    if not (mode.transitive if every is None else every):
        versions = versions[:1]
    proposed = parse(new)
    return check_versions(
        proposed,
        draft_of(proposed),
        ((v, docs[v - 1], draft_of(docs[v - 1])) for v in versions),
        directions=mode.directions,
        rules=rules,
        first=first,
    )


def texts(report: Report) -> list[str]:
    return [str(finding.violation) for finding in report.findings]


def test_modes_name_their_directions_and_depth():
    table = {
        mode: (tuple(d.value for d in mode.directions), mode.transitive)
        for mode in Mode
    }
    assert table == {
        Mode.BACKWARD: (("backward",), False),
        Mode.BACKWARD_TRANSITIVE: (("backward",), True),
        Mode.FORWARD: (("forward",), False),
        Mode.FORWARD_TRANSITIVE: (("forward",), True),
        Mode.FULL: (("backward", "forward"), False),
        Mode.FULL_TRANSITIVE: (("backward", "forward"), True),
        Mode.NONE: ((), False),
    }
    assert tuple(Mode) == MODES
    assert DEFAULT is Mode.BACKWARD


# -- the rulebook's case table in every mode where its answer is defined ------


@pytest.mark.parametrize("mode", ["BACKWARD", "BACKWARD_TRANSITIVE"])
@pytest.mark.parametrize(
    ("old", "new", "compatible", "words"),
    [case[1:] for case in CASES],
    ids=[case[0] for case in CASES],
)
def test_case_table_backward(mode, old, new, compatible, words):
    report = run(mode, [old], new)
    assert report.compatible is compatible, texts(report)
    if not compatible:
        assert any(words in text for text in texts(report)), texts(report)
        assert {(f.version, f.direction) for f in report.findings} == {
            (1, Direction.BACKWARD)
        }


@pytest.mark.parametrize("mode", ["FORWARD", "FORWARD_TRANSITIVE"])
@pytest.mark.parametrize(
    ("old", "new", "compatible", "words"),
    [case[1:] for case in CASES],
    ids=[case[0] for case in CASES],
)
def test_case_table_forward_by_swapping(mode, old, new, compatible, words):
    # Forward: with the versions swapped, the same verdict and the same words,
    # the pointer now into the stored version.
    report = run(mode, [new], old)
    assert report.compatible is compatible, texts(report)
    if not compatible:
        assert any(words in text for text in texts(report)), texts(report)
        assert {f.direction for f in report.findings} == {Direction.FORWARD}


@pytest.mark.parametrize("mode", ["FULL", "FULL_TRANSITIVE"])
@pytest.mark.parametrize(
    ("name", "old", "new", "compatible", "words"),
    [case for case in CASES if not case[3] or case[0] in NO_CHANGE],
    ids=[case[0] for case in CASES if not case[3] or case[0] in NO_CHANGE],
)
def test_case_table_full_both_ways(mode, name, old, new, compatible, words):
    # Defined by the table: a change refused backward is refused by FULL
    # either way round (backward one way, forward the other); no change is
    # accepted either way round.
    one_way, other_way = run(mode, [old], new), run(mode, [new], old)
    assert one_way.compatible is other_way.compatible is compatible
    if not compatible:
        assert any(words in t for t in texts(one_way)), texts(one_way)
        assert any(words in t for t in texts(other_way)), texts(other_way)


@pytest.mark.parametrize(
    ("old", "new"), [case[1:3] for case in CASES], ids=[case[0] for case in CASES]
)
def test_case_table_none_accepts_everything(old, new):
    assert run("NONE", [old], new) == Report()


def test_full_is_both_directions_merged():
    old = '{"type":"integer","maximum":5,"required":["a"]}'
    new = '{"type":"string","maximum":6,"required":["a","b"]}'
    report = run("FULL", [old], new)
    backward, forward = run("BACKWARD", [old], new), run("FORWARD", [old], new)
    assert report.findings == backward.findings + forward.findings
    assert [(f.direction.value, f.violation.keyword) for f in report.findings] == [
        ("backward", "type"),
        ("backward", "required"),
        ("forward", "type"),
        ("forward", "maximum"),
    ]


# -- histories and modes ------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(
    ("history", "new", "refusals"),
    [case[1:] for case in MODE_CASES],
    ids=[case[0] for case in MODE_CASES],
)
def test_mode_case_table(mode, history, new, refusals):
    first = run(mode, history, new, first=True)
    full = run(mode, history, new)
    if mode not in refusals:
        assert first.compatible and full.compatible, texts(full)
        return
    version, direction, words = refusals[mode]
    [finding] = first.findings
    assert (finding.version, finding.direction.value) == (version, direction)
    assert words in str(finding.violation)
    assert full.findings[0] == finding


def test_transitive_walks_the_history_latest_first():
    history = ['{"type":"integer"}', '{"type":"string"}', '{"type":"boolean"}']
    report = run("FULL_TRANSITIVE", history, '{"type":"null"}')
    assert report.checked == (3, 2, 1)
    assert [(f.version, f.direction.value) for f in report.findings] == [
        (3, "backward"),
        (3, "forward"),
        (2, "backward"),
        (2, "forward"),
        (1, "backward"),
        (1, "forward"),
    ]
    # A verdict (a PATCH) stops at the first, checking no further version.
    first = run("FULL_TRANSITIVE", history, '{"type":"null"}', first=True)
    assert (first.checked, len(first.findings)) == ((3,), 1)


def test_a_forward_pointer_points_into_the_stored_version():
    stored = (
        '{"$defs":{"qty":{"type":"integer"}},'
        '"properties":{"qty":{"$ref":"#/$defs/qty"}}}'
    )
    proposed = '{"properties":{"qty":{"type":["integer","string"]}}}'
    [finding] = run("FORWARD", [stored], proposed).findings
    assert finding.violation.pointer == "/$defs/qty"
    assert finding.violation.message == 'type "string" no longer allowed'
    # Backward, the other way round, the same words point into the proposed.
    [back] = run("BACKWARD", [proposed], stored).findings
    assert back.violation == finding.violation


def test_a_finding_says_its_version_and_direction():
    violation = Violation("type_narrowed", 'type "x" no longer allowed', "type", "/a")
    assert str(Finding(violation, 3, Direction.BACKWARD)) == (
        'incompatible with version 3: at /a: type "x" no longer allowed'
    )
    forward = str(Finding(violation, 3, Direction.FORWARD))
    assert forward.startswith("incompatible with version 3 forward (version 3 ")
    assert forward.endswith(': at /a: type "x" no longer allowed')
    assert "read as a change from the new schema to version 3" in forward


def test_a_third_party_rule_works_in_every_mode_unaware_of_modes():
    @extension
    def x_sensitive(old, new, ctx):
        if old is True and new is not True:
            yield Violation("sensitivity_dropped", "x-sensitive dropped")

    rules = {**RULES, "x-sensitive": x_sensitive}
    plain = '{"properties":{"ssn":{"type":"string"}}}'
    marked = '{"properties":{"ssn":{"type":"string","x-sensitive":true}}}'
    # Dropping it narrows backward; adding it is "dropped" read forward.
    for mode, new, history in [
        ("BACKWARD", plain, [marked]),
        ("FORWARD", marked, [plain]),
        ("FULL", plain, [marked]),
        ("FULL", marked, [plain]),
    ]:
        [finding] = run(mode, history, new, rules=rules).findings
        assert finding.violation.keyword == "x-sensitive"
        assert finding.violation.pointer == "/properties/ssn"
    assert run("FORWARD", [marked], plain, rules=rules).compatible
    assert run("NONE", [marked], plain, rules=rules).compatible


# -- the report's bounds ------------------------------------------------------


def _many(count: int, width: int = 1) -> tuple[str, str]:
    names = [f"p{i}".ljust(width, "x") for i in range(count)]
    old = ",".join(f'"{n}":{{"type":"integer"}}' for n in names)
    new = ",".join(f'"{n}":{{"type":"string"}}' for n in names)
    return '{"properties":{' + old + "}}", '{"properties":{' + new + "}}"


def test_a_report_is_cut_at_its_count_and_checks_no_further():
    old, new = _many(MAX_REPORTED + 20)
    report = run("BACKWARD_TRANSITIVE", [old, old], new)
    assert (len(report.findings), report.truncated) == (MAX_REPORTED, True)
    assert report.checked == (2,)
    old, new = _many(MAX_REPORTED)
    whole = run("BACKWARD", [old], new)
    assert (len(whole.findings), whole.truncated) == (MAX_REPORTED, False)


def test_a_report_is_cut_at_its_bytes_but_names_one():
    width = MAX_REPORT_BYTES // 4
    old, new = _many(8, width)
    report = run("BACKWARD", [old], new)
    assert report.truncated and 1 <= len(report.findings) < 8
    size = sum(
        len(f.violation.pointer) + len(f.violation.message) for f in report.findings
    )
    assert size <= MAX_REPORT_BYTES
    huge, huger = _many(1, MAX_REPORT_BYTES * 2)
    one = run("BACKWARD", [huge], huger)
    assert (len(one.findings), one.truncated) == (1, False)
