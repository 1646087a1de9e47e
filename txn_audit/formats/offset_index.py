"""Segment index files: ``<base>.index`` (offset index) and ``<base>.timeindex`` (time index).

* ``.index``: 8-byte entries ``>ii`` — offset relative to the segment base (the last offset of
  the indexed batch) and the byte position of that batch in the ``.log``. Sparse: roughly one
  entry per ``index.interval.bytes`` (4096) of log. Relative offsets strictly increase.
* ``.timeindex``: 12-byte entries ``>qi`` — the max timestamp so far and the relative offset
  of the record that has it. Timestamps strictly increase, offsets never decrease.

Both files are preallocated (``segment.index.bytes``) while their segment is active and only
trimmed on roll or clean shutdown, so after a crash they end in zeros. As in Kafka, an entry
after the first one with relative offset 0 marks the start of that zero tail; a file of zeros
longer than one entry holds no entries at all. Indexes are derived data (Kafka rebuilds them on
recovery), so every problem here is a ``bad_index`` *warning* and decoding continues.

Kafka sources: ``OffsetIndex.java``, ``TimeIndex.java``, ``AbstractIndex.java``,
``LogSegment.java`` (``append``, ``onBecomeInactiveSegment``). See kafka-formats.md section 1.2.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from typing import Final

from txn_audit.errors import CorruptInputError
from txn_audit.formats.legacy import RECORD_OVERHEAD_V0
from txn_audit.formats.model import DecodeIssue, IssueKind, OffsetIndexEntry, Severity, TimeIndexEntry
from txn_audit.formats.primitives import INT32_MAX, INT32_MIN, Buffer
from txn_audit.formats.record_batch import SegmentBuffer, as_view, decode_batch_header
from txn_audit.formats.records import HEADER_SIZE_UP_TO_MAGIC, LOG_OVERHEAD, SIZE_LENGTH, SIZE_OFFSET

OFFSET_ENTRY: Final = struct.Struct(">ii")
TIME_ENTRY: Final = struct.Struct(">qi")
OFFSET_ENTRY_SIZE: Final = OFFSET_ENTRY.size  # 8
TIME_ENTRY_SIZE: Final = TIME_ENTRY.size  # 12

_BAD: Final = IssueKind.BAD_INDEX.value
_WARN: Final = Severity.WARNING.value


def _is_zero(mv: memoryview, start: int, stop: int) -> bool:
    chunk = mv[start:stop].tobytes()  # C-speed check: preallocated indexes are megabytes of zeros
    return chunk.count(0) == len(chunk)


def _live_count(mv: memoryview, entry_size: int, rel_offset_at: int, what: str) -> tuple[int, list[DecodeIssue]]:
    """Number of real entries before the zero tail, plus issues about the file's shape."""
    issues: list[DecodeIssue] = []
    whole = len(mv) // entry_size
    tail = len(mv) - whole * entry_size
    if tail:
        issues.append(
            DecodeIssue(
                whole * entry_size,
                _BAD,
                _WARN,
                f"{what}: {len(mv)} bytes is not a multiple of {entry_size}; the last {tail} bytes are ignored",
            )
        )
    if whole > 1 and _is_zero(mv, 0, whole * entry_size):
        return 0, issues  # preallocated, nothing indexed yet
    count = whole
    for i in range(1, whole):
        (rel,) = struct.unpack_from(">i", mv, i * entry_size + rel_offset_at)
        if rel == 0:
            count = i
            break
    if count < whole and not _is_zero(mv, count * entry_size, whole * entry_size):
        issues.append(
            DecodeIssue(
                count * entry_size,
                _BAD,
                _WARN,
                f"{what}: entry {count} has relative offset 0 but the bytes after it are not all zero; "
                f"{whole - count} entries from here on are ignored",
            )
        )
    return count, issues


def decode_offset_index(data: Buffer, *, base_offset: int) -> tuple[list[OffsetIndexEntry], list[DecodeIssue]]:
    """Entries with absolute offsets, and warnings (fragment, order, garbage after the zero tail)."""
    mv = memoryview(data)
    count, issues = _live_count(mv, OFFSET_ENTRY_SIZE, 0, "offset index")
    entries: list[OffsetIndexEntry] = []
    prev: OffsetIndexEntry | None = None
    for i in range(count):
        rel, position = OFFSET_ENTRY.unpack_from(mv, i * OFFSET_ENTRY_SIZE)
        e = OffsetIndexEntry(offset=base_offset + rel, position=position)
        if position < 0:
            issues.append(
                DecodeIssue(i * OFFSET_ENTRY_SIZE, _BAD, _WARN, f"offset index entry {i}: position {position}")
            )
        if prev is not None and (e.offset <= prev.offset or e.position <= prev.position):
            issues.append(
                DecodeIssue(
                    i * OFFSET_ENTRY_SIZE,
                    _BAD,
                    _WARN,
                    f"offset index entry {i} (offset {e.offset}, position {e.position}) does not follow "
                    f"(offset {prev.offset}, position {prev.position})",
                )
            )
        if rel < 0:
            issues.append(
                DecodeIssue(i * OFFSET_ENTRY_SIZE, _BAD, _WARN, f"offset index entry {i}: relative offset {rel}")
            )
        entries.append(e)
        prev = e
    return entries, issues


