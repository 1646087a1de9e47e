"""Several replicas of one partition may sit in a dump: audit each partition once."""

from __future__ import annotations

import weakref
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import BooleanType, IntegerType, LongType, StringType, StructType

from txn_audit.reconstruct.pass_files import TableFile, read_table_file, widen_extent
from txn_audit.reconstruct.replica_choice import CopyFacts, Leadership, RankedReplica, rank_replicas, replica_name
from txn_audit.schemas import REPLICA_COLUMNS, Replica, spark_schema

REPLICA_KEYS = REPLICA_COLUMNS


#: the columns ``ranked_replicas`` adds to ``partition_offsets``
RANK_COLUMNS = ("replica_rank", "replica_name", "replica_choice_reason", "chosen_replica", "replicas",
                "log_end_offset", "cut_short", "metadata_leader", "metadata_leader_epoch", "in_isr")


@dataclass(frozen=True)
class RankedReplicas:
    """Every live replica (``partition_offsets`` rows plus ``RANK_COLUMNS``), ranked among its
    partition's copies on the driver (``ranked_replicas``). The frames are built from these rows:
    local data that Spark reads again without running a job."""

    rows: tuple[dict[str, Any], ...]
    schema: StructType
    spark: SparkSession

    @property
    def ranks(self) -> int:
        """The most copies any partition has (1 in a dump of one broker)."""
        return max((r["replica_rank"] for r in self.rows), default=1)

    def of_rank(self, rank: int) -> DataFrame:
        """The replicas ranked ``rank`` in their partitions (1: the chosen ones): at most one per
        partition, so the per-partition stages audit them as they audit the chosen ones."""
        return self.spark.createDataFrame(
            [tuple(r[f.name] for f in self.schema.fields) for r in self.rows if r["replica_rank"] == rank], self.schema)


def ranked_replicas(partition_offsets: DataFrame, metadata_partitions: DataFrame, batches: DataFrame, *,
                    as_of_ms: int | None = None) -> RankedReplicas:
    """Every live replica (``partition_offsets`` rows) with its rank among its partition's copies
    and the reason for the choice (``replica_choice.rank_replicas``), plus ``RANK_COLUMNS``; the
    KRaft metadata log's leadership is taken as of ``as_of_ms`` (the audit time; None: its last).
    A dump holds a few rows per partition here: they are ranked on the driver."""
    offsets = [r.asDict() for r in partition_offsets.where(F.col("replica_status") == "live").collect()]
    ends = _log_ends(batches)
    leaders = _leaders(metadata_partitions, offsets, as_of_ms)
    copies: dict[Replica, CopyFacts] = {}
    for row in offsets:
        replica: Replica = _replica_of(row)
        batch_end = ends.get(replica)
        floor = [v for v in (batch_end, row["last_segment_base_offset"]) if v is not None]
        copies[replica] = CopyFacts(row["broker_id"], row["log_dir"], row["topic"], row["partition"],
                                    max(floor) if floor else None, row["high_watermark"], row["leader_epoch"])
    ranked = rank_replicas(copies.values(), leaders)
    chosen = {(r.copy.topic, r.copy.partition): r.copy for r in ranked if r.rank == 1}
    count = Counter((r.copy.topic, r.copy.partition) for r in ranked)
    by_replica: dict[Replica, RankedReplica] = {
        (r.copy.broker_id, r.copy.log_dir, r.copy.topic, r.copy.partition): r for r in ranked}
    rows = []
    for row in offsets:
        r = by_replica[_replica_of(row)]
        key = (r.copy.topic, r.copy.partition)
        lead = r.leadership
        best = chosen[key]
        rows.append({**row, "replica_rank": r.rank, "replica_name": replica_name(r.copy.broker_id, r.copy.log_dir),
                     "replica_choice_reason": r.reason,
                     "chosen_replica": replica_name(best.broker_id, best.log_dir), "replicas": count[key],
                     "log_end_offset": r.copy.log_end_offset, "cut_short": r.copy.torn,
                     "metadata_leader": None if lead is None else lead.leader,
                     "metadata_leader_epoch": None if lead is None else lead.leader_epoch,
                     "in_isr": None if lead is None or r.copy.broker_id is None else r.copy.broker_id in lead.isr})
    schema = partition_offsets.schema
    for name, kind in zip(RANK_COLUMNS, (IntegerType(), StringType(), StringType(), StringType(), IntegerType(),
                                         LongType(), BooleanType(), IntegerType(), IntegerType(), BooleanType()),
                          strict=True):
        schema = schema.add(name, kind)
    return RankedReplicas(tuple(rows), schema, partition_offsets.sparkSession)


