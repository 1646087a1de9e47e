"""The ordered pass per producer, column-wise over Arrow batches (no pyspark here).

Input: every data batch with a producer id and every COMMIT/ABORT marker, sorted by (topic,
partition, producer id, offset), as a stream of Arrow batches in which one producer's rows may
span several batches. ``ordered_pass`` gives each row what the rows before it on the same
partition say: how many markers came before (``txn_seq``), the previous marker, the previous
batch with a sequence, the highest data, marker and coordinator epochs seen so far, and whether
it is late. ``transaction_pass`` reduces that to what reconstruction and detection keep: one
row per transaction, and the few rows a rule may flag.

Compiled loops (numba) walk the rows and carry their state from batch to batch; the fields of
earlier rows are gathered with Arrow ``take`` rather than copied row by row. Spark's window
functions and a grouping computed the same row by row in the JVM and shuffled every row twice.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import numba
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

#: no value: below every epoch
NONE = np.iinfo(np.int64).min


@dataclass(frozen=True)
class Const:
    """A constant column of the pass's input."""

    value: object
    type: pa.DataType


#: the pass's input row: name -> (taken from a data batch, taken from a marker), each a column of
#: the raw ``batches`` or ``control_markers`` table or a constant. Both the Spark and the Arrow
#: readers build the rows from it.
PASS_INPUT: dict[str, tuple[str | Const, str | Const]] = {
    "topic": ("topic", "topic"),
    "partition": ("partition", "partition"),
    "producer_id": ("producer_id", "producer_id"),
    "broker_id": ("broker_id", "broker_id"),
    "epoch": ("producer_epoch", "producer_epoch"),
    "offset": ("base_offset", "offset"),
    "last_offset": ("last_offset", "offset"),
    "record_count": ("record_count", Const(1, pa.int32())),
    "size_bytes": ("size_bytes", Const(78, pa.int32())),  # a control batch of one marker record
    "first_timestamp": ("first_timestamp", "timestamp"),
    "max_timestamp": ("max_timestamp", "timestamp"),
    "is_marker": (Const(False, pa.bool_()), Const(True, pa.bool_())),
    "is_transactional": ("is_transactional", Const(True, pa.bool_())),
    "base_sequence": ("base_sequence", Const(None, pa.int32())),
    "last_sequence": ("last_sequence", Const(None, pa.int32())),
    "marker_type": (Const(None, pa.string()), "marker_type"),
    "coordinator_epoch": (Const(None, pa.int32()), "coordinator_epoch"),
    # where the batch is (its file name would make every row much wider)
    "segment_base_offset": ("segment_base_offset", Const(None, pa.int64())),
    "position": ("position", Const(None, pa.int64())),
}
DATA, MARKER = 0, 1


def pass_source_columns(side: int) -> list[str]:
    """The raw table columns ``pass_input`` reads for ``side`` (``DATA`` or ``MARKER``)."""
    named = {source[side] for source in PASS_INPUT.values() if isinstance(source[side], str)}
    if side == DATA:
        named.add("is_control")
    return sorted(named)  # type: ignore[arg-type]


def pass_input(table: pa.Table | pa.RecordBatch, side: int) -> pa.Table:
    """``PASS_INPUT`` rows of ``side`` from raw rows: a data side takes only the data batches
    written with a producer id (no control batch), a marker side every marker."""
    if side == DATA:
        keep = pc.and_(pc.invert(table.column("is_control")), pc.greater_equal(table.column("producer_id"), 0))
        table = table.filter(keep)
    columns = {}
    for name, sources in PASS_INPUT.items():
        source = sources[side]
        if isinstance(source, Const):
            columns[name] = pa.repeat(pa.scalar(source.value, source.type), table.num_rows)
        else:
            columns[name] = table.column(source)
    return pa.table(columns)

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
        self.key: tuple[object, ...] | None = None
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


def _new_keys(batch: pa.RecordBatch, previous: tuple[object, ...] | None) -> tuple[np.ndarray, tuple[object, ...]]:
    """True where a row's (topic, partition, producer id) differs from the row before it
    (``previous``: the key of the last row of the batch before); and the key of the last row."""
    keys = [batch.column(name) for name in ("topic", "partition", "producer_id")]
    changed = np.zeros(batch.num_rows, dtype=bool)
    if batch.num_rows > 1:
        differs = pc.or_(pc.or_(pc.not_equal(keys[0][1:], keys[0][:-1]), pc.not_equal(keys[1][1:], keys[1][:-1])),
                         pc.not_equal(keys[2][1:], keys[2][:-1]))
        changed[1:] = _bools(differs)
    changed[0] = tuple(key[0].as_py() for key in keys) != previous
    return changed, tuple(key[-1].as_py() for key in keys)


