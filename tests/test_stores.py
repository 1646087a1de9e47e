"""Outputs published to real stores: ``scan --out`` and the nightly warehouse on S3 (S3Proxy) and
HDFS (a NameNode and a DataNode, over WebHDFS), both on 127.0.0.1 (``tests/conftest.py``).

The guarantee under test is the local one: a run that fails or is killed leaves the previous
output, or the previous files of a warehouse date, whole. Runs are killed for real: a publishing
process gets SIGKILL halfway through its uploads, or the server is stopped under a publish.
"""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import date, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

import pyarrow.fs as pafs
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from tests.nightlyjob import JOB, nightly_job
from tests.storeenv import FAKE_AWS, aws_env
from tools.stores.servers import HdfsServer, S3ProxyServer
from txn_audit import stores
from txn_audit.cli import app
from txn_audit.errors import UsageError
from txn_audit.outputs import MARKER
from txn_audit.schemas import ALL_TABLES
from txn_audit.stores import StoreError
from txn_audit.usage import ExitCode
from txn_audit.warehouse import RUNS, audit_dates, partition_name, publish_run

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from tests.conftest import SampleScan

pytestmark = pytest.mark.live

REPO = Path(__file__).resolve().parents[1]
SAMPLE = REPO / "sample_data" / "dump"
BUCKET = "outputs"
D1, D2 = date(2026, 11, 20), date(2026, 11, 21)
#: a publishing process, killed by the tests halfway
PUBLISH = """
import sys
from pathlib import Path
from txn_audit import stores
stores.publish_folder(Path(sys.argv[1]), sys.argv[2], run=sys.argv[3])
print("published")
"""
PUBLISH_DATE = """
import sys
from datetime import date, timedelta
from pathlib import Path
from txn_audit.warehouse import publish_run
publish_run(None, Path(sys.argv[1]), sys.argv[2], date.fromisoformat(sys.argv[3]), run=sys.argv[4])
print("published")
"""


@dataclass(frozen=True)
class Target:
    """One store under test: ``uri(path)`` is the URI of ``path`` in it."""

    kind: str
    base: str
    query: str = ""

    def uri(self, path: str) -> str:
        return f"{self.base}/{quote(path)}" + (f"?{self.query}" if self.query else "")


@pytest.fixture(scope="module")
def s3_target(s3proxy: S3ProxyServer) -> Iterator[Target]:
    with aws_env():
        admin = pafs.S3FileSystem(endpoint_override=s3proxy.endpoint, scheme="http", region="us-east-1",
                                  allow_bucket_creation=True)
        if admin.get_file_info(BUCKET).type == pafs.FileType.NotFound:
            admin.create_dir(BUCKET)
        yield Target("s3", f"s3://{BUCKET}", s3proxy.query)


@pytest.fixture(scope="module")
def hdfs_target(minihdfs: HdfsServer) -> Target:
    return Target("hdfs", minihdfs.webhdfs)


@pytest.fixture(params=["s3", "hdfs"])
def target(request: pytest.FixtureRequest) -> Target:
    found: Target = request.getfixturevalue(f"{request.param}_target")
    return found


def _fresh(name: str) -> str:
    return f"{name}-{uuid.uuid4().hex[:8]}"


def _folder(root: Path, files: dict[str, bytes]) -> Path:
    for rel, data in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)
    return root


def _many(root: Path, count: int) -> Path:
    return _folder(root, {f"tables/t{i % 7}/part-{i:05d}.parquet": bytes([i % 256]) * 2048 for i in range(count)})


def _read_store_folder(uri: str) -> dict[str, bytes]:
    store = stores.open_store(uri)
    out = {}
    for rel in store.files():
        with store.filesystem.open_input_stream(store.path(rel)) as handle:
            out[rel] = handle.read()
    return out


def _output(uri: str) -> dict[str, bytes]:
    """What a reader that follows the pointer (S3) or reads the folder (HDFS) sees, without the marker."""
    files = _read_store_folder(stores.current_output(uri))
    files.pop(MARKER, None)
    return files


def _leftovers(uri: str) -> list[str]:
    """What a publish of ``uri`` left beside the complete output: S3 objects that the pointer
    does not name, HDFS hidden siblings."""
    store = stores.open_store(uri)
    if store.renames:
        parent = stores.open_store(uri.rsplit("/", 1)[0])
        name = store.root.rsplit("/", 1)[1]
        return sorted(i.path for i in parent.listing(recursive=False)
                      if i.path.rsplit("/", 1)[1].startswith(f".{name}."))
    current = stores.open_store(stores.current_output(uri)).root
    return [rel for rel in store.files() if rel != MARKER and not store.path(rel).startswith(current + "/")]


