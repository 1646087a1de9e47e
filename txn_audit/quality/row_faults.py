"""The rows of a raw table that break one of its rules on one row (``checks.RowRule``): each
with the table's ``checks.FAULT_COLUMNS`` and, per rule, its flag (``RowRule.flag``: true where
the row breaks it).

pyarrow tests every rule of the table at once, where the rows are read: a filter on any rule
broken, then the flags of the few rows it keeps (``faults_of``). When the table's frame reads the
files ingest wrote as they are, their manifest is given (``txn_audit.manifest``): the driver
reads them itself, up to ``DRIVER_ROWS`` rows, and tasks read a few files each beyond
(``txn_audit.replica_tasks``). Any other frame is tested a batch of its rows at a time, in its
own tasks (``mapInArrow``). Spark is handed the faults alone, usually none: no scan of every row
in the JVM.
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.dataset as ds

from txn_audit.manifest import TableManifest
from txn_audit.quality.checks import FAULT_COLUMNS, ROW_RULES, RowRule
from txn_audit.replica_tasks.reading import item_int, item_list, table_batches, table_dataset
from txn_audit.schemas import ALL_TABLES, in_ms

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

__all__ = ["DRIVER_ROWS", "FILES_ITEM", "fault_schema", "faults_frame", "faults_of", "rules_of"]

#: most rows of a table whose files the driver tests itself: pyarrow tests the 1.3 M batches of
#: the realistic 1 GiB dump in 0.23 s on one core, and its 0.53 M coordinator records in 0.22 s;
#: in paired scans of that dump, tasks added 1.8 s to the Python workers' CPU, the driver 1.5 s to
#: its own, and either saved the JVM about 3 s (git log -- docs/performance.md)
DRIVER_ROWS = 20_000_000

#: a task's work: files of the table, and how many rows they hold
FILES_ITEM = pa.schema([
    pa.field("files", pa.list_(pa.string())),
    pa.field("rows", pa.int64()),
])


def rules_of(table: str) -> tuple[RowRule, ...]:
    """``table``'s rules on one row."""
    return tuple(rule for rule in ROW_RULES if rule.table == table)


def fault_schema(table: str) -> pa.Schema:
    """The faults of ``table``: its ``FAULT_COLUMNS``, each nullable (a null where the table's
    schema allows none is a fault of a frame's rows), then one flag per rule."""
    columns = in_ms(ALL_TABLES[table])
    return pa.schema([*(columns.field(name).with_nullable(True) for name in FAULT_COLUMNS[table]),
                      *(pa.field(rule.flag, pa.bool_()) for rule in rules_of(table))])


def faults_of(rows: ds.Dataset, table: str) -> pa.Table:
    """The rows of ``rows`` (``table``'s, with at least its ``FAULT_COLUMNS``) that break one of
    its rules, as ``fault_schema(table)``: one pass of a filter over them all, one projection of
    the flags over the few it keeps; in one chunk, not the scan's, one per batch read, mostly
    empty (pyspark 4.1's ``createDataFrame`` reads a table of such chunks as no rows)."""
    rules = rules_of(table)
    columns = list(FAULT_COLUMNS[table])
    broken = functools.reduce(operator.or_, (rule.broken for rule in rules))
    found = rows.to_table(columns=columns, filter=broken, use_threads=False)
    flags = ds.dataset(found).to_table(columns={**{name: ds.field(name) for name in columns},
                                                **{rule.flag: rule.broken for rule in rules}})
    return flags.cast(fault_schema(table)).combine_chunks()


def faults_in_files(items: Iterator[pa.RecordBatch], *, table: str) -> Iterator[pa.RecordBatch]:
    """``mapInArrow`` body: ``FILES_ITEM`` rows in, the faults of their files out."""
    for batch in items:
        for item in batch.to_pylist():
            yield from faults_of(table_dataset(item_list(item, "files"), in_ms(ALL_TABLES[table])), table).to_batches()


def faults_in_rows(batches: Iterator[pa.RecordBatch], *, table: str) -> Iterator[pa.RecordBatch]:
    """``mapInArrow`` body: ``table``'s rows in, their faults out."""
    for batch in batches:
        yield from faults_of(ds.dataset(pa.Table.from_batches([batch])), table).to_batches()


def _file_items(files: TableManifest) -> list[Mapping[str, object]]:
    """One ``FILES_ITEM`` row per file of ``files``, largest first."""
    items: list[Mapping[str, object]] = [
        {"files": [files.uri(entry)], "rows": entry.rows} for entry in files.files]
    return sorted(items, key=lambda item: -item_int(item, "rows"))


def faults_frame(table: str, frame: DataFrame, files: TableManifest | None = None) -> DataFrame:
    """The faults of ``table``'s rows ``frame`` (see the module docstring); ``files``: the manifest
    of the files ``frame`` reads as they are, if it does."""
    from txn_audit.replica_tasks import tasks_over_items
    from txn_audit.schemas import spark_schema

    spark = frame.sparkSession
    schema = fault_schema(table)
    if files is None:
        body = functools.partial(faults_in_rows, table=table)
        return frame.select(*FAULT_COLUMNS[table]).mapInArrow(body, spark_schema(schema))
    if files.rows > DRIVER_ROWS:
        return tasks_over_items(spark, _file_items(files), FILES_ITEM,
                                functools.partial(faults_in_files, table=table), spark_schema(schema))
    # file by file, a batch at a time (``table_batches``): a dataset would scan the files' row
    # groups, one per replica, each on its own
    parts = [faults_of(ds.dataset(pa.Table.from_batches([batch])), table)
             for batch in table_batches(files, FAULT_COLUMNS[table])]
    found = pa.concat_tables(parts) if parts else None
    if found is None or not found.num_rows:
        found = schema.empty_table()  # one empty chunk: pyspark cannot convert a table of none
    return spark.createDataFrame(found, spark_schema(schema))
