"""Last stable offset per partition, computed the way the partition leader does.

``firstUnstable`` is the first offset of the earliest transaction that is still open, or whose
marker is not yet below the high watermark (unreplicated), clamped up to the log start
offset; ``LSO = firstUnstable if firstUnstable < HW else HW``. The HW is the one the broker
checkpointed (``replication-offset-checkpoint``), or for a text dump the one an offsets file
beside it reports; without either the log end is used and ``hw_source`` says so
(``checkpoint`` | ``offsets_file`` | ``log_end``). A HW beyond the replica's own log end is
capped there (``capped_at_log_end``): no LSO or held-records figure is ever reported beyond the
log it was computed from.

Computed per replica: for the chosen replica of each partition, and in the same way for each
other copy (every other copy at once, told apart by its broker, or one rank at a time).
"""

from __future__ import annotations

import pyarrow as pa
from pyspark.sql import Column, DataFrame, Row
from pyspark.sql import functions as F

from txn_audit.manifest import TableManifest, widen_extent
from txn_audit.schemas import HW_CAPPED, PARTITION_COLUMNS, PARTITION_EXTENT, REPLICA_COLUMNS

#: the most keys a filter of the batches names, so that Parquet answers it from its row groups'
#: statistics: the replicas whose records are held (``held_ranges``), the files and segments a
#: rule reads (``detect.rules.batches_named``); with more, every batch is read
NAMED_MAX = 1024

#: replica columns ``partition_stability`` carries through from its ``replicas`` rows
PASSED_THROUGH = ("cleaner_offset", "replica_rank", "replica_name", "replica_choice_reason", "chosen_replica",
                  "replicas", "leader_epoch", "metadata_leader", "metadata_leader_epoch", "in_isr")


def _held() -> Column:
    """The partition's last stable offset is below its high watermark: records are held."""
    return F.col("last_stable_offset") < F.col("hw")


def partition_extent(batches: DataFrame) -> DataFrame:
    """Per (topic, partition) of ``batches``: ``covers_from``, the oldest ``first_timestamp``: from
    when on the dump holds its data (``PARTITION_EXTENT``), by one aggregation over every batch.
    ``manifest_extent`` gives the same without reading a row when the manifest knows it."""
    return batches.groupBy("topic", "partition").agg(F.min("first_timestamp").alias("covers_from"))


def manifest_extent(files: TableManifest | None) -> pa.Table | None:
    """``partition_extent`` on the driver, no row read, from ``files``, the manifest of the
    batches' rows in the raw tables' files (``replica_tasks.replicas_rows``), when it gives every
    row group's extent (what ingest writes, ``TableManifest.extents``); else None."""
    extents = None if files is None else files.extents()
    if extents is None:
        return None
    per_partition: dict[tuple[str | None, int | None], tuple[int | None, int | None]] = {}
    topic, partition = REPLICA_COLUMNS.index("topic"), REPLICA_COLUMNS.index("partition")
    for replica, (_highest, lowest) in extents.items():
        key: tuple[str | None, int | None] = (replica[topic], replica[partition])  # type: ignore[assignment]  # REPLICA_COLUMNS' topic and partition
        widen_extent(per_partition, key, None, lowest)
    rows = [{"topic": t, "partition": p, "covers_from": lowest}
            for (t, p), (_none, lowest) in sorted(per_partition.items())]
    return pa.Table.from_pylist(rows, schema=PARTITION_EXTENT)


