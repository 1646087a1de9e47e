"""The coordinator log read once, a ``__transaction_state`` partition at a time (no pyspark here).

Reconstruct derives three things from every coordinator record, each the answer of a window
over all of them (``transactions.prepare_records``, ``coordinator_current``,
``producer_transactional_ids``): every Prepare* record with its transactional id's next
record's state, the newest record of each id, and the newest transactional id of each
producer id; and the coordinator epoch rule a fourth (``transactions.epoch_candidates``). Each
is a shuffle and a sort of every record in Spark. Here a task reads a partition's records from
the files ingest wrote (``txn_audit.replica_tasks``), orders their row numbers by transactional
id and offset (``IdOrder``), and gives all four at once, as rows of ``COORDINATOR_PASS``, each
with one of its four columns set:

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
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from txn_audit.formats.model import LAST_PRODUCER_EPOCH, PREPARE_STATES
from txn_audit.formats.txn_state import txn_partitions_for
from txn_audit.reconstruct.prepare_follows import PREPARE_FIELDS, PrepareFile
from txn_audit.replica_tasks.commit import file_name
from txn_audit.replica_tasks.reading import int_values, item_int, replica_tables
from txn_audit.schemas import COORDINATOR_CURRENT, PRODUCER_IDS, REPLICA_COLUMNS, TXN_LOG, in_ms

#: the coordinator log as the pass computes with it: its times in epoch ms
_TXN_LOG = in_ms(TXN_LOG)

#: the newest record of a transactional id: the coordinator log's columns ``coordinator_current`` reads
CURRENT_FIELDS = pa.schema([_TXN_LOG.field(name).with_nullable(True) for name in (
    "transactional_id", "tombstone", "producer_id", "producer_epoch", "state", "topic_partitions", "txn_timeout_ms",
    "txn_start_timestamp", "txn_last_update_timestamp", "client_transaction_version", "offset", "partition")])
#: a producer id's newest record in a partition: what ``producer_transactional_ids`` reads
PRODUCER_FIELDS = pa.schema([_TXN_LOG.field(name).with_nullable(True) for name in (
    "producer_id", "transactional_id", "client_transaction_version", "offset")])
#: the coordinator log's columns of a record the epoch rule reads
EPOCH_RECORD = (*REPLICA_COLUMNS, "offset", "file", "transactional_id", "producer_id", "producer_epoch", "state",
                "txn_last_update_timestamp", "client_transaction_version")
#: a record the coordinator epoch rule may flag, with the id's previous record (of those that are
#: no tombstone: ``prev_*``) and the producer id of its newest (``now_producer_id``)
EPOCH_FIELDS = pa.schema([
    *[_TXN_LOG.field(name).with_nullable(True) for name in EPOCH_RECORD],
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
#: the ``PREPARE_FIELDS`` a Prepare* record gives each of its ``prepare`` rows, and its column of each
_PREPARE_COLUMNS = {
    "producer_id": "producer_id",
    "epoch": "producer_epoch",
    "ts": "txn_last_update_timestamp",
    "txn_log_partition": "partition",
    "txn_log_offset": "offset",
    "transactional_id": "transactional_id",
    "state": "state",
    "started": "txn_start_timestamp",
    "timeout_ms": "txn_timeout_ms",
}
#: the string columns of ``_READ`` a task reads dictionary-encoded, as ingest writes them
#: (``schemas.dictionary_columns``): a partition's records name few files, replicas, states and ids
_DICTIONARIES = ("file", "log_dir", "topic", "state", "transactional_id")


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
    """``item``'s records, the columns the pass reads; those of strings that repeat (``_DICTIONARIES``)
    as the files' dictionaries, decoded only in the rows the pass gives."""
    parts = list(replica_tables(item, _READ, dictionaries=_DICTIONARIES))
    return pa.concat_tables(parts, promote_options="permissive") if parts else pa.table({})


