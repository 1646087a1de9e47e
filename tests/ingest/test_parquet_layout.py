"""How ingest lays out the raw tables' Parquet files, on the workers and on the driver, how the
producer pass lays out its ``partition_transactions`` files, and how the passes lay out the files
they hand on."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from txn_audit.ingest.job import _write_driver_table
from txn_audit.reconstruct.prepare_follows import (
    FOLLOW_FIELDS,
    FOLLOW_WRITER_OPTIONS,
    PREPARE_FIELDS,
    PrepareFile,
    read_prepares,
)
from txn_audit.reconstruct.transaction_files import DICTIONARY_COLUMNS
from txn_audit.replica_tasks.commit import TableFile
from txn_audit.schemas import (
    PARTITION_TRANSACTIONS,
    DECODED_TABLES,
    PLAIN_COLUMNS,
    PLAIN_ENCODING,
    RAW_TABLES,
    REPLICA_COLUMNS,
    REPLICA_ROW_GROUP_TABLES,
    TIMESTAMP,
    in_ms,
    raw_writer_options,
    replicas_from_metadata,
)


def _column_encodings(path: Path, group: int = 0) -> dict[str, tuple[str, ...]]:
    """Per column of one row group of the file: the encodings Parquet's metadata lists."""
    row_group = pq.ParquetFile(path).metadata.row_group(group)
    columns = (row_group.column(index) for index in range(row_group.num_columns))
    return {c.path_in_schema: tuple(c.encodings) for c in columns}


def _is_dictionary(encodings: tuple[str, ...]) -> bool:
    """Whether a column chunk of these encodings is dictionary-encoded."""
    return any("DICTIONARY" in encoding for encoding in encodings)


def _encodings(path: Path, group: int = 0) -> dict[str, bool]:
    """Per column of one row group of the file: whether it is dictionary-encoded."""
    return {column: _is_dictionary(encodings) for column, encodings in _column_encodings(path, group).items()}


def test_offsets_are_stored_as_deltas_and_names_as_dictionaries(sample_scan: Any) -> None:
    tables = sample_scan.out / "tables"
    checked = set()
    for table in ("batches", "control_markers", "txn_log"):
        files = sorted((tables / table).glob("*.parquet"))
        assert files, table
        for path in files:
            for group in range(pq.ParquetFile(path).metadata.num_row_groups):
                for column, encodings in _column_encodings(path, group).items():
                    dictionary = _is_dictionary(encodings)
                    if column in PLAIN_COLUMNS:
                        assert not dictionary and PLAIN_ENCODING in encodings, (path.name, column, encodings)
                        checked.add(column)
                    elif column in ("topic", "producer_id"):
                        assert dictionary, (path.name, column)
    assert {"base_offset", "position", "offset", "stored_crc"} <= checked


def test_the_transactions_offsets_and_times_are_stored_as_deltas(sample_scan: Any) -> None:
    """The pass's ``partition_transactions`` files keep dictionaries for names, ids, epochs and
    states, and store the other integers (offsets, times, counts; a TIMESTAMP is an INT64) as deltas."""
    files = sorted((sample_scan.out / "tables" / "partition_transactions").glob("*.parquet"))
    assert files
    deltas = set()
    for path in files:
        for group in range(pq.ParquetFile(path).metadata.num_row_groups):
            for column, encodings in _column_encodings(path, group).items():
                if column in DICTIONARY_COLUMNS:
                    assert _is_dictionary(encodings), (path.name, column, encodings)
                elif pa.types.is_integer(in_ms(PARTITION_TRANSACTIONS).field(column).type):  # INT64 times too
                    assert not _is_dictionary(encodings) and PLAIN_ENCODING in encodings, (path.name, column, encodings)
                    deltas.add(column)
    assert {"first_offset", "marker_offset", "first_timestamp", "producer_last_timestamp"} <= deltas


