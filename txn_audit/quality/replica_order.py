"""Each batch next to the one before it in its replica's offset order, for the checks that no
batch repeats or overlaps the previous one (``one_batch_per_offset``, ``no_overlap``).

The rows are those of a window ``lag(...) OVER (PARTITION BY broker_id, log_dir, topic, partition
ORDER BY base_offset, position)`` where the batch repeats the previous one's base offset or starts
at or before its last offset; nulls sort first and compare as SQL does. When the batches read
the files ingest wrote as they are, their manifest is given (``txn_audit.manifest``) and they
hold at least ``reading.TASKS_MIN_ROWS`` rows, each task (``txn_audit.replica_tasks``) reads its
replicas' three offset columns from their row groups (``reading.replica_tables``) and sorts them
itself unless they are in order already: a Spark window would shuffle and sort every batch with
all four replica columns in its key. Any other frame takes the window: a small dump's batches
among them, for which it costs less than the tasks' Python workers.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds

from txn_audit.manifest import TableManifest
from txn_audit.replica_tasks.reading import (
    REPLICA_FILES_ITEM,
    SAMPLE_EVERY,
    int_values,
    item_int,
    read_by_tasks,
    replica_columns,
    replica_file_items,
    replica_tables,
    sampled_cuts,
)
from txn_audit.schemas import ALL_TABLES, REPLICA_COLUMNS, in_ms

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

_BATCHES = in_ms(ALL_TABLES["batches"])

#: the neighbour rows: a batch that repeats or overlaps the one before it in its replica's order
NEIGHBOURS = pa.schema([
    *[_BATCHES.field(name) for name in REPLICA_COLUMNS],
    pa.field("base_offset", pa.int64()),
    pa.field("last_offset", pa.int64()),
    pa.field("previous_base", pa.int64()),
    pa.field("previous_last", pa.int64()),
])

#: most batches one task sorts at once (three offsets each, about 50 bytes a batch at the peak);
#: a larger replica is read in windows of base offsets, cut at a sample of them (one in ``SAMPLE_EVERY``)
WINDOW_ROWS = 4_000_000

_OFFSETS = ["base_offset", "last_offset", "position"]


def _windows(item: Mapping[str, object], window_rows: int) -> list[tuple[int | None, int | None]]:
    """Base-offset windows of about ``window_rows`` of the replica's batches, in order, as (from,
    to) bounds (None: open); the first also holds the batches without a base offset (they sort
    first)."""
    if item_int(item, "rows") <= window_rows:  # an upper bound, from the manifest
        return [(None, None)]
    sampled = [table.column("base_offset").drop_null().to_numpy()[::SAMPLE_EVERY]
               for table in replica_tables(item, ["base_offset"])]
    offsets = np.sort(np.concatenate(sampled)) if sampled else np.empty(0, np.int64)
    cuts: list[int | None] = list(sampled_cuts(offsets, window_rows, SAMPLE_EVERY))
    if not cuts:
        return [(None, None)]
    return list(zip([None, *cuts], [*cuts, None], strict=True))


def _window_filter(low: int | None, high: int | None) -> ds.Expression | None:
    base = ds.field("base_offset")
    if low is None and high is None:
        return None
    if low is None:
        return base.is_null() | (base < high)
    return base >= low if high is None else (base >= low) & (base < high)


def replica_neighbours(item: Mapping[str, object], window_rows: int = WINDOW_ROWS) -> Iterator[pa.RecordBatch]:
    """The neighbour rows (``NEIGHBOURS``) of ``item``'s replica, read from its row groups."""
    # the previous batch in order: (base offset, is it known, last offset, is it known)
    carried = (0, False, 0, False)
    for low, high in _windows(item, window_rows):
        parts = list(replica_tables(item, _OFFSETS, where=_window_filter(low, high), low=low, high=high,
                                    schema=_BATCHES))
        if not parts:
            continue
        table = pa.concat_tables(parts)
        del parts
        base, base_known, last, last_known = _in_order(table)
        del table
        flagged = _flagged(base, base_known, last, last_known, carried)
        if flagged.size:
            yield _neighbour_batch(item, flagged, base, base_known, last, last_known, carried)
        carried = (int(base[-1]), bool(base_known[-1]), int(last[-1]), bool(last_known[-1]))


