"""Shared fixtures: one SparkSession for the whole run (local[2], UI off, few shuffle partitions)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from hypothesis import settings

# property tests check what the code computes, not how fast: on a shared 2-core machine under the
# whole suite's load an example runs past Hypothesis's default deadline (200 ms) now and then,
# which fails a correct test; speed is measured by the benchmarks
settings.register_profile("txn-audit", deadline=None)
settings.load_profile("txn-audit")

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from tools.stores.servers import HdfsServer, S3ProxyServer
    from txn_audit.api import ScanResult

#: fixtures that start a storage server: a test that uses one is of the live tier
STORE_FIXTURES = ("s3proxy", "minihdfs")
#: what the storage servers of this run said when they started, shown in the run's summary
STORE_STARTS: list[str] = []


def fresh_python(script: str) -> list[str]:
    """The words ``script`` prints when run in a fresh interpreter, which imports modules as a
    new process does; its error output fails the test if it fails."""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return done.stdout.split()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The tiers (``docs/testing.md``): a test that asks for the SparkSession, itself or through a
    fixture, is of the Spark tier; corpus and live tests start Spark too. Unmarked tests are the
    fast tier, which ``make test-fast`` runs with no Java to be found. A test that uses a storage
    server (``STORE_FIXTURES``) is of the live tier."""
    for item in items:
        if any(name in getattr(item, "fixturenames", ()) for name in STORE_FIXTURES):
            item.add_marker(pytest.mark.live)
        if ("spark" in getattr(item, "fixturenames", ()) or item.get_closest_marker("corpus") is not None
                or item.get_closest_marker("live") is not None):
            item.add_marker(pytest.mark.spark)


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    from txn_audit.spark import build_session

    session = build_session("txn-audit-tests", master="local[2]", shuffle_partitions=2)
    yield session
    session.stop()


@dataclass(frozen=True)
class SampleScan:
    """The sample dump, written by the generator, and one scan of it shared by the whole run."""

    dump: Path
    manifest: dict[str, Any]
    result: ScanResult
    out: Path


@pytest.fixture(scope="session")
def sample_scan(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> SampleScan:
    from txn_audit import api
    from txn_audit.sample import write_sample

    dump = tmp_path_factory.mktemp("sample") / "dump"
    manifest = write_sample(dump, seed=7)
    out = tmp_path_factory.mktemp("sample-scan")
    return SampleScan(dump, manifest, api.scan(dump, out, spark=spark, options=api.AuditOptions(progress=False)), out)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    for line in STORE_STARTS:
        terminalreporter.write_line(line)


@pytest.fixture(scope="session")
def s3proxy(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3ProxyServer]:
    """S3Proxy (``tools/stores``) on a free loopback port, over an empty folder, for the whole run."""
    from tools.stores.servers import S3ProxyServer

    with S3ProxyServer(tmp_path_factory.mktemp("s3proxy")) as server:
        STORE_STARTS.append(f"S3Proxy on {server.endpoint}: serving {server.started_s:.1f} s after launch")
        yield server


@pytest.fixture(scope="session")
def minihdfs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HdfsServer]:
    """A NameNode and a DataNode (``tools/stores``) on free loopback ports, empty, for the whole run."""
    from tools.stores.servers import HdfsServer

    with HdfsServer(tmp_path_factory.mktemp("minihdfs")) as server:
        STORE_STARTS.append(f"HDFS NameNode on 127.0.0.1, RPC port {server.rpc_port}, HTTP (WebHDFS) port "
                            f"{server.http_port}: serving {server.started_s:.1f} s after launch")
        yield server
