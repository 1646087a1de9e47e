"""``partition_transactions`` written by the producer pass's own tasks with pyarrow (no pyspark here).

When the pass reads the raw tables' files (``pass_files``), each task writes the transactions
of its items (replicas, or shares of a replica's producers) as one Parquet file of
``PARTITION_TRANSACTIONS``, in row groups of up to ``CHUNK_ROWS``. They then never go through
Spark: not handed to the JVM, kept in a checkpoint, joined, and written again by Spark's Parquet
writer, which alone took 3.3 s for the 3.4 M transactions of the 4 GiB benchmark. One file per
task, not per item: a broker of thousands of partitions, most of them small, would otherwise
write (and the summary and the stability read) thousands of small files.

A row needs its producer's last write on the partition (the newest event of the producer's
last transaction there), known only once the pass is past that producer. So an item's rows are
held (``TransactionFile``) until the pass is done with the item, its last write per producer
kept, then completed and handed to the task's file; an item of more than ``CHUNK_ROWS`` rows
spills them to a local Arrow file and reads them back a chunk at a time: a worker holds one
chunk of rows at a time, whatever the number of transactions.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from types import TracebackType
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.ipc as ipc

from txn_audit.reconstruct.ordered_pass import transaction_pass
from txn_audit.reconstruct.pass_files import PASS_ITEM, group_input, item_pass, item_pieces, producer_rounds
from txn_audit.reconstruct.prepare_follows import (
    FOLLOW_FIELDS,
    FOLLOW_WRITER_OPTIONS,
    PREPARE_FIELDS,
    PartitionProducers,
    PrepareFollower,
    read_prepares,
    sorted_positions,
    unfollowed,
)
from txn_audit.replica_tasks.commit import TableFile, file_name
from txn_audit.replica_tasks.reading import READ_AHEAD, item_int, planned_groups
from txn_audit.schemas import PARTITION_TRANSACTIONS, in_ms, repeating_columns, writer_options

#: a transaction's state from its marker's type: any other type of marker still ends it
MARKER_STATES = {"COMMIT": "committed", "ABORT": "aborted"}
ENDED, OPEN = "ended", "open"
#: ``source`` of the transactions the log shows (the others come from producer snapshots)
FROM_LOG = "log"

#: rows spilled, and then written as one Parquet row group, at a time
CHUNK_ROWS = 131_072
#: columns whose values repeat (names, ids, epochs, states) keep dictionaries; offsets, times and
#: counts, nearly unique, are stored as deltas (``schemas.writer_options``, as the raw tables do:
#: the realistic 4 GiB dump's 990,739 transactions in 8.8 MB of files against 42.9 MB as plain
#: values, written in 0.24 against 0.29 s and read in 0.07 against 0.11 s on one core)
DICTIONARY_COLUMNS = repeating_columns(PARTITION_TRANSACTIONS)
WRITER_OPTIONS = writer_options(PARTITION_TRANSACTIONS, DICTIONARY_COLUMNS)


def transaction_states(marker_types: pa.Array | pa.ChunkedArray) -> pa.Array:
    """``state`` from ``marker_type``: committed, aborted, ended (a marker of another type), or
    open (no marker)."""
    states = pc.if_else(pc.is_valid(marker_types), ENDED, OPEN)
    for marker_type, state in MARKER_STATES.items():
        states = pc.if_else(pc.fill_null(pc.equal(marker_types, marker_type), False), state, states)
    return states


class _Lookup:
    """Values by key: a producer id, or a ``PARTITION_PRODUCER`` (a key absent: null)."""

    def __init__(self, keys: np.ndarray, values: pa.Array) -> None:
        """A key given twice takes its first value."""
        order = np.argsort(keys, kind="stable")
        self.keys = keys[order]
        self.values = values.take(pa.array(order))

    def take(self, keys: np.ndarray) -> pa.Array:
        at = sorted_positions(self.keys, keys)
        return self.values.take(pa.array(np.maximum(at, 0), mask=at < 0))


def known_ids(producer_ids: pa.Table) -> _Lookup:
    """Transactional ids by producer id, from a table with both columns (``schemas.PRODUCER_IDS``)."""
    if producer_ids.num_rows == 0:
        return _Lookup(np.empty(0, np.int64), pa.array([], pa.string()))
    keys = pc.fill_null(producer_ids.column("producer_id").cast(pa.int64()), -1).to_numpy(zero_copy_only=False)
    return _Lookup(keys, producer_ids.column("transactional_id").combine_chunks().cast(pa.string()))


class TransactionFile:
    """One item's or group's transactions (``ordered_pass.transaction_pass``'s ``txn`` rows of a
    replica or share, or of a group of replicas of different partitions, in the pass's order, in
    which each producer's transactions on a partition come in their order, its last one last),
    completed on ``close`` and handed to ``written`` (the task's file) as ``PARTITION_TRANSACTIONS``
    rows. Held in memory up to ``CHUNK_ROWS`` rows, spilled to a local Arrow file beyond."""

    def __init__(self, written: TableFile, transactional_ids: _Lookup) -> None:
        self.written, self.transactional_ids = written, transactional_ids
        self.rows = 0
        self._closed = False
        self._spill: tempfile.TemporaryDirectory[str] | None = None
        self._writer: ipc.RecordBatchFileWriter | None = None
        self._pending: list[pa.RecordBatch] = []
        self._pending_rows = 0
        # one (producer on a partition, newest event of its last transaction so far) per producer
        # on a partition and chunk: ``PARTITION_PRODUCER`` values
        self._keys = PartitionProducers()
        self._last_producers: list[np.ndarray] = []
        self._last_events: list[pa.Array] = []

    def __enter__(self) -> TransactionFile:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        try:
            if kind is None:
                self.close()
        finally:
            if self._writer is not None:
                self._writer.close()
            if self._spill is not None:
                self._spill.cleanup()

    def add(self, txns: pa.RecordBatch) -> None:
        """Rows of ``KEY_COLUMNS`` + ``ordered_pass.txn_fields()``, in the pass's order."""
        if not txns.num_rows:
            return
        producers = self._keys.of(txns)
        last = np.append(producers[1:] != producers[:-1], True)  # the last row of each run of one producer
        self._last_producers.append(producers[last])
        self._last_events.append(txns.column("last_event_timestamp").filter(pa.array(last)))
        self._pending.append(txns)
        self._pending_rows += txns.num_rows
        self.rows += txns.num_rows
        if self._pending_rows >= CHUNK_ROWS:
            self._spill_pending()

    def _spill_pending(self) -> None:
        chunk = pa.Table.from_batches(self._pending).combine_chunks().to_batches()[0]
        if self._writer is None:
            self._spill = tempfile.TemporaryDirectory(prefix="txn-audit-txns-")
            self._writer = ipc.new_file(os.path.join(self._spill.name, "rows.arrow"), chunk.schema)
        self._writer.write_batch(chunk)
        self._pending, self._pending_rows = [], 0

    def close(self) -> int:
        """Hand the completed rows to the task's file, once; the number of rows."""
        if not self.rows or self._closed:
            return self.rows
        self._closed = True
        last_writes = self._last_writes()
        if self._writer is None:  # every row held
            for batch in self._pending:
                self.written.add(self._completed(batch, last_writes))
            self._pending = []
            return self.rows
        if self._pending:
            self._spill_pending()
        self._writer.close()
        self._writer = None
        assert self._spill is not None
        with pa.OSFile(os.path.join(self._spill.name, "rows.arrow")) as source:  # chunk by chunk, not mapped
            spilled = ipc.open_file(source)
            for index in range(spilled.num_record_batches):
                self.written.add(self._completed(spilled.get_batch(index), last_writes))
        return self.rows

    def _last_writes(self) -> _Lookup:
        """Each producer's last write on each partition: the newest event of its last transaction
        there (later chunks hold later transactions, so the last pair of a producer wins)."""
        producers = np.concatenate(self._last_producers)[::-1]
        events = pa.concat_arrays(self._last_events)[::-1]
        unique, first = np.unique(producers, return_index=True)
        return _Lookup(unique, events.take(pa.array(first)))

    def _completed(self, rows: pa.RecordBatch, last_writes: _Lookup) -> pa.Table:
        producers = rows.column("producer_id").to_numpy(zero_copy_only=False)
        added = {
            "transactional_id": self.transactional_ids.take(producers),
            "state": transaction_states(rows.column("marker_type")),
            "producer_last_timestamp": last_writes.take(self._keys.of(rows)),
            "source": pa.repeat(pa.scalar(FROM_LOG), rows.num_rows),
        }
        schema = in_ms(PARTITION_TRANSACTIONS)  # typed as it is written by ``TableFile``
        columns = [added[f.name] if f.name in added else rows.column(f.name) for f in schema]
        return pa.Table.from_arrays([c if c.type == f.type else c.cast(f.type)
                                     for c, f in zip(columns, schema, strict=True)], schema=schema)


def pass_writing_transactions(items: Iterator[pa.RecordBatch], *, late_tolerance_ms: int,
                              unsequenced_topics: tuple[str, ...], directory: str, job: str,
                              output: pa.Schema, prepares_dir: str, follows_dir: str, strays_task: int,
                              read_partitions: Sequence[tuple[str, int]],
                              producer_ids: pa.Table) -> Iterator[pa.RecordBatch]:
    """``mapInArrow`` body: ``pass_files.PASS_ITEM`` rows in; out come the ``event``
    rows of each item, as rows of ``output`` (``event``, ``txn``; ``txn`` null). The task's
    transactions are written to one file in ``directory``, named after its first item's ``task``
    (``file_name(task, job)``). The task reads the
    Prepare* records of its items' partitions from the files in ``prepares_dir``
    (``prepare_follows.read_prepares``) and writes what follows each, for its item's partition
    and producers, to one file in ``follows_dir`` (``prepare_follows.FOLLOW_FIELDS``, named after
    its first item's ``task``). Item ``strays_task`` also writes a row, with no marker, for each
    record on none of ``read_partitions`` (every item's partition), so that every Prepare*
    record is followed once per partition it lists. ``producer_ids``: every known producer id and
    its transactional id (``schemas.PRODUCER_IDS``' first two columns), which the rows written take.
    Small items are passed over together (``item_groups``)."""
    work = [item for batch in items for item in batch.to_pylist()]
    if not work:
        return
    READ_AHEAD.plan(planned_groups(work, PASS_ITEM))  # the row groups the items read, a file's run at a time
    try:
        yield from _pass_writing(work, late_tolerance_ms=late_tolerance_ms, unsequenced_topics=unsequenced_topics,
                                 directory=directory, job=job, output=output, prepares_dir=prepares_dir,
                                 follows_dir=follows_dir, strays_task=strays_task, read_partitions=read_partitions,
                                 producer_ids=producer_ids)
    finally:
        READ_AHEAD.clear()


def _pass_writing(work: list[dict[str, Any]], *, late_tolerance_ms: int, unsequenced_topics: tuple[str, ...],
                  directory: str, job: str, output: pa.Schema, prepares_dir: str, follows_dir: str, strays_task: int,
                  read_partitions: Sequence[tuple[str, int]], producer_ids: pa.Table) -> Iterator[pa.RecordBatch]:
    """``pass_writing_transactions`` over its task's items ``work``."""
    known = known_ids(producer_ids)
    prepares = _by_partition(read_prepares(prepares_dir, {(str(item["topic"]), item_int(item, "partition"))
                                                          for item in work}))
    name = file_name(item_int(work[0], "task"), job)
    with TableFile(follows_dir, name, FOLLOW_FIELDS, FOLLOW_WRITER_OPTIONS, buffer_rows=CHUNK_ROWS) as follows, \
            TableFile(directory, name, PARTITION_TRANSACTIONS, WRITER_OPTIONS, buffer_rows=CHUNK_ROWS) as task_file:
        for group in item_groups(work):  # a group's replicas are of different partitions
            follower = PrepareFollower(pa.concat_tables([_prepares_of(item, prepares) for item in group]))
            with TransactionFile(task_file, known) as written:
                for out in _group_pass(group, follower, late_tolerance_ms, unsequenced_topics):
                    txn = out.column("txn")
                    if txn.null_count == len(txn):
                        yield out.cast(output)  # every batch of one task's output has one schema
                    else:
                        written.add(pa.RecordBatch.from_struct_array(txn))
            if follower.prepares.num_rows:  # partitions no Prepare* record lists have nothing to follow
                follows.add(follower.rows())
            if any(item_int(item, "task") == strays_task for item in group):
                follows.add(unfollowed(read_prepares(prepares_dir, read_partitions, elsewhere=True)))


#: items of fewer rows than this are passed over together, up to about this many rows in all: a
#: pass costs a few milliseconds of Arrow calls however few its rows, and a broker of thousands
#: of partitions is mostly small ones (``scale_bench.py``)
GROUP_ROWS = 65_536


def item_groups(work: Sequence[Mapping[str, object]],
                group_rows: int | None = None) -> Iterator[list[Mapping[str, object]]]:
    """``work``'s items in runs passed over together, in their order: consecutive items of one
    replica each (not a share of one) whose files give its rows in log order
    (``pass_files.item_pieces``), of fewer than ``group_rows`` rows (default ``GROUP_ROWS``)
    and passed over in one round (``pass_files.producer_rounds``), until the run holds that many
    rows or a second replica of one partition; any other item alone. The pass keeps each (topic,
    partition, producer, broker)'s state apart, so replicas of different partitions may follow one
    another in its input."""
    limit = GROUP_ROWS if group_rows is None else group_rows
    run: list[Mapping[str, object]] = []
    partitions: set[tuple[object, object]] = set()  # of the run's items
    rows = 0
    for item in work:
        small = (item_int(item, "shares") == 1 and item_int(item, "rows") < limit
                 and len(producer_rounds(item)) == 1 and item_pieces(item) is not None)
        if not small:
            if run:
                yield run
                run, partitions, rows = [], set(), 0
            yield [item]
            continue
        # a run holds one replica per partition: its transactions go back to their item by partition
        if run and (rows + item_int(item, "rows") > limit or _partition(item) in partitions):
            yield run
            run, partitions, rows = [], set(), 0
        run.append(item)
        partitions.add(_partition(item))
        rows += item_int(item, "rows")
    if run:
        yield run


def _partition(item: Mapping[str, object]) -> tuple[object, object]:
    return item["topic"], item["partition"]


def _group_pass(group: list[Mapping[str, object]], follower: PrepareFollower, late_tolerance_ms: int,
                unsequenced_topics: tuple[str, ...]) -> Iterator[pa.RecordBatch]:
    """``transaction_pass`` over ``group``: one item's rounds (``item_pass``), or the input rows
    of several items one after another, read and sorted together (``pass_files.group_input``), in
    one batch (shown to ``follower`` first): the pass costs a few milliseconds per
    batch, however few its rows (300 items of ``scale_bench``'s 2,050-partition dump: 2.2-2.7 s
    passed one by one, 1.1-1.2 s together)."""
    if len(group) == 1:
        yield from item_pass(group[0], late_tolerance_ms=late_tolerance_ms, unsequenced_topics=unsequenced_topics,
                             seen=follower.add)
        return

    def rows() -> Iterator[pa.RecordBatch]:
        together = group_input(group)
        for batch in together.to_batches():
            follower.add(batch)
            yield batch

    yield from transaction_pass(rows(), late_tolerance_ms=late_tolerance_ms, unsequenced_topics=unsequenced_topics)


def _by_partition(prepares: pa.Table) -> dict[tuple[object, object], pa.Table]:
    """``prepares`` (``PREPARE_FIELDS``) by topic and partition, split once for a task's items
    (a filter over them all for each item costs a pass over the task's records per item)."""
    ordered = prepares.sort_by([("topic", "ascending"), ("partition", "ascending")])
    keys = list(zip(ordered.column("topic").to_pylist(), ordered.column("partition").to_pylist(), strict=True))
    found: dict[tuple[object, object], pa.Table] = {}
    start = 0
    for end in range(1, len(keys) + 1):
        if end == len(keys) or keys[end] != keys[start]:
            found[keys[start]] = ordered.slice(start, end - start)
            start = end
    return found


#: the Prepare* records of a partition none lists
_NO_PREPARES = PREPARE_FIELDS.empty_table()


def _prepares_of(item: Mapping[str, object], prepares: Mapping[tuple[object, object], pa.Table]) -> pa.Table:
    """The Prepare* records of ``prepares`` (``_by_partition``) for ``item``'s partition and
    share of producers."""
    rows = prepares.get((item["topic"], item["partition"]), _NO_PREPARES)
    shares, share = item_int(item, "shares"), item_int(item, "share")
    if shares > 1:  # the share's producers, as ``pass_files`` reads them
        producers = pc.fill_null(rows.column("producer_id"), -1).to_numpy()
        rows = rows.filter(pa.array(producers % shares == share))
    return rows
