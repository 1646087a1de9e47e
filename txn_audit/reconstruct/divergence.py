"""Where a copy of a partition differs from the chosen copy.

Replicas of a partition hold the same batches at the same offsets up to the leader's high
watermark; a follower may lack the tail above it (not yet fetched) and may hold an uncommitted
tail of an older leader that it would truncate. Compared over the offsets both copies hold
(from the higher log start to the lower log end), batch by batch on the base offset:

* ``conflict``: the same offset holds different batches (last offset, producer id, producer
  epoch, or CRC differ), or a batch on one side has none at its offset on the other. On the
  compacted internal topics, and on partitions the cleaner has worked on (a cleaner checkpoint
  names them), each copy is cleaned on its own: only batches both copies still hold are compared,
  and not by CRC or record count (the cleaner rewrites a batch it keeps in part);
* ``behind``: no conflict, but the copy ends below the chosen copy's high watermark: it lacks
  records every in-sync replica holds (a follower that fell behind, or a torn copy);
* ``ahead``: no conflict, but the copy goes beyond the chosen copy's log end.

The first such offset and what each copy holds there are kept for the finding.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from txn_audit.formats.layout import COMPACTED_TOPICS
from txn_audit.schemas import PARTITION_COLUMNS

__all__ = ["AHEAD", "BEHIND", "CONFLICT", "compare_replicas"]

CONFLICT = "conflict"
BEHIND = "behind"
AHEAD = "ahead"

_COMPARED = ("last_offset", "producer_id", "producer_epoch", "stored_crc", "is_control", "record_count")
#: what the cleaner changes in a batch it keeps in part (its offsets, producer and epoch stay)
_REWRITTEN_BY_THE_CLEANER = ("stored_crc", "record_count")


def _side(batches: DataFrame, prefix: str, keys: tuple[str, ...]) -> DataFrame:
    return batches.select(*keys, "base_offset", *[F.col(c).alias(prefix + c) for c in _COMPARED])


def _describe(prefix: str) -> Column:
    """A batch as a person reads it: offsets, producer, CRC."""
    what = F.when(F.col(prefix + "is_control"), F.lit("control batch ")).otherwise(F.lit("batch "))
    return F.concat(
        what, F.col(prefix + "base_offset").cast("string"), F.lit(".."), F.col(prefix + "last_offset").cast("string"),
        F.lit(" of producer "), F.col(prefix + "producer_id").cast("string"), F.lit(" epoch "),
        F.col(prefix + "producer_epoch").cast("string"), F.lit(", CRC "), F.col(prefix + "stored_crc").cast("string"),
    )


def compare_replicas(stability: DataFrame, batches: DataFrame, chosen_stability: DataFrame,
                     chosen_batches: DataFrame, *, keys: tuple[str, ...] = PARTITION_COLUMNS) -> DataFrame:
    """``stability`` (copies that are not the chosen ones, their rows told apart by ``keys``:
    ``stability.partition_stability``'s) with ``divergence``, ``divergent_offset``,
    ``replica_holds`` and ``chosen_holds`` against the chosen copy of its partition
    (``chosen_stability``, ``chosen_batches``: one per partition)."""
    partition = list(PARTITION_COLUMNS)
    pairs = (
        stability.select(*keys, F.col("log_start_offset").alias("_r_start"),
                         F.col("log_end_offset").alias("_r_end"), F.col("cleaner_offset").alias("_r_cleaned"))
        .join(chosen_stability.select("topic", "partition", F.col("log_start_offset").alias("_c_start"),
                                      F.col("log_end_offset").alias("_c_end"),
                                      F.col("high_watermark").alias("_c_hw"),
                                      F.col("cleaner_offset").alias("_c_cleaned")), partition)
        .withColumn("_compacted", F.col("topic").isin(*COMPACTED_TOPICS) | F.col("_r_cleaned").isNotNull()
                    | F.col("_c_cleaned").isNotNull())
        .withColumn("_lo", F.greatest(F.coalesce("_r_start", F.lit(0)), F.coalesce("_c_start", F.lit(0))))
        .withColumn("_hi", F.least(F.coalesce("_r_end", F.lit(0)), F.coalesce("_c_end", F.lit(0))))
        .localCheckpoint()  # a row per copy, read three times
    )
    mine = _side(batches, "r_", keys).join(F.broadcast(pairs.select(*keys)), list(keys))
    # the chosen copy's batches once for each other copy of their partition
    theirs = _side(chosen_batches, "c_", PARTITION_COLUMNS).join(F.broadcast(pairs.select(*keys)), partition)
    both = mine.join(theirs, [*keys, "base_offset"], "full_outer").join(F.broadcast(pairs), list(keys))
    in_range = (F.col("base_offset") >= F.col("_lo")) & (F.col("base_offset") < F.col("_hi"))
    one_side = F.col("r_last_offset").isNull() | F.col("c_last_offset").isNull()
    differs = F.lit(False)
    for name in _COMPARED:
        if name in _REWRITTEN_BY_THE_CLEANER:
            differs = differs | (~F.col("_compacted") & (F.col("r_" + name) != F.col("c_" + name)))
        else:
            differs = differs | (F.col("r_" + name) != F.col("c_" + name))
    conflicts = (
        both.where(in_range & F.when(one_side, ~F.col("_compacted")).otherwise(differs))
        .groupBy(*keys).agg(F.min("base_offset").alias("_conflict"))
    )
    located = (
        pairs.join(conflicts, list(keys), "left")
        .withColumn("divergence", F.when(F.col("_conflict").isNotNull(), F.lit(CONFLICT))
                    .when(F.col("_c_hw").isNotNull() & (F.coalesce("_r_end", F.lit(0)) < F.col("_c_hw")), F.lit(BEHIND))
                    .when(F.coalesce("_r_end", F.lit(0)) > F.coalesce("_c_end", F.lit(0)), F.lit(AHEAD)))
        .withColumn("divergent_offset", F.when(F.col("divergence") == CONFLICT, F.col("_conflict"))
                    .when(F.col("divergence") == BEHIND, F.coalesce("_r_end", F.lit(0)))
                    .when(F.col("divergence") == AHEAD, F.coalesce("_c_end", F.lit(0))))
        .where(F.col("divergence").isNotNull())
        .select(*keys, "divergence", "divergent_offset", "_r_end", "_c_end")
        .localCheckpoint()
    )
    replica_holds = _holding(batches, keys, located, keys, "_r_end", "replica_holds")
    chosen_holds = _holding(chosen_batches, PARTITION_COLUMNS, located, keys, "_c_end", "chosen_holds")
    found = (located.join(replica_holds, list(keys), "left").join(chosen_holds, list(keys), "left")
             .drop("_r_end", "_c_end"))
    return stability.join(found, list(keys), "left")


def _holding(batches: DataFrame, batch_keys: tuple[str, ...], located: DataFrame, keys: tuple[str, ...], end: str,
             name: str) -> DataFrame:
    """Per copy of ``located`` (its rows told apart by ``keys``): the batch of ``batches`` (joined
    on ``batch_keys``) that holds its divergent offset, as a sentence in column ``name``; nothing
    there is said too."""
    at = located.select(*keys, "divergent_offset", end)
    held = (
        _side(batches, "b_", batch_keys).withColumnRenamed("base_offset", "b_base_offset")
        .join(F.broadcast(at), list(batch_keys))
        .where((F.col("b_base_offset") <= F.col("divergent_offset"))
               & (F.col("b_last_offset") >= F.col("divergent_offset")))
        .groupBy(*keys).agg(F.first(_describe("b_")).alias("_held"))
    )
    nothing = F.when(F.coalesce(F.col(end), F.lit(0)) <= F.col("divergent_offset"),
                     F.concat(F.lit("nothing: its log ends at "), F.coalesce(F.col(end), F.lit(0)).cast("string"))
                     ).otherwise(F.lit("no batch at that offset"))
    return at.join(held, list(keys), "left").select(*keys, F.coalesce(F.col("_held"), nothing).alias(name))