def partition_stability(
    batches: DataFrame, ptx: DataFrame, replicas: DataFrame, *, as_of_ms: int,
    keys: tuple[str, ...] = PARTITION_COLUMNS,
) -> DataFrame:
    """One row per replica of ``replicas`` (``replicas.ranked_replicas`` rows) with the columns of
    ``schemas._STABILITY`` and the replica columns; the batches are read again only for replicas
    whose records are held. ``keys`` tell the replicas' rows apart in every frame: a partition's
    (``PARTITION_COLUMNS``) when ``replicas`` hold at most one copy per partition (the chosen
    ones, or those of one rank), a copy's (``COPY_COLUMNS``) for several ranks at once.

    The HW is never beyond the replica's own log end: a checkpoint that says more (a copy cut
    short, ``cut_short``: its log lost its tail after the checkpoint was written) is capped there, ``hw_source`` says
    ``capped_at_log_end`` and ``checkpoint_high_watermark`` keeps what the file said."""
    capped = F.coalesce(F.col("cut_short"), F.lit(False))  # replica_choice.CopyFacts.torn
    parts = (
        replicas.select(*REPLICA_COLUMNS, "high_watermark", "hw_source", "log_start_offset", "log_end_offset",
                        "cut_short", *[c for c in PASSED_THROUGH if c in replicas.columns])
        .withColumn("checkpoint_high_watermark", F.col("high_watermark"))
        .withColumn("hw_source", F.when(capped, F.lit(HW_CAPPED))
                    .when(F.col("high_watermark").isNotNull(), F.coalesce("hw_source", F.lit("checkpoint")))
                    .otherwise(F.lit("log_end")))
        .withColumn("hw", F.when(capped, F.col("log_end_offset"))
                    .otherwise(F.coalesce("high_watermark", "log_end_offset", "log_start_offset", F.lit(0))))
        .withColumn("high_watermark", F.when(capped, F.col("log_end_offset")).otherwise(F.col("high_watermark")))
        .withColumn("log_end_offset", F.coalesce("log_end_offset", "log_start_offset"))
    )
    # per-partition frames are one row per partition: broadcast them rather than shuffle the big side
    txns = ptx.join(F.broadcast(parts.select(*keys, "hw")), list(keys))
    unstable = txns.where(
        F.col("first_offset").isNotNull()
        & ((F.col("state") == "open") | (F.col("marker_offset").isNotNull() & (F.col("marker_offset") >= F.col("hw"))))
    )
    first_unstable = unstable.groupBy(*keys).agg(
        F.min("first_offset").alias("first_unstable_offset"),
        F.min_by("producer_id", "first_offset").alias("culprit_producer_id"),
        F.min_by("max_epoch", "first_offset").alias("culprit_producer_epoch"),
        F.min_by("transactional_id", "first_offset").alias("culprit_transactional_id"),
        F.min_by("first_timestamp", "first_offset").alias("culprit_first_timestamp"),
        F.min_by("producer_last_timestamp", "first_offset").alias("culprit_last_timestamp"),
    )
    open_count = ptx.where(F.col("state") == "open").groupBy(*keys).agg(
        F.count(F.lit(1)).alias("open_transactions")
    )
    fu = F.greatest(F.col("first_unstable_offset"), F.coalesce("log_start_offset", F.lit(0)))
    stab = (
        parts.join(first_unstable, list(keys), "left")
        .join(open_count, list(keys), "left")
        .withColumn("open_transactions", F.coalesce("open_transactions", F.lit(0)))
        .withColumn(
            "last_stable_offset",
            F.when(F.col("first_unstable_offset").isNotNull() & (fu < F.col("hw")), fu).otherwise(F.col("hw")),
        )
        .withColumn("culprit_first_offset", F.col("first_unstable_offset"))  # before the clamp to the log start
        .withColumn("first_unstable_offset", F.when(F.col("first_unstable_offset").isNotNull(), fu))
        .localCheckpoint()  # one row per replica, read twice below
    )
    held_partitions = stab.where(_held()).select(*keys, "last_stable_offset", "hw")
    named = held_partitions.limit(NAMED_MAX + 1).collect()
    if not named:  # the usual case: no partition holds records, no batch need be read
        return _with_held(stab, None, as_of_ms, keys)
    read = batches.where(~F.col("is_control"))
    if len(named) <= NAMED_MAX:
        read = read.where(held_ranges(named, keys))
    held = (
        read
        .join(F.broadcast(held_partitions), list(keys))
        .where((F.col("last_offset") >= F.col("last_stable_offset")) & (F.col("base_offset") < F.col("hw")))
        .groupBy(*keys)
        .agg(
            # records of batches straddling the LSO or HW are counted by their offsets inside the range
            F.sum(
                F.least(F.col("last_offset"), F.col("hw") - 1)
                - F.greatest(F.col("base_offset"), F.col("last_stable_offset"))
                + 1
            ).alias("held_records"),
            F.sum("size_bytes").alias("held_bytes"),
        )
    )
    return _with_held(stab, held, as_of_ms, keys)


def held_ranges(held: list[Row], keys: tuple[str, ...]) -> Column:
    """A filter of the batches that may hold records of the ``held`` replicas (rows of ``keys``,
    ``last_stable_offset`` and ``hw``, both set where records are held): on one of them, ending
    at or after its LSO and starting below its HW. Parquet answers it from its row groups'
    statistics (a row group holds a part of one segment's batches, in offset order), so the
    batches of other partitions and the older segments are not read. A key with a null matches
    nothing, as in the join."""
    condition = F.lit(False)
    for row in held:
        values = [row[key] for key in keys]
        if None in values:
            continue
        term = (F.col("last_offset") >= row["last_stable_offset"]) & (F.col("base_offset") < row["hw"])
        for key, value in zip(keys, values, strict=True):
            term = (F.col(key) == value) & term
        condition = condition | term
    return condition


def _with_held(stab: DataFrame, held: DataFrame | None, as_of_ms: int, keys: tuple[str, ...]) -> DataFrame:
    """``stab`` with what ``held`` (records and bytes per replica of ``keys``, None: nothing held) says."""
    held_since = F.when(_held(), F.coalesce("culprit_first_timestamp", "culprit_last_timestamp"))
    if held is None:
        nothing = F.lit(None).cast("long")
        joined = stab.withColumn("held_records", nothing).withColumn("held_bytes", nothing)
    else:
        joined = stab.join(held, list(keys), "left")
    return (
        joined
        .withColumn("held_records", F.coalesce("held_records", F.lit(0)))
        .withColumn("held_bytes", F.coalesce("held_bytes", F.lit(0)))
        .withColumn("held_since_timestamp", held_since)
        .withColumn("held_ms", F.lit(as_of_ms) - held_since)
        .withColumn("culprit_producer_id", F.when(held_since.isNotNull(), F.col("culprit_producer_id")))
        .withColumn("culprit_producer_epoch", F.when(held_since.isNotNull(), F.col("culprit_producer_epoch")))
        .withColumn("culprit_transactional_id", F.when(held_since.isNotNull(), F.col("culprit_transactional_id")))
        .withColumn("culprit_first_offset", F.when(held_since.isNotNull(), F.col("culprit_first_offset")))
        .withColumn("effective_high_watermark", F.col("hw"))
        .withColumn("lso_below_hw", F.coalesce(_held(), F.lit(False)))
    )
