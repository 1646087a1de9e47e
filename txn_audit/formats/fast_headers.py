"""Vectorised decoding of v2 batch headers: the fast path of a segment scan.

Same answers as ``segment.iter_batches`` (the reference walk), columnar instead of one object
per batch. A region of a segment is decoded by one compiled pass (numba) over its batches:

* the length walk: from each batch's int32 length to the next batch, over *regular* batches
  only (magic 2, a size of at least the 61-byte header, wholly inside the region), stopping
  at the first entry that is not one, or after ``max_batches``;
* while a batch's header is in cache, its big-endian fields go into one int64 block (one
  row per field), from which the columns and the derived values (last offset and sequence,
  attribute bits, delete horizon) are NumPy expressions over whole arrays;
* its CRC-32C (bytes 21 to its end) by the ``crc32c`` package's own C routine (hardware
  CRC where the CPU has it), called from the compiled loop; when that routine cannot be
  reached, a table-driven CRC compiled by numba. Either is checked against
  ``crc32c.crc32c`` before first use.

Profiled, fusing these matters: the walk alone is a chain of dependent loads, a cache miss
per batch, while the CRC streams each batch through the cache so the next header is there
when the walk reaches it; and converting unaligned big-endian fields of a gathered NumPy
structured array cost more than the walk and the CRC together.

The entry that stopped the walk (legacy magic 0/1, bad magic, bad length, a torn or zeroed
tail) is handed to the reference walk, whose rows and issues are taken as they are, and the
walk resumes after it when the reference would continue. CRC mismatches and offset-order
issues are emitted exactly as the reference emits them, in the same order. Nothing here reads
records; control markers and coordinator records stay with the reference decoder.

Derived values are fixed-width like the table columns (``last_offset`` is int64 two's
complement); they differ from the reference's Python integers only for a base offset within
2^31 of the int64 limit, which no table can hold anyway.
"""

from __future__ import annotations

import ctypes
import mmap
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, fields
from typing import Final

import crc32c
import numba
import numpy as np
from llvmlite import ir
from numba.core import types
from numba.extending import intrinsic

from txn_audit.formats.legacy import RECORD_OVERHEAD_V0
from txn_audit.formats.model import NO_SEQUENCE, NO_TIMESTAMP, BatchHeader, DecodeIssue, IssueKind, Severity
from txn_audit.formats.primitives import INT32_MAX
from txn_audit.formats.record_batch import (
    ATTRIBUTE_LENGTH,
    ATTRIBUTES_OFFSET,
    BASE_SEQUENCE_LENGTH,
    BASE_SEQUENCE_OFFSET,
    BASE_TIMESTAMP_LENGTH,
    BASE_TIMESTAMP_OFFSET,
    CONTROL_MASK,
    CRC_LENGTH,
    CRC_OFFSET,
    DELETE_HORIZON_MASK,
    LAST_OFFSET_DELTA_LENGTH,
    LAST_OFFSET_DELTA_OFFSET,
    MAX_TIMESTAMP_LENGTH,
    MAX_TIMESTAMP_OFFSET,
    MIN_BATCH_LENGTH,
    PARTITION_LEADER_EPOCH_LENGTH,
    PARTITION_LEADER_EPOCH_OFFSET,
    PRODUCER_EPOCH_LENGTH,
    PRODUCER_EPOCH_OFFSET,
    PRODUCER_ID_LENGTH,
    PRODUCER_ID_OFFSET,
    RECORDS_COUNT_LENGTH,
    RECORDS_COUNT_OFFSET,
    TRANSACTIONAL_MASK,
    as_view,
)
from txn_audit.formats.records import (
    COMPRESSION_CODEC_MASK,
    HEADER_SIZE_UP_TO_MAGIC,
    LOG_OVERHEAD,
    MAGIC_OFFSET,
    MAGIC_VALUE_V2,
    OFFSET_LENGTH,
    OFFSET_OFFSET,
    SIZE_LENGTH,
    SIZE_OFFSET,
    TIMESTAMP_TYPE_MASK,
)
from txn_audit.formats.segment import iter_batches

# The compiled walk reads the header at the byte offsets and sizes of ``record_batch`` (and the
# framing of ``records``): numba freezes these module-level ints as compile-time constants.
_CRC_COVERED_BEFORE_END: Final = ATTRIBUTES_OFFSET - LOG_OVERHEAD  # batch bytes the CRC skips, beyond the framing
DEFAULT_MAX_BATCHES: Final = 1 << 16  # rows per chunk: about 20 MB of working arrays

