"""The Spark ingest job: inventory → decode on workers → raw Parquet tables.

A large v2 data segment is cut into slices at batch starts from its ``.index``
(``ingest.slices``), so that several tasks decode it. Files and slices are packed into roughly
equal-sized bins (largest first) and each bin becomes one Spark partition, decoded by
``worker.write_partition`` through ``mapInArrow``: the workers write the decoded tables as
Parquet themselves (Arrow to Parquet, never through the JVM) and report only which files they
wrote and one summary row per slice. From those the driver joins the slices into exactly the
whole-file decode (a boundary check, or a re-decode after a bad boundary, whose slices'
files are dropped). Driver-side tables (``segments``, ``partition_offsets``,
``reported_transactions`` and the layout issues) come from the inventory. Everything is written
under a staging folder and moved into place at the end.
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
from txn_audit.ingest.tasks import FileTask
from txn_audit.ingest.worker import TASK_FIELDS, replica_runs, task_rows, write_partition
from txn_audit.ledger import LEDGER_FILE
from txn_audit.manifest import Manifest, describe_tables
from txn_audit.schemas import (
    DECODED_TABLES,
    REPLICA_ROW_GROUP_TABLES,
    RAW_TABLES,
    REPLICA_COLUMNS,
    WRITTEN_FILES,
    declared,
    in_ms,
    raw_writer_options,
    replicas_metadata,
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
    #: the files written, their row groups and the replica and offsets of each (``manifest``),
    #: which the scan's ledger keeps (``txn_audit.ledger``)
    manifest: Manifest | None = None


#: a dump of at most this many bytes is decoded in one task (a few tenths of a second of a core):
#: a second task would start a second Python worker, whose imports cost more than a second of a
#: core (git log -- docs/performance.md), and the later stages' tasks reuse the one worker
ONE_TASK_BYTES = 64 << 20


def bin_count(tasks: list[FileTask], parallelism: int) -> int:
    """How many bins (Spark tasks) ``tasks`` are decoded in: three a core, at most one a file, and
    one for a dump of at most ``ONE_TASK_BYTES``."""
    if sum(task.size_bytes for task in tasks) <= ONE_TASK_BYTES:
        return 1
    return max(1, min(len(tasks), parallelism * 3))


def _bins(tasks: list[FileTask], n_bins: int) -> list[list[FileTask]]:
    """Largest-first greedy packing of files into ``n_bins`` bins of similar total size."""
    heap = [(0, i) for i in range(n_bins)]
    bins: list[list[FileTask]] = [[] for _ in range(n_bins)]
    for task in sorted(tasks, key=lambda t: (-t.size_bytes, t.rel_path)):
        load, i = heapq.heappop(heap)
        bins[i].append(task)
        heapq.heappush(heap, (load + max(task.size_bytes, 1), i))
    return [b for b in bins if b]


def _tasks_frame(spark: SparkSession, tasks: list[FileTask]) -> DataFrame:
    """One row per task, packed into bins of similar size (``bin_count``), one Spark partition per bin."""
    from pyspark.sql.types import IntegerType, LongType, StringType, StructField, StructType

    longs = ("base_offset", "size_bytes", "start", "end", "task", "prev_last_offset")
    task_schema = StructType(
        [
            StructField(name, LongType() if name in longs else
                        IntegerType() if name in ("broker_id", "partition") else StringType())
            for name in TASK_FIELDS
        ]
    )
    bins = _bins(tasks, bin_count(tasks, spark.sparkContext.defaultParallelism)) or [[]]
    rdd = spark.sparkContext.parallelize([task_rows(b) for b in bins], len(bins)).flatMap(lambda rows: rows)
    return spark.createDataFrame(rdd.map(lambda r: tuple(r[f] for f in TASK_FIELDS)), task_schema)


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
    tables_dir = Path(tables_dir)
    tables_dir.mkdir(parents=True, exist_ok=True)
    staging = tables_dir / f"{STAGING_PREFIX}{uuid.uuid4().hex}"
    try:
        if on_stage:
            on_stage("decoding files")
        for name in DECODED_TABLES:
            (staging / name).mkdir(parents=True)
        tasks = split_large_logs(inventory.tasks, slice_bytes)
        written = _decode_to_files(spark, tasks, staging)
        plan = StitchPlan()
        if any(t.is_slice for t in tasks):
            summaries = {r["task"]: SliceSummary(**r["slice_summary"])
                         for r in written if r["table"] == "slice_summary"}
            plan = plan_stitch(tasks, summaries)
        for r in written:
            if r["file"] and r["task"] in plan.dropped:
                os.remove(r["file"])
        files = [r for r in written if r["file"] and r["task"] not in plan.dropped]
        if plan.redo:
            if on_stage:
                on_stage("decoding again after a slice boundary")
            files += [r for r in _decode_to_files(spark, plan.redo, staging, run=1) if r["file"]]
        reported = {r["file"] for r in files}
        for name in DECODED_TABLES:  # files of failed task attempts that Spark ran again
            for path in (staging / name).iterdir():
                if str(path) not in reported:
                    path.unlink()
        row_counts = {name: sum(r["rows"] for r in files if r["table"] == name) for name in DECODED_TABLES}
        if on_stage:
            on_stage("writing inventory")
        driver_tables = {
            "decode_issues": inventory.issues + plan.issues,
            "segments": inventory.segments,
            "partition_offsets": inventory.partition_offsets_rows(),
            "metadata_partitions": inventory.metadata_partitions,
            "remote_segments": inventory.remote_segment_rows(),
            "reported_transactions": inventory.reported,
        }
        for name, rows in driver_tables.items():
            (staging / name).mkdir(exist_ok=True)
            if rows or not any(r["table"] == name for r in files):  # every table gets a file with its schema
                _write_driver_table(staging / name / "part-driver.parquet", rows, RAW_TABLES[name],
                                    per_replica=name in REPLICA_ROW_GROUP_TABLES)
            row_counts[name] = row_counts.get(name, 0) + len(rows)
        for name in DECODED_TABLES:
            if not any(r["table"] == name for r in files) and name not in driver_tables:
                _write_driver_table(staging / name / "part-empty.parquet", [], RAW_TABLES[name])
        issue_counts = _issue_counts(staging)
        # what was written, from the files' statistics (no row is read): saved with the tables
        manifest = Manifest(str(tables_dir.absolute()), describe_tables(staging, RAW_TABLES).tables)
        # a ledger never describes other tables than those beside it: the old one goes first
        (tables_dir / LEDGER_FILE).unlink(missing_ok=True)
        publish(staging, tables_dir, list(RAW_TABLES))
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return IngestOutput(tables_dir=tables_dir, row_counts=row_counts, issue_counts=issue_counts, manifest=manifest)


def _decode_to_files(spark: SparkSession, tasks: list[FileTask], staging: Path, run: int = 0) -> list[dict[str, Any]]:
    """Run the workers over ``tasks``, each writing its rows as Parquet under ``staging``;
    return what they wrote (``schemas.WRITTEN_FILES`` rows, a few per task)."""
    out_dir = str(staging)

    def write(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        return write_partition(batches, out_dir, run)

    # pyspark's stub types mapInArrow's function too narrowly (Iterable, not Iterator)
    frame = _tasks_frame(spark, tasks).mapInArrow(write, spark_schema(WRITTEN_FILES))  # type: ignore[arg-type]
    return [r.asDict(recursive=True) for r in frame.collect()]


def _write_driver_table(path: Path, rows: list[dict[str, Any]], schema: pa.Schema, *,
                        per_replica: bool = True) -> None:
    """``rows`` as one Parquet file of ``schema``; its footer names their replicas. With
    ``per_replica`` each replica's rows have a row group of their own, as the workers write them
    (a table the workers write too, whose rows tasks read replica by replica); without, they are
    one row group: a table only the driver writes is only ever read whole, and a row group costs
    about 0.25 ms to write and describe, thousands of them on a dump of thousands of partitions."""
    import pyarrow.parquet as pq

    table = declared(pa.Table.from_pylist(rows, schema=in_ms(schema)), schema)
    if not set(REPLICA_COLUMNS) <= set(schema.names):
        pq.write_table(table, str(path), **raw_writer_options(schema))
        return
    runs = list(replica_runs(table))
    listed = replicas_metadata({replica for replica, _ in runs})
    with pq.ParquetWriter(str(path), schema.with_metadata({**(schema.metadata or {}), **listed}),
                          **raw_writer_options(schema)) as writer:
        for part in (rows for _, rows in runs) if per_replica else (table,):
            writer.write_table(part)


def _issue_counts(staging: Path) -> dict[str, int]:
    """The decode issues staged in ``staging`` by severity, from their severity column read on the
    driver (no Spark job: issues are few, and the driver reads the staged files anyway)."""
    import pyarrow.compute as pc
    import pyarrow.dataset as ds

    issues = ds.dataset(str(staging / "decode_issues"), format="parquet", schema=RAW_TABLES["decode_issues"])
    severities = issues.to_table(columns=["severity"])["severity"]
    return {row["values"]: int(row["counts"]) for row in pc.value_counts(severities).to_pylist()}


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
