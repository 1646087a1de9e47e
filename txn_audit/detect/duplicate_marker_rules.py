"""The rule of duplicate markers, computed on the driver with pyarrow (no pyspark here):
``duplicate_marker``, a marker that repeats the marker before it of its producer on the
partition, one decision written twice.

Its rows are few, whatever the number of transactions: the markers that end no data after a
marker of their producer (``BARE_MARKERS``: every repeat is one, or is seen from one; a healthy
log has few), the two rows of ``partition_transactions`` before each (``chain_rows``), what
followed the Prepare* records their markers answered (``answered_by``) and their producers'
transaction versions (``PRODUCER_IDS`` rows). Each is read through a filter that names them.

Values a row lacks are judged as SQL judges them, so that the rule reads as it did as a Spark
query: a comparison with an unknown value is not true; an unknown value is written ``null``, as
Java's formatter writes it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from txn_audit.detect.transaction_rules import DECIDED, FLIPPED_TEXT
from txn_audit.detect.words import KNOWN_MARKERS, finding_row, formatted, partition_name
from txn_audit.schemas import FINDINGS, in_ms
from txn_audit.severity import Severity
from txn_audit.tables import rows_on_partitions

__all__ = ["BARE_MARKERS", "answered_by", "chain_rows", "classify", "duplicate_marker_findings", "marker",
           "repeats"]

#: the partition transactions that are a marker without data following another marker of their
#: producer there: every ``duplicate_marker_findings`` row is of one (a pyarrow filter)
BARE_MARKERS = (pc.field("first_offset").is_null() & pc.field("marker_offset").is_valid()
                & pc.field("prev_marker_offset").is_valid())

#: how a repeat comes to be written
RESEND_TEXT = (". A coordinator's resend (after a lost answer or a coordinator failover), or kafka-transactions.sh "
               "abort for a transaction that had ended, writes such a repeat")
#: a repeat that ended nothing, under transaction version 2
NOOP_TV2_TEXT = ("; under transaction version 2, brokers from Kafka 4.2 write it only when no transaction is open "
                 "(KAFKA-19999)")
#: a repeat that ended the next transaction
REFUSED_TEXT = "; brokers from Kafka 4.2 refuse a repeat while a transaction is open (KAFKA-19999)"

Key = tuple[str, int, int]


def chain_rows(bare: pa.Table) -> pc.Expression | None:
    """The ``partition_transactions`` rows of the ``bare`` markers (``BARE_MARKERS`` rows) and of
    the two transactions of their producer before each there (``txn_seq`` one and two less);
    None for no marker."""
    seqs: dict[Key, set[int]] = {}
    for row in bare.select(["topic", "partition", "producer_id", "txn_seq"]).to_pylist():
        key = (row["topic"], row["partition"], row["producer_id"])
        if None not in key and row["txn_seq"] is not None:
            seqs.setdefault(key, set()).update(range(row["txn_seq"] - 2, row["txn_seq"] + 1))
    condition: pc.Expression | None = None
    for (topic, partition, producer_id), named in sorted(seqs.items()):
        term = ((pc.field("topic") == topic) & (pc.field("partition") == partition)
                & (pc.field("producer_id") == producer_id) & pc.field("txn_seq").isin(sorted(named)))
        condition = term if condition is None else condition | term
    return condition


def answered_by(rows: pa.Table) -> pc.Expression | None:
    """The rows of what followed each Prepare* record (``prepare_follows.FOLLOW_FIELDS``) whose
    record a marker of ``rows`` (``chain_rows``) answered; None when none has a marker."""
    offsets: dict[tuple[str, int], set[int]] = {}
    for row in rows.select(["topic", "partition", "marker_offset"]).to_pylist():
        if row["marker_offset"] is not None:
            offsets.setdefault((row["topic"], row["partition"]), set()).add(row["marker_offset"])
    condition = rows_on_partitions(offsets, "next_marker_offset")
    return None if condition is None else condition & pc.field("has_marker")


def marker(row: Mapping[str, Any], answer: Mapping[str, Any] | None, tv2: bool) -> dict[str, Any]:
    """A marker as the rule reads it: its ``partition_transactions`` row, with the Prepare* record
    it answered (``answer``, of what followed each Prepare* record; None: none), whether the
    coordinator timed that transaction out, and whether its producer speaks transaction version 2."""
    found = answer or {}
    ts, started, timeout_ms = found.get("ts"), found.get("started"), found.get("timeout_ms")
    timed_out = (found.get("state") == "PrepareAbort" and ts is not None and started is not None
                 and timeout_ms is not None and ts - started >= timeout_ms)
    return {**row, "log_partition": found.get("txn_log_partition"), "log_offset": found.get("txn_log_offset"),
            "decided": found.get("state"), "timed_out": timed_out, "timeout_ms": timeout_ms, "tv2": tv2}


def _bumped(m: Mapping[str, Any]) -> bool:
    """The marker's epoch is above its data's: the coordinator bumped it to end the transaction."""
    return m["max_epoch"] is not None and m["marker_epoch"] is not None and m["max_epoch"] < m["marker_epoch"]


def repeats(later: Mapping[str, Any], first: Mapping[str, Any]) -> bool:
    """``later`` repeats ``first``, the marker before it of its producer on the partition: the
    same epoch, no Prepare* record of its own, and ``first`` certainly ended its transaction
    with that epoch: its epoch is bumped, a Prepare* record is answered by it, or (transaction
    version 2, where every marker bumps) ``later`` ended data of its own epoch."""
    epoch = later["marker_epoch"]
    return (epoch is not None and epoch == first["marker_epoch"] and later["log_offset"] is None
            and (_bumped(first) or first["log_offset"] is not None
                 or (later["tv2"] and later["first_offset"] is not None and later["max_epoch"] == epoch)))


def _word(marker_type: str | None) -> str:
    """What a marker's type did to its transaction."""
    return DECIDED.get(marker_type or "", "decided")