def decode_time_index(data: Buffer, *, base_offset: int) -> tuple[list[TimeIndexEntry], list[DecodeIssue]]:
    """Entries with absolute offsets, and warnings (fragment, order, garbage after the zero tail)."""
    mv = memoryview(data)
    count, issues = _live_count(mv, TIME_ENTRY_SIZE, 8, "time index")
    entries: list[TimeIndexEntry] = []
    prev: TimeIndexEntry | None = None
    for i in range(count):
        ts, rel = TIME_ENTRY.unpack_from(mv, i * TIME_ENTRY_SIZE)
        e = TimeIndexEntry(timestamp=ts, offset=base_offset + rel)
        if rel < 0:
            issues.append(DecodeIssue(i * TIME_ENTRY_SIZE, _BAD, _WARN, f"time index entry {i}: relative offset {rel}"))
        if prev is not None and (e.timestamp <= prev.timestamp or e.offset < prev.offset):
            issues.append(
                DecodeIssue(
                    i * TIME_ENTRY_SIZE,
                    _BAD,
                    _WARN,
                    f"time index entry {i} (timestamp {e.timestamp}, offset {e.offset}) does not follow "
                    f"(timestamp {prev.timestamp}, offset {prev.offset})",
                )
            )
        entries.append(e)
        prev = e
    return entries, issues


def _relative(offset: int, base_offset: int) -> int:
    rel = offset - base_offset
    if not INT32_MIN <= rel <= INT32_MAX:
        raise ValueError(f"offset {offset} is not within an int32 of base offset {base_offset}")
    return rel


def encode_offset_index(
    entries: Iterable[OffsetIndexEntry], *, base_offset: int, preallocated_bytes: int = 0
) -> bytes:
    """``.index`` bytes; ``preallocated_bytes`` pads with zeros like an active segment's file."""
    out = b"".join(OFFSET_ENTRY.pack(_relative(e.offset, base_offset), e.position) for e in entries)
    return out + bytes(max(0, preallocated_bytes - len(out)))


def encode_time_index(entries: Iterable[TimeIndexEntry], *, base_offset: int, preallocated_bytes: int = 0) -> bytes:
    """``.timeindex`` bytes; ``preallocated_bytes`` pads with zeros like an active segment's file."""
    out = b"".join(TIME_ENTRY.pack(e.timestamp, _relative(e.offset, base_offset)) for e in entries)
    return out + bytes(max(0, preallocated_bytes - len(out)))


def batch_boundaries(entries: Iterable[OffsetIndexEntry]) -> list[int]:
    """Sorted distinct ``.log`` positions at which a batch starts, per the offset index.

    Used to cut a large segment into slices that each begin on a batch (position 0 appears only
    if an entry says so). Negative positions are dropped; nothing else is checked here.
    """
    return sorted({e.position for e in entries if e.position >= 0})


def _batch_start_agrees(log: memoryview, entry: OffsetIndexEntry) -> bool:
    """Whether a whole v2 batch with a valid CRC-32C starts at the entry's position and its
    base offset is at most the entry's offset (the last offset of the append it indexes)."""
    try:
        header = decode_batch_header(log, entry.position, verify_crc=True)
    except CorruptInputError:
        return False
    return header.crc_ok and header.base_offset <= entry.offset


def _walk_starts(log: memoryview, start: int, stop: int, slice_bytes: int) -> list[int]:
    """Batch starts in ``(start, stop)`` about ``slice_bytes`` apart, by a walk over the entry
    sizes from the batch start ``start``; the walk gives up where the framing does."""
    out: list[int] = []
    n = len(log)
    target = start + slice_bytes
    pos = start
    while pos < stop and n - pos >= HEADER_SIZE_UP_TO_MAGIC:
        size = int.from_bytes(log[pos + SIZE_OFFSET : pos + SIZE_OFFSET + SIZE_LENGTH], "big", signed=True)
        if size < RECORD_OVERHEAD_V0 or pos + LOG_OVERHEAD + size > n:
            break
        if pos >= target:
            out.append(pos)
            target = pos + slice_bytes
        pos += LOG_OVERHEAD + size
    return out


def slice_starts(log: SegmentBuffer, entries: Iterable[OffsetIndexEntry], *, slice_bytes: int) -> list[int]:
    """Positions that cut a segment into slices of about ``slice_bytes``, each at a batch start.

    The first is always 0; slice ``k`` is ``[starts[k], starts[k + 1])``, the last one runs to
    the end of the file. Positions come from the ``.index`` entries; each one used is checked
    (a whole v2 batch with a valid CRC whose offsets agree with the entry), and where the
    index is missing, stale or stops early, a walk over entry sizes from the last good
    position fills the gap. Whether the slices really chain up is proven when they are
    decoded: a slice whose walk does not end exactly where the next begins is re-decoded
    with its successors (``fast_headers.decode_sliced``).
    """
    if slice_bytes <= 0:
        raise ValueError(f"slice_bytes must be positive, not {slice_bytes}")
    mv = as_view(log)
    n = len(mv)
    starts = [0]
    try:
        for entry in sorted(entries, key=lambda e: e.position):
            gap_end = entry.position
            if gap_end < starts[-1] + slice_bytes or gap_end >= n:
                continue
            if not _batch_start_agrees(mv, entry):
                continue
            if gap_end - starts[-1] >= 2 * slice_bytes:  # the index skipped a stretch: walk it
                starts += _walk_starts(mv, starts[-1], gap_end - slice_bytes // 2, slice_bytes)
            starts.append(gap_end)
        if n - starts[-1] >= 2 * slice_bytes:
            starts += _walk_starts(mv, starts[-1], n - slice_bytes // 2, slice_bytes)
    finally:
        if mv is not log:
            mv.release()
    return starts
