"""The rule of open transactions, computed on the driver with pyarrow (no pyspark here): every
transaction no marker ended is ``hanging_transaction`` (as ``kafka-transactions.sh
find-hanging`` says), ``open_transaction_epoch_mismatch`` or ``open_transaction``.

Its rows are few, whatever the number of transactions: the open rows of
``partition_transactions`` (``OPEN``, which Parquet answers from the row groups' statistics
where a row group holds none), the coordinator's current rows of their producer ids
(``coordinator_current``), and the rows of the markers that came before them (``previous_markers``:
an open transaction is its producer's last on the partition, so the marker before it is the
producer's last there, whose coordinator epoch the pre-3.0 abort command names).

Values a row lacks are judged as SQL judges them, so that the rule reads as it did as a Spark
query: a comparison with an unknown value is unknown, and only a known truth counts; an unknown
value is written ``null``, as Java's formatter writes it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from txn_audit.detect.words import (
    ABORT_COMMAND_PRE_3_0,
    abort_command_text,
    duration_or_null,
    duration_text,
    finding_row,
    force_terminate_command_text,
    formatted,
    partition_name,
    time_or_null,
    time_text,
    value_text,
)
from txn_audit.formats.primitives import INT32_MAX
from txn_audit.schemas import FINDINGS, in_ms
from txn_audit.tables import rows_on_partitions
from txn_audit.severity import Severity

__all__ = ["COORDINATOR_COLUMNS", "OPEN", "MarkerEpochs", "classify", "last_coordinator_epoch", "marker_epochs",
           "moved_on", "open_transaction_findings", "previous_markers"]

#: the ``transaction.timeout.ms`` the coordinator records for a two-phase-commit transaction
#: (KIP-939: InitProducerId with enable2Pc; Integer.MAX_VALUE, so that it never expires)
TWO_PHASE_COMMIT_TIMEOUT_MS = INT32_MAX

#: the transactions no marker ended: every ``open_transaction_findings`` row is of one
OPEN = pc.field("state") == "open"
#: what the rule reads of the coordinator's current rows (``coordinator_current``)
COORDINATOR_COLUMNS = ("transactional_id", "tombstone", "producer_id", "producer_epoch", "state", "listed",
                       "txn_timeout_ms", "txn_start_timestamp", "txn_last_update_timestamp")


def previous_markers(open_rows: pa.Table) -> pc.Expression | None:
    """The ``partition_transactions`` rows whose marker came last before an open transaction of
    ``open_rows`` (its ``prev_marker_offset`` on its partition); None when none had one."""
    offsets: dict[tuple[str, int], set[int]] = {}
    for row in open_rows.select(["topic", "partition", "prev_marker_offset"]).to_pylist():
        if row["prev_marker_offset"] is not None:
            offsets.setdefault((row["topic"], row["partition"]), set()).add(row["prev_marker_offset"])
    return rows_on_partitions(offsets, "marker_offset")


#: the coordinator epoch of each ``previous_markers`` row, by its topic, partition and marker offset
MarkerEpochs = dict[tuple[str, int, int], int]


def marker_epochs(previous: pa.Table) -> MarkerEpochs:
    """The coordinator epochs of the ``previous_markers`` rows of ``partition_transactions``."""
    return {(m["topic"], m["partition"], m["marker_offset"]): m["coordinator_epoch"]
            for m in previous.select(["topic", "partition", "marker_offset", "coordinator_epoch"]).to_pylist()}


def last_coordinator_epoch(open_row: Mapping[str, Any], epochs: MarkerEpochs) -> int | None:
    """The coordinator epoch of the marker before open transaction ``open_row``: its producer's
    last on the partition (the open transaction is its last there); None without one."""
    return epochs.get((open_row["topic"], open_row["partition"], open_row["prev_marker_offset"]))


def _minus(a: int | None, b: int | None) -> int | None:
    return None if a is None or b is None else a - b


def _above(a: int | None, b: int | None) -> bool | None:
    return None if a is None or b is None else a > b


def _and(*terms: bool | None) -> bool | None:
    """SQL's AND: false if any is false, else unknown if any is unknown."""
    if any(term is False for term in terms):
        return False
    return None if any(term is None for term in terms) else True


