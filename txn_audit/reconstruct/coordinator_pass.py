"""The coordinator log read once, a ``__transaction_state`` partition at a time (no pyspark here).

Reconstruct derives three things from every coordinator record, each the answer of a window
over all of them (``transactions.prepare_records``, ``coordinator_current``,
``producer_transactional_ids``): every Prepare* record with its transactional id's next
record's state, the newest record of each id, and the newest transactional id of each
producer id; and the coordinator epoch rule a fourth (``transactions.epoch_candidates``). Each
is a shuffle and a sort of every record in Spark. Here a task reads a partition's records from
the files ingest wrote (``txn_audit.replica_tasks``), orders them by transactional id and offset
with pyarrow, and gives all four at once, as rows of ``COORDINATOR_PASS``, each with one of its
four columns set:

* ``prepare``: a Prepare* record, once per partition it lists (``PREPARE_FIELDS``), with the
  state of the id's next record in the partition (null when it is the newest there);
* ``current``: the newest record of each transactional id in the partition (``CURRENT_FIELDS``);
* ``producer``: for each producer id of the partition's records (tombstones and records without
  a producer id left out), its newest record's transactional id (``PRODUCER_FIELDS``), the
  lowest transactional id among records of one offset;
* ``epoch``: the records the coordinator epoch rule may flag (``EPOCH_FIELDS``): of the records
  that are no tombstone, those of the last epoch or two above the id's previous record's, each
  with that previous record and the producer id of the id's newest record.

The Prepare* records are the most of these (one per record and partition listed): when the
producer pass reads them from files, the tasks write them to files instead, which that pass's
tasks read, each those of its own partitions (``prepare_follows.PrepareFile``).

A transactional id's records are all in one partition of the log (its partition is the hash of
the id), so these are the windows' answers; ``transactions.CoordinatorLog`` checks that and
takes the windows when an id is in two partitions. To spare it a grouping of every ``current``
row, each task also gives a ``misplaced`` row: how many of its partition's transactional ids
are not on the partition their hash names (``txn_state.txn_partitions_for``) for the log's
partition count as the pass is told it (every id, when it is not told). When no id of any
partition is misplaced, no id can be in two partitions. Producer ids are chosen again across
partitions in Spark, over these few rows.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import ExitStack

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from txn_audit.formats.model import LAST_PRODUCER_EPOCH, PREPARE_STATES
from txn_audit.formats.txn_state import txn_partitions_for
from txn_audit.reconstruct.prepare_follows import PREPARE_FIELDS, PrepareFile
from txn_audit.replica_tasks.commit import file_name
from txn_audit.replica_tasks.reading import int_values, item_int, item_list, replica_filter, table_dataset
from txn_audit.schemas import REPLICA_COLUMNS, TXN_LOG

#: the newest record of a transactional id: the coordinator log's columns ``coordinator_current`` reads
CURRENT_FIELDS = pa.schema([TXN_LOG.field(name).with_nullable(True) for name in (
    "transactional_id", "tombstone", "producer_id", "producer_epoch", "state", "topic_partitions", "txn_timeout_ms",
    "txn_start_timestamp", "txn_last_update_timestamp", "client_transaction_version", "offset", "partition")])
#: a producer id's newest record in a partition: what ``producer_transactional_ids`` reads
PRODUCER_FIELDS = pa.schema([TXN_LOG.field(name).with_nullable(True) for name in (
    "producer_id", "transactional_id", "client_transaction_version", "offset")])
#: the coordinator log's columns of a record the epoch rule reads
EPOCH_RECORD = (*REPLICA_COLUMNS, "offset", "file", "transactional_id", "producer_id", "producer_epoch", "state",
                "txn_last_update_timestamp", "client_transaction_version")
#: a record the coordinator epoch rule may flag, with the id's previous record (of those that are
#: no tombstone: ``prev_*``) and the producer id of its newest (``now_producer_id``)
EPOCH_FIELDS = pa.schema([
    *[TXN_LOG.field(name).with_nullable(True) for name in EPOCH_RECORD],
    pa.field("now_producer_id", pa.int64()),
    pa.field("prev_state", pa.string()),
    pa.field("prev_producer_id", pa.int64()),
    pa.field("prev_producer_epoch", pa.int32()),
    pa.field("prev_offset", pa.int64()),
])
#: the pass's rows: one of the five columns set in each (see the module docstring); ``misplaced``,
#: one row per partition with records: how many of its transactional ids (its ``current`` rows)
#: are not on the partition their hash names, or are null
COORDINATOR_PASS = pa.schema([
    pa.field("prepare", pa.struct(list(PREPARE_FIELDS))),
    pa.field("current", pa.struct(list(CURRENT_FIELDS))),
    pa.field("producer", pa.struct(list(PRODUCER_FIELDS))),
    pa.field("epoch", pa.struct(list(EPOCH_FIELDS))),
    pa.field("misplaced", pa.int64()),
])
#: the columns a task reads
_READ = sorted({*CURRENT_FIELDS.names, *PRODUCER_FIELDS.names, *REPLICA_COLUMNS, "file"})


def coordinator_over_files(items: Iterator[pa.RecordBatch], *, prepares_dir: str | None = None,
                           job: str = "", partitions: int | None = None) -> Iterator[pa.RecordBatch]:
    """``mapInArrow`` body: ``replica_tasks.reading.REPLICA_FILES_ITEM`` rows (a partition replica of
    the coordinator log each) in, ``COORDINATOR_PASS`` rows of each out. With ``prepares_dir``,
    the ``prepare`` rows are not given but written there, the task's as one file
    (``prepare_follows.PrepareFile``) named after its first item's partition and ``job``
    (``replica_tasks.commit.file_name``; the items are the chosen replicas, one per partition).
    ``partitions``: the log's partition count, which places each transactional id (``misplaced``
    rows); None: not known, every id counts as misplaced."""
    with ExitStack() as stack:
        written: PrepareFile | None = None
        for batch in items:
            for item in batch.to_pylist():
                if prepares_dir is not None and written is None:
                    name = file_name(item_int(item, "partition"), job)
                    written = stack.enter_context(PrepareFile(prepares_dir, name))
                for column, values in partition_parts(_read(item)):
                    if written is not None and column == "prepare":
                        written.add(pa.Table.from_struct_array(values))
                    else:
                        yield _only(column, values)
                    if column == "current":
                        count = misplaced(values.field("transactional_id"), item_int(item, "partition"), partitions)
                        yield _only("misplaced", pa.array([count], pa.int64()))


def misplaced(transactional_ids: pa.Array, partition: int, partitions: int | None) -> int:
    """How many of ``transactional_ids`` (of a partition's records) are null or not on
    ``partition`` by Kafka's placement (``txn_state.txn_partitions_for``) among ``partitions``
    (None: not known, all of them)."""
    if partitions is None:
        return len(transactional_ids)
    known = transactional_ids.drop_null().to_pylist()
    placed = int(np.count_nonzero(txn_partitions_for(known, partitions) == partition))
    return len(transactional_ids) - placed


def _read(item: Mapping[str, object]) -> pa.Table:
    """``item``'s records, the columns the pass reads."""
    dataset = table_dataset(item_list(item, "files"))
    return dataset.to_table(columns=_READ, filter=replica_filter(item), use_threads=False,
                            batch_readahead=1, fragment_readahead=1)


def partition_parts(records: pa.Table) -> Iterator[tuple[str, pa.StructArray]]:
    """What one partition's ``records`` (the coordinator log's columns ``_READ`` at least) give:
    the values of each ``COORDINATOR_PASS`` column, in its order."""
    if not records.num_rows:
        return
    order = pc.sort_indices(records, [("transactional_id", "ascending"), ("offset", "ascending")])
    records = records.take(order).combine_chunks()
    ids = records.column("transactional_id").combine_chunks()
    count = records.num_rows
    # the next record is the same id's
    same_next = np.zeros(count, bool)
    if count > 1:
        same_next[:-1] = pc.fill_null(pc.equal(ids.slice(0, count - 1), ids.slice(1)), False).to_numpy(
            zero_copy_only=False)
    following = np.minimum(np.arange(1, count + 1), count - 1)
    next_state = pc.if_else(pa.array(same_next), records.column("state").take(pa.array(following)),
                            pa.nulls(count, pa.string()))
    yield "prepare", _prepares(records, next_state)
    yield "current", _struct(records.filter(pa.array(~same_next)), CURRENT_FIELDS)
    yield "producer", _struct(_newest_per_producer(records), PRODUCER_FIELDS)
    yield "epoch", _struct(epoch_candidates(records), EPOCH_FIELDS)


def _prepares(records: pa.Table, next_state: pa.ChunkedArray | pa.Array) -> pa.StructArray:
    """The ``prepare`` rows: each Prepare* record once per partition it lists."""
    is_prepare = pc.fill_null(pc.is_in(records.column("state"), pa.array(PREPARE_STATES)), False)
    prepares = records.append_column("next_state", next_state).filter(is_prepare)
    listed = prepares.column("topic_partitions").combine_chunks()
    parents = pc.list_parent_indices(listed)
    each = prepares.take(parents)
    tps = pc.list_flatten(listed)
    columns = {
        "topic": pc.struct_field(tps, "topic"),
        "partition": pc.struct_field(tps, "partition"),
        "producer_id": each.column("producer_id"),
        "epoch": each.column("producer_epoch"),
        "ts": each.column("txn_last_update_timestamp"),
        "txn_log_partition": each.column("partition"),
        "txn_log_offset": each.column("offset"),
        "transactional_id": each.column("transactional_id"),
        "state": each.column("state"),
        "next_state": each.column("next_state"),
        "started": each.column("txn_start_timestamp"),
        "timeout_ms": each.column("txn_timeout_ms"),
    }
    return _struct(pa.table(columns), PREPARE_FIELDS)


def epoch_candidates(records: pa.Table) -> pa.Table:
    """The ``epoch`` rows of ``records`` (ordered by transactional id, then offset): the records
    that are no tombstone whose epoch is the last or two above the id's previous such record's."""
    kept = records.filter(pc.invert(records.column("tombstone")))
    count = kept.num_rows
    if not count:
        return kept
    ids = kept.column("transactional_id").combine_chunks()
    same_prev = np.zeros(count, bool)  # the previous record is the same id's
    same_prev[1:] = pc.fill_null(pc.equal(ids.slice(1), ids.slice(0, count - 1)), False).to_numpy(
        zero_copy_only=False)
    last_of_id = np.append(~same_prev[1:], True)
    # each record's id's newest record: the last of its run of the id
    newest = np.minimum.accumulate(np.where(last_of_id, np.arange(count), count)[::-1])[::-1]
    previous = pa.array(np.maximum(np.arange(count) - 1, 0))
    before = pa.array(same_prev)

    def prev(name: str) -> pa.Array:
        values = kept.column(name).take(previous)
        return pc.if_else(before, values, pa.nulls(count, values.type))

    previous_record = {name: prev(name) for name in ("state", "producer_id", "producer_epoch", "offset")}
    epochs = kept.column("producer_epoch")
    flagged = pc.or_kleene(pc.equal(epochs, LAST_PRODUCER_EPOCH),
                           pc.equal(pc.cast(epochs, pa.int64()),
                                    pc.add(pc.cast(previous_record["producer_epoch"], pa.int64()), 2)))
    with_previous = kept.append_column("now_producer_id", kept.column("producer_id").take(pa.array(newest)))
    for name, values in previous_record.items():
        with_previous = with_previous.append_column(f"prev_{name}", values)
    return with_previous.filter(pc.fill_null(flagged, False))


def _newest_per_producer(records: pa.Table) -> pa.Table:
    """Per producer id: its newest record that is no tombstone (by offset, then the lowest
    transactional id). ``records`` are ordered by transactional id (nulls last), then offset: of
    two records at one offset, the one first in that order has the lower id, so a sort of the
    kept rows' numbers (producer id, offset descending, row) finds them, and only those rows are
    taken."""
    producers = records.column("producer_id")
    kept = pc.fill_null(pc.and_(pc.invert(records.column("tombstone")), pc.greater_equal(producers, 0)), False)
    rows = np.flatnonzero(kept.to_numpy(zero_copy_only=False))
    if not rows.size:
        return records.slice(0, 0)
    ids = producers.take(pa.array(rows)).to_numpy(zero_copy_only=False)
    offsets, known = int_values(records.column("offset").take(pa.array(rows)))
    # offset descending, an absent one last (as sort_indices places nulls)
    later_first = np.where(known, -offsets, np.iinfo(np.int64).max)
    order = np.lexsort((rows, later_first, ids))
    first = np.ones(order.size, bool)
    first[1:] = ids[order][1:] != ids[order][:-1]
    return records.take(pa.array(rows[order][first]))


def _struct(table: pa.Table, fields: pa.Schema) -> pa.StructArray:
    """``table``'s columns of ``fields``, cast to them, as one struct array."""
    return pa.StructArray.from_arrays([table.column(f.name).combine_chunks().cast(f.type) for f in fields],
                                      fields=list(fields))


def _only(column: str, values: pa.Array) -> pa.RecordBatch:
    """``COORDINATOR_PASS`` rows with ``values`` in ``column`` and the others null."""
    return pa.RecordBatch.from_arrays(
        [values if f.name == column else pa.nulls(len(values), f.type) for f in COORDINATOR_PASS],
        schema=COORDINATOR_PASS)
