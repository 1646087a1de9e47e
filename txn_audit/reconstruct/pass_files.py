"""The producer pass read straight from the raw tables' Parquet files, one partition replica per task.

When the batches and the markers are the files ingest wrote, as its manifest describes them
(``txn_audit.manifest``), each task reads one replica's rows of both tables with pyarrow and
runs ``ordered_pass.transaction_pass`` on them (``replica_tasks``). Spark then neither shuffles
nor sorts every producer row, nor converts it for the Python worker.

Ingest writes a row group per replica and segment, so a replica's row groups of each table
cover offset ranges that do not overlap: the manifest names them with their offsets, and a task
reads them in log order, a few row groups at a time, whatever the size of the partition
(``log_order_input``). Other files are read
sorted by (producer id, offset), at most about ``ROUND_ROWS`` rows at a time: a larger replica
is first counted per producer, then read in groups of whole producers, and a producer with more
rows than that in offset windows (``sorted_pass_input``). The pass itself keeps state per
producer until its input ends, so a replica of very many producers is passed over in rounds of
its producers (``producer_rounds``). Either way a worker's memory stays bounded. No pyspark
here: ``transactions.producer_pass`` runs it.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds

from txn_audit.manifest import TableManifest
from txn_audit.reconstruct.ordered_pass import DATA, MARKER, pass_input, pass_source_columns, transaction_pass
from txn_audit.replica_tasks.reading import (
    item_int,
    item_list,
    ROW_GROUP,
    SAMPLE_EVERY,
    ParquetFiles,
    Piece,
    merge_in_log_order,
    pieces_in_order,
    producer_span,
    replica_filter,
    replica_groups,
    replica_uris,
    sampled_cuts,
    table_dataset,
)
from txn_audit.schemas import REPLICA_COLUMNS, Replica, read_batch_ms

#: most input rows one task holds and sorts at once (about 100 bytes each in memory; reading
#: and sorting them takes about as much again)
ROUND_ROWS = 1_000_000

#: one task's work: a replica, the files and row groups that hold its rows and how many rows the
#: pass may read of them (all from the manifest: its markers, and its batches but those of row
#: groups ``without_producer``). While counting a large replica's rows per producer, one row
#: in ``SAMPLE_EVERY`` keeps its offset, from which a producer with more than ``ROUND_ROWS`` rows
#: is cut into offset windows
PASS_ITEM = pa.schema([
    pa.field("broker_id", pa.int32()),
    pa.field("log_dir", pa.string()),
    pa.field("topic", pa.string()),
    pa.field("partition", pa.int32()),
    pa.field("batch_files", pa.list_(pa.string())),
    pa.field("marker_files", pa.list_(pa.string())),
    # the replica's row groups in each table, as the manifest names them (null: not known)
    pa.field("batch_groups", pa.list_(ROW_GROUP)),
    pa.field("marker_groups", pa.list_(ROW_GROUP)),
    pa.field("rows", pa.int64()),
    # the task's share of the replica's producers: those with ``producer_id % shares == share``
    pa.field("shares", pa.int32()),
    pa.field("share", pa.int32()),
    # the item's place among all items: the task's number where it writes files
    pa.field("task", pa.int32()),
])
assert tuple(PASS_ITEM.names[: len(REPLICA_COLUMNS)]) == REPLICA_COLUMNS

#: the offset each side's rows are ordered by
_OFFSET = {DATA: "base_offset", MARKER: "offset"}


def without_producer(producer_high: int | None) -> bool:
    """Whether a batches row group whose highest producer id is ``producer_high`` (from its
    statistics; None: not known) holds no batch written with a producer id: the coordinator's own
    partitions (``__transaction_state``; ``__consumer_offsets`` but for transactional offset
    commits) and a plain producer's batches. The pass takes none of its rows
    (``ordered_pass.pass_input``), so it neither reads nor counts it."""
    return producer_high is not None and producer_high < 0


def producer_rows_of(batch_table: TableManifest, replica: Replica) -> int:
    """How many of ``replica``'s batches the pass may read: those of its row groups in
    ``batch_table`` (``TableManifest.rows_of``) but the ones ``without_producer``."""
    return batch_table.rows_of(replica, lambda group: not without_producer(
        None if group.producer_ids is None else group.producer_ids[1]))


def item_weight(item: Mapping[str, object]) -> float:
    """The work of a ``PASS_ITEM``, for packing items into tasks: its share of the replica's rows."""
    return item_int(item, "rows") / item_int(item, "shares")


