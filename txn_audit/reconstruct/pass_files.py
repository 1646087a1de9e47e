"""The producer pass read straight from the raw tables' Parquet files, one partition replica per task.

When the batches and the markers are plain reads of files whose footers list the replicas of
their rows (what ingest writes), each task reads one replica's rows of both tables with
pyarrow and runs ``ordered_pass.transaction_pass`` on them. Spark then neither shuffles nor
sorts every producer row, nor converts it for the Python worker.

Ingest writes a row group per replica and segment, so a replica's row groups of each table
cover offset ranges that do not overlap: a task then reads them in log order, a few row groups
at a time, whatever the size of the partition (``log_order_input``). Other files are read
sorted by (producer id, offset), at most about ``ROUND_ROWS`` rows at a time: a larger replica
is first counted per producer, then read in groups of whole producers, and a producer with more
rows than that in offset windows (``sorted_pass_input``). The pass itself keeps state per
producer until its input ends, so a replica of very many producers is passed over in rounds of
its producers (``producer_rounds``). Either way a worker's memory stays bounded. No pyspark
here: ``transactions.producer_pass`` runs it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import TypeVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq
from pyarrow import fs

from txn_audit.reconstruct.ordered_pass import DATA, MARKER, pass_input, pass_source_columns, transaction_pass
from txn_audit.schemas import REPLICA_COLUMNS, Replica, replicas_from_metadata

#: most input rows one task holds and sorts at once (about 100 bytes each in memory; reading
#: and sorting them takes about as much again)
ROUND_ROWS = 1_000_000
#: while counting a large replica's rows per producer, one row in this many keeps its offset, from
#: which a producer with more than ``ROUND_ROWS`` rows is cut into offset windows
SAMPLE_EVERY = 64

#: one task's work: a replica, the files that hold its rows and how many rows they may hold
PASS_ITEM = pa.schema([
    pa.field("broker_id", pa.int32()),
    pa.field("log_dir", pa.string()),
    pa.field("topic", pa.string()),
    pa.field("partition", pa.int32()),
    pa.field("batch_files", pa.list_(pa.string())),
    pa.field("marker_files", pa.list_(pa.string())),
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


@dataclass(frozen=True)
class TableFile:
    """A raw table's Parquet file: its URI, the replicas its footer lists and, per replica, how
    many rows it may hold (from the row groups' statistics: an upper bound)."""

    uri: str
    replicas: frozenset[Replica]
    replica_rows: tuple[tuple[Replica, int], ...]
    #: per replica with rows, the extremes of ``EXTENT_COLUMNS`` its rows hold (None: all null),
    #: from the row groups' statistics; None when they do not show them for every row group
    replica_extents: tuple[tuple[Replica, int | None, int | None], ...] | None = None

    def rows_of(self, replica: Replica) -> int:
        return dict(self.replica_rows).get(replica, 0)


Key = TypeVar("Key")

#: a batches file's columns whose extremes its statistics give: the highest last offset and the
#: lowest first timestamp (how far a partition's log goes, and from when it holds data)
EXTENT_COLUMNS = ("last_offset", "first_timestamp")


def read_table_file(uri: str) -> TableFile | None:
    """The footer of the file at ``uri``; None when it lists no replicas (an older or foreign
    file) or cannot be read (a file system pyarrow does not know)."""
    try:
        filesystem, path = fs.FileSystem.from_uri(uri)
        metadata = pq.read_metadata(path, filesystem=filesystem)
    except (OSError, ValueError):
        return None
    listed = replicas_from_metadata(metadata.metadata)
    if listed is None:
        return None
    return TableFile(uri, frozenset(listed), _rows_by_replica(metadata, listed), _extents_by_replica(metadata))


def _rows_by_replica(metadata: pq.FileMetaData, listed: set[Replica]) -> tuple[tuple[Replica, int], ...]:
    """Rows per listed replica, from the row groups' statistics: a row group whose statistics
    do not show one replica counts for every replica the file lists (an upper bound)."""
    names = metadata.schema.to_arrow_schema().names
    where = [names.index(name) for name in REPLICA_COLUMNS]
    rows: dict[Replica, int] = dict.fromkeys(listed, 0)
    for index in range(metadata.num_row_groups):
        group = metadata.row_group(index)
        replica = _one_replica(group, where)
        for key in [replica] if replica in rows else list(rows):
            rows[key] += group.num_rows
    return tuple(sorted(rows.items(), key=lambda item: repr(item[0])))


def _extents_by_replica(metadata: pq.FileMetaData) -> tuple[tuple[Replica, int | None, int | None], ...] | None:
    """Per replica, the highest ``last_offset`` and the lowest ``first_timestamp`` of its rows, from
    the row groups' statistics; None unless every row group shows its one replica and both."""
    names = metadata.schema.to_arrow_schema().names
    if not set(EXTENT_COLUMNS) <= set(names):
        return None
    where = [names.index(name) for name in REPLICA_COLUMNS]
    highest, lowest = names.index(EXTENT_COLUMNS[0]), names.index(EXTENT_COLUMNS[1])
    extents: dict[Replica, tuple[int | None, int | None]] = {}
    for index in range(metadata.num_row_groups):
        group = metadata.row_group(index)
        replica = _one_replica(group, where)
        top, bottom = _extreme(group, highest, max), _extreme(group, lowest, min)
        if replica is None or top is _UNKNOWN or bottom is _UNKNOWN:
            return None
        widen_extent(extents, replica, top, bottom)  # type: ignore[arg-type]
    return tuple(sorted(((r, *e) for r, e in extents.items()), key=lambda item: repr(item[0])))


_UNKNOWN = object()


def _extreme(group: pq.RowGroupMetaData, column: int, pick: Callable[[int, int], int]) -> object:
    """The highest (``pick=max``) or lowest value of ``column`` in ``group``: None when every
    value is null, ``_UNKNOWN`` when the statistics do not tell."""
    stats = group.column(column).statistics
    if stats is None or not stats.has_null_count:
        return _UNKNOWN
    if stats.null_count == group.num_rows:
        return None
    if not stats.has_min_max:
        return _UNKNOWN
    return stats.max if pick is max else stats.min


def widen_extent(extents: dict[Key, tuple[int | None, int | None]], key: Key, highest: int | None,
                 lowest: int | None) -> None:
    """Fold a highest last offset and a lowest first timestamp into ``extents[key]``, ignoring
    nulls as SQL's ``max`` and ``min`` do."""
    top, bottom = extents.get(key, (None, None))
    extents[key] = (_sql_pick(top, highest, max), _sql_pick(bottom, lowest, min))


def _sql_pick(a: int | None, b: int | None, pick: Callable[[int, int], int]) -> int | None:
    return b if a is None else a if b is None else pick(a, b)


def _one_replica(group: pq.RowGroupMetaData, where: list[int]) -> Replica | None:
    """The one replica all rows of ``group`` belong to, if its statistics show it."""
    values = []
    for column in where:
        stats = group.column(column).statistics
        if stats is None or not stats.has_null_count:
            return None
        if stats.null_count == group.num_rows:
            values.append(None)
        elif stats.has_min_max and stats.null_count == 0 and stats.min == stats.max:
            values.append(stats.min)
        else:
            return None
    return tuple(values)  # type: ignore[return-value]


#: a replica is split into shares of its producers, so that every core gets work, only down to
#: this many rows per share (each share reads the replica's files again)
SHARE_ROWS = 500_000


def pass_items(batch_files: Iterable[TableFile], marker_files: Iterable[TableFile], parallelism: int,
               share_rows: int = SHARE_ROWS) -> list[dict[str, object]]:
    """The ``PASS_ITEM`` rows for these files, largest first (tasks start in that order): one
    per replica, or, when a replica holds more than its part of the work for ``parallelism``
    cores, one per share of its producers (never more than twice as many as cores)."""
    batch_files, marker_files = list(batch_files), list(marker_files)
    replicas = {r for f in batch_files + marker_files for r in f.replicas}
    found = []
    for replica in replicas:
        batches = [f for f in batch_files if replica in f.replicas]
        markers = [f for f in marker_files if replica in f.replicas]
        found.append((replica, batches, markers, sum(f.rows_of(replica) for f in batches + markers)))
    slots = 2 * max(1, parallelism)
    per_item = max(share_rows, math.ceil(sum(rows for *_, rows in found) / slots))
    items = []
    for replica, batches, markers, rows in found:
        shares = min(slots, max(1, rows // per_item))
        for share in range(shares):
            items.append({
                **dict(zip(REPLICA_COLUMNS, replica, strict=True)),
                "batch_files": [f.uri for f in batches],
                "marker_files": [f.uri for f in markers],
                "rows": rows,  # all the replica's: a share of few producers may hold most of them
                "shares": shares,
                "share": share,
            })
    items.sort(key=lambda item: (-item["rows"] / item["shares"],  # type: ignore[operator]
                                 repr([item[k] for k in (*REPLICA_COLUMNS, "share")])))
    for task, item in enumerate(items):
        item["task"] = task
    return items


def replica_filter(item: Mapping[str, object]) -> ds.Expression:
    """The rows of ``item``'s replica (null-safe, as the replica join)."""
    condition = None
    for name in REPLICA_COLUMNS:
        value = item[name]
        term = ds.field(name).is_null() if value is None else ds.field(name) == value
        condition = term if condition is None else condition & term
    return condition


def table_dataset(uris: list[str]) -> ds.Dataset:
    """The Parquet files at ``uris`` (all on one file system) as one dataset."""
    filesystem, _ = fs.FileSystem.from_uri(uris[0])
    return ds.dataset([fs.FileSystem.from_uri(uri)[1] for uri in uris], format="parquet", filesystem=filesystem)


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
            uris = list(item[key] or [])  # type: ignore[call-overload]
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
        scan = self.tables[side].to_batches(columns=columns, filter=where, use_threads=False,
                                            batch_readahead=1, fragment_readahead=1)
        shares, share = int(self.item["shares"]), int(self.item["share"])  # type: ignore[call-overload]
        if shares == 1:
            return scan
        return (batch.filter(pa.array(batch.column("producer_id").to_numpy(zero_copy_only=False) % shares == share))
                for batch in scan)

    def groups(self, round_rows: int) -> list[_Group | None]:
        """Groups of at most about ``round_rows`` rows (None: every row at once)."""
        if int(self.item["rows"]) <= round_rows:  # type: ignore[call-overload]
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
            groups.extend(_Group((producer_id,), low, high) for low, high in zip(bounds, bounds[1:]))
            continue
        for index, (size, members) in enumerate(bins):
            if size + count <= round_rows:
                bins[index] = (size + count, members + [producer_id])
                break
        else:
            bins.append((count, [producer_id]))
    groups.extend(_Group(tuple(members)) for _, members in bins)
    return groups


def sampled_cuts(sample: np.ndarray, window_rows: int, sample_every: int) -> list[int]:
    """Offsets that cut rows into windows of about ``window_rows``, from ``sample``: their
    offsets in order, one row in ``sample_every``."""
    step = max(1, window_rows // sample_every)
    return [int(cut) for cut in np.unique(sample[step::step])]


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


@dataclass(frozen=True)
class _Piece:
    """A row group of one replica's rows: its side, file and index, and its lowest and highest offset."""

    low: int
    high: int
    side: int
    uri: str
    index: int


def _replica_groups(item: Mapping[str, object], key: str,
                    column: str) -> list[tuple[str, int, pq.Statistics | None]] | None:
    """Each row group of ``item``'s replica in its ``key`` files, with rows: the file, the group's
    index and ``column``'s statistics; None unless every row group of the files shows its one replica."""
    replica = tuple(item[name] for name in REPLICA_COLUMNS)
    groups = []
    for uri in list(item[key] or []):  # type: ignore[call-overload]
        filesystem, path = fs.FileSystem.from_uri(uri)
        metadata = pq.read_metadata(path, filesystem=filesystem)
        names = metadata.schema.to_arrow_schema().names
        where, wanted = [names.index(name) for name in REPLICA_COLUMNS], names.index(column)
        for index in range(metadata.num_row_groups):
            group = metadata.row_group(index)
            shown = _one_replica(group, where)
            if shown is None:
                return None
            if shown == replica and group.num_rows:
                groups.append((uri, index, group.column(wanted).statistics))
    return groups


def _pieces(item: Mapping[str, object]) -> list[_Piece] | None:
    """The row groups of ``item``'s replica in both tables, by lowest offset; None unless every
    row group of its files shows its one replica and, for the item's, offsets without nulls, and
    the row groups of each table do not overlap (each table's rows of the replica in log order)."""
    pieces = []
    for side, key in ((DATA, "batch_files"), (MARKER, "marker_files")):
        groups = _replica_groups(item, key, _OFFSET[side])
        if groups is None:
            return None
        found = []
        for uri, index, stats in groups:
            if stats is None or not stats.has_min_max or not stats.has_null_count or stats.null_count:
                return None
            found.append(_Piece(stats.min, stats.max, side, uri, index))
        found.sort(key=lambda piece: piece.low)
        if any(later.low <= earlier.high for earlier, later in zip(found, found[1:])):
            return None
        pieces += found
    return sorted(pieces, key=lambda piece: (piece.low, piece.side))


def log_order_input(item: Mapping[str, object], chunk_rows: int = 65536) -> Iterator[pa.RecordBatch] | None:
    """``item``'s pass input rows in offset order (data before a marker of the same offset), as
    batches of at most ``chunk_rows``, read row group by row group: a task holds a few row groups
    at a time, whatever the size of the replica, and sorts nothing but within them. None when the
    files do not allow it (``_pieces``): then ``sorted_pass_input``."""
    pieces = _pieces(item)
    if pieces is None:
        return None
    return _log_order_rows(item, pieces, chunk_rows)


def _log_order_rows(item: Mapping[str, object], pieces: list[_Piece], chunk_rows: int) -> Iterator[pa.RecordBatch]:
    shares, share = int(item["shares"]), int(item["share"])  # type: ignore[call-overload]
    bounds = sorted({piece.low for piece in pieces})
    held: list[tuple[_Piece, pa.Table]] = []  # read, with the rows of later windows
    ready: list[pa.Table] = []  # windows in order, not yet passed on
    ready_rows = 0
    waiting = list(pieces)
    for number, low in enumerate(bounds):
        high = bounds[number + 1] if number + 1 < len(bounds) else None
        while waiting and waiting[0].low == low:
            piece = waiting.pop(0)
            held.append((piece, _read_piece(piece, shares, share)))
        held.sort(key=lambda entry: entry[0].side)  # data first: a marker after data of its offset
        parts, kept = [], []
        for piece, rows in held:
            if high is None or piece.high < high:
                parts.append(rows)
                continue
            offsets = rows.column("offset")
            parts.append(rows.filter(pc.less(offsets, high)))
            rest = rows.filter(pc.greater_equal(offsets, high))
            if rest.num_rows:
                kept.append((piece, rest))
        held = kept
        parts = [part for part in parts if part.num_rows]
        if parts:
            rows = pa.concat_tables(parts)
            ready.append(rows.take(pa.array(np.argsort(rows.column("offset").to_numpy(), kind="stable"))))
            ready_rows += rows.num_rows
        if ready and (ready_rows >= chunk_rows or high is None):
            # windows are in order: a few together make batches large enough for the pass
            yield from pa.concat_tables(ready).combine_chunks().to_batches(max_chunksize=chunk_rows)
            ready, ready_rows = [], 0


def _read_piece(piece: _Piece, shares: int, share: int) -> pa.Table:
    """A row group's pass input rows (of the item's share of producers)."""
    filesystem, path = fs.FileSystem.from_uri(piece.uri)
    with filesystem.open_input_file(path) as source:
        raw = pq.ParquetFile(source).read_row_group(piece.index, columns=pass_source_columns(piece.side))
    rows = pass_input(raw, piece.side)
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
    if int(item["rows"]) <= round_producers:  # type: ignore[call-overload]
        return [dict(item)]  # no more producers than rows
    rounds = math.ceil(_producer_count(item, round_producers) / round_producers)
    if rounds <= 1:
        return [dict(item)]
    shares, share = int(item["shares"]), int(item["share"])  # type: ignore[call-overload]
    return [{**item, "shares": shares * rounds, "share": share + shares * number} for number in range(rounds)]


def _producer_count(item: Mapping[str, object], enough: int) -> int:
    """How many producers ``item``'s rows hold, or a bound on that no greater than ``enough``:
    the span of their ids in the footers when it is at most ``enough``, else a count of the ids read."""
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
    """``max - min + 1`` of the producer ids in the row groups of ``item``'s replica, by their
    statistics; None when a row group's statistics do not show its replica or its ids."""
    low = high = None
    for key in ("batch_files", "marker_files"):
        groups = _replica_groups(item, key, "producer_id")
        if groups is None:
            return None
        for _, _, stats in groups:
            if stats is None or not stats.has_min_max:
                return None
            low = stats.min if low is None else min(low, stats.min)
            high = stats.max if high is None else max(high, stats.max)
    return 0 if low is None else int(high) - int(low) + 1  # type: ignore[arg-type]


def pass_input_rows(item: Mapping[str, object]) -> Iterator[pa.RecordBatch]:
    """``item``'s pass input rows, each producer's in offset order: in log order when the files
    allow it (``log_order_input``), otherwise sorted by producer (``sorted_pass_input``)."""
    rows = log_order_input(item)
    return sorted_pass_input(item) if rows is None else rows


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