def ordered_pass(
    batches: Iterable[pa.RecordBatch], *, late_tolerance_ms: int, unsequenced_topics: tuple[str, ...] = ()
) -> Iterator[pa.RecordBatch]:
    """Each input batch with the pass's columns appended (see the module docstring).

    A data batch *with a sequence* has ``base_sequence >= 0`` and a topic not in
    ``unsequenced_topics`` (compacted topics, whose batches compaction removes). A transactional
    data batch is *late* when its newest record was created more than ``late_tolerance_ms``
    before the previous marker, or when its epoch is below that marker's.
    """
    for batch, _ in _walked(batches, late_tolerance_ms=late_tolerance_ms, unsequenced_topics=unsequenced_topics):
        yield batch


def _walked(
    batches: Iterable[pa.RecordBatch], *, late_tolerance_ms: int, unsequenced_topics: tuple[str, ...]
) -> Iterator[tuple[pa.RecordBatch, np.ndarray]]:
    """``ordered_pass``'s batches, each with where a new (topic, partition, producer) begins."""
    carried = _Carried()
    for batch in batches:
        if batch.num_rows == 0:
            continue
        is_marker = batch.column("is_marker")
        with_sequence = pc.and_(
            pc.and_(pc.invert(is_marker), pc.fill_null(pc.greater_equal(batch.column("base_sequence"), 0), False)),
            pc.invert(pc.is_in(batch.column("topic"), pa.array(unsequenced_topics, batch.column("topic").type))),
        )
        new_key, carried.key = _new_keys(batch, carried.key)
        txn_seq, marker_at, seq_at, maxima = _walk(
            new_key, _bools(is_marker), _bools(with_sequence),
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
        ), new_key


# -- transactions and the rows the rules look at, from the same pass ---------------------------

#: marker types, coded as their position + 1 inside the pass. Any other type counts as UNKNOWN:
#: a marker whose outcome is not known still ends its transaction, and no rule guesses the outcome
MARKER_TYPES = ("ABORT", "COMMIT", "UNKNOWN")

#: one transaction's running aggregate, then its output row: int64 fields, NONE for no value
TXN_FIELDS = (
    "txn_seq", "first_offset", "last_data_offset", "marker_offset", "marker_type", "marker_epoch",
    "marker_timestamp", "coordinator_epoch", "min_epoch", "max_epoch", "batches", "records", "bytes",
    "first_timestamp", "last_timestamp", "late_batches", "first_late_offset", "prev_marker_offset",
    "prev_marker_type", "prev_marker_timestamp", "last_event_timestamp",
)
(_SEQ, _FIRST, _LAST_DATA, _M_OFFSET, _M_TYPE, _M_EPOCH, _M_TS, _COORD, _MIN_EPOCH, _MAX_EPOCH, _BATCHES, _RECORDS,
 _BYTES, _FIRST_TS, _LAST_TS, _LATE, _FIRST_LATE, _P_OFFSET, _P_TYPE, _P_TS, _EVENT_TS) = range(len(TXN_FIELDS))
#: bookkeeping after the fields: is a transaction open, and its last row (position + 1, 0: earlier batch)
_OPEN, _LAST_ROW = len(TXN_FIELDS), len(TXN_FIELDS) + 1
_INT32_FIELDS = ("marker_epoch", "coordinator_epoch", "min_epoch", "max_epoch")
_COUNTS = ("batches", "records", "bytes", "late_batches")


@numba.njit(cache=True, nogil=True)
def _lower(current: int, value: int) -> int:  # pragma: no cover - compiled
    return value if current == NONE or value < current else current


