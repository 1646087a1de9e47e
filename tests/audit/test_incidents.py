"""Findings grouped by root cause (``txn_audit.detect.incidents``), on findings shaped as the rules
write them for the real-broker scenarios (no Spark here; the scans of the corpus check the same on
real data in ``test_scan_kafka_corpus.py``)."""

from __future__ import annotations

from typing import Any

from txn_audit.detect.incidents import TransactionContext, build_incidents
from txn_audit.detect.words import duration_text
from txn_audit.results import Finding, Incident, PartitionStatus
from txn_audit.severity import Severity

ABORT = "kafka-transactions.sh --bootstrap-server <broker> abort --topic {} --partition {} --start-offset {}"


def finding(kind: str, severity: str, topic: str | None, partition: int | None, producer_id: int | None = None,
            first_offset: int | None = None, **extra: Any) -> Finding:
    row: dict[str, Any] = {
        "kind": kind, "severity": severity, "topic": topic, "partition": partition, "broker_id": None,
        "producer_id": producer_id, "producer_epoch": 0 if producer_id is not None else None,
        "transactional_id": None, "first_offset": first_offset, "last_offset": None, "first_timestamp": None,
        "last_timestamp": None, "evidence": f"{kind} evidence", "remediation": None, "remediation_pre_3_0": None,
        "file": None,
    }
    return Finding.from_row(row | extra)


def hanging(topic: str, partition: int, pid: int, offset: int) -> Finding:
    return finding("hanging_transaction", "critical", topic, partition, pid, offset,
                   remediation=ABORT.format(topic, partition, offset))


def stuck(topic: str, partition: int, pid: int, lso: int) -> Finding:
    return finding("stuck_lso", "warning", topic, partition, pid, lso)


def status(topic: str, partition: int, held: int) -> PartitionStatus:
    row: dict[str, Any] = {name: None for name in PartitionStatus.__dataclass_fields__}
    return PartitionStatus.from_row(row | {
        "topic": topic, "partition": partition, "hw_source": "checkpoint", "open_transactions": 1,
        "held_records": held, "held_bytes": 10 * held, "held_since_timestamp": 1_000, "lso_below_hw": held > 0,
        "replicas": 1, "chosen_replica": "broker 1", "replica_choice_reason": "only copy"})


def incidents(findings: list[Finding], partitions: list[PartitionStatus] | None = None,
              listed: dict[int, frozenset[str]] | None = None) -> tuple[list[Incident], list[Finding]]:
    return build_incidents(findings, partitions or [], TransactionContext(listed or {}), late_tolerance_ms=1_000)


def test_a_batch_on_a_partition_never_added_is_one_stray_write() -> None:
    found, grouped = incidents([hanging("hang", 1, 0, 0), stuck("hang", 1, 0, 0)], [status("hang", 1, 11)],
                               listed={0: frozenset({"hang-0", "hang-2"})})
    (incident,) = found
    assert (incident.kind, incident.severity, incident.topic, incident.partition, incident.first_offset) == (
        "stray_write", Severity.CRITICAL, "hang", 1, 0)
    assert incident.consequences == ("hanging_transaction", "stuck_lso") and incident.findings == 2
    assert incident.remediation == ABORT.format("hang", 1, 0)
    assert incident.commands == (ABORT.format("hang", 1, 0),)  # to be run as it is
    assert incident.held_records == 11 and "11 records held" in incident.summary
    assert {f.incident_id for f in grouped} == {incident.incident_id}
    # once the coordinator listed the partition for that producer, the cause is not a stray write
    (listed,), _ = incidents([hanging("hang", 1, 0, 0), stuck("hang", 1, 0, 0)],
                             listed={0: frozenset({"hang-1"})})
    assert listed.kind == "hanging_transaction"