def test_the_prepare_records_and_their_answers_handed_on_keep_offsets_and_times_as_deltas(tmp_path: Path) -> None:
    """The coordinator pass's Prepare* records and the producer pass's answers, files that the
    next stage reads, store their offsets and times as deltas and their names, ids, epochs and
    states as dictionaries; the records read back unchanged."""
    prepares = pa.Table.from_pylist([
        {"topic": f"t{n % 3}", "partition": n % 4, "producer_id": 1000 + n % 7, "epoch": n % 2,
         "ts": 1_700_000_000_000 + 17 * n, "txn_log_partition": n % 50, "txn_log_offset": 5 * n,
         "transactional_id": f"app-{n % 7}", "state": "PrepareCommit" if n % 5 else "PrepareAbort",
         "next_state": None if n % 11 == 0 else "CompleteCommit", "started": 1_700_000_000_000 + 13 * n,
         "timeout_ms": 60_000} for n in range(300)], schema=PREPARE_FIELDS)
    answers = prepares.append_column("has_marker", pa.array([n % 3 > 0 for n in range(300)])).append_column(
        "next_marker_type", pa.array(["COMMIT"] * 300)).append_column(
        "next_marker_offset", pa.array(range(7, 307), pa.int64()))
    (tmp_path / "prepares").mkdir()
    (tmp_path / "follows").mkdir()
    with PrepareFile(str(tmp_path / "prepares"), "part-0.parquet") as written:
        written.add(prepares)
    with TableFile(str(tmp_path / "follows"), "part-0.parquet", FOLLOW_FIELDS, FOLLOW_WRITER_OPTIONS) as follows:
        follows.add(answers)
    for folder, schema, deltas in (("prepares", PREPARE_FIELDS, {"ts", "txn_log_offset", "started"}),
                                   ("follows", FOLLOW_FIELDS, {"ts", "txn_log_offset", "started",
                                                               "next_marker_offset"})):
        (path,) = (tmp_path / folder).glob("*.parquet")
        for column, encodings in _column_encodings(path).items():
            if column in deltas:
                assert not _is_dictionary(encodings) and PLAIN_ENCODING in encodings, (folder, column, encodings)
            elif pa.types.is_string(schema.field(column).type) or column in ("producer_id", "epoch", "partition"):
                assert _is_dictionary(encodings), (folder, column, encodings)
    back = read_prepares(str(tmp_path / "prepares"), [(f"t{n}", p) for n in range(3) for p in range(4)])
    assert sorted(back.to_pylist(), key=repr) == sorted(prepares.to_pylist(), key=repr)
    assert sorted(pq.read_table(tmp_path / "follows").to_pylist(), key=repr) == sorted(answers.to_pylist(), key=repr)


def test_every_column_stored_as_deltas_is_an_integer() -> None:
    """Parquet encodes only integers as deltas (INT32, INT64: a ``TIMESTAMP(MILLIS)`` is an INT64): a
    column of another type there fails every write."""
    for table, schema in RAW_TABLES.items():
        for column in schema:
            if column.name in PLAIN_COLUMNS:
                assert pa.types.is_integer(column.type) or column.type == TIMESTAMP, (table, column)
    assert "column_encoding" in raw_writer_options(RAW_TABLES["batches"])


def test_the_driver_writes_its_rows_of_a_raw_table_the_same_way(tmp_path: Path) -> None:
    """Inventory issues go to ``decode_issues`` from the driver, beside the workers' rows."""
    rows = [{"broker_id": 1, "log_dir": "ld", "topic": "t", "partition": n // 20, "file": f"ld/t-0/{n:020d}.log",
             "position": n * 4096, "kind": "unrecognised_file", "severity": "info", "detail": "unknown file"}
            for n in range(50)]
    path = tmp_path / "part-driver.parquet"
    _write_driver_table(path, rows, RAW_TABLES["decode_issues"])
    encodings = _encodings(path)
    assert encodings["position"] is False and encodings["topic"] is True
    assert PLAIN_ENCODING in _column_encodings(path)["position"]
    assert pq.read_table(path).to_pylist() == rows
    assert replicas_from_metadata(pq.read_metadata(path).metadata) == {(1, "ld", "t", p) for p in range(3)}
    # a row group per replica
    groups = pq.read_metadata(path)
    assert [groups.row_group(i).num_rows for i in range(groups.num_row_groups)] == [20, 20, 10]


