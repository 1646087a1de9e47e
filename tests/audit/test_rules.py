"""Detection rules on small hand-built logs: each rule fires where it should and only there."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from tests.audit.builders import RawBuilder, rank, run_rules

pytestmark = pytest.mark.spark

T0 = 1_800_000_000_000
MIN = 60_000


def kinds(findings: list[dict[str, Any]], min_sev: str = "info") -> set[tuple[str, str, int]]:
    order = ["info", "warning", "critical"]
    return {(f["kind"], f["topic"], f["partition"]) for f in findings
            if order.index(f["severity"]) >= order.index(min_sev)}


def test_committed_transactions_are_quiet(spark: Any) -> None:
    b = RawBuilder()
    b.coordinator("app", pid=7, epoch=0, state="Empty", partitions=None, ts=T0)
    for i in range(3):
        t = T0 + i * 1000
        b.coordinator("app", pid=7, epoch=0, state="Ongoing", partitions=[("t", 0)], ts=t + 1, start=t + 1)
        b.batch("t", 0, pid=7, epoch=0, seq=i * 2, count=2, ts=t + 2, txn=True)
        b.coordinator("app", pid=7, epoch=0, state="PrepareCommit", partitions=[("t", 0)], ts=t + 3, start=t + 1)
        b.marker("t", 0, pid=7, epoch=0, kind="COMMIT", ts=t + 4)
        b.coordinator("app", pid=7, epoch=0, state="CompleteCommit", partitions=[], ts=t + 3, start=t + 1)
    b.batch("t", 0, pid=-1, count=5, ts=T0 + 5000)
    assert run_rules(spark, b, as_of_ms=T0 + 60 * MIN) == []


#: every rule function ``detect.detection_rules`` builds only when the rows its findings would be of
#: exist (the rules computed on the driver from few rows, of a partition's status, of a producer's
#: writes, of transactions judged alone and of the coordinator log's epochs, always run; the
#: batches of sequence gaps are read only for a gap, the coordinator's rows of open transactions'
#: producers only for an open transaction, the decisions' markers only for an unsettled Prepare*,
#: the markers before a marker without data only for one)
GATED_RULES = ("open_transaction_inputs", "decision_findings", "duplicate_marker_inputs", "duplicate_marker_findings",
               "pending_offset_commit_findings", "decode_issue_findings", "find_hanging_disagreement_findings",
               "batches_named")


def test_rules_with_nothing_to_judge_are_not_run(spark: Any, monkeypatch: pytest.MonkeyPatch,
                                                 tmp_path: Path) -> None:
    """On a healthy dump's tables, as a scan reads them (files with their manifest), no rule is
    built at all: each has nothing to judge (their queries cost seconds on a small dump). Once a
    transaction is open, the rules that judge open transactions are."""
    import txn_audit.detect as detect

    def never(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a rule with nothing to judge was built")

    for name in GATED_RULES:
        monkeypatch.setattr(detect, name, never)
    b = RawBuilder()
    b.coordinator("app", pid=7, epoch=0, state="Ongoing", partitions=[("t", 0)], ts=T0 + 1, start=T0 + 1)
    b.batch("t", 0, pid=7, epoch=0, seq=0, count=2, ts=T0 + 2, txn=True)
    b.coordinator("app", pid=7, epoch=0, state="PrepareCommit", partitions=[("t", 0)], ts=T0 + 3, start=T0 + 1)
    b.marker("t", 0, pid=7, epoch=0, kind="COMMIT", ts=T0 + 4)
    b.coordinator("app", pid=7, epoch=0, state="CompleteCommit", partitions=[], ts=T0 + 3, start=T0 + 1)
    assert run_rules(spark, b, as_of_ms=T0 + 60 * MIN, files=tmp_path / "healthy") == []
    b.batch("t", 0, pid=7, epoch=0, seq=2, ts=T0 + 5, txn=True)  # now a transaction is open
    with pytest.raises(AssertionError, match="nothing to judge"):
        run_rules(spark, b, as_of_ms=T0 + 60 * MIN, files=tmp_path / "open")


def test_a_rule_that_says_it_can_find_nothing_finds_nothing(spark: Any, sample_scan: Any, tmp_path: Path) -> None:
    """``detect.Rule.idle`` is sound: on the sample dump's tables, which hold an anomaly of every
    kind the sample plants, each rule that says it can find nothing gives no row when built
    anyway, and the rules that are not idle give every finding of the scan."""
    from txn_audit.detect import detection_rules
    from txn_audit.reconstruct import DerivedOutput, reconstruct
    from txn_audit.tables import load_raw_tables

    result = sample_scan.result
    raw = load_raw_tables(spark, sample_scan.out / "tables")
    opts = result.options
    recon = reconstruct(raw, as_of_ms=opts.as_of_ms, late_tolerance_ms=opts.late_tolerance_ms,
                        output=DerivedOutput(str(tmp_path)))
    found: dict[str, int] = {}
    idle = 0
    every = detection_rules(raw, recon, opts)
    for rule in every:
        counted = {r["kind"]: r["count"] for r in rule.build().groupBy("kind").count().collect()}
        if rule.idle():
            idle += 1
            assert counted == {}, f"a rule said to find nothing found {counted}"
        for kind, count in counted.items():
            found[kind] = found.get(kind, 0) + count
    # the scan's findings, but for those of the data-quality suites (``quality.QualityResult.findings``)
    scanned = Counter(f.kind for f in result.findings if not f.evidence.startswith("data-quality check"))
    assert found == dict(scanned)
    assert 0 < idle < len(every)  # the sample leaves some rules nothing to judge


def _table_scans(frame: Any, table: str) -> int:
    """How many times ``frame``'s physical plan reads the Parquet files of raw or derived ``table``."""
    conf = frame.sparkSession.conf
    before = conf.get("spark.sql.maxMetadataStringLength")
    conf.set("spark.sql.maxMetadataStringLength", "100000")  # each scan's folder in full
    try:
        plan = frame._jdf.queryExecution().executedPlan().toString()
    finally:
        conf.set("spark.sql.maxMetadataStringLength", before)
    return sum(f"/{table}" in line for line in plan.splitlines() if "Scan parquet" in line or "FileScan" in line)