_CRC = IssueKind.CRC_MISMATCH.value
_ORDER = IssueKind.OFFSET_ORDER.value
_ERROR = Severity.ERROR.value


@dataclass(frozen=True, slots=True)
class HeaderColumns:
    """One NumPy array per ``BatchHeader`` field, rows in file order."""

    position: np.ndarray  # int64
    base_offset: np.ndarray  # int64
    last_offset: np.ndarray  # int64
    size_bytes: np.ndarray  # int64
    magic: np.ndarray  # int8
    partition_leader_epoch: np.ndarray  # int32
    attributes: np.ndarray  # int16
    compression: np.ndarray  # int8
    timestamp_type: np.ndarray  # int8
    is_transactional: np.ndarray  # bool
    is_control: np.ndarray  # bool
    has_delete_horizon: np.ndarray  # bool
    producer_id: np.ndarray  # int64
    producer_epoch: np.ndarray  # int16
    base_sequence: np.ndarray  # int32
    last_sequence: np.ndarray  # int64
    record_count: np.ndarray  # int32
    first_timestamp: np.ndarray  # int64
    max_timestamp: np.ndarray  # int64
    delete_horizon_ms: np.ndarray  # int64
    stored_crc: np.ndarray  # int64
    computed_crc: np.ndarray  # int64

    def __len__(self) -> int:
        return int(self.position.shape[0])

    @property
    def crc_ok(self) -> np.ndarray:
        ok: np.ndarray = self.stored_crc == self.computed_crc
        return ok

    def header(self, i: int) -> BatchHeader:
        """Row ``i`` as the reference decoder's ``BatchHeader``."""
        values = [getattr(self, f.name)[i].item() for f in _FIELDS]
        return BatchHeader(*values)

    def headers(self, rows: np.ndarray | None = None) -> list[BatchHeader]:
        """All rows (or the rows at indices ``rows``) as ``BatchHeader`` values."""
        columns = [(getattr(self, f.name) if rows is None else getattr(self, f.name)[rows]).tolist() for f in _FIELDS]
        return [BatchHeader(*row) for row in zip(*columns, strict=True)]

    @classmethod
    def empty(cls) -> HeaderColumns:
        return cls(**{f.name: np.empty(0, _DTYPES[f.name]) for f in _FIELDS})

    @classmethod
    def from_headers(cls, headers: Sequence[BatchHeader]) -> HeaderColumns:
        return cls(**{f.name: np.array([getattr(h, f.name) for h in headers], _DTYPES[f.name]) for f in _FIELDS})

    @classmethod
    def concat(cls, parts: Sequence[HeaderColumns]) -> HeaderColumns:
        parts = [p for p in parts if len(p)]
        if not parts:
            return cls.empty()
        if len(parts) == 1:
            return parts[0]
        return cls(**{f.name: np.concatenate([getattr(p, f.name) for p in parts]) for f in _FIELDS})


_FIELDS = fields(HeaderColumns)
_DTYPES: Final[dict[str, type]] = {
    "position": np.int64, "base_offset": np.int64, "last_offset": np.int64, "size_bytes": np.int64,
    "magic": np.int8, "partition_leader_epoch": np.int32, "attributes": np.int16, "compression": np.int8,
    "timestamp_type": np.int8, "is_transactional": np.bool_, "is_control": np.bool_,
    "has_delete_horizon": np.bool_, "producer_id": np.int64, "producer_epoch": np.int16,
    "base_sequence": np.int32, "last_sequence": np.int64, "record_count": np.int32,
    "first_timestamp": np.int64, "max_timestamp": np.int64, "delete_horizon_ms": np.int64,
    "stored_crc": np.int64, "computed_crc": np.int64,
}  # fmt: skip
assert set(_DTYPES) == {f.name for f in _FIELDS}


@dataclass(frozen=True, slots=True)
class HeaderChunk:
    """Rows and issues of consecutive entries of a segment.

    ``issue_rows[k]`` is how many of this chunk's rows come before ``issues[k]`` in the
    reference walk's order, so the walk's exact sequence of headers and issues can be rebuilt.
    """

    columns: HeaderColumns
    issues: list[DecodeIssue]
    issue_rows: list[int]
    lost_at: int | None = None  # the walk stopped here: framing lost, or a torn or zeroed tail


