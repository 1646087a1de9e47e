"""Reading one replica's rows of a raw table from its files, as a task does (no pyspark here).

A task is told which files hold its replica's rows and, when the manifest describes them one
replica per row group (what ingest writes, ``txn_audit.manifest``), which row groups: their
offsets and producer ids (``ROW_GROUP``). Row groups of one replica that do not overlap are its
rows in log order (``log_order``); otherwise the rows are read with a filter on the replica
(``replica_filter``) and, when too many to hold at once, in windows cut at a sample of their
offsets (``sampled_cuts``). ``merge_in_log_order`` reads several tables' row groups of one
replica as one stream in log order; ``replica_tables`` reads a replica's row groups in file
order (``REPLICA_FILES_ITEM``). Files are opened once per process (``OpenedFiles``): a footer
lists a row group per replica and segment. On the driver, ``read_table`` and ``table_batches``
read a whole table file by file.
"""

from __future__ import annotations

import numbers

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeGuard

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq
from pyarrow import fs

from txn_audit.manifest import TableManifest
from txn_audit.schemas import ALL_TABLES, REPLICA_COLUMNS, REPLICA_FIELDS, Replica, in_ms, read_ms

#: while counting a large replica's rows, one row in this many keeps its offset, from which the
#: rows are cut into windows
SAMPLE_EVERY = 64

#: a row group of a replica's rows, as a task is told of it: its file and index, its lowest and
#: highest offset (null: not known) and producer id (null: not known)
ROW_GROUP = pa.struct([
    pa.field("uri", pa.string()),
    pa.field("index", pa.int32()),
    pa.field("low", pa.int64()),
    pa.field("high", pa.int64()),
    pa.field("producer_low", pa.int64()),
    pa.field("producer_high", pa.int64()),
])


def item_int(item: Mapping[str, object], key: str) -> int:
    """Field ``key`` of a task item (a row of its item schema), an integer."""
    value = item[key]
    if not isinstance(value, numbers.Integral):
        raise TypeError(f"task item field {key!r} is {type(value).__name__}, not an integer")
    return int(value)


def item_list(item: Mapping[str, object], key: str) -> list[Any]:
    """Field ``key`` of a task item, a list (an absent one: empty)."""
    value = item[key]
    if value is None:
        return []
    if not isinstance(value, list | tuple):
        raise TypeError(f"task item field {key!r} is {type(value).__name__}, not a list")
    return list(value)


#: a task's work when it reads all of one replica's rows of a table: the replica, and the files
#: that hold them
REPLICA_FILES_ITEM = pa.schema([
    *REPLICA_FIELDS,
    pa.field("files", pa.list_(pa.string())),
    pa.field("rows", pa.int64()),
    pa.field("groups", pa.list_(ROW_GROUP)),
])


#: fewest rows of a table whose quality checks read it by tasks (``read_by_tasks``): below them
#: Spark's own grouping or window costs less than the tasks' Python workers (on the 2.2 MB
#: ``healthy`` dump, the 2-core VM of docs/performance.md, paired runs in its git log: the
#: batches suite 4.7 s with the epoch check's window against 7.0 s with its tasks; the replica-order checks' first query
#: 2.0 s with the window against 4.0 s with tasks)
TASKS_MIN_ROWS = 100_000


def read_by_tasks(table: TableManifest | None) -> TypeGuard[TableManifest]:
    """Whether a quality check reads the table whose files ``table`` describes (None: a frame
    that does not read files as they are) by a task per replica (``replica_file_items``) rather
    than by Spark: when the manifest tells each row group's replica and the table holds at least
    ``TASKS_MIN_ROWS`` rows."""
    return (table is not None and table.replicas() is not None and table.per_replica
            and table.rows >= TASKS_MIN_ROWS)


