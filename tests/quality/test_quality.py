"""The data-quality suites catch what they claim, and pass on clean data."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import SampleScan, fresh_python

pytestmark = pytest.mark.spark


def test_sample_passes_every_check_but_the_planted_damage(sample_scan: SampleScan) -> None:
    doc = json.loads((sample_scan.out / "quality" / "results.json").read_text())
    failed = {(r["table"], r["check"]) for r in doc["results"] if not r["success"]}
    # the sample's one flipped bit is a CRC mismatch: dump damage, already a corrupt_batch finding
    assert failed == {("batches", "crc_ok")}
    crc = next(r for r in doc["results"] if r["check"] == "crc_ok")
    assert crc["unexpected_count"] == 1 and crc["examples"][0]["crc_ok"] is False
    assert all(r["data_health"] for r in doc["results"] if not r["success"])
    assert not [f for f in sample_scan.result.findings if f.kind == "invariant_violation"]
    from txn_audit.schemas import ALL_TABLES

    assert set(doc["tables"]) == set(ALL_TABLES)


def test_docs_are_written_and_read_offline(sample_scan: SampleScan) -> None:
    docs = sample_scan.out / "quality" / "docs"
    assert (docs / "index.html").is_file()
    pages = list(docs.rglob("*.html"))
    assert len(pages) > 5
    remote = re.compile(r"""(?:src|href)\s*=\s*["']https?://|url\(\s*["']?https?://""", re.IGNORECASE)
    for page in [*pages, *docs.rglob("*.css")]:
        assert not remote.search(page.read_text(errors="replace")), f"{page} loads something from the network"
    index = (docs / "index.html").read_text()
    assert "validations/batches/" in index and "validations/partition_stability/" in index


def test_a_scan_s_suites_and_docs_never_run_the_modules_left_deferred(tmp_path: Path) -> None:
    """A scan of the sample dump in a fresh interpreter, every suite and the Data Docs included,
    leaves the modules Great Expectations was imported without (``DEFERRED_MODULES``) unrun.
    A fresh process, since in this one any earlier test may have run them: ``inspect`` finding
    a frame's or a code object's source (``inspect.stack``, pytest showing a failure) reads an
    attribute of every module in ``sys.modules``."""
    from txn_audit.sample import write_sample

    write_sample(tmp_path / "dump", seed=7)
    script = ("import sys, types\n"
              "from txn_audit import api\n"
              "from txn_audit.quality import DEFERRED_MODULES\n"
              f"api.scan({str(tmp_path / 'dump')!r}, {str(tmp_path / 'out')!r}, options=api.AuditOptions(progress=False))\n"
              "print(*[name for name in DEFERRED_MODULES if name not in sys.modules], '|',\n"
              "      *[name for name in DEFERRED_MODULES if type(sys.modules.get(name)) is types.ModuleType])\n")
    words = fresh_python(script)
    assert (tmp_path / "out" / "quality" / "docs" / "index.html").is_file()
    not_imported, ran = words[:words.index("|")], words[words.index("|") + 1:]
    assert not not_imported, f"{not_imported} no longer imported with Great Expectations"
    assert not ran, f"the scan ran {ran}: no longer worth deferring"


def test_great_expectations_loads_with_its_deferred_modules_run_on_first_use() -> None:
    """``import_great_expectations`` leaves ``scipy.stats`` and ``altair`` unexecuted (none of
    their submodules loaded), its finder defers nothing afterwards, and each module runs in
    full, working, the first time it is used."""
    script = ("import sys\n"
              "from txn_audit.quality import import_great_expectations\n"
              "import_great_expectations()\n"
              "import great_expectations as gx\n"
              "loaded = sorted(m for m in sys.modules if m.startswith(('scipy.stats.', 'altair.')))\n"
              "finders = [f for f in sys.meta_path if type(f).__module__ == 'txn_audit.tuning.imports']\n"
              "print([f.deferring for f in finders] == [False], loaded, callable(gx.get_context))\n"
              "from scipy import stats\n"
              "import altair\n"
              "print(stats.norm.cdf(0.0), altair.Chart.__name__, type(sys.modules['scipy.stats']).__name__)\n")
    assert fresh_python(script) == ["True", "[]", "True", "0.5", "Chart", "module"]


def _corrupted(spark: Any, tables_dir: Path) -> dict[str, Any]:
    from pyspark.sql import functions as F

    from txn_audit.schemas import ALL_TABLES
    from txn_audit.tables import load_tables

    t = load_tables(spark, tables_dir, ALL_TABLES)
    batches = t["batches"]
    # a duplicated batch row
    duplicated = batches.unionByName(batches.orderBy("topic", "partition", "base_offset").limit(1))
    # an epoch regression: the first data batch of a producer written with a higher epoch
    pid, first = (batches.where("producer_id >= 0 AND NOT is_control").groupBy("producer_id")
                  .agg(F.min("base_offset").alias("b"), F.count("*").alias("n")).where("n > 1")
                  .orderBy("producer_id").select("producer_id", "b").first())
    target = (F.col("producer_id") == pid) & (F.col("base_offset") == first)
    regressed = duplicated.withColumn(
        "producer_epoch", F.when(target, F.col("producer_epoch") + 5).otherwise(F.col("producer_epoch")))
    # an LSO above the high watermark on one partition
    stability = t["partition_stability"]
    one = stability.where("high_watermark IS NOT NULL").orderBy("topic", "partition").first()
    broken = stability.withColumn(
        "last_stable_offset",
        F.when((F.col("topic") == one["topic"]) & (F.col("partition") == one["partition"]),
               F.col("high_watermark") + 10).otherwise(F.col("last_stable_offset")))
    # an incident that explains no finding
    incidents = t["incidents"]
    first_id = incidents.orderBy("incident_id").first()["incident_id"]
    empty = incidents.withColumn("findings", F.when(F.col("incident_id") == first_id, 0).otherwise(F.col("findings")))
    return {"batches": regressed, "partition_stability": broken, "incidents": empty}


def test_corrupted_tables_fail_the_matching_checks(spark: Any, sample_scan: SampleScan, tmp_path: Path) -> None:
    from txn_audit.quality import validate_tables

    outcome = validate_tables(spark, _corrupted(spark, sample_scan.out / "tables"), tmp_path / "quality")
    failed = {(r.table, r.check) for r in outcome.results if not r.success}
    assert {("batches", "one_batch_per_offset"), ("batches", "no_overlap"), ("batches", "epochs_non_decreasing"),
            ("partition_stability", "lso_at_most_hw"), ("incidents", "explains_its_findings")} <= failed
    assert ("batches", "v2_size") not in failed and ("partition_stability", "held_not_negative") not in failed
    dup = next(r for r in outcome.results if r.check == "one_batch_per_offset")
    assert dup.unexpected_count == 1 and dup.examples[0]["copies"] == 2
    findings = outcome.findings()
    assert {f["kind"] for f in findings} == {"invariant_violation"}
    rules = " ".join(f["evidence"] for f in findings)
    assert "epoch never goes down" in rules and "last stable offset <= high watermark" in rules
    assert all(f["severity"] == "critical" for f in findings if "stable offset" in f["evidence"])
    saved = json.loads((tmp_path / "quality" / "results.json").read_text())
    assert saved["success"] is False and saved["statistics"]["failed"] == len(failed)


def test_a_suite_counts_its_row_checks_in_one_query_over_the_shared_results(
    spark: Any, sample_scan: SampleScan, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """GX counts every row check of a suite in one Spark query (``checks.row_counts``), and runs
    none alone; checks that read a companion view another check reads (the faults of the rules
    on one row, the replica order) read its cached result in that query."""
    from pyspark.sql import SparkSession

    from txn_audit.quality import CHECKS, validate_tables
    from txn_audit.quality.checks import BATCH_VIEW
    from txn_audit.schemas import ALL_TABLES
    from txn_audit.tables import load_tables

    tables = load_tables(spark, sample_scan.out / "tables", {"batches": ALL_TABLES["batches"]})
    batch_checks = [c for c in CHECKS if c.table == "batches"]
    queries = {c.query for c in batch_checks} - {None}
    seen: list[tuple[str, str]] = []
    real_sql = type(spark).sql

    def spying_sql(session: SparkSession, query: str, *args: Any, **kwargs: Any) -> Any:
        frame = real_sql(session, query, *args, **kwargs)
        seen.append((query, frame._jdf.queryExecution().withCachedData().toString()))
        return frame

    monkeypatch.setattr(type(spark), "sql", spying_sql)
    outcome = validate_tables(spark, tables, tmp_path / "quality")
    assert {r.check for r in outcome.results} == {c.name for c in batch_checks}
    assert all(r.success for r in outcome.results if r.check != "crc_ok")  # the sample's one flipped bit
    # every check but the columns' is a row check, all counted by one query
    assert len(queries) == len(batch_checks) - 1
    formatted = {template.format(batch=BATCH_VIEW) for template in queries}  # type: ignore[union-attr]
    counting = [plan for query, plan in seen if all(f"({one})" in query for one in formatted)]
    assert len(counting) == 1, f"{len(counting)} queries count the suite's row checks"
    # only the failed crc_ok runs its query again, for its examples, and it reads the cached rows
    # of the companion it shares, not every batch
    crc_query = next(c.query for c in batch_checks if c.name == "crc_ok").format(batch=BATCH_VIEW)  # type: ignore[union-attr]
    alone = [(query, plan) for query, plan in seen if query in formatted]
    assert [query for query, _ in alone] == [crc_query], "a row check ran on its own"
    above_cache, _, cached = alone[0][1].partition("InMemoryRelation")
    assert cached and "Relation [" not in above_cache, "the examples read the table, not the cached rows"
    crc = next(r for r in outcome.results if r.check == "crc_ok")
    assert crc.unexpected_count == 1 and crc.examples and crc.examples[0]["crc_ok"] is False
    reading = [c for c in batch_checks if c.companions]
    assert {c.name for c in reading} == {"keys_present", "offsets_ordered", "control_is_one_record", "v2_size",
                                         "one_batch_per_offset", "no_overlap", "epochs_non_decreasing", "crc_ok"}
    # a companion is cached when several checks read it
    alone = {c.name for c in reading if sum(c.companions[0] in other.companions for other in reading) == 1}
    assert alone == {"epochs_non_decreasing"}
    # each check that reads a companion another reads too reads one cached result, in its branch
    assert counting[0].count("InMemoryRelation") == len(reading) - len(alone)
    # the suite leaves no view of its own behind
    assert not [t.name for t in spark.catalog.listTables() if t.name.startswith(f"{BATCH_VIEW}_")]


def test_row_counts_count_each_query_and_keep_a_failing_one_apart(spark: Any) -> None:
    """One query counts them all; when one cannot run, the others are still counted and it
    alone carries its error."""
    from txn_audit.quality.checks import row_counts

    spark.range(10).createOrReplaceTempView("row_counts_ten")
    try:
        good = ["SELECT * FROM row_counts_ten WHERE id < 3", "SELECT * FROM row_counts_ten WHERE id > 20",
                "SELECT id % 2 AS odd, count(*) FROM row_counts_ten GROUP BY id % 2"]
        assert row_counts(spark, good) == {"counts": [3, 0, 2], "errors": [None, None, None]}
        counted = row_counts(spark, [good[0], "SELECT no_such_column FROM row_counts_ten", good[2]])
        assert counted["counts"] == [3, None, 2]
        assert counted["errors"][0] is None and counted["errors"][2] is None
        assert "no_such_column" in counted["errors"][1]
    finally:
        spark.catalog.dropTempView("row_counts_ten")


def test_a_check_that_cannot_run_fails_alone_with_its_error(
    spark: Any, sample_scan: SampleScan, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A row check whose query Spark cannot run fails with the error, and the other checks of
    its suite still pass or fail on their rows."""
    import txn_audit.quality as quality
    from txn_audit.quality.checks import Check, RowsBuilder
    from txn_audit.schemas import ALL_TABLES
    from txn_audit.tables import load_tables

    broken = Check("control_markers", "broken", "a query Spark cannot run",
                   RowsBuilder("SELECT no_such_column FROM {batch}"))
    monkeypatch.setattr(quality, "CHECKS", (*quality.CHECKS, broken))
    tables = load_tables(spark, sample_scan.out / "tables", {"control_markers": ALL_TABLES["control_markers"]})
    outcome = quality.validate_tables(spark, tables, tmp_path / "quality")
    results = {r.check: r for r in outcome.results}
    assert set(results) == {c.name for c in quality.CHECKS if c.table == "control_markers"}
    assert not results["broken"].success and "no_such_column" in (results["broken"].error or "")
    others = [r for name, r in results.items() if name != "broken"]
    assert others and all(r.success and r.error is None for r in others)
    assert all(r.unexpected_count == 0 for r in others if r.expectation != "expect_table_columns_to_match_set")


@pytest.mark.parametrize("reading", ["files", "few files", "window"])
def test_replica_order_checks_find_every_copy_and_overlap(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, reading: str
) -> None:
    """one_batch_per_offset and no_overlap read the neighbours in replica order, from the files
    (a read of files with their manifest, at least ``TASKS_MIN_ROWS`` rows) or from a Spark
    window (fewer rows, or a frame without a manifest): against a plain count of copies and a
    walk over the sorted rows."""
    from collections import Counter

    from tests.quality.test_replica_order import COLUMNS, batch_rows, walked, write_files
    from tests.quality.test_replica_order import manifest_of
    from txn_audit.quality import CHECKS, _drop_views, _with_companions
    from txn_audit.replica_tasks import reading as reading_module
    from txn_audit.schemas import spark_schema

    rows = batch_rows(7, batches=60)
    files = None
    if reading == "window":
        frame = spark.createDataFrame([tuple(r.values()) for r in rows], spark_schema(COLUMNS))
    else:
        files = manifest_of(write_files(tmp_path, rows, 7))
        frame = spark.read.parquet(str(tmp_path))
        monkeypatch.setattr(reading_module, "TASKS_MIN_ROWS", len(rows) + (reading == "few files"))
    checks = [c for c in CHECKS if c.table == "batches" and c.name in ("one_batch_per_offset", "no_overlap")]
    views = _with_companions(frame, "replica_order_rows", checks, files=files)
    plan = views["replica_order_rows_replica_neighbours"]._jdf.queryExecution().analyzed().toString()
    assert ("MapInArrow" in plan) == (reading == "files") and ("Window" in plan) == (reading != "files")

    def run(name: str) -> set[tuple[Any, ...]]:
        check = next(c for c in checks if c.name == name)
        query = check.build({}).unexpected_rows_query.format(batch="replica_order_rows")
        return {tuple(r) for r in spark.sql(query).collect()}

    try:
        copies = Counter(tuple(r.values())[:5] for r in rows if r["base_offset"] is not None)
        assert run("one_batch_per_offset") == {(*key, n) for key, n in copies.items() if n > 1}
        assert any(n == 3 for n in copies.values())
        overlaps = {(topic, partition, broker, base, last, prev_last)
                    for broker, _, topic, partition, base, last, _, prev_last in walked(rows)
                    if prev_last is not None and base <= prev_last}
        assert overlaps and run("no_overlap") == overlaps
    finally:
        _drop_views(views)


def test_row_checks_over_one_scan_each_catch_only_their_own_fault(
    spark: Any, sample_scan: SampleScan, tmp_path: Path
) -> None:
    """The per-row batch checks read one set of faults: each planted fault fails its own check,
    once, with the planted row as the example, and no other."""
    from pyspark.sql import functions as F

    from txn_audit.schemas import ALL_TABLES
    from txn_audit.tables import load_tables

    batches = load_tables(spark, sample_scan.out / "tables", {"batches": ALL_TABLES["batches"]})["batches"]
    clean = batches.where("crc_ok").orderBy("topic", "partition", "base_offset")
    data = clean.where("NOT is_control").limit(3).collect()
    marker = clean.where("is_control").first()
    plants = {  # check -> (row to copy, its changed columns)
        "keys_present": (data[0], {"position": None}),
        "offsets_ordered": (data[1], {"last_offset": data[1]["base_offset"] - 1}),
        "v2_size": (data[2], {"size_bytes": 60}),
        "control_is_one_record": (marker, {"record_count": 2}),
    }
    planted = None
    for name, (row, changes) in plants.items():
        one = clean.where((F.col("file") == row["file"]) & (F.col("position") == row["position"]))
        for column, value in changes.items():
            one = one.withColumn(column, F.lit(value).cast(batches.schema[column].dataType))
        # far from every real batch, so that the replica-order checks stay clean
        one = one.withColumn("log_dir", F.lit(f"planted-{name}"))
        planted = one if planted is None else planted.unionByName(one)
    assert planted is not None
    _each_plant_fails_its_check_alone(spark, "batches", clean.unionByName(planted), set(plants), tmp_path)


def test_coordinator_log_checks_each_catch_only_their_own_fault(
    spark: Any, sample_scan: SampleScan, tmp_path: Path
) -> None:
    """An unknown state fails ``state_valid`` alone and a Complete* record listing partitions
    ``complete_lists_nothing`` alone, each once, with the planted record as the example."""
    from pyspark.sql import functions as F

    from txn_audit.schemas import ALL_TABLES
    from txn_audit.tables import load_tables

    log = load_tables(spark, sample_scan.out / "tables", {"txn_log": ALL_TABLES["txn_log"]})["txn_log"]
    ongoing = log.where("state = 'Ongoing' AND size(topic_partitions) > 0").orderBy("partition", "offset").first()
    plants = {"state_valid": {"state": "Preparing"}, "complete_lists_nothing": {"state": "CompleteCommit"}}
    planted = None
    for name, changes in plants.items():
        one = log.where((F.col("partition") == ongoing["partition"]) & (F.col("offset") == ongoing["offset"]))
        for column, value in changes.items():
            one = one.withColumn(column, F.lit(value))
        one = one.withColumn("log_dir", F.lit(f"planted-{name}"))
        planted = one if planted is None else planted.unionByName(one)
    assert planted is not None
    _each_plant_fails_its_check_alone(spark, "txn_log", log.unionByName(planted), set(plants), tmp_path)


def _each_plant_fails_its_check_alone(spark: Any, table: str, frame: Any, checks: set[str], tmp_path: Path) -> None:
    """``table``'s suite over ``frame``, which holds one planted row per check of ``checks``, its
    ``log_dir`` ``planted-<check>``: exactly those checks fail, each on its one planted row."""
    from txn_audit.quality import validate_tables

    outcome = validate_tables(spark, {table: frame}, tmp_path / "quality")
    failed = {r.check: r for r in outcome.results if not r.success}
    assert set(failed) == checks
    for name, result in failed.items():
        assert result.unexpected_count == 1, name
        assert result.examples[0]["log_dir"] == f"planted-{name}"


def test_a_marker_before_its_data_fails_the_transaction_offsets_check(
    spark: Any, sample_scan: SampleScan, tmp_path: Path
) -> None:
    from pyspark.sql import functions as F

    from txn_audit.quality import validate_tables
    from txn_audit.schemas import ALL_TABLES
    from txn_audit.tables import load_tables

    wanted = {"partition_transactions": ALL_TABLES["partition_transactions"]}
    ptx = load_tables(spark, sample_scan.out / "tables", wanted)["partition_transactions"]
    one = ptx.where("marker_offset IS NOT NULL AND last_data_offset IS NOT NULL").orderBy(
        "topic", "partition", "producer_id", "txn_seq").first()
    target = ((F.col("topic") == one["topic"]) & (F.col("partition") == one["partition"])
              & (F.col("producer_id") == one["producer_id"]) & (F.col("txn_seq") == one["txn_seq"]))
    # the marker of one closed transaction now sits on its last data record
    broken = ptx.withColumn("marker_offset",
                            F.when(target, F.col("last_data_offset")).otherwise(F.col("marker_offset")))
    outcome = validate_tables(spark, {"partition_transactions": broken}, tmp_path / "quality")
    failed = {r.check: r for r in outcome.results if not r.success}
    assert set(failed) == {"offsets_ordered"}
    example = failed["offsets_ordered"].examples[0]
    assert failed["offsets_ordered"].unexpected_count == 1
    assert (example["topic"], example["partition"], example["producer_id"], example["txn_seq"]) == (
        one["topic"], one["partition"], one["producer_id"], one["txn_seq"])
    assert example["marker_offset"] == one["last_data_offset"]


def test_an_epoch_going_down_is_shown_at_the_entry_that_breaks_the_rule(spark: Any, tmp_path: Path) -> None:
    """The example (and the invariant_violation quoting it) is the first batch or marker written
    with a lower epoch after a higher one, not the higher-epoch entry before it."""
    from tests.audit.builders import RawBuilder
    from txn_audit.quality import validate_tables

    t0 = 1_800_000_000_000
    b = RawBuilder()
    b.batch("t", 0, count=2, ts=t0)  # offsets 0-1, no producer
    b.batch("t", 0, pid=5, epoch=3, seq=0, ts=t0 + 1, txn=True)  # 2
    b.marker("t", 0, pid=5, epoch=3, kind="COMMIT", ts=t0 + 2, coordinator_epoch=7)  # 3
    b.batch("t", 0, pid=5, epoch=2, seq=0, ts=t0 + 3, txn=True)  # 4: epoch 2 after epoch 3
    b.marker("t", 0, pid=5, epoch=2, kind="ABORT", ts=t0 + 4, coordinator_epoch=6)  # 5: coordinator epoch 6 after 7
    tables = b.tables(spark)
    outcome = validate_tables(spark, {name: tables[name] for name in ("batches", "control_markers")},
                              tmp_path / "quality")
    failed = {r.check: r for r in outcome.results if not r.success}
    assert set(failed) == {"epochs_non_decreasing", "coordinator_epoch_non_decreasing"}
    epochs = failed["epochs_non_decreasing"].examples[0]
    assert (epochs["topic"], epochs["partition"], epochs["producer_id"], epochs["base_offset"],
            epochs["producer_epoch"]) == ("t", 0, 5, 4, 2)
    coordinator = failed["coordinator_epoch_non_decreasing"].examples[0]
    assert (coordinator["offset"], coordinator["coordinator_epoch"]) == (5, 6)
    # "data-quality check <table>.<check> failed: ..."
    shown = {f["evidence"].split()[2].split(".")[1]: (f["first_offset"], f["evidence"]) for f in outcome.findings()}
    assert shown["epochs_non_decreasing"][0] == 4 and "e.g. t-0 at offset 4)" in shown["epochs_non_decreasing"][1]
    assert shown["coordinator_epoch_non_decreasing"][0] == 5
    assert "e.g. t-0 at offset 5)" in shown["coordinator_epoch_non_decreasing"][1]
