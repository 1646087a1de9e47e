"""The local JVM of the sessions ``spark.build_session`` starts: its memory (the heap, its first
size, class metadata, Spark's memory pages), its compilers and collector by input size, and the
class archive it maps. Each setting, with the measurement behind it, is listed in
``txn_audit.tuning``'s docstring. None of it applies under spark-submit, whose JVM already runs.
"""

from __future__ import annotations

import hashlib
import os
import re
import sys
import time
from pathlib import Path

#: a local session's JVM (driver and executor in one) gets this share of the machine's memory
LOCAL_MEMORY_SHARE = 4
LOCAL_MEMORY_MIB = (1024, 16 * 1024)  # at least Spark's default, at most this

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
    """The archive's file name for this java (``spark.java_version_text``) and the jars of the
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
    """JVM options that use the class archive of this java (``spark.java_version_text``'s), or that have
    the JVM write it at its exit; and, in that case, the path it writes (to be moved into place by
    ``keep_class_archive``). No options when archives are off, Java is not found or the folder
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


def keep_class_archive(writing: Path) -> None:
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

