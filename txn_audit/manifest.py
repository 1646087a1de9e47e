"""What ingest wrote: the raw tables' files, their row groups, and the replica and offsets of each.

Ingest writes every raw table with a replica column set as row groups of one replica and one
segment each (``ingest.worker.replica_runs``). ``describe_tables`` reads that back from the
files' statistics once, when ingest has written them, into a ``Manifest`` the scan's ledger
keeps (``txn_audit.ledger``). Readers take the manifest, never the files' footers or a
DataFrame's plan: which replicas a table holds (``TableManifest.replicas``: whether a replica
join is needed), each replica's log end and oldest time (``TableManifest.extents``), each
table's rows and newest time (``TableManifest.rows``, ``newest_times``: the default audit time),
and which row groups hold a replica's rows, in log order (``replica_tasks``).

Each file also names the replicas of its rows (as its writer listed them in its footer). The
passes rely on every row group that holds rows naming its one replica
(``TableManifest.per_replica``, what ingest writes); a row group whose statistics do not show
one is described with ``replica`` None, and its table gives no extents. No pyspark here.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import pyarrow.parquet as pq

from txn_audit.schemas import REPLICA_COLUMNS, Replica, replicas_from_metadata

#: the column each raw table's rows are ordered by within a replica (a row group's ``offsets``)
OFFSET_COLUMNS = {"batches": "base_offset", "control_markers": "offset", "txn_log": "offset",
                  "offset_commits": "offset"}
#: a batches row group's extent: the highest last offset and the lowest first timestamp (how far
#: a partition's log goes, and from when it holds data)
EXTENT_COLUMNS = ("last_offset", "first_timestamp")
#: the column of each raw table whose highest value is the newest time it holds (a row group's
#: ``newest``): the newest of them is the dump's newest timestamp, a scan's default audit time
TIME_COLUMNS = {"batches": "max_timestamp", "control_markers": "timestamp", "txn_log": "record_timestamp"}

Key = TypeVar("Key")


@dataclass(frozen=True)
class RowGroupEntry:
    """A row group of a raw table's file."""

    index: int
    #: the one replica all its rows belong to; None when the statistics do not show one
    replica: Replica | None
    rows: int
    #: lowest and highest value of the table's ``OFFSET_COLUMNS`` column; None when some are
    #: null, the table has none, or the statistics do not tell
    offsets: tuple[int, int] | None = None
    #: lowest and highest producer id; None when the statistics do not tell
    producer_ids: tuple[int, int] | None = None
    #: batches only: highest ``last_offset`` and lowest ``first_timestamp`` (None: all null);
    #: None when the statistics do not tell
    extent: tuple[int | None, int | None] | None = None
    #: highest value of the table's ``TIME_COLUMNS`` column; None when the table has none, all
    #: its values are null, or the statistics do not tell
    newest: int | None = None


@dataclass(frozen=True)
class FileEntry:
    """A Parquet file of a table: its path relative to the tables' folder, the replicas its rows
    belong to (None: not known) and its row groups."""

    path: str
    replicas: frozenset[Replica] | None
    row_groups: tuple[RowGroupEntry, ...]

    @functools.cached_property
    def by_replica(self) -> dict[Replica | None, tuple[RowGroupEntry, ...]]:
        """Its row groups by replica (None: those of no known replica), each in file order: a file
        holds a row group per replica and segment, and each replica's are looked up, so the file
        is gone over once, not once per replica (thousands of partitions)."""
        found: dict[Replica | None, list[RowGroupEntry]] = {}
        for group in self.row_groups:
            found.setdefault(group.replica, []).append(group)
        return {replica: tuple(groups) for replica, groups in found.items()}

    def rows_of(self, replica: Replica, where: Callable[[RowGroupEntry], bool] | None = None) -> int:
        """How many rows of ``replica`` the file may hold: its row groups' (those ``where`` keeps,
        when given), a row group of no known replica counting for every replica of the file (an
        upper bound)."""
        if self.replicas is None or replica not in self.replicas:
            return 0
        groups = (*self.by_replica.get(replica, ()), *self.by_replica.get(None, ()))
        return sum(g.rows for g in groups if where is None or where(g))

    @property
    def rows(self) -> int:
        """How many rows the file holds."""
        return sum(group.rows for group in self.row_groups)

    @functools.cached_property
    def as_json(self) -> dict[str, Any]:
        """``file_json``: the entry as JSON, made once."""
        return _file_json(self)


