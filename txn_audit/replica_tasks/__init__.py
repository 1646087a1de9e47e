"""Running a Python function per partition replica as a Spark task, over the raw tables' files.

Spark here only schedules: each task reads its replica's rows of the raw tables itself, with
pyarrow, from the files and row groups the manifest names (``txn_audit.manifest``,
``reading``), and may write the files of a table itself (``commit``). Reconstruct's producer
pass and the data-quality suites' replica order both run this way.

* ``read_as_is(table, replicas)``: whether a raw table's frame holds rows of ``replicas`` only,
  from its manifest: then it needs no replica join, and its files can be read per replica.
* ``tasks_over_items(spark, items, schema, body, output)``: ``body`` (a ``mapInArrow`` body) over
  ``items``, planned on the driver from the manifest and packed into a few Spark tasks by their
  weight (``pack``): a task costs about a tenth of a second before its first item, and a dump
  of many small replicas (the 50 of ``__transaction_state``) would otherwise pay it for each.
* the commit protocol of a table written by the tasks: ``start_table`` on the driver,
  ``commit_file`` in each task (its file named by ``file_name(task, new_job())``), then
  ``finish_table`` on the driver.

Only the functions of this module import pyspark; ``reading`` and ``commit`` are pure.
"""

from __future__ import annotations

import functools
import heapq
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING

import pyarrow as pa

from txn_audit.manifest import TableManifest
from txn_audit.replica_tasks.commit import commit_file, drop_table, file_name, finish_table, new_job, start_table
from txn_audit.replica_tasks.reading import READ_AHEAD, item_int, planned_groups
from txn_audit.schemas import Replica, spark_schema

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

__all__ = ["ONE_TASK_WEIGHT", "TASKS_PER_CORE", "commit_file", "drop_table", "each_item", "file_name",
           "finish_table", "new_job", "pack", "read_as_is", "replicas_rows", "start_table", "task_count",
           "tasks_over_items"]

#: tasks per core the items are packed into: more than one, so that a core that finishes early
#: takes the next task while the other still works
TASKS_PER_CORE = 2

#: items of at most this weight in all (rows, a small dump's) go to one task: a second task would
#: start a second Python worker, whose imports cost a core more than a second (1.5 s of the
#: workers' CPU on the 2.2 MB ``healthy`` dump: git log -- docs/performance.md) for a fraction
#: of that in work
ONE_TASK_WEIGHT = 100_000

#: the column of a task's row that holds its items
ITEMS_COLUMN = "items"

Body = Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]


def read_as_is(table: TableManifest | None, replicas: frozenset[Replica]) -> TableManifest | None:
    """``table`` when it describes its files' replicas and every one is among ``replicas`` (a
    frame reading those files as they are holds their rows only); None otherwise."""
    if table is None:
        return None
    present = table.replicas()
    return table if present is not None and present <= replicas else None


def replicas_rows(table: TableManifest, replicas: frozenset[Replica]) -> TableManifest:
    """The manifest of ``table``'s rows of ``replicas``, for tasks that read each replica's rows
    from its files: ``table`` when its files hold no other replica's (``read_as_is``), else its
    rows of ``replicas`` alone (``TableManifest.of_replicas``: a dump of several brokers, whose
    files hold several replicas' row groups). ``ValueError`` for files whose row groups do not
    each name their replica: ingest writes none such."""
    rows = read_as_is(table, replicas) or table.of_replicas(replicas)
    if rows is None:
        raise ValueError(f"the files of table {table.name} do not name each row group's replica")
    return rows


def rows_weight(item: Mapping[str, object]) -> float:
    """An item's weight when nothing else is known: its ``rows``."""
    return item_int(item, "rows")


def task_count(items: Sequence[Mapping[str, object]], cores: int,
               weight: Callable[[Mapping[str, object]], float] = rows_weight) -> int:
    """How many tasks ``items`` are packed into on ``cores`` cores: ``TASKS_PER_CORE`` a core, or
    one when they weigh ``ONE_TASK_WEIGHT`` or less in all."""
    if sum(weight(item) for item in items) <= ONE_TASK_WEIGHT:
        return 1
    return TASKS_PER_CORE * max(1, cores)


def pack(items: Sequence[Mapping[str, object]], tasks: int,
         weight: Callable[[Mapping[str, object]], float] = rows_weight) -> list[list[Mapping[str, object]]]:
    """``items`` in at most ``tasks`` groups of about equal weight, heaviest group first: each
    item, heaviest first, joins the lightest group so far (ties keep the items' order). An item
    heavier than a group's share has a group of its own."""
    groups: list[list[Mapping[str, object]]] = [[] for _ in range(max(1, min(tasks, len(items))))]
    loads = [(0.0, index) for index in range(len(groups))]
    for item in sorted(items, key=lambda item: -weight(item)):  # sorted() is stable
        load, index = heapq.heappop(loads)
        groups[index].append(item)
        heapq.heappush(loads, (load + weight(item), index))
    totals = {index: load for load, index in loads}
    return [group for index, group in sorted(enumerate(groups), key=lambda pair: -totals[pair[0]]) if group]


def each_item(batches: Iterator[pa.RecordBatch], *, body: Body) -> Iterator[pa.RecordBatch]:
    """``mapInArrow`` body of ``tasks_over_items``' tasks: each task's row (its items as a list)
    becomes one batch per item, as ``body`` reads them: the item's fields."""
    tasks = [packed.values for batch in batches for packed in batch.column(ITEMS_COLUMN)
             if packed.values is not None]

    def items() -> Iterator[pa.RecordBatch]:
        for members in tasks:
            fields = members.flatten()  # the fields' arrays, as many rows as the items
            names = [field.name for field in members.type]
            for index in range(len(members)):
                yield pa.RecordBatch.from_arrays([array.slice(index, 1) for array in fields], names=names)

    # the row groups the items will read, read a file's run at a time (``reading.ReadAhead``)
    READ_AHEAD.plan(group for members in tasks
                    for group in planned_groups(members.to_pylist(), pa.schema(list(members.type))))
    try:
        yield from body(items())
    finally:
        READ_AHEAD.clear()


def tasks_over_items(spark: SparkSession, items: Sequence[Mapping[str, object]], item_schema: pa.Schema,
                     body: Body, output: StructType,
                     weight: Callable[[Mapping[str, object]], float] = rows_weight) -> DataFrame:
    """``body`` (a ``mapInArrow`` body) over ``items`` (rows of ``item_schema``), which are
    packed into Spark tasks by their ``weight`` (``pack``, ``task_count``); ``body``
    receives them one item a batch. What every task needs besides its items goes with ``body``
    (e.g. bound with ``functools.partial``: pickled with the function, broadcast when large)."""
    from pyspark.sql.types import ArrayType, StructField
    from pyspark.sql.types import StructType as SparkStruct

    groups = pack(items, task_count(items, spark.sparkContext.defaultParallelism, weight), weight)
    rows = [([tuple(item[name] for name in item_schema.names) for item in group],) for group in groups]
    schema = SparkStruct([StructField(ITEMS_COLUMN, ArrayType(spark_schema(item_schema), containsNull=False))])
    work = spark.createDataFrame(spark.sparkContext.parallelize(rows, max(1, len(rows))), schema)
    return work.mapInArrow(functools.partial(each_item, body=body), output)
