"""The sample dump: two brokers, healthy traffic of every kind, and planted anomalies.

Producers are simulated as actors (generators) that each yield the time of their next step;
a scheduler runs them in timestamp order, so logs interleave as a real broker's would and
the same seed always gives the same bytes. Every planted anomaly is recorded in the manifest
with where it is and which findings an audit should raise for it.
"""

from __future__ import annotations

import heapq
import random
from collections.abc import Generator
from dataclasses import dataclass, field
from typing import Any

from txn_audit.formats.compression import CODEC_NAMES
from txn_audit.formats.consumer_offsets import encode_offset_commit_key, encode_offset_commit_value
from txn_audit.formats.model import OffsetCommitKey, OffsetCommitValue, TopicPartitions, TxnLogValue
from txn_audit.formats.txn_state import encode_txn_log_key, encode_txn_log_value, txn_partition_for
from txn_audit.sample.broker import AppendInfo, Broker, PartitionLog

#: 2026-11-18T14:13:20Z: fixed, so a sample audits the same on any day.
BASE_TIME_MS = 1_795_000_000_000
MINUTE = 60_000
TXN_STATE_PARTITIONS = 3
CODEC = {name: codec for codec, name in CODEC_NAMES.items()}
STATE = {"Empty": 0, "Ongoing": 1, "PrepareCommit": 2, "PrepareAbort": 3, "CompleteCommit": 4, "CompleteAbort": 5}

Actor = Generator[int, None, None]


class Clock:
    now: int = BASE_TIME_MS


@dataclass
class Cluster:
    brokers: dict[int, Broker]
    logs: dict[str, PartitionLog]
    clock: Clock
    rng: random.Random
    anomalies: list[dict[str, Any]] = field(default_factory=list)
    transactional_ids: dict[str, dict[str, Any]] = field(default_factory=dict)

    def log(self, name: str) -> PartitionLog:
        return self.logs[name]


class Coordinator:
    """Writes ``__transaction_state`` records the way the transaction coordinator does."""

    def __init__(self, cluster: Cluster, coordinator_epoch: int = 0) -> None:
        self.cluster = cluster
        self.coordinator_epoch = coordinator_epoch

    def write(self, tid: str, value: TxnLogValue) -> None:
        log = self.cluster.log(f"__transaction_state-{txn_partition_for(tid, TXN_STATE_PARTITIONS)}")
        log.append([(encode_txn_log_key(tid), encode_txn_log_value(value), self.cluster.clock.now)])


def _grouped(partitions: list[str]) -> tuple[TopicPartitions, ...]:
    by_topic: dict[str, list[int]] = {}
    for name in partitions:
        topic, _, p = name.rpartition("-")
        by_topic.setdefault(topic, []).append(int(p))
    return tuple(TopicPartitions(t, tuple(sorted(ps))) for t, ps in sorted(by_topic.items()))