def replica_file_items(table: TableManifest) -> list[dict[str, object]]:
    """``REPLICA_FILES_ITEM`` rows for ``table``'s files (their manifest): one per replica,
    largest first, each with its row groups (``replica_groups``). Raises ``ValueError`` when a
    row group does not name its replica (ingest writes a replica's rows in row groups of their own)."""
    items: list[dict[str, object]] = []
    for replica in table.replicas() or ():
        groups = replica_groups(table, replica)
        if groups is None:
            raise ValueError(f"the row groups of table {table.name} do not each name their replica")
        items.append({**dict(zip(REPLICA_COLUMNS, replica, strict=True)), "files": replica_uris(table, replica),
                      "rows": table.rows_of(replica), "groups": groups})
    items.sort(key=lambda item: (-item_int(item, "rows"), repr([item[k] for k in REPLICA_COLUMNS])))
    return items


def replica_uris(table: TableManifest, replica: Replica) -> list[str]:
    """The files of ``table`` that hold rows of ``replica``."""
    return [table.uri(f) for f in table.files_of(replica)]


def replica_groups(table: TableManifest, replica: Replica) -> list[dict[str, Any]] | None:
    """``ROW_GROUP`` rows of ``replica``'s row groups with rows in ``table``, file by file; None
    unless every row group of its files names its one replica."""
    found = []
    for entry in table.files_of(replica):
        if None in entry.by_replica:
            return None
        for group in entry.by_replica.get(replica, ()):
            if not group.rows:
                continue
            low, high = group.offsets if group.offsets is not None else (None, None)
            producer_low, producer_high = group.producer_ids if group.producer_ids is not None else (None, None)
            found.append({"uri": table.uri(entry), "index": group.index, "low": low, "high": high,
                          "producer_low": producer_low, "producer_high": producer_high})
    return found


def log_order(groups: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]] | None:
    """``groups`` (of one replica and table) by lowest offset: the replica's rows in log order,
    row group after row group; None when an offset range is not known or two ranges overlap."""
    found = list(groups)
    if any(group["low"] is None or group["high"] is None for group in found):
        return None
    found.sort(key=lambda group: group["low"])
    if any(later["low"] <= earlier["high"] for earlier, later in zip(found, found[1:], strict=False)):
        return None
    return found


@dataclass(frozen=True)
class Piece:
    """A row group of one replica's rows: its side (the table's place among those read
    together), file and index, and its lowest and highest offset."""

    low: int
    high: int
    side: int
    uri: str
    index: int


def pieces_in_order(sides: Sequence[Iterable[Mapping[str, Any]] | None]) -> list[Piece] | None:
    """The row groups of one replica in several tables (``ROW_GROUP`` rows, one list per side),
    by lowest offset, then side; None unless every side's row groups are known and in log order
    (``log_order``)."""
    pieces = []
    for side, groups in enumerate(sides):
        if groups is None:
            return None
        ordered = log_order(groups)
        if ordered is None:
            return None
        pieces += [Piece(group["low"], group["high"], side, group["uri"], group["index"]) for group in ordered]
    return sorted(pieces, key=lambda piece: (piece.low, piece.side))


#: how many opened files a process keeps (``OPENED``): those of the files its tasks' items read,
#: a few per table
FILES_KEPT = 16


class OpenedFiles:
    """Parquet files opened in this process, by file, size and modification time, the newest
    ``FILES_KEPT``, each with its footer parsed. A footer lists every row group of its file, one
    per replica and segment, so its size grows with the partitions a file holds; a task's items,
    a replica each, read row groups of the same few files. Opened once per file and not once per
    item: on the benchmark's dump of 2,000 partitions (``scan_bench.py --workload uniform --sizes
    0.05 --partitions 2000``) parsing the footers once took the producer pass over 400 items from
    6.9 s to 3.0 s of a core; keeping them open too (a reader made from a parsed footer costs
    1.3 ms), with a file of transactions per task rather than per item (``transaction_files``),
    took the pass over 300 items of ``scale_bench.py``'s dump of 2,050 partitions from 2.0-2.1 s
    to 1.4-1.7 s (warm, two runs each). For the tasks of one process, one at a time: an opened
    file is not shared between threads."""

    def __init__(self, kept: int = FILES_KEPT) -> None:
        self.kept = kept
        self._files: dict[tuple[str, int | None, int | None, tuple[str, ...]], tuple[pa.NativeFile, pq.ParquetFile]] \
            = {}

    def opened(self, uri: str, dictionaries: Sequence[str] = ()) -> pq.ParquetFile:
        """The file at ``uri``, opened once while it is unchanged; string columns ``dictionaries``
        read as dictionary arrays."""
        filesystem, path = fs.FileSystem.from_uri(uri)
        info = filesystem.get_file_info(path)
        key = (uri, info.size, info.mtime_ns, tuple(dictionaries))
        found = self._files.pop(key, None)
        if found is None:
            source = filesystem.open_input_file(path)
            found = (source, pq.ParquetFile(source, read_dictionary=list(dictionaries) or None))
        self._files[key] = found  # the newest last
        while len(self._files) > self.kept:
            source, _ = self._files.pop(next(iter(self._files)))
            source.close()
        return found[1]

    def close(self) -> None:
        """Close every file kept."""
        for source, _ in self._files.values():
            source.close()
        self._files.clear()


