"""The ordered pass over Arrow batches (no Spark): against the row-by-row walk, and the same
whatever the batch boundaries, since one producer's rows may span several batches."""

from __future__ import annotations

import random
from typing import Any

import pyarrow as pa
import pytest

from tests.audit.producer_walk import COMPACTED, KEY_FIELDS, TOLERANCE_MS, flagged, transactions, walk
from txn_audit.reconstruct.ordered_pass import ordered_pass, transaction_pass

SCHEMA = pa.schema([
    ("topic", pa.string()), ("partition", pa.int32()), ("producer_id", pa.int64()), ("broker_id", pa.int32()),
    ("epoch", pa.int32()), ("record_count", pa.int32()), ("size_bytes", pa.int32()), ("first_timestamp", pa.int64()),
    ("offset", pa.int64()), ("last_offset", pa.int64()), ("max_timestamp", pa.int64()),
    ("is_marker", pa.bool_()), ("is_transactional", pa.bool_()), ("base_sequence", pa.int32()),
    ("last_sequence", pa.int32()), ("marker_type", pa.string()), ("coordinator_epoch", pa.int32()),
])


def _rows(seed: int) -> list[dict[str, Any]]:
    """Producers' rows on a few partitions, in the order the pass receives them: markers of
    every type (and one the dump does not name), epochs that go up and down, sequences and
    none, late and timely records, on a compacted topic too."""
    rng = random.Random(seed)
    rows = []
    for topic in ("orders", COMPACTED[0]):
        for partition in range(2):
            for producer_id in rng.sample(range(1000, 1010), 3):
                offset, epoch, sequence, clock = rng.randrange(0, 50), rng.randrange(0, 3), 0, 1_000_000
                transactional = rng.random() < 0.8
                for _ in range(rng.randrange(1, 40)):
                    clock += rng.randrange(0, 2_000)
                    epoch = max(0, epoch + rng.choice((0, 0, 0, 1, -1)))
                    if transactional and rng.random() < 0.25:
                        rows.append(dict(topic=topic, partition=partition, producer_id=producer_id, broker_id=1,
                                         epoch=epoch, record_count=1, size_bytes=78, first_timestamp=clock,
                                         offset=offset, last_offset=offset, max_timestamp=clock, is_marker=True,
                                         is_transactional=True, base_sequence=None, last_sequence=None,
                                         marker_type=rng.choice(("COMMIT", "ABORT", "UNKNOWN", "OTHER")),
                                         coordinator_epoch=rng.randrange(0, 4)))
                        offset += 1
                        continue
                    count = rng.randrange(1, 5)
                    base = -1 if rng.random() < 0.2 else sequence
                    rows.append(dict(topic=topic, partition=partition, producer_id=producer_id, broker_id=1,
                                     epoch=epoch, record_count=count, size_bytes=rng.randrange(70, 400),
                                     first_timestamp=clock - rng.randrange(0, 100),
                                     offset=offset, last_offset=offset + count - 1,
                                     max_timestamp=clock - rng.choice((0, 0, 5 * TOLERANCE_MS)), is_marker=False,
                                     is_transactional=transactional, base_sequence=base,
                                     last_sequence=None if base < 0 else base + count - 1, marker_type=None,
                                     coordinator_epoch=None))
                    sequence += count + rng.choice((0, 0, 0, 2))
                    offset += count
    rows.sort(key=lambda r: (r["topic"], r["partition"], r["producer_id"], r["offset"]))
    return rows


def _passed(rows: list[dict[str, Any]], batch_rows: int) -> dict[tuple[Any, ...], dict[str, Any]]:
    table = pa.Table.from_pylist(rows, schema=SCHEMA)
    out = pa.Table.from_batches(list(ordered_pass(table.to_batches(max_chunksize=batch_rows),
                                                  late_tolerance_ms=TOLERANCE_MS, unsequenced_topics=COMPACTED)))
    assert out.column_names[: len(SCHEMA)] == SCHEMA.names  # the input columns, unchanged, come first
    assert out.slice(0, len(rows)).select(SCHEMA.names).to_pylist() == rows
    return {tuple(r[k] for k in KEY_FIELDS): r for r in out.to_pylist()}


