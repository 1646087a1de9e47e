"""The producer pass read from the raw tables' files, one replica per task (no Spark): the same
as the pass over the same rows sorted in memory, whatever the files' order, the other replicas
and rows in them, and however the rows are cut to bound a task's memory."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from tests.audit.producer_walk import COMPACTED, TOLERANCE_MS
from tests.audit.test_ordered_pass import _rows
from txn_audit.reconstruct import pass_files
from txn_audit.reconstruct.ordered_pass import DATA, MARKER, pass_input, transaction_pass
from txn_audit.manifest import EXTENT_COLUMNS, TableManifest, describe_file, describe_tables
from txn_audit.reconstruct.pass_files import (
    _Group,
    _Replica,
    _sorted_group,
    log_order_input,
    pass_input_rows,
    pass_items,
    pass_over_files,
    producer_rounds,
    sorted_pass_input,
)
from txn_audit.ingest.worker import replica_runs
from txn_audit.schemas import RAW_TABLES, declared, in_ms, replicas_metadata, row_replicas

LEADER_DIR, FOLLOWER_DIR = "broker-1", "broker-2"


def _raw(row: dict[str, Any], broker: int, log_dir: str) -> tuple[str, dict[str, Any]]:
    """A pass input row of the ordered-pass tests as a row of the raw ``batches`` or ``control_markers`` table."""
    where = {"broker_id": broker, "log_dir": log_dir, "topic": row["topic"], "partition": row["partition"],
             "segment_base_offset": 0, "position": row["offset"] * 100, "file": f"{log_dir}/x.log",
             "producer_id": row["producer_id"], "producer_epoch": row["epoch"]}
    if row["is_marker"]:
        return "control_markers", where | {
            "offset": row["offset"], "timestamp": row["max_timestamp"], "marker_type": row["marker_type"],
            "control_type": 0, "coordinator_epoch": row["coordinator_epoch"], "key_version": 0, "value_version": 0}
    return "batches", where | {
        "base_offset": row["offset"], "last_offset": row["last_offset"], "magic": 2, "codec": "none",
        "timestamp_type": "CreateTime", "is_transactional": row["is_transactional"], "is_control": False,
        "base_sequence": row["base_sequence"], "last_sequence": row["last_sequence"] or -1,
        "record_count": row["record_count"], "first_timestamp": row["first_timestamp"],
        "max_timestamp": row["max_timestamp"], "delete_horizon_timestamp": -1, "partition_leader_epoch": 0,
        "stored_crc": 0, "computed_crc": 0, "crc_ok": True, "size_bytes": row["size_bytes"]}


def _tables(seed: int) -> dict[str, list[dict[str, Any]]]:
    """The leader's rows of ``_rows(seed)``, plus what the pass must not read: a follower's copy
    with other producers, batches without a producer id, and control batches."""
    rng = random.Random(seed)
    tables: dict[str, list[dict[str, Any]]] = {"batches": [], "control_markers": []}
    for row in _rows(seed):
        name, raw = _raw(row, 1, LEADER_DIR)
        tables[name].append(raw)
        name, raw = _raw(row | {"producer_id": row["producer_id"] + 5}, 2, FOLLOWER_DIR)
        tables[name].append(raw)
    for plain in rng.sample(tables["batches"], 20):
        tables["batches"].append(plain | {"producer_id": -1, "base_offset": plain["base_offset"] + 10_000})
    for control in rng.sample(tables["batches"], 20):
        tables["batches"].append(control | {"is_control": True, "base_offset": control["base_offset"] + 20_000})
    return tables


def _write(folder: Path, tables: dict[str, list[dict[str, Any]]], seed: int) -> dict[str, list[str]]:
    """Each table in three files of shuffled rows, with footers listing their replicas, as ingest writes them."""
    rng = random.Random(seed)
    uris: dict[str, list[str]] = {}
    for name, rows in tables.items():
        (folder / name).mkdir(parents=True)
        shuffled = rng.sample(rows, len(rows))
        uris[name] = []
        for part in range(3):
            table = declared(pa.Table.from_pylist(shuffled[part::3], schema=in_ms(RAW_TABLES[name])), RAW_TABLES[name])
            path = folder / name / f"part-{part}.parquet"
            pq.write_table(table.replace_schema_metadata(replicas_metadata(row_replicas(table))), path,
                           row_group_size=16)
            uris[name].append(path.as_uri())
    return uris


def _write_in_log_order(folder: Path, tables: dict[str, list[dict[str, Any]]]) -> dict[str, list[str]]:
    """Each table in one file as ingest writes it: each replica's rows in log order, a row group
    per replica's run, the footer listing the replicas."""
    from txn_audit.ingest.worker import replica_runs

    uris: dict[str, list[str]] = {}
    for name, rows in tables.items():
        (folder / name).mkdir(parents=True)
        ordered = sorted(rows, key=lambda r: (r["broker_id"], r["log_dir"], r["topic"], r["partition"], r["offset"]))
        table = declared(pa.Table.from_pylist(ordered, schema=in_ms(RAW_TABLES[name])), RAW_TABLES[name])
        listed = table.schema.with_metadata(replicas_metadata(row_replicas(table)))
        path = folder / name / "part-0.parquet"
        with pq.ParquetWriter(path, listed) as writer:
            for _replica, run in replica_runs(table):
                writer.write_table(run.cast(listed))
        uris[name] = [path.as_uri()]
    return uris