def _in_order(table: pa.Table) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``table``'s base and last offsets (values, and where they are known) ordered by base offset,
    then position, nulls first, as ``pc.sort_indices`` orders them (a stable sort): rows read in log
    order, as ingest writes a replica's row groups, already are, and are not sorted again."""
    base, base_known = int_values(table.column("base_offset"))
    position, position_known = int_values(table.column("position"))
    last_column = table.column("last_offset")
    if not (base_known.all() and position_known.all() and _ordered(base, position)):
        order = pc.sort_indices(table, sort_keys=[("base_offset", "ascending", "at_start"),
                                                  ("position", "ascending", "at_start")]).to_numpy()
        base, base_known, last_column = base[order], base_known[order], last_column.take(order)
    last, last_known = int_values(last_column)
    return base, base_known, last, last_known


def _ordered(base: np.ndarray, position: np.ndarray) -> bool:
    """Whether the rows are in (base, position) order: each pair no greater than the next."""
    after, before = base[1:], base[:-1]
    return bool(np.all((after > before) | ((after == before) & (position[1:] >= position[:-1]))))


def _flagged(base: np.ndarray, base_known: np.ndarray, last: np.ndarray, last_known: np.ndarray,
             carried: tuple[int, bool, int, bool]) -> np.ndarray:
    """Rows (in order) that repeat the previous row's base offset or start at or before its last
    offset, as SQL compares (a null compares as unknown); row 0's previous row is ``carried``."""
    carried_base, carried_base_known, carried_last, carried_last_known = carried
    repeats, overlaps = np.empty(base.size, bool), np.empty(base.size, bool)
    repeats[0] = base_known[0] and carried_base_known and base[0] == carried_base
    overlaps[0] = base_known[0] and carried_last_known and base[0] <= carried_last
    np.equal(base[1:], base[:-1], out=repeats[1:])
    repeats[1:] &= base_known[1:] & base_known[:-1]
    np.less_equal(base[1:], last[:-1], out=overlaps[1:])
    overlaps[1:] &= base_known[1:] & last_known[:-1]
    return np.flatnonzero(repeats | overlaps)


def _neighbour_batch(item: Mapping[str, object], flagged: np.ndarray, base: np.ndarray, base_known: np.ndarray,
                     last: np.ndarray, last_known: np.ndarray, carried: tuple[int, bool, int, bool]) -> pa.RecordBatch:
    """The ``flagged`` rows with their previous row's offsets (row 0's: ``carried``)."""
    count = int(flagged.size)
    previous = flagged - 1
    after_first = previous >= 0
    carried_base, carried_base_known, carried_last, carried_last_known = carried

    def offsets(values: np.ndarray, known: np.ndarray) -> pa.Array:
        return pa.array(values, pa.int64(), mask=~known)

    arrays = replica_columns(item, count)
    arrays += [
        offsets(base[flagged], base_known[flagged]),
        offsets(last[flagged], last_known[flagged]),
        offsets(np.where(after_first, base[previous], carried_base),
                np.where(after_first, base_known[previous], carried_base_known)),
        offsets(np.where(after_first, last[previous], carried_last),
                np.where(after_first, last_known[previous], carried_last_known)),
    ]
    return pa.RecordBatch.from_arrays(arrays, schema=NEIGHBOURS)


def neighbours_over_files(items: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """``mapInArrow`` body: ``reading.REPLICA_FILES_ITEM`` rows (a replica's batches each) in, their
    replicas' neighbour rows out."""
    for batch in items:
        for item in batch.to_pylist():
            yield from replica_neighbours(item)


def neighbours_frame(batches: DataFrame, files: TableManifest | None = None) -> DataFrame:
    """The neighbour rows of ``batches`` (see the module docstring) as a DataFrame; ``files``: the
    manifest of the files ``batches`` reads as they are, if it does."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    from txn_audit.replica_tasks import tasks_over_items
    from txn_audit.schemas import spark_schema

    if read_by_tasks(files):
        return tasks_over_items(batches.sparkSession, replica_file_items(files), REPLICA_FILES_ITEM,
                                neighbours_over_files, spark_schema(NEIGHBOURS))
    order = Window.partitionBy(*REPLICA_COLUMNS).orderBy("base_offset", "position")
    return (
        batches.select(*REPLICA_COLUMNS, "base_offset", "last_offset",
                       F.lag("base_offset").over(order).alias("previous_base"),
                       F.lag("last_offset").over(order).alias("previous_last"))
        .where((F.col("base_offset") == F.col("previous_base")) | (F.col("base_offset") <= F.col("previous_last")))
    )
