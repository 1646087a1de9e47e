"""Each partition is audited on one replica, whether or not the replica join runs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.audit.builders import rank
from txn_audit.schemas import RAW_TABLES, replicas_metadata, row_replicas

pytestmark = pytest.mark.spark

LEADER = (1, "broker-1", "t", 0)
FOLLOWER = (2, "broker-2", "t", 0)
OTHER = (2, "broker-2", "t", 1)


def _offsets(spark: Any) -> Any:
    """Partition t-0 on two brokers (broker 1 ahead, so chosen) and t-1 on broker 2 only."""
    from txn_audit.schemas import spark_schema

    def row(replica: tuple[Any, ...], hw: int) -> dict[str, Any]:
        broker, log_dir, topic, partition = replica
        return {"broker_id": broker, "log_dir": log_dir, "topic": topic, "partition": partition,
                "replica_status": "live", "high_watermark": hw, "live_segments": 1, "clean_shutdown": True}

    rows = [row(LEADER, 20), row(FOLLOWER, 10), row(OTHER, 5)]
    schema = RAW_TABLES["partition_offsets"]
    return spark.createDataFrame(pa.Table.from_pylist(rows, schema=schema).to_pandas(), spark_schema(schema))


def _ranked(spark: Any) -> Any:
    """``_offsets`` ranked as reconstruct ranks a dump's replicas, written as ingest writes its
    tables: no metadata log, no batch, so the highest HW speaks."""
    import tempfile

    from txn_audit.manifest import describe_tables
    from txn_audit.reconstruct import ranked_replicas
    from txn_audit.tables import load_table

    folder = Path(tempfile.mkdtemp(prefix="ranked-"))
    offsets = _offsets(spark).toArrow().cast(RAW_TABLES["partition_offsets"])
    names = ("partition_offsets", "metadata_partitions", "batches")
    for name in names:
        table = offsets if name == "partition_offsets" else RAW_TABLES[name].empty_table()
        (folder / name).mkdir()
        pq.write_table(table.replace_schema_metadata(replicas_metadata(row_replicas(table))),
                       folder / name / "part-00000.parquet")
    manifest = describe_tables(folder, names)
    return ranked_replicas(load_table(spark, folder, "partition_offsets"),
                           offsets_files=manifest.table("partition_offsets"),
                           metadata_files=manifest.table("metadata_partitions"), batch_files=manifest.table("batches"))


def _chosen(spark: Any) -> tuple[Any, frozenset[Any]]:
    """The chosen replicas of ``_offsets`` (a frame, and the same as keys)."""
    from txn_audit.reconstruct import chosen_replicas

    ranked = _ranked(spark)
    assert ranked.keys(1) == {LEADER, OTHER} and ranked.keys(2) == {FOLLOWER}
    return chosen_replicas(ranked), ranked.keys(1)


def test_ranking_gives_the_same_ranks_each_time(spark: Any) -> None:
    """Ranking adds its columns to a new schema: the same tables ranked again (a notebook's
    second ``reconstruct``) rank alike."""
    first, again = _ranked(spark), _ranked(spark)
    assert first.of_rank(1).collect() == again.of_rank(1).collect()
    assert first.of_rank(1).columns == again.of_rank(1).columns


def _markers(replica: tuple[Any, ...], count: int) -> list[dict[str, Any]]:
    broker, log_dir, topic, partition = replica
    return [{"broker_id": broker, "log_dir": log_dir, "topic": topic, "partition": partition,
             "file": f"{log_dir}/{topic}-{partition}/00000000000000000000.log", "position": n * 78,
             "segment_base_offset": 0, "offset": n, "timestamp": 1000 + n, "producer_id": 7, "producer_epoch": 0,
             "marker_type": "COMMIT", "control_type": 1, "coordinator_epoch": 0, "key_version": 0,
             "value_version": 0}
            for n in range(count)]


def _write(folder: Path, files: dict[str, list[dict[str, Any]]], *, listed: bool = True) -> None:
    folder.mkdir(parents=True)
    schema = RAW_TABLES["control_markers"]
    for name, rows in files.items():
        table = pa.Table.from_pylist(rows, schema=schema)
        if listed:
            table = table.replace_schema_metadata(replicas_metadata(row_replicas(table)))
        pq.write_table(table, folder / name)


def _audited(spark: Any, folder: Path) -> tuple[Any, Any, set[tuple[Any, ...]]]:
    """The chosen replicas' rows of the table in ``folder``, told by the manifest of its files."""
    from txn_audit.manifest import describe_tables
    from txn_audit.reconstruct import on_replicas
    from txn_audit.tables import load_table

    frame = load_table(spark, folder.parent, folder.name)
    kept = on_replicas(frame, *_chosen(spark), describe_tables(folder.parent, [folder.name]).table(folder.name))
    rows = {(r.broker_id, r.log_dir, r.topic, r.partition, r.offset) for r in kept.collect()}
    return frame, kept, rows


