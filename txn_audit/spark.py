"""The only place that builds a SparkSession, and the Java check that precedes it."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from typing import TYPE_CHECKING

from txn_audit.errors import TxnAuditError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

MIN_JAVA = 17
#: a local session's JVM (driver and executor in one) gets this share of the machine's memory
LOCAL_MEMORY_SHARE = 4
LOCAL_MEMORY_MIB = (1024, 16 * 1024)  # at least Spark's default, at most this

#: HotSpot hands a method to its optimising compiler (C2) after about 5 000 calls or 40 000 loop
#: iterations. A scan runs a few hundred short Spark queries, each with classes of its own, and on
#: two cores C2 took about as much CPU compiling them as the tasks took running. At 10 times those
#: thresholds the loops over every row still get C2 soon, most of the rest stays with the quick
#: compiler (C1). Paired scans of the benchmark dumps against 30 times (docs/performance.md,
#: 2026-11-25): 4 GiB 61-66 s against 67-77 s with less CPU (103-111 s against 109-121 s), 1 GiB
#: 45-51 s against 47-55 s. At 30 times the thresholds the cost per extra GiB was higher.
#: The throughput collector (Parallel GC) instead of G1: a scan is a batch job that wants the most
#: work per CPU second, not short pauses, and G1's concurrent marking and write barriers cost CPU
#: the tasks need. Measured on the 1 GiB benchmark dump, in process, 3 pairs of runs: the scan's
#: CPU 95-96 s against 100-109 s, its wall 58-59 s against 60-66 s.
#: A JVM without these options ignores them.
LOCAL_JVM_OPTIONS = (
    "-XX:+IgnoreUnrecognizedVMOptions -XX:Tier4InvocationThreshold=50000 -XX:Tier4MinInvocationThreshold=6000 "
    "-XX:Tier4CompileThreshold=150000 -XX:Tier4BackEdgeThreshold=400000 -XX:+UseParallelGC"
)


#: the Python daemon of the local sessions build_session starts (txn_audit/spark_daemon.py)
LOCAL_DAEMON_MODULE = "txn_audit.spark_daemon"


class EnvironmentProblem(TxnAuditError):
    """The machine lacks something txn-audit needs (Java, most often)."""


def java_major_version() -> int | None:
    """Major version of the ``java`` Spark will start (``$JAVA_HOME/bin/java`` or PATH), or None."""
    home = os.environ.get("JAVA_HOME")
    java = os.path.join(home, "bin", "java") if home else shutil.which("java")
    if not java or not os.path.exists(java):
        return None
    try:
        out = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    match = re.search(r'version "(\d+)(?:\.(\d+))?', out.stderr + out.stdout)
    if not match:
        return None
    major = int(match.group(1))
    return int(match.group(2) or 0) if major == 1 else major  # "1.8" means Java 8


def check_java() -> None:
    major = java_major_version()
    if major is None:
        where = f"JAVA_HOME={os.environ['JAVA_HOME']}" if os.environ.get("JAVA_HOME") else "PATH"
        raise EnvironmentProblem(
            f"Java {MIN_JAVA} or newer is required (Spark runs on the JVM) but no java was found via {where}. "
            "Install it, e.g. `apt-get install -y openjdk-17-jre-headless`, or set JAVA_HOME."
        )
    if major < MIN_JAVA:
        raise EnvironmentProblem(
            f"Java {MIN_JAVA} or newer is required, found Java {major}. "
            "Install openjdk-17-jre-headless (or newer) and put it first on PATH or in JAVA_HOME."
        )


def local_driver_memory() -> str:
    """``spark.driver.memory`` for a local session: a quarter of the machine's memory (or of the
    container's limit) within ``LOCAL_MEMORY_MIB``, or ``TXN_AUDIT_DRIVER_MEMORY``. Spark's
    default (1g) is too little for the per-producer sort of a multi-GiB dump, and in local mode
    the driver is the executor."""
    given = os.environ.get("TXN_AUDIT_DRIVER_MEMORY")
    if given:
        return given
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return f"{LOCAL_MEMORY_MIB[0]}m"
    total = min([total, *container_memory_limits()])
    low, high = LOCAL_MEMORY_MIB
    return f"{max(low, min(high, total // (1 << 20) // LOCAL_MEMORY_SHARE))}m"


#: where a container's memory limit is (cgroup v2, then v1); "max" or a huge number means none
CGROUP_MEMORY_LIMITS = ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes")


def container_memory_limits() -> list[int]:
    """Memory limits (bytes) the cgroup of this process sets, so that a container's limit, not
    the host's memory, decides the JVM's share."""
    limits = []
    for path in CGROUP_MEMORY_LIMITS:
        try:
            with open(path, encoding="ascii") as handle:
                text = handle.read().strip()
        except (OSError, ValueError):
            continue
        if text.isdigit() and int(text) < 1 << 60:
            limits.append(int(text))
    return limits


def build_session(
    app_name: str = "txn-audit",
    *,
    master: str | None = None,
    shuffle_partitions: int = 8,
    extra_conf: dict[str, str] | None = None,
) -> SparkSession:
    """Get or create the SparkSession txn-audit runs on.

    Without ``master`` an existing session is reused (notebooks); under ``spark-submit`` the
    master and every ``--conf`` it was given are kept, txn-audit's settings only fill the gaps;
    otherwise a new session is ``local[*]`` with ``local_driver_memory()`` and ``LOCAL_JVM_OPTIONS``.
    Workers run this very interpreter unless PYSPARK_PYTHON says otherwise, so the package and
    its decoders are importable in them.
    """
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None and master is None:
        return active
    settings = {
        "spark.app.name": app_name,
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.shuffle.partitions": str(shuffle_partitions),
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.execution.arrow.pyspark.enabled": "true",
        "spark.python.worker.reuse": "true",
        # PySpark otherwise makes about five extra calls into the JVM for every column function
        # called, to tag plans with the Python call site: a scan builds thousands of columns
        "spark.python.sql.dataFrameDebugging.enabled": "false",
        # rows go to Python workers in Arrow batches of at most maxRecordsPerBatch; with a byte
        # limit too (64 MiB by default in Spark 4.1) the whole batch's size is recomputed after
        # every row, a fifth of the ordered pass's time. Int.MaxValue switches that limit off.
        "spark.sql.execution.arrow.maxBytesPerBatch": str(2**31 - 1),
    }
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    builder = SparkSession.builder
    if master is None and "PYSPARK_GATEWAY_PORT" in os.environ:
        # spark-submit started the JVM: its master, driver address and --conf settings stand
        from pyspark import SparkConf

        given = SparkConf()
        settings = {key: value for key, value in settings.items() if not given.contains(key)}
    else:
        check_java()
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        builder = builder.master(master or os.environ.get("TXN_AUDIT_SPARK_MASTER", "local[*]"))
        settings |= {"spark.driver.host": "127.0.0.1", "spark.driver.bindAddress": "127.0.0.1"}
        submit_args = os.environ.get("PYSPARK_SUBMIT_ARGS", "")
        if "--driver-memory" not in submit_args:
            settings["spark.driver.memory"] = local_driver_memory()
        if "--driver-java-options" not in submit_args:
            settings["spark.driver.extraJavaOptions"] = LOCAL_JVM_OPTIONS
        # the workers run this interpreter, which has PySpark installed: see spark_daemon
        settings["spark.python.daemon.module"] = LOCAL_DAEMON_MODULE
    for key, value in settings.items():
        builder = builder.config(key, value)
    for key, value in (extra_conf or {}).items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    return session
