"""Vectorised decoding of coordinator records: ``__transaction_state`` and ``__consumer_offsets``.

The reference decoders (``txn_state``, ``consumer_offsets``) build one ``Record`` and one
value object per record, about 60 µs each. Here one compiled pass (numba) walks every record
of many uncompressed v2 batches and writes the decoded fields straight into column blocks, from
which Arrow arrays are built whole. What is read, at which byte:

* the batch (``record_batch``): records start at ``RECORDS_OFFSET`` (61) and run to the batch's
  end; each is varint length, int8 attributes, varlong timestampDelta, varint offsetDelta,
  varint key length + key, varint value length + value (negative = null), varint header count
  and headers (walked, not kept). The same checks as the reference record parser: declared
  length = bytes used, exactly recordsCount records, nothing left over.
* ``TransactionLogKey`` v0: ``[0]`` int16 version, ``[2]`` int16 length + UTF-8 transactionalId,
  nothing after.
* ``TransactionLogValue`` v0/v1: ``[0]`` int16 version, ``[2]`` int64 producerId, ``[10]`` int16
  producerEpoch, ``[12]`` int32 timeout, ``[16]`` int8 state, ``[17]`` the partitions array
  (v0 int32 count, -1 null, string16 topics, int32 id counts; v1 compact counts and strings
  and a tagged-field section per element), then int64 lastUpdate, int64 start and, in v1, the
  tagged fields (0 PreviousProducerId, 1 NextProducerId int64; 2 ClientTransactionVersion,
  3 NextProducerEpoch int16; other tags skipped by size). A null value is a tombstone.
* ``__consumer_offsets`` key: ``[0]`` int16 version; 0/1 ``OffsetCommitKey`` (string16 group,
  string16 topic, int32 partition), 2 ``GroupMetadataKey`` (string16 group: checked, then the
  record is skipped), 3 and up skipped unread.
* ``OffsetCommitValue`` v0-v4: ``[0]`` int16 version, ``[2]`` int64 offset, then int32
  leaderEpoch (v3+), metadata (string16; compact in v4), int64 commitTimestamp, int64
  expireTimestamp (v1 only), tagged fields (v4).

Strings are checked as strict UTF-8, as Python's decoder checks them. Anything the walk is not
sure to decode exactly as the reference (a compressed batch, a batch whose CRC failed, an
unknown version, a record the reference would reject or report) marks the whole batch
*fallback*: the caller runs the reference decoder on it, so its rows and issues stay the
reference's. The tests check both paths agree on the real corpus, on generated records of
every version and under the fuzz suite's mutations.

API: ``decode_coordinator_batches(buf, header_columns, rows, kind)`` with ``kind``
``TRANSACTION_STATE`` or ``CONSUMER_OFFSETS`` returns ``CoordinatorRecords``: a ``pa.Table``
of the ``txn_log`` / ``offset_commits`` columns (``TXN_LOG_COLUMNS``, ``OFFSET_COMMIT_COLUMNS``:
the worker's tables without the replica and file columns), each row's batch, and the batches
handed back.
"""

from __future__ import annotations

import mmap
from dataclasses import dataclass
from typing import Final

import numba
import numpy as np
import pyarrow as pa

from txn_audit.formats.consumer_offsets import (
    GROUP_METADATA_KEY_VERSION,
    OFFSET_COMMIT_KEY_VERSIONS,
    OFFSET_COMMIT_VALUE_VERSIONS,
)
from txn_audit.formats.fast_headers import HeaderColumns
from txn_audit.formats.model import TIMESTAMP_TYPE_NAMES, TXN_STATES
from txn_audit.formats.primitives import VARINT_MAX_BYTES, VARLONG_MAX_BYTES
from txn_audit.formats.record_batch import RECORDS_OFFSET, as_view
from txn_audit.formats.records import MAGIC_VALUE_V2
from txn_audit.formats.txn_state import (
    HIGHEST_VALUE_VERSION,
    KEY_VERSION,
    TAG_CLIENT_TRANSACTION_VERSION,
    TAG_NEXT_PRODUCER_EPOCH,
    TAG_NEXT_PRODUCER_ID,
    TAG_PREVIOUS_PRODUCER_ID,
)

TRANSACTION_STATE: Final = 0
CONSUMER_OFFSETS: Final = 1

# Widths of the fixed-size fields read below (Kafka's int8/int16/int32/int64).
_I8: Final = 1
_I16: Final = 2
_I32: Final = 4
_I64: Final = 8
_LOG_APPEND_TIME: Final = next(t for t, name in TIMESTAMP_TYPE_NAMES.items() if name == "LogAppendTime")
_NULL_ARRAY_V0: Final = -1  # an int32 array count of -1 is a null array (a compact count of 0)

