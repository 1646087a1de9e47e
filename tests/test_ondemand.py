"""The corpus fixtures' mapping computes only what a selected test asks for, each value once."""

from __future__ import annotations

import pytest

from tests.ondemand import OnDemand


def test_values_are_computed_on_first_lookup_and_kept() -> None:
    calls: list[str] = []

    def compute(key: str) -> int:
        calls.append(key)
        return len(key)

    scans = OnDemand(["4.4.0/healthy", "3.6.2/eos", "2.8.2/late-1"], compute)
    assert calls == [] and len(scans) == 3 and list(scans) == ["4.4.0/healthy", "3.6.2/eos", "2.8.2/late-1"]
    assert "3.6.2/eos" in scans and "9.9.9/none" not in scans and calls == []  # membership computes nothing
    assert scans["3.6.2/eos"] == 9 and scans["3.6.2/eos"] == 9
    assert calls == ["3.6.2/eos"] and scans.computed == ["3.6.2/eos"]
    with pytest.raises(KeyError):
        scans["9.9.9/none"]
    assert calls == ["3.6.2/eos"]
