"""Dumps read through pyarrow.fs: local paths, file:// URIs, and real storage servers.

The S3 tests run S3Proxy (an S3 API server over a local folder) and the HDFS tests a NameNode and
a DataNode of Apache Hadoop (MiniDFSCluster, read over WebHDFS), both from Maven Central on
127.0.0.1 (``tools/stores``, the ``s3proxy`` and ``minihdfs`` fixtures of ``tests/conftest.py``:
the live tier). S3 credentials are the fixed test key S3Proxy checks, set only here;
instance-metadata lookups are disabled and no other address is contacted.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow.fs as pafs
import pytest
from typer.testing import CliRunner

from tests.realcorpus import needs_corpus, scenario_dir
from tests.storeenv import FAKE_AWS, aws_env
from tools.stores.servers import S3_ACCESS_KEY
from txn_audit.cli import app
from txn_audit.errors import UsageError
from txn_audit.ingest import storage
from txn_audit.ingest.discover import Inventory, discover
from txn_audit.ingest.storage import DIR, FILE, SYMLINK, DumpLocation, resolve_dump
from txn_audit.ingest.tasks import TableRows
from txn_audit.ingest.worker import decode_task
from tests.nightlyjob import nightly_job

if TYPE_CHECKING:
    from tests.conftest import SampleScan
    from tools.stores.servers import HdfsServer, S3ProxyServer
    from txn_audit.api import ScanResult

REPO = Path(__file__).resolve().parents[2]
SAMPLE = REPO / "sample_data" / "dump"
BUCKET = "kafka-dumps"
PREFIX = "nightly/2026-11-20 dump"  # a space: keys are quoted in the URIs handed to workers


def _inventory_view(inv: Inventory) -> dict[str, Any]:
    """Everything discovery found except where the workers will open each file."""
    return {
        "segments": inv.segments,
        "issues": inv.issues,
        "replicas": inv.replicas,
        "offsets": inv.partition_offsets_rows(),
        "tasks": [(t.rel_path, t.kind, t.broker_id, t.log_dir, t.topic, t.partition, t.base_offset, t.size_bytes)
                  for t in inv.tasks],
        "mtimes": inv.mtimes,
    }


def _file_rows(segments: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``segments`` rows, without the size of folders (object stores have none)."""
    return [{k: v for k, v in r.items() if k != "size_bytes" or r["kind"] != "folder"} for r in segments]


def _decoded_rows(inv: Inventory) -> dict[str, list[Any]]:
    out = TableRows()
    for task in inv.tasks:
        for _ in decode_task(task, out):
            pass
    rows: dict[str, list[Any]] = {}
    for batch in out.drain():
        name = batch.column(0)[0].as_py()
        rows.setdefault(name, []).extend(batch.column(name).to_pylist())
    return {name: sorted(v, key=repr) for name, v in rows.items()}


# -- local storage: paths, file:// URIs and pyarrow's own filesystems -------------------------


def test_file_uri_reads_like_the_path() -> None:
    by_path = discover(SAMPLE)
    by_uri = discover(SAMPLE.as_uri())
    assert _inventory_view(by_uri) == _inventory_view(by_path)
    assert [t.path for t in by_uri.tasks] == [t.path for t in by_path.tasks]
    assert all(os.path.isabs(t.path) for t in by_uri.tasks)  # local files stay memory-mapped paths
    assert len(by_path.tasks) > 100