def test_a_table_only_the_driver_writes_is_one_row_group(sample_scan: Any, tmp_path: Path) -> None:
    """The driver's own tables (``segments``, ``partition_offsets``, ...) are read whole, never
    replica by replica: one row group, the footer still naming every replica of its rows."""
    table = pq.read_table(sample_scan.out / "tables" / "partition_offsets")
    rows = table.select(RAW_TABLES["partition_offsets"].names).to_pylist()
    assert len({tuple(r[c] for c in REPLICA_COLUMNS) for r in rows}) > 1
    path = tmp_path / "part-driver.parquet"
    _write_driver_table(path, rows, RAW_TABLES["partition_offsets"], per_replica=False)
    assert pq.read_metadata(path).num_row_groups == 1
    assert pq.read_table(path).to_pylist() == rows
    assert replicas_from_metadata(pq.read_metadata(path).metadata) == _replicas_of_rows(path)
    published = sorted((sample_scan.out / "tables" / "segments").glob("*.parquet"))
    assert [pq.read_metadata(p).num_row_groups for p in published] == [1]


def _replicas_of_rows(path: Path) -> set[tuple[Any, ...]]:
    table = pq.read_table(path, columns=list(REPLICA_COLUMNS))
    return set(zip(*(table.column(name).to_pylist() for name in REPLICA_COLUMNS), strict=True))


def test_every_file_lists_the_replicas_of_its_rows(sample_scan: Any) -> None:
    """Readers skip the replica join on the strength of these lists, so they must be exact."""
    tables = sample_scan.out / "tables"
    several = 0
    for table in DECODED_TABLES:
        for path in sorted((tables / table).glob("*.parquet")):
            listed = replicas_from_metadata(pq.read_metadata(path).metadata)
            assert listed == _replicas_of_rows(path), (table, path.name)
            several += len(listed) > 1
    assert several  # files holding rows of several partitions list each of them


def test_each_row_group_holds_one_replica(sample_scan: Any) -> None:
    """Of the tables tasks read replica by replica (``REPLICA_ROW_GROUP_TABLES``): the row
    group's statistics then name the replica, readers skip other replicas' row groups, and take a
    partition's extent from the footers alone. A table only ever read whole (``aborted_txns``)
    holds a worker's rows of many replicas in one row group."""
    tables = sample_scan.out / "tables"
    groups = 0
    mixed = 0
    for table in DECODED_TABLES:
        for path in sorted((tables / table).glob("*.parquet")):
            reader = pq.ParquetFile(path)
            for group in range(reader.metadata.num_row_groups):
                rows = reader.read_row_group(group, columns=list(REPLICA_COLUMNS))
                replicas = len(rows.group_by(list(REPLICA_COLUMNS)).aggregate([]))
                if table in REPLICA_ROW_GROUP_TABLES:
                    assert replicas == 1, (table, path.name, group)
                    groups += 1
                else:
                    mixed += replicas > 1
            assert replicas_from_metadata(reader.metadata.metadata) is not None
    assert groups > 20 and mixed
    assert set(DECODED_TABLES) - set(REPLICA_ROW_GROUP_TABLES) == {"aborted_txns"}


def test_a_replicas_row_groups_hold_disjoint_offset_ranges(sample_scan: Any) -> None:
    """One segment's rows per row group: a replica's row groups of one table then cover offset
    ranges that do not overlap, so the producer pass reads them in log order."""
    tables = sample_scan.out / "tables"
    for table, offset in (("batches", "base_offset"), ("control_markers", "offset")):
        ranges: dict[tuple[Any, ...], list[tuple[int, int]]] = {}
        for path in sorted((tables / table).glob("*.parquet")):
            reader = pq.ParquetFile(path)
            for group in range(reader.metadata.num_row_groups):
                rows = reader.read_row_group(group, columns=[*REPLICA_COLUMNS, offset, "segment_base_offset"])
                assert len(set(rows.column("segment_base_offset").to_pylist())) == 1, (table, path.name, group)
                replica = tuple(rows.column(name)[0].as_py() for name in REPLICA_COLUMNS)
                offsets = rows.column(offset).to_pylist()
                ranges.setdefault(replica, []).append((min(offsets), max(offsets)))
        assert any(len(found) > 1 for found in ranges.values())
        for replica, found in ranges.items():
            found.sort()
            pairs = zip(found, found[1:], strict=False)
            assert all(later[0] > earlier[1] for earlier, later in pairs), (table, replica)
