"""Brokers of one Kafka release on 127.0.0.1: configure, format, start, stop, kill.

A ``Cluster`` owns a work folder with one ``broker-<id>/`` per broker (its ``server.properties``,
``server.log`` and its ``logdirs/``) and, for releases that need one, a ZooKeeper in
``zookeeper/``. KRaft clusters run every node as a combined broker and controller, so the
controller quorum is the brokers themselves. Every port is picked free on the loopback, and
every process is started in its own session and remembered by its pid: ``stop`` sends SIGTERM
(a clean shutdown, which writes ``.kafka_cleanshutdown`` and the producer snapshots), ``kill``
sends SIGKILL (a crash), and ``close`` ends whatever is still running.
"""

from __future__ import annotations

import base64
import json
import os
import signal
import socket
import subprocess
import time
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tools.realkafka.dist import Dist, HarnessError, version_tuple

__all__ = ["BROKER_FOLDER", "Broker", "Cluster", "free_port"]

HOST = "127.0.0.1"
START_TIMEOUT_S = 120.0

# settings every scenario shares (small segments keep the corpus small and show rolled segments)
BASE_SETTINGS: dict[str, str] = {
    "num.partitions": "3",
    "auto.create.topics.enable": "false",
    "group.initial.rebalance.delay.ms": "0",
    "offsets.topic.num.partitions": "2",
    "transaction.state.log.num.partitions": "3",
    "transaction.state.log.segment.bytes": "65536",
    "log.segment.bytes": "65536",
    "log.message.timestamp.type": "CreateTime",
    "num.network.threads": "2",
    "num.io.threads": "2",
    "num.recovery.threads.per.data.dir": "1",
    "background.threads": "2",
    "log.cleaner.threads": "1",
    "log.index.size.max.bytes": "65536",
    "log.cleaner.dedupe.buffer.size": "8388608",
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": "2000",
}


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


