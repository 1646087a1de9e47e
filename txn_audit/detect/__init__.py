"""Findings: every problem the audit recognises, one row each (``txn_audit.schemas.FINDINGS``)."""

from __future__ import annotations

import shutil
from collections.abc import Callable, Mapping, Sequence
from enum import Enum
from functools import partial
from pathlib import Path
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from txn_audit.detect.rules import (
    DetectOptions,
    absorbed_findings,
    bare_markers,
    coordinator_epoch_findings,
    coordinator_findings,
    decode_issue_findings,
    duplicate_marker_findings,
    epoch_findings,
    find_hanging_disagreement_findings,
    find_hanging_outputs,
    hw_beyond_log_end_findings,
    last_markers_of,
    late_arrival_findings,
    open_transaction_findings,
    open_transactions,
    pending_offset_commit_findings,
    prepare_marker_matches,
    replica_divergence_findings,
    retention_findings,
    sequence_findings,
    stuck_lso_findings,
    text_files,
)
from txn_audit.reconstruct import Reconstruction
from txn_audit.schemas import FINDINGS, spark_schema
from txn_audit.severity import SEVERITIES
from txn_audit.spark import side_by_side
from txn_audit.tables import RawTables

__all__ = ["DetectOptions", "FINDING_KINDS", "add_findings", "detect", "finding_order", "rule_builders",
           "rule_findings", "write_detected", "write_findings"]

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
    "duplicate_marker",  # one decision's marker written twice on a partition
    "epoch_bumped_twice",  # a fence abort bumped the epoch twice (KAFKA-19367)
    "epoch_exhausted",  # epoch 32767 kept its producer id (KAFKA-20090)
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


def detect(raw: RawTables | Mapping[str, DataFrame], recon: Reconstruction, opts: DetectOptions) -> DataFrame:
    """All findings in one partition, in the one order (``finding_order``)."""
    return _ordered(_union(rule_findings(raw, recon, opts)))


def write_detected(raw: RawTables | Mapping[str, DataFrame], recon: Reconstruction, opts: DetectOptions,
                   path: str | Path) -> None:
    """Write the ``findings`` table of ``detect`` to ``path``. Each rule's findings are built and
    computed on their own (``localCheckpoint``), several at a time (``spark.side_by_side``); the
    union of what they computed is ordered and written as one file. Findings are few rows."""
    computed = side_by_side(recon.batches.sparkSession,
                            [partial(_computed, build) for build in rule_builders(raw, recon, opts)])
    write_findings(_ordered(_union(computed)), path)


def _computed(build: Callable[[], DataFrame]) -> DataFrame:
    return build().localCheckpoint(eager=True)


def _union(frames: Sequence[DataFrame]) -> DataFrame:
    union = frames[0]
    for frame in frames[1:]:
        union = union.unionByName(frame)
    return union


def rule_findings(raw: RawTables | Mapping[str, DataFrame], recon: Reconstruction,
                  opts: DetectOptions) -> list[DataFrame]:
    """The findings of every rule, in ``FINDINGS``' columns: one frame per rule or group of rules."""
    return [build() for build in rule_builders(raw, recon, opts)]


