"""Errors are named classes carrying data; one table gives their status."""

from __future__ import annotations

import inspect

import pytest

from narad import errors
from narad.app import STATUS
from narad.app import status_of
from narad.compatibility import Violation
from narad.errors import ClusterBudgetExceeded
from narad.errors import IncompatibleSchema
from narad.errors import InvalidPayload
from narad.errors import NaradError
from narad.errors import PartitionOutOfRange
from narad.errors import TopicBudgetExceeded
from narad.schema.modes import Direction
from narad.schema.modes import Finding

REFUSALS = [
    cls
    for _, cls in inspect.getmembers(errors, inspect.isclass)
    if issubclass(cls, NaradError) and cls is not NaradError
]


@pytest.mark.parametrize("cls", REFUSALS, ids=lambda cls: cls.__name__)
def test_every_refusal_has_a_status_in_the_one_table(cls):
    assert any(base in STATUS for base in cls.__mro__), cls


def test_statuses_by_family():
    assert status_of(TopicBudgetExceeded("t", 5, 4)) == 409
    assert status_of(PartitionOutOfRange("t", 3, 2)) == 400
    assert status_of(errors.LeaseGone()) == 410
    assert status_of(errors.StorageError("down")) == 503
    with pytest.raises(LookupError):
        status_of(ValueError())


def test_budget_errors_carry_their_figures():
    over = TopicBudgetExceeded("orders", stored=5, limit=4)
    assert (over.topic, over.stored, over.limit) == ("orders", 5, 4)
    assert "already over the budget" in str(over)
    assert "already over" not in str(TopicBudgetExceeded("orders", 3, 4))
    cluster = ClusterBudgetExceeded(stored=10, limit=8)
    assert (cluster.stored, cluster.limit) == (10, 8)
    assert str(cluster).startswith("schema: cluster budget exceeded: the cluster")


def test_incompatible_schema_keeps_every_violation_and_names_the_first_eight():
    findings = [
        Finding(Violation("k", f"change {i}"), 3, Direction.BACKWARD) for i in range(10)
    ]
    error = IncompatibleSchema(findings)
    assert len(error.findings) == 10
    assert str(error).startswith(
        "invalid argument: schema: incompatible with version 3: at the root: "
    )
    assert "change 7" in str(error)
    assert "change 8" not in str(error)


def test_a_batch_entry_is_named_without_rewriting_the_message():
    error = InvalidPayload("payload is not one JSON text: empty")
    assert str(error) == "invalid argument: payload is not one JSON text: empty"
    assert str(error.at_entry(4)) == (
        "invalid argument: messages[4]: payload is not one JSON text: empty"
    )
    assert error.detail == "payload is not one JSON text: empty"