def partition_parts(records: pa.Table) -> Iterator[tuple[str, pa.StructArray]]:
    """What one partition's ``records`` (the coordinator log's columns ``_READ`` at least; string
    columns plain or dictionary-encoded) give: the values of each ``COORDINATOR_PASS`` column, in
    its order. The records are ordered by transactional id, then offset, as row numbers
    (``IdOrder``): only the rows each answer keeps are taken, never the whole partition."""
    if not records.num_rows:
        return
    ids = IdOrder.of(records)
    yield "prepare", _prepares(records, ids)
    yield "current", _struct(records.take(pa.array(ids.order[~ids.same_next])), CURRENT_FIELDS)
    yield "producer", _struct(records.take(pa.array(_newest_per_producer(records, ids.order))), PRODUCER_FIELDS)
    yield "epoch", _struct(epoch_candidates(records, ids), EPOCH_FIELDS)


@dataclass(frozen=True)
class IdOrder:
    """A partition's records ordered by transactional id (nulls last), then offset, as row
    numbers, rows of one id and offset in their order (as ``pc.sort_indices`` orders them)."""

    order: np.ndarray  # the row numbers in that order
    same_next: np.ndarray  # per place of ``order``: the next row is of the same id (never a null one)
    keys: np.ndarray  # per row: its id's rank among the ids (``_id_keys``)
    known: np.ndarray  # per row: its id is not null

    @classmethod
    def of(cls, records: pa.Table) -> IdOrder:
        keys, known = _id_keys(records.column("transactional_id"))
        offsets, _ = int_values(records.column("offset"))
        order = np.lexsort((offsets, keys))
        return cls(order, _same_next(keys[order], known[order]), keys, known)


def _same_next(keys: np.ndarray, known: np.ndarray) -> np.ndarray:
    """Per place: the next place's key is the same known key."""
    same = np.zeros(keys.size, bool)
    same[:-1] = (keys[:-1] == keys[1:]) & known[:-1]
    return same


def _id_keys(ids: pa.ChunkedArray) -> tuple[np.ndarray, np.ndarray]:
    """Per row, a number that orders transactional ids as strings (equal for equal ids; nulls
    the highest), and whether the id is not null: the ids' distinct values are ranked once, the
    rows take their value's rank."""
    encoded = ids.combine_chunks()
    if not pa.types.is_dictionary(encoded.type):
        encoded = pc.dictionary_encode(encoded)
    ranks = pc.rank(encoded.dictionary, sort_keys="ascending", tiebreaker="dense").to_numpy(zero_copy_only=False)
    codes, known = int_values(encoded.indices)
    keys = np.where(known, ranks.astype(np.int64)[codes] if ranks.size else 0, ranks.size + 1)
    return keys, known


def _plain(values: pa.ChunkedArray | pa.Array) -> pa.Array:
    """``values`` as one array, a dictionary-encoded one decoded."""
    array = values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values
    return array.dictionary_decode() if pa.types.is_dictionary(array.type) else array


def _prepares(records: pa.Table, ids: IdOrder) -> pa.StructArray:
    """The ``prepare`` rows: each Prepare* record once per partition it lists, with the state of
    its id's next record, null when it is the id's newest."""
    order = ids.order
    states = records.column("state")
    is_prepare = pc.fill_null(pc.is_in(states, value_set=pa.array(PREPARE_STATES)), False).to_numpy(
        zero_copy_only=False)
    at = np.flatnonzero(is_prepare[order])  # places of the Prepare* records in the order
    following = np.minimum(at + 1, order.size - 1)
    next_state = pc.if_else(pa.array(ids.same_next[at]), _plain(states.take(pa.array(order[following]))),
                            pa.nulls(at.size, pa.string()))
    listed = records.column("topic_partitions").take(pa.array(order[at])).combine_chunks()
    parents = pc.list_parent_indices(listed)
    # each record's row once per partition it lists: only the columns given taken
    each = records.select(list(_PREPARE_COLUMNS.values())).take(
        pa.array(order[at][parents.to_numpy(zero_copy_only=False)]))
    tps = pc.list_flatten(listed)
    columns = {
        "topic": pc.struct_field(tps, "topic"),
        "partition": pc.struct_field(tps, "partition"),
        "next_state": next_state.take(parents),
        **{name: each.column(column) for name, column in _PREPARE_COLUMNS.items()},
    }
    return _struct(pa.table(columns), PREPARE_FIELDS)