def test_no_rule_reads_every_marker(spark: Any, sample_scan: Any, tmp_path: Path) -> None:
    """The markers are read by reconstruct's pass: the rules read what it derived of them (the
    markers' last coordinator epochs and times, aggregated once for the rules that read them, or
    the transactions' rows). No rule's query reads every marker again."""
    from txn_audit.detect import detection_rules
    from txn_audit.reconstruct import DerivedOutput, reconstruct
    from txn_audit.tables import load_raw_tables

    result = sample_scan.result
    raw = load_raw_tables(spark, sample_scan.out / "tables")
    opts = result.options
    recon = reconstruct(raw, as_of_ms=opts.as_of_ms, late_tolerance_ms=opts.late_tolerance_ms,
                        output=DerivedOutput(str(tmp_path)))  # derived tables as a scan writes them
    # the markers table is where the raw tables are: a plan reading it names its folder
    assert _table_scans(recon.markers, "control_markers") == 1
    every = detection_rules(raw, recon, opts)
    assert sum(_table_scans(rule.build(), "control_markers") for rule in every if not rule.idle()) == 0


def test_open_transactions_are_judged_from_their_own_rows(spark: Any, sample_scan: Any, tmp_path: Path) -> None:
    """The open-transaction rule reads the open transactions and the markers before them from
    ``partition_transactions``' files (pyarrow, through filters), and the coordinator's rows of
    their producers only: it finds from them what the scan found, the sample's planted hanging
    and open transactions among them."""
    from txn_audit.detect import open_transaction_inputs
    from txn_audit.detect.open_transaction_rules import OPEN, open_transaction_findings
    from txn_audit.reconstruct import DerivedOutput, reconstruct
    from txn_audit.tables import load_raw_tables

    result = sample_scan.result
    raw = load_raw_tables(spark, sample_scan.out / "tables")
    opts = result.options
    recon = reconstruct(raw, as_of_ms=opts.as_of_ms, late_tolerance_ms=opts.late_tolerance_ms,
                        output=DerivedOutput(str(tmp_path)))
    open_rows = recon.rows("partition_transactions", OPEN)
    coordinator, previous = open_transaction_inputs(recon, open_rows)
    every = recon.partition_transactions
    assert open_rows.num_rows == every.where("state = 'open'").count() > 0
    assert set(coordinator.column("producer_id").to_pylist()) <= set(open_rows.column("producer_id").to_pylist())
    before = {(r["topic"], r["partition"], r["prev_marker_offset"]) for r in open_rows.to_pylist()
              if r["prev_marker_offset"] is not None}
    assert {(r["topic"], r["partition"], r["marker_offset"]) for r in previous.to_pylist()} == before
    found = open_transaction_findings(open_rows, coordinator, previous, opts.as_of_ms,
                                      opts.max_transaction_timeout_ms).to_pylist()
    scanned = Counter(f.kind for f in result.findings if "open_transaction" in f.kind or f.kind.startswith("hanging"))
    assert Counter(row["kind"] for row in found) == scanned
    assert {"hanging_transaction", "open_transaction"} <= set(scanned)  # the sample plants both


