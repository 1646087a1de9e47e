"""The decode issues' counts and preview, read on the driver with pyarrow, are those Spark gives."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from txn_audit.schemas import DECODE_ISSUES

pytestmark = pytest.mark.spark


def _issues(seed: int, count: int) -> list[dict[str, Any]]:
    """``count`` issues of every severity over four files, each file's first an error without a
    position (it goes first of its file's), every sort key distinct (Spark's order of equal keys
    is not defined)."""
    rng = random.Random(seed)
    files = [f"b{n % 3}/t-{n}/{n:020d}.log" for n in range(4)]
    unplaced = [(file, None) for file in files][:count]
    placed = rng.sample([(file, position) for file in files for position in range(0, 4000, 61)],
                        count - len(unplaced))
    return [{"broker_id": 0, "log_dir": "d", "topic": "t", "partition": 0, "file": file, "position": position,
             "kind": "truncated_tail",
             "severity": "error" if position is None else rng.choice(["error", "warning", "info", "info"]),
             "detail": f"issue {n}"} for n, (file, position) in enumerate(rng.sample(unplaced + placed, count))]


@pytest.mark.parametrize("count", [0, 7, 150])
def test_issue_counts_and_preview_match_spark(spark: Any, tmp_path: Path, count: int) -> None:
    from pyspark.sql import functions as F

    from txn_audit.stages import ISSUES_PREVIEW, issue_preview
    from txn_audit.ingest.job import _issue_counts

    rows = _issues(count, count)
    table = tmp_path / "decode_issues"
    table.mkdir()
    # in two files, as workers and the driver write them
    half = len(rows) // 2
    for part, chunk in enumerate([rows[:half], rows[half:]]):
        pq.write_table(pa.Table.from_pylist(chunk, schema=DECODE_ISSUES), str(table / f"part-{part}.parquet"))

    frame = spark.read.parquet(str(table))
    expected_counts = {r["severity"]: r["count"] for r in frame.groupBy("severity").count().collect()}
    rank = F.when(F.col("severity") == "error", 0).when(F.col("severity") == "warning", 1).otherwise(2)
    expected_preview = [r.asDict() for r in frame.orderBy(rank, "file", "position").limit(ISSUES_PREVIEW).collect()]

    assert _issue_counts(tmp_path) == expected_counts
    assert sum(expected_counts.values()) == count
    preview = issue_preview(tmp_path)
    assert preview == expected_preview
    assert len(preview) == min(count, ISSUES_PREVIEW)
    if count > ISSUES_PREVIEW:
        assert any(row["position"] is None for row in preview)