OPENED = OpenedFiles()


#: a task's row groups of one file that it will read next are read together, in one call, up to
#: about this many rows (``ReadAhead``)
READ_AHEAD_ROWS = 65_536


class ReadAhead:
    """The row groups a task will read (its items' ``ROW_GROUP`` lists, in the items' order:
    ``plan``), read a file's run at a time. Reading a row group costs about 0.4 ms of a core
    however few its rows, and a small replica's are a few rows each (a replica holds a row group
    per table and segment): reading a file's next planned row groups together, up to
    ``READ_AHEAD_ROWS`` rows, in one ``ParquetFile.read_row_groups`` costs 0.02-0.09 ms a row
    group (a file of 344 of a dump of 2,050 partitions). The rows read ahead are kept until their
    item reads them, at most ``kept_rows`` in all: the oldest are dropped first, and a row group
    dropped is never read ahead again, only alone when its item asks for it (a task whose items
    read runs of many files at once would otherwise read each run again and again: one task of
    2,050 items, 12 files, took the producer pass from 3.2 s to 11.3 s). An item that skips some
    of its row groups (a window of its offsets) never reads them. One task at a time in a
    process, as ``OPENED``."""

    def __init__(self, rows: int = READ_AHEAD_ROWS, kept_rows: int = 4 * READ_AHEAD_ROWS) -> None:
        self.rows = rows
        self.kept_rows = kept_rows
        self._planned: dict[str, list[int]] = {}  # each file's planned row groups, in order
        self._at: dict[tuple[str, int], int] = {}  # (file, row group): its first place in its file's plan
        self._held: dict[tuple[str, int, tuple[str, ...], tuple[str, ...]], pa.Table] = {}
        self._held_rows = 0
        self._dropped: set[tuple[str, int]] = set()  # (file, row group) read ahead, then dropped unread

    def plan(self, groups: Iterable[tuple[str, int]]) -> None:
        """Forget what was planned and read ahead, then plan ``groups`` ((file, row group) in the
        order the task reads them)."""
        self.clear()
        for uri, index in groups:
            indexes = self._planned.setdefault(uri, [])
            self._at.setdefault((uri, index), len(indexes))
            indexes.append(index)

    def clear(self) -> None:
        self._planned.clear()
        self._at.clear()
        self._held.clear()
        self._held_rows = 0
        self._dropped.clear()

    def read(self, opened: pq.ParquetFile, uri: str, index: int, columns: list[str],
             dictionaries: Sequence[str] = ()) -> pa.Table:
        """``columns`` of row group ``index`` of ``opened`` (the file at ``uri``): read ahead
        already, or read now with the file's next planned row groups."""
        key = (uri, index, tuple(columns), tuple(dictionaries))
        held = self._held.pop(key, None)
        if held is not None:
            self._held_rows -= held.num_rows
            return held
        together = self._together(opened, uri, index, key)
        if len(together) == 1:
            found: pa.Table = opened.read_row_group(index, columns=columns)
            return found
        order = sorted(together)
        rows = opened.read_row_groups(order, columns=columns)
        start = 0
        for group in order:
            count = opened.metadata.row_group(group).num_rows
            part = rows.slice(start, count)
            start += count
            if group == index:
                found = part
            else:
                self._hold((uri, group, *key[2:]), part)
        return found

    def _together(self, opened: pq.ParquetFile, uri: str, index: int,
                  key: tuple[str, int, tuple[str, ...], tuple[str, ...]]) -> list[int]:
        """Row group ``index`` and the file's planned row groups after it, not read ahead yet,
        while their rows come to at most ``rows`` (``index`` alone when it holds more, or when it
        was read ahead and dropped)."""
        together, total = [index], opened.metadata.row_group(index).num_rows
        at = self._at.get((uri, index))
        if at is None or (uri, index) in self._dropped:
            return together
        for group in self._planned[uri][at + 1:]:
            count = opened.metadata.row_group(group).num_rows
            if total + count > self.rows:
                break
            if group not in together and (uri, group) not in self._dropped \
                    and (uri, group, *key[2:]) not in self._held:
                together.append(group)
                total += count
        return together

    def _hold(self, key: tuple[str, int, tuple[str, ...], tuple[str, ...]], rows: pa.Table) -> None:
        self._held[key] = rows
        self._held_rows += rows.num_rows
        while self._held_rows > self.kept_rows and self._held:
            oldest_key = next(iter(self._held))
            oldest = self._held.pop(oldest_key)
            self._held_rows -= oldest.num_rows
            self._dropped.add((oldest_key[0], oldest_key[1]))


