"""Vectorised decoding of transaction markers: the canonical 78-byte v2 control batch.

A COMMIT or ABORT marker as brokers write it is one uncompressed control batch of one record:
the 61-byte header, then a 17-byte record whose layout is fixed (length 16, attributes,
timestamp and offset deltas 0, a 4-byte key ``[version, type]``, a 6-byte value
``[version, coordinator epoch]``, no headers). Such batches are read here for many rows at
once with NumPy; every other control batch, or one whose fixed bytes or values differ in any
way, is left to the reference decoder (``record_batch.control_marker_of``), which gives the
same values or the issue. The tests check both paths agree on the real corpus and on
mutated batches.
"""

from __future__ import annotations

import mmap
from dataclasses import dataclass
from typing import Final

import numpy as np

from txn_audit.formats.fast_headers import HeaderColumns
from txn_audit.formats.record_batch import CONTROL_ABORT, CONTROL_COMMIT, RECORDS_OFFSET, as_view
from txn_audit.formats.records import MAGIC_VALUE_V2

CANONICAL_SIZE: Final = 78
_RECORD_BYTES: Final = CANONICAL_SIZE - RECORDS_OFFSET
# byte of the record -> its required value (length 16, deltas 0, key length 4, value length 6, no headers)
_FIXED: Final = ((0, 0x20), (2, 0x00), (3, 0x00), (4, 0x08), (9, 0x0C), (16, 0x00))


@dataclass(frozen=True, slots=True)
class MarkerColumns:
    """The markers of canonical control batches, one array per ``ControlMarker`` field."""

    rows: np.ndarray  # int64: row of the batch in the ``HeaderColumns`` given
    offset: np.ndarray  # int64
    producer_id: np.ndarray  # int64
    producer_epoch: np.ndarray  # int16
    control_type: np.ndarray  # int16 (0 ABORT, 1 COMMIT)
    coordinator_epoch: np.ndarray  # int32
    timestamp: np.ndarray  # int64
    key_version: np.ndarray  # int16
    value_version: np.ndarray  # int16

    def __len__(self) -> int:
        return int(self.rows.shape[0])


def _be16(rec: np.ndarray, at: int) -> np.ndarray:
    values: np.ndarray = ((rec[:, at].astype(np.uint16) << 8) | rec[:, at + 1]).view(np.int16)
    return values


def canonical_markers(buf: bytes | bytearray | memoryview | mmap.mmap, cols: HeaderColumns,
                      rows: np.ndarray) -> MarkerColumns:
    """Markers of the control batches at ``rows`` of ``cols`` that are canonical (see above);
    ``MarkerColumns.rows`` says which. Callers pass only batches whose CRC matched."""
    rows = np.asarray(rows, dtype=np.int64)
    ok = (
        (cols.size_bytes[rows] == CANONICAL_SIZE)
        & cols.is_control[rows]
        & (cols.compression[rows] == 0)
        & (cols.record_count[rows] == 1)
        & ~cols.has_delete_horizon[rows]
        & (cols.magic[rows] == MAGIC_VALUE_V2)
    )
    rows = rows[ok]
    view = as_view(buf)
    try:
        u8 = np.frombuffer(view, dtype=np.uint8)
        starts = cols.position[rows] + RECORDS_OFFSET
        rec = u8[starts[:, None] + np.arange(_RECORD_BYTES)] if len(rows) else np.empty((0, _RECORD_BYTES), np.uint8)
        del u8
    finally:
        if view is not buf:
            view.release()
    for at, value in _FIXED:
        ok = rec[:, at] == value
        rows, rec = rows[ok], rec[ok]
    key_version, control_type, value_version = _be16(rec, 5), _be16(rec, 7), _be16(rec, 10)
    is_marker = (control_type == CONTROL_ABORT) | (control_type == CONTROL_COMMIT)
    keep = (key_version >= 0) & is_marker & (value_version >= 0)
    rows, rec = rows[keep], rec[keep]
    epoch = (
        (rec[:, 12].astype(np.uint32) << 24) | (rec[:, 13].astype(np.uint32) << 16)
        | (rec[:, 14].astype(np.uint32) << 8) | rec[:, 15]
    ).view(np.int32)
    log_append = cols.timestamp_type[rows] == 1
    return MarkerColumns(
        rows=rows,
        offset=cols.base_offset[rows],
        producer_id=cols.producer_id[rows],
        producer_epoch=cols.producer_epoch[rows],
        control_type=control_type[keep],
        coordinator_epoch=epoch,
        timestamp=np.where(log_append, cols.max_timestamp[rows], cols.first_timestamp[rows]),
        key_version=key_version[keep],
        value_version=value_version[keep],
    )
