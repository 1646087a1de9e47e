"""Shared fixtures: one SparkSession for the whole run (local[2], UI off, few shuffle partitions)."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    from txn_audit.spark import build_session

    session = build_session("txn-audit-tests", master="local[2]", shuffle_partitions=2)
    yield session
    session.stop()
