"""The one ordered pass per producer (``reconstruct.producer_events``) against a plain,
row-by-row reading of the same batches and markers in offset order."""

from __future__ import annotations

from typing import Any

import pytest

from tests.audit.producer_walk import TOLERANCE_MS, walk
from tests.conftest import SampleScan

pytestmark = pytest.mark.spark


def test_ordered_pass_equals_a_row_by_row_walk(spark: Any, sample_scan: SampleScan) -> None:
    from pyspark.sql import functions as F

    from txn_audit.reconstruct import chosen_replicas, on_replicas, producer_events, txn_events
    from txn_audit.reconstruct.transactions import producer_last_writes
    from txn_audit.schemas import RAW_TABLES
    from txn_audit.tables import load_tables

    raw = load_tables(spark, sample_scan.out / "tables", RAW_TABLES)
    replicas = chosen_replicas(raw["partition_offsets"])
    batches, markers = on_replicas(raw["batches"], replicas), on_replicas(raw["control_markers"], replicas)
    computed = producer_events(batches, markers, late_tolerance_ms=TOLERANCE_MS)
    inputs = computed.select(
        "topic", "partition", "producer_id", "offset", "is_marker", "is_transactional", "epoch", "max_timestamp",
        "marker_type", "coordinator_epoch", "base_sequence", "last_sequence", "last_offset",
    )
    expected, last_writes = walk([r.asDict() for r in inputs.collect()])
    fields = list(next(iter(expected.values())))
    got = {(r["topic"], r["partition"], r["producer_id"], r["offset"], r["is_marker"]): {f: r[f] for f in fields}
           for r in computed.collect()}
    assert got == expected
    writes = producer_last_writes(txn_events(computed)).collect()
    assert {(r["topic"], r["partition"], r["producer_id"]): r["producer_last_timestamp"] for r in writes} == last_writes
    # the walk saw every producer row: data batches with a producer id, and every marker
    data_rows = batches.where(~F.col("is_control") & (F.col("producer_id") >= 0)).count()
    assert len(expected) == data_rows + markers.count()
    # and the sample has what the rules look for: several transactions, late rows, sequences
    assert max(v["txn_seq"] for v in expected.values()) > 1
    assert any(v["is_late"] for v in expected.values())
    assert any(v["prev_seq_epoch"] is not None for v in expected.values())