def _rows(replica: tuple[Any, ...], count: int) -> set[tuple[Any, ...]]:
    return {(*replica, n) for n in range(count)}


def test_files_of_chosen_replicas_only_are_read_as_they_are(spark: Any, tmp_path: Path) -> None:
    folder = tmp_path / "a" / "control_markers"
    _write(folder, {"one.parquet": _markers(LEADER, 3), "two.parquet": _markers(OTHER, 2) + _markers(LEADER, 1)})
    frame, kept, rows = _audited(spark, folder)
    assert kept is frame
    assert rows == _rows(LEADER, 3) | _rows(OTHER, 2) | {(*LEADER, 0)}


def test_a_file_with_rows_of_another_replica_is_joined(spark: Any, tmp_path: Path) -> None:
    folder = tmp_path / "b" / "control_markers"
    _write(folder, {"one.parquet": _markers(LEADER, 3), "two.parquet": _markers(FOLLOWER, 4) + _markers(OTHER, 2)})
    frame, kept, rows = _audited(spark, folder)
    assert kept is not frame
    assert rows == _rows(LEADER, 3) | _rows(OTHER, 2)


def test_files_that_do_not_list_their_replicas_are_joined(spark: Any, tmp_path: Path) -> None:
    folder = tmp_path / "c" / "control_markers"
    # a footer that lists only the leader although the file holds the follower's rows would be
    # believed; a footer that lists nothing is not
    _write(folder, {"one.parquet": _markers(LEADER, 3) + _markers(FOLLOWER, 4)}, listed=False)
    frame, kept, rows = _audited(spark, folder)
    assert kept is not frame
    assert rows == _rows(LEADER, 3)


def test_the_manifest_ingest_saved_equals_what_spark_aggregates(spark: Any, sample_scan: Any) -> None:
    """The sample scan's manifest: each table's replicas and row counts, and each replica's log
    end and each partition's oldest time, against Spark's aggregates over every row."""
    from pyspark.sql import functions as F

    from txn_audit.reconstruct import chosen_replicas, on_replicas
    from txn_audit.reconstruct.replicas import _log_ends
    from txn_audit.reconstruct.stability import manifest_extent
    from txn_audit.replica_tasks import read_as_is
    from txn_audit.schemas import REPLICA_COLUMNS
    from txn_audit.tables import load_raw_tables

    raw = load_raw_tables(spark, sample_scan.out / "tables")
    for name in ("batches", "control_markers", "txn_log", "producer_snapshots", "offset_commits"):
        files = raw.files(name)
        assert files.per_replica, name
        counted = {tuple(r[:4]): r[4] for r in raw[name].groupBy(*REPLICA_COLUMNS).count().collect()}
        assert files.replicas() == set(counted), name
        assert {replica: files.rows_of(replica) for replica in counted} == counted, name
    files = raw.files("batches")
    ranked = rank(raw)
    batches = on_replicas(raw["batches"], chosen_replicas(ranked), ranked.keys(1), files)
    assert batches is raw["batches"]  # one copy per partition in the sample
    read = read_as_is(files, ranked.keys(1))
    assert read is not None and read.extents() is not None
    from_manifest = sorted(tuple(row.values()) for row in manifest_extent(read).to_pylist())
    aggregated = sorted(map(tuple, batches.groupBy("topic", "partition").agg(F.min("first_timestamp")).collect()))
    assert len(from_manifest) > 5 and from_manifest == aggregated
    ends = _log_ends(read)
    aggregated_ends = {tuple(r[:4]): r[4] + 1 for r in batches.groupBy(*REPLICA_COLUMNS).agg(
        F.max("last_offset")).collect()}
    assert len(ends) > 5 and ends == aggregated_ends


def test_a_manifest_listing_a_replica_not_chosen_is_joined(spark: Any, tmp_path: Path) -> None:
    """Whatever the frame: the manifest's replicas decide, and one not among the chosen is joined."""
    from txn_audit.manifest import describe_tables
    from txn_audit.reconstruct import on_replicas
    from txn_audit.replica_tasks import read_as_is
    from txn_audit.tables import load_table

    folder = tmp_path / "e" / "control_markers"
    _write(folder, {"one.parquet": _markers(LEADER, 3), "two.parquet": _markers(OTHER, 2)})
    frame = load_table(spark, folder.parent, folder.name)
    files = describe_tables(folder.parent, [folder.name]).table(folder.name)
    assert files is not None and files.replicas() == {LEADER, OTHER}
    chosen, keys = _chosen(spark)
    assert on_replicas(frame, chosen, keys, files) is frame and read_as_is(files, keys) is files
    only_leader = keys - {OTHER}
    assert read_as_is(files, only_leader) is None
    kept = on_replicas(frame, chosen.where("partition = 0"), only_leader, files)
    assert kept is not frame
    assert {(r.broker_id, r.log_dir, r.topic, r.partition, r.offset) for r in kept.collect()} == _rows(LEADER, 3)


