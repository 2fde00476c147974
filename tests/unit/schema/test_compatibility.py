from __future__ import annotations

import pytest

from narad.compatibility import ABSENT
from narad.compatibility import Change
from narad.compatibility import Violation
from narad.compatibility import changes_freely
from narad.compatibility import extension
from narad.compatibility import json_equal
from narad.compatibility import show
from narad.schema.compatibility.engine import MAX_DEPTH
from narad.schema.compatibility.engine import annotations_only_change
from narad.schema.compatibility.engine import no_change
from tests.cases.compatibility import CASES
from tests.compatcheck import DEFAULT
from tests.compatcheck import RULES
from tests.compatcheck import check_texts
from tests.compatcheck import parse


@pytest.mark.parametrize(
    ("old", "new", "compatible", "words"),
    [case[1:] for case in CASES],
    ids=[case[0] for case in CASES],
)
def test_case_table(old, new, compatible, words):
    found = check_texts(old, new)
    if compatible:
        assert found == []
    else:
        assert found, "refused nothing"
        assert any(words in str(problem) for problem in found), found


def test_case_names_are_unique():
    names = [case[0] for case in CASES]
    assert len(names) == len(set(names))


def test_message_names_keyword_and_location():
    [problem] = check_texts(
        '{"properties":{"qty":{"type":"integer"}}}',
        '{"properties":{"qty":{"type":"string"}}}',
    )
    assert problem.keyword == "type"
    assert problem.pointer == "/properties/qty"
    assert problem.kind is Change.type_narrowed
    assert str(problem) == 'at /properties/qty: type "integer" no longer allowed'


def test_root_location_reads_the_root():
    [problem] = check_texts('{"type":"integer"}', '{"type":"string"}')
    assert str(problem) == 'at the root: type "integer" no longer allowed'


def test_pointer_tokens_are_escaped():
    [problem] = check_texts(
        '{"properties":{"a/b~c":{"type":"integer"}}}',
        '{"properties":{"a/b~c":{"type":"string"}}}',
    )
    assert problem.pointer == "/properties/a~1b~0c"


def test_every_problem_is_reported_once():
    found = check_texts(
        '{"type":"integer","maximum":5,"required":["a"]}',
        '{"type":"string","maximum":4,"required":["a","b"]}',
    )
    assert [p.keyword for p in found] == ["type", "maximum", "required"]


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        ('{"a":10}', '{"a":1e1}', True),
        ('{"a":1,"b":2}', '{"b":2,"a":1}', True),
        ('{"a":true}', '{"a":1}', False),
        ('{"a":[1,2]}', '{"a":[2,1]}', False),
    ],
)
def test_json_equal(old, new, expected):
    assert json_equal(parse(old), parse(new)) is expected


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        ('{"type":"string"}', '{"type":"string"}', True),
        ('{"title":"a"}', '{"title":"b","description":"c"}', True),
        (
            '{"items":{"examples":[1],"readOnly":true}}',
            '{"items":{"$comment":"x","deprecated":true,"writeOnly":true}}',
            True,
        ),
        (
            '{"properties":{"a":{"default":1}},"anyOf":[{"title":"x"}]}',
            '{"properties":{"a":{"default":2}},"anyOf":[{"title":"y"}]}',
            True,
        ),
        ('{"$defs":{"a":{"title":"x"}}}', '{"$defs":{"a":{"title":"y"}}}', True),
        (
            '{"properties":{"description":{"type":"string"}}}',
            '{"properties":{}}',
            False,
        ),
        ('{"enum":[{"title":"a"}]}', '{"enum":[{"title":"b"}]}', False),
        ('{"title":"a","type":"string"}', '{"title":"b","type":"null"}', False),
        ('{"x-doc":"a"}', '{"x-doc":"b"}', False),
        # true accepts what {} does, but it is another JSON value, not an
        # annotation: {} becoming true is a change (issue 50), and so is
        # true becoming {} with annotations, at the root or nested.
        ("{}", "true", False),
        ("true", "{}", False),
        ("true", '{"title":"x"}', False),
        (
            '{"properties":{"a":true}}',
            '{"properties":{"a":{"description":"d"}}}',
            False,
        ),
        ('{"properties":{"a":{}}}', '{"properties":{"a":{"title":"t"}}}', True),
        ('{"items":true}', '{"items":true,"description":"d"}', True),
        ('{"properties":{"a":true}}', '{"properties":{"a":false}}', False),
        ('{"const":true}', '{"const":{}}', False),  # data, not a subschema
    ],
)
def test_annotations_only_change(old, new, expected):
    assert annotations_only_change(parse(old), parse(new), draft=DEFAULT) is expected


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        # The same JSON value: formatting, key order, number spelling aside.
        ('{"type":"object","maximum":10}', '{ "maximum" : 1e1, "type":"object"}', True),
        ('{"maximum":10}', '{"maximum":10.0}', True),
        ('{"maximum":10}', '{"maximum":100e-1}', True),
        ('{"enum":[1,2]}', '{"enum":[1.0,2e0]}', True),
        ("true", "true", True),
        ("{}", "{ }", True),
        # Another JSON value, though it accepts the same (issue 50).
        ("{}", "true", False),
        ("true", "{}", False),
        ('{"properties":{"a":{}}}', '{"properties":{"a":true}}', False),
        ('{"const":1}', '{"const":true}', False),
        ('{"enum":[1,2]}', '{"enum":[2,1]}', False),
        ('{"maximum":10}', '{"maximum":10.000000000000001}', False),
        # Annotations alone.
        ('{"title":"a"}', '{"title":"b"}', True),
        ("{}", '{"description":"d"}', True),
    ],
)
def test_no_change_is_the_same_json_value_or_annotations_alone(old, new, expected):
    assert no_change(parse(old), parse(new), draft=DEFAULT) is expected


