"""The cluster test's spark-submit entry point: the nightly job (``jobs/nightly_audit.py``, its
``main`` as its own ``__main__`` runs it), then, in the same application and so on the same
executors, one task per executor core that reports which Python ran it and where each module
txn-audit needs came from (``txn_audit.executor_env.describe``).

    spark-submit tests/jobs/executor_probe.py REPORT.json JOB-OPTIONS...

REPORT.json gets the list of the tasks' reports. The exit code is the job's, or 70 (with the
traceback) when the probe itself fails.
"""

from __future__ import annotations

import importlib.util
import json
import sys
import time
import traceback
from collections.abc import Iterator
from pathlib import Path
from typing import Any

JOB = Path(__file__).resolve().parents[2] / "jobs" / "nightly_audit.py"
PROBE_FAILED = 70


def _probe(_: Iterator[int]) -> Iterator[dict[str, Any]]:
    """Runs on an executor: imports txn_audit from whatever Python the executor started."""
    from txn_audit.executor_env import describe

    time.sleep(1)  # keep this executor's one core busy, so the next task goes to another executor
    yield describe()


def main(report: Path, job_args: list[str]) -> int:
    spec = importlib.util.spec_from_file_location("nightly_audit_job", JOB)
    assert spec is not None and spec.loader is not None
    job = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(job)
    code = int(job.main(job_args))

    from pyspark.sql import SparkSession

    session = SparkSession.getActiveSession()
    if session is None:
        print("executor probe: the job started no SparkSession", file=sys.stderr)
        return PROBE_FAILED
    try:
        context = session.sparkContext
        tasks = context.defaultParallelism
        reports = context.parallelize(range(tasks), tasks).mapPartitions(_probe).collect()
        report.write_text(json.dumps(reports, indent=2))
    except Exception:
        traceback.print_exc()
        return PROBE_FAILED
    finally:
        session.stop()
    return code


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1]), sys.argv[2:]))