@pytest.mark.parametrize("seed", range(4))
def test_pass_equals_the_walk_whatever_the_batch_boundaries(seed: int) -> None:
    rows = _rows(seed)
    expected, _ = walk(rows)
    fields = list(next(iter(expected.values())))
    for batch_rows in (len(rows), 1, 2, 7, 64):
        got = _passed(rows, batch_rows)
        assert {key: {f: row[f] for f in fields} for key, row in got.items()} == expected, batch_rows
    # the rows exercise what the pass carries across batches
    values = list(expected.values())
    assert any(v["is_late"] for v in values) and any(v["prev_seq_epoch"] is not None for v in values)
    assert any(v["prev_marker_type"] == "OTHER" for v in values)
    assert any(v["max_coordinator_epoch_before"] for v in values)


@pytest.mark.parametrize("seed", range(4))
def test_transactions_and_flagged_rows_whatever_the_batch_boundaries(seed: int) -> None:
    rows = _rows(seed)
    walked, _ = walk(rows)
    expected_txns = sorted(transactions(rows, walked), key=lambda t: (t["topic"], t["partition"], t["producer_id"],
                                                                       t["txn_seq"]))
    inputs = {tuple(r[k] for k in KEY_FIELDS): r for r in rows}
    expected_events = sorted(key for key, row in walked.items() if flagged(inputs[key] | row))
    assert expected_events and any(t["marker_type"] is None for t in expected_txns)  # flagged rows, open ones
    for batch_rows in (len(rows), 1, 3, 50):
        table = pa.Table.from_pylist(rows, schema=SCHEMA)
        out = pa.Table.from_batches(list(transaction_pass(
            table.to_batches(max_chunksize=batch_rows), late_tolerance_ms=TOLERANCE_MS, unsequenced_topics=COMPACTED)))
        events = [r["event"] for r in out.to_pylist() if r["event"] is not None]
        txns = [r["txn"] for r in out.to_pylist() if r["txn"] is not None]
        assert all((r["event"] is None) != (r["txn"] is None) for r in out.to_pylist())
        assert sorted(tuple(e[k] for k in KEY_FIELDS) for e in events) == expected_events, batch_rows
        assert sorted(txns, key=lambda t: (t["topic"], t["partition"], t["producer_id"], t["txn_seq"])) \
            == expected_txns, batch_rows


def _interleaved(rows: list[dict[str, Any]], seed: int) -> list[dict[str, Any]]:
    """``rows`` with the keys' rows interleaved at random, each key's still in offset order (as a
    partition's log holds them)."""
    rng = random.Random(seed)
    queues: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for row in rows:
        queues.setdefault((row["topic"], row["partition"], row["producer_id"]), []).append(row)
    waiting = [queue[::-1] for queue in queues.values()]
    out = []
    while waiting:
        queue = rng.choice(waiting)
        out.append(queue.pop())
        if not queue:
            waiting.remove(queue)
    return out


@pytest.mark.parametrize("seed", range(4))
def test_keys_may_interleave_in_the_stream(seed: int) -> None:
    """Each key keeps its own state: the rows of a partition in log order give what the rows
    sorted by key give."""
    rows = _rows(seed)
    shuffled = _interleaved(rows, seed)
    assert shuffled != rows
    walked, _ = walk(rows)
    expected_txns = sorted(map(repr, transactions(rows, walked)))
    inputs = {tuple(r[k] for k in KEY_FIELDS): r for r in rows}
    expected_events = sorted(key for key, row in walked.items() if flagged(inputs[key] | row))
    fields = list(next(iter(walked.values())))
    for batch_rows in (len(rows), 1, 5, 64):
        got = _passed(shuffled, batch_rows)
        assert {key: {f: row[f] for f in fields} for key, row in got.items()} == walked, batch_rows
        table = pa.Table.from_pylist(shuffled, schema=SCHEMA)
        out = pa.Table.from_batches(list(transaction_pass(
            table.to_batches(max_chunksize=batch_rows), late_tolerance_ms=TOLERANCE_MS, unsequenced_topics=COMPACTED)))
        events = [r["event"] for r in out.to_pylist() if r["event"] is not None]
        txns = [r["txn"] for r in out.to_pylist() if r["txn"] is not None]
        assert sorted(tuple(e[k] for k in KEY_FIELDS) for e in events) == expected_events, batch_rows
        assert sorted(map(repr, txns)) == expected_txns, batch_rows
        # a producer's transactions come out in their order, its open one last
        for key in {(t["topic"], t["partition"], t["producer_id"]) for t in txns}:
            mine = [t["txn_seq"] for t in txns if (t["topic"], t["partition"], t["producer_id"]) == key]
            assert mine == sorted(mine)


