"""The ``transactions`` table built on the driver (``producer_summary``) against the same table
computed row by row in plain Python, on random ``partition_transactions`` rows and coordinator
answers: rotated transactional ids, tombstones, idempotent producers, unknown values, rows split
across many batches. Real brokers' dumps go through it in every scan test."""

from __future__ import annotations

import random
from typing import Any

import pyarrow as pa
import pytest

from txn_audit.reconstruct import producer_summary
from txn_audit.reconstruct.producer_summary import ROTATED, summarize_producers
from txn_audit.schemas import COORDINATOR_CURRENT, PARTITION_TRANSACTIONS, PRODUCER_IDS, TRANSACTIONS, in_ms

STATES = ("committed", "aborted", "open", "ended")


def _maybe(rng: random.Random, value: Any) -> Any:
    return None if rng.random() < 0.15 else value


def _random_inputs(seed: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    """``partition_transactions`` rows, the coordinator's current rows and the producer ids."""
    rng = random.Random(seed)
    producers = rng.sample(range(1000, 1100), rng.randint(1, 12))
    ptx = []
    for producer in producers:
        for _ in range(rng.randint(1, 15)):
            ptx.append({
                "topic": rng.choice(["orders", "payments", "a-b"]), "partition": rng.randint(0, 3),
                "producer_id": producer, "max_epoch": _maybe(rng, rng.randint(0, 5)),
                "batches": _maybe(rng, rng.choice([0, 0, 1, 4])), "state": _maybe(rng, rng.choice(STATES)),
                "first_timestamp": _maybe(rng, rng.randint(0, 10**6)),
                "last_timestamp": _maybe(rng, rng.randint(0, 10**6)),
                "marker_timestamp": _maybe(rng, rng.randint(0, 10**6)),
            })
    tids = [f"tx-{n}" for n in range(rng.randint(1, 6))]
    # some producer ids have none (idempotent producers); an id may have had several (rotation)
    ids = [{"producer_id": producer, "transactional_id": rng.choice(tids), "transaction_version": rng.choice([1, 2])}
           for producer in producers if rng.random() < 0.8]
    current = []
    for tid in tids:
        if rng.random() < 0.2:
            continue  # no record of it
        owners = [row["producer_id"] for row in ids if row["transactional_id"] == tid] or [999]
        current.append({
            "transactional_id": tid, "tombstone": rng.random() < 0.2,
            "producer_id": rng.choice([*owners, 5000]), "producer_epoch": rng.randint(0, 5),
            "state": rng.choice(["Ongoing", "PrepareCommit", "CompleteAbort", "Empty"]),
            "listed": rng.choice([[], ["orders-0"], ["orders-1", "payments-0"]]),
            "txn_timeout_ms": _maybe(rng, 60_000), "txn_start_timestamp": 1, "txn_last_update_timestamp": 2,
            "client_transaction_version": None, "txn_log_offset": 7, "txn_log_partition": 0,
        })
    return ptx, current, ids


def _expected(ptx: list[dict[str, Any]], current: list[dict[str, Any]], ids: list[dict[str, Any]]) -> list[Any]:
    """The table row by row: per producer id, its partitions, its id and that id's newest record."""
    known = {row["producer_id"]: row for row in ids}
    newest = {row["transactional_id"]: row for row in current if not row["tombstone"]}
    rows = []
    for producer in sorted({row["producer_id"] for row in ptx}):
        mine = [row for row in ptx if row["producer_id"] == producer]
        partitions: dict[str, list[dict[str, Any]]] = {}
        for row in mine:
            partitions.setdefault(f"{row['topic']}-{row['partition']}", []).append(row)

        def present(values: list[Any]) -> list[Any]:
            return [value for value in values if value is not None]

        lasts = [max(present([r["last_timestamp"], r["marker_timestamp"]]), default=None) for r in mine]
        tid = known.get(producer, {}).get("transactional_id")
        record = newest.get(tid) if tid is not None else None
        owned = record is not None and record["producer_id"] == producer
        rows.append({
            "transactional_id": tid,
            "producer_id": producer,
            "producer_epoch": max(present([r["max_epoch"] for r in mine]), default=None),
            "transaction_version": known.get(producer, {}).get("transaction_version"),
            "coordinator_state": record["state"] if owned else (ROTATED if record is not None else None),
            "coordinator_listed": record["listed"] if owned else None,
            "partitions_with_data": sorted(name for name, rs in partitions.items()
                                           if any((r["batches"] or 0) > 0 for r in rs)),
            "open_partitions": sorted(name for name, rs in partitions.items() if any(r["state"] == "open" for r in rs)),
            **{state: sum(r["state"] == state for r in mine) for state in ("committed", "aborted", "open")},
            "first_timestamp": min(present([r["first_timestamp"] for r in mine]), default=None),
            "last_timestamp": max(present(lasts), default=None),
            "txn_timeout_ms": record["txn_timeout_ms"] if record is not None else None,
        })
    return rows


def _batches(rows: list[dict[str, Any]], rng: random.Random) -> list[pa.RecordBatch]:
    """``rows`` as ``partition_transactions`` rows in batches of random sizes, as its files give them."""
    table = pa.Table.from_pylist([{name: row.get(name) for name in PARTITION_TRANSACTIONS.names} for row in rows],
                                 schema=in_ms(PARTITION_TRANSACTIONS).remove_metadata())  # as read: epoch ms
    cuts = sorted(rng.sample(range(1, max(2, table.num_rows)), min(3, max(0, table.num_rows - 1))))
    edges = [0, *cuts, table.num_rows]
    return [batch for start, stop in zip(edges, edges[1:], strict=False)
            for batch in table.slice(start, stop - start).to_batches()]


@pytest.mark.parametrize("seed", range(40))
def test_the_summary_is_the_rows_summed_per_producer(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    if seed % 2:  # the batches' reductions folded together as they come
        monkeypatch.setattr(producer_summary, "COMBINE_ROWS", 3)
    ptx, current, ids = _random_inputs(seed)
    summary = summarize_producers(_batches(ptx, random.Random(seed)),
                                  pa.Table.from_pylist(current, schema=COORDINATOR_CURRENT),
                                  pa.Table.from_pylist(ids, schema=PRODUCER_IDS))
    assert summary.schema == in_ms(TRANSACTIONS)
    assert summary.to_pylist() == _expected(ptx, current, ids)


def test_the_random_inputs_reach_every_coordinator_verdict() -> None:
    """The seeds above give producers that own their id's state, rotated ones and ones without."""
    states = set()
    for seed in range(40):
        ptx, current, ids = _random_inputs(seed)
        states |= {row["coordinator_state"] == ROTATED if row["coordinator_state"] else None
                   for row in _expected(ptx, current, ids)}
    assert states == {True, False, None}


def test_no_transaction_gives_an_empty_table() -> None:
    summary = summarize_producers([], COORDINATOR_CURRENT.empty_table(), PRODUCER_IDS.empty_table())
    assert summary.schema == in_ms(TRANSACTIONS) and summary.num_rows == 0
