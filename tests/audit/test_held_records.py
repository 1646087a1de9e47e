"""Held records and bytes of partitions whose last stable offset is below the high watermark,
against a plain sum over the batches.

Random partitions each hold committed transactions, plain batches and, on some, a transaction
left open, so that their LSO stops at its first offset and every batch from there to the log end
is held, the one straddling the LSO counted by its offsets from it.
"""

from __future__ import annotations

import importlib
import random
from typing import Any

import pytest

from tests.audit.builders import RawBuilder

pytestmark = pytest.mark.spark

T0 = 1_800_000_000_000
PARTITIONS = [("a", 0), ("a", 1), ("b", 0), ("b", 1)]


def _random_dump(seed: int) -> tuple[RawBuilder, dict[tuple[str, int], tuple[int, int]]]:
    """A dump and, per partition holding records, its (held records, held bytes)."""
    rng = random.Random(seed)
    b = RawBuilder()
    expected = {}
    for topic, partition in PARTITIONS:
        ts = T0
        pid = 10
        left_open = rng.random() < 0.6
        open_at = rng.randint(0, 6) if left_open else -1
        lso = None
        for step in range(8):
            ts += 1
            if step == open_at:  # a transaction never ended, of a producer of its own
                lso = b.batch(topic, partition, pid=1, epoch=0, seq=0, count=rng.randint(1, 4), ts=ts, txn=True)
                continue
            pid += 1
            if rng.random() < 0.5:
                b.batch(topic, partition, pid=pid, epoch=0, seq=0, count=rng.randint(1, 5), ts=ts, txn=True)
                b.marker(topic, partition, pid=pid, epoch=0, kind=rng.choice(["COMMIT", "ABORT"]), ts=ts)
            else:
                b.batch(topic, partition, ts=ts, count=rng.randint(1, 5))
        if lso is not None:
            end = b.next_offset[(topic, partition)]
            data = [r for r in b.rows["batches"] if (r["topic"], r["partition"]) == (topic, partition)
                    and not r["is_control"] and r["last_offset"] >= lso and r["base_offset"] < end]
            expected[(topic, partition)] = (
                sum(min(r["last_offset"], end - 1) - max(r["base_offset"], lso) + 1 for r in data),
                sum(r["size_bytes"] for r in data),
            )
    return b, expected


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("named", [True, False])
def test_held_records_are_summed_over_the_held_range(spark: Any, seed: int, named: bool, tmp_path: Any,
                                                     monkeypatch: Any) -> None:
    """``named``: the held replicas named in a filter that the row groups' statistics answer
    (``stability.held_expression``: the scan reads the raw tables' files with pyarrow);
    otherwise every data batch is read and joined with them."""
    from txn_audit.reconstruct import DerivedOutput, reconstruct
    from txn_audit.tables import load_raw_tables

    stability = importlib.import_module("txn_audit.reconstruct.stability")
    ranges = []
    if not named:
        monkeypatch.setattr(stability, "NAMED_MAX", 0)
    else:
        whole = stability.held_expression

        def spied(held: Any) -> Any:
            ranges.append(len(held))
            return whole(held)

        monkeypatch.setattr(stability, "held_expression", spied)
    b, expected = _random_dump(seed)
    b.write(tmp_path / "tables")
    tables = load_raw_tables(spark, tmp_path / "tables")
    recon = reconstruct(tables, as_of_ms=T0 + 60_000, late_tolerance_ms=1_000, output=DerivedOutput(str(tmp_path)))
    got = {(r["topic"], r["partition"]): (r["held_records"], r["held_bytes"])
           for r in recon.partition_stability.collect() if r["lso_below_hw"]}
    assert got == expected
    assert ranges == ([len(expected)] if named and expected else [])
