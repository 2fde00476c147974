"""The official JSON-Schema-Test-Suite, drafts 04 to 2020-12, run as a topic runs it.

Each case's schema is registered
(:func:`~narad.schema.registration.documents.register`) and each test's data
is produced against it through
:meth:`~narad.schema.validation.validator.Validator.validate`, with the
built-in format checkers. Where Narad deliberately ends otherwise, the case
or test is listed in :mod:`tests.unit.schema.suite_expectations`, and it must
end exactly as listed: nothing is skipped.
"""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from narad import jsontext
from narad.errors import InvalidPayload
from narad.errors import InvalidSchema
from narad.plugins import Plugins
from narad.plugins import get_plugin_manager
from narad.schema.registration.documents import register
from narad.schema.validation.validator import Validator
from tests.unit.schema.suite_expectations import DIFFERS
from tests.unit.schema.suite_expectations import REFUSED
from tests.unit.schema.suite_expectations import Refused

SUITE = Path(__file__).parents[2] / "json-schema-test-suite"
DIRECTORIES = {
    "draft4": "04",
    "draft6": "06",
    "draft7": "07",
    "draft2019-09": "2019-09",
    "draft2020-12": "2020-12",
}
PLUGINS = Plugins(get_plugin_manager(load_entry_points=False))
BY_URI, _ = PLUGINS.drafts()
DRAFTS = {draft.name: draft for draft in BY_URI.values()}
FORMATS = PLUGINS.format_checkers()
FILES = sorted(
    path.relative_to(SUITE).as_posix()
    for directory in DIRECTORIES
    for path in (SUITE / directory).rglob("*.json")
)


def _text(value: Any) -> bytes:
    """JSON text for a value parsed by ``jsontext``, numbers as exact as parsed."""
    return _dump(value).encode()


def _dump(value: Any) -> str:
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, int | Decimal):
        return str(value)
    if isinstance(value, list):
        return "[" + ",".join(_dump(item) for item in value) + "]"
    members = (json.dumps(k) + ":" + _dump(v) for k, v in value.items())
    return "{" + ",".join(members) + "}"


def _accepts(validator: Validator, data: Any) -> bool:
    try:
        validator.validate(_text(data))
    except InvalidPayload:
        return False
    return True


def _engine(schema: Any, default: str) -> Validator:
    """The validator on the document as it is, registration bypassed."""
    dialect = schema.get("$schema") if isinstance(schema, dict) else None
    draft = BY_URI.get(dialect, DRAFTS[default])
    return Validator(
        schema, draft=draft, drafts=BY_URI, formats=FORMATS, schema_uri="narad://t"
    )


def _refused_case(case: dict, expected: Refused, default: str) -> list[str]:
    problems: list[str] = []
    if expected.engine == "not run":
        return problems
    try:
        engine = _engine(case["schema"], default)
    except InvalidSchema:
        if expected.engine != "refuses":
            problems.append("the engine refuses it")
        return problems
    if expected.engine == "refuses":
        return ["the engine compiles it"]
    for test in case["tests"]:
        if _accepts(engine, test["data"]) is not test["valid"]:
            problems.append(f"the engine differs on {test['description']!r}")
    return problems


@pytest.mark.parametrize("name", FILES)
def test_suite_file(name):
    default = DIRECTORIES[name.split("/")[0]]
    refused, differs = REFUSED.get(name, {}), DIFFERS.get(name, {})
    problems: list[str] = []
    met: set[Any] = set()
    for case in jsontext.loads((SUITE / name).read_bytes(), max_depth=1000):
        where = case["description"]
        expected = refused.get(where)
        try:
            registered = register(
                _text(case["schema"]), drafts=BY_URI, default_draft=DRAFTS[default]
            )
        except InvalidSchema as exc:
            if expected is None or expected.words not in str(exc):
                problems.append(f"{where!r}: registration refuses it: {exc}")
                continue
            met.add(where)
            problems += [
                f"{where!r}: {p}" for p in _refused_case(case, expected, default)
            ]
            continue
        if expected is not None:
            problems.append(f"{where!r}: registered, yet listed as {expected.why}")
        validator = Validator(
            registered.document,
            draft=registered.draft,
            drafts=BY_URI,
            formats=FORMATS,
            schema_uri="narad://schema/suite/1",
        )
        for test in case["tests"]:
            key = (where, test["description"])
            want = test["valid"] if key not in differs else not test["valid"]
            if _accepts(validator, test["data"]) is not want:
                problems.append(f"{where!r} / {test['description']!r}: not {want}")
            elif key in differs:
                met.add(key)
    stale = (set(refused) | set(differs)) - met
    assert not problems, "\n".join(problems)
    assert not stale, f"listed in suite_expectations but not met: {sorted(stale)}"


def test_every_listed_file_exists():
    assert set(REFUSED) | set(DIFFERS) <= set(FILES)
