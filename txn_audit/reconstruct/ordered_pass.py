"""The ordered pass per producer, column-wise over Arrow batches (no pyspark here).

Input: the rows of ``reconstruct.producer_events`` (data batches with a producer id and
COMMIT/ABORT markers), sorted by (topic, partition, producer id, offset), as a stream of Arrow
batches in which one producer's rows may span several batches. Each row gets what the rows
before it on the same partition say: how many markers came before (``txn_seq``), the previous
marker, the previous batch with a sequence, and the highest data, marker and coordinator epochs
seen so far; and whether it is late.

One compiled loop (numba) walks the rows and carries its state from batch to batch; the fields
of earlier rows are gathered with Arrow ``take`` rather than copied row by row. Spark's window
functions computed the same row by row in the JVM, several times slower.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import numba
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

#: no value: below every epoch
NONE = np.iinfo(np.int64).min

#: where the carried state keeps each running value
_MARKERS, _MARKER_AT, _SEQ_AT, _MAX_DATA, _MAX_MARKER, _MAX_COORD = range(6)

#: previous-marker and previous-sequence fields: output name -> input column
MARKER_FIELDS = {
    "prev_marker_offset": "offset",
    "prev_marker_type": "marker_type",
    "prev_marker_timestamp": "max_timestamp",
    "prev_marker_epoch": "epoch",
}
SEQUENCE_FIELDS = {
    "prev_seq_epoch": "epoch",
    "prev_seq_last_sequence": "last_sequence",
    "prev_seq_last_offset": "last_offset",
}
MAXIMA = ("max_data_epoch_before", "max_marker_epoch_before", "max_coordinator_epoch_before")


@numba.njit(cache=True, nogil=True)
def _walk(new_key: np.ndarray, is_marker: np.ndarray, with_sequence: np.ndarray, epoch: np.ndarray,
          coordinator_epoch: np.ndarray, state: np.ndarray) -> tuple[np.ndarray, ...]:  # pragma: no cover - compiled
    """One pass over a batch's rows, starting from ``state`` and leaving the new state there.

    ``*_at`` values are positions in the batch plus one, 0 for a row of an earlier batch (its
    fields are carried by the caller), -1 for none.
    """
    n = new_key.shape[0]
    txn_seq = np.empty(n, np.int64)
    marker_at = np.empty(n, np.int64)
    seq_at = np.empty(n, np.int64)
    maxima = np.empty((3, n), np.int64)
    markers, last_marker, last_seq = state[_MARKERS], state[_MARKER_AT], state[_SEQ_AT]
    max_data, max_marker, max_coord = state[_MAX_DATA], state[_MAX_MARKER], state[_MAX_COORD]
    for i in range(n):
        if new_key[i]:
            markers, last_marker, last_seq = 0, -1, -1
            max_data, max_marker, max_coord = NONE, NONE, NONE
        txn_seq[i] = markers
        marker_at[i] = last_marker
        seq_at[i] = last_seq if with_sequence[i] else -1
        maxima[0, i], maxima[1, i], maxima[2, i] = max_data, max_marker, max_coord
        if is_marker[i]:
            markers += 1
            last_marker = i + 1
            max_marker = max(max_marker, epoch[i])
            max_coord = max(max_coord, coordinator_epoch[i])
        else:
            max_data = max(max_data, epoch[i])
            if with_sequence[i]:
                last_seq = i + 1
    state[_MARKERS], state[_MARKER_AT], state[_SEQ_AT] = markers, last_marker, last_seq
    state[_MAX_DATA], state[_MAX_MARKER], state[_MAX_COORD] = max_data, max_marker, max_coord
    return txn_seq, marker_at, seq_at, maxima


def _int64s(column: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """The column as int64, nulls as ``NONE`` (below every value)."""
    return pc.fill_null(pc.cast(column, pa.int64()), NONE).to_numpy(zero_copy_only=False)


def _bools(column: pa.Array | pa.ChunkedArray) -> np.ndarray:
    return pc.fill_null(column, False).to_numpy(zero_copy_only=False)


class _Carried:
    """What the walk left after the last batch: its key, state and the rows it points back to."""

    def __init__(self) -> None:
        self.key: tuple[object, object, object] | None = None
        self.state = np.array([0, -1, -1, NONE, NONE, NONE], np.int64)
        self.rows: dict[str, pa.Array] = {}

    def previous(self, batch: pa.RecordBatch, at: np.ndarray, fields: dict[str, str]) -> dict[str, pa.Array]:
        """``fields`` of the rows ``at`` points to (0: the carried row, -1: null)."""
        out = {}
        indices = pa.array(at, mask=at < 0)
        for name, column in fields.items():
            values = batch.column(column)
            carried = self.rows.get(name, pa.nulls(1, values.type))
            out[name] = pc.take(pa.concat_arrays([carried.cast(values.type), values]), indices)
        return out

    def keep(self, batch: pa.RecordBatch, at: int, fields: dict[str, str]) -> None:
        """Carry ``fields`` of the row ``at`` points to into the next batch."""
        if at > 0:
            for name, column in fields.items():
                self.rows[name] = batch.column(column).slice(at - 1, 1)
        elif at < 0:
            for name in fields:
                self.rows.pop(name, None)


def _new_keys(batch: pa.RecordBatch, carried: _Carried) -> np.ndarray:
    """True where a row's (topic, partition, producer id) differs from the row before it."""
    keys = [batch.column(name) for name in ("topic", "partition", "producer_id")]
    changed = np.zeros(batch.num_rows, dtype=bool)
    if batch.num_rows > 1:
        differs = pc.or_(pc.or_(pc.not_equal(keys[0][1:], keys[0][:-1]), pc.not_equal(keys[1][1:], keys[1][:-1])),
                         pc.not_equal(keys[2][1:], keys[2][:-1]))
        changed[1:] = _bools(differs)
    first = tuple(key[0].as_py() for key in keys)
    changed[0] = first != carried.key
    carried.key = tuple(key[-1].as_py() for key in keys)
    return changed


