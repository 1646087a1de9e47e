"""The sample generator at scale: one broker whose data partition holds one large segment.

Transactional producers (the sample's ``TxnProducer``, uncompressed, five records of about
54-byte values per batch, so data batches of about 390 bytes) write transactions of a few
batches each, committed or (every tenth) aborted, with their ``__transaction_state``
records and markers. That block of a few MB is simulated once; the data segment is then the
block repeated with offsets, sequences and timestamps advanced by one block per copy (CRCs
recomputed), so a 1 GiB segment takes seconds, not the minutes the simulation would. The
``.index``, ``.timeindex``, ``.txnindex``, snapshot and checkpoints describe the whole
segment as a broker would have written them. Used by the benchmarks and by tests.
"""

from __future__ import annotations

import random
import struct
from dataclasses import replace
from pathlib import Path

from crc32c import crc32c

from txn_audit.formats.model import BatchHeader
from txn_audit.formats.segment import iter_batches
from txn_audit.sample.broker import INDEX_INTERVAL_BYTES, Broker, PartitionLog, segment_file_name
from txn_audit.sample.scenario import BASE_TIME_MS, TXN_STATE_PARTITIONS, Clock, Cluster, Coordinator, TxnProducer

LARGE_TOPIC = "bulk"
_TOPIC_IDS = {LARGE_TOPIC: "YnVsay10b3BpYy1pZC0wMA", "__transaction_state": "dHhuLXN0YXRlLXRvcGljMDA"}
_Q = struct.Struct(">q")
_I = struct.Struct(">i")
_U = struct.Struct(">I")


def _simulate_block(block_bytes: int, producers: int, batches_per_txn: int, value_size: int, seed: int
                    ) -> tuple[Broker, PartitionLog, Clock]:
    rng = random.Random(seed)
    clock = Clock()
    clock.now = BASE_TIME_MS
    broker = Broker(1, "txnAuditLargeCluster0")
    data = broker.add(PartitionLog(LARGE_TOPIC, 0, segment_bytes=1 << 62))
    logs = {data.name: data}
    for p in range(TXN_STATE_PARTITIONS):
        logs[f"__transaction_state-{p}"] = broker.add(PartitionLog("__transaction_state", p, segment_bytes=64 << 20))
    cluster = Cluster({1: broker}, logs, clock, rng)
    coordinator = Coordinator(cluster)
    actors = [TxnProducer(cluster, coordinator, f"bulk-app-{i}", 1000 + i) for i in range(producers)]
    for actor in actors:
        actor.init()
    txn = 0
    while len(data.active.data) < block_bytes:
        actor = actors[txn % producers]
        for _ in range(batches_per_txn):
            clock.now += 1
            actor.send(data.name, 5, value_size=value_size)
        clock.now += 1
        actor.end(commit=txn % 10 != 9)
        txn += 1
    return broker, data, clock


def write_large_dump(
    out: str | Path,
    *,
    segment_bytes: int,
    block_bytes: int = 2 << 20,
    producers: int = 8,
    batches_per_txn: int = 4,
    value_size: int = 54,
    seed: int = 11,
) -> Path:
    """Write a one-broker dump under ``out/broker-1``; return the path of its large ``.log``.

    The segment is the smallest whole number of blocks of at least ``segment_bytes``.
    """
    broker, data, clock = _simulate_block(block_bytes, producers, batches_per_txn, value_size, seed)
    block = bytes(data.active.data)
    headers = [h for h in iter_batches(block) if isinstance(h, BatchHeader)]
    offsets, span = data.next_offset, clock.now - BASE_TIME_MS + 1
    seq_span = {pid: p.last_sequence + 1 for pid, p in data.producers.items()}
    copies = max(1, -(-segment_bytes // len(block)))

    # producer state, aborted index and log end as after the last copy
    last = copies - 1
    for pid, p in data.producers.items():
        p.last_sequence += last * seq_span[pid]
        p.last_offset += last * offsets
        p.timestamp += last * span
    data.active.aborted = [
        replace(a, first_offset=a.first_offset + r * offsets, last_offset=a.last_offset + r * offsets,
                last_stable_offset=a.last_stable_offset + r * offsets)
        for r in range(copies) for a in data.active.aborted
    ]
    data.next_offset = copies * offsets
    data.active.data = bytearray()
    broker.write(Path(out) / "broker-1", _TOPIC_IDS)

    folder = Path(out) / "broker-1" / data.name
    index = bytearray()
    time_index = bytearray()
    since_index, max_ts = 0, -1
    with open(folder / segment_file_name(0, "log"), "wb") as log:
        for r in range(copies):
            buf = bytearray(block)
            mv = memoryview(buf)
            base = r * len(block)
            for h in headers:
                p = h.position
                last_offset = h.last_offset + r * offsets
                batch_max_ts = h.max_timestamp + r * span
                if r:
                    _Q.pack_into(buf, p, h.base_offset + r * offsets)
                    _Q.pack_into(buf, p + 27, h.first_timestamp + r * span)
                    _Q.pack_into(buf, p + 35, batch_max_ts)
                    if h.base_sequence >= 0:
                        _I.pack_into(buf, p + 53, h.base_sequence + r * seq_span[h.producer_id])
                    _U.pack_into(buf, p + 17, crc32c(mv[p + 21 : p + h.size_bytes]))
                if since_index > INDEX_INTERVAL_BYTES:
                    index += _I.pack(last_offset) + _I.pack(base + p)
                    since_index = 0
                since_index += h.size_bytes
                if batch_max_ts > max_ts:
                    max_ts = batch_max_ts
                    time_index += _Q.pack(batch_max_ts) + _I.pack(last_offset)
            mv.release()
            log.write(buf)
    (folder / segment_file_name(0, "index")).write_bytes(bytes(index))
    (folder / segment_file_name(0, "timeindex")).write_bytes(bytes(time_index))
    return folder / segment_file_name(0, "log")


__all__ = ["LARGE_TOPIC", "write_large_dump"]