@dataclass(frozen=True, slots=True)
class SegmentHeaders:
    """A whole region decoded: rows, issues, and where the walk ended (``stop``).

    ``stop`` equals the region's end unless the framing was lost or the tail is torn or
    zeroed; then it is the position of that last issue.
    """

    columns: HeaderColumns
    issues: list[DecodeIssue]
    issue_rows: list[int]
    stop: int


# -- compiled kernels --------------------------------------------------------------------

# rows of the kernel's output block
_POS, _BASE, _LEN, _EPOCH_L, _CRC_S, _ATTR, _DELTA, _BASE_TS, _MAX_TS, _PID, _PEPOCH, _SEQ, _COUNT, _CRC_C = range(14)
_NROWS: Final = 14
CRC_NONE: Final = 0
CRC_NATIVE: Final = 1
CRC_TABLE: Final = 2


@numba.njit(cache=True, nogil=True, inline="always")
def _be(u8: np.ndarray, p: int, width: int) -> int:  # pragma: no cover - compiled
    """Signed big-endian integer of ``width`` bytes at ``p``."""
    v = np.uint64(0)
    for k in range(width):
        v = (v << np.uint64(8)) | np.uint64(u8[p + k])
    if width < 8:
        sign = np.uint64(1) << np.uint64(8 * width - 1)
        if v & sign:
            return int(np.int64(v) - (np.int64(1) << np.int64(8 * width)))
    return int(np.int64(v))


@intrinsic
def _call_crc_routine(typingctx, address, crc, data, length):  # type: ignore[no-untyped-def]  # numba types  # pragma: no cover
    """Call ``uint32 f(uint32 crc, const uint8 *data, size_t length)`` at ``address``."""
    sig = types.uint32(types.intp, types.uint32, types.intp, types.intp)

    def codegen(context, builder, signature, args):  # type: ignore[no-untyped-def]  # numba and llvmlite objects
        addr, c, ptr, n = args
        i8p = ir.IntType(8).as_pointer()
        fnty = ir.FunctionType(ir.IntType(32), [ir.IntType(32), i8p, ir.IntType(64)])
        fn = builder.inttoptr(addr, fnty.as_pointer())
        return builder.call(fn, [c, builder.inttoptr(ptr, i8p), builder.sext(n, ir.IntType(64))])

    return sig, codegen


@numba.njit(cache=True, nogil=True, inline="always")
def _crc_table_one(u8: np.ndarray, i: int, stop: int, t: np.ndarray) -> int:  # pragma: no cover - compiled
    """CRC-32C of ``u8[i:stop]``, slicing by 8 bytes."""
    c = np.uint32(0xFFFFFFFF)
    while i + 8 <= stop:
        lo = c ^ (np.uint32(u8[i]) | (np.uint32(u8[i + 1]) << 8) | (np.uint32(u8[i + 2]) << 16)
                  | (np.uint32(u8[i + 3]) << 24))
        hi = (np.uint32(u8[i + 4]) | (np.uint32(u8[i + 5]) << 8) | (np.uint32(u8[i + 6]) << 16)
              | (np.uint32(u8[i + 7]) << 24))
        c = (t[7, lo & 0xFF] ^ t[6, (lo >> 8) & 0xFF] ^ t[5, (lo >> 16) & 0xFF] ^ t[4, lo >> 24]
             ^ t[3, hi & 0xFF] ^ t[2, (hi >> 8) & 0xFF] ^ t[1, (hi >> 16) & 0xFF] ^ t[0, hi >> 24])
        i += 8
    while i < stop:
        c = t[0, (c ^ u8[i]) & 0xFF] ^ (c >> 8)
        i += 1
    return int(c ^ np.uint32(0xFFFFFFFF))