def test_hanging_remedy_before_3_0_names_the_last_markers_coordinator_epoch(spark: Any, tmp_path: Path) -> None:
    """Before Kafka 3.0 the abort command names the coordinator epoch: that of the producer's last
    marker on the partition (the marker before the hanging transaction), 0 without one."""
    b = RawBuilder()
    b.batch("t", 0, pid=4, epoch=2, seq=0, ts=T0, txn=True)
    b.marker("t", 0, pid=4, epoch=2, kind="COMMIT", ts=T0 + 1, coordinator_epoch=3)
    b.batch("t", 0, pid=4, epoch=2, seq=1, ts=T0 + 2, txn=True)
    b.marker("t", 0, pid=4, epoch=2, kind="ABORT", ts=T0 + 3, coordinator_epoch=7)
    b.batch("t", 0, pid=4, epoch=2, seq=2, ts=T0 + 4, txn=True)  # hanging: no coordinator record lists it
    b.batch("t", 1, pid=4, epoch=2, seq=0, ts=T0 + 5, txn=True)  # hanging, no marker before it
    for files in (None, tmp_path / "files"):  # the frames' rows collected, the files read through filters
        found = run_rules(spark, b, as_of_ms=T0 + 60 * MIN, timeout_ms=15 * MIN, files=files)
        hanging = {f["partition"]: f for f in found if f["kind"] == "hanging_transaction"}
        assert hanging[0]["remediation_pre_3_0"].endswith("--producer-id 4 --producer-epoch 2 --coordinator-epoch 7")
        assert hanging[1]["remediation_pre_3_0"].endswith("--producer-id 4 --producer-epoch 2 --coordinator-epoch 0")
        assert hanging[0]["remediation"].endswith("--topic t --partition 0 --start-offset 4")


def test_hanging_open_and_epoch_mismatch(spark: Any) -> None:
    b = RawBuilder()
    # pid 1: stray batch on t-1 never added; coordinator moved on to CompleteCommit
    b.coordinator("a", pid=1, epoch=0, state="Ongoing", partitions=[("t", 0)], ts=T0, start=T0)
    b.batch("t", 0, pid=1, epoch=0, seq=0, ts=T0 + 1, txn=True)
    b.batch("t", 1, pid=1, epoch=0, seq=0, ts=T0 + 2, txn=True)
    b.coordinator("a", pid=1, epoch=0, state="PrepareCommit", partitions=[("t", 0)], ts=T0 + 3, start=T0)
    b.marker("t", 0, pid=1, epoch=0, kind="COMMIT", ts=T0 + 4)
    b.coordinator("a", pid=1, epoch=0, state="CompleteCommit", partitions=[], ts=T0 + 3, start=T0)
    # pid 2: long-running, listed by its Ongoing record
    b.coordinator("b", pid=2, epoch=3, state="Ongoing", partitions=[("t", 2)], ts=T0, start=T0, timeout_ms=3_600_000)
    b.batch("t", 2, pid=2, epoch=3, seq=0, ts=T0 + 5, txn=True)
    # pid 3: an old-epoch transaction on a partition its current (newer-epoch) transaction lists
    b.batch("t", 3, pid=3, epoch=0, seq=0, ts=T0, txn=True)
    b.coordinator("c", pid=3, epoch=1, state="Ongoing", partitions=[("t", 3)], ts=T0 + 10, start=T0 + 10)
    found = run_rules(spark, b, as_of_ms=T0 + 20 * MIN, timeout_ms=15 * MIN)
    k = kinds(found)
    assert ("hanging_transaction", "t", 1) in k
    assert ("open_transaction", "t", 2) in k
    assert ("open_transaction_epoch_mismatch", "t", 3) in k
    assert not {x for x in k if x[0] == "hanging_transaction" and x[2] != 1}
    hanging = next(f for f in found if f["kind"] == "hanging_transaction")
    assert hanging["remediation"].endswith("abort --topic t --partition 1 --start-offset 0")
    assert hanging["transactional_id"] == "a"
    # the coordinator completed the transaction after the stray write without listing t-1: it
    # hangs whatever the audit time, below the timeout too
    early = run_rules(spark, b, as_of_ms=T0 + 10 * MIN, timeout_ms=15 * MIN)
    (proven,) = [f for f in early if (f["kind"], f["partition"]) == ("hanging_transaction", 1)]
    assert "whatever the audit time" in proven["evidence"] and "CompleteCommit" in proven["evidence"]
    assert proven["remediation"] == hanging["remediation"]
    # a stray write after the coordinator's newest record (its log may have been copied first):
    # the clock decides, and no remedy waits for a timeout that will not end it
    after = RawBuilder()
    after.coordinator("a", pid=1, epoch=0, state="CompleteCommit", partitions=[], ts=T0, start=T0)
    after.batch("t", 1, pid=1, epoch=0, seq=0, ts=T0 + 2, txn=True)
    young = run_rules(spark, after, as_of_ms=T0 + 10 * MIN, timeout_ms=15 * MIN)
    (opened,) = [f for f in young if f["kind"] in ("open_transaction", "hanging_transaction")]
    assert (opened["kind"], opened["severity"]) == ("open_transaction", "warning")
    assert opened["remediation"] == hanging["remediation"] and "no marker will close it" in opened["evidence"]
    assert ("hanging_transaction", "t", 1) in kinds(run_rules(spark, after, as_of_ms=T0 + 20 * MIN,
                                                              timeout_ms=15 * MIN))