# OffsetCommitValue versions (OffsetCommitValue.json): expireTimestamp only in v1, leaderEpoch
# from v3, flexible (compact metadata, tagged fields) from v4
_OFFSET_VALUE_WITH_EXPIRE: Final = 1
_OFFSET_VALUE_WITH_EPOCH: Final = 3
_OFFSET_VALUE_FLEXIBLE: Final = 4
_OFFSET_VALUE_MIN: Final = min(OFFSET_COMMIT_VALUE_VERSIONS)
_OFFSET_VALUE_MAX: Final = max(OFFSET_COMMIT_VALUE_VERSIONS)
_OFFSET_KEY_MIN: Final = min(OFFSET_COMMIT_KEY_VERSIONS)
_OFFSET_KEY_MAX: Final = max(OFFSET_COMMIT_KEY_VERSIONS)
assert set(OFFSET_COMMIT_KEY_VERSIONS) == set(range(_OFFSET_KEY_MIN, _OFFSET_KEY_MAX + 1))
assert set(OFFSET_COMMIT_VALUE_VERSIONS) == set(range(_OFFSET_VALUE_MIN, _OFFSET_VALUE_MAX + 1))
assert _OFFSET_VALUE_FLEXIBLE == _OFFSET_VALUE_MAX
_TXN_VALUE_FLEXIBLE: Final = HIGHEST_VALUE_VERSION  # v1: the flexible TransactionLogValue

# smallest record: length, attributes, timestamp and offset deltas, key and value lengths,
# header count, one byte each
_MIN_RECORD_BYTES: Final = 7

# -- compiled walk ---------------------------------------------------------------------

# rows of the per-record block (one column per output record). S1 is the transactional id or
# the group, S2 the commit topic (start and length in the buffer). The value fields A-F are
# per topic: txn value A producerId, B producerEpoch, C previous and D next producerId,
# E nextProducerEpoch, F timeout; offset commit A offset, B leaderEpoch, C commitTimestamp,
# D expireTimestamp, E/F metadata start/length. ELEM0/ELEM1: the value's partition elements
# (-1 for a null array).
(_R_BATCH, _R_OFFSET, _R_TS, _R_KEY_VERSION, _R_S1, _R_S1_LEN, _R_S2, _R_S2_LEN, _R_PART, _R_TOMB, _R_VVER,
 _R_A, _R_B, _R_C, _R_D, _R_E, _R_F, _R_STATE, _R_LAST, _R_START, _R_CTV, _R_ELEM0, _R_ELEM1) = range(23)
_NCOLS: Final = 23
# rows of the per-partition-element block (txn values): topic start, topic length, partition
_E_TOPIC, _E_TOPIC_LEN, _E_PART = range(3)
_ECOLS: Final = 3

_FAIL: Final = -1  # a read failed: the reference would raise


@numba.njit(cache=True, nogil=True, inline="always")
def _be(u8: np.ndarray, p: int, width: int) -> int:  # pragma: no cover - compiled
    v = np.uint64(0)
    for k in range(width):
        v = (v << np.uint64(8)) | np.uint64(u8[p + k])
    if width < _I64:
        sign = np.uint64(1) << np.uint64(8 * width - 1)
        if v & sign:
            return int(np.int64(v) - (np.int64(1) << np.int64(8 * width)))
    return int(np.int64(v))


@numba.njit(cache=True, nogil=True, inline="always")
def _uvarint(u8: np.ndarray, p: int, stop: int, max_bytes: int) -> tuple[int, int]:  # pragma: no cover
    """Unsigned LEB128 at ``p`` (as ``primitives.read_uvarint``, value not masked): (value, next
    position), next position ``_FAIL`` when it runs past ``stop`` or is too long."""
    result = np.uint64(0)
    shift = np.uint64(0)
    start = p
    while True:
        if p >= stop:
            return 0, _FAIL
        b = u8[p]
        p += 1
        result |= np.uint64(b & 0x7F) << shift
        if not b & 0x80:
            return int(np.int64(result)), p
        shift += np.uint64(7)
        if p - start >= max_bytes:
            return 0, _FAIL


@numba.njit(cache=True, nogil=True, inline="always")
def _varint(u8: np.ndarray, p: int, stop: int) -> tuple[int, int]:  # pragma: no cover - compiled
    """Zig-zag varint: the low 32 bits of the LEB128 value, as Java reads it."""
    u, p = _uvarint(u8, p, stop, VARINT_MAX_BYTES)
    v = np.uint64(u) & np.uint64(0xFFFFFFFF)
    return int(np.int64(v >> np.uint64(1)) ^ -np.int64(v & np.uint64(1))), p


