"""Soundness of the compatibility check, by property: a change it accepts
keeps every message the previous version accepted valid, except the
rulebook's open-content-model exception (see tests/compatfuzz.py).

The suite runs a small budget; ``NARAD_FUZZ_COMPAT_EXAMPLES=100000`` runs a
long one, and ``bench/fuzz_compat.py`` runs for as long as asked.
"""

from __future__ import annotations

import os

from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st

from tests.compatfuzz import RandomChooser
from tests.compatfuzz import Tally
from tests.compatfuzz import trial

EXAMPLES = int(os.environ.get("NARAD_FUZZ_COMPAT_EXAMPLES", "2000"))


@settings(max_examples=EXAMPLES, deadline=None, database=None)
@given(st.integers(min_value=0, max_value=2**32))
def test_accepted_changes_keep_old_messages_valid(seed):
    # A seeded generator, not hypothesis's own draws: these spread trials
    # over the whole vocabulary, where drawn choices crowd at the simplest
    # schemas. A failure names its seed: bench/fuzz_compat.py --seed replays it.
    trial(RandomChooser(seed), Tally())