def test_a_compacted_coordinator_log_cannot_prove_a_partition_was_never_listed() -> None:
    """The cleaner keeps each transactional id's newest records only: a hanging transaction whose
    producer's coordinator log was compacted is no proven stray write, and its incident says why."""
    findings = [hanging("hang", 1, 0, 0), stuck("hang", 1, 0, 0)]
    context = TransactionContext({0: frozenset({"hang-0"})}, {0: "__transaction_state-1 cleaned below offset 95"})
    (incident,), _ = build_incidents(findings, [status("hang", 1, 11)], context, late_tolerance_ms=1_000)
    assert (incident.kind, incident.commands) == ("hanging_transaction", (ABORT.format("hang", 1, 0),))
    assert ("Whether an earlier transaction of producer 0 listed hang-1 is not known: the coordinator's log "
            "(__transaction_state-1 cleaned below offset 95) was compacted") in incident.summary


def test_each_late_batch_is_one_incident_with_what_it_caused() -> None:
    """late-arrival: on late-0 the next transaction absorbed the late batch, on late-1 it hangs."""
    late = {"first_timestamp": 5_000, "last_timestamp": 8_000}  # created 3 s before the marker
    findings = [
        hanging("late", 1, 0, 4),
        finding("late_arrival", "warning", "late", 0, 0, 4, **late),
        finding("late_arrival", "warning", "late", 1, 0, 4, **late),
        finding("absorbed_late_record", "warning", "late", 0, 0, 4),
        stuck("late", 1, 0, 4),
    ]
    found, grouped = incidents(findings, [status("late", 1, 1)])
    assert sorted((i.kind, i.topic, i.partition, i.first_offset, i.consequences) for i in found) == [
        ("late_arrival", "late", 0, 4, ("late_arrival", "absorbed_late_record")),
        ("late_arrival", "late", 1, 4, ("hanging_transaction", "late_arrival", "stuck_lso")),
    ]
    assert found[0].severity == Severity.CRITICAL and found[0].partition == 1  # the hanging one first
    assert found[0].remediation == ABORT.format("late", 1, 4) and found[0].commands == (ABORT.format("late", 1, 4),)
    assert "No command undoes it" in found[1].remediation and found[1].commands == ()  # why none, no command
    assert len({f.incident_id for f in grouped}) == 2


def test_a_write_created_after_its_epoch_was_fenced_is_a_zombie_not_a_late_arrival() -> None:
    """One stray batch with an old epoch: five findings, one cause."""
    def five(created: int) -> list[Finding]:
        at = {"first_timestamp": created, "last_timestamp": 10_000}
        return [
            hanging("orders", 1, 7, 50),
            finding("zombie_write", "critical", "orders", 1, 7, 50, first_timestamp=created),
            finding("late_arrival", "warning", "orders", 1, 7, 50, **at),
            stuck("orders", 1, 7, 50),
            finding("invariant_violation", "critical", "orders", 1, 7, 50),
        ]

    (zombie,), _ = incidents(five(created=60_000))
    assert (zombie.kind, zombie.findings, zombie.first_offset) == ("zombie_write", 5, 50)
    assert set(zombie.consequences) == {"hanging_transaction", "zombie_write", "late_arrival", "stuck_lso",
                                        "invariant_violation"}
    (late,), _ = incidents(five(created=9_500))  # created before the marker (within the tolerance too)
    assert (late.kind, late.findings) == ("late_arrival", 5)


def test_a_crashed_producers_transaction_is_one_incident_over_its_partitions() -> None:
    findings = [
        finding("open_transaction", "info", "crash", 0, 1, 30), finding("open_transaction", "info", "crash", 1, 1, 30),
        stuck("crash", 0, 1, 30), stuck("crash", 1, 1, 30),
    ]
    (incident,), _ = incidents(findings, [status("crash", 0, 10), status("crash", 1, 10)])
    assert (incident.kind, incident.severity, incident.partitions) == (
        "open_transaction", Severity.WARNING, ("crash-0", "crash-1"))
    assert incident.held_records == 20 and incident.remediation.startswith("None needed yet")


