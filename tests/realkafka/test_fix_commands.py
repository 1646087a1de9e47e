"""Every form of fix txn-audit prints, run by Kafka's own tools (the releases' jars, fetched from Maven
Central on first use): each tool takes the command's options as they are printed, filled
with ``--bootstrap-server`` and ``--command-config``, and goes on to ask the cluster (here a closed
port, so it gives up at the timeout the command's config sets) instead of refusing them with its
usage. A command with a word too many, or one option misspelt, is refused: the check can fail."""

from __future__ import annotations

import os
import shlex
import subprocess
import zipfile
from pathlib import Path

import pytest

from tools.realkafka.dist import HarnessError, fetch, java_binary
from txn_audit.detect.words import (
    ABORT_COMMAND_PRE_3_0,
    abort_command_text,
    describe_topic_command,
    force_terminate_command_text,
    formatted,
)
from txn_audit.fixes import Connection

pytestmark = [pytest.mark.live]

#: the oldest release whose tool jars the real-broker corpus fetched, and the newest
RELEASES = ("3.6.2", "4.4.0")
#: each script's main class, newest location first (the tool's class moved between releases)
MAIN_CLASSES = {
    "kafka-transactions.sh": ("org.apache.kafka.tools.TransactionsCommand",),
    "kafka-topics.sh": ("org.apache.kafka.tools.TopicCommand", "kafka.admin.TopicCommand"),
}
#: a closed port: the tool parses its arguments, then waits for the cluster until its timeout
CLOSED = "127.0.0.1:1"


def _lib(release: str) -> Path:
    """The release's jars, fetched from Maven Central on first use (into the harness's cache)."""
    try:
        return fetch(release, log=False).lib
    except HarnessError as e:
        message = f"Kafka {release}'s tools cannot be fetched here: {e}"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)


def _main_class(lib: Path, script: str) -> str:
    for name in MAIN_CLASSES[script]:
        entry = name.replace(".", "/") + ".class"
        for jar in lib.glob("*.jar"):
            with zipfile.ZipFile(jar) as z:
                if entry in z.namelist():
                    return name
    raise AssertionError(f"no main class of {script} in {lib}")


def _run(lib: Path, command: str) -> str:
    """``command`` run by the release's own tool: what it printed."""
    script, *args = shlex.split(command)
    done = subprocess.run([java_binary(), "-Xmx256m", "-XX:TieredStopAtLevel=1", "-cp", f"{lib}/*",
                           _main_class(lib, script), *args], capture_output=True, text=True, timeout=120)
    return done.stdout + done.stderr


def _commands(release: str) -> list[str]:
    commands = [abort_command_text("orders", 1, 85), formatted(ABORT_COMMAND_PRE_3_0, "orders", 1, 7, 2, 4),
                describe_topic_command("orders"), describe_topic_command("orders", under_replicated=True)]
    if release >= "4.4":  # two-phase commit's forceTerminateTransaction (KIP-939)
        commands.append(force_terminate_command_text("orders app"))
    return commands


@pytest.mark.parametrize("release", RELEASES)
def test_kafkas_tools_take_every_fix_as_printed(release: str, tmp_path: Path) -> None:
    lib = _lib(release)
    config = tmp_path / "client config.properties"  # a space: the command quotes it
    config.write_text("default.api.timeout.ms=1500\nrequest.timeout.ms=1000\n")
    connection = Connection(CLOSED, str(config))
    for command in _commands(release):
        said = _run(lib, connection.fill(command))
        assert "usage:" not in said.lower() and "Exception in thread" not in said, (command, said[-2000:])
        assert "timed out" in said.lower() or "timeout" in said.lower(), (command, said[-2000:])


@pytest.mark.parametrize("release", RELEASES[:1])
def test_prose_after_a_command_is_refused(release: str, tmp_path: Path) -> None:
    """The check above can fail: the tool refuses words it does not know."""
    lib = _lib(release)
    config = tmp_path / "client.properties"
    config.write_text("default.api.timeout.ms=1500\nrequest.timeout.ms=1000\n")
    command = Connection(CLOSED, str(config)).fill(abort_command_text("orders", 1, 85))
    said = _run(lib, command + " a running follower catches up by itself")
    assert "usage:" in said.lower()