def test_the_cleaners_gaps_on_a_compacted_topic_are_no_finding(spark: Any) -> None:
    """On a compacted topic the cleaner drops whole batches, so the sequences of the batches it
    keeps jump across offsets no batch holds any more: no ``sequence_gap`` there, with or without
    a cleaner-offset-checkpoint entry (a text dump has none). A gap across offsets other batches
    hold, or on a topic whose policy deletes only, is still one; on a topic the dump says nothing
    of, it is an info finding that says the cleaner may have made it."""
    b = RawBuilder()
    for topic in ("changelog", "unchecked", "deleting", "unknown"):
        b.batch(topic, 0, pid=9, epoch=0, seq=0, count=3, ts=T0)
        b.removed(topic, 0, 7)  # the batches of sequences 3..9, dropped
        b.batch(topic, 0, pid=9, epoch=0, seq=10, count=3, ts=T0 + 1)  # 3 expected: offsets 3..9 held by none
        b.batch(topic, 0, pid=9, epoch=0, seq=13, count=3, ts=T0 + 2)
        b.batch(topic, 0, pid=4, epoch=0, seq=0, count=2, ts=T0 + 3)  # another producer's batch between
        b.batch(topic, 0, pid=9, epoch=0, seq=20, count=3, ts=T0 + 4)  # 16 expected, every offset held
    b.compacted("changelog", 0, cleaned_to=6)
    b.compacted("unchecked", 0, cleaned_to=None)  # compacted, no cleaner-offset-checkpoint entry
    b.compacted("deleting", 0, cleaned_to=6, policy="delete")
    b.compacted("unknown", 0, cleaned_to=None, policy=None)  # neither a policy nor a checkpoint entry
    found = run_rules(spark, b, as_of_ms=T0 + MIN)
    gaps = sorted((f["topic"], f["first_offset"], f["severity"]) for f in found if f["kind"] == "sequence_gap")
    assert gaps == [("changelog", 18, "warning"), ("deleting", 10, "warning"), ("deleting", 18, "warning"),
                    ("unchecked", 18, "warning"), ("unknown", 10, "info"), ("unknown", 18, "warning")]
    # where the dump does not tell whether the topic is compacted, the gap says what it may be
    (unknown,) = [f for f in found if f["kind"] == "sequence_gap" and f["severity"] == "info"]
    assert "offsets 3-9 between them are held by no batch: if the topic is compacted" in unknown["evidence"]


def test_late_arrival_absorbed_and_hanging(spark: Any) -> None:
    b = RawBuilder()
    # t-0: N aborted, a late batch of N lands after the marker inside N+1, which commits
    b.batch("t", 0, pid=5, epoch=0, seq=0, ts=T0, txn=True)
    b.marker("t", 0, pid=5, epoch=0, kind="ABORT", ts=T0 + 10_000)
    late = b.batch("t", 0, pid=5, epoch=0, seq=1, ts=T0 + 5, txn=True)
    b.batch("t", 0, pid=5, epoch=0, seq=2, ts=T0 + 10_100, txn=True)
    b.marker("t", 0, pid=5, epoch=0, kind="COMMIT", ts=T0 + 10_200)
    # t-1: normal client skew (50 ms before the previous marker) is not late
    b.batch("t", 1, pid=5, epoch=0, seq=0, ts=T0, txn=True)
    b.marker("t", 1, pid=5, epoch=0, kind="COMMIT", ts=T0 + 100)
    b.batch("t", 1, pid=5, epoch=0, seq=1, ts=T0 + 50, txn=True)
    b.marker("t", 1, pid=5, epoch=0, kind="COMMIT", ts=T0 + 200)
    found = run_rules(spark, b, as_of_ms=T0 + MIN)
    k = kinds(found)
    assert ("late_arrival", "t", 0) in k and ("absorbed_late_record", "t", 0) in k
    assert not {x for x in k if x[2] == 1}
    absorbed = next(f for f in found if f["kind"] == "absorbed_late_record")
    assert absorbed["severity"] == "critical" and absorbed["first_offset"] == late


