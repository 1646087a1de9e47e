"""The rules of the coordinator's decisions against the partitions' markers, computed on the
driver with pyarrow (no pyspark here): ``missing_marker`` (a decided transaction whose marker a
partition never got, still open there), ``outcome_mismatch`` (a marker of the other type than
the decision) and ``coordinator_stuck`` (a transactional id left in Prepare*, the partitions
still waiting for its marker).

Their rows are few, whatever the number of transactions: the unsettled rows of what followed
each Prepare* record on each partition it lists (``UNSETTLED``: a healthy log's are settled;
each placed in the dump or not by ``in_dump``), the open transactions of their producers
(``open_transaction_rules.OPEN``) and the markers before those (whose coordinator epoch the
pre-3.0 abort command names), and the newest marker time of each (partition, producer) left in
Prepare* (``stuck_keys``), read from the rows of ``partition_transactions`` that name them
(``marker_rows``).

Values a row lacks are judged as SQL judges them, so that the rules read as they did as Spark
queries: a comparison with an unknown value is unknown, and only a known truth counts; an
unknown value is written ``null``, as Java's formatter writes it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from txn_audit.detect.words import (
    ABORT_COMMAND_PRE_3_0,
    KNOWN_MARKERS,
    abort_command_text,
    duration_or_null,
    finding_row,
    formatted,
    partition_name,
    time_or_null,
)
from txn_audit.detect.open_transaction_rules import MarkerEpochs, last_coordinator_epoch, marker_epochs
from txn_audit.schemas import FINDINGS, in_ms
from txn_audit.tables import rows_on_partitions
from txn_audit.severity import Severity

__all__ = ["COMPLETE_STATES", "UNSETTLED", "decision_findings", "in_dump", "marker_rows",
           "missing_marker_findings", "outcome_mismatch_findings", "stuck_findings", "stuck_keys"]

#: the coordinator states that end a transaction: a Prepare* followed by one was decided
COMPLETE_STATES = ("CompleteCommit", "CompleteAbort")
#: the rows of what followed a Prepare* record (``reconstruct.FOLLOW_FIELDS`` and its
#: ``decision``) that may give a finding here: no marker answered the record (``has_marker``
#: false or unknown), the coordinator wrote nothing after it (``next_state`` null), or the
#: marker's type differs from the decision. Each rule of this module reads only such rows; a
#: healthy log's rows are settled, one per transaction and partition.
UNSETTLED = (~pc.coalesce(pc.field("has_marker"), False) | pc.field("next_state").is_null()
             | pc.coalesce(pc.field("next_marker_type") != pc.field("decision"), False))

Key = tuple[str, int, int]


def _key(row: dict[str, Any]) -> Key:
    return row["topic"], row["partition"], row["producer_id"]


def _or(*terms: bool | None) -> bool | None:
    """SQL's OR: true if any is true, else unknown if any is unknown."""
    if any(term is True for term in terms):
        return True
    return None if any(term is None for term in terms) else False


def missing_marker_findings(matches: list[dict[str, Any]], open_rows: list[dict[str, Any]],
                            epochs: MarkerEpochs) -> list[dict[str, Any]]:
    """A decided Prepare* record (its next record a Complete*) whose partition is in the dump and
    got no marker of it (``has_marker`` false), and still holds that producer's transaction open
    from before the decision: reported only where it matters and is certain.
    ``epochs``: the coordinator epochs of the markers before the open transactions."""
    still_open: dict[Key, list[dict[str, Any]]] = {}
    for row in open_rows:
        still_open.setdefault(_key(row), []).append(row)
    found = []
    for m in matches:
        if m["next_state"] not in COMPLETE_STATES or not m["in_dump"] or m["has_marker"] is not False:
            continue
        here = partition_name(m["topic"], m["partition"])
        for held in still_open.get(_key(m), []):
            since = held["first_timestamp"]
            if since is None or m["ts"] is None or not since <= m["ts"]:
                continue
            evidence = formatted(
                "transactional id %s (producer %d, epoch %d) decided %s at %s (__transaction_state-%d offset %d) and "
                "the coordinator then wrote %s, but %s never received the %s marker for it and holds the "
                "transaction open from offset %d",
                m["transactional_id"], m["producer_id"], m["epoch"], m["decision"], time_or_null(m["ts"]),
                m["txn_log_partition"], m["txn_log_offset"], m["next_state"], here, m["decision"],
                held["first_offset"],
            )
            coordinator_epoch = last_coordinator_epoch(held, epochs)
            found.append(finding_row(
                m, "missing_marker", Severity.CRITICAL, evidence, producer_epoch=m["epoch"],
                first_offset=held["first_offset"], last_offset=held["last_data_offset"], first_timestamp=m["ts"],
                remediation=abort_command_text(m["topic"], m["partition"], held["first_offset"]),
                remediation_pre_3_0=formatted(ABORT_COMMAND_PRE_3_0, m["topic"], m["partition"], m["producer_id"],
                                              m["epoch"], max(coordinator_epoch or 0, 0)),
            ))
    return found