#: a replica is split into shares of its producers, so that every core gets work, only down to
#: this many rows per share (each share reads the replica's files again)
SHARE_ROWS = 500_000


def pass_items(batch_table: TableManifest, marker_table: TableManifest, parallelism: int,
               share_rows: int = SHARE_ROWS) -> list[dict[str, object]]:
    """The ``PASS_ITEM`` rows for the replicas of these tables (``txn_audit.manifest``), largest
    first (tasks start in that order): one per replica, or, when a replica holds more than its
    part of the work for ``parallelism`` cores, one per share of its producers (never more than
    twice as many as cores)."""
    replicas = (batch_table.replicas() or frozenset()) | (marker_table.replicas() or frozenset())
    found = []
    for replica in replicas:
        found.append((replica, producer_rows_of(batch_table, replica) + marker_table.rows_of(replica)))
    slots = 2 * max(1, parallelism)
    per_item = max(share_rows, math.ceil(sum(rows for _, rows in found) / slots))
    items: list[dict[str, object]] = []
    for replica, rows in found:
        shares = min(slots, max(1, rows // per_item))
        common = {
            **dict(zip(REPLICA_COLUMNS, replica, strict=True)),
            "batch_files": replica_uris(batch_table, replica),
            "marker_files": replica_uris(marker_table, replica),
            "batch_groups": replica_groups(batch_table, replica),
            "marker_groups": replica_groups(marker_table, replica),
            "rows": rows,  # all the replica's: a share of few producers may hold most of them
            "shares": shares,
        }
        items.extend({**common, "share": share} for share in range(shares))
    items.sort(key=lambda item: (-item_weight(item),
                                 repr([item[k] for k in (*REPLICA_COLUMNS, "share")])))
    for task, item in enumerate(items):
        item["task"] = task
    return items


@dataclass(frozen=True)
class _Group:
    """Rows read and sorted together: whole producers, or one producer's rows in ``[low, high)``."""

    producer_ids: tuple[int, ...]
    low: int | None = None
    high: int | None = None

    def condition(self, side: int) -> ds.Expression:
        condition = ds.field("producer_id").isin(list(self.producer_ids))
        if self.low is not None:
            condition = condition & (ds.field(_OFFSET[side]) >= self.low)
        if self.high is not None:
            condition = condition & (ds.field(_OFFSET[side]) < self.high)
        return condition


class _Replica:
    """One item's two tables, read through pyarrow."""

    def __init__(self, item: Mapping[str, object]) -> None:
        self.item = item
        self.tables: dict[int, ds.Dataset] = {}
        for side, key in ((DATA, "batch_files"), (MARKER, "marker_files")):
            uris = item_list(item, key)
            if uris:
                self.tables[side] = table_dataset(uris)
        self.rows = replica_filter(item)

    def read(self, side: int, columns: list[str], condition: ds.Expression | None = None) -> Iterator[pa.RecordBatch]:
        """``side``'s rows of the replica (for the data side: batches with a producer id, no control batch)."""
        if side not in self.tables:
            return iter(())
        where = self.rows
        if side == DATA:
            where = where & ~ds.field("is_control") & (ds.field("producer_id") >= 0)
        if condition is not None:
            where = where & condition
        # little read-ahead: a worker's memory is what bounds a group, not the file system
        scan = map(read_batch_ms, self.tables[side].to_batches(columns=columns, filter=where, use_threads=False,
                                                               batch_readahead=1, fragment_readahead=1))
        shares, share = item_int(self.item, "shares"), item_int(self.item, "share")
        if shares == 1:
            return scan
        return (batch.filter(pa.array(batch.column("producer_id").to_numpy(zero_copy_only=False) % shares == share))
                for batch in scan)

    def groups(self, round_rows: int) -> list[_Group | None]:
        """Groups of at most about ``round_rows`` rows (None: every row at once)."""
        if item_int(self.item, "rows") <= round_rows:
            return [None]
        counts: dict[int, int] = {}
        sampled: list[tuple[np.ndarray, np.ndarray]] = []
        for side in self.tables:
            for batch in self.read(side, ["producer_id", _OFFSET[side]]):
                producer_ids = batch.column("producer_id").to_numpy(zero_copy_only=False)
                for producer_id, count in zip(*np.unique(producer_ids, return_counts=True), strict=True):
                    counts[int(producer_id)] = counts.get(int(producer_id), 0) + int(count)
                offsets = batch.column(_OFFSET[side]).to_numpy(zero_copy_only=False)
                sampled.append((producer_ids[::SAMPLE_EVERY], offsets[::SAMPLE_EVERY]))
        return _plan_groups(counts, sampled, round_rows)


def _plan_groups(counts: dict[int, int], sampled: list[tuple[np.ndarray, np.ndarray]],
                 round_rows: int) -> list[_Group | None]:
    """Producers packed into groups of at most ``round_rows`` rows (first fit, largest first);
    a producer with more rows is cut into offset windows of about that many, at its sampled offsets."""
    groups: list[_Group | None] = []
    bins: list[tuple[int, list[int]]] = []
    producer_ids = np.concatenate([p for p, _ in sampled]) if sampled else np.empty(0, np.int64)
    offsets = np.concatenate([o for _, o in sampled]) if sampled else np.empty(0, np.int64)
    for producer_id, count in sorted(counts.items(), key=lambda item: (-item[1], item[0])):
        if count > round_rows:
            cuts = sampled_cuts(np.sort(offsets[producer_ids == producer_id]), round_rows, SAMPLE_EVERY)
            bounds = [None, *cuts, None]
            groups.extend(_Group((producer_id,), low, high) for low, high in zip(bounds, bounds[1:], strict=False))
            continue
        for index, (size, members) in enumerate(bins):
            if size + count <= round_rows:
                bins[index] = (size + count, members + [producer_id])
                break
        else:
            bins.append((count, [producer_id]))
    groups.extend(_Group(tuple(members)) for _, members in bins)
    return groups


def sorted_pass_input(item: Mapping[str, object], round_rows: int = ROUND_ROWS,
                      chunk_rows: int = 65536) -> Iterator[pa.RecordBatch]:
    """``item``'s pass input rows (``ordered_pass.PASS_INPUT``) in (producer id, offset) order,
    as batches of at most ``chunk_rows``; at most about ``round_rows`` rows are held at once."""
    replica = _Replica(item)
    for group in replica.groups(round_rows):
        rows = _sorted_group(replica, group)
        if rows is not None:
            yield from rows.to_batches(max_chunksize=chunk_rows)


def _sorted_group(replica: _Replica, group: _Group | None) -> pa.Table | None:
    """The pass input rows of ``group`` (None: all) sorted by (producer id, offset); None if none."""
    parts = []
    for side in replica.tables:
        for batch in replica.read(side, pass_source_columns(side), group and group.condition(side)):
            if batch.num_rows:
                parts.append(pass_input(batch, side))
    if not parts:
        return None
    rows = pa.concat_tables(parts)
    del parts
    order = pc.sort_indices(rows, sort_keys=[("producer_id", "ascending"), ("offset", "ascending")])
    names, columns = rows.column_names, rows.columns
    del rows
    for index, column in enumerate(columns):  # one column at a time: each unsorted one is freed
        columns[index] = column.take(order)
    return pa.table(columns, names=names)


def item_pieces(item: Mapping[str, object]) -> list[Piece] | None:
    """The row groups of ``item``'s replica in both tables (side ``DATA``, then ``MARKER``) in
    log order; None unless the manifest named them with offsets that do not overlap
    (``replica_tasks.reading.pieces_in_order``)."""
    assert (DATA, MARKER) == (0, 1)  # the sides, in the order given: data before a marker of its offset
    batch_groups = item["batch_groups"]
    if batch_groups is not None:
        batch_groups = [group for group in item_list(item, "batch_groups")
                        if not without_producer(group["producer_high"])]
    return pieces_in_order([batch_groups, item["marker_groups"]])  # type: ignore[list-item]  # lists of ROW_GROUP rows


def log_order_input(item: Mapping[str, object], chunk_rows: int = 65536) -> Iterator[pa.RecordBatch] | None:
    """``item``'s pass input rows in offset order (data before a marker of the same offset), as
    batches of at most ``chunk_rows``, read row group by row group: a task holds a few row groups
    at a time, whatever the size of the replica, and sorts nothing but within them. None when the
    files do not allow it (``item_pieces``): then ``sorted_pass_input``."""
    pieces = item_pieces(item)
    if pieces is None:
        return None
    return _merged(pieces, item_int(item, "shares"), item_int(item, "share"), chunk_rows)


def _merged(pieces: list[Piece], shares: int, share: int, chunk_rows: int) -> Iterator[pa.RecordBatch]:
    """``merge_in_log_order`` over ``pieces``, each file opened once while the rows are read."""
    with ParquetFiles() as files:
        yield from merge_in_log_order(pieces, functools.partial(_read_piece, files=files, shares=shares, share=share),
                                      chunk_rows)


def _read_piece(piece: Piece, *, files: ParquetFiles, shares: int, share: int) -> pa.Table:
    """A row group's pass input rows (of the item's share of producers)."""
    rows = pass_input(files.row_group(piece, pass_source_columns(piece.side)), piece.side)
    if shares > 1:
        producers = pc.fill_null(rows.column("producer_id"), -1).to_numpy()
        rows = rows.filter(pa.array(producers % shares == share))
    return rows


#: the pass holds state for every producer of its input until the input ends (about 240-330
#: bytes each at its peak): a task whose replica holds more producers than this passes over
#: them in rounds of at most about this many, reading the replica's files once per round
ROUND_PRODUCERS = 1_500_000


def producer_rounds(item: Mapping[str, object], round_producers: int | None = None) -> list[dict[str, object]]:
    """The items a task passes over one after another for ``item``: itself, or, when its share
    of the replica holds more than ``round_producers`` (default ``ROUND_PRODUCERS``) producers,
    shares of that share (``shares`` times as many, each a ``share`` that ``producer_id % shares``
    keeps within ``item``'s)."""
    round_producers = ROUND_PRODUCERS if round_producers is None else round_producers
    if item_int(item, "rows") <= round_producers:
        return [dict(item)]  # no more producers than rows
    rounds = math.ceil(_producer_count(item, round_producers) / round_producers)
    if rounds <= 1:
        return [dict(item)]
    shares, share = item_int(item, "shares"), item_int(item, "share")
    return [{**item, "shares": shares * rounds, "share": share + shares * number} for number in range(rounds)]


def _producer_count(item: Mapping[str, object], enough: int) -> int:
    """How many producers ``item``'s rows hold, or a bound on that no greater than ``enough``:
    the span of their ids in the manifest when it is at most ``enough``, else a count of the ids read."""
    span = _producer_span(item)
    if span is not None and span <= enough:
        return span
    replica = _Replica(item)
    distinct: list[pa.Array] = []
    held = known = 0
    for side in replica.tables:
        for batch in replica.read(side, ["producer_id"]):
            distinct.append(pc.unique(batch.column("producer_id")))
            held += len(distinct[-1])
            if held > 2 * known + 65536:  # keep the ids held within about twice the distinct ones
                distinct = [pc.unique(pa.concat_arrays(distinct))]
                held = known = len(distinct[0])
    return len(pc.unique(pa.concat_arrays(distinct))) if distinct else 0


def _producer_span(item: Mapping[str, object]) -> int | None:
    """``max - min + 1`` of the producer ids in the row groups of ``item``'s replica, as the
    manifest gives them; None when it does not give them for every row group."""
    groups = []
    for key in ("batch_groups", "marker_groups"):
        if item[key] is None:
            return None
        groups += item_list(item, key)
    return producer_span(groups)


def pass_input_rows(item: Mapping[str, object]) -> Iterator[pa.RecordBatch]:
    """``item``'s pass input rows, each producer's in offset order: in log order when the files
    allow it (``log_order_input``), otherwise sorted by producer (``sorted_pass_input``)."""
    rows = log_order_input(item)
    return sorted_pass_input(item) if rows is None else rows


def group_input(group: Sequence[Mapping[str, object]]) -> pa.Table:
    """The pass input rows of ``group``'s items (small ones, passed over together:
    ``transaction_files.item_groups``), one item's after another, each in log order as
    ``log_order_input`` gives it (by offset, data before a marker of the same offset, then as
    read). Each side's rows of every item are made pass input at once and sorted together: a pass
    over an item's few rows costs a few Arrow calls per row group however few its rows. Every item
    is one replica whose files allow log order (``item_pieces``)."""
    read: list[list[pa.Table]] = [[], []]  # per side, the raw rows of each row group as read
    places: list[list[np.ndarray]] = [[], []]  # per side, the item of each row
    with ParquetFiles() as files:
        for place, item in enumerate(group):
            pieces = item_pieces(item)
            if pieces is None or item_int(item, "shares") != 1:
                raise ValueError(f"item {place} of a group is not one replica in log order")
            for piece in sorted(pieces, key=lambda p: p.side):  # a side's in log order (``pieces_in_order``)
                rows = files.row_group(piece, pass_source_columns(piece.side))
                read[piece.side].append(rows)
                places[piece.side].append(np.full(rows.num_rows, place, np.int64))
    sides = [pass_input(pa.concat_tables(read[side], promote_options="permissive").append_column(
                 "_item", pa.array(np.concatenate(places[side]))), side, carry=["_item"])
             for side in (DATA, MARKER) if read[side]]
    if not sides:
        return pa.table({})  # no row
    rows = pa.concat_tables(sides, promote_options="permissive")
    item = rows.column("_item").to_numpy()
    side = np.concatenate([np.full(part.num_rows, number, np.int64) for number, part in enumerate(sides)])
    order = np.lexsort((side, rows.column("offset").to_numpy(), item))  # stable: as read within a key
    return rows.drop_columns(["_item"]).take(pa.array(order)).combine_chunks()


def item_pass(item: Mapping[str, object], *, late_tolerance_ms: int, unsequenced_topics: tuple[str, ...],
              seen: Callable[[pa.RecordBatch], None] | None = None) -> Iterator[pa.RecordBatch]:
    """``transaction_pass`` over ``item``'s rows, in rounds of its producers (``producer_rounds``);
    each input batch is first shown to ``seen``, if given."""
    for part in producer_rounds(item):
        rows = pass_input_rows(part)
        yield from transaction_pass(rows if seen is None else _shown(rows, seen), late_tolerance_ms=late_tolerance_ms,
                                    unsequenced_topics=unsequenced_topics)


def _shown(rows: Iterator[pa.RecordBatch], seen: Callable[[pa.RecordBatch], None]) -> Iterator[pa.RecordBatch]:
    for batch in rows:
        seen(batch)
        yield batch


def pass_over_files(items: Iterator[pa.RecordBatch], *, late_tolerance_ms: int,
                    unsequenced_topics: tuple[str, ...]) -> Iterator[pa.RecordBatch]:
    """``mapInArrow`` body: ``PASS_ITEM`` rows in, ``transaction_pass`` output of each out."""
    for batch in items:
        for item in batch.to_pylist():
            yield from item_pass(item, late_tolerance_ms=late_tolerance_ms, unsequenced_topics=unsequenced_topics)