def epoch_candidates(records: pa.Table, ids: IdOrder) -> pa.Table:
    """The ``epoch`` rows of ``records``: the records that are no tombstone whose epoch is the
    last or two above the id's previous such record's, in ``ids``' order."""
    tombstone = pc.fill_null(records.column("tombstone"), True).to_numpy(zero_copy_only=False)
    kept = ids.order[~tombstone[ids.order]]  # the records that are no tombstone, in the order
    count = kept.size
    same_next = _same_next(ids.keys[kept], ids.known[kept])
    same_prev = np.zeros(count, bool)  # the previous record is the same id's
    same_prev[1:] = same_next[:-1]
    last_of_id = ~same_next
    # each record's id's newest record: the last of its run of the id
    newest = np.minimum.accumulate(np.where(last_of_id, np.arange(count), count)[::-1])[::-1]
    epochs, has_epoch = int_values(records.column("producer_epoch").take(pa.array(kept)))
    previous = np.maximum(np.arange(count) - 1, 0)
    flagged = has_epoch & ((epochs == LAST_PRODUCER_EPOCH)
                           | (same_prev & has_epoch[previous] & (epochs == epochs[previous] + 2)))
    at = np.flatnonzero(flagged)
    before = pa.array(same_prev[at])

    def prev(name: str) -> pa.Array:
        values = _plain(records.column(name).take(pa.array(kept[previous[at]])))
        return pc.if_else(before, values, pa.nulls(at.size, values.type))

    candidates = records.take(pa.array(kept[at])).append_column(
        "now_producer_id", records.column("producer_id").take(pa.array(kept[newest[at]])))
    for name in ("state", "producer_id", "producer_epoch", "offset"):
        candidates = candidates.append_column(f"prev_{name}", prev(name))
    return candidates


def _newest_per_producer(records: pa.Table, order: np.ndarray) -> np.ndarray:
    """Per producer id: the row number of its newest record that is no tombstone (by offset,
    then the lowest transactional id), in producer id order. ``order``: the row numbers by
    transactional id (nulls last), then offset (``IdOrder``): of two records at one offset,
    the one first in that order has the lower id, so a sort of the kept rows' numbers
    (producer id, offset descending, place in the order) finds them."""
    producers = records.column("producer_id")
    kept = pc.fill_null(pc.and_(pc.invert(records.column("tombstone")), pc.greater_equal(producers, 0)), False)
    places = np.flatnonzero(kept.to_numpy(zero_copy_only=False)[order])
    if not places.size:
        return places
    rows = order[places]
    ids, _ = int_values(producers.take(pa.array(rows)))
    offsets, known = int_values(records.column("offset").take(pa.array(rows)))
    # offset descending, an absent one last (as sort_indices places nulls)
    later_first = np.where(known, -offsets, np.iinfo(np.int64).max)
    by_producer = np.lexsort((places, later_first, ids))
    first = np.ones(by_producer.size, bool)
    first[1:] = ids[by_producer][1:] != ids[by_producer][:-1]
    return rows[by_producer][first]


def _struct(table: pa.Table, fields: pa.Schema) -> pa.StructArray:
    """``table``'s columns of ``fields``, cast to them, as one struct array."""
    return pa.StructArray.from_arrays([table.column(f.name).combine_chunks().cast(f.type) for f in fields],
                                      fields=list(fields))


def _only(column: str, values: pa.Array) -> pa.RecordBatch:
    """``COORDINATOR_PASS`` rows with ``values`` in ``column`` and the others null."""
    return pa.RecordBatch.from_arrays(
        [values if f.name == column else pa.nulls(len(values), f.type) for f in COORDINATOR_PASS],
        schema=COORDINATOR_PASS)


