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
        return api.scan(
            scenario_dir(name) / "logdirs", tmp_path_factory.mktemp(f"scan-{name}"), spark=spark,
            as_of_ms=_find_hanging_time(name), max_transaction_timeout_ms=ONE_MINUTE, progress=False,
        )

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


def test_default_audit_time_is_the_newest_timestamp(spark: Any, tmp_path: Any) -> None:
    """Without --as-of the stray batch on hang-1 is seconds old: open, not yet hanging."""
    from txn_audit import api

    result = api.scan(scenario_dir("hanging-unadded-partition") / "logdirs", tmp_path, spark=spark, progress=False)
    assert result.as_of_ms < _find_hanging_time("hanging-unadded-partition")
    assert not [f for f in result.findings if f.kind == "hanging_transaction"]
    assert [(f.kind, f.partition) for f in result.findings if f.topic == "hang" and
            f.kind == "open_transaction"] == [("open_transaction", 1)]


# -- the same scenarios from Kafka's tools' text output (kafka-dump-log, kafka-transactions) --------


@pytest.fixture(scope="module")
def text_scans(spark: Any) -> OnDemand[Any]:
    """Each scenario's ``tools/`` folder scanned with the options of ``scans``, on demand."""
    from txn_audit import api

    return OnDemand(SCENARIOS, lambda name: api.scan(
        scenario_dir(name) / "tools", spark=spark, as_of_ms=_find_hanging_time(name),
        max_transaction_timeout_ms=ONE_MINUTE, progress=False, quality=False, input_kind="text"))


def _finding_keys(result: Any) -> list[tuple[Any, ...]]:
    fields = ("kind", "severity", "topic", "partition", "producer_id", "producer_epoch", "transactional_id",
              "first_offset", "last_offset", "first_timestamp_ms", "last_timestamp_ms")
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


def test_text_scan_at_its_default_time_explains_find_hanging(spark: Any, tmp_path: Any) -> None:
    """At the dump's newest timestamp the stray batch is not yet hanging, but the attached
    find-hanging output (run later) lists it: the disagreement is a finding saying how to
    judge it as the tool did. Through the CLI, which says where each HW came from."""
    import json

    from typer.testing import CliRunner

    from txn_audit.cli import app
    from txn_audit.timeparse import parse_time_ms

    scenario = "hanging-unadded-partition"
    out = tmp_path / "out"
    run = CliRunner().invoke(app, ["scan", str(scenario_dir(scenario) / "tools"), "--input-kind", "text",
                                   "--out", str(out), "--no-quality", "--no-progress", "--min-severity", "info"])
    assert run.exit_code == 1, run.output
    assert "tool_disagreement" in run.output
    hw_row = next(line for line in run.output.splitlines() if "hang-1" in line and "offsets file" in line)
    assert " 11 " in hw_row  # the HW offsets.json reports
    findings = json.loads((out / "summary.json").read_text())["findings"]
    (only,) = [f for f in findings if f["kind"] == "tool_disagreement"]
    assert (only["topic"], only["partition"], only["producer_id"], only["first_offset"]) == ("hang", 1, 0, 0)
    assert only["severity"] == "warning"
    args = only["evidence"].split("scan with ")[1].split()
    assert parse_time_ms(args[args.index("--as-of") + 1]) == _find_hanging_time(scenario) // 1000 * 1000
    report = (out / "report.html").read_text()
    note = report.split("High watermarks: ")[1].split("</p>")[0]
    assert "3 from the offsets file" in note and "3 from nowhere" in note


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
    options = {"spark": spark, "as_of_ms": _find_hanging_time(scenario), "max_transaction_timeout_ms": ONE_MINUTE,
               "progress": False, "quality": False}
    with_describe = api.scan(tools, **options)
    assert _finding_keys(with_describe) == _finding_keys(scans[scenario])
    for describe in tools.glob("kafka-transactions-describe-crash-*.txt"):
        describe.unlink()
    without = api.scan(tools, **options)
    assert {(f.kind, f.partition) for f in without.findings if f.topic == "crash"
            and f.kind.endswith("transaction")} == {("hanging_transaction", 0), ("hanging_transaction", 1)}