def moved_on(row: Mapping[str, Any], current: Mapping[str, Any] | None,
             successor: Mapping[str, Any] | None) -> str | None:
    """Why no marker will ever close open transaction ``row``, from the coordinator's own record,
    whatever the audit time; None when its log does not prove it.

    The coordinator writes a marker only to the partitions its record of a transaction lists
    (``WriteTxnMarkers`` after a Prepare*; the timeout abort of an Ongoing one too). Its newest
    record of the producer, written *after* the producer's last write here, that does not list
    this partition proves that whatever transaction the write was in ended (or goes on) without
    it: ``current`` is that record when the transactional id still has this producer id,
    ``successor`` the id's newest record when it has moved to another producer id since. A
    record older than the write proves nothing: the copy of ``__transaction_state`` may have
    been taken before the partition was added (the time rule decides then)."""
    here = partition_name(row["topic"], row["partition"])
    last_write = row["producer_last_timestamp"]
    record = current if current is not None else successor
    if record is None or last_write is None or record.get("txn_last_update_timestamp") is None:
        return None
    updated = record["txn_last_update_timestamp"]
    if updated <= last_write or here in (record.get("listed") or []):
        return None
    when = f"at {time_text(updated)}, {duration_text(updated - last_write)} after that write"
    if current is None:
        return (f"its transactional id {record['transactional_id']} moved to producer id {record['producer_id']} "
                f"({record['state']}) {when}")
    return (f"the coordinator's newest record of its transactional id {record['transactional_id']} is "
            f"{record['state']} at epoch {value_text(record['producer_epoch'])} {when}, and does not list {here}")


