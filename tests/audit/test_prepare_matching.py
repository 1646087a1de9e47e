"""What follows each Prepare* on a partition, against a plain walk in time order.

Random producers write Prepare* records and markers on a few partitions, with shared
timestamps on purpose: a marker at the time of a Prepare* follows it, a second Prepare* at or
before a marker's time comes first, markers of one time are taken in offset order.
"""

from __future__ import annotations

import random
from typing import Any

import pytest

from tests.audit.builders import RawBuilder

pytestmark = pytest.mark.spark

T0 = 1_800_000_000_000
PARTITIONS = [("a", 0), ("a", 1), ("b", 0)]


def _random_log(seed: int) -> RawBuilder:
    rng = random.Random(seed)
    b = RawBuilder()
    for pid in range(1, 5):
        for _ in range(rng.randint(0, 4)):
            listed = rng.sample(PARTITIONS, rng.randint(1, len(PARTITIONS)))
            state = rng.choice(["PrepareCommit", "PrepareAbort"])
            b.coordinator(f"t{pid}", pid=pid, epoch=rng.randint(0, 2), state=state, partitions=listed,
                          ts=T0 + rng.randint(0, 20), start=T0)
        for _ in range(rng.randint(0, 8)):
            topic, partition = rng.choice(PARTITIONS)
            kind = rng.choice(["COMMIT", "ABORT", "UNKNOWN"])
            b.marker(topic, partition, pid=pid, epoch=rng.randint(0, 2), kind=kind, ts=T0 + rng.randint(0, 20))
    return b


def _expected(b: RawBuilder) -> dict[tuple[Any, ...], tuple[bool, str | None, int | None]]:
    """Per (transactional id, log offset, topic, partition): has_marker, next marker type and offset."""
    events: list[tuple[Any, ...]] = []  # (topic, partition, pid, ts, order, kind, row)
    for row in b.rows["txn_log"]:
        for tp in row["topic_partitions"]:
            events.append((tp["topic"], tp["partition"], row["producer_id"], row["txn_last_update_timestamp"],
                           (0, row["partition"], row["offset"]), "prepare", row))
    for row in b.rows["control_markers"]:
        events.append((row["topic"], row["partition"], row["producer_id"], row["timestamp"],
                       (1, row["offset"]), "marker", row))
    events.sort(key=lambda e: e[:5])
    expected = {}
    for i, (topic, partition, pid, _ts, _order, kind, row) in enumerate(events):
        if kind != "prepare":
            continue
        nxt = events[i + 1] if i + 1 < len(events) and events[i + 1][:3] == (topic, partition, pid) else None
        marker = nxt[6] if nxt is not None and nxt[5] == "marker" else None
        expected[(row["transactional_id"], row["offset"], topic, partition)] = (
            marker is not None and marker["producer_epoch"] == row["producer_epoch"],
            None if marker is None else marker["marker_type"],
            None if marker is None else marker["offset"],
        )
    return expected


@pytest.mark.parametrize("seed", range(6))
def test_each_prepare_is_matched_with_the_event_after_it(spark: Any, seed: int) -> None:
    from pyspark.sql import functions as F

    from txn_audit.detect import DetectOptions
    from txn_audit.detect.rules import _prepare_marker_matches

    b = _random_log(seed)
    raw = b.tables(spark)
    present = raw["batches"].groupBy("topic", "partition").agg(F.min("first_timestamp").alias("covers_from"))
    opts = DetectOptions(as_of_ms=T0 + 60_000, max_transaction_timeout_ms=60_000, late_tolerance_ms=1_000)
    got = {
        (r["transactional_id"], r["txn_log_offset"], r["topic"], r["partition"]):
            (r["has_marker"], r["next_marker_type"], r["next_marker_offset"])
        for r in _prepare_marker_matches(raw["txn_log"], raw["control_markers"], present, opts).collect()
    }
    assert got == _expected(b)