def _differs(a: str | None, b: str | None) -> bool:
    """Two markers' types are known and differ: they decided differently."""
    return a in KNOWN_MARKERS and b in KNOWN_MARKERS and a != b


def _first_was(first: Mapping[str, Any]) -> str:
    """What the coordinator's log says of the marker repeated."""
    at = formatted("__transaction_state-%d offset %d", first["log_partition"], first["log_offset"])
    if first["timed_out"]:
        return formatted("; the first was the coordinator's abort of a transaction open longer than its timeout of "
                         "%d ms (PrepareAbort at %s)", first["timeout_ms"], at)
    if first["log_offset"] is not None:
        return formatted("; the first answered the coordinator's %s at %s", first["decided"], at)
    return ""


def _placed(repeat: Mapping[str, Any], first: Mapping[str, Any], last: Mapping[str, Any]) -> dict[str, Any]:
    """A finding's place: the marker ``repeat``, its span from the marker ``first`` it repeats
    to the bare marker ``last``."""
    return {"producer_epoch": repeat["marker_epoch"], "first_offset": repeat["marker_offset"],
            "last_offset": last["marker_offset"], "first_timestamp": first["marker_timestamp"],
            "last_timestamp": last["marker_timestamp"]}


def classify(bare: Mapping[str, Any], before: Mapping[str, Any],
             before_that: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    """The ``duplicate_marker`` findings (none, one or two) a marker that ended no data
    (``bare``, a ``marker``) shows, with the markers of its producer's two transactions before it
    on the partition (``before``; ``before_that``: None without one).

    A coordinator writes a marker again when it resends after a lost answer or after a failover
    reloads a Prepare* record; ``kafka-transactions.sh abort`` for a transaction that had already
    ended leaves one too. Kafka's rule (KAFKA-19999): from 4.2, under transaction version 2, a
    broker accepts a repeat only when no transaction of the producer is open.

    * ``bare`` repeats ``before`` (``repeats``), with no record of the producer since: it ends
      nothing, info; a warning when its result differs from the first's (whoever sent it may
      take a committed transaction for aborted).
    * ``before`` ended data and repeats ``before_that``: the repeat ended the producer's next
      transaction before its own decision, whose marker (``bare``) then found nothing open: a
      warning, critical when that decision's result differs from the repeat's (exactly-once
      violated). Seen from that later marker, so a next transaction never ended is not judged.

    A repeat is told from a transaction that added the partition and wrote nothing to it (its
    marker carries the same epoch under transaction version 1) only by what is certain
    (``repeats``): a later transaction would have left a Prepare* record its marker answers,
    which compaction cannot have removed while an earlier record of its transactional id is
    still there.
    """
    found = []
    here = partition_name(bare["topic"], bare["partition"])
    if repeats(bare, before):
        differs = _differs(bare["marker_type"], before["marker_type"])
        if differs:
            kept = ("" if before["first_offset"] is None else
                    formatted("; its records at offsets %d-%d stay %s", before["first_offset"],
                              before["last_data_offset"], _word(before["marker_type"])))
            outcome = (": it ended no transaction, but whoever sent it may take the transaction for "
                       f"{_word(bare['marker_type'])}{kept}")
        else:
            outcome = ": it ended no transaction and changed nothing"
        evidence = formatted(
            "%s marker at offset %d of %s repeats the %s marker at offset %d (producer %d, epoch %d) with no record "
            "of the producer between them", bare["marker_type"], bare["marker_offset"], here, before["marker_type"],
            before["marker_offset"], bare["producer_id"], bare["marker_epoch"],
        ) + _first_was(before) + outcome + RESEND_TEXT + (NOOP_TV2_TEXT if bare["tv2"] else "")
        found.append(finding_row(bare, "duplicate_marker", Severity.WARNING if differs else Severity.INFO, evidence,
                                 **_placed(bare, before, bare)))
    if before["first_offset"] is not None and before_that is not None and repeats(before, before_that):
        differs = _differs(bare["marker_type"], before["marker_type"])
        evidence = formatted(
            "%s marker at offset %d of %s repeats the %s marker at offset %d (producer %d, epoch %d), but the "
            "producer's next transaction was open here: the repeat ended its records at offsets %d-%d as %s before "
            "their own decision, whose %s marker at offset %d then found nothing open",
            before["marker_type"], before["marker_offset"], here, before_that["marker_type"],
            before_that["marker_offset"], bare["producer_id"], before["marker_epoch"], before["first_offset"],
            before["last_data_offset"], _word(before["marker_type"]), bare["marker_type"], bare["marker_offset"],
        ) + (FLIPPED_TEXT if differs else "") + _first_was(before_that) + RESEND_TEXT + REFUSED_TEXT
        found.append(finding_row(before, "duplicate_marker", Severity.CRITICAL if differs else Severity.WARNING,
                                 evidence, **_placed(before, before_that, bare)))
    return found


def duplicate_marker_findings(rows: pa.Table, answers: pa.Table, producer_ids: pa.Table) -> pa.Table:
    """Every ``duplicate_marker`` finding, as a ``FINDINGS`` table (no row: none): each
    ``BARE_MARKERS`` row of ``rows`` classified with the markers of its producer's two
    transactions before it there. ``rows``: those of ``partition_transactions`` (``chain_rows``,
    or more); ``answers``: what followed the Prepare* records they answered (``answered_by``, or
    more); ``producer_ids``: ``PRODUCER_IDS`` rows (one per producer id). A marker that answered
    several Prepare* records is read once with each, as a join reads it."""
    tv2 = {r["producer_id"] for r in producer_ids.select(["producer_id", "transaction_version"]).to_pylist()
           if r["transaction_version"] == 2}
    by_marker: dict[tuple[str, int, int, int], list[dict[str, Any]]] = {}
    for answer in answers.to_pylist():
        key = (answer["topic"], answer["partition"], answer["producer_id"], answer["next_marker_offset"])
        if answer["has_marker"] is True and None not in key:
            by_marker.setdefault(key, []).append(answer)
    markers: dict[tuple[str, int, int, int], list[dict[str, Any]]] = {}  # by producer and txn_seq
    for row in rows.to_pylist():
        key = (row["topic"], row["partition"], row["producer_id"], row["txn_seq"])
        if row["marker_offset"] is None or None in key:
            continue
        answered: list[dict[str, Any] | None] = [*by_marker.get((*key[:3], row["marker_offset"]), [])] or [None]
        markers.setdefault(key, []).extend(marker(row, answer, row["producer_id"] in tv2) for answer in answered)
    found: list[dict[str, Any]] = []
    for row in rows.filter(BARE_MARKERS).to_pylist():
        topic, partition, producer_id, seq = row["topic"], row["partition"], row["producer_id"], row["txn_seq"]
        for bare in markers.get((topic, partition, producer_id, seq), []):
            for before in markers.get((topic, partition, producer_id, seq - 1), []):
                earlier: list[dict[str, Any] | None] = [*markers.get((topic, partition, producer_id, seq - 2), [])]
                for before_that in earlier or [None]:
                    found.extend(classify(bare, before, before_that))
    return pa.Table.from_pylist(found, schema=in_ms(FINDINGS))
