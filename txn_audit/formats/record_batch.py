"""Record batch format v2 (magic 2): header, records, control markers, and encoders.

Batch header, 61 bytes, big-endian (offsets from the batch start)::

    0 baseOffset int64 | 8 length int32 (bytes after this field) | 12 partitionLeaderEpoch int32
    16 magic int8 (=2)  | 17 crc uint32 (CRC-32C over [21, 12+length))
    21 attributes int16 (bits 0-2 codec, 3 LogAppendTime, 4 transactional, 5 control,
                         6 delete horizon in baseTimestamp)
    23 lastOffsetDelta int32 | 27 baseTimestamp int64 | 35 maxTimestamp int64
    43 producerId int64 | 51 producerEpoch int16 | 53 baseSequence int32 | 57 recordsCount int32
    61 records (the whole area is one compressed stream when codec != 0)

Record: varint length, int8 attributes, varlong timestampDelta, varint offsetDelta,
varint keyLength (negative = null) + key, varint valueLength (negative = null) + value,
varint headerCount, then per header varint keyLength (>= 0) + UTF-8 key, varint valueLength
(negative = null) + value. Varints are zig-zag LEB128 (5 bytes max, varlong 10).

Control batches (transactional + control) hold one record whose key is int16 version, int16
type (0 ABORT, 1 COMMIT) and whose value is int16 version, int32 coordinatorEpoch.

Header decoding is the hot path of a segment scan: one ``struct`` unpack and one CRC-32C call,
never touching the records. Records are decoded only on request, with the broker's checks
(declared record length == bytes consumed, exactly recordsCount records, nothing left over).
"""

from __future__ import annotations

import mmap
import struct
from collections.abc import Sequence
from typing import Final

from crc32c import crc32c

from txn_audit.errors import CorruptInputError
from txn_audit.formats.compression import compress, decompress
from txn_audit.formats.model import (
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    NO_TIMESTAMP,
    BatchHeader,
    ControlMarker,
    IssueKind,
    Record,
    RecordHeader,
)
from txn_audit.formats.primitives import INT32_MAX, VarintError, read_varint, read_varlong, write_varint, write_varlong
from txn_audit.formats.records import (
    COMPRESSION_CODEC_MASK,
    LOG_OVERHEAD,
    MAGIC_LENGTH,
    MAGIC_OFFSET,
    MAGIC_VALUE_V2,
    SIZE_LENGTH,
    SIZE_OFFSET,
    TIMESTAMP_TYPE_MASK,
)

# byte offsets and sizes of the header fields (the table above); offset, size and magic are
# the framing every entry shares (``records``)
PARTITION_LEADER_EPOCH_OFFSET: Final = SIZE_OFFSET + SIZE_LENGTH  # 12
PARTITION_LEADER_EPOCH_LENGTH: Final = 4
CRC_OFFSET: Final = MAGIC_OFFSET + MAGIC_LENGTH  # 17
CRC_LENGTH: Final = 4
ATTRIBUTES_OFFSET: Final = CRC_OFFSET + CRC_LENGTH  # 21: the CRC covers the attributes onward
ATTRIBUTE_LENGTH: Final = 2
LAST_OFFSET_DELTA_OFFSET: Final = ATTRIBUTES_OFFSET + ATTRIBUTE_LENGTH  # 23
LAST_OFFSET_DELTA_LENGTH: Final = 4
BASE_TIMESTAMP_OFFSET: Final = LAST_OFFSET_DELTA_OFFSET + LAST_OFFSET_DELTA_LENGTH  # 27
BASE_TIMESTAMP_LENGTH: Final = 8
MAX_TIMESTAMP_OFFSET: Final = BASE_TIMESTAMP_OFFSET + BASE_TIMESTAMP_LENGTH  # 35
MAX_TIMESTAMP_LENGTH: Final = 8
PRODUCER_ID_OFFSET: Final = MAX_TIMESTAMP_OFFSET + MAX_TIMESTAMP_LENGTH  # 43
PRODUCER_ID_LENGTH: Final = 8
PRODUCER_EPOCH_OFFSET: Final = PRODUCER_ID_OFFSET + PRODUCER_ID_LENGTH  # 51
PRODUCER_EPOCH_LENGTH: Final = 2
BASE_SEQUENCE_OFFSET: Final = PRODUCER_EPOCH_OFFSET + PRODUCER_EPOCH_LENGTH  # 53
BASE_SEQUENCE_LENGTH: Final = 4
RECORDS_COUNT_OFFSET: Final = BASE_SEQUENCE_OFFSET + BASE_SEQUENCE_LENGTH  # 57
RECORDS_COUNT_LENGTH: Final = 4
RECORDS_OFFSET: Final = RECORDS_COUNT_OFFSET + RECORDS_COUNT_LENGTH  # 61
RECORD_BATCH_OVERHEAD: Final = RECORDS_OFFSET
MIN_BATCH_LENGTH: Final = RECORD_BATCH_OVERHEAD - LOG_OVERHEAD  # 49: smallest length field of a batch

