"""Findings: every problem the audit recognises, one row each (``txn_audit.schemas.FINDINGS``)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, Generic, TypeVar

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from txn_audit.detect.blocked_consumers import COMMIT_COLUMNS, TRANSACTION_COLUMNS, blocked_consumers
from txn_audit.detect.coordinator_rules import coordinator_rule_findings
from txn_audit.detect.decision_rules import UNSETTLED, decision_findings, in_dump, marker_rows, stuck_keys
from txn_audit.detect.decode_issues import BATCH_COLUMNS, SEGMENT_COLUMNS, decode_issue_findings, text_files
from txn_audit.detect.duplicate_marker_rules import (
    BARE_MARKERS,
    answered_by,
    chain_rows,
    duplicate_marker_findings,
)
from txn_audit.detect.open_transaction_rules import (
    COORDINATOR_COLUMNS,
    OPEN,
    open_transaction_findings,
    previous_markers,
)
from txn_audit.detect.producer_rules import (
    BATCH_PLACE,
    SEGMENT_KEY,
    Between,
    Span,
    gap_places,
    gap_spans,
    producer_findings,
    sequence_gaps,
)
from txn_audit.detect.rules import (
    batches_named,
    find_hanging_disagreement_findings,
    find_hanging_outputs,
    pending_offset_commit_findings,
)
from txn_audit.detect.stability_rules import stability_findings
from txn_audit.detect.transaction_rules import JUDGED, transaction_findings
from txn_audit.formats.layout import CONSUMER_OFFSETS_TOPIC
from txn_audit.manifest import TableManifest
from txn_audit.reconstruct import FOLLOW_FIELDS, NAMED_MAX, Reconstruction, read_follows
from txn_audit.replica_tasks.reading import manifest_dataset, read_table
from txn_audit.schemas import ALL_TABLES, BLOCKED_CONSUMERS, FINDINGS, PARTITION_EXTENT, in_ms, spark_schema
from txn_audit.spark import side_by_side
from txn_audit.tables import RawTables, arrow_frame
from txn_audit.usage import AuditOptions

T = TypeVar("T")

__all__ = ["Compaction", "FINDING_KINDS", "Rule", "blocked_consumer_rows", "decode_issue_inputs", "detection_rules",
           "duplicate_marker_inputs", "match_rows", "no_findings", "open_transaction_inputs", "producer_rule_inputs",
           "stuck_marker_rows", "write_detected"]

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
    "remote_only_range",  # offsets of a tiered topic that live only in the remote store: not examined
    "remote_range_unlisted",  # offsets of a tiered topic neither local nor in a remote segment the metadata lists
    "corrupt_batch",
    "truncated_segment",
    "unreadable_input",
    "tool_disagreement",  # an attached find-hanging output disagrees with the hanging verdict
    "invariant_violation",  # from the data-quality suites (txn_audit.quality)
)


def write_detected(raw: RawTables, recon: Reconstruction, opts: AuditOptions, path: str | Path) -> None:
    """Write the findings of every rule (``detection_rules``) to ``path``, as rows of ``FINDINGS``
    in one file (findings are few rows; the incidents stage orders them). Each rule's findings
    are built and computed on their own (``localCheckpoint``), several at a time
    (``spark.side_by_side``)."""
    spark = recon.batches.sparkSession
    every = detection_rules(raw, recon, opts)
    computed = [frame for frame in side_by_side(spark, [partial(_computed, rule) for rule in every])
                if frame is not None]
    _union(computed or [no_findings(spark)]).repartition(1).write.parquet(str(path))


def _computed(rule: Rule) -> DataFrame | None:
    """The rule's findings computed (``localCheckpoint``, unless ``Rule.local``), or None when it
    can find nothing."""
    if rule.idle():
        return None
    return rule.build() if rule.local else rule.build().localCheckpoint(eager=True)


def _union(frames: Sequence[DataFrame]) -> DataFrame:
    union = frames[0]
    for frame in frames[1:]:
        union = union.unionByName(frame)
    return union


def _never() -> bool:
    """A rule's ``idle`` when no row tells that it can find nothing."""
    return False


@dataclass(frozen=True)
class Rule:
    """A rule (or group of rules) of ``detection_rules``: ``build`` builds its findings' frame;
    ``idle`` tells, without building it, that the rule can find nothing, because every finding it
    gives is of rows that are absent (a table without rows, by its manifest, or no transaction of
    the kind it judges among those read on the driver).
    Building and computing a rule's query costs more than that check: on a small dump, seconds
    of planning and stages over all the rules that find nothing."""

    build: Callable[[], DataFrame]
    idle: Callable[[], bool] = _never
    #: ``build`` computes the findings on the driver (pyarrow) and hands them over as rows: no
    #: Spark query to compute, nothing to checkpoint
    local: bool = False