READ_AHEAD = ReadAhead()


def planned_groups(items: Iterable[Mapping[str, object]], schema: pa.Schema) -> Iterator[tuple[str, int]]:
    """(file, row group) of ``items`` (a task's items, rows of ``schema``): of each of its
    ``ROW_GROUP`` list fields, item by item, each item's lists in field order."""
    names = [field.name for field in schema
             if pa.types.is_list(field.type) and field.type.value_type == ROW_GROUP]
    for item in items:
        for name in names:
            for group in item_list(item, name):
                yield str(group["uri"]), int(group["index"])


class ParquetFiles:
    """The files of a task's row groups (``OPENED``: each opened once in the process), looked up
    once per file while a replica's pieces are read: they are many row groups of a few files.
    Forgotten together (``close``, or on leaving a ``with`` block); ``OPENED`` keeps them open."""

    def __init__(self, dictionaries: Sequence[str] = ()) -> None:
        self._opened: dict[str, pq.ParquetFile] = {}
        self._dictionaries = dictionaries

    def __enter__(self) -> ParquetFiles:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def row_group(self, piece: Piece, columns: list[str]) -> pa.Table:
        """``columns`` of the row group ``piece``."""
        return self.read(piece.uri, piece.index, columns)

    def read(self, uri: str, index: int, columns: list[str]) -> pa.Table:
        """``columns`` of row group ``index`` of the file at ``uri``, instants as epoch ms (``read_ms``)."""
        opened = self._opened.get(uri)
        if opened is None:
            opened = self._opened[uri] = OPENED.opened(uri, self._dictionaries)
        return read_ms(READ_AHEAD.read(opened, uri, index, columns, self._dictionaries))

    def close(self) -> None:
        self._opened.clear()