@numba.njit(cache=True, nogil=True, inline="always")
def _varlong(u8: np.ndarray, p: int, stop: int) -> tuple[int, int]:  # pragma: no cover - compiled
    u, p = _uvarint(u8, p, stop, VARLONG_MAX_BYTES)
    v = np.uint64(u)
    return int(np.int64(v >> np.uint64(1)) ^ -np.int64(v & np.uint64(1))), p


@numba.njit(cache=True, nogil=True, inline="always")
def _cont(u8: np.ndarray, p: int, lo: int, hi: int) -> bool:  # pragma: no cover - compiled
    return bool(lo <= u8[p] <= hi)


@numba.njit(cache=True, nogil=True)
def _utf8_ok(u8: np.ndarray, p: int, n: int) -> bool:  # pragma: no cover - compiled
    """Whether ``u8[p:p+n]`` is UTF-8 that Python's strict decoder accepts (no surrogates,
    no overlong forms, nothing above U+10FFFF)."""
    stop = p + n
    while p < stop:
        b = u8[p]
        if b < 0x80:
            p += 1
            continue
        if 0xC2 <= b <= 0xDF:
            if p + 1 >= stop or not _cont(u8, p + 1, 0x80, 0xBF):
                return False
            p += 2
            continue
        if 0xE0 <= b <= 0xEF:
            lo = 0xA0 if b == 0xE0 else 0x80
            hi = 0x9F if b == 0xED else 0xBF
            if p + 2 >= stop or not _cont(u8, p + 1, lo, hi) or not _cont(u8, p + 2, 0x80, 0xBF):
                return False
            p += 3
            continue
        if 0xF0 <= b <= 0xF4:
            lo = 0x90 if b == 0xF0 else 0x80
            hi = 0x8F if b == 0xF4 else 0xBF
            if (p + 3 >= stop or not _cont(u8, p + 1, lo, hi) or not _cont(u8, p + 2, 0x80, 0xBF)
                    or not _cont(u8, p + 3, 0x80, 0xBF)):
                return False
            p += 4
            continue
        return False
    return True


@numba.njit(cache=True, nogil=True, inline="always")
def _string16(u8: np.ndarray, p: int, stop: int) -> tuple[int, int]:  # pragma: no cover - compiled
    """Non-nullable string16 at ``p``: (length, position after), ``_FAIL`` when the reference
    would reject it."""
    if p + _I16 > stop:
        return 0, _FAIL
    n = _be(u8, p, _I16)
    p += _I16
    if n < 0 or p + n > stop or not _utf8_ok(u8, p, n):
        return 0, _FAIL
    return n, p + n


@numba.njit(cache=True, nogil=True, inline="always")
def _compact_string(u8: np.ndarray, p: int, stop: int) -> tuple[int, int]:  # pragma: no cover - compiled
    u, p = _uvarint(u8, p, stop, VARINT_MAX_BYTES)
    if p == _FAIL:
        return 0, _FAIL
    n = u - 1
    if n < 0 or p + n > stop or not _utf8_ok(u8, p, n):
        return 0, _FAIL
    return n, p + n


@numba.njit(cache=True, nogil=True, inline="always")
def _skip_tagged(u8: np.ndarray, p: int, stop: int) -> int:  # pragma: no cover - compiled
    count, p = _uvarint(u8, p, stop, VARINT_MAX_BYTES)
    if p == _FAIL:
        return _FAIL
    for _ in range(count):
        _tag, p = _uvarint(u8, p, stop, VARINT_MAX_BYTES)
        if p == _FAIL:
            return _FAIL
        size, p = _uvarint(u8, p, stop, VARINT_MAX_BYTES)
        if p == _FAIL or p + size > stop:
            return _FAIL
        p += size
    return p