@numba.njit(cache=True, nogil=True)
def _scan(u8: np.ndarray, pos: int, end: int, crc_mode: int, address: int, table: np.ndarray,
          out: np.ndarray, cap: int) -> tuple[int, int]:  # pragma: no cover - compiled
    """Walk consecutive regular v2 batches from ``pos``: raw header fields and CRC into ``out``.

    A regular batch has magic 2, a size of at least ``MIN_BATCH_LENGTH`` and ends by ``end``.
    Stops before the first entry that is not one, or after ``cap`` batches. Returns (batches,
    stop position).
    """
    base = u8.ctypes.data
    count = 0
    while count < cap and end - pos >= HEADER_SIZE_UP_TO_MAGIC:
        size = _be(u8, pos + SIZE_OFFSET, SIZE_LENGTH)
        if size < MIN_BATCH_LENGTH or u8[pos + MAGIC_OFFSET] != MAGIC_VALUE_V2:
            break
        stop = pos + LOG_OVERHEAD + size
        if stop > end:
            break
        out[_POS, count] = pos
        out[_BASE, count] = _be(u8, pos + OFFSET_OFFSET, OFFSET_LENGTH)
        out[_LEN, count] = size
        out[_EPOCH_L, count] = _be(u8, pos + PARTITION_LEADER_EPOCH_OFFSET, PARTITION_LEADER_EPOCH_LENGTH)
        stored = _be(u8, pos + CRC_OFFSET, CRC_LENGTH) & 0xFFFFFFFF
        out[_CRC_S, count] = stored
        out[_ATTR, count] = _be(u8, pos + ATTRIBUTES_OFFSET, ATTRIBUTE_LENGTH)
        out[_DELTA, count] = _be(u8, pos + LAST_OFFSET_DELTA_OFFSET, LAST_OFFSET_DELTA_LENGTH)
        out[_BASE_TS, count] = _be(u8, pos + BASE_TIMESTAMP_OFFSET, BASE_TIMESTAMP_LENGTH)
        out[_MAX_TS, count] = _be(u8, pos + MAX_TIMESTAMP_OFFSET, MAX_TIMESTAMP_LENGTH)
        out[_PID, count] = _be(u8, pos + PRODUCER_ID_OFFSET, PRODUCER_ID_LENGTH)
        out[_PEPOCH, count] = _be(u8, pos + PRODUCER_EPOCH_OFFSET, PRODUCER_EPOCH_LENGTH)
        out[_SEQ, count] = _be(u8, pos + BASE_SEQUENCE_OFFSET, BASE_SEQUENCE_LENGTH)
        out[_COUNT, count] = _be(u8, pos + RECORDS_COUNT_OFFSET, RECORDS_COUNT_LENGTH)
        if crc_mode == CRC_NATIVE:
            # an intrinsic is called without the typing context its definition takes first
            c: np.uint32 = _call_crc_routine(  # type: ignore[call-arg]
                address, np.uint32(0xFFFFFFFF), base + pos + ATTRIBUTES_OFFSET, size - _CRC_COVERED_BEFORE_END
            )
            out[_CRC_C, count] = np.int64(c ^ np.uint32(0xFFFFFFFF))
        elif crc_mode == CRC_TABLE:
            out[_CRC_C, count] = _crc_table_one(u8, pos + ATTRIBUTES_OFFSET, stop, table)
        else:
            out[_CRC_C, count] = stored
        count += 1
        pos = stop
    return count, pos


def _crc_table() -> np.ndarray:
    t = np.zeros((8, 256), np.uint32)
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ (0x82F63B78 if c & 1 else 0)
        t[0, i] = c
    for i in range(256):
        c = int(t[0, i])
        for k in range(1, 8):
            c = int(t[0, c & 0xFF]) ^ (c >> 8)
            t[k, i] = c
    return t


_TABLE: Final = _crc_table()


def _native_address() -> int:
    """Address of the C routine behind ``crc32c.crc32c`` (hardware or software), or 0."""
    try:
        from crc32c import _crc32c as ext  # the package's private C module: absent in some builds, hence here

        lib = ctypes.CDLL(ext.__file__)
        name = "_crc32c_hw_adler" if getattr(crc32c, "hardware_based", False) else "_crc32c_sw_slicing_by_8"
        return int(ctypes.cast(getattr(lib, name), ctypes.c_void_p).value or 0)
    except (ImportError, OSError, AttributeError):
        return 0