#: the states whose records list partitions: those still awaiting markers
LISTING_STATES = ("Ongoing", *PREPARE_STATES)


def partition_names(topics: pa.Array, partitions: pa.Array) -> pa.Array:
    """``<topic>-<partition>``, null when either is."""
    return pc.binary_join_element_wise(topics, pc.cast(partitions, pa.string()), "-")


def listed_partitions(states: pa.Array, topic_partitions: pa.Array) -> pa.ListArray:
    """The ``partition_names`` each record lists: those of its ``topic_partitions`` in an Ongoing or
    Prepare* state (``LISTING_STATES``), none in another (an empty list, never null)."""
    lists = topic_partitions.cast(_TXN_LOG.field("topic_partitions").type)
    listing = pc.and_(pc.fill_null(pc.is_in(states, value_set=pa.array(LISTING_STATES)), False), pc.is_valid(lists))
    lengths = np.where(listing.to_numpy(zero_copy_only=False),
                       pc.fill_null(pc.list_value_length(lists), 0).to_numpy(zero_copy_only=False), 0)
    # a null element names no partition: its fields are null too (``flatten`` applies its validity)
    topics, partitions = lists.filter(listing).flatten().flatten()
    offsets = pa.array(np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32))
    return pa.ListArray.from_arrays(offsets, partition_names(topics, partitions))


def _first_of_each(rows: pa.Table, key: str, order: list[tuple[str, str]]) -> pa.Table:
    """The first row of each value of ``key`` (null one value too) in ``order``
    (``pyarrow.compute.sort_indices`` keys: a null last), in ``key`` order."""
    ordered = rows.take(pc.sort_indices(rows, sort_keys=[(key, "ascending"), *order]))
    places = pa.table({key: ordered.column(key), "_at": pa.array(np.arange(ordered.num_rows, dtype=np.int64))})
    first = places.group_by(key, use_threads=False).aggregate([("_at", "min")]).column("_at_min")
    return ordered.take(pa.array(np.sort(first.to_numpy())))


def newest_current(current: pa.Table) -> pa.Table:
    """``COORDINATOR_CURRENT``: each transactional id's newest record (in the highest partition
    of the log, then at the highest offset), from the pass's ``current`` rows (``CURRENT_FIELDS``:
    the newest of each id in each partition)."""
    newest = _first_of_each(current.select(CURRENT_FIELDS.names).cast(CURRENT_FIELDS), "transactional_id",
                            [("partition", "descending"), ("offset", "descending")])
    columns = {name: newest.column(name) for name in CURRENT_FIELDS.names}
    columns["listed"] = listed_partitions(newest.column("state").combine_chunks(),
                                          newest.column("topic_partitions").combine_chunks())
    columns["txn_log_offset"], columns["txn_log_partition"] = columns["offset"], columns["partition"]
    return pa.table([columns[f.name] for f in COORDINATOR_CURRENT], schema=COORDINATOR_CURRENT)


def newest_producer_ids(producers: pa.Table) -> pa.Table:
    """``PRODUCER_IDS``: each producer id's transactional id from its newest record (the highest
    offset, then the lowest transactional id, a null one first), from the pass's ``producer``
    rows (``PRODUCER_FIELDS``: the newest of each producer id in each partition). TV2 when the
    record's client spoke it."""
    rows = producers.select(PRODUCER_FIELDS.names).cast(PRODUCER_FIELDS)
    rows = rows.append_column("_named", pc.is_valid(rows.column("transactional_id")))
    newest = _first_of_each(rows, "producer_id", [("offset", "descending"), ("_named", "ascending"),
                                                   ("transactional_id", "ascending")])
    tv2 = pc.fill_null(pc.greater_equal(newest.column("client_transaction_version"), 2), False)
    return pa.table([newest.column("producer_id"), newest.column("transactional_id"),
                     pc.if_else(tv2, 2, 1).cast(pa.int32())], schema=PRODUCER_IDS)
