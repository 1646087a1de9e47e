"""The shared modules reconstruct and quality build on: the manifest of the raw tables' files,
and the per-replica tasks' pure helpers (no Spark here) and their place in the layering."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from txn_audit.manifest import FileEntry, RowGroupEntry, TableManifest
from txn_audit.replica_tasks import ONE_TASK_WEIGHT, TASKS_PER_CORE, each_item, pack, task_count
from txn_audit.replica_tasks.commit import TableFile, commit_file, file_name, finish_table, start_table
from txn_audit.replica_tasks.reading import (
    Piece,
    log_order,
    merge_in_log_order,
    pieces_in_order,
    producer_span,
    replica_groups,
    sampled_cuts,
)

LEADER = (1, "broker-1", "t", 0)
OTHER = (1, "broker-1", "t", 1)


def _group(index: int, replica: Any, low: int | None, high: int | None, producers: tuple[int, int] | None = (3, 9),
           rows: int = 5) -> RowGroupEntry:
    return RowGroupEntry(index, replica, rows, None if low is None or high is None else (low, high), producers)


def test_replica_groups_name_a_replicas_row_groups_from_the_manifest() -> None:
    table = TableManifest("control_markers", (
        FileEntry("control_markers/a.parquet", frozenset({LEADER, OTHER}),
                  (_group(0, LEADER, 10, 19), _group(1, OTHER, 0, 4), _group(2, LEADER, 0, 9, rows=0))),
        FileEntry("control_markers/b.parquet", frozenset({LEADER}), (_group(0, LEADER, 0, 9),)),
        FileEntry("control_markers/c.parquet", frozenset({OTHER}), (_group(0, None, 0, 9),)),
    ), "/tables")
    found = replica_groups(table, LEADER)
    assert found is not None
    assert [(g["uri"], g["index"], g["low"], g["high"]) for g in found] == [
        ("/tables/control_markers/a.parquet", 0, 10, 19), ("/tables/control_markers/b.parquet", 0, 0, 9)]
    ordered = log_order(found)
    assert ordered is not None and [g["low"] for g in ordered] == [0, 10]
    assert producer_span(found) == 7
    assert replica_groups(table, OTHER) is None  # a row group of no known replica among its files
    assert table.rows_of(OTHER) == 10 and table.rows_of(LEADER) == 10  # c.parquet's group counts for OTHER


@pytest.mark.parametrize(("ranges", "ordered"), [
    ([(0, 9), (10, 19)], True), ([(10, 19), (0, 9)], True), ([(0, 10), (10, 19)], False), ([(0, None)], False)])
def test_log_order_only_when_the_ranges_do_not_overlap(ranges: list[tuple[int, int | None]], ordered: bool) -> None:
    groups = [{"low": low, "high": high} for low, high in ranges]
    assert (log_order(groups) is not None) == ordered


@pytest.mark.parametrize("chunk_rows", [1, 3, 1000])
def test_row_groups_merged_in_log_order(chunk_rows: int) -> None:
    """Two sides' row groups, their ranges overlapping across sides but not within one: one
    stream in offset order, the lower side first at one offset, each row once."""
    rows = {  # (side, low, high): offsets in the row group, unordered within it
        (0, 0, 9): [5, 0, 9, 3], (0, 10, 30): [30, 10, 12], (0, 31, 40): [31, 40],
        (1, 3, 3): [3], (1, 9, 31): [31, 9, 20], (1, 35, 35): [35],
    }
    groups: list[list[dict[str, Any]]] = [[], []]
    for (side, low, high) in rows:
        groups[side].append({"low": low, "high": high, "uri": f"{side}-{low}", "index": 0})
    pieces = pieces_in_order(groups)
    assert pieces is not None and [p.low for p in pieces] == sorted(p.low for p in pieces)

    def read(piece: Piece) -> pa.Table:
        offsets = rows[(piece.side, piece.low, piece.high)]
        return pa.table({"offset": offsets, "side": [piece.side] * len(offsets)})

    merged = pa.Table.from_batches(list(merge_in_log_order(pieces, read, chunk_rows)))
    found = list(zip(merged.column("offset").to_pylist(), merged.column("side").to_pylist(), strict=True))
    assert found == sorted((o, side) for (side, _, _), offsets in rows.items() for o in offsets)
    assert pieces_in_order([groups[0], None]) is None
    assert pieces_in_order([groups[0] + [{"low": 5, "high": 6, "uri": "x", "index": 1}]]) is None  # overlap


def test_producer_span_needs_every_group() -> None:
    assert producer_span([]) == 0
    assert producer_span([{"producer_low": 5, "producer_high": 5}]) == 1
    assert producer_span([{"producer_low": 5, "producer_high": 5}, {"producer_low": None, "producer_high": None}]) \
        is None


def test_sampled_cuts_cut_every_window_of_rows() -> None:
    import numpy as np

    sample = np.arange(0, 1000, 4)  # one offset in 4
    cuts = sampled_cuts(sample, 100, 4)
    assert cuts == list(range(100, 1000, 100))


def test_a_task_file_is_committed_whole_or_not_at_all(tmp_path: Path) -> None:
    directory = str(tmp_path / "table")
    start_table(directory)
    with pytest.raises(FileExistsError):
        start_table(directory)
    schema = pa.schema([pa.field("x", pa.int64())])
    with pytest.raises(RuntimeError), commit_file(directory, file_name(1, "job")) as sink:
        sink.write(b"half a file")
        raise RuntimeError("the task failed")
    assert list(Path(directory).iterdir()) == []  # nothing left, not even hidden
    with commit_file(directory, file_name(2, "job")) as sink:
        pq.write_table(pa.table({"x": [1, 2]}, schema=schema), sink)
    finish_table(directory, schema)  # a table with a file keeps it alone
    (only,) = Path(directory).iterdir()
    assert only.name == file_name(2, "job") and pq.read_table(only).num_rows == 2


def test_a_table_file_is_written_as_rows_come_and_committed_at_the_end(tmp_path: Path) -> None:
    directory = str(tmp_path / "table")
    start_table(directory)
    schema = pa.schema([pa.field("x", pa.int64())])
    with TableFile(directory, file_name(1, "job"), schema) as written:
        written.add(pa.table({"x": pa.array([], pa.int32())}))  # no rows: no file yet
        assert list(Path(directory).iterdir()) == []
        written.add(pa.table({"x": pa.array([1, 2, 3], pa.int32())}), row_group_size=2)  # cast to the schema
        written.add(pa.table({"x": [4]}))
        assert [f.name for f in Path(directory).iterdir()] != [file_name(1, "job")]  # not before the end
    with pytest.raises(RuntimeError), TableFile(directory, file_name(2, "job"), schema) as failed:
        failed.add(pa.table({"x": [5]}))
        raise RuntimeError("the task failed")
    with TableFile(directory, file_name(3, "job"), schema) as empty:
        assert empty.rows == 0
    (only,) = Path(directory).iterdir()  # neither the failed task's file nor one without rows
    assert only.name == file_name(1, "job") and written.rows == 4
    assert pq.read_table(only).to_pylist() == [{"x": x} for x in (1, 2, 3, 4)]
    assert pq.read_table(only).schema == schema and pq.read_metadata(only).num_row_groups == 3


@pytest.mark.parametrize("weights,tasks", [
    ([5, 1, 1, 1, 1, 1, 1, 1, 1, 1], 4),
    ([100, 90, 3, 2, 2, 1], 4),
    ([1] * 66, 4),
    ([7, 7], 4),
    ([], 4),
    ([3, 2, 1], 1),
])
def test_items_are_packed_into_tasks_of_about_equal_weight(weights: list[int], tasks: int) -> None:
    items = [{"name": f"i{index}", "rows": weight} for index, weight in enumerate(weights)]
    groups = pack(items, tasks)
    assert sorted(item["name"] for group in groups for item in group) == sorted(item["name"] for item in items)
    assert len(groups) == min(tasks, len(items)) and all(groups)
    loads = [sum(int(item["rows"]) for item in group) for group in groups]  # type: ignore[call-overload]
    assert loads == sorted(loads, reverse=True)
    # longest-processing-time bound: no group exceeds the mean by more than its heaviest item
    if items:
        assert max(loads) <= sum(weights) / len(groups) + max(weights)
        assert [item["rows"] for item in groups[0]] == sorted((item["rows"] for item in groups[0]), reverse=True)


def test_items_of_a_small_dump_go_to_one_task() -> None:
    """Up to ``ONE_TASK_WEIGHT`` in all, the items make one task (one Python worker); beyond it,
    ``TASKS_PER_CORE`` a core, each weighed as asked."""
    small = [{"rows": ONE_TASK_WEIGHT // 4} for _ in range(4)]
    assert task_count(small, 2) == 1
    assert task_count([], 2) == 1
    assert task_count([*small, {"rows": 1}], 2) == TASKS_PER_CORE * 2
    assert task_count(small, 8, weight=lambda item: 2 * int(item["rows"])) == TASKS_PER_CORE * 8  # type: ignore[call-overload]


def test_a_packed_task_gives_its_body_one_item_a_batch() -> None:
    item_type = pa.struct([pa.field("topic", pa.string()), pa.field("rows", pa.int64())])
    items = pa.array([[{"topic": "a", "rows": 3}, {"topic": "b", "rows": 1}], [{"topic": "c", "rows": 2}]],
                     pa.list_(item_type))
    packed = pa.RecordBatch.from_arrays([items], names=["items"])
    seen: list[dict[str, Any]] = []

    def body(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            seen.extend(batch.to_pylist())
            yield batch.select(["topic"])

    out = list(each_item(iter([packed.slice(0, 1), packed.slice(1, 1)]), body=body))
    assert seen == [{"topic": "a", "rows": 3}, {"topic": "b", "rows": 1}, {"topic": "c", "rows": 2}]
    assert [batch.num_rows for batch in out] == [1, 1, 1]


def test_a_file_is_opened_once_and_again_once_it_changes(tmp_path: Path) -> None:
    """``reading.OpenedFiles``: a file is opened (its footer parsed) once while it is unchanged,
    and anew once a file of the same name is written again (another size or time), so a row
    group is never read through a stale footer; no more than ``kept`` files are held open."""
    import os

    import pyarrow as pa
    import pyarrow.parquet as pq

    from txn_audit.replica_tasks.reading import OpenedFiles

    path = tmp_path / "t.parquet"
    pq.write_table(pa.table({"x": list(range(10))}), path, row_group_size=5)
    files = OpenedFiles(kept=1)
    first = files.opened(path.as_uri())
    again = files.opened(path.as_uri())
    assert again is first  # the same reader, its footer not read again
    assert again.read_row_group(1)["x"].to_pylist() == [5, 6, 7, 8, 9]
    pq.write_table(pa.table({"x": list(range(100, 103))}), path)  # rewritten: another footer
    stat = path.stat()
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))
    rewritten = files.opened(path.as_uri())
    assert rewritten is not first and rewritten.num_row_groups == 1
    assert rewritten.read_row_group(0)["x"].to_pylist() == [100, 101, 102]
    ((source, _),) = files._files.values()
    other = tmp_path / "u.parquet"
    pq.write_table(pa.table({"x": [1]}), other)
    files.opened(other.as_uri())
    assert len(files._files) == 1 and source.closed  # the newest only; the one let go is closed
    files.close()
    assert not files._files


class _CountingFile(pq.ParquetFile):
    """A Parquet reader that counts its reads, one call each however many row groups."""

    reads: list[list[int]]

    def read_row_group(self, i: int, *args: Any, **kwargs: Any) -> pa.Table:
        self.reads.append([i])
        return super().read_row_group(i, *args, **kwargs)

    def read_row_groups(self, row_groups: Any, *args: Any, **kwargs: Any) -> pa.Table:
        self.reads.append(list(row_groups))
        return super().read_row_groups(row_groups, *args, **kwargs)


def test_a_tasks_planned_row_groups_of_a_file_are_read_together(tmp_path: Path) -> None:
    """``reading.ReadAhead``: a row group is read with the file's next planned ones up to
    ``rows`` rows, in one call; each read gives exactly that row group's rows, whether read ahead,
    alone (not planned), or again, alone, after it was dropped to keep at most ``kept_rows``."""
    from txn_audit.replica_tasks.reading import REPLICA_FILES_ITEM, ReadAhead, planned_groups

    path = tmp_path / "t.parquet"
    pq.write_table(pa.table({"x": list(range(50)), "y": [str(n) for n in range(50)]}), path, row_group_size=5)
    uri = path.as_uri()
    items = [{"groups": [{"uri": uri, "index": i} for i in (1, 2, 3)]},
             {"groups": [{"uri": uri, "index": i} for i in (4, 5, 7)]}]
    planned = list(planned_groups(items, pa.schema([REPLICA_FILES_ITEM.field("groups")])))
    assert planned == [(uri, i) for i in (1, 2, 3, 4, 5, 7)]
    alone = pq.ParquetFile(path)
    opened = _CountingFile(path)
    opened.reads = []
    ahead = ReadAhead(rows=20, kept_rows=100)
    ahead.plan(planned)
    for index in (1, 2, 3, 4, 5, 7, 9, 2):
        got = ahead.read(opened, uri, index, ["x", "y"])
        assert got.equals(alone.read_row_group(index, columns=["x", "y"])), index
    # 1-4 in one read (20 rows), 5 and 7 in another; 9 was not planned; 2 had been read already
    assert opened.reads == [[1, 2, 3, 4], [5, 7], [9], [2, 3, 4, 5]]
    assert ahead.read(opened, uri, 3, ["x"]).equals(alone.read_row_group(3, columns=["x"]))  # other columns
    small = ReadAhead(rows=10, kept_rows=10)  # keeps two row groups read ahead
    small.plan(planned)
    opened.reads = []
    for index in (1, 3, 5):
        assert small.read(opened, uri, index, ["x"]).equals(alone.read_row_group(index, columns=["x"])), index
    assert opened.reads == [[1, 2], [3, 4], [5, 7]]  # 2, read ahead first, was dropped for 7
    for index in (4, 7, 2):
        assert small.read(opened, uri, index, ["x"]).equals(alone.read_row_group(index, columns=["x"])), index
    assert opened.reads == [[1, 2], [3, 4], [5, 7], [2]]  # 4 and 7 were kept; 2 is read again, alone
    small.clear()
    opened.reads = []
    assert small.read(opened, uri, 4, ["x"]).equals(alone.read_row_group(4, columns=["x"]))
    assert opened.reads == [[4]]  # nothing planned: alone