class _Once(Generic[T]):
    """A value several rules read, computed once by whichever rule asks first; the rules'
    threads (``spark.side_by_side``) wait for it. Not computed when no rule asks."""

    def __init__(self, compute: Callable[[], T]) -> None:
        self._compute = compute
        self._lock = threading.Lock()
        self._value: list[T] = []  # the value, once computed

    def __call__(self) -> T:
        with self._lock:
            if not self._value:
                self._value.append(self._compute())
            return self._value[0]


def detection_rules(tables: RawTables, recon: Reconstruction, opts: AuditOptions) -> list[Rule]:
    """Every rule (or group of rules), whose findings are in ``FINDINGS``' columns. What several
    rules read is computed once, here; each rule builds its own frame. ``tables``: the raw
    tables, whose manifest tells a table without rows, whose rules need not run."""
    batches, commits = recon.batches, recon.offset_commits
    spark = batches.sparkSession
    ptx = recon.partition_transactions
    # the few transactions the rules judge, read in one pass: those judged alone, the open ones
    # and the markers without data
    judged = _Once(lambda: recon.rows("partition_transactions", JUDGED | OPEN | BARE_MARKERS))

    def nothing_reported() -> bool:
        reported = tables["reported_transactions"]
        # nothing to compare with (the usual dump): the open transactions are not classified again
        return tables.holds_no_rows("reported_transactions") or find_hanging_outputs(reported).isEmpty()

    def disagreement() -> DataFrame:
        found = on_driver()
        hanging = arrow_frame(spark, found.filter(pc.equal(found.column("kind"), "hanging_transaction")))
        return find_hanging_disagreement_findings(tables["reported_transactions"], hanging, ptx, opts)

    def open_on_offsets() -> pa.Table:
        """The open transactions on ``__consumer_offsets``: every ``pending_offset_commit`` is in one."""
        open_rows = judged().filter(OPEN)
        return open_rows.filter(pc.equal(open_rows.column("topic"), CONSUMER_OFFSETS_TOPIC))

    def pending_commits() -> DataFrame:
        return pending_offset_commit_findings(commits, arrow_frame(spark, open_on_offsets()))

    def computed_on_driver() -> pa.Table:
        """The findings of the rules computed on the driver with pyarrow, whose rows are few: the
        rules of a partition's status, of a producer's writes, of transactions judged alone, of
        the coordinator log's epochs, those of open transactions, of the coordinator's decisions
        and of duplicate markers when the dump has any, and those of the decode issues when it
        has any."""
        stability = recon.rows("partition_stability")
        transactions = judged()
        open_rows = transactions.filter(OPEN)
        offsets = partition_offset_rows(tables, OFFSET_RULE_COLUMNS)  # one row per copy, read once
        compaction = Compaction.of(offsets)
        events, gap_batches, between = producer_rule_inputs(recon.producer_events, batches,
                                                            compaction.compacted | compaction.unknown)
        remote = _remote_segment_rows(tables)
        found = [stability_findings(stability, recon.rows("replica_stability"), compaction.compacted, offsets,
                                    remote),
                 producer_findings(events, gap_batches, opts.late_tolerance_ms, between, compaction.compacted),
                 transaction_findings(transactions.filter(JUDGED), stability),
                 coordinator_rule_findings(recon.coordinator_log.epoch_candidates().toArrow())]
        previous = in_ms(ALL_TABLES["partition_transactions"]).empty_table()
        if open_rows.num_rows:
            coordinator, previous = open_transaction_inputs(recon, open_rows)
            found.append(open_transaction_findings(open_rows, coordinator, previous, opts.audit_ms,
                                                   opts.max_transaction_timeout_ms))
        unsettled = match_rows(recon, UNSETTLED)
        if unsettled.num_rows:
            found.append(decision_findings(unsettled, open_rows, previous, stuck_marker_rows(recon, unsettled),
                                           opts.audit_ms, opts.prepare_grace_ms, opts.clock_skew_ms))
        bare = transactions.filter(BARE_MARKERS)
        if bare.num_rows:
            found.append(duplicate_marker_findings(*duplicate_marker_inputs(recon, bare), recon.producer_ids))
        if not tables.holds_no_rows("decode_issues"):
            found.append(decode_issue_findings(*decode_issue_inputs(tables)))
        return pa.concat_tables(found)

    on_driver = _Once(computed_on_driver)

    # each rule gives nothing when the rows every finding of it is of are absent: a healthy dump
    # has none of them (no open transaction, no marker without data, no late batch, ...)
    return [
        # no offset commit (the manifest says so with no job), or none that can be pending
        Rule(pending_commits, lambda: tables.holds_no_rows("offset_commits") or open_on_offsets().num_rows == 0),
        Rule(lambda: arrow_frame(spark, on_driver()), lambda: on_driver().num_rows == 0, local=True),
        Rule(disagreement, nothing_reported),
    ]


