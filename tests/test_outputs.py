"""Output folders are replaced as a whole or not at all (no Spark)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from txn_audit.errors import UsageError
from txn_audit.outputs import MARKER, recover, staged_output


def _tree(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): p.read_text() for p in sorted(root.rglob("*")) if p.is_file()}


def test_success_replaces_the_whole_folder(tmp_path: Path) -> None:
    out = tmp_path / "out"
    with staged_output(out) as stage:
        (stage / "a.txt").write_text("first")
        (stage / "keep").mkdir()
        (stage / "keep" / "b.txt").write_text("first")
    with staged_output(out) as stage:
        (stage / "a.txt").write_text("second")
    assert _tree(out) == {MARKER: (out / MARKER).read_text(), "a.txt": "second"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]  # nothing left beside it


def test_failure_keeps_the_previous_output(tmp_path: Path) -> None:
    out = tmp_path / "out"
    with staged_output(out) as stage:
        (stage / "a.txt").write_text("good")
    before = _tree(out)
    with pytest.raises(RuntimeError), staged_output(out) as stage:
        (stage / "a.txt").write_text("half")
        raise RuntimeError("killed halfway")
    assert _tree(out) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def test_a_folder_not_written_by_us_is_refused(tmp_path: Path) -> None:
    (tmp_path / "precious.txt").write_text("do not delete")
    with pytest.raises(UsageError, match="did not write"), staged_output(tmp_path):
        pass
    assert (tmp_path / "precious.txt").read_text() == "do not delete"
    (tmp_path / "file").write_text("x")
    with pytest.raises(UsageError, match="is a file"), staged_output(tmp_path / "file"):
        pass


def test_recover_puts_back_an_output_moved_away_by_a_killed_run(tmp_path: Path) -> None:
    out = tmp_path / "out"
    moved = tmp_path / ".out.previous-1234"
    moved.mkdir()
    (moved / "a.txt").write_text("old")
    half = tmp_path / ".out.staging-5678"
    half.mkdir()
    recover(out)
    assert (out / "a.txt").read_text() == "old"
    assert not moved.exists() and not half.exists()


def test_sigkill_at_any_moment_leaves_old_or_new(tmp_path: Path) -> None:
    """A child process rewrites the output in a loop and is killed; each time the folder holds
    one complete generation (all files of the same generation), never a mix."""
    out = tmp_path / "out"
    script = textwrap.dedent(
        f"""
        import sys
        from pathlib import Path
        from txn_audit.outputs import staged_output
        out = Path({str(out)!r})
        gen = 0
        while True:
            gen += 1
            with staged_output(out) as stage:
                for i in range(20):
                    (stage / f"part-{{i}}.txt").write_text(str(gen))
            print(gen, flush=True)
        """
    )
    for delay in (0.3, 0.5, 0.8):
        proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
        try:
            assert proc.stdout is not None
            proc.stdout.readline()  # at least one generation is complete
            subprocess.run(["sleep", str(delay)], check=True)
        finally:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
        recover(out)  # what the next run does first
        values = {v for k, v in _tree(out).items() if k.startswith("part-")}
        assert len(values) == 1 and len(list(out.glob("part-*"))) == 20


def test_a_second_writer_stops_at_once_and_leaves_the_first_ones_staging(tmp_path: Path) -> None:
    """While a run holds ``out`` (another process), a second one raises ``OutputInUseError``
    naming it and deletes nothing; once the first has ended, the lock is free and gone."""
    from txn_audit.errors import OutputInUseError

    out = tmp_path / "out"
    script = textwrap.dedent(
        f"""
        import sys
        from pathlib import Path
        from txn_audit.outputs import staged_output
        with staged_output(Path({str(out)!r})) as stage:
            (stage / "a.txt").write_text("first")
            print(stage, flush=True)
            sys.stdin.readline()
        """
    )
    holder = subprocess.Popen([sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              text=True)
    try:
        assert holder.stdout is not None and holder.stdin is not None
        staging = Path(holder.stdout.readline().strip())
        with pytest.raises(OutputInUseError, match=f"pid {holder.pid} "), staged_output(out):
            pass
        assert (staging / "a.txt").read_text() == "first"  # not taken for a killed run's leftover
        holder.stdin.write("\n")
        holder.stdin.flush()
        assert holder.wait(60) == 0
    finally:
        holder.kill()
    assert (out / "a.txt").read_text() == "first"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]
    with staged_output(out) as stage:
        (stage / "a.txt").write_text("second")
    assert (out / "a.txt").read_text() == "second"


def test_storage_failures_arriving_as_text_are_output_errors(tmp_path: Path) -> None:
    """A Spark task's error carries the OSError only as text: still an ``OutputError`` naming the
    output; any other failure is left as it is."""
    import errno

    from txn_audit.outputs import write_failure

    out = tmp_path / "out"
    told = RuntimeError(f"Job aborted: PythonException: OSError: [Errno 28] {os.strerror(errno.ENOSPC)}")
    failure = write_failure(told, out)
    assert failure is not None and str(failure).startswith(f"cannot write the output {out}: no space left")
    direct = write_failure(PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(out / "x")), out)
    assert direct is not None and f"(writing {out / 'x'})" in str(direct)
    assert write_failure(RuntimeError("a bug"), out) is None
    assert write_failure(KeyError("x"), out) is None
