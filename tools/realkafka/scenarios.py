"""The scenarios: what the clients do to a fresh cluster, and what is expected of it.

Each scenario drives a fresh cluster of one release with the Java scenario client
(``driver/TxnDriver.java``) and, where the Java client cannot misbehave on purpose, a raw
produce (``stray.py``). It returns a description, the anomalies it planted (type, topic,
partition, producer id and epoch, offsets) and notes (the raw produce's request and answer,
client events), which go into ``expected.json`` beside Kafka's own verdicts. A scenario that a
release cannot run says why (``Scenario.unsupported``); ``SCENARIOS.md`` lists those.
"""

from __future__ import annotations

import re
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tools.realkafka.cluster import BASE_SETTINGS, BROKER_FOLDER, Cluster
from tools.realkafka.dist import Dist, HarnessError, fetch_artifact, version_tuple
from tools.realkafka.record import now_ms
from tools.realkafka.stray import StrayBatch, StrayMarker, add_partitions, init_producer_id, produce, write_marker

__all__ = ["REMOTE_STORE", "SCENARIOS", "Outcome", "Scenario", "Topic", "read_offset_checkpoint", "topic_configs"]

# find-hanging's smallest --max-transaction-timeout is one minute: wait past it
HANGING_WAIT_S = 65.0
# how long before its transaction's commit a late batch is created
LATE_BY_S = 3.0


@dataclass(frozen=True)
class Topic:
    """A topic the scenario creates, replicated on every broker of its cluster."""

    name: str
    partitions: int
    configs: tuple[tuple[str, str], ...] = ()
    # the brokers holding every partition's replicas, the first preferred (default: all, as the broker places them)
    replicas: tuple[int, ...] = ()


@dataclass
class Outcome:
    description: str
    anomalies: list[dict[str, Any]] = field(default_factory=list)
    notes: dict[str, Any] = field(default_factory=dict)
    # wait past find-hanging's one-minute timeout before running it
    wait_for_hanging: bool = False
    # the live broker find-hanging asks (default: the first one running)
    find_hanging_broker: int | None = None
    # record kafka-consumer-groups.sh --describe --all-groups while the brokers run
    describe_groups: bool = False


@dataclass(frozen=True)
class Scenario:
    name: str
    summary: str
    topics: tuple[Topic, ...]
    run: Callable[[Cluster], Outcome]
    brokers: int = 1
    settings: tuple[tuple[str, str], ...] = ()
    min_version: str = "2.8"
    transaction_version: int | None = None  # finalized on 4.x: 2 unless a scenario says otherwise
    tv2_only: bool = False
    why_not: str = ""
    # broker settings for releases before 4.0 only (sizes below 4.0's 1 MiB segment minimum)
    legacy_settings: tuple[tuple[str, str], ...] = ()
    # record the cleaner's checkpoint (cleaner-offset-checkpoint) of the copied log dirs
    record_cleaner: bool = False
    # KRaft: the first `voters` nodes form the controller quorum, the others are brokers only (0: all)
    voters: int = 0
    # broker settings that depend on the release (jars fetched for the scenario)
    release_settings: Callable[[Dist], dict[str, str]] | None = None
    # tiered storage: record the tiered offsets and the remote store's files
    tiered: bool = False

    def broker_settings(self, dist: Dist) -> dict[str, str]:
        out = dict(self.settings)
        if version_tuple(dist.version) < (4, 0):
            out.update(self.legacy_settings)
        if self.release_settings is not None:
            out.update(self.release_settings(dist))
        return out

    def unsupported(self, dist: Dist) -> str | None:
        """Why this release cannot run the scenario, or None."""
        if self.tv2_only and version_tuple(dist.version) < (4, 0):
            return "transaction version 2 exists from Kafka 4.0"
        if version_tuple(dist.version) < version_tuple(self.min_version):
            return self.why_not or f"needs Kafka {self.min_version} or newer"
        return None

    def features(self, dist: Dist) -> dict[str, int]:
        if version_tuple(dist.version) < (4, 0):
            return {}
        return {"transaction.version": 2 if self.transaction_version is None else self.transaction_version}


# -- helpers --------------------------------------------------------------------------------------


