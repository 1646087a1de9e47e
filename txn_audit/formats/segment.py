"""The framing walk over a ``.log`` segment: batch headers and decode issues, in file order.

A segment is entries back to back. Every entry starts with int64 offset and int32 size (bytes
that follow), and has its magic byte at +16 whatever the format, so the walk reads 17 bytes,
checks the size, and dispatches: magic 2 is a v2 record batch (``record_batch``), magic 0/1 a
legacy message (``legacy``). Damage is reported as ``DecodeIssue`` rows instead of exceptions:

* < 17 bytes left, or an entry running past the end: ``truncated_tail`` (warning; the normal
  end of a crashed broker's active segment), or ``zero_filled_tail`` (info) if every remaining
  byte is zero (preallocated segment). The walk stops.
* size < 14, or a v2 size below the 61-byte batch overhead: ``bad_length`` (error; framing is
  lost, the walk stops), again ``zero_filled_tail`` if the rest is zeros.
* magic outside {0, 1, 2}: ``bad_magic`` (error); the size still looks sane, so skip the entry.
* CRC mismatch: the header is yielded (``computed_crc`` differs) followed by ``crc_mismatch``.
* a base offset not above the previous entry's last offset: ``offset_order`` after the header.

The per-batch cost is two ``struct`` unpacks and one CRC-32C over a memoryview slice: nothing
is copied, and a size field pointing far past the end never allocates anything.
"""

from __future__ import annotations

import struct
from collections.abc import Generator
from typing import Final

from txn_audit.errors import CorruptInputError
from txn_audit.formats.legacy import RECORD_OVERHEAD_V0, decode_legacy_entry, legacy_crc
from txn_audit.formats.model import BatchHeader, DecodeIssue, IssueKind, Record, Severity
from txn_audit.formats.record_batch import (
    MIN_BATCH_LENGTH,
    SegmentBuffer,
    as_view,
    decode_batch_header,
    decode_records,
)
from txn_audit.formats.records import (
    HEADER_SIZE_UP_TO_MAGIC,
    LOG_OVERHEAD,
    MAGIC_VALUE_V0,
    MAGIC_VALUE_V1,
    MAGIC_VALUE_V2,
)

_FRAME: Final = struct.Struct(">qiib")  # offset, size, (leader epoch | legacy crc), magic
_ZERO_CHUNK: Final = bytes(1 << 16)

_TRUNCATED = IssueKind.TRUNCATED_TAIL.value
_ZERO_TAIL = IssueKind.ZERO_FILLED_TAIL.value
_BAD_LENGTH = IssueKind.BAD_LENGTH.value
_BAD_MAGIC = IssueKind.BAD_MAGIC.value
_CRC = IssueKind.CRC_MISMATCH.value
_ORDER = IssueKind.OFFSET_ORDER.value
_ERROR = Severity.ERROR.value


def is_zero(mv: memoryview, start: int, stop: int) -> bool:
    """Whether bytes [start, stop) are all zero, compared in 64 KiB chunks (no large copies)."""
    zeros = memoryview(_ZERO_CHUNK)
    step = len(_ZERO_CHUNK)
    pos = start
    while pos < stop:
        k = min(step, stop - pos)
        if mv[pos : pos + k] != zeros[:k]:
            return False
        pos += k
    return True


def _tail(mv: memoryview, pos: int, n: int, detail: str) -> DecodeIssue:
    if is_zero(mv, pos, n):
        return DecodeIssue(pos, _ZERO_TAIL, Severity.INFO.value, f"{n - pos} zero bytes after the last entry")
    return DecodeIssue(pos, _TRUNCATED, Severity.WARNING.value, detail)


def _bad_length(mv: memoryview, pos: int, n: int, detail: str) -> DecodeIssue:
    if is_zero(mv, pos, n):
        return DecodeIssue(pos, _ZERO_TAIL, Severity.INFO.value, f"{n - pos} zero bytes after the last entry")
    return DecodeIssue(pos, _BAD_LENGTH, _ERROR, detail)


