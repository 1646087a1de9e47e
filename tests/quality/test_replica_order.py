"""Each batch next to the previous one in its replica's offset order, read from the files (no
Spark): the same rows as a walk over every replica's batches sorted in memory, whatever the
files' order, the other replicas in them and the windows a large replica is read in."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.conftest import fresh_python
from txn_audit.quality import replica_order
from txn_audit.quality.replica_order import NEIGHBOURS, replica_neighbours
from txn_audit.replica_tasks.reading import replica_file_items
from txn_audit.manifest import TableManifest, describe_file
from txn_audit.schemas import REPLICA_COLUMNS, replicas_metadata, row_replicas

COLUMNS = pa.schema([*[NEIGHBOURS.field(name) for name in REPLICA_COLUMNS], pa.field("base_offset", pa.int64()),
                     pa.field("last_offset", pa.int64()), pa.field("position", pa.int64())])
REPLICAS = [(1, "d1", "t", 0), (1, "d1", "t", 1), (2, "d2", "t", 0), (None, None, "u", 3)]


def batch_rows(seed: int, batches: int = 150) -> list[dict[str, Any]]:
    """Batches of four replicas: some repeat the previous base offset (copies), some start at or
    before the previous one's last offset, a few lack their base or last offset."""
    rng = random.Random(seed)
    rows = []
    for broker_id, log_dir, topic, partition in REPLICAS:
        offset, position = 0, 0
        for _ in range(batches):
            length = rng.randint(1, 5)
            base = max(0, offset - rng.choice([0, 0, 0, 0, 0, 1, 3]))
            for _copy in range(rng.choice([1] * 8 + [2, 3])):
                row = {"broker_id": broker_id, "log_dir": log_dir, "topic": topic, "partition": partition,
                       "base_offset": base, "last_offset": base + length - 1, "position": position}
                if rng.random() < 0.02:
                    row["base_offset"] = None
                elif rng.random() < 0.02:
                    row["last_offset"] = None
                rows.append(row)
                position += 100  # distinct per replica: the order is total
            offset = base + length
    return rows


def walked(rows: list[dict[str, Any]]) -> set[tuple[Any, ...]]:
    """The neighbour rows by a plain walk: sorted per replica with nulls first, compared as SQL does."""
    found = set()
    for replica in REPLICAS:
        mine = [r for r in rows if tuple(r[k] for k in REPLICA_COLUMNS) == replica]
        mine.sort(key=lambda r: (r["base_offset"] is not None, r["base_offset"] or 0, r["position"]))
        for previous, row in zip(mine, mine[1:], strict=False):
            base, prev_base, prev_last = row["base_offset"], previous["base_offset"], previous["last_offset"]
            repeats = None not in (base, prev_base) and base == prev_base
            overlaps = None not in (base, prev_last) and base <= prev_last
            if repeats or overlaps:
                found.add((*replica, base, row["last_offset"], prev_base, prev_last))
    return found


def write_files(folder: Path, rows: list[dict[str, Any]], seed: int, files: int = 3,
                schema: pa.Schema = COLUMNS, shuffle: bool = True) -> list[str]:
    """The rows shuffled (or as given) into ``files`` Parquet files of ``schema`` whose footers
    list their replicas, each replica's rows of a file in row groups of their own, as ingest
    writes them."""
    shuffled = random.Random(seed).sample(rows, len(rows)) if shuffle else rows
    uris = []
    for part in range(files):
        table = pa.Table.from_pylist(shuffled[part::files], schema=schema)
        path = folder / f"part-{part}.parquet"
        with pq.ParquetWriter(path, table.schema.with_metadata(replicas_metadata(row_replicas(table)))) as writer:
            by_replica: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
            for row in shuffled[part::files]:
                by_replica.setdefault(tuple(row[k] for k in REPLICA_COLUMNS), []).append(row)
            for mine in by_replica.values():
                writer.write_table(pa.Table.from_pylist(mine, schema=table.schema), row_group_size=32)
        uris.append(path.as_uri())
    return uris


def manifest_of(uris: list[str]) -> TableManifest:
    """The manifest of the batches files at ``uris`` (of one folder)."""
    paths = [Path(uri.removeprefix("file://")) for uri in uris]
    (root,) = {path.parent for path in paths}
    return TableManifest("batches", tuple(describe_file(path, path.name, "batches") for path in paths), str(root))


