"""What answered each Prepare* record, computed by Spark windows over every marker: a reference
for what the producer pass's tasks write (``reconstruct.prepare_follows``), which the rules read.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from txn_audit.reconstruct import prepare_records

__all__ = ["prepare_marker_matches"]


def prepare_marker_matches(txn_log: DataFrame, markers: DataFrame) -> DataFrame:
    """Every Prepare* record, exploded per listed partition, with what followed it
    (``reconstruct.FOLLOW_FIELDS``' columns): ``next_state``, the id's next coordinator record
    (null when the Prepare* is the latest record); ``has_marker``, whether the producer's next
    event on that partition, by time, is a marker of the prepared epoch."""
    return _matched_in_spark(prepare_records(txn_log), markers)


def _matched_in_spark(prep: DataFrame, markers: DataFrame) -> DataFrame:
    """``prep`` with ``has_marker``, ``next_marker_type`` and ``next_marker_offset``, from every
    marker ordered with the Prepare* records."""
    prep = prep.withColumn("is_prepare", F.lit(True))
    # a marker can only follow a Prepare* of its producer on that partition written no later than
    # itself: the others are left out before the ordering (a decided transaction's Prepare* is
    # usually compacted away, so most markers are)
    since = F.broadcast(prep.groupBy("topic", "partition", "producer_id").agg(F.min("ts").alias("_since")))
    mk = (
        markers.join(since, ["topic", "partition", "producer_id"])
        .where(F.col("timestamp") >= F.col("_since"))
        .select(
            "topic", "partition", "producer_id", F.col("producer_epoch").alias("epoch"),
            F.col("timestamp").alias("ts"), F.col("offset").alias("marker_offset"), "marker_type",
            F.lit(False).alias("is_prepare"),
        )
    )
    # a marker is written after its Prepare* was appended, so on one clock it never precedes it;
    # Prepare* records of one time in log order, markers of one time in offset order
    order = Window.partitionBy("topic", "partition", "producer_id").orderBy(
        "ts", F.col("is_prepare").desc(), "txn_log_partition", "txn_log_offset", "marker_offset")
    u = prep.unionByName(mk, allowMissingColumns=True)
    nxt = (
        u.withColumn("next_is_marker", F.lead(~F.col("is_prepare")).over(order))
        .withColumn("next_epoch", F.lead("epoch").over(order))
        .withColumn("next_marker_type", F.lead("marker_type").over(order))
        .withColumn("next_marker_offset", F.lead("marker_offset").over(order))
    )
    matched = F.coalesce("next_is_marker", F.lit(False)) & (F.col("next_epoch") == F.col("epoch"))
    return (
        nxt.where(F.col("is_prepare"))
        .withColumn("has_marker", matched)
        .drop("is_prepare", "next_is_marker", "next_epoch", "marker_offset", "marker_type")
    )
