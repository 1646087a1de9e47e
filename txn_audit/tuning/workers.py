"""The Python workers of txn-audit's sessions: the settings every session gets
(``WORKER_SETTINGS``), and the daemon the local sessions start them through
(``LOCAL_DAEMON_MODULE``, ``txn_audit.tuning.daemon``). Each setting, with the measurement
behind it, is listed in ``txn_audit.tuning``'s docstring.
"""

from __future__ import annotations

#: settings of every session ``spark.build_session`` builds (under spark-submit, those its
#: ``--conf`` does not give)
WORKER_SETTINGS = {
    # rows go to Python workers in Arrow batches of at most maxRecordsPerBatch; with a byte
    # limit too (64 MiB by default in Spark 4.1) the whole batch's size is recomputed after
    # every row, a fifth of the ordered pass's time. Int.MaxValue switches that limit off.
    "spark.sql.execution.arrow.maxBytesPerBatch": str(2**31 - 1),
}

#: ``spark.python.daemon.module`` of the local sessions ``spark.build_session`` starts (the
#: workers run the driver's interpreter, which has PySpark installed): Spark starts it by this
#: name (``python -m``), so the module may be renamed only with this value
LOCAL_DAEMON_MODULE = "txn_audit.tuning.daemon"