def test_sequence_gap_epoch_regression_and_zombie(spark: Any) -> None:
    b = RawBuilder()
    b.batch("s", 0, pid=9, epoch=0, seq=0, count=3, ts=T0)
    b.batch("s", 0, pid=9, epoch=0, seq=5, count=1, ts=T0 + 1)  # gap: 3 expected
    b.batch("s", 0, pid=9, epoch=1, seq=0, count=1, ts=T0 + 2)  # KIP-360 bump: fine
    b.batch("s", 0, pid=9, epoch=0, seq=6, count=1, ts=T0 + 3)  # epoch goes back
    b.batch("z", 0, pid=4, epoch=0, seq=0, ts=T0, txn=True)
    b.marker("z", 0, pid=4, epoch=1, kind="ABORT", ts=T0 + 1)  # coordinator abort fences epoch 0
    b.batch("z", 0, pid=4, epoch=0, seq=1, ts=T0 + 2, txn=True)  # zombie
    b.marker("z", 0, pid=4, epoch=2, kind="ABORT", ts=T0 + 3)
    found = run_rules(spark, b, as_of_ms=T0 + MIN)
    k = kinds(found)
    assert ("sequence_gap", "s", 0) in k
    assert ("epoch_regression", "s", 0) in k
    assert ("zombie_write", "z", 0) in k
    gaps = [f for f in found if f["kind"] == "sequence_gap"]
    assert [g["first_offset"] for g in gaps] == [3]


def test_coordinator_stuck_missing_marker_outcome_mismatch(spark: Any) -> None:
    b = RawBuilder()
    b.batch("p", 0, pid=1, epoch=0, seq=0, ts=T0, txn=True)
    b.batch("p", 1, pid=1, epoch=0, seq=0, ts=T0, txn=True)
    b.coordinator("s", pid=1, epoch=0, state="PrepareCommit", partitions=[("p", 0), ("p", 1)], ts=T0 + 10, start=T0)
    b.marker("p", 0, pid=1, epoch=0, kind="COMMIT", ts=T0 + 20)
    b.batch("q", 0, pid=2, epoch=0, seq=0, ts=T0, txn=True)
    b.batch("q", 1, pid=2, epoch=0, seq=0, ts=T0, txn=True)
    b.coordinator("m", pid=2, epoch=0, state="PrepareAbort", partitions=[("q", 0), ("q", 1)], ts=T0 + 10, start=T0)
    b.marker("q", 0, pid=2, epoch=0, kind="COMMIT", ts=T0 + 20)  # wrong outcome
    b.coordinator("m", pid=2, epoch=0, state="CompleteAbort", partitions=[], ts=T0 + 10, start=T0)
    found = run_rules(spark, b, as_of_ms=T0 + 5 * MIN, timeout_ms=15 * MIN)
    k = kinds(found)
    assert ("coordinator_stuck", "p", 1) in k and ("coordinator_stuck", "p", 0) not in k
    assert ("outcome_mismatch", "q", 0) in k
    assert ("missing_marker", "q", 1) in k