def rule_builders(raw: RawTables | Mapping[str, DataFrame], recon: Reconstruction,
                  opts: DetectOptions) -> list[Callable[[], DataFrame]]:
    """Builders of the findings of every rule (or group of rules), in ``FINDINGS``' columns. What
    several rules read is computed once, here; each builder builds its rules' frame. ``raw``:
    the raw tables, with the manifest of their files when they read them as they are (it tells
    a table without rows, whose rule need not run)."""
    tables = RawTables.of(raw)
    batches, markers, commits = recon.batches, recon.markers, recon.offset_commits
    txn_log = recon.coordinator_log.records
    # per producer on a partition: its last marker's coordinator epoch and its newest marker's
    # time, from one aggregation that two rules read
    last_markers = last_markers_of(markers)
    present = recon.extent.select("topic", "partition", "covers_from")
    matches = prepare_marker_matches(txn_log, markers, present, opts, recon.prepare_follows)
    ptx, stability = recon.partition_transactions, recon.partition_stability

    def open_findings() -> DataFrame:
        return open_transaction_findings(ptx, recon.coordinator, last_markers, opts)

    def unless_none(rows: DataFrame, build: Callable[[], DataFrame]) -> Callable[[], DataFrame]:
        """``build``, a rule whose every finding is of one of ``rows``, or no finding when
        ``rows`` holds none: one small job instead of the rule's query, which on a small dump
        costs seconds of planning and stages (a healthy dump has no open transaction and no
        marker without data)."""
        def built() -> DataFrame:
            return no_findings(rows.sparkSession) if rows.isEmpty() else build()
        return built

    def disagreement() -> DataFrame:
        reported = tables["reported_transactions"]
        if tables.holds_no_rows("reported_transactions") or find_hanging_outputs(reported).isEmpty():
            # nothing to compare with (the usual dump): the open transactions are not classified again
            return no_findings(reported.sparkSession)
        hanging = open_findings().where(F.col("kind") == "hanging_transaction")
        return find_hanging_disagreement_findings(reported, hanging, ptx, opts)

    return [
        unless_none(open_transactions(ptx), open_findings),
        lambda: stuck_lso_findings(stability, ptx),
        lambda: late_arrival_findings(recon.events, opts),
        lambda: absorbed_findings(ptx),
        lambda: coordinator_findings(matches.unsettled, last_markers, ptx, opts),
        unless_none(bare_markers(ptx), lambda: duplicate_marker_findings(ptx, matches.every, recon.producer_ids)),
        lambda: coordinator_epoch_findings(recon.coordinator_log.epoch_candidates()),
        lambda: sequence_findings(recon.producer_events, batches),
        lambda: epoch_findings(recon.producer_events),
        lambda: pending_offset_commit_findings(commits, ptx),
        lambda: retention_findings(ptx, stability),
        lambda: replica_divergence_findings(recon.replica_stability, stability),
        lambda: hw_beyond_log_end_findings(stability),
        lambda: decode_issue_findings(tables["decode_issues"], tables["batches"],
                                      text_files(tables["segments"])),
        disagreement,
    ]


def no_findings(spark: SparkSession) -> DataFrame:
    """An empty ``findings`` frame: what a rule gives when there is nothing to judge."""
    return spark.createDataFrame([], spark_schema(FINDINGS))


def severity_rank() -> Column:
    """The ``severity`` column's rank, most severe first (0: critical), from ``txn_audit.severity``."""
    rank: Column = F.lit(len(SEVERITIES))
    for position, severity in enumerate(reversed(SEVERITIES)):
        rank = F.when(F.col("severity") == severity.value, position).otherwise(rank)
    return rank


def finding_order() -> list[Column]:
    """The one order of findings, wherever they are listed (the table, the JSON, the terminal,
    the report): most severe first, then by kind, topic, partition, first offset, evidence and
    producer, absent values last."""
    return [
        severity_rank(), F.col("kind"), F.col("topic").asc_nulls_last(), F.col("partition").asc_nulls_last(),
        F.col("first_offset").asc_nulls_last(), F.col("evidence"), F.col("producer_id").asc_nulls_last(),
    ]


def _ordered(findings: DataFrame) -> DataFrame:
    # findings are few: one sorted partition, written as one file that keeps the order. A global
    # orderBy would sample its input first, running every rule twice.
    return findings.repartition(1).sortWithinPartitions(*finding_order())


def write_findings(findings: DataFrame, path: str | Path) -> None:
    """Write the ``findings`` table from ``detect``'s frame (or ``_ordered``'s): one file whose
    rows are in the one order, so that readers need not sort again."""
    findings.write.parquet(str(path))


def add_findings(spark: SparkSession, path: str | Path, extra: Sequence[Mapping[str, Any]]) -> None:
    """Add ``extra`` rows (in the ``FINDINGS`` schema, e.g. the data-quality suites' findings)
    to the ``findings`` table at ``path``, which stays in the one order, replaced in one step."""
    if not extra:
        return
    target = Path(path)
    staged = target.with_name(f".{target.name}.adding")
    table = spark.read.schema(spark_schema(FINDINGS)).parquet(str(target))
    # as plain values: a severity may come as a Severity
    plain = [{k: v.value if isinstance(v, Enum) else v for k, v in row.items()} for row in extra]
    added = spark.createDataFrame(plain, spark_schema(FINDINGS))
    shutil.rmtree(staged, ignore_errors=True)
    write_findings(_ordered(table.unionByName(added)), staged)  # reads the table in full before it goes
    shutil.rmtree(target)
    staged.rename(target)
