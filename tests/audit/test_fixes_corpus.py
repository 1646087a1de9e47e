"""``scan`` piped, on every scenario of the real-broker corpora (``tests/corpus/kafka-*/*`` and
``../shared/realcorpus``): every line of the fixes block, every JSON command and ``fixes.sh`` is
a shell command of a Kafka tool naming the cluster given, in the form the brokers' release takes
(the release as the corpus's ``expected.json`` records what ran)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from tests.fixcheck import bash_syntax_error, command_words, fix_block
from tests.kafkacorpus import scenarios
from tests.realcorpus import SCENARIOS as REAL_SCENARIOS
from tests.realcorpus import expected_json, scenario_dir
from txn_audit.usage import ExitCode

pytestmark = [pytest.mark.corpus]

BOOTSTRAP = "kafka-1.example:9092,kafka-2.example:9092"
COMMAND_CONFIG = "/etc/kafka/admin client.properties"  # a space: quoted as one word


@dataclass(frozen=True)
class Dump:
    """A scenario's log dirs, when find-hanging ran, and the release and mode its brokers ran."""

    id: str
    logdirs: Path
    as_of_ms: int
    kafka_version: str
    kraft: bool


def _dumps() -> list[Dump]:
    found = [Dump(s.id, s.folder / "logdirs", s.as_of_ms, s.expected["kafka_version"],
                  s.expected["mode"].startswith("KRaft")) for s in scenarios()]
    for name in REAL_SCENARIOS:
        expected = expected_json(name)
        at = next(c["at_ms"] for c in expected["tool_commands"] if "find-hanging" in c["command"])
        version = expected.get("kafka_version", "3.6.2")
        # the shared corpus ran KRaft brokers: meta.properties version 1 says so
        meta = next((scenario_dir(name) / "logdirs").rglob("meta.properties")).read_text()
        found.append(Dump(name, scenario_dir(name) / "logdirs", at, version, "version=1" in meta))
    return found


DUMPS = {d.id: d for d in _dumps()}


def _release(version: str) -> tuple[int, ...]:
    return tuple(int(x) for x in version.split("."))


@pytest.mark.parametrize("dump_id", list(DUMPS))
def test_every_printed_and_json_fix_is_one_command_of_a_kafka_tool(spark: Any, tmp_path: Path, dump_id: str) -> None:
    from txn_audit.cli import app

    dump = DUMPS[dump_id]
    out = tmp_path / "out"
    done = CliRunner().invoke(app, [
        "scan", str(dump.logdirs), "--out", str(out), "--as-of", str(dump.as_of_ms), "--max-transaction-timeout",
        "1m", "--min-severity", "info", "--no-quality", "--no-report", "--no-progress",
        "--bootstrap-server", BOOTSTRAP, "--command-config", COMMAND_CONFIG])
    assert ExitCode(done.exit_code).is_verdict, done.output[-3000:]  # 0, 1 or 4: the scan ran to its end
    doc = json.loads((out / "summary.json").read_text())

    # the release: never claimed 3.0 or later of brokers before it; told of KRaft ones
    release = doc["summary"]["brokers_release"]["release"]
    if _release(dump.kafka_version) < (3, 0):
        assert release == "unknown"
    elif dump.kraft:
        assert release == "3.0 or later"

    # the JSON: every command, in both forms, and every finding's remediation
    fixed = [i for i in doc["incidents"] if i["commands"]]
    for incident in doc["incidents"]:
        for line in incident["commands"] + incident["commands_pre_3_0"]:
            command_words(line, BOOTSTRAP, COMMAND_CONFIG)
        if release == "3.0 or later":
            assert incident["commands_pre_3_0"] == []
        for line in incident["commands_pre_3_0"]:
            words = command_words(line, BOOTSTRAP, COMMAND_CONFIG)
            assert "--start-offset" not in words  # brokers before 3.0 cannot find a transaction by its offset
        if incident["commands"]:
            assert incident["remediation"].splitlines() == incident["commands"]
    for finding in doc["findings"]:
        if finding["remediation"] is not None:
            for line in finding["remediation"].splitlines():
                command_words(line, BOOTSTRAP, COMMAND_CONFIG)

    # the printed block: a "# [n]" line per fixed incident, in order, its commands beneath it
    block = fix_block(done.stdout)
    headers = [line for line in block if re.match(r"^# \[\d+\] ", line)]
    assert [h.split("(")[-1].rstrip(")") for h in headers] == [i["incident_id"] for i in fixed]
    printed = [line for line in block if not line.startswith("#")]
    for line in printed:
        command_words(line, BOOTSTRAP, COMMAND_CONFIG)
    assert printed == [c for i in fixed for c in
                       (i["commands"] + [p for p in i["commands_pre_3_0"] if i["commands_pre_3_0"] != i["commands"]])]
    for number, _ in enumerate(fixed, 1):
        assert f"[{number}] under the table" in done.stdout

    # fixes.sh: bash reads it, and every command of it is commented out
    script = out / "fixes.sh"
    assert bash_syntax_error(script) == ""
    lines = script.read_text().splitlines()
    assert lines[0] == "#!/usr/bin/env bash" and "set -euo pipefail" in lines
    assert [line for line in lines if line and not line.startswith("#")] == ["set -euo pipefail"]
    assert [line.removeprefix("# ") for line in lines if line.startswith("# kafka-")] == printed


def test_on_a_terminal_each_command_is_whole_on_its_line_and_durations_read_alike(
        spark: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """At 80 and 120 columns on a terminal, the fixes are printed under the table as off one, each
    command whole on one line (the terminal wraps it, a copy takes it whole); the LSO table's
    "held for" reads as the incident's paragraph does."""
    import io

    from rich.console import Console

    from txn_audit import api, cli
    from txn_audit.detect.words import duration_text
    from txn_audit.severity import Severity

    dump = DUMPS["2.8.2/hanging-unadded-partition"]
    result = api.scan(dump.logdirs, spark=spark, options=api.AuditOptions(
        as_of_ms=dump.as_of_ms, max_transaction_timeout_ms=60_000, progress=False, quality=False, report=False,
        bootstrap_server=BOOTSTRAP, command_config=COMMAND_CONFIG))
    (fix,) = result.fixes()
    assert fix.commands and fix.commands_pre_3_0  # a release the dump does not tell: both forms
    (held,) = result.lso_below_hw()
    assert held.held_ms is not None and f"({duration_text(held.held_ms)} before the audit time)" in \
        fix.incident.summary
    for width in (80, 120):
        screen = io.StringIO()
        monkeypatch.setattr(cli, "out_console", Console(file=screen, force_terminal=True, width=width,
                                                        color_system=None))
        cli._print_scan(result, Severity.INFO)
        lines = screen.getvalue().splitlines()
        assert "[1] under the table" in screen.getvalue()
        for command in fix.commands + fix.commands_pre_3_0:
            assert command in lines, (width, command)
        if width == 120:
            table = lines[next(i for i, line in enumerate(lines) if line.startswith("Partitions whose LSO")):]
            (row,) = [line for line in table if f" {held.topic}-{held.partition} " in line]
            assert f" {duration_text(held.held_ms)} " in row
