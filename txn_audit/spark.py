"""The only place that builds a SparkSession, and the Java check that precedes it; the session's
tuning (its JVM's options, its SQL and worker settings) comes from ``txn_audit.tuning``."""

from __future__ import annotations

import atexit
import os
import re
import shutil
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import TYPE_CHECKING, TextIO, TypeVar

from txn_audit.errors import TxnAuditError
from txn_audit.tuning.jvm import (
    class_archive_options,
    keep_class_archive,
    local_driver_memory,
    local_heap_options,
    local_jvm_options,
    local_page_size,
)
from txn_audit.tuning.sql import SESSION_SQL, SHUFFLE_PARTITIONS
from txn_audit.tuning.workers import LOCAL_DAEMON_MODULE, WORKER_SETTINGS

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

MIN_JAVA = 17

#: the log4j2 configuration that keeps Spark's log lines off the console (shipped in the package):
#: the JVM of a local session starts with it, and a session under spark-submit switches to it
#: before its SparkContext starts; build_session(verbose=True) leaves Spark's own defaults
QUIET_LOG4J = Path(__file__).with_name("log4j2-quiet.properties")
#: how the notices the JVM itself prints on stderr begin, before any logging is configured: Spark's
#: launcher always adds the incubating Vector API module ("WARNING: Using incubator modules:
#: jdk.incubator.vector"), and newer JDKs add notices about native access and sun.misc.Unsafe
JVM_NOTICE = b"WARNING: "


T = TypeVar("T")


class EnvironmentProblem(TxnAuditError):
    """The machine lacks something txn-audit needs (Java, most often)."""


#: the lines of ``java -version`` that say which java it is: 'openjdk version "17.0.15" 2025-04-15',
#: 'OpenJDK Runtime Environment (build 17.0.15+6-...)', 'OpenJDK 64-Bit Server VM (build ...)'
JAVA_VERSION_LINE = re.compile(r'version "|\(build ')


def java_version_text() -> str | None:
    """What ``java -version`` prints for the ``java`` Spark will start (``$JAVA_HOME/bin/java`` or
    PATH), with that java's real path first, or None when there is none."""
    home = os.environ.get("JAVA_HOME")
    java = os.path.join(home, "bin", "java") if home else shutil.which("java")
    if not java or not os.path.exists(java):
        return None
    try:
        out = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    # the version lines only, without what options from the environment add ("Picked up
    # JAVA_TOOL_OPTIONS: ...", a flight recording's notice)
    said = [line for line in (out.stderr + out.stdout).splitlines() if JAVA_VERSION_LINE.search(line)]
    return "\n".join([os.path.realpath(java), *said])


def java_major_version(version_text: str | None = None) -> int | None:
    """Major version of the ``java`` Spark will start (``$JAVA_HOME/bin/java`` or PATH), or None;
    from ``version_text`` (``java_version_text``'s) when the caller has it."""
    text = version_text or java_version_text()
    match = None if text is None else re.search(r'version "(\d+)(?:\.(\d+))?', text)
    if not match:
        return None
    major = int(match.group(1))
    return int(match.group(2) or 0) if major == 1 else major  # "1.8" means Java 8


def check_java(version_text: str | None = None) -> None:
    """Refuse to go on without Java ``MIN_JAVA`` or newer (``EnvironmentProblem``);
    ``version_text``: ``java_version_text``'s, when the caller has it."""
    major = java_major_version(version_text)
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


def _forward_lines(source_fd: int, sink_fd: int) -> None:
    """Copy ``source_fd`` to ``sink_fd`` line by line until its end, less the JVM's own notices
    (``JVM_NOTICE``). Reading goes on when ``sink_fd`` fails, so the writer never blocks."""
    pending = b""
    sink_ok = True

    def write(data: bytes) -> None:
        nonlocal sink_ok
        while sink_ok and data:
            try:
                data = data[os.write(sink_fd, data):]
            except OSError:
                sink_ok = False

    try:
        while chunk := os.read(source_fd, 65536):
            *lines, pending = (pending + chunk).split(b"\n")
            write(b"".join(line + b"\n" for line in lines if not line.startswith(JVM_NOTICE)))
        if pending and not pending.startswith(JVM_NOTICE):
            write(pending)
    finally:
        os.close(source_fd)
        os.close(sink_fd)


