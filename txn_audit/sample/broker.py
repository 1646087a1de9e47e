"""A small in-memory imitation of a Kafka broker's log layer, used to write sample dumps.

It appends encoded batches the way a partition leader does and keeps what the broker keeps
beside the log: producer state (for ``.snapshot`` files and the LSO), the sparse ``.index``,
the ``.timeindex``, the ``.txnindex`` of aborted transactions, segment rolls, and the
checkpoint files. It does not validate (the point is to be able to write the anomalies a
real broker sometimes lets through); everything it writes uses ``txn_audit.formats``'
encoders, so the sample exercises the same byte layouts the decoders read.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from txn_audit.formats.checkpoint import encode_offset_checkpoint, encode_properties
from txn_audit.formats.model import (
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    AbortedTxn,
    OffsetIndexEntry,
    ProducerSnapshotEntry,
    Record,
    TimeIndexEntry,
)
from txn_audit.formats.offset_index import encode_offset_index, encode_time_index
from txn_audit.formats.record_batch import encode_batch, encode_control_batch
from txn_audit.formats.snapshot import encode_producer_snapshot
from txn_audit.formats.txnindex import encode_txn_index

INDEX_INTERVAL_BYTES = 4096


def segment_file_name(base_offset: int, suffix: str) -> str:
    return f"{base_offset:020d}.{suffix}"


@dataclass
class ProducerState:
    producer_id: int
    epoch: int = -1
    last_sequence: int = -1
    last_offset: int = -1
    offset_delta: int = 0
    timestamp: int = -1
    coordinator_epoch: int = -1
    current_txn_first_offset: int = -1

    def snapshot_entry(self) -> ProducerSnapshotEntry:
        return ProducerSnapshotEntry(
            producer_id=self.producer_id,
            producer_epoch=self.epoch,
            last_sequence=self.last_sequence,
            last_offset=self.last_offset,
            offset_delta=self.offset_delta,
            timestamp=self.timestamp,
            coordinator_epoch=self.coordinator_epoch,
            current_txn_first_offset=self.current_txn_first_offset,
        )


@dataclass
class Segment:
    base_offset: int
    data: bytearray = field(default_factory=bytearray)
    index: list[OffsetIndexEntry] = field(default_factory=list)
    time_index: list[TimeIndexEntry] = field(default_factory=list)
    aborted: list[AbortedTxn] = field(default_factory=list)
    bytes_since_index: int = 0
    max_timestamp: int = -1


@dataclass
class AppendInfo:
    """Where a batch landed."""

    base_offset: int
    last_offset: int
    position: int
    segment_base_offset: int
    size: int


class PartitionLog:
    """One partition replica's log: segments plus the producer state derived from them."""

    def __init__(self, topic: str, partition: int, *, segment_bytes: int = 64 * 1024, leader_epoch: int = 0) -> None:
        self.topic = topic
        self.partition = partition
        self.segment_bytes = segment_bytes
        self.leader_epoch = leader_epoch
        self.segments: list[Segment] = [Segment(0)]
        self.next_offset = 0
        self.producers: dict[int, ProducerState] = {}
        self.snapshots: dict[int, list[ProducerSnapshotEntry]] = {}
        self.truncate_tail_bytes = 0  # bytes cut off the active segment when written (a crash)
        self.corrupt_positions: list[tuple[int, int]] = []  # (segment base, byte position) flipped when written
        self.appends: list[AppendInfo] = []

    @property
    def name(self) -> str:
        return f"{self.topic}-{self.partition}"

    @property
    def active(self) -> Segment:
        return self.segments[-1]

    # -- producer state ---------------------------------------------------------------

    def _producer(self, pid: int) -> ProducerState:
        if pid not in self.producers:
            self.producers[pid] = ProducerState(pid)
        return self.producers[pid]

    def ongoing_first_offsets(self) -> dict[int, int]:
        return {p.producer_id: p.current_txn_first_offset for p in self.producers.values()
                if p.current_txn_first_offset >= 0}

    def last_stable_offset(self, high_watermark: int | None = None) -> int:
        hw = self.next_offset if high_watermark is None else high_watermark
        firsts = list(self.ongoing_first_offsets().values())
        return min([hw] + [f for f in firsts if f < hw])

    # -- appends ----------------------------------------------------------------------

    def _roll_if_needed(self, size: int) -> None:
        if self.active.data and len(self.active.data) + size > self.segment_bytes:
            self.snapshots[self.next_offset] = [p.snapshot_entry() for p in self.producers.values()]
            self.segments.append(Segment(self.next_offset))

    def _append_bytes(self, blob: bytes, base: int, last: int, max_ts: int) -> AppendInfo:
        self._roll_if_needed(len(blob))
        seg = self.active
        position = len(seg.data)
        if seg.bytes_since_index > INDEX_INTERVAL_BYTES:
            seg.index.append(OffsetIndexEntry(offset=last, position=position))
            seg.bytes_since_index = 0
        seg.data += blob
        seg.bytes_since_index += len(blob)
        if max_ts > seg.max_timestamp:
            seg.max_timestamp = max_ts
            seg.time_index.append(TimeIndexEntry(timestamp=max_ts, offset=last))
        self.next_offset = last + 1
        info = AppendInfo(base, last, position, seg.base_offset, len(blob))
        self.appends.append(info)
        return info

    def append(
        self,
        records: Sequence[tuple[bytes | None, bytes | None, int]],
        *,
        producer_id: int = NO_PRODUCER_ID,
        producer_epoch: int = NO_PRODUCER_EPOCH,
        base_sequence: int = NO_SEQUENCE,
        transactional: bool = False,
        compression: int = 0,
    ) -> AppendInfo:
        """Append one data batch of ``(key, value, timestamp)`` records at the log end."""
        base = self.next_offset
        recs = [Record(offset=base + i, timestamp=ts, key=k, value=v) for i, (k, v, ts) in enumerate(records)]
        blob = encode_batch(
            recs,
            base_offset=base,
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            base_sequence=base_sequence,
            is_transactional=transactional,
            compression=compression,
            partition_leader_epoch=self.leader_epoch,
        )
        last = base + len(records) - 1
        max_ts = max(ts for _, _, ts in records)
        info = self._append_bytes(blob, base, last, max_ts)
        if producer_id >= 0:
            p = self._producer(producer_id)
            if producer_epoch != p.epoch:
                p.epoch = producer_epoch
            p.last_sequence = base_sequence + len(records) - 1 if base_sequence >= 0 else -1
            p.last_offset = last
            p.offset_delta = len(records) - 1
            p.timestamp = max_ts
            if transactional and p.current_txn_first_offset < 0:
                p.current_txn_first_offset = base
        return info

    def append_marker(
        self, *, producer_id: int, producer_epoch: int, marker_type: str, coordinator_epoch: int, timestamp: int
    ) -> AppendInfo:
        """Append a COMMIT/ABORT control batch; an ABORT of a non-empty transaction is indexed."""
        offset = self.next_offset
        blob = encode_control_batch(
            offset=offset,
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            marker_type=marker_type,
            coordinator_epoch=coordinator_epoch,
            timestamp=timestamp,
            partition_leader_epoch=self.leader_epoch,
        )
        p = self._producer(producer_id)
        first = p.current_txn_first_offset
        aborted = None
        if marker_type == "ABORT" and first >= 0:
            others = [f for pid, f in self.ongoing_first_offsets().items() if pid != producer_id]
            aborted = AbortedTxn(0, producer_id, first, offset, min(others) if others else offset + 1)
        info = self._append_bytes(blob, offset, offset, timestamp)
        if aborted is not None:
            self.active.aborted.append(aborted)  # indexed in the segment the marker landed in
        if producer_epoch > p.epoch:
            p.epoch = producer_epoch
            p.last_sequence, p.last_offset, p.offset_delta = -1, -1, 0  # epoch change clears batch metadata
        p.timestamp = timestamp
        p.coordinator_epoch = coordinator_epoch
        p.current_txn_first_offset = -1
        return info

    # -- writing ----------------------------------------------------------------------

    def write(self, folder: Path, *, clean_shutdown: bool, topic_id: str) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        for i, seg in enumerate(self.segments):
            data = bytearray(seg.data)
            for base, position in self.corrupt_positions:
                if base == seg.base_offset:
                    data[position] ^= 0x40
            is_active = i == len(self.segments) - 1
            if is_active and self.truncate_tail_bytes:
                data = data[: len(data) - self.truncate_tail_bytes]
            (folder / segment_file_name(seg.base_offset, "log")).write_bytes(bytes(data))
            (folder / segment_file_name(seg.base_offset, "index")).write_bytes(
                encode_offset_index(seg.index, base_offset=seg.base_offset)
            )
            (folder / segment_file_name(seg.base_offset, "timeindex")).write_bytes(
                encode_time_index(seg.time_index, base_offset=seg.base_offset)
            )
            if seg.aborted:
                (folder / segment_file_name(seg.base_offset, "txnindex")).write_bytes(encode_txn_index(seg.aborted))
        snapshots = dict(self.snapshots)
        if clean_shutdown:
            snapshots[self.next_offset] = [p.snapshot_entry() for p in self.producers.values()]
        for offset, entries in sorted(snapshots.items()):
            (folder / segment_file_name(offset, "snapshot")).write_bytes(encode_producer_snapshot(entries))
        (folder / "leader-epoch-checkpoint").write_text(f"0\n1\n{self.leader_epoch} 0\n")
        (folder / "partition.metadata").write_text(f"version: 0\ntopic_id: {topic_id}\n")