def test_listing_through_pyarrow_filesystem_matches_local_listing(tmp_path: Path) -> None:
    shutil.copytree(SAMPLE, tmp_path / "dump")
    local = resolve_dump(tmp_path / "dump")
    # the same tree seen through pyarrow's SubTreeFileSystem takes the remote code path
    subtree = pafs.SubTreeFileSystem(str(tmp_path), pafs.LocalFileSystem())
    remote = DumpLocation(subtree, "dump", "sub://dump", scheme="sub")
    mine, theirs = local.listing(), remote.listing()
    files = {rel: (e.kind, e.size) for rel, e in mine.entries.items() if e.kind == FILE}
    assert files == {rel: (e.kind, e.size) for rel, e in theirs.entries.items() if e.kind == FILE}
    assert {r for r, e in mine.entries.items() if e.kind == DIR} == {r for r, e in theirs.entries.items()
                                                                     if e.kind == DIR}
    assert len(files) == sum(1 for p in SAMPLE.rglob("*") if p.is_file())
    assert remote.read_bytes("broker-1/meta.properties") == (SAMPLE / "broker-1" / "meta.properties").read_bytes()
    # discovery over the remote path finds the same log dirs, partitions, files and issues
    local_view, remote_view = _inventory_view(discover(local)), _inventory_view(discover(remote))
    for key in ("issues", "replicas", "offsets", "tasks"):
        assert remote_view[key] == local_view[key], key
    assert _file_rows(remote_view["segments"]) == _file_rows(local_view["segments"])


def test_symlinks_are_listed_not_followed(tmp_path: Path) -> None:
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "00000000000000000000.log").write_bytes(b"\0" * 10)
    (tmp_path / "dump").mkdir()
    os.symlink(tmp_path / "outside", tmp_path / "dump" / "linked-0")
    listing = resolve_dump(tmp_path / "dump").listing()
    assert listing.kind("linked-0") == SYMLINK
    assert listing.get("linked-0/00000000000000000000.log") is None


