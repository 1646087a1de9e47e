"""What follows each Prepare* record on a partition, from the markers a pass task reads (no pyspark here).

A coordinator's Prepare* record lists the partitions that are to get its marker. On each, the
producer's next event by time (Prepare* records of one time first, in log order; markers of
one time in offset order) is either a marker, of the prepared epoch or not, or another
Prepare*, or nothing. The producer pass already reads every marker of its replica, so its
tasks answer this for the Prepare* records of their partition, as the markers go by, keeping
only one candidate per Prepare* record: the first marker at or after its time. Each answer
carries its Prepare* record, so the rules read the answers as they are: Spark need not read,
join and order every marker, nor order the coordinator log a second time
(``tests/audit/spark_matching.py`` does so, as the tests' reference).

The Prepare* records reach the pass's tasks as files: the coordinator pass's tasks write them
(``PrepareFile``: ordered by partition, so that the row groups of a few partitions are all a
reader reads, pyarrow skipping the others by their statistics), and each pass task reads those
of its partitions (``read_prepares``). The answers go to files the same way (``FOLLOW_FIELDS``).
"""

from __future__ import annotations

from collections.abc import Iterable
from types import TracebackType

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds

from txn_audit.replica_tasks.commit import TableFile, located
from txn_audit.replica_tasks.reading import int_values
from txn_audit.schemas import repeating_columns, writer_options

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
#: the Parquet writer's options for the files of Prepare* records and of their answers: names,
#: ids, epochs and states as dictionaries, offsets and times as deltas (``schemas.writer_options``:
#: the realistic 4 GiB dump's 990,736 Prepare* rows in 4.5 MB instead of 15.8 MB as pyarrow's
#: dictionaries of every column, written in 0.20 s instead of 0.36 s and read in 0.08 s instead
#: of 0.34 s on one core)
PREPARE_WRITER_OPTIONS = writer_options(PREPARE_FIELDS, repeating_columns(PREPARE_FIELDS))
FOLLOW_WRITER_OPTIONS = writer_options(FOLLOW_FIELDS, repeating_columns(FOLLOW_FIELDS))
#: the Prepare* state that decides COMMIT, and the markers it and any other decide
COMMIT_STATE, COMMIT_MARKER, ABORT_MARKER = "PrepareCommit", "COMMIT", "ABORT"

#: rows of Prepare* records a task holds before it sorts and writes them; and per row group
PREPARE_CHUNK_ROWS = 1_048_576
PREPARE_ROW_GROUP = 65_536


class PrepareFile:
    """One task's Prepare* records (``PREPARE_FIELDS``), written as the file ``directory/name``
    (``replica_tasks.commit.TableFile``): in chunks of ``PREPARE_CHUNK_ROWS``, each ordered by
    topic and partition, in row groups of ``PREPARE_ROW_GROUP``."""

    def __init__(self, directory: str, name: str) -> None:
        self.file = TableFile(directory, name, PREPARE_FIELDS, PREPARE_WRITER_OPTIONS)
        self._held: list[pa.Table] = []
        self._rows = 0

    def __enter__(self) -> PrepareFile:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        if kind is None:
            self._flush()
        self.file.__exit__(kind, error, trace)

    def add(self, prepares: pa.Table) -> None:
        self._held.append(prepares)
        self._rows += prepares.num_rows
        if self._rows >= PREPARE_CHUNK_ROWS:
            self._flush()

    def _flush(self) -> None:
        if self._rows:
            rows = pa.concat_tables(self._held)
            order = pc.sort_indices(rows, [("topic", "ascending"), ("partition", "ascending")])
            self.file.add(rows.take(order), row_group_size=PREPARE_ROW_GROUP)
        self._held, self._rows = [], 0


def _partition_keys(rows: pa.Table) -> pa.ChunkedArray:
    """Each row's topic and partition as one string (null when either is null)."""
    keys: pa.ChunkedArray = pc.binary_join_element_wise(
        rows.column("topic"), pc.cast(rows.column("partition"), pa.string()), "\x00")
    return keys


