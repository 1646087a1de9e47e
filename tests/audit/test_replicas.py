"""Each partition is audited on one replica, whether or not the replica join runs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from txn_audit.schemas import RAW_TABLES, replicas_metadata, row_replicas

pytestmark = pytest.mark.spark

LEADER = (1, "broker-1", "t", 0)
FOLLOWER = (2, "broker-2", "t", 0)
OTHER = (2, "broker-2", "t", 1)


def _offsets(spark: Any) -> Any:
    """Partition t-0 on two brokers (broker 1 ahead, so chosen) and t-1 on broker 2 only."""
    from txn_audit.schemas import spark_schema

    def row(replica: tuple[Any, ...], hw: int) -> dict[str, Any]:
        broker, log_dir, topic, partition = replica
        return {"broker_id": broker, "log_dir": log_dir, "topic": topic, "partition": partition,
                "replica_status": "live", "high_watermark": hw, "live_segments": 1, "clean_shutdown": True}

    rows = [row(LEADER, 20), row(FOLLOWER, 10), row(OTHER, 5)]
    schema = RAW_TABLES["partition_offsets"]
    return spark.createDataFrame(pa.Table.from_pylist(rows, schema=schema).to_pandas(), spark_schema(schema))


def _chosen(spark: Any) -> Any:
    """The chosen replicas of ``_offsets``: no metadata log, no batch, so the highest HW speaks."""
    from txn_audit.reconstruct import chosen_replicas, ranked_replicas
    from txn_audit.schemas import spark_schema

    def empty(name: str) -> Any:
        return spark.createDataFrame([], spark_schema(RAW_TABLES[name]))

    return chosen_replicas(ranked_replicas(_offsets(spark), empty("metadata_partitions"), empty("batches")))


def _markers(replica: tuple[Any, ...], count: int) -> list[dict[str, Any]]:
    broker, log_dir, topic, partition = replica
    return [{"broker_id": broker, "log_dir": log_dir, "topic": topic, "partition": partition,
             "file": f"{log_dir}/{topic}-{partition}/00000000000000000000.log", "position": n * 78,
             "segment_base_offset": 0, "offset": n, "timestamp": 1000 + n, "producer_id": 7, "producer_epoch": 0,
             "marker_type": "COMMIT", "control_type": 1, "coordinator_epoch": 0, "key_version": 0,
             "value_version": 0}
            for n in range(count)]


def _write(folder: Path, files: dict[str, list[dict[str, Any]]], *, listed: bool = True) -> None:
    folder.mkdir(parents=True)
    schema = RAW_TABLES["control_markers"]
    for name, rows in files.items():
        table = pa.Table.from_pylist(rows, schema=schema)
        if listed:
            table = table.replace_schema_metadata(replicas_metadata(row_replicas(table)))
        pq.write_table(table, folder / name)


def _audited(spark: Any, folder: Path) -> tuple[Any, Any, set[tuple[Any, ...]]]:
    from txn_audit.reconstruct import on_replicas
    from txn_audit.tables import load_table

    frame = load_table(spark, folder.parent, folder.name)
    kept = on_replicas(frame, _chosen(spark))
    rows = {(r.broker_id, r.log_dir, r.topic, r.partition, r.offset) for r in kept.collect()}
    return frame, kept, rows


def _rows(replica: tuple[Any, ...], count: int) -> set[tuple[Any, ...]]:
    return {(*replica, n) for n in range(count)}


def test_files_of_chosen_replicas_only_are_read_as_they_are(spark: Any, tmp_path: Path) -> None:
    folder = tmp_path / "a" / "control_markers"
    _write(folder, {"one.parquet": _markers(LEADER, 3), "two.parquet": _markers(OTHER, 2) + _markers(LEADER, 1)})
    frame, kept, rows = _audited(spark, folder)
    assert kept is frame
    assert rows == _rows(LEADER, 3) | _rows(OTHER, 2) | {(*LEADER, 0)}


def test_a_file_with_rows_of_another_replica_is_joined(spark: Any, tmp_path: Path) -> None:
    folder = tmp_path / "b" / "control_markers"
    _write(folder, {"one.parquet": _markers(LEADER, 3), "two.parquet": _markers(FOLLOWER, 4) + _markers(OTHER, 2)})
    frame, kept, rows = _audited(spark, folder)
    assert kept is not frame
    assert rows == _rows(LEADER, 3) | _rows(OTHER, 2)


def test_files_that_do_not_list_their_replicas_are_joined(spark: Any, tmp_path: Path) -> None:
    folder = tmp_path / "c" / "control_markers"
    # a footer that lists only the leader although the file holds the follower's rows would be
    # believed; a footer that lists nothing is not
    _write(folder, {"one.parquet": _markers(LEADER, 3) + _markers(FOLLOWER, 4)}, listed=False)
    frame, kept, rows = _audited(spark, folder)
    assert kept is not frame
    assert rows == _rows(LEADER, 3)


def test_a_changed_frame_is_joined(spark: Any, tmp_path: Path) -> None:
    from pyspark.sql import functions as F

    from txn_audit.reconstruct import chosen_replicas, on_replicas
    from txn_audit.tables import load_table

    folder = tmp_path / "d" / "control_markers"
    _write(folder, {"one.parquet": _markers(LEADER, 3)})
    # the footer speaks of the files' rows, not of rows a frame derives from them
    moved = load_table(spark, folder.parent, folder.name).withColumn("broker_id", F.lit(2)).withColumn(
        "log_dir", F.lit("broker-2"))
    assert on_replicas(moved, _chosen(spark)).count() == 0


def test_partition_extent_from_the_footers_equals_the_aggregate(spark: Any, sample_scan: Any) -> None:
    """The sample scan's batches: each replica's log end and each partition's oldest time, from
    the row groups' statistics (no row read) and from Spark's aggregate over every batch."""
    from pyspark.sql import functions as F

    from txn_audit.reconstruct import chosen_replicas, on_replicas, ranked_replicas
    from txn_audit.reconstruct.replicas import _log_ends, replica_extents
    from txn_audit.reconstruct.stability import partition_extent
    from txn_audit.tables import load_tables

    raw = load_tables(spark, sample_scan.out / "tables", ["batches", "partition_offsets", "metadata_partitions"])
    batches = on_replicas(raw["batches"], chosen_replicas(ranked_replicas(raw["partition_offsets"],
                                                                         raw["metadata_partitions"], raw["batches"])))
    assert replica_extents(batches) is not None
    assert replica_extents(batches.where(F.lit(True))) is None
    from_footers = sorted(map(tuple, partition_extent(batches).collect()))
    aggregated = sorted(map(tuple, partition_extent(batches.where(F.lit(True))).collect()))
    assert len(from_footers) > 5 and from_footers == aggregated
    ends = _log_ends(batches)
    assert len(ends) > 5 and ends == _log_ends(batches.where(F.lit(True)))
