"""Hostile dump layouts: links out of the dump, unreadable and odd files, odd names, files that
change under the audit. Each must give a clear ``decode_issues`` row, never a traceback.

Pure (discovery plus ``decode_task``), except one end-to-end scan through Spark at the end.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from tests.fuzz.targets import rows_of
from txn_audit.errors import UsageError
from txn_audit.formats.model import Record
from txn_audit.formats.record_batch import encode_batch, encode_control_batch
from txn_audit.ingest import worker
from txn_audit.ingest.discover import discover
from txn_audit.ingest.tasks import FileTask, TableRows
from txn_audit.ingest.worker import decode_task

REPO = Path(__file__).resolve().parents[2]
T0 = 1_795_377_608_870
SEGMENT_NAME = "00000000000000000000.log"


def _segment(batches: int = 2) -> bytes:
    parts = []
    for i in range(batches):
        parts.append(encode_batch([Record(2 * i, T0 + i, b"k", b"v" * 10)], base_offset=2 * i, producer_id=4,
                                  producer_epoch=0, base_sequence=i, is_transactional=True))
        parts.append(encode_control_batch(offset=2 * i + 1, producer_id=4, producer_epoch=0, marker_type="COMMIT",
                                          coordinator_epoch=0, timestamp=T0 + i))
    return b"".join(parts)


def _log_dir(root: Path, partitions: dict[str, bytes], node_id: int = 1) -> Path:
    root.mkdir(parents=True)
    (root / "meta.properties").write_text(f"version=1\nnode.id={node_id}\ncluster.id=abc\n")
    (root / "replication-offset-checkpoint").write_text("0\n0\n")
    for name, data in partitions.items():
        (root / name).mkdir()
        (root / name / SEGMENT_NAME).write_bytes(data)
    return root


def _issues(inv: Any) -> set[tuple[str, str]]:
    return {(i["file"], i["kind"]) for i in inv.issues}


def _decode(task: FileTask) -> dict[str, list[dict[str, Any]]]:
    out = TableRows()
    for _ in decode_task(task, out):
        pass
    return rows_of(out)


def _task(path: Path, size: int | None = None, topic: str = "t") -> FileTask:
    return FileTask(str(path), f"{topic}-0/{path.name}", "log", 1, "ld", topic, 0, 0,
                    path.stat().st_size if size is None else size)


# -- links out of the dump -----------------------------------------------------------------


def test_symlinks_out_of_the_dump_are_reported_not_followed(tmp_path: Path) -> None:
    outside = _log_dir(tmp_path / "elsewhere" / "ld", {"secret-0": _segment()}, node_id=9)
    dump = tmp_path / "dump"
    _log_dir(dump / "b1", {"orders-0": _segment()})
    os.symlink(outside, dump / "b9")                                   # a whole log dir, beside the real one
    os.symlink(outside / "secret-0", dump / "b1" / "linked-0")         # a partition folder
    os.symlink(outside / "secret-0" / SEGMENT_NAME, dump / "b1" / "orders-0" / "00000000000000000100.log")  # a file
    inv = discover(dump)
    assert {("b9", "not_audited"), ("b1/linked-0", "not_audited"),
            ("b1/orders-0/00000000000000000100.log", "not_audited")} <= _issues(inv)
    assert all("symbolic link" in i["detail"] for i in inv.issues if i["kind"] == "not_audited")
    assert [t.rel_path for t in inv.tasks] == [f"b1/orders-0/{SEGMENT_NAME}"]
    assert inv.brokers == [1]
    assert all("elsewhere" not in t.path for t in inv.tasks)


# -- files that cannot be read -----------------------------------------------------------


def test_unreadable_segment_is_an_unreadable_file_row(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / SEGMENT_NAME
    path.write_bytes(_segment())
    real_open = os.open

    def deny(p: str, *args: Any, **kwargs: Any) -> int:
        if os.fspath(p) == str(path):
            raise PermissionError(13, "Permission denied", str(p))
        return real_open(p, *args, **kwargs)

    monkeypatch.setattr(worker.os, "open", deny)  # honest also as root, where chmod 000 does not stop a read
    rows = _decode(_task(path))
    assert [(i["kind"], i["severity"], i["detail"]) for i in rows["decode_issues"]] == [
        ("unreadable_file", "error", "cannot read the file: Permission denied")]
    assert rows["batches"] == []


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads a file whatever its mode")
def test_chmod_000_segment_is_an_unreadable_file_row(tmp_path: Path) -> None:
    path = tmp_path / SEGMENT_NAME
    path.write_bytes(_segment())
    path.chmod(0)
    try:
        rows = _decode(_task(path))
    finally:
        path.chmod(0o644)
    assert [i["kind"] for i in rows["decode_issues"]] == ["unreadable_file"]


def test_a_folder_where_a_segment_was_is_unreadable(tmp_path: Path) -> None:
    path = tmp_path / SEGMENT_NAME
    path.mkdir()
    rows = _decode(_task(path, size=100))
    assert [i["kind"] for i in rows["decode_issues"]] == ["unreadable_file"]


def test_a_fifo_where_a_segment_was_does_not_block_the_worker(tmp_path: Path) -> None:
    path = tmp_path / SEGMENT_NAME
    os.mkfifo(path)
    found: list[dict[str, list[dict[str, Any]]]] = []
    runner = threading.Thread(target=lambda: found.append(_decode(_task(path, size=100))), daemon=True)
    runner.start()
    runner.join(timeout=20)
    if runner.is_alive():  # unblock the opener (a writer end appears), then fail
        os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))
        pytest.fail("decode_task blocked on a FIFO")
    rows = found[0]
    assert [(i["kind"], i["detail"]) for i in rows["decode_issues"]] == [
        ("unreadable_file", "cannot read the file: not a regular file")]


def test_a_fifo_in_a_partition_folder_is_not_a_task(tmp_path: Path) -> None:
    ld = _log_dir(tmp_path / "ld", {"orders-0": _segment()})
    os.mkfifo(ld / "orders-0" / "00000000000000000100.log")
    inv = discover(tmp_path)
    assert [Path(t.rel_path).name for t in inv.tasks] == [SEGMENT_NAME]
    row = next(i for i in inv.issues if i["file"].endswith("00000000000000000100.log"))
    assert (row["kind"], row["detail"]) == ("not_audited", "not a regular file: not audited")


# -- names -----------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["orders", "orders-", "-3", "orders-x", "orders-1.5", "orders-99999999999",
                                  "orders-0-delete", " -0x"])
def test_folder_names_that_are_not_topic_partition(tmp_path: Path, name: str) -> None:
    ld = _log_dir(tmp_path / "ld", {"orders-0": _segment()})
    (ld / name).mkdir()
    (ld / name / SEGMENT_NAME).write_bytes(_segment())
    inv = discover(tmp_path)
    assert (f"ld/{name}", "unrecognised_file") in _issues(inv)
    assert [t.rel_path for t in inv.tasks] == [f"ld/orders-0/{SEGMENT_NAME}"]


def test_segment_name_beyond_a_long_is_not_a_segment(tmp_path: Path) -> None:
    ld = _log_dir(tmp_path / "ld", {"orders-0": _segment()})
    (ld / "orders-0" / "99999999999999999999.log").write_bytes(_segment())  # > 2**63 - 1
    inv = discover(tmp_path)
    assert ("ld/orders-0/99999999999999999999.log", "unrecognised_file") in _issues(inv)
    assert [Path(t.rel_path).name for t in inv.tasks] == [SEGMENT_NAME]


@pytest.mark.parametrize("topic", ["zamówienia", "注文", "emoji-🙂"])
def test_non_ascii_topic_names_decode_normally(tmp_path: Path, topic: str) -> None:
    _log_dir(tmp_path / "ld", {f"{topic}-3": _segment()})
    inv = discover(tmp_path)
    assert [(r.topic, r.partition) for r in inv.replicas] == [(topic, 3)]
    assert not [i for i in inv.issues if i["severity"] != "info"]
    (task,) = inv.tasks
    rows = _decode(task)
    assert rows["decode_issues"] == []
    assert {b["topic"] for b in rows["batches"]} == {topic} and len(rows["batches"]) == 4
    assert [m["marker_type"] for m in rows["control_markers"]] == ["COMMIT", "COMMIT"]


@pytest.mark.skipif(sys.platform == "darwin", reason="macOS refuses names that are not UTF-8")
def test_names_that_are_not_utf8_are_reported(tmp_path: Path) -> None:
    ld = _log_dir(tmp_path / "ld", {"orders-0": _segment()})
    bad_dir = os.fsencode(ld) + b"/caf\xe9-0"
    os.mkdir(bad_dir)
    with open(bad_dir + b"/" + SEGMENT_NAME.encode(), "wb") as f:
        f.write(_segment())
    with open(os.fsencode(ld) + b"/orders-0/0000000000000000010\xff.log", "wb") as f:
        f.write(b"x")
    os.mkdir(os.fsencode(tmp_path) + b"/\xfe")
    inv = discover(tmp_path)
    shown = {(i["file"], i["kind"]) for i in inv.issues if "not UTF-8" in i["detail"]}
    assert shown == {("ld/caf\\xe9-0", "unrecognised_file"), ("ld/orders-0/0000000000000000010\\xff.log",
                                                               "unrecognised_file"), ("\\xfe", "unrecognised_file")}
    for row in inv.issues + inv.segments:  # every string goes into Arrow: it must be valid UTF-8
        for value in row.values():
            if isinstance(value, str):
                value.encode("utf-8")
    assert [t.rel_path for t in inv.tasks] == [f"ld/orders-0/{SEGMENT_NAME}"]


# -- files that change under the audit -----------------------------------------------------


def test_segment_truncated_after_discovery(tmp_path: Path) -> None:
    data = _segment(3)
    ld = _log_dir(tmp_path / "ld", {"orders-0": data})
    (task,) = discover(tmp_path).tasks
    os.truncate(ld / "orders-0" / SEGMENT_NAME, len(data) // 2)
    rows = _decode(task)
    kinds = [(i["kind"], i["severity"]) for i in rows["decode_issues"]]
    assert kinds[0] == ("unreadable_file", "warning") and "changed during the audit" in rows["decode_issues"][0]["detail"]
    assert kinds[1:] == [("truncated_tail", "warning")]
    assert 0 < len(rows["batches"]) < 6


def test_segment_replaced_after_discovery(tmp_path: Path) -> None:
    ld = _log_dir(tmp_path / "ld", {"orders-0": _segment(3)})
    (task,) = discover(tmp_path).tasks
    replacement = tmp_path / "new.log"
    replacement.write_bytes(_segment(1))
    os.replace(replacement, ld / "orders-0" / SEGMENT_NAME)  # as a broker's log cleaner swaps a segment
    rows = _decode(task)
    assert [i["kind"] for i in rows["decode_issues"]] == ["unreadable_file"]
    assert len(rows["batches"]) == 2


def test_segment_vanished_after_discovery(tmp_path: Path) -> None:
    ld = _log_dir(tmp_path / "ld", {"orders-0": _segment()})
    (task,) = discover(tmp_path).tasks
    (ld / "orders-0" / SEGMENT_NAME).unlink()
    rows = _decode(task)
    assert [(i["kind"], i["detail"]) for i in rows["decode_issues"]] == [
        ("unreadable_file", "cannot read the file: No such file or directory")]


_TRUNCATE_WHILE_DECODING = """
import os, sys
from txn_audit.ingest import worker
from txn_audit.ingest.tasks import FileTask, TableRows
from txn_audit.ingest.worker import decode_task
path, limit = sys.argv[1], int(sys.argv[2])
worker.READ_LIMIT = limit
size = os.path.getsize(path)
out = TableRows()
steps = decode_task(FileTask(path, "t-0/x.log", "log", 1, "ld", "t", 0, 0, size), out)
next(steps)                 # the first chunk of batches is decoded ...
os.truncate(path, 0)        # ... then the file is cut under the decoder
for _ in steps:
    pass