def blocked_consumer_rows(tables: RawTables, recon: Reconstruction, audit_ms: int) -> pa.Table:
    """The consumer groups blocked by a held LSO (``blocked_consumers.blocked_consumers``): the
    partitions whose LSO is below their HW (``partition_stability``, on the driver), the chosen
    replicas' offset commits of those partitions (one Spark query, none when no partition is held
    or the dump has no commit) and the transactions on ``__consumer_offsets`` of the producers of
    their transactional commits (read on the driver through a filter that names them)."""
    held = recon.rows("partition_stability", pc.field("lso_below_hw"))
    if not held.num_rows or tables.holds_no_rows("offset_commits"):
        return in_ms(BLOCKED_CONSUMERS).empty_table()
    condition = F.lit(False)
    for place in held.select(["topic", "partition"]).to_pylist():
        condition = condition | ((F.col("commit_topic") == place["topic"])
                                 & (F.col("commit_partition") == place["partition"]))
    commits = recon.offset_commits.where(condition).select(*COMMIT_COLUMNS).toArrow()
    producers = sorted(set(commits.filter(pc.field("is_transactional")).column("producer_id").to_pylist()))
    transactions = (in_ms(ALL_TABLES["partition_transactions"]).empty_table() if not producers else recon.rows(
        "partition_transactions", (pc.field("topic") == CONSUMER_OFFSETS_TOPIC)
        & pc.field("producer_id").isin(producers)))
    return blocked_consumers(held.to_pylist(), commits.to_pylist(),
                             transactions.select(list(TRANSACTION_COLUMNS)).to_pylist(), audit_ms)


def open_transaction_inputs(recon: Reconstruction, open_rows: pa.Table) -> tuple[pa.Table, pa.Table]:
    """The open-transaction rule's inputs (``open_transaction_rules.open_transaction_findings``)
    besides ``open_rows`` (the ``OPEN`` rows of ``partition_transactions``): the coordinator's
    current rows of their producer ids and transactional ids (the driver's rows, filtered) and
    the rows of the markers before them (``previous_markers``, read as ``open_rows`` were)."""
    current = recon.coordinator
    producers = open_rows.column("producer_id").combine_chunks().unique()
    ids = open_rows.column("transactional_id").combine_chunks().drop_null().unique()
    mine = pc.or_(pc.is_in(current.column("producer_id"), value_set=producers),
                  pc.is_in(current.column("transactional_id"), value_set=ids))
    coordinator = current.filter(mine).select(list(COORDINATOR_COLUMNS))
    condition = previous_markers(open_rows)
    previous = (in_ms(ALL_TABLES["partition_transactions"]).empty_table() if condition is None
                else recon.rows("partition_transactions", condition))
    return coordinator, previous


def duplicate_marker_inputs(recon: Reconstruction, bare: pa.Table) -> tuple[pa.Table, pa.Table]:
    """The duplicate-marker rule's inputs (``duplicate_marker_rules.duplicate_marker_findings``)
    besides the producer ids: the rows of ``partition_transactions`` of the ``bare`` markers
    (``BARE_MARKERS`` rows) and of the two transactions before each (``chain_rows``), and what
    followed the Prepare* records their markers answered (``answered_by``), each read on the
    driver with pyarrow through a filter that names them."""
    condition = chain_rows(bare)
    rows = (in_ms(ALL_TABLES["partition_transactions"]).empty_table() if condition is None
            else recon.rows("partition_transactions", condition))
    answered = answered_by(rows)
    answers = (FOLLOW_FIELDS.empty_table() if answered is None
               else read_follows(recon.output.work_dir("prepare_follows"), answered))
    return rows, answers


