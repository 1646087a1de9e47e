"""The command line's conventions: help that reads at 80 columns, ``--version``, shell completion,
and every usage error, click's own included, one ``error:`` line with exit code 2 (no Spark)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import typer.main

from txn_audit.cli import PROG_NAME, app
from txn_audit.usage import ExitCode

REPO = Path(__file__).resolve().parent.parent
SAMPLE = REPO / "sample_data" / "dump"


def _run(*args: str, columns: int = 80, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    environ |= {"COLUMNS": str(columns), **(env or {})}
    return subprocess.run([sys.executable, "-m", "txn_audit.cli", *args], capture_output=True, text=True,
                          timeout=120, env=environ)


def _commands() -> dict[str, list[str]]:
    """Each command (the group itself under "") and the option names click knows for it."""
    group = typer.main.get_command(app)
    assert isinstance(group, typer.core.TyperGroup)
    found = {"": [name for p in group.params for name in p.opts + p.secondary_opts]}
    for name, command in group.commands.items():
        found[name] = [opt for p in command.params for opt in p.opts + p.secondary_opts if opt.startswith("-")]
    return found


@pytest.mark.parametrize("command", sorted(_commands()))
def test_help_at_80_columns_keeps_every_option_name_whole(command: str) -> None:
    done = _run(*([command] if command else []), "--help")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert all(len(line) <= 80 for line in lines), [line for line in lines if len(line) > 80]
    body = done.stdout.split("\n", 1)[1]  # below the usage line (its "[ARGS]..." is click's)
    assert "…" not in body and "..." not in body
    for typed in ("<str>", "<bool>", "<int>", "<path>", "{"):  # typer's type metavars: none
        assert typed not in done.stdout, typed
    words = set(re.findall(r"-{1,2}[a-z][a-z-]*", done.stdout))
    for option in _commands()[command] + ["--help"]:
        assert option in words, option  # whole, never cut or broken at a hyphen
    if command:
        assert done.stdout.startswith(f"Usage: {PROG_NAME} {command} [OPTIONS]")


def test_scan_help_names_its_metavars_and_every_exit_code() -> None:
    done = _run("scan", "--help")
    assert done.stdout.startswith("Usage: txn-audit scan [OPTIONS] DUMP\n")
    for shown in ("-o, --out DIR", "--as-of TIME", "--max-transaction-timeout DURATION", "--min-severity SEVERITY",
                  "--fail-on SEVERITY", "--format FORMAT", "--input-kind KIND"):
        assert shown in done.stdout, shown
    listed = {int(m.group(1)): m.group(2) for m in re.finditer(r"^ +(\d+)  (.+)$", done.stdout, re.M)}
    assert listed == {int(code): code.meaning for code in ExitCode}


def test_readme_documents_every_exit_code_once() -> None:
    readme = (REPO / "README.md").read_text()
    section = readme.split("### Exit codes", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| (\d+) \| (.+) \|$", section, re.M)
    assert sorted(int(code) for code, _ in rows) == sorted(int(code) for code in ExitCode)
    assert "--fail-on" in section


def test_version_is_the_projects() -> None:
    declared = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
    done = _run("--version")
    assert (done.returncode, done.stdout, done.stderr) == (0, f"{PROG_NAME} {declared}\n", "")


@pytest.mark.parametrize(("args", "message"), [
    (["scan", str(SAMPLE), "--format", "yaml"], "'yaml' is not one of 'table', 'json'"),
    (["scan", str(SAMPLE), "--min-severity", "loud"], "--min-severity"),
    (["scan", str(SAMPLE), "--fail-on", "loud"], "--fail-on"),
    (["scan", str(SAMPLE), "--min-severity", "critical", "--fail-on", "warning"], "--fail-on warning is below"),
    (["scan"], "Missing argument 'DUMP'"),
    (["scan", str(SAMPLE), "--no-such-option"], "No such option: --no-such-option"),
    (["scna", str(SAMPLE)], "No such command 'scna'"),
    (["sample"], "Missing option '--out'"),
    (["sample", "--out", "x", "--seed", "many"], "Invalid value for '--seed'"),
])
def test_every_usage_error_is_one_error_line_and_exit_code_2(args: list[str], message: str) -> None:
    done = _run(*args)
    assert done.returncode == ExitCode.USAGE == 2, done.stderr
    assert done.stdout == ""
    assert done.stderr.count("\n") == 1 and done.stderr.startswith("error: "), done.stderr
    assert message in done.stderr


def test_shell_completion_is_offered_and_completes_commands_and_options() -> None:
    # typer names the shell it finds running the command (here bash, or the sh under make);
    # its own tests' switch takes the shell from the command line instead
    script = _run("--show-completion", "bash", env={"_TYPER_COMPLETE_TEST_DISABLE_SHELL_DETECTION": "1"})
    assert script.returncode == 0, script.stderr
    assert "_TXN_AUDIT_COMPLETE=complete_bash" in script.stdout
    # what bash asks when the user presses TAB after "txn-audit sc" and "txn-audit scan --fa"
    for words, cword, expected in (("txn-audit sc", "1", "scan"), ("txn-audit scan --fa", "2", "--fail-on")):
        done = _run(env={"_TXN_AUDIT_COMPLETE": "complete_bash", "COMP_WORDS": words, "COMP_CWORD": cword})
        assert done.returncode == 0, done.stderr
        assert expected in done.stdout.split(), done.stdout


def test_a_failure_inside_txn_audit_is_its_traceback_then_exit_code_70(tmp_path: Path) -> None:
    """A bug is never told as a verdict: exit code 70, its traceback and a last ``error:`` line."""
    script = ("import sys\n"
              "from txn_audit import cli, usage\n"
              "def broken(*args, **kwargs):\n"
              "    raise RuntimeError('a bug')\n"
              "usage.check_dump = cli.check_dump = broken\n"
              "sys.argv = ['txn-audit', 'scan', sys.argv[1]]\n"
              "cli.main()\n")
    done = subprocess.run([sys.executable, "-c", script, str(SAMPLE)], capture_output=True, text=True, timeout=120)
    assert done.returncode == ExitCode.INTERNAL, done.stderr
    assert "Traceback" in done.stderr
    assert done.stderr.splitlines()[-1].startswith("error: internal failure, RuntimeError: a bug")