class TxnProducer:
    """A transactional producer with its coordinator-side state (TV1 or TV2 client)."""

    def __init__(
        self, cluster: Cluster, coordinator: Coordinator, tid: str, pid: int, *,
        codec: str = "none", tv2: bool = False, timeout_ms: int = 60_000,
    ) -> None:
        self.cluster, self.coordinator = cluster, coordinator
        self.tid, self.pid, self.epoch = tid, pid, 0
        self.codec, self.tv2, self.timeout_ms = CODEC[codec], tv2, timeout_ms
        self.sequences: dict[str, int] = {}
        self.partitions: list[str] = []  # partitions the coordinator has added to the current txn
        self.start_ts = -1
        self.state = "Empty"
        self.counter = 0
        cluster.transactional_ids[tid] = {"producer_id": pid, "transaction_version": 2 if tv2 else 1}

    @property
    def now(self) -> int:
        return self.cluster.clock.now

    def _state(self, state: str, partitions: list[str] | None, *, epoch: int | None = None) -> None:
        self.state = state
        self.coordinator.write(
            self.tid,
            TxnLogValue(
                version=1 if self.tv2 else 0,
                producer_id=self.pid,
                producer_epoch=self.epoch if epoch is None else epoch,
                txn_timeout_ms=self.timeout_ms,
                state_code=STATE[state],
                topic_partitions=None if state == "Empty" else _grouped(partitions or []),
                txn_last_update_timestamp=self.now,
                txn_start_timestamp=-1 if state == "Empty" else self.start_ts,
                client_transaction_version=2 if self.tv2 else 0,
            ),
        )

    def init(self) -> None:
        self._state("Empty", None)

    def add_partition(self, name: str) -> None:
        if name in self.partitions:
            return
        if not self.partitions:
            self.start_ts = self.now
        self.partitions.append(name)
        self._state("Ongoing", self.partitions)

    def send(self, name: str, n_records: int = 3, *, created: int | None = None, add: bool = True,
             value_size: int = 120) -> AppendInfo:
        """Append a batch; ``add`` first registers the partition with the coordinator."""
        if add:
            self.add_partition(name)
        seq = self.sequences.get(name, 0)
        ts = self.now if created is None else created
        rng = self.cluster.rng
        records = []
        for i in range(n_records):
            self.counter += 1
            body = f"{self.tid}|{self.counter:06d}|".encode() + rng.randbytes(value_size // 2).hex().encode()
            records.append((f"k{rng.randrange(1000)}".encode(), body[:value_size], ts + i))
        info = self.cluster.log(name).append(
            records, producer_id=self.pid, producer_epoch=self.epoch, base_sequence=seq,
            transactional=True, compression=self.codec,
        )
        self.sequences[name] = seq + n_records
        return info

    def commit_offsets(self, group: str, offsets: dict[tuple[str, int], int]) -> AppendInfo:
        """TxnOffsetCommit: offsets written transactionally into ``__consumer_offsets``."""
        name = "__consumer_offsets-0"
        self.add_partition(name)
        seq = self.sequences.get(name, 0)
        records = [
            (
                encode_offset_commit_key(OffsetCommitKey(1, group, topic, partition)),
                encode_offset_commit_value(OffsetCommitValue(3, offset, 0, "", self.now, -1)),
                self.now,
            )
            for (topic, partition), offset in sorted(offsets.items())
        ]
        info = self.cluster.log(name).append(
            records, producer_id=self.pid, producer_epoch=self.epoch, base_sequence=seq, transactional=True,
        )
        self.sequences[name] = seq + len(records)
        return info

    def end(self, *, commit: bool = True, skip_markers: frozenset[str] = frozenset(),
            complete: bool = True, coordinator_abort: bool = False) -> dict[str, AppendInfo]:
        """EndTxn: Prepare*, markers on every added partition (but ``skip_markers``), Complete*.

        ``coordinator_abort`` is the coordinator timing the transaction out: on a TV1 cluster
        the epoch bump is folded into PrepareAbort and the markers carry it. TV2 clients bump
        the epoch on every end. ``complete=False`` leaves the coordinator in Prepare*.
        """
        kind = "COMMIT" if commit else "ABORT"
        marker_epoch = self.epoch + 1 if (self.tv2 or coordinator_abort) else self.epoch
        self._state("PrepareCommit" if commit else "PrepareAbort", self.partitions, epoch=marker_epoch)
        markers = {}
        for name in self.partitions:
            if name in skip_markers:
                continue
            self.cluster.clock.now += 1
            markers[name] = self.cluster.log(name).append_marker(
                producer_id=self.pid, producer_epoch=marker_epoch, marker_type=kind,
                coordinator_epoch=self.coordinator.coordinator_epoch, timestamp=self.now,
            )
        if marker_epoch != self.epoch:
            self.epoch = marker_epoch
            self.sequences.clear()  # a new epoch restarts sequences
        if complete:
            self._state("CompleteCommit" if commit else "CompleteAbort", [])
        self.partitions = []
        return markers

    def reinit_after_timeout(self) -> None:
        """InitProducerId after a coordinator abort: epoch bumped again, Empty."""
        self.epoch += 1
        self.sequences.clear()
        self._state("Empty", None)


def _schedule(actors: list[Actor], clock: Clock) -> None:
    """Run actors in timestamp order (ties by actor index) until all have finished."""
    heap: list[tuple[int, int]] = []
    for i, actor in enumerate(actors):
        try:
            heapq.heappush(heap, (next(actor), i))
        except StopIteration:
            pass
    while heap:
        when, i = heapq.heappop(heap)
        clock.now = max(clock.now, when)
        try:
            heapq.heappush(heap, (actors[i].send(None), i))
        except StopIteration:
            pass


def _anomaly(cluster: Cluster, kind: str, expected: list[str], log: str, **fields: Any) -> None:
    topic, _, partition = log.rpartition("-")
    cluster.anomalies.append(
        {"kind": kind, "expected_findings": expected, "topic": topic, "partition": int(partition), **fields}
    )


# -- actors ----------------------------------------------------------------------------


def healthy_txn_actor(p: TxnProducer, partitions: list[str], start: int, n_txns: int, abort_every: int) -> Actor:
    """Steady transactions; the next one's first batch often predates the previous markers
    by a few tens of milliseconds, as with real clients (CreateTime is stamped at send)."""
    rng = p.cluster.rng
    yield start
    p.init()
    for n in range(n_txns):
        yield p.now + rng.randrange(20_000, 40_000)
        skew = rng.randrange(0, 90)
        for name in rng.sample(partitions, k=rng.randrange(1, len(partitions) + 1)):
            p.send(name, rng.randrange(1, 5), created=p.now - skew)
            yield p.now + rng.randrange(5, 50)
        p.end(commit=(n % abort_every != abort_every - 1))


def etl_actor(p: TxnProducer, start: int, n_txns: int) -> Actor:
    """Consume-transform-produce: output records and the group's offsets in one transaction;
    one transaction times out and is aborted by the coordinator (epoch bump)."""
    rng = p.cluster.rng
    consumed = 0
    yield start
    p.init()
    for n in range(n_txns):
        yield p.now + rng.randrange(60_000, 90_000)
        p.send("inventory-0", rng.randrange(1, 4))
        consumed += rng.randrange(5, 20)
        yield p.now + 10
        p.commit_offsets("etl-group", {("orders", 0): consumed, ("orders", 1): consumed // 2})
        yield p.now + 10
        if n == n_txns // 2:
            yield p.now + p.timeout_ms + 5_000
            p.end(commit=False, coordinator_abort=True)
            yield p.now + 2_000
            p.reinit_after_timeout()
        else:
            p.end(commit=True)


def idempotent_actor(cluster: Cluster, pid: int, logs: list[str], start: int, n: int, *,
                     gap_at: tuple[str, int] | None = None) -> Actor:
    """Idempotent, non-transactional producer (snappy); optionally skips sequence numbers once."""
    rng = cluster.rng
    seqs = dict.fromkeys(logs, 0)
    yield start
    for i in range(n):
        yield cluster.clock.now + rng.randrange(2_000, 6_000)
        name = logs[i % len(logs)]
        if gap_at == (name, i):
            skipped = 5
            first = seqs[name]
            seqs[name] += skipped
            info = _send_plain(cluster, name, 4, pid=pid, epoch=0, seq=seqs[name], codec="snappy")
            _anomaly(cluster, "sequence_gap", ["sequence_gap"], name, producer_id=pid, producer_epoch=0,
                     first_offset=info.base_offset, last_offset=info.last_offset,
                     note=f"base sequence {seqs[name]} where {first} was expected: {skipped} sequence numbers missing")
            seqs[name] += 4
            continue
        count = rng.randrange(2, 6)
        _send_plain(cluster, name, count, pid=pid, epoch=0, seq=seqs[name], codec="snappy")
        seqs[name] += count


def plain_actor(cluster: Cluster, logs: list[str], start: int, n: int) -> Actor:
    """acks=1 producer without idempotence (no producer id); uncompressed and gzip."""
    rng = cluster.rng
    yield start
    for i in range(n):
        yield cluster.clock.now + rng.randrange(3_000, 7_000)
        _send_plain(cluster, logs[i % len(logs)], rng.randrange(1, 8), codec="gzip" if i % 3 == 0 else "none")


def _send_plain(cluster: Cluster, name: str, count: int, *, pid: int = -1, epoch: int = -1, seq: int = -1,
                codec: str = "none") -> AppendInfo:
    rng = cluster.rng
    now = cluster.clock.now
    records = [(None, f"event-{now}-{i}|".encode() + rng.randbytes(40).hex().encode(), now) for i in range(count)]
    return cluster.log(name).append(records, producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                                    compression=CODEC[codec])


def hanging_unadded_actor(p: TxnProducer, start: int) -> Actor:
    """A batch accepted on a partition the coordinator never added (verification off)."""
    yield start
    p.init()
    yield p.now + 500
    p.send("orders-0", 3)
    yield p.now + 20
    stray = p.send("orders-1", 1, add=False)
    yield p.now + 30
    p.end(commit=True)
    _anomaly(p.cluster, "hanging_transaction", ["hanging_transaction", "stuck_lso"], "orders-1",
             transactional_id=p.tid, producer_id=p.pid, producer_epoch=0, first_offset=stray.base_offset,
             last_offset=stray.last_offset,
             note="transactional batch on a partition never added to the transaction; the commit marker went "
                  "only to orders-0")


def late_hanging_actor(p: TxnProducer, start: int) -> Actor:
    """KAFKA-12671: a produce request arriving after EndTxn opens a transaction nobody closes."""
    yield start
    p.init()
    yield p.now + 500
    p.send("orders-0", 2)
    created = p.now + 5
    yield p.now + 40_000  # the second request is stuck in flight
    markers = p.end(commit=True)
    yield p.now + 200
    late = p.send("orders-0", 1, created=created, add=False)
    _anomaly(p.cluster, "late_arrival", ["late_arrival", "hanging_transaction", "stuck_lso"], "orders-0",
             transactional_id=p.tid, producer_id=p.pid, producer_epoch=p.epoch, first_offset=late.base_offset,
             last_offset=late.last_offset, marker_offset=markers["orders-0"].base_offset,
             note="batch created ~40 s before its transaction's COMMIT marker was appended after it, and opened "
                  "a transaction the coordinator never knew")


def absorbed_actor(p: TxnProducer, start: int) -> Actor:
    """A late batch of transaction N lands after N's marker inside N+1, which then commits it."""
    yield start
    p.init()
    yield p.now + 500
    p.send("payments.v2-0", 2)
    created = p.now + 3
    yield p.now + 20_000
    first = p.end(commit=False)  # N is aborted: its late record must not be committed
    yield p.now + 300
    p.add_partition("payments.v2-0")  # N+1 already added the partition
    yield p.now + 50
    late = p.send("payments.v2-0", 1, created=created, add=False)
    yield p.now + 100
    p.send("payments.v2-0", 2)
    yield p.now + 100
    closing = p.end(commit=True)
    _anomaly(p.cluster, "absorbed_late_record", ["late_arrival", "absorbed_late_record"], "payments.v2-0",
             transactional_id=p.tid, producer_id=p.pid, producer_epoch=p.epoch, first_offset=late.base_offset,
             last_offset=late.last_offset, marker_offset=first["payments.v2-0"].base_offset,
             closing_marker_offset=closing["payments.v2-0"].base_offset,
             note="record of aborted transaction N arrived after N's ABORT marker and was committed by N+1's marker")


def stuck_prepare_actor(p: TxnProducer, start: int) -> Actor:
    """Coordinator wrote PrepareCommit and one marker, then nothing (no CompleteCommit)."""
    yield start
    p.init()
    yield p.now + 500
    p.send("payments.v2-1", 2)
    yield p.now + 30
    open_batch = p.send("inventory-0", 2)
    yield p.now + 30
    p.end(commit=True, skip_markers=frozenset({"inventory-0"}), complete=False)
    _anomaly(p.cluster, "coordinator_stuck", ["coordinator_stuck", "open_transaction", "stuck_lso"], "inventory-0",
             transactional_id=p.tid, producer_id=p.pid, producer_epoch=0, first_offset=open_batch.base_offset,
             last_offset=open_batch.last_offset,
             note="last coordinator state PrepareCommit; COMMIT marker on payments.v2-1 only, inventory-0 still open")


def missing_marker_actor(p: TxnProducer, start: int) -> Actor:
    """Coordinator completed the commit, but orders-2 never received its marker."""
    yield start
    p.init()
    yield p.now + 500
    open_batch = p.send("orders-2", 3)
    yield p.now + 30
    p.send("orders-0", 1)
    yield p.now + 30
    p.end(commit=True, skip_markers=frozenset({"orders-2"}))
    _anomaly(p.cluster, "missing_marker", ["missing_marker", "hanging_transaction", "stuck_lso"], "orders-2",
             transactional_id=p.tid, producer_id=p.pid, producer_epoch=0, first_offset=open_batch.base_offset,
             last_offset=open_batch.last_offset,
             note="CompleteCommit written but no COMMIT marker on orders-2: its transaction stays open")


def long_running_actor(p: TxnProducer, start: int) -> Actor:
    """A transaction still open at the end of the dump, known to the coordinator, within its timeout."""
    yield start
    p.init()
    yield p.now + 500
    first = p.send("inventory-1", 3)
    last = first
    for _ in range(3):
        yield p.now + 60_000
        last = p.send("inventory-1", 2)
    _anomaly(p.cluster, "open_transaction", ["open_transaction", "stuck_lso"], "inventory-1",
             transactional_id=p.tid, producer_id=p.pid, producer_epoch=0, first_offset=first.base_offset,
             last_offset=last.last_offset,
             note="Ongoing in the coordinator with a 1 h timeout; open for minutes at the end of the dump")


def simulate(seed: int) -> Cluster:
    """Run every actor of the sample to completion and return the resulting cluster."""
    rng = random.Random(seed)
    clock = Clock()
    b1 = Broker(1, "txnAuditSampleCluster0")
    b2 = Broker(2, "txnAuditSampleCluster0", clean_shutdown=False)
    logs: dict[str, PartitionLog] = {}
    for p in range(3):
        logs[f"orders-{p}"] = b1.add(PartitionLog("orders", p, segment_bytes=24 * 1024))
        logs[f"__transaction_state-{p}"] = b1.add(PartitionLog("__transaction_state", p, segment_bytes=8 * 1024))
    logs["__consumer_offsets-0"] = b1.add(PartitionLog("__consumer_offsets", 0, segment_bytes=16 * 1024))
    for p in range(2):
        logs[f"payments.v2-{p}"] = b2.add(PartitionLog("payments.v2", p, segment_bytes=24 * 1024, leader_epoch=3))
        logs[f"inventory-{p}"] = b2.add(PartitionLog("inventory", p, segment_bytes=16 * 1024, leader_epoch=3))
        logs[f"clicks-{p}"] = b2.add(PartitionLog("clicks", p, segment_bytes=8 * 1024, leader_epoch=3))
    cluster = Cluster({1: b1, 2: b2}, logs, clock, rng)
    coord = Coordinator(cluster)

    def producer(tid: str, pid: int, **kw: Any) -> TxnProducer:
        return TxnProducer(cluster, coord, tid, pid, **kw)

    hour = 60 * MINUTE
    actors: list[Actor] = [
        healthy_txn_actor(producer("orders-app", 0, codec="gzip"), ["orders-0", "orders-1", "orders-2"],
                          BASE_TIME_MS, 110, abort_every=6),
        healthy_txn_actor(producer("payments-app", 1, codec="zstd", tv2=True), ["payments.v2-0", "payments.v2-1"],
                          BASE_TIME_MS + 1_000, 110, abort_every=5),
        etl_actor(producer("etl-app", 2, codec="lz4", timeout_ms=30_000), BASE_TIME_MS + 2_000, 36),
        idempotent_actor(cluster, 100, ["clicks-0", "clicks-1"], BASE_TIME_MS, 700, gap_at=("clicks-0", 300)),
        plain_actor(cluster, ["clicks-0", "clicks-1", "orders-1"], BASE_TIME_MS, 500),
        hanging_unadded_actor(producer("hang-txn", 10), BASE_TIME_MS + 5 * MINUTE),
        late_hanging_actor(producer("late-txn", 11, codec="gzip"), BASE_TIME_MS + 12 * MINUTE),
        absorbed_actor(producer("absorb-txn", 12), BASE_TIME_MS + 18 * MINUTE),
        missing_marker_actor(producer("lost-marker-txn", 13), BASE_TIME_MS + 24 * MINUTE),
        long_running_actor(producer("long-txn", 14, timeout_ms=hour), BASE_TIME_MS + 50 * MINUTE),
        stuck_prepare_actor(producer("stuck-txn", 15, tv2=False), BASE_TIME_MS + 54 * MINUTE),
    ]
    _schedule(actors, clock)
    return cluster