@numba.njit(cache=True, nogil=True)
def _aggregate(new_key: np.ndarray, is_transactional: np.ndarray, is_marker: np.ndarray, txn_seq: np.ndarray,
               offset: np.ndarray, last_offset: np.ndarray, epoch: np.ndarray, record_count: np.ndarray,
               size_bytes: np.ndarray, first_ts: np.ndarray, max_ts: np.ndarray, marker_type: np.ndarray,
               coordinator_epoch: np.ndarray, is_late: np.ndarray, prev_offset: np.ndarray, prev_type: np.ndarray,
               prev_ts: np.ndarray, acc: np.ndarray) -> np.ndarray:  # pragma: no cover - compiled
    """Transactions ended in this batch, one column each (``TXN_FIELDS`` + bookkeeping): a
    marker ends its producer's transaction, a new (topic, partition, producer) ends an open one.
    ``acc`` carries the open transaction from batch to batch."""
    n = new_key.shape[0]
    out = np.empty((acc.shape[0], n + 1), np.int64)
    ended = 0
    for i in range(n):
        if new_key[i] and acc[_OPEN]:
            out[:, ended] = acc
            ended += 1
            acc[_OPEN] = 0
        if not is_transactional[i]:
            continue
        if not acc[_OPEN]:
            acc[:] = NONE
            acc[_OPEN] = 1
            acc[_SEQ] = txn_seq[i]
            acc[_BATCHES], acc[_RECORDS], acc[_BYTES], acc[_LATE] = 0, 0, 0, 0
            # the transaction's first row says which marker came before it
            acc[_P_OFFSET], acc[_P_TYPE], acc[_P_TS] = prev_offset[i], prev_type[i], prev_ts[i]
        acc[_LAST_ROW] = i + 1
        acc[_EVENT_TS] = max_ts[i]
        if is_marker[i]:
            acc[_M_OFFSET], acc[_M_TYPE], acc[_M_EPOCH], acc[_M_TS] = offset[i], marker_type[i], epoch[i], max_ts[i]
            acc[_COORD] = coordinator_epoch[i]
            out[:, ended] = acc
            ended += 1
            acc[_OPEN] = 0
            continue
        acc[_FIRST] = _lower(acc[_FIRST], offset[i])
        acc[_LAST_DATA] = max(acc[_LAST_DATA], last_offset[i])
        acc[_MIN_EPOCH] = _lower(acc[_MIN_EPOCH], epoch[i])
        acc[_MAX_EPOCH] = max(acc[_MAX_EPOCH], epoch[i])
        acc[_BATCHES] += 1
        acc[_RECORDS] += record_count[i]
        acc[_BYTES] += size_bytes[i]
        acc[_FIRST_TS] = _lower(acc[_FIRST_TS], first_ts[i])
        acc[_LAST_TS] = max(acc[_LAST_TS], max_ts[i])
        if is_late[i]:
            acc[_LATE] += 1
            acc[_FIRST_LATE] = _lower(acc[_FIRST_LATE], offset[i])
    return out[:, :ended]


def _marker_codes(types: pa.Array) -> np.ndarray:
    """``MARKER_TYPES`` codes; NONE where there is no marker."""
    known = pc.index_in(types, pa.array(MARKER_TYPES, types.type))
    unknown = pc.if_else(pc.is_valid(known), known, MARKER_TYPES.index("UNKNOWN"))
    return _int64s(pc.add(pc.if_else(pc.is_valid(types), unknown, None), 1))


KEY_COLUMNS = ("topic", "partition", "producer_id", "broker_id")


def txn_fields(string: pa.DataType = pa.string()) -> list[pa.Field]:
    """``TXN_FIELDS`` with their Arrow types (the key columns come before them)."""
    def field_type(name: str) -> pa.DataType:
        if name in ("marker_type", "prev_marker_type"):
            return string
        return pa.int32() if name in _INT32_FIELDS else pa.int64()

    return [pa.field(name, field_type(name)) for name in TXN_FIELDS]


def _candidates(batch: pa.RecordBatch) -> np.ndarray:
    """Rows a detection rule may flag (a superset: the rules decide): late rows, batches whose
    sequence does not continue the previous one, epochs below one seen before, and markers
    whose coordinator epoch is below an earlier marker's."""
    epoch = _int64s(batch.column("epoch"))
    prev_epoch = _int64s(batch.column("prev_seq_epoch"))
    prev_last = _int64s(batch.column("prev_seq_last_sequence"))
    base = _int64s(batch.column("base_sequence"))
    expected = np.where(prev_last == 2**31 - 1, 0, prev_last + 1)
    continues = ((epoch == prev_epoch) & (base == expected)) | ((epoch > prev_epoch) & (base == 0))
    sequence = (prev_epoch != NONE) & ~continues
    maxima = [_int64s(batch.column(name)) for name in MAXIMA]
    fenced = (epoch < maxima[0]) | (epoch < maxima[1])
    coordinator = _bools(batch.column("is_marker")) & (_int64s(batch.column("coordinator_epoch")) < maxima[2])
    return _bools(batch.column("is_late")) | sequence | fenced | coordinator


