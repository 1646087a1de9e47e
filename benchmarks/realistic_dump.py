"""The benchmark's realistic dump: traffic shaped like a cluster's, at any size.

This is the benchmark generator, not the product's sample: ``txn-audit sample`` writes a small
dump whose every byte is fixed and documented; this one writes hundreds of MB to GiB of
traffic with the sample simulator's classes (``txn_audit.sample.scenario``: ``Cluster``,
``Coordinator``, ``TxnProducer``, ``Clock``; ``txn_audit.sample.broker``), so it lives beside
the benchmarks that use it.

Shape, on one broker:

* topics ``orders``, ``payments.v2``, ``inventory`` and ``clicks``, 4 partitions each;
* 60 transactional producers (every third a TV2 client), each on 2 or 3 partitions of one
  topic, writing transactions of 1 to 3 partitions, batches of 2 to 30 records, about 20 %
  aborted; their codecs cycle over gzip, lz4, zstd, snappy and none;
* 8 idempotent producers (snappy, lz4, zstd, none) and 4 plain ones (none, gzip) on
  ``clicks`` and ``orders``;
* ``__transaction_state`` with 50 partitions (the broker default), uncompacted, one active
  segment each, holding every record the coordinator wrote for every transaction in the dump:
  ``Empty`` when an id is initialised, ``Ongoing`` per partition added, ``PrepareCommit``/
  ``PrepareAbort``, ``CompleteCommit``/``CompleteAbort``, one record per batch.

A block of this traffic is simulated once (seconds), then repeated to reach the size. Each
copy is a new generation of the applications: its transactional ids get a copy suffix
(``orders-app-07.c00012``), its producer ids are shifted by ``PID_STRIDE`` per copy, offsets and
timestamps advance by one block (data CRCs recomputed), and the coordinator records of the
copy are written again for the new ids, so each ``__transaction_state`` record matches the
markers in the data. After the last copy, the sample's anomalies are simulated once at the log
end (``txn_audit.sample.scenario``'s actors): a batch on a partition never added, a late
arrival, a late record absorbed by the next transaction, a missing marker, a long open
transaction, a coordinator stuck in ``PrepareCommit``, a sequence gap, a flipped bit in a batch
and a torn last batch (the broker did not shut down cleanly).

Laid out over more partitions (``--lanes N``, the issue of a broker with thousands of
partitions): the copies are dealt to N lanes in turn, lane 0 on the topics above and lane ``L``
on topics ``orders.l007``, ``payments.v2.l007``, ... (16 partitions a lane), all lanes writing at
the same time; the block is made smaller (fewer transactions per producer) so every lane gets a
copy, keeping the bytes, the producers' mix and the coordinator's share of them.

Usage::

    python benchmarks/realistic_dump.py OUT --gib 0.05
    python benchmarks/realistic_dump.py OUT --gib 0.25 --lanes 125   # 2,000 data partitions
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import random
import struct
import time
from collections.abc import Callable, Generator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any


from txn_audit.formats.compression import CODEC_NAMES
from txn_audit.formats.model import BatchHeader, TxnLogValue
from crc32c import crc32c

from txn_audit.formats.record_batch import (
    ATTRIBUTES_OFFSET,
    CRC_OFFSET,
    PRODUCER_ID_OFFSET,
    RECORDS_OFFSET,
)
from txn_audit.formats.segment import iter_batches
from txn_audit.formats.txn_state import encode_txn_log_key, encode_txn_log_value, txn_partition_for
from txn_audit.sample import scenario
from txn_audit.sample.broker import Broker, PartitionLog, ProducerState, Segment, \
    segment_file_name
from txn_audit.sample.large import write_block_copies
from txn_audit.sample.scenario import BASE_TIME_MS, MINUTE, Clock, Cluster, Coordinator, TxnProducer

GIB = 1 << 30
TOPICS = ("orders", "payments.v2", "inventory", "clicks")
PARTITIONS_PER_TOPIC = 4
TXN_STATE_TOPIC = "__transaction_state"
TXN_STATE_PARTITIONS = 50
TXN_STATE_SEGMENT_BYTES = 100 << 20  # transaction.state.log.segment.bytes, the broker default
TXN_PRODUCERS = 60
IDEMPOTENT_PRODUCERS = 8
PLAIN_PRODUCERS = 4
ABORT_SHARE = 0.2
CODECS = ("gzip", "lz4", "zstd", "snappy", "none")
PID_STRIDE = 1_000  # producer ids of copy c are the block's plus c * PID_STRIDE
ANOMALY_PID = 900_000_000  # producer ids of the anomalies, simulated once after the copies
_Q = struct.Struct(">q")
_U = struct.Struct(">I")

Actor = Generator[int, None, None]


class RecordingCoordinator(Coordinator):
    """The coordinator over 50 partitions; while ``recording``, writes are kept to be replayed
    once per copy of the block, else appended to the log at once."""

    def __init__(self, cluster: Cluster) -> None:
        super().__init__(cluster)
        self.recording = True
        self.writes: list[tuple[str, TxnLogValue, int]] = []

    def write(self, tid: str, value: TxnLogValue) -> None:
        if self.recording:
            self.writes.append((tid, value, self.cluster.clock.now))
        else:
            log = self.cluster.log(f"{TXN_STATE_TOPIC}-{txn_partition_for(tid, TXN_STATE_PARTITIONS)}")
            log.append([(encode_txn_log_key(tid), encode_txn_log_value(value), self.cluster.clock.now)])


@dataclass
class DumpShape:
    """What a generated dump holds (also written as ``shape.json`` beside ``broker-1``)."""

    copies: int = 0
    lanes: int = 1
    partitions: int = 0
    block_seconds: float = 0.0
    data_bytes: int = 0
    data_batches: int = 0
    markers: int = 0
    transactions: int = 0
    aborted: int = 0
    coordinator_bytes: int = 0
    coordinator_records: int = 0
    txn_producers: int = 0
    tv2_producers: int = 0
    idempotent_producers: int = 0
    plain_producers: int = 0
    codecs: dict[str, int] = field(default_factory=dict)  # data batches per codec
    anomalies: list[dict[str, Any]] = field(default_factory=list)

    def summary(self) -> str:
        total = self.data_bytes + self.coordinator_bytes
        return (f"{self.copies} copies of the block; data {self.data_bytes / 1e6:.1f} MB in {self.data_batches:,} "
                f"batches ({self.markers:,} markers); {self.transactions:,} transactions ({self.aborted:,} aborted, "
                f"{self.aborted / max(1, self.transactions):.0%}); coordinator log "
                f"{self.coordinator_bytes / 1e6:.1f} MB "
                f"({self.coordinator_bytes / max(1, total):.1%} of the bytes), {self.coordinator_records:,} records "
                f"({self.coordinator_records / max(1, self.coordinator_records + self.data_batches):.1%} of the "
                f"batches); producers: {self.txn_producers} transactional ({self.tv2_producers} TV2), "
                f"{self.idempotent_producers} idempotent, {self.plain_producers} plain; batches per codec "
                f"{self.codecs}; {len(self.anomalies)} planted anomalies")


def _txn_actor(p: TxnProducer, partitions: list[str], start: int, n_txns: int) -> Actor:
    rng = p.cluster.rng
    yield start
    p.init()
    for _ in range(n_txns):
        yield p.now + rng.randrange(200, 2_000)
        skew = rng.randrange(0, 60)
        for name in rng.sample(partitions, k=rng.randint(1, len(partitions))):
            for _ in range(rng.randint(1, 2)):
                p.send(name, rng.randint(2, 30), created=p.now - skew, value_size=rng.choice((60, 120, 240)))
                yield p.now + rng.randrange(1, 20)
        p.end(commit=rng.random() >= ABORT_SHARE)


def _simulate_block(cluster: Cluster, coordinator: RecordingCoordinator, txns_per_producer: int) -> int:
    """The repeated block: every producer's traffic, all transactions closed. Returns its end time."""
    rng = cluster.rng
    actors: list[Actor] = []
    for i in range(TXN_PRODUCERS):
        topic = TOPICS[i % 3]
        names = [f"{topic}-{p}" for p in rng.sample(range(PARTITIONS_PER_TOPIC), k=rng.randint(2, 3))]
        producer = TxnProducer(cluster, coordinator, f"{topic.split('.')[0]}-app-{i:02d}", i,
                               codec=CODECS[i % len(CODECS)], tv2=i % 3 == 2)
        actors.append(_txn_actor(producer, names, BASE_TIME_MS + rng.randrange(1_000), txns_per_producer))
    span_guess = txns_per_producer * 1_500
    clicks = [f"clicks-{p}" for p in range(PARTITIONS_PER_TOPIC)]
    orders = [f"orders-{p}" for p in range(PARTITIONS_PER_TOPIC)]
    for i in range(IDEMPOTENT_PRODUCERS):
        actors.append(_idempotent_actor(cluster, TXN_PRODUCERS + i, clicks if i % 2 else orders,
                                        ("snappy", "lz4", "zstd", "none")[i % 4], span_guess))
    for i in range(PLAIN_PRODUCERS):
        actors.append(_plain_actor(cluster, clicks, ("none", "gzip")[i % 2], span_guess))
    scenario._schedule(actors, cluster.clock)
    return cluster.clock.now


