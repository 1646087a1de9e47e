"""``duplicate_marker`` on hand-built transactions: the cases the real corpus cannot show, where a
marker that ends no data is *not* a repeat (an empty transaction under transaction version 1), or
where the dump cannot tell (the coordinator's record of the first marker compacted away).

The real repeats, written by real brokers, are in ``tests/corpus/*/duplicate-marker``
(``test_scan_kafka_corpus``).
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

PID = 7
T0 = 1_795_000_000_000


def _txn(seq: int, marker: int, marker_type: str, epoch: int, *, data: tuple[int, int] | None,
         data_epoch: int | None = None, prev: tuple[int, str] | None = None) -> dict[str, Any]:
    """One row of ``partition_transactions`` on t-0 for producer ``PID``: its data offsets (None:
    a marker that ends no data), its marker, the previous marker."""
    return {
        "topic": "t", "partition": 0, "broker_id": 1, "producer_id": PID, "txn_seq": seq, "transactional_id": "app",
        "first_offset": None if data is None else data[0], "last_data_offset": None if data is None else data[1],
        "marker_offset": marker, "marker_type": marker_type, "marker_epoch": epoch, "marker_timestamp": T0 + marker,
        "max_epoch": None if data is None else (epoch if data_epoch is None else data_epoch),
        "prev_marker_offset": None if prev is None else prev[0], "prev_marker_type": None if prev is None else prev[1],
        "prev_marker_timestamp": None if prev is None else T0 + prev[0],
    }


def _answer(marker: int, state: str = "PrepareCommit") -> dict[str, Any]:
    """A Prepare* record of the coordinator log whose marker on t-0 is the one at ``marker``."""
    return {"topic": "t", "partition": 0, "producer_id": PID, "has_marker": True, "next_marker_offset": marker,
            "txn_log_partition": 0, "txn_log_offset": 100 + marker, "state": state, "ts": T0 + marker - 1,
            "started": T0, "timeout_ms": 60_000}


def _repeats(txns: list[dict[str, Any]], answers: list[dict[str, Any]], tv: int = 1) -> list[dict[str, Any]]:
    """The findings of the rule on the driver (``detect.duplicate_marker_rules``): of ``txns``, rows
    of ``partition_transactions``, and ``answers``, what followed the Prepare* records, each read
    through the filter that names the rows the rule reads, as the driver reads them."""
    from txn_audit.detect.duplicate_marker_rules import (BARE_MARKERS, answered_by, chain_rows,
                                                         duplicate_marker_findings)
    from txn_audit.reconstruct import FOLLOW_FIELDS
    from txn_audit.schemas import FINDINGS, PARTITION_TRANSACTIONS, PRODUCER_IDS, in_ms

    ptx = pa.Table.from_pylist(txns, schema=pa.schema([in_ms(PARTITION_TRANSACTIONS).field(name) for name in txns[0]]))
    follows = pa.Table.from_pylist(answers, schema=pa.schema([FOLLOW_FIELDS.field(name) for name in _answer(0)]))
    ids = pa.Table.from_pylist([{"producer_id": PID, "transaction_version": tv}],
                               schema=pa.schema([PRODUCER_IDS.field("producer_id"),
                                                 PRODUCER_IDS.field("transaction_version")]))
    chain = chain_rows(ptx.filter(BARE_MARKERS))
    assert chain is not None  # every case has a marker without data
    rows = ptx.filter(chain)
    answered = answered_by(rows)
    assert answered is not None
    found = duplicate_marker_findings(rows, follows.filter(answered), ids)
    assert found.schema == in_ms(FINDINGS)  # epoch ms until written
    return sorted(found.to_pylist(), key=lambda r: r["first_offset"])


def test_an_empty_transaction_under_version_1_is_no_repeat() -> None:
    """Same epoch, no data, but the coordinator decided it: a transaction that added the partition
    and wrote nothing there."""
    txns = [_txn(1, 3, "COMMIT", 0, data=(0, 2)), _txn(2, 4, "ABORT", 0, data=None, prev=(3, "COMMIT"))]
    assert _repeats(txns, [_answer(3), _answer(4, "PrepareAbort")]) == []


def test_a_marker_no_decision_answers_repeats_the_one_before() -> None:
    txns = [_txn(1, 3, "COMMIT", 0, data=(0, 2)), _txn(2, 4, "COMMIT", 0, data=None, prev=(3, "COMMIT"))]
    (repeat,) = _repeats(txns, [_answer(3)])
    assert (repeat["kind"], repeat["severity"], repeat["first_offset"]) == ("duplicate_marker", "info", 4)
    assert repeat["transactional_id"] == "app"
    assert "repeats the COMMIT marker at offset 3" in repeat["evidence"]
    assert "PrepareCommit at __transaction_state-0 offset 103" in repeat["evidence"]


def test_without_the_first_decision_on_record_a_same_epoch_marker_is_not_judged() -> None:
    """The coordinator's record of the first marker compacted away, the epoch not bumped: an empty
    transaction and a repeat look alike, so nothing is said."""
    txns = [_txn(1, 3, "COMMIT", 0, data=(0, 2)), _txn(2, 4, "COMMIT", 0, data=None, prev=(3, "COMMIT"))]
    assert _repeats(txns, []) == []


def test_a_bumped_epoch_is_enough_without_the_coordinator_log() -> None:
    """Transaction version 2: the first marker's epoch is above its data's, so a marker of that
    epoch again can only be a repeat; an ABORT after the COMMIT is a warning."""
    txns = [_txn(1, 3, "COMMIT", 5, data=(0, 2), data_epoch=4),
            _txn(2, 4, "ABORT", 5, data=None, prev=(3, "COMMIT"))]
    (repeat,) = _repeats(txns, [], tv=2)
    assert (repeat["severity"], repeat["producer_epoch"]) == ("warning", 5)
    assert "its records at offsets 0-2 stay committed" in repeat["evidence"]
    assert "KAFKA-19999" in repeat["evidence"]


def test_a_repeat_that_ended_the_next_transaction_is_seen_from_its_decision() -> None:
    """The repeat at 6 closed the records at 4-5 before their own decision (COMMIT at 7, which
    then ended nothing); the next decision was an ABORT: exactly-once violated."""
    txns = [_txn(1, 3, "COMMIT", 5, data=(0, 2), data_epoch=4),
            _txn(2, 6, "COMMIT", 5, data=(4, 5), prev=(3, "COMMIT")),
            _txn(3, 7, "ABORT", 6, data=None, prev=(6, "COMMIT"))]
    (repeat,) = _repeats(txns, [_answer(3), _answer(7, "PrepareAbort")], tv=2)
    assert (repeat["severity"], repeat["first_offset"], repeat["last_offset"]) == ("critical", 6, 7)
    assert "ended its records at offsets 4-5 as committed" in repeat["evidence"]