def read_prepares(directory: str, partitions: Iterable[tuple[str, int]], *, elsewhere: bool = False) -> pa.Table:
    """The Prepare* records in the files of ``directory`` (``PREPARE_FIELDS``) on one of
    ``partitions`` (a topic and a partition each), or with ``elsewhere`` on none of them (a
    record without a topic or partition among them). The files are read for ``partitions``'
    topics (Parquet skips row groups of none of them), and the rows kept by their (topic,
    partition) looked up in a hash set: a filter expression with a term per topic costs a pass
    over the rows per term (a task of a dump of thousands of partitions, hundreds of topics)."""
    wanted = sorted(set(partitions))
    if not wanted and not elsewhere:
        return PREPARE_FIELDS.empty_table()
    filesystem, path = located(directory)
    files = ds.dataset(path, format="parquet", filesystem=filesystem, schema=PREPARE_FIELDS)
    topics = None if elsewhere else ds.field("topic").isin(sorted({topic for topic, _ in wanted}))
    rows = files.to_table(filter=topics, use_threads=False)
    named = pa.array([f"{topic}\x00{partition}" for topic, partition in wanted], pa.string())
    on = pc.fill_null(pc.is_in(_partition_keys(rows), value_set=named), False)  # no topic or partition: on none
    found: pa.Table = rows.filter(pc.invert(on) if elsewhere else on)
    return found


def decisions(states: pa.ChunkedArray | pa.Array) -> pa.ChunkedArray | pa.Array:
    """The marker type each Prepare* record's state decides (``transactions.prepare_decision``
    as arrays): ``COMMIT_MARKER`` for ``COMMIT_STATE``, else ``ABORT_MARKER``."""
    decided: pa.ChunkedArray | pa.Array = pc.if_else(pc.fill_null(pc.equal(states, COMMIT_STATE), False),
                                                     COMMIT_MARKER, ABORT_MARKER)
    return decided


def read_follows(directory: str, where: pc.Expression | None = None) -> pa.Table:
    """Every row the producer pass's tasks wrote into ``directory`` (``FOLLOW_FIELDS``), once it
    has been computed, or those that meet ``where`` (of ``FOLLOW_FIELDS``' columns; Parquet
    answers it from its row groups' statistics first), with each record's ``decision``
    (``decisions``)."""
    filesystem, path = located(directory)
    rows = ds.dataset(path, format="parquet", filesystem=filesystem, schema=FOLLOW_FIELDS).to_table(filter=where)
    return rows.append_column("decision", decisions(rows.column("state")))


_NONE = np.iinfo(np.int64).max  # no marker found yet: after every (time, offset)

#: a row's partition and producer as one value that sorts and compares: its topic's code
#: (``PartitionProducers``), partition and producer id (-1 for none)
PARTITION_PRODUCER = np.dtype([("topic", np.int64), ("partition", np.int64), ("producer", np.int64)])


def sorted_positions(known: np.ndarray, keys: np.ndarray) -> np.ndarray:
    """Each of ``keys``' place in ``known`` (sorted, each value once); -1 where absent."""
    at = np.searchsorted(known, keys)
    if not len(known):
        return np.full(len(keys), -1, np.int64)
    inside = np.minimum(at, len(known) - 1)
    return np.where((at < len(known)) & (known[inside] == keys), at, -1).astype(np.int64)


class PartitionProducers:
    """Rows' (topic, partition, producer id) as ``PARTITION_PRODUCER`` values; a topic's code is
    the order this object first saw it in, so that the values of one object compare across tables."""

    def __init__(self) -> None:
        self.topics: dict[str, int] = {}

    def of(self, rows: pa.Table | pa.RecordBatch) -> np.ndarray:
        topics = rows.column("topic")
        encoded = pc.dictionary_encode(topics.combine_chunks() if isinstance(topics, pa.ChunkedArray) else topics)
        codes = np.array([self.topics.setdefault(topic, len(self.topics)) for topic in encoded.dictionary.to_pylist()],
                         np.int64)
        keys = np.empty(rows.num_rows, PARTITION_PRODUCER)
        keys["topic"] = codes[pc.fill_null(encoded.indices, 0).to_numpy(zero_copy_only=False)] if len(codes) else -1
        for field, column in (("partition", "partition"), ("producer", "producer_id")):
            keys[field] = pc.fill_null(rows.column(column), -1).to_numpy(zero_copy_only=False)
        return keys


