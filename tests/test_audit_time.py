"""The default audit time: when the copy was taken, as the dump shows it (``txn_audit.audit_time``)."""

from __future__ import annotations

import pytest

from txn_audit.audit_time import FILE_TIME_AGREEMENT_MS, AuditTimeSource, CopyEvidence, choose_audit_time

NEWEST = 1_795_377_609_147  # the newest record of a dump


def test_a_given_time_is_taken_as_it_is_and_warned_of_when_before_the_records() -> None:
    later = choose_audit_time(NEWEST + 5, CopyEvidence(metadata_log_newest_ms=NEWEST + 60_000), NEWEST)
    assert (later.ms, later.source, later.warning) == (NEWEST + 5, AuditTimeSource.GIVEN, None)
    earlier = choose_audit_time(NEWEST - 1_000, CopyEvidence(), NEWEST)
    assert earlier.ms == NEWEST - 1_000 and earlier.warning is not None
    assert "before the dump's newest record" in earlier.warning


def test_the_metadata_log_dates_the_copy() -> None:
    chosen = choose_audit_time(None, CopyEvidence(metadata_log_newest_ms=NEWEST + 90_000,
                                                  newest_segment_mtime_ms=NEWEST, newest_file_mtime_ms=NEWEST + 5),
                               NEWEST)
    assert (chosen.ms, chosen.source) == (NEWEST + 90_000, AuditTimeSource.METADATA_LOG)
    assert "metadata log" in chosen.how and chosen.to_json()["source"] == "metadata_log"


def test_never_before_the_newest_record() -> None:
    chosen = choose_audit_time(None, CopyEvidence(metadata_log_newest_ms=NEWEST - 30_000), NEWEST)
    assert chosen.ms == NEWEST and chosen.warning is None


@pytest.mark.parametrize(("segment_after_record", "agrees"), [
    (0, True), (FILE_TIME_AGREEMENT_MS, True), (-FILE_TIME_AGREEMENT_MS, True),
    (FILE_TIME_AGREEMENT_MS + 1, False),  # a checkout, an archive: every file stamped later
    (-86_400_000, False),
])
def test_file_times_count_only_where_they_agree_with_the_records(segment_after_record: int, agrees: bool) -> None:
    copied = NEWEST + 3_600_000  # the checkpoints, rewritten while the broker ran on an hour
    evidence = CopyEvidence(newest_segment_mtime_ms=NEWEST + segment_after_record, newest_file_mtime_ms=copied)
    chosen = choose_audit_time(None, evidence, NEWEST)
    if agrees:
        assert (chosen.ms, chosen.source) == (copied, AuditTimeSource.FILE_TIMES)
    else:
        assert (chosen.ms, chosen.source) == (NEWEST, AuditTimeSource.NEWEST_RECORD)


def test_a_dump_without_timestamps() -> None:
    chosen = choose_audit_time(None, CopyEvidence(), None)
    assert (chosen.ms, chosen.source) == (0, AuditTimeSource.NONE)