def chosen_replicas(ranked: RankedReplicas) -> DataFrame:
    """The replica that speaks for each partition (``ranked_replicas``' rank 1): one row per partition."""
    return ranked.of_rank(1)


def replica_extents(batches: DataFrame) -> dict[Replica, tuple[int | None, int | None]] | None:
    """Per replica of ``batches``: its highest ``last_offset`` and lowest ``first_timestamp``, from
    the raw files' footers; None unless ``batches`` is a plain read of files whose footers give
    both for every row group (what ingest writes). No row is read."""
    files = table_files(batches)
    if files is None or any(f.replica_extents is None for f in files):
        return None
    extents: dict[Replica, tuple[int | None, int | None]] = {}
    for table_file in files:
        for replica, highest, lowest in table_file.replica_extents or ():
            widen_extent(extents, replica, highest, lowest)
    return extents


def _log_ends(batches: DataFrame) -> dict[Replica, int]:
    """Per replica, one past its last batch: from the raw files' footers when they give it, else
    one aggregation."""
    extents = replica_extents(batches)
    if extents is not None:
        return {replica: highest + 1 for replica, (highest, _lowest) in extents.items() if highest is not None}
    return {_replica_of(row.asDict()): row["_last"] + 1
            for row in batches.groupBy(*REPLICA_KEYS).agg(F.max("last_offset").alias("_last")).collect()}


def _replica_of(row: Mapping[str, Any]) -> Replica:
    return (row["broker_id"], row["log_dir"], row["topic"], row["partition"])


def _leaders(metadata_partitions: DataFrame, offsets: list[dict[str, Any]],
             as_of_ms: int | None) -> dict[tuple[str, int], Leadership]:
    """Each partition's leadership at ``as_of_ms`` in the newest copy of the KRaft metadata log in
    the dump (highest end offset, then lowest broker id): its last state stamped then or before
    (its first, if every one is later). A dump copied after the brokers stopped ends with the
    shutdown's leader moves, which say nothing of the traffic audited. Topics are matched by
    name, or by topic id where the copy lacks the name."""
    rows = [r.asDict() for r in metadata_partitions.collect()]
    if not rows:
        return {}
    newest = min(rows, key=lambda r: (-r["metadata_end_offset"],
                                      r["broker_id"] if r["broker_id"] is not None else 1 << 31, r["log_dir"]))
    names = {row["topic_id"]: row["topic"] for row in offsets if row["topic_id"] is not None}
    states: dict[tuple[str, int], dict[str, Any]] = {}
    for r in sorted(rows, key=lambda r: r["record_offset"]):
        if (r["broker_id"], r["log_dir"]) != (newest["broker_id"], newest["log_dir"]):
            continue
        topic = r["topic"] or names.get(r["topic_id"])
        if topic is None:
            continue
        key = (topic, r["partition"])
        if key not in states or as_of_ms is None or r["record_timestamp"] <= as_of_ms:
            states[key] = r
    return {key: Leadership(r["leader"], r["leader_epoch"], tuple(r["isr"] or ()), r["record_offset"])
            for key, r in states.items()}


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
        chosen = frozenset(tuple(row) for row in replicas.select(*REPLICA_KEYS).collect())
        if _plan_node(replicas) in ("LogicalRDD", "LocalRelation"):  # a checkpoint, local rows: both fixed
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