def outcome_mismatch_findings(matches: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A Prepare* record answered by a marker of its epoch whose known type is not the decision."""
    found = []
    for m in matches:
        marker_type = m["next_marker_type"]
        if not (m["has_marker"] is True and marker_type in KNOWN_MARKERS and m["decision"] is not None
                and marker_type != m["decision"]):
            continue
        evidence = formatted(
            "transactional id %s (producer %d, epoch %d) decided %s at %s but the marker written to %s at offset %d "
            "is %s",
            m["transactional_id"], m["producer_id"], m["epoch"], m["decision"], time_or_null(m["ts"]),
            partition_name(m["topic"], m["partition"]), m["next_marker_offset"], marker_type,
        )
        found.append(finding_row(
            m, "outcome_mismatch", Severity.CRITICAL, evidence, producer_epoch=m["epoch"],
            first_offset=m["next_marker_offset"], last_offset=m["next_marker_offset"], first_timestamp=m["ts"],
        ))
    return found


def stuck_keys(matches: Iterable[dict[str, Any]]) -> set[Key]:
    """The (topic, partition, producer) of the Prepare* records that are their id's latest
    (``next_state`` null): whose newest marker ``stuck_findings`` reads."""
    return {_key(m) for m in matches if m["next_state"] is None}


def stuck_findings(matches: list[dict[str, Any]], newest_markers: dict[Key, int], as_of_ms: int,
                   prepare_grace_ms: int, clock_skew_ms: int) -> list[dict[str, Any]]:
    """A transactional id whose latest record is a Prepare*: each partition still waiting for its
    marker. A marker of the producer there no older than the record (less the clock skew allowed:
    markers of other brokers may carry a clock a little behind the coordinator's) counts as its.
    ``newest_markers``: per (topic, partition, producer) of ``stuck_keys``, its newest marker's time."""
    stuck = []
    for m in matches:
        if m["next_state"] is not None:
            continue
        newest = newest_markers.get(_key(m))
        recent = None if newest is None or m["ts"] is None else newest >= m["ts"] - clock_skew_ms
        stuck.append((m, _or(m["has_marker"], bool(recent))))
    done_on: dict[str, list[str]] = {}
    for m, has_marker in stuck:
        if m["transactional_id"] is not None:  # an id unknown joins nothing
            done = done_on.setdefault(m["transactional_id"], [])
            if has_marker is True:
                done.append(partition_name(m["topic"], m["partition"]))
    found = []
    for m, has_marker in stuck:
        if has_marker is not False or m["transactional_id"] is None:
            continue
        done = sorted(done_on[m["transactional_id"]])
        age = None if m["ts"] is None else as_of_ms - m["ts"]
        written = f", while markers were written to {', '.join(done)}" if done else ""
        evidence = formatted(
            "transactional id %s (producer %d, epoch %d) has been in %s since %s (%s before the audit time) with no "
            "Complete record; %s still has no marker%s",
            m["transactional_id"], m["producer_id"], m["epoch"], m["state"], time_or_null(m["ts"]),
            duration_or_null(age), partition_name(m["topic"], m["partition"]), written,
        )
        severity = Severity.WARNING if age is not None and age > prepare_grace_ms else Severity.INFO
        found.append(finding_row(m, "coordinator_stuck", severity, evidence, producer_epoch=m["epoch"],
                                 first_timestamp=m["ts"]))
    return found


def in_dump(matches: pa.Table, extent: pa.Table) -> pa.Table:
    """``matches`` with ``covers_from`` (the oldest batch time of the record's partition, from
    ``extent``: ``PARTITION_EXTENT`` rows; null when the dump does not hold the partition) and
    ``in_dump``: whether the partition is in the dump from before the record's time (unknown
    when the record's time is), so that a marker missing there would show."""
    placed = matches.join(extent.select(["topic", "partition", "covers_from"]), ["topic", "partition"],
                          join_type="left outer")
    covers_from = placed.column("covers_from")
    return placed.append_column("in_dump", pc.and_kleene(pc.is_valid(covers_from),
                                                         pc.less_equal(covers_from, placed.column("ts"))))


def marker_rows(keys: Iterable[Key]) -> pc.Expression | None:
    """The ``partition_transactions`` rows of ``keys``' (topic, partition, producer): their
    markers' times, for ``stuck_findings``; None for no key."""
    by_partition: dict[tuple[str, int], set[int]] = {}
    for topic, partition, producer_id in keys:
        by_partition.setdefault((topic, partition), set()).add(producer_id)
    return rows_on_partitions(by_partition, "producer_id")


def decision_findings(unsettled: pa.Table, open_rows: pa.Table, previous: pa.Table, markers: pa.Table,
                      as_of_ms: int, prepare_grace_ms: int, clock_skew_ms: int) -> pa.Table:
    """Every finding of the rules of this module, as a ``FINDINGS`` table (no row: none).
    ``unsettled``: the unsettled rows of what followed the Prepare* records (or every row: the
    same findings); ``open_rows``: the open transactions (``OPEN`` rows of
    ``partition_transactions``); ``previous``: the rows of the markers before them
    (``open_transaction_rules.previous_markers``); ``markers``: the ``marker_rows`` of the
    ``stuck_keys``."""
    matches = unsettled.to_pylist()
    opened = open_rows.to_pylist()
    newest: dict[Key, int] = {}
    for row in markers.select(["topic", "partition", "producer_id", "marker_timestamp"]).to_pylist():
        if row["marker_timestamp"] is not None:
            key = _key(row)
            newest[key] = max(newest.get(key, row["marker_timestamp"]), row["marker_timestamp"])
    rows = [*missing_marker_findings(matches, opened, marker_epochs(previous)), *outcome_mismatch_findings(matches),
            *stuck_findings(matches, newest, as_of_ms, prepare_grace_ms, clock_skew_ms)]
    return pa.Table.from_pylist(rows, schema=in_ms(FINDINGS))