def test_the_rows_of_some_replicas_are_their_row_groups(tmp_path: Path) -> None:
    """A file holding the row groups of several replicas (a dump of several brokers): the manifest
    of some replicas' rows keeps their row groups alone; a row group of several replicas has none."""
    from txn_audit.manifest import describe_tables
    from txn_audit.replica_tasks import read_as_is, replicas_rows

    folder = tmp_path / "e" / "control_markers"
    folder.mkdir(parents=True)
    schema = RAW_TABLES["control_markers"]
    mixed = pa.Table.from_pylist(_markers(LEADER, 3) + _markers(FOLLOWER, 3), schema=schema)
    pq.write_table(mixed.replace_schema_metadata(replicas_metadata(row_replicas(mixed))), folder / "mixed.parquet",
                   row_group_size=3)
    alone = pa.Table.from_pylist(_markers(OTHER, 2), schema=schema)
    pq.write_table(alone.replace_schema_metadata(replicas_metadata(row_replicas(alone))), folder / "other.parquet")
    files = describe_tables(folder.parent, [folder.name]).table(folder.name)
    assert files is not None and files.per_replica and files.replicas() == frozenset({LEADER, FOLLOWER, OTHER})
    assert replicas_rows(files, frozenset({LEADER, FOLLOWER, OTHER})) is files  # as they are
    wanted = frozenset({LEADER, OTHER})
    assert read_as_is(files, wanted) is None
    kept = replicas_rows(files, wanted)
    assert kept is not None and kept.replicas() == wanted and kept.root == files.root
    assert [g.replica for f in kept.files for g in f.row_groups] == [LEADER, OTHER]
    assert (kept.rows_of(LEADER), kept.rows_of(OTHER), kept.rows_of(FOLLOWER)) == (3, 2, 0)
    assert [kept.uri(f) for f in kept.files] == [files.uri(f) for f in files.files]
    assert replicas_rows(files, frozenset({FOLLOWER})).files_of(OTHER) == []  # type: ignore[union-attr]
    # one row group of two replicas: which rows are whose is not known
    pq.write_table(mixed.replace_schema_metadata(replicas_metadata(row_replicas(mixed))), folder / "mixed.parquet")
    files = describe_tables(folder.parent, [folder.name]).table(folder.name)
    assert files is not None and not files.per_replica
    with pytest.raises(ValueError, match="do not name each row group's replica"):
        replicas_rows(files, wanted)


def test_a_ledger_round_trips_through_its_file(tmp_path: Path) -> None:
    """What a scan saves is what readers load: every table, file, row group and field, with the
    stage that wrote it, the input's fingerprint and the options."""
    from txn_audit.ledger import LEDGER_FILE, RAW, WORK, Ledger
    from txn_audit.manifest import describe_tables

    folder = tmp_path / "tables"
    _write(folder / "control_markers", {"one.parquet": _markers(LEADER, 3) + _markers(FOLLOWER, 2),
                                        "two.parquet": _markers(OTHER, 2)})
    _write(folder / "txn_log", {}, listed=False)
    described = describe_tables(folder, ["control_markers", "txn_log"])
    markers = described.table("control_markers")
    assert markers is not None and len(markers.files) == 2
    # an upper bound: the one row group mixes two replicas
    assert markers.files[0].replicas == {LEADER, FOLLOWER} and markers.rows_of(LEADER) == 5
    groups = markers.files[1].row_groups
    assert [(g.replica, g.rows, g.offsets, g.producer_ids) for g in groups] == [(OTHER, 2, (0, 1), (7, 7))]
    # the newest time of each row group, and the rows of each table
    assert markers.newest_times() == [1002, 1001] and markers.rows == 7
    txn_log = described.table("txn_log")
    assert txn_log is not None and txn_log.rows == 0 and txn_log.newest_times() == []
    assert markers.files[0].row_groups[0].replica is None and not markers.per_replica  # mixed in one group
    _write(folder / "_work" / "detected", {"one.parquet": _markers(OTHER, 1)})
    ledger = (Ledger(str(folder.absolute()), "dump", "f1", {"control_markers": 7}, {"error": 1})
              .with_tables("ingest", ["control_markers", "txn_log"], RAW)
              .with_tables("detect", ["detected"], WORK, "_work").ran_with({"as_of_ms": 5}))
    assert ledger.raw.tables == described.tables and ledger.table("detected").files[0].path == "_work/detected/one.parquet"
    ledger.save()
    loaded = Ledger.load(folder)
    assert loaded == ledger and loaded.to_json() == ledger.to_json()
    assert loaded.dropping(["detected"]).entries.keys() == {"control_markers", "txn_log"}
    (folder / LEDGER_FILE).write_text('{"version": 0, "tables": {}}')
    assert Ledger.load(folder) is None  # another version: not read
    assert Ledger.load(tmp_path) is None
