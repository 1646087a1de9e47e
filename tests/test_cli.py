"""CLI behaviour: exit codes, output, and clear messages for bad arguments."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from tests.conftest import fresh_python
from txn_audit.cli import app

runner = CliRunner()


def test_help_runs_as_a_subprocess() -> None:
    done = subprocess.run([sys.executable, "-m", "txn_audit.cli", "--help"], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0
    for command in ("scan", "ingest", "sample"):
        assert command in done.stdout


@pytest.mark.parametrize(("args", "code", "stream", "text"), [
    (["--help"], 0, "stdout", "scan"),
    (["ingest", "{tmp}/nope", "--out", "{tmp}/out"], 2, "stderr", "dump not found"),
    (["sample", "--out", "{tmp}/dump", "--seed", "3"], 0, "stdout", ""),
])
def test_the_process_ends_with_the_commands_code_and_output(tmp_path: Path, args: list[str], code: int, stream: str,
                                                           text: str) -> None:
    """The console script ends the process itself once the command is done (``cli.end_process``):
    with the command's exit code, its output whole, its exit handlers run (one registered here
    writes a file) and its outputs in place."""
    script = ("import atexit, pathlib, sys\n"
              "from txn_audit import cli\n"
              f"atexit.register(pathlib.Path({str(tmp_path / 'handled')!r}).write_text, 'yes')\n"
              "sys.argv = ['txn-audit', *sys.argv[1:]]\n"
              "cli.main()\n"
              "raise AssertionError('main returned')\n")
    done = subprocess.run([sys.executable, "-c", script, *[a.format(tmp=tmp_path) for a in args]],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == code, done.stderr
    assert text in getattr(done, stream)
    assert "Traceback" not in done.stderr
    assert (tmp_path / "handled").read_text() == "yes"
    if args[0] == "sample":
        assert (tmp_path / "dump").is_dir() and any((tmp_path / "dump").iterdir())


def test_the_libraries_a_scan_imports_early_are_frozen_and_not_collected_while_they_load() -> None:
    """A scan imports Great Expectations and the report on a thread while the JVM starts
    (``api._import_early``): no collection runs while they load, and what they loaded is frozen
    (later collections skip it) once they are in; the collector is on again after."""
    script = ("import gc\n"
              "from txn_audit import api\n"
              "full = []\n"
              "gc.callbacks.append(lambda phase, info: full.append(1) if phase == 'stop' and info['generation'] == 2"
              " else None)\n"
              "api._import_early(quality=True, report=True).join()\n"
              "import great_expectations, txn_audit.report\n"
              "print(gc.isenabled(), gc.get_freeze_count(), len(full))\n")
    enabled, frozen, collections = fresh_python(script)
    assert enabled == "True"
    assert int(frozen) > 100_000  # the libraries' objects
    assert collections == "0"


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
    assert table.exit_code == 4  # critical
    assert table.stdout.startswith("CRITICAL")
    assert "hanging_transaction" in table.output and "--start-offset 0" in table.output
    assert "Partitions whose LSO is below the high watermark" in table.output
    assert (tmp_path / "hang" / "report.html").is_file()
    assert json.loads((tmp_path / "hang" / "quality" / "results.json").read_text())["results"]

    as_json = runner.invoke(app, ["scan", hang, "--as-of", "2026-11-22T20:01:26.713Z",
                                  "--max-transaction-timeout", "1m", "--format", "json", "--out", out,
                                  "--no-quality", "--no-report"])
    assert as_json.exit_code == 4
    doc = json.loads(as_json.stdout)
    # the output is replaced as a whole: what this run did not write is gone
    assert not (tmp_path / "hang" / "report.html").exists() and not (tmp_path / "hang" / "quality").exists()
    assert doc["as_of_ms"] == at
    assert (doc["audit_time"]["ms"], doc["audit_time"]["source"], doc["audit_time"]["warning"]) == (at, "given", None)
    assert {"as_of_ms", "audit_time", "input", "partitions", "replicas", "incidents", "blocked_consumers", "findings",
            "summary"} == set(doc)
    assert doc["replicas"] == []  # one broker: no partition has a second copy
    assert doc["blocked_consumers"] == [] and doc["summary"]["consumer_groups_blocked"] == 0  # no consumer group
    kinds = {f["kind"] for f in doc["findings"]}
    assert "hanging_transaction" in kinds
    assert set(doc["findings"][0]) == {
        "kind", "severity", "topic", "partition", "producer_id", "producer_epoch", "transactional_id",
        "first_offset", "last_offset", "first_timestamp_ms", "last_timestamp_ms", "evidence", "remediation",
        "incident_id"}
    # one incident: the stray batch on hang-1 (never added to the transaction), holding its LSO
    assert [(i["kind"], i["topic"], i["partition"], i["first_offset"]) for i in doc["incidents"]] == [
        ("stray_write", "hang", 1, 0)]
    assert {f["incident_id"] for f in doc["findings"]} == {doc["incidents"][0]["incident_id"]}
    assert set(doc["partitions"][0]) == {
        "topic", "partition", "high_watermark", "hw_source", "last_stable_offset", "log_start_offset",
        "open_transactions", "held_records", "held_bytes", "log_end_offset", "broker_id", "replicas",
        "chosen_replica", "replica_choice_reason"}
    assert doc["partitions"][0]["replica_choice_reason"] == "the only copy of the partition in the dump"

    # a crashed producer's transaction, listed by its coordinator and within its timeout when the
    # copy was taken: nothing critical
    crashed = str(scenario_dir("crashed-producer") / "logdirs")
    critical_only = runner.invoke(app, ["scan", crashed, "--min-severity", "critical", "--no-progress",
                                        "--no-quality", "--no-report"])
    assert critical_only.exit_code == 0, critical_only.output
    warnings = runner.invoke(app, ["scan", crashed, "--no-progress", "--no-quality", "--no-report"])
    assert warnings.exit_code == 1 and warnings.stdout.startswith("WARNING"), warnings.output


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
    assert f"{len(held)} data partition(s) whose last stable offset is below the high watermark" in report


# -- an operator's terminal: option checks before Spark, output that survives a pipe ----------

REPO = Path(__file__).resolve().parent.parent
SAMPLE = REPO / "sample_data" / "dump"
SMALL_DUMP = REPO / "tests" / "corpus" / "kafka-4.4.0" / "healthy" / "logdirs"
#: what Spark's JVM prints on stderr unless asked (--verbose): its own notices, log4j's and Spark's lines
SPARK_NOISE = ("WARNING: Using incubator modules", "log4j", "Setting default log level", " WARN ", " INFO ",
               "NativeCodeLoader")


def _cli_env() -> dict[str, str]:
    import os

    return {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "SPARK_CONF_DIR", "TXN_AUDIT_SPARK_MASTER")}


def _option_mistakes(tmp: Path) -> list[tuple[list[str], str]]:
    foreign = tmp / "mine"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("keep me")
    (tmp / "a-file").write_text("not a folder")
    (tmp / "empty" / "nested").mkdir(parents=True)
    segment = SAMPLE / "broker-1" / "orders-0" / "00000000000000000000.log"
    return [
        (["scan", str(SAMPLE), "--out", str(foreign)], "already holds files that txn-audit did not write"),
        (["ingest", str(SAMPLE), "--out", str(foreign)], "already holds files that txn-audit did not write"),
        (["scan", str(SAMPLE), "--out", str(tmp / "a-file")], "--out must be a folder"),
        (["scan", str(segment)], f"is one file of partition orders-0; DUMP is a whole log dir, or a folder of "
                                 f"several: give {SAMPLE / 'broker-1'}"),
        (["ingest", str(segment.with_suffix(".index")), "--out", str(tmp / "out")], "give " + str(SAMPLE / "broker-1")),
        (["scan", str(tmp / "empty")], "is empty"),
        (["scan", str(SAMPLE), "--max-transaction-timeout", "0s"], "--max-transaction-timeout must be positive"),
    ]


def test_option_mistakes_exit_2_within_two_seconds_before_spark(tmp_path: Path) -> None:
    """Each mistake is told on one line, with exit code 2, before Spark (or the modules it needs)
    is even loaded."""
    import time

    for args, message in _option_mistakes(tmp_path):
        started = time.monotonic()
        done = subprocess.run([sys.executable, "-m", "txn_audit.cli", *args], capture_output=True, text=True,
                              timeout=120, env=_cli_env())
        elapsed = time.monotonic() - started
        assert done.returncode == 2, (args, done.stderr)
        assert elapsed < 2.0, (args, elapsed)
        assert any(message in line for line in done.stderr.splitlines()), (args, done.stderr)  # never wrapped
        assert "Traceback" not in done.stderr
        assert not any(noise in done.stderr for noise in SPARK_NOISE), done.stderr
    assert (tmp_path / "mine" / "notes.txt").read_text() == "keep me"
    assert not (tmp_path / "out").exists()


def test_the_api_checks_the_same_before_spark(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Called from Python, scan and ingest refuse the same mistakes without building a session."""
    from txn_audit import api
    from txn_audit.errors import UsageError

    def no_spark(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("a session was built")

    monkeypatch.setattr(api, "build_session", no_spark)
    for args, message in _option_mistakes(tmp_path):
        command, dump, *rest = args
        options = dict(zip(rest[::2], rest[1::2], strict=True))
        with pytest.raises(UsageError) as caught:
            if command == "ingest":
                api.ingest(dump, options["--out"])
            elif "--max-transaction-timeout" in options:
                api.scan(dump, options=api.AuditOptions(max_transaction_timeout_ms=0))
            else:
                api.scan(dump, options.get("--out"))
        assert message in str(caught.value)
    # a folder with files but no Kafka data is found out before Spark too
    (tmp_path / "photos").mkdir()
    (tmp_path / "photos" / "cat.jpg").write_bytes(b"\xff\xd8\xff")
    with pytest.raises(UsageError):
        api.scan(tmp_path / "photos", options=api.AuditOptions(input_kind="logdirs"))


@pytest.mark.spark  # starts a JVM of its own
def test_scan_into_a_pipe_cuts_no_name_and_prints_each_fix_whole(tmp_path: Path) -> None:
    """``scan`` with stdout piped (a CI log): the verdict, every name in both tables and every
    repair command whole, each command alone on its line; Spark's log lines stay off stderr."""
    import json

    out = tmp_path / "out"
    done = subprocess.run([sys.executable, "-m", "txn_audit.cli", "scan", str(SAMPLE), "--out", str(out),
                           "--no-quality", "--no-report"], capture_output=True, text=True, timeout=900,
                          env=_cli_env())
    assert done.returncode == 4, done.stderr[-3000:]  # the sample's planted hanging transactions are critical
    doc = json.loads((out / "summary.json").read_text())
    lines = done.stdout.splitlines()
    assert lines[0] == doc["summary"]["verdict"]
    assert "…" not in done.stdout
    commands = [f["remediation"] for f in doc["findings"] if f["remediation"] and f["severity"] != "info"]
    aborts = [c for c in commands if " abort " in c]
    assert len(aborts) >= 3  # the sample's hanging transactions
    assert set(commands) <= {c for i in doc["incidents"] for c in i["commands"]}
    for command in commands:
        assert command in lines, command  # a line of its own, unwrapped
    stuck = [f for f in doc["findings"] if f["kind"] == "stuck_lso"]
    assert len(stuck) == doc["summary"]["partitions_with_lso_below_hw"] > 0
    table = done.stdout.split("Partitions whose LSO is below the high watermark")[1]
    for f in stuck:  # one row per partition, its name and culprit whole
        (row,) = [line for line in table.splitlines() if f" {f['topic']}-{f['partition']} " in line]
        assert f"producer {f['producer_id']} ({f['transactional_id']})" in row
    for f in doc["findings"]:
        if f["severity"] != "info" and f["transactional_id"]:
            assert f"({f['transactional_id']})" in done.stdout
    assert not any(noise in done.stderr for noise in SPARK_NOISE), done.stderr


@pytest.mark.spark  # starts a JVM of its own
def test_verbose_brings_sparks_log_lines_back(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "txn_audit.cli", "ingest", str(SMALL_DUMP), "--out",
                           str(tmp_path / "out"), "--verbose"], capture_output=True, text=True, timeout=600,
                          env=_cli_env())
    assert done.returncode == 0, done.stderr[-3000:]
    assert "WARNING: Using incubator modules" in done.stderr  # the JVM's own notice
    assert "Using Spark's default log4j profile" in done.stderr  # and Spark's logging as it comes