print(sum(b.num_rows for b in out.drain()))
"""


def _many_batches(path: Path) -> None:
    one = encode_batch([Record(0, T0, b"k", b"v")], base_offset=0, producer_id=-1, producer_epoch=-1,
                       base_sequence=-1)
    with path.open("wb") as f:
        for i in range(9000):  # more than one chunk of the column-wise walk (8192 batches)
            f.write(i.to_bytes(8, "big") + one[8:])


def _truncate_while_decoding(tmp_path: Path, read_limit: int) -> subprocess.CompletedProcess[str]:
    path = tmp_path / SEGMENT_NAME
    _many_batches(path)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-c", _TRUNCATE_WHILE_DECODING, str(path), str(read_limit)],
                          capture_output=True, text=True, env=env, timeout=120)


def test_segment_truncated_while_being_decoded(tmp_path: Path) -> None:
    """Files up to READ_LIMIT are read, not mapped: cutting one mid-decode cannot kill the worker."""
    done = _truncate_while_decoding(tmp_path, worker.READ_LIMIT)
    assert done.returncode == 0, done.stderr
    assert int(done.stdout) == 9000  # every batch as read


def test_a_mapped_segment_truncated_while_being_decoded_is_the_known_limit(tmp_path: Path) -> None:
    """Why files are read: a mapped one cut under the decoder ends the process with SIGBUS."""
    done = _truncate_while_decoding(tmp_path, 0)
    assert done.returncode == -7, (done.returncode, done.stderr)  # SIGBUS


# -- end to end ------------------------------------------------------------------------


@pytest.mark.spark
def test_scan_of_a_hostile_dump(spark: Any, tmp_path: Path) -> None:
    from txn_audit import api

    outside = _log_dir(tmp_path / "elsewhere", {"secret-0": _segment()}, node_id=9)
    dump = tmp_path / "dump"
    ld = _log_dir(dump / "b1", {"zamówienia-0": _segment(), "orders-0": _segment()})
    os.symlink(outside, dump / "b9")
    os.symlink(outside / "secret-0", ld / "linked-0")
    (ld / "not_a_partition").mkdir()
    (ld / "orders-0" / "00000000000000000100.log").mkdir()    # a folder where a segment should be
    os.mkfifo(ld / "orders-0" / "00000000000000000200.log")    # a FIFO where a segment should be
    (ld / "orders-0" / "00000000000000000300.log").write_bytes(b"\x00" * 4096)  # preallocated, never written
    shutil.copy(ld / "orders-0" / SEGMENT_NAME, ld / "orders-0" / "00000000000000000400.log")
    os.truncate(ld / "orders-0" / "00000000000000000400.log", 30)  # torn inside its first batch
    result = api.scan(dump, tmp_path / "out", spark=spark, options=api.AuditOptions(progress=False, quality=False, report=False))
    issues = spark.read.parquet(str(result.ingest.tables_dir / "decode_issues")).collect()
    got = {(r["file"], r["kind"]) for r in issues}
    assert {
        ("b9", "not_audited"),
        ("b1/linked-0", "not_audited"),
        ("b1/not_a_partition", "unrecognised_file"),
        ("b1/orders-0/00000000000000000100.log", "not_audited"),
        ("b1/orders-0/00000000000000000200.log", "not_audited"),
        ("b1/orders-0/00000000000000000300.log", "zero_filled_tail"),
        ("b1/orders-0/00000000000000000400.log", "truncated_tail"),
    } <= got
    assert not [r for r in issues if r["kind"] == "decoder_error"]
    batches = spark.read.parquet(str(result.ingest.tables_dir / "batches"))
    topics = {r["topic"]: r["count"] for r in batches.groupBy("topic").count().collect()}
    assert topics == {"zamówienia": 4, "orders": 4}


def test_a_dump_of_links_alone_names_them_in_its_error(tmp_path: Path) -> None:
    """A dump whose only log dir is a symbolic link (out of the dump: not followed) stops with
    an error that names the link and where it points, not only "no Kafka log dir found"."""
    outside = _log_dir(tmp_path / "elsewhere" / "ld", {"secret-0": _segment()}, node_id=9)
    dump = tmp_path / "dump"
    dump.mkdir()
    os.symlink(outside, dump / "b9")
    with pytest.raises(UsageError) as raised:
        discover(dump)
    message = str(raised.value)
    assert message.startswith("no Kafka log dir found under ")
    assert f"symbolic links are not followed: b9 -> {outside}" in message
