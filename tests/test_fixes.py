"""The fixes as an operator runs them (``txn_audit.fixes``): commands filled with the cluster,
in the form of the dump's brokers, and ``fixes.sh``, which bash reads and which runs nothing
until edited (no Spark here; ``tests/audit/test_fixes_corpus.py`` scans the corpora)."""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.fixcheck import bash_syntax_error, command_words
from txn_audit.detect.incidents import TransactionContext, build_incidents
from txn_audit.detect.words import (
    ABORT_COMMAND_PRE_3_0,
    abort_command_text,
    describe_topic_command,
    force_terminate_command_text,
    formatted,
)
from txn_audit.errors import UsageError
from txn_audit.fixes import (
    UNKNOWN_RELEASE,
    BrokerRelease,
    Connection,
    Release,
    broker_release,
    fix_lines,
    fixes,
    fixes_script,
)
from txn_audit.ingest.inventory import Inventory
from txn_audit.results import Finding
from txn_audit.usage import AuditOptions

SINCE_3_0 = BrokerRelease(Release.SINCE_3_0, "a KRaft cluster")


def _finding(kind: str, topic: str, partition: int, **extra: Any) -> Finding:
    row: dict[str, Any] = {
        "kind": kind, "severity": "critical", "topic": topic, "partition": partition, "broker_id": None,
        "producer_id": 7, "producer_epoch": 2, "transactional_id": "orders app", "first_offset": 85,
        "last_offset": None, "first_timestamp": None, "last_timestamp": None, "evidence": f"{kind} evidence",
        "remediation": None, "remediation_pre_3_0": None, "file": None,
    }
    return Finding.from_row(row | extra)


def _hanging_and_divergent() -> tuple[list[Any], list[Finding]]:
    found = [
        _finding("hanging_transaction", "orders", 1, remediation=abort_command_text("orders", 1, 85),
                 remediation_pre_3_0=formatted(ABORT_COMMAND_PRE_3_0, "orders", 1, 7, 2, 4)),
        _finding("replica_divergence", "pay", 0, severity="warning", producer_id=None, first_offset=3,
                 remediation=describe_topic_command("pay", under_replicated=True)),
    ]
    return build_incidents(found, [], TransactionContext(), late_tolerance_ms=1_000)


def test_the_cluster_fills_the_command_and_the_placeholder_stays_without_it() -> None:
    command = abort_command_text("orders", 1, 85)
    assert Connection().fill(command) == command and "--bootstrap-server <broker> abort" in command
    filled = Connection("kafka-1:9092,kafka-2:9092", "/etc/kafka/admin client.properties").fill(command)
    assert command_words(filled, "kafka-1:9092,kafka-2:9092", "/etc/kafka/admin client.properties") == [
        "kafka-transactions.sh", "--bootstrap-server", "kafka-1:9092,kafka-2:9092", "--command-config",
        "/etc/kafka/admin client.properties", "abort", "--topic", "orders", "--partition", "1", "--start-offset", "85"]
    only_config = Connection(command_config="admin.properties").fill(command)
    assert "--bootstrap-server <broker> --command-config admin.properties abort" in only_config


def test_a_transactional_id_is_one_word_whatever_it_holds() -> None:
    command = Connection("b:9092").fill(force_terminate_command_text("app; rm -rf /"))
    assert command_words(command, "b:9092")[-2:] == ["--transactionalId", "app; rm -rf /"]


def test_commands_are_commands_and_the_advice_is_elsewhere() -> None:
    incidents, findings = _hanging_and_divergent()
    for incident in incidents:
        for line in incident.commands:
            command_words(Connection("b:9092").fill(line), "b:9092")
    divergent = next(i for i in incidents if i.kind == "replica_divergence")
    assert divergent.commands == ("kafka-topics.sh --bootstrap-server <broker> --describe --topic pay "
                                  "--under-replicated-partitions",)