def transaction_pass(
    batches: Iterable[pa.RecordBatch], *, late_tolerance_ms: int, unsequenced_topics: tuple[str, ...] = ()
) -> Iterator[pa.RecordBatch]:
    """``ordered_pass`` reduced to what reconstruction and detection need: batches of two
    struct columns, ``event`` (the pass's rows a rule may flag, see ``_candidates``) and
    ``txn`` (one per transaction of a (topic, partition, producer): ``KEY_COLUMNS``, ``txn_fields``);
    each output row has one of them, the other is null. Transactions are taken over the rows
    with the transactional flag and the markers, in offset order."""
    acc = np.full(len(TXN_FIELDS) + 2, NONE, np.int64)
    acc[_OPEN] = 0
    last_key: pa.RecordBatch | None = None  # the previous batch's last row (its key columns)
    types: tuple[pa.StructType, pa.StructType] | None = None  # of the event and txn columns
    walked = _walked(batches, late_tolerance_ms=late_tolerance_ms, unsequenced_topics=unsequenced_topics)
    for batch, new_key in walked:
        keys = batch.select(list(KEY_COLUMNS))
        if types is None:
            types = (pa.struct(list(batch.schema)),
                     pa.struct(list(keys.schema) + txn_fields(batch.schema.field("marker_type").type)))
        ended = _aggregate(
            new_key, _bools(batch.column("is_transactional")), _bools(batch.column("is_marker")),
            _int64s(batch.column("txn_seq")), _int64s(batch.column("offset")), _int64s(batch.column("last_offset")),
            _int64s(batch.column("epoch")), _int64s(batch.column("record_count")),
            _int64s(batch.column("size_bytes")), _int64s(batch.column("first_timestamp")),
            _int64s(batch.column("max_timestamp")), _marker_codes(batch.column("marker_type")),
            _int64s(batch.column("coordinator_epoch")), _bools(batch.column("is_late")),
            _int64s(batch.column("prev_marker_offset")), _marker_codes(batch.column("prev_marker_type")),
            _int64s(batch.column("prev_marker_timestamp")), acc,
        )
        yield from _output(batch.filter(pa.array(_candidates(batch))), ended, keys, last_key, types)
        last_key = keys.slice(batch.num_rows - 1, 1)
        if acc[_OPEN]:
            acc[_LAST_ROW] = 0  # the next batch finds this row as the carried one
    if acc[_OPEN] and last_key is not None and types is not None:
        # the stream's last transaction is open: its row is the carried one
        yield from _output(None, acc.reshape(-1, 1), last_key.slice(0, 0), last_key, types)


def _output(events: pa.RecordBatch | None, ended: np.ndarray, keys: pa.RecordBatch, last_key: pa.RecordBatch | None,
            types: tuple[pa.StructType, pa.StructType]) -> Iterator[pa.RecordBatch]:
    """Output batches: the candidate ``events``, then the ``ended`` transactions, whose key is
    that of their last row (0: the carried row ``last_key``)."""
    event_type, txn_type = types
    if events is not None and events.num_rows:
        struct = pa.StructArray.from_arrays(events.columns, fields=list(events.schema))
        yield pa.RecordBatch.from_arrays([struct, pa.nulls(events.num_rows, txn_type)], names=["event", "txn"])
    count = ended.shape[1]
    if not count:
        return
    rows = ended[_LAST_ROW]
    if last_key is not None:
        keys = pa.concat_batches([last_key, keys])
    else:
        rows = rows - 1
    columns = [keys.column(k).take(pa.array(rows)) for k in KEY_COLUMNS]
    names = pa.array(MARKER_TYPES, txn_type.field("marker_type").type)
    for index, name in enumerate(TXN_FIELDS):
        values = ended[index]
        missing = values == NONE
        if name in ("marker_type", "prev_marker_type"):
            columns.append(names.take(pa.array(np.where(missing, 0, values - 1), mask=missing)))
        elif name in _COUNTS:
            columns.append(pa.array(values))
        else:
            columns.append(pa.array(values, mask=missing).cast(txn_type.field(name).type))
    txn = pa.StructArray.from_arrays(columns, fields=list(txn_type))
    yield pa.RecordBatch.from_arrays([pa.nulls(count, event_type), txn], names=["event", "txn"])
