"""The duplicate-marker rule's verdict on one marker that ended no data
(``duplicate_marker_rules.classify``), pure Python on hand-made rows: each branch of the rule,
its severity reasoned from what Kafka did to the records. The whole rule on tables, read through
its filters, is in ``test_duplicate_markers.py``; real repeats written by real brokers in
``tests/corpus/*/duplicate-marker``.
"""

from __future__ import annotations

from typing import Any

from txn_audit.detect.duplicate_marker_rules import classify, marker, repeats

PID = 7
T0 = 1_795_000_000_000


def txn(seq: int, marker_offset: int, marker_type: str | None, epoch: int, *, data: tuple[int, int] | None = None,
        data_epoch: int | None = None) -> dict[str, Any]:
    """Producer ``PID``'s ``seq``-th transaction on orders-0: its data (None: none; at
    ``data_epoch``, the marker's epoch unless given) and its marker."""
    return {
        "topic": "orders", "partition": 0, "broker_id": 1, "producer_id": PID, "txn_seq": seq,
        "transactional_id": "app", "first_offset": None if data is None else data[0],
        "last_data_offset": None if data is None else data[1], "marker_offset": marker_offset,
        "marker_type": marker_type, "marker_epoch": epoch, "marker_timestamp": T0 + marker_offset,
        "max_epoch": None if data is None else (epoch if data_epoch is None else data_epoch),
    }


def prepare(state: str = "PrepareCommit", *, log_offset: int = 40, took_ms: int = 10) -> dict[str, Any]:
    """The coordinator's Prepare* record a marker answered, in ``__transaction_state-3``, written
    ``took_ms`` after its transaction started, of a 60 s transaction timeout."""
    return {"txn_log_partition": 3, "txn_log_offset": log_offset, "state": state, "ts": T0 + took_ms, "started": T0,
            "timeout_ms": 60_000}


def at(row: dict[str, Any], answered: dict[str, Any] | None = None, *, tv2: bool = False) -> dict[str, Any]:
    return marker(row, answered, tv2)


def test_a_resent_commit_after_a_decided_commit_changed_nothing_and_is_info() -> None:
    """Transaction version 1: the coordinator's PrepareCommit was answered by the COMMIT at 3; a
    second COMMIT at 4 of the same epoch answers no Prepare* record: the coordinator resent it (a
    lost WriteTxnMarkers answer). The records 0-2 were committed once; the repeat ends nothing."""
    first = at(txn(1, 3, "COMMIT", 0, data=(0, 2)), prepare())
    (found,) = classify(at(txn(2, 4, "COMMIT", 0)), first, None)
    assert (found["kind"], found["severity"]) == ("duplicate_marker", "info")
    assert (found["first_offset"], found["last_offset"], found["producer_epoch"]) == (4, 4, 0)
    assert (found["first_timestamp"], found["last_timestamp"]) == (T0 + 3, T0 + 4)
    assert (found["topic"], found["partition"], found["broker_id"], found["producer_id"],
            found["transactional_id"]) == ("orders", 0, 1, PID, "app")
    assert found["evidence"] == (
        "COMMIT marker at offset 4 of orders-0 repeats the COMMIT marker at offset 3 (producer 7, epoch 0) with no "
        "record of the producer between them; the first answered the coordinator's PrepareCommit at "
        "__transaction_state-3 offset 40: it ended no transaction and changed nothing. A coordinator's resend (after "
        "a lost answer or a coordinator failover), or kafka-transactions.sh abort for a transaction that had ended, "
        "writes such a repeat")
    assert found["remediation"] is None and found["remediation_pre_3_0"] is None


def test_an_abort_repeating_a_commit_is_a_warning_for_whoever_sent_it() -> None:
    """The repeat's ABORT changed nothing in the log (the COMMIT at 3 had already ended the
    records), but whoever wrote it (``kafka-transactions.sh abort`` on an ended transaction) may
    take committed records for aborted: a warning that says they stay committed."""
    first = at(txn(1, 3, "COMMIT", 0, data=(0, 2)), prepare())
    (found,) = classify(at(txn(2, 4, "ABORT", 0)), first, None)
    assert found["severity"] == "warning"
    assert (": it ended no transaction, but whoever sent it may take the transaction for aborted; its records at "
            "offsets 0-2 stay committed. A coordinator's resend") in found["evidence"]


