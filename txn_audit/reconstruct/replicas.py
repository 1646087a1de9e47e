"""Several replicas of one partition may sit in a dump: audit each partition once."""

from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

REPLICA_KEYS = ("broker_id", "log_dir", "topic", "partition")


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
    """Rows of ``df`` that belong to one of ``replicas`` (null-safe on the broker id)."""
    r = replicas.select(*[F.col(k).alias(f"_r_{k}") for k in REPLICA_KEYS])
    cond = [df[k].eqNullSafe(r[f"_r_{k}"]) for k in REPLICA_KEYS]
    return df.join(F.broadcast(r), cond, "left_semi")
