"""Scan verdicts on the real-broker corpus, against what Kafka's own tools said."""

from __future__ import annotations

from typing import Any

import pytest

from tests.realcorpus import SCENARIOS, expected_json, needs_corpus, offsets_json, scenario_dir

pytestmark = [pytest.mark.spark, needs_corpus]

ONE_MINUTE = 60_000


def _find_hanging_time(scenario: str) -> int:
    commands = expected_json(scenario)["tool_commands"]
    return next(c["at_ms"] for c in commands if "find-hanging" in c["command"])


@pytest.fixture(scope="module")
def scans(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Each scenario scanned as find-hanging ran it: at its run time, with a 1 minute timeout."""
    from txn_audit import api

    results = {}
    for name in SCENARIOS:
        out = tmp_path_factory.mktemp(f"scan-{name}")
        results[name] = api.scan(
            scenario_dir(name) / "logdirs", out, spark=spark, as_of_ms=_find_hanging_time(name),
            max_transaction_timeout_ms=ONE_MINUTE, progress=False,
        )
    return results


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_hw_and_lso_equal_the_brokers(scans: dict[str, Any], scenario: str) -> None:
    ours = {f"{p['topic']}-{p['partition']}": p for p in scans[scenario].partitions}
    for name, exp in offsets_json(scenario).items():
        assert ours[name]["high_watermark"] == exp["high_watermark"], name
        assert ours[name]["last_stable_offset"] == exp["last_stable_offset"], name
        assert ours[name]["log_start_offset"] == exp["log_start_offset"], name


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_hanging_set_equals_find_hanging(scans: dict[str, Any], scenario: str) -> None:
    ours = {
        (f["topic"], f["partition"], f["producer_id"], f["producer_epoch"], f["first_offset"])
        for f in scans[scenario].findings
        if f["kind"] == "hanging_transaction"
    }
    kafka = {
        (r["Topic"], int(r["Partition"]), int(r["ProducerId"]), int(r["ProducerEpoch"]), int(r["StartOffset"]))
        for r in expected_json(scenario)["find_hanging"]["rows"]
    }
    assert ours == kafka


def _at_least_warning(result: Any) -> list[tuple[str, str, int | None]]:
    return [(f["kind"], f["topic"], f["partition"]) for f in result.at_or_above("warning")]


@pytest.mark.parametrize("scenario", ["healthy", "timeout-abort", "verification-rejects"])
def test_quiet_scenarios_have_nothing_at_warning(scans: dict[str, Any], scenario: str) -> None:
    if scenario not in scans:
        pytest.skip(f"{scenario} not in the corpus")
    assert _at_least_warning(scans[scenario]) == []


def test_crashed_producer_is_open_and_stuck_not_hanging(scans: dict[str, Any]) -> None:
    result = scans["crashed-producer"]
    kinds = {(f["kind"], f["topic"], f["partition"]) for f in result.findings}
    for p in (0, 1):
        assert ("open_transaction", "crash", p) in kinds
        assert ("stuck_lso", "crash", p) in kinds
    assert not [f for f in result.findings if f["kind"] == "hanging_transaction"]
    held = {p["partition"]: p["held_records"] for p in result.partitions if p["topic"] == "crash"}
    assert held[0] == 10 and held[1] == 10
    opened = [f for f in result.findings if f["kind"] == "open_transaction"]
    assert {f["transactional_id"] for f in opened} == {"crash-txn"}


def test_hanging_unadded_partition_has_a_working_abort_command(scans: dict[str, Any]) -> None:
    hanging = [f for f in scans["hanging-unadded-partition"].findings if f["kind"] == "hanging_transaction"]
    assert len(hanging) == 1
    f = hanging[0]
    assert (f["topic"], f["partition"], f["first_offset"], f["severity"]) == ("hang", 1, 0, "critical")
    args = f["remediation"].split()
    assert args[0] == "kafka-transactions.sh" and args[args.index("--bootstrap-server") + 2] == "abort"
    assert args[args.index("--topic") + 1] == "hang"
    assert args[args.index("--partition") + 1] == "1"
    # the start offset is what DescribeProducers reports as CurrentTransactionStartOffset for hang-1
    tools = (scenario_dir("hanging-unadded-partition") / "tools" /
             "kafka-transactions-describe-producers-hang-1.txt").read_text().splitlines()
    start = tools[-1].split()[-1]
    assert args[args.index("--start-offset") + 1] == start
    legacy = f["remediation_pre_3_0"].split()
    assert legacy[legacy.index("--producer-id") + 1] == "0"
    assert legacy[legacy.index("--producer-epoch") + 1] == "0"
    assert legacy[legacy.index("--coordinator-epoch") + 1] == "0"  # -1 in DescribeProducers, raised to 0
    assert "hang-txn" in f["evidence"] and "CompleteCommit" in f["evidence"]


def test_default_audit_time_is_the_newest_timestamp(spark: Any, tmp_path: Any) -> None:
    """Without --as-of the stray batch on hang-1 is seconds old: open, not yet hanging."""
    from txn_audit import api

    result = api.scan(scenario_dir("hanging-unadded-partition") / "logdirs", tmp_path, spark=spark, progress=False)
    assert result.as_of_ms < _find_hanging_time("hanging-unadded-partition")
    assert not [f for f in result.findings if f["kind"] == "hanging_transaction"]
    assert [(f["kind"], f["partition"]) for f in result.findings if f["topic"] == "hang" and
            f["kind"] == "open_transaction"] == [("open_transaction", 1)]
