"""Legacy messages, magic 0 and 1 (pre-0.11 message sets), and encoders for tests.

One ``.log`` entry is one message::

    0 offset int64 (a compressed wrapper carries the offset of its LAST inner message)
    8 size int32 (bytes after this field)
    12 crc uint32: CRC-32 (IEEE, zlib.crc32) over [16, 12+size)
    16 magic int8 (0 or 1) | 17 attributes int8 (bits 0-2 codec 0-3, bit 3 LogAppendTime, v1)
    18 timestamp int64 (v1 only)
    then int32 key length (negative = null) + key, int32 value length (negative = null) + value

A compressed message is a *wrapper*: its value is a compressed stream of inner entries with the
same 12-byte offset+size framing. Inner offsets are absolute in v0 and relative in v1 (absolute
base = wrapper offset - last inner offset; a wrapper offset of 0, written by old librdkafka,
means base 0). Under LogAppendTime the wrapper's timestamp applies to every inner v1 message.

Legacy messages carry no producer id, epoch, sequence or transactional/control flag, so the
header fields are the -1 / False sentinels; they matter for offset continuity only.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Sequence
from typing import Final

from txn_audit.errors import CorruptInputError
from txn_audit.formats.compression import compress, decompress
from txn_audit.formats.model import (
    NO_PARTITION_LEADER_EPOCH,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    NO_TIMESTAMP,
    BatchHeader,
    IssueKind,
    Record,
)
from txn_audit.formats.record_batch import SegmentBuffer, as_view
from txn_audit.formats.records import (
    COMPRESSION_CODEC_MASK,
    LOG_OVERHEAD,
    MAGIC_OFFSET,
    MAGIC_VALUE_V0,
    MAGIC_VALUE_V1,
    TIMESTAMP_TYPE_MASK,
)

RECORD_OVERHEAD_V0: Final = 14  # crc 4 + magic 1 + attributes 1 + key length 4 + value length 4
RECORD_OVERHEAD_V1: Final = 22  # + timestamp 8

_ENTRY: Final = struct.Struct(">qiIbb")  # offset, size, crc, magic, attributes
_OFFSET_SIZE: Final = struct.Struct(">qi")
_I32: Final = struct.Struct(">i")
_I64: Final = struct.Struct(">q")
_U32: Final = struct.Struct(">I")

_CORRUPT = IssueKind.CORRUPT_RECORD.value


def legacy_crc(buf: SegmentBuffer, pos: int, size: int) -> tuple[int, int]:
    """(stored, computed) CRC-32 of the legacy entry at ``pos`` whose size field is ``size``."""
    mv = as_view(buf)
    (stored,) = _U32.unpack_from(mv, pos + LOG_OVERHEAD)
    return stored, zlib.crc32(mv[pos + MAGIC_OFFSET : pos + LOG_OVERHEAD + size])


def _parse_message(
    data: memoryview | bytes, pos: int, stop: int
) -> tuple[int, int, int, int, bytes | None, int, bytes | None]:
    """Parse the message body in [pos, stop) (starting at its crc field).

    Returns (crc, magic, attributes, timestamp, key, value_position, value).
    """
    size = stop - pos
    if size < RECORD_OVERHEAD_V0:
        raise CorruptInputError(_CORRUPT, pos, f"message of {size} bytes, below the 14-byte minimum")
    crc, magic, attributes = struct.unpack_from(">Ibb", data, pos)
    p = pos + 6
    if magic == MAGIC_VALUE_V1:
        if size < RECORD_OVERHEAD_V1:
            raise CorruptInputError(_CORRUPT, pos, f"v1 message of {size} bytes, below the 22-byte minimum")
        (timestamp,) = _I64.unpack_from(data, p)
        p += 8
    elif magic == MAGIC_VALUE_V0:
        timestamp = NO_TIMESTAMP
    else:
        raise CorruptInputError(IssueKind.BAD_MAGIC.value, pos + 4, f"message magic {magic}")
    (key_len,) = _I32.unpack_from(data, p)
    p += 4
    key: bytes | None = None
    if key_len >= 0:
        if p + key_len + 4 > stop:
            raise CorruptInputError(_CORRUPT, p - 4, f"key of {key_len} bytes overruns the message")
        key = bytes(data[p : p + key_len])
        p += key_len
    if p + 4 > stop:
        raise CorruptInputError(_CORRUPT, p, "value length overruns the message")
    (value_len,) = _I32.unpack_from(data, p)
    p += 4
    value_pos = p
    value: bytes | None = None
    if value_len >= 0:
        if p + value_len > stop:
            raise CorruptInputError(_CORRUPT, p - 4, f"value of {value_len} bytes overruns the message")
        value = bytes(data[p : p + value_len])
        p += value_len
    if p != stop:
        raise CorruptInputError(_CORRUPT, p, f"{stop - p} bytes left after the message value")
    return crc, magic, attributes, timestamp, key, value_pos, value


def decode_legacy_entry(
    buf: SegmentBuffer, pos: int, size: int, *, verify_crc: bool = True
) -> tuple[BatchHeader, list[Record]]:
    """Decode the magic 0/1 entry at ``pos``; ``size`` is its size field (entry = 12 + size bytes).

    A compressed wrapper is decompressed so that the header can report the first inner offset
    and the inner message count. Raises ``CorruptInputError`` (corrupt_record,
    decompression_error, bad_magic, ...) when the entry does not decode.
    """
    mv = as_view(buf)
    stop = pos + LOG_OVERHEAD + size
    if size < RECORD_OVERHEAD_V0:
        raise CorruptInputError(IssueKind.BAD_LENGTH.value, pos, f"message size {size} below 14")
    if stop > len(mv):
        raise CorruptInputError(
            IssueKind.TRUNCATED_TAIL.value, pos, f"message of {size + LOG_OVERHEAD} bytes does not fit"
        )
    (wrapper_offset,) = _I64.unpack_from(mv, pos)
    stored_crc, magic, attributes, wrapper_ts, key, value_pos, value = _parse_message(mv, pos + LOG_OVERHEAD, stop)
    computed_crc = zlib.crc32(mv[pos + MAGIC_OFFSET : stop]) if verify_crc else stored_crc
    codec = attributes & COMPRESSION_CODEC_MASK
    ts_type = (attributes & TIMESTAMP_TYPE_MASK) >> 3 if magic == MAGIC_VALUE_V1 else 0
    if codec == 0:
        records = [Record(wrapper_offset, wrapper_ts, key, value, (), NO_SEQUENCE, attributes & 0xFF)]
    else:
        records = _inner_records(
            mv, pos, magic, codec, ts_type, wrapper_offset, wrapper_ts, value_pos, value, verify_crc
        )
    header = BatchHeader(
        pos,
        records[0].offset,
        wrapper_offset,
        size + LOG_OVERHEAD,
        magic,
        NO_PARTITION_LEADER_EPOCH,
        attributes & 0xFF,
        codec,
        ts_type,
        False,
        False,
        False,
        NO_PRODUCER_ID,
        NO_PRODUCER_EPOCH,
        NO_SEQUENCE,
        NO_SEQUENCE,
        len(records),
        records[0].timestamp if magic == MAGIC_VALUE_V1 else NO_TIMESTAMP,
        wrapper_ts,
        NO_TIMESTAMP,
        stored_crc,
        computed_crc,
    )
    return header, records


def _inner_records(
    mv: memoryview,
    pos: int,
    magic: int,
    codec: int,
    ts_type: int,
    wrapper_offset: int,
    wrapper_ts: int,
    value_pos: int,
    value: bytes | None,
    verify_crc: bool,
) -> list[Record]:
    if codec > 3:
        raise CorruptInputError(_CORRUPT, pos, f"codec {codec} is not valid for magic {magic}")
    if value is None:
        raise CorruptInputError(_CORRUPT, pos, "compressed wrapper with a null value")
    data = decompress(codec, value, position=value_pos, magic=magic)
    n = len(data)
    p = 0
    inner: list[tuple[int, int, int, bytes | None, bytes | None]] = []
    while p < n:
        if n - p < LOG_OVERHEAD:
            raise CorruptInputError(_CORRUPT, value_pos, f"{n - p} stray bytes after inner message {len(inner)}")
        offset, isize = _OFFSET_SIZE.unpack_from(data, p)
        istop = p + LOG_OVERHEAD + isize
        if isize < RECORD_OVERHEAD_V0 or istop > n:
            raise CorruptInputError(
                _CORRUPT, value_pos, f"inner message {len(inner)} size {isize} invalid (byte {p} of the stream)"
            )
        try:
            crc, imagic, iattrs, its, ikey, _, ivalue = _parse_message(data, p + LOG_OVERHEAD, istop)
        except CorruptInputError as err:
            raise CorruptInputError(
                err.kind, value_pos, f"inner message {len(inner)}: {err.detail} (byte {err.position} of the stream)"
            ) from None
        if verify_crc and crc != zlib.crc32(data[p + MAGIC_OFFSET : istop]):
            raise CorruptInputError(
                IssueKind.CRC_MISMATCH.value, value_pos, f"inner message {len(inner)} fails its CRC-32"
            )
        if iattrs & COMPRESSION_CODEC_MASK:
            raise CorruptInputError(_CORRUPT, value_pos, "inner messages must not be compressed")
        if imagic == MAGIC_VALUE_V1 and ts_type == 1:
            its = wrapper_ts
        inner.append((offset, its, iattrs & 0xFF, ikey, ivalue))
        p = istop
    if not inner:
        raise CorruptInputError(_CORRUPT, value_pos, "compressed wrapper without inner messages")
    if magic == MAGIC_VALUE_V1:
        last_inner = inner[-1][0]
        if wrapper_offset == 0:
            base = 0
        elif wrapper_offset < last_inner:
            raise CorruptInputError(
                _CORRUPT, pos, f"wrapper offset {wrapper_offset} below last inner relative offset {last_inner}"
            )
        else:
            base = wrapper_offset - last_inner
    else:
        base = 0
    return [Record(base + off, ts, k, v, (), NO_SEQUENCE, a) for off, ts, a, k, v in inner]


# -- encoding --------------------------------------------------------------------------


def _message_body(magic: int, attributes: int, timestamp: int, key: bytes | None, value: bytes | None) -> bytes:
    parts = [struct.pack(">bb", magic, attributes)]
    if magic == MAGIC_VALUE_V1:
        parts.append(_I64.pack(timestamp))
    for field in (key, value):
        if field is None:
            parts.append(_I32.pack(-1))
        else:
            parts.append(_I32.pack(len(field)))
            parts.append(field)
    return b"".join(parts)


def encode_legacy_message(
    *,
    offset: int,
    key: bytes | None,
    value: bytes | None,
    magic: int = 1,
    timestamp: int = NO_TIMESTAMP,
    attributes: int = 0,
) -> bytes:
    """One legacy entry (offset, size, crc, message); ``attributes`` is written as given."""
    if magic not in (0, 1):
        raise ValueError(f"legacy magic must be 0 or 1, not {magic}")
    body = _message_body(magic, attributes, timestamp, key, value)
    return _OFFSET_SIZE.pack(offset, 4 + len(body)) + _U32.pack(zlib.crc32(body)) + body


def encode_legacy_wrapper(
    records: Sequence[Record],
    *,
    magic: int = 1,
    compression: int = 1,
    timestamp_type: int = 0,
    log_append_time: int | None = None,
) -> bytes:
    """A compressed wrapper holding ``records`` (absolute offsets) as the broker stores it.

    v1 inner offsets are written relative to the first record, v0 ones absolute; the wrapper
    offset is the last record's offset and its timestamp the max inner timestamp (or
    ``log_append_time`` under LogAppendTime).
    """
    if not records:
        raise ValueError("a wrapper needs at least one record")
    if compression not in (1, 2, 3):
        raise ValueError(f"legacy compression must be 1, 2 or 3, not {compression}")
    first = records[0].offset
    inner = b"".join(
        encode_legacy_message(
            offset=(r.offset - first) if magic == MAGIC_VALUE_V1 else r.offset,
            key=r.key,
            value=r.value,
            magic=magic,
            timestamp=r.timestamp,
        )
        for r in records
    )
    if timestamp_type == 1 and magic == MAGIC_VALUE_V1:
        wrapper_ts = log_append_time if log_append_time is not None else max(r.timestamp for r in records)
    else:
        wrapper_ts = max(r.timestamp for r in records)
    attributes = compression | ((timestamp_type << 3) if magic == MAGIC_VALUE_V1 else 0)
    return encode_legacy_message(
        offset=records[-1].offset,
        key=None,
        value=compress(compression, inner),
        magic=magic,
        timestamp=wrapper_ts,
        attributes=attributes,
    )
