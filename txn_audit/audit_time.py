"""The audit time: the moment a scan measures ages to, and how it was chosen.

Time decides only what the dump cannot prove: whether a transaction the coordinator still holds
as Ongoing is past its timeout, and whether an open transaction no record rules out is older than
the maximum transaction timeout (``find-hanging``'s rule). The default is the moment the copy was
taken, as closely as the dump itself shows it, never the scanning machine's clock, so a dump
scanned a week later audits the same:

1. ``metadata_log``: the newest record of a KRaft metadata log (``__cluster_metadata``). The
   active controller appends a record at least every ``metadata.max.idle.interval.ms`` (500 ms by
   default; a NoOpRecord when nothing else happens, Kafka 3.3+), and every broker replicates
   them, so its newest record dates the moment its broker stopped or was copied to about a second.
2. ``file_times``: the newest modification time of a file in the log dirs (the checkpoints are
   rewritten every few seconds while a broker runs), counted only where the files' times agree
   with the records: the newest data segment was last written within ``FILE_TIME_AGREEMENT_MS`` of
   the newest record. A checkout or an archive that reset the times does not agree.
3. ``newest_record``: the newest timestamp of any record or marker in the dump.

Never earlier than the newest record: a default that would put records in the future is that
record's time. An audit time given (``--as-of``) is taken as it is (``given``); one before the
newest record gets a warning (``AuditTime.warning``).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from txn_audit.timeparse import format_time_ms

__all__ = ["FILE_TIME_AGREEMENT_MS", "AuditTime", "AuditTimeSource", "CopyEvidence", "choose_audit_time"]

#: how far the newest data segment's modification time may lie from the newest record for the
#: files' times to count as the broker's own (a copy that kept them)
FILE_TIME_AGREEMENT_MS = 60_000


class AuditTimeSource(StrEnum):
    """Where the audit time came from (``summary.json``'s ``audit_time.source``)."""

    GIVEN = "given"  # --as-of (a time, or ``now``)
    METADATA_LOG = "metadata_log"  # the newest record of __cluster_metadata
    FILE_TIMES = "file_times"  # the newest modification time in the log dirs, where they agree
    NEWEST_RECORD = "newest_record"  # the newest record or marker
    NONE = "none"  # the dump holds no timestamp at all: epoch 0


@dataclass(frozen=True)
class CopyEvidence:
    """What the dump shows of when it was copied, read on the driver as the dump is discovered.
    Epoch milliseconds; None where the dump does not show it."""

    #: the newest record of any copy of the KRaft metadata log
    metadata_log_newest_ms: int | None = None
    #: the newest modification time of a data segment (``.log``; the metadata log's apart)
    newest_segment_mtime_ms: int | None = None
    #: the newest modification time of any file of the log dirs
    newest_file_mtime_ms: int | None = None


@dataclass(frozen=True)
class AuditTime:
    ms: int
    source: AuditTimeSource
    #: the newest record or marker of the dump (None: none)
    newest_record_ms: int | None

    @property
    def how(self) -> str:
        """How the time was chosen, in one sentence."""
        if self.source is AuditTimeSource.GIVEN:
            return "given with --as-of"
        if self.source is AuditTimeSource.METADATA_LOG:
            return "when the copy was taken: the newest record of the KRaft metadata log"
        if self.source is AuditTimeSource.FILE_TIMES:
            return ("when the copy was taken: the newest modification time in the log dirs, which agree with "
                    "the records")
        if self.source is AuditTimeSource.NEWEST_RECORD:
            return ("the newest record in the dump (no KRaft metadata log, and no file times that agree with "
                    "the records)")
        return "none: the dump holds no timestamp"

    @property
    def warning(self) -> str | None:
        """A warning when the audit time lies before the dump's newest record."""
        newest = self.newest_record_ms
        if newest is None or self.ms >= newest:
            return None
        return (f"the audit time {format_time_ms(self.ms)} is before the dump's newest record "
                f"({format_time_ms(newest)}): transactions written after it are judged as if not yet written")

    def to_json(self) -> dict[str, object]:
        return {"ms": self.ms, "source": self.source.value, "how": self.how,
                "newest_record_ms": self.newest_record_ms, "warning": self.warning}


def choose_audit_time(given_ms: int | None, evidence: CopyEvidence, newest_record_ms: int | None) -> AuditTime:
    """The audit time: ``given_ms`` when given, else the copy's time as the module docstring says."""
    if given_ms is not None:
        return AuditTime(given_ms, AuditTimeSource.GIVEN, newest_record_ms)
    newest = newest_record_ms

    def not_before_records(ms: int, source: AuditTimeSource) -> AuditTime:
        return AuditTime(ms if newest is None else max(ms, newest), source, newest)

    if evidence.metadata_log_newest_ms is not None:
        return not_before_records(evidence.metadata_log_newest_ms, AuditTimeSource.METADATA_LOG)
    segment, newest_file = evidence.newest_segment_mtime_ms, evidence.newest_file_mtime_ms
    if (newest is not None and segment is not None and newest_file is not None
            and abs(segment - newest) <= FILE_TIME_AGREEMENT_MS):
        return not_before_records(newest_file, AuditTimeSource.FILE_TIMES)
    if newest is not None:
        return AuditTime(newest, AuditTimeSource.NEWEST_RECORD, newest)
    return AuditTime(0, AuditTimeSource.NONE, None)
