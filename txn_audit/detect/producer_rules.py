"""The rules of a producer's writes on a partition, computed on the driver with pyarrow (no
pyspark here): ``late_arrival`` (a transactional batch appended after the marker that ended its
transaction), ``sequence_gap`` (a batch whose sequence does not continue its producer's previous
one), ``zombie_write`` and ``epoch_regression`` (epochs and coordinator epochs that go down).

Their rows are ``producer_events``: the producer pass's rows a rule may flag, a superset the
pass keeps as it walks each replica (``reconstruct.ordered_pass``), with what came before each
row on its partition (the previous marker, sequence and epochs). A healthy dump has none, an
unhealthy one a few per anomaly: they are collected once (``detect.producer_rule_inputs``)
rather than read by three Spark queries, each with its plan and jobs. The sequence rule names
the file of each gap's batch, found by its segment and position (``SEGMENT_KEY``,
``gap_places``).
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from txn_audit.detect.offset_ranges import uncovered
from txn_audit.detect.words import duration_text, finding_row, offsets_text, partition_name, rows_where, time_text
from txn_audit.schemas import FINDINGS, in_ms
from txn_audit.severity import Severity

__all__ = ["BATCH_PLACE", "SEGMENT_KEY", "Between", "Span", "dropped_offsets", "epoch_findings",
           "gap_places", "gap_spans", "late_arrival_findings", "producer_findings", "sequence_findings",
           "sequence_gaps"]

#: a segment of a partition: what names the batches of a rule's findings in a filter
SEGMENT_KEY = ("topic", "partition", "segment_base_offset")
#: a batch of a partition's segment: how a sequence gap finds its batch (and its file)
BATCH_PLACE = (*SEGMENT_KEY, "position")
#: the highest sequence number: the next batch's sequence wraps to 0
LAST_SEQUENCE = 2**31 - 1
#: the columns of ``producer_events`` a finding of the epoch rule takes by name
EPOCH_SOURCE = ("topic", "partition", "broker_id", "producer_id")


def _time(ms: int | None) -> str:
    return "an unknown time" if ms is None else time_text(ms)


def late_arrival_findings(events: pa.Table, late_tolerance_ms: int) -> list[dict[str, Any]]:
    """A transactional batch appended after its producer's marker, yet created before it (by its
    time, beyond ``late_tolerance_ms``, or by an epoch below the marker's): it belongs to a
    transaction that had already ended."""
    late = rows_where(events, pc.and_(events.column("is_transactional"), events.column("is_late")))
    found = []
    for row in late:
        epoch, marker_epoch = row["epoch"], row["prev_marker_epoch"]
        created, marker_at = row["max_timestamp"], row["prev_marker_timestamp"]
        if _below(epoch, marker_epoch):
            why = f"carries epoch {epoch}, below the epoch {marker_epoch} of that marker"
        else:
            before = "" if created is None or marker_at is None else f", {duration_text(marker_at - created)}"
            why = (f"was created at {_time(created)}{before} before that marker (tolerance "
                   f"{duration_text(late_tolerance_ms)})")
        evidence = (
            f"transactional batch at offsets {row['offset']}-{row['last_offset']} of "
            f"{partition_name(row['topic'], row['partition'])} (producer {row['producer_id']}, epoch {epoch}) was "
            f"appended after the producer's {row['prev_marker_type']} marker at offset {row['prev_marker_offset']} "
            f"({_time(marker_at)}) yet {why}: it belongs to a transaction that had already ended"
        )
        found.append(finding_row(row, "late_arrival", Severity.WARNING, evidence, producer_epoch=epoch,
                                 first_offset=row["offset"], last_offset=row["last_offset"],
                                 first_timestamp=created, last_timestamp=marker_at))
    return found


def _expected(previous_last: int) -> int:
    """The sequence that continues a batch ending at sequence ``previous_last``."""
    return 0 if previous_last == LAST_SEQUENCE else previous_last + 1


def _is_gap(row: dict[str, Any]) -> bool:
    """Whether the batch of ``row`` does not continue its producer's previous one: within an
    epoch, the next sequence; in a new epoch, 0. A value that is not known decides nothing."""
    epoch, previous, base = row["epoch"], row["prev_seq_epoch"], row["base_sequence"]
    if epoch is None or previous is None or base is None:
        return False
    if epoch == previous:
        last = row["prev_seq_last_sequence"]
        return last is not None and bool(base != _expected(last))
    return bool(epoch > previous and base != 0)


def sequence_gaps(events: pa.Table) -> list[dict[str, Any]]:
    """The rows of ``events`` whose batch does not continue its producer's previous one."""
    return [row for row in rows_where(events, pc.is_valid(events.column("prev_seq_epoch"))) if _is_gap(row)]


