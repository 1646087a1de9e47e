"""Running a Python function per partition replica as a Spark task, over the raw tables' files.

Spark here only schedules: each task reads its replica's rows of the raw tables itself, with
pyarrow, from the files and row groups the manifest names (``txn_audit.manifest``,
``reading``), and may write the files of a table itself (``commit``). Reconstruct's producer
pass and the data-quality suites' replica order both run this way.

* ``read_as_is(table, replicas)``: whether a raw table's frame holds rows of ``replicas`` only,
  from its manifest: then it needs no replica join, and its files can be read per replica.
* ``task_per_item(spark, items, schema, body, output)``: ``body`` (a ``mapInArrow`` body) over
  ``items``, one Spark task per item; the items are planned on the driver from the manifest.
* the commit protocol of a table written by the tasks: ``start_table`` on the driver,
  ``commit_file`` in each task (its file named by ``file_name(task, new_job())``), then
  ``finish_table`` on the driver.

Only the functions of this module import pyspark; ``reading`` and ``commit`` are pure.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING

import pyarrow as pa

from txn_audit.manifest import TableManifest
from txn_audit.replica_tasks.commit import commit_file, file_name, finish_table, new_job, start_table
from txn_audit.schemas import Replica, spark_schema

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

__all__ = ["commit_file", "file_name", "finish_table", "new_job", "read_as_is", "start_table", "task_per_item"]


def read_as_is(table: TableManifest | None, replicas: frozenset[Replica]) -> TableManifest | None:
    """``table`` when it describes its files' replicas and every one is among ``replicas`` (a
    frame reading those files as they are holds their rows only); None otherwise."""
    if table is None:
        return None
    present = table.replicas()
    return table if present is not None and present <= replicas else None


def task_per_item(spark: SparkSession, items: Sequence[Mapping[str, object]], item_schema: pa.Schema,
                  body: Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]], output: StructType,
                  shared: DataFrame | None = None) -> DataFrame:
    """``body`` (a ``mapInArrow`` body) over ``items`` (rows of ``item_schema``), one Spark task
    per item: how the passes that read the tables' files spread their work. ``shared``, a frame
    of one row, adds its columns to every item (broadcast: the items keep a task each)."""
    from pyspark.sql import functions as F

    rows = [tuple(item[name] for name in item_schema.names) for item in items]
    work = spark.createDataFrame(spark.sparkContext.parallelize(rows, max(1, len(rows))), spark_schema(item_schema))
    if shared is not None:
        work = work.crossJoin(F.broadcast(shared))
    return work.mapInArrow(body, output)  # type: ignore[arg-type]  # pyspark's stub types mapInArrow's function too narrowly