def test_markers_of_unknown_type_are_not_said_to_differ() -> None:
    """A text dump without --deep-iteration gives no marker type: nothing shows the two decisions
    differ, so the repeat is info, and the marker is said to have decided."""
    first = at(txn(1, 3, None, 0, data=(0, 2)), prepare())
    (found,) = classify(at(txn(2, 4, "ABORT", 0)), first, None)
    assert found["severity"] == "info"
    assert found["evidence"].startswith("ABORT marker at offset 4 of orders-0 repeats the null marker at offset 3")


def test_a_marker_that_answered_its_own_prepare_is_an_empty_transaction_not_a_repeat() -> None:
    """Transaction version 1: a transaction that added the partition and wrote nothing there gets
    a marker of the same epoch as the one before; its own PrepareAbort record shows the
    coordinator decided it, so it is no repeat."""
    first = at(txn(1, 3, "COMMIT", 0, data=(0, 2)), prepare())
    empty = at(txn(2, 4, "ABORT", 0), prepare("PrepareAbort", log_offset=41))
    assert not repeats(empty, first)
    assert classify(empty, first, None) == []


def test_under_version_1_a_same_epoch_marker_without_the_first_decision_is_not_judged() -> None:
    """The Prepare* record of the first marker compacted away and its epoch not bumped: under
    transaction version 1 an empty transaction and a repeat look alike, so nothing is said."""
    first = at(txn(1, 3, "COMMIT", 0, data=(0, 2)))
    assert classify(at(txn(2, 4, "COMMIT", 0)), first, None) == []


def test_a_bumped_first_epoch_proves_the_repeat_without_the_coordinator_log() -> None:
    """Transaction version 1, the coordinator's fence abort: it bumps the epoch above the data's
    (4 to 5) to end the transaction, so no later transaction can carry epoch 5 without data of
    it; a second ABORT of epoch 5 is a repeat even with no Prepare* record on hand."""
    first = at(txn(1, 3, "ABORT", 5, data=(0, 2), data_epoch=4))
    (found,) = classify(at(txn(2, 4, "ABORT", 5)), first, None)
    assert (found["severity"], found["producer_epoch"]) == ("info", 5)
    assert "KAFKA-19999" not in found["evidence"]


def test_a_timed_out_first_transaction_is_named_as_the_coordinators_abort() -> None:
    """The first ABORT answered a PrepareAbort written 61 s after its transaction started, past
    its 60 s timeout: the coordinator aborted it, and the finding says so."""
    first = at(txn(1, 3, "ABORT", 5, data=(0, 2), data_epoch=4), prepare("PrepareAbort", took_ms=61_000))
    (found,) = classify(at(txn(2, 4, "ABORT", 5)), first, None)
    assert ("; the first was the coordinator's abort of a transaction open longer than its timeout of 60000 ms "
            "(PrepareAbort at __transaction_state-3 offset 40): it ended no transaction") in found["evidence"]


def test_under_version_2_a_repeat_that_ended_nothing_names_kafka_4_2s_check() -> None:
    """Transaction version 2: every marker bumps the epoch (data at 4, COMMIT at 5), so a second
    COMMIT of epoch 5 can only be a repeat; brokers from Kafka 4.2 accept one only when nothing is
    open (KAFKA-19999), as here: info."""
    first = at(txn(1, 3, "COMMIT", 5, data=(0, 2), data_epoch=4), tv2=True)
    (found,) = classify(at(txn(2, 4, "COMMIT", 5), tv2=True), first, None)
    assert found["severity"] == "info"
    assert found["evidence"].endswith(
        "writes such a repeat; under transaction version 2, brokers from Kafka 4.2 write it only when no transaction "
        "is open (KAFKA-19999)")


