"""Incidents: the findings grouped by root cause, one incident per cause.

One problem in a log leaves several findings: a stray transactional batch opens a transaction no
marker will close (``hanging_transaction``), which holds the partition's last stable offset
(``stuck_lso``); a fenced producer's write may also break the rule that epochs never go down
(``invariant_violation``). An incident names the cause once, says what it caused and how much it
holds back, and gives the command that fixes it (or why none is needed). Every finding belongs to
exactly one incident (``Finding.incident_id``); a finding whose cause is not known is an incident
of its own, of its own kind.

How findings are grouped (all of them few: this runs on the driver, in plain Python):

* **A batch written after its transaction ended** (``late_arrival``, ``zombie_write`` at one batch:
  partition, producer id, offset) is the cause of what it did: the transaction it opened
  (``hanging_transaction`` / ``open_transaction`` from that offset), the records the next
  transaction absorbed (``absorbed_late_record`` from that offset), the LSO it holds. It is a
  **zombie write** when its epoch had been fenced by a marker written *before the batch was
  created* (created more than the late tolerance after that marker), and a **late arrival** when it
  was created before the marker that ended its transaction.
* **A transaction left open** on a partition (``hanging_transaction``, ``open_transaction``,
  ``open_transaction_epoch_mismatch``, ``retention_lost_open_txn``, ``missing_marker``,
  ``coordinator_stuck`` of one producer id there) is one transaction: with the same producer id and
  epoch on several partitions, one incident. Its cause, in this order: the coordinator stuck in a
  Prepare* state; a marker the coordinator decided but never wrote; data lost to retention; a
  **stray write**, when the coordinator's log never listed the partition for that producer id
  (``TransactionContext.listed``: the partition was never added to a transaction); a producer that
  stopped inside its transaction (``open_transaction``: crashed or still working); else hanging.
* **Blocked consumer groups** (``TransactionContext.blocked``: ``blocked_consumers`` rows) are
  named in the impact of the incident whose findings are on their partition.
* **Consequences** join the incident of their cause: a ``stuck_lso`` joins the transaction of the
  producer holding it; a ``pending_offset_commit`` the transaction of its producer id; an
  ``invariant_violation`` whose example batch is the place of another finding joins that finding.
* Damage to the dump (``corrupt_batch``, ``truncated_segment``, ``unreadable_input``) is a
  ``corruption`` incident per finding.
* A marker written again (``duplicate_marker``) and the epochs of known broker bugs
  (``epoch_bumped_twice``, ``epoch_exhausted``) are causes of their own: an incident each.

An incident's severity is the worst of its findings; its id is a digest of its kind and place, so
the same cause in the same dump keeps its id from one run to the next.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from txn_audit.detect.words import duration_text, offsets_text, time_text
from txn_audit.outputs import publish
from txn_audit.results import BlockedConsumer, Finding, Incident, PartitionStatus
from txn_audit.schemas import FINDINGS, INCIDENTS, declared, in_ms
from txn_audit.severity import SEVERITIES, Severity

__all__ = ["INCIDENT_KINDS", "TransactionContext", "build_incidents", "incident_commands", "write_incidents"]

#: the tables this module writes
TABLES = {"incidents": INCIDENTS, "findings": FINDINGS}
#: the causes an incident can have (a finding of any other kind, alone, is an incident of its kind)
INCIDENT_KINDS = (
    "late_arrival",  # a batch created before the marker that ended its transaction, appended after it
    "zombie_write",  # a batch of a fenced epoch, created after the marker that fenced it
    "stray_write",  # a transactional batch on a partition no transaction of its producer listed
    "coordinator_stuck",  # the coordinator's last record for the transaction is a Prepare*
    "missing_marker",  # the coordinator completed the transaction, a partition never got its marker
    "retention_lost_open_txn",  # an open transaction whose data retention deleted
    "open_transaction",  # a producer that stopped inside its transaction (crashed, or still at work)
    "hanging_transaction",  # a transaction no marker will close, for no cause the dump shows
    "duplicate_marker",  # one decision's marker written again (a coordinator's resend, an abort by hand)
    "epoch_bumped_twice",  # a fence abort bumped the producer epoch twice (KAFKA-19367)
    "epoch_exhausted",  # epoch 32767 reached without a new producer id (KAFKA-20090)
    "corruption",  # a damaged or unreadable part of the dump
)

#: findings that describe one batch written outside its transaction
_BATCH = ("late_arrival", "zombie_write")
#: findings that describe a producer's open transaction on a partition
_OPEN = ("hanging_transaction", "open_transaction", "open_transaction_epoch_mismatch", "retention_lost_open_txn",
         "missing_marker", "coordinator_stuck")
#: the transaction-level causes, most telling first
_TRANSACTION_CAUSES = ("coordinator_stuck", "missing_marker", "retention_lost_open_txn")
_CORRUPTION = ("corrupt_batch", "truncated_segment", "unreadable_input")


@dataclass(frozen=True)
class TransactionContext:
    """What the incidents need beyond the findings, from the tables: per producer id, the
    partitions (``topic-partition``) any ``__transaction_state`` record of it ever listed, and,
    for a producer whose records lie in a coordinator log the cleaner compacted, where (the
    cleaner keeps each transactional id's newest records only: what older ones listed is gone);
    per partition, the consumer groups its held LSO blocks (``blocked_consumers`` rows)."""

    listed: Mapping[int, frozenset[str]] = field(default_factory=dict)
    compacted: Mapping[int, str] = field(default_factory=dict)
    blocked: Mapping[str, tuple[BlockedConsumer, ...]] = field(default_factory=dict)


def _blocked(places: Sequence[str], context: TransactionContext) -> str:
    """The sentence naming the consumer groups blocked on the incident's partitions ("" when
    none is): each group, where, its committed offset and how far behind the high watermark."""
    groups = [row for place in places for row in context.blocked.get(place, ())]
    if not groups:
        return ""
    said = [f"{g.group_id} on {g.topic}-{g.partition} (committed offset {g.committed_offset}, "
            + ("at the LSO" if g.records_to_lso == 0 else f"{g.records_to_lso} below the LSO")
            + f", {g.records_behind} behind the high watermark"
            + ("" if g.time_behind_ms is None else f" for {duration_text(g.time_behind_ms)}") + ")" for g in groups]
    return f"consumer groups blocked by it: {', '.join(said)}"


def _place(topic: str | None, partition: int | None) -> str | None:
    return None if topic is None or partition is None else f"{topic}-{partition}"


class _Groups:
    """Union-find over finding indices."""

    def __init__(self, size: int) -> None:
        self.parent = list(range(size))

    def find(self, index: int) -> int:
        while self.parent[index] != index:
            self.parent[index] = self.parent[self.parent[index]]
            index = self.parent[index]
        return index

    def join(self, first: int, second: int) -> None:
        a, b = self.find(first), self.find(second)
        if a != b:
            self.parent[max(a, b)] = min(a, b)  # the earlier finding (in the one order) leads


def _group(findings: Sequence[Finding]) -> _Groups:
    """The groups of findings with one cause."""
    groups = _Groups(len(findings))
    batch_of: dict[tuple[object, ...], int] = {}
    key: tuple[object, ...]
    for index, f in enumerate(findings):
        if f.kind in _BATCH or f.kind == "absorbed_late_record":
            key = (f.topic, f.partition, f.producer_id, f.first_offset)
            if f.kind in _BATCH or key in batch_of:
                if key in batch_of:
                    groups.join(batch_of[key], index)
                else:
                    batch_of[key] = index
    # absorbed records whose late batch came after them in the order
    for index, f in enumerate(findings):
        key = (f.topic, f.partition, f.producer_id, f.first_offset)
        if f.kind == "absorbed_late_record" and key in batch_of:
            groups.join(batch_of[key], index)
    anchored = {groups.find(index) for index in batch_of.values()}
    # a producer's open transaction on a partition: its findings are one, joined to the batch that
    # opened it when one did
    open_at: dict[tuple[object, ...], int] = {}
    epoch_at: dict[tuple[object, ...], int | None] = {}  # the open transaction's epoch, as the pass saw it
    for index, f in enumerate(findings):
        if f.kind not in _OPEN:
            continue
        key = (f.topic, f.partition, f.producer_id)
        if f.kind in ("hanging_transaction", "open_transaction"):
            epoch_at.setdefault(key, f.producer_epoch)
        opened_by = batch_of.get((f.topic, f.partition, f.producer_id, f.first_offset))
        if opened_by is not None:
            groups.join(opened_by, index)
        if key in open_at:
            groups.join(open_at[key], index)
        else:
            open_at[key] = index
    anchored = {groups.find(root) for root in anchored}
    # one transaction on several partitions (not a batch's: each late batch is a cause of its own)
    by_transaction: dict[tuple[object, ...], int] = {}
    for open_key, index in open_at.items():
        root = groups.find(index)
        if root in anchored:
            continue
        f = findings[index]
        transaction = (f.producer_id, epoch_at.get(open_key, f.producer_epoch))
        if transaction in by_transaction:
            groups.join(by_transaction[transaction], index)
        else:
            by_transaction[transaction] = index
    # consequences: the LSO a producer holds, offsets committed inside its transaction
    for index, f in enumerate(findings):
        if f.kind == "stuck_lso" and (f.topic, f.partition, f.producer_id) in open_at:
            groups.join(open_at[(f.topic, f.partition, f.producer_id)], index)
        elif f.kind == "pending_offset_commit":
            same = [i for (_, _, pid), i in open_at.items() if pid == f.producer_id]
            if same:
                groups.join(min(same), index)
    # an invariant that a finding at the same batch explains
    places: dict[tuple[object, ...], int] = {}
    for index, f in enumerate(findings):
        if f.kind != "invariant_violation" and f.first_offset is not None:
            places.setdefault((f.topic, f.partition, f.first_offset), index)
    for index, f in enumerate(findings):
        if f.kind == "invariant_violation" and (f.topic, f.partition, f.first_offset) in places:
            groups.join(places[(f.topic, f.partition, f.first_offset)], index)
    return groups


def _cause(members: Sequence[Finding], context: TransactionContext, late_tolerance_ms: int) -> tuple[str, Finding]:
    """The kind of an incident and the finding that says its cause."""
    kinds = {f.kind for f in members}
    if kinds & set(_BATCH):
        zombie = next((f for f in members if f.kind == "zombie_write"), None)
        late = next((f for f in members if f.kind == "late_arrival"), None)
        if late is None and zombie is not None:
            return "zombie_write", zombie
        assert late is not None
        created, marker = late.first_timestamp, late.last_timestamp
        fenced_before = created is not None and marker is not None and created > marker + late_tolerance_ms
        if zombie is not None and fenced_before:
            return "zombie_write", zombie
        return "late_arrival", late
    for kind in _TRANSACTION_CAUSES:
        if kind in kinds:
            return kind, next(f for f in members if f.kind == kind)
    hanging = next((f for f in members if f.kind == "hanging_transaction"), None)
    if hanging is not None:
        place = _place(hanging.topic, hanging.partition)
        # a producer id the context does not cover: what its coordinator listed is not known
        listed = None if hanging.producer_id is None else context.listed.get(hanging.producer_id)
        # "never listed" needs the whole history: a compacted coordinator log has lost its older records
        if listed is not None and place not in listed and hanging.producer_id not in context.compacted:
            return "stray_write", hanging
        return "hanging_transaction", hanging
    opened = next((f for f in members if f.kind in ("open_transaction", "open_transaction_epoch_mismatch")), None)
    if opened is not None:
        return "open_transaction", opened
    first = members[0]
    return ("corruption" if first.kind in _CORRUPTION else first.kind), first


def _digest(kind: str, anchor: Finding) -> str:
    place = "|".join(str(v) for v in (kind, anchor.topic, anchor.partition, anchor.broker_id, anchor.producer_id,
                                     anchor.producer_epoch, anchor.first_offset, anchor.file,
                                     "" if anchor.first_offset is not None or anchor.file else anchor.evidence))
    return f"{kind}-{hashlib.sha1(place.encode()).hexdigest()[:10]}"


def _held(members: Sequence[Finding], partitions: Mapping[str, PartitionStatus]) -> tuple[int, int | None, str]:
    """Records held from read_committed consumers by the incident's stuck LSOs, since when, and
    the sentence that says it ("" when none are held)."""
    records, since, longest, where = 0, None, None, []
    for f in members:
        status = partitions.get(_place(f.topic, f.partition) or "")
        if f.kind == "stuck_lso" and status is not None and status.lso_below_hw:
            records += status.held_records
            where.append(f"{status.held_records} on {status.topic}-{status.partition}")
            if status.held_since_timestamp is not None:
                since = status.held_since_timestamp if since is None else min(since, status.held_since_timestamp)
            if status.held_ms is not None:
                longest = status.held_ms if longest is None else max(longest, status.held_ms)
    if not records:
        return 0, since, ""
    when = "" if since is None else f" since {time_text(since)}"
    span = "" if longest is None else f" ({duration_text(longest)} before the audit time)"
    return records, since, f"{records} records held from read_committed consumers ({', '.join(where)}){when}{span}"


def _deleted_under(opened: Finding | None, partitions: Mapping[str, PartitionStatus]) -> str:
    """The sentence saying that an open transaction's first records were deleted while it was open
    (the partition's log start offset moved past its first offset: retention, or
    ``kafka-delete-records.sh``); "" when they were not. The broker then holds read_committed
    consumers at the log start, and the transaction still ends only by its marker."""
    if opened is None or opened.first_offset is None:
        return ""
    place = _place(opened.topic, opened.partition) or ""
    status = partitions.get(place)
    start = None if status is None else status.log_start_offset
    if start is None or opened.first_offset >= start:
        return ""
    return (f"its first records ({offsets_text(opened.first_offset, start - 1)} of {place}) "
            f"were deleted while it was open (retention, or kafka-delete-records.sh moved the log start offset to "
            f"{start}): read_committed consumers are held at the log start, and the rest of it still waits for its "
            "marker")


_CAUSE_TEXT = {
    "late_arrival": "a transactional batch was created before the marker that ended its transaction and appended "
                    "after it",
    "zombie_write": "a producer instance whose epoch had already been fenced wrote again (a zombie)",
    "stray_write": "a transactional batch was written to a partition that no transaction of its producer ever "
                   "listed (the partition was never added to the transaction, so no marker will come)",
    "coordinator_stuck": "the transaction coordinator recorded a Prepare* decision and never completed it",
    "missing_marker": "the transaction coordinator completed the transaction, but a partition never received its "
                      "marker",
    "retention_lost_open_txn": "retention deleted the data of a transaction that is still open",
    "open_transaction": "a producer stopped inside its transaction (crashed, or still working) and has not ended it",
    "hanging_transaction": "a transaction was left open that no marker will close",
    "duplicate_marker": "a transaction's marker was written again on a partition, without a decision of its own",
    "epoch_bumped_twice": "the transaction coordinator bumped a producer's epoch twice when it fenced an open "
                          "transaction (Kafka 4.0.0, KAFKA-19367)",
    "epoch_exhausted": "a transactional id reached the last epoch of its producer id and the coordinator did not give "
                       "it a new producer id (KAFKA-20090)",
    "corruption": "part of the dump is damaged or unreadable",
}

_NO_COMMAND = {
    "late_arrival": "No command undoes it: the late records were decided with another transaction. Check the "
                    "consumers of the partition for records delivered or dropped against their transaction's outcome.",
    "zombie_write": "Stop the fenced producer instance; its records were decided with another transaction, which no "
                    "command undoes.",
    "open_transaction": "None needed yet: the coordinator aborts the transaction when its transaction.timeout.ms "
                        "expires; abort it only if the producer is known to be gone and the timeout has passed.",
    "corruption": "None on this copy: restore the segment from a healthy replica, or let the broker recover the log "
                  "(it truncates a torn tail on start-up).",
    "coordinator_stuck": "Move or restart the leader of the transactional id's __transaction_state partition so "
                         "that the new coordinator completes the transaction; if the markers still do not come, "
                         "abort the open transactions it holds (kafka-transactions.sh abort).",
    "sequence_gap": "None on the broker: records between the two sequences were lost or written out of order by "
                    "the producer; check the producer's logs around that time.",
    "replica_divergence": "Let the copy catch up or truncate from the leader (restart its broker); if copies hold "
                          "different batches at one offset, the partition needs an unclean-leader review.",
    "remote_range_unlisted": "Check the remote store for the partition's segments (the remote log metadata lists "
                             "what the broker copied); if they are gone, consumers reading from the log start "
                             "cannot fetch those offsets: move the log start past them (kafka-delete-records.sh).",
    "pending_offset_commit": "None of its own: the offsets become stable when the transaction that holds them ends.",
    "duplicate_marker": "None undoes it. A repeat that ended no transaction needs nothing; one that ended a "
                        "transaction before its decision, or whose result differs, needs the consumers of those "
                        "records checked. If an operator sent it with kafka-transactions.sh abort, check a "
                        "transaction is open (describe-producers) before aborting.",
    "epoch_bumped_twice": "None needed now. Upgrade the brokers to Kafka 4.0.1 or later before a transactional id "
                          "nears epoch 32766, where the second bump overflows (KAFKA-19367).",
    "epoch_exhausted": "If the transactional id still has that producer id, restart its producer: InitProducerId "
                       "gives it a new one. Upgrade the brokers to Kafka 4.3.0 or later (KAFKA-20090).",
}


def _incident(members: Sequence[Finding], context: TransactionContext, partitions: Mapping[str, PartitionStatus],
              late_tolerance_ms: int) -> Incident:
    kind, anchor = _cause(members, context, late_tolerance_ms)
    severity = max(f.severity for f in members)
    places = list(dict.fromkeys(p for f in members if (p := _place(f.topic, f.partition)) is not None))
    consequences = list(dict.fromkeys(f.kind for f in members))
    records, since, held = _held(members, partitions)
    opened = next((f for f in members if f.kind in _OPEN and f.first_offset is not None), None)
    first_offset = anchor.first_offset
    if first_offset is None and opened is not None:
        first_offset = opened.first_offset
    topic, partition = anchor.topic, anchor.partition
    if opened is not None and anchor.first_offset is None:
        topic, partition = opened.topic, opened.partition
    transactional_id = next((f.transactional_id for f in members if f.transactional_id), None)
    where = []
    if anchor.producer_id is not None:
        epoch = "" if anchor.producer_epoch is None else f", epoch {anchor.producer_epoch}"
        named = f", transactional id {transactional_id}" if transactional_id else ""
        where.append(f"producer {anchor.producer_id}{epoch}{named}")
    if topic is not None:
        where.append(f"{topic}-{partition}" + ("" if first_offset is None else f" from offset {first_offset}"))
    at = f" ({'; '.join(where)})" if where else ""
    sentences = [f"Cause: {_CAUSE_TEXT[kind]}{at}."] if kind in _CAUSE_TEXT else [f"Cause: {anchor.evidence}."]
    others = [k.replace("_", " ") for k in consequences if k != anchor.kind]
    if others:
        sentences.append(f"Consequences: {', '.join(others)}" + (f" on {', '.join(places)}" if places else "") + ".")
    impact = [held] if held else []
    blocked = _blocked(places, context)
    if blocked:
        impact.append(blocked)
    if any(f.kind == "absorbed_late_record" and f.severity >= Severity.CRITICAL for f in members):
        impact.append("exactly-once violated: records were decided with a transaction of another outcome")
    elif kind in ("late_arrival", "zombie_write") and "absorbed_late_record" in consequences:
        impact.append("records were decided with another transaction")
    if any(f.kind == "pending_offset_commit" for f in members):
        impact.append("a consumer group's offsets stay unstable until the transaction ends")
    deleted = _deleted_under(opened, partitions)
    if deleted:
        impact.append(deleted)
    if impact:
        sentences.append("Impact: " + "; ".join(impact) + ".")
    if kind in _CAUSE_TEXT:
        sentences.append(f"Evidence: {anchor.evidence}")
    lost = None if anchor.producer_id is None else context.compacted.get(anchor.producer_id)
    if kind == "hanging_transaction" and lost is not None:
        sentences.append(f"Whether an earlier transaction of producer {anchor.producer_id} listed "
                         f"{_place(anchor.topic, anchor.partition)} is not known: the coordinator's log ({lost}) was "
                         "compacted, which keeps each transactional id's newest records only.")
    commands = incident_commands(members)
    remediation = "\n".join(commands) if commands else _NO_COMMAND.get(
        kind, "No command: see the evidence of its findings.")
    return Incident(
        incident_id=_digest(kind, anchor), kind=kind, severity=severity, topic=topic, partition=partition,
        broker_id=anchor.broker_id, producer_id=anchor.producer_id, producer_epoch=anchor.producer_epoch,
        transactional_id=transactional_id, first_offset=first_offset, partitions=tuple(places),
        consequences=tuple(consequences), findings=len(members), held_records=records, held_since_timestamp=since,
        summary=" ".join(sentences), remediation=remediation, commands=tuple(commands),
    )


def incident_commands(members: Iterable[Finding], *, pre_3_0: bool = False) -> list[str]:
    """The commands that repair an incident of ``members`` (its findings, in the one order): each
    finding's ``remediation`` lines, each command once, in order. ``pre_3_0``: the form brokers
    before Kafka 3.0 take, a finding's ``remediation_pre_3_0`` where it has one (a command
    without it is the same for every release)."""
    lines: list[str] = []
    for f in members:
        text = (f.remediation_pre_3_0 or f.remediation) if pre_3_0 else f.remediation
        lines.extend(text.splitlines() if text else ())
    return list(dict.fromkeys(lines))


def build_incidents(findings: Sequence[Finding], partitions: Iterable[PartitionStatus],
                    context: TransactionContext | None = None, *,
                    late_tolerance_ms: int) -> tuple[list[Incident], list[Finding]]:
    """The incidents of ``findings`` (in the one finding order), most severe first and otherwise in
    the order of their first finding, and the findings with their ``incident_id`` set."""
    context = context or TransactionContext()
    by_place = {f"{p.topic}-{p.partition}": p for p in partitions}
    groups = _group(findings)
    members: dict[int, list[int]] = {}
    for index in range(len(findings)):
        members.setdefault(groups.find(index), []).append(index)
    incidents: list[Incident] = []
    ids: dict[int, str] = {}
    for indices in members.values():
        incident = _incident([findings[i] for i in indices], context, by_place, late_tolerance_ms)
        incidents.append(incident)
        for index in indices:
            ids[index] = incident.incident_id
    first: dict[str, int] = {}
    for index in sorted(ids):
        first.setdefault(ids[index], index)
    incidents.sort(key=lambda incident: (-SEVERITIES.index(incident.severity), first[incident.incident_id]))
    return incidents, [replace(f, incident_id=ids[index]) for index, f in enumerate(findings)]


def incident_tables(incidents: Sequence[Incident], findings: Sequence[Finding]) -> dict[str, pa.Table]:
    """The ``incidents`` table and the ``findings`` table with their incident ids, as rows in the
    order given, their instants in epoch ms (``schemas.in_ms``; ``write_incidents`` writes them
    typed)."""
    return {
        "incidents": pa.Table.from_pylist([i.to_row() for i in incidents], schema=in_ms(INCIDENTS)),
        "findings": pa.Table.from_pylist([f.to_row() | {"severity": f.severity.value} for f in findings],
                                         schema=in_ms(FINDINGS)),
    }


def write_incidents(tables_dir: str | Path, incidents: Sequence[Incident], findings: Sequence[Finding]) -> None:
    """Write the ``incidents`` table and the ``findings`` table with their incident ids, each
    replaced in one step (one file each, in the order given)."""
    root = Path(tables_dir)
    for name, table in incident_tables(incidents, findings).items():
        staging = root / f".{name}.writing-{uuid.uuid4().hex}"
        staging.mkdir()
        pq.write_table(declared(table, TABLES[name]), staging / "part-00000.parquet")
        publish(staging, root / name)
