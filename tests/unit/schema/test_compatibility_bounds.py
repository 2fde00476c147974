"""The compatibility check's work is polynomial in the schemas, a full report
(a dry run's) included, and it gives up at its deadline (issue 50, item 9).

Work is counted in rule calls, not timed: a pair of recursive schemas whose
full report took 5.7 s (and one of 489 bytes, 47 s) doubled its work at every
level of recursion, as each pair passed up every copy of what the pairs below
it found, and forgot and judged again every success that leant on a refused
pair. Families of generated schemas that grow show the work now grows as a
polynomial: doubling a family's size multiplies it by a bounded factor.
"""

from __future__ import annotations

import functools
import itertools
import json
import time
from typing import Any

import pytest

from narad.schema.compatibility.engine import MAX_CONTEXTS
from narad.schema.compatibility.engine import check
from narad.schema.deadline import CheckPastDeadline
from narad.schema.deadline import current
from narad.schema.deadline import run_within
from tests.compatcheck import DEFAULT
from tests.compatcheck import RULES
from tests.compatcheck import parse

# The issue's pair: the new version adds "type": "array" to $defs/b.
ISSUE_OLD = (
    '{"allOf":[{"$ref":"#/$defs/c"},{"$ref":"#/$defs/a"}],"$defs":{"a":{"items":'
    '{"$ref":"#/$defs/b"},"additionalProperties":{"$ref":"#/$defs/b"}},"b":{"prop'
    'erties":{"q":{"$ref":"#/$defs/a"}},"additionalProperties":{"$ref":"#/$defs/c'
    '"},"items":{"$ref":"#/$defs/a"}},"c":{"additionalProperties":{"$ref":"#/$def'
    's/a"},"items":{"$ref":"#/$defs/c"},"properties":{"w":{"$ref":"#/$defs/a"}}}}}'
)


def issue_new() -> str:
    new = json.loads(ISSUE_OLD)
    new["$defs"]["b"]["type"] = "array"
    return json.dumps(new)


def counted(first: bool, old: Any, new: Any) -> tuple[int, list[Any]]:
    """How many rule calls the check of ``old`` -> ``new`` makes, and what it
    finds."""
    calls = 0

    def count(rule: Any) -> Any:
        @functools.wraps(rule)  # keeps the extension / document keyword marks
        def counting(old: Any, new: Any, ctx: Any) -> Any:
            nonlocal calls
            calls += 1
            return rule(old, new, ctx)

        return counting

    rules = {keyword: count(rule) for keyword, rule in RULES.items()}
    found = check(
        parse(old if isinstance(old, str) else json.dumps(old)),
        parse(new if isinstance(new, str) else json.dumps(new)),
        old_draft=DEFAULT,
        new_draft=DEFAULT,
        rules=rules,
        first=first,
    )
    return calls, found


def ref(i: int) -> dict[str, str]:
    return {"$ref": f"#/$defs/d{i}"}


def ring(n: int) -> dict[str, Any]:
    """The issue's shape, grown: ``n`` definitions, each reaching the next
    through items and properties and the one after through
    additionalProperties, and a root that is the allOf of two of them."""
    defs = {
        f"d{i}": {
            "items": ref((i + 1) % n),
            "additionalProperties": ref((i + 2) % n),
            "properties": {"q": ref((i + 1) % n)},
        }
        for i in range(n)
    }
    return {"allOf": [ref(0), ref(1)], "$defs": defs}


def subsets(n: int) -> dict[str, Any]:
    """A subset construction: after a path of names, the set of definitions
    applying to the value is every subset of ``n`` (an automaton for "the
    n-th name from the end is a"), so the pairs a check meets, keyed by what
    applies to their value, grow as 2**n unless their number is bounded."""
    defs: dict[str, Any] = {
        "d0": {"properties": {"a": {"allOf": [ref(0), ref(1)]}, "b": ref(0)}}
    }
    for i in range(1, n):
        defs[f"d{i}"] = {"properties": {"a": ref(i + 1), "b": ref(i + 1)}}
    defs[f"d{n}"] = {
        "type": ["string", "object"],
        "properties": {"z": {"type": "integer"}},
    }
    return {"$ref": "#/$defs/d0", "$defs": defs}


def narrowed_ring(n: int) -> tuple[Any, Any]:
    old = ring(n)
    new = json.loads(json.dumps(old))
    new["$defs"][f"d{n // 2}"]["type"] = "array"
    return old, new


