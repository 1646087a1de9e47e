"""The rule of blocked consumer groups (``detect.blocked_consumers``), on rows built by hand: which
commit record is a group's committed offset, as the group coordinator loads ``__consumer_offsets``,
and which groups a held LSO blocks."""

from __future__ import annotations

from typing import Any

from txn_audit.detect.blocked_consumers import FROM_COMMIT, FROM_HELD_TRANSACTION, blocked_consumers, committed_offsets
from txn_audit.schemas import BLOCKED_CONSUMERS, in_ms

AUDIT_MS = 1_000_000


def commit(offset: int, group: str, committed: int | None, *, partition: int = 0, topic: str = "t",
           tombstone: bool = False, producer_id: int = -1, at: int = 500_000) -> dict[str, Any]:
    """An ``offset_commits`` row: a commit record at ``offset`` of ``__consumer_offsets``-0."""
    return {"partition": 0, "offset": offset, "group_id": group, "commit_topic": topic,
            "commit_partition": partition, "tombstone": tombstone, "committed_offset": committed,
            "commit_timestamp": None if tombstone else at, "record_timestamp": at,
            "is_transactional": producer_id >= 0, "producer_id": producer_id}


def transaction(producer_id: int, first: int, marker: int | None, state: str) -> dict[str, Any]:
    return {"partition": 0, "producer_id": producer_id, "first_offset": first, "marker_offset": marker,
            "state": state}


def status(partition: int = 0, *, lso: int = 10, hw: int = 30, since: int | None = 400_000) -> dict[str, Any]:
    """A ``partition_stability`` row of topic t."""
    return {"topic": "t", "partition": partition, "last_stable_offset": lso, "effective_high_watermark": hw,
            "lso_below_hw": lso < hw, "held_since_timestamp": since, "culprit_producer_id": 7,
            "culprit_transactional_id": "app"}


def offsets(commits: list[dict[str, Any]], transactions: list[dict[str, Any]] | None = None) -> dict[str, int]:
    """Each group's committed offset (on one partition)."""
    return {group: row["committed_offset"]
            for (group, _, _), row in committed_offsets(commits, transactions or []).items()}


def test_the_last_commit_in_the_log_wins_and_a_tombstone_deletes() -> None:
    assert offsets([commit(0, "g", 5), commit(1, "g", 3)]) == {"g": 3}  # log order, not the highest offset
    assert offsets([commit(1, "g", 3), commit(0, "g", 5)]) == {"g": 3}  # rows in any order
    assert offsets([commit(0, "g", 5), commit(1, "g", None, tombstone=True)]) == {}
    assert offsets([commit(0, "g", None, tombstone=True), commit(1, "g", 4)]) == {"g": 4}


def test_a_transactional_commit_counts_once_its_transaction_committed() -> None:
    plain = commit(0, "g", 5)
    txn = commit(2, "g", 9, producer_id=42)
    assert offsets([plain, txn], [transaction(42, 2, 3, "committed")]) == {"g": 9}
    assert offsets([plain, txn], [transaction(42, 2, 3, "aborted")]) == {"g": 5}
    assert offsets([plain, txn], [transaction(42, 2, None, "open")]) == {"g": 5}  # pending: not committed yet
    assert offsets([plain, txn], []) == {"g": 5}  # no transaction in the dump: never known to commit
    # the commit record's place in the log decides, not the marker's: a plain commit appended after
    # the transactional one, before its marker, stays
    later = commit(3, "g", 6)
    assert offsets([plain, txn, later], [transaction(42, 2, 4, "committed")]) == {"g": 6}
    # the producer's earlier transaction does not decide a later record
    assert offsets([txn], [transaction(42, 0, 1, "committed"), transaction(42, 2, None, "open")]) == {}


def test_groups_at_or_below_a_held_lso_are_blocked_and_others_not() -> None:
    commits = [commit(0, "at-lso", 10), commit(1, "behind", 4), commit(2, "past-lso", 30),
               commit(3, "other-partition", 2, partition=1), commit(4, "at-lso", 10, partition=2)]
    rows = blocked_consumers([status(0), status(1, lso=20, hw=20), status(2, since=None)], commits, [], AUDIT_MS)
    assert rows.schema == in_ms(BLOCKED_CONSUMERS)  # epoch ms until written
    found = {(r["group_id"], r["partition"]): r for r in rows.to_pylist()}
    assert sorted(found) == [("at-lso", 0), ("at-lso", 2), ("behind", 0)]
    at, behind, no_since = found["at-lso", 0], found["behind", 0], found["at-lso", 2]
    assert (at["committed_offset"], at["records_behind"], at["records_to_lso"]) == (10, 20, 0)
    assert (behind["committed_offset"], behind["records_behind"], behind["records_to_lso"]) == (4, 26, 6)
    assert (at["time_behind_ms"], at["time_behind_from"]) == (AUDIT_MS - 400_000, FROM_HELD_TRANSACTION)
    assert (no_since["time_behind_ms"], no_since["time_behind_from"]) == (AUDIT_MS - 500_000, FROM_COMMIT)
    assert (at["commit_log_partition"], at["commit_log_offset"], at["transactional_commit"]) == (0, 0, False)
    assert at["culprit_transactional_id"] == "app"
