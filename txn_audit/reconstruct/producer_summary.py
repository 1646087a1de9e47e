"""The ``transactions`` table: per producer id, what the partitions hold against what its
coordinator says now (no pyspark here).

Built on the driver with pyarrow from ``partition_transactions``' rows, read a batch at a time
(the files reconstruct wrote: a few columns of one row per transaction), and the coordinator's
answers (``COORDINATOR_CURRENT``, ``PRODUCER_IDS``: a row per transactional or producer id):

1. per producer id and partition: the highest epoch, whether any transaction holds data, how
   many are committed, aborted and open, the first and the last time seen (a transaction's last
   is its last batch's or its marker's, the later). Each batch is reduced on its own and the
   reductions are folded together as they grow (``COMBINE_ROWS``), so the driver holds about a
   row per producer and partition, not one per transaction;
2. per producer id: the same over its partitions, with the names of those with data and of
   those with an open transaction, each sorted (``<topic>-<partition>``);
3. its transactional id (``PRODUCER_IDS``) and that id's newest coordinator record that is no
   tombstone: its state and the partitions it lists, unless the id has since moved to another
   producer id (``ROTATED``: the producer id no longer owns the id's state), and its timeout.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from txn_audit.reconstruct.coordinator_pass import partition_names
from txn_audit.schemas import COORDINATOR_CURRENT, PARTITION_TRANSACTIONS, PRODUCER_IDS, TRANSACTIONS, in_ms

__all__ = ["COMBINE_ROWS", "COUNTED", "READ", "ROTATED", "per_partition", "summarize_producers"]

#: the columns of ``partition_transactions`` the summary reads
READ = ("producer_id", "topic", "partition", "max_epoch", "batches", "state", "first_timestamp", "last_timestamp",
        "marker_timestamp")
#: ``coordinator_state`` of a producer id whose transactional id's newest record names another
ROTATED = "Rotated"
#: the transaction states counted per producer, each in the column of its name
COUNTED = ("committed", "aborted", "open")
_KEY = ["producer_id", "topic", "partition"]
#: the batches' reductions are folded into one when they hold more rows than this, or than twice
#: the last fold (so that a fold of many producers is not repeated at every batch)
COMBINE_ROWS = 1 << 20
#: how each per-partition column is reduced, within a batch and then across batches
_REDUCED = {"producer_epoch": "max", "has_data": "any", **{state: "sum" for state in COUNTED},
            "first_timestamp": "min", "last_timestamp": "max"}


def _batch_rows(batch: pa.RecordBatch | pa.Table) -> pa.Table:
    """A batch of ``partition_transactions`` rows (``READ``) as the columns ``_REDUCED`` reduces."""
    states = batch.column("state")
    columns = {name: batch.column(name) for name in _KEY}
    columns["producer_epoch"] = batch.column("max_epoch")
    columns["has_data"] = pc.fill_null(pc.greater(batch.column("batches"), 0), False)
    for state in COUNTED:
        columns[state] = pc.fill_null(pc.equal(states, state), False).cast(pa.int64())
    columns["first_timestamp"] = batch.column("first_timestamp")
    columns["last_timestamp"] = pc.max_element_wise(batch.column("last_timestamp"), batch.column("marker_timestamp"))
    return pa.table(columns)


def _reduced(rows: pa.Table, keys: list[str]) -> pa.Table:
    """``rows`` reduced per ``keys`` as ``_REDUCED`` says, the columns keeping their names."""
    grouped = rows.group_by(keys).aggregate(list(_REDUCED.items()))
    names = {f"{name}_{how}": name for name, how in _REDUCED.items()}
    return grouped.rename_columns([names.get(name, name) for name in grouped.column_names])


def per_partition(batches: Iterable[pa.RecordBatch]) -> pa.Table:
    """Step 1: one row per producer id and partition of the ``partition_transactions`` rows in
    ``batches`` (``READ`` columns at least), with the ``_REDUCED`` columns."""
    parts: list[pa.Table] = []
    pending, limit = 0, COMBINE_ROWS
    for batch in batches:
        if not batch.num_rows:
            continue
        parts.append(_reduced(_batch_rows(batch), _KEY))
        pending += parts[-1].num_rows
        if pending > limit and len(parts) > 1:
            parts = [_reduced(pa.concat_tables(parts), _KEY)]
            pending, limit = parts[0].num_rows, max(COMBINE_ROWS, 2 * parts[0].num_rows)
    if len(parts) == 1:
        return parts[0]
    if not parts:
        return _reduced(_batch_rows(in_ms(PARTITION_TRANSACTIONS).empty_table()), _KEY)
    return _reduced(pa.concat_tables(parts), _KEY)


def _names_per_producer(partitions: pa.Table, where: pa.Array, column: str) -> pa.Table:
    """Per producer id among ``partitions`` rows that meet ``where``: their names, sorted."""
    kept = partitions.filter(where)
    named = pa.table({"producer_id": kept.column("producer_id"),
                      column: partition_names(kept.column("topic"), kept.column("partition"))})
    named = named.take(pc.sort_indices(named, sort_keys=[("producer_id", "ascending"), (column, "ascending")]))
    # the order of each list is its rows' when the grouping runs on one thread
    return named.group_by("producer_id", use_threads=False).aggregate([(column, "list")]).rename_columns(
        ["producer_id", column])


def _matching(keys: pa.ChunkedArray, rows: pa.Table, key: str) -> pa.Table:
    """For each of ``keys``, the row of ``rows`` with that ``key`` (``rows`` hold at most one
    each), or a row of nulls (no row, or a null key: a null matches nothing). By row number, so
    that columns of any type follow (pyarrow's join carries no list)."""
    left = pa.table({key: keys, "_left": pa.array(np.arange(len(keys), dtype=np.int64))})
    right = pa.table({key: rows.column(key), "_right": pa.array(np.arange(rows.num_rows, dtype=np.int64))})
    found = left.join(right, key, join_type="left outer")
    found = found.take(pc.sort_indices(found.column("_left")))
    return rows.take(found.column("_right"))


def summarize_producers(batches: Iterable[pa.RecordBatch], current: pa.Table, producer_ids: pa.Table) -> pa.Table:
    """``TRANSACTIONS`` rows, one per producer id of the ``partition_transactions`` rows in
    ``batches`` (``READ`` columns at least), ordered by producer id. ``current``: the coordinator's
    newest record per transactional id (``COORDINATOR_CURRENT``); ``producer_ids``: each producer
    id's transactional id (``PRODUCER_IDS``, one row per producer id)."""
    partitions = per_partition(batches)
    producers = _reduced(partitions, ["producer_id"])
    producers = producers.take(pc.sort_indices(producers.column("producer_id")))
    producer = producers.column("producer_id")
    columns = {name: producers.column(name) for name in producers.column_names}
    for where, column in ((partitions.column("has_data"), "partitions_with_data"),
                          (pc.greater(partitions.column("open"), 0), "open_partitions")):
        names = _matching(producer, _names_per_producer(partitions, where, column), "producer_id").column(column)
        columns[column] = pc.if_else(pc.is_valid(names), names, pa.scalar([], pa.list_(pa.string())))  # none: empty
    named = _matching(producer, producer_ids.select(PRODUCER_IDS.names).cast(PRODUCER_IDS), "producer_id")
    columns |= {"transactional_id": named.column("transactional_id"),
                "transaction_version": named.column("transaction_version")}
    # the newest record of the producer's transactional id that is no tombstone; every
    # coordinator row names its id (the log's key, a report's condition)
    coordinator = current.select(COORDINATOR_CURRENT.names).cast(COORDINATOR_CURRENT)
    newest = _matching(named.column("transactional_id"),
                       coordinator.filter(pc.invert(coordinator.column("tombstone"))), "transactional_id")
    owner = pc.fill_null(pc.equal(newest.column("producer_id"), producer), False)
    rotated = pc.if_else(pc.is_valid(newest.column("transactional_id")), pa.scalar(ROTATED),
                         pa.scalar(None, pa.string()))
    columns["coordinator_state"] = pc.if_else(owner, newest.column("state"), rotated)
    columns["coordinator_listed"] = pc.if_else(owner, newest.column("listed"),
                                               pa.scalar(None, COORDINATOR_CURRENT.field("listed").type))
    columns["txn_timeout_ms"] = newest.column("txn_timeout_ms")
    schema = in_ms(TRANSACTIONS)  # typed as it is written (``DerivedOutput.keep_rows``)
    return pa.table([columns[f.name].cast(f.type) for f in schema], schema=schema)