def classify(row: Mapping[str, Any], current: Mapping[str, Any] | None, last_coordinator_epoch: int | None,
             as_of_ms: int, max_transaction_timeout_ms: int,
             successor: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The finding of one open transaction (``row``, of ``partition_transactions``), with the
    coordinator's current row of its producer id (None: none), the current row of its
    transactional id when that id has another producer id now (``successor``) and the
    coordinator epoch of its producer's last marker on the partition (None: none).

    Kafka's rule (``find-hanging``): a candidate is a transaction whose producer's last write
    here is older than the max transaction timeout; it hangs when its producer id is no
    transactional id's *current* producer id, or its id's current state does not list this
    partition (Ongoing and Prepare* list the partitions awaiting markers; Empty and Complete*
    list none). Beyond it: a transaction the coordinator's log proves ended without this
    partition (``moved_on``) hangs whatever the audit time. Epochs are not compared by Kafka; an
    open transaction at an older epoch than the listing one is reported apart. One whose last
    write here is unknown cannot be said to hang by the clock: it is reported open.
    """
    cur = current or {}
    here = partition_name(row["topic"], row["partition"])
    cur_tid, cur_state, cur_epoch = cur.get("transactional_id"), cur.get("state"), cur.get("producer_epoch")
    listed = here in (cur.get("listed") or [])
    idle_ms = _minus(as_of_ms, row["producer_last_timestamp"])
    candidate = _above(idle_ms, max_transaction_timeout_ms)
    epoch = row["max_epoch"] if row["max_epoch"] is not None else row["min_epoch"]
    mismatch = _and(listed, None if epoch is None or cur_epoch is None else epoch < cur_epoch)
    proof = None if listed else moved_on(row, current, successor)
    hanging = proof is not None or _and(candidate, not listed)
    if cur_tid is None:
        where_coord = ("no transactional id in __transaction_state has this producer id"
                       if row["transactional_id"] is None
                       else f"transactional id {row['transactional_id']} no longer has this producer id")
    else:
        where_coord = f"its transactional id {cur_tid} is {value_text(cur_state)} and does not list {here}"
    since = " (known only from a producer snapshot)" if row["source"] == "snapshot" else ""
    started = cur.get("txn_start_timestamp")
    started = started if started is not None else row["first_timestamp"]
    age = _minus(as_of_ms, started)
    timeout = cur.get("txn_timeout_ms")
    overdue = _and(None if cur_state is None else cur_state == "Ongoing", timeout is not None,
                   _above(age, timeout))
    two_phase = listed and timeout == TWO_PHASE_COMMIT_TIMEOUT_MS
    last_write = row["producer_last_timestamp"]
    # the words, as Java's formatter writes them
    pid, first, ep = row["producer_id"], value_text(row["first_offset"]), value_text(epoch)
    tid, state = value_text(cur_tid), value_text(cur_state)
    timeout_text = duration_text(max_transaction_timeout_ms)
    written_at, idle = time_or_null(last_write), duration_or_null(idle_ms)
    if hanging:
        kind, severity = "hanging_transaction", Severity.CRITICAL
        opened = (f"producer {pid} (epoch {ep}) has a transaction open on {here} since offset {first}{since}; its "
                  f"last write here was at {written_at}")
        evidence = (f"{opened}, and {proof}: no marker will ever close it, whatever the audit time"
                    if proof is not None else
                    f"{opened}, {idle} before the audit time (more than the {timeout_text} maximum transaction "
                    f"timeout), and {where_coord}, so no marker will ever close it")
    elif mismatch:
        kind, severity = "open_transaction_epoch_mismatch", Severity.WARNING
        evidence = (
            f"producer {pid} has a transaction open on {here} since offset {first} at epoch {ep}, while its "
            f"transactional id {tid} lists {here} in a {state} transaction at epoch {value_text(cur_epoch)}; "
            "find-hanging does not report this (it ignores epochs), and the current transaction's marker will "
            "decide these older records too"
        )
    elif two_phase:
        kind, severity = "open_transaction", Severity.WARNING
        evidence = (
            f"producer {pid} (transactional id {tid}, epoch {ep}) has a two-phase-commit transaction open on {here} "
            f"since offset {first}, started {time_or_null(started)} ({duration_or_null(age)} before the audit "
            f"time): its coordinator records transaction.timeout.ms {TWO_PHASE_COMMIT_TIMEOUT_MS} (KIP-939), so it "
            "never expires and the coordinator never aborts it; only its external transaction manager's commit or "
            "abort ends it, else forceTerminateTransaction, and it holds the LSO until then"
        )
    else:
        kind = "open_transaction"
        severity = Severity.WARNING if not listed or overdue else Severity.INFO
        if listed:
            late = (f", which is older than its {timeout} ms transaction.timeout.ms: the coordinator should "
                    "already have aborted it") if overdue else ""
            evidence = (
                f"producer {pid} (transactional id {tid}, epoch {ep}) has a transaction open on {here} since offset "
                f"{first}, started {time_or_null(started)} ({duration_or_null(age)} before the audit time); the "
                f"coordinator lists {here} in its {state} transaction{late}"
            )
        else:
            evidence = (
                f"producer {pid} (epoch {ep}) has a transaction open on {here} since offset {first}, last write "
                f"{written_at} ({idle} before the audit time) and {where_coord}; the coordinator's log holds no "
                "record after that write, so its timeout will not end this transaction: unless "
                "__transaction_state was copied before the partition was added, no marker will close it, and "
                f"find-hanging reports it once that last write is older than {timeout_text}"
            )
    remedies: dict[str, str | None] = {"remediation": None, "remediation_pre_3_0": None}
    if two_phase and not hanging:
        remedies["remediation"] = force_terminate_command_text(cur_tid)
    # a command wherever no timeout will end it: hanging, not listed, or listed past its own timeout
    elif hanging or not listed or overdue:
        remedies = {
            "remediation": abort_command_text(row["topic"], row["partition"], row["first_offset"]),
            "remediation_pre_3_0": formatted(ABORT_COMMAND_PRE_3_0, row["topic"], row["partition"],
                                             row["producer_id"], epoch, max(last_coordinator_epoch or 0, 0)),
        }
    return finding_row(
        row, kind, severity, evidence, producer_epoch=epoch,
        transactional_id=row["transactional_id"] if cur_tid is None else cur_tid, first_offset=row["first_offset"],
        last_offset=row["last_data_offset"], first_timestamp=row["first_timestamp"], last_timestamp=last_write,
        **remedies,
    )


def open_transaction_findings(open_rows: pa.Table, coordinator: pa.Table, previous: pa.Table, as_of_ms: int,
                              max_transaction_timeout_ms: int) -> pa.Table:
    """A finding for every open transaction (``open_rows``: ``OPEN`` rows of
    ``partition_transactions``), one per current coordinator row of its producer id, as a
    ``FINDINGS`` table. ``coordinator``: those rows and the current rows of the open rows'
    transactional ids (``COORDINATOR_COLUMNS``; tombstones are no producer's); ``previous``: the
    ``previous_markers`` rows of ``partition_transactions``."""
    by_producer: dict[int, list[dict[str, Any]]] = {}
    by_id: dict[str, dict[str, Any]] = {}
    for cur in coordinator.select(list(COORDINATOR_COLUMNS)).to_pylist():
        if not cur["tombstone"]:
            by_producer.setdefault(cur["producer_id"], []).append(cur)
            by_id[cur["transactional_id"]] = cur
    epochs = marker_epochs(previous)
    rows: list[dict[str, Any]] = []
    for row in open_rows.to_pylist():
        last_epoch = last_coordinator_epoch(row, epochs)
        currents: list[dict[str, Any] | None] = [*by_producer.get(row["producer_id"], [])] or [None]
        successor = by_id.get(row["transactional_id"]) if currents == [None] else None
        rows.extend(classify(row, cur, last_epoch, as_of_ms, max_transaction_timeout_ms, successor)
                    for cur in currents)
    return pa.Table.from_pylist(rows, schema=in_ms(FINDINGS))