def run_parallel(cluster: Cluster, runs: list[tuple[str, dict[str, Any]]]) -> list[list[str]]:
    """Run several clients at once; their stdout lines."""
    procs = [subprocess.Popen(cluster.client(mode, **opts), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for mode, opts in runs]
    outs = []
    for (mode, _), proc in zip(runs, procs, strict=True):
        out, err = proc.communicate(timeout=600)
        if proc.returncode != 0:
            raise HarnessError(f"client {mode} failed:\n{err[-3000:]}")
        outs.append(out.splitlines())
    return outs


_BATCH = re.compile(r"baseOffset: (\d+) lastOffset: (\d+) .*?lastSequence: (-?\d+) producerId: (-?\d+) "
                    r"producerEpoch: (-?\d+) .*?isTransactional: (\w+)")


def _live_segments(cluster: Cluster, topic: str, partition: int) -> Iterator[str]:
    """The live (newest) segment of the partition on each broker that holds a copy of it."""
    for broker in cluster.brokers:
        folder = broker.log_dir / f"{topic}-{partition}"
        if folder.is_dir():
            yield str(sorted(folder.glob("*.log"))[-1])


def _dump_log(cluster: Cluster, *args: str) -> str:
    """What ``kafka-dump-log.sh`` prints for ``args``."""
    return subprocess.run(cluster.dist.java("dump-log", *args), capture_output=True, text=True).stdout


def live_producer(cluster: Cluster, topic: str, partition: int) -> dict[str, int]:
    """Producer id, epoch and last sequence of the last transactional batch on a partition, as
    ``kafka-dump-log.sh`` prints the live segment (any release, whatever the client exposes)."""
    for segment in _live_segments(cluster, topic, partition):
        found = [m for m in _BATCH.finditer(_dump_log(cluster, "--files", segment)) if m.group(6) == "true"]
        if found:
            m = found[-1]
            return {"producer_id": int(m.group(4)), "producer_epoch": int(m.group(5)),
                    "last_sequence": int(m.group(3)), "last_offset": int(m.group(2))}
    raise HarnessError(f"no transactional batch on {topic}-{partition}")


_MARKER = re.compile(r"endTxnMarker: (COMMIT|ABORT) coordinatorEpoch: (\d+)")
_CONTROL = re.compile(r"baseOffset: (\d+) .*?producerId: (-?\d+) producerEpoch: (-?\d+) .*?isControl: true")


def last_marker(cluster: Cluster, topic: str, partition: int) -> dict[str, Any]:
    """The last marker on a partition (its offset, producer id and epoch, type and coordinator
    epoch) as ``kafka-dump-log.sh`` prints the live segment: its batches for the first three,
    its records (``--print-data-log``) for the others."""
    for segment in _live_segments(cluster, topic, partition):
        controls = _CONTROL.findall(_dump_log(cluster, "--files", segment))
        markers = _MARKER.findall(_dump_log(cluster, "--print-data-log", "--files", segment))
        if controls and markers:
            (offset, producer_id, epoch), (marker_type, coordinator_epoch) = controls[-1], markers[-1]
            return {"offset": int(offset), "producer_id": int(producer_id), "producer_epoch": int(epoch),
                    "marker_type": marker_type, "coordinator_epoch": int(coordinator_epoch)}
    raise HarnessError(f"no marker on {topic}-{partition}")


def read_offset_checkpoint(path: Path) -> dict[str, int]:
    """``<topic>-<partition>`` -> offset of an offset checkpoint file (``cleaner-offset-checkpoint``,
    ``log-start-offset-checkpoint``...): version line, count line, then ``topic partition offset``."""
    if not path.exists():
        return {}
    lines = path.read_text().splitlines()
    out = {}
    for line in lines[2:]:
        if line.strip():
            topic, partition, offset = line.split()
            out[f"{topic}-{partition}"] = int(offset)
    return out


def cleaner_checkpoints(cluster: Cluster) -> dict[str, dict[str, int]]:
    """Each running broker's ``cleaner-offset-checkpoint`` as it is now on disk."""
    return {str(b.node_id): read_offset_checkpoint(b.log_dir / "cleaner-offset-checkpoint") for b in cluster.brokers}


def wait_cleaned(cluster: Cluster, partitions: list[str], timeout_s: float = 120.0,
                 at_least: dict[str, int] | None = None) -> dict[str, int]:
    """Until the log cleaner has checkpointed every one of ``partitions`` (past ``at_least``'s
    offset where given) on the first broker: the checkpoint then."""
    deadline = time.monotonic() + timeout_s
    floor = at_least or {}
    while time.monotonic() < deadline:
        now = read_offset_checkpoint(cluster.brokers[0].log_dir / "cleaner-offset-checkpoint")
        if all(now.get(p, 0) > floor.get(p, 0) for p in partitions):
            return {p: now[p] for p in sorted(now)}
        time.sleep(1)
    raise HarnessError(f"the log cleaner did not clean {', '.join(partitions)} within {timeout_s:.0f} s: {now}")


def topic_configs(cluster: Cluster, topics: list[str]) -> dict[str, dict[str, str]]:
    """The topic-level configs of ``topics`` as the broker describes them."""
    out: dict[str, dict[str, str]] = {t: {} for t in topics}
    for e in cluster.run_client("configs", topics=",".join(topics)):
        if e.get("event") == "config":
            out[e["topic"]][e["name"]] = e["value"]
    return out


def _first_offsets(events: list[dict[str, Any]]) -> dict[tuple[str, int], int]:
    """The first offset the client's ``sent`` events give on each partition."""
    out: dict[tuple[str, int], int] = {}
    for e in events:
        if e.get("event") == "sent":
            key = (e["topic"], int(e["partition"]))
            out[key] = min(out.get(key, int(e["offset"])), int(e["offset"]))
    return out


#: KIP-890 part 1's check (3.6+) off: the broker takes a transactional batch for a partition the
#: transaction never added (releases before 3.6 ignore the setting: they never check)
VERIFICATION_OFF = (("transaction.partition.verification.enable", "false"),)


# -- scenarios ------------------------------------------------------------------------------------


def healthy(cluster: Cluster) -> Outcome:
    runs: list[tuple[str, dict[str, Any]]] = [
        ("txn", {"id": "healthy-txn-a", "topic": "orders", "partitions": "0,1", "count": 40, "records": 3,
                 "abort_every": 5, "compression": "gzip"}),
        ("txn", {"id": "healthy-txn-b", "topic": "payments", "partitions": "0,2", "count": 40, "records": 2,
                 "abort_every": 4, "compression": "zstd"}),
        ("txn", {"id": "healthy-txn-c", "topic": "orders", "partitions": "2", "count": 40, "records": 2,
                 "abort_every": 6, "compression": "none"}),
        ("idempotent", {"topic": "orders", "count": 200, "compression": "lz4"}),
        ("plain", {"topic": "payments", "count": 200, "compression": "snappy"}),
    ]
    run_parallel(cluster, runs)
    return Outcome("three transactional producers (gzip, zstd, none) running at once, every 4th-6th transaction "
                   "aborted after a flush, beside an idempotent (lz4) and a plain acks=1 (snappy) producer")


def crashed_producer(cluster: Cluster) -> Outcome:
    cluster.run_client("txn", id="crash-bg", topic="crash", partitions="0,1,2", count=10, records=2)
    with cluster.open_client("open", id="crash-txn", topic="crash", partitions="0,1", records=10,
                             timeout_ms=900000) as client:
        client.wait_for("open")
        pid = live_producer(cluster, "crash", 0)
        client.kill()
    return Outcome(
        "crash-bg commits 10 transactions on crash-0..2; crash-txn (transaction.timeout.ms 900000) writes 10 records "
        "to crash-0 and crash-1 and its process is SIGKILLed; the tools run within the timeout",
        anomalies=[{"type": "open_transaction", "topic": "crash", "partition": p, **pid} for p in (0, 1)],
    )


def timeout_abort(cluster: Cluster) -> Outcome:
    with cluster.open_client("open", id="tmo-txn", topic="tmo", partitions="0,1", records=5,
                             timeout_ms=10000) as client:
        client.wait_for("open")
        pid = live_producer(cluster, "tmo", 0)
        client.kill()
    _wait_stable(cluster, "tmo", "tmo-txn")  # the coordinator aborts it once its timeout is past
    return Outcome("tmo-txn (transaction.timeout.ms 10000) writes 5 records to tmo-0 and tmo-1 and is SIGKILLed; "
                   "the coordinator aborts it after the timeout (ABORT markers with a bumped epoch)",
                   anomalies=[{"type": "coordinator_timeout_abort", "topic": "tmo", "partition": p, **pid}
                              for p in (0, 1)])


def _stray_to_unadded(cluster: Cluster, topic: str) -> Outcome:
    """A transactional batch on a partition the transaction never added (raw ProduceRequest)."""
    with cluster.open_client("open", id=f"{topic}-txn", topic=topic, partitions="0", records=5,
                             then_partitions="2") as client:
        client.wait_for("open")
        pid = live_producer(cluster, topic, 0)
        ts = now_ms()
        batch = StrayBatch(topic=topic, partition=1, producer_id=pid["producer_id"],
                           producer_epoch=pid["producer_epoch"], base_sequence=0,
                           transactional_id=f"{topic}-txn", timestamps=(ts,),
                           payload="raw batch to a never-added partition")
        leader = cluster.brokers[0]
        answer = produce("127.0.0.1", leader.port, batch)
        client.order("commit", wait_for="committed")
        client.wait_for("committed")  # the second transaction, on partition 2
    cluster.run_client("plain", topic=topic, partition=1, count=10)
    accepted = answer["error_code"] == 0
    anomalies = []
    if accepted:
        anomalies.append({"type": "hanging_transaction", "subtype": "partition_never_added_to_transaction",
                          "topic": topic, "partition": 1, "producer_id": pid["producer_id"],
                          "producer_epoch": pid["producer_epoch"], "first_offset": answer["base_offset"]})
    return Outcome(
        f"{topic}-txn writes 5 records to {topic}-0; a raw ProduceRequest v3 with the same producer id and epoch "
        f"puts one transactional record on {topic}-1, which the transaction never added "
        f"({'accepted' if accepted else 'rejected with error ' + str(answer['error_code'])}); the producer commits "
        f"(marker on {topic}-0 only), then commits a second transaction on {topic}-2; 10 plain records follow on "
        f"{topic}-1",
        anomalies=anomalies,
        notes={"raw_produce": {"request": {**batch.__dict__, "timestamps": list(batch.timestamps)},
                               "response": answer}},
        wait_for_hanging=True,
    )


def hanging(cluster: Cluster) -> Outcome:
    return _stray_to_unadded(cluster, "hang")


def verification_rejects(cluster: Cluster) -> Outcome:
    return _stray_to_unadded(cluster, "verify")


def late_arrival(cluster: Cluster) -> Outcome:
    """Batches created before their transaction's marker but appended after it (raw produce with the
    producer's id and epoch): on late-0 a new instance of the producer then runs a transaction on the
    partition, whose marker closes the late batch with it (absorbed); on late-1 nothing follows
    (it hangs)."""
    with cluster.open_client("open", id="late-txn", topic="late", partitions="0,1", records=3) as client:
        client.wait_for("open")
        pid = live_producer(cluster, "late", 0)
        # the late batch is created inside the transaction, well before its commit (beyond any
        # late-arrival tolerance), and reaches the broker only after the marker: a delayed retry
        created = now_ms()
        time.sleep(LATE_BY_S)
        client.order("commit", wait_for="committed")
        time.sleep(0.5)  # the markers are written after the EndTxn answer
        answers = {}
        for p in (0, 1):
            batch = StrayBatch(topic="late", partition=p, producer_id=pid["producer_id"],
                               producer_epoch=pid["producer_epoch"], base_sequence=pid["last_sequence"] + 1,
                               transactional_id="late-txn", timestamps=(created,),
                               payload="created before the marker, appended after it")
            answers[p] = produce("127.0.0.1", cluster.brokers[0].port, batch)
        client.kill()
    cluster.run_client("txn", id="late-txn", topic="late", partitions="0", count=1, records=2)
    anomalies = []
    for p, answer in answers.items():
        if answer["error_code"] == 0:
            anomalies.append({"type": "absorbed_late_record" if p == 0 else "late_arrival_hanging", "topic": "late",
                              "partition": p, "producer_id": pid["producer_id"],
                              "producer_epoch": pid["producer_epoch"], "first_offset": answer["base_offset"],
                              "create_time": created})
    said = ", ".join(f"late-{p}: " + ("accepted" if a["error_code"] == 0 else f"rejected with error {a['error_code']}")
                     for p, a in answers.items())
    return Outcome(
        "late-txn writes 3 records to late-0 and late-1 and commits; then a raw ProduceRequest with its producer id, "
        f"epoch and next sequence puts on each partition a record created {LATE_BY_S:.0f} s before the commit "
        f"({said}); a new "
        "instance of late-txn then commits a transaction on late-0 (absorbing the late record there, if accepted); "
        "late-1 gets nothing more",
        anomalies=anomalies,
        notes={"raw_produce": {str(p): a for p, a in answers.items()}},
        wait_for_hanging=True,
    )


def fenced_zombie(cluster: Cluster) -> Outcome:
    events = cluster.run_client("zombie", id="zombie-txn", topic="zombie", partitions="0,1")
    after = next(e for e in events if e["event"] == "first_after_fence")
    return Outcome(
        "zombie-txn writes 5 records to zombie-0 and zombie-1 and flushes; a second producer with the same "
        "transactional.id initialises (the coordinator aborts the first's transaction and fences its epoch) and "
        f"commits 5 records; the first then tries to write again ({after['outcome']})",
        notes={"client_events": events},
    )


def _seed(cluster: Cluster, topic: str, count: int) -> None:
    cluster.run_client("idempotent", topic=topic, count=count, compression="none")


def eos(cluster: Cluster) -> Outcome:
    _seed(cluster, "eos-in", 120)
    events = cluster.run_client("eos", id="eos-app", source="eos-in", sink="eos-out", group="eos-group", count=5)
    return Outcome("consume-transform-produce: eos-app reads eos-in (120 records) and writes eos-out in 5 "
                   "transactions, each committing the group's offsets with sendOffsetsToTransaction",
                   notes={"client_events": events})


def eos_crashed(cluster: Cluster) -> Outcome:
    _seed(cluster, "eos-in", 120)
    with cluster.open_client("eos", id="eos-app", source="eos-in", sink="eos-out", group="eos-group", count=3,
                             hang="true", timeout_ms=900000) as client:
        client.wait_for("open")
        client.kill()
    return Outcome("consume-transform-produce as in eos; the producer commits 2 transactions and dies (SIGKILL) "
                   "in the 3rd after sendOffsetsToTransaction: __consumer_offsets holds the group's transactional "
                   "offset commit with no marker, and eos-out an open transaction",
                   anomalies=[{"type": "pending_offset_commit", "group": "eos-group", "transactional_id": "eos-app"}])


def follower_killed(cluster: Cluster) -> Outcome:
    cluster.run_client("txn", id="repl-txn", topic="repl", partitions="0,1", count=10, records=3, abort_every=4)
    cluster.kill(3)
    cluster.run_client("txn", id="repl-txn", topic="repl", partitions="0,1", count=10, records=3, abort_every=4)
    cluster.restart(3)
    time.sleep(5)  # the follower catches up
    cluster.run_client("txn", id="repl-txn", topic="repl", partitions="0,1", count=5, records=3)
    return Outcome("3 brokers, replication factor 3: repl-txn commits and aborts transactions on repl-0 and repl-1; "
                   "broker 3 is SIGKILLed, 10 more transactions run without it, it is restarted and catches up, "
                   "5 more transactions follow; all brokers then shut down cleanly")


def coordinator_killed(cluster: Cluster) -> Outcome:
    with cluster.open_client("open", id="coord-txn", topic="coord", partitions="0,1", records=5,
                             timeout_ms=60000) as client:
        client.wait_for("open")
        pid = live_producer(cluster, "coord", 0)
        coordinator = _coordinator_of(cluster, "coord-txn")
        cluster.kill(coordinator)
        try:
            client.order("commit", wait_for="committed", timeout_s=90)
            outcome = "committed through the new coordinator"
        except HarnessError as e:
            outcome = f"commit failed: {str(e)[-300:]}"
    return Outcome(
        f"3 brokers, replication factor 3: coord-txn writes 5 records to coord-0 and coord-1; its coordinator "
        f"(broker {coordinator}) is SIGKILLed mid-transaction and stays down; the producer then commits "
        f"({outcome}); broker {coordinator}'s log dirs are copied as the crash left them",
        anomalies=[{"type": "coordinator_killed", "broker": coordinator, "transactional_id": "coord-txn", **pid}],
        notes={"killed_broker": coordinator, "commit": outcome},
    )


def _coordinator_of(cluster: Cluster, transactional_id: str) -> int:
    """The broker leading the id's ``__transaction_state`` partition (``abs(hashCode) % partitions``,
    as the coordinator places it), from the Admin client's leaders: works on every release."""
    units = transactional_id.encode("utf-16-be")  # String.hashCode runs over UTF-16 code units
    h = 0
    for i in range(0, len(units), 2):
        h = (31 * h + int.from_bytes(units[i:i + 2], "big")) & 0xFFFFFFFF
    signed = h - (1 << 32) if h >= 1 << 31 else h
    partitions = int(BASE_SETTINGS["transaction.state.log.num.partitions"])
    partition = (0 if signed == -(1 << 31) else abs(signed)) % partitions
    leaders = {e["partition"]: e["leader"] for e in cluster.offsets("__transaction_state")}
    return int(leaders[partition])


def epoch_rotation(cluster: Cluster) -> Outcome:
    """TV2 bumps the epoch at every commit: 32900 one-record transactions run one producer id past
    epoch 32767. Only the last records are kept (DeleteRecords, a one-second segment roll on the
    topic, a small compacted coordinator log) so that the folder stays small."""
    cluster.run_client("epochs", id="rotate-txn", topic="rotate", partitions="0", count=1)
    # the coordinator log rolls every second, so that the cleaner compacts all but the last second
    cluster.run_client("alter", topic="__transaction_state", configs="segment.ms=1000")
    events = cluster.run_client("epochs", id="rotate-txn", topic="rotate", partitions="0",
                                count=ROTATION_TRANSACTIONS - 1, timeout_s=1800)
    (high,) = cluster.offsets("rotate")
    keep_from = max(0, int(high["high_watermark"]) - KEEP_ROTATION_OFFSETS)
    cluster.run_client("delete", topic="rotate", partition=0, before=keep_from)
    time.sleep(8)  # the retention check removes the segments below the new log start; the cleaner compacts
    return Outcome(f"TV2: rotate-txn commits {ROTATION_TRANSACTIONS} one-record transactions on rotate-0; every commit "
                   "bumps the "
                   f"epoch, so past epoch 32767 the coordinator gives the id a new producer id; the records "
                   f"before offset {keep_from} are then deleted (DeleteRecords) to keep the folder small",
                   notes={"client_events": events[-3:], "deleted_before": keep_from})


def duplicate_marker(cluster: Cluster) -> Outcome:
    """A transaction's marker written again, as a coordinator's retry writes it (after a lost
    answer, or a coordinator failover that reloads a Prepare* record): WriteTxnMarkers sent
    again with the producer id, epoch, result and coordinator epoch of a marker already written.
    On dup-0 after a commit and on dup-1 after the coordinator's timeout abort, with no
    transaction open; on dup-2 while the producer's next transaction is open there; on dup-3
    with the other result after a commit."""
    cluster.run_client("txn", id="dup-txn", topic="dup", partitions="0,3", count=1, records=3)
    with cluster.open_client("open", id="dup-tmo", topic="dup", partitions="1", records=3,
                             timeout_ms=10000) as client:
        client.wait_for("open")
        client.kill()
    _wait_stable(cluster, "dup", "dup-tmo")
    answers = {}
    for partition, after in ((0, "a commit"), (1, "the coordinator's timeout abort")):
        answers[partition] = _repeat_marker(cluster, "dup", partition, after, open_transaction=False)
    # the other result, as kafka-transactions.sh abort given the producer id and epoch leaves it
    answers[3] = _repeat_marker(cluster, "dup", 3, "a commit", open_transaction=False, flip=True)
    with cluster.open_client("open", id="dup-open", topic="dup", partitions="2", records=3, then_partitions="2",
                             then_wait="true") as client:
        client.wait_for("open")
        client.order("commit", wait_for="committed")
        client.wait_for("open_again")  # its next transaction, open on dup-2
        answers[2] = _repeat_marker(cluster, "dup", 2, "a commit", open_transaction=True)
        client.order("commit", wait_for="committed")
    cluster.run_client("txn", id="dup-txn", topic="dup", partitions="0,1", count=2, records=2)
    anomalies = [{"type": "duplicate_marker", "topic": "dup", "partition": p, **a["anomaly"]}
                 for p, a in answers.items() if "anomaly" in a]
    said = ", ".join(f"dup-{p}: " + ("written" if a["response"]["error_code"] == 0
                                     else f"refused with error {a['response']['error_code']}")
                     for p, a in answers.items())
    return Outcome(
        "dup-txn commits 3 records on dup-0 and dup-3; dup-tmo (transaction.timeout.ms 10000) writes 3 records "
        "to dup-1 and is SIGKILLed, and the coordinator aborts it after the timeout; dup-open commits 3 records on "
        "dup-2 and writes 3 more there in its next transaction, left open; a raw WriteTxnMarkers request then "
        "repeats each partition's last marker (same producer id, epoch, result and coordinator epoch), as a "
        "coordinator's retry does, and on dup-3 with the other result (ABORT), as kafka-transactions.sh abort given "
        f"that producer id and epoch does ({said}); dup-open then commits, and a new instance of dup-txn commits 2 "
        "transactions on dup-0 and dup-1",
        anomalies=anomalies,
        notes={"raw_write_txn_markers": {str(p): {k: v for k, v in a.items() if k != "anomaly"}
                                         for p, a in answers.items()}},
    )


def _repeat_marker(cluster: Cluster, topic: str, partition: int, after: str, *,
                   open_transaction: bool, flip: bool = False) -> dict[str, Any]:
    """WriteTxnMarkers for the partition's last marker again (``open_transaction``: while the
    producer's next transaction is open there; ``flip``: with the other result); the request,
    the answer and, when the broker wrote it, the anomaly it planted."""
    first = last_marker(cluster, topic, partition)
    commit = (first["marker_type"] == "COMMIT") != flip
    marker = StrayMarker(topic=topic, partition=partition, producer_id=first["producer_id"],
                         producer_epoch=first["producer_epoch"], commit=commit,
                         coordinator_epoch=first["coordinator_epoch"],
                         transaction_version=int(cluster.features.get("transaction.version", 0)))
    answer = write_marker("127.0.0.1", cluster.brokers[0].port, marker)
    out: dict[str, Any] = {"after": after, "transaction_open": open_transaction, "request": marker.__dict__,
                           "response": answer}
    if answer["error_code"] == 0:
        again = last_marker(cluster, topic, partition)
        out["anomaly"] = {"producer_id": first["producer_id"], "producer_epoch": first["producer_epoch"],
                          "marker_type": first["marker_type"], "sent": "COMMIT" if commit else "ABORT",
                          "first_offset": again["offset"],
                          "repeats_offset": first["offset"], "after": after,
                          "ended_open_transaction": open_transaction}
    return out


def _wait_stable(cluster: Cluster, topic: str, transactional_id: str, timeout_s: float = 90.0,
                 partitions: tuple[int, ...] | None = None) -> None:
    """Until every partition of ``topic`` (of ``partitions`` where given) has LSO = HW (the
    coordinator ended the open transaction)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if all(e["last_stable_offset"] == e["high_watermark"] for e in cluster.offsets(topic)
               if partitions is None or e["partition"] in partitions):
            return
        time.sleep(2)
    raise HarnessError(f"the coordinator did not abort {transactional_id} within {timeout_s:.0f} s")


def epoch_exhaustion_abort(cluster: Cluster) -> Outcome:
    """TV2: a transaction open at epoch 32766 that the coordinator aborts after its timeout, so
    that the abort's epoch bump reaches 32767, the last one. Before KAFKA-20090's fix the
    coordinator gives no new producer id on such an abort; after it, it does."""
    cluster.run_client("epochs", id="exhaust-txn", topic="exhaust", partitions="0", count=1)
    cluster.run_client("alter", topic="__transaction_state", configs="segment.ms=1000")
    cluster.run_client("epochs", id="exhaust-txn", topic="exhaust", partitions="0", count=EXHAUSTION_BULK,
                       timeout_s=1800)
    # a new instance bumps the epoch once (InitProducerId), each commit once more: the open
    # transaction below is to start at the epoch before the last, so the last marker before it
    # is to carry the one before that
    reached = live_producer(cluster, "exhaust", 0)["producer_epoch"]
    target = LAST_EPOCH - 2
    if reached > target:
        raise HarnessError(f"exhaust-txn already at epoch {reached}")
    if reached < target:
        cluster.run_client("epochs", id="exhaust-txn", topic="exhaust", partitions="0", count=target - reached - 1,
                           timeout_s=600)
    with cluster.open_client("open", id="exhaust-txn", topic="exhaust", partitions="0", records=2,
                             timeout_ms=10000) as client:
        client.wait_for("open")
        opened = live_producer(cluster, "exhaust", 0)
        client.kill()
    _wait_stable(cluster, "exhaust", "exhaust-txn")
    aborted = last_marker(cluster, "exhaust", 0)
    # a new instance of the producer after the abort: does the id go on?
    try:
        cluster.run_client("txn", id="exhaust-txn", topic="exhaust", partitions="0", count=1, records=1,
                           timeout_s=120)
        after = "commits a transaction"
    except HarnessError as e:
        after = f"fails: {str(e)[-300:]}"
    (high,) = cluster.offsets("exhaust")
    keep_from = max(0, int(high["high_watermark"]) - KEEP_ROTATION_OFFSETS)
    cluster.run_client("delete", topic="exhaust", partition=0, before=keep_from)
    time.sleep(8)  # the retention check removes the segments below the new log start; the cleaner compacts
    return Outcome(
        f"TV2: exhaust-txn commits one-record transactions on exhaust-0 until its epoch is 32765; a new instance "
        f"(epoch {opened['producer_epoch']}) writes 2 records and is SIGKILLed (transaction.timeout.ms 10000); the "
        f"coordinator aborts the transaction after its timeout, with an ABORT marker of epoch "
        f"{aborted['producer_epoch']} for producer {aborted['producer_id']}; a further instance then {after}; the "
        f"records before offset {keep_from} are then deleted (DeleteRecords) to keep the folder small",
        notes={"open_transaction": opened, "abort_marker": aborted, "afterwards": after, "deleted_before": keep_from},
    )


LAST_EPOCH = 32767  # Short.MAX_VALUE: a producer id's last epoch
EXHAUSTION_BULK = 32600  # the first run's transactions; a second run brings the epoch to its place
ROTATION_TRANSACTIONS = 32900  # the id's producer id rotates after ~32767 of them
KEEP_ROTATION_OFFSETS = 1000
ROTATION_SETTINGS = (("log.retention.check.interval.ms", "1000"), ("log.segment.delete.delay.ms", "1000"),
                     ("log.cleaner.backoff.ms", "1000"))


# -- compaction, deleted records, many ids, unclean election --------------------------------------

#: a compacted topic whose segments roll every second and get cleaned at once
COMPACTED = (("cleanup.policy", "compact"), ("segment.ms", "1000"), ("min.cleanable.dirty.ratio", "0.01"),
             ("min.compaction.lag.ms", "0"), ("delete.retention.ms", "1000"))
COMPACTED_DELETE = (("cleanup.policy", "compact,delete"), *COMPACTED[1:])
#: the cleaner looks every half second; removed segments go at once
CLEANER_SETTINGS = (("log.cleaner.backoff.ms", "500"), ("log.retention.check.interval.ms", "1000"),
                    ("log.segment.delete.delay.ms", "1000"))
CHANGELOGS = ("cl-changelog", "cl-changelog-cd")


def compacted_changelog(cluster: Cluster) -> Outcome:
    """A Kafka-Streams-shaped exactly-once application whose store changelogs are compacted:
    some transactions aborted, the cleaner run over the changelogs, then one left open."""
    _seed(cluster, "cl-in", 200)
    app: dict[str, Any] = {"id": "cl-app", "source": "cl-in", "sink": "cl-out", "group": "cl-group",
                           "changelog": ",".join(CHANGELOGS), "keys": 4, "max_poll": 10, "own_key": "true"}
    events = cluster.run_client("eos", count=8, abort_every=3, pause_ms=1100, **app)
    done = next(e for e in events if e["event"] == "done")
    time.sleep(1.5)
    # one more committed transaction rolls the changelogs' segments that held the last ones
    events += cluster.run_client("eos", count=1, **app)
    changelog_partitions = [f"{t}-{p}" for t in CHANGELOGS for p in (0, 1)]
    cleaned = wait_cleaned(cluster, changelog_partitions)
    time.sleep(3)  # past delete.retention.ms: a later pass may remove the markers' horizon
    cleaned_before_open = cleaner_checkpoints(cluster)
    with cluster.open_client("eos", count=1, hang="true", timeout_ms=900000, **app) as client:
        client.wait_for("open")
        firsts = _first_offsets(client.events)
        pids = {(t, p): live_producer(cluster, t, p) for (t, p) in firsts if not t.startswith("__")}
        client.kill()
    time.sleep(3)  # the cleaner may look again: it stops at the open transaction (the LSO)
    gaps = [g for t in CHANGELOGS for p in (0, 1) for g in sequence_gaps(cluster, t, p)]
    anomalies: list[dict[str, Any]] = [
        {"type": "open_transaction", "topic": t, "partition": p, "transactional_id": "cl-app",
         "producer_id": pid["producer_id"], "producer_epoch": pid["producer_epoch"], "first_offset": firsts[(t, p)],
         "last_offset": pid["last_offset"]}
        for (t, p), pid in sorted(pids.items())]
    anomalies.append({"type": "pending_offset_commit", "group": "cl-group", "transactional_id": "cl-app"})
    return Outcome(
        f"Streams-shaped exactly-once app: cl-app reads cl-in (200 records) and writes cl-out and two store "
        f"changelogs, cl-changelog (cleanup.policy=compact) and cl-changelog-cd (compact,delete), 4 keys per "
        f"partition, and on each changelog partition it touches a key of the transaction's own "
        f"(txn-<input partition>@<first input offset>) that nothing overwrites, so that every committed "
        f"transaction keeps a record there after cleaning while aborted ones are removed, committing the group's "
        f"offsets with sendOffsetsToTransaction; {done['transactions']} "
        f"transactions committed and {done['aborted']} aborted (every 3rd, after a flush; the consumer rewinds), "
        f"one second apart (segment.ms 1000), then one more committed; the log cleaner compacts the changelogs "
        f"(cleaner-offset-checkpoint: {cleaned}); a new instance then writes one more transaction on cl-out, both "
        f"changelogs and __consumer_offsets and is SIGKILLed inside it (transaction.timeout.ms 900000); "
        f"sequence gaps the cleaning left within one producer id and epoch: {_said_gaps(gaps)}",
        anomalies=anomalies,
        notes={"cleaner_offset_checkpoint_live": {"first_cleaned": cleaned, "before_open": cleaned_before_open,
                                                  "at_end": cleaner_checkpoints(cluster)},
               # not anomalies: the cleaner removing whole batches is Kafka working as designed
               "cleaner_sequence_gaps": gaps,
               "client_events": events},
    )


_DATA_BATCH = re.compile(r"baseOffset: (\d+) lastOffset: (\d+) count: (\d+) baseSequence: (-?\d+) "
                         r"lastSequence: (-?\d+) producerId: (-?\d+) producerEpoch: (-?\d+) .*?isControl: (\w+)")


def sequence_gaps(cluster: Cluster, topic: str, partition: int) -> list[dict[str, Any]]:
    """Where, on the first broker's copy of the partition, a data batch does not continue the
    sequence of the previous batch of its producer id and epoch (the batches between them gone),
    as ``kafka-dump-log.sh`` prints every segment's batches."""
    folder = cluster.brokers[0].log_dir / f"{topic}-{partition}"
    segments = sorted(str(f) for f in folder.glob("*.log"))
    last: dict[tuple[int, int], tuple[int, int, int]] = {}
    gaps = []
    for m in _DATA_BATCH.finditer(_dump_log(cluster, "--files", ",".join(segments)) if segments else ""):
        base, end, count, base_seq, last_seq, pid, epoch = (int(g) for g in m.groups()[:7])
        if m.group(8) == "true" or pid < 0:
            continue
        prev = last.get((pid, epoch))
        if prev is not None and base_seq != prev[2] + 1:
            gaps.append({"topic": topic, "partition": partition, "producer_id": pid, "producer_epoch": epoch,
                         "kept_before": {"base_offset": prev[0], "last_offset": prev[1], "last_sequence": prev[2]},
                         "kept_after": {"base_offset": base, "last_offset": end, "base_sequence": base_seq,
                                        "last_sequence": last_seq, "count": count},
                         "missing_sequences": [prev[2] + 1, base_seq - 1]})
        last[(pid, epoch)] = (base, end, last_seq)
    return gaps


def _said_gaps(gaps: list[dict[str, Any]]) -> str:
    if not gaps:
        return "none"
    return ", ".join(f"{g['topic']}-{g['partition']} offsets {g['kept_before']['last_offset']} -> "
                     f"{g['kept_after']['base_offset']} (sequence {g['kept_before']['last_sequence']} -> "
                     f"{g['kept_after']['base_sequence']})" for g in gaps)


COORDINATOR_IDS = ("cc-a", "cc-b", "cc-c", "cc-d")  # __transaction_state partitions 1, 2, 0, 1


def compacted_coordinator(cluster: Cluster) -> Outcome:
    """``__transaction_state`` rolled every second and compacted: a few ids, many transactions
    each, then one left open."""
    for tid in COORDINATOR_IDS:  # the first transaction creates __transaction_state
        cluster.run_client("txn", id=tid, topic="cc", partitions="0", count=1, records=1)
    cluster.run_client("alter", topic="__transaction_state",
                       configs="segment.ms=1000;min.cleanable.dirty.ratio=0.01;delete.retention.ms=1000")
    runs: list[tuple[str, dict[str, Any]]] = [
        ("txn", {"id": tid, "topic": "cc", "partitions": str(i % 2), "count": 30, "records": 1,
                 "abort_every": 7, "pause_ms": 150}) for i, tid in enumerate(COORDINATOR_IDS)]
    run_parallel(cluster, runs)
    time.sleep(1.5)
    # one more transaction per id rolls the segments that held the last ones
    run_parallel(cluster, [("txn", {"id": tid, "topic": "cc", "partitions": "0", "count": 1, "records": 1})
                           for tid in COORDINATOR_IDS])
    txn_partitions = [f"__transaction_state-{p}"
                      for p in range(int(BASE_SETTINGS["transaction.state.log.num.partitions"]))]
    cleaned = wait_cleaned(cluster, txn_partitions)
    with cluster.open_client("open", id="cc-d", topic="cc", partitions="0,1", records=2,
                             timeout_ms=900000) as client:
        client.wait_for("open")
        firsts = _first_offsets(client.events)
        pid = live_producer(cluster, "cc", 0)
        client.kill()
    time.sleep(3)  # the cleaner may look again
    return Outcome(
        "cc-a, cc-b, cc-c and cc-d (__transaction_state partitions 1, 2, 0, 1) each commit one transaction; "
        "__transaction_state is then altered to segment.ms=1000 and min.cleanable.dirty.ratio=0.01 (broker "
        "log.cleaner.min.cleanable.ratio 0.01, log.cleaner.backoff.ms 500); the four ids run 30 transactions "
        "each at once (every 7th aborted, 150 ms apart) and one more, so that the coordinator's log rolls and the "
        f"cleaner compacts it (cleaner-offset-checkpoint: {cleaned}); cc-d then writes 2 records to cc-0 and "
        "cc-1 and is SIGKILLed inside its transaction (transaction.timeout.ms 900000)",
        anomalies=[{"type": "open_transaction", "topic": t, "partition": p, "transactional_id": "cc-d",
                    "producer_id": pid["producer_id"], "producer_epoch": pid["producer_epoch"],
                    "first_offset": first} for (t, p), first in sorted(firsts.items())],
        notes={"cleaner_offset_checkpoint_live": {"first_cleaned": cleaned, "at_end": cleaner_checkpoints(cluster)}},
    )


def _wait_segments_removed(cluster: Cluster, topic: str, partition: int, log_start: int,
                           timeout_s: float = 90.0) -> str:
    """Until the broker removed every segment wholly below ``log_start`` (the retention check's
    first run comes 30 s after the start on some releases): which segments went."""
    folder = cluster.brokers[0].log_dir / f"{topic}-{partition}"
    first = sorted(int(f.stem) for f in folder.glob("*.log"))
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        bases = sorted(int(f.stem) for f in folder.glob("*.log"))
        if len(bases) < 2 or bases[1] > log_start:
            gone = [b for b in first if b not in bases]
            return "base offset " + ", ".join(str(b) for b in gone) if gone else "none"
        time.sleep(1)
    raise HarnessError(f"the segments of {topic}-{partition} below {log_start} were not removed in {timeout_s:.0f} s")


def _killed_inside(cluster: Cluster, transactional_id: str, topic: str, *, records: int) -> tuple[int, dict[str, int]]:
    """A producer (transaction.timeout.ms 900000) that writes ``records`` to partition 0 of
    ``topic`` inside a transaction and is SIGKILLed there: the transaction's first offset, and
    the producer as the live segment shows it (``live_producer``)."""
    with cluster.open_client("open", id=transactional_id, topic=topic, partitions="0", records=records,
                             timeout_ms=900000) as client:
        client.wait_for("open")
        first = _first_offsets(client.events)[(topic, 0)]
        pid = live_producer(cluster, topic, 0)
        client.kill()
    return first, pid


#: the consumer groups of blocked-consumers: (group, isolation level, stop_at, deleted afterwards)
BLOCKED_GROUPS = (("blk-rc-all", "read_committed", None, False),
                  ("blk-rc-behind", "read_committed", 4, False),
                  ("blk-ru", "read_uncommitted", None, False),
                  ("blk-rc-gone", "read_committed", None, True))



def _left_open(topic: str, transactional_id: str, first: int, pid: dict[str, int], **extra: Any) -> dict[str, Any]:
    """The ``open_transaction`` anomaly of a producer ``_killed_inside`` partition 0 of ``topic``."""
    return {"type": "open_transaction", "topic": topic, "partition": 0, "transactional_id": transactional_id,
            "producer_id": pid["producer_id"], "producer_epoch": pid["producer_epoch"],
            "first_offset": first, "last_offset": pid["last_offset"], **extra}

def blocked_consumers(cluster: Cluster) -> Outcome:
    """Consumer groups behind a transaction left open: a producer killed inside its transaction
    on blk-0 holds that partition's LSO while committed transactions pile up behind it; groups
    reading read_committed commit at or below the LSO, one read_uncommitted group commits at the
    HW. blk-ru first commits a low offset, then the HW (its latest commit is what counts);
    blk-rc-gone commits at the LSO and is then deleted (tombstones for its offsets)."""
    cluster.run_client("txn", id="blk-bg", topic="blk", partitions="0,1", count=4, records=3)
    first, pid = _killed_inside(cluster, "blk-open", "blk", records=3)
    cluster.run_client("txn", id="blk-bg", topic="blk", partitions="0,1", count=3, records=2)
    cluster.run_client("group", group="blk-ru", topic="blk", isolation="read_uncommitted", stop_at=2)
    committed: list[dict[str, Any]] = []
    for group, isolation, stop_at, delete in BLOCKED_GROUPS:
        opts: dict[str, Any] = {"group": group, "topic": "blk", "isolation": isolation,
                                "delete": str(delete).lower()}
        if stop_at is not None:
            opts["stop_at"] = stop_at
        committed += [e for e in cluster.run_client("group", **opts) if e.get("event") == "committed"]
    said = "; ".join(f"{e['group']} ({e['isolation']}) blk-{e['partition']} at {e['offset']}" for e in committed)
    return Outcome(
        f"blk-bg commits 4 transactions of 3 records on blk-0 and blk-1; blk-open (transaction.timeout.ms 900000) "
        f"writes 3 records to blk-0 from offset {first} and is SIGKILLed inside its transaction; blk-bg commits 3 "
        f"more of 2 records on both partitions. Consumer groups assigned both partitions read from the start and "
        f"commit their position (commitSync): blk-ru (read_uncommitted) first at offset 2, then at the HW; "
        f"blk-rc-all (read_committed) up to the LSO; blk-rc-behind (read_committed) up to offset 4; blk-rc-gone "
        f"(read_committed) up to the LSO, then the group is deleted ({said})",
        anomalies=[_left_open("blk", "blk-open", first, pid),
                   *({"type": "blocked_consumer", "group": e["group"], "topic": "blk", "partition": 0,
                      "committed_offset": e["offset"]}
                     for e in committed if e["isolation"] == "read_committed" and e["partition"] == 0
                     and e["group"] != "blk-rc-gone")],
        notes={"group_commits": committed, "deleted_groups": [g for g, *_, d in BLOCKED_GROUPS if d]},
        describe_groups=True,
    )


def delete_records_open(cluster: Cluster) -> Outcome:
    """DeleteRecords past the first offset of a transaction left open: the log start offset moves
    into it, and the broker reports the log start as the LSO."""
    cluster.run_client("txn", id="dro-bg", topic="dro", partitions="0", count=5, records=3, abort_every=4)
    time.sleep(1.5)  # segment.ms 1000: the open transaction starts a new segment
    first, pid = _killed_inside(cluster, "dro-txn", "dro", records=5)
    time.sleep(1.5)
    cluster.run_client("txn", id="dro-bg", topic="dro", partitions="0", count=3, records=2)
    (before,) = cluster.offsets("dro")
    delete_before = first + 2
    cluster.run_client("delete", topic="dro", partition=0, before=delete_before)
    removed = _wait_segments_removed(cluster, "dro", 0, delete_before)
    (after,) = cluster.offsets("dro")
    return Outcome(
        f"dro-bg commits 5 transactions of 3 records on dro-0 (the 4th aborted); dro-txn (transaction.timeout.ms "
        f"900000) writes 5 records there from offset {first} and is SIGKILLed inside its transaction; dro-bg "
        f"commits 3 more; then DeleteRecords before offset {delete_before} moves the log start offset past the open "
        f"transaction's first offset (before: HW {before['high_watermark']}, LSO {before['last_stable_offset']}, "
        f"log start {before['log_start_offset']}; after: HW {after['high_watermark']}, LSO "
        f"{after['last_stable_offset']}, log start {after['log_start_offset']}); the retention check then removes "
        f"the segments wholly below it ({removed})",
        anomalies=[_left_open("dro", "dro-txn", first, pid, log_start_offset=after["log_start_offset"])],
        notes={"deleted_before": delete_before, "offsets_before_delete": before, "offsets_after_delete": after},
    )


MANY_IDS = 300
MANY_ABORTING = (17, 211)


def many_ids(cluster: Cluster) -> Outcome:
    """An application of several hundred transactional ids, each closed cleanly."""
    (done,) = [e for e in cluster.run_client("many", prefix="many", topic="many", ids=MANY_IDS, count=3, records=1,
                                             partition_count=3, abort_ids=",".join(map(str, MANY_ABORTING)),
                                             threads=4, timeout_s=1200) if e["event"] == "done"]
    return Outcome(
        f"{MANY_IDS} transactional ids many-0..many-{MANY_IDS - 1} (4 producers at a time), each running 3 "
        f"one-record transactions on many-<i mod 3> and closing cleanly; many-{MANY_ABORTING[0]} and "
        f"many-{MANY_ABORTING[1]} abort their first transaction after a flush ({done['commits']} commits, "
        f"{done['aborts']} aborts)",
        notes={"client_events": [done]},
    )


def _partition_state(cluster: Cluster, topic: str, partition: int, offsets: bool = False) -> dict[str, Any]:
    """Leader (-1: none) and ISR of one partition (with ``offsets``, its HW, LSO and log start too,
    which needs a live leader)."""
    for e in cluster.run_client("offsets", topics=topic, state_only="true"):
        if e.get("event") == "state" and e["partition"] == partition:
            state = {"leader": int(e["leader"]), "isr": e["isr"]}
            if offsets and state["leader"] != -1:
                (o,) = [o for o in cluster.offsets(topic) if o["partition"] == partition]
                state.update({k: o[k] for k in ("high_watermark", "last_stable_offset", "log_start_offset")})
            return state
    raise HarnessError(f"no state for {topic}-{partition}")


def _wait_partition(cluster: Cluster, topic: str, partition: int, what: str,
                    ok: Callable[[dict[str, Any]], bool], timeout_s: float = 90.0) -> dict[str, Any]:
    deadline = time.monotonic() + timeout_s
    state: dict[str, Any] = {}
    while time.monotonic() < deadline:
        state = _partition_state(cluster, topic, partition)
        if ok(state):
            return state
        time.sleep(1)
    raise HarnessError(f"{topic}-{partition}: {what} not reached in {timeout_s:.0f} s (last: {state})")


def unclean_election(cluster: Cluster) -> Outcome:
    """Diverging copies after an unclean leader election. Node 1 is the controller quorum (a
    single voter), so that brokers 2 and 3, which hold uncl-0, can both be down at once."""
    steps: list[dict[str, Any]] = []

    def note(step: str) -> None:
        steps.append({"step": step, **_partition_state(cluster, "uncl", 0, offsets=True)})

    cluster.run_client("txn", id="uncl-a", topic="uncl", partitions="0", count=3, records=2)
    note("uncl-a committed 3 transactions: leader 2, follower 3")
    cluster.kill(3)
    _wait_partition(cluster, "uncl", 0, "ISR 2", lambda s: s["isr"] == "2")
    cluster.run_client("txn", id="uncl-a", topic="uncl", partitions="0", count=3, records=2, abort_every=3)
    note("broker 3 SIGKILLed; uncl-a ran 3 more transactions (the 3rd aborted) on broker 2 alone")
    cluster.kill(2)
    _wait_partition(cluster, "uncl", 0, "no leader", lambda s: s["leader"] == -1)
    note("broker 2 SIGKILLed: uncl-0 offline")
    cluster.restart(3)
    try:
        _wait_partition(cluster, "uncl", 0, "leader 3", lambda s: s["leader"] == 3, timeout_s=30)
        how = "the controller elected it on its own (unclean.leader.election.enable=true)"
    except HarnessError:
        (ev,) = [e for e in cluster.run_client("elect", topic="uncl", partition=0) if e["event"] == "elect"]
        _wait_partition(cluster, "uncl", 0, "leader 3", lambda s: s["leader"] == 3)
        how = ("an unclean election asked with Admin electLeaders, as kafka-leader-election.sh --election-type "
               f"unclean asks it: {ev['outcome']}")
    note("broker 3 restarted and leads uncl-0 uncleanly")
    cluster.run_client("txn", id="uncl-b", topic="uncl", partitions="0", count=3, records=3)
    note("uncl-b committed 3 transactions on broker 3")
    return Outcome(
        "3 nodes: node 1 is the controller quorum (single voter), 2 and 3 brokers only; uncl-0 has replicas 2 and 3 "
        "(unclean.leader.election.enable=true, min.insync.replicas 1). uncl-a commits 3 transactions of 2 records; "
        "broker 3 is SIGKILLed, and once the ISR is 2 alone uncl-a runs 3 more (the 3rd aborted); broker 2 is "
        f"SIGKILLed (uncl-0 offline) and broker 3 restarted: it becomes leader uncleanly ({how}), and uncl-b commits "
        "3 transactions of 3 records there, over the offsets broker 2 had written; broker 2 stays down, so its copy "
        "of uncl-0 (the transactions after offset "
        f"{steps[0]['high_watermark']}) diverges from broker 3's; its log dirs are copied as the crash left them",
        anomalies=[{"type": "diverged_replicas", "topic": "uncl", "partition": 0, "brokers": [2, 3],
                    "diverged_from": steps[0]["high_watermark"], "stale_leader": 3, "down": 2}],
        notes={"steps": steps, "killed_brokers": [2]},
        find_hanging_broker=3,
    )


# -- two-phase commit (KIP-939) --------------------------------------------------------------------

#: the 2PC transaction's producer asks for this timeout; a 2PC transaction never expires, the
#: coordinator keeps Integer.MAX_VALUE instead
TPC_ASKED_TIMEOUT_MS = 60000
TPC_ID = "tpc-2pc"
TPC_TMO_ID = "tpc-tmo"
_TXN_STATE = re.compile(r'key: \{"type":"0","data":\{"transactionalId":"([^"]+)"\}\} payload: (\{.*\})')


def transaction_log_records(cluster: Cluster, transactional_id: str) -> list[dict[str, Any]]:
    """The ``__transaction_state`` records of ``transactional_id`` on the first broker, as
    ``kafka-dump-log.sh --transaction-log-decoder`` prints them (their ``data`` part)."""
    import json

    out = []
    for folder in sorted(cluster.brokers[0].log_dir.glob("__transaction_state-*")):
        segments = sorted(str(f) for f in folder.glob("*.log"))
        if not segments:
            continue
        text = _dump_log(cluster, "--print-data-log", "--transaction-log-decoder", "--files", ",".join(segments))
        for m in _TXN_STATE.finditer(text):
            if m.group(1) == transactional_id:
                out.append({"partition": int(folder.name.rsplit("-", 1)[1]), **json.loads(m.group(2))["data"]})
    return out


def _tool_help(cluster: Cluster, tool: str) -> str:
    run = subprocess.run(cluster.dist.java(tool, "--help"), capture_output=True, text=True, timeout=120)
    return run.stdout + run.stderr


def two_phase_commit(cluster: Cluster) -> Outcome:
    """KIP-939: a transaction begun with InitProducerId's Enable2Pc (raw requests: KafkaProducer
    does not send the flag yet), a partition added, a batch written, and never ended; beside it an
    ordinary transaction whose producer is killed, which the coordinator aborts after its timeout."""
    host, port = "127.0.0.1", cluster.brokers[0].port
    cluster.run_client("txn", id="tpc-bg", topic="tpc", partitions="0,1", count=2, records=2)
    init = init_producer_id(host, port, TPC_ID, timeout_ms=TPC_ASKED_TIMEOUT_MS, enable_2pc=True)
    if init["response"]["error_code"] != 0:
        raise HarnessError(f"InitProducerId with Enable2Pc refused: {init}")
    pid, epoch = init["response"]["producer_id"], init["response"]["producer_epoch"]
    added = add_partitions(host, port, TPC_ID, pid, epoch, "tpc", [0])
    if any(added["error_codes"].values()):
        raise HarnessError(f"AddPartitionsToTxn refused: {added}")
    batch = StrayBatch(topic="tpc", partition=0, producer_id=pid, producer_epoch=epoch, base_sequence=0,
                       transactional_id=TPC_ID, timestamps=(now_ms(), now_ms()),
                       payload="two-phase-commit transaction, never ended")
    answer = produce(host, port, batch)
    if answer["error_code"] != 0:
        raise HarnessError(f"the 2PC transaction's produce was refused: {answer}")
    with cluster.open_client("open", id=TPC_TMO_ID, topic="tpc", partitions="1", records=3,
                             timeout_ms=10000) as client:
        client.wait_for("open")
        tmo = live_producer(cluster, "tpc", 1)
        client.kill()
    _wait_stable(cluster, "tpc", TPC_TMO_ID, partitions=(1,))
    cluster.run_client("txn", id="tpc-bg", topic="tpc", partitions="0,1", count=2, records=2)
    tpc_records = transaction_log_records(cluster, TPC_ID)
    timeouts = sorted({r["transactionTimeoutMs"] for r in tpc_records})
    help_text = _tool_help(cluster, "transactions")
    listed = "forceTerminateTransaction" in help_text
    return Outcome(
        f"tpc-bg commits 2 transactions on tpc-0 and tpc-1; {TPC_ID} sends InitProducerId "
        f"v{init['request']['init_producer_id_api_version']} with Enable2Pc=true (transaction timeout asked: "
        f"{TPC_ASKED_TIMEOUT_MS} ms; brokers with transaction.two.phase.commit.enable and unstable.api.versions."
        f"enable) and gets producer {pid} epoch {epoch}, adds tpc-0 (AddPartitionsToTxn v3) and writes 2 "
        f"transactional records there from offset {answer['base_offset']} (ProduceRequest v3), and never ends the "
        f"transaction; {TPC_TMO_ID} (transaction.timeout.ms 10000) writes 3 records to tpc-1 and is SIGKILLed, and "
        f"the coordinator aborts it after its timeout; tpc-bg then commits 2 more transactions on both partitions. "
        f"__transaction_state keeps {TPC_ID} with transactionTimeoutMs {', '.join(map(str, timeouts))}; "
        f"kafka-transactions.sh --help {'lists' if listed else 'does not list'} forceTerminateTransaction "
        f"(not run: the transaction stays open)",
        anomalies=[{"type": "two_phase_commit_open", "topic": "tpc", "partition": 0, "transactional_id": TPC_ID,
                    "producer_id": pid, "producer_epoch": epoch, "first_offset": answer["base_offset"]}],
        notes={"two_phase_commit": {
                   "init_producer_id": init, "add_partitions_to_txn": added,
                   "raw_produce": {"request": {**batch.__dict__, "timestamps": list(batch.timestamps)},
                                   "response": answer},
                   "transaction_log_records": tpc_records,
                   "transaction_timeout_ms_on_disk": timeouts},
               "timed_out_transaction": {"transactional_id": TPC_TMO_ID, "topic": "tpc", "partition": 1, **tmo},
               "kafka_transactions_help_lists_force_terminate": listed,
               "kafka_transactions_help": help_text.splitlines()},
        wait_for_hanging=True,
    )


# -- tiered storage (KIP-405) -------------------------------------------------------------------------

#: LocalTieredStorage's folder (its "remote" store), in each broker's work folder
REMOTE_STORE = "remote-store"
#: a topic tiered at once: segments roll every second, and leave the local log once copied
TIERED = (("remote.storage.enable", "true"), ("segment.ms", "1000"), ("local.retention.ms", "1000"),
          ("local.retention.bytes", "1"), ("retention.ms", "-1"))


def tiered_settings(dist: Dist) -> dict[str, str]:
    """Broker settings for tiered storage with Kafka's own test store, ``LocalTieredStorage`` (a
    folder on the broker's disk), from the release's kafka-storage test jar (classifier
    ``test-fixtures`` on 4.x, ``test`` before), loaded by the broker's own class loader for
    remote storage managers (``remote.log.storage.manager.class.path``)."""
    try:
        jar = fetch_artifact(dist, "kafka-storage", "test-fixtures")
    except HarnessError:
        jar = fetch_artifact(dist, "kafka-storage", "test")
    return {
        "remote.log.storage.system.enable": "true",
        "remote.log.storage.manager.class.name": "org.apache.kafka.server.log.remote.storage.LocalTieredStorage",
        "remote.log.storage.manager.class.path": str(jar),
        "rsm.config.dir": f"{BROKER_FOLDER}/{REMOTE_STORE}",
        "rsm.config.delete.on.close": "false",
        "remote.log.metadata.manager.class.name":
            "org.apache.kafka.server.log.remote.metadata.storage.TopicBasedRemoteLogMetadataManager",
        "remote.log.metadata.manager.listener.name": "PLAINTEXT",
        "rlmm.config.remote.log.metadata.topic.replication.factor": "1",
        "rlmm.config.remote.log.metadata.topic.num.partitions": "2",
        "remote.log.manager.task.interval.ms": "1000",
        "log.retention.check.interval.ms": "1000",
        "log.segment.delete.delay.ms": "1000",
    }


def _tiered_state(cluster: Cluster, topic: str) -> dict[int, dict[str, int]]:
    out: dict[int, dict[str, int]] = {}
    for e in cluster.run_client("offsets", topics=topic, tiered="true"):
        if e.get("event") in ("offsets", "tiered_offsets"):
            row = out.setdefault(int(e["partition"]), {})
            row.update({k: e[k] for k in ("high_watermark", "last_stable_offset", "log_start_offset", "earliest_local",
                                          "latest_tiered", "earliest_pending_upload") if k in e})
    return out


def _wait_tiered(cluster: Cluster, topic: str, ok: Callable[[dict[int, dict[str, int]]], bool],
                 timeout_s: float = 120.0) -> dict[int, dict[str, int]]:
    """Until ``ok`` holds for the topic's tiered offsets, and then until they stop moving."""
    deadline = time.monotonic() + timeout_s
    last: dict[int, dict[str, int]] = {}
    same = 0
    while time.monotonic() < deadline:
        now = _tiered_state(cluster, topic)
        same = same + 1 if now == last else 0
        if ok(now) and same >= 3:
            return now
        last = now
        time.sleep(2)
    raise HarnessError(f"{topic}: the remote log manager did not tier as expected within {timeout_s:.0f} s: {last}")


def tiered_storage(cluster: Cluster) -> Outcome:
    """Transactions on a tiered topic: older segments copied to the remote store and deleted
    locally; one transaction left open, which holds the LSO, and so the copying, on its partition."""
    cluster.run_client("txn", id="ts-txn", topic="ts", partitions="0,1", count=8, records=3, abort_every=4,
                       pause_ms=1100)
    time.sleep(1.2)
    first, pid = _killed_inside(cluster, "ts-open", "ts", records=3)
    time.sleep(1.2)
    cluster.run_client("txn", id="ts-txn", topic="ts", partitions="0,1", count=4, records=3, pause_ms=1100)
    time.sleep(1.2)
    cluster.run_client("txn", id="ts-txn", topic="ts", partitions="1", count=1, records=1)  # rolls ts-1 once more
    state = _wait_tiered(cluster, "ts", lambda st: all(p["earliest_local"] > 0 for p in st.values()))
    # a read_committed consumer from the first offset: the broker reads the tiered segments back
    # (their indexes land in remote-log-index-cache/)
    consumed = [e for e in cluster.run_client("consume", topic="ts") if e.get("event") == "consumed"]
    said = "; ".join(f"ts-{p}: HW {o['high_watermark']}, LSO {o['last_stable_offset']}, log start "
                     f"{o['log_start_offset']}, local log start {o['earliest_local']}, latest tiered "
                     f"{o['latest_tiered']}" for p, o in sorted(state.items()))
    return Outcome(
        "tiered storage (KIP-405) with Kafka's LocalTieredStorage (a folder on the broker's disk) and "
        "TopicBasedRemoteLogMetadataManager (__remote_log_metadata, 2 partitions); ts has remote.storage.enable=true, "
        "segment.ms 1000, local.retention.ms 1000, local.retention.bytes 1, retention.ms -1. ts-txn commits 8 "
        "transactions of 3 records on ts-0 and ts-1 (the 4th and 8th aborted), 1.1 s apart; ts-open "
        f"(transaction.timeout.ms 900000) writes 3 records to ts-0 from offset {first} and is SIGKILLed inside its "
        "transaction; ts-txn commits 4 more on both partitions and 1 on ts-1; the remote log manager copies the "
        "rolled segments below the LSO and the local ones are deleted once copied "
        f"({said}); a read_committed consumer then reads ts from offset 0, from the remote store first ("
        + ", ".join(f"ts-{e['partition']}: {e['records']} records up to {e['position']}" for e in consumed) + ")",
        anomalies=[_left_open("ts", "ts-open", first, pid)],
        notes={"tiered_offsets_live": {str(p): o for p, o in sorted(state.items())}, "consumed": consumed},
    )


SCENARIOS: dict[str, Scenario] = {s.name: s for s in [
    Scenario("healthy", "mixed traffic: commits and aborts, several codecs, idempotent and plain producers",
             (Topic("orders", 3), Topic("payments", 3)), healthy),
    Scenario("crashed-producer", "a producer killed inside its transaction (open, within its timeout)",
             (Topic("crash", 3),), crashed_producer),
    Scenario("timeout-abort", "the coordinator aborts a crashed producer's transaction after its timeout",
             (Topic("tmo", 2),), timeout_abort),
    Scenario("hanging-unadded-partition", "a transactional batch on a partition never added (verification off)",
             (Topic("hang", 3),), hanging, settings=VERIFICATION_OFF),
    Scenario("verification-rejects", "the same stray batch with partition verification on (KIP-890, 3.6+)",
             (Topic("verify", 3),), verification_rejects, min_version="3.6",
             why_not="transaction.partition.verification.enable exists from Kafka 3.6"),
    Scenario("late-arrival", "records created before their marker appended after it: one absorbed, one hanging",
             (Topic("late", 2),), late_arrival, settings=VERIFICATION_OFF),
    Scenario("late-arrival-tv1", "late-arrival on a 4.x cluster left at transaction version 1",
             (Topic("late", 2),), late_arrival, settings=VERIFICATION_OFF, min_version="4.0",
             transaction_version=1, why_not="transaction versions are finalized from Kafka 4.0 (3.9: always 0)"),
    Scenario("fenced-zombie", "a second instance of a transactional.id fences the first",
             (Topic("zombie", 2),), fenced_zombie),
    Scenario("eos", "consume-transform-produce with sendOffsetsToTransaction",
             (Topic("eos-in", 2), Topic("eos-out", 2)), eos),
    Scenario("eos-crashed", "consume-transform-produce whose producer dies before the commit",
             (Topic("eos-in", 2), Topic("eos-out", 2)), eos_crashed),
    Scenario("follower-killed", "3 brokers: a follower killed and restarted during transactions",
             (Topic("repl", 2),), follower_killed, brokers=3),
    Scenario("coordinator-killed", "3 brokers: the transaction coordinator's broker killed mid-transaction",
             (Topic("coord", 2),), coordinator_killed, brokers=3),
    Scenario("duplicate-marker", "a transaction's marker written again, as a coordinator's retry writes it",
             (Topic("dup", 4),), duplicate_marker),
    Scenario("epoch-exhaustion-abort", "TV2: the coordinator's timeout abort bumps a producer to epoch 32767",
             (Topic("exhaust", 1, configs=(("segment.ms", "1000"),)),), epoch_exhaustion_abort, tv2_only=True,
             settings=ROTATION_SETTINGS, min_version="4.1",
             why_not="the 4.0 releases' kafka-dump-log text does not print the transaction version that tells this "
                     "signature from version 1's design"),
    Scenario("epoch-rotation", "TV2: a producer past epoch 32767 gets a new producer id",
             (Topic("rotate", 1, configs=(("segment.ms", "1000"),)),), epoch_rotation, tv2_only=True,
             settings=ROTATION_SETTINGS),
    Scenario("compacted-changelog", "Streams-shaped EOS app with compacted changelogs, cleaned, one transaction open",
             (Topic("cl-in", 2), Topic("cl-out", 2), Topic(CHANGELOGS[0], 2, configs=COMPACTED),
              Topic(CHANGELOGS[1], 2, configs=COMPACTED_DELETE)), compacted_changelog, settings=CLEANER_SETTINGS,
             record_cleaner=True),
    Scenario("compacted-changelog-tv1", "compacted-changelog on a 4.x cluster left at transaction version 1",
             (Topic("cl-in", 2), Topic("cl-out", 2), Topic(CHANGELOGS[0], 2, configs=COMPACTED),
              Topic(CHANGELOGS[1], 2, configs=COMPACTED_DELETE)), compacted_changelog, settings=CLEANER_SETTINGS,
             record_cleaner=True, min_version="4.0", transaction_version=1,
             why_not="transaction versions are finalized from Kafka 4.0 (3.9: always 0)"),
    Scenario("compacted-coordinator", "__transaction_state rolled and compacted, one transaction open",
             (Topic("cc", 2),), compacted_coordinator,
             settings=(*CLEANER_SETTINGS, ("log.cleaner.min.cleanable.ratio", "0.01")),
             legacy_settings=(("transaction.state.log.segment.bytes", "16384"),), record_cleaner=True),
    Scenario("delete-records-open", "DeleteRecords past the first offset of an open transaction",
             (Topic("dro", 1, configs=(("segment.ms", "1000"),)),), delete_records_open, settings=CLEANER_SETTINGS),
    Scenario("blocked-consumers", "consumer groups (read_committed, read_uncommitted) behind an open transaction",
             (Topic("blk", 2),), blocked_consumers),
    Scenario("many-ids", "several hundred transactional ids, all closed cleanly", (Topic("many", 3),), many_ids),
    Scenario("unclean-election", "3 nodes: an unclean leader election leaves diverging copies of a partition",
             (Topic("uncl", 1, replicas=(2, 3), configs=(("unclean.leader.election.enable", "true"),
                                                         ("min.insync.replicas", "1"))),),
             unclean_election, brokers=3, voters=1, min_version="3.3",
             settings=(("replica.lag.time.max.ms", "5000"),),
             why_not="the scenario runs a single-voter KRaft controller quorum beside two broker-only nodes"),
    Scenario("two-phase-commit", "KIP-939: a two-phase-commit transaction left open beside a timed-out one",
             (Topic("tpc", 2),), two_phase_commit, min_version="4.4",
             settings=(("transaction.two.phase.commit.enable", "true"), ("unstable.api.versions.enable", "true")),
             why_not="two-phase commit (KIP-939) is tried from Kafka 4.4 (InitProducerId v6)"),
    Scenario("tiered-storage", "KIP-405: a tiered topic, older segments in the remote store, one transaction open",
             (Topic("ts", 2, configs=TIERED),), tiered_storage, release_settings=tiered_settings, tiered=True,
             min_version="3.9", why_not="the scenario runs from Kafka 3.9 (OffsetSpec.earliestLocal, KIP-1005)"),
]}