def _disagreements(found: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [f for f in found if f["kind"] == "tool_disagreement"]


def test_find_hanging_outputs_are_compared_with_the_hanging_verdict(spark: Any) -> None:
    b = RawBuilder()
    # pid 1: stray batch on t-1 (hanging); pid 2: long-running on t-2, listed by its coordinator
    b.coordinator("a", pid=1, epoch=0, state="CompleteCommit", partitions=[], ts=T0, start=T0)
    b.batch("t", 1, pid=1, epoch=0, seq=0, ts=T0 + 2, txn=True)
    b.coordinator("b", pid=2, epoch=3, state="Ongoing", partitions=[("t", 2)], ts=T0, start=T0, timeout_ms=3_600_000)
    b.batch("t", 2, pid=2, epoch=3, seq=0, ts=T0 + 5, txn=True)
    as_of = T0 + 20 * MIN
    # agrees on t-1; wrongly lists t-2; lists a partition the dump does not hold
    b.find_hanging("fh-agree.txt", run_at=as_of, timeout_min=15,
                   rows=[("t", 1, 1, 0, 0, T0 + 2), ("t", 2, 2, 3, 0, T0 + 5), ("other", 0, 9, 0, 4, T0)])
    b.find_hanging("fh-early.txt", run_at=T0 + 5 * MIN, timeout_min=15)  # ran before t-1 could time out
    b.find_hanging("fh-missed.txt", run_at=as_of, timeout_min=1)  # should have listed t-1
    found = _disagreements(run_rules(spark, b, as_of_ms=as_of, timeout_ms=15 * MIN))
    by_file = {(f["file"], f["topic"], f["partition"]): f for f in found}
    assert ("fh-agree.txt", "t", 1) not in by_file
    listed_open = by_file[("fh-agree.txt", "t", 2)]
    assert listed_open["severity"] == "warning" and "open but not hanging" in listed_open["evidence"]
    assert by_file[("fh-agree.txt", "other", 0)]["severity"] == "info"
    assert "not in the dump" in by_file[("fh-agree.txt", "other", 0)]["evidence"]
    early = next(f for f in found if "fh-early.txt" in f["evidence"])
    assert early["severity"] == "info" and "under its timeout" in early["evidence"]
    missed = next(f for f in found if "fh-missed.txt" in f["evidence"])
    assert missed["severity"] == "warning" and "should have listed it" in missed["evidence"]
    assert (missed["topic"], missed["partition"], missed["producer_id"], missed["first_offset"]) == ("t", 1, 1, 0)
    assert len(found) == 4  # two from fh-agree, one each from the empty runs


def test_find_hanging_run_after_the_audit_time_gives_the_as_of_to_use(spark: Any) -> None:
    from txn_audit.timeparse import parse_time_ms

    b = RawBuilder()
    b.coordinator("a", pid=1, epoch=0, state="CompleteCommit", partitions=[], ts=T0, start=T0)
    b.batch("t", 1, pid=1, epoch=0, seq=0, ts=T0 + 2, txn=True)
    run_at = T0 + 3 * MIN + 250
    b.find_hanging("fh.txt", run_at=run_at, timeout_min=1, rows=[("t", 1, 1, 0, 0, T0 + 2)])
    found = run_rules(spark, b, as_of_ms=T0 + 1000, timeout_ms=MIN)
    (only,) = _disagreements(found)
    args = only["evidence"].split("scan with ")[1].split()
    assert parse_time_ms(args[args.index("--as-of") + 1]) == run_at
    assert args[args.index("--max-transaction-timeout") + 1] == "1m"
    assert run_rules(spark, b, as_of_ms=run_at, timeout_ms=MIN) and not _disagreements(
        run_rules(spark, b, as_of_ms=run_at, timeout_ms=MIN))


def test_markers_of_unknown_type_close_transactions_without_guessing(spark: Any) -> None:
    b = RawBuilder()
    b.coordinator("a", pid=1, epoch=0, state="Ongoing", partitions=[("t", 0)], ts=T0, start=T0)
    b.batch("t", 0, pid=1, epoch=0, seq=0, ts=T0 + 1, txn=True)
    b.coordinator("a", pid=1, epoch=0, state="PrepareAbort", partitions=[("t", 0)], ts=T0 + 2, start=T0)
    b.marker("t", 0, pid=1, epoch=0, kind="UNKNOWN", ts=T0 + 3, coordinator_epoch=-1)
    b.coordinator("a", pid=1, epoch=0, state="CompleteAbort", partitions=[], ts=T0 + 4, start=T0)
    b.batch("t", 0, pid=1, epoch=0, seq=1, ts=T0 - 5000, txn=True)  # late, absorbed by the next marker
    b.marker("t", 0, pid=1, epoch=0, kind="UNKNOWN", ts=T0 + 6000, coordinator_epoch=-1)
    found = run_rules(spark, b, as_of_ms=T0 + 60 * MIN)
    k = {f["kind"] for f in found}
    assert not k & {"open_transaction", "hanging_transaction", "stuck_lso", "outcome_mismatch", "missing_marker"}
    absorbed = next(f for f in found if f["kind"] == "absorbed_late_record")
    assert absorbed["severity"] == "warning" and "not known" in absorbed["evidence"]


def test_stuck_lso_without_a_known_high_watermark_says_so(spark: Any) -> None:
    b = RawBuilder()
    b.coordinator("a", pid=1, epoch=0, state="Ongoing", partitions=[("t", 0)], ts=T0, start=T0, timeout_ms=3_600_000)
    b.batch("t", 0, pid=1, epoch=0, seq=0, ts=T0 + 1, txn=True)
    b.batch("t", 0, pid=-1, count=4, ts=T0 + 2)
    b.hw[("t", 0)] = None  # type: ignore[assignment]
    found = run_rules(spark, b, as_of_ms=T0 + 5 * MIN)
    (stuck,) = [f for f in found if f["kind"] == "stuck_lso"]
    assert stuck["severity"] == "info" and "log end offset stands in" in stuck["evidence"]
    assert (stuck["first_offset"], stuck["last_offset"]) == (0, 4)
    b.hw[("t", 0)] = 5
    (stuck,) = [f for f in run_rules(spark, b, as_of_ms=T0 + 5 * MIN) if f["kind"] == "stuck_lso"]
    assert stuck["severity"] == "warning" and "replication-offset-checkpoint" in stuck["evidence"]


def test_snapshot_open_from_before_the_log_start_is_lost_to_retention(spark: Any, tmp_path: Path) -> None:
    """The pass's tasks write partition_transactions and the rows only a snapshot shows are
    added to their files."""
    b = RawBuilder()
    # t-0: the snapshot at the log start (offset 10) holds pid 4's transaction open from offset 3,
    # whose batches retention deleted; nothing of pid 4 follows, so it is still open
    b.snapshot("t", 0, at=10, pid=4, epoch=1, open_from=3, ts=T0)
    b.log_start[("t", 0)] = 10
    b.next_offset[("t", 0)] = 10
    b.batch("t", 0, count=2, ts=T0 + 10)
    # t-1: the same, but pid 4's marker after the snapshot closed the transaction
    b.snapshot("t", 1, at=10, pid=4, epoch=1, open_from=3, ts=T0)
    b.log_start[("t", 1)] = 10
    b.next_offset[("t", 1)] = 10
    b.marker("t", 1, pid=4, epoch=1, kind="ABORT", ts=T0 + 10)
    # t-2: a snapshot taken after the log start, or one with nothing open, says nothing
    b.snapshot("t", 2, at=12, pid=4, epoch=1, open_from=3, ts=T0)
    b.snapshot("t", 3, at=10, pid=4, epoch=1, ts=T0)
    for partition in (2, 3):
        b.log_start[("t", partition)] = 10
        b.next_offset[("t", partition)] = 10
        b.batch("t", partition, count=2, ts=T0 + 10)
    found = run_rules(spark, b, as_of_ms=T0 + MIN, files=tmp_path)
    written = pq.read_table(tmp_path / "tables" / "partition_transactions").to_pylist()
    # pid 4's ABORT on t-1 is a transaction of the log (a marker without data), written by a pass task
    assert sorted((r["partition"], r["source"]) for r in written) == [(0, "snapshot"), (1, "log")]
    lost = [f for f in found if f["kind"] == "retention_lost_open_txn"]
    assert [(f["topic"], f["partition"], f["producer_id"], f["first_offset"]) for f in lost] == [("t", 0, 4, 3)]
    assert lost[0]["remediation"].endswith("abort --topic t --partition 0 --start-offset 3")
    # brokers before 3.0: by the snapshot's producer, epoch and coordinator epoch (the builder's 0)
    assert lost[0]["remediation_pre_3_0"].endswith(
        "abort --topic t --partition 0 --producer-id 4 --producer-epoch 1 --coordinator-epoch 0")


@pytest.mark.parametrize(("snapshot_at", "open_from", "shown"), [
    (10, 3, True),  # at the log start, open from before it: retention lost the data
    (15, 12, True),  # beyond the log end (12), open from there: the log lost its tail
    (12, 3, False),  # taken after the log start, within the log
    (10, -1, False),  # nothing open
])
def test_snapshots_read_on_the_driver_tell_when_the_query_would_find_none(
        spark: Any, tmp_path: Path, snapshot_at: int, open_from: int, shown: bool) -> None:
    """The snapshots' files, read on the driver, answer as the query over them does whether a
    snapshot shows a transaction open below the log start or beyond the log end."""
    from txn_audit.reconstruct import chosen_replicas, on_replicas
    from txn_audit.reconstruct.transactions import _open_before_log_start, _snapshots_may_show_open
    from txn_audit.replica_tasks import replicas_rows
    from txn_audit.schemas import PARTITION_COLUMNS
    from txn_audit.tables import load_raw_tables

    b = RawBuilder()
    b.snapshot("t", 0, at=snapshot_at, pid=4, epoch=1, open_from=open_from, ts=T0)
    b.log_start[("t", 0)] = 10
    b.next_offset[("t", 0)] = 10
    b.batch("t", 0, count=2, ts=T0 + 10)
    b.write(tmp_path / "tables")
    raw = load_raw_tables(spark, tmp_path / "tables")
    ranked = rank(raw)
    offsets, keys = chosen_replicas(ranked), ranked.keys(1)
    files = replicas_rows(raw.files("producer_snapshots"), keys)
    snapshots = on_replicas(raw["producer_snapshots"], offsets, keys, raw.files("producer_snapshots"))
    found = _open_before_log_start(raw["control_markers"], snapshots, offsets, PARTITION_COLUMNS)
    assert (found is not None) == shown
    assert _snapshots_may_show_open(files, offsets) == shown


def test_missing_marker_names_the_open_transaction_and_its_abort_command(spark: Any) -> None:
    """The partition that never got its marker still holds the transaction open: the finding gives
    where it starts and the abort command that closes it, as a hanging transaction's does."""
    b = RawBuilder()
    b.batch("q", 1, count=3, ts=T0)  # plain records first: the transaction starts at offset 3
    b.batch("q", 0, pid=2, epoch=0, seq=0, ts=T0, txn=True)
    b.batch("q", 1, pid=2, epoch=0, seq=0, count=2, ts=T0, txn=True)
    b.coordinator("m", pid=2, epoch=0, state="PrepareAbort", partitions=[("q", 0), ("q", 1)], ts=T0 + 10, start=T0)
    b.marker("q", 0, pid=2, epoch=0, kind="ABORT", ts=T0 + 20, coordinator_epoch=4)
    b.coordinator("m", pid=2, epoch=0, state="CompleteAbort", partitions=[], ts=T0 + 10, start=T0)
    found = run_rules(spark, b, as_of_ms=T0 + 5 * MIN, timeout_ms=15 * MIN)
    (missing,) = [f for f in found if f["kind"] == "missing_marker"]
    assert (missing["topic"], missing["partition"], missing["first_offset"], missing["last_offset"]) == ("q", 1, 3, 4)
    assert missing["remediation"] == (
        "kafka-transactions.sh --bootstrap-server <broker> abort --topic q --partition 1 --start-offset 3")
    assert missing["remediation_pre_3_0"].endswith(
        "abort --topic q --partition 1 --producer-id 2 --producer-epoch 0 --coordinator-epoch 0")
    assert "open from offset 3" in missing["evidence"]


def test_stuck_lso_names_where_a_retention_lost_transaction_starts(spark: Any) -> None:
    """A producer snapshot holds a transaction open from offset 3, below the log start 10: the
    LSO stays at the log start, and the finding says the transaction is open from 3."""
    b = RawBuilder()
    b.snapshot("t", 0, at=10, pid=4, epoch=1, open_from=3, ts=T0)
    b.log_start[("t", 0)] = 10
    b.next_offset[("t", 0)] = 10
    b.batch("t", 0, count=2, ts=T0 + 10)
    found = run_rules(spark, b, as_of_ms=T0 + MIN)
    (stuck,) = [f for f in found if f["kind"] == "stuck_lso"]
    assert (stuck["first_offset"], stuck["last_offset"], stuck["producer_id"]) == (10, 11, 4)
    assert "last stable offset 10 " in stuck["evidence"]
    assert "open from offset 3, below the log start offset 10" in stuck["evidence"]
    assert "open from offset 10" not in stuck["evidence"]


def test_decode_issues_without_a_position_name_their_file_or_folder(spark: Any, tmp_path: Path) -> None:
    """A layout issue has no byte position, and the log dir at the dump's top is the folder ".":
    the finding says neither "at byte -1" nor "." but what the issue is about."""
    from txn_audit.ingest.discover import discover

    (tmp_path / "orders-0").mkdir()
    (tmp_path / "orders-0" / "00000000000000000000.log").write_bytes(b"")
    (tmp_path / "replication-offset-checkpoint").write_text("0\n0\n")
    (tmp_path / "notes.txt").write_text("copied on Tuesday\n")
    inv = discover(tmp_path)
    b = RawBuilder()
    b.batch("orders", 0, count=1, ts=T0)
    b.rows["decode_issues"] = inv.issues
    found = {f["evidence"] for f in run_rules(spark, b, as_of_ms=T0 + MIN) if f["kind"] == "unreadable_input"}
    assert found == {
        "the dump's top folder: unrecognised_file: log dir without meta.properties: broker id unknown",
        "notes.txt: unrecognised_file: unknown file in a log dir: not audited",
    }


def test_a_text_dumps_issue_names_its_line_and_no_batch(spark: Any) -> None:
    """In a text file (a kafka-dump-log dump) an issue's position is a line number: the finding
    names the line, never a byte, and takes no batch's offsets, even where a batch the dump
    printed happens to sit at that byte."""
    b = RawBuilder()
    b.batch("orders", 0, count=1, ts=T0)  # at byte 0 of its segment file
    dump = "dumps/orders.txt"
    b.rows["batches"][0]["file"] = dump
    b.rows["batches"][0]["position"] = 8
    b.rows["segments"].append({
        "broker_id": None, "log_dir": ".", "topic": None, "partition": None, "path": dump, "file_name": "orders.txt",
        "kind": "dump_log", "base_offset": None, "size_bytes": 100, "status": "live", "replica_status": None,
        "decoded": True, "skip_reason": None,
    })
    for kind, detail in (("unparsed_line", "line 7: not a batch, record or header line"),
                         ("crc_mismatch", "line 8: kafka-dump-log found the CRC no longer valid")):
        b.rows["decode_issues"].append({
            "broker_id": None, "log_dir": ".", "topic": None, "partition": None, "file": dump,
            "position": int(detail.split()[1].rstrip(":")), "kind": kind, "severity": "warning", "detail": detail,
        })
    found = {f["kind"]: f for f in run_rules(spark, b, as_of_ms=T0 + MIN)}
    assert found["unreadable_input"]["evidence"] == f"{dump}: unparsed_line: line 7: not a batch, record or header line"
    corrupt = found["corrupt_batch"]
    assert corrupt["evidence"] == f"{dump}: crc_mismatch: line 8: kafka-dump-log found the CRC no longer valid"
    assert corrupt["first_offset"] is None
