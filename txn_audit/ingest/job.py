"""The Spark ingest job: inventory → decode on workers → raw Parquet tables.

A large v2 data segment is cut into slices at batch starts from its ``.index``
(``ingest.slices``), so that several tasks decode it; the slices' one-row summaries are all the
driver collects to join them into exactly the whole-file decode. Files and slices are packed
into roughly equal-sized bins (largest first) and each bin becomes one Spark partition, decoded by ``worker.decode_partition`` through ``mapInArrow``. The workers' output is
one DataFrame in the combined schema (a ``table`` tag and one struct column per table); it is
persisted once and split into the per-table datasets, so every input byte is read once.
Driver-side tables (``segments``, ``partition_offsets`` and the layout issues) come from the
inventory. Everything is written under a staging folder and moved into place at the end.
"""

from __future__ import annotations

import heapq
import os
import shutil
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from txn_audit.ingest.discover import Inventory
from txn_audit.ingest.slices import DEFAULT_SLICE_BYTES, SliceSummary, StitchPlan, plan_stitch, split_large_logs
from txn_audit.ingest.worker import TASK_FIELDS, FileTask, decode_partition, task_rows
from txn_audit.schemas import (
    DECODE_ISSUES,
    DECODED_TABLES,
    PARTITION_OFFSETS,
    RAW_TABLES,
    SEGMENTS,
    combined_decode_schema,
    spark_schema,
)

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

STAGING_PREFIX = ".txn-audit-staging-"


@dataclass
class IngestOutput:
    """Where the tables went and how many rows each got."""

    tables_dir: Path
    row_counts: dict[str, int]
    issue_counts: dict[str, int] = field(default_factory=dict)  # by severity


def _bins(tasks: list[FileTask], n_bins: int) -> list[list[FileTask]]:
    """Largest-first greedy packing of files into ``n_bins`` bins of similar total size."""
    heap = [(0, i) for i in range(n_bins)]
    bins: list[list[FileTask]] = [[] for _ in range(n_bins)]
    for task in sorted(tasks, key=lambda t: (-t.size_bytes, t.rel_path)):
        load, i = heapq.heappop(heap)
        bins[i].append(task)
        heapq.heappush(heap, (load + max(task.size_bytes, 1), i))
    return [b for b in bins if b]


def decoded_frame(spark: SparkSession, tasks: list[FileTask]) -> DataFrame:
    """DataFrame (combined schema) of everything the workers decode from ``tasks``."""
    from pyspark.sql.types import IntegerType, LongType, StringType, StructField, StructType

    longs = ("base_offset", "size_bytes", "start", "end", "task", "prev_last_offset")
    task_schema = StructType(
        [
            StructField(name, LongType() if name in longs else
                        IntegerType() if name in ("broker_id", "partition") else StringType())
            for name in TASK_FIELDS
        ]
    )
    n_bins = max(1, min(len(tasks), spark.sparkContext.defaultParallelism * 3))
    bins = _bins(tasks, n_bins) or [[]]
    rdd = spark.sparkContext.parallelize([task_rows(b) for b in bins], len(bins)).flatMap(lambda rows: rows)
    tasks_df = spark.createDataFrame(rdd.map(lambda r: tuple(r[f] for f in TASK_FIELDS)), task_schema)
    combined = spark_schema(combined_decode_schema())
    return tasks_df.mapInArrow(_decode_batches, combined)


def _decode_batches(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    return decode_partition(batches)


def _driver_frame(spark: SparkSession, rows: list[dict[str, Any]], schema: pa.Schema) -> DataFrame:
    table = pa.Table.from_pylist(rows, schema=schema)
    return spark.createDataFrame(table)


def write_raw_tables(
    spark: SparkSession,
    inventory: Inventory,
    tables_dir: Path,
    *,
    on_stage: Callable[[str], None] | None = None,
    slice_bytes: int = DEFAULT_SLICE_BYTES,
) -> IngestOutput:
    """Decode ``inventory`` and write every raw table under ``tables_dir/<table>/`` atomically.

    ``.log`` files of at least twice ``slice_bytes`` are decoded in slices of about that size.
    """
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    tables_dir = Path(tables_dir)
    tables_dir.mkdir(parents=True, exist_ok=True)
    staging = tables_dir / f"{STAGING_PREFIX}{uuid.uuid4().hex}"
    try:
        if on_stage:
            on_stage("decoding files")
        tasks = split_large_logs(inventory.tasks, slice_bytes)
        decoded = decoded_frame(spark, tasks).persist(StorageLevel.MEMORY_AND_DISK)
        cached = [decoded]
        plan = StitchPlan()
        if any(t.is_slice for t in tasks):
            summaries = decoded.where(F.col("table") == "slice_summary").select("slice_summary.*").collect()
            plan = plan_stitch(tasks, {r["task"]: SliceSummary(**r.asDict()) for r in summaries})
        kept = decoded.where(~F.col("task").isin(sorted(plan.dropped))) if plan.dropped else decoded
        if plan.redo:
            if on_stage:
                on_stage("decoding again after a slice boundary")
            redo = decoded_frame(spark, plan.redo).persist(StorageLevel.MEMORY_AND_DISK)
            cached.append(redo)
            kept = kept.unionByName(redo)
        counts = {row["table"]: row["count"] for row in kept.groupBy("table").count().collect()}
        for name in DECODED_TABLES:
            if on_stage:
                on_stage(f"writing {name}")
            frame = kept.where(F.col("table") == name).select(f"{name}.*")
            if name == "decode_issues":
                frame = frame.unionByName(_driver_frame(spark, inventory.issues + plan.issues, DECODE_ISSUES))
            frame.write.parquet(str(staging / name))
        for frame in cached:
            frame.unpersist()
        if on_stage:
            on_stage("writing inventory")
        _driver_frame(spark, inventory.segments, SEGMENTS).coalesce(1).write.parquet(str(staging / "segments"))
        offsets = inventory.partition_offsets_rows()
        _driver_frame(spark, offsets, PARTITION_OFFSETS).coalesce(1).write.parquet(str(staging / "partition_offsets"))
        row_counts = {name: int(counts.get(name, 0)) for name in DECODED_TABLES}
        row_counts["decode_issues"] += len(inventory.issues) + len(plan.issues)
        row_counts["segments"] = len(inventory.segments)
        row_counts["partition_offsets"] = len(offsets)
        issue_counts = _issue_counts(spark, staging / "decode_issues")
        publish(staging, tables_dir, list(RAW_TABLES))
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return IngestOutput(tables_dir=tables_dir, row_counts=row_counts, issue_counts=issue_counts)


def _issue_counts(spark: SparkSession, path: Path) -> dict[str, int]:
    rows = spark.read.parquet(str(path)).groupBy("severity").count().collect()
    return {r["severity"]: int(r["count"]) for r in rows}


def publish(staging: Path, target: Path, names: list[str]) -> None:
    """Move each staged table into ``target``, replacing the previous one by renames only."""
    trash = target / f"{STAGING_PREFIX}old-{uuid.uuid4().hex}"
    trash.mkdir()
    try:
        for name in names:
            new = staging / name
            old = target / name
            if old.exists():
                os.replace(old, trash / name)
            os.replace(new, old)
    finally:
        shutil.rmtree(trash, ignore_errors=True)
