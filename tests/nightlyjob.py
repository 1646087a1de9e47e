"""The nightly job's module (``jobs/nightly_audit.py``: a script, not a package), loaded from its file."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

JOB = Path(__file__).resolve().parents[1] / "jobs" / "nightly_audit.py"


def nightly_job() -> Any:
    spec = importlib.util.spec_from_file_location("nightly_audit_job", JOB)
    assert spec is not None and spec.loader is not None
    job = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(job)
    return job