@numba.njit(cache=True, nogil=True)
def _txn_value(u8: np.ndarray, p: int, stop: int, out: np.ndarray, r: int, elems: np.ndarray,
               ne: int) -> int:  # pragma: no cover - compiled
    """A ``TransactionLogValue`` into row ``r`` and its partitions from ``elems[ne]`` on: the
    new element count, or ``_FAIL``."""
    if p + _I16 > stop:
        return _FAIL
    version = _be(u8, p, _I16)
    p += _I16
    if version < 0 or version > HIGHEST_VALUE_VERSION:
        return _FAIL
    flexible = version >= _TXN_VALUE_FLEXIBLE
    if p + _I64 + _I16 + _I32 + _I8 > stop:
        return _FAIL
    out[_R_VVER, r] = version
    out[_R_A, r] = _be(u8, p, _I64)
    out[_R_B, r] = _be(u8, p + _I64, _I16)
    out[_R_F, r] = _be(u8, p + _I64 + _I16, _I32)
    out[_R_STATE, r] = _be(u8, p + _I64 + _I16 + _I32, _I8)
    p += _I64 + _I16 + _I32 + _I8
    # TransactionPartitions
    if flexible:
        count, p = _uvarint(u8, p, stop, VARINT_MAX_BYTES)
        if p == _FAIL:
            return _FAIL
        count -= 1
    else:
        if p + _I32 > stop:
            return _FAIL
        count = _be(u8, p, _I32)
        p += _I32
    if count == _NULL_ARRAY_V0:
        out[_R_ELEM0, r] = -1
        out[_R_ELEM1, r] = -1
    else:
        if count < 0 or count > stop - p:
            return _FAIL
        out[_R_ELEM0, r] = ne
        for _ in range(count):
            if flexible:
                n, q = _compact_string(u8, p, stop)
            else:
                n, q = _string16(u8, p, stop)
            if q == _FAIL:
                return _FAIL
            topic = q - n
            p = q
            if flexible:
                ids, p = _uvarint(u8, p, stop, VARINT_MAX_BYTES)
                if p == _FAIL:
                    return _FAIL
                ids -= 1
            else:
                if p + _I32 > stop:
                    return _FAIL
                ids = _be(u8, p, _I32)
                p += _I32
            if ids < 0 or ids > stop - p or ids * _I32 > stop - p:
                return _FAIL
            for _k in range(ids):
                elems[_E_TOPIC, ne] = topic
                elems[_E_TOPIC_LEN, ne] = n
                elems[_E_PART, ne] = _be(u8, p, _I32)
                p += _I32
                ne += 1
            if flexible:
                p = _skip_tagged(u8, p, stop)
                if p == _FAIL:
                    return _FAIL
        out[_R_ELEM1, r] = ne
    if p + 2 * _I64 > stop:
        return _FAIL
    out[_R_LAST, r] = _be(u8, p, _I64)
    out[_R_START, r] = _be(u8, p + _I64, _I64)
    p += 2 * _I64
    out[_R_C, r] = -1  # previous producer id
    out[_R_D, r] = -1  # next producer id
    out[_R_CTV, r] = 0  # client transaction version
    out[_R_E, r] = -1  # next producer epoch
    if flexible:
        tags, p = _uvarint(u8, p, stop, VARINT_MAX_BYTES)
        if p == _FAIL:
            return _FAIL
        for _ in range(tags):
            tag, p = _uvarint(u8, p, stop, VARINT_MAX_BYTES)
            if p == _FAIL:
                return _FAIL
            size, p = _uvarint(u8, p, stop, VARINT_MAX_BYTES)
            if p == _FAIL:
                return _FAIL
            if tag == TAG_PREVIOUS_PRODUCER_ID or tag == TAG_NEXT_PRODUCER_ID:
                if size != _I64 or p + _I64 > stop:
                    return _FAIL
                out[_R_C if tag == TAG_PREVIOUS_PRODUCER_ID else _R_D, r] = _be(u8, p, _I64)
            elif tag == TAG_CLIENT_TRANSACTION_VERSION or tag == TAG_NEXT_PRODUCER_EPOCH:
                if size != _I16 or p + _I16 > stop:
                    return _FAIL
                out[_R_CTV if tag == TAG_CLIENT_TRANSACTION_VERSION else _R_E, r] = _be(u8, p, _I16)
            elif p + size > stop:
                return _FAIL
            p += size
    if p != stop:
        return _FAIL
    return ne


@numba.njit(cache=True, nogil=True)
def _offset_value(u8: np.ndarray, p: int, stop: int, out: np.ndarray, r: int) -> bool:  # pragma: no cover
    """An ``OffsetCommitValue`` into row ``r``; False when the reference would reject it."""
    if p + _I16 > stop:
        return False
    version = _be(u8, p, _I16)
    p += _I16
    if version < _OFFSET_VALUE_MIN or version > _OFFSET_VALUE_MAX:
        return False
    out[_R_VVER, r] = version
    if p + _I64 > stop:
        return False
    out[_R_A, r] = _be(u8, p, _I64)
    p += _I64
    out[_R_B, r] = -1
    if version >= _OFFSET_VALUE_WITH_EPOCH:
        if p + _I32 > stop:
            return False
        out[_R_B, r] = _be(u8, p, _I32)
        p += _I32
    if version >= _OFFSET_VALUE_FLEXIBLE:
        n, p = _compact_string(u8, p, stop)
    else:
        n, p = _string16(u8, p, stop)
    if p == _FAIL:
        return False
    out[_R_E, r] = p - n
    out[_R_F, r] = n
    if p + _I64 > stop:
        return False
    out[_R_C, r] = _be(u8, p, _I64)
    p += _I64
    out[_R_D, r] = -1
    if version == _OFFSET_VALUE_WITH_EXPIRE:
        if p + _I64 > stop:
            return False
        out[_R_D, r] = _be(u8, p, _I64)
        p += _I64
    if version >= _OFFSET_VALUE_FLEXIBLE:
        p = _skip_tagged(u8, p, stop)
        if p == _FAIL:
            return False
    return p == stop