def test_a_repeat_that_ended_the_next_transaction_with_the_same_outcome_is_a_warning() -> None:
    """Transaction version 2: the COMMIT at 6 carries epoch 5, its data's own epoch, so it cannot
    be the decision of the transaction 4-5 (that decision bumps to 6): it repeats the COMMIT at 3,
    and it ended 4-5 before their own COMMIT at 7, which then found nothing open. The records were
    committed either way: a warning, seen from the marker at 7."""
    first = at(txn(1, 3, "COMMIT", 5, data=(0, 2), data_epoch=4), tv2=True)
    repeat = at(txn(2, 6, "COMMIT", 5, data=(4, 5)), tv2=True)
    (found,) = classify(at(txn(3, 7, "COMMIT", 6), prepare(log_offset=44), tv2=True), repeat, first)
    assert (found["severity"], found["producer_epoch"]) == ("warning", 5)
    assert (found["first_offset"], found["last_offset"]) == (6, 7)
    assert (found["first_timestamp"], found["last_timestamp"]) == (T0 + 3, T0 + 7)
    assert found["evidence"] == (
        "COMMIT marker at offset 6 of orders-0 repeats the COMMIT marker at offset 3 (producer 7, epoch 5), but the "
        "producer's next transaction was open here: the repeat ended its records at offsets 4-5 as committed before "
        "their own decision, whose COMMIT marker at offset 7 then found nothing open. A coordinator's resend (after "
        "a lost answer or a coordinator failover), or kafka-transactions.sh abort for a transaction that had ended, "
        "writes such a repeat; brokers from Kafka 4.2 refuse a repeat while a transaction is open (KAFKA-19999)")


def test_a_repeat_that_committed_what_was_then_aborted_is_critical() -> None:
    """As above, but the records' own decision was ABORT (its PrepareAbort answered by the marker
    at 7): the repeat's COMMIT had already exposed them to read_committed consumers, an
    exactly-once violation."""
    first = at(txn(1, 3, "COMMIT", 5, data=(0, 2), data_epoch=4), prepare(), tv2=True)
    repeat = at(txn(2, 6, "COMMIT", 5, data=(4, 5)), tv2=True)
    (found,) = classify(at(txn(3, 7, "ABORT", 6), prepare("PrepareAbort", log_offset=44), tv2=True), repeat, first)
    assert found["severity"] == "critical"
    assert ("then found nothing open (an exactly-once violation: the outcome differs); the first answered the "
            "coordinator's PrepareCommit at __transaction_state-3 offset 40. A coordinator's resend"
            ) in found["evidence"]


def test_under_version_1_data_of_the_markers_epoch_proves_nothing() -> None:
    """Transaction version 1 keeps the epoch from one transaction to the next: the COMMIT at 6 of
    epoch 5 over data of epoch 5 may be the decision of 4-5 itself, whose Prepare* record was
    compacted away; nothing is said, though the marker at 7 answers a PrepareCommit of its own."""
    first = at(txn(1, 3, "COMMIT", 5, data=(0, 2)))
    repeat = at(txn(2, 6, "COMMIT", 5, data=(4, 5)))
    assert classify(at(txn(3, 7, "COMMIT", 5), prepare(log_offset=44)), repeat, first) == []


def test_a_next_transaction_with_its_own_prepare_was_not_ended_by_a_repeat() -> None:
    """Transaction version 2: the COMMIT at 6 answered the coordinator's own PrepareCommit for
    4-5, so it is their decision, not a repeat; the bare marker at 7 repeats it instead."""
    first = at(txn(1, 3, "COMMIT", 5, data=(0, 2), data_epoch=4), tv2=True)
    decided = at(txn(2, 6, "COMMIT", 6, data=(4, 5), data_epoch=5), prepare(log_offset=44), tv2=True)
    (found,) = classify(at(txn(3, 7, "COMMIT", 6), tv2=True), decided, first)
    assert (found["severity"], found["first_offset"], found["last_offset"]) == ("info", 7, 7)