@dataclass(frozen=True)
class TableManifest:
    name: str
    files: tuple[FileEntry, ...]
    #: where the files are (``Manifest.root``)
    root: str = ""

    @property
    def per_replica(self) -> bool:
        """Whether every row group that holds rows names its one replica (what ingest writes)."""
        return all(group.replica is not None for f in self.files for group in f.row_groups if group.rows)

    def replicas(self) -> frozenset[Replica] | None:
        """The replicas of the table's rows; None when a file's are not known."""
        if any(f.replicas is None for f in self.files):
            return None
        return frozenset(r for f in self.files for r in f.replicas or ())

    def of_replicas(self, replicas: frozenset[Replica]) -> TableManifest | None:
        """The table's rows of ``replicas`` alone: the files that hold some, each with those of
        its replicas and their row groups only; None unless every row group names its replica
        (``per_replica``). Readers that take a replica's rows from its row groups (the replica
        tasks) read them as they read a table of those replicas alone."""
        if not self.per_replica or self.replicas() is None:
            return None
        files = []
        for f in self.files:
            mine = (f.replicas or frozenset()) & replicas
            if mine:
                files.append(FileEntry(f.path, mine, tuple(g for g in f.row_groups if g.replica in mine)))
        return TableManifest(self.name, tuple(files), self.root)

    def files_of(self, replica: Replica) -> list[FileEntry]:
        """The files that hold rows of ``replica``."""
        return [f for f in self.files if f.replicas is not None and replica in f.replicas]

    def rows_of(self, replica: Replica, where: Callable[[RowGroupEntry], bool] | None = None) -> int:
        """How many rows of ``replica`` the table may hold, in the row groups ``where`` keeps when
        given (an upper bound, ``FileEntry.rows_of``)."""
        return sum(f.rows_of(replica, where) for f in self.files)

    @property
    def rows(self) -> int:
        """How many rows the table holds."""
        return sum(f.rows for f in self.files)

    def newest_times(self) -> list[int] | None:
        """The highest ``TIME_COLUMNS`` value of each row group that holds rows (their highest is
        SQL's ``max`` of the column); None when a row group's statistics do not give it."""
        times = []
        for f in self.files:
            for group in f.row_groups:
                if not group.rows:
                    continue
                if group.newest is None:
                    return None
                times.append(group.newest)
        return times

    def uri(self, entry: FileEntry) -> str:
        """Where ``entry``'s file is."""
        return f"{self.root.rstrip('/')}/{entry.path}"

    def extents(self, replicas: Iterable[Replica] | None = None) -> dict[Replica, tuple[int | None, int | None]] | None:
        """Per replica (of ``replicas``, or all): its highest ``last_offset`` and lowest
        ``first_timestamp``, as SQL's ``max`` and ``min`` give them; None unless ``per_replica``
        and every row group shows both."""
        if not self.per_replica or self.replicas() is None:
            return None
        wanted = None if replicas is None else set(replicas)
        extents: dict[Replica, tuple[int | None, int | None]] = {}
        for f in self.files:
            for group in f.row_groups:
                if not group.rows or group.replica is None or (wanted is not None and group.replica not in wanted):
                    continue
                if group.extent is None:
                    return None
                widen_extent(extents, group.replica, *group.extent)
        return extents


@dataclass(frozen=True)
class Manifest:
    """The raw tables under ``root`` (a local path or URI, not saved: where the manifest was read)."""

    root: str
    tables: Mapping[str, TableManifest] = field(default_factory=dict)

    def table(self, name: str) -> TableManifest | None:
        """Table ``name``'s files, with this manifest's root."""
        found = self.tables.get(name)
        return None if found is None else TableManifest(found.name, found.files, self.root)


def file_json(entry: FileEntry) -> dict[str, Any]:
    """``entry`` as JSON (``ledger.Ledger`` saves its tables' files so), made once per entry: the
    ledger is saved after every stage, and a raw table's entries (a row group per replica and
    segment) do not change after ingest."""
    return entry.as_json


def _file_json(entry: FileEntry) -> dict[str, Any]:
    replicas = None if entry.replicas is None else sorted(
        ([*r] for r in entry.replicas), key=lambda r: [(v is None, v if v is not None else 0) for v in r])
    return {"path": entry.path, "replicas": replicas, "row_groups": [
        {"index": g.index, "replica": None if g.replica is None else list(g.replica), "rows": g.rows,
         "offsets": None if g.offsets is None else list(g.offsets),
         "producer_ids": None if g.producer_ids is None else list(g.producer_ids),
         "extent": None if g.extent is None else list(g.extent), "newest": g.newest}
        for g in entry.row_groups]}


def _pair(value: Any) -> Any:
    return None if value is None else tuple(value)


def file_from_json(data: Mapping[str, Any]) -> FileEntry:
    """The ``FileEntry`` ``file_json`` gave."""
    listed = data["replicas"]
    return FileEntry(data["path"], None if listed is None else frozenset(tuple(r) for r in listed), tuple(
        RowGroupEntry(g["index"], _pair(g["replica"]), g["rows"], _pair(g["offsets"]), _pair(g["producer_ids"]),
                      _pair(g["extent"]), g.get("newest"))
        for g in data["row_groups"]))


# -- writing: what ingest wrote, from the files' statistics ---------------------------------


