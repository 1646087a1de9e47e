"""A large segment decoded in slices gives exactly the tables of its whole-file decode.

The slices are decoded as Spark workers would (``worker.decode_task``), joined by the driver's
``plan_stitch``, and compared row for row with the unsliced decode: for clean segments,
boundaries that are not batch starts, an offset going backwards across a boundary, and a
batch whose length runs over a boundary. One Spark ingest checks the same through the job.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from crc32c import crc32c

from txn_audit.formats.model import BatchHeader
from txn_audit.formats.segment import iter_batches
from txn_audit.ingest import job
from txn_audit.ingest.discover import discover
from txn_audit.ingest.slices import SliceSummary, plan_stitch, split_large_logs
from txn_audit.ingest.tasks import FileTask
from txn_audit.ingest.tasks import TableRows
from txn_audit.ingest.worker import decode_task, task_rows
from txn_audit.sample.large import write_large_dump
from txn_audit.schemas import DECODED_TABLES

SLICE = 512 << 10

Tables = dict[str, list[dict[str, Any]]]


@pytest.fixture(scope="module")
def clean_dump(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("large")
    write_large_dump(out, segment_bytes=4 << 20, block_bytes=1 << 20)
    return out


def _copy(dump: Path, tmp_path: Path) -> tuple[Path, Path]:
    target = tmp_path / "dump"
    shutil.copytree(dump, target)
    return target, next((target / "broker-1" / "bulk-0").glob("*.log"))


def _headers(log: Path) -> list[BatchHeader]:
    return [h for h in iter_batches(log.read_bytes()) if isinstance(h, BatchHeader)]


def _rewrite(log: Path, position: int, edit: Callable[[bytearray, int], None], *, fix_crc: bool) -> None:
    data = bytearray(log.read_bytes())
    edit(data, position)
    if fix_crc:
        size = 12 + int.from_bytes(data[position + 8 : position + 12], "big")
        data[position + 17 : position + 21] = crc32c(bytes(data[position + 21 : position + size])).to_bytes(4, "big")
    log.write_bytes(bytes(data))


def _offset_back_at_boundary(log: Path, boundary: int) -> None:
    """The batch that starts ``boundary`` gets a base offset at or below its predecessor's last offset."""
    def edit(data: bytearray, p: int) -> None:
        base = int.from_bytes(data[p : p + 8], "big")
        data[p : p + 8] = (base - 3).to_bytes(8, "big")

    _rewrite(log, boundary, edit, fix_crc=True)


def _length_over_boundary(log: Path, boundary: int) -> None:
    """The batch that ends at ``boundary`` claims 100 bytes more: it runs over the boundary."""
    before = next(h for h in _headers(log) if h.position + h.size_bytes == boundary)

    def edit(data: bytearray, p: int) -> None:
        size = int.from_bytes(data[p + 8 : p + 12], "big")
        data[p + 8 : p + 12] = (size + 100).to_bytes(4, "big")

    _rewrite(log, before.position, edit, fix_crc=False)


def _decode(tasks: list[FileTask]) -> pa.Table:
    """Every task decoded in turn (``worker.decode_task``) into the combined schema's rows, drained
    every 5,000 rows and whenever the task changes."""
    out = TableRows()
    drained: list[pa.RecordBatch] = []
    for row in task_rows(tasks):
        task = FileTask(**row)
        if task.task != out.task:
            drained.extend(out.drain())
            out.task = task.task
        for _ in decode_task(task, out):
            if len(out) >= 5000:
                drained.extend(out.drain())
    drained.extend(out.drain())
    return pa.Table.from_batches(drained)


def _rows(table: pa.Table, name: str) -> list[dict[str, Any]]:
    return table.filter(pa.compute.equal(table["table"], name)).column(name).to_pylist()


def _local_ingest(tasks: list[FileTask]) -> tuple[Tables, int]:
    """The tables (rows sorted) after decoding ``tasks`` and stitching as the driver does; and
    how many slices were decoded again."""
    decoded = _decode(tasks)
    summaries = {r["task"]: SliceSummary(**r) for r in _rows(decoded, "slice_summary")}
    assert len(summaries) == sum(t.is_slice for t in tasks)
    plan = plan_stitch(tasks, summaries)
    kept = decoded.filter(pa.compute.invert(pa.compute.is_in(decoded["task"], pa.array(sorted(plan.dropped), pa.int64()))))
    tables: Tables = {name: _rows(kept, name) for name in DECODED_TABLES}
    if plan.redo:
        redo = _decode(plan.redo)
        for name in DECODED_TABLES:
            tables[name] += _rows(redo, name)
    tables["decode_issues"] += plan.issues
    return {name: sorted(rows, key=repr) for name, rows in tables.items()}, len(plan.redo)


def _whole_and_sliced(dump: Path, starts: list[int] | None = None) -> tuple[Tables, Tables, list[FileTask], int]:
    tasks = discover(dump).tasks
    if starts is None:
        sliced = split_large_logs(tasks, SLICE)
    else:
        log = next(t for t in tasks if t.kind == "log" and t.topic == "bulk")
        ends: list[int | None] = [*starts[1:], None]
        sliced = [t for t in tasks if t is not log] + [
            replace(log, start=a, end=b, task=k, size_bytes=(log.size_bytes if b is None else b) - a)
            for k, (a, b) in enumerate(zip(starts, ends, strict=True))
        ]
    whole, _ = _local_ingest(tasks)
    stitched, redone = _local_ingest(sliced)
    return whole, stitched, [t for t in sliced if t.is_slice], redone


