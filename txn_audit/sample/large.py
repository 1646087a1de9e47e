"""The sample generator at scale: one broker whose data partitions hold large segments.

Transactional producers (the sample's ``TxnProducer``, uncompressed, five records of about
54-byte values per batch, so data batches of about 390 bytes) write transactions of a few
batches each, committed or (every tenth) aborted, with their ``__transaction_state``
records and markers. That block of a few MB is simulated once; the data segment is then the
block repeated with offsets, sequences and timestamps advanced by one block per copy (CRCs
recomputed), so a 1 GiB segment takes seconds, not the minutes the simulation would. The
``.index``, ``.timeindex``, ``.txnindex``, snapshot and checkpoints describe the whole
segments as a broker would have written them. With several partitions, transactions spread
their batches over them; idempotent and plain traffic can be mixed in. Used by the
benchmarks and by tests.
"""

from __future__ import annotations

import random
import struct
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from crc32c import crc32c

from txn_audit.formats.model import BatchHeader
from txn_audit.formats.record_batch import (
    ATTRIBUTES_OFFSET,
    BASE_SEQUENCE_OFFSET,
    BASE_TIMESTAMP_OFFSET,
    CRC_OFFSET,
    MAX_TIMESTAMP_OFFSET,
)
from txn_audit.formats.records import OFFSET_OFFSET
from txn_audit.formats.segment import iter_batches
from txn_audit.sample.broker import INDEX_INTERVAL_BYTES, Broker, PartitionLog, Segment, segment_file_name
from txn_audit.sample.scenario import BASE_TIME_MS, TXN_STATE_PARTITIONS, Clock, Cluster, Coordinator, TxnProducer

LARGE_TOPIC = "bulk"
_TOPIC_IDS = {LARGE_TOPIC: "YnVsay10b3BpYy1pZC0wMA", "__transaction_state": "dHhuLXN0YXRlLXRvcGljMA"}
_Q = struct.Struct(">q")
_I = struct.Struct(">i")
_U = struct.Struct(">I")


IDEMPOTENT_PRODUCER_ID = 5000