def test_the_form_follows_the_brokers_release() -> None:
    incidents, findings = _hanging_and_divergent()
    connection = Connection("b:9092")
    (current, divergent) = fixes(incidents, findings, SINCE_3_0, connection)
    assert fix_lines(current) == [connection.fill(abort_command_text("orders", 1, 85))]
    assert current.commands_pre_3_0 == ()
    (unknown, divergent) = fixes(incidents, findings, UNKNOWN_RELEASE, connection)
    lines = fix_lines(unknown)
    assert [line for line in lines if line.startswith("#")] == [
        "# brokers of Kafka 3.0 or later:", "# brokers before Kafka 3.0 (the dump does not tell which; run one form "
        "only):"]
    (new, old) = [command_words(line, "b:9092") for line in lines if not line.startswith("#")]
    assert new[new.index("--start-offset") + 1] == "85"
    assert [old[old.index(flag) + 1] for flag in ("--producer-id", "--producer-epoch", "--coordinator-epoch")] == [
        "7", "2", "4"]
    assert fix_lines(divergent) == list(divergent.commands)  # one form for every release: printed once


def test_the_release_is_told_by_the_kraft_metadata_log_only() -> None:
    assert broker_release(Inventory(root="dump")).release is Release.UNKNOWN  # ZooKeeper: any release up to 3.9
    kraft = Inventory(root="dump", segments=[{"topic": "__cluster_metadata", "kind": "log"}])
    assert broker_release(kraft).release is Release.SINCE_3_0


@pytest.mark.parametrize("release", [SINCE_3_0, UNKNOWN_RELEASE], ids=["3.0+", "unknown"])
def test_fixes_sh_runs_nothing_as_written_and_each_command_once_uncommented(tmp_path: Path,
                                                                            release: BrokerRelease) -> None:
    incidents, findings = _hanging_and_divergent()
    connection = Connection("b:9092", "admin.properties")
    all_fixes = fixes(incidents, findings, release, connection)
    script = tmp_path / "fixes.sh"
    script.write_text(fixes_script(all_fixes, findings, dump="dumps/today", as_of_ms=0, release=release,
                                   connection=connection) + "\n")
    assert bash_syntax_error(script) == ""
    assert "set -euo pipefail" in script.read_text().splitlines()
    # Kafka's tools stand-ins, which record how they were called
    tools = tmp_path / "bin"
    tools.mkdir()
    calls = tmp_path / "calls"
    for tool in ("kafka-transactions.sh", "kafka-topics.sh"):
        (tools / tool).write_text(f'#!/usr/bin/env bash\nprintf "%s\\0" "$(basename "$0")" "$@" >> {calls}\n'
                                  'printf "\\n" >> ' + str(calls) + "\n")
        (tools / tool).chmod((tools / tool).stat().st_mode | stat.S_IEXEC)
    env = os.environ | {"PATH": f"{tools}{os.pathsep}{os.environ['PATH']}"}
    done = subprocess.run(["bash", str(script)], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert not calls.exists()  # as written: nothing runs
    edited = tmp_path / "edited.sh"
    edited.write_text("\n".join(line.removeprefix("# ") if line.startswith("# kafka-") else line
                                for line in script.read_text().splitlines()) + "\n")
    done = subprocess.run(["bash", str(edited)], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    ran = [line.rstrip("\0").split("\0") for line in calls.read_text().splitlines() if line]
    expected = [command_words(line, "b:9092", "admin.properties") for fix in all_fixes for line in fix_lines(fix)
                if not line.startswith("#")]
    assert ran == expected


@pytest.mark.parametrize("servers", ["kafka-1", "kafka-1:port", "kafka 1:9092", "a:9092,", ":9092", "::1:9092"])
def test_a_bootstrap_server_that_is_not_host_and_port_is_a_usage_error(servers: str) -> None:
    with pytest.raises(UsageError, match="--bootstrap-server"):
        AuditOptions(bootstrap_server=servers)


def test_bootstrap_servers_as_kafka_takes_them() -> None:
    for servers in ("kafka-1:9092", "10.0.0.1:9093,10.0.0.2:9093", "[::1]:9092"):
        assert AuditOptions(bootstrap_server=servers).bootstrap_server == servers
