"""The only place that builds a SparkSession, and the Java check that precedes it."""

from __future__ import annotations

import atexit
import hashlib
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import TYPE_CHECKING, TextIO, TypeVar

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
#: compiler (C1). Paired scans of the benchmark dumps against 30 times (git log -- docs/performance.md,
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
#: For an input of at most ``QUICK_JIT_MAX_BYTES`` the JVM compiles with C1 alone
#: (``QUICK_JIT_OPTIONS``). A Java Flight Recording of a scan of the 2.2 MB ``healthy`` dump
#: showed C2 compiling for more than 8 s of a core, even at the thresholds above, while the scan
#: ran 25 s on two cores; C1's code is slower in a hot loop but is ready at once, and a scan's
#: time goes to many short queries more than to any loop. C1 alone gets the tiered compilers'
#: code cache (240 MB): its own default (48 MB) fills on a GiB, and HotSpot then stops
#: compiling. Paired scans (git log -- docs/performance.md): ``healthy`` about 5 s faster; at 4 GiB, the
#: realistic dump 55.7 s against 65.4 s with the thresholds above, the uniform one 41.8 s
#: against 45.7 s. Beyond 8 GiB (not measured) the JVM keeps C2, whose code may pay for its
#: compilation over many GiB.
QUICK_JIT_MAX_BYTES = 8 << 30
QUICK_JIT_OPTIONS = ("-XX:+IgnoreUnrecognizedVMOptions -XX:TieredStopAtLevel=1 -XX:ReservedCodeCacheSize=240m "
                     "-XX:+UseParallelGC")


def local_jvm_options(input_bytes: int | None) -> str:
    """The JVM options of a local session for an input of ``input_bytes`` (None: not known, as
    for a session built before its dump is listed)."""
    if input_bytes is not None and input_bytes <= QUICK_JIT_MAX_BYTES:
        return QUICK_JIT_OPTIONS
    return LOCAL_JVM_OPTIONS


#: A scan of an input of at most this many bytes runs Spark SQL's expressions interpreted
#: (``INTERPRETED_SQL``). A small dump's scan runs about 180 queries over a few thousand rows each;
#: generating and compiling Java code for every one of them (Janino, then the JIT) costs more than
#: the rows' evaluation, while over a GiB the generated code pays for itself many times. Paired
#: scans (git log -- docs/performance.md): the 2.2 MB ``healthy`` dump about 3 s faster interpreted, the
#: realistic 1 GiB dump 12 s slower.
INTERPRETED_MAX_BYTES = 64 << 20
#: the session settings of an interpreted scan (``sized_for``): no whole-stage code generation, and
#: expressions, projections and predicates evaluated by Spark's interpreted implementations
INTERPRETED_SQL = {"spark.sql.codegen.wholeStage": "false", "spark.sql.codegen.factoryMode": "NO_CODEGEN"}


#: the Python daemon of the local sessions build_session starts (txn_audit/spark_daemon.py)
LOCAL_DAEMON_MODULE = "txn_audit.spark_daemon"

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


#: Class data sharing: a local JVM maps the classes a scan loads (about 30 000: Spark, Scala,
#: Parquet, Arrow) from an archive of this JVM and this Spark instead of reading, parsing and
#: verifying them from the jars again. The first local session on a machine has its JVM write the
#: archive when it exits (``-XX:ArchiveClassesAtExit``, about 180 MB and 8 s of a core, while the
#: Python process waits at its exit); every later one starts with it (``-XX:SharedArchiveFile``).
#: Paired scans of the 2.2 MB ``healthy`` dump: 23.4-24.1 s with it, 26.5-27.7 s without. The
#: archive sits in ``$XDG_CACHE_HOME/txn-audit/jvm`` (``~/.cache``); ``TXN_AUDIT_CLASS_ARCHIVE``
#: names another folder, or ``off``. Its name holds a digest of the java (its path and version)
#: and the jars on Spark's class path, so a change of either makes a new one; a JVM that cannot
#: use an archive ignores it, and its messages about archives are switched off.
CLASS_ARCHIVE_ENV = "TXN_AUDIT_CLASS_ARCHIVE"
CLASS_ARCHIVE_QUIET = "-Xshare:auto -Xlog:cds=off -Xlog:cds+dynamic=off"
#: how long the Python process waits at its exit for its JVM to write the archive
CLASS_ARCHIVE_WAIT_S = 180
#: archives being written by a process that died are removed after this long
CLASS_ARCHIVE_STALE_S = 3600
#: archives kept in the folder (the most recently written): one per java and Spark in use
CLASS_ARCHIVES_KEPT = 3


def class_archive_dir() -> Path | None:
    """The folder of the JVM's class archives, or None when they are off."""
    given = os.environ.get(CLASS_ARCHIVE_ENV)
    if given is not None and given.strip().lower() in ("off", "0", "no", "false", ""):
        return None
    if given:
        return Path(given)
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "txn-audit" / "jvm"


