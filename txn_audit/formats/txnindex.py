"""Aborted-transaction index files (``<base>.txnindex``).

A flat array of 34-byte entries ``>hqqqq`` with no header: version int16 (0), producerId,
firstOffset (first data batch of the aborted transaction on this partition, possibly in an
earlier segment), lastOffset (the ABORT marker, in this segment), lastStableOffset (the LSO
when the marker was appended). One entry per ABORT marker that closed a non-empty transaction;
appended in strictly increasing lastOffset order.

The index is derived data (rebuilt on recovery), so problems found here are ``bad_index``
*warnings* and never stop decoding: every whole entry is returned.

``decode_txn_index`` is the reference, an entry at a time; ``decode_txn_index_columns`` (what
ingest runs) reads the whole file as one NumPy array of ``ENTRY_DTYPE`` records and gives the
same entries as columns and the same issues in the same order.

Kafka sources: ``TransactionIndex.java`` (``append``, ``sanityCheck``, ``iterator``),
``AbortedTxn.java``, ``LogSegment.java`` (``updateTxnIndex``). See kafka-formats.md section 6.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

import numpy as np

from txn_audit.formats.model import AbortedTxn, DecodeIssue, IssueKind, Severity
from txn_audit.formats.primitives import Buffer

ENTRY: Final = struct.Struct(">hqqqq")
ENTRY_SIZE: Final = ENTRY.size  # 34
#: the same entry as a NumPy record (big-endian, packed), to read a whole index at once
ENTRY_DTYPE: Final = np.dtype([("version", ">i2"), ("producer_id", ">i8"), ("first_offset", ">i8"),
                               ("last_offset", ">i8"), ("last_stable_offset", ">i8")])
assert ENTRY_DTYPE.itemsize == ENTRY_SIZE
CURRENT_VERSION: Final = 0

_BAD: Final = IssueKind.BAD_INDEX.value
_WARN: Final = Severity.WARNING.value


def decode_txn_index(data: Buffer, *, segment_base_offset: int) -> tuple[list[AbortedTxn], list[DecodeIssue]]:
    """All whole entries, plus warnings for what Kafka would reject or silently drop.

    Issues (all ``bad_index`` warnings, positioned at the entry): a trailing fragment shorter
    than an entry (Kafka ignores it), a version other than 0 (Kafka rejects a non-zero high
    byte), ``lastOffset`` below the segment base offset (Kafka's ``sanityCheck`` fails and the
    index is rebuilt), ``lastOffset`` not strictly increasing (``append`` would have refused it),
    and ``firstOffset`` after ``lastOffset``.
    """
    mv = memoryview(data)
    whole = len(mv) // ENTRY_SIZE
    entries: list[AbortedTxn] = []
    issues: list[DecodeIssue] = []
    previous: int | None = None
    for i in range(whole):
        e = AbortedTxn(*ENTRY.unpack_from(mv, i * ENTRY_SIZE))
        issues.extend(_entry_issues(i, e.version, e.first_offset, e.last_offset, previous, segment_base_offset))
        previous = e.last_offset
        entries.append(e)
    issues.extend(_tail_issues(len(mv), whole))
    return entries, issues


@dataclass(frozen=True)
class TxnIndexColumns:
    """The whole entries of an index, a column per field (``ENTRY_DTYPE``'s names), in file order."""

    version: np.ndarray  # int16
    producer_id: np.ndarray  # int64, as every column below
    first_offset: np.ndarray
    last_offset: np.ndarray
    last_stable_offset: np.ndarray

    def __len__(self) -> int:
        return len(self.version)


def decode_txn_index_columns(data: Buffer, *, segment_base_offset: int) -> tuple[TxnIndexColumns, list[DecodeIssue]]:
    """``decode_txn_index``'s entries as columns, and its issues, the same and in the same order:
    the whole file read as one array, its checks made over whole columns, and the issues of the
    few entries they flag written by the same function as the reference's."""
    mv = memoryview(data)
    whole = len(mv) // ENTRY_SIZE
    entries = np.frombuffer(mv, ENTRY_DTYPE, count=whole)
    columns = TxnIndexColumns(*(entries[name].astype(np.int16 if name == "version" else np.int64)
                                for name in ENTRY_DTYPE.names or ()))
    previous = np.empty(whole, np.int64)
    previous[1:] = columns.last_offset[:-1]
    flagged = ((columns.version != CURRENT_VERSION) | (columns.last_offset < segment_base_offset)
               | (columns.first_offset > columns.last_offset))
    flagged[1:] |= columns.last_offset[1:] <= previous[1:]
    issues: list[DecodeIssue] = []
    for i in np.flatnonzero(flagged).tolist():
        issues.extend(_entry_issues(i, int(columns.version[i]), int(columns.first_offset[i]),
                                    int(columns.last_offset[i]), int(previous[i]) if i else None,
                                    segment_base_offset))
    issues.extend(_tail_issues(len(mv), whole))
    return columns, issues


def _entry_issues(i: int, version: int, first_offset: int, last_offset: int, previous: int | None,
                  segment_base_offset: int) -> list[DecodeIssue]:
    """The issues of entry ``i`` (``previous``: the last offset of the entry before it, if any)."""
    pos = i * ENTRY_SIZE
    issues = []
    if version != CURRENT_VERSION:
        issues.append(DecodeIssue(pos, _BAD, _WARN, f"aborted-txn entry {i}: version {version}, expected 0"))
    if last_offset < segment_base_offset:
        issues.append(
            DecodeIssue(
                pos,
                _BAD,
                _WARN,
                f"aborted-txn entry {i}: lastOffset {last_offset} is below the base offset "
                f"{segment_base_offset} of its segment",
            )
        )
    if previous is not None and last_offset <= previous:
        issues.append(
            DecodeIssue(
                pos,
                _BAD,
                _WARN,
                f"aborted-txn entry {i}: lastOffset {last_offset} does not follow the previous {previous}",
            )
        )
    if first_offset > last_offset:
        issues.append(
            DecodeIssue(
                pos,
                _BAD,
                _WARN,
                f"aborted-txn entry {i}: firstOffset {first_offset} is after lastOffset {last_offset}",
            )
        )
    return issues


def _tail_issues(size: int, whole: int) -> list[DecodeIssue]:
    """The issue of bytes after the last whole entry, if any."""
    tail = size - whole * ENTRY_SIZE
    if not tail:
        return []
    return [DecodeIssue(whole * ENTRY_SIZE, _BAD, _WARN,
                        f"{tail} trailing bytes after {whole} entries: a partial {ENTRY_SIZE}-byte entry, ignored")]


def encode_txn_index(entries: Iterable[AbortedTxn]) -> bytes:
    """The index bytes for ``entries``, in the given order (no validation: tests need bad files)."""
    return b"".join(
        ENTRY.pack(e.version, e.producer_id, e.first_offset, e.last_offset, e.last_stable_offset) for e in entries
    )
