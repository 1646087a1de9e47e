"""The ways a scan may compute the same tables give the same tables: Spark SQL's generated code
and its interpreted expressions (``tuning.sql.sized_for``), and the data-quality suites run in
two parts (raw tables while the derived ones are built) and in one (``quality.SuiteRun``); what
the driver reads with pyarrow from the files equals what Spark computes over every row."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.dataset as ds
import pytest

from tests.realcorpus import needs_corpus, scenario_dir

pytestmark = [pytest.mark.corpus, needs_corpus]

#: real-broker scenarios with findings of several kinds
SCENARIOS = ("hanging-unadded-partition", "crashed-producer")


def _rows(tables_dir: Path, name: str) -> list[tuple[Any, ...]]:
    """Every row of a table, as sortable tuples (maps and lists as their text)."""
    return _table_rows(ds.dataset(str(tables_dir / name), format="parquet").to_table())


def _table_rows(table: pa.Table) -> list[tuple[Any, ...]]:
    """The rows of ``table``, as sortable tuples (maps and lists as their text), sorted."""
    return sorted(tuple(repr(v) for v in row.values()) for row in table.to_pylist())


def _derived_tables(tables_dir: Path) -> list[str]:
    from txn_audit.schemas import DERIVED_TABLES

    return [name for name in DERIVED_TABLES if (tables_dir / name).is_dir()]


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_generated_code_and_interpreted_expressions_give_the_same_tables(
        spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, scenario: str) -> None:
    from txn_audit import api
    from txn_audit.tuning import sql as tuning_sql

    dump = scenario_dir(scenario) / "logdirs"
    interpreted = api.scan(dump, tmp_path / "interpreted", spark=spark, options=api.AuditOptions(progress=False, report=False))
    assert spark.conf.get("spark.sql.codegen.wholeStage") != "false"  # the session is left as it was
    monkeypatch.setattr(tuning_sql, "INTERPRETED_MAX_BYTES", -1)
    generated = api.scan(dump, tmp_path / "generated", spark=spark, options=api.AuditOptions(progress=False, report=False, as_of_ms=interpreted.as_of_ms))
    assert [f.__dict__ for f in interpreted.findings] == [f.__dict__ for f in generated.findings]
    assert interpreted.findings, "the scenario has findings to compare"
    a, b = tmp_path / "interpreted" / "tables", tmp_path / "generated" / "tables"
    names = _derived_tables(a)
    assert "partition_transactions" in names and names == _derived_tables(b)
    for name in names:
        assert _rows(a, name) == _rows(b, name), name


def test_suites_in_two_parts_give_the_results_of_one_run(spark: Any, sample_scan: Any, tmp_path: Path) -> None:
    from txn_audit.ledger import Ledger
    from txn_audit.quality import SuiteRun, validate_tables
    from txn_audit.schemas import ALL_TABLES, DERIVED_TABLES, RAW_TABLES
    from txn_audit.tables import load_tables

    tables_dir = sample_scan.out / "tables"
    ledger = Ledger.load(tables_dir)
    assert ledger is not None
    manifest = ledger.raw
    whole = validate_tables(spark, load_tables(spark, tables_dir, ALL_TABLES), tmp_path / "one", manifest=manifest)
    run = SuiteRun(tmp_path / "two")
    run.validate(load_tables(spark, tables_dir, DERIVED_TABLES))  # in either order
    run.validate(load_tables(spark, tables_dir, RAW_TABLES), manifest=manifest)
    parts = run.finish()
    assert parts.to_json() == whole.to_json()
    assert len(whole.results) > 30 and len(whole.tables) > 10
    assert (tmp_path / "two" / "results.json").read_text() == (tmp_path / "one" / "results.json").read_text()


def test_decode_issues_are_read_from_the_files_without_a_job(spark: Any, sample_scan: Any) -> None:
    """The decode-issue rule's inputs read with pyarrow from a scan's files run no Spark job and
    read the damaged files' batches alone. The sample's planted damage is found where the
    generator says, with the offsets it wrote."""
    from txn_audit.detect import decode_issue_inputs
    from txn_audit.detect.decode_issues import decode_issue_findings
    from txn_audit.tables import load_raw_tables

    raw = load_raw_tables(spark, sample_scan.out / "tables")
    context = spark.sparkContext
    context.setJobGroup("decode-issue-inputs", "the decode-issue rule's inputs")
    try:
        issues, batches, texts = decode_issue_inputs(raw)
    finally:
        context.setJobGroup("", "")
    assert list(context.statusTracker().getJobIdsForGroup("decode-issue-inputs")) == []
    damaged = set(issues.column("file").to_pylist())
    assert batches.num_rows > 0 and set(batches.column("file").to_pylist()) <= damaged
    every = ds.dataset(str(sample_scan.out / "tables" / "batches"), format="parquet").to_table(columns=["file"])
    assert batches.num_rows == sum(1 for f in every.column("file").to_pylist() if f in damaged)

    read = decode_issue_findings(issues, batches, texts)
    found = {f["kind"]: f for f in read.to_pylist()}
    planted = {a["kind"]: a for a in sample_scan.manifest["anomalies"]}
    for kind in ("corrupt_batch", "truncated_segment"):
        where = planted[kind]
        assert found[kind]["topic"] == where["topic"] and found[kind]["partition"] == where["partition"]
        assert found[kind]["file"].endswith(f"{where['segment_base_offset']:020d}.log")
    # the offsets the generator gave the damaged batches: the corrupt one's own, the torn one's first
    corrupt, torn = found["corrupt_batch"], found["truncated_segment"]
    assert f"at byte {planted['corrupt_batch']['position']}: crc_mismatch" in corrupt["evidence"]
    assert (corrupt["first_offset"], corrupt["last_offset"]) == (planted["corrupt_batch"]["first_offset"],
                                                                 planted["corrupt_batch"]["last_offset"])
    assert torn["first_offset"] == planted["truncated_segment"]["first_offset"]


def test_partition_status_rows_are_read_from_the_files_without_a_job(spark: Any, sample_scan: Any,
                                                                     tmp_path: Path) -> None:
    """The rows the rules of a partition's status judge (``Reconstruction.rows``), read with
    pyarrow from the files reconstruct wrote, run no Spark job and are those of its frames. The
    transactions the sample plants open hold their partitions' LSO at the first offsets the
    generator wrote (its manifest), named in the stuck LSO's evidence with their producers."""
    from txn_audit.detect.stability_rules import stability_findings
    from txn_audit.reconstruct import DerivedOutput, reconstruct
    from txn_audit.tables import load_raw_tables

    result = sample_scan.result
    raw = load_raw_tables(spark, sample_scan.out / "tables")
    opts = result.options
    names = ("partition_stability", "replica_stability")
    rebuilt = reconstruct(raw, as_of_ms=opts.as_of_ms, late_tolerance_ms=opts.late_tolerance_ms,
                          output=DerivedOutput(str(tmp_path / "tables")))
    context = spark.sparkContext
    context.setJobGroup("partition-status-rows", "the rows of a partition's status")
    try:
        read = {name: rebuilt.rows(name) for name in names}
    finally:
        context.setJobGroup("", "")
    assert list(context.statusTracker().getJobIdsForGroup("partition-status-rows")) == []
    frames = {"partition_stability": rebuilt.partition_stability, "replica_stability": rebuilt.replica_stability}
    for name in names:
        collected = frames[name].toArrow()
        assert read[name].num_rows > 0 and _table_rows(read[name]) == _table_rows(collected)
    found = stability_findings(*(read[name] for name in names))
    stuck = {(f["topic"], f["partition"]): f for f in found.to_pylist() if f["kind"] == "stuck_lso"}
    for planted in sample_scan.manifest["anomalies"]:
        if planted["kind"] not in ("hanging_transaction", "open_transaction"):
            continue
        finding = stuck[(planted["topic"], planted["partition"])]
        assert (finding["producer_id"], finding["first_offset"]) == (planted["producer_id"], planted["first_offset"])
        assert finding["evidence"].endswith(f"whose transaction is open from offset {planted['first_offset']}")
        assert f"by producer {planted['producer_id']} ({planted['transactional_id']})" in finding["evidence"]