def _flush(*streams: TextIO) -> None:
    """Flush each stream that can be flushed (one replaced, closed or missing is left alone)."""
    for stream in streams:
        try:
            stream.flush()
        except (AttributeError, OSError, ValueError):
            pass


@contextmanager
def jvm_notices_filtered() -> Iterator[None]:
    """Processes started inside the block (the session's JVM, and the Python workers it starts)
    get a stderr that passes everything to this process's stderr except the JVM's own notices
    (``JVM_NOTICE``), for as long as they run. No JVM option turns those off. This process's
    own stderr is unchanged once the block ends."""
    _flush(sys.stdout, sys.stderr)
    try:
        saved = os.dup(2)
    except OSError:  # no stderr to keep clean
        yield
        return
    source, sink = os.pipe()
    os.dup2(sink, 2)  # inheritable: the children write into the pipe
    os.close(sink)
    threading.Thread(target=_forward_lines, args=(source, os.dup(saved)), name="txn-audit-jvm-stderr",
                     daemon=True).start()
    try:
        yield
    finally:
        _flush(sys.stderr)
        os.dup2(saved, 2)  # only the children hold the pipe now: it ends when they do
        os.close(saved)


def _quiet_submitted_jvm() -> None:
    """Under spark-submit the JVM already runs, with the logging it was started with: switch it to
    ``QUIET_LOG4J`` before the SparkContext starts (which logs, and makes Hadoop log), so that
    only what the JVM printed while starting remains.

    spark-submit set Spark's logging up and reset it before running the job, leaving a mark that
    makes the SparkContext load Spark's default configuration again (and say so). Spark's logging
    is first initialised here, silently, as spark-submit itself does; then the configuration is
    replaced, and the SparkContext finds logging initialised."""
    from pyspark import SparkContext

    SparkContext._ensure_initialized()
    jvm = SparkContext._jvm
    if jvm is None:
        return
    jvm.org.apache.spark.SparkConf(False).initializeLogIfNecessary(False, True)  # (isInterpreter, silent)
    context = jvm.org.apache.logging.log4j.LogManager.getContext(False)
    context.setConfigLocation(jvm.java.net.URI(QUIET_LOG4J.as_uri()))