def test_keyword_without_rule_may_stay_or_go_only():
    rules = {k: v for k, v in RULES.items() if k != "maxLength"}
    [problem] = check_texts('{"maxLength":3}', '{"maxLength":4}', rules)
    assert (problem.keyword, problem.message) == ("maxLength", "maxLength changed")
    assert check_texts('{"maxLength":3}', "{}", rules) == []
    assert check_texts('{"maxLength":3}', '{"maxLength":3.0}', rules) == []


def test_rules_see_absent_keywords_and_the_context():
    seen = []

    def spy(old, new, ctx):
        seen.append((old, new, ctx.keyword, ctx.pointer, dict(ctx.new)))
        return ()

    rules = {**RULES, "minimum": spy}
    check_texts('{"items":{"minimum":1}}', '{"items":{"maximum":2}}', rules, first=True)
    assert seen == [(1, ABSENT, "minimum", "/items", {"maximum": 2})]
    # A full report runs the rules of a refused pair once more, with every
    # verdict final: they see the same.
    seen.clear()
    check_texts('{"items":{"minimum":1}}', '{"items":{"maximum":2}}', rules)
    assert seen == [(1, ABSENT, "minimum", "/items", {"maximum": 2})] * 2


def test_extension_rules_apply_whatever_the_draft():
    @extension
    def fixed(old, new, ctx):
        if old != new:
            yield Violation(Change.keyword_changed, "x-k changed")

    rules = {**RULES, "x-k": fixed}
    assert check_texts('{"x-k":1}', '{"x-k":2}', rules)[0].message == "x-k changed"
    assert check_texts('{"x-k":1}', '{"x-k":2}') == []


def test_a_keyword_that_changes_freely_sits_beside_ref():
    rules = {**RULES, "x-doc": extension(changes_freely)}
    old = '{"$defs":{"a":{"type":"integer"}},"items":{"$ref":"#/$defs/a","x-doc":1}}'
    assert check_texts(old, '{"items":{"type":"number"}}', rules) == []


def test_ref_with_constraining_siblings_may_only_stay_identical():
    old = '{"$defs":{"a":{"type":"integer"}},"$ref":"#/$defs/a","minimum":1}'
    # Even a widening target is refused: the subschema is outside what the
    # check reasons about. One violation names it, at the subschema.
    [problem] = check_texts(old, old.replace('"integer"', '"number"'))
    assert (problem.kind, problem.keyword, problem.pointer) == (
        Change.ref_changed,
        "$ref",
        "",
    )
    [problem] = check_texts('{"minimum":1}', old)
    assert problem.message == '$ref "#/$defs/a" added'
    assert check_texts(old, old.replace('"minimum"', '"title":"t","minimum"')) == []


def test_ref_siblings_are_ignored_up_to_draft_07():
    d7 = '"$schema":"http://json-schema.org/draft-07/schema#",'
    old = "{" + d7 + '"definitions":{"a":{"type":"integer"}},'
    old += '"properties":{"q":{"$ref":"#/definitions/a","maxLength":1}}}'
    new = "{" + d7 + '"properties":{"q":{"type":"number"}}}'
    assert check_texts(old, new) == []


def test_anchor_refs_are_resolved():
    old = '{"$defs":{"a":{"$anchor":"q","type":"integer"}},"items":{"$ref":"#q"}}'
    assert check_texts(old, old.replace('"integer"', '"number"')) == []
    assert check_texts(old, old.replace('"integer"', '"string"'))


def test_refs_in_nested_resources_resolve_against_them():
    old = (
        '{"properties":{"a":{"$id":"http://e.com/a","$defs":{"t":{"type":"integer"}},'
        '"$ref":"#/$defs/t"}},"$defs":{"t":{"type":"string"}}}'
    )
    assert check_texts(old, old.replace('"integer"', '"number"')) == []
    assert check_texts(old, old.replace('"integer"', '"null"'))


def test_recursion_through_two_definitions():
    old = (
        '{"$defs":{"a":{"properties":{"b":{"$ref":"#/$defs/b"}}},'
        '"b":{"properties":{"a":{"$ref":"#/$defs/a"},"v":{"maximum":5}}}},'
        '"$ref":"#/$defs/a"}'
    )
    assert check_texts(old, old.replace('"maximum":5', '"maximum":6')) == []
    [problem] = check_texts(old, old.replace('"maximum":5', '"maximum":4'))
    assert str(problem) == "at /$defs/b/properties/v: maximum lowered from 5 to 4"


