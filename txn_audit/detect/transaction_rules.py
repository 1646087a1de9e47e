"""The rules of a transaction judged on its own row of ``partition_transactions``, computed on
the driver with pyarrow (no pyspark here): ``absorbed_late_record`` (late batches a marker of
the next transaction decided) and ``retention_lost_open_txn`` (a transaction a producer snapshot
shows open from below the log start: retention deleted its data while it stayed open).

Their rows are few, whatever the number of transactions: those with late batches and an end
(``ABSORBING``), those only a snapshot shows (``SNAPSHOT_ONLY``). They are read once, through
both filters (``JUDGED``, ``Reconstruction.rows``), which Parquet answers from the row groups'
statistics where a row group holds none (most of them: a healthy log has neither).
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from txn_audit.detect.words import (
    ABORT_COMMAND_PRE_3_0,
    KNOWN_MARKERS,
    abort_command_text,
    finding_row,
    formatted,
    partition_name,
)
from txn_audit.schemas import FINDINGS, in_ms
from txn_audit.severity import Severity

__all__ = ["ABSORBING", "JUDGED", "SNAPSHOT_ONLY", "absorbed_findings", "retention_findings", "transaction_findings"]

#: the transactions a marker ended with late batches in them: every ``absorbed_findings`` row is of one
ABSORBING = (pc.field("late_batches") > 0) & pc.field("marker_type").is_valid()
#: the open transactions only a producer snapshot shows: every ``retention_findings`` row is of one
SNAPSHOT_ONLY = pc.field("source") == "snapshot"
#: every row a rule of this module judges: what ``transaction_findings`` reads, in one pass
JUDGED = ABSORBING | SNAPSHOT_ONLY

#: how the absorbed records' fate is told, by the marker that decided them
DECIDED = {"COMMIT": "committed", "ABORT": "aborted"}
FLIPPED_TEXT = " (an exactly-once violation: the outcome differs)"
UNKNOWN_OUTCOME_TEXT = (" (whether the outcome differs is not known: the dump does not show the marker types; dump "
                        "with --deep-iteration)")


def absorbed_findings(absorbing: pa.Table) -> list[dict[str, Any]]:
    """Late batches of a transaction that a marker had ended, decided by the next transaction's
    marker: critical when the two markers' outcomes differ. ``absorbing``: ``ABSORBING`` rows."""
    found = []
    for row in absorbing.to_pylist():
        ended, decided = row["prev_marker_type"], row["marker_type"]
        known = ended in KNOWN_MARKERS and decided in KNOWN_MARKERS
        flipped = known and ended != decided
        note = FLIPPED_TEXT if flipped else ("" if known else UNKNOWN_OUTCOME_TEXT)
        evidence = (
            f"{row['late_batches']} late batch(es) from offset {row['first_late_offset']} of "
            f"{partition_name(row['topic'], row['partition'])}, written for the transaction that producer "
            f"{row['producer_id']} ended with {ended} at offset {row['prev_marker_offset']}, were "
            f"{DECIDED.get(decided, 'decided')} by the next transaction's {decided} marker at offset "
            f"{row['marker_offset']}: records of one transaction were decided with another{note}"
        )
        found.append(finding_row(
            row, "absorbed_late_record", Severity.CRITICAL if flipped else Severity.WARNING, evidence,
            producer_epoch=row["max_epoch"], first_offset=row["first_late_offset"], last_offset=row["marker_offset"],
            first_timestamp=row["first_timestamp"], last_timestamp=row["marker_timestamp"],
        ))
    return found


def retention_findings(snapshot_only: pa.Table, stability: pa.Table) -> list[dict[str, Any]]:
    """A transaction a producer snapshot shows open from below its partition's log start
    (``partition_stability``); one open from beyond a torn log's end is not. ``snapshot_only``:
    ``SNAPSHOT_ONLY`` rows."""
    starts = {(row["topic"], row["partition"]): row["log_start_offset"]
              for row in stability.select(["topic", "partition", "log_start_offset"]).to_pylist()}
    found = []
    for row in snapshot_only.to_pylist():
        start, first = starts.get((row["topic"], row["partition"])), row["first_offset"]
        if start is None or first is None or not first < start:
            continue
        evidence = (
            f"a producer snapshot shows producer {row['producer_id']} with a transaction open on "
            f"{partition_name(row['topic'], row['partition'])} from offset {first}, below the log start offset "
            f"{start}: its data was deleted by retention while it stayed open, pinning the LSO at the log start"
        )
        found.append(finding_row(
            row, "retention_lost_open_txn", Severity.CRITICAL, evidence,
            producer_epoch=row["min_epoch"], first_offset=first, last_timestamp=row["producer_last_timestamp"],
            remediation=abort_command_text(row["topic"], row["partition"], first),
            # brokers before 3.0: by its producer, at the coordinator epoch of its last marker (at least 0)
            remediation_pre_3_0=formatted(ABORT_COMMAND_PRE_3_0, row["topic"], row["partition"], row["producer_id"],
                                          row["max_epoch"], max(row.get("coordinator_epoch") or 0, 0)),
        ))
    return found


def transaction_findings(judged: pa.Table, stability: pa.Table) -> pa.Table:
    """Every finding of the rules of this module, as a ``FINDINGS`` table (no row: none).
    ``judged``: the ``JUDGED`` rows of ``partition_transactions``, each rule taking its own."""
    rows = [*absorbed_findings(judged.filter(ABSORBING)),
            *retention_findings(judged.filter(SNAPSHOT_ONLY), stability)]
    return pa.Table.from_pylist(rows, schema=in_ms(FINDINGS))
