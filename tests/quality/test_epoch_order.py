"""Where a producer's epoch goes down in offset order, read from the files by the tasks (no
Spark) and by Spark's grouping and window: the same rows as a plain reading of the rule over
each replica's batches, whatever the files' order, the other replicas in them and the chunks a
replica is grouped in."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from tests.quality.test_replica_order import manifest_of
from tests.quality.test_replica_order import write_files as write_replica_files
from txn_audit.quality.epoch_order import EPOCH_FALLS, FALLS, epoch_falls, falls_over_files
from txn_audit.replica_tasks import reading as reading_module
from txn_audit.replica_tasks.reading import replica_file_items
from txn_audit.schemas import ALL_TABLES, REPLICA_COLUMNS

BATCHES = ALL_TABLES["batches"]
COLUMNS = pa.schema([BATCHES.field(name) for name in
                     (*REPLICA_COLUMNS, "base_offset", "producer_id", "producer_epoch", "magic")])
REPLICAS = [(1, "d1", "t", 0), (1, "d1", "t", 1), (2, "d2", "t", 0), (3, "d3", "u", 3)]
PRODUCERS = EPOCH_FALLS["producer_epoch_falls"]


def batch_rows(seed: int, batches: int = 400) -> list[dict[str, Any]]:
    """Batches of four replicas in offset order, of five producers (one of them -1: no producer)
    whose epoch mostly rises, sometimes falls back by one or more, sometimes repeats an epoch
    seen before; a few are of message format 1."""
    rng = random.Random(seed)
    rows = []
    for broker_id, log_dir, topic, partition in REPLICAS:
        epochs = {producer: rng.randint(0, 3) for producer in (-1, 7, 8, 9, 1_000_000_000_000)}
        for offset in range(batches):
            producer = rng.choice(list(epochs))
            roll = rng.random()
            if roll < 0.2:
                epochs[producer] += 1
            elif roll < 0.25:
                epochs[producer] = max(0, epochs[producer] - rng.randint(1, 3))
            rows.append({"broker_id": broker_id, "log_dir": log_dir, "topic": topic, "partition": partition,
                         "base_offset": offset, "producer_id": producer, "producer_epoch": epochs[producer],
                         "magic": 1 if rng.random() < 0.03 else 2})
    return rows


def spans_of(rows: list[dict[str, Any]]) -> dict[tuple[Any, ...], list[int]]:
    """(replica, producer, epoch) -> [first, last] base offset, of the v2 batches with a producer."""
    spans: dict[tuple[Any, ...], list[int]] = {}
    for r in rows:
        if r["producer_id"] < 0 or r["magic"] != 2:
            continue
        key = (*(r[k] for k in REPLICA_COLUMNS), r["producer_id"], r["producer_epoch"])
        span = spans.setdefault(key, [r["base_offset"], r["base_offset"]])
        span[0], span[1] = min(span[0], r["base_offset"]), max(span[1], r["base_offset"])
    return spans


def by_the_rule(rows: list[dict[str, Any]]) -> set[tuple[Any, ...]]:
    """The falls (``FALLS``' columns) as the rule reads: for each epoch of a producer on a
    replica, the epochs above it; it falls when its last batch lies after the first of theirs."""
    spans = spans_of(rows)
    found = set()
    for (*producer, epoch), (first, last) in spans.items():
        above = [(other_first, -other_epoch) for (*other, other_epoch), (other_first, _) in spans.items()
                 if other == producer and other_epoch > epoch]
        if not above:
            continue
        higher_offset, negated = min(above)  # the lowest first offset; among equals the highest epoch
        if last > higher_offset:
            found.add((*producer, first if first > higher_offset else last, epoch, -negated, higher_offset))
    return found


def write_files(folder: Path, rows: list[dict[str, Any]], seed: int) -> list[str]:
    return write_replica_files(folder, rows, seed, schema=COLUMNS)


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("chunk_rows", [1_000_000, 50, 1])
def test_falls_read_from_files_equal_the_rule(tmp_path: Path, seed: int, chunk_rows: int) -> None:
    rows = batch_rows(seed)
    expected = by_the_rule(rows)
    # the rows hold falls shown at an epoch's first batch and at its last, and higher epochs
    # other than the one just above (FALLS: replica, producer, offset, epoch, higher epoch, its offset)
    spans = spans_of(rows)
    at_first = {e[5] == spans[(*e[:5], e[6])][0] for e in expected}
    assert at_first == {True, False} and any(e[7] > e[6] + 1 for e in expected)
    found = set()
    for item in replica_file_items(manifest_of(write_files(tmp_path, rows, seed))):
        batch = epoch_falls(item, PRODUCERS, chunk_rows=chunk_rows)
        assert batch.schema == FALLS
        found |= {tuple(row.values()) for row in batch.to_pylist()}
    assert found == expected


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("chunk_rows", [1_000_000, 500, 1])
@pytest.mark.parametrize("one_producer", [False, True])
def test_replicas_read_together_have_each_its_own_falls(tmp_path: Path, seed: int, chunk_rows: int,
                                                        one_producer: bool) -> None:
    """A task's replicas filtered and grouped together (``falls_over_files``), all at once or a
    few at a time: each replica's falls, none mixed up with another's (``one_producer``: the
    same producer the last of one replica's and the first of the next's)."""
    rows = [r for r in batch_rows(seed) if not one_producer or r["producer_id"] == 7]
    items = replica_file_items(manifest_of(write_files(tmp_path, rows, seed)))
    batches = list(falls_over_files(iter([pa.RecordBatch.from_pylist(items)]), PRODUCERS, chunk_rows=chunk_rows))
    assert all(batch.schema == FALLS for batch in batches)
    assert {tuple(row.values()) for batch in batches for row in batch.to_pylist()} == by_the_rule(rows)


def test_an_epoch_that_only_rises_has_no_fall(tmp_path: Path) -> None:
    rows = [r | {"producer_epoch": r["base_offset"] // 10} for r in batch_rows(4)]
    items = replica_file_items(manifest_of(write_files(tmp_path, rows, 4)))
    assert not by_the_rule(rows) and all(epoch_falls(item, PRODUCERS).num_rows == 0 for item in items)


@pytest.mark.spark
@pytest.mark.parametrize("reading", ["files", "few files", "window"])
def test_the_epoch_check_reads_the_falls_from_files_or_a_window(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, reading: str
) -> None:
    """``epochs_non_decreasing`` over the falls the tasks find in the files (a read of files
    with their manifest, at least ``TASKS_MIN_ROWS`` rows) or Spark's grouping and window (fewer
    rows, or a frame without a manifest): the rule's rows."""
    from txn_audit.quality import CHECKS, _drop_views, _with_companions
    from txn_audit.schemas import spark_schema

    rows = batch_rows(5)
    files = None
    if reading == "window":
        frame = spark.createDataFrame([tuple(r.values()) for r in rows], spark_schema(COLUMNS))
    else:
        files = manifest_of(write_files(tmp_path, rows, 5))
        frame = spark.read.parquet(str(tmp_path))
        monkeypatch.setattr(reading_module, "TASKS_MIN_ROWS", len(rows) + (reading == "few files"))
    (check,) = [c for c in CHECKS if c.name == "epochs_non_decreasing"]
    views = _with_companions(frame, "epoch_rows", [check], files=files)
    plan = views["epoch_rows_producer_epoch_falls"]._jdf.queryExecution().analyzed().toString()
    assert ("MapInArrow" in plan) == (reading == "files") and ("Window" in plan) == (reading != "files")
    try:
        query = check.build({}).unexpected_rows_query.format(batch="epoch_rows")
        found = {(r["broker_id"], r["topic"], r["partition"], r["producer_id"], r["base_offset"], r["producer_epoch"],
                  r["higher_epoch"], r["higher_epoch_base_offset"]) for r in spark.sql(query).collect()}
    finally:
        _drop_views(views)
    expected = {(broker, topic, partition, *rest) for broker, _, topic, partition, *rest in by_the_rule(rows)}
    assert expected and found == expected