def ordered_pass(
    batches: Iterable[pa.RecordBatch], *, late_tolerance_ms: int, unsequenced_topics: tuple[str, ...] = ()
) -> Iterator[pa.RecordBatch]:
    """Each input batch with the pass's columns appended (see the module docstring).

    A data batch *with a sequence* has ``base_sequence >= 0`` and a topic not in
    ``unsequenced_topics`` (compacted topics, whose batches compaction removes). A transactional
    data batch is *late* when its newest record was created more than ``late_tolerance_ms``
    before the previous marker, or when its epoch is below that marker's.
    """
    carried = _Carried()
    for batch in batches:
        if batch.num_rows == 0:
            continue
        is_marker = batch.column("is_marker")
        with_sequence = pc.and_(
            pc.and_(pc.invert(is_marker), pc.fill_null(pc.greater_equal(batch.column("base_sequence"), 0), False)),
            pc.invert(pc.is_in(batch.column("topic"), pa.array(unsequenced_topics, batch.column("topic").type))),
        )
        txn_seq, marker_at, seq_at, maxima = _walk(
            _new_keys(batch, carried), _bools(is_marker), _bools(with_sequence),
            _int64s(batch.column("epoch")), _int64s(batch.column("coordinator_epoch")), carried.state,
        )
        columns: dict[str, pa.Array] = {"txn_seq": pa.array(txn_seq)}
        columns.update(carried.previous(batch, marker_at, MARKER_FIELDS))
        columns.update(carried.previous(batch, seq_at, SEQUENCE_FIELDS))
        for name, values in zip(MAXIMA, maxima, strict=True):
            columns[name] = pa.array(values, mask=values == NONE).cast(pa.int32())
        carried.keep(batch, int(carried.state[_MARKER_AT]), MARKER_FIELDS)
        carried.keep(batch, int(carried.state[_SEQ_AT]), SEQUENCE_FIELDS)
        # the walk's next batch points back to the carried rows
        for at in (_MARKER_AT, _SEQ_AT):
            carried.state[at] = min(carried.state[at], 0)
        is_late = pc.and_kleene(
            pc.and_kleene(pc.invert(is_marker), pc.fill_null(batch.column("is_transactional"), False)),
            pc.and_kleene(
                pc.is_valid(columns["prev_marker_offset"]),
                pc.or_kleene(
                    pc.greater(pc.subtract(columns["prev_marker_timestamp"], batch.column("max_timestamp")),
                               late_tolerance_ms),
                    pc.less(batch.column("epoch"), columns["prev_marker_epoch"]),
                ),
            ),
        )
        columns["is_late"] = is_late
        yield pa.RecordBatch.from_arrays(
            list(batch.columns) + list(columns.values()), names=batch.schema.names + list(columns)
        )