def _probe(mode: int, address: int) -> bool:
    """Whether a CRC mode agrees with ``crc32c.crc32c`` on batches of assorted sizes."""
    rng = np.random.default_rng(5)
    sizes = [49, 50, 57, 64, 300, 3000, 5000]
    data = bytearray()
    for size in sizes:
        body = bytearray(rng.integers(0, 256, LOG_OVERHEAD + size, dtype=np.uint8).tobytes())
        body[SIZE_OFFSET : SIZE_OFFSET + SIZE_LENGTH] = size.to_bytes(SIZE_LENGTH, "big")
        body[MAGIC_OFFSET] = MAGIC_VALUE_V2
        data += body
    out = np.zeros((_NROWS, len(sizes)), np.int64)
    count, _ = _scan(_u8(bytes(data)), 0, len(data), mode, address, _TABLE, out, len(sizes))
    starts = np.cumsum([0] + [LOG_OVERHEAD + s for s in sizes])
    return count == len(sizes) and all(
        int(out[_CRC_C, i]) == crc32c.crc32c(bytes(data[starts[i] + ATTRIBUTES_OFFSET : starts[i + 1]]))
        for i in range(count)
    )


_crc_choice: tuple[int, int, str] | None = None


def _crc() -> tuple[int, int, str]:
    """(mode, address, description) of the CRC-32C kernel, chosen once per process."""
    global _crc_choice
    if _crc_choice is None:
        address = _native_address()
        kind = "hardware" if getattr(crc32c, "hardware_based", False) else "software"
        if address and _probe(CRC_NATIVE, address):
            _crc_choice = (CRC_NATIVE, address, f"crc32c's C routine ({kind}) called from numba")
        elif _probe(CRC_TABLE, 0):
            _crc_choice = (CRC_TABLE, 0, "numba table-driven CRC-32C (slicing by 8)")
        else:  # pragma: no cover - would mean a broken build
            raise RuntimeError("no CRC-32C kernel agrees with crc32c.crc32c")
    return _crc_choice


def crc_implementation() -> str:
    """Which CRC-32C kernel the fast path uses on this machine."""
    return _crc()[2]


# -- columns -----------------------------------------------------------------------------


def _java_int(values: np.ndarray) -> np.ndarray:
    """int64 values wrapped to Java ``int`` (32-bit two's complement), still as int64."""
    return ((values + 0x80000000) & 0xFFFFFFFF) - 0x80000000


def _columns(raw: np.ndarray) -> HeaderColumns:
    """Header columns from the kernel's raw block (one row per field)."""
    base_offset = raw[_BASE].copy()
    delta = raw[_DELTA]
    attributes = raw[_ATTR].astype(np.int16)
    seq = raw[_SEQ]
    base_ts = raw[_BASE_TS]
    wraps = seq > _java_int(INT32_MAX - delta)  # record_batch.increment_sequence, column-wise
    incremented = _java_int(np.where(wraps, delta - (INT32_MAX - seq) - 1, seq + delta))
    last_sequence = np.where(seq == NO_SEQUENCE, NO_SEQUENCE, incremented)
    horizon = (attributes & DELETE_HORIZON_MASK) != 0
    with np.errstate(over="ignore"):
        last_offset = base_offset + delta
    return HeaderColumns(
        position=raw[_POS].copy(),
        base_offset=base_offset,
        last_offset=last_offset,
        size_bytes=raw[_LEN] + LOG_OVERHEAD,
        magic=np.full(raw.shape[1], MAGIC_VALUE_V2, np.int8),
        partition_leader_epoch=raw[_EPOCH_L].astype(np.int32),
        attributes=attributes,
        compression=(attributes & COMPRESSION_CODEC_MASK).astype(np.int8),
        timestamp_type=((attributes & TIMESTAMP_TYPE_MASK) >> 3).astype(np.int8),
        is_transactional=(attributes & TRANSACTIONAL_MASK) != 0,
        is_control=(attributes & CONTROL_MASK) != 0,
        has_delete_horizon=horizon,
        producer_id=raw[_PID].copy(),
        producer_epoch=raw[_PEPOCH].astype(np.int16),
        base_sequence=seq.astype(np.int32),
        last_sequence=last_sequence,
        record_count=raw[_COUNT].astype(np.int32),
        first_timestamp=np.where(horizon, NO_TIMESTAMP, base_ts),
        max_timestamp=raw[_MAX_TS].copy(),
        delete_horizon_ms=np.where(horizon, base_ts, NO_TIMESTAMP),
        stored_crc=raw[_CRC_S].copy(),
        computed_crc=raw[_CRC_C].copy(),
    )


def _crc_detail(stored: int, computed: int) -> str:
    return f"stored CRC-32C {stored:#010x}, computed {computed:#010x}"


def order_detail(base: int, prev_last: int) -> str:
    return f"base offset {base} not above the previous last offset {prev_last}"


