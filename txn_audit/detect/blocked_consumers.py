"""Consumer groups blocked by a held last stable offset, computed on the driver in plain Python
(no pyspark here): the rows of ``schemas.BLOCKED_CONSUMERS``.

A read_committed consumer fetches no offset at or past its partition's last stable offset (LSO):
while a transaction is open there, the records behind its first offset wait, committed or not.
A consumer group whose committed offset on such a partition is at or below the LSO is blocked
there: it reads up to the LSO and then nothing more until the transaction ends. (A
read_uncommitted group reads past the LSO, so its committed offset can lie beyond it: it is not
blocked.)

A group's committed offset on a partition is what the group coordinator loads from
``__consumer_offsets`` (Kafka's ``GroupMetadataManager.loadGroupsAndOffsets`` and
``GroupMetadata.completePendingTxnOffsetCommit``; ``OffsetMetadataManager`` in the new
coordinator), in log order of the commit records:

* a plain commit (``OffsetCommit``) sets it;
* a tombstone (null value: offsets deleted, or expired) removes it;
* a transactional commit (``TxnOffsetCommit``, written inside a producer's transaction) is pending
  until the transaction's marker: a COMMIT marker makes it the committed offset unless a commit
  record appended after it in the log already set one (``olderThan``: the commit record's own
  offset in the log decides), an ABORT marker discards it, and while no marker came it is not the
  committed offset (``detect.rules.pending_offset_commit_findings`` reports it).

So the commit record that counts is the last in the log, among plain commits, tombstones and
transactional commits whose transaction committed. The log cleaner changes none of this: it
keeps each key's newest record, drops an aborted transaction's records, and keeps a marker as
long as its transaction has records left.

Time behind: measured from the first record time of the transaction that holds the LSO (the
partition's ``held_since_timestamp``) to the audit time, how long the records past the LSO have
waited (for a group at the LSO, the age of the oldest record it cannot read; for one below it, a
lower bound); where that time is unknown, from the commit's time (``commitTimestamp``) to the
audit time. ``time_behind_from`` says which (``held_transaction`` or ``commit``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import pyarrow as pa

from txn_audit.schemas import BLOCKED_CONSUMERS, in_ms

__all__ = ["COMMIT_COLUMNS", "FROM_COMMIT", "FROM_HELD_TRANSACTION", "TRANSACTION_COLUMNS", "blocked_consumers",
           "committed_offsets"]

#: what the rule reads of ``offset_commits`` (``partition``/``offset``: the record's place in
#: ``__consumer_offsets``)
COMMIT_COLUMNS = ("partition", "offset", "group_id", "commit_topic", "commit_partition", "tombstone",
                  "committed_offset", "commit_timestamp", "record_timestamp", "is_transactional", "producer_id")
#: what the rule reads of ``partition_transactions`` rows on ``__consumer_offsets``
TRANSACTION_COLUMNS = ("partition", "producer_id", "first_offset", "marker_offset", "state")
#: ``time_behind_from``: from the holding transaction's first record time, or from the commit's time
FROM_HELD_TRANSACTION, FROM_COMMIT = "held_transaction", "commit"


def _transaction_state(commit: Mapping[str, Any],
                       transactions: Mapping[tuple[int, int], Sequence[Mapping[str, Any]]]) -> str | None:
    """The state (committed, aborted, open, ended) of the transaction of ``commit``, a
    transactional commit record: its producer's transaction on that ``__consumer_offsets``
    partition that began at or before the record and whose marker, if any, follows it; None when
    the dump holds none."""
    found = None
    for txn in transactions.get((commit["partition"], commit["producer_id"]), ()):
        first, marker = txn["first_offset"], txn["marker_offset"]
        if first is not None and first <= commit["offset"] and (marker is None or commit["offset"] < marker):
            if found is None or first > found["first_offset"]:
                found = txn
    return None if found is None else str(found["state"])


def committed_offsets(commits: Iterable[Mapping[str, Any]],
                      transactions: Iterable[Mapping[str, Any]]) -> dict[tuple[str, str, int], dict[str, Any]]:
    """Each group's committed offset per partition, ``(group, topic, partition)`` to the commit
    record that sets it (with ``transactional_commit``), as the group coordinator loads it from
    ``commits`` (``COMMIT_COLUMNS`` of ``offset_commits`` rows) and the ``transactions`` on
    ``__consumer_offsets`` (``TRANSACTION_COLUMNS``): the last record in log order among plain
    commits, tombstones and transactional commits whose transaction committed; a key whose last
    such record is a tombstone has none."""
    by_producer: dict[tuple[int, int], list[Mapping[str, Any]]] = {}
    for txn in transactions:
        by_producer.setdefault((txn["partition"], txn["producer_id"]), []).append(txn)
    latest: dict[tuple[str, str, int], Mapping[str, Any]] = {}
    for commit in commits:
        if commit["is_transactional"] and _transaction_state(commit, by_producer) != "committed":
            continue  # aborted, still pending, or its transaction is not in the dump: not committed
        key = (commit["group_id"], commit["commit_topic"], commit["commit_partition"])
        held = latest.get(key)
        if held is None or (commit["partition"], commit["offset"]) > (held["partition"], held["offset"]):
            latest[key] = commit
    return {key: dict(row) | {"transactional_commit": bool(row["is_transactional"])}
            for key, row in latest.items() if not row["tombstone"] and row["committed_offset"] is not None}


def blocked_consumers(held: Iterable[Mapping[str, Any]], commits: Iterable[Mapping[str, Any]],
                      transactions: Iterable[Mapping[str, Any]], audit_ms: int) -> pa.Table:
    """The ``BLOCKED_CONSUMERS`` rows: each group whose committed offset (``committed_offsets``) on
    a partition of ``held`` (``partition_stability`` rows) whose LSO is below its high watermark
    is at or below that LSO; by topic, partition and group. ``commits`` need only hold the
    commits of those partitions, ``transactions`` only those of their transactional commits'
    producers."""
    partitions = {(p["topic"], p["partition"]): p for p in held
                  if p["lso_below_hw"] and p["last_stable_offset"] is not None
                  and p["effective_high_watermark"] is not None}
    rows = []
    for (group, topic, partition), commit in committed_offsets(commits, transactions).items():
        status = partitions.get((topic, partition))
        if status is None or commit["committed_offset"] > status["last_stable_offset"]:
            continue
        committed = int(commit["committed_offset"])
        since = status["held_since_timestamp"]
        commit_time = commit["commit_timestamp"] if commit["commit_timestamp"] not in (None, -1) \
            else commit["record_timestamp"]
        start, source = (since, FROM_HELD_TRANSACTION) if since is not None else (commit_time, FROM_COMMIT)
        rows.append({
            "group_id": group, "topic": topic, "partition": partition, "committed_offset": committed,
            "commit_timestamp": commit_time, "commit_log_partition": commit["partition"],
            "commit_log_offset": commit["offset"], "transactional_commit": commit["transactional_commit"],
            "last_stable_offset": status["last_stable_offset"], "high_watermark": status["effective_high_watermark"],
            "records_behind": status["effective_high_watermark"] - committed,
            "records_to_lso": status["last_stable_offset"] - committed,
            "held_since_timestamp": since,
            "time_behind_ms": None if start is None else max(0, audit_ms - start),
            "time_behind_from": source,
            "culprit_producer_id": status["culprit_producer_id"],
            "culprit_transactional_id": status["culprit_transactional_id"],
        })
    rows.sort(key=lambda r: (r["topic"], r["partition"], r["group_id"]))
    return pa.Table.from_pylist(rows, schema=in_ms(BLOCKED_CONSUMERS))