def _expected(tables: dict[str, list[dict[str, Any]]], broker: int) -> list[dict[str, Any]]:
    """The pass over one broker's rows, sorted in memory, as one stream (times in epoch ms, as read)."""
    parts = [pass_input(pa.Table.from_pylist([r for r in tables[name] if r["broker_id"] == broker],
                                             schema=in_ms(RAW_TABLES[name])), side)
             for name, side in (("batches", DATA), ("control_markers", MARKER))]
    rows = pa.concat_tables(parts).sort_by([(k, "ascending") for k in ("topic", "partition", "producer_id", "offset")])
    return _outputs(transaction_pass(rows.to_batches(max_chunksize=10), late_tolerance_ms=TOLERANCE_MS,
                                     unsequenced_topics=COMPACTED))


def _outputs(batches: Any) -> list[dict[str, Any]]:
    rows = pa.Table.from_batches(list(batches)).to_pylist()
    return sorted(rows, key=repr)


def _items(uris: dict[str, list[str]], parallelism: int = 1, share_rows: int = 10**9) -> list[dict[str, Any]]:
    """The pass's items, from the manifest of the tables' files (each table a folder of one root)."""
    (root,) = {Path(uri.removeprefix("file://")).parent.parent for found in uris.values() for uri in found}
    manifest = describe_tables(root, uris)
    batches, markers = manifest.table("batches"), manifest.table("control_markers")
    assert batches is not None and markers is not None
    assert [batches.uri(f) for f in batches.files] == [uri.removeprefix("file://") for uri in uris["batches"]]
    return pass_items(batches, markers, parallelism, share_rows=share_rows)


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize(("round_rows", "parallelism"), [(10**9, 1), (40, 1), (6, 1), (10**9, 8), (6, 40)])
def test_the_pass_over_the_files_equals_the_pass_in_memory(tmp_path: Path, seed: int, round_rows: int,
                                                           parallelism: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pass_files, "SAMPLE_EVERY", 1)  # windows of exactly round_rows rows
    tables = _tables(seed)
    items = _items(_write(tmp_path, tables, seed), parallelism, share_rows=1)
    leader = [item for item in items if item["log_dir"] == LEADER_DIR]
    # two topics, two partitions, two brokers; with more cores than replicas, replicas are split
    # into shares of their producers, each read by its own task
    shares: dict[tuple[Any, ...], list[tuple[int, int]]] = {}
    for item in items:
        key = tuple(item[k] for k in ("broker_id", "log_dir", "topic", "partition"))
        shares.setdefault(key, []).append((item["share"], item["shares"]))
    assert len(shares) == 8
    assert all(sorted(found) == [(n, len(found)) for n in range(len(found))] for found in shares.values())
    most = max(len(found) for found in shares.values())
    assert most == 1 if parallelism == 1 else 1 < most <= 2 * parallelism
    got = _outputs(batch for item in leader for batch in transaction_pass(
        sorted_pass_input(item, round_rows=round_rows, chunk_rows=5), late_tolerance_ms=TOLERANCE_MS,
        unsequenced_topics=COMPACTED))
    expected = _expected(tables, 1)
    assert got == expected
    assert any(r["event"] for r in got) and any(r["txn"] for r in got)
    # shuffled rows in row groups of 16: the replica's row groups overlap, so no log order
    assert all(log_order_input(item) is None for item in items)