def _irregular_end(u8: np.ndarray, pos: int, end: int) -> tuple[int, bool]:
    """Where the reference walk's step at ``pos`` ends, and whether the walk goes on after it."""
    if end - pos < HEADER_SIZE_UP_TO_MAGIC:
        return end, False
    size = int.from_bytes(u8[pos + SIZE_OFFSET : pos + SIZE_OFFSET + SIZE_LENGTH].tobytes(), "big", signed=True)
    stop = pos + LOG_OVERHEAD + size
    short_v2 = u8[pos + MAGIC_OFFSET] == MAGIC_VALUE_V2 and size < MIN_BATCH_LENGTH
    if size < RECORD_OVERHEAD_V0 or stop > end or short_v2:
        return end, False
    return stop, True


def _u8(buf: bytes | bytearray | memoryview | mmap.mmap) -> np.ndarray:
    """A read-only byte array over ``buf`` (read-only always, so the kernel compiles once)."""
    u8 = np.frombuffer(as_view(buf), dtype=np.uint8)
    u8.flags.writeable = False
    return u8


def iter_header_chunks(
    buf: bytes | bytearray | memoryview | mmap.mmap,
    *,
    start: int = 0,
    end: int | None = None,
    verify_crc: bool = True,
    prev_last_offset: int | None = None,
    max_batches: int = DEFAULT_MAX_BATCHES,
) -> Iterator[HeaderChunk]:
    """Decode entries from ``start`` to ``end`` in chunks of at most about ``max_batches`` rows.

    Rows and issues equal ``iter_batches(buf, start=start, end=end)``'s. ``prev_last_offset``
    is the last offset of the entry just before ``start`` (a slice's predecessor), so that the
    offset-order check crosses slice boundaries as the whole-file walk does. Consume the
    iterator before closing an mmap ``buf``.
    """
    max_batches = max(1, max_batches)
    u8 = _u8(buf)
    n = u8.shape[0] if end is None else min(end, u8.shape[0])
    view = as_view(buf)
    raw = np.empty((_NROWS, max_batches), np.int64)
    mode, address, _ = _crc() if verify_crc else (CRC_NONE, 0, "")
    prev_last = prev_last_offset
    pos = start
    try:
        while pos < n:
            parts: list[HeaderColumns] = []
            issues: list[DecodeIssue] = []
            issue_rows: list[int] = []
            rows = 0
            lost_at: int | None = None
            while pos < n and rows < max_batches:
                count, stop = _scan(u8, pos, n, mode, address, _TABLE, raw, max_batches - rows)
                if count:
                    cols = _columns(raw[:, :count])
                    prev = np.empty(count, np.int64)
                    prev[1:] = cols.last_offset[:-1]
                    order_bad = cols.base_offset <= prev
                    if prev_last is None:
                        order_bad[0] = False
                    else:
                        prev[0] = prev_last
                        order_bad[0] = cols.base_offset[0] <= prev_last
                    crc_bad = cols.stored_crc != cols.computed_crc
                    for i in np.flatnonzero(crc_bad | order_bad).tolist():
                        p = int(cols.position[i])
                        if crc_bad[i]:
                            issues.append(DecodeIssue(p, _CRC, _ERROR, _crc_detail(int(cols.stored_crc[i]),
                                                                                  int(cols.computed_crc[i]))))
                            issue_rows.append(rows + i + 1)
                        if order_bad[i]:
                            issues.append(DecodeIssue(p, _ORDER, _ERROR, order_detail(int(cols.base_offset[i]),
                                                                                       int(prev[i]))))
                            issue_rows.append(rows + i + 1)
                    prev_last = int(cols.last_offset[-1])
                    parts.append(cols)
                    rows += count
                pos = stop
                if pos >= n or rows >= max_batches:
                    break
                # the entry at pos is not a regular v2 batch: the reference walk decides
                step_end, goes_on = _irregular_end(u8, pos, n)
                found: list[BatchHeader] = []
                for item in iter_batches(view, start=pos, end=step_end, verify_crc=verify_crc):
                    if isinstance(item, DecodeIssue):
                        issues.append(item)
                        issue_rows.append(rows + len(found))
                    else:
                        found.append(item)
                for h in found:  # at most one: the step is a single entry
                    if prev_last is not None and h.base_offset <= prev_last:
                        issues.append(DecodeIssue(h.position, _ORDER, _ERROR, order_detail(h.base_offset, prev_last)))
                        issue_rows.append(rows + 1)
                    prev_last = h.last_offset
                if found:
                    parts.append(HeaderColumns.from_headers(found))
                    rows += len(found)
                if not goes_on:
                    lost_at = pos
                pos = step_end if goes_on else n
            yield HeaderChunk(HeaderColumns.concat(parts), issues, issue_rows, lost_at)
    finally:
        del u8
        if view is not buf:
            view.release()