def match_rows(recon: Reconstruction, where: pc.Expression | None) -> pa.Table:
    """The rows of what followed each Prepare* record (``Reconstruction.prepare_follows``) that
    meet ``where`` (None: every row; ``decision_rules.UNSETTLED``: the few the rules of the
    coordinator's decisions read), with the record's ``decision`` and whether its partition is in
    the dump (``decision_rules.in_dump``), read on the driver with pyarrow from the files the
    producer pass wrote (no Spark job). The partitions' extent is collected only for rows that
    meet ``where``."""
    rows = read_follows(recon.output.work_dir("prepare_follows"))
    if where is not None:
        rows = rows.filter(where)
    extent = (PARTITION_EXTENT.empty_table() if not rows.num_rows
              else recon.extent.select(*PARTITION_EXTENT.names).toArrow().cast(PARTITION_EXTENT))
    return in_dump(rows, extent)


def stuck_marker_rows(recon: Reconstruction, unsettled: pa.Table) -> pa.Table:
    """The rows of ``partition_transactions`` of the (partition, producer) left in Prepare* among
    the ``unsettled`` rows (``decision_rules.stuck_keys``), whose newest marker the decision rules
    read, through a filter that names them (``decision_rules.marker_rows``); none when none is."""
    condition = marker_rows(stuck_keys(unsettled.select(["topic", "partition", "producer_id", "next_state"])
                                       .to_pylist()))
    if condition is None:
        return in_ms(ALL_TABLES["partition_transactions"]).empty_table()
    return recon.rows("partition_transactions", condition)


def producer_rule_inputs(producer_events: DataFrame, batches: DataFrame,
                         cleanable: Collection[tuple[str, int]] = ()) -> tuple[pa.Table, pa.Table, Between]:
    """The inputs of the rules of a producer's writes (``producer_rules.producer_findings``):
    ``producer_events``' rows, collected (few: the rows a rule may flag); the place and file of
    the batches of ``batches`` (the audited replicas') in the segments of the sequence gaps among
    them, read through a filter that names the segments (``rules.batches_named``); and, for the
    gaps on ``cleanable`` partitions (``producer_rules.gap_spans``), the offsets of the batches
    between each gap's two batches (``producer_rules.Between``). No batch is read when there is
    no gap."""
    events = producer_events.toArrow()
    gaps = sequence_gaps(events)
    places = gap_places(gaps)
    columns = [*BATCH_PLACE, "file"]
    if not places:
        return events, in_ms(ALL_TABLES["batches"]).empty_table().select(columns), {}
    keys = batches.sparkSession.createDataFrame(places, batches.select(*SEGMENT_KEY).schema)
    named = batches_named(batches, keys, SEGMENT_KEY).select(*columns).toArrow()
    return events, named, _batches_between(batches, gap_spans(gaps, cleanable))


def _batches_between(batches: DataFrame, spans: list[Span]) -> Between:
    """The (base, last) offsets of the batches of ``batches`` inside each of ``spans``: up to
    ``NAMED_MAX`` of them named in a filter Parquet answers from its row groups' statistics,
    more joined."""
    if not spans:
        return {}
    read = batches.select("topic", "partition", "base_offset", "last_offset")
    if len(spans) <= NAMED_MAX:
        condition = F.lit(False)
        for topic, partition, after, before in spans:
            condition = condition | ((F.col("topic") == topic) & (F.col("partition") == partition)
                                     & (F.col("last_offset") > after) & (F.col("base_offset") < before))
        rows = read.where(condition).toArrow().to_pylist()
    else:
        ranges = batches.sparkSession.createDataFrame(spans, "topic string, partition int, after long, before long")
        joined = read.join(F.broadcast(ranges), ["topic", "partition"])
        rows = joined.where((F.col("last_offset") > F.col("after")) & (F.col("base_offset") < F.col("before"))) \
            .select(*read.columns).toArrow().to_pylist()
    by_partition: dict[tuple[str, int], list[tuple[int, int]]] = {}
    for row in rows:
        by_partition.setdefault((row["topic"], row["partition"]), []).append((row["base_offset"], row["last_offset"]))
    return {span: [(base, last) for base, last in by_partition.get(span[:2], []) if last > span[2] and base < span[3]]
            for span in spans}


def partition_offset_rows(tables: RawTables, columns: Sequence[str]) -> pa.Table:
    """``columns`` of ``partition_offsets`` (one row per copy of a partition), read from its files."""
    return _read(tables.files("partition_offsets"), columns)


def _remote_segment_rows(tables: RawTables) -> pa.Table | None:
    """The ``remote_segments`` rows (a few per tiered partition), None when the dump has none."""
    if tables.holds_no_rows("remote_segments"):
        return None
    return _read(tables.files("remote_segments"))


