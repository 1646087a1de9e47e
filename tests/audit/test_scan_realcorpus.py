"""Scan verdicts on the real-broker corpus, against what Kafka's own tools said."""

from __future__ import annotations

from typing import Any

import pytest

from tests.kafkacorpus import INCIDENT_CAUSES, incidents_explaining
from tests.ondemand import OnDemand
from tests.realcorpus import SCENARIOS, expected_json, needs_corpus, offsets_json, scenario_dir

pytestmark = [pytest.mark.corpus, needs_corpus]

ONE_MINUTE = 60_000


def _find_hanging_time(scenario: str) -> int:
    commands = expected_json(scenario)["tool_commands"]
    return next(c["at_ms"] for c in commands if "find-hanging" in c["command"])


@pytest.fixture(scope="module")
def scans(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> OnDemand[Any]:
    """Each scenario scanned as find-hanging ran it: at its run time, with a 1 minute timeout;
    made when a selected test first asks for it."""
    from txn_audit import api

    def scan(name: str) -> Any:
        return api.scan(scenario_dir(name) / "logdirs", tmp_path_factory.mktemp(f"scan-{name}"), spark=spark, options=api.AuditOptions(as_of_ms=_find_hanging_time(name), max_transaction_timeout_ms=ONE_MINUTE, progress=False))

    return OnDemand(SCENARIOS, scan)


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_hw_and_lso_equal_the_brokers(scans: OnDemand[Any], scenario: str) -> None:
    ours = {f"{p.topic}-{p.partition}": p for p in scans[scenario].partitions}
    for name, exp in offsets_json(scenario).items():
        assert ours[name].high_watermark == exp["high_watermark"], name
        assert ours[name].last_stable_offset == exp["last_stable_offset"], name
        assert ours[name].log_start_offset == exp["log_start_offset"], name


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_hanging_set_equals_find_hanging(scans: OnDemand[Any], scenario: str) -> None:
    ours = {
        (f.topic, f.partition, f.producer_id, f.producer_epoch, f.first_offset)
        for f in scans[scenario].findings
        if f.kind == "hanging_transaction"
    }
    kafka = {
        (r["Topic"], int(r["Partition"]), int(r["ProducerId"]), int(r["ProducerEpoch"]), int(r["StartOffset"]))
        for r in expected_json(scenario)["find_hanging"]["rows"]
    }
    assert ours == kafka


def _at_least_warning(result: Any) -> list[tuple[str, str, int | None]]:
    return [(f.kind, f.topic, f.partition) for f in result.at_or_above("warning")]


@pytest.mark.parametrize("scenario", ["healthy", "timeout-abort", "verification-rejects"])
def test_quiet_scenarios_have_nothing_at_warning(scans: OnDemand[Any], scenario: str) -> None:
    if scenario not in scans:
        pytest.skip(f"{scenario} not in the corpus")
    assert _at_least_warning(scans[scenario]) == []
    # every partition is stable: its LSO is its HW (where the broker checkpointed one), and
    # nothing is held behind it
    for p in scans[scenario].partitions:
        assert p.high_watermark is None or p.last_stable_offset == p.high_watermark, p
        assert (p.held_records, p.held_bytes, p.held_since_timestamp) == (0, 0, None), p


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_each_planted_anomaly_is_one_incident_and_nothing_else_is_loud(scans: OnDemand[Any], scenario: str) -> None:
    result = scans[scenario]
    explained = set()
    for anomaly in expected_json(scenario).get("anomalies", []):
        if anomaly["type"] in INCIDENT_CAUSES:
            hits = incidents_explaining(result, anomaly)
            assert [i.kind for i in hits] == [INCIDENT_CAUSES[anomaly["type"]]], anomaly
            explained.add(hits[0].incident_id)
    loud = [(i.kind, i.summary) for i in result.incidents_at_or_above("warning") if i.incident_id not in explained]
    assert loud == []


def test_crashed_producer_is_open_and_stuck_not_hanging(scans: OnDemand[Any]) -> None:
    result = scans["crashed-producer"]
    kinds = {(f.kind, f.topic, f.partition) for f in result.findings}
    for p in (0, 1):
        assert ("open_transaction", "crash", p) in kinds
        assert ("stuck_lso", "crash", p) in kinds
    assert not [f for f in result.findings if f.kind == "hanging_transaction"]
    held = {p.partition: p.held_records for p in result.partitions if p.topic == "crash"}
    assert held[0] == 10 and held[1] == 10
    opened = [f for f in result.findings if f.kind == "open_transaction"]
    assert {f.transactional_id for f in opened} == {"crash-txn"}


def test_hanging_unadded_partition_has_a_working_abort_command(scans: OnDemand[Any]) -> None:
    hanging = [f for f in scans["hanging-unadded-partition"].findings if f.kind == "hanging_transaction"]
    assert len(hanging) == 1
    f = hanging[0]
    assert (f.topic, f.partition, f.first_offset, f.severity) == ("hang", 1, 0, "critical")
    args = f.remediation.split()
    assert args[0] == "kafka-transactions.sh" and args[args.index("--bootstrap-server") + 2] == "abort"
    assert args[args.index("--topic") + 1] == "hang"
    assert args[args.index("--partition") + 1] == "1"
    # the start offset is what DescribeProducers reports as CurrentTransactionStartOffset for hang-1
    tools = (scenario_dir("hanging-unadded-partition") / "tools" /
             "kafka-transactions-describe-producers-hang-1.txt").read_text().splitlines()
    start = tools[-1].split()[-1]
    assert args[args.index("--start-offset") + 1] == start
    legacy = f.remediation_pre_3_0.split()
    assert legacy[legacy.index("--producer-id") + 1] == "0"
    assert legacy[legacy.index("--producer-epoch") + 1] == "0"
    assert legacy[legacy.index("--coordinator-epoch") + 1] == "0"  # -1 in DescribeProducers, raised to 0
    assert "hang-txn" in f.evidence and "CompleteCommit" in f.evidence


def test_without_an_audit_time_the_copy_dates_the_scan_and_the_coordinators_log_decides(
        spark: Any, tmp_path: Any) -> None:
    """No --as-of, no timeout: the audit time is when the copy was taken (the KRaft metadata log's
    newest record, after find-hanging ran), and the stray batch on hang-1 hangs whatever the time:
    the coordinator's CompleteCommit, written after it, does not list hang-1. As find-hanging
    said, with the same abort command, and no remedy that waits for a timeout."""
    import json

    from txn_audit import api

    scenario = "hanging-unadded-partition"
    result = api.scan(scenario_dir(scenario) / "logdirs", tmp_path, spark=spark, options=api.AuditOptions(progress=False, quality=False))
    assert result.audit_time.source == "metadata_log"
    assert _find_hanging_time(scenario) <= result.as_of_ms
    assert result.as_of_ms > (result.audit_time.newest_record_ms or 0)
    (hanging,) = [f for f in result.findings if f.kind == "hanging_transaction"]
    kafka = expected_json(scenario)["find_hanging"]["rows"]
    assert [(hanging.topic, hanging.partition, hanging.first_offset)] == [
        (r["Topic"], int(r["Partition"]), int(r["StartOffset"])) for r in kafka]
    assert hanging.severity == "critical" and "whatever the audit time" in hanging.evidence
    assert "CompleteCommit" in hanging.evidence
    (incident,) = result.incidents
    assert incident.kind == "stray_write"
    assert incident.commands == ("kafka-transactions.sh --bootstrap-server <broker> abort --topic hang "
                                 "--partition 1 --start-offset 0",)
    assert "None needed" not in incident.remediation
    written = json.loads((tmp_path / "summary.json").read_text())["audit_time"]
    assert (written["source"], written["ms"]) == ("metadata_log", result.as_of_ms)


def test_a_given_audit_time_before_the_newest_record_is_warned_of(spark: Any, tmp_path: Any) -> None:
    """The CLI names the time it used and how; one before the dump's newest record gets a warning line."""
    from typer.testing import CliRunner

    from txn_audit.cli import app

    run = CliRunner().invoke(app, ["scan", str(scenario_dir("crashed-producer") / "logdirs"), "--as-of",
                                   "2020-01-01T00:00:00Z", "--no-progress", "--no-quality"])
    assert "audit time 2020-01-01 00:00:00.000 UTC: given with --as-of" in run.output
    assert "warning: the audit time 2020-01-01 00:00:00.000 UTC is before the dump's newest record" in run.output


# -- the same scenarios from Kafka's tools' text output (kafka-dump-log, kafka-transactions) --------


@pytest.fixture(scope="module")
def text_scans(spark: Any) -> OnDemand[Any]:
    """Each scenario's ``tools/`` folder scanned with the options of ``scans``, on demand."""
    from txn_audit import api

    return OnDemand(SCENARIOS, lambda name: api.scan(scenario_dir(name) / "tools", spark=spark, options=api.AuditOptions(as_of_ms=_find_hanging_time(name), max_transaction_timeout_ms=ONE_MINUTE, progress=False, quality=False, input_kind="text")))


def _finding_keys(result: Any) -> list[tuple[Any, ...]]:
    fields = ("kind", "severity", "topic", "partition", "producer_id", "producer_epoch", "transactional_id",
              "first_offset", "last_offset", "first_timestamp", "last_timestamp")
    # invariant_violation comes from the data-quality suites, which the text scans skip
    return sorted((tuple(getattr(f, k) for k in fields) for f in result.findings if f.kind != "invariant_violation"),
                  key=repr)


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_text_dump_gives_the_same_findings(scans: OnDemand[Any], text_scans: OnDemand[Any], scenario: str) -> None:
    assert _finding_keys(text_scans[scenario]) == _finding_keys(scans[scenario])


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_text_dump_gives_the_same_lso_and_says_where_the_hw_came_from(
    scans: OnDemand[Any], text_scans: OnDemand[Any], scenario: str
) -> None:
    binary = {(p.topic, p.partition): p for p in scans[scenario].partitions}
    text = {(p.topic, p.partition): p for p in text_scans[scenario].partitions}
    # the KRaft metadata log (not dumped to text) is no audited partition of the binary scan either
    assert set(text) == set(binary) and "__cluster_metadata" not in {k[0] for k in binary}
    for key, p in text.items():
        assert p.last_stable_offset == binary[key].last_stable_offset, key
    reported = offsets_json(scenario)
    for key, p in text.items():
        name = f"{key[0]}-{key[1]}"
        if name in reported:
            assert (p.high_watermark, p.hw_source) == (reported[name]["high_watermark"], "offsets_file")
        else:  # offsets.json covers the data topics only
            assert (p.high_watermark, p.hw_source) == (None, "log_end")
    assert text_scans[scenario].summary()["hw_sources"].get("offsets_file") == len(reported)


def test_text_scan_at_its_default_time_agrees_with_find_hanging(spark: Any, tmp_path: Any) -> None:
    """The text dump at its default audit time: the coordinator's log proves the stray batch
    hangs, so the attached find-hanging output (run later) and the scan agree, with no
    disagreement to explain. Through the CLI, which says where each HW came from."""
    import json

    from typer.testing import CliRunner

    from txn_audit.cli import app

    scenario = "hanging-unadded-partition"
    out = tmp_path / "out"
    run = CliRunner().invoke(app, ["scan", str(scenario_dir(scenario) / "tools"), "--input-kind", "text",
                                   "--out", str(out), "--no-quality", "--no-progress", "--min-severity", "info"])
    assert run.exit_code == 4, run.output  # the hanging transaction is critical
    assert "tool_disagreement" not in run.output
    hw_row = next(line for line in run.output.splitlines() if "hang-1" in line and "offsets file" in line)
    assert " 11 " in hw_row  # the HW offsets.json reports
    summary = json.loads((out / "summary.json").read_text())
    # no metadata log in the text, nor broker file times: the newest record dates it
    assert summary["audit_time"]["source"] == "newest_record"
    (hanging,) = [f for f in summary["findings"] if f["kind"] == "hanging_transaction"]
    assert (hanging["topic"], hanging["partition"], hanging["producer_id"], hanging["first_offset"]) == ("hang", 1, 0, 0)
    report = (out / "report.html").read_text()
    note = report.split("High watermarks: ")[1].split("</p>")[0]
    assert "3 from the offsets file" in note and "3 from nowhere" in note


def test_a_find_hanging_run_that_disagrees_is_explained(spark: Any, tmp_path: Any) -> None:
    """find-hanging's output lists a transaction the dump shows closed (its marker is in the
    text): a ``tool_disagreement`` finding says what the dump holds there."""
    import shutil

    from txn_audit import api

    scenario = "crashed-producer"
    tools = tmp_path / "tools"
    shutil.copytree(scenario_dir(scenario) / "tools", tools)
    found = tools / "kafka-transactions-find-hanging.txt"
    header = [line for line in found.read_text().splitlines() if line.startswith("#")]
    found.write_text("\n".join([*header, "Topic\tPartition\tProducerId\tProducerEpoch\tCoordinatorEpoch\t"
                                "StartOffset\tLastTimestamp\tDuration(min)",
                                "crash\t2\t0\t0\t0\t0\t1795377598000\t1"]) + "\n")
    result = api.scan(tools, spark=spark, options=api.AuditOptions(as_of_ms=_find_hanging_time(scenario), max_transaction_timeout_ms=ONE_MINUTE, progress=False, quality=False, input_kind="text"))
    (disagreement,) = [f for f in result.findings if f.kind == "tool_disagreement"]
    assert (disagreement.topic, disagreement.partition, disagreement.first_offset) == ("crash", 2, 0)
    assert "txn-audit does not call it hanging" in disagreement.evidence


def test_describe_outputs_stand_in_for_a_missing_transaction_log(
    spark: Any, scans: OnDemand[Any], tmp_path: Any
) -> None:
    """crash-txn is Ongoing and lists crash-0 and crash-1: without its __transaction_state dump
    the open transactions would look hanging; `kafka-transactions.sh describe` says they are not."""
    import shutil

    from txn_audit import api

    scenario = "crashed-producer"
    tools = tmp_path / "tools"
    shutil.copytree(scenario_dir(scenario) / "tools", tools)
    for txn_state in (tools / "dump-log").glob("__transaction_state-*.txt"):
        txn_state.unlink()
    options = api.AuditOptions(as_of_ms=_find_hanging_time(scenario), max_transaction_timeout_ms=ONE_MINUTE,
                               progress=False, quality=False)
    with_describe = api.scan(tools, spark=spark, options=options)
    assert _finding_keys(with_describe) == _finding_keys(scans[scenario])
    for describe in tools.glob("kafka-transactions-describe-crash-*.txt"):
        describe.unlink()
    without = api.scan(tools, spark=spark, options=options)
    assert {(f.kind, f.partition) for f in without.findings if f.topic == "crash"
            and f.kind.endswith("transaction")} == {("hanging_transaction", 0), ("hanging_transaction", 1)}


# -- the scenario folder as it is: log dirs with Kafka's tools' outputs beside them ----------------


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_tool_outputs_beside_the_log_dirs_are_read_and_agree(
    spark: Any, scans: OnDemand[Any], scenario: str, tmp_path: Any
) -> None:
    """The scenario's folder (``logdirs/``, ``tools/``, ``expected.json``): the log dirs give the
    verdicts of the log dirs alone, and the kafka-transactions.sh outputs beside them are read as
    a text dump's are, find-hanging's compared with the verdicts: Kafka's tools agree, so no
    ``tool_disagreement``. The dump-log text beside the log dirs is listed, not decoded a second time."""
    import pyarrow.parquet as pq

    from txn_audit import api
    from txn_audit.ingest.text import discover_text

    result = api.scan(scenario_dir(scenario), tmp_path, spark=spark, options=api.AuditOptions(
        as_of_ms=_find_hanging_time(scenario), max_transaction_timeout_ms=ONE_MINUTE, progress=False, quality=False))
    assert _finding_keys(result) == _finding_keys(scans[scenario])
    assert "tool_disagreement" not in {f.kind for f in result.findings}
    tables = tmp_path / "tables"
    reported = pq.read_table(tables / "reported_transactions").to_pylist()
    from_text = discover_text(scenario_dir(scenario) / "tools").reported  # the tools folder as a text dump
    assert sorted((r["tool"], r["file"].split("/")[-1], r["line"]) for r in reported) == \
        sorted((r["tool"], r["file"].split("/")[-1], r["line"]) for r in from_text)
    listed = {r["path"]: r for r in pq.read_table(tables / "segments").to_pylist() if r["log_dir"] == "."}
    dump_logs = [r for path, r in listed.items() if path.startswith("tools/dump-log/")]
    assert dump_logs and not any(r["decoded"] for r in dump_logs)
    assert listed["expected.json"]["decoded"] is False and listed["tools/offsets.json"]["decoded"] is True


def test_a_find_hanging_beside_the_log_dirs_that_disagrees_is_explained(spark: Any, tmp_path: Any) -> None:
    """find-hanging's output beside the log dirs lists a transaction the log shows closed: a
    ``tool_disagreement`` finding, as for a text dump."""
    import shutil

    from txn_audit import api

    scenario = "crashed-producer"
    folder = tmp_path / scenario
    shutil.copytree(scenario_dir(scenario), folder)
    found = folder / "tools" / "kafka-transactions-find-hanging.txt"
    header = [line for line in found.read_text().splitlines() if line.startswith("#")]
    found.write_text("\n".join([*header, "Topic\tPartition\tProducerId\tProducerEpoch\tCoordinatorEpoch\t"
                                "StartOffset\tLastTimestamp\tDuration(min)",
                                "crash\t2\t0\t0\t0\t0\t1795377598000\t1"]) + "\n")
    result = api.scan(folder, tmp_path / "out", spark=spark, options=api.AuditOptions(
        as_of_ms=_find_hanging_time(scenario), max_transaction_timeout_ms=ONE_MINUTE, progress=False, quality=False))
    (disagreement,) = [f for f in result.findings if f.kind == "tool_disagreement"]
    assert (disagreement.topic, disagreement.partition, disagreement.first_offset) == ("crash", 2, 0)
    assert "txn-audit does not call it hanging" in disagreement.evidence
