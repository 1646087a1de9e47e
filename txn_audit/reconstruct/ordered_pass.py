"""The ordered pass per producer, column-wise over Arrow batches (no pyspark here).

Input: every data batch with a producer id and every COMMIT/ABORT marker, each (topic,
partition, producer id)'s rows in offset order, as a stream of Arrow batches: sorted by that
key, or a partition's rows in log order with the producers interleaved. ``ordered_pass`` gives
each row what the rows before it of its producer on the same partition say: how many markers
came before (``txn_seq``), the previous marker, the previous batch with a sequence, the highest
data, marker and coordinator epochs seen so far, and whether it is late. ``transaction_pass``
reduces that to what reconstruction and detection keep: one row per transaction, and the few
rows a rule may flag.

Compiled loops (numba) walk the rows; each key keeps its state (a row of a table indexed by a
dense number per key), from batch to batch. Spark's window functions and a grouping computed
the same row by row in the JVM and shuffled every row twice.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

import numba
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from txn_audit.formats.primitives import INT32_MAX

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
    named = {"is_control"} if side == DATA else set()
    for sources in PASS_INPUT.values():
        source = sources[side]
        if isinstance(source, str):
            named.add(source)
    return sorted(named)


def pass_input(table: pa.Table | pa.RecordBatch, side: int, carry: Sequence[str] = ()) -> pa.Table:
    """``PASS_INPUT`` rows of ``side`` from raw rows: a data side takes only the data batches
    written with a producer id (no control batch), a marker side every marker. ``carry``: columns
    of ``table`` kept as they are, after those."""
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
    for name in carry:
        columns[name] = table.column(name)
    return pa.table(columns)

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

#: what the walk keeps per (topic, partition, producer): how many markers, the last marker's
#: fields (``MARKER_FIELDS``' columns, in order), the last sequenced batch's (``SEQUENCE_FIELDS``'),
#: the highest data, marker and coordinator epochs, and whether a marker and a sequenced batch were seen
(_MARKERS, _M_OFF, _M_TYPE, _M_TS, _M_EP, _S_EP, _S_SEQ, _S_LAST, _MAX_DATA, _MAX_MARKER, _MAX_COORD, _HAS_MARKER,
 _HAS_SEQ) = range(13)
_WALK_STATE = 13


@numba.njit(cache=True, nogil=True)
def _walk(slot: np.ndarray, is_marker: np.ndarray, with_sequence: np.ndarray, epoch: np.ndarray,
          coordinator_epoch: np.ndarray, offset: np.ndarray, marker_type: np.ndarray, max_ts: np.ndarray,
          last_sequence: np.ndarray, last_offset: np.ndarray,
          state: np.ndarray) -> tuple[np.ndarray, np.ndarray]:  # pragma: no cover - compiled
    """One pass over a batch's rows, each walking on from its key's row of ``state`` (``slot``)
    and leaving the new state there. Out: per row, ``txn_seq``, then the previous marker's and
    previous sequenced batch's fields (``NONE``: none, or a null value), then ``MAXIMA``."""
    n = slot.shape[0]
    txn_seq = np.empty(n, np.int64)
    out = np.empty((7 + 3, n), np.int64)
    for i in range(n):
        s = state[slot[i]]
        txn_seq[i] = s[_MARKERS]
        for k in range(4):
            out[k, i] = s[_M_OFF + k] if s[_HAS_MARKER] else NONE
        for k in range(3):
            out[4 + k, i] = s[_S_EP + k] if with_sequence[i] and s[_HAS_SEQ] else NONE
        out[7, i], out[8, i], out[9, i] = s[_MAX_DATA], s[_MAX_MARKER], s[_MAX_COORD]
        if is_marker[i]:
            s[_MARKERS] += 1
            s[_HAS_MARKER] = 1
            s[_M_OFF], s[_M_TYPE], s[_M_TS], s[_M_EP] = offset[i], marker_type[i], max_ts[i], epoch[i]
            s[_MAX_MARKER] = max(s[_MAX_MARKER], epoch[i])
            s[_MAX_COORD] = max(s[_MAX_COORD], coordinator_epoch[i])
        else:
            s[_MAX_DATA] = max(s[_MAX_DATA], epoch[i])
            if with_sequence[i]:
                s[_HAS_SEQ] = 1
                s[_S_EP], s[_S_SEQ], s[_S_LAST] = epoch[i], last_sequence[i], last_offset[i]
    return txn_seq, out