#: the columns of ``partition_offsets`` that say where each copy's local log starts
LOCAL_START_COLUMNS = ("topic", "partition", "broker_id", "log_dir", "first_segment_base_offset")


#: the columns of ``partition_offsets`` that say how far the cleaner compacted a copy
CLEANER_COLUMNS = ("topic", "partition", "broker_id", "cleaner_offset", "cleanup_policy")
#: what the driver's rules read of ``partition_offsets``
OFFSET_RULE_COLUMNS = (*LOCAL_START_COLUMNS, "cleaner_offset", "cleanup_policy")


#: per copy of a compacted partition (topic, partition, broker id): how far the log cleaner has
#: cleaned it (its cleaner-offset-checkpoint entry)
Cleaned = dict[tuple[str, int, int | None], int]


@dataclass(frozen=True)
class Compaction:
    """What the dump shows of the log cleaner (``partition_offsets``: the cleaner-offset-checkpoint
    entries and the topics' cleanup.policy from the metadata log). A copy the checkpoint lists is
    compacted (the cleaner tracks compacted logs alone) unless the metadata log says its topic is
    deleted only; so is a partition whose topic's policy compacts."""

    #: the copies the cleaner compacted, with how far (``Cleaned``)
    cleaned: Cleaned
    #: the partitions (topic, partition) of compacted topics
    compacted: frozenset[tuple[str, int]]
    #: the partitions the dump does not tell about: no cleanup.policy, no checkpoint entry
    unknown: frozenset[tuple[str, int]] = frozenset()

    @staticmethod
    def read(tables: RawTables) -> Compaction:
        """From ``partition_offsets``' rows (``partition_offset_rows``)."""
        return Compaction.of(partition_offset_rows(tables, CLEANER_COLUMNS))

    @staticmethod
    def of(offsets: pa.Table) -> Compaction:
        """From rows of ``partition_offsets`` (``CLEANER_COLUMNS`` at least)."""
        rows = offsets.select(list(CLEANER_COLUMNS)).to_pylist()

        def compacts(row: dict[str, Any]) -> bool:
            policy = row["cleanup_policy"]
            return "compact" in policy if policy is not None else row["cleaner_offset"] is not None

        return Compaction(
            cleaned={(r["topic"], r["partition"], r["broker_id"]): r["cleaner_offset"] for r in rows
                     if r["cleaner_offset"] is not None and compacts(r)},
            compacted=frozenset((r["topic"], r["partition"]) for r in rows if compacts(r)),
            unknown=frozenset((r["topic"], r["partition"]) for r in rows
                              if r["cleanup_policy"] is None and r["cleaner_offset"] is None),
        )


def decode_issue_inputs(tables: RawTables) -> tuple[pa.Table, pa.Table, set[str]]:
    """The decode-issue rule's inputs (``decode_issues.decode_issue_findings``): the issues, the
    ``BATCH_COLUMNS`` of their files' batches, and the text files of the inventory, read from the
    files with pyarrow, the batches through a filter on their files that Parquet answers from its
    row groups' statistics, so no Spark job runs."""
    issue_files, segment_files, batch_files = (tables.files(name) for name in ("decode_issues", "segments", "batches"))
    issues = _read(issue_files)
    batches = _read(batch_files, BATCH_COLUMNS, ds.field("file").isin(_damaged(issues)))
    return issues, batches, text_files(_read(segment_files, SEGMENT_COLUMNS))


def _damaged(issues: pa.Table) -> list[str]:
    """The files ``issues`` (``decode_issues`` rows) are about."""
    return sorted(set(issues.column("file").to_pylist()))


def _read(table: TableManifest, columns: Sequence[str] | None = None,
          condition: ds.Expression | None = None) -> pa.Table:
    """``columns`` (None: every column) of the rows of the files ``table`` lists that meet
    ``condition``, with the table's schema (``schemas.ALL_TABLES``), instants as epoch ms (``in_ms``)."""
    if condition is None:  # the whole table, each file in one read
        return read_table(table, columns)
    schema = in_ms(ALL_TABLES[table.name])
    names = list(columns or schema.names)
    dataset = manifest_dataset(table)
    if dataset is None:  # a table without files
        return schema.empty_table().select(names)
    return dataset.to_table(columns=names, filter=condition)


def no_findings(spark: SparkSession) -> DataFrame:
    """An empty ``findings`` frame: what a rule gives when there is nothing to judge."""
    return spark.createDataFrame([], spark_schema(in_ms(FINDINGS)))