TRANSACTIONAL_MASK: Final = 0x10
CONTROL_MASK: Final = 0x20
DELETE_HORIZON_MASK: Final = 0x40

# control record types (the key's int16 type) of the transaction markers
CONTROL_ABORT: Final = 0
CONTROL_COMMIT: Final = 1
MARKER_TYPE_NAMES: Final = ("ABORT", "COMMIT")  # indexed by control type
MARKER_TYPE_CODES: Final = {name: code for code, name in enumerate(MARKER_TYPE_NAMES)}

# baseOffset, length, partitionLeaderEpoch, magic, crc, attributes, lastOffsetDelta,
# baseTimestamp, maxTimestamp, producerId, producerEpoch, baseSequence, recordsCount
# (tests check it against the offsets above)
HEADER_STRUCT: Final = struct.Struct(">qiibIhiqqqhii")
_CRC_FIELD: Final = struct.Struct(">I")
_CONTROL_KEY: Final = struct.Struct(">hh")
_MARKER_VALUE: Final = struct.Struct(">hi")

_CORRUPT = IssueKind.CORRUPT_RECORD.value

BufferLike = bytes | bytearray | memoryview
# What the decoders accept as a whole file or batch buffer; never copied.
SegmentBuffer = bytes | bytearray | memoryview | mmap.mmap


def as_view(buf: SegmentBuffer) -> memoryview:
    """A flat unsigned-byte memoryview over bytes / bytearray / mmap / memoryview (no copy)."""
    mv = buf if isinstance(buf, memoryview) else memoryview(buf)
    if mv.format != "B" or mv.ndim != 1:
        mv = mv.cast("B")
    return mv


def java_long(value: int) -> int:
    """``value`` wrapped to a Java ``long`` (64-bit two's complement), as the broker computes offsets."""
    return ((value + (1 << 63)) & ((1 << 64) - 1)) - (1 << 63)


def java_int(value: int) -> int:
    """``value`` wrapped to a Java ``int`` (32-bit two's complement)."""
    return ((value + 0x80000000) & 0xFFFFFFFF) - 0x80000000


def increment_sequence(sequence: int, increment: int) -> int:
    """Kafka's ``DefaultRecordBatch.incrementSequence``: wrap in the 31-bit non-negative space.

    Computed in Java ``int`` arithmetic, so that damaged (negative) inputs give the broker's
    value too, and always an int32.
    """
    if sequence > java_int(INT32_MAX - increment):
        return java_int(increment - (INT32_MAX - sequence) - 1)
    return java_int(sequence + increment)