def merge_in_log_order(pieces: list[Piece], read: Callable[[Piece], pa.Table],
                       chunk_rows: int = 65536) -> Iterator[pa.RecordBatch]:
    """The rows of ``pieces`` (``pieces_in_order``), each read by ``read`` with an ``offset``
    column, in offset order (a lower side before a higher one at the same offset), as batches of
    at most ``chunk_rows``: a few row groups are held at a time, and only rows within one window
    between two pieces' lowest offsets are sorted together. Pieces that cannot hold more than
    ``chunk_rows`` rows (a side holds at most a row per offset of its range) are read and sorted
    at once: a window costs a few Arrow calls however few its rows, and most replicas of a dump
    of thousands of partitions are a few row groups of a few rows."""
    if pieces and _at_most(pieces, chunk_rows):
        parts = [rows for rows in map(read, sorted(pieces, key=lambda piece: piece.side)) if rows.num_rows]
        if parts:  # by side, then log order: a stable sort by offset puts a lower side first at one offset
            rows = pa.concat_tables(parts)
            yield from _by_offset(rows).combine_chunks().to_batches(max_chunksize=chunk_rows)
        return
    bounds = sorted({piece.low for piece in pieces})
    held: list[tuple[Piece, pa.Table]] = []  # read, with the rows of later windows
    ready: list[pa.Table] = []  # windows in order, not yet passed on
    ready_rows = 0
    waiting = list(pieces)
    for number, low in enumerate(bounds):
        high = bounds[number + 1] if number + 1 < len(bounds) else None
        while waiting and waiting[0].low == low:
            piece = waiting.pop(0)
            held.append((piece, read(piece)))
        held.sort(key=lambda entry: entry[0].side)  # a lower side first at one offset (data before its marker)
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
            ready.append(_by_offset(rows))
            ready_rows += rows.num_rows
        if ready and (ready_rows >= chunk_rows or high is None):
            # windows are in order: a few together make batches large enough for their reader
            yield from pa.concat_tables(ready).combine_chunks().to_batches(max_chunksize=chunk_rows)
            ready, ready_rows = [], 0


def _by_offset(rows: pa.Table) -> pa.Table:
    """``rows`` in ``offset`` order, rows of one offset in the order given (a stable sort)."""
    return rows.take(pa.array(np.argsort(rows.column("offset").to_numpy(), kind="stable")))


def _at_most(pieces: Sequence[Piece], rows: int) -> bool:
    """Whether ``pieces`` hold at most ``rows`` rows: a side's pieces hold at most one row per
    offset between the lowest and the highest."""
    span = max(piece.high for piece in pieces) - min(piece.low for piece in pieces) + 1
    return span * len({piece.side for piece in pieces}) <= rows


def replica_tables(item: Mapping[str, object], columns: list[str], *, where: ds.Expression | None = None,
                   low: int | None = None, high: int | None = None, schema: pa.Schema | None = None,
                   dictionaries: Sequence[str] = ()) -> Iterator[pa.Table]:
    """The rows of ``item``'s replica (``REPLICA_FILES_ITEM``), ``columns`` of them, a table per
    row group: only its row groups are read (``ParquetFiles``: each file's footer parsed once in
    the process), not every row group's statistics of its files. ``where``: a filter on the
    rows; ``low``/``high``: the rows' offsets from ``low`` (inclusive) to ``high`` (exclusive),
    which skips the row groups the manifest places outside them. ``schema``: the types the
    columns are read as (a file may hold a column as nulls); ``dictionaries``: string columns read
    as dictionary arrays."""
    computed = None if schema is None else in_ms(schema)
    types = {} if computed is None else {name: computed.field(name).type for name in columns
                                         if name not in dictionaries}
    with ParquetFiles(dictionaries) as files:
        for group in item_list(item, "groups"):
            if (low is not None and group["high"] is not None and group["high"] < low) or \
                    (high is not None and group["low"] is not None and group["low"] >= high):
                continue
            table = files.read(group["uri"], group["index"], columns)
            if types and any(f.name in types and f.type != types[f.name] for f in table.schema):
                table = table.cast(pa.schema([f.with_type(types[f.name]) if f.name in types else f
                                              for f in table.schema]))
            if where is not None:
                table = table.filter(where)
            if table.num_rows:
                yield table


def producer_span(groups: Iterable[Mapping[str, Any]]) -> int | None:
    """``max - min + 1`` of the producer ids of ``groups`` (0 without any); None when a row
    group's are not known."""
    low = high = None
    for group in groups:
        if group["producer_low"] is None or group["producer_high"] is None:
            return None
        low = group["producer_low"] if low is None else min(low, group["producer_low"])
        high = group["producer_high"] if high is None else max(high, group["producer_high"])
    return 0 if low is None or high is None else int(high) - int(low) + 1


def replica_filter(item: Mapping[str, object]) -> ds.Expression:
    """The rows of ``item``'s replica (null-safe, as the replica join)."""
    condition = None
    for name in REPLICA_COLUMNS:
        value = item[name]
        term = ds.field(name).is_null() if value is None else ds.field(name) == value
        condition = term if condition is None else condition & term
    return condition


