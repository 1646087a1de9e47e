"""Start and stop the storage servers on 127.0.0.1, each on free ports chosen by the server itself.

``S3ProxyServer`` runs S3Proxy with its ``filesystem-nio2`` blob store over a local folder and a
fixed access key (requests are signed and checked, as on AWS); ``HdfsServer`` runs
``MiniHdfs.java``: a NameNode and one DataNode whose RPC and HTTP (WebHDFS) ports it prints.
Both are context managers; ``started_s`` is how long the server took from launch to serving, and
``stop()`` (idempotent) ends the JVM: S3Proxy by SIGTERM, the minicluster by closing its standard
input, SIGKILL after a grace period; ``kill()`` ends it at once, as a crash would.
"""

from __future__ import annotations

import re
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import IO

from tools.stores.fetch import StoreToolError, fetch_hdfs, fetch_s3proxy, java_binary

__all__ = ["HdfsServer", "S3ProxyServer", "S3_ACCESS_KEY", "S3_SECRET_KEY"]

S3_ACCESS_KEY = "txn-audit-test-key"
S3_SECRET_KEY = "txn-audit-test-secret"
START_TIMEOUT_S = 120.0
STOP_GRACE_S = 15.0
JVM_FLAGS = ("-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Djava.awt.headless=true")

_CONNECTOR = re.compile(r"ServerConnector@\S*\{HTTP/1\.1[^}]*\}\{127\.0\.0\.1:(\d+)\}")
_MINIHDFS = re.compile(r"^MINIHDFS rpc=(\d+) http=(\d+) datanode-http=(\d+)", re.M)


@dataclass
class _Server:
    base: Path
    started_s: float = 0.0
    process: subprocess.Popen[bytes] | None = field(default=None, repr=False)
    _log: IO[bytes] | None = field(default=None, repr=False)

    @property
    def log_path(self) -> Path:
        return self.base / "server.log"

    def _launch(self, command: list[str], *, stdout: Path, stdin: int | None = None) -> None:
        self.base.mkdir(parents=True, exist_ok=True)
        self._log = open(self.log_path, "ab")  # closed by stop()
        with open(stdout, "wb") as out:
            self.process = subprocess.Popen(command, stdin=stdin if stdin is not None else subprocess.DEVNULL,
                                            stdout=out, stderr=self._log, cwd=self.base, start_new_session=True)

    def _wait_for(self, source: Path, pattern: re.Pattern[str], what: str, began: float) -> re.Match[str]:
        assert self.process is not None
        while True:
            text = source.read_text(errors="replace") if source.exists() else ""
            found = pattern.search(text)
            if found:
                self.started_s = time.monotonic() - began
                return found
            if self.process.poll() is not None:
                tail = self.log_path.read_text(errors="replace")[-2000:]
                self.stop()
                raise StoreToolError(f"{what} exited with code {self.process.returncode} before serving:\n{tail}")
            if time.monotonic() - began > START_TIMEOUT_S:
                self.stop()
                raise StoreToolError(f"{what} did not serve within {START_TIMEOUT_S:.0f} s (log: {self.log_path})")
            time.sleep(0.1)

    def _end(self) -> None:
        """Ask nicely (subclasses), then SIGKILL after the grace period."""
        if self.process is None:
            return
        try:
            self.process.wait(STOP_GRACE_S)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()

    def kill(self) -> None:
        """SIGKILL: the server dies at once, as in a crash (``stop`` still closes the log)."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        self.stop()

    def stop(self) -> None:
        self._end()
        if self._log is not None:
            self._log.close()
            self._log = None

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None


@dataclass
class S3ProxyServer(_Server):
    """S3Proxy serving the folder ``base/blobs`` as S3 buckets."""

    port: int = 0

    @property
    def endpoint(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def query(self) -> str:
        """What points pyarrow at this server: the ``s3://`` URI query."""
        return f"endpoint_override={self.endpoint}&scheme=http&region=us-east-1"

    def start(self) -> S3ProxyServer:
        jar = fetch_s3proxy(log=False)
        blobs = self.base / "blobs"
        blobs.mkdir(parents=True, exist_ok=True)
        conf = self.base / "s3proxy.conf"
        conf.write_text("\n".join([
            "s3proxy.endpoint=http://127.0.0.1:0",
            "s3proxy.authorization=aws-v2-or-v4",
            f"s3proxy.identity={S3_ACCESS_KEY}",
            f"s3proxy.credential={S3_SECRET_KEY}",
            "jclouds.provider=filesystem-nio2",
            f"jclouds.filesystem.basedir={blobs}",
            "",
        ]))
        began = time.monotonic()
        self._launch([java_binary(), "-Xmx256m", *JVM_FLAGS, "-DLOG_LEVEL=info", "-jar", str(jar),
                      "--properties", str(conf)], stdout=self.base / "stdout.log")
        self.port = int(self._wait_for(self.base / "stdout.log", _CONNECTOR, "S3Proxy", began).group(1))
        return self

    def _end(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
        super()._end()

    def __enter__(self) -> S3ProxyServer:
        return self.start()

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.stop()


@dataclass
class HdfsServer(_Server):
    """A NameNode and one DataNode (MiniDFSCluster) with their data under ``base/data``."""

    rpc_port: int = 0
    http_port: int = 0
    datanode_http_port: int = 0
    #: serve the files of an earlier run under ``base/data`` instead of formatting it anew
    keep: bool = False

    @property
    def webhdfs(self) -> str:
        """``webhdfs://127.0.0.1:<NameNode HTTP port>``: prefix of the URIs of this HDFS."""
        return f"webhdfs://127.0.0.1:{self.http_port}"

    @property
    def hdfs(self) -> str:
        return f"hdfs://127.0.0.1:{self.rpc_port}"

    def start(self) -> HdfsServer:
        dist = fetch_hdfs(log=False)
        began = time.monotonic()
        self._launch([java_binary(), "-Xmx512m", *JVM_FLAGS, "-cp", dist.classpath, "MiniHdfs",
                      str(self.base / "data"), *(["--keep"] if self.keep else [])],
                     stdout=self.base / "stdout.log", stdin=subprocess.PIPE)
        found = self._wait_for(self.base / "stdout.log", _MINIHDFS, "the HDFS minicluster", began)
        self.rpc_port, self.http_port, self.datanode_http_port = (int(g) for g in found.groups())
        return self

    def _end(self) -> None:
        if self.process is not None and self.process.stdin is not None and not self.process.stdin.closed:
            try:
                self.process.stdin.close()  # the launcher shuts the cluster down at the end of its input
            except OSError:
                pass
        super()._end()

    def __enter__(self) -> HdfsServer:
        return self.start()

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.stop()