def subsets_changed(n: int, z: str) -> tuple[Any, Any]:
    old = subsets(n)
    new = json.loads(json.dumps(old))
    new["$defs"][f"d{n}"]["properties"]["z"]["type"] = z
    return old, new


def test_the_issue_pair_reports_each_violation_once_with_little_work():
    first_calls, first = counted(True, ISSUE_OLD, issue_new())
    calls, found = counted(False, ISSUE_OLD, issue_new())
    assert [str(v) for v in found] == [
        "at the root: allOf branch 0 not implied by any previous branch",
        "at the root: allOf branch 1 not implied by any previous branch",
    ]
    assert first == found[:1]
    # Hundreds of rule calls, not the millions of copies it made before.
    assert first_calls < 100
    assert calls < 1000


@pytest.mark.parametrize(
    ("family", "sizes"),
    [
        (narrowed_ring, (3, 6, 12, 24)),
        (lambda n: subsets_changed(n, "string"), (4, 8, 16)),  # narrowed
        (lambda n: subsets_changed(n, "number"), (4, 8, 16)),  # widened
    ],
    ids=["ring narrowed", "subsets narrowed", "subsets widened"],
)
@pytest.mark.parametrize("first", [True, False], ids=["first", "full report"])
def test_work_grows_as_a_polynomial_of_the_schemas(family, sizes, first):
    work = []
    for n in sizes:
        old, new = family(n)
        calls, found = counted(first, old, new)
        _, full = counted(False, old, new)
        assert found == (full[:1] if first else full)
        work.append(calls)
    # Each doubling of the family multiplies the work by at most 8 (a cubic
    # bound; these grow about linearly and quadratically): exponential work
    # multiplies it by more at every step, ever more.
    for smaller, larger in itertools.pairwise(work):
        assert larger <= 8 * smaller, work


def test_a_widening_reached_through_many_subsets_is_still_accepted():
    # 16 levels of subsets: thousands of distinct sets of applying subschemas;
    # past MAX_CONTEXTS per pair they are judged fail-closed, which here
    # still finds the widening compatible.
    assert MAX_CONTEXTS >= 2
    _, found = counted(False, *subsets_changed(16, "number"))
    assert found == []


def test_past_its_deadline_the_check_gives_up():
    old, new = narrowed_ring(24)
    with pytest.raises(CheckPastDeadline) as raised:
        check(
            parse(json.dumps(old)),
            parse(json.dumps(new)),
            old_draft=DEFAULT,
            new_draft=DEFAULT,
            rules=RULES,
            deadline=time.monotonic() - 1,
        )
    assert "past its deadline" in str(raised.value)


def test_the_deadline_set_on_the_thread_applies():
    old, new = narrowed_ring(24)

    def full_report() -> list[Any]:
        assert current() is not None
        return check(
            parse(json.dumps(old)),
            parse(json.dumps(new)),
            old_draft=DEFAULT,
            new_draft=DEFAULT,
            rules=RULES,
        )

    with pytest.raises(CheckPastDeadline):
        run_within(-1, full_report)
    assert current() is None  # reset afterwards
    assert len(run_within(60, full_report)) == 2


def test_dropping_a_keyword_deep_in_mutual_recursion_is_a_widening():
    # Five definitions referring to one another through items,
    # additionalProperties, allOf and anyOf; the new version drops $defs/d0's
    # items, which can only widen. The engine that forgot every success
    # leaning on a refused pair (and judged them again from elsewhere)
    # refused it: "allOf branch 0 not implied by any previous branch".
    defs = {
        "d0": {
            "items": ref(0),
            "additionalProperties": ref(0),
            "allOf": [ref(2), ref(4)],
        },
        "d1": {
            "items": ref(2),
            "properties": {"q": ref(2), "w": ref(2)},
            "allOf": [ref(0), ref(4)],
        },
        "d2": {
            "items": ref(3),
            "additionalProperties": ref(1),
            "allOf": [ref(1), ref(4)],
            "anyOf": [ref(1), ref(3)],
        },
        "d3": {
            "items": ref(2),
            "additionalProperties": ref(1),
            "properties": {"w": ref(1)},
        },
        "d4": {"items": ref(0), "allOf": [ref(0), ref(2)]},
    }
    old = {"allOf": [ref(0), ref(1)], "$defs": defs}
    new = json.loads(json.dumps(old))
    del new["$defs"]["d0"]["items"]
    assert counted(True, old, new)[1] == []
    assert counted(False, old, new)[1] == []