def neighbours_from_files(uris: list[str], window_rows: int) -> set[tuple[Any, ...]]:
    found = set()
    for item in replica_file_items(manifest_of(uris)):
        for batch in replica_neighbours(item, window_rows=window_rows):
            assert batch.schema == NEIGHBOURS
            found |= {tuple(row.values()) for row in batch.to_pylist()}
    return found


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("window_rows", [1_000_000, 40, 5])
def test_neighbours_read_from_files_equal_a_walk_over_sorted_rows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, seed: int, window_rows: int
) -> None:
    monkeypatch.setattr(replica_order, "SAMPLE_EVERY", 3)  # windows of a few rows: many cuts
    rows = batch_rows(seed)
    expected = walked(rows)
    # the rows exercise both conditions, nulls and (with windows) the carry across window cuts
    assert any(e[4] == e[6] for e in expected) and any(e[6] is not None and e[4] != e[6] for e in expected)
    assert any(e[5] is None for e in expected) or any(e[7] is None for e in expected) or seed != 1
    assert neighbours_from_files(write_files(tmp_path, rows, seed), window_rows) == expected


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_rows_read_in_order_give_the_same_rows_unsorted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, seed: int
) -> None:
    # as ingest writes a replica: its batches in log order, none without a base offset or position
    rows = [r for r in batch_rows(seed) if r["base_offset"] is not None]
    rows.sort(key=lambda r: (REPLICAS.index(tuple(r[k] for k in REPLICA_COLUMNS)), r["base_offset"], r["position"]))
    expected = walked(rows)
    assert any(e[4] == e[6] for e in expected) and any(e[6] is not None and e[4] != e[6] for e in expected)

    def sorted_again(*args: object, **kwargs: object) -> None:
        raise AssertionError("rows in order sorted again")

    monkeypatch.setattr(replica_order.pc, "sort_indices", sorted_again)
    assert neighbours_from_files(write_files(tmp_path, rows, seed, files=1, shuffle=False), 1_000_000) == expected


def test_a_pair_out_of_order_by_base_or_position_is_found() -> None:
    assert replica_order._ordered(np.array([1, 2, 2, 5]), np.array([9, 1, 4, 0]))
    assert not replica_order._ordered(np.array([1, 3, 2]), np.array([0, 1, 2]))
    assert not replica_order._ordered(np.array([1, 2, 2]), np.array([0, 5, 4]))
    # offsets far apart compare without overflow
    assert not replica_order._ordered(np.array([2**62, -(2**62)]), np.array([0, 1]))


def test_a_replica_read_in_windows_is_cut_at_its_sampled_base_offsets(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from txn_audit.replica_tasks.reading import replica_tables

    monkeypatch.setattr(replica_order, "SAMPLE_EVERY", 4)
    rows = batch_rows(4)
    uris = write_files(tmp_path, rows, 4)
    item = replica_file_items(manifest_of(uris))[0]
    windows = replica_order._windows(item, 40)

    def read(low: int | None, high: int | None) -> pa.Array:
        parts = replica_tables(item, ["base_offset"], where=replica_order._window_filter(low, high), low=low,
                               high=high)
        return pa.concat_arrays([part.column("base_offset").combine_chunks() for part in parts])

    counts = [len(read(low, high)) for low, high in windows]
    mine = [r for r in rows if tuple(r[k] for k in REPLICA_COLUMNS) == tuple(item[k] for k in REPLICA_COLUMNS)]
    assert len(windows) > 3 and sum(counts) == len(mine)  # every row in exactly one window
    assert max(counts) <= 40 + 2 * 4 * 3  # about the window's size: cuts fall every 10 samples
    assert read(*windows[0]).null_count == sum(r["base_offset"] is None for r in mine)
    assert windows[0][0] is None and windows[-1][1] is None  # open at both ends


def test_replica_file_items_one_per_replica_largest_first(tmp_path: Path) -> None:
    rows = [r for r in batch_rows(5, batches=30) if r["partition"] != 1] + batch_rows(5, batches=60)[:5]
    items = replica_file_items(manifest_of(write_files(tmp_path, rows, 5)))
    assert [tuple(i[k] for k in REPLICA_COLUMNS) for i in items][0] in REPLICAS
    assert len(items) == len({tuple(r[k] for k in REPLICA_COLUMNS) for r in rows})
    assert [i["rows"] for i in items] == sorted((i["rows"] for i in items), reverse=True)
    for item in items:
        replica = tuple(item[k] for k in REPLICA_COLUMNS)
        assert item["rows"] >= sum(tuple(r[k] for k in REPLICA_COLUMNS) == replica for r in rows)
        assert len(item["files"]) == 3  # type: ignore[arg-type]


def test_the_tasks_module_imports_without_great_expectations() -> None:
    """The replica-order tasks run in Python workers that unpickle their body by importing this
    module (and its package): Great Expectations, about 2 s of a core to import, stays out."""
    code = ("import sys, txn_audit.quality.replica_order, txn_audit.quality.epoch_order, txn_audit.quality.checks; "
            "print(sorted({m.split('.')[0] for m in sys.modules} & {'great_expectations', 'pyspark'}))")
    assert fresh_python(code) == ["[]"]
