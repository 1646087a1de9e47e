"""Exit codes a monitor can use: the verdicts of real-broker scenarios as Kafka judged them, and
each failure of the output (two runs on one ``--out``, a permission denied, a folder removed
while it is written, a full disk) told in one line with a code of its own, the previous output
left whole."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from txn_audit.outputs import MARKER, staged_output
from txn_audit.usage import ExitCode

REPO = Path(__file__).resolve().parent.parent
CORPUS = REPO / "tests" / "corpus" / "kafka-4.4.0"
HEALTHY = CORPUS / "healthy" / "logdirs"
#: run as root without the capabilities that bypass file permissions: a folder's mode applies
UNPRIVILEGED = ("setpriv", "--bounding-set=-dac_override,-dac_read_search",
                "--inh-caps=-dac_override,-dac_read_search", "--")


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "SPARK_CONF_DIR", "TXN_AUDIT_SPARK_MASTER")}


def _scan(*args: str, prefix: tuple[str, ...] = (), **popen: Any) -> subprocess.Popen[str]:
    return subprocess.Popen([*prefix, sys.executable, "-m", "txn_audit.cli", "scan", *args, "--no-progress"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=popen.pop("env", _env()),
                            **popen)


def _finish(proc: subprocess.Popen[str], timeout: float = 900) -> tuple[int, str, str]:
    out, err = proc.communicate(timeout=timeout)
    return proc.returncode, out, err


def _tree(root: Path) -> dict[str, str]:
    """Every file under ``root`` and its content's digest."""
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


