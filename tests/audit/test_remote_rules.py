"""The tiered storage's rules on hand-built rows (``detect.stability_rules.remote_only_findings``);
the corpus test checks them on real brokers' tiered topics."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest

from txn_audit.detect.offset_ranges import uncovered
from txn_audit.detect.stability_rules import REMOTE_COPIED, remote_only_findings
from txn_audit.schemas import REMOTE_SEGMENTS


@pytest.mark.parametrize(("segments", "missing"), [
    ([(0, 9), (10, 31)], []),
    ([(10, 31)], [(0, 9)]),
    ([(0, 9), (15, 31)], [(10, 14)]),
    ([(0, 9)], [(10, 31)]),
    ([], [(0, 31)]),
    ([(0, 40)], []),  # a segment that reaches past the range
    ([(5, 20), (0, 9)], [(21, 31)]),  # overlapping, in any order
    ([(40, 50)], [(0, 31)]),  # beyond the range
])
def test_coverage_names_the_offsets_no_segment_holds(segments: list[tuple[int, int]],
                                                     missing: list[tuple[int, int]]) -> None:
    assert uncovered(segments, 0, 31) == missing


def _stability(start: int) -> pa.Table:
    return pa.Table.from_pylist([{"topic": "ts", "partition": 0, "broker_id": 1, "log_dir": "d",
                                  "log_start_offset": start}])


def _local(first_local: int) -> pa.Table:
    rows = [{"topic": "ts", "partition": 0, "broker_id": 1, "log_dir": "d", "first_segment_base_offset": first_local},
            {"topic": "__remote_log_metadata", "partition": 0, "broker_id": 1, "log_dir": "d",
             "first_segment_base_offset": 0}]
    return pa.Table.from_pylist(rows)


def _remote(*segments: tuple[int, int, str]) -> pa.Table:
    rows: list[dict[str, Any]] = [
        {"broker_id": 1, "log_dir": "d", "topic": "ts", "partition": 0, "topic_id": "yDyD0suJRMiJGFUJKZFNtg",
         "segment_id": f"seg{n}", "start_offset": start, "end_offset": end, "state": state, "segment_broker_id": 1,
         "max_timestamp": 0, "event_timestamp": 0, "size_bytes": 100, "txn_index_empty": True}
        for n, (start, end, state) in enumerate(segments)]
    return pa.Table.from_pylist(rows, schema=REMOTE_SEGMENTS)


def test_the_remote_range_names_the_segments_that_hold_it() -> None:
    (found,) = remote_only_findings(_stability(0), _local(32),
                                    _remote((0, 15, REMOTE_COPIED), (16, 31, REMOTE_COPIED),
                                            (32, 40, "COPY_SEGMENT_STARTED")))
    assert (found["kind"], found["severity"], found["first_offset"], found["last_offset"]) == (
        "remote_only_range", "info", 0, 31)
    assert "lists 2 copied segments holding offsets 0-31" in found["evidence"]


def test_offsets_in_no_listed_segment_are_a_warning() -> None:
    """A segment whose copy never finished, or one the metadata never listed, leaves offsets that
    are neither local nor known to be remote."""
    info, gap = remote_only_findings(_stability(0), _local(32),
                                     _remote((0, 9, REMOTE_COPIED), (10, 19, "COPY_SEGMENT_STARTED"),
                                             (20, 31, REMOTE_COPIED)))
    assert info["kind"] == "remote_only_range"
    assert (gap["kind"], gap["severity"], gap["first_offset"], gap["last_offset"]) == (
        "remote_range_unlisted", "warning", 10, 19)
    assert "offsets 10-19 of ts-0" in gap["evidence"]


def test_without_the_partitions_metadata_nothing_is_guessed() -> None:
    """The metadata partition that lists a partition's segments may not be in the dump: the range
    is said, and that no segment of it is listed, but no offset is called lost."""
    (found,) = remote_only_findings(_stability(0), _local(32), None)
    assert found["kind"] == "remote_only_range"
    assert "lists no copied segment of them" in found["evidence"]


def test_a_dump_without_the_metadata_topic_is_not_tiered() -> None:
    local = _local(32).filter(pa.compute.equal(_local(32)["topic"], "ts"))
    assert remote_only_findings(_stability(0), local, _remote((0, 31, REMOTE_COPIED))) == []