def _port_open(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(0.5)
        return s.connect_ex((HOST, port)) == 0


def _cluster_id() -> str:
    """A random cluster id as Kafka writes one (base64url, no padding), never starting with '-',
    which the tools' argument parsers would take for an option (Kafka's Uuid.randomUuid avoids it too)."""
    while True:
        out = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not out.startswith("-"):
            return out


LOG4J1 = """log4j.rootLogger=INFO, file
log4j.appender.file=org.apache.log4j.FileAppender
log4j.appender.file.File={log}
log4j.appender.file.layout=org.apache.log4j.PatternLayout
log4j.appender.file.layout.ConversionPattern=[%d] %p %m (%c)%n
log4j.logger.org.apache.zookeeper=WARN
log4j.logger.kafka.request.logger=WARN
"""

LOG4J2 = """status = warn
appender.file.type = File
appender.file.name = file
appender.file.fileName = {log}
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.file.ref = file
"""

#: in a scenario's broker setting, the broker's own work folder
BROKER_FOLDER = "<broker-folder>"

STARTED = ("Kafka Server started", "] started (kafka.server.KafkaServer)", "[KafkaServer id=")


@dataclass
class Broker:
    node_id: int
    port: int
    controller_port: int
    folder: Path
    process: subprocess.Popen[bytes] | None = None

    @property
    def log_dir(self) -> Path:
        return self.folder / "logdirs"

    @property
    def server_log(self) -> Path:
        return self.folder / "server.log"

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None


@dataclass
class Cluster:
    """``size`` brokers of ``dist`` under ``work``; ``settings`` are added to every broker's."""

    dist: Dist
    work: Path
    size: int = 1
    settings: Mapping[str, str] = field(default_factory=dict)
    features: Mapping[str, int] = field(default_factory=dict)
    brokers: list[Broker] = field(default_factory=list)
    # KRaft: how many nodes (the first ones) are controller voters; 0: every node. The others run
    # as brokers only, so that they can all be down while the controller quorum stays up.
    voters: int = 0
    zookeeper_port: int | None = None
    _zk: subprocess.Popen[bytes] | None = None
    cluster_id: str = ""

    @property
    def bootstrap(self) -> str:
        return ",".join(f"{HOST}:{b.port}" for b in self.brokers if b.running) or f"{HOST}:{self.brokers[0].port}"

    @property
    def mode(self) -> str:
        if self.dist.zookeeper:
            return f"ZooKeeper, {self.size} broker(s), 127.0.0.1 only"
        if self.voters and self.voters < self.size:
            return (f"KRaft, {self.size} node(s) (node.id 1..{self.size}): 1..{self.voters} combined broker+controller "
                    f"(the controller quorum), {self.voters + 1}..{self.size} broker only, 127.0.0.1 only")
        return f"KRaft, {self.size} combined broker+controller node(s) (node.id 1..{self.size}), 127.0.0.1 only"

    # -- configuration ----------------------------------------------------------------------

    def broker_settings(self, broker: Broker) -> dict[str, str]:
        out: dict[str, str] = {}
        if self.dist.zookeeper:
            out.update({
                "broker.id": str(broker.node_id),
                "zookeeper.connect": f"{HOST}:{self.zookeeper_port}",
                "listeners": f"PLAINTEXT://{HOST}:{broker.port}",
                "advertised.listeners": f"PLAINTEXT://{HOST}:{broker.port}",
            })
        else:
            quorum = [b for b in self.brokers if not self.voters or b.node_id <= self.voters]
            voters = ",".join(f"{b.node_id}@{HOST}:{b.controller_port}" for b in quorum)
            controller = broker in quorum
            out.update({
                "process.roles": "broker,controller" if controller else "broker",
                "node.id": str(broker.node_id),
                "controller.quorum.voters": voters,
                "listeners": f"PLAINTEXT://{HOST}:{broker.port}"
                             + (f",CONTROLLER://{HOST}:{broker.controller_port}" if controller else ""),
                "advertised.listeners": f"PLAINTEXT://{HOST}:{broker.port}",
                "inter.broker.listener.name": "PLAINTEXT",
                "controller.listener.names": "CONTROLLER",
                "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
            })
        rf = str(min(3, self.size))
        out.update(BASE_SETTINGS)
        out.update({
            "log.dirs": str(broker.log_dir),
            "default.replication.factor": rf,
            "offsets.topic.replication.factor": rf,
            "transaction.state.log.replication.factor": rf,
            "min.insync.replicas": "1",
            "transaction.state.log.min.isr": "1",
        })
        if version_tuple(self.dist.version) >= (4, 0):
            # 4.0 raised the minimum segment size to 1 MiB (KIP-1030)
            out["log.segment.bytes"] = out["transaction.state.log.segment.bytes"] = "1048576"
        # a scenario's setting may name a path in the broker's own folder (a remote store)
        out.update({k: v.replace(BROKER_FOLDER, str(broker.folder)) for k, v in self.settings.items()})
        return out

    def shared_settings(self) -> dict[str, str]:
        """The settings as recorded in ``expected.json`` (paths and ports of broker 1)."""
        recorded = self.broker_settings(self.brokers[0])
        recorded["log.dirs"] = "logdirs" if self.size == 1 else "logdirs/broker-<node.id>"
        folder, cache = str(self.brokers[0].folder), str(self.dist.home.parent)
        return {k: v.replace(folder, BROKER_FOLDER).replace(cache, "<kafka-cache>") for k, v in recorded.items()}

    def _write_configs(self, broker: Broker) -> Path:
        broker.folder.mkdir(parents=True, exist_ok=True)
        props = broker.folder / "server.properties"
        props.write_text("".join(f"{k}={v}\n" for k, v in self.broker_settings(broker).items()))
        template = LOG4J2 if self.dist.log4j2 else LOG4J1
        (broker.folder / "log4j.properties").write_text(template.format(log=broker.server_log))
        return props

    # -- life cycle -------------------------------------------------------------------------

    def start(self) -> None:
        self.work.mkdir(parents=True, exist_ok=True)
        self.cluster_id = _cluster_id()
        self.brokers = [
            Broker(node_id=i, port=free_port(), controller_port=free_port(), folder=self.work / f"broker-{i}")
            for i in range(1, self.size + 1)
        ]
        if self.dist.zookeeper:
            self._start_zookeeper()
        for broker in self.brokers:
            props = self._write_configs(broker)
            if not self.dist.zookeeper:
                self._format(props)
        for broker in self.brokers:
            self._launch(broker)
        for broker in self.brokers:
            self._wait_started(broker)

    def _format(self, props: Path) -> None:
        args = ["format", "-t", self.cluster_id, "-c", str(props)]
        for name, level in self.features.items():
            args += ["--feature", f"{name}={level}"]
        run = subprocess.run(self.dist.java("storage", *args), capture_output=True, text=True)
        if run.returncode != 0:
            raise HarnessError(f"kafka-storage format failed on Kafka {self.dist.version}:\n{run.stdout}{run.stderr}")

    def _launch(self, broker: Broker) -> None:
        props = broker.folder / "server.properties"
        log_conf = broker.folder / "log4j.properties"
        cmd = self.dist.java("broker", str(props))
        # the broker gets its logging settings and a bigger heap than a tool
        java, rest = cmd[0], cmd[1:]
        cmd = [java, "-Xmx768m", f"-Dlog4j.configuration=file:{log_conf}", f"-Dlog4j2.configurationFile={log_conf}",
               f"-Dkafka.logs.dir={broker.folder}", *[a for a in rest if not a.startswith("-Xmx")]]
        out = open(broker.folder / "stdout.log", "ab")  # noqa: SIM115 - kept open for the process
        broker.process = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                          start_new_session=True)

    def _wait_started(self, broker: Broker) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if not broker.running:
                raise HarnessError(f"broker {broker.node_id} exited at start; see {broker.folder}/stdout.log and "
                                   f"server.log:\n{_tail(broker.folder / 'stdout.log')}{_tail(broker.server_log)}")
            text = broker.server_log.read_text(errors="replace") if broker.server_log.exists() else ""
            if _port_open(broker.port) and any(marker in text for marker in STARTED):
                return
            time.sleep(0.3)
        raise HarnessError(f"broker {broker.node_id} did not start in {START_TIMEOUT_S:.0f} s; see {broker.server_log}")

    def restart(self, node_id: int) -> None:
        broker = self.broker(node_id)
        if broker.running:
            raise HarnessError(f"broker {node_id} is still running")
        # the next start's log lines follow the old ones: wait for a new "started" line
        seen = broker.server_log.read_text(errors="replace").count("started") if broker.server_log.exists() else 0
        self._launch(broker)
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            text = broker.server_log.read_text(errors="replace")
            if broker.running and _port_open(broker.port) and text.count("started") > seen:
                return
            if not broker.running:
                raise HarnessError(f"broker {node_id} exited at restart:\n{_tail(broker.server_log)}")
            time.sleep(0.3)
        raise HarnessError(f"broker {node_id} did not restart in {START_TIMEOUT_S:.0f} s")

    def broker(self, node_id: int) -> Broker:
        return next(b for b in self.brokers if b.node_id == node_id)

    def kill(self, node_id: int) -> None:
        """SIGKILL: the broker stops as in a crash, with no snapshot and no clean-shutdown file."""
        broker = self.broker(node_id)
        if broker.process is not None and broker.running:
            os.killpg(broker.process.pid, signal.SIGKILL)
            broker.process.wait(30)

    def stop_all(self) -> None:
        # KRaft: the last node standing cannot finish a controlled shutdown without a quorum, so
        # stop the brokers together and wait for all of them
        running = [b for b in self.brokers if b.running]
        for b in running:
            assert b.process is not None
            b.process.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + 120
        for b in running:
            assert b.process is not None
            try:
                b.process.wait(max(1.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired as e:
                self.close()
                raise HarnessError(f"broker {b.node_id} did not shut down in 120 s (killed)") from e
        if self._zk is not None and self._zk.poll() is None:
            self._zk.send_signal(signal.SIGTERM)
            self._zk.wait(30)

    def close(self) -> None:
        """End every process the cluster started that is still running."""
        for b in self.brokers:
            if b.process is not None and b.running:
                os.killpg(b.process.pid, signal.SIGKILL)
                b.process.wait(30)
        if self._zk is not None and self._zk.poll() is None:
            os.killpg(self._zk.pid, signal.SIGKILL)
            self._zk.wait(30)

    def _start_zookeeper(self) -> None:
        folder = self.work / "zookeeper"
        folder.mkdir(parents=True, exist_ok=True)
        self.zookeeper_port = free_port()
        conf = folder / "zookeeper.properties"
        conf.write_text(f"dataDir={folder / 'data'}\nclientPort={self.zookeeper_port}\nclientPortAddress={HOST}\n"
                        "maxClientCnxns=0\nadmin.enableServer=false\n4lw.commands.whitelist=ruok\n")
        (folder / "log4j.properties").write_text(LOG4J1.format(log=folder / "zookeeper.log"))
        cmd = self.dist.java("zookeeper", str(conf))
        cmd.insert(1, f"-Dlog4j.configuration=file:{folder / 'log4j.properties'}")
        out = open(folder / "stdout.log", "ab")  # noqa: SIM115
        self._zk = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    start_new_session=True)
        deadline = time.monotonic() + 60
        while not _port_open(self.zookeeper_port):
            if self._zk.poll() is not None or time.monotonic() > deadline:
                raise HarnessError(f"ZooKeeper did not start:\n{_tail(folder / 'stdout.log')}")
            time.sleep(0.3)

    # -- clients ----------------------------------------------------------------------------

    def client(self, mode: str, **opts: Any) -> list[str]:
        return self.dist.java("", self.bootstrap, mode, *(f"{k}={v}" for k, v in opts.items()), driver=True)

    def run_client(self, mode: str, timeout_s: float = 600.0, **opts: Any) -> list[dict[str, Any]]:
        """Run the scenario client to its end; its events (JSON lines) in order."""
        run = subprocess.run(self.client(mode, **opts), capture_output=True, text=True, timeout=timeout_s)
        if run.returncode != 0:
            raise HarnessError(f"client {mode} failed (exit {run.returncode}):\n{run.stderr[-3000:]}")
        return [json.loads(line) for line in run.stdout.splitlines() if line.startswith("{")]

    @contextmanager
    def open_client(self, mode: str, **opts: Any) -> Iterator[Client]:
        """A client left running (``open``, ``eos hang=true``) until the block ends; killed then."""
        proc = subprocess.Popen(self.client(mode, **opts), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, start_new_session=True)
        client = Client(proc)
        try:
            yield client
        finally:
            client.kill()

    def offsets(self, *topics: str, internal: bool = False) -> list[dict[str, Any]]:
        """Each partition's HW, LSO, log start and leader, as the Admin client gives them (with
        ``internal``, of the internal topics that exist too)."""
        events = self.run_client("offsets", topics=",".join(topics), internal=str(internal).lower())
        return [e for e in events if e.get("event") == "offsets"]

    def create_topics(self, *specs: str, **configs: str) -> None:
        joined = ";".join(f"{k}={v}" for k, v in configs.items())
        self.run_client("create", topics=",".join(specs), configs=joined, timeout_s=120)


@dataclass
class Client:
    """A running scenario client: read its events, give it an order, kill it."""

    process: subprocess.Popen[str]
    events: list[dict[str, Any]] = field(default_factory=list)

    def wait_for(self, event: str, timeout_s: float = 120.0) -> dict[str, Any]:
        assert self.process.stdout is not None
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            line = self.process.stdout.readline()
            if not line:
                err = self.process.stderr.read() if self.process.stderr else ""
                raise HarnessError(f"client ended before '{event}':\n{err[-3000:]}")
            if line.startswith("{"):
                ev: dict[str, Any] = json.loads(line)
                self.events.append(ev)
                if ev.get("event") == event:
                    return ev
        raise HarnessError(f"client said no '{event}' in {timeout_s:.0f} s")

    def order(self, line: str, wait_for: str | None = None, timeout_s: float = 120.0) -> dict[str, Any] | None:
        assert self.process.stdin is not None
        self.process.stdin.write(line + "\n")
        self.process.stdin.flush()
        return self.wait_for(wait_for, timeout_s) if wait_for else None

    def kill(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(30)


def _tail(path: Path, lines: int = 30) -> str:
    if not path.exists():
        return ""
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:]) + "\n"