@numba.njit(cache=True, nogil=True)
def _walk(u8: np.ndarray, kind: int, position: np.ndarray, size: np.ndarray, base_offset: np.ndarray,
          base_ts: np.ndarray, append_ts: np.ndarray, log_append: np.ndarray, count: np.ndarray,
          out: np.ndarray, elems: np.ndarray, ok: np.ndarray) -> tuple[int, int]:  # pragma: no cover - compiled
    """Records of the given batches into ``out`` (one row per output record) and ``elems``;
    ``ok[i]`` False for a batch left to the reference. Returns (rows, elements)."""
    nr = 0
    ne = 0
    for i in range(position.shape[0]):
        r0 = nr
        e0 = ne
        good = True
        pos = position[i] + RECORDS_OFFSET
        stop = position[i] + size[i]
        for _index in range(count[i]):
            if pos >= stop:
                good = False
                break
            length, body = _varint(u8, pos, stop)
            if body == _FAIL or length < 0 or body + length > stop:
                good = False
                break
            rend = body + length
            p = body
            if p >= rend:
                good = False
                break
            p += _I8  # attributes
            ts_delta, p = _varlong(u8, p, rend)
            if p == _FAIL:
                good = False
                break
            offset_delta, p = _varint(u8, p, rend)
            if p == _FAIL:
                good = False
                break
            key_len, p = _varint(u8, p, rend)
            if p == _FAIL:
                good = False
                break
            key = p
            if key_len >= 0:
                if p + key_len > rend:
                    good = False
                    break
                p += key_len
            value_len, p = _varint(u8, p, rend)
            if p == _FAIL:
                good = False
                break
            value = p
            if value_len >= 0:
                if p + value_len > rend:
                    good = False
                    break
                p += value_len
            headers, p = _varint(u8, p, rend)
            if p == _FAIL or headers < 0 or headers > rend - p:
                good = False
                break
            for _h in range(headers):
                hk, p = _varint(u8, p, rend)
                if p == _FAIL or hk < 0 or p + hk > rend:
                    good = False
                    break
                p += hk
                hv, p = _varint(u8, p, rend)
                if p == _FAIL:
                    good = False
                    break
                if hv >= 0:
                    if p + hv > rend:
                        good = False
                        break
                    p += hv
            if not good:
                break
            if p != rend:
                good = False
                break
            pos = rend
            # the record's key and value
            if key_len < 0:
                good = False  # a coordinator record without a key: the reference reports it
                break
            kend = key + key_len
            if key + _I16 > kend:
                good = False
                break
            key_version = _be(u8, key, _I16)
            if kind == TRANSACTION_STATE:
                if key_version != KEY_VERSION:
                    good = False
                    break
                n, q = _string16(u8, key + _I16, kend)
                if q == _FAIL or q != kend:
                    good = False
                    break
                out[_R_S1, nr] = q - n
                out[_R_S1_LEN, nr] = n
                if value_len < 0:
                    out[_R_TOMB, nr] = 1
                else:
                    out[_R_TOMB, nr] = 0
                    got = _txn_value(u8, value, value + value_len, out, nr, elems, ne)
                    if got == _FAIL:
                        good = False
                        break
                    ne = got
            else:
                if key_version == GROUP_METADATA_KEY_VERSION:
                    n, q = _string16(u8, key + _I16, kend)
                    if q == _FAIL or q != kend:
                        good = False
                        break
                    continue  # group metadata: not an offset commit, no row
                if key_version < _OFFSET_KEY_MIN or key_version > _OFFSET_KEY_MAX:
                    if key_version < 0:
                        good = False
                        break
                    continue  # newer coordinator record types: skipped unread, as the reference does
                n, q = _string16(u8, key + _I16, kend)
                if q == _FAIL:
                    good = False
                    break
                out[_R_S1, nr] = q - n
                out[_R_S1_LEN, nr] = n
                n, q = _string16(u8, q, kend)
                if q == _FAIL or q + _I32 != kend:
                    good = False
                    break
                out[_R_S2, nr] = q - n
                out[_R_S2_LEN, nr] = n
                out[_R_PART, nr] = _be(u8, q, _I32)
                if value_len < 0:
                    out[_R_TOMB, nr] = 1
                else:
                    out[_R_TOMB, nr] = 0
                    if not _offset_value(u8, value, value + value_len, out, nr):
                        good = False
                        break
            out[_R_BATCH, nr] = i
            out[_R_OFFSET, nr] = base_offset[i] + offset_delta
            out[_R_TS, nr] = append_ts[i] if log_append[i] else base_ts[i] + ts_delta
            out[_R_KEY_VERSION, nr] = key_version
            nr += 1
        if good and pos != stop:
            good = False
        ok[i] = good
        if not good:
            nr = r0
            ne = e0
    return nr, ne