def _one_transaction_each(producers: int) -> list[dict[str, Any]]:
    """A partition's log where ``producers`` producers, one after another, each write a batch and
    commit it: many keys, one transaction open at a time."""
    rows = []
    for index in range(producers):
        common = dict(topic="orders", partition=0, producer_id=10**12 + index, broker_id=1, epoch=0,
                      first_timestamp=index, max_timestamp=index, is_transactional=True)
        rows.append(common | dict(record_count=1, size_bytes=100, offset=2 * index, last_offset=2 * index,
                                  is_marker=False, base_sequence=0, last_sequence=0, marker_type=None,
                                  coordinator_epoch=None))
        rows.append(common | dict(record_count=1, size_bytes=78, offset=2 * index + 1, last_offset=2 * index + 1,
                                  is_marker=True, base_sequence=None, last_sequence=None, marker_type="COMMIT",
                                  coordinator_epoch=0))
    return rows


def test_open_transactions_take_rows_as_they_open_not_per_producer(monkeypatch: pytest.MonkeyPatch) -> None:
    """A replica of millions of short-lived producers: the running aggregates are kept for the
    transactions open at a time (freed rows are taken again), not for every producer seen."""
    from txn_audit.reconstruct import ordered_pass as module

    made: list[Any] = []

    class Recorded(module._OpenTransactions):
        def __init__(self) -> None:
            super().__init__()
            made.append(self)

    monkeypatch.setattr(module, "_OpenTransactions", Recorded)
    producers, batch_rows = 5_000, 64
    table = pa.Table.from_pylist(_one_transaction_each(producers), schema=SCHEMA)
    out = pa.Table.from_batches(list(transaction_pass(table.to_batches(max_chunksize=batch_rows),
                                                      late_tolerance_ms=TOLERANCE_MS)))
    txns = [t for t in out.column("txn").to_pylist() if t is not None]
    assert sorted((t["producer_id"], t["marker_type"], t["batches"]) for t in txns) == \
        [(10**12 + index, "COMMIT", 1) for index in range(producers)]
    (open_transactions,) = made
    assert len(open_transactions.row_of) >= producers  # a slot per producer
    assert open_transactions.accs.shape[0] <= 2 * batch_rows  # a row per transaction open at once


def test_key_slots_across_topics_partitions_and_batches() -> None:
    """One slot per (topic, partition, producer): the same producer on two partitions has two;
    a key keeps its slot from batch to batch, in batches of one partition or of several."""
    from txn_audit.reconstruct.ordered_pass import _Keys

    keys = _Keys()
    batches = [
        [("a", 0, 7), ("a", 0, 8), ("a", 0, 7)],
        [("a", 1, 7), ("b", 0, 7), ("a", 0, 8), ("a", 0, 9)],
        [("b", 0, 7), ("a", 1, 7)],
    ]
    seen: dict[tuple[str, int, int], int] = {}
    for batch in batches:
        record_batch = pa.RecordBatch.from_pylist([dict(topic=t, partition=p, producer_id=i) for t, p, i in batch],
                                                  schema=pa.schema([("topic", pa.string()), ("partition", pa.int32()),
                                                                    ("producer_id", pa.int64())]))
        for key, slot in zip(batch, keys.of(record_batch).tolist(), strict=False):
            assert seen.setdefault(key, slot) == slot, key
    assert sorted(seen.values()) == list(range(len(keys))) == list(range(5))
    topics = keys.topics.take(keys.topic_code, pa.string()).to_pylist()
    by_slot = sorted(seen, key=seen.__getitem__)
    assert list(zip(topics, keys.partition.tolist(), keys.producer_id.tolist(), strict=False)) == by_slot
