"""The words of findings computed on the driver (``detect.words``) read as those of the Spark
rules (``detect.rules``): the same duration and time for the same milliseconds, Spark's
formatter (Java's) being the judge."""

from __future__ import annotations

from typing import Any

import pytest

from txn_audit.detect.words import DURATION_STEPS, duration_text, time_text

pytestmark = pytest.mark.spark

#: each step's edges, values whose one decimal is a tie in their shortest form (rounded half up
#: by Java's formatter, to even by Python's), and a spread of others
MILLISECONDS = sorted({
    0, 1, 49, 50, 51, 149, 150, 250, 1_250, 1_350, 2_450, 119_949, 119_950, 119_999, 120_000, 123_000, 3_000,
    *[edge + d for edge, _size, _unit in DURATION_STEPS if edge is not None for d in (-1, 0, 1)],
    7_203_000, 9_000_000, 9_180_000, 172_799_999, 172_800_000, 181_440_000, 1_000_000_000, 10**12 + 7,
    *[n * 7_919 + n * n * 104_729 for n in range(60)],
})
TIMES = [0, 1, 999, 1_000, 1_800_000_000_000, 1_800_000_000_123, 1_795_377_686_713, 4_102_444_800_001]


def test_durations_read_as_the_spark_rules_write_them(spark: Any) -> None:
    from pyspark.sql import functions as F

    from txn_audit.detect.rules import duration

    frame = spark.createDataFrame([(ms,) for ms in MILLISECONDS], "ms long")
    written = {row["ms"]: row["text"] for row in frame.select("ms", duration(F.col("ms")).alias("text")).collect()}
    assert {ms: duration_text(ms) for ms in MILLISECONDS} == written
    assert (duration_text(1_250), duration_text(119_999), duration_text(120_000)) == ("1.3 s", "120.0 s", "2.0 min")


def test_times_read_as_the_spark_rules_write_them(spark: Any) -> None:
    from pyspark.sql import functions as F

    from txn_audit.detect.rules import ts

    frame = spark.createDataFrame([(ms,) for ms in TIMES], "ms long")
    written = {row["ms"]: row["text"] for row in frame.select("ms", ts(F.col("ms")).alias("text")).collect()}
    assert {ms: time_text(ms) for ms in TIMES} == written
    assert time_text(1_795_377_686_713) == "2026-11-22 20:01:26.713 UTC"


def test_commands_read_as_the_spark_rules_write_them(spark: Any) -> None:
    """The abort commands, filled on the driver (``words.formatted``) and by Spark's
    ``format_string``, read the same, an unknown value included (Java writes ``null``)."""
    from pyspark.sql import functions as F

    from txn_audit.detect.words import ABORT_COMMAND, ABORT_COMMAND_PRE_3_0, formatted

    values = [("orders", 3, 17, 2, 5), ("t.x_y", 0, 0, None, 0), ("a-b", 12, 1 << 40, 32_767, None)]
    frame = spark.createDataFrame(values, "topic string, partition int, pid long, epoch int, coord int")
    written = [(row[0], row[1]) for row in frame.select(
        F.format_string(ABORT_COMMAND, "topic", "partition", "pid"),
        F.format_string(ABORT_COMMAND_PRE_3_0, "topic", "partition", "pid", "epoch", "coord")).collect()]
    assert [(formatted(ABORT_COMMAND, *v[:3]), formatted(ABORT_COMMAND_PRE_3_0, *v)) for v in values] == written
    assert written[1][1].endswith("--producer-epoch null --coordinator-epoch 0")