@numba.njit(cache=True, nogil=True)
def _gather(u8: np.ndarray, start: np.ndarray, length: np.ndarray) -> tuple[np.ndarray, np.ndarray]:  # pragma: no cover
    """int32 offsets and the concatenated bytes of the strings ``u8[start:start+length]``."""
    n = start.shape[0]
    offsets = np.empty(n + 1, np.int32)
    total = 0
    offsets[0] = 0
    for i in range(n):
        total += length[i]
        offsets[i + 1] = total
    data = np.empty(total, np.uint8)
    at = 0
    for i in range(n):
        s = start[i]
        for k in range(length[i]):
            data[at + k] = u8[s + k]
        at += length[i]
    return offsets, data


# -- Arrow columns ---------------------------------------------------------------------

TOPIC_PARTITION_TYPE: Final = pa.struct([pa.field("topic", pa.string()), pa.field("partition", pa.int32())])

#: the columns ``decode_coordinator_batches`` returns, per topic, in the worker's table order
TXN_LOG_COLUMNS: Final = pa.schema([
    ("offset", pa.int64()), ("record_timestamp", pa.int64()), ("transactional_id", pa.string()),
    ("key_version", pa.int32()), ("value_version", pa.int32()), ("tombstone", pa.bool_()),
    ("producer_id", pa.int64()), ("producer_epoch", pa.int32()), ("previous_producer_id", pa.int64()),
    ("next_producer_id", pa.int64()), ("next_producer_epoch", pa.int32()), ("txn_timeout_ms", pa.int32()),
    ("state_code", pa.int32()), ("state", pa.string()), ("topic_partitions", pa.list_(TOPIC_PARTITION_TYPE)),
    ("txn_last_update_timestamp", pa.int64()), ("txn_start_timestamp", pa.int64()),
    ("client_transaction_version", pa.int32()),
])  # fmt: skip
OFFSET_COMMIT_COLUMNS: Final = pa.schema([
    ("offset", pa.int64()), ("record_timestamp", pa.int64()), ("group_id", pa.string()),
    ("commit_topic", pa.string()), ("commit_partition", pa.int32()), ("key_version", pa.int32()),
    ("value_version", pa.int32()), ("tombstone", pa.bool_()), ("committed_offset", pa.int64()),
    ("leader_epoch", pa.int32()), ("metadata", pa.string()), ("commit_timestamp", pa.int64()),
    ("expire_timestamp", pa.int64()), ("is_transactional", pa.bool_()), ("producer_id", pa.int64()),
    ("producer_epoch", pa.int32()),
])  # fmt: skip


@dataclass(frozen=True, slots=True)
class CoordinatorRecords:
    """Decoded records of some batches of a coordinator segment.

    ``table`` holds one row per record the reference would write a row for, in file order, with
    ``TXN_LOG_COLUMNS`` or ``OFFSET_COMMIT_COLUMNS``; ``batch[k]`` is the index (into the
    ``rows`` given) of the batch row ``k`` came from. ``fallback`` lists, ascending, the given
    rows left to the reference decoder (none of their records is in ``table``).
    """

    table: pa.Table
    batch: np.ndarray  # int64, one per row of ``table``
    fallback: np.ndarray  # int64 rows of the ``HeaderColumns``, ascending


def _validity(valid: np.ndarray) -> tuple[pa.Buffer, int]:
    """Arrow validity bitmap and null count of a boolean mask."""
    return pa.array(valid, pa.bool_()).buffers()[1], int(len(valid) - np.count_nonzero(valid))


def _strings(u8: np.ndarray, start: np.ndarray, length: np.ndarray,
             valid: tuple[pa.Buffer, int] | None = None) -> pa.Array:
    offsets, data = _gather(u8, np.ascontiguousarray(start), np.ascontiguousarray(length))
    mask, nulls = (None, 0) if valid is None else valid
    return pa.StringArray.from_buffers(len(start), pa.py_buffer(offsets), pa.py_buffer(data), mask, nulls)


