"""Slice tasks: a large segment decoded by several Spark tasks, joined into the whole-file decode.

``split_large_logs`` cuts each large v2 data ``.log`` into byte ranges at batch starts taken
from its ``.index`` (``offset_index.slice_starts``), one ``FileTask`` per range. Each slice is
decoded on its own and reports one ``slice_summary`` row (where its walk stopped, its first
base offset and last offset). ``plan_stitch`` turns those summaries into what the driver must
do so that the tables equal the whole-file decode, the same rules as ``fast_headers.stitch``:

* the offset-order check across each boundary (an issue row when it fails);
* a slice whose walk stopped before its end (the boundary was no batch start, or the framing
  was lost) is decoded again from that point to the end of the file, and the rows of the
  slices after it are dropped.

Only the summaries (one small row per slice) reach the driver, never the decoded rows.
"""

from __future__ import annotations

import mmap
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from txn_audit.formats.fast_headers import order_detail
from txn_audit.formats.model import IssueKind, Severity
from txn_audit.formats.offset_index import decode_offset_index, slice_starts
from txn_audit.formats.records import MAGIC_OFFSET, MAGIC_VALUE_V2
from txn_audit.ingest.tasks import FileTask
from txn_audit.ingest.worker import CONSUMER_OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC

DEFAULT_SLICE_BYTES = 64 << 20


@dataclass(frozen=True, slots=True)
class SliceSummary:
    """A ``slice_summary`` row (``schemas.SLICE_SUMMARY``)."""

    task: int
    start: int
    stop: int
    rows: int
    first_base_offset: int | None
    first_position: int | None
    last_offset: int | None


@dataclass
class StitchPlan:
    """What the driver does after the slices are decoded."""

    dropped: set[int] = field(default_factory=set)  # ``task`` tags whose rows are not kept
    redo: list[FileTask] = field(default_factory=list)  # decoded again, to the end of the file
    issues: list[dict[str, Any]] = field(default_factory=list)  # ``decode_issues`` rows


def _slice_starts_of(task: FileTask, slice_bytes: int) -> list[int]:
    """Slice starts for one ``.log`` (``[0]`` when it is not cut): v2 data segments only."""
    if (
        task.kind != "log"
        or task.topic in (TRANSACTION_STATE_TOPIC, CONSUMER_OFFSETS_TOPIC)
        or task.size_bytes < 2 * slice_bytes
    ):
        return [0]
    index_path = Path(task.path).with_suffix(".index")
    try:
        entries = decode_offset_index(index_path.read_bytes(), base_offset=task.base_offset)[0] \
            if index_path.is_file() else []
        with open(task.path, "rb") as handle, mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as log:
            if len(log) <= MAGIC_OFFSET or log[MAGIC_OFFSET] != MAGIC_VALUE_V2:
                return [0]
            return slice_starts(log, entries, slice_bytes=slice_bytes)
    except (OSError, ValueError):
        return [0]  # the worker decodes it whole and reports what is wrong with it


def split_large_logs(tasks: Iterable[FileTask], slice_bytes: int = DEFAULT_SLICE_BYTES) -> list[FileTask]:
    """``tasks`` with every large v2 data ``.log`` replaced by its slices (tagged 0, 1, ...)."""
    if slice_bytes <= 0:
        raise ValueError(f"slice_bytes must be positive, not {slice_bytes}")
    out: list[FileTask] = []
    tag = 0
    for task in tasks:
        starts = _slice_starts_of(task, slice_bytes)
        if len(starts) == 1:
            out.append(task)
            continue
        ends: list[int | None] = [*starts[1:], None]
        for start, end in zip(starts, ends, strict=True):
            size = (task.size_bytes if end is None else end) - start
            out.append(replace(task, start=start, end=end, task=tag, size_bytes=size))
            tag += 1
    return out


def plan_stitch(tasks: Iterable[FileTask], summaries: Mapping[int, SliceSummary]) -> StitchPlan:
    """Boundary checks, dropped slices and re-decodes for the slice tasks among ``tasks``.

    A slice without a summary (its decoder failed, which it reported) is taken as it is, and
    the next slice is not checked against it.
    """
    by_file: dict[str, list[FileTask]] = {}
    for task in tasks:
        if task.is_slice:
            by_file.setdefault(task.path, []).append(task)
    plan = StitchPlan()
    next_tag = max((t.task for ts in by_file.values() for t in ts), default=-1) + 1
    for slices in by_file.values():
        slices.sort(key=lambda t: t.start)
        prev_last: int | None = None
        for k, task in enumerate(slices):
            summary = summaries.get(task.task)
            if summary is None:
                prev_last = None
                continue
            if prev_last is not None and summary.rows and summary.first_base_offset is not None \
                    and summary.first_base_offset <= prev_last:
                plan.issues.append(_order_issue(task, summary, prev_last))
            if summary.rows and summary.last_offset is not None:
                prev_last = summary.last_offset
            if task.end is not None and summary.stop != task.end and k + 1 < len(slices):
                file_size = slices[-1].start + slices[-1].size_bytes
                plan.redo.append(replace(task, start=summary.stop, end=None, task=next_tag, prev_last_offset=prev_last,
                                         size_bytes=file_size - summary.stop))
                next_tag += 1
                plan.dropped.update(t.task for t in slices[k + 1 :])
                break
    return plan


def _order_issue(task: FileTask, summary: SliceSummary, prev_last: int) -> dict[str, Any]:
    assert summary.first_base_offset is not None
    broker_id, log_dir, topic, partition = task.replica()
    return {
        "broker_id": broker_id, "log_dir": log_dir, "topic": topic, "partition": partition, "file": task.rel_path,
        "position": summary.first_position, "kind": IssueKind.OFFSET_ORDER.value, "severity": Severity.ERROR.value,
        "detail": order_detail(summary.first_base_offset, prev_last),
    }
