"""Soundness of the compatibility check, by property: a change it accepts
keeps every message the previous version accepted valid, except the
rulebook's open-content-model exception (see tests/compatfuzz.py).

The suite runs a small budget; ``NARAD_FUZZ_COMPAT_EXAMPLES=100000`` runs a
long one, and ``bench/fuzz_compat.py`` runs for as long as asked.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st

from tests.compatfuzz import Tally
from tests.compatfuzz import trial

EXAMPLES = int(os.environ.get("NARAD_FUZZ_COMPAT_EXAMPLES", "250"))


class DataChooser:
    """Choices drawn by hypothesis, so that a failure shrinks."""

    def __init__(self, data: st.DataObject) -> None:
        self.data = data

    def integer(self, low: int, high: int) -> int:
        return self.data.draw(st.integers(low, high))


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(st.data())
def test_accepted_changes_keep_old_messages_valid(data):
    trial(DataChooser(data), Tally())
