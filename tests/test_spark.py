"""Session settings that decide whether a multi-GiB dump fits: the local JVM's memory."""

from __future__ import annotations

from typing import Any

import pytest

from txn_audit import spark as spark_module


def _mib(setting: str) -> int:
    value = setting.strip().lower()
    units = {"m": 1, "g": 1024, "t": 1024 * 1024}
    return int(value[:-1]) * units[value[-1]]


def test_local_memory_is_a_share_of_the_machine(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TXN_AUDIT_DRIVER_MEMORY", raising=False)
    low, high = spark_module.LOCAL_MEMORY_MIB
    pages = {"SC_PAGE_SIZE": 4096}
    for total_gib, expected in ((2, low), (24, 24 * 1024 // spark_module.LOCAL_MEMORY_SHARE), (512, high)):
        pages["SC_PHYS_PAGES"] = total_gib * (1 << 30) // 4096
        monkeypatch.setattr(spark_module.os, "sysconf", pages.__getitem__)
        assert _mib(spark_module.local_driver_memory()) == expected
    monkeypatch.setenv("TXN_AUDIT_DRIVER_MEMORY", "3g")
    assert spark_module.local_driver_memory() == "3g"


def test_the_local_jvm_gets_that_memory(spark: Any) -> None:
    """The setting reaches the JVM the session started (it only can before the JVM starts)."""
    granted = _mib(spark.conf.get("spark.driver.memory"))
    heap_mib = spark.sparkContext._jvm.java.lang.Runtime.getRuntime().maxMemory() // (1 << 20)
    assert granted == _mib(spark_module.local_driver_memory())
    assert heap_mib >= 0.9 * granted