def _wait_for_uploads(uri: str, run: str, alive: Callable[[], bool]) -> None:
    """Return once run ``run`` of ``_many``'s files is uploading: its 21st file is in the store."""
    store = stores.open_store(uri)
    name = store.root.rsplit("/", 1)[1]
    probe = "tables/t0/part-00140.parquet"  # the 21st in upload order
    if store.renames:
        store, probe = stores.open_store(uri.rsplit("/", 1)[0]), f".{name}.staging-{run}/{probe}"
    else:
        probe = f"{run}/{probe}"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if store.kind(probe) == pafs.FileType.File:
            return
        assert alive(), "the publish ended before it could be interrupted"
        time.sleep(0.02)
    raise AssertionError("no upload began within 120 s")


def _publishing(uri: str, folder: Path) -> tuple[subprocess.Popen[bytes], Path]:
    """A process publishing ``_many`` files (written into ``folder``) to ``uri``, once its upload
    is under way; and the folder."""
    big = _many(folder, 3000)
    run = stores.new_run_id()
    process = subprocess.Popen([sys.executable, "-c", PUBLISH, str(big), uri, run], env=_env(), cwd=REPO,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        _wait_for_uploads(uri, run, lambda: process.poll() is None)
    except BaseException:
        process.kill()
        raise
    return process, big


def _env() -> dict[str, str]:
    import os

    return {**os.environ, **FAKE_AWS, "PYTHONPATH": str(REPO)}


# -- publishing a folder (scan --out) ---------------------------------------------------


def test_publish_replaces_the_output_whole(target: Target, tmp_path: Path) -> None:
    uri = target.uri(_fresh("out/scan one"))
    first = {"summary.json": b'{"run": 1}', "tables/findings/part-0.parquet": b"x" * 100}
    second = {"summary.json": b'{"run": 2}', "report.html": b"<html/>"}
    assert stores.publish_folder(_folder(tmp_path / "a", first), uri) == stores.current_output(uri)
    assert _output(uri) == first
    stores.publish_folder(_folder(tmp_path / "b", second), uri)
    assert _output(uri) == second  # nothing of the first run shows
    assert _leftovers(uri) == []
    if target.kind == "s3":  # the pointer, written last, names the run and its files
        pointer = json.loads(stores.open_store(uri).read_text(MARKER))
        assert sorted(pointer["files"]) == sorted(second) and stores.current_output(uri).split("?")[0].endswith(
            pointer["run"])


def test_publish_refuses_a_folder_it_did_not_write(target: Target, tmp_path: Path) -> None:
    uri = target.uri(_fresh("out/foreign"))
    store = stores.open_store(uri)
    if store.renames:
        store.call(lambda: store.filesystem.create_dir(store.root), "create")
    store.write_bytes("precious.txt", b"keep me")
    with pytest.raises(UsageError, match="did not write"):
        stores.publish_folder(_folder(tmp_path / "a", {"x": b"1"}), uri)
    assert store.read_text("precious.txt") == "keep me"


def test_killed_publish_leaves_the_previous_output(target: Target, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    uri = target.uri(_fresh("out/killed"))
    first = {"summary.json": b'{"run": 1}', "tables/findings/part-0.parquet": b"y" * 5000}
    stores.publish_folder(_folder(tmp_path / "first", first), uri)
    process, _ = _publishing(uri, tmp_path / "big")
    process.send_signal(signal.SIGKILL)  # halfway through its upload
    process.wait()
    assert _output(uri) == first  # the killed run is not visible to a reader
    left = _leftovers(uri)
    assert left, "the killed run left nothing: it was not killed halfway"
    # a run just after keeps them (the killed run might be one still uploading) ...
    stores.publish_folder(_folder(tmp_path / "third", {"summary.json": b'{"run": 3}'}), uri)
    assert _output(uri) == {"summary.json": b'{"run": 3}'}
    assert _leftovers(uri) == left
    # ... a run once they are idle for LEFTOVER_AGE removes them
    monkeypatch.setattr(stores, "LEFTOVER_AGE", timedelta(0))
    stores.publish_folder(_folder(tmp_path / "fourth", {"summary.json": b'{"run": 4}'}), uri)
    assert _output(uri) == {"summary.json": b'{"run": 4}'}
    assert _leftovers(uri) == []


def test_overlapping_publishes_keep_each_others_files(target: Target, tmp_path: Path) -> None:
    """Run A uploads many files; run B publishes to the same output meanwhile and ends first: B
    deletes nothing of A's, then A, publishing last, is the output, whole, and B's files go."""
    uri = target.uri(_fresh("out/overlap"))
    stores.publish_folder(_folder(tmp_path / "first", {"summary.json": b'{"run": 1}'}), uri)
    process, big = _publishing(uri, tmp_path / "big")
    try:
        stores.check_output(uri)  # B's check of --out, then its publish, while A uploads
        stores.publish_folder(_folder(tmp_path / "b", {"summary.json": b'{"run": "b"}'}), uri)
        assert process.poll() is None, "A ended before B published: the runs did not overlap"
        assert _output(uri) == {"summary.json": b'{"run": "b"}'}
        said, _ = process.communicate(timeout=300)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 0 and b"published" in said, said[-2000:]
    expected = {p.relative_to(big).as_posix(): p.read_bytes() for p in big.rglob("*") if p.is_file()}
    assert _output(uri) == expected
    assert _leftovers(uri) == []


def test_a_killed_first_run_does_not_block_the_next(target: Target, tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(stores, "LEFTOVER_AGE", timedelta(0))  # what it left is idle: the run was killed
    name = _fresh("first")
    uri = target.uri(f"out/{name}")
    half = "run-20261120T000000Z-0000abcd/tables/t/part-0.parquet"  # what a first run killed halfway left
    if target.kind == "s3":
        stores.open_store(uri).write_bytes(half, b"half")
    else:
        stores.open_store(target.uri("out")).write_bytes(f".{name}.staging-{half}", b"half")
    stores.publish_folder(_folder(tmp_path / "a", {"summary.json": b"{}"}), uri)
    assert _output(uri) == {"summary.json": b"{}"} and _leftovers(uri) == []


def test_hdfs_puts_back_an_output_moved_aside(hdfs_target: Target, tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """A run killed between its two renames leaves the previous output under a hidden name and
    no output: a later run (or its check of --out) puts it back first, once it is idle."""
    name = _fresh("aside")
    uri = hdfs_target.uri(f"out/{name}")
    first = {"summary.json": b'{"run": 1}'}
    stores.publish_folder(_folder(tmp_path / "first", first), uri)
    parent = stores.open_store(hdfs_target.uri("out"))
    parent.rename(name, f".{name}.previous-run-20261120T000000Z-0000abcd")  # what the killed run did
    parent.write_bytes(f".{name}.staging-run-20261120T000000Z-0000abcd/summary.json", b"half")
    with pytest.raises(StoreError, match="no txn-audit output"):
        stores.current_output(uri)
    stores.check_output(uri)  # written just now: it may be a run between its renames
    with pytest.raises(StoreError, match="no txn-audit output"):
        stores.current_output(uri)
    monkeypatch.setattr(stores, "LEFTOVER_AGE", timedelta(0))
    stores.check_output(uri)
    assert _output(uri) == first and _leftovers(uri) == []


@pytest.mark.parametrize("kind", ["s3", "hdfs"])
def test_store_crashing_mid_publish_is_one_line_and_keeps_the_output(kind: str, tmp_path: Path) -> None:
    server: S3ProxyServer | HdfsServer
    with aws_env():
        server = _start(kind, tmp_path / "server")
        try:
            uri = _server_uri(kind, server, "out/stopped")
            first = {"summary.json": b'{"run": 1}', "tables/t/part-0.parquet": b"z" * 3000}
            stores.publish_folder(_folder(tmp_path / "first", first), uri)
            failure: list[BaseException] = []
            big, run = _many(tmp_path / "big", 3000), stores.new_run_id()

            def publish() -> None:
                try:
                    stores.publish_folder(big, uri, run=run)
                except BaseException as err:  # noqa: BLE001 - handed to the test
                    failure.append(err)

            worker = threading.Thread(target=publish)
            worker.start()
            _wait_for_uploads(uri, run, worker.is_alive)
            server.kill()  # a crash halfway through the uploads
            worker.join(300)
            assert not worker.is_alive()
            assert len(failure) == 1 and isinstance(failure[0], StoreError), failure
            message = str(failure[0])
            assert "\n" not in message and message.startswith(f"--out {uri.split('?')[0]}"), message
            assert message.endswith("the previous output is unchanged"), message  # it failed uploading
            # the command line and the nightly job say it in one line, without a traceback
            result = CliRunner().invoke(app, ["scan", str(SAMPLE), "--out", uri, "--no-progress"])
            assert result.exit_code == ExitCode.OUTPUT and "Traceback" not in result.output, result.output
            lines = [line for line in result.output.splitlines() if line.strip()]
            assert len(lines) == 1 and lines[0].startswith(f"error: --out {uri.split('?')[0]}"), result.output
            done = subprocess.run([sys.executable, str(JOB), "--dump", str(SAMPLE), "--warehouse", uri],
                                  env=_env(), cwd=REPO, capture_output=True, text=True, timeout=300)
            assert done.returncode == ExitCode.OUTPUT and "Traceback" not in done.stderr, done.stderr
            assert f"error: --warehouse {uri.split('?')[0]}" in done.stderr, done.stderr
        finally:
            server.stop()
        # the same store served again: the previous output is whole
        server = _start(kind, tmp_path / "server", again=True)
        try:
            assert _output(_server_uri(kind, server, "out/stopped")) == first
        finally:
            server.stop()


def _start(kind: str, base: Path, again: bool = False) -> S3ProxyServer | HdfsServer:
    if kind == "s3":
        server = S3ProxyServer(base).start()
        admin = pafs.S3FileSystem(endpoint_override=server.endpoint, scheme="http", region="us-east-1",
                                  allow_bucket_creation=True)
        if not again:
            admin.create_dir(BUCKET)
        return server
    return HdfsServer(base, keep=again).start()


def _server_uri(kind: str, server: S3ProxyServer | HdfsServer, path: str) -> str:
    if isinstance(server, S3ProxyServer):
        return f"s3://{BUCKET}/{path}?{server.query}"
    return f"{server.webhdfs}/{path}"


# -- scans and the warehouse, with Spark --------------------------------------------------


@contextmanager
def _spark_env(spark: SparkSession) -> Iterator[None]:
    """The S3 settings for the Spark workers too (separate processes: ``spark.executorEnv.*``)."""
    environment = spark.sparkContext.environment
    saved = dict(environment)
    environment.update(FAKE_AWS)
    try:
        yield
    finally:
        environment.clear()
        environment.update(saved)


def test_scan_out_to_a_store(target: Target, spark: SparkSession, sample_scan: SampleScan) -> None:
    from txn_audit import api

    uri = target.uri(_fresh("scans/sample"))
    result = api.scan(sample_scan.dump, uri, spark=spark,
                      options=api.AuditOptions(progress=False, quality=False, report=True))
    assert result.out_dir is None and result.out_uri == stores.current_output(uri)
    published = _output(uri)
    local = sample_scan.result
    assert result.findings == [f for f in local.findings if f.kind != "invariant_violation"]
    summary = json.loads(published["summary.json"])
    assert summary["summary"]["tables"] == f"{result.out_uri.split('?')[0]}/tables"
    assert summary["summary"]["table_rows"] == local.ingest.row_counts
    assert "report.html" in published
    for name in ALL_TABLES:
        if name in ("findings", "incidents"):  # the local scan's include the data-quality findings
            continue
        files = sorted(rel for rel in published if rel.startswith(f"tables/{name}/") and rel.endswith(".parquet"))
        rows = sum(pq.read_metadata(pafs_buffer(published[rel])).num_rows for rel in files)
        assert rows == pq.read_table(sample_scan.out / "tables" / name).num_rows, name


def pafs_buffer(data: bytes) -> Any:
    import pyarrow as pa

    return pa.BufferReader(data)


def test_warehouse_on_a_store(target: Target, spark: SparkSession, sample_scan: SampleScan) -> None:
    """A nightly run with its dump and its warehouse on the store, a rerun of the date, another date."""
    from txn_audit import api

    dump = target.uri(_fresh("dumps/nightly"))
    stores.open_store(dump).upload((path, rel) for path, rel in _files(sample_scan.dump))
    wh = target.uri(_fresh("wh"))
    with _spark_env(spark):
        nightly = api.run_nightly(dump, wh, D1, spark=spark, options=api.AuditOptions(quality=False, report=False))
    assert nightly.published.row_counts["findings"] == len(nightly.scan.findings) > 5
    assert audit_dates(wh) == [D1]
    publish_run(None, sample_scan.out, wh, D1)  # a rerun of the date: its files are replaced
    publish_run(None, sample_scan.out, wh, D2)
    assert audit_dates(wh) == [D1, D2]
    store = stores.open_store(wh, "--warehouse")
    local_rows = {name: pq.read_table(sample_scan.out / "tables" / name).num_rows for name in ALL_TABLES}
    for day in (D1, D2):
        for name in ALL_TABLES:
            committed = stores.committed_files(store, name, day)
            in_folder = [store.uri(rel) for rel in store.files(f"{name}/{partition_name(day)}")
                         if rel.endswith(".parquet")]
            assert sorted(committed) == sorted(in_folder), name  # no file of an earlier run is left
            rows = sum(pq.read_metadata(pafs_buffer(_read(uri))).num_rows for uri in committed)
            assert rows == local_rows[name], (day, name)
        manifest = json.loads(store.read_text(f"{RUNS}/{partition_name(day)}/run.json"))
        assert manifest["row_counts"] == local_rows
    if target.kind == "hdfs":  # Spark reads the warehouse over WebHDFS, partitions and all
        frame = spark.read.parquet(f"{wh}/findings")
        assert frame.count() == 2 * local_rows["findings"]
        assert sorted(r[0].isoformat() for r in frame.select("audit_date").distinct().collect()) == [
            D1.isoformat(), D2.isoformat()]


def _files(folder: Path) -> list[tuple[Path, str]]:
    return sorted((p, p.relative_to(folder).as_posix()) for p in folder.rglob("*") if p.is_file())


def _read(uri: str) -> bytes:
    store = stores.open_store(uri)
    with store.filesystem.open_input_stream(store.root) as handle:
        data: bytes = handle.read()
    return data


def test_killed_warehouse_publish_keeps_the_date(target: Target, sample_scan: SampleScan, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """SIGKILL halfway through publishing a date again: the date's committed files are the
    previous run's, whole; a publish of the date once they are idle removes the killed run's files."""
    wh = target.uri(_fresh("wh-killed"))
    publish_run(None, sample_scan.out, wh, D1)
    store = stores.open_store(wh, "--warehouse")
    before = {name: stores.committed_files(store, name, D1) for name in ALL_TABLES}
    big = tmp_path / "scan"
    shutil.copytree(sample_scan.out, big)
    findings = sorted((big / "tables" / "findings").glob("*.parquet"))[0]
    for i in range(1500):  # many files: the upload takes long enough to be killed halfway
        shutil.copy(findings, big / "tables" / "findings" / f"copy-{i:05d}.parquet")
    run = stores.new_run_id()
    process = subprocess.Popen([sys.executable, "-c", PUBLISH_DATE, str(big), wh, D1.isoformat(), run],
                               env=_env(), cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    part = f"findings/{partition_name(D1)}"
    # the 21st findings file of the run is in the store: its upload is under way
    probe = (f"findings/.{partition_name(D1)}.staging-{run}/part-00020.parquet" if store.renames
             else f"{part}/part-{run}-00020.parquet")
    try:
        deadline = time.monotonic() + 120
        while store.kind(probe) != pafs.FileType.File:
            assert process.poll() is None, "the publish ended before it could be killed"
            assert time.monotonic() < deadline
            time.sleep(0.02)
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait()
    assert audit_dates(wh) == [D1]
    after = {name: stores.committed_files(store, name, D1) for name in ALL_TABLES}
    assert after == before
    for name in ALL_TABLES:
        rows = sum(pq.read_metadata(pafs_buffer(_read(uri))).num_rows for uri in after[name])
        assert rows == pq.read_table(sample_scan.out / "tables" / name).num_rows
    # S3: a reader listing the folder sees the killed run's files beside the committed ones
    # (the window the stores module documents); HDFS: they are in a hidden sibling folder
    listed = [store.uri(rel) for rel in store.files(part) if rel.endswith(".parquet")]
    if target.kind == "s3":
        assert len(listed) > len(before["findings"])
    else:
        assert sorted(listed) == sorted(before["findings"])
    monkeypatch.setattr(stores, "LEFTOVER_AGE", timedelta(0))
    publish_run(None, sample_scan.out, wh, D1)
    listed = [store.uri(rel) for rel in store.files(part) if rel.endswith(".parquet")]
    assert sorted(listed) == sorted(stores.committed_files(store, "findings", D1))


def test_help_names_the_store_uris() -> None:
    result = CliRunner().invoke(app, ["scan", "--help"], env={"COLUMNS": "200"})
    text = " ".join(result.output.split())
    assert all(s in text for s in ("s3://bucket/folder", "webhdfs://", "hdfs://")), result.output
    help_text = " ".join(nightly_job()._parser().format_help().split())
    assert "--warehouse" in help_text and all(s in help_text for s in ("s3://", "webhdfs://", "hdfs://"))
