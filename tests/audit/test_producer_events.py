"""The one ordered pass per producer (``reconstruct.producer_events``) against a plain,
row-by-row reading of the same batches and markers in offset order."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.audit.builders import rank
from tests.audit.producer_walk import KEY_FIELDS, TOLERANCE_MS, flagged, transactions, walk
from tests.conftest import SampleScan
from tests.kafkacorpus import CORPUS

pytestmark = pytest.mark.spark

REPLICATED = CORPUS / "kafka-4.4.0" / "follower-killed"


def test_ordered_pass_equals_a_row_by_row_walk(spark: Any, sample_scan: SampleScan) -> None:
    """Each task of the pass reads one replica's rows from the tables' files, as written."""
    from txn_audit.reconstruct import chosen_replicas, on_replicas
    from txn_audit.replica_tasks import read_as_is
    from txn_audit.tables import load_raw_tables

    raw = load_raw_tables(spark, sample_scan.out / "tables")
    ranked = rank(raw)
    replicas, keys = chosen_replicas(ranked), ranked.keys(1)
    batch_files, marker_files = raw.files("batches"), raw.files("control_markers")
    batches = on_replicas(raw["batches"], replicas, keys, batch_files)
    markers = on_replicas(raw["control_markers"], replicas, keys, marker_files)
    batch_files, marker_files = read_as_is(batch_files, keys), read_as_is(marker_files, keys)
    expected_events, expected_txns = _pass_equals_walk(batches, markers, batch_files, marker_files)
    # and the sample has what the rules look for: several transactions, late rows, sequence gaps
    assert max(t["txn_seq"] for t in expected_txns) > 1 and any(t["marker_type"] is None for t in expected_txns)
    assert any(v["is_late"] for v in expected_events.values())
    assert any(v["prev_seq_epoch"] is not None for v in expected_events.values())


def test_the_pass_reads_each_rank_of_a_dump_of_several_brokers_from_its_files(spark: Any, tmp_path: Path) -> None:
    """A dump of three real brokers (every partition on several of them): the files ingest
    writes hold several replicas' row groups, so no rank's frames read them as they are; the
    manifests of each rank's rows (``replicas_rows``) still let each task read its replica from
    the files, and the pass equals the walk over that rank's rows."""
    from txn_audit import api
    from txn_audit.reconstruct import on_replicas
    from txn_audit.replica_tasks import read_as_is, replicas_rows
    from txn_audit.tables import load_raw_tables

    api.scan(REPLICATED / "logdirs", tmp_path / "scan", spark=spark, options=api.AuditOptions(progress=False, quality=False, report=False))
    raw = load_raw_tables(spark, tmp_path / "scan" / "tables")
    ranked = rank(raw)
    assert ranked.ranks >= 2
    for each in range(1, ranked.ranks + 1):
        keys = ranked.keys(each)
        tables = {name: raw.files(name) for name in ("batches", "control_markers")}
        assert all(read_as_is(table, keys) is None for table in tables.values())
        batch_files, marker_files = (replicas_rows(table, keys) for table in tables.values())
        assert batch_files.replicas() <= keys and marker_files.replicas() <= keys  # type: ignore[operator]
        batches = on_replicas(raw["batches"], ranked.of_rank(each), keys, tables["batches"])
        markers = on_replicas(raw["control_markers"], ranked.of_rank(each), keys, tables["control_markers"])
        _, expected_txns = _pass_equals_walk(batches, markers, batch_files, marker_files)
        assert expected_txns  # each rank's copies hold transactions


def _pass_equals_walk(batches: Any, markers: Any, batch_files: Any, marker_files: Any) -> tuple[Any, Any]:
    """Assert that the pass over ``batches`` and ``markers`` (through the files of the manifests,
    when given) gives the events and transactions of the walk; those expected rows."""
    from pyspark.sql import functions as F

    from txn_audit.reconstruct import producer_events, producer_pass, transaction_rows
    from txn_audit.reconstruct.transactions import producer_last_writes

    passed = producer_pass(batches, markers, late_tolerance_ms=TOLERANCE_MS, batch_files=batch_files,
                           marker_files=marker_files)
    # the walk's input, read from the tables directly: data batches with a producer id, and markers
    data = batches.where(~F.col("is_control") & (F.col("producer_id") >= 0)).select(
        "topic", "partition", "producer_id", "broker_id", F.col("producer_epoch").alias("epoch"),
        F.col("base_offset").alias("offset"), "last_offset", "record_count", "size_bytes", "first_timestamp",
        "max_timestamp", F.lit(False).alias("is_marker"), "is_transactional", "base_sequence", "last_sequence",
        F.lit(None).cast("string").alias("marker_type"), F.lit(None).cast("int").alias("coordinator_epoch"),
    )
    marks = markers.select(
        "topic", "partition", "producer_id", "broker_id", F.col("producer_epoch").alias("epoch"), "offset",
        F.col("offset").alias("last_offset"), F.lit(1).alias("record_count"), F.lit(78).alias("size_bytes"),
        F.col("timestamp").alias("first_timestamp"), F.col("timestamp").alias("max_timestamp"),
        F.lit(True).alias("is_marker"), F.lit(True).alias("is_transactional"),
        F.lit(None).cast("int").alias("base_sequence"), F.lit(None).cast("int").alias("last_sequence"),
        "marker_type", "coordinator_epoch",
    )
    rows = [r.asDict() for r in data.unionByName(marks).collect()]
    walked, last_writes = walk(rows)
    inputs = {tuple(r[k] for k in KEY_FIELDS): r for r in rows}
    fields = list(next(iter(walked.values())))

    # the rows a rule may flag, each with what the walk saw before it
    expected_events = {key: row for key, row in walked.items() if flagged(inputs[key] | row)}
    got_events = {tuple(r[k] for k in KEY_FIELDS): {f: r[f] for f in fields}
                  for r in producer_events(passed).collect()}
    assert got_events == expected_events
    # one row per transaction, aggregated as the walk groups them
    txns = transaction_rows(passed)
    order = ("topic", "partition", "producer_id", "txn_seq")
    expected_txns = sorted(transactions(rows, walked), key=lambda t: tuple(t[k] for k in order))
    assert [r.asDict() for r in txns.orderBy(*order).collect()] == expected_txns
    writes = producer_last_writes(txns).collect()
    assert {(r["topic"], r["partition"], r["producer_id"]): r["producer_last_timestamp"] for r in writes} == last_writes
    return expected_events, expected_txns