@pytest.mark.parametrize(
    ("dump", "message"),
    [
        ("ftp://host/dump", "not ftp://"),
        ("file://otherhost/dump", "must name a local path"),
        ("hdfs://namenode:8020/dumps", "libhdfs.*webhdfs://namenode:<http port>"),
        ("webhdfs:///dumps", "no NameNode host"),
        ("webhdfs://namenode/dumps?token=x", "unknown webhdfs:// option 'token'"),
        ("s3://bucket/dump?no_such_option=1", "cannot read the dump s3://bucket/dump"),
    ],
)
def test_unsupported_locations_are_usage_errors(dump: str, message: str, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("HADOOP_HOME", "ARROW_LIBHDFS_DIR"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(UsageError, match=message.replace("?", r"\?").replace("/<", "/.*<")):
        discover(dump)


# -- S3Proxy on 127.0.0.1 -----------------------------------------------------------------


@dataclass(frozen=True)
class S3Server:
    query: str  # what points pyarrow at the server: ?endpoint_override=127.0.0.1:port&...
    admin: pafs.S3FileSystem
    endpoint: str

    def __str__(self) -> str:
        return self.query


@pytest.fixture(scope="module")
def s3(s3proxy: S3ProxyServer) -> Iterator[S3Server]:
    """The session's S3Proxy, with the test key in the environment and the sample dump uploaded."""
    with aws_env():
        admin = pafs.S3FileSystem(endpoint_override=s3proxy.endpoint, scheme="http", region="us-east-1",
                                  allow_bucket_creation=True)
        admin.create_dir(BUCKET)
        pafs.copy_files(str(SAMPLE), f"{BUCKET}/{PREFIX}", destination_filesystem=admin)
        yield S3Server(s3proxy.query, admin, s3proxy.endpoint)


def _uri(server: S3Server, key: str = PREFIX) -> str:
    return f"s3://{BUCKET}/{key.replace(' ', '%20')}?{server.query}"


def test_s3proxy_checks_signatures(s3: S3Server) -> None:
    # a wrong secret is refused: the tests' requests are signed and checked as on AWS
    wrong = pafs.S3FileSystem(endpoint_override=s3.endpoint, scheme="http", region="us-east-1",
                              access_key=S3_ACCESS_KEY, secret_key="not-the-secret")
    with pytest.raises(OSError):
        wrong.get_file_info(pafs.FileSelector(BUCKET))


def test_s3_discovery_and_worker_reads_equal_local(s3: S3Server, monkeypatch: pytest.MonkeyPatch) -> None:
    local, remote = discover(SAMPLE), discover(_uri(s3))
    view_local, view_remote = _inventory_view(local), _inventory_view(remote)
    for key in ("issues", "replicas", "offsets", "tasks"):
        assert view_remote[key] == view_local[key], key
    assert _file_rows(view_remote["segments"]) == _file_rows(view_local["segments"])
    assert all(t.path.startswith(f"s3://{BUCKET}/nightly/2026-11-20%20dump/") and "secret" not in t.path
               for t in remote.tasks)
    # the workers' reads: small files in memory, large ones spooled to local scratch in chunks
    monkeypatch.setattr(storage, "IN_MEMORY_LIMIT", 4096)
    monkeypatch.setattr(storage, "SPOOL_CHUNK", 1000)
    assert any(t.size_bytes > 4096 for t in remote.tasks)
    assert _decoded_rows(remote) == _decoded_rows(local)


@needs_corpus
def test_s3_text_dumps_read_like_local_ones(s3: S3Server) -> None:
    tools = scenario_dir("hanging-unadded-partition") / "tools"
    pafs.copy_files(str(tools), f"{BUCKET}/tools", destination_filesystem=s3.admin)
    local, remote = discover(tools, "text"), discover(_uri(s3, "tools"), "text")
    assert remote.tasks and all(t.path.startswith("s3://") for t in remote.tasks)
    assert _inventory_view(remote)["tasks"] == _inventory_view(local)["tasks"]
    assert remote.segments == local.segments and remote.replicas == local.replicas
    assert _decoded_rows(remote) == _decoded_rows(local)


def test_s3_missing_bucket_and_key_are_usage_errors(s3: S3Server) -> None:
    with pytest.raises(UsageError, match="bucket 'no-such-bucket' not found"):
        discover(f"s3://no-such-bucket/dump?{s3.query}")
    with pytest.raises(UsageError, match="dump not found: s3://kafka-dumps/missing"):
        discover(_uri(s3, "missing"))


def test_cli_scan_of_a_missing_bucket_exits_2(s3: S3Server) -> None:
    result = CliRunner().invoke(app, ["scan", f"s3://no-such-bucket/dump?{s3.query}", "--no-progress"])
    assert result.exit_code == 2, result.output
    assert "bucket 'no-such-bucket' not found" in " ".join(result.output.split())
    assert "Traceback" not in result.output


def test_cli_unreachable_endpoint_exits_2() -> None:
    # port 1 on the loopback: nothing listens there, the SDK gives up after its retries
    with aws_env():
        result = CliRunner().invoke(app, ["ingest", "s3://bucket/dump?endpoint_override=127.0.0.1:1&scheme=http"
                                          "&region=us-east-1", "--out", os.devnull])
    assert result.exit_code == 2, result.output
    text = " ".join(result.output.split())
    assert "cannot read the dump s3://bucket/dump" in text and "endpoint" in text
    assert "Traceback" not in result.output


def test_nightly_job_takes_an_s3_dump(s3: S3Server, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    job = nightly_job()
    code = job.main(["--dump", _uri(s3, "not-there"), "--warehouse", str(tmp_path / "wh"),
                     "--audit-date", "2026-11-20"])
    assert code == 2
    err = capsys.readouterr().err
    assert "dump not found or not a folder: s3://kafka-dumps/not-there" in err and "Traceback" not in err
    assert not (tmp_path / "wh").exists()
    assert "--dump" in job._parser().format_help() and "s3://" in job._parser().format_help()


def _assert_findings_equal(remote: ScanResult, local: ScanResult) -> None:
    assert remote.ingest.row_counts == local.ingest.row_counts
    assert remote.ingest.issue_counts == local.ingest.issue_counts
    assert remote.as_of_ms == local.as_of_ms
    assert remote.partitions == local.partitions
    # the local scan ran the data-quality suites too; their findings are the only extra ones
    expected = [f for f in local.findings if f.kind != "invariant_violation"]
    assert len(expected) > 5
    assert remote.findings == expected


def test_scan_on_s3_gives_the_local_findings(s3: S3Server, spark: Any, sample_scan: SampleScan) -> None:
    from txn_audit import api

    # the dump of the suite's shared local scan, uploaded as it is
    pafs.copy_files(str(sample_scan.dump), f"{BUCKET}/scanned", destination_filesystem=s3.admin)
    # the Spark workers are separate processes: they get the same settings through the
    # executor environment (spark.executorEnv.*), as a cluster's executors would
    environment = spark.sparkContext.environment
    saved = dict(environment)
    environment.update(FAKE_AWS)
    try:
        remote = api.scan(_uri(s3, "scanned"), spark=spark,
                          options=api.AuditOptions(progress=False, quality=False, report=False))
    finally:
        environment.clear()
        environment.update(saved)
    assert remote.input == f"s3://{BUCKET}/scanned?{s3.query}"
    _assert_findings_equal(remote, sample_scan.result)


# -- HDFS (a NameNode and a DataNode on 127.0.0.1), read over WebHDFS ------------------------

HDFS_DUMP = "/dumps/nightly/2026-11-20 dump"


@pytest.fixture(scope="module")
def hdfs(minihdfs: HdfsServer) -> str:
    """The session's HDFS with the sample dump uploaded: the ``webhdfs://`` URI of its NameNode."""
    filesystem = storage.webhdfs_filesystem(f"127.0.0.1:{minihdfs.http_port}")
    pafs.copy_files(str(SAMPLE), HDFS_DUMP, destination_filesystem=filesystem)
    return minihdfs.webhdfs


def test_webhdfs_discovery_and_worker_reads_equal_local(hdfs: str, monkeypatch: pytest.MonkeyPatch) -> None:
    local, remote = discover(SAMPLE), discover(hdfs + HDFS_DUMP.replace(" ", "%20"))
    view_local, view_remote = _inventory_view(local), _inventory_view(remote)
    for key in ("issues", "replicas", "offsets", "tasks", "segments"):
        assert view_remote[key] == view_local[key], key
    assert all(t.path.startswith(f"{hdfs}/dumps/nightly/2026-11-20%20dump/") for t in remote.tasks)
    assert len(view_remote["mtimes"]) == len(view_local["mtimes"])  # HDFS keeps modification times
    monkeypatch.setattr(storage, "IN_MEMORY_LIMIT", 4096)
    monkeypatch.setattr(storage, "SPOOL_CHUNK", 1000)
    assert any(t.size_bytes > 4096 for t in remote.tasks)
    assert _decoded_rows(remote) == _decoded_rows(local)


def test_webhdfs_missing_path_and_dead_namenode_are_usage_errors(hdfs: str) -> None:
    with pytest.raises(UsageError, match=f"dump not found: {hdfs}/no/such/dump"):
        discover(f"{hdfs}/no/such/dump")
    result = CliRunner().invoke(app, ["scan", "webhdfs://127.0.0.1:1/dumps/x", "--no-progress"])
    assert result.exit_code == 2, result.output
    text = " ".join(result.output.split())
    assert "cannot read the dump webhdfs://127.0.0.1:1/dumps/x" in text and "NameNode's HTTP address" in text
    assert "Traceback" not in result.output


def test_scan_on_hdfs_gives_the_local_findings(minihdfs: HdfsServer, spark: Any, sample_scan: SampleScan) -> None:
    from txn_audit import api

    filesystem = storage.webhdfs_filesystem(f"127.0.0.1:{minihdfs.http_port}")
    pafs.copy_files(str(sample_scan.dump), "/scanned", destination_filesystem=filesystem)
    remote = api.scan(f"{minihdfs.webhdfs}/scanned", spark=spark,
                      options=api.AuditOptions(progress=False, quality=False, report=False))
    assert remote.input == f"{minihdfs.webhdfs}/scanned"
    _assert_findings_equal(remote, sample_scan.result)


def test_help_names_the_uris() -> None:
    for command in ("scan", "ingest"):
        result = CliRunner().invoke(app, [command, "--help"], env={"COLUMNS": "200"})
        assert result.exit_code == 0
        assert all(scheme in result.output for scheme in ("file://", "s3://", "webhdfs://", "hdfs://")), command
