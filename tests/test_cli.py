"""CLI behaviour: exit codes, output, and clear messages for bad arguments."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from txn_audit.cli import app

runner = CliRunner()


def test_help_runs_as_a_subprocess() -> None:
    done = subprocess.run([sys.executable, "-m", "txn_audit.cli", "--help"], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0
    for command in ("scan", "ingest", "sample"):
        assert command in done.stdout


def test_missing_dump_is_a_usage_error(tmp_path: Path) -> None:
    result = runner.invoke(app, ["ingest", str(tmp_path / "nope"), "--out", str(tmp_path / "out")])
    assert result.exit_code == 2
    assert "dump not found" in result.output
    assert "Traceback" not in result.output


def test_missing_out_option_is_a_usage_error(tmp_path: Path) -> None:
    result = runner.invoke(app, ["ingest", str(tmp_path)])
    assert result.exit_code == 2
    assert "--out" in result.output


def test_sample_refuses_to_overwrite(tmp_path: Path) -> None:
    (tmp_path / "x").mkdir()
    (tmp_path / "x" / "keep.txt").write_text("mine")
    result = runner.invoke(app, ["sample", "--out", str(tmp_path / "x")])
    assert result.exit_code == 2
    assert "--force" in result.output
    assert (tmp_path / "x" / "keep.txt").read_text() == "mine"


@pytest.mark.spark
def test_ingest_sample_then_strict(spark: Any, tmp_path: Path) -> None:
    dump = tmp_path / "dump"
    assert runner.invoke(app, ["sample", "--out", str(dump)]).exit_code == 0
    result = runner.invoke(app, ["ingest", str(dump), "--out", str(tmp_path / "out"), "--no-progress"])
    assert result.exit_code == 0, result.output
    assert "batches" in result.output and "decode issues" in result.output
    for table in ("batches", "control_markers", "txn_log", "decode_issues", "segments", "partition_offsets"):
        assert (tmp_path / "out" / table).is_dir()
    strict = runner.invoke(app, ["ingest", str(dump), "--out", str(tmp_path / "out"), "--strict", "--no-progress"])
    assert strict.exit_code == 3
    assert "--strict" in strict.output


def test_scan_bad_arguments_are_usage_errors(tmp_path: Path) -> None:
    dump = str(tmp_path)
    for args, message in (
        (["--as-of", "yesterday"], "ISO-8601"),
        (["--max-transaction-timeout", "15"], "duration"),
        (["--late-tolerance", "soon"], "duration"),
        (["--min-severity", "loud"], "--min-severity"),
        (["--format", "xml"], "--format"),
        (["--input-kind", "binary"], "--input-kind"),
    ):
        result = runner.invoke(app, ["scan", dump, *args])
        assert result.exit_code == 2, (args, result.output)
        assert message in result.output
        assert "Traceback" not in result.output


@pytest.mark.spark
def test_scan_exit_codes_and_formats(spark: Any, tmp_path: Path) -> None:
    import json

    from tests.realcorpus import SCENARIOS, expected_json, scenario_dir

    if "hanging-unadded-partition" not in SCENARIOS or "healthy" not in SCENARIOS:
        pytest.skip("real corpus not found")
    healthy = runner.invoke(app, ["scan", str(scenario_dir("healthy") / "logdirs"), "--no-progress",
                                      "--no-quality"])
    assert healthy.exit_code == 0, healthy.output
    assert healthy.stdout.startswith("CLEAN")

    at = next(c["at_ms"] for c in expected_json("hanging-unadded-partition")["tool_commands"]
              if "find-hanging" in c["command"])
    hang = str(scenario_dir("hanging-unadded-partition") / "logdirs")
    out = str(tmp_path / "hang")  # the later scans reuse this ingest: same dump, same fingerprint
    table = runner.invoke(app, ["scan", hang, "--as-of", str(at), "--max-transaction-timeout", "1m",
                                "--no-progress", "--out", out])
    assert table.exit_code == 1
    assert table.stdout.startswith("CRITICAL")
    assert "hanging_transaction" in table.output and "--start-offset 0" in table.output
    assert "Partitions whose LSO is below the high watermark" in table.output
    assert (tmp_path / "hang" / "report.html").is_file()
    assert json.loads((tmp_path / "hang" / "quality" / "results.json").read_text())["results"]

    as_json = runner.invoke(app, ["scan", hang, "--as-of", "2026-11-22T20:01:26.713Z",
                                  "--max-transaction-timeout", "1m", "--format", "json", "--out", out,
                                  "--no-quality", "--no-report"])
    assert as_json.exit_code == 1
    doc = json.loads(as_json.stdout)
    # the output is replaced as a whole: what this run did not write is gone
    assert not (tmp_path / "hang" / "report.html").exists() and not (tmp_path / "hang" / "quality").exists()
    assert doc["as_of_ms"] == at
    assert {"as_of_ms", "input", "partitions", "replicas", "findings", "summary"} == set(doc)
    assert doc["replicas"] == []  # one broker: no partition has a second copy
    kinds = {f["kind"] for f in doc["findings"]}
    assert "hanging_transaction" in kinds
    assert set(doc["findings"][0]) == {
        "kind", "severity", "topic", "partition", "producer_id", "producer_epoch", "transactional_id",
        "first_offset", "last_offset", "first_timestamp_ms", "last_timestamp_ms", "evidence", "remediation"}
    assert set(doc["partitions"][0]) == {
        "topic", "partition", "high_watermark", "hw_source", "last_stable_offset", "log_start_offset",
        "open_transactions", "held_records", "held_bytes", "log_end_offset", "broker_id", "replicas",
        "chosen_replica", "replica_choice_reason"}
    assert doc["partitions"][0]["replica_choice_reason"] == "the only copy of the partition in the dump"

    critical_only = runner.invoke(app, ["scan", hang, "--min-severity", "critical", "--no-progress", "--out", out,
                                        "--no-quality", "--no-report"])
    assert critical_only.exit_code == 0, critical_only.output  # only an info/warning open txn at the dump's own time


@pytest.mark.spark
def test_without_checkpoints_the_terminal_summary_and_report_agree_on_held_partitions(
    spark: Any, tmp_path: Path
) -> None:
    """A dump without replication-offset-checkpoint: no HW is known and the log end stands in for
    it. The partitions whose LSO is below it are the same in the terminal table, summary.json's
    count, the report and the partition_stability table."""
    import json
    import re
    import shutil

    import pyarrow.dataset as ds

    from tests.realcorpus import SCENARIOS, scenario_dir

    if "crashed-producer" not in SCENARIOS:
        pytest.skip("real corpus not found")
    dump = tmp_path / "dump"
    shutil.copytree(scenario_dir("crashed-producer") / "logdirs", dump)
    (dump / "replication-offset-checkpoint").unlink()
    out = tmp_path / "out"
    run = runner.invoke(app, ["scan", str(dump), "--out", str(out), "--no-progress", "--no-quality",
                              "--min-severity", "info"])
    assert run.exit_code == 1, run.output  # without a known HW the stuck LSOs are info findings
    stability = ds.dataset(str(out / "tables" / "partition_stability")).to_table().to_pylist()
    assert {p["hw_source"] for p in stability} == {"log_end"}  # no HW anywhere in the dump
    held = {f"{p['topic']}-{p['partition']}" for p in stability if p["lso_below_hw"]}
    assert held == {"crash-0", "crash-1"}  # the crashed producer's open transaction holds both
    for p in stability:
        assert p["effective_high_watermark"] == p["log_end_offset"]
        assert p["lso_below_hw"] == (p["last_stable_offset"] < p["log_end_offset"])
    section = run.stdout.split("Partitions whose LSO is below the high watermark")[1]
    shown = {m.group(1) for line in section.splitlines() if (m := re.match(r"\W*([\w.-]+-\d+)\s", line))}
    assert shown == held
    for p in stability:
        if p["lso_below_hw"]:  # the HW shown is the log end the LSO was computed against
            (row,) = [line for line in section.splitlines() if f"{p['topic']}-{p['partition']} " in line]
            assert f" {p['log_end_offset']} " in row and "log end" in row
    summary = json.loads((out / "summary.json").read_text())["summary"]
    assert summary["partitions_with_lso_below_hw"] == len(held)
    report = (out / "report.html").read_text()
    assert f"{len(held)} partition(s) whose last stable offset is below the high watermark" in report