def class_archive_name(java_version: str) -> str:
    """The archive's file name for this java (``java_version_text``) and the jars of the
    installed PySpark. Options such as the JIT's do not change which classes an archive may hold."""
    import pyspark

    jars = Path(pyspark.__file__).with_name("jars")
    digest = hashlib.sha256()
    for part in (java_version, pyspark.__version__):
        digest.update(part.encode() + b"\0")
    for jar in sorted(jars.glob("*.jar")) if jars.is_dir() else []:
        digest.update(f"{jar.name}:{jar.stat().st_size}\0".encode())
    return f"spark-{digest.hexdigest()[:20]}.jsa"


def class_archive_options(java_version: str | None) -> tuple[str, Path | None]:
    """JVM options that use the class archive of this java (``java_version_text``'s), or that have
    the JVM write it at its exit; and, in that case, the path it writes (to be moved into place by
    ``_keep_class_archive``). No options when archives are off, Java is not found or the folder
    cannot be written."""
    folder = class_archive_dir()
    if folder is None or java_version is None:
        return "", None
    final = folder / class_archive_name(java_version)
    if final.is_file():
        return f"{CLASS_ARCHIVE_QUIET} -XX:SharedArchiveFile={final}", None
    try:
        folder.mkdir(parents=True, exist_ok=True)
        now = time.time()
        for stale in folder.glob("*.jsa.*.tmp"):
            if now - stale.stat().st_mtime > CLASS_ARCHIVE_STALE_S:
                stale.unlink(missing_ok=True)
    except OSError:
        return "", None
    if not os.access(folder, os.W_OK) or " " in str(folder):
        return "", None  # Spark splits the options at spaces
    writing = final.with_name(f"{final.name}.{os.getpid()}.tmp")
    return f"{CLASS_ARCHIVE_QUIET} -XX:ArchiveClassesAtExit={writing}", writing


def _keep_class_archive(writing: Path) -> None:
    """At the Python process's exit: stop Spark, let the JVM exit (it ends when its stdin does)
    and write ``writing``, then move it into place; only the ``CLASS_ARCHIVES_KEPT`` newest
    archives stay. An archive not written whole is removed."""
    from pyspark import SparkContext

    final = writing.with_name(writing.name.split(".jsa.")[0] + ".jsa")
    gateway = SparkContext._gateway
    proc = getattr(gateway, "proc", None)
    try:
        active = SparkContext._active_spark_context
        if active is not None:
            active.stop()
        if proc is None or proc.stdin is None:
            return
        if sys.stderr.isatty():
            print("txn-audit: saving the JVM's class archive for later scans (once)", file=sys.stderr, flush=True)
        proc.stdin.close()
        code = proc.wait(timeout=CLASS_ARCHIVE_WAIT_S)
        if code == 0 and writing.is_file() and writing.stat().st_size > 0:
            os.replace(writing, final)
            kept = sorted(final.parent.glob("spark-*.jsa"), key=lambda path: path.stat().st_mtime, reverse=True)
            for older in kept[CLASS_ARCHIVES_KEPT:]:
                older.unlink(missing_ok=True)
    except Exception:  # noqa: BLE001 - the archive only saves time; the scan's outcome stands
        pass
    finally:
        writing.unlink(missing_ok=True)


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


#: A local JVM's heap starts at its full size (``-Xms``, from ``spark.driver.memory``) and its
#: class metadata may reach 256 MB before it first makes HotSpot collect. With HotSpot's defaults
#: (a heap of a 64th of the machine, grown as it fills; 21 MB of metadata) a scan paid for full
#: collections a batch job with a set memory budget need not: two or three in a scan of the
#: 2.2 MB ``healthy`` dump (one at the metadata threshold, the others to grow the old
#: generation), five at 1 GiB, seven or eight at 4 GiB, each of 0.1-0.4 s with every thread
#: stopped; now none, none and one. The collectors' pauses over ``healthy``: 0.4-0.5 s against
#: 0.6-0.9 s; in paired scans ``healthy`` ended about 0.5 s sooner, the three-broker
#: ``follower-killed`` about 1 s. Memory the heap does not use is reserved, not touched.
METASPACE_OPTION = "-XX:MetaspaceSize=256m"
#: a JVM memory size as Spark reads ``spark.driver.memory``: a number and a unit, MiB without one
_MEMORY_SIZE = re.compile(r"(\d+)\s*([kmgt]?)b?", re.IGNORECASE)


def _memory_size(memory: str) -> tuple[int, str] | None:
    """``memory`` (``spark.driver.memory``'s value) as a number and its unit (``k``, ``m``,
    ``g`` or ``t``; ``m`` when it names none), or None when it is no size the JVM reads."""
    size = _MEMORY_SIZE.fullmatch(memory.strip())
    if size is None:
        return None
    return int(size.group(1)), size.group(2).lower() or "m"