def iter_batches(
    buf: SegmentBuffer, *, start: int = 0, end: int | None = None, verify_crc: bool = True
) -> Generator[BatchHeader | DecodeIssue, None, None]:
    """Walk the entries of a segment buffer (bytes, memoryview or mmap) from ``start`` to ``end``.

    Yields a ``BatchHeader`` per entry and a ``DecodeIssue`` per problem (see the module doc).
    Never raises on bad data. The walk holds a memoryview on ``buf`` until it is exhausted or
    closed, so finish (or ``close()``) it before closing an mmap.
    """
    mv = as_view(buf)
    owned = mv is not buf
    n = len(mv) if end is None else min(end, len(mv))
    pos = start
    prev_last: int | None = None
    unpack_frame = _FRAME.unpack_from
    try:
        while pos < n:
            left = n - pos
            if left < HEADER_SIZE_UP_TO_MAGIC:
                yield _tail(mv, pos, n, f"{left} bytes left, fewer than the 17-byte entry header")
                return
            _offset, size, _, magic = unpack_frame(mv, pos)
            if size < RECORD_OVERHEAD_V0:  # the smallest entry: a v0 message
                yield _bad_length(mv, pos, n, f"entry size {size} below the 14-byte minimum")
                return
            stop = pos + LOG_OVERHEAD + size
            if stop > n:
                yield _tail(mv, pos, n, f"entry of {size + LOG_OVERHEAD} bytes, only {left} left")
                return
            if magic == MAGIC_VALUE_V2:
                if size < MIN_BATCH_LENGTH:
                    yield _bad_length(mv, pos, n, f"v2 batch size {size + LOG_OVERHEAD} below the 61-byte header")
                    return
                header = decode_batch_header(mv, pos, verify_crc=verify_crc)
            elif magic == MAGIC_VALUE_V0 or magic == MAGIC_VALUE_V1:
                try:
                    header = decode_legacy_entry(mv, pos, size, verify_crc=verify_crc)[0]
                except CorruptInputError as err:
                    if verify_crc:
                        stored, computed = legacy_crc(mv, pos, size)
                        if stored != computed:
                            yield DecodeIssue(pos, _CRC, _ERROR, _crc_detail(magic, stored, computed))
                    yield DecodeIssue(err.position, err.kind, _ERROR, f"magic {magic} message: {err.detail}")
                    pos = stop
                    continue
            else:
                detail = f"magic {magic} (expected 0, 1 or 2); skipped {size + LOG_OVERHEAD} bytes"
                yield DecodeIssue(pos, _BAD_MAGIC, _ERROR, detail)
                pos = stop
                continue
            yield header
            if header.stored_crc != header.computed_crc:
                yield DecodeIssue(pos, _CRC, _ERROR, _crc_detail(magic, header.stored_crc, header.computed_crc))
            if prev_last is not None and header.base_offset <= prev_last:
                yield DecodeIssue(
                    pos,
                    _ORDER,
                    _ERROR,
                    f"base offset {header.base_offset} not above the previous last offset {prev_last}",
                )
            prev_last = header.last_offset
            pos = stop
    finally:
        if owned:
            mv.release()


def _crc_detail(magic: int, stored: int, computed: int) -> str:
    algo = "CRC-32C" if magic == MAGIC_VALUE_V2 else "CRC-32"
    return f"stored {algo} {stored:#010x}, computed {computed:#010x}"


def iter_records(buf: SegmentBuffer, header: BatchHeader) -> list[Record]:
    """Records of any entry yielded by ``iter_batches``, whatever its magic."""
    if header.magic == MAGIC_VALUE_V2:
        return decode_records(buf, header)
    return decode_legacy_entry(buf, header.position, header.size_bytes - LOG_OVERHEAD, verify_crc=False)[1]