def test_an_eos_producers_offsets_commit_joins_its_transaction() -> None:
    findings = [
        finding("open_transaction", "info", "eos-out", 0, 5, 42),
        finding("open_transaction", "info", "__consumer_offsets", 1, 5, 5),
        stuck("eos-out", 0, 5, 42), stuck("__consumer_offsets", 1, 5, 5),
        finding("pending_offset_commit", "warning", "__consumer_offsets", 1, 5, 5),
    ]
    (incident,), _ = incidents(findings)
    assert incident.findings == 5 and "offsets stay unstable" in incident.summary


def test_unrelated_findings_stay_apart_and_damage_is_corruption() -> None:
    findings = [
        finding("corrupt_batch", "warning", "clicks", 1, None, 100, file="clicks-1/0.log"),
        finding("truncated_segment", "warning", "clicks", 1, None, None, file="clicks-1/9.log"),
        finding("sequence_gap", "warning", "clicks", 0, 3, 520),
        finding("invariant_violation", "warning", "orders", 2, None, 7),
    ]
    found, grouped = incidents(findings)
    assert sorted(i.kind for i in found) == ["corruption", "corruption", "invariant_violation", "sequence_gap"]
    assert all(i.findings == 1 for i in found)
    # ids: one per incident, the same on every run
    again, _ = incidents(findings)
    assert [i.incident_id for i in again] == [i.incident_id for i in found]
    assert len({f.incident_id for f in grouped}) == 4


def test_a_coordinator_stuck_in_prepare_is_the_cause_of_what_it_holds() -> None:
    findings = [
        finding("coordinator_stuck", "warning", "inventory", 0, 9, None),
        finding("open_transaction", "info", "inventory", 0, 9, 12),
        stuck("inventory", 0, 9, 12),
    ]
    (incident,), _ = incidents(findings)
    assert (incident.kind, incident.first_offset, incident.findings) == ("coordinator_stuck", 12, 3)


def test_every_kind_is_documented_and_every_cause_has_its_sentence() -> None:
    """The README's tables list every finding kind and every incident kind (the JSON contract
    names them), and each cause has the sentence its incidents' summaries start with."""
    from pathlib import Path

    from txn_audit.detect import FINDING_KINDS
    from txn_audit.detect.incidents import _CAUSE_TEXT, INCIDENT_KINDS

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    assert [k for k in FINDING_KINDS if f"| `{k}` |" not in readme] == []
    assert [k for k in INCIDENT_KINDS if f"| `{k}` |" not in readme] == []
    assert [k for k in INCIDENT_KINDS if k not in _CAUSE_TEXT] == []


def test_the_consumer_groups_a_held_lso_blocks_are_named_in_its_incident() -> None:
    """The groups of ``TransactionContext.blocked`` on an incident's partition are named in its
    impact; those on another partition are not."""
    from txn_audit.results import BlockedConsumer

    def blocked(group: str, partition: int, committed: int) -> BlockedConsumer:
        return BlockedConsumer(group_id=group, topic="hang", partition=partition, committed_offset=committed,
                               commit_timestamp=2_000, commit_log_partition=0, commit_log_offset=5,
                               transactional_commit=False, last_stable_offset=3, high_watermark=11,
                               records_behind=11 - committed, records_to_lso=3 - committed,
                               held_since_timestamp=1_000, time_behind_ms=90_000,
                               time_behind_from="held_transaction", culprit_producer_id=0,
                               culprit_transactional_id=None)

    context = TransactionContext({0: frozenset({"hang-1"})},
                                 blocked={"hang-1": (blocked("app", 1, 3), blocked("slow", 1, 1)),
                                          "hang-2": (blocked("other", 2, 3),)})
    (incident,), _ = build_incidents([hanging("hang", 1, 0, 3), stuck("hang", 1, 0, 3)], [status("hang", 1, 8)],
                                     context, late_tolerance_ms=1_000)
    held = duration_text(90_000)  # the one way a duration is written
    assert ("consumer groups blocked by it: app on hang-1 (committed offset 3, at the LSO, 8 behind the high "
            f"watermark for {held}), slow on hang-1 (committed offset 1, 2 below the LSO, 10 behind the high "
            f"watermark for {held})") in incident.summary
    assert "other" not in incident.summary
