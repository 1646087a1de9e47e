"""Nightly txn-audit run for ``spark-submit``: scan a dump, append it to a warehouse by audit date.

    spark-submit jobs/nightly_audit.py --dump URI --warehouse URI [--audit-date YYYY-MM-DD]

``--dump`` and ``--warehouse`` may be local paths or ``file://``, ``s3://``, ``webhdfs://`` or
``hdfs://`` URIs (``txn_audit.stores`` says how a warehouse on a store is published).

Every table lands in ``<warehouse>/<table>/audit_date=YYYY-MM-DD/`` (a rerun of the same date
replaces that partition in one step), the report, ``summary.json`` and the data-quality results
in ``<warehouse>/runs/audit_date=YYYY-MM-DD/``. A summary is logged on stderr (spark-submit
relays it on its standard output). Exit codes are ``txn-audit scan``'s
(``txn_audit.usage.ExitCode``, the README's table): 0 clean, 1 warnings, 4 a critical finding
(findings at or above ``--fail-on``, default ``--min-severity``); 2 a usage or environment
error, 3 corrupt input under ``--strict``, 73 a scratch folder that cannot be written (a full
disk, a permission denied), 75 the scratch output in use by another run; any other failure
prints its traceback and exits with 70.
"""

from __future__ import annotations

import argparse
import logging
import sys
from typing import Any, TextIO

#: ``ExitCode.USAGE``, for when txn_audit itself cannot be imported
USAGE = 2

log = logging.getLogger("txn_audit.nightly")
HANDLER_NAME = "txn-audit-nightly-stderr"


class _CurrentStderr(logging.StreamHandler[TextIO]):
    """Logs to whatever ``sys.stderr`` is when a record is written (main() may run more than once
    in one process, each time with its own stderr)."""

    def __init__(self) -> None:
        logging.Handler.__init__(self)

    @property
    def stream(self) -> Any:
        return sys.stderr

    @stream.setter
    def stream(self, _value: Any) -> None:
        pass


def _parser() -> argparse.ArgumentParser:
    """The job's options: where from and where to, then the audit options of ``txn-audit scan``
    (``txn_audit.cli.add_audit_options``: same names, defaults, choices and help)."""
    from txn_audit.cli import add_audit_options

    parser = argparse.ArgumentParser(
        prog="nightly_audit.py",
        description="Scan a dump of Kafka log dirs and append the results to a warehouse by audit date.",
    )
    parser.add_argument("--dump", required=True, help="folder of broker log dirs: a path or a file://, s3://, "
                        "webhdfs:// or hdfs:// URI (S3 settings from AWS_* variables, ~/.aws or "
                        "?endpoint_override=...)")
    parser.add_argument("--warehouse", required=True, help="warehouse folder: a path, or a file://, s3://, "
                        "webhdfs:// or hdfs:// URI (on S3 a date's runs/audit_date=D/run.json, written last, "
                        "lists its files)")
    parser.add_argument("--audit-date", help="partition to write, YYYY-MM-DD (default: today, UTC)")
    add_audit_options(parser)
    parser.add_argument("--work-dir", help="scratch folder for the scan (default: the system's temporary folder; "
                        "on a multi-host cluster, one every executor can write to)")
    return parser


def main(argv: list[str] | None = None) -> int:
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
        from txn_audit.timeparse import parse_date
    except ImportError as err:
        log.error("error: the txn_audit package is not importable (%s); install it into the Python that "
                  "spark-submit runs (PYSPARK_PYTHON)", err)
        return USAGE
    args = _parser().parse_args(argv)  # exits with 2 on a bad option
    try:
        options = api.AuditOptions.from_text(args.as_of, args.max_transaction_timeout, args.late_tolerance,
                                             bootstrap_server=args.bootstrap_server,
                                             command_config=args.command_config, verbose=args.verbose)
        result = api.run_nightly(
            args.dump, args.warehouse, parse_date(args.audit_date), options=options,
            min_severity=api.Severity.parse(args.min_severity), fail_on=args.fail_on, strict=args.strict,
            work_dir=args.work_dir, on_stage=lambda stage: log.info("%s", stage),
        )
    except TxnAuditError as err:
        code = api.ExitCode.of_error(err)
        log.error("error: %s (exit code %d)", err, code)
        return int(code)
    except Exception:
        log.exception("the nightly audit failed (a bug in txn-audit; exit code %d)", api.ExitCode.INTERNAL)
        return int(api.ExitCode.INTERNAL)
    for line in result.summary_lines():
        log.info("%s", line)
    return int(result.exit_code)


def _stop_spark() -> None:
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        active.stop()


if __name__ == "__main__":
    code = main()
    _stop_spark()
    sys.exit(code)