def test_a_trial_under_a_recursive_assumption_is_not_reused_wrongly():
    # anyOf tries branch pairs; a pair judged compatible only by assuming an
    # enclosing pair that then fails must not be remembered as compatible.
    old = (
        '{"$defs":{"n":{"anyOf":[{"type":"null"},'
        '{"properties":{"next":{"$ref":"#/$defs/n"},"v":{"type":"integer"}}}]}},'
        '"properties":{"x":{"$ref":"#/$defs/n"},"y":{"$ref":"#/$defs/n"}}}'
    )
    new = old.replace('"v":{"type":"integer"}', '"v":{"type":"string"}')
    assert check_texts(old, new)


def test_deep_changed_ref_chains_are_refused_not_crashed():
    n = MAX_DEPTH + 20
    defs = ",".join(
        f'"d{i}":{{"properties":{{"x":{{"$ref":"#/$defs/d{i + 1}"}}}}}}'
        for i in range(n)
    )
    old = f'{{"$defs":{{{defs},"d{n}":{{"type":"integer"}}}},"$ref":"#/$defs/d0"}}'
    found = check_texts(old, old.replace('"integer"', '"string"'))
    assert [p.kind for p in found] == [Change.too_deep]
    assert check_texts(old, old.replace('"integer"', '"number"'))


def test_unchanged_deep_chain_with_an_annotation_change_is_fine():
    n = 2000
    defs = ",".join(
        f'"d{i}":{{"properties":{{"x":{{"$ref":"#/$defs/d{i + 1}"}}}}}}'
        for i in range(n)
    )
    old = f'{{"$defs":{{{defs},"d{n}":{{"type":"integer"}}}},"$ref":"#/$defs/d0"}}'
    assert check_texts(old, old.replace('"$defs"', '"title":"t","$defs"')) == []


def test_show_keeps_numbers_as_written_and_cuts_long_values():
    assert show(parse("[1e1,10,1.50]")) == "[1E+1,10,1.50]"
    assert show("x" * 100) == '"' + "x" * 56 + "..."


@pytest.mark.parametrize(
    ("old", "new"),
    [case[1:3] for case in CASES if not case[3]],
    ids=[case[0] for case in CASES if not case[3]],
)
def test_stopping_at_the_first_gives_the_first_of_the_full_report(old, new):
    assert check_texts(old, new, first=True) == check_texts(old, new)[:1]


def test_a_rule_reports_violations_as_data_and_may_name_its_own_kinds():
    @extension
    def own(old, new, ctx):
        yield Violation("unit_changed", "x-k changed")
        yield Violation("moved", "x-k moved", keyword="x-other", pointer="/elsewhere")

    rules = {**RULES, "x-k": own}
    found = check_texts('{"items":{"x-k":1}}', '{"items":{"x-k":2}}', rules)
    assert found == [
        Violation("unit_changed", "x-k changed", "x-k", "/items"),
        Violation("moved", "x-k moved", "x-other", "/elsewhere"),
    ]


def test_rules_see_what_else_applies_to_the_value():
    seen = []

    def spy(old, new, ctx):
        seen.append((ctx.pointer, [show(s) for s in ctx.old_applying]))
        return ()

    rules = {**RULES, "maxLength": spy}
    old = '{"allOf":[{"items":{"maxLength":1}}],"items":{"maxLength":1,"title":"x"}}'
    check_texts(old, old.replace('{"maxLength":1}', '{"maxLength":2}'), rules)
    # The branch's items, and the root's that reach the same elements.
    assert seen == [
        ("/allOf/0/items", ['{"maxLength":1}', '{"maxLength":1,"title":"x"}'])
    ]


def test_a_refused_candidate_forgets_what_leant_on_it():
    # Issue 19, point 5, minimised: a success remembered while an outer pair
    # was open, and reused from the memo, must not outlive that pair's failure.
    old = (
        '{"anyOf":[{"$ref":"#/$defs/a"},{}],"properties":{"k":{"$ref":"#/$defs/c"}},'
        '"$defs":{"a":{"items":{"$ref":"#/$defs/b"},"properties":{"z":'
        '{"$ref":"#/$defs/c"}},"maxLength":5},"b":{"items":{"$ref":"#/$defs/a"}},'
        '"c":{"items":{"$ref":"#/$defs/b"}}}}'
    )
    found = check_texts(old, old.replace('"maxLength":5', '"maxLength":3'))
    assert [str(p) for p in found] == ["at /$defs/a: maxLength lowered from 5 to 3"]


def test_a_dynamic_scope_walk_happens_only_where_the_scope_decides():
    # One declaration of the anchor: the target is static, no second walk.
    old = (
        '{"$defs":{"t":{"$dynamicAnchor":"t","type":"string"}},'
        '"properties":{"a":{"$dynamicRef":"#t"},"b":{"type":"string"}}}'
    )
    assert check_texts(old, old.replace('"b":{"type":"string"}', '"b":{}')) == []