@dataclass
class Broker:
    node_id: int
    cluster_id: str
    logs: dict[str, PartitionLog] = field(default_factory=dict)
    clean_shutdown: bool = True
    #: per partition: high watermark if it lags the log end (followers, crashes)
    high_watermarks: dict[str, int] = field(default_factory=dict)

    def add(self, log: PartitionLog) -> PartitionLog:
        self.logs[log.name] = log
        return log

    def write(self, log_dir: Path, topic_ids: dict[str, str]) -> None:
        log_dir.mkdir(parents=True, exist_ok=True)
        (log_dir / "meta.properties").write_text(
            encode_properties({"cluster.id": self.cluster_id, "node.id": str(self.node_id), "version": "1"})
        )
        hw: dict[tuple[str, int], int] = {}
        for name, log in self.logs.items():
            log.write(log_dir / name, clean_shutdown=self.clean_shutdown, topic_id=topic_ids[log.topic])
            hw[(log.topic, log.partition)] = self.high_watermarks.get(name, log.next_offset)
        (log_dir / "replication-offset-checkpoint").write_text(encode_offset_checkpoint(hw))
        (log_dir / "recovery-point-offset-checkpoint").write_text(encode_offset_checkpoint(
            {k: (v if self.clean_shutdown else self.logs[f"{k[0]}-{k[1]}"].active.base_offset) for k, v in hw.items()}
        ))
        (log_dir / "log-start-offset-checkpoint").write_text(encode_offset_checkpoint({}))
        (log_dir / "cleaner-offset-checkpoint").write_bytes(b"")
        if self.clean_shutdown:
            (log_dir / ".kafka_cleanshutdown").write_bytes(b"")
