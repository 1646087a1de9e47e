"""Nightly txn-audit run for ``spark-submit``: scan a dump, append it to a warehouse by audit date.

    spark-submit jobs/nightly_audit.py --dump URI --warehouse URI [--audit-date YYYY-MM-DD]

``--dump`` may be a local path or a ``file://``, ``s3://`` or ``hdfs://`` URI; the warehouse is local
(or ``file://``).

Every table lands in ``<warehouse>/<table>/audit_date=YYYY-MM-DD/`` (a rerun of the same date
replaces that partition in one step), the report, ``summary.json`` and the data-quality results
in ``<warehouse>/runs/audit_date=YYYY-MM-DD/``. A summary is logged on stderr (spark-submit
relays it on its standard output). Exit codes are the scan's: 0 clean, 1 findings at or above
``--min-severity``, 2 usage or environment error, 3 corrupt input under ``--strict``; any other
failure prints its traceback and exits with 70.
"""

from __future__ import annotations

import argparse
import logging
import re
import sys
from datetime import UTC, date, datetime
from typing import Any

USAGE, SOFTWARE = 2, 70  # the usage code of every txn-audit command; EX_SOFTWARE for a crash

log = logging.getLogger("txn_audit.nightly")
HANDLER_NAME = "txn-audit-nightly-stderr"


class _CurrentStderr(logging.StreamHandler):  # type: ignore[type-arg]
    """Logs to whatever ``sys.stderr`` is when a record is written (main() may run more than once
    in one process, each time with its own stderr)."""

    def __init__(self) -> None:
        logging.Handler.__init__(self)

    @property
    def stream(self) -> Any:  # type: ignore[override]
        return sys.stderr

    @stream.setter
    def stream(self, _value: Any) -> None:
        pass


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="nightly_audit.py",
        description="Scan a dump of Kafka log dirs and append the results to a warehouse by audit date.",
    )
    parser.add_argument("--dump", required=True, help="folder of broker log dirs: a path or a file://, s3:// or "
                        "hdfs:// URI (S3 settings from AWS_* variables, ~/.aws or ?endpoint_override=...)")
    parser.add_argument("--warehouse", required=True, help="warehouse folder (path or file:// URI)")
    parser.add_argument("--audit-date", help="partition to write, YYYY-MM-DD (default: today, UTC)")
    parser.add_argument("--as-of", help="audit time, ISO-8601 or epoch ms (default: newest timestamp in the dump)")
    parser.add_argument("--max-transaction-timeout", default="15m", help="age after which an unlisted open "
                        "transaction is hanging (default: 15m)")
    parser.add_argument("--late-tolerance", default="1s", help="skew allowed before a batch counts as late "
                        "(default: 1s)")
    parser.add_argument("--min-severity", default="warning", choices=("info", "warning", "critical"),
                        help="findings at or above this make the exit code 1 (default: warning)")
    parser.add_argument("--strict", action="store_true", help="exit with 3 if anything could not be decoded")
    parser.add_argument("--work-dir", help="scratch folder for the scan (default: the system's temporary folder; "
                        "on a multi-host cluster, one every executor can write to)")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)  # exits with 2 on a bad option
    if not any(h.get_name() == HANDLER_NAME for h in log.handlers):  # other handlers may be there too
        handler = _CurrentStderr()
        handler.set_name(HANDLER_NAME)
        handler.setFormatter(logging.Formatter("%(asctime)s nightly_audit %(message)s"))
        log.addHandler(handler)
    log.setLevel(logging.INFO)
    log.propagate = False
    try:
        from txn_audit import api
        from txn_audit.errors import TxnAuditError
        from txn_audit.timeparse import parse_duration_ms, parse_time_ms
    except ImportError as err:
        log.error("error: the txn_audit package is not importable (%s); install it into the Python that "
                  "spark-submit runs (PYSPARK_PYTHON)", err)
        return USAGE
    try:
        audit_date = _audit_date(args.audit_date)
        result = api.run_nightly(
            args.dump, args.warehouse, audit_date,
            as_of_ms=parse_time_ms(args.as_of) if args.as_of is not None else None,
            max_transaction_timeout_ms=parse_duration_ms(args.max_transaction_timeout),
            late_tolerance_ms=parse_duration_ms(args.late_tolerance),
            min_severity=args.min_severity, strict=args.strict, work_dir=args.work_dir,
            on_stage=lambda stage: log.info("%s", stage),
        )
    except TxnAuditError as err:
        log.error("error: %s", err)
        return int(api.ExitCode.USAGE)
    except Exception:
        log.exception("the nightly audit failed")
        return SOFTWARE
    for line in result.summary_lines():
        log.info("%s", line)
    return int(result.exit_code)


def _audit_date(text: str | None) -> date:
    from txn_audit.errors import UsageError

    if text is None:
        return datetime.now(UTC).date()
    try:
        if re.fullmatch(r"\d{4}-\d{2}-\d{2}", text):
            return date.fromisoformat(text)
    except ValueError:
        pass
    raise UsageError(f"--audit-date must be a date as YYYY-MM-DD, got {text!r}")


def _stop_spark() -> None:
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        active.stop()


if __name__ == "__main__":
    code = main()
    _stop_spark()
    sys.exit(code)
