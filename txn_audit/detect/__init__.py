"""Findings: every problem the audit recognises, one row each (``txn_audit.schemas.FINDINGS``)."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from txn_audit.detect.rules import (
    DetectOptions,
    absorbed_findings,
    coordinator_findings,
    decode_issue_findings,
    epoch_findings,
    find_hanging_disagreement_findings,
    hw_beyond_log_end_findings,
    late_arrival_findings,
    open_transaction_findings,
    pending_offset_commit_findings,
    replica_divergence_findings,
    retention_findings,
    sequence_findings,
    stuck_lso_findings,
)
from txn_audit.reconstruct import Reconstruction

__all__ = ["DetectOptions", "SEVERITY_RANK", "detect", "FINDING_KINDS"]

SEVERITY_RANK = {"info": 0, "warning": 1, "critical": 2}

FINDING_KINDS = (
    "hanging_transaction",
    "open_transaction",
    "open_transaction_epoch_mismatch",
    "stuck_lso",
    "late_arrival",
    "absorbed_late_record",
    "coordinator_stuck",
    "missing_marker",
    "outcome_mismatch",
    "sequence_gap",
    "epoch_regression",
    "zombie_write",
    "pending_offset_commit",
    "retention_lost_open_txn",
    "replica_divergence",  # a copy of a partition differs from the copy audited
    "corrupt_batch",
    "truncated_segment",
    "unreadable_input",
    "tool_disagreement",  # an attached find-hanging output disagrees with the hanging verdict
    "invariant_violation",  # from the data-quality suites (txn_audit.quality)
)


def detect(raw: dict[str, DataFrame], recon: Reconstruction, opts: DetectOptions) -> DataFrame:
    """All findings in one partition, ordered most severe first, then by kind and location."""
    batches, markers, txn_log, commits = recon.batches, recon.markers, recon.txn_log, recon.offset_commits
    # per producer on a partition: its last marker's coordinator epoch and its newest marker's
    # time, from one aggregation that two rules read
    last_markers = markers.groupBy("topic", "partition", "producer_id").agg(
        F.max_by("coordinator_epoch", "offset").alias("last_coordinator_epoch"),
        F.max("timestamp").alias("last_marker_timestamp"),
    )
    present = recon.extent.select("topic", "partition", "covers_from")
    open_findings = open_transaction_findings(recon.partition_transactions, recon.coordinator, last_markers, opts)
    hanging = open_findings.where(F.col("kind") == "hanging_transaction")
    parts = [
        open_findings,
        stuck_lso_findings(recon.partition_stability),
        late_arrival_findings(recon.events, opts),
        absorbed_findings(recon.partition_transactions),
        coordinator_findings(txn_log, markers, last_markers, present, recon.partition_transactions, opts,
                             recon.prepare_follows),
        sequence_findings(recon.producer_events, batches),
        epoch_findings(recon.producer_events),
        pending_offset_commit_findings(commits, recon.partition_transactions),
        retention_findings(recon.partition_transactions, recon.partition_stability),
        replica_divergence_findings(recon.replica_stability, recon.partition_stability),
        hw_beyond_log_end_findings(recon.partition_stability),
        decode_issue_findings(raw["decode_issues"], raw["batches"]),
        find_hanging_disagreement_findings(raw["reported_transactions"], hanging, recon.partition_transactions,
                                           opts),
    ]
    findings = parts[0]
    for part in parts[1:]:
        findings = findings.unionByName(part)
    rank = F.when(F.col("severity") == "critical", 0).when(F.col("severity") == "warning", 1).otherwise(2)
    # findings are few: one sorted partition. A global orderBy would sample its input first,
    # running every rule twice.
    return findings.repartition(1).sortWithinPartitions(
        rank, "kind", F.col("topic").asc_nulls_last(), F.col("partition").asc_nulls_last(),
        F.col("first_offset").asc_nulls_last(), F.col("producer_id").asc_nulls_last(), "evidence",
    )