def _idempotent_actor(cluster: Cluster, pid: int, names: list[str], codec: str, span: int) -> Actor:
    rng = cluster.rng
    seqs = dict.fromkeys(names, 0)
    end = BASE_TIME_MS + span
    yield BASE_TIME_MS + rng.randrange(1_000)
    while cluster.clock.now < end:
        name = rng.choice(names)
        count = rng.randint(5, 40)
        scenario._send_plain(cluster, name, count, pid=pid, epoch=0, seq=seqs[name], codec=codec)
        seqs[name] += count
        yield cluster.clock.now + rng.randrange(100, 400)


def _plain_actor(cluster: Cluster, names: list[str], codec: str, span: int) -> Actor:
    rng = cluster.rng
    end = BASE_TIME_MS + span
    yield BASE_TIME_MS + rng.randrange(1_000)
    while cluster.clock.now < end:
        scenario._send_plain(cluster, rng.choice(names), rng.randint(1, 20), codec=codec)
        yield cluster.clock.now + rng.randrange(200, 600)


def _simulate_anomalies(cluster: Cluster, coordinator: Coordinator, start: int) -> None:
    """The sample's anomalies, each once, at the log end."""

    def producer(tid: str, n: int, **kw: Any) -> TxnProducer:
        return TxnProducer(cluster, coordinator, tid, ANOMALY_PID + n, **kw)

    actors: list[Actor] = [
        # at the sample's times, so that each is as old at the end of the dump as in the sample
        scenario.hanging_unadded_actor(producer("hang-txn", 10), start + 5 * MINUTE),
        scenario.late_hanging_actor(producer("late-txn", 11, codec="gzip"), start + 12 * MINUTE),
        scenario.absorbed_actor(producer("absorb-txn", 12), start + 18 * MINUTE),
        scenario.missing_marker_actor(producer("lost-marker-txn", 13), start + 24 * MINUTE),
        scenario.long_running_actor(producer("long-txn", 14, timeout_ms=60 * MINUTE), start + 50 * MINUTE),
        scenario.stuck_prepare_actor(producer("stuck-txn", 15), start + 54 * MINUTE),
        # the idempotent producer spans that hour too, as the sample's does
        scenario.idempotent_actor(cluster, ANOMALY_PID + 100, ["clicks-0", "clicks-1"], start, 800,
                                  gap_at=("clicks-0", 300)),
    ]
    scenario._schedule(actors, cluster.clock)
    clicks = cluster.log("clicks-1")
    tail = [a for a in clicks.appends if a.segment_base_offset == clicks.active.base_offset]
    victim, torn = tail[len(tail) // 2], tail[-1]
    clicks.corrupt_positions.append((victim.segment_base_offset, victim.position + RECORDS_OFFSET + 7))
    clicks.truncate_tail_bytes = torn.size - 25
    cluster.brokers[1].high_watermarks["clicks-1"] = torn.base_offset
    for kind, a, note in (("corrupt_batch", victim, "one bit flipped inside the records"),
                          ("truncated_segment", torn, "only the first 25 bytes of the last batch reached the disk")):
        cluster.anomalies.append({"kind": kind, "expected_findings": [kind], "topic": "clicks", "partition": 1,
                                  "first_offset": a.base_offset, "last_offset": a.last_offset,
                                  "segment_base_offset": a.segment_base_offset, "position": a.position, "note": note})


@dataclass
class _Plan:
    log: PartitionLog
    block: bytes
    headers: list[BatchHeader]
    offsets: int  # offsets per copy
    aborted: list[Any]  # the block's aborted-transaction index entries
    producers: list[ProducerState]  # the block's producer states at its end


def _copy_tid(tid: str, copy: int) -> str:
    return f"{tid}.c{copy:05d}"


def lane_topic(topic: str, lane: int) -> str:
    """The name of ``topic`` in lane ``lane`` (lane 0 keeps the block's names)."""
    return topic if lane == 0 else f"{topic}.l{lane:03d}"


def _topic_id(topic: str) -> str:
    """A stable topic id per name (22 base64 characters, as ``partition.metadata`` holds)."""
    return base64.urlsafe_b64encode(hashlib.md5(topic.encode()).digest()).decode()[:22]


def _simulated_block(txns_per_producer: int, seed: int) -> tuple[Cluster, RecordingCoordinator, int]:
    rng = random.Random(seed)
    clock = Clock()
    clock.now = BASE_TIME_MS
    broker = Broker(1, "txnAuditBenchCluster0", clean_shutdown=False)
    logs: dict[str, PartitionLog] = {}
    for topic in TOPICS:
        for p in range(PARTITIONS_PER_TOPIC):
            logs[f"{topic}-{p}"] = broker.add(PartitionLog(topic, p, segment_bytes=1 << 62))
    for p in range(TXN_STATE_PARTITIONS):
        logs[f"{TXN_STATE_TOPIC}-{p}"] = broker.add(
            PartitionLog(TXN_STATE_TOPIC, p, segment_bytes=TXN_STATE_SEGMENT_BYTES))
    cluster = Cluster({1: broker}, logs, clock, rng)
    coordinator = RecordingCoordinator(cluster)
    end = _simulate_block(cluster, coordinator, txns_per_producer)
    return cluster, coordinator, end


def _block_bytes(cluster: Cluster, coordinator: RecordingCoordinator) -> int:
    data = sum(len(log.active.data) for log in cluster.logs.values() if log.topic != TXN_STATE_TOPIC)
    return data + 170 * len(coordinator.writes)  # about 170 bytes a coordinator record batch


def write_realistic_dump(out: str | Path, *, size_bytes: int, txns_per_producer: int = 40, seed: int = 23,
                         segment_max_bytes: int = 128 << 20, lanes: int = 1) -> DumpShape:
    """Write ``out/broker-1`` holding at least ``size_bytes`` of data and coordinator records,
    its copies of the block dealt to ``lanes`` sets of 16 data partitions."""
    started = time.perf_counter()
    cluster, coordinator, end = _simulated_block(txns_per_producer, seed)
    if lanes > 1 and _block_bytes(cluster, coordinator) * lanes > size_bytes:  # a smaller block, a copy a lane
        per_txn = _block_bytes(cluster, coordinator) / txns_per_producer
        txns_per_producer = max(1, int(size_bytes / lanes / per_txn))
        cluster, coordinator, end = _simulated_block(txns_per_producer, seed)
    broker, logs, clock = cluster.brokers[1], cluster.logs, cluster.clock
    span = end - BASE_TIME_MS + 1_000
    shape = DumpShape(block_seconds=time.perf_counter() - started, txn_producers=TXN_PRODUCERS,
                      tv2_producers=sum(i % 3 == 2 for i in range(TXN_PRODUCERS)),
                      idempotent_producers=IDEMPOTENT_PRODUCERS + 1, plain_producers=PLAIN_PRODUCERS)

    data = [log for log in logs.values() if log.topic != TXN_STATE_TOPIC]
    plans = []
    for log in data:
        block = bytes(log.active.data)
        plans.append(_Plan(log, block, [h for h in iter_batches(block) if isinstance(h, BatchHeader)],
                           log.next_offset, list(log.active.aborted), list(log.producers.values())))
    copies = max(lanes, -(-size_bytes // _block_bytes(cluster, coordinator)))
    shape.copies, shape.lanes = copies, lanes

    # the coordinator's records of every copy, for the copy's ids, producer ids, topics and times
    coord_logs = [logs[f"{TXN_STATE_TOPIC}-{p}"] for p in range(TXN_STATE_PARTITIONS)]
    keys: dict[str, tuple[bytes, PartitionLog]] = {}
    for c in range(copies):
        lane, shift, pid_shift = c % lanes, (c // lanes) * span, c * PID_STRIDE
        keys.clear()
        for tid, value, ts in coordinator.writes:
            if tid not in keys:
                name = _copy_tid(tid, c)
                keys[tid] = (encode_txn_log_key(name), coord_logs[txn_partition_for(name, TXN_STATE_PARTITIONS)])
            key, log = keys[tid]
            start = value.txn_start_timestamp
            listed = value.topic_partitions
            if lane and listed:
                listed = tuple(replace(tp, topic=lane_topic(tp.topic, lane)) for tp in listed)
            copy = replace(value, producer_id=value.producer_id + pid_shift, topic_partitions=listed,
                           txn_last_update_timestamp=value.txn_last_update_timestamp + shift,
                           txn_start_timestamp=start + shift if start >= 0 else start)
            log.append([(key, encode_txn_log_value(copy), ts + shift)])

    # data partitions: each lane's copies in segments, then the anomalies in lane 0's active segments
    lane_logs: list[tuple[_Plan, int, PartitionLog, range]] = []
    for lane in range(lanes):
        in_lane = range(0, len(range(lane, copies, lanes)))
        for plan in plans:
            log = plan.log if lane == 0 else broker.add(
                PartitionLog(lane_topic(plan.log.topic, lane), plan.log.partition, segment_bytes=1 << 62))
            _lay_out(plan, log, in_lane, lane, lanes, span, segment_max_bytes)
            lane_logs.append((plan, lane, log, in_lane))
    coordinator.recording = False
    clock.now = BASE_TIME_MS + -(-copies // lanes) * span
    _simulate_anomalies(cluster, coordinator, clock.now)
    shape.anomalies = cluster.anomalies

    root = Path(out) / "broker-1"
    broker.write(root, {log.topic: _topic_id(log.topic) for log in broker.logs.values()})
    for plan, lane, log, in_lane in lane_logs:
        per_segment = max(1, segment_max_bytes // max(1, len(plan.block)))
        for first in range(0, len(in_lane), per_segment):
            write_block_copies(root / log.name, _lane_block(plan, lane), plan.headers, plan.offsets, span,
                               range(first, min(first + per_segment, len(in_lane))),
                               _shift_producer_ids(lane, lanes))
        shape.data_batches += len(in_lane) * len(plan.headers)
        for h in plan.headers:
            if h.is_control:
                shape.markers += len(in_lane)
            else:
                name = CODEC_NAMES.get(h.compression, str(h.compression))
                shape.codecs[name] = shape.codecs.get(name, 0) + len(in_lane)
        shape.data_bytes += sum((root / log.name / segment_file_name(s.base_offset, "log")).stat().st_size
                                for s in log.segments)
    shape.partitions = len(broker.logs)
    for log in coord_logs:
        shape.coordinator_bytes += sum(len(s.data) for s in log.segments)
        shape.coordinator_records += len(log.appends)
    closes = [v for _, v, _ in coordinator.writes if v.state_code in (4, 5)]
    shape.transactions = copies * len(closes)
    shape.aborted = copies * sum(v.state_code == 5 for v in closes)
    (Path(out) / "shape.json").write_text(json.dumps(shape.__dict__, indent=2, sort_keys=True) + "\n")
    return shape


def _lay_out(plan: _Plan, log: PartitionLog, in_lane: range, lane: int, lanes: int, span: int,
             segment_max_bytes: int) -> None:
    """``log``'s segments, aborted-transaction index and producer states after ``in_lane``
    copies of the block (copy ``k`` of lane ``lane`` is copy ``k * lanes + lane`` of the dump)."""
    per_segment = max(1, segment_max_bytes // max(1, len(plan.block)))
    aborted = plan.aborted

    def pid(producer_id: int, k: int) -> int:
        return producer_id + (k * lanes + lane) * PID_STRIDE

    log.segments = [
        Segment(first * plan.offsets, aborted=[
            replace(a, producer_id=pid(a.producer_id, k), first_offset=a.first_offset + k * plan.offsets,
                    last_offset=a.last_offset + k * plan.offsets,
                    last_stable_offset=a.last_stable_offset + k * plan.offsets)
            for k in range(first, min(first + per_segment, len(in_lane))) for a in aborted])
        for first in range(0, len(in_lane), per_segment)
    ]
    log.producers = {}
    for k in in_lane:
        for state in plan.producers:
            log.producers[pid(state.producer_id, k)] = ProducerState(
                pid(state.producer_id, k), state.epoch, state.last_sequence, state.last_offset + k * plan.offsets,
                state.offset_delta, state.timestamp + k * span, state.coordinator_epoch, -1)
    log.next_offset = len(in_lane) * plan.offsets
    log.snapshots = {log.next_offset: [p.snapshot_entry() for p in log.producers.values()]}
    log.segments.append(Segment(log.next_offset))
    log.appends = []


def _lane_block(plan: _Plan, lane: int) -> bytes:
    """The block as lane ``lane`` writes its first copy: producer ids shifted by ``lane *
    PID_STRIDE`` (``write_block_copies`` rewrites every later copy, not the first), CRCs recomputed."""
    if lane == 0:
        return plan.block
    buf = bytearray(plan.block)
    for h in plan.headers:
        if h.producer_id >= 0:
            _Q.pack_into(buf, h.position + PRODUCER_ID_OFFSET, h.producer_id + lane * PID_STRIDE)
            _U.pack_into(buf, h.position + CRC_OFFSET, crc32c(bytes(buf[h.position + ATTRIBUTES_OFFSET:
                                                                        h.position + h.size_bytes])))
    return bytes(buf)


def _shift_producer_ids(lane: int, lanes: int) -> Callable[[bytearray, BatchHeader, int], None]:
    """Copy ``k`` of lane ``lane`` is written by producers of ids shifted by ``(k * lanes + lane) *
    PID_STRIDE``."""
    def rewrite(buf: bytearray, h: BatchHeader, k: int) -> None:
        if h.producer_id >= 0:
            _Q.pack_into(buf, h.position + PRODUCER_ID_OFFSET, h.producer_id + (k * lanes + lane) * PID_STRIDE)
    return rewrite


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--gib", type=float, default=1.0, help="size of data and coordinator log, GiB")
    parser.add_argument("--lanes", type=int, default=1,
                        help="sets of 16 data partitions the copies are dealt to (125: 2,000 partitions)")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    shape = write_realistic_dump(args.out, size_bytes=int(args.gib * GIB), lanes=args.lanes)
    print(f"wrote {args.out} in {time.perf_counter() - started:.1f} s (block simulated in "
          f"{shape.block_seconds:.1f} s): {shape.summary()}")


if __name__ == "__main__":
    main()