def _col(values: np.ndarray, kind: pa.DataType, valid: tuple[pa.Buffer, int]) -> pa.Array:
    """``values`` as an Arrow array of ``kind`` with validity ``valid`` (bitmap, null count)."""
    data = np.ascontiguousarray(values.astype(kind.to_pandas_dtype(), copy=False))
    return pa.Array.from_buffers(kind, len(data), [valid[0], pa.py_buffer(data)], null_count=valid[1])


#: state names (``TxnLogValue.state``) by int8 code + ``_STATE_BIAS``
_STATE_BIAS: Final = 128
_STATE_NAMES: Final = pa.array([TXN_STATES.get(c, f"Unknown({c})") for c in range(-_STATE_BIAS, _STATE_BIAS)],
                               pa.string())


def _states(codes: np.ndarray, valid: tuple[pa.Buffer, int]) -> pa.Array:
    index = np.ascontiguousarray((codes + _STATE_BIAS).astype(np.int32))
    return _STATE_NAMES.take(pa.Array.from_buffers(pa.int32(), len(index), [valid[0], pa.py_buffer(index)],
                                                   null_count=valid[1]))


def _txn_table(u8: np.ndarray, out: np.ndarray, elems: np.ndarray) -> pa.Table:
    tomb = out[_R_TOMB] != 0
    has = ~tomb
    valid = _validity(has)
    parts_valid = has & (out[_R_ELEM0] >= 0)
    lo = np.where(parts_valid, out[_R_ELEM0], 0)
    hi = np.where(parts_valid, out[_R_ELEM1], 0)
    sizes = hi - lo
    n = out.shape[1]
    list_offsets = np.zeros(n + 1, np.int32)
    np.cumsum(sizes, out=list_offsets[1:])
    # each row's elements are contiguous and follow the previous row's (tombstones and null
    # arrays have none), so the list offsets are the running sum of the element counts
    children = pa.StructArray.from_arrays(
        [_strings(u8, elems[_E_TOPIC], elems[_E_TOPIC_LEN]), pa.array(elems[_E_PART].astype(np.int32))],
        fields=list(TOPIC_PARTITION_TYPE),
    )
    mask = pa.array(parts_valid, pa.bool_()).buffers()[1]
    parts = pa.Array.from_buffers(
        pa.list_(TOPIC_PARTITION_TYPE), n, [mask, pa.py_buffer(list_offsets)],
        null_count=int(n - np.count_nonzero(parts_valid)), children=[children],
    )
    columns = {
        "offset": pa.array(out[_R_OFFSET]),
        "record_timestamp": pa.array(out[_R_TS]),
        "transactional_id": _strings(u8, out[_R_S1], out[_R_S1_LEN]),
        "key_version": pa.array(out[_R_KEY_VERSION].astype(np.int32)),
        "value_version": _col(out[_R_VVER], pa.int32(), valid),
        "tombstone": pa.array(tomb),
        "producer_id": _col(out[_R_A], pa.int64(), valid),
        "producer_epoch": _col(out[_R_B], pa.int32(), valid),
        "previous_producer_id": _col(out[_R_C], pa.int64(), valid),
        "next_producer_id": _col(out[_R_D], pa.int64(), valid),
        "next_producer_epoch": _col(out[_R_E], pa.int32(), valid),
        "txn_timeout_ms": _col(out[_R_F], pa.int32(), valid),
        "state_code": _col(out[_R_STATE], pa.int32(), valid),
        "state": _states(out[_R_STATE], valid),
        "topic_partitions": parts,
        "txn_last_update_timestamp": _col(out[_R_LAST], pa.int64(), valid),
        "txn_start_timestamp": _col(out[_R_START], pa.int64(), valid),
        "client_transaction_version": _col(out[_R_CTV], pa.int32(), valid),
    }
    return pa.Table.from_arrays([columns[f.name] for f in TXN_LOG_COLUMNS], schema=TXN_LOG_COLUMNS)