def decode_batch_header(buf: SegmentBuffer, pos: int, *, verify_crc: bool = True) -> BatchHeader:
    """Decode the 61-byte header of the v2 batch at ``pos`` and check its CRC-32C.

    ``buf`` must hold the whole batch (the framing walk checks that). Records are not touched.
    With ``verify_crc=False`` the CRC is not computed and ``computed_crc`` echoes the stored one.
    """
    n = len(buf)
    if pos < 0 or pos + RECORD_BATCH_OVERHEAD > n:
        raise CorruptInputError(
            IssueKind.TRUNCATED_TAIL.value, pos, f"v2 batch header needs 61 bytes, {n - pos} left"
        )
    (
        base_offset,
        length,
        leader_epoch,
        magic,
        stored_crc,
        attributes,
        last_offset_delta,
        base_timestamp,
        max_timestamp,
        producer_id,
        producer_epoch,
        base_sequence,
        record_count,
    ) = HEADER_STRUCT.unpack_from(buf, pos)
    if magic != MAGIC_VALUE_V2:
        raise CorruptInputError(IssueKind.BAD_MAGIC.value, pos, f"magic {magic} is not a v2 batch")
    end = pos + LOG_OVERHEAD + length
    if length < MIN_BATCH_LENGTH:
        raise CorruptInputError(IssueKind.BAD_LENGTH.value, pos, f"batch length {length} below the 49-byte minimum")
    if end > n:
        raise CorruptInputError(
            IssueKind.TRUNCATED_TAIL.value, pos, f"batch of {length + LOG_OVERHEAD} bytes, only {n - pos} left"
        )
    if verify_crc:
        mv = buf if isinstance(buf, memoryview) else memoryview(buf)
        computed_crc = crc32c(mv[pos + ATTRIBUTES_OFFSET : end])
    else:
        computed_crc = stored_crc
    if base_sequence == NO_SEQUENCE:
        last_sequence = NO_SEQUENCE
    else:
        last_sequence = increment_sequence(base_sequence, last_offset_delta)
    if attributes & DELETE_HORIZON_MASK:
        has_delete_horizon = True
        delete_horizon_ms = base_timestamp
        first_timestamp = NO_TIMESTAMP
    else:
        has_delete_horizon = False
        delete_horizon_ms = NO_TIMESTAMP
        first_timestamp = base_timestamp
    return BatchHeader(
        pos,
        base_offset,
        java_long(base_offset + last_offset_delta),  # Kafka's long addition: a lying base offset wraps
        length + LOG_OVERHEAD,
        magic,
        leader_epoch,
        attributes,
        attributes & COMPRESSION_CODEC_MASK,
        (attributes & TIMESTAMP_TYPE_MASK) >> 3,
        bool(attributes & TRANSACTIONAL_MASK),
        bool(attributes & CONTROL_MASK),
        has_delete_horizon,
        producer_id,
        producer_epoch,
        base_sequence,
        last_sequence,
        record_count,
        first_timestamp,
        max_timestamp,
        delete_horizon_ms,
        stored_crc,
        computed_crc,
    )


# -- records ---------------------------------------------------------------------------


class _Bad(Exception):
    """Internal: a record-level problem at ``pos`` of the buffer being parsed."""

    def __init__(self, pos: int, detail: str) -> None:
        super().__init__(detail)
        self.pos = pos
        self.detail = detail


def _bad_varint(err: VarintError) -> _Bad:
    """A varint error of a record, as the record decoder reports it."""
    if err.past_end:
        return _Bad(err.start, "varint runs past the end of the record")
    return _Bad(err.start, f"varint longer than {err.max_bytes} bytes")


def _parse_records(
    data: BufferLike,
    pos: int,
    stop: int,
    count: int,
    base_offset: int,
    base_timestamp: int,
    log_append_time: int | None,
    base_sequence: int,
) -> list[Record]:
    out: list[Record] = []
    append = out.append
    for index in range(count):
        if pos >= stop:
            raise _Bad(pos, f"batch ends after {index} of {count} records")
        length, body = read_varint(data, pos, stop)
        if length < 0 or body + length > stop:
            raise _Bad(pos, f"record {index} declares {length} bytes, {stop - body} left in the batch")
        rend = body + length
        p = body
        if p >= rend:
            raise _Bad(pos, f"record {index} is empty")
        attributes = data[p]
        p += 1
        ts_delta, p = read_varlong(data, p, rend)
        offset_delta, p = read_varint(data, p, rend)
        key_len, p = read_varint(data, p, rend)
        if key_len >= 0:
            if p + key_len > rend:
                raise _Bad(p, f"key of {key_len} bytes overruns the record")
            key: bytes | None = bytes(data[p : p + key_len])
            p += key_len
        else:
            key = None
        value_len, p = read_varint(data, p, rend)
        if value_len >= 0:
            if p + value_len > rend:
                raise _Bad(p, f"value of {value_len} bytes overruns the record")
            value: bytes | None = bytes(data[p : p + value_len])
            p += value_len
        else:
            value = None
        header_count, p = read_varint(data, p, rend)
        if header_count < 0 or header_count > rend - p:
            raise _Bad(p, f"invalid header count {header_count}")
        headers: tuple[RecordHeader, ...] = ()
        if header_count:
            hs = []
            for _ in range(header_count):
                hk_len, p = read_varint(data, p, rend)
                if hk_len < 0 or p + hk_len > rend:
                    raise _Bad(p, f"invalid header key length {hk_len}")
                hkey = bytes(data[p : p + hk_len]).decode("utf-8", errors="replace")
                p += hk_len
                hv_len, p = read_varint(data, p, rend)
                if hv_len >= 0:
                    if p + hv_len > rend:
                        raise _Bad(p, f"header value of {hv_len} bytes overruns the record")
                    hval: bytes | None = bytes(data[p : p + hv_len])
                    p += hv_len
                else:
                    hval = None
                hs.append(RecordHeader(hkey, hval))
            headers = tuple(hs)
        if p != rend:
            raise _Bad(pos, f"record {index} declares {length} bytes but its fields take {p - body}")
        if log_append_time is None:
            timestamp = base_timestamp + ts_delta
            if not -(1 << 63) <= timestamp < (1 << 63):
                timestamp = ((timestamp + (1 << 63)) % (1 << 64)) - (1 << 63)
        else:
            timestamp = log_append_time
        if base_sequence >= 0:
            sequence = increment_sequence(base_sequence, offset_delta)
        else:
            sequence = NO_SEQUENCE
        append(Record(java_long(base_offset + offset_delta), timestamp, key, value, headers, sequence, attributes))
        pos = rend
    if pos != stop:
        raise _Bad(pos, f"{stop - pos} bytes left after the last of {count} records")
    return out