def _int64s(column: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """The column as int64, nulls as ``NONE`` (below every value)."""
    values: np.ndarray = pc.fill_null(pc.cast(column, pa.int64()), NONE).to_numpy(zero_copy_only=False)
    return values


def _bools(column: pa.Array | pa.ChunkedArray) -> np.ndarray:
    values: np.ndarray = pc.fill_null(column, False).to_numpy(zero_copy_only=False)
    return values


def _grown(table: np.ndarray, rows: int, fill: np.ndarray | np.int64) -> np.ndarray:
    """``table`` with at least ``rows`` rows, new rows set to ``fill``."""
    if rows <= table.shape[0]:
        return table
    grown = np.empty((max(rows, 2 * table.shape[0]), *table.shape[1:]), np.int64)
    grown[: table.shape[0]] = table
    grown[table.shape[0]:] = fill
    return grown


@numba.njit(cache=True, nogil=True)
def _bucket(topic: int, partition: int, producer: int, mask: int) -> int:  # pragma: no cover - compiled
    """A key's first bucket in a table of ``mask + 1`` buckets (a multiplicative hash)."""
    mixed = np.uint64(producer) * np.uint64(0x9E3779B97F4A7C15)
    mixed ^= np.uint64(partition) * np.uint64(0xC2B2AE3D27D4EB4F)
    mixed ^= np.uint64(topic) * np.uint64(0x165667B19E3779F9)
    mixed ^= mixed >> np.uint64(31)
    return np.int64(mixed & np.uint64(mask))  # type: ignore[return-value]  # numba compiles it: an int64 either way


@numba.njit(cache=True, nogil=True)
def _place(parts: np.ndarray, count: int, buckets: np.ndarray, topics: np.ndarray, partitions: np.ndarray,
           producers: np.ndarray) -> tuple[np.ndarray, int]:  # pragma: no cover - compiled
    """Each row's slot: the slot its key has in ``buckets`` (open addressing, linear probing; a
    bucket holds a slot, -1: empty, and ``parts[slot]`` the slot's key), else the next new one,
    its key written to ``parts``. Also the number of slots after. The caller leaves room: rows
    for every key new in ``parts``, and more empty buckets than keys."""
    mask = buckets.shape[0] - 1
    slots = np.empty(producers.shape[0], np.int64)
    for i in range(producers.shape[0]):
        bucket = _bucket(topics[i], partitions[i], producers[i], mask)
        while True:
            slot = buckets[bucket]
            if slot < 0:
                slot = count
                count += 1
                buckets[bucket] = slot
                parts[slot, 0], parts[slot, 1], parts[slot, 2] = topics[i], partitions[i], producers[i]
                break
            if parts[slot, 2] == producers[i] and parts[slot, 1] == partitions[i] and parts[slot, 0] == topics[i]:
                break
            bucket = (bucket + 1) & mask
        slots[i] = slot
    return slots, count


@numba.njit(cache=True, nogil=True)
def _buckets_for(parts: np.ndarray, count: int, size: int) -> np.ndarray:  # pragma: no cover - compiled
    """A table of ``size`` buckets (a power of two) holding the first ``count`` slots of ``parts``."""
    buckets = np.full(size, -1, np.int64)
    for slot in range(count):
        bucket = _bucket(parts[slot, 0], parts[slot, 1], parts[slot, 2], size - 1)
        while buckets[bucket] >= 0:
            bucket = (bucket + 1) & (size - 1)
        buckets[bucket] = slot
    return buckets


class _Keys:
    """Dense numbers (slots) for the (topic, partition, producer id) keys seen so far, and the
    strings the walk codes as numbers (topics, marker types).

    A replica may hold millions of producers, so a key costs no Python object: a compiled hash
    table maps keys to slots, its buckets holding slots only (16-32 bytes a key). numba's typed
    dictionary would serve too, but costs each worker process about 0.3 s to set up."""

    def __init__(self) -> None:
        self._count = 0
        #: per slot, its key's parts (``NONE``: null): topic code, partition, producer id; grown by
        #: doubling, so that keys added batch after batch cost no more than once each
        self._parts = np.empty((0, 3), np.int64)
        self._buckets = np.full(16, -1, np.int64)
        self.topics = _Strings()
        self.marker_types = _Strings()

    def __len__(self) -> int:
        return self._count

    def of(self, batch: pa.RecordBatch) -> np.ndarray:
        """Each row's slot."""
        topics = self.topics.codes(batch.column("topic"))
        partitions, producers = _int64s(batch.column("partition")), _int64s(batch.column("producer_id"))
        most = self._count + len(producers)
        self._parts = _grown(self._parts, most, np.full(3, NONE, np.int64))
        if 2 * most > len(self._buckets):  # at most half the buckets full
            size = len(self._buckets)
            while 2 * most > size:
                size *= 2
            self._buckets = _buckets_for(self._parts, self._count, size)
        slots, self._count = _place(self._parts, self._count, self._buckets, np.ascontiguousarray(topics),
                                    np.ascontiguousarray(partitions), np.ascontiguousarray(producers))
        return slots

    @property
    def topic_code(self) -> np.ndarray:
        return self._parts[: self._count, 0]

    @property
    def partition(self) -> np.ndarray:
        return self._parts[: self._count, 1]

    @property
    def producer_id(self) -> np.ndarray:
        return self._parts[: self._count, 2]


class _Strings:
    """Codes for the distinct strings of a column across batches (``NONE``: null)."""

    def __init__(self) -> None:
        self.values: list[str] = []
        self.index: dict[str, int] = {}

    def codes(self, column: pa.Array) -> np.ndarray:
        encoded = pc.dictionary_encode(column)
        known = np.array([self.index.setdefault(value, len(self.index)) for value in
                          encoded.dictionary.to_pylist()], np.int64)
        self.values = list(self.index)
        indices = encoded.indices.to_numpy(zero_copy_only=False) if encoded.null_count == 0 else \
            pc.fill_null(encoded.indices, -1).to_numpy(zero_copy_only=False)
        codes = known[np.maximum(indices, 0)] if len(known) else np.zeros(len(indices), np.int64)
        return np.where(indices < 0, NONE, codes)

    def take(self, codes: np.ndarray, kind: pa.DataType) -> pa.Array:
        missing = codes == NONE
        return pa.array(self.values, kind).take(pa.array(np.where(missing, 0, codes), mask=missing)) \
            if self.values else pa.nulls(len(codes), kind)


def _values(values: np.ndarray, kind: pa.DataType) -> pa.Array:
    return pa.array(values, mask=values == NONE).cast(kind)


class _Walk:
    """The walk's state across batches: per key, what its rows so far leave (``_WALK_STATE``)."""

    def __init__(self) -> None:
        self.keys = _Keys()
        self.state = np.empty((0, _WALK_STATE), np.int64)
        self.fresh = np.zeros(_WALK_STATE, np.int64)
        self.fresh[[_MAX_DATA, _MAX_MARKER, _MAX_COORD]] = NONE

    def batch(self, batch: pa.RecordBatch, late_tolerance_ms: int,
              unsequenced: pa.Array) -> tuple[pa.RecordBatch, np.ndarray]:
        """``batch`` with the pass's columns appended; and each row's slot."""
        slot = self.keys.of(batch)
        self.state = _grown(self.state, len(self.keys), self.fresh)
        is_marker = batch.column("is_marker")
        with_sequence = pc.and_(
            pc.and_(pc.invert(is_marker), pc.fill_null(pc.greater_equal(batch.column("base_sequence"), 0), False)),
            pc.invert(pc.is_in(batch.column("topic"), unsequenced.cast(batch.column("topic").type))),
        )
        types = self.keys.marker_types.codes(batch.column("marker_type"))
        txn_seq, previous = _walk(
            slot, _bools(is_marker), _bools(with_sequence), _int64s(batch.column("epoch")),
            _int64s(batch.column("coordinator_epoch")), _int64s(batch.column("offset")), types,
            _int64s(batch.column("max_timestamp")), _int64s(batch.column("last_sequence")),
            _int64s(batch.column("last_offset")), self.state,
        )
        columns: dict[str, pa.Array] = {"txn_seq": pa.array(txn_seq)}
        for row, (name, source) in enumerate([*MARKER_FIELDS.items(), *SEQUENCE_FIELDS.items()]):
            kind = batch.schema.field(source).type
            if name == "prev_marker_type":
                columns[name] = self.keys.marker_types.take(previous[row], kind)
            else:
                columns[name] = _values(previous[row], kind)
        for row, name in enumerate(MAXIMA, start=7):
            columns[name] = _values(previous[row], pa.int32())
        columns["is_late"] = pc.and_kleene(
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
        walked = pa.RecordBatch.from_arrays(list(batch.columns) + list(columns.values()),
                                            names=batch.schema.names + list(columns))
        return walked, slot


def ordered_pass(
    batches: Iterable[pa.RecordBatch], *, late_tolerance_ms: int, unsequenced_topics: tuple[str, ...] = ()
) -> Iterator[pa.RecordBatch]:
    """Each input batch with the pass's columns appended (see the module docstring).

    A data batch *with a sequence* has ``base_sequence >= 0`` and a topic not in
    ``unsequenced_topics`` (compacted topics, whose batches compaction removes). A transactional
    data batch is *late* when its newest record was created more than ``late_tolerance_ms``
    before the previous marker, or when its epoch is below that marker's.
    """
    for batch, _ in _walked(batches, _Walk(), late_tolerance_ms=late_tolerance_ms,
                            unsequenced_topics=unsequenced_topics):
        yield batch


def _walked(
    batches: Iterable[pa.RecordBatch], walk: _Walk, *, late_tolerance_ms: int, unsequenced_topics: tuple[str, ...]
) -> Iterator[tuple[pa.RecordBatch, np.ndarray]]:
    """``ordered_pass``'s batches, each with its rows' slots in ``walk``."""
    unsequenced = pa.array(unsequenced_topics, pa.string())
    for batch in batches:
        if batch.num_rows:
            yield walk.batch(batch, late_tolerance_ms, unsequenced)


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
(_SEQ, _FIRST, _LAST_DATA, _T_OFFSET, _T_TYPE, _T_EPOCH, _T_TS, _COORD, _MIN_EPOCH, _MAX_EPOCH, _BATCHES, _RECORDS,
 _BYTES, _FIRST_TS, _LAST_TS, _LATE, _FIRST_LATE, _P_OFFSET, _P_TYPE, _P_TS, _EVENT_TS) = range(len(TXN_FIELDS))
#: bookkeeping after the fields: the broker of its last row, its key's slot
_BROKER, _SLOT = len(TXN_FIELDS), len(TXN_FIELDS) + 1
_ACC = len(TXN_FIELDS) + 2
#: ``_OpenTransactions.counters``: how many rows are free, how many rows have ever been taken
_FREE, _TAKEN = 0, 1
_INT32_FIELDS = ("marker_epoch", "coordinator_epoch", "min_epoch", "max_epoch")
_COUNTS = ("batches", "records", "bytes", "late_batches")


@numba.njit(cache=True, nogil=True)
def _lower(current: int, value: int) -> int:  # pragma: no cover - compiled
    return value if current == NONE or value < current else current


@numba.njit(cache=True, nogil=True)
def _aggregate(slot: np.ndarray, is_transactional: np.ndarray, is_marker: np.ndarray, txn_seq: np.ndarray,
               offset: np.ndarray, last_offset: np.ndarray, epoch: np.ndarray, record_count: np.ndarray,
               size_bytes: np.ndarray, first_ts: np.ndarray, max_ts: np.ndarray, marker_type: np.ndarray,
               coordinator_epoch: np.ndarray, is_late: np.ndarray, prev_offset: np.ndarray, prev_type: np.ndarray,
               prev_ts: np.ndarray, broker: np.ndarray, row_of: np.ndarray, accs: np.ndarray, free: np.ndarray,
               counters: np.ndarray) -> np.ndarray:  # pragma: no cover - compiled
    """Transactions ended in this batch, one column each (``TXN_FIELDS`` + bookkeeping): a
    marker ends its producer's transaction. Each key's open transaction is a row of ``accs``
    (``row_of[slot]``, -1: none), from batch to batch; a marker frees its row. What is open at
    the end of the stream is open. See ``_OpenTransactions`` for ``free`` and ``counters``."""
    n = slot.shape[0]
    out = np.empty((accs.shape[1], n), np.int64)
    ended = 0
    for i in range(n):
        if not is_transactional[i]:
            continue
        row = row_of[slot[i]]
        if row < 0:
            if counters[_FREE]:
                counters[_FREE] -= 1
                row = free[counters[_FREE]]
            else:
                row = counters[_TAKEN]
                counters[_TAKEN] += 1
            row_of[slot[i]] = row
            acc = accs[row]
            acc[:] = NONE
            acc[_SLOT] = slot[i]
            acc[_SEQ] = txn_seq[i]
            acc[_BATCHES], acc[_RECORDS], acc[_BYTES], acc[_LATE] = 0, 0, 0, 0
            # the transaction's first row says which marker came before it
            acc[_P_OFFSET], acc[_P_TYPE], acc[_P_TS] = prev_offset[i], prev_type[i], prev_ts[i]
        acc = accs[row]
        acc[_BROKER] = broker[i]
        acc[_EVENT_TS] = max_ts[i]
        if is_marker[i]:
            acc[_T_OFFSET], acc[_T_TYPE], acc[_T_EPOCH], acc[_T_TS] = offset[i], marker_type[i], epoch[i], max_ts[i]
            acc[_COORD] = coordinator_epoch[i]
            out[:, ended] = acc
            ended += 1
            row_of[slot[i]] = -1
            free[counters[_FREE]] = row
            counters[_FREE] += 1
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


def txn_fields(string: pa.DataType = pa.string()) -> list[pa.Field]:  # noqa: B008 - a type, immutable
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
    expected = np.where(prev_last == INT32_MAX, 0, prev_last + 1)
    continues = ((epoch == prev_epoch) & (base == expected)) | ((epoch > prev_epoch) & (base == 0))
    sequence = (prev_epoch != NONE) & ~continues
    maxima = [_int64s(batch.column(name)) for name in MAXIMA]
    fenced = (epoch < maxima[0]) | (epoch < maxima[1])
    coordinator = _bools(batch.column("is_marker")) & (_int64s(batch.column("coordinator_epoch")) < maxima[2])
    flagged: np.ndarray = _bools(batch.column("is_late")) | sequence | fenced | coordinator
    return flagged


class _OpenTransactions:
    """The running aggregates of the transactions open now, one row each, rather than one per
    key: most of a replica's producers have no transaction open at a time, and many never open
    one. A marker's row goes on a free stack for the next transaction that opens."""

    def __init__(self) -> None:
        self.row_of = np.empty(0, np.int64)  # per key's slot: its open transaction's row, -1: none
        self.accs = np.empty((0, _ACC), np.int64)
        self.free = np.empty(0, np.int64)  # a stack of the rows free again
        self.counters = np.zeros(2, np.int64)  # _FREE, _TAKEN

    def make_room(self, keys: int, rows: int) -> None:
        """Room for ``keys`` keys and for ``rows`` more transactions to open."""
        self.row_of = _grown(self.row_of, keys, np.int64(-1))
        taken = int(self.counters[_TAKEN]) + rows
        self.accs = _grown(self.accs, taken, np.full(_ACC, NONE, np.int64))
        self.free = _grown(self.free, taken, np.int64(0))

    def still_open(self, keys: int) -> np.ndarray:
        """The open transactions' rows, one column each, in slot order."""
        rows = self.row_of[:keys]
        return np.ascontiguousarray(self.accs[rows[rows >= 0]].T)


def transaction_pass(
    batches: Iterable[pa.RecordBatch], *, late_tolerance_ms: int, unsequenced_topics: tuple[str, ...] = ()
) -> Iterator[pa.RecordBatch]:
    """``ordered_pass`` reduced to what reconstruction and detection need: batches of two
    struct columns, ``event`` (the pass's rows a rule may flag, see ``_candidates``) and
    ``txn`` (one per transaction of a (topic, partition, producer): ``KEY_COLUMNS``, ``txn_fields``);
    each output row has one of them, the other is null. Transactions are taken over the rows
    with the transactional flag and the markers, in offset order. A key's rows must come in
    offset order; the rows of different keys may interleave (each key keeps its own state)."""
    walk = _Walk()
    open_transactions = _OpenTransactions()
    types: tuple[pa.StructType, pa.StructType] | None = None  # of the event and txn columns
    for batch, slot in _walked(batches, walk, late_tolerance_ms=late_tolerance_ms,
                               unsequenced_topics=unsequenced_topics):
        if types is None:
            types = (pa.struct(list(batch.schema)),
                     pa.struct(list(batch.select(list(KEY_COLUMNS)).schema)
                               + txn_fields(batch.schema.field("marker_type").type)))
        open_transactions.make_room(len(walk.keys), batch.num_rows)
        ended = _aggregate(
            slot, _bools(batch.column("is_transactional")), _bools(batch.column("is_marker")),
            _int64s(batch.column("txn_seq")), _int64s(batch.column("offset")), _int64s(batch.column("last_offset")),
            _int64s(batch.column("epoch")), _int64s(batch.column("record_count")),
            _int64s(batch.column("size_bytes")), _int64s(batch.column("first_timestamp")),
            _int64s(batch.column("max_timestamp")), _marker_codes(batch.column("marker_type")),
            _int64s(batch.column("coordinator_epoch")), _bools(batch.column("is_late")),
            _int64s(batch.column("prev_marker_offset")), _marker_codes(batch.column("prev_marker_type")),
            _int64s(batch.column("prev_marker_timestamp")), _int64s(batch.column("broker_id")),
            open_transactions.row_of, open_transactions.accs, open_transactions.free, open_transactions.counters,
        )
        events = batch.filter(pa.array(_candidates(batch)))
        if events.num_rows:
            struct = pa.StructArray.from_arrays(events.columns, fields=list(events.schema))
            yield pa.RecordBatch.from_arrays([struct, pa.nulls(events.num_rows, types[1])], names=["event", "txn"])
        if ended.shape[1]:
            yield _txn_batch(ended, walk.keys, types)
    if types is not None:
        still_open = open_transactions.still_open(len(walk.keys))
        if still_open.shape[1]:  # each key's last transaction, without a marker
            yield _txn_batch(still_open, walk.keys, types)


def _txn_batch(ended: np.ndarray, keys: _Keys, types: tuple[pa.StructType, pa.StructType]) -> pa.RecordBatch:
    """Output rows of the ``ended`` transactions (one column each), keyed by their slots."""
    event_type, txn_type = types
    slots = ended[_SLOT]
    key_values = {
        "topic": keys.topics.take(keys.topic_code[slots], txn_type.field("topic").type),
        "partition": _values(keys.partition[slots], txn_type.field("partition").type),
        "producer_id": _values(keys.producer_id[slots], txn_type.field("producer_id").type),
        "broker_id": _values(ended[_BROKER], txn_type.field("broker_id").type),
    }
    columns = [key_values[k] for k in KEY_COLUMNS]
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
    return pa.RecordBatch.from_arrays([pa.nulls(len(slots), event_type), txn], names=["event", "txn"])
