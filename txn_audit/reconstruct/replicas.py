"""Several replicas of one partition may sit in a dump: audit each partition once."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import BooleanType, IntegerType, LongType, StringType, StructType

from txn_audit.manifest import TableManifest
from txn_audit.reconstruct.replica_choice import CopyFacts, Leadership, RankedReplica, rank_replicas, replica_name
from txn_audit.replica_tasks import read_as_is
from txn_audit.replica_tasks.reading import read_table
from txn_audit.schemas import REPLICA_COLUMNS, Replica

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

    def keys(self, *ranks: int) -> frozenset[Replica]:
        """The replicas ranked one of ``ranks`` (1: the chosen ones), as ``on_replicas`` takes them."""
        return frozenset(_replica_of(r) for r in self.rows if r["replica_rank"] in ranks)

    def rows_of(self, *ranks: int) -> list[dict[str, Any]]:
        """The rows of the replicas ranked one of ``ranks`` (1: the chosen ones), on the driver."""
        return [r for r in self.rows if r["replica_rank"] in ranks]

    def of_rank(self, *ranks: int) -> DataFrame:
        """The replicas ranked one of ``ranks`` in their partitions (1: the chosen ones). One rank
        holds at most one copy per partition, so the per-partition stages audit its replicas as
        they audit the chosen ones; several ranks need ``told_apart``."""
        return self.spark.createDataFrame(
            [tuple(r[f.name] for f in self.schema.fields) for r in self.rows_of(*ranks)], self.schema)

    def told_apart(self, *ranks: int) -> bool:
        """Whether the replicas ranked one of ``ranks`` can be audited at once, their rows told
        apart by ``schemas.COPY_COLUMNS``: each names its broker, and no two copies of a partition
        among them share one (a dump of several brokers' folders)."""
        copies = [(r["broker_id"], r["topic"], r["partition"]) for r in self.rows if r["replica_rank"] in ranks]
        return all(broker is not None for broker, _topic, _partition in copies) and len(set(copies)) == len(copies)


def ranked_replicas(partition_offsets: DataFrame, *, offsets_files: TableManifest, metadata_files: TableManifest,
                    batch_files: TableManifest, as_of_ms: int | None = None) -> RankedReplicas:
    """Every live replica (``partition_offsets`` rows, the frame over ``offsets_files``) with its
    rank among its partition's copies and the reason for the choice
    (``replica_choice.rank_replicas``), plus ``RANK_COLUMNS``; the KRaft metadata log's
    leadership (``metadata_files``: ``metadata_partitions``' files) is taken as of ``as_of_ms``
    (the audit time; None: its last). A dump holds a few rows per partition here: they are read
    on the driver (``small_table_rows``) and ranked there. Each replica's log end comes from
    ``batch_files``, the manifest of the batches' files (``_log_ends``)."""
    offsets = sorted((r for r in small_table_rows(offsets_files) if r["replica_status"] == "live"),
                     key=_replica_order)
    ends = _log_ends(batch_files)
    leaders = _leaders(small_table_rows(metadata_files), offsets, as_of_ms)
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
    # a new StructType: ``add`` changes its own, and a frame's ``schema`` is the one it keeps
    schema = StructType(list(partition_offsets.schema.fields))
    for name, kind in zip(RANK_COLUMNS, (IntegerType(), StringType(), StringType(), StringType(), IntegerType(),
                                         LongType(), BooleanType(), IntegerType(), IntegerType(), BooleanType()),
                          strict=True):
        schema = schema.add(name, kind)
    return RankedReplicas(tuple(rows), schema, partition_offsets.sparkSession)


def chosen_replicas(ranked: RankedReplicas) -> DataFrame:
    """The replica that speaks for each partition (``ranked_replicas``' rank 1): one row per partition."""
    return ranked.of_rank(1)


def _log_ends(files: TableManifest) -> dict[Replica, int]:
    """Per replica, one past its last batch, from ``files``, the manifest of the batches' files
    (each row group's extent: what ingest writes)."""
    extents = files.extents()
    if extents is None:
        raise ValueError("the batches' files do not give each row group's extent")
    return {replica: highest + 1 for replica, (highest, _lowest) in extents.items() if highest is not None}


def _replica_of(row: Mapping[str, Any]) -> Replica:
    return (row["broker_id"], row["log_dir"], row["topic"], row["partition"])


def small_table_rows(files: TableManifest) -> list[dict[str, Any]]:
    """Every row of a table of a few rows per partition, as dicts, read on the driver with
    pyarrow from ``files`` (``reading.read_table``: no Spark job)."""
    rows: list[dict[str, Any]] = read_table(files).to_pylist()
    return rows


def _replica_order(row: Mapping[str, Any]) -> tuple[int, str, str, int]:
    """Rows in the order of their replicas, whichever way they were read."""
    broker = row["broker_id"]
    return (-1 if broker is None else broker, row["log_dir"] or "", row["topic"] or "", row["partition"] or 0)


def _leaders(rows: list[dict[str, Any]], offsets: list[dict[str, Any]],
             as_of_ms: int | None) -> dict[tuple[str, int], Leadership]:
    """Each partition's leadership at ``as_of_ms`` in the newest copy of the KRaft metadata log in
    the dump (highest end offset, then lowest broker id): its last state stamped then or before
    (its first, if every one is later). A dump copied after the brokers stopped ends with the
    shutdown's leader moves, which say nothing of the traffic audited. Topics are matched by
    name, or by topic id where the copy lacks the name."""
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
        # a snapshot's state has no time (null): it is in place from before any record
        if key not in states or as_of_ms is None or r["record_timestamp"] is None or r["record_timestamp"] <= as_of_ms:
            states[key] = r
    return {key: Leadership(r["leader"], r["leader_epoch"], tuple(r["isr"] or ()), r["record_offset"])
            for key, r in states.items()}


def on_replicas(df: DataFrame, replicas: DataFrame, keys: frozenset[Replica], files: TableManifest) -> DataFrame:
    """Rows of ``df`` that belong to one of ``replicas`` (null-safe on the broker id); ``keys``
    are the same replicas (``RankedReplicas.keys``), ``files`` the manifest of the files ``df``
    reads as they are.

    When the manifest shows that every row of those files belongs to one of ``keys`` (the usual
    dump: one replica per partition), that is ``df`` itself, and no row is joined: the join
    hashes four keys, two of them strings, for every row read.
    """
    if read_as_is(files, keys) is not None:
        return df
    r = replicas.select(*[F.col(k).alias(f"_r_{k}") for k in REPLICA_KEYS])
    cond = [df[k].eqNullSafe(r[f"_r_{k}"]) for k in REPLICA_KEYS]
    return df.join(F.broadcast(r), cond, "left_semi")