def test_split_follows_the_index(clean_dump: Path) -> None:
    log = next(t for t in discover(clean_dump).tasks if t.kind == "log" and t.topic == "bulk")
    slices = [t for t in split_large_logs([log], SLICE)]
    assert len(slices) >= 6
    assert slices[0].start == 0 and slices[-1].end is None
    assert all(a.end == b.start for a, b in zip(slices, slices[1:]))
    assert sum(t.size_bytes for t in slices) == log.size_bytes
    starts = {h.position for h in _headers(Path(log.path))}
    assert {t.start for t in slices} <= starts
    assert split_large_logs([log], log.size_bytes) == [log]  # too small to cut


def test_clean_segment(clean_dump: Path) -> None:
    whole, stitched, slices, redone = _whole_and_sliced(clean_dump)
    assert len(slices) >= 6 and redone == 0
    assert len(whole["batches"]) > 10_000 and len(whole["control_markers"]) > 1_000
    assert stitched == whole


def test_boundaries_that_are_not_batch_starts(clean_dump: Path) -> None:
    size = next((clean_dump / "broker-1" / "bulk-0").glob("*.log")).stat().st_size
    whole, stitched, _, redone = _whole_and_sliced(clean_dump, [0, 700_001, 1_500_000, size - 5])
    assert redone == 1
    assert stitched == whole


def test_offset_going_back_across_a_boundary(clean_dump: Path, tmp_path: Path) -> None:
    dump, log = _copy(clean_dump, tmp_path)
    slices = [t for t in split_large_logs(discover(dump).tasks, SLICE) if t.is_slice]
    _offset_back_at_boundary(log, slices[2].start)
    whole, stitched, after, redone = _whole_and_sliced(dump)
    assert slices[2].start in {t.start for t in after} and redone == 0
    order = [r for r in whole["decode_issues"] if r["kind"] == "offset_order"]
    assert [r["position"] for r in order] == [slices[2].start]
    assert stitched == whole


def test_batch_running_over_a_boundary(clean_dump: Path, tmp_path: Path) -> None:
    dump, log = _copy(clean_dump, tmp_path)
    slices = [t for t in split_large_logs(discover(dump).tasks, SLICE) if t.is_slice]
    _length_over_boundary(log, slices[3].start)
    whole, stitched, after, redone = _whole_and_sliced(dump)
    assert slices[3].start in {t.start for t in after} and redone == 1
    assert whole["decode_issues"]
    assert stitched == whole


def test_a_small_dump_is_decoded_in_one_task(clean_dump: Path) -> None:
    """Up to ``job.ONE_TASK_BYTES`` the files make one bin (one Python worker); beyond, three a
    core, never more than the files."""
    tasks = split_large_logs(discover(clean_dump).tasks, SLICE)
    total = sum(t.size_bytes for t in tasks)
    assert total <= job.ONE_TASK_BYTES and len(tasks) > 6
    assert job.bin_count(tasks, 2) == 1
    big = [replace(t, size_bytes=job.ONE_TASK_BYTES) for t in tasks]
    assert job.bin_count(big, 2) == 6
    assert job.bin_count(big[:4], 2) == 4


@pytest.mark.spark
def test_spark_ingest_in_slices_equals_whole_file(
    spark: Any, clean_dump: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    dump, log = _copy(clean_dump, tmp_path)
    slices = [t for t in split_large_logs(discover(dump).tasks, SLICE) if t.is_slice]
    _offset_back_at_boundary(log, slices[2].start)
    _length_over_boundary(log, slices[5].start)
    inventory = discover(dump)
    monkeypatch.setattr(job, "ONE_TASK_BYTES", 0)  # the slices in several tasks, as a large dump's are

    def tables(name: str, slice_bytes: int) -> dict[str, list[dict[str, Any]]]:
        out = job.write_raw_tables(spark, inventory, tmp_path / name, slice_bytes=slice_bytes)
        rows = {}
        for table in out.row_counts:
            rows[table] = sorted((r.asDict(recursive=True) for r in spark.read.parquet(str(out.tables_dir / table))
                                  .collect()), key=repr)
            assert len(rows[table]) == out.row_counts[table], table
        return rows

    whole = tables("whole", 1 << 40)
    assert tables("sliced", SLICE) == whole
    kinds = {r["kind"] for r in whole["decode_issues"]}
    assert {"offset_order", "crc_mismatch"} <= kinds

    # boundaries that are not batch starts: decoded again from where the first slice stopped
    real_split = job.split_large_logs

    def misplaced(tasks: list[FileTask], slice_bytes: int) -> list[FileTask]:
        moved = []
        for t in real_split(tasks, slice_bytes):
            if t.is_slice:  # every cut 7 bytes later; a slice's size is still (end or file end) - start
                start, end = t.start + 7 if t.start else 0, None if t.end is None else t.end + 7
                t = replace(t, start=start, end=end, size_bytes=t.size_bytes + (t.start - start)
                            + (0 if t.end is None else 7))
            moved.append(t)
        return moved

    monkeypatch.setattr(job, "split_large_logs", misplaced)
    assert tables("misplaced", SLICE) == whole