def _offsets_table(u8: np.ndarray, out: np.ndarray, cols: HeaderColumns, rows: np.ndarray) -> pa.Table:
    tomb = out[_R_TOMB] != 0
    has = ~tomb
    valid = _validity(has)
    batch_rows = rows[out[_R_BATCH]]
    columns = {
        "offset": pa.array(out[_R_OFFSET]),
        "record_timestamp": pa.array(out[_R_TS]),
        "group_id": _strings(u8, out[_R_S1], out[_R_S1_LEN]),
        "commit_topic": _strings(u8, out[_R_S2], out[_R_S2_LEN]),
        "commit_partition": pa.array(out[_R_PART].astype(np.int32)),
        "key_version": pa.array(out[_R_KEY_VERSION].astype(np.int32)),
        "value_version": _col(out[_R_VVER], pa.int32(), valid),
        "tombstone": pa.array(tomb),
        "committed_offset": _col(out[_R_A], pa.int64(), valid),
        "leader_epoch": _col(out[_R_B], pa.int32(), valid),
        "metadata": _strings(u8, np.where(has, out[_R_E], 0), np.where(has, out[_R_F], 0), valid),
        "commit_timestamp": _col(out[_R_C], pa.int64(), valid),
        "expire_timestamp": _col(out[_R_D], pa.int64(), valid),
        "is_transactional": pa.array(cols.is_transactional[batch_rows]),
        "producer_id": pa.array(cols.producer_id[batch_rows]),
        "producer_epoch": pa.array(cols.producer_epoch[batch_rows].astype(np.int32)),
    }
    return pa.Table.from_arrays([columns[f.name] for f in OFFSET_COMMIT_COLUMNS], schema=OFFSET_COMMIT_COLUMNS)


#: bytes of batches decoded by one compiled call (bounds the scratch blocks to a few MB
#: whatever the record counts claim)
GROUP_BYTES: Final = 1 << 18


def decode_coordinator_batches(
    buf: bytes | bytearray | memoryview | mmap.mmap, cols: HeaderColumns, rows: np.ndarray, kind: int
) -> CoordinatorRecords:
    """The records of the batches at ``rows`` of ``cols`` (ascending; data batches whose CRC
    matched), decoded as the worker's ``txn_log`` (``kind`` ``TRANSACTION_STATE``) or
    ``offset_commits`` (``CONSUMER_OFFSETS``) columns; see ``CoordinatorRecords``."""
    rows = np.asarray(rows, dtype=np.int64)
    eligible = (
        (cols.compression[rows] == 0)
        & (cols.record_count[rows] >= 0)
        & (cols.record_count[rows] <= np.maximum(cols.size_bytes[rows] - RECORDS_OFFSET, 0) // _MIN_RECORD_BYTES)
        & ~cols.is_control[rows]
        & (cols.magic[rows] == MAGIC_VALUE_V2)
        & (cols.stored_crc[rows] == cols.computed_crc[rows])
    )
    view = as_view(buf)
    try:
        u8 = np.frombuffer(view, dtype=np.uint8)
        u8.flags.writeable = False
        tables: list[pa.Table] = []
        batches: list[np.ndarray] = []
        ok_all = np.zeros(len(rows), np.bool_)
        candidates = np.flatnonzero(eligible)
        sizes = cols.size_bytes[rows[candidates]]
        group_of = np.cumsum(sizes) // GROUP_BYTES if len(sizes) else np.empty(0, np.int64)
        bounds = np.flatnonzero(np.diff(group_of)) + 1 if len(sizes) else np.empty(0, np.int64)
        for part in np.split(candidates, bounds) if len(candidates) else []:
            sel = rows[part]
            table, batch, ok = _decode_group(u8, cols, sel, kind)
            ok_all[part] = ok
            tables.append(table)
            batches.append(part[batch])
        schema = TXN_LOG_COLUMNS if kind == TRANSACTION_STATE else OFFSET_COMMIT_COLUMNS
        table = pa.concat_tables(tables) if tables else schema.empty_table()
        batch_all = np.concatenate(batches) if batches else np.empty(0, np.int64)
        del u8
    finally:
        if view is not buf:
            view.release()
    return CoordinatorRecords(table, batch_all.astype(np.int64), rows[~ok_all])


def _decode_group(u8: np.ndarray, cols: HeaderColumns, sel: np.ndarray,
                  kind: int) -> tuple[pa.Table, np.ndarray, np.ndarray]:
    position = cols.position[sel]
    size = cols.size_bytes[sel]
    count = cols.record_count[sel].astype(np.int64)
    log_append = cols.timestamp_type[sel] == _LOG_APPEND_TIME
    base_ts = np.where(cols.has_delete_horizon[sel], cols.delete_horizon_ms[sel], cols.first_timestamp[sel])
    total_bytes = int(size.sum())
    out = np.empty((_NCOLS, int(count.sum())), np.int64)
    elems = np.empty((_ECOLS, total_bytes // _I32 + 1 if kind == TRANSACTION_STATE else 0), np.int64)
    ok = np.zeros(len(sel), np.bool_)
    nr, ne = _walk(u8, kind, position, size, cols.base_offset[sel], base_ts, cols.max_timestamp[sel], log_append,
                   count, out, elems, ok)
    out = out[:, :nr]
    if kind == TRANSACTION_STATE:
        table = _txn_table(u8, out, elems[:, :ne])
    else:
        table = _offsets_table(u8, out, cols, sel)
    return table, out[_R_BATCH].copy(), ok
