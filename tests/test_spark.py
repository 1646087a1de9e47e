"""Session settings: the local JVM's memory and options, and the local workers' import path."""

from __future__ import annotations

import os
import zipfile
from typing import Any

import pytest

from txn_audit import spark as spark_module


def _mib(setting: str) -> int:
    value = setting.strip().lower()
    units = {"m": 1, "g": 1024, "t": 1024 * 1024}
    return int(value[:-1]) * units[value[-1]]


def test_local_memory_is_a_share_of_the_machine(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TXN_AUDIT_DRIVER_MEMORY", raising=False)
    monkeypatch.setattr(spark_module, "container_memory_limits", list)
    low, high = spark_module.LOCAL_MEMORY_MIB
    pages = {"SC_PAGE_SIZE": 4096}
    for total_gib, expected in ((2, low), (24, 24 * 1024 // spark_module.LOCAL_MEMORY_SHARE), (512, high)):
        pages["SC_PHYS_PAGES"] = total_gib * (1 << 30) // 4096
        monkeypatch.setattr(spark_module.os, "sysconf", pages.__getitem__)
        assert _mib(spark_module.local_driver_memory()) == expected
    monkeypatch.setenv("TXN_AUDIT_DRIVER_MEMORY", "3g")
    assert spark_module.local_driver_memory() == "3g"


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
    assert granted == _mib(spark_module.local_driver_memory())
    assert granted <= heap_mib <= granted + 64  # rounded up to the heap's alignment at most


def test_a_container_limit_caps_the_share(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    monkeypatch.delenv("TXN_AUDIT_DRIVER_MEMORY", raising=False)
    v2, v1 = tmp_path / "memory.max", tmp_path / "memory.limit_in_bytes"
    v2.write_text("max\n")  # cgroup v2 without a limit
    v1.write_text(f"{8 << 30}\n")
    monkeypatch.setattr(spark_module, "CGROUP_MEMORY_LIMITS", (str(v2), str(v1), str(tmp_path / "absent")))
    assert spark_module.container_memory_limits() == [8 << 30]
    pages = {"SC_PAGE_SIZE": 4096, "SC_PHYS_PAGES": (64 << 30) // 4096}
    monkeypatch.setattr(spark_module.os, "sysconf", pages.__getitem__)
    assert _mib(spark_module.local_driver_memory()) == 8 * 1024 // spark_module.LOCAL_MEMORY_SHARE
    v1.write_text("9223372036854771712\n")  # cgroup v1's "no limit"
    assert _mib(spark_module.local_driver_memory()) == 64 * 1024 // spark_module.LOCAL_MEMORY_SHARE


def test_the_local_jvm_keeps_c2_for_hot_loops_and_collects_for_throughput(spark: Any) -> None:
    """The compiler thresholds and the collector reach the JVM the session started, as values
    HotSpot uses."""
    diagnostics = _hotspot(spark)
    options = spark_module.LOCAL_JVM_OPTIONS.split()
    given = dict(option.removeprefix("-XX:").split("=") for option in options if "=" in option)
    given |= {option.removeprefix("-XX:+"): "true" for option in options if option.startswith("-XX:+")}
    given.pop("IgnoreUnrecognizedVMOptions")
    assert given.get("UseParallelGC") == "true" and "Tier4CompileThreshold" in given
    for name, value in given.items():
        assert diagnostics.getVMOption(name).getValue() == value


def test_archives_whose_modules_are_installed_are_redundant(tmp_path: Any) -> None:
    from txn_audit.spark_daemon import redundant_archives

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
    assert spark.sparkContext.getConf().get("spark.python.daemon.module") == "txn_audit.spark_daemon"
    assert (archives, importers) == ([], [])
    assert module == pyspark.__file__


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