def build_session(
    app_name: str = "txn-audit",
    *,
    master: str | None = None,
    shuffle_partitions: int = SHUFFLE_PARTITIONS,
    extra_conf: dict[str, str] | None = None,
    verbose: bool = False,
    input_bytes: int | None = None,
) -> SparkSession:
    """Get or create the SparkSession txn-audit runs on.

    Without ``master`` an existing session is reused (notebooks); under ``spark-submit`` the
    master and every ``--conf`` it was given are kept, txn-audit's settings only fill the gaps;
    otherwise a new session is ``local[*]`` with ``local_driver_memory()`` (a heap that starts at
    that size: ``local_heap_options``; memory pages of ``local_page_size``, unless
    PYSPARK_SUBMIT_ARGS gives ``--driver-memory`` or ``spark.buffer.pageSize``) and the JVM
    options ``local_jvm_options`` gives for ``input_bytes``, the size of the input the session
    is for (all from ``tuning.jvm``; every session's SQL and worker settings: ``tuning.sql``,
    ``tuning.workers``).
    Workers run this very interpreter unless PYSPARK_PYTHON says otherwise, so the package and
    its decoders are importable in them.

    Spark's own log lines stay off the console unless ``verbose``: a local JVM starts with
    ``QUIET_LOG4J`` and its stderr loses the JVM's start-up notices (``jvm_notices_filtered``);
    under spark-submit the running JVM switches to ``QUIET_LOG4J`` before the SparkContext starts.
    ``verbose`` keeps Spark's default logging (WARN and above, on stderr).
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
        **SESSION_SQL,
        **WORKER_SETTINGS,
    }
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    builder = SparkSession.builder
    archive_writing: Path | None = None
    launched = not (master is None and "PYSPARK_GATEWAY_PORT" in os.environ)
    if not launched:
        # spark-submit started the JVM: its master, driver address and --conf settings stand
        from pyspark import SparkConf

        given = SparkConf()
        settings = {key: value for key, value in settings.items() if not given.contains(key)}
        if not verbose:
            _quiet_submitted_jvm()
    else:
        java_version = java_version_text()  # one `java -version` for the check and the archive
        check_java(java_version)
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        builder = builder.master(master or os.environ.get("TXN_AUDIT_SPARK_MASTER", "local[*]"))
        settings |= {"spark.driver.host": "127.0.0.1", "spark.driver.bindAddress": "127.0.0.1"}
        submit_args = os.environ.get("PYSPARK_SUBMIT_ARGS", "")
        heap_options = ""
        if "--driver-memory" not in submit_args:
            settings["spark.driver.memory"] = local_driver_memory()
            heap_options = local_heap_options(settings["spark.driver.memory"])
            page = local_page_size(settings["spark.driver.memory"])
            if page is not None and "spark.buffer.pageSize" not in submit_args:
                settings["spark.buffer.pageSize"] = page
        if "--driver-java-options" not in submit_args:
            jvm_options = f"{local_jvm_options(input_bytes)} {heap_options}".strip()
            archive_options, archive_writing = class_archive_options(java_version)
            settings["spark.driver.extraJavaOptions"] = f"{jvm_options} {archive_options}".strip()
        if not verbose and "spark.driver.defaultJavaOptions" not in submit_args:
            # prepended to the options above, so --driver-java-options does not drop it
            settings["spark.driver.defaultJavaOptions"] = f"-Dlog4j2.configurationFile={QUIET_LOG4J.as_uri()}"
        # the workers run this interpreter, which has PySpark installed: see tuning.daemon
        settings["spark.python.daemon.module"] = LOCAL_DAEMON_MODULE
    for key, value in settings.items():
        builder = builder.config(key, value)
    for key, value in (extra_conf or {}).items():
        builder = builder.config(key, value)
    from pyspark import SparkContext

    starts_jvm = launched and SparkContext._gateway is None
    if verbose:
        session = builder.getOrCreate()
    else:
        # a JVM is started here unless spark-submit started it (or an earlier session of this process)
        with jvm_notices_filtered() if launched else nullcontext():
            session = builder.getOrCreate()
        session.sparkContext.setLogLevel("OFF")  # whatever logging the JVM was started with
    if starts_jvm and archive_writing is not None:
        atexit.register(keep_class_archive, archive_writing)
    return session


def side_by_side(spark: SparkSession, tasks: Sequence[Callable[[], T]], threads: int | None = None) -> list[T]:
    """Run ``tasks``, each of which submits work to ``spark``, ``threads`` at a time (default: the
    session's parallelism, at least 2); their results in the order given. A task's exception is
    raised here, once every task has ended.

    Spark analyses, optimises and plans a query on the driver thread that submits it, and
    PySpark's DataFrame calls each wait for the JVM: a scan of a small dump spends most of its
    time there, one query after another on one core. Independent queries submitted from threads
    of their own are prepared side by side and their jobs share the executors. Each task runs
    with a copy of the calling thread's Spark job group, local properties and tags
    (``inheritable_thread_target``), so progress reporting sees its jobs as the caller's. A copy
    of its own: the wrapper copies them once, when it is made, and a task sets them in its
    thread, where each query it runs sets and removes its execution's ids in them; tasks sharing
    one copy saw one another's ids (a query failed with "Cannot parse null string")."""
    from pyspark.util import inheritable_thread_target

    if len(tasks) <= 1:
        return [task() for task in tasks]
    workers = threads or max(2, spark.sparkContext.defaultParallelism)
    wrapped = [inheritable_thread_target(spark)(task) for task in tasks]
    with ThreadPoolExecutor(max_workers=min(workers, len(tasks)), thread_name_prefix="txn-audit-spark") as pool:
        futures = [pool.submit(task) for task in wrapped]
    return [future.result() for future in futures]
