"""What follows each Prepare* record on a partition, from the markers a pass task reads (no pyspark here).

A coordinator's Prepare* record lists the partitions that are to get its marker. On each, the
producer's next event by time (Prepare* records of one time first, in log order; markers of
one time in offset order) is either a marker, of the prepared epoch or not, or another
Prepare*, or nothing. The producer pass already reads every marker of its replica, so its
tasks answer this for the Prepare* records of their partition, as the markers go by, keeping
only one candidate per Prepare* record: the first marker at or after its time. Each answer
carries its Prepare* record, so the rules read the answers as they are: Spark need not read,
join and order every marker, nor order the coordinator log a second time
(``detect.rules._prepare_marker_matches`` does so for frames the pass does not read from files).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

#: one Prepare* record on one partition it lists, as a pass task receives it: the columns of
#: ``transactions.prepare_records`` but ``decision`` (which its ``state`` gives)
PREPARE_FIELDS = pa.schema([
    pa.field("topic", pa.string()),
    pa.field("partition", pa.int32()),
    pa.field("producer_id", pa.int64()),
    pa.field("epoch", pa.int32()),
    pa.field("ts", pa.int64()),
    pa.field("txn_log_partition", pa.int32()),
    pa.field("txn_log_offset", pa.int64()),
    pa.field("transactional_id", pa.string()),
    pa.field("state", pa.string()),
    pa.field("next_state", pa.string()),
    pa.field("started", pa.int64()),
    pa.field("timeout_ms", pa.int32()),
])
#: what follows each Prepare* record, as a task says it: the record (``PREPARE_FIELDS``), then
#: whether the next event is a marker of its epoch (null when the epochs cannot be compared), and
#: that marker's type and offset. The rules read these rows as they are: no record need be looked
#: up again in the coordinator log
OUTCOME_FIELDS = (
    pa.field("has_marker", pa.bool_()),
    pa.field("next_marker_type", pa.string()),
    pa.field("next_marker_offset", pa.int64()),
)
FOLLOW_FIELDS = pa.schema([*PREPARE_FIELDS, *OUTCOME_FIELDS])

_NONE = np.iinfo(np.int64).max  # no marker found yet: after every (time, offset)


class PrepareFollower:
    """The Prepare* records of one task's partition (and share of producers), and for each the
    first marker of its producer at or after its time among the markers ``add`` was given."""

    def __init__(self, prepares: pa.Table) -> None:
        # producer, then time (an untimed record first, as Spark sorts nulls), then log order
        columns = [pc.fill_null(prepares.column(name), -1).to_numpy() for name in
                   ("txn_log_offset", "txn_log_partition", "ts", "producer_id")]
        timed = pc.is_valid(prepares.column("ts")).to_numpy(zero_copy_only=False)
        order = np.lexsort((columns[0], columns[1], columns[2], timed, columns[3]))
        self.prepares = prepares.take(pa.array(order, pa.int64()))
        self.producers = pc.fill_null(self.prepares.column("producer_id"), -1).to_numpy()
        self.timed = pc.is_valid(self.prepares.column("ts")).to_numpy(zero_copy_only=False)
        self.times = pc.fill_null(self.prepares.column("ts"), 0).to_numpy()
        n = self.prepares.num_rows
        # the best candidate so far: its time and offset (``_NONE``: none yet), epoch and type
        self.marker_ts = np.full(n, _NONE, np.int64)
        self.marker_offset = np.full(n, _NONE, np.int64)
        self.marker_epoch: list[int | None] = [None] * n
        self.marker_type: list[str | None] = [None] * n
        self.wanted = np.unique(self.producers[self.timed])

    def add(self, rows: pa.RecordBatch) -> None:
        """Pass input rows (``ordered_pass.PASS_INPUT``), in any order: their markers are seen."""
        if not len(self.wanted) or not rows.num_rows:
            return
        producers = rows.column("producer_id").to_numpy(zero_copy_only=False)
        keep = pc.fill_null(rows.column("is_marker"), False).to_numpy(zero_copy_only=False) & np.isin(
            producers, self.wanted)
        if not keep.any():
            return
        markers = rows.filter(pa.array(keep))
        producers = producers[keep]
        times = markers.column("max_timestamp").to_numpy(zero_copy_only=False)
        offsets = markers.column("offset").to_numpy(zero_copy_only=False)
        prepared = np.flatnonzero(self.timed & np.isin(self.producers, producers))
        # markers, then the timed Prepare* records of their producers, in one order: producer,
        # time, Prepare* records before markers, offset
        count = len(producers)
        by_producer = np.concatenate([producers, self.producers[prepared]])
        by_time = np.concatenate([times, self.times[prepared]])
        is_marker = np.concatenate([np.ones(count, bool), np.zeros(len(prepared), bool)])
        by_offset = np.concatenate([offsets, np.zeros(len(prepared), np.int64)])
        order = np.lexsort((by_offset, is_marker, by_time, by_producer))
        # for each Prepare* record, the first marker after it in that order, if of its producer
        positions = np.where(is_marker[order], np.arange(len(order)), len(order))
        first_after = np.minimum.accumulate(positions[::-1])[::-1]
        at = np.flatnonzero(~is_marker[order])
        at = at[first_after[at] < len(order)]
        marker = order[first_after[at]]  # rows of ``markers``: they come first in the keys
        prepare = prepared[order[at] - count]
        same = producers[marker] == self.producers[prepare]
        earlier = (times[marker] < self.marker_ts[prepare]) | (
            (times[marker] == self.marker_ts[prepare]) & (offsets[marker] < self.marker_offset[prepare]))
        better = same & earlier
        prepare, marker = prepare[better], marker[better]
        self.marker_ts[prepare], self.marker_offset[prepare] = times[marker], offsets[marker]
        chosen = pa.array(marker, pa.int64())
        epochs = markers.column("epoch").take(chosen).to_pylist()
        types = markers.column("marker_type").take(chosen).to_pylist()
        for row, epoch, marker_type in zip(prepare.tolist(), epochs, types, strict=True):
            self.marker_epoch[row], self.marker_type[row] = epoch, marker_type

    def rows(self) -> pa.Table:
        """``FOLLOW_FIELDS`` for every Prepare* record."""
        n = self.prepares.num_rows
        epochs = self.prepares.column("epoch").to_pylist()
        has_marker: list[bool | None] = [False] * n
        next_type: list[str | None] = [None] * n
        next_offset: list[int | None] = [None] * n
        for row in range(n):
            if self.marker_ts[row] == _NONE:
                continue  # no marker after it (an untimed record, sorted before every marker, gets none)
            after = row + 1
            if after < n and self.producers[after] == self.producers[row] and \
                    self.times[after] <= self.marker_ts[row]:
                continue  # the next Prepare* comes first (before a marker of its own time)
            next_type[row], next_offset[row] = self.marker_type[row], int(self.marker_offset[row])
            epoch, marker_epoch = epochs[row], self.marker_epoch[row]
            has_marker[row] = None if epoch is None or marker_epoch is None else epoch == marker_epoch
        return _with_outcomes(self.prepares, has_marker, next_type, next_offset)


def unfollowed(prepares: pa.Table) -> pa.Table:
    """``FOLLOW_FIELDS`` for Prepare* records on partitions no task reads: no marker follows them."""
    n = prepares.num_rows
    return _with_outcomes(prepares, [False] * n, [None] * n, [None] * n)


def _with_outcomes(prepares: pa.Table, has_marker: list[bool | None], next_type: list[str | None],
                   next_offset: list[int | None]) -> pa.Table:
    outcomes = [pa.array(has_marker, pa.bool_()), pa.array(next_type, pa.string()),
                pa.array(next_offset, pa.int64())]
    return pa.Table.from_arrays([*(prepares.column(f.name) for f in PREPARE_FIELDS), *outcomes],
                                schema=FOLLOW_FIELDS)