def decode_records(buf: SegmentBuffer, header: BatchHeader) -> list[Record]:
    """Decode (decompressing if needed) every record of the v2 batch described by ``header``."""
    if header.magic != MAGIC_VALUE_V2:
        raise CorruptInputError(IssueKind.BAD_MAGIC.value, header.position, f"magic {header.magic} is not v2")
    mv = as_view(buf)
    start = header.position + RECORD_BATCH_OVERHEAD
    stop = header.position + header.size_bytes
    if stop > len(mv) or stop < start:
        raise CorruptInputError(_CORRUPT, header.position, f"batch of {header.size_bytes} bytes does not fit")
    count = header.record_count
    if count < 0:
        raise CorruptInputError(_CORRUPT, header.position + RECORDS_COUNT_OFFSET, f"invalid record count {count}")
    log_append_time = header.max_timestamp if header.timestamp_type == 1 else None
    # Record timestamps are deltas against the raw baseTimestamp field, delete horizon or not.
    base_timestamp = header.delete_horizon_ms if header.has_delete_horizon else header.first_timestamp
    if header.compression == 0:
        try:
            return _parse_records(
                mv, start, stop, count, header.base_offset, base_timestamp, log_append_time, header.base_sequence
            )
        except (_Bad, VarintError) as err:
            bad = _bad_varint(err) if isinstance(err, VarintError) else err
            raise CorruptInputError(_CORRUPT, bad.pos, bad.detail) from None
    if count == 0 and start == stop:
        return []
    data = decompress(header.compression, mv[start:stop], position=start)
    try:
        return _parse_records(
            data, 0, len(data), count, header.base_offset, base_timestamp, log_append_time, header.base_sequence
        )
    except (_Bad, VarintError) as err:
        bad = _bad_varint(err) if isinstance(err, VarintError) else err
        raise CorruptInputError(
            _CORRUPT, start, f"{bad.detail} (byte {bad.pos} of the decompressed records)"
        ) from None


# -- control records -------------------------------------------------------------------


def decode_control_marker(header: BatchHeader, record: Record) -> ControlMarker:
    """Read a COMMIT/ABORT marker from a control record, with Kafka's validity checks."""
    key = record.key
    if key is None or len(key) < _CONTROL_KEY.size:
        raise CorruptInputError(
            _CORRUPT, header.position, f"control record key of {0 if key is None else len(key)} bytes (need 4)"
        )
    key_version, control_type = _CONTROL_KEY.unpack_from(key)
    if key_version < 0:
        raise CorruptInputError(_CORRUPT, header.position, f"negative control key version {key_version}")
    if control_type not in (CONTROL_ABORT, CONTROL_COMMIT):
        raise CorruptInputError(
            IssueKind.UNEXPECTED_CONTROL.value,
            header.position,
            f"control record type {control_type} at offset {record.offset} is not a transaction marker",
        )
    marker_type = MARKER_TYPE_NAMES[control_type]
    value = record.value
    if value is None or len(value) < _MARKER_VALUE.size:
        raise CorruptInputError(
            _CORRUPT,
            header.position,
            f"end-transaction marker value of {0 if value is None else len(value)} bytes (need 6)",
        )
    value_version, coordinator_epoch = _MARKER_VALUE.unpack_from(value)
    if value_version < 0:
        raise CorruptInputError(_CORRUPT, header.position, f"negative marker value version {value_version}")
    return ControlMarker(
        record.offset,
        header.producer_id,
        header.producer_epoch,
        marker_type,
        control_type,
        coordinator_epoch,
        record.timestamp,
        key_version,
        value_version,
    )