def describe_tables(tables_dir: str | Path, names: Iterable[str]) -> Manifest:
    """The manifest of tables ``names`` under ``tables_dir`` (every ``*.parquet`` of
    ``tables_dir/<name>/`` not hidden), read from the files' footers."""
    root = Path(tables_dir)
    tables = {}
    for name in names:
        folder = root / name
        paths = sorted(p for p in folder.iterdir() if p.suffix == ".parquet" and not p.name.startswith((".", "_"))) \
            if folder.is_dir() else []
        tables[name] = TableManifest(name, tuple(describe_file(p, f"{name}/{p.name}", name) for p in paths),
                                     str(root.absolute()))
    return Manifest(str(root.absolute()), tables)


def describe_file(path: str | Path, relative: str, table: str) -> FileEntry:
    """The Parquet file at ``path`` of ``table`` (named ``relative`` in the manifest): the
    replicas its footer lists (``schemas.replicas_from_metadata``, as the writers list them) and
    its row groups."""
    metadata = pq.read_metadata(str(path))
    listed = replicas_from_metadata(metadata.metadata)
    names = metadata.schema.to_arrow_schema().names
    where = [names.index(name) for name in REPLICA_COLUMNS] if set(REPLICA_COLUMNS) <= set(names) else None
    offset = OFFSET_COLUMNS.get(table)
    offset_at = names.index(offset) if offset in names else None
    producer_at = names.index("producer_id") if "producer_id" in names else None
    extent_at = [names.index(c) for c in EXTENT_COLUMNS] \
        if table == "batches" and set(EXTENT_COLUMNS) <= set(names) else None
    time_at = names.index(TIME_COLUMNS[table]) if TIME_COLUMNS.get(table) in names else None
    groups = []
    for index in range(metadata.num_row_groups):
        group = metadata.row_group(index)
        groups.append(RowGroupEntry(
            index=index,
            replica=None if where is None else _one_replica(group, where),
            rows=group.num_rows,
            offsets=None if offset_at is None else _range(group, offset_at),
            producer_ids=None if producer_at is None else _range(group, producer_at, nulls=True),
            extent=None if extent_at is None else _extent(group, *extent_at),
            newest=None if time_at is None else _newest(group, time_at),
        ))
    return FileEntry(relative, None if listed is None else frozenset(listed), tuple(groups))


def _one_replica(group: pq.RowGroupMetaData, where: list[int]) -> Replica | None:
    """The one replica all rows of ``group`` belong to, if its statistics show it."""
    values: list[Any] = []
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
    broker_id, log_dir, topic, partition = values
    return (broker_id, log_dir, topic, partition)


def _range(group: pq.RowGroupMetaData, column: int, *, nulls: bool = False) -> tuple[int, int] | None:
    """Lowest and highest value of ``column`` in ``group`` (with ``nulls``, of its values that
    are not null); None when the statistics do not tell or, without ``nulls``, some are null."""
    stats = group.column(column).statistics
    if stats is None or not stats.has_min_max or not stats.has_null_count or (stats.null_count and not nulls):
        return None
    return int(stats.min_raw), int(stats.max_raw)


_UNKNOWN = object()


def _extreme(group: pq.RowGroupMetaData, column: int, highest: bool) -> object:
    """The highest (or lowest) value of ``column`` in ``group``: None when every value is null,
    ``_UNKNOWN`` when the statistics do not tell."""
    stats = group.column(column).statistics
    if stats is None or not stats.has_null_count:
        return _UNKNOWN
    if stats.null_count == group.num_rows:
        return None
    if not stats.has_min_max:
        return _UNKNOWN
    return int(stats.max_raw if highest else stats.min_raw)  # raw: a TIMESTAMP's epoch ms too


def _newest(group: pq.RowGroupMetaData, column: int) -> int | None:
    """The highest value of ``column`` in ``group``; None when all are null or the statistics do not tell."""
    top = _extreme(group, column, True)
    return top if isinstance(top, int) else None


def _extent(group: pq.RowGroupMetaData, highest_at: int, lowest_at: int) -> tuple[int | None, int | None] | None:
    top, bottom = _extreme(group, highest_at, True), _extreme(group, lowest_at, False)
    if top is _UNKNOWN or bottom is _UNKNOWN:
        return None
    assert top is None or isinstance(top, int)
    assert bottom is None or isinstance(bottom, int)
    return top, bottom


def widen_extent(extents: dict[Key, tuple[int | None, int | None]], key: Key, highest: int | None,
                 lowest: int | None) -> None:
    """Fold a highest last offset and a lowest first timestamp into ``extents[key]``, ignoring
    nulls as SQL's ``max`` and ``min`` do."""
    top, bottom = extents.get(key, (None, None))
    extents[key] = (_sql_pick(top, highest, max), _sql_pick(bottom, lowest, min))


def _sql_pick(a: int | None, b: int | None, pick: Callable[[int, int], int]) -> int | None:
    return b if a is None else a if b is None else pick(a, b)
