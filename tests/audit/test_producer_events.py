"""The one ordered pass per producer (``reconstruct.producer_events``) against a plain,
row-by-row reading of the same batches and markers in offset order."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import pytest

from tests.conftest import SampleScan

pytestmark = pytest.mark.spark

COMPACTED = ("__consumer_offsets", "__transaction_state")
TOLERANCE_MS = 1_000


def _expected(rows: list[dict[str, Any]]) -> dict[tuple[Any, ...], dict[str, Any]]:
    """Walk each producer's rows on a partition in offset order, keeping what came before."""
    by_producer: dict[tuple[Any, ...], list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        by_producer[(row["topic"], row["partition"], row["producer_id"])].append(row)
    out = {}
    for key, events in by_producer.items():
        events.sort(key=lambda r: r["offset"])
        last_txn_ts = next((r["max_timestamp"] for r in reversed(events) if r["is_transactional"]), None)
        markers = 0
        marker = seq = None
        max_data = max_marker = max_coord = None
        for r in events:
            with_seq = (not r["is_marker"] and r["base_sequence"] is not None and r["base_sequence"] >= 0
                        and r["topic"] not in COMPACTED)
            late = (not r["is_marker"] and r["is_transactional"] and marker is not None
                    and (marker["max_timestamp"] - r["max_timestamp"] > TOLERANCE_MS or r["epoch"] < marker["epoch"]))
            out[(*key, r["offset"], r["is_marker"])] = {
                "txn_seq": markers,
                "prev_marker_offset": marker and marker["offset"],
                "prev_marker_type": marker and marker["marker_type"],
                "prev_marker_timestamp": marker and marker["max_timestamp"],
                "prev_marker_epoch": marker and marker["epoch"],
                "prev_seq_epoch": seq["epoch"] if with_seq and seq else None,
                "prev_seq_last_sequence": seq["last_sequence"] if with_seq and seq else None,
                "prev_seq_last_offset": seq["last_offset"] if with_seq and seq else None,
                "max_data_epoch_before": max_data,
                "max_marker_epoch_before": max_marker,
                "max_coordinator_epoch_before": max_coord,
                "producer_last_timestamp": last_txn_ts,
                "is_late": late,
            }
            if r["is_marker"]:
                markers += 1
                marker = r
                max_marker = r["epoch"] if max_marker is None else max(max_marker, r["epoch"])
                if r["coordinator_epoch"] is not None:
                    max_coord = r["coordinator_epoch"] if max_coord is None else max(max_coord, r["coordinator_epoch"])
            else:
                max_data = r["epoch"] if max_data is None else max(max_data, r["epoch"])
                if with_seq:
                    seq = r
    return out


def test_ordered_pass_equals_a_row_by_row_walk(spark: Any, sample_scan: SampleScan) -> None:
    from pyspark.sql import functions as F

    from txn_audit.reconstruct import chosen_replicas, on_replicas, producer_events
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
    expected = _expected([r.asDict() for r in inputs.collect()])
    fields = list(next(iter(expected.values())))
    got = {(r["topic"], r["partition"], r["producer_id"], r["offset"], r["is_marker"]): {f: r[f] for f in fields}
           for r in computed.collect()}
    assert got == expected
    # the walk saw every producer row: data batches with a producer id, and every marker
    data_rows = batches.where(~F.col("is_control") & (F.col("producer_id") >= 0)).count()
    assert len(expected) == data_rows + markers.count()
    # and the sample has what the rules look for: several transactions, late rows, sequences
    assert max(v["txn_seq"] for v in expected.values()) > 1
    assert any(v["is_late"] for v in expected.values())
    assert any(v["prev_seq_epoch"] is not None for v in expected.values())
