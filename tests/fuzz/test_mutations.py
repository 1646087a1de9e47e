"""Every mutation operator against every decoder family (see ``tests.fuzz.targets``).

One test per (target, operator); hypothesis picks the seed and the operator's choices. The
example count comes from the profile in ``tests.fuzz.profiles`` (``ci`` by default, small and
derandomized; ``TXN_AUDIT_FUZZ_PROFILE=long`` for many more). ``make fuzz`` runs the long,
counted variant (``tests.fuzz.run``).
"""

from __future__ import annotations

import pytest
from hypothesis import given, note
from hypothesis import strategies as st

from tests.fuzz.mutations import OPERATORS
from tests.fuzz.profiles import FUZZ
from tests.fuzz.targets import TARGETS, log_seeds
from tests.realcorpus import REALCORPUS, SCENARIOS

CASES = [(target, op) for target in TARGETS for op in OPERATORS]


#: Targets whose seeds are Kafka tools' output, which only the real corpus holds.
CORPUS_ONLY = {"dumplog_text", "transactions_text"}


def test_seeds_are_there() -> None:
    """The sample dump is in the repository: every other target has seeds even without the corpus."""
    for name, target in TARGETS.items():
        assert target.seeds() or (name in CORPUS_ONLY and not SCENARIOS), name
    assert {s.name for s in log_seeds()} >= {"synthetic legacy+codecs", "sample:__transaction_state-1"}


@pytest.mark.parametrize(("target", "operator"), CASES, ids=[f"{t}-{o}" for t, o in CASES])
@FUZZ
@given(data=st.data())
def test_mutation(target: str, operator: str, data: st.DataObject) -> None:
    seeds = TARGETS[target].seeds()
    if not seeds:
        pytest.skip(f"real corpus not found at {REALCORPUS}")
    seed = seeds[data.draw(st.integers(0, len(seeds) - 1), label="seed")]
    note(f"seed {seed.name} ({len(seed.data)} bytes)")
    damaged = OPERATORS[operator](seed.data, lambda lo, hi: data.draw(st.integers(lo, hi)), seed.fields)
    note(f"damaged ({len(damaged)} bytes): {damaged[:96].hex()}")
    TARGETS[target].check(seed, damaged)