def _in_segments(tables: dict[str, list[dict[str, Any]]], segment: int) -> dict[str, list[dict[str, Any]]]:
    """The rows, each in the segment of ``segment`` offsets that holds it."""
    def offset(name: str) -> str:
        return "base_offset" if name == "batches" else "offset"

    return {name: [{**row, "segment_base_offset": row[offset(name)] // segment * segment} for row in rows]
            for name, rows in tables.items()}


def _write_in_log_order(folder: Path, tables: dict[str, list[dict[str, Any]]]) -> dict[str, list[str]]:
    """Each table as ingest writes it: a replica's rows in offset order, a row group per replica
    and segment, the segments dealt over two files out of order."""
    uris: dict[str, list[str]] = {}
    for name, rows in tables.items():
        offset = "base_offset" if name == "batches" else "offset"
        ordered = sorted(rows, key=lambda r: (r["broker_id"], r["topic"], r["partition"], r[offset]))
        table = declared(pa.Table.from_pylist(ordered, schema=in_ms(RAW_TABLES[name])), RAW_TABLES[name])
        (folder / name).mkdir(parents=True)
        parts = [folder / name / f"part-{n}.parquet" for n in range(2)]
        writers = [pq.ParquetWriter(path, RAW_TABLES[name]) for path in parts]
        runs = list(replica_runs(table))
        for index, (_, run) in enumerate(runs):
            writers[(index * 7) % 3 % 2].write_table(run)  # not file by file in offset order
        for writer in writers:
            writer.add_key_value_metadata(replicas_metadata({replica for replica, _ in runs}))
            writer.close()
        uris[name] = [path.as_uri() for path in parts]
    return uris


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize(("segment", "parallelism"), [(10**6, 1), (8, 1), (3, 8)])
def test_the_pass_in_log_order_equals_the_pass_in_memory(tmp_path: Path, seed: int, segment: int,
                                                         parallelism: int) -> None:
    """Read row group by row group in offset order, producers interleaved: the same transactions
    and flagged rows as the pass over each producer's rows sorted in memory."""
    tables = _in_segments(_tables(seed), segment)
    items = _items(_write_in_log_order(tmp_path, tables), parallelism, share_rows=1)
    leader = [item for item in items if item["log_dir"] == LEADER_DIR]
    assert (max(item["shares"] for item in items) > 1) == (parallelism > 1)  # shares of producers too
    for item in leader:
        rows = log_order_input(item, chunk_rows=4)
        assert rows is not None
        found = [row for batch in rows for row in batch.to_pylist()]
        assert [r["offset"] for r in found] == sorted(r["offset"] for r in found)  # log order
        assert sorted(map(repr, found)) == sorted(
            repr(row) for batch in sorted_pass_input(item) for row in batch.to_pylist())
    got = _outputs(batch for item in leader for batch in transaction_pass(
        pass_input_rows(item), late_tolerance_ms=TOLERANCE_MS, unsequenced_topics=COMPACTED))
    expected = _expected(tables, 1)
    assert got == expected
    assert any(r["event"] for r in got) and any(r["txn"] for r in got)


def test_row_groups_without_a_producer_id_are_neither_read_nor_counted(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """A partition of the coordinator log, and the segments of plain producers' batches alone,
    hold no batch with a producer id: the pass takes none of their rows, so it reads none of their
    row groups and they weigh nothing in its items; the transactions are the same."""
    tables = _in_segments(_tables(0), 8)
    where = {"broker_id": 1, "log_dir": LEADER_DIR, "topic": "__transaction_state", "partition": 3}
    coordinator = [{**tables["batches"][0], **where, "base_offset": n, "last_offset": n, "producer_id": -1,
                    "producer_epoch": -1, "is_transactional": False, "segment_base_offset": n // 8 * 8}
                   for n in range(40)]
    tables["batches"] += coordinator
    read: list[pa.Table] = []
    row_group = pass_files.ParquetFiles.row_group

    def recorded(self: pass_files.ParquetFiles, piece: Any, columns: list[str]) -> pa.Table:
        found = row_group(self, piece, columns)
        if piece.side == DATA:
            read.append(found)
        return found

    monkeypatch.setattr(pass_files.ParquetFiles, "row_group", recorded)
    items = _items(_write_in_log_order(tmp_path, tables))
    leader = [item for item in items if item["log_dir"] == LEADER_DIR]
    # each item's weight: its markers, and the batches of its segments that hold a producer id
    segments: dict[tuple[Any, ...], list[int]] = {}
    for row in tables["batches"]:
        key = tuple(row[k] for k in ("broker_id", "log_dir", "topic", "partition", "segment_base_offset"))
        segments.setdefault(key, []).append(row["producer_id"])
    for item in items:
        replica = tuple(item[k] for k in ("broker_id", "log_dir", "topic", "partition"))
        batches = sum(len(ids) for key, ids in segments.items() if key[:4] == replica and max(ids) >= 0)
        markers = sum(1 for row in tables["control_markers"]
                      if tuple(row[k] for k in ("broker_id", "log_dir", "topic", "partition")) == replica)
        assert item["rows"] == batches + markers
    assert [item["rows"] for item in items if item["topic"] == "__transaction_state"] == [0]
    assert any(max(ids) < 0 for key, ids in segments.items() if key[2] != "__transaction_state")  # plain alone
    got = _outputs(batch for item in leader for batch in transaction_pass(
        pass_input_rows(item), late_tolerance_ms=TOLERANCE_MS, unsequenced_topics=COMPACTED))
    assert got == _expected(tables, 1)
    assert read and all(pc.max(found.column("producer_id")).as_py() >= 0 for found in read)


@pytest.mark.parametrize("round_rows", [40, 6])
def test_a_replica_is_read_in_groups_of_at_most_round_rows(tmp_path: Path, round_rows: int,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pass_files, "SAMPLE_EVERY", 1)
    tables = _tables(0)
    items = _items(_write(tmp_path, tables, 0))
    item = items[0]  # the largest replica
    replica = _Replica(item)
    groups = replica.groups(round_rows)
    whole = _sorted_group(replica, None)
    assert whole is not None and whole.num_rows > round_rows
    read = [_sorted_group(replica, group) for group in groups]
    sizes = [0 if rows is None else rows.num_rows for rows in read]
    assert len(groups) > 1 and max(sizes) <= round_rows
    # the groups cut the rows: each row in exactly one, whole producers or offset windows of one
    keys = sorted((r["producer_id"], r["offset"]) for rows in read if rows is not None for r in rows.to_pylist())
    assert keys == sorted((r["producer_id"], r["offset"]) for r in whole.to_pylist())
    windows = [g for g in groups if g is not None and (g.low is not None or g.high is not None)]
    assert (round_rows == 6) == bool(windows)
    assert all(isinstance(g, _Group) and len(g.producer_ids) == 1 for g in windows)


def test_a_small_replica_is_read_at_once(tmp_path: Path) -> None:
    items = _items(_write(tmp_path, _tables(1), 1))
    assert all(_Replica(item).groups(10**9) == [None] for item in items)
    # row counts from the footers' row-group statistics: never fewer than the replica's rows
    for item in items:
        rows = _sorted_group(_Replica(item), None)
        assert rows is not None and item["rows"] >= rows.num_rows


@pytest.mark.parametrize("seed", range(3))
def test_the_manifest_gives_each_replicas_extent_or_nothing(tmp_path: Path, seed: int) -> None:
    """The highest last offset and lowest first timestamp per replica, as the manifest gives them
    from the row groups' statistics, against the rows; a file whose row groups mix replicas or
    lack statistics gives none."""
    rng = random.Random(seed)
    rows = _tables(seed)["batches"]
    for row in rng.sample(rows, len(rows) // 4):
        row["first_timestamp"] = None
    for row in rows:  # a replica without any first timestamp, and one without any last offset
        if (row["topic"], row["partition"]) == ("orders", 1):
            row["first_timestamp"] = None
        if (row["topic"], row["partition"], row["broker_id"]) == ("orders", 0, 2):
            row["last_offset"] = None
    by_replica: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for row in rows:
        by_replica.setdefault(tuple(row[k] for k in ("broker_id", "log_dir", "topic", "partition")), []).append(row)

    def extreme(found: list[dict[str, Any]], column: str, pick: Any) -> Any:
        values = [r[column] for r in found if r[column] is not None]
        return pick(values) if values else None

    expected = {replica: (extreme(found, "last_offset", max), extreme(found, "first_timestamp", min))
                for replica, found in by_replica.items()}
    assert any(v[0] is None for v in expected.values()) and any(v[1] is None for v in expected.values())
    schema = RAW_TABLES["batches"].with_metadata(replicas_metadata(set(by_replica)))
    for name in EXTENT_COLUMNS:  # never null as ingest writes them; the footers are read as if they could be
        schema = schema.set(schema.get_field_index(name), schema.field(name).with_nullable(True))

    def described(path: Path) -> TableManifest:
        return TableManifest("batches", (describe_file(path, path.name, "batches"),))

    def by_replica_groups(name: str, **options: Any) -> TableManifest:
        """Row groups of one replica each, as ingest writes them (a task decodes one replica's files)."""
        with pq.ParquetWriter(tmp_path / name, schema, **options) as writer:
            for found in by_replica.values():
                writer.write_table(pa.Table.from_pylist(found, schema=schema), row_group_size=7)
        return described(tmp_path / name)

    read = by_replica_groups("by-replica.parquet")
    assert read.extents() == expected
    assert read.extents(list(expected)[:1]) == dict(list(expected.items())[:1])
    bare = by_replica_groups("no-statistics.parquet", write_statistics=["broker_id", "log_dir", "topic", "partition"])
    assert bare.replicas() == set(expected) and bare.extents() is None
    mixed = tmp_path / "mixed.parquet"
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), mixed, row_group_size=len(rows) // 2)
    assert described(mixed).replicas() == set(expected) and described(mixed).extents() is None


def _producers(tables: dict[str, list[dict[str, Any]]], item: dict[str, Any]) -> set[int]:
    """The producer ids of ``item``'s rows that the pass reads (its replica and share)."""
    return {r["producer_id"] for name in tables for r in tables[name]
            if (r["broker_id"], r["log_dir"], r["topic"], r["partition"]) ==
            (item["broker_id"], item["log_dir"], item["topic"], item["partition"])
            and r["producer_id"] >= 0 and not r.get("is_control")
            and r["producer_id"] % item["shares"] == item["share"]}


@pytest.mark.parametrize(("log_order", "parallelism"), [(True, 1), (True, 8), (False, 1), (False, 8)])
def test_a_replica_of_many_producers_is_passed_in_rounds(tmp_path: Path, log_order: bool, parallelism: int,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """A task whose share of a replica holds more producers than a round passes over them in
    rounds of whole producers, reading the files once per round: the same transactions and
    flagged rows as one pass."""
    tables = _in_segments(_tables(0), 8)
    uris = _write_in_log_order(tmp_path, tables) if log_order else _write(tmp_path, tables, 0)
    items = _items(uris, parallelism, share_rows=1)
    leader = [item for item in items if item["log_dir"] == LEADER_DIR]
    for round_producers in (1, 2):
        split = False
        for item in leader:
            producers = _producers(tables, item)
            rounds = producer_rounds(item, round_producers)
            assert len(rounds) == max(1, -(-len(producers) // round_producers))
            split |= len(rounds) > 1
            # every producer of the item in exactly one round
            assert sorted(p for part in rounds for p in _producers(tables, part)) == sorted(producers)
        assert split
    monkeypatch.setattr(pass_files, "ROUND_PRODUCERS", 1)
    got = _outputs(pass_over_files(iter([pa.RecordBatch.from_pylist(leader, schema=pass_files.PASS_ITEM)]),
                                   late_tolerance_ms=TOLERANCE_MS, unsequenced_topics=COMPACTED))
    assert got == _expected(tables, 1)
    assert any(r["event"] for r in got) and any(r["txn"] for r in got)


def test_producers_within_a_round_by_their_ids_are_not_counted(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """When the footers show a replica's producer ids within a span no wider than a round, the
    task passes at once without reading the ids; otherwise it counts them."""
    # producer ids from 2 up, so that a replica holds more rows than the span of its ids
    tables = {name: [r | {"producer_id": r["producer_id"] - 998 if r["producer_id"] >= 0 else -1} for r in rows]
              for name, rows in _in_segments(_tables(1), 8).items()}
    leader = [item for item in _items(_write_in_log_order(tmp_path, tables)) if item["log_dir"] == LEADER_DIR]
    assert all(item["rows"] > 20 for item in leader)
    spans = []  # by every row of the replica, as the footers count them: plain batches' -1 too
    for item in leader:
        ids = [r["producer_id"] for name in tables for r in tables[name]
               if (r["log_dir"], r["topic"], r["partition"]) == (item["log_dir"], item["topic"], item["partition"])]
        spans.append(max(ids) - min(ids) + 1)
    assert max(len(_producers(tables, item)) for item in leader) < max(spans)  # spans wider than the counts

    def unread(item: Any) -> None:
        raise AssertionError("the ids were read")

    monkeypatch.setattr(pass_files, "_Replica", unread)
    for item, span in zip(leader, spans, strict=True):
        assert producer_rounds(item, span) == [item]
        with pytest.raises(AssertionError, match="were read"):
            producer_rounds(item, span - 1)