def _simulate_block(block_bytes: int, producers: int, batches_per_txn: int, value_size: int, seed: int,
                    partitions: int, mixed_traffic: bool) -> tuple[Broker, list[PartitionLog], Clock]:
    rng = random.Random(seed)
    clock = Clock()
    clock.now = BASE_TIME_MS
    broker = Broker(1, "txnAuditLargeCluster0")
    data_logs = [broker.add(PartitionLog(LARGE_TOPIC, p, segment_bytes=1 << 62)) for p in range(partitions)]
    logs = {d.name: d for d in data_logs}
    for p in range(TXN_STATE_PARTITIONS):
        logs[f"__transaction_state-{p}"] = broker.add(PartitionLog("__transaction_state", p, segment_bytes=64 << 20))
    cluster = Cluster({1: broker}, logs, clock, rng)
    coordinator = Coordinator(cluster)
    actors = [TxnProducer(cluster, coordinator, f"bulk-app-{i}", 1000 + i) for i in range(producers)]
    for actor in actors:
        actor.init()
    sequences = dict.fromkeys(logs, 0)
    txn = 0
    while min(len(d.active.data) for d in data_logs) < block_bytes:
        actor = actors[txn % producers]
        for b in range(batches_per_txn):
            clock.now += 1
            actor.send(data_logs[(txn + b) % partitions].name, 5, value_size=value_size)
        clock.now += 1
        actor.end(commit=txn % 10 != 9)
        if mixed_traffic:  # one idempotent and one plain batch per partition
            for d in data_logs:
                for pid in (IDEMPOTENT_PRODUCER_ID, -1):
                    clock.now += 1
                    records = [(f"k{rng.randrange(1000)}".encode(), rng.randbytes(value_size // 2).hex().encode(),
                                clock.now + i) for i in range(5)]
                    seq = sequences[d.name] if pid >= 0 else -1
                    d.append(records, producer_id=pid, producer_epoch=0 if pid >= 0 else -1, base_sequence=seq)
                    if pid >= 0:
                        sequences[d.name] += len(records)
        txn += 1
    return broker, data_logs, clock


def write_large_dump(
    out: str | Path,
    *,
    segment_bytes: int,
    block_bytes: int = 2 << 20,
    producers: int = 8,
    batches_per_txn: int = 4,
    value_size: int = 54,
    seed: int = 11,
    partitions: int = 1,
    segment_max_bytes: int | None = None,
    mixed_traffic: bool = False,
) -> Path:
    """Write a one-broker dump under ``out/broker-1``; return the path of partition 0's first ``.log``.

    Each of the ``partitions`` partitions of topic ``bulk`` holds the smallest whole number of
    blocks of at least ``segment_bytes``, in one segment, or rolled into segments of at most
    ``segment_max_bytes`` (whole blocks, at least one). Transactions write ``batches_per_txn``
    batches spread over the partitions; ``mixed_traffic`` adds, after each transaction, one
    idempotent (non-transactional) and one plain batch (no producer id) to every partition.
    """
    broker, data_logs, clock = _simulate_block(block_bytes, producers, batches_per_txn, value_size, seed,
                                               partitions, mixed_traffic)
    span = clock.now - BASE_TIME_MS + 1
    plans = []
    for data in data_logs:
        block = bytes(data.active.data)
        headers = [h for h in iter_batches(block) if isinstance(h, BatchHeader)]
        offsets = data.next_offset
        seq_span = {pid: p.last_sequence + 1 for pid, p in data.producers.items()}
        copies = max(1, -(-segment_bytes // len(block)))
        per_segment = copies if segment_max_bytes is None else max(1, segment_max_bytes // len(block))
        # producer state, aborted index and log end as after the last copy
        last = copies - 1
        for pid, p in data.producers.items():
            p.last_sequence += last * seq_span[pid]
            p.last_offset += last * offsets
            p.timestamp += last * span
        aborted = data.active.aborted
        data.segments = [
            Segment(first * offsets, aborted=[
                replace(a, first_offset=a.first_offset + r * offsets, last_offset=a.last_offset + r * offsets,
                        last_stable_offset=a.last_stable_offset + r * offsets)
                for r in range(first, min(first + per_segment, copies)) for a in aborted
            ])
            for first in range(0, copies, per_segment)
        ]
        data.next_offset = copies * offsets
        plans.append((data, block, headers, offsets, seq_span, copies, per_segment))
    broker.write(Path(out) / "broker-1", _TOPIC_IDS)
    for data, block, headers, offsets, seq_span, copies, per_segment in plans:
        for first in range(0, copies, per_segment):
            write_block_copies(Path(out) / "broker-1" / data.name, block, headers, offsets, span,
                               range(first, min(first + per_segment, copies)), _shift_sequences(seq_span))
    return Path(out) / "broker-1" / data_logs[0].name / segment_file_name(0, "log")


#: rewrites the fields of batch ``header`` (at its position in ``buf``) that copy ``r`` of a block
#: shifts beyond its offsets and timestamps (sequences, producer ids); the CRC is recomputed after
CopyRewrite = Callable[[bytearray, BatchHeader, int], None]


def write_block_copies(folder: Path, block: bytes, headers: list[BatchHeader], offsets: int, span: int,
                       copies: range, rewrite: CopyRewrite) -> None:
    """The ``.log``, ``.index`` and ``.timeindex`` of the segment holding copies ``copies`` of the
    block: copy ``r`` has its batches' offsets advanced by ``r * offsets``, their timestamps by
    ``r * span``, and whatever ``rewrite`` changes, with their CRCs recomputed."""
    seg_base = copies.start * offsets
    index = bytearray()
    time_index = bytearray()
    since_index, max_ts = 0, -1
    with open(folder / segment_file_name(seg_base, "log"), "wb") as log:
        for k, r in enumerate(copies):
            buf = bytearray(block)
            mv = memoryview(buf)
            base = k * len(block)
            for h in headers:
                p = h.position
                last_offset = h.last_offset + r * offsets
                batch_max_ts = h.max_timestamp + r * span
                if r:
                    _Q.pack_into(buf, p + OFFSET_OFFSET, h.base_offset + r * offsets)
                    _Q.pack_into(buf, p + BASE_TIMESTAMP_OFFSET, h.first_timestamp + r * span)
                    _Q.pack_into(buf, p + MAX_TIMESTAMP_OFFSET, batch_max_ts)
                    rewrite(buf, h, r)
                    _U.pack_into(buf, p + CRC_OFFSET, crc32c(mv[p + ATTRIBUTES_OFFSET : p + h.size_bytes]))
                if since_index > INDEX_INTERVAL_BYTES:
                    index += _I.pack(last_offset - seg_base) + _I.pack(base + p)
                    since_index = 0
                since_index += h.size_bytes
                if batch_max_ts > max_ts:
                    max_ts = batch_max_ts
                    time_index += _Q.pack(batch_max_ts) + _I.pack(last_offset - seg_base)
            mv.release()
            log.write(buf)
    (folder / segment_file_name(seg_base, "index")).write_bytes(bytes(index))
    (folder / segment_file_name(seg_base, "timeindex")).write_bytes(bytes(time_index))


def _shift_sequences(seq_span: dict[int, int]) -> CopyRewrite:
    """Copy ``r`` of a block continues each producer's sequences where copy ``r - 1`` ended."""
    def rewrite(buf: bytearray, h: BatchHeader, r: int) -> None:
        if h.base_sequence >= 0:
            _I.pack_into(buf, h.position + BASE_SEQUENCE_OFFSET, h.base_sequence + r * seq_span[h.producer_id])
    return rewrite


__all__ = ["IDEMPOTENT_PRODUCER_ID", "LARGE_TOPIC", "CopyRewrite", "write_block_copies", "write_large_dump"]
