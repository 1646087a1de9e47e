"""What Kafka's own tools say about a running cluster, and the scenario folder written from it.

A ``Recorder`` runs the tools while the brokers are up (``kafka-transactions.sh`` ``list``,
``describe``, ``describe-producers``, ``find-hanging``; ``kafka-consumer-groups.sh --describe
--all-groups`` where the scenario asks; the high watermark, last stable offset
and log start offset of every partition from the Admin client), writes each tool's output to
``tools/`` with the command line, exit code and time above it, and after the brokers stopped
copies their log dirs, runs ``kafka-dump-log.sh`` over every copied ``.log``, ``.snapshot``
and ``.txnindex`` (over ``__cluster_metadata-0``'s ``.log`` and ``.checkpoint`` files with
``--cluster-metadata-decoder``) and writes ``expected.json``. ``dump_metadata_log`` writes the
metadata log's dump into an existing scenario folder offline (``python -m
tools.realkafka.record <scenario folder>...``). The folder has the layout of the 3.6.2
corpus (``../shared/realcorpus``, its ``SCENARIOS.md``): ``logdirs/``, ``tools/``,
``expected.json``; a cluster of several brokers has one ``logdirs/broker-<id>/`` each.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tools.realkafka.cluster import Cluster
from tools.realkafka.dist import Dist, HarnessError, fetch

__all__ = ["Recorder", "dump_log_dirs", "dump_metadata_log", "now_ms", "parse_columns", "parse_table"]

TOOL_TIMEOUT_S = 120.0
# offsets equal in this many reads this far apart count as settled
SETTLE_READS = 3
SETTLE_PAUSE_S = 1.5
SETTLE_TIMEOUT_S = 90.0
# lines of the broker's log worth keeping beside the data
EXCERPT = re.compile(r"WARN|ERROR|[Tt]ransaction|[Pp]roducer|[Rr]olled new log segment|[Ff]enc|[Mm]arker|"
                     r"TransactionCoordinator|Shutdown|shut down")
DUMP_SUFFIXES = (".log", ".snapshot", ".txnindex")
METADATA_DUMP_SUFFIXES = (".log", ".checkpoint")  # segments and KRaft snapshots of __cluster_metadata-0
REMOTE_INDEX_CACHE = "remote-log-index-cache"
DUMP_KINDS = ("data", "txn", "offsets", "metadata", "remote")
DUMP_FLAGS: dict[str, list[str]] = {"data": ["--deep-iteration"], "txn": ["--transaction-log-decoder"],
                                    "offsets": ["--offsets-decoder"], "metadata": ["--cluster-metadata-decoder"],
                                    "remote": ["--remote-log-metadata-decoder"]}


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def _iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%S+0000")


def parse_table(text: str) -> list[dict[str, str]]:
    """Rows of a ``kafka-transactions.sh`` table (tab-separated, header first)."""
    lines = [line for line in text.splitlines() if line.strip() and not line.startswith("#")]
    if not lines:
        return []
    header = [h.strip() for h in lines[0].split("\t") if h.strip()]
    rows = []
    for line in lines[1:]:
        cells = [c.strip() for c in line.split("\t")]
        rows.append(dict(zip(header, cells, strict=False)))
    return rows


def parse_columns(text: str) -> list[dict[str, str]]:
    """Rows of a ``kafka-consumer-groups.sh --describe`` listing: blocks of a header line (its
    first column ``GROUP``) and rows, columns separated by spaces; other lines (``Consumer group
    'g' has no active members.``) are left out."""
    rows: list[dict[str, str]] = []
    header: list[str] | None = None
    for line in text.splitlines():
        cells = line.split()
        if not cells:
            header = None
        elif cells[0] == "GROUP":
            header = cells
        elif header is not None and len(cells) == len(header):
            rows.append(dict(zip(header, cells, strict=True)))
    return rows


@dataclass
class Recorder:
    cluster: Cluster
    folder: Path
    commands: list[dict[str, Any]] = field(default_factory=list)
    offsets: dict[str, dict[str, Any]] = field(default_factory=dict)
    offsets_after: dict[str, dict[str, Any]] = field(default_factory=dict)
    find_hanging: dict[str, Any] | None = None
    transactional_ids: dict[str, dict[str, Any]] = field(default_factory=dict)
    features: dict[str, Any] = field(default_factory=dict)
    tiered_offsets: dict[str, dict[str, Any]] | None = None
    consumer_groups: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)
        (self.folder / "tools").mkdir(parents=True)

    @property
    def tools(self) -> Path:
        return self.folder / "tools"

    # -- tools while the brokers run ------------------------------------------------------------

    def _run_tool(self, file: str, shown: str, cmd: list[str]) -> tuple[int, str]:
        at = now_ms()
        run = subprocess.run(cmd, capture_output=True, text=True, timeout=TOOL_TIMEOUT_S)
        body = run.stdout + (run.stderr if run.returncode != 0 else "")
        (self.tools / file).write_text(f"# $ {shown}\n# exit code {run.returncode}, run at {_iso(at)}\n{body}")
        self.commands.append({"file": f"tools/{file}", "command": shown, "rc": run.returncode, "at_ms": at,
                              "main_class": cmd[cmd.index("-cp") + 2]})
        return run.returncode, run.stdout

    def transactions_tool(self, file: str, *args: str) -> tuple[int, str]:
        dist = self.cluster.dist
        if not dist.has_tool("transactions"):
            return -1, ""
        bootstrap = self.cluster.bootstrap.split(",")[0]
        shown = f"bin/kafka-transactions.sh --bootstrap-server {bootstrap} {' '.join(args)}"
        return self._run_tool(file, shown, dist.java("transactions", "--bootstrap-server", bootstrap, *args))

    def describe_transactions(self) -> None:
        """``list``, then ``describe`` of every transactional id it lists."""
        rc, out = self.transactions_tool("kafka-transactions-list.txt", "list")
        if rc != 0:
            return
        for row in parse_table(out):
            tid = row.get("TransactionalId", "")
            rc, described = self.transactions_tool(f"kafka-transactions-describe-{tid}.txt", "describe",
                                                   "--transactional-id", tid)
            info = parse_table(described)[0] if rc == 0 and parse_table(described) else {}
            self.transactional_ids[tid] = {
                "producer_id": int(row.get("ProducerId", "-1")),
                "state": row.get("TransactionState"),
                "coordinator": int(row.get("Coordinator", "-1")),
                "producer_epoch": int(info["ProducerEpoch"]) if "ProducerEpoch" in info else None,
                "transaction_timeout_ms": info.get("TransactionTimeoutMs"),
                "topic_partitions": info.get("TopicPartitions"),
                "current_transaction_start_ms": info.get("CurrentTransactionStartTimeMs"),
            }

    def describe_producers(self, topic: str, partitions: int) -> None:
        for p in range(partitions):
            self.transactions_tool(f"kafka-transactions-describe-producers-{topic}-{p}.txt", "describe-producers",
                                   "--topic", topic, "--partition", str(p))

    def run_find_hanging(self, broker: int | None = None) -> None:
        live = broker if broker is not None else next(b.node_id for b in self.cluster.brokers if b.running)
        rc, out = self.transactions_tool("kafka-transactions-find-hanging.txt", "find-hanging", "--broker-id",
                                         str(live), "--max-transaction-timeout", "1")
        if rc == -1:
            return
        if rc != 0:
            raise HarnessError(f"find-hanging failed:\n{(self.tools / 'kafka-transactions-find-hanging.txt').read_text()}")
        self.find_hanging = {"command": self.commands[-1]["command"], "at_ms": self.commands[-1]["at_ms"],
                             "rows": parse_table(out)}

    def describe_consumer_groups(self) -> None:
        """``kafka-consumer-groups.sh --describe --all-groups``: each group's committed offset
        (CURRENT-OFFSET), the log end offset and the lag per partition, as the tool prints them."""
        dist = self.cluster.dist
        bootstrap = self.cluster.bootstrap.split(",")[0]
        args = ("--bootstrap-server", bootstrap, "--describe", "--all-groups")
        rc, out = self._run_tool("kafka-consumer-groups-describe.txt",
                                 f"bin/kafka-consumer-groups.sh {' '.join(args)}", dist.java("consumer-groups", *args))
        if rc != 0:
            said = (self.tools / "kafka-consumer-groups-describe.txt").read_text()
            raise HarnessError(f"kafka-consumer-groups failed:\n{said}")
        self.consumer_groups = {"command": self.commands[-1]["command"], "at_ms": self.commands[-1]["at_ms"],
                                "rows": parse_columns(out)}

    def settle(self, topics: list[str], *, reads: int = SETTLE_READS, timeout_s: float = SETTLE_TIMEOUT_S) -> None:
        """Wait until the partitions' offsets stop moving (markers are written after the producer's
        EndTxn returns, and later still when a broker died), so that what the tools say and what
        the copied log dirs hold describe one state."""
        deadline = time.monotonic() + timeout_s
        last: list[dict[str, Any]] | None = None
        same = 0
        while time.monotonic() < deadline:
            now = self.cluster.offsets(*topics, internal=True)
            same = same + 1 if now == last else 0
            if same >= reads - 1:
                return
            last = now
            time.sleep(SETTLE_PAUSE_S)
        raise HarnessError(f"the offsets of {', '.join(topics)} still moved after {timeout_s:.0f} s")

    def read_offsets(self, topics: list[str], *, after_wait: bool = False) -> dict[str, dict[str, Any]]:
        """HW (read_uncommitted latest), LSO (read_committed latest), log start of every partition."""
        at = now_ms()
        events = self.cluster.offsets(*topics, internal=True)
        out = {
            f"{e['topic']}-{e['partition']}": {k: e[k] for k in ("topic", "partition", "high_watermark",
                                                               "last_stable_offset", "log_start_offset", "leader")}
            for e in events
        }
        self.commands.append({"file": "tools/offsets.json", "command": "TxnDriver offsets topics=" + ",".join(topics)
                              + " internal=true (Admin.listOffsets latest read_uncommitted / read_committed, "
                              "earliest; the internal topics too)",
                              "rc": 0, "at_ms": at, "main_class": "TxnDriver"})
        if after_wait:
            self.offsets_after = out
        else:
            self.offsets = out
            (self.tools / "offsets.json").write_text(json.dumps(
                {k: {f: v[f] for f in ("high_watermark", "last_stable_offset", "log_start_offset", "partition",
                                       "topic")} for k, v in out.items()}, indent=2, sort_keys=True) + "\n")
        return out

    def read_tiered_offsets(self, topics: list[str]) -> dict[str, dict[str, Any]]:
        """Tiered storage: each partition's local log start (Admin ``listOffsets`` with
        ``OffsetSpec.earliestLocal()``), last tiered offset (``latestTiered()``) and first offset
        not uploaded yet (``earliestPendingUpload()``, 4.x), beside its HW, LSO and log start;
        -2 where the release has no such spec. Written to ``tools/offsets-tiered.json``."""
        at = now_ms()
        events = self.cluster.run_client("offsets", topics=",".join(topics), tiered="true")
        out: dict[str, dict[str, Any]] = {}
        for e in events:
            if e.get("event") in ("offsets", "tiered_offsets"):
                name = f"{e['topic']}-{e['partition']}"
                row = out.setdefault(name, {"topic": e["topic"], "partition": e["partition"]})
                row.update({k: v for k, v in e.items() if k not in ("event", "topic", "partition", "leader", "isr")})
        self.commands.append({"file": "tools/offsets-tiered.json", "command": "TxnDriver offsets topics="
                              + ",".join(topics) + " tiered=true (Admin.listOffsets latest, earliest, earliestLocal, "
                              "latestTiered, earliestPendingUpload)", "rc": 0, "at_ms": at, "main_class": "TxnDriver"})
        (self.tools / "offsets-tiered.json").write_text(json.dumps(out, indent=2, sort_keys=True) + "\n")
        self.tiered_offsets = out
        return out

    def describe_features(self) -> None:
        dist = self.cluster.dist
        if dist.zookeeper or not dist.has_tool("features"):
            return
        bootstrap = self.cluster.bootstrap.split(",")[0]
        run = subprocess.run(dist.java("features", "--bootstrap-server", bootstrap, "describe"),
                             capture_output=True, text=True, timeout=TOOL_TIMEOUT_S)
        for line in run.stdout.splitlines():
            m = re.search(r"Feature: (\S+)\s.*FinalizedVersionLevel: (\d+)", line)
            if m:
                self.features[m.group(1)] = int(m.group(2))
        (self.tools / "kafka-features-describe.txt").write_text(
            f"# $ bin/kafka-features.sh --bootstrap-server {bootstrap} describe\n"
            f"# exit code {run.returncode}, run at {_iso(now_ms())}\n{run.stdout}")

    # -- after the brokers stopped -------------------------------------------------------------

    def copy_log_dirs(self) -> None:
        multi = len(self.cluster.brokers) > 1
        for b in self.cluster.brokers:
            target = self.folder / "logdirs" / (f"broker-{b.node_id}" if multi else "")
            shutil.copytree(b.log_dir, target, ignore=_left_out, dirs_exist_ok=True)
            # the broker's own paths are the harness's scratch folders: shown as in the copy
            shown = str(target.relative_to(self.folder))
            excerpt = [line.replace(str(b.log_dir), shown).replace(str(b.folder), f"broker-{b.node_id}")
                       for line in b.server_log.read_text(errors="replace").splitlines() if EXCERPT.search(line)]
            name = f"broker-server-log-excerpt-{b.node_id}.txt" if multi else "broker-server-log-excerpt.txt"
            (self.tools / name).write_text("\n".join(excerpt[-3000:]) + "\n")

    def dump_logs(self) -> None:
        """``kafka-dump-log.sh`` over every copied file, one text file per partition folder."""
        dump_log_dirs(self.cluster.dist, self.folder)

    def write_expected(self, scenario: str, *, description: str, anomalies: list[dict[str, Any]],
                       notes: dict[str, Any], started_ms: int) -> dict[str, Any]:
        c = self.cluster
        expected = {
            "scenario": scenario,
            "kafka_version": c.dist.version,
            "mode": c.mode,
            "brokers": [b.node_id for b in c.brokers],
            "features": self.features,
            # a cluster that finalizes no transaction.version (ZooKeeper, KRaft before 4.0) runs TV0
            "transaction_version": self.features.get("transaction.version", 0),
            "broker_settings": c.shared_settings(),
            "clients": {"java": f"org.apache.kafka:kafka-clients:{c.dist.version} (tools/realkafka/driver/TxnDriver.java)",
                        "kafka-python": _kafka_python_version()},
            "generated_at_ms": started_ms,
            "copy": "log.dirs copied after the brokers stopped (SIGTERM; SIGKILL where the scenario says); "
                    ".lock and __cluster_metadata-0/*.index, *.timeindex left out",
            "description": description,
            "transactional_ids": self.transactional_ids,
            "partitions": self.offsets,
            "partitions_after_find_hanging_wait": self.offsets_after or self.offsets,
            "find_hanging": self.find_hanging,
            **({"consumer_groups": self.consumer_groups} if self.consumer_groups is not None else {}),
            **({"tiered_offsets": self.tiered_offsets} if self.tiered_offsets is not None else {}),
            "tool_commands": self.commands,
            "anomalies": anomalies,
            **notes,
            "provenance": {"harness": "tools/realkafka", "command": f"make kafka-corpus KAFKA_VERSIONS={c.dist.version} "
                                                                    f"SCENARIOS={scenario}",
                           "maven": f"org.apache.kafka:kafka_2.13:{c.dist.version}, "
                                    f"org.apache.kafka:kafka-tools:{c.dist.version}"},
        }
        (self.folder / "expected.json").write_text(json.dumps(expected, indent=2) + "\n")
        return expected


def _partition_kind(name: str) -> str:
    if name.startswith("__cluster_metadata-"):
        return "metadata"
    if name.startswith("__transaction_state-"):
        return "txn"
    if name.startswith("__remote_log_metadata-"):
        return "remote"  # tiered storage's TopicBasedRemoteLogMetadataManager (KIP-405)
    return "offsets" if name.startswith("__consumer_offsets-") else "data"


def dump_log_dirs(dist: Dist, folder: Path, kinds: tuple[str, ...] = DUMP_KINDS) -> list[Path]:
    """Run the release's ``kafka-dump-log`` over the copied ``logdirs/`` of a scenario ``folder``:
    one ``tools/dump-log/[broker-<id>/]<partition>.txt`` per partition folder of the ``kinds`` asked."""
    logdirs = folder / "logdirs"
    holders = sorted({p.parent.parent for p in logdirs.rglob("*") if p.suffix in DUMP_SUFFIXES})
    written: list[Path] = []
    for holder in holders:
        groups: dict[str, list[str]] = {kind: [] for kind in kinds}
        for part in sorted(holder.iterdir()):
            kind = _partition_kind(part.name)
            # remote-log-index-cache/ (tiered storage) holds indexes of remote segments named
            # <offset>_<segment id>.<kind>, which kafka-dump-log cannot read: not a partition
            if not part.is_dir() or kind not in groups or part.name == REMOTE_INDEX_CACHE:
                continue
            suffixes = METADATA_DUMP_SUFFIXES if kind == "metadata" else DUMP_SUFFIXES
            groups[kind] += sorted(str(f.relative_to(folder)) for f in part.iterdir() if f.suffix in suffixes)
        out_dir = folder / "tools" / "dump-log" / holder.relative_to(logdirs)
        for kind, files in groups.items():
            if files:
                out_dir.mkdir(parents=True, exist_ok=True)
                written += _dump(dist, folder, kind, files, out_dir)
    return written


def _dump(dist: Dist, folder: Path, kind: str, files: list[str], out_dir: Path) -> list[Path]:
    flags = ["--print-data-log", *DUMP_FLAGS[kind]]
    cmd = dist.java("dump-log", *flags, "--files", ",".join(files))
    run = subprocess.run(cmd, capture_output=True, text=True, cwd=folder, timeout=600)
    if run.returncode != 0:
        raise HarnessError(f"kafka-dump-log failed:\n{run.stderr[-3000:]}")
    # the tool is given paths relative to the scenario folder; should it print one absolute path
    # (its working directory is a scratch folder while the harness runs), it is shown relative too
    scratch = sorted({f"{folder}/", f"{folder.resolve()}/"}, key=len, reverse=True)
    # one file per partition folder, each with the command that printed it
    sections: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in run.stdout.splitlines():
        for prefix in scratch:
            line = line.replace(prefix, "")
        if line.startswith("Dumping "):
            partition = Path(line[len("Dumping "):].strip()).parent.name
            current = sections.setdefault(partition, [])
        if current is not None:
            current.append(line)
    written = []
    for partition, lines in sections.items():
        own = [f for f in files if Path(f).parent.name == partition]
        shown = f"bin/kafka-dump-log.sh {' '.join(flags)} --files {','.join(own)}"
        path = out_dir / f"{partition}.txt"
        path.write_text(f"# $ {shown}\n# exit code 0\n" + "\n".join(lines) + "\n")
        written.append(path)
    return written


def dump_metadata_log(folder: Path, dist: Dist | None = None) -> list[Path]:
    """Dump ``__cluster_metadata-0`` of an existing scenario ``folder`` with its own release's tool
    (the ``kafka_version`` of its ``expected.json``): no broker runs. Returns the files written."""
    if dist is None:
        version = json.loads((folder / "expected.json").read_text())["kafka_version"]
        dist = fetch(version, log=False)
    return dump_log_dirs(dist, folder, ("metadata",))


def _left_out(folder: str, names: list[str]) -> set[str]:
    """What the copy leaves out: ``.lock``, and the KRaft metadata log's offset and time indexes,
    which 4.x brokers leave at their preallocated 10 MiB of zeros on shutdown."""
    out = {n for n in names if n == ".lock"}
    if Path(folder).name.startswith("__cluster_metadata-"):
        out |= {n for n in names if n.endswith((".index", ".timeindex"))}
    return out


def _kafka_python_version() -> str | None:
    try:
        import kafka
    except ImportError:
        return None
    return str(kafka.__version__)


if __name__ == "__main__":
    import sys

    # python -m tools.realkafka.record <scenario folder>...: add the metadata log's dump offline
    for arg in sys.argv[1:]:
        for path in dump_metadata_log(Path(arg)):
            print(path)