def int_values(column: pa.ChunkedArray | pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """``column`` as int64 values (0 where null) and where it is not null, both new, writable
    arrays (a read-only one is another type to numba, compiled again)."""
    known = column.is_valid().to_numpy(zero_copy_only=False)
    return np.array(column.fill_null(0).to_numpy(), dtype=np.int64), known


def replica_columns(item: Mapping[str, object], count: int) -> list[pa.Array]:
    """``item``'s replica (``REPLICA_FIELDS``), repeated on ``count`` rows."""
    return [pa.array([item[field.name]] * count, field.type) for field in REPLICA_FIELDS]


def table_dataset(uris: list[str], schema: pa.Schema | None = None, dictionaries: Sequence[str] = ()) -> ds.Dataset:
    """The Parquet files at ``uris`` (all on one file system, at least one) as one dataset, with
    ``schema`` (None: the first file's); string columns ``dictionaries`` read as dictionary
    arrays (with no ``schema``), which spares decoding each row's string."""
    filesystem, _ = fs.FileSystem.from_uri(uris[0])
    form = ds.ParquetFileFormat(read_options=ds.ParquetReadOptions(dictionary_columns=list(dictionaries))) \
        if dictionaries else "parquet"
    return ds.dataset([fs.FileSystem.from_uri(uri)[1] for uri in uris], format=form, filesystem=filesystem,
                      schema=schema)


def manifest_dataset(table: TableManifest) -> ds.Dataset | None:
    """Every file ``table`` lists, as one dataset with the table's schema (``schemas.ALL_TABLES``),
    its instants as epoch ms (``schemas.in_ms``); None when it lists none."""
    if not table.files:
        return None
    return table_dataset([table.uri(f) for f in table.files], in_ms(ALL_TABLES[table.name]))


def read_table(table: TableManifest, columns: Sequence[str] | None = None) -> pa.Table:
    """``columns`` (None: all) of every row of the files ``table`` lists, with the table's types
    (``schemas.ALL_TABLES``, instants as epoch ms: ``schemas.in_ms``), each file read in one call.
    For a whole table read on the driver: a dataset (``manifest_dataset``) scans a file row group
    by row group, and ingest writes a row group per replica, so a table of a row per replica costs
    that per partition: the 2,050 rows of ``partition_offsets`` in ``scale_bench.py``'s
    many-partition dump took 1.0 s and 240 MiB through a dataset, 0.2 s and 48 MiB so."""
    schema = in_ms(ALL_TABLES[table.name])
    names = list(columns or schema.names)
    wanted = pa.schema([schema.field(name).with_nullable(True) for name in names])
    parts = []
    for entry in table.files:
        filesystem, path = fs.FileSystem.from_uri(table.uri(entry))
        with filesystem.open_input_file(path) as source:
            parts.append(pq.ParquetFile(source).read(columns=names).cast(wanted))
    return pa.concat_tables(parts) if parts else wanted.empty_table()


def table_batches(table: TableManifest, columns: Sequence[str], batch_rows: int = 1 << 20) -> Iterator[pa.RecordBatch]:
    """``columns`` of every row of the files ``table`` lists, with the table's types, as batches
    of at most ``batch_rows``, file after file: ``read_table`` for a table too large to hold at
    once (half its speed, a batch in memory at a time)."""
    schema = in_ms(ALL_TABLES[table.name])
    wanted = pa.schema([schema.field(name).with_nullable(True) for name in columns])
    for entry in table.files:
        filesystem, path = fs.FileSystem.from_uri(table.uri(entry))
        with filesystem.open_input_file(path) as source:
            for batch in pq.ParquetFile(source).iter_batches(batch_size=batch_rows, columns=list(columns)):
                yield batch.cast(wanted)


def sampled_cuts(sample: np.ndarray, window_rows: int, sample_every: int) -> list[int]:
    """Offsets that cut rows into windows of about ``window_rows``, from ``sample``: their
    offsets in order, one row in ``sample_every``."""
    step = max(1, window_rows // sample_every)
    return [int(cut) for cut in np.unique(sample[step::step])]