def test_sequence_gaps_find_their_batches_by_name_and_by_join_alike(
        spark: Any, sample_scan: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """``rules.batches_named`` names few segments in a filter Parquet answers from its
    statistics, and joins many: the same batches as a semi join, and the sample's sequence gap
    found the same either way, with its file."""
    from pyspark.sql import functions as F

    from txn_audit.detect import producer_rule_inputs, rules
    from txn_audit.detect.producer_rules import SEGMENT_KEY, sequence_findings
    from txn_audit.reconstruct import producer_events, producer_pass
    from txn_audit.tables import load_raw_tables

    raw = load_raw_tables(spark, sample_scan.out / "tables")  # one broker: every replica is audited
    batches = raw["batches"]
    events = producer_events(producer_pass(batches, raw["control_markers"], late_tolerance_ms=1_000,
                                           batch_files=raw.files("batches"),
                                           marker_files=raw.files("control_markers"))).localCheckpoint()
    key = list(SEGMENT_KEY)
    real = batches.select(*key).distinct().orderBy(*key).collect()
    assert len(real) >= 4
    wanted = spark.createDataFrame(
        [tuple(real[0]), tuple(real[-1]), (real[1]["topic"], real[1]["partition"], None),
         (real[2]["topic"], real[2]["partition"], 10**15)],  # a null and an absent segment match nothing
        batches.select(*key).schema)

    def rows(frame: Any) -> list[tuple[Any, ...]]:
        return sorted(tuple(r) for r in frame.select("file", "position", "base_offset").collect())

    named = rules.batches_named(batches, wanted, SEGMENT_KEY)
    plan = named._jdf.queryExecution().executedPlan().toString()
    assert "PushedFilters" in plan and "segment_base_offset" in plan.split("PushedFilters")[1].split("]")[0]
    assert "Join" not in plan
    expected = rows(batches.join(F.broadcast(wanted), key, "left_semi"))
    assert expected and rows(named) == expected
    assert rows(named) != rows(batches)

    def gaps() -> list[dict[str, Any]]:
        return sorted(sequence_findings(*producer_rule_inputs(events, batches)), key=repr)

    by_name = gaps()
    monkeypatch.setattr(rules, "NAMED_MAX", 0)
    assert "Join" in rules.batches_named(batches, wanted, SEGMENT_KEY)._jdf.queryExecution().executedPlan().toString()
    assert rows(rules.batches_named(batches, wanted, SEGMENT_KEY)) == expected
    by_join = gaps()
    assert by_name == by_join
    assert [f["kind"] for f in by_name] == ["sequence_gap"] and by_name[0]["file"]


#: dumps whose newest timestamp is read both ways: log dirs of one and of three brokers, and the
#: text output of Kafka's tools (with kafka-transactions.sh outputs, so reported transactions)
TIMED_DUMPS = (("logdirs", "realcorpus/healthy/logdirs"), ("logdirs", "kafka-4.4.0/follower-killed/logdirs"),
               ("logdirs", "kafka-2.8.2/healthy/logdirs"), ("text", "realcorpus/hanging-unadded-partition/tools"))


@pytest.mark.parametrize(("kind", "dump"), TIMED_DUMPS, ids=[dump for _, dump in TIMED_DUMPS])
def test_the_newest_timestamp_from_the_files_statistics_is_sparks(
        spark: Any, tmp_path: Path, kind: str, dump: str) -> None:
    """The default audit time as the manifest gives it (the files' statistics) equals the maximum
    one Spark job takes over every row; the manifest's row counts are the tables' own."""
    from tests.kafkacorpus import CORPUS
    from txn_audit import api
    from txn_audit.manifest import TIME_COLUMNS
    from txn_audit.schemas import RAW_TABLES
    from txn_audit.tables import load_raw_tables

    folder = scenario_dir(dump.split("/", 1)[1]) if dump.startswith("realcorpus/") else CORPUS / dump
    api.ingest(folder, tmp_path / "tables", spark=spark, progress=False, input_kind=kind)
    raw = load_raw_tables(spark, tmp_path / "tables")
    for name in TIME_COLUMNS:
        files = raw.files(name)
        assert files is not None and files.newest_times() is not None, name  # the statistics tell
    from pyspark.sql import functions as F

    from_statistics = api.newest_timestamp(raw)
    newest = max(raw[name].agg(F.max(column)).first()[0] or 0 for name, column in TIME_COLUMNS.items())
    assert from_statistics is not None and from_statistics == newest
    for name in RAW_TABLES:
        files = raw.files(name)
        assert files is not None and files.rows == raw[name].count(), name
    assert raw.holds_no_rows("reported_transactions") == (kind == "logdirs")