class PrepareFollower:
    """The Prepare* records of a task's partitions (and share of producers), and for each the
    first marker of its producer on its partition at or after its time among the markers ``add``
    was given. A producer on a partition is one ``PARTITION_PRODUCER`` value, coded here as its
    place among the records' (``producers``), so that the records of many partitions are
    followed at once."""

    def __init__(self, prepares: pa.Table) -> None:
        self.keys = PartitionProducers()
        # the records' partitions and producers, each once, sorted: a producer's code is its place
        self.known, codes = np.unique(self.keys.of(prepares), return_inverse=True)
        # producer, then time (an untimed record first, as Spark sorts nulls), then log order
        columns = [pc.fill_null(prepares.column(name), -1).to_numpy() for name in
                   ("txn_log_offset", "txn_log_partition", "ts")]
        timed = pc.is_valid(prepares.column("ts")).to_numpy(zero_copy_only=False)
        order = np.lexsort((columns[0], columns[1], columns[2], timed, codes))
        self.prepares = prepares.take(pa.array(order, pa.int64()))
        self.producers = codes[order].astype(np.int64)
        self.timed = pc.is_valid(self.prepares.column("ts")).to_numpy(zero_copy_only=False)
        self.times = pc.fill_null(self.prepares.column("ts"), 0).to_numpy()
        n = self.prepares.num_rows
        # the best candidate so far: its time and offset (``_NONE``: none yet), epoch and type
        self.marker_ts = np.full(n, _NONE, np.int64)
        self.marker_offset = np.full(n, _NONE, np.int64)
        self.marker_epoch = np.zeros(n, np.int64)
        self.marker_epoch_known = np.zeros(n, bool)
        self.marker_type = np.full(n, None, object)
        self.wanted = np.unique(self.producers[self.timed])

    def add(self, rows: pa.RecordBatch) -> None:
        """Pass input rows (``ordered_pass.PASS_INPUT``), in any order: their markers are seen."""
        if not len(self.wanted) or not rows.num_rows:
            return
        producers = sorted_positions(self.known, self.keys.of(rows))  # -1: no record's
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
        # each Prepare* record is at most once among ``prepare``
        chosen = pa.array(marker, pa.int64())
        self.marker_epoch[prepare], self.marker_epoch_known[prepare] = int_values(markers.column("epoch").take(chosen))
        self.marker_type[prepare] = markers.column("marker_type").take(chosen).to_numpy(zero_copy_only=False)

    def rows(self) -> pa.Table:
        """``FOLLOW_FIELDS`` for every Prepare* record: the marker found for it, unless none was
        (an untimed record, sorted before every marker, gets none) or the producer's next
        Prepare* record comes first (before a marker of its own time)."""
        found = self.marker_ts != _NONE
        next_first = np.zeros(found.size, bool)
        next_first[:-1] = (self.producers[1:] == self.producers[:-1]) & (self.times[1:] <= self.marker_ts[:-1])
        followed = found & ~next_first
        epochs, known = int_values(self.prepares.column("epoch"))
        comparable = followed & known & self.marker_epoch_known
        has_marker = pa.array(np.where(comparable, epochs == self.marker_epoch, False),
                              mask=followed & ~comparable)
        types = self.marker_type.copy()
        types[~followed] = None
        next_type = pa.array(types, pa.string())
        next_offset = pa.array(self.marker_offset, mask=~followed)
        return _with_outcomes(self.prepares, has_marker, next_type, next_offset)


def unfollowed(prepares: pa.Table) -> pa.Table:
    """``FOLLOW_FIELDS`` for Prepare* records on partitions no task reads: no marker follows them."""
    n = prepares.num_rows
    return _with_outcomes(prepares, pa.array(np.zeros(n, bool)), pa.nulls(n, pa.string()), pa.nulls(n, pa.int64()))


def _with_outcomes(prepares: pa.Table, has_marker: pa.Array, next_type: pa.Array, next_offset: pa.Array) -> pa.Table:
    """``prepares`` with the outcome columns (``OUTCOME_FIELDS``), in their order."""
    return pa.Table.from_arrays([*(prepares.column(f.name) for f in PREPARE_FIELDS), has_marker, next_type,
                                 next_offset], schema=FOLLOW_FIELDS)
