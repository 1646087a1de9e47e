"""Session settings: the local JVM's memory and options, and the local workers' import path."""

from __future__ import annotations

import os
import zipfile
from typing import Any

import pytest

from txn_audit import spark as spark_module
from txn_audit.tuning import jvm as tuning_jvm
from txn_audit.tuning import sql as tuning_sql
from txn_audit.tuning import workers as tuning_workers


def _mib(setting: str) -> int:
    value = setting.strip().lower()
    units = {"m": 1, "g": 1024, "t": 1024 * 1024}
    return int(value[:-1]) * units[value[-1]]


def test_local_memory_is_a_share_of_the_machine(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TXN_AUDIT_DRIVER_MEMORY", raising=False)
    monkeypatch.setattr(tuning_jvm, "container_memory_limits", list)
    low, high = tuning_jvm.LOCAL_MEMORY_MIB
    pages = {"SC_PAGE_SIZE": 4096}
    for total_gib, expected in ((2, low), (24, 24 * 1024 // tuning_jvm.LOCAL_MEMORY_SHARE), (512, high)):
        pages["SC_PHYS_PAGES"] = total_gib * (1 << 30) // 4096
        monkeypatch.setattr(tuning_jvm.os, "sysconf", pages.__getitem__)
        assert _mib(tuning_jvm.local_driver_memory()) == expected
    monkeypatch.setenv("TXN_AUDIT_DRIVER_MEMORY", "3g")
    assert tuning_jvm.local_driver_memory() == "3g"


def _hotspot(spark: Any) -> Any:
    """The session JVM's HotSpotDiagnosticMXBean: the values of its -XX options."""
    jvm = spark.sparkContext._jvm
    bean_class = jvm.java.lang.Class.forName("com.sun.management.HotSpotDiagnosticMXBean")
    return jvm.java.lang.management.ManagementFactory.getPlatformMXBean(bean_class)


def test_the_local_jvm_gets_that_memory(spark: Any) -> None:
    """The setting reaches the JVM the session started (it only can before the JVM starts)."""
    granted = _mib(spark.conf.get("spark.driver.memory"))
    # the heap limit as HotSpot took it (Runtime.maxMemory leaves out a survivor space, whose size
    # depends on the collector)
    heap_mib = int(_hotspot(spark).getVMOption("MaxHeapSize").getValue()) // (1 << 20)
    assert granted == _mib(tuning_jvm.local_driver_memory())
    assert granted <= heap_mib <= granted + 64  # rounded up to the heap's alignment at most


def test_a_container_limit_caps_the_share(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    monkeypatch.delenv("TXN_AUDIT_DRIVER_MEMORY", raising=False)
    v2, v1 = tmp_path / "memory.max", tmp_path / "memory.limit_in_bytes"
    v2.write_text("max\n")  # cgroup v2 without a limit
    v1.write_text(f"{8 << 30}\n")
    monkeypatch.setattr(tuning_jvm, "CGROUP_MEMORY_LIMITS", (str(v2), str(v1), str(tmp_path / "absent")))
    assert tuning_jvm.container_memory_limits() == [8 << 30]
    pages = {"SC_PAGE_SIZE": 4096, "SC_PHYS_PAGES": (64 << 30) // 4096}
    monkeypatch.setattr(tuning_jvm.os, "sysconf", pages.__getitem__)
    assert _mib(tuning_jvm.local_driver_memory()) == 8 * 1024 // tuning_jvm.LOCAL_MEMORY_SHARE
    v1.write_text("9223372036854771712\n")  # cgroup v1's "no limit"
    assert _mib(tuning_jvm.local_driver_memory()) == 64 * 1024 // tuning_jvm.LOCAL_MEMORY_SHARE


def test_the_local_jvm_keeps_c2_for_hot_loops_and_collects_for_throughput(spark: Any) -> None:
    """The compiler thresholds and the collector reach the JVM the session started, as values
    HotSpot uses."""
    diagnostics = _hotspot(spark)
    options = tuning_jvm.LOCAL_JVM_OPTIONS.split()
    given = dict(option.removeprefix("-XX:").split("=") for option in options if "=" in option)
    given |= {option.removeprefix("-XX:+"): "true" for option in options if option.startswith("-XX:+")}
    given.pop("IgnoreUnrecognizedVMOptions")
    assert given.get("UseParallelGC") == "true" and "Tier4CompileThreshold" in given
    for name, value in given.items():
        assert diagnostics.getVMOption(name).getValue() == value


def test_the_local_heap_starts_whole_and_metadata_collects_late(spark: Any) -> None:
    """The heap's first size is its limit, so no full collection is needed to grow it, and class
    metadata first makes HotSpot collect at 256 MB: as the JVM the session started took them."""
    diagnostics = _hotspot(spark)

    def flag(name: str) -> int:
        return int(diagnostics.getVMOption(name).getValue())

    assert flag("InitialHeapSize") == flag("MaxHeapSize")
    assert flag("MetaspaceSize") == 256 << 20


def test_the_local_session_takes_pages_of_its_heap_share(spark: Any) -> None:
    """The session's memory manager hands out pages of ``local_page_size`` of its heap: what
    each sort, aggregation and hash map of a task takes at its first row."""
    memory_manager = spark.sparkContext._jsc.sc().env().memoryManager()
    page = tuning_jvm.local_page_size(spark.conf.get("spark.driver.memory"))
    assert page is not None
    assert memory_manager.pageSizeBytes() == int(page.removesuffix("m")) << 20
    assert spark.sparkContext.getConf().get("spark.buffer.pageSize") == page


def test_generated_code_at_another_stage_id_is_compiled_once(spark: Any) -> None:
    """The session names generated classes without their codegen stage's id, so one plan's two
    identical branches (two stages, two ids) compile the classes of one, where ids in the names
    compile them for each branch (Spark's count of Janino's compiles, ``CodegenMetrics``)."""
    import random

    compiled = spark._jvm.org.apache.spark.metrics.source.CodegenMetrics.METRIC_COMPILATION_TIME()
    assert spark.conf.get("spark.sql.codegen.useIdInClassName") == "false"

    def compiles() -> int:
        # an expression no earlier query compiled: Spark caches compiled classes by their code
        branch = spark.range(0, 100, 1, 1).selectExpr(f"id * 7 + {random.randrange(1 << 40)} AS x").where("x % 3 = 1")
        before = compiled.getCount()
        branch.union(branch).collect()
        return int(compiled.getCount() - before)

    without_ids = compiles()
    spark.conf.set("spark.sql.codegen.useIdInClassName", "true")
    try:
        with_ids = compiles()
    finally:
        spark.conf.set("spark.sql.codegen.useIdInClassName", "false")
    assert without_ids >= 1 and with_ids == 2 * without_ids, (with_ids, without_ids)


@pytest.mark.parametrize(("memory", "page"), [
    ("6026m", "2m"),  # this kind of machine's quarter of 24 GB: 1.5 MB a share, rounded up
    ("1024m", "1m"), ("1g", "1m"), ("512", "1m"),  # at least Spark's 1 MB
    ("8g", "2m"), ("16g", "4m"), ("16384M", "4m"),
    ("256g", "64m"), ("1t", "64m"),  # at most Spark's 64 MB
])
def test_the_page_is_a_power_of_two_share_of_the_heap(memory: str, page: str) -> None:
    assert tuning_jvm.local_page_size(memory) == page


def test_a_heap_size_the_jvm_does_not_read_leaves_spark_its_page() -> None:
    assert tuning_jvm.local_page_size("lots") is None
    assert tuning_jvm.local_page_size("2.5g") is None


def test_the_heap_options_read_spark_memory_sizes() -> None:
    """Sizes as ``spark.driver.memory`` takes them become sizes the JVM takes; anything else
    leaves the heap's first size to HotSpot."""
    metaspace = tuning_jvm.METASPACE_OPTION
    assert tuning_jvm.local_heap_options("6026m") == f"-Xms6026m {metaspace}"
    assert tuning_jvm.local_heap_options("3G") == f"-Xms3g {metaspace}"
    assert tuning_jvm.local_heap_options("2gb") == f"-Xms2g {metaspace}"
    assert tuning_jvm.local_heap_options("4096") == f"-Xms4096m {metaspace}"  # Spark reads MiB
    assert tuning_jvm.local_heap_options("lots") == metaspace


def test_archives_whose_modules_are_installed_are_redundant(tmp_path: Any) -> None:
    from txn_audit.tuning.daemon import redundant_archives

    installed = tmp_path / "site"
    (installed / "shipped").mkdir(parents=True)
    (installed / "shipped" / "__init__.py").write_text("")
    both = tmp_path / "both.zip"
    with zipfile.ZipFile(both, "w") as archive:
        archive.writestr("shipped/__init__.py", "")
        archive.writestr("shipped/part.py", "")
    only = tmp_path / "only.zip"
    with zipfile.ZipFile(only, "w") as archive:
        archive.writestr("shipped/__init__.py", "")
        archive.writestr("elsewhere_unknown.py", "")
    jar = tmp_path / "classes.jar"
    with zipfile.ZipFile(jar, "w") as archive:
        archive.writestr("org/apache/Thing.class", b"\xca\xfe")
        archive.writestr("META-INF/MANIFEST.MF", "")
    broken = tmp_path / "broken.zip"
    broken.write_bytes(b"not a zip")
    path = [str(both), str(only), str(jar), str(broken), str(installed)]
    assert redundant_archives(path) == [str(both), str(jar)]
    # without the installed copy, the archive is the only source of its package and stays
    assert redundant_archives([str(both), str(jar)]) == [str(jar)]


def test_the_local_workers_import_nothing_from_archives(spark: Any) -> None:
    """Spark puts pyspark.zip, the py4j zip and its core jar first on the workers' path; the local
    sessions' daemon takes them off (PySpark is installed), so no task re-reads them."""
    import pyspark

    def seen(_: object) -> tuple[list[str], list[str], str]:
        import importlib
        import sys as worker_sys
        import zipimport

        import pyspark as worker_pyspark

        importlib.invalidate_caches()
        archives = [entry for entry in worker_sys.path if entry.endswith((".zip", ".jar"))
                    and os.path.isfile(entry)]
        importers = [str(key) for key, value in worker_sys.path_importer_cache.items()
                     if isinstance(value, zipimport.zipimporter)]
        return archives, importers, str(worker_pyspark.__file__)

    archives, importers, module = spark.sparkContext.parallelize([0], 1).map(seen).collect()[0]
    assert spark.sparkContext.getConf().get("spark.python.daemon.module") == tuning_workers.LOCAL_DAEMON_MODULE
    assert tuning_workers.LOCAL_DAEMON_MODULE == "txn_audit.tuning.daemon"  # the module Spark runs by name
    assert (archives, importers) == ([], [])
    assert module == pyspark.__file__


def test_a_task_run_through_the_wrapper_leaves_its_survivors_frozen_and_its_cycles_collected() -> None:
    """After a task, the worker's objects are frozen (later collections skip them); the garbage
    cycles the task made are collected first, not frozen; the task's result and errors pass."""
    import gc

    from txn_audit.tuning.daemon import frozen_after_each_task

    freed: list[bool] = []

    class Cycle:
        def __init__(self) -> None:
            self.me = self

        def __del__(self) -> None:
            freed.append(True)

    def task(value: int) -> int:
        Cycle()  # unreachable at once, but only the cyclic collector can free it
        if value < 0:
            raise ValueError(value)
        return value * 2

    gc.unfreeze()
    try:
        assert gc.get_freeze_count() == 0
        assert frozen_after_each_task(task)(21) == 42
        assert freed == [True]  # collected before the freeze, not kept for ever
        assert gc.get_freeze_count() > 0
        gc.unfreeze()
        with pytest.raises(ValueError):
            frozen_after_each_task(task)(-1)
        assert freed == [True, True] and gc.get_freeze_count() > 0  # after a failed task too
    finally:
        gc.unfreeze()


def test_the_local_workers_freeze_their_objects_after_each_task(spark: Any) -> None:
    """A local session's reused workers run their tasks through ``frozen_after_each_task``: a
    worker's second task finds the objects of its first frozen."""

    def frozen(_: object) -> int:
        import gc

        return gc.get_freeze_count()

    context = spark.sparkContext
    context.parallelize(range(4), 4).map(frozen).collect()  # every worker has run a task
    assert max(context.parallelize(range(4), 4).map(frozen).collect()) > 0


def test_processes_started_in_the_block_lose_the_jvms_notices_only(capfd: pytest.CaptureFixture[str]) -> None:
    """What a child (the session's JVM) writes on stderr reaches ours, less the JVM's notices; our
    own stderr is ours again after the block."""
    import subprocess
    import sys

    script = ("import sys, time; sys.stderr.write('WARNING: Using incubator modules: jdk.incubator.vector\\n'); "
              "sys.stderr.flush(); time.sleep(0.3); sys.stderr.write('Exception in thread main\\nWARNING: x\\ntail')")
    with spark_module.jvm_notices_filtered():
        child = subprocess.Popen([sys.executable, "-c", script])
    sys.stderr.write("after the block\n")
    sys.stderr.flush()
    assert child.wait(60) == 0
    import time

    deadline = time.monotonic() + 10
    err = ""
    while "tail" not in err and time.monotonic() < deadline:
        time.sleep(0.1)
        err += capfd.readouterr().err
    assert "Exception in thread main\n" in err and "tail" in err and "after the block\n" in err
    assert "WARNING:" not in err


# -- settings by input size ----------------------------------------------------------------


def test_the_jvm_options_follow_the_input_size() -> None:
    small, limit = 2 << 20, tuning_jvm.QUICK_JIT_MAX_BYTES
    assert tuning_jvm.local_jvm_options(small) == tuning_jvm.QUICK_JIT_OPTIONS
    assert tuning_jvm.local_jvm_options(limit) == tuning_jvm.QUICK_JIT_OPTIONS
    assert tuning_jvm.local_jvm_options(limit + 1) == tuning_jvm.LOCAL_JVM_OPTIONS
    assert tuning_jvm.local_jvm_options(None) == tuning_jvm.LOCAL_JVM_OPTIONS


@pytest.mark.spark  # starts a JVM of its own
def test_hotspot_takes_the_quick_compilers_options_as_given() -> None:
    """Every option of ``QUICK_JIT_OPTIONS`` is one the java Spark starts knows, with the value
    given: ``-XX:+IgnoreUnrecognizedVMOptions`` would hide a misspelt one. C1 alone needs room
    for its code (the default reserve with C1 alone fills on a GiB and stops the compiler)."""
    import shutil
    import subprocess

    java = os.path.join(os.environ["JAVA_HOME"], "bin", "java") if os.environ.get("JAVA_HOME") else shutil.which("java")
    assert java, "java is needed"
    options = [o for o in tuning_jvm.QUICK_JIT_OPTIONS.split() if o != "-XX:+IgnoreUnrecognizedVMOptions"]
    out = subprocess.run([java, *options, "-XX:+PrintFlagsFinal", "-version"], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    flags = {parts[1]: parts[3] for line in out.stdout.splitlines() if len(parts := line.split()) >= 4}
    assert flags["TieredStopAtLevel"] == "1"
    assert int(flags["ReservedCodeCacheSize"]) == 240 << 20
    assert flags["UseParallelGC"] == "true"


def test_a_small_input_runs_interpreted_and_the_session_is_left_as_it_was(spark: Any) -> None:
    keys = list(tuning_sql.INTERPRETED_SQL)
    before = {key: spark.conf.get(key, None) for key in keys}

    def plan() -> str:
        frame = spark.range(100).selectExpr("id * 3 AS x").where("x % 2 = 0")
        text: str = frame._jdf.queryExecution().executedPlan().toString()
        assert frame.count() == 50
        return text

    with tuning_sql.sized_for(spark, tuning_sql.INTERPRETED_MAX_BYTES) as changed:
        assert changed == tuning_sql.INTERPRETED_SQL
        assert {key: spark.conf.get(key) for key in keys} == tuning_sql.INTERPRETED_SQL
        assert "*(" not in plan()  # no stage of generated code ("*(1) Project ...")
    assert {key: spark.conf.get(key, None) for key in keys} == before
    assert "*(" in plan()
    with tuning_sql.sized_for(spark, tuning_sql.INTERPRETED_MAX_BYTES + 1) as changed:
        assert changed == {}
        assert {key: spark.conf.get(key, None) for key in keys} == before


def test_side_by_side_keeps_the_order_the_job_group_and_the_first_error(spark: Any) -> None:
    import threading

    tracker = spark.sparkContext.statusTracker()
    spark.sparkContext.setJobGroup("txn-audit-test-group", "side by side")
    try:
        threads: set[str] = set()

        def count(n: int) -> int:
            threads.add(threading.current_thread().name)
            return int(spark.range(n).count())

        assert spark_module.side_by_side(spark, [lambda n=n: count(n) for n in (5, 1, 7, 3)]) == [5, 1, 7, 3]
        assert len(threads) >= 2  # on threads of their own
        assert len(tracker.getJobIdsForGroup("txn-audit-test-group")) >= 4  # each job in the caller's group

        def broken() -> int:
            raise ValueError("rule broke")

        with pytest.raises(ValueError, match="rule broke"):
            spark_module.side_by_side(spark, [lambda: count(2), broken, lambda: count(3)])
    finally:
        spark.sparkContext.setLocalProperty("spark.jobGroup.id", None)  # type: ignore[arg-type]


def test_side_by_side_tasks_each_have_their_own_local_properties(spark: Any) -> None:
    """Each task starts from a copy of the caller's local properties, its own: what one sets
    (as each query sets its execution's ids) the others do not see."""
    import threading

    context = spark.sparkContext
    context.setLocalProperty("txn-audit.test.caller", "caller")
    try:
        both_set = threading.Barrier(2, timeout=60)

        def task(name: str) -> tuple[str | None, str | None]:
            context.setLocalProperty("txn-audit.test.task", name)
            both_set.wait()  # each task has set its value before either reads it back
            return context.getLocalProperty("txn-audit.test.task"), context.getLocalProperty("txn-audit.test.caller")

        assert spark_module.side_by_side(spark, [lambda: task("a"), lambda: task("b")], threads=2) == [
            ("a", "caller"), ("b", "caller")]
        assert context.getLocalProperty("txn-audit.test.task") is None  # nor does the caller
    finally:
        context.setLocalProperty("txn-audit.test.caller", None)  # type: ignore[arg-type]


# -- the JVM's class archive ------------------------------------------------------------------


@pytest.mark.spark  # starts a JVM of its own
def test_the_class_archive_is_named_by_the_java_and_the_jars(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    name = tuning_jvm.class_archive_name("/usr/lib/jvm/a/bin/java\nopenjdk version \"17.0.15\"")
    assert name.startswith("spark-") and name.endswith(".jsa")
    assert name == tuning_jvm.class_archive_name("/usr/lib/jvm/a/bin/java\nopenjdk version \"17.0.15\"")
    assert name != tuning_jvm.class_archive_name("/usr/lib/jvm/a/bin/java\nopenjdk version \"17.0.16\"")
    monkeypatch.setenv(tuning_jvm.CLASS_ARCHIVE_ENV, "off")
    assert tuning_jvm.class_archive_dir() is None
    java = spark_module.java_version_text()
    assert tuning_jvm.class_archive_options(java) == ("", None)
    monkeypatch.setenv(tuning_jvm.CLASS_ARCHIVE_ENV, str(tmp_path / "jvm"))
    assert tuning_jvm.class_archive_options(None) == ("", None)  # no java found
    options, writing = tuning_jvm.class_archive_options(java)
    assert writing is not None and writing.parent == tmp_path / "jvm" and not writing.exists()
    assert f"-XX:ArchiveClassesAtExit={writing}" in options and "-Xlog:cds=off" in options
    final = writing.with_name(writing.name.split(".jsa.")[0] + ".jsa")
    final.write_bytes(b"archive")
    options, writing = tuning_jvm.class_archive_options(java)
    assert writing is None and f"-XX:SharedArchiveFile={final}" in options


@pytest.mark.spark  # starts a JVM of its own
def test_java_version_text_leaves_out_the_options_notice(monkeypatch: pytest.MonkeyPatch) -> None:
    plain = spark_module.java_version_text()
    monkeypatch.setenv("JAVA_TOOL_OPTIONS", "-Dtxn.audit.test=1")
    assert plain is not None and spark_module.java_version_text() == plain


_ARCHIVE_RUN = """
import json, sys
from txn_audit.spark import build_session
spark = build_session("txn-audit-archive-test", master="local[1]", input_bytes=1)
args = list(spark.sparkContext._jvm.java.lang.management.ManagementFactory.getRuntimeMXBean().getInputArguments())
print(json.dumps({"count": spark.range(7).count(), "args": args}))
"""


@pytest.mark.spark  # starts a JVM of its own
def test_a_first_session_writes_the_class_archive_and_the_next_one_starts_with_it(tmp_path: Any) -> None:
    """The archive is written once, at the first session's exit, and moved into place whole; the
    next session maps it; neither prints anything about it on stdout, where JSON goes."""
    import json
    import subprocess
    import sys

    env = {**os.environ, tuning_jvm.CLASS_ARCHIVE_ENV: str(tmp_path / "jvm")}
    runs = []
    for _ in range(2):
        done = subprocess.run([sys.executable, "-c", _ARCHIVE_RUN], capture_output=True, text=True, env=env,
                              timeout=600)
        assert done.returncode == 0, done.stderr
        runs.append(json.loads(done.stdout))  # nothing else on stdout
    archives = sorted(p.name for p in (tmp_path / "jvm").iterdir())
    assert len(archives) == 1 and archives[0].endswith(".jsa") and (tmp_path / "jvm" / archives[0]).stat().st_size > 1 << 20
    first, second = runs
    assert first["count"] == second["count"] == 7
    assert any(a.startswith("-XX:ArchiveClassesAtExit=") for a in first["args"])
    assert f"-XX:SharedArchiveFile={tmp_path / 'jvm' / archives[0]}" in second["args"]
    assert "-XX:TieredStopAtLevel=1" in second["args"]  # the small input's compiler