def control_marker_of(buf: SegmentBuffer, header: BatchHeader) -> ControlMarker | None:
    """The marker of a control batch (its first record, as the broker reads it); None if empty."""
    if not header.is_control:
        raise ValueError(f"batch at byte {header.position} is not a control batch")
    if header.record_count == 0:
        return None
    records = decode_records(buf, header)
    return decode_control_marker(header, records[0])


# -- encoding --------------------------------------------------------------------------


def encode_record(record: Record, *, offset_delta: int, timestamp_delta: int) -> bytes:
    """One record in v2 layout (length-prefixed)."""
    parts = [
        bytes((record.attributes & 0xFF,)),
        write_varlong(timestamp_delta),
        write_varint(offset_delta),
        _write_nullable(record.key),
        _write_nullable(record.value),
        write_varint(len(record.headers)),
    ]
    for h in record.headers:
        hkey = h.key.encode("utf-8")
        parts.append(write_varint(len(hkey)))
        parts.append(hkey)
        parts.append(_write_nullable(h.value))
    body = b"".join(parts)
    return write_varint(len(body)) + body


def _write_nullable(data: bytes | None) -> bytes:
    if data is None:
        return write_varint(-1)
    return write_varint(len(data)) + data


def encode_batch(
    records: Sequence[Record],
    *,
    base_offset: int,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = NO_PRODUCER_EPOCH,
    base_sequence: int = NO_SEQUENCE,
    is_transactional: bool = False,
    is_control: bool = False,
    compression: int = 0,
    timestamp_type: int = 0,
    partition_leader_epoch: int = 0,
    delete_horizon_ms: int | None = None,
    last_offset_delta: int | None = None,
    max_timestamp: int | None = None,
    xerial_snappy: bool = True,
) -> bytes:
    """Build a v2 batch from records carrying absolute offsets and timestamps.

    baseTimestamp is the first record's timestamp (or ``delete_horizon_ms`` when given, which
    also sets attribute bit 6); maxTimestamp is the largest record timestamp unless
    ``max_timestamp`` overrides it (the broker's append time under LogAppendTime).
    """
    if delete_horizon_ms is not None:
        base_timestamp = delete_horizon_ms
    else:
        base_timestamp = records[0].timestamp if records else NO_TIMESTAMP
    if max_timestamp is None:
        max_timestamp = max((r.timestamp for r in records), default=NO_TIMESTAMP)
    if last_offset_delta is None:
        last_offset_delta = max((r.offset - base_offset for r in records), default=0)
    body = b"".join(
        encode_record(r, offset_delta=r.offset - base_offset, timestamp_delta=r.timestamp - base_timestamp)
        for r in records
    )
    if compression:
        body = compress(compression, body, xerial=xerial_snappy)
    attributes = (
        (compression & COMPRESSION_CODEC_MASK)
        | (TIMESTAMP_TYPE_MASK if timestamp_type else 0)
        | (TRANSACTIONAL_MASK if is_transactional else 0)
        | (CONTROL_MASK if is_control else 0)
        | (DELETE_HORIZON_MASK if delete_horizon_ms is not None else 0)
    )
    length = MIN_BATCH_LENGTH + len(body)
    out = bytearray(
        HEADER_STRUCT.pack(
            base_offset,
            length,
            partition_leader_epoch,
            MAGIC_VALUE_V2,
            0,
            attributes,
            last_offset_delta,
            base_timestamp,
            max_timestamp,
            producer_id,
            producer_epoch,
            base_sequence,
            len(records),
        )
    )
    out += body
    _CRC_FIELD.pack_into(out, CRC_OFFSET, crc32c(memoryview(out)[ATTRIBUTES_OFFSET:]))
    return bytes(out)


def encode_control_batch(
    *,
    offset: int,
    producer_id: int,
    producer_epoch: int,
    marker_type: str,
    coordinator_epoch: int,
    timestamp: int,
    partition_leader_epoch: int = 0,
) -> bytes:
    """The 78-byte COMMIT/ABORT marker batch the partition leader writes (kafka-formats.md §3)."""
    code = MARKER_TYPE_CODES.get(marker_type.upper())
    if code is None:
        raise ValueError(f"marker_type must be COMMIT or ABORT, not {marker_type!r}")
    record = Record(
        offset=offset,
        timestamp=timestamp,
        key=_CONTROL_KEY.pack(0, code),
        value=_MARKER_VALUE.pack(0, coordinator_epoch),
    )
    return encode_batch(
        [record],
        base_offset=offset,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=NO_SEQUENCE,
        is_transactional=True,
        is_control=True,
        partition_leader_epoch=partition_leader_epoch,
    )
