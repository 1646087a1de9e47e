"""Discovery of log dirs, partitions and files (no Spark)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from tests.realcorpus import needs_corpus, scenario_dir
from txn_audit.errors import UsageError
from txn_audit.ingest.discover import discover


def _log_dir(root: Path, node_id: int | None, partitions: dict[str, list[str]]) -> Path:
    root.mkdir(parents=True)
    if node_id is not None:
        (root / "meta.properties").write_text(f"#\nversion=1\nnode.id={node_id}\ncluster.id=abc\n")
    (root / "replication-offset-checkpoint").write_text("0\n0\n")
    for name, files in partitions.items():
        (root / name).mkdir()
        for f in files:
            (root / name / f).write_bytes(b"")
    return root


def test_brokers_side_by_side_and_several_log_dirs(tmp_path: Path) -> None:
    _log_dir(tmp_path / "b1" / "data-a", 1, {"orders-0": ["00000000000000000000.log"]})
    _log_dir(tmp_path / "b1" / "data-b", 1, {"my.topic-v2-17": ["00000000000000000000.log"]})
    _log_dir(tmp_path / "b2", 2, {"orders-1": ["00000000000000000000.log"]})
    inv = discover(tmp_path)
    assert inv.brokers == [1, 2]
    assert sorted(d.rel for d in inv.log_dirs) == ["b1/data-a", "b1/data-b", "b2"]
    parts = sorted((r.broker_id, r.topic, r.partition) for r in inv.replicas)
    assert parts == [(1, "my.topic-v2", 17), (1, "orders", 0), (2, "orders", 1)]
    assert sorted(t.rel_path for t in inv.tasks) == [
        "b1/data-a/orders-0/00000000000000000000.log",
        "b1/data-b/my.topic-v2-17/00000000000000000000.log",
        "b2/orders-1/00000000000000000000.log",
    ]


def test_log_dirs_named_like_partitions(tmp_path: Path) -> None:
    # `broker-1` reads like partition 1 of topic `broker`; a manifest beside it must not
    # turn the dump root into a log dir either.
    (tmp_path / "manifest.json").write_text("{}")
    _log_dir(tmp_path / "broker-1", 1, {"orders-0": ["00000000000000000000.log"]})
    _log_dir(tmp_path / "broker-2", None, {"orders-1": ["00000000000000000000.log"]})
    inv = discover(tmp_path)
    assert sorted(d.rel for d in inv.log_dirs) == ["broker-1", "broker-2"]
    assert sorted((r.topic, r.partition, r.broker_id) for r in inv.replicas) == [("orders", 0, 1), ("orders", 1, None)]


def test_deleted_cleaned_swap_are_inventoried_not_decoded(tmp_path: Path) -> None:
    files = [
        "00000000000000000000.log.deleted",
        "00000000000000000000.index.deleted",
        "00000000000000000010.log",
        "00000000000000000010.log.cleaned",
        "00000000000000000005.log.swap",
        "00000000000000000010.snapshot",
        "00000000000000000010.txnindex",
        "00000000000000000010.index",
        "leader-epoch-checkpoint",
    ]
    _log_dir(tmp_path / "d", 3, {"t-0": files})
    inv = discover(tmp_path)
    rows = {r["file_name"]: r for r in inv.segments if r["topic"] == "t"}
    assert rows["00000000000000000000.log.deleted"]["status"] == "deleted"
    assert rows["00000000000000000010.log.cleaned"]["status"] == "cleaned"
    assert rows["00000000000000000005.log.swap"]["status"] == "swap"
    assert not any(rows[n]["decoded"] for n in rows if n.endswith((".deleted", ".cleaned", ".swap")))
    decoded = sorted(Path(t.rel_path).name for t in inv.tasks)
    assert decoded == ["00000000000000000010.log", "00000000000000000010.snapshot", "00000000000000000010.txnindex"]
    assert [r.log_base_offsets for r in inv.replicas] == [[10]]
    assert any(i["kind"] == "not_audited" and ".swap" in i["detail"] for i in inv.issues)


def test_single_partition_folder_as_dump(tmp_path: Path) -> None:
    d = _log_dir(tmp_path / "ld", 1, {"orders-3": ["00000000000000000000.log"]})
    inv = discover(d / "orders-3")
    assert [(r.topic, r.partition) for r in inv.replicas] == [("orders", 3)]
    assert len(inv.tasks) == 1


def test_no_log_dir_is_a_usage_error(tmp_path: Path) -> None:
    (tmp_path / "nothing-here").mkdir()
    (tmp_path / "notes.txt").write_text("hi")
    with pytest.raises(UsageError, match="no Kafka log dir"):
        discover(tmp_path)
    with pytest.raises(UsageError, match="not found"):
        discover(tmp_path / "missing")


def test_odd_names_and_symlinks_are_reported(tmp_path: Path) -> None:
    ld = _log_dir(tmp_path / "ld", 1, {"orders-0": ["00000000000000000000.log"]})
    (ld / "not_a_partition").mkdir()
    (ld / "stray.txt").write_text("?")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "00000000000000000000.log").write_bytes(b"\0" * 10)
    os.symlink(outside, ld / "linked-0")
    inv = discover(tmp_path)
    kinds = {(Path(i["file"]).name, i["kind"]) for i in inv.issues}
    assert ("not_a_partition", "unrecognised_file") in kinds
    assert ("stray.txt", "unrecognised_file") in kinds
    assert ("linked-0", "not_audited") in kinds
    assert all("outside" not in t.path for t in inv.tasks)


def test_replica_folder_suffixes(tmp_path: Path) -> None:
    uuid = "0123456789abcdef0123456789abcdef"
    _log_dir(tmp_path / "ld", 1, {
        "orders-0": ["00000000000000000000.log"],
        f"orders-1.{uuid}-delete": ["00000000000000000000.log"],
        f"orders-2.{uuid}-future": ["00000000000000000000.log"],
    })
    inv = discover(tmp_path)
    assert [(r.topic, r.partition) for r in inv.replicas] == [("orders", 0)]
    statuses = {r["replica_status"] for r in inv.segments if r["topic"] == "orders"}
    assert statuses == {"live", "delete", "future"}
    assert len(inv.tasks) == 1


@needs_corpus
def test_real_corpus_inventory() -> None:
    inv = discover(scenario_dir("healthy") / "logdirs")
    assert inv.brokers == [1]
    topics = {r.topic for r in inv.replicas}
    assert {"orders", "payments", "__transaction_state"} <= topics
    deleted = [r for r in inv.segments if r["status"] == "deleted"]
    assert deleted and not any(r["decoded"] for r in deleted)
    assert not any(t.topic == "__cluster_metadata" for t in inv.tasks)
    assert not [i for i in inv.issues if i["severity"] != "info"]


@needs_corpus
def test_the_kraft_metadata_log_is_read_but_is_no_audited_partition() -> None:
    """``__cluster_metadata-0`` gives the partitions' leadership and is listed with the files seen,
    but it holds no transactions: it is no replica of the audit and has no partition_offsets row."""
    inv = discover(scenario_dir("healthy") / "logdirs")
    assert inv.metadata_partitions
    assert {s["file_name"] for s in inv.segments if s["topic"] == "__cluster_metadata" and s["kind"] == "log"}
    assert "__cluster_metadata" not in {r.topic for r in inv.replicas}
    assert "__cluster_metadata" not in {row["topic"] for row in inv.partition_offsets_rows()}
    assert {"orders", "payments", "__transaction_state"} <= {r.topic for r in inv.replicas}


def test_input_tree_is_not_modified(tmp_path: Path) -> None:
    src = scenario_dir("hanging-unadded-partition") / "logdirs"
    if not src.is_dir():
        pytest.skip("real corpus not found")
    copy = tmp_path / "copy"
    shutil.copytree(src, copy)
    before = {p: (p.stat().st_mtime_ns, p.read_bytes()) for p in copy.rglob("*") if p.is_file()}
    discover(copy)
    after = {p: (p.stat().st_mtime_ns, p.read_bytes()) for p in copy.rglob("*") if p.is_file()}
    assert before == after


def test_the_tiered_storage_index_cache_is_a_log_dir_folder_not_damage(tmp_path: Path) -> None:
    """``remote-log-index-cache/`` (KIP-405: the remote segments' indexes, fetched on demand)
    sits at the top of a tiered broker's log dir: inventoried, not decoded, no issue; a folder
    Kafka does not keep there is still one."""
    dump = tmp_path / "logdirs"
    shutil.copytree(scenario_dir("healthy") / "logdirs", dump)
    cache = dump / "remote-log-index-cache"
    cache.mkdir()
    (cache / "00000000000000000000_AAAAAAAAAAAAAAAAAAAAAA.offset_index").write_bytes(b"\0" * 16)
    (dump / "remote-log-index-cache-old").mkdir()
    inv = discover(dump)
    assert [i["file"] for i in inv.issues if i["kind"] == "unrecognised_file"] == ["remote-log-index-cache-old"]
    assert not any("remote-log-index-cache/" in t.rel_path for t in inv.tasks)
    (row,) = [s for s in inv.segments if s["path"] == "remote-log-index-cache"]
    assert (row["kind"], row["decoded"]) == ("folder", False)