def gap_places(gaps: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    """The segments (``SEGMENT_KEY``) of the batches of ``gaps``, each once, in order."""
    return sorted({tuple(row[c] for c in SEGMENT_KEY) for row in gaps}, key=repr)


#: an open range of offsets between a sequence gap's previous batch and its batch: (topic,
#: partition, the previous batch's last offset, the gap batch's base offset)
Span = tuple[str, int, int, int]
#: per ``Span``: the (base, last) offsets of the batches of the audited copy inside it
Between = dict[Span, list[tuple[int, int]]]


def gap_spans(gaps: list[dict[str, Any]], cleanable: Collection[tuple[str, int]]) -> list[Span]:
    """The ``Span`` of each gap of ``gaps`` on a partition the cleaner may compact (``cleanable``:
    those of compacted topics, and those the dump does not tell) whose batches are not adjacent,
    each once, in order: where the batches the cleaner dropped would have been."""
    spans = {(row["topic"], row["partition"], row["prev_seq_last_offset"], row["offset"]) for row in gaps
             if (row["topic"], row["partition"]) in cleanable and row["prev_seq_last_offset"] is not None
             and row["offset"] - row["prev_seq_last_offset"] > 1}
    return sorted(spans)


def dropped_offsets(row: dict[str, Any], between: Between) -> list[tuple[int, int]]:
    """The offsets between a gap's batch and its producer's previous one that no batch holds:
    where the log cleaner dropped whole batches. The cleaner of a compacted topic removes the
    records a later one with the same key replaces, and aborted transactions' records; it drops a
    batch left empty unless it is the producer's last (whose sequence the broker's producer state
    needs), so the sequences of the batches it keeps jump; a batch it keeps keeps its first and
    last offset and its sequences (``LogCleaner.cleanInto``, ``MemoryRecords.filterTo``). The
    offsets of a batch it dropped are then held by no batch, which no other cause leaves on a
    copy whose batches were read whole (a damaged segment is a finding of its own). ``between``:
    the batches in each gap's span (``gap_spans``); none for a gap without one."""
    previous = row["prev_seq_last_offset"]
    span = (row["topic"], row["partition"], previous, row["offset"])
    return uncovered(between[span], previous + 1, row["offset"] - 1) if span in between else []


def sequence_findings(events: pa.Table, batches: pa.Table, between: Between | None = None,
                      compacted: Collection[tuple[str, int]] = ()) -> list[dict[str, Any]]:
    """Each batch with a sequence continues its producer's previous one on the partition
    (``producer_events`` carry that previous batch), unless the log cleaner dropped what lay
    between (``dropped_offsets``) on a ``compacted`` partition. Where the dump does not tell
    whether the partition is compacted (``between`` holds its gap's span), such a gap is an info
    finding that says so. ``batches``: the ``BATCH_PLACE`` and ``file`` of the audited replicas'
    batches in the gaps' segments (``gap_places``), which give the file of each batch found; a
    gap whose batch they lack is not reported."""
    files: dict[tuple[Any, ...], list[str]] = {}
    for batch in batches.to_pylist():
        files.setdefault(tuple(batch[c] for c in BATCH_PLACE), []).append(batch["file"])
    found = []
    for row in sequence_gaps(events):
        dropped = dropped_offsets(row, between or {})
        if dropped and (row["topic"], row["partition"]) in compacted:
            continue
        epoch, previous, base = row["epoch"], row["prev_seq_epoch"], row["base_sequence"]
        name = partition_name(row["topic"], row["partition"])
        if epoch == previous:
            last = row["prev_seq_last_sequence"]
            evidence = (f"producer {row['producer_id']} epoch {epoch}: batch at offset {row['offset']} of {name} "
                        f"starts at sequence {base}, but its previous batch (ending at offset "
                        f"{row['prev_seq_last_offset']}) ended at sequence {last}, so {_expected(last)} was expected")
        else:
            evidence = (f"producer {row['producer_id']}: first batch of epoch {epoch} at offset {row['offset']} of "
                        f"{name} starts at sequence {base} instead of 0")
        severity = Severity.WARNING
        if dropped:
            held_by_none = ", ".join(offsets_text(first, last) for first, last in dropped)
            one = len(dropped) == 1 and dropped[0][0] == dropped[0][1]
            evidence += (f"; {held_by_none} between them {'is' if one else 'are'} held by no batch: "
                         "if the topic is compacted (the dump shows neither its cleanup.policy nor a "
                         "cleaner-offset-checkpoint entry), the log cleaner dropped them and the gap is its work")
            severity = Severity.INFO
        for file in files.get(tuple(row[c] for c in BATCH_PLACE), []):
            found.append(finding_row(row, "sequence_gap", severity, evidence, producer_epoch=epoch,
                                     first_offset=row["offset"], last_offset=row["last_offset"],
                                     first_timestamp=row["first_timestamp"],
                                     last_timestamp=row["max_timestamp"], file=file))
    return found


def _below(value: int | None, bound: int | None) -> bool:
    """``value < bound``, false when either is not known."""
    return value is not None and bound is not None and value < bound


def epoch_findings(events: pa.Table) -> list[dict[str, Any]]:
    """Epochs per (partition, producer) never go down; data below a marker's epoch is a zombie;
    coordinator epochs of markers never go down (KAFKA-9144). ``producer_events`` carry the
    highest epochs seen before each row."""
    found = []
    for row in events.to_pylist():
        epoch, marker = row["epoch"], row["is_marker"]
        name, pid, offset = partition_name(row["topic"], row["partition"]), row["producer_id"], row["offset"]
        source = {c: row[c] for c in EPOCH_SOURCE}
        common = {"producer_epoch": epoch, "first_offset": offset, "last_offset": row["last_offset"],
                  "first_timestamp": row["max_timestamp"]}
        fenced_by = row["max_marker_epoch_before"]
        zombie = not marker and _below(epoch, fenced_by)
        if zombie:
            found.append(finding_row(source, "zombie_write", Severity.CRITICAL, (
                f"data batch at offset {offset} of {name} was written by producer {pid} with epoch {epoch} after a "
                f"marker with epoch {fenced_by} had fenced that epoch: a zombie producer's write"), **common))
        written = row["max_data_epoch_before"]
        if _below(epoch, written) and not (not marker and _below(epoch, -1 if fenced_by is None else fenced_by)):
            what = "marker" if marker else "data batch"
            found.append(finding_row(source, "epoch_regression", Severity.CRITICAL, (
                f"{what} at offset {offset} of {name} has producer {pid} epoch {epoch}, lower than the epoch "
                f"{written} it already wrote with on this partition"), **common))
        if marker and _below(row["coordinator_epoch"], row["max_coordinator_epoch_before"]):
            found.append(finding_row(source, "epoch_regression", Severity.CRITICAL, (
                f"marker at offset {offset} of {name} for producer {pid} has coordinator epoch "
                f"{row['coordinator_epoch']}, lower than the {row['max_coordinator_epoch_before']} of an earlier "
                "marker (the KAFKA-9144 signature)"), **common))
    return found


def producer_findings(events: pa.Table, batches: pa.Table, late_tolerance_ms: int,
                      between: Between | None = None, compacted: Collection[tuple[str, int]] = ()) -> pa.Table:
    """Every finding of the rules of this module, as a ``FINDINGS`` table (no row: none).
    ``events``: ``producer_events``' rows; ``batches``, ``between`` and ``compacted``: as
    ``sequence_findings`` reads them."""
    rows = [*late_arrival_findings(events, late_tolerance_ms),
            *sequence_findings(events, batches, between, compacted),
            *epoch_findings(events)]
    return pa.Table.from_pylist(rows, schema=in_ms(FINDINGS))
