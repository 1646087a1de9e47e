"""Several replicas of one partition may sit in a dump: audit each partition once."""

from __future__ import annotations

import weakref
from collections.abc import Callable, Iterator, Mapping

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from txn_audit.reconstruct.pass_files import TableFile, read_table_file
from txn_audit.schemas import REPLICA_COLUMNS, Replica, spark_schema

REPLICA_KEYS = REPLICA_COLUMNS


def chosen_replicas(partition_offsets: DataFrame) -> DataFrame:
    """One live replica per (topic, partition): highest high watermark, then most segments,
    then lowest broker id, so the choice is deterministic."""
    order = Window.partitionBy("topic", "partition").orderBy(
        F.col("high_watermark").desc_nulls_last(),
        F.col("live_segments").desc(),
        F.col("broker_id").asc_nulls_last(),
        F.col("log_dir").asc(),
    )
    return (
        partition_offsets.where(F.col("replica_status") == "live")
        .withColumn("_rank", F.row_number().over(order))
        .where(F.col("_rank") == 1)
        .drop("_rank")
    )


def on_replicas(df: DataFrame, replicas: DataFrame) -> DataFrame:
    """Rows of ``df`` that belong to one of ``replicas`` (null-safe on the broker id).

    When ``df`` reads a table's files as they are and their footers show that every row belongs
    to one of ``replicas`` (the usual dump: one replica per partition), that is ``df`` itself,
    and no row is joined: the join hashes four keys, two of them strings, for every row read.
    """
    present = _replicas_in_files(df)
    if present is not None and present <= _chosen(replicas):
        return df
    r = replicas.select(*[F.col(k).alias(f"_r_{k}") for k in REPLICA_KEYS])
    cond = [df[k].eqNullSafe(r[f"_r_{k}"]) for k in REPLICA_KEYS]
    return df.join(F.broadcast(r), cond, "left_semi")


#: the chosen replicas of each materialized ``replicas`` frame, collected once (one row per partition)
_CHOSEN: weakref.WeakKeyDictionary[DataFrame, frozenset[Replica]] = weakref.WeakKeyDictionary()


def _plan_node(df: DataFrame) -> str | None:
    """The class of the top node of ``df``'s analyzed plan (None where it cannot be told)."""
    try:
        return str(df._jdf.queryExecution().analyzed().getClass().getSimpleName())
    except AttributeError:  # not a classic DataFrame
        return None


def _chosen(replicas: DataFrame) -> frozenset[Replica]:
    chosen = _CHOSEN.get(replicas)
    if chosen is None:
        chosen = frozenset(tuple(row) for row in replicas.select(*REPLICA_KEYS).collect())  # type: ignore[misc]
        if _plan_node(replicas) == "LogicalRDD":  # a checkpoint: its rows cannot change
            _CHOSEN[replicas] = chosen
    return chosen


def _replicas_in_files(df: DataFrame) -> set[Replica] | None:
    """The replicas the footers of ``df``'s files list; None unless ``df`` is a plain read of
    files that all list theirs (a filtered or changed frame may hold other rows)."""
    files = table_files(df)
    if files is None:
        return None
    return set().union(*(f.replicas for f in files))


#: ``table_files`` of each frame, read once
_FILES: weakref.WeakKeyDictionary[DataFrame, list[TableFile] | None] = weakref.WeakKeyDictionary()


def table_files(df: DataFrame) -> list[TableFile] | None:
    """The files ``df`` reads, with the replicas and row counts their footers list; None unless
    ``df`` is a plain read of files that all list their replicas and that pyarrow can open."""
    if df in _FILES:
        return _FILES[df]
    found = _read_footers(df)
    _FILES[df] = found
    return found


def _read_footers(df: DataFrame) -> list[TableFile] | None:
    if _plan_node(df) != "LogicalRelation":
        return None
    uris = df.inputFiles()
    if not uris:
        return None
    found = []
    for uri in uris:
        table_file = read_table_file(uri)
        if table_file is None:
            return None
        found.append(table_file)
    return found


def task_per_item(spark: SparkSession, items: list[Mapping[str, object]], item_schema: pa.Schema,
                  body: Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]], output: StructType,
                  shared: DataFrame | None = None) -> DataFrame:
    """``body`` (a ``mapInArrow`` body) over ``items`` (rows of ``item_schema``), one Spark task
    per item: how the passes that read the tables' files spread their work. ``shared``, a frame
    of one row, adds its columns to every item (broadcast: the items keep a task each)."""
    rows = [tuple(item[name] for name in item_schema.names) for item in items]
    work = spark.createDataFrame(spark.sparkContext.parallelize(rows, max(1, len(rows))), spark_schema(item_schema))
    if shared is not None:
        work = work.crossJoin(F.broadcast(shared))
    return work.mapInArrow(body, output)
