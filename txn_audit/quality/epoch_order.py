"""Where a producer's epoch goes down in offset order on a replica, for the checks that it never
does (``epochs_non_decreasing`` over the batches' producer epochs, ``coordinator_epoch_non_decreasing``
over the markers' coordinator epochs).

The rows are first grouped per producer and epoch into spans: ``SELECT <replica>, producer_id,
<epoch> AS epoch, min(<offset>) AS first_offset, max(<offset>) AS last_offset FROM <table> WHERE
<where> GROUP BY <replica>, producer_id, <epoch>``. A fall is a span that has an entry after the
first entry of a higher epoch of its producer: ``last_offset > higher_offset``, where, over the
producer's spans in descending epoch order (nulls last), ``higher_offset`` is the lowest
``first_offset`` of the spans before it and ``higher_epoch`` the epoch of the first span holding it
(``min`` and ``min_by`` over ``ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING``). Its ``offset`` is
the entry that breaks the rule: the span's first when it lies after ``higher_offset``, else its last.

When the table's frame reads the files ingest wrote as they are, their manifest is given
(``txn_audit.manifest``) and they hold at least ``reading.TASKS_MIN_ROWS`` rows, each task reads its
replicas' three or four columns with pyarrow, a chunk at a time (the rows of many small replicas
together, told apart by their item's index), groups them and walks the spans itself
(``txn_audit.replica_tasks``), giving Spark the falls alone, usually none: a replica of
producers that bump their epoch at every transaction (transaction version 2) has a span per
transaction, hundreds of thousands in a GiB. Any other frame takes Spark's grouping and window.
Grouping keys compare as SQL's ``GROUP BY`` does (a null key is a group of its own), ``min`` /
``max`` skip nulls and a comparison with a null is not true.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numba
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds

from txn_audit.manifest import TableManifest
from txn_audit.replica_tasks.reading import (
    REPLICA_FILES_ITEM,
    int_values,
    item_int,
    read_by_tasks,
    replica_file_items,
    replica_tables,
)
from txn_audit.schemas import ALL_TABLES, REPLICA_COLUMNS, REPLICA_FIELDS

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

__all__ = ["CHUNK_ROWS", "EPOCH_FALLS", "FALLS", "SPANS", "EpochOrder", "epoch_falls", "epoch_spans",
           "falls_frame", "falls_of_spans", "items_falls"]

#: a producer's epoch on a replica and the lowest and highest offset it is seen at
SPANS = pa.schema([
    pa.field("producer_id", pa.int64()),
    pa.field("epoch", pa.int32()),
    pa.field("first_offset", pa.int64()),
    pa.field("last_offset", pa.int64()),
])

#: the falls: a producer's epoch seen at ``offset`` after ``higher_epoch`` was at ``higher_offset``
FALLS = pa.schema([
    *REPLICA_FIELDS,
    pa.field("producer_id", pa.int64()),
    pa.field("offset", pa.int64()),
    pa.field("epoch", pa.int32()),
    pa.field("higher_epoch", pa.int32()),
    pa.field("higher_offset", pa.int64()),
])

#: rows a task groups at once, with the spans found so far (about 30 bytes a row)
CHUNK_ROWS = 2_000_000

@dataclass(frozen=True)
class EpochOrder:
    """Which epoch of which table must not go down over which offset, among the rows whose
    columns equal or reach the given values (``where``: ``(column, "=" or ">=", value)``, all of
    them)."""

    table: str
    epoch: str
    offset: str
    where: tuple[tuple[str, str, int], ...] = ()

    def sql_condition(self) -> str:
        """``where`` as a SQL condition (``TRUE`` without any)."""
        return " AND ".join(f"{column} {op} {value}" for column, op, value in self.where) or "TRUE"

    def arrow_filter(self) -> ds.Expression | None:
        """``where`` as a pyarrow filter (None without any): a null compares as unknown and drops
        its row, as in SQL."""
        found = None
        for column, op, value in self.where:
            field = ds.field(column)
            term = field == value if op == "=" else field >= value
            found = term if found is None else found & term
        return found


#: the falls the suites read, by companion name (``quality.COMPANIONS``)
EPOCH_FALLS = {
    "producer_epoch_falls": EpochOrder("batches", "producer_epoch", "base_offset",
                                       (("producer_id", ">=", 0), ("magic", "=", 2))),
    "coordinator_epoch_falls": EpochOrder("control_markers", "coordinator_epoch", "offset"),
}


#: a span's replica: the index of its item among those read together (``items_falls``)
_ITEM = "item"
_KEYS = [_ITEM, "producer_id", "epoch"]


def _grouped(rows: pa.Table) -> pa.Table:
    """``rows`` (``_ITEM`` and ``SPANS``' columns) grouped by item, producer and epoch: the lowest
    first and highest last offset of each."""
    grouped = rows.group_by(_KEYS, use_threads=False).aggregate([("first_offset", "min"), ("last_offset", "max")])
    return grouped.rename_columns({"first_offset_min": "first_offset", "last_offset_max": "last_offset"}).select(
        [_ITEM, *SPANS.names])


def epoch_spans(items: Sequence[Mapping[str, object]], order: EpochOrder,
                chunk_rows: int = CHUNK_ROWS) -> pa.Table:
    """The spans (``SPANS``, after an ``_ITEM`` column: the index of their item) of ``items``'
    replicas (``reading.REPLICA_FILES_ITEM``), read from their row groups
    (``reading.replica_tables``), in no particular order. The rows of many small replicas are
    filtered and grouped together, up to ``chunk_rows`` at a time: a filter or a grouping costs
    about 0.3 ms however few its rows."""
    schema = ALL_TABLES[order.table]
    read = ["producer_id", order.epoch, order.offset]
    read += [column for column, _, _ in order.where if column not in read]
    where = order.arrow_filter()
    found = pa.schema([pa.field(_ITEM, pa.int32()), *SPANS]).empty_table()
    held: list[pa.Table] = []
    held_rows = 0

    def fold() -> pa.Table:
        if not held:
            return found
        chunk = pa.concat_tables(held)
        if where is not None:
            chunk = chunk.filter(where)
        offsets = chunk.column(order.offset).cast(pa.int64())
        chunk = pa.Table.from_arrays([chunk.column(_ITEM), chunk.column("producer_id").cast(pa.int64()),
                                      chunk.column(order.epoch).cast(pa.int32()), offsets, offsets],
                                     schema=found.schema)
        return _grouped(pa.concat_tables([found, chunk]))

    for number, item in enumerate(items):
        for part in replica_tables(item, read, schema=schema):
            held.append(part.select(read).append_column(_ITEM, pa.array(np.full(part.num_rows, number, np.int32))))
            held_rows += part.num_rows
            if held_rows >= chunk_rows:
                found, held, held_rows = fold(), [], 0
    return fold()


@numba.njit(cache=True, nogil=True)
def _higher(new_producer: np.ndarray, first: np.ndarray, first_known: np.ndarray,
            epoch: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Over spans in producer, then descending epoch order: the lowest known ``first`` of the
    producer's spans before each (and whether there is one), and the epoch of the first span
    holding it."""
    count = first.size
    lowest = np.zeros(count, np.int64)
    known = np.zeros(count, np.bool_)
    lowest_epoch = np.zeros(count, np.int32)
    have, best, best_epoch = False, 0, 0
    for row in range(count):
        if new_producer[row]:
            have = False
        known[row] = have
        lowest[row] = best
        lowest_epoch[row] = best_epoch
        if first_known[row] and (not have or first[row] < best):
            have, best, best_epoch = True, first[row], epoch[row]
    return lowest, known, lowest_epoch


def falls_of_spans(spans: pa.Table) -> pa.Table:
    """The falls among ``spans`` (``epoch_spans``: each replica's, told apart by ``_ITEM``):
    ``_ITEM`` and ``FALLS``' columns after the replica's."""
    spans = spans.take(pc.sort_indices(spans, sort_keys=[(_ITEM, "ascending"),
                                                         ("producer_id", "ascending", "at_end"),
                                                         ("epoch", "descending", "at_end")]))
    item = spans.column(_ITEM).to_numpy()
    producer, producer_known = int_values(spans.column("producer_id"))
    first, first_known = int_values(spans.column("first_offset"))
    last, last_known = int_values(spans.column("last_offset"))
    epoch_column = spans.column("epoch")
    epoch, _ = int_values(epoch_column)
    new_producer = np.ones(producer.size, np.bool_)
    new_producer[1:] = ((item[1:] != item[:-1]) | (producer[1:] != producer[:-1])
                        | (producer_known[1:] != producer_known[:-1]))
    higher, higher_known, higher_epoch = _higher(new_producer, first, first_known, epoch.astype(np.int32))
    falls = higher_known & last_known & (last > higher)
    offset = np.where(first_known & (first > higher), first, last)
    rows = np.flatnonzero(falls)
    return pa.table({
        _ITEM: spans.column(_ITEM).take(rows),
        "producer_id": spans.column("producer_id").take(rows),
        "offset": pa.array(offset[rows], pa.int64()),
        "epoch": epoch_column.take(rows),
        "higher_epoch": pa.array(higher_epoch[rows], pa.int32()),
        "higher_offset": pa.array(higher[rows], pa.int64()),
    })


def items_falls(items: Sequence[Mapping[str, object]], order: EpochOrder,
                chunk_rows: int = CHUNK_ROWS) -> pa.RecordBatch:
    """The falls (``FALLS``) of ``items``' replicas (``reading.REPLICA_FILES_ITEM``), read from
    their files."""
    found = falls_of_spans(epoch_spans(items, order, chunk_rows))
    owners = found.column(_ITEM).to_numpy()
    columns = [pa.array([items[owner][field.name] for owner in owners], field.type) for field in REPLICA_FIELDS]
    columns += [found.column(name).combine_chunks() for name in FALLS.names[len(REPLICA_FIELDS):]]
    return pa.RecordBatch.from_arrays(columns, schema=FALLS)


def epoch_falls(item: Mapping[str, object], order: EpochOrder, chunk_rows: int = CHUNK_ROWS) -> pa.RecordBatch:
    """The falls (``FALLS``) of ``item``'s replica (``reading.REPLICA_FILES_ITEM``), read from its files."""
    return items_falls([item], order, chunk_rows)


def falls_over_files(items: Iterator[pa.RecordBatch], order: EpochOrder,
                     chunk_rows: int = CHUNK_ROWS) -> Iterator[pa.RecordBatch]:
    """``mapInArrow`` body: ``reading.REPLICA_FILES_ITEM`` rows (a replica's rows each) in, their
    replicas' falls out; replicas read together up to about ``chunk_rows`` rows (``items_falls``)."""
    together: list[dict[str, object]] = []
    rows = 0
    for batch in items:
        for item in batch.to_pylist():
            if together and rows + item_int(item, "rows") > chunk_rows:
                found = items_falls(together, order, chunk_rows)
                if found.num_rows:
                    yield found
                together, rows = [], 0
            together.append(item)
            rows += item_int(item, "rows")
    if together:
        found = items_falls(together, order, chunk_rows)
        if found.num_rows:
            yield found


def falls_frame(order: EpochOrder, table: DataFrame, files: TableManifest | None = None) -> DataFrame:
    """The falls (``FALLS``) of ``table`` as a DataFrame (see the module docstring); ``files``: the
    manifest of the files ``table`` reads as they are, if it does."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    from txn_audit.replica_tasks import tasks_over_items
    from txn_audit.schemas import spark_schema

    if read_by_tasks(files):
        return tasks_over_items(table.sparkSession, replica_file_items(files), REPLICA_FILES_ITEM,
                                functools.partial(falls_over_files, order=order), spark_schema(FALLS))
    spans = (
        table.where(order.sql_condition())
        .groupBy(*REPLICA_COLUMNS, F.col("producer_id").cast("bigint").alias("producer_id"),
                 F.col(order.epoch).cast("int").alias("epoch"))
        .agg(F.min(order.offset).cast("bigint").alias("first_offset"),
             F.max(order.offset).cast("bigint").alias("last_offset"))
    )
    higher = (Window.partitionBy(*REPLICA_COLUMNS, "producer_id").orderBy(F.col("epoch").desc_nulls_last())
              .rowsBetween(Window.unboundedPreceding, -1))
    return (
        spans.select("*", F.min("first_offset").over(higher).alias("higher_offset"),
                     F.min_by("epoch", "first_offset").over(higher).alias("higher_epoch"))
        .where(F.col("last_offset") > F.col("higher_offset"))
        .select(*REPLICA_COLUMNS, "producer_id",
                F.when(F.col("first_offset") > F.col("higher_offset"), F.col("first_offset"))
                .otherwise(F.col("last_offset")).alias("offset"),
                "epoch", F.col("higher_epoch").cast("int").alias("higher_epoch"), "higher_offset")
    )