def local_heap_options(memory: str) -> str:
    """JVM options for a local JVM whose heap is ``memory`` (``spark.driver.memory``'s value):
    the heap starts at that size and class metadata first collects at 256 MB
    (``METASPACE_OPTION``). Only the metadata option when ``memory`` is no size the JVM reads."""
    size = _memory_size(memory)
    if size is None:
        return METASPACE_OPTION
    number, unit = size
    return f"-Xms{number}{unit} {METASPACE_OPTION}"


#: Spark's memory manager gives each sort, aggregation and hash map of a task its memory in pages
#: (``spark.buffer.pageSize``), and an aggregation's first-level hash map takes a whole page when
#: it starts. Spark's page is the execution memory over the cores over 16, rounded up to a power
#: of two, at most 64 MB: 64 MB on a local JVM of 6 GB and two cores, so each such task of a
#: scan's few hundred small queries allocated and zeroed 64 MB of heap for a few hundred rows
#: (a 1 GiB scan allocated 1.5 GB of these pages; Java Flight Recorder). A local session's page is
#: ``1 / LOCAL_HEAP_PAGES`` of its heap instead (2 MB for 6 GB), within Spark's 1-64 MB: a task
#: may hold 8192 pages (Spark's page table), twice the heap, and a record larger than a page gets
#: a page of its own. Realistic 1 GiB dump, full scans in four rounds taking turns
#: (git log -- docs/performance.md): 23.9-24.3 s against 24.1-25.0 s, the JVM's system CPU (the kernel
#: zeroing fresh heap) 1.6-1.8 s against 2.9-3.2 s; the 2.2 MB ``healthy`` dump unchanged.
LOCAL_HEAP_PAGES = 4096
_PAGE_BYTES = (1 << 20, 64 << 20)
_UNIT_SHIFT = {"k": 10, "m": 20, "g": 30, "t": 40}


def local_page_size(memory: str) -> str | None:
    """``spark.buffer.pageSize`` for a local JVM whose heap is ``memory`` (``spark.driver.memory``'s
    value): ``1 / LOCAL_HEAP_PAGES`` of it, rounded up to a power of two, within Spark's own
    bounds; None when ``memory`` is no size the JVM reads (Spark's default then)."""
    size = _memory_size(memory)
    if size is None:
        return None
    number, unit = size
    heap = number << _UNIT_SHIFT[unit]
    share = max(1, heap // LOCAL_HEAP_PAGES)
    low, high = _PAGE_BYTES
    page = min(high, max(low, 1 << (share - 1).bit_length()))
    return f"{page >> 20}m"


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
    shuffle_partitions: int = 8,
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
    is for.
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
        "spark.sql.execution.arrow.pyspark.enabled": "true",
        "spark.python.worker.reuse": "true",
        # PySpark otherwise makes about five extra calls into the JVM for every column function
        # called, to tag plans with the Python call site: a scan builds thousands of columns
        "spark.python.sql.dataFrameDebugging.enabled": "false",
        # rows go to Python workers in Arrow batches of at most maxRecordsPerBatch; with a byte
        # limit too (64 MiB by default in Spark 4.1) the whole batch's size is recomputed after
        # every row, a fifth of the ordered pass's time. Int.MaxValue switches that limit off.
        "spark.sql.execution.arrow.maxBytesPerBatch": str(2**31 - 1),
        # a generated class named without its codegen stage's id: the same code at another stage
        # id, in another query or another branch of one, is a hit in Spark's cache of compiled
        # classes instead of a new compile by Janino (338 against 367 classes over a scan of the
        # realistic 1 GiB dump, about 9.5 ms each)
        "spark.sql.codegen.useIdInClassName": "false",
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
        # the workers run this interpreter, which has PySpark installed: see spark_daemon
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
        atexit.register(_keep_class_archive, archive_writing)
    return session


@contextmanager
def sized_for(spark: SparkSession, input_bytes: int) -> Iterator[dict[str, str]]:
    """Within the block, ``spark`` runs its queries interpreted (``INTERPRETED_SQL``) when the
    input holds at most ``INTERPRETED_MAX_BYTES``; afterwards each setting is what it was (a
    notebook's session is left as it came). Yields the settings changed, none for a larger input.
    Results are the same either way: both are Spark's own implementations of every expression."""
    if input_bytes > INTERPRETED_MAX_BYTES:
        yield {}
        return
    conf = spark.conf
    before: dict[str, str | None] = {key: conf.get(key, None) for key in INTERPRETED_SQL}
    for key, value in INTERPRETED_SQL.items():
        conf.set(key, value)
    try:
        yield dict(INTERPRETED_SQL)
    finally:
        for key, previous in before.items():
            if previous is None:
                conf.unset(key)
            else:
                conf.set(key, previous)


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