def decode_headers(
    buf: bytes | bytearray | memoryview | mmap.mmap,
    *,
    start: int = 0,
    end: int | None = None,
    verify_crc: bool = True,
    prev_last_offset: int | None = None,
) -> SegmentHeaders:
    """All rows and issues of ``[start, end)`` at once (see ``iter_header_chunks``)."""
    parts: list[HeaderColumns] = []
    issues: list[DecodeIssue] = []
    issue_rows: list[int] = []
    rows = 0
    stop = len(buf) if end is None else min(end, len(buf))
    for chunk in iter_header_chunks(buf, start=start, end=end, verify_crc=verify_crc,
                                    prev_last_offset=prev_last_offset):
        issues.extend(chunk.issues)
        issue_rows.extend(rows + r for r in chunk.issue_rows)
        parts.append(chunk.columns)
        rows += len(chunk.columns)
        if chunk.lost_at is not None:
            stop = chunk.lost_at
    return SegmentHeaders(HeaderColumns.concat(parts), issues, issue_rows, stop)


def stitch(
    buf: bytes | bytearray | memoryview | mmap.mmap,
    starts: Sequence[int],
    parts: Sequence[SegmentHeaders],
    *,
    verify_crc: bool = True,
) -> SegmentHeaders:
    """Join the decodes of consecutive slices (``parts[k]`` covers ``starts[k]`` to the next
    start, the last to the end of ``buf``), each made on its own, into the whole-file decode.

    Adds the offset-order check across each boundary. A slice whose walk stopped before its
    end (framing lost, or a batch running over the boundary: the boundary was no batch start)
    is decoded again from where it stopped to the end of the file, and later slices dropped.
    """
    n = len(buf)
    ends = list(starts[1:]) + [n]
    columns: list[HeaderColumns] = []
    issues: list[DecodeIssue] = []
    issue_rows: list[int] = []
    rows = 0
    prev_last: int | None = None
    stop = n
    for k, part in enumerate(parts):
        part_issues, part_rows = list(part.issues), list(part.issue_rows)
        cols = part.columns
        if prev_last is not None and len(cols) and int(cols.base_offset[0]) <= prev_last:
            first = int(cols.position[0])
            at = sum(1 for r in part_rows if r < 1)
            if at < len(part_issues) and part_rows[at] == 1 and part_issues[at].kind == _CRC \
                    and part_issues[at].position == first:
                at += 1
            detail = order_detail(int(cols.base_offset[0]), prev_last)
            part_issues.insert(at, DecodeIssue(first, _ORDER, _ERROR, detail))
            part_rows.insert(at, 1)
        redo: SegmentHeaders | None = None
        if part.stop != ends[k] and k + 1 < len(parts):
            part_issues.pop()  # the step that ended this slice is decided again with the whole file
            part_rows.pop()
            last = int(cols.last_offset[-1]) if len(cols) else prev_last
            redo = decode_headers(buf, start=part.stop, verify_crc=verify_crc, prev_last_offset=last)
        columns.append(cols)
        issues += part_issues
        issue_rows += [rows + r for r in part_rows]
        rows += len(cols)
        if len(cols):
            prev_last = int(cols.last_offset[-1])
        if redo is not None:
            columns.append(redo.columns)
            issues += redo.issues
            issue_rows += [rows + r for r in redo.issue_rows]
            stop = redo.stop
            break
        stop = part.stop
    return SegmentHeaders(HeaderColumns.concat(columns), issues, issue_rows, stop)


def decode_sliced(
    buf: bytes | bytearray | memoryview | mmap.mmap, starts: Sequence[int], *, verify_crc: bool = True
) -> SegmentHeaders:
    """Decode each slice on its own, as parallel tasks would, and ``stitch`` the results."""
    ends = list(starts[1:]) + [len(buf)]
    parts = [decode_headers(buf, start=a, end=b, verify_crc=verify_crc) for a, b in zip(starts, ends, strict=True)]
    return stitch(buf, starts, parts, verify_crc=verify_crc)
