"""Producer-state snapshot files (``<offset>.snapshot``), file version 1 (Kafka 0.11 - 4.2).

Layout: int16 version (= 1), uint32 CRC-32C of bytes [6, EOF), int32 entry count N, then N
46-byte entries ``>qhiqiqiq``: ProducerId int64, Epoch int16, LastSequence int32, LastOffset
int64, OffsetDelta int32, Timestamp int64, CoordinatorEpoch int32, CurrentTxnFirstOffset int64
(-1 = no open transaction). The file name's offset is where replay continues: the state holds
every batch below it. Entry order is arbitrary (hash-map order).

Kafka sources: ``ProducerSnapshot.json``, ``ProducerStateManager.java`` (``readSnapshot``,
``writeSnapshot``; ``ProducerStateManager.scala`` up to 3.4), ``ProducerStateEntry.java``,
``BatchMetadata.java``. See kafka-formats.md section 5.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from typing import Final

from crc32c import crc32c

from txn_audit.errors import CorruptInputError
from txn_audit.formats.model import IssueKind, ProducerSnapshot, ProducerSnapshotEntry
from txn_audit.formats.primitives import INT32_MAX, Buffer

SNAPSHOT_VERSION: Final = 1
HEADER: Final = struct.Struct(">hIi")  # version, crc, entry count
ENTRY: Final = struct.Struct(">qhiqiqiq")
HEADER_SIZE: Final = HEADER.size  # 10
ENTRY_SIZE: Final = ENTRY.size  # 46
CRC_START: Final = 6  # the CRC covers the entry count and the entries

_BAD: Final = IssueKind.BAD_SNAPSHOT.value


def decode_producer_snapshot(data: Buffer) -> ProducerSnapshot:
    """Decode a whole snapshot file.

    A wrong version, a short header or an entry count that does not match the file length
    exactly raises ``CorruptInputError`` (kind ``bad_snapshot``): the entries cannot be
    trusted then. A CRC mismatch does **not** raise: the entries are returned with
    ``stored_crc``/``computed_crc`` so the caller can report that the broker would have
    discarded this snapshot and still show what it held.
    """
    mv = memoryview(data)
    if len(mv) < HEADER_SIZE:
        raise CorruptInputError(_BAD, 0, f"snapshot of {len(mv)} bytes is shorter than its {HEADER_SIZE}-byte header")
    version, stored_crc, count = HEADER.unpack_from(mv, 0)
    if version != SNAPSHOT_VERSION:
        raise CorruptInputError(_BAD, 0, f"snapshot version {version}, only {SNAPSHOT_VERSION} is known")
    body = len(mv) - HEADER_SIZE
    if count < 0 or count * ENTRY_SIZE != body:
        raise CorruptInputError(
            _BAD,
            CRC_START,
            f"entry count {count} needs {max(count, 0) * ENTRY_SIZE} bytes of entries, the file has {body}"
            + (f" ({body // ENTRY_SIZE} whole entries + {body % ENTRY_SIZE} bytes)" if body % ENTRY_SIZE else ""),
        )
    computed = crc32c(mv[CRC_START:])
    entries = tuple(
        ProducerSnapshotEntry(*ENTRY.unpack_from(mv, HEADER_SIZE + i * ENTRY_SIZE)) for i in range(count)
    )
    return ProducerSnapshot(version=version, stored_crc=stored_crc, computed_crc=computed, entries=entries)


def encode_producer_snapshot(entries: Iterable[ProducerSnapshotEntry]) -> bytes:
    """A version-1 snapshot file holding ``entries`` in the given order, with a valid CRC."""
    items = list(entries)
    body = bytearray(struct.pack(">i", len(items)))
    for e in items:
        body += ENTRY.pack(
            e.producer_id,
            e.producer_epoch,
            e.last_sequence,
            e.last_offset,
            e.offset_delta,
            e.timestamp,
            e.coordinator_epoch,
            e.current_txn_first_offset,
        )
    return struct.pack(">hI", SNAPSHOT_VERSION, crc32c(bytes(body))) + bytes(body)


def first_sequence(entry: ProducerSnapshotEntry) -> int:
    """First sequence of the entry's last batch: ``lastSequence - offsetDelta`` with the 31-bit
    wrap of ``DefaultRecordBatch.decrementSequence`` (what DumpLogSegments prints)."""
    seq, dec = entry.last_sequence, entry.offset_delta
    return INT32_MAX - (dec - seq) + 1 if seq < dec else seq - dec


def has_batch_metadata(entry: ProducerSnapshotEntry) -> bool:
    """Whether the broker rebuilds batch metadata from this entry (``lastOffset >= 0``)."""
    return entry.last_offset >= 0
