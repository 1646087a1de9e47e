"""Aborted-transaction index files (``<base>.txnindex``).

A flat array of 34-byte entries ``>hqqqq`` with no header: version int16 (0), producerId,
firstOffset (first data batch of the aborted transaction on this partition, possibly in an
earlier segment), lastOffset (the ABORT marker, in this segment), lastStableOffset (the LSO
when the marker was appended). One entry per ABORT marker that closed a non-empty transaction;
appended in strictly increasing lastOffset order.

The index is derived data (rebuilt on recovery), so problems found here are ``bad_index``
*warnings* and never stop decoding: every whole entry is returned.

Kafka sources: ``TransactionIndex.java`` (``append``, ``sanityCheck``, ``iterator``),
``AbortedTxn.java``, ``LogSegment.java`` (``updateTxnIndex``). See kafka-formats.md section 6.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from typing import Final

from txn_audit.formats.model import AbortedTxn, DecodeIssue, IssueKind, Severity
from txn_audit.formats.primitives import Buffer

ENTRY: Final = struct.Struct(">hqqqq")
ENTRY_SIZE: Final = ENTRY.size  # 34
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
        pos = i * ENTRY_SIZE
        e = AbortedTxn(*ENTRY.unpack_from(mv, pos))
        if e.version != CURRENT_VERSION:
            issues.append(DecodeIssue(pos, _BAD, _WARN, f"aborted-txn entry {i}: version {e.version}, expected 0"))
        if e.last_offset < segment_base_offset:
            issues.append(
                DecodeIssue(
                    pos,
                    _BAD,
                    _WARN,
                    f"aborted-txn entry {i}: lastOffset {e.last_offset} is below the base offset "
                    f"{segment_base_offset} of its segment",
                )
            )
        if previous is not None and e.last_offset <= previous:
            issues.append(
                DecodeIssue(
                    pos,
                    _BAD,
                    _WARN,
                    f"aborted-txn entry {i}: lastOffset {e.last_offset} does not follow the previous {previous}",
                )
            )
        if e.first_offset > e.last_offset:
            issues.append(
                DecodeIssue(
                    pos,
                    _BAD,
                    _WARN,
                    f"aborted-txn entry {i}: firstOffset {e.first_offset} is after lastOffset {e.last_offset}",
                )
            )
        previous = e.last_offset
        entries.append(e)
    tail = len(mv) - whole * ENTRY_SIZE
    if tail:
        issues.append(
            DecodeIssue(
                whole * ENTRY_SIZE,
                _BAD,
                _WARN,
                f"{tail} trailing bytes after {whole} entries: a partial {ENTRY_SIZE}-byte entry, ignored",
            )
        )
    return entries, issues


def encode_txn_index(entries: Iterable[AbortedTxn]) -> bytes:
    """The index bytes for ``entries``, in the given order (no validation: tests need bad files)."""
    return b"".join(
        ENTRY.pack(e.version, e.producer_id, e.first_offset, e.last_offset, e.last_stable_offset) for e in entries
    )
