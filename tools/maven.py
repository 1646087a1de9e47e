"""Jars from Maven Central for the test harnesses (``tools.realkafka``, ``tools.stores``)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path


def copy_dependencies(mvn: str, pom: Path, lib: Path) -> list[str]:
    """Maven copies the runtime dependencies of ``pom`` into ``lib``, through a sibling
    ``lib.partial`` renamed into place once complete: the first error lines of a failed run
    (none: done)."""
    partial = lib.with_name("lib.partial")
    shutil.rmtree(partial, ignore_errors=True)
    run = subprocess.run(
        [mvn, "-q", "-B", "-f", str(pom), "dependency:copy-dependencies",
         f"-DoutputDirectory={partial}", "-DincludeScope=runtime"],
        capture_output=True, text=True,
    )
    if run.returncode != 0:
        errors = [line for line in run.stdout.splitlines() + run.stderr.splitlines() if "ERROR" in line]
        return errors[:5] or [f"mvn exited with code {run.returncode}"]
    shutil.rmtree(lib, ignore_errors=True)
    partial.rename(lib)
    return []