def _error_line(stderr: str) -> str:
    """The one ``error:`` line, Spark's stage lines aside; no traceback."""
    assert "Traceback" not in stderr, stderr
    errors = [line for line in stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, stderr
    return errors[0]


def _wait_for(found: Any, what: str, proc: subprocess.Popen[str], limit: float = 300) -> Any:
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if (value := found()):
            return value
        if proc.poll() is not None:
            pytest.fail(f"the run ended (exit code {proc.returncode}) before {what}: {proc.stderr.read() if proc.stderr else ''}")
        time.sleep(0.05)
    pytest.fail(f"no {what} within {limit} s")


# -- verdicts: Kafka's word on real-broker scenarios ----------------------------------------


def _kafkas_verdict(scenario: Path) -> ExitCode:
    """What Kafka's tools said, as an exit code: a transaction find-hanging lists is critical; an
    LSO held below the HW with none hanging (an open transaction) a warning; else clean."""
    expected = json.loads((scenario / "expected.json").read_text())
    if expected["find_hanging"]["rows"]:
        return ExitCode.CRITICAL
    if any(p["last_stable_offset"] < p["high_watermark"] for p in expected["partitions"].values()):
        return ExitCode.WARNING
    return ExitCode.OK


@pytest.mark.corpus
@pytest.mark.parametrize("scenario", ["healthy", "crashed-producer", "hanging-unadded-partition"])
def test_the_exit_code_is_kafkas_verdict(spark: Any, scenario: str) -> None:
    """Scanned at the time the copy was taken: 0, 1 or 4 as Kafka's tools judged the scenario;
    ``--fail-on critical`` leaves warnings at 0, ``--fail-on info`` makes any finding count."""
    from typer.testing import CliRunner

    from txn_audit.cli import app

    expected = _kafkas_verdict(CORPUS / scenario)
    runner = CliRunner()
    base = ["scan", str(CORPUS / scenario / "logdirs"), "--no-progress", "--no-quality", "--format", "json"]
    run = runner.invoke(app, base)
    assert run.exit_code == expected, run.output
    doc = json.loads(run.stdout)
    worst = doc["summary"]["verdict"].split(":")[0]
    assert worst == {ExitCode.OK: "CLEAN", ExitCode.WARNING: "WARNING", ExitCode.CRITICAL: "CRITICAL"}[expected]
    critical_only = runner.invoke(app, [*base, "--fail-on", "critical"])
    assert critical_only.exit_code == (ExitCode.CRITICAL if expected is ExitCode.CRITICAL else ExitCode.OK)
    everything = runner.invoke(app, [*base, "--min-severity", "info", "--fail-on", "info"])
    any_finding = bool(doc["findings"])
    assert everything.exit_code == (expected if expected is not ExitCode.OK
                                    else ExitCode.WARNING if any_finding else ExitCode.OK)


# -- failures of the output -------------------------------------------------------------


@pytest.mark.spark  # starts a JVM of its own
def test_two_overlapping_scans_into_one_out(tmp_path: Path) -> None:
    """A second scan started while the first writes the same ``--out`` stops at once with exit
    code 75, naming the first run; the first completes and publishes its output."""
    out = tmp_path / "out"
    first = _scan(str(HEALTHY), "--out", str(out), "--no-quality")
    try:
        lock = tmp_path / ".out.lock"
        _wait_for(lambda: lock.exists() and lock.read_text(), "the first run's lock", first)
        started = time.monotonic()
        code, stdout, stderr = _finish(_scan(str(HEALTHY), "--out", str(out)), timeout=120)
        assert time.monotonic() - started < 30  # before its own Spark starts
        assert code == ExitCode.BUSY, stderr
        line = _error_line(stderr)
        assert str(out) in line and f"pid {first.pid} " in line, line
        assert stdout == ""
        assert first.poll() is None or first.returncode == 0  # the first run was not disturbed
    finally:
        code, stdout, stderr = _finish(first)
    assert code == ExitCode.OK, stderr[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["summary"]["verdict"] == stdout.splitlines()[0]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]  # no staging folder, no lock left


def _previous_output(folder: Path) -> dict[str, str]:
    """A previous output in ``folder`` (as a run leaves one), and its files' digests."""
    with staged_output(folder) as stage:
        (stage / "summary.json").write_text('{"summary": {"verdict": "CLEAN"}}\n')
        (stage / "tables").mkdir()
        (stage / "tables" / "part-0.parquet").write_bytes(b"PAR1" * 100)
    return _tree(folder)


def test_permission_denied_is_one_line_naming_the_path_and_exit_code_73() -> None:
    """An ``--out`` in a folder the user may not write: one line naming it, exit code 73, before
    Spark starts, and the previous output untouched. As root, run without the capabilities that
    bypass file permissions (``setpriv``)."""
    prefix: tuple[str, ...] = ()
    if os.geteuid() == 0:
        if shutil.which("setpriv") is None:
            pytest.skip("root bypasses file permissions, and setpriv (util-linux), to drop that, is not installed")
        prefix = UNPRIVILEGED
    base = Path(tempfile.mkdtemp(prefix="txn-audit-denied-"))
    try:
        locked = base / "locked"
        locked.mkdir()
        before = _previous_output(locked / "out")
        os.chmod(locked, 0o555)
        started = time.monotonic()
        code, stdout, stderr = _finish(_scan(str(HEALTHY), "--out", str(locked / "out"), prefix=prefix),
                                       timeout=120)
        assert time.monotonic() - started < 30  # told before Spark starts
        assert code == ExitCode.OUTPUT, stderr
        line = _error_line(stderr)
        assert f"cannot write the output {locked / 'out'}: permission denied" in line, line
        assert line.endswith("the previous output is left as it was"), line
        assert _tree(locked / "out") == before
        assert sorted(p.name for p in locked.iterdir()) == ["out"]
    finally:
        os.chmod(base / "locked", 0o755)
        shutil.rmtree(base, ignore_errors=True)


@pytest.mark.spark  # starts a JVM of its own
def test_an_output_folder_removed_while_written_is_exit_code_73(tmp_path: Path) -> None:
    """The staging folder of a scan removed by something else while the scan writes it: one line
    naming it, exit code 73, the previous output whole and nothing published."""
    out = tmp_path / "out"
    before = _previous_output(out)
    run = _scan(str(HEALTHY), "--out", str(out), "--no-quality")
    try:
        staging = _wait_for(lambda: next((p for p in tmp_path.glob(".out.staging-*") if (p / "tables").is_dir()),
                                         None), "the scan writing its tables", run)
        while staging.exists():  # whatever the scan writes meanwhile goes too
            shutil.rmtree(staging, ignore_errors=True)
    finally:
        code, stdout, stderr = _finish(run)
    _refused(code, stderr, f"cannot write the output {out}: the folder {staging} was removed while it was written",
             out, before)


def _refused(code: int, stderr: str, told: str, out: Path, before: dict[str, str]) -> None:
    """A scan into ``out`` refused by its storage: exit code 73, one line telling ``told`` and
    that the previous output (``before``, ``_tree``) is whole, as it is, and nothing else beside it."""
    assert code == ExitCode.OUTPUT, stderr[-3000:]
    line = _error_line(stderr)
    assert told in line, line
    assert line.endswith("the previous output is left as it was"), line
    assert _tree(out) == before
    assert sorted(p.name for p in out.parent.iterdir()) == ["out"]


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 3 MB tmpfs, mounted for the test."""
    disk = tmp_path / "disk"
    disk.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=3m", "tmpfs", str(disk)], capture_output=True,
                             text=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here (needs root and mount rights): {mounted.stderr.strip()}")
    try:
        yield disk
    finally:
        subprocess.run(["umount", str(disk)], check=True)


@pytest.mark.spark  # starts a JVM of its own
def test_a_full_disk_is_one_line_and_exit_code_73(small_disk: Path) -> None:
    """``--out`` on a 3 MB disk. The tables fit; a rerun with the data-quality suites fills the
    disk as Great Expectations writes its Data Docs: one line naming the path, exit code 73,
    the previous output whole, nothing left behind. A disk already full is told at once."""
    out = small_disk / "out"
    code, stdout, stderr = _finish(_scan(str(HEALTHY), "--out", str(out), "--no-quality", "--no-report"))
    assert code == ExitCode.OK, stderr[-3000:]
    before = _tree(out)
    code, stdout, stderr = _finish(_scan(str(HEALTHY), "--out", str(out)))
    _refused(code, stderr, f"cannot write the output {out}: no space left on device", out, before)
    # the disk filled to the last byte: told before Spark starts
    with open(small_disk / "filler", "wb") as filler:
        try:
            while True:
                filler.write(b"\0" * 65536)
                filler.flush()
        except OSError:
            pass
    started = time.monotonic()
    code, stdout, stderr = _finish(_scan(str(HEALTHY), "--out", str(out)), timeout=120)
    assert time.monotonic() - started < 30
    assert code == ExitCode.OUTPUT, stderr
    assert "no space left on device" in _error_line(stderr)
    assert _tree(out) == before and (out / MARKER).is_file()
