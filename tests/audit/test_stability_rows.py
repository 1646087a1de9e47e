"""The stability rows computed on the driver (``reconstruct.stability.partition_stability``)
against the leader's rule applied row by row in plain Python, on random replicas and
transactions: checkpointed HWs, copies cut short below their checkpoint, no HW at all, log
starts past an open transaction's first offset, markers at, above and below the HW, rows with no
first offset, several copies of a partition told apart by their broker. Both ways in are
checked: the transactions' record batches read on the driver (what a scan with ``--out`` does)
and a frame filtered in Spark (the other copies, notebooks), which must agree row for row. Real
brokers' LSOs go through it in every scan test (``test_scan_kafka_corpus.py``)."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from txn_audit.manifest import describe_tables

from txn_audit.reconstruct.stability import TRANSACTION_COLUMNS, narrowed_candidates, partition_stability
from txn_audit.schemas import (
    BATCHES, COPY_COLUMNS, HW_CAPPED, PARTITION_COLUMNS, PARTITION_TRANSACTIONS, STABILITY_ROWS, declared, in_ms,
)
from txn_audit.tables import arrow_frame

pytestmark = pytest.mark.spark

AS_OF = 2_000_000_000_000
STATES = ("committed", "aborted", "open", "ended")


def _maybe(rng: random.Random, value: Any, p: float = 0.2) -> Any:
    return None if rng.random() < p else value


def _replicas(rng: random.Random, copies: bool) -> list[dict[str, Any]]:
    rows = []
    for topic in ("orders", "a-b"):
        for partition in range(rng.randint(1, 3)):
            for broker in (1, 2, 3)[:rng.randint(2, 3) if copies else 1]:
                start = rng.choice([0, 0, rng.randint(0, 40)])
                end = _maybe(rng, start + rng.randint(0, 80), 0.1)
                high = _maybe(rng, rng.randint(start, (end or start) + 20), 0.3)
                rows.append({
                    "broker_id": broker, "log_dir": f"broker-{broker}", "topic": topic, "partition": partition,
                    "high_watermark": high, "hw_source": rng.choice([None, "checkpoint", "offsets_file"]),
                    "log_start_offset": _maybe(rng, start, 0.1), "log_end_offset": end,
                    "cut_short": end is not None and high is not None and high > end and rng.random() < 0.7,
                    "cleaner_offset": None, "replica_rank": broker, "replica_name": f"broker {broker}",
                    "leader_epoch": 3, "metadata_leader": 1, "metadata_leader_epoch": 3, "in_isr": True,
                    "replicas": 3, "chosen_replica": "broker 1", "replica_choice_reason": "test",
                })
    return rows


def _transactions(rng: random.Random, replicas: list[dict[str, Any]]) -> list[dict[str, Any]]:
    rows = []
    for replica in replicas:
        for producer in rng.sample(range(100, 130), rng.randint(0, 8)):
            first = _maybe(rng, rng.randint(0, 100), 0.1)
            state = rng.choice(STATES)
            marker = None if state == "open" else _maybe(rng, (first or 0) + rng.randint(0, 30), 0.1)
            if marker is not None and rng.random() < 0.25:  # the marker right at the HW: not yet stable
                marker = _hw(replica)[0]
            rows.append({
                "topic": replica["topic"], "partition": replica["partition"], "broker_id": replica["broker_id"],
                "producer_id": producer, "txn_seq": 0, "first_offset": first, "state": state,
                "marker_offset": marker, "max_epoch": rng.randint(0, 4), "transactional_id": f"tx-{producer}",
                "first_timestamp": _maybe(rng, AS_OF - rng.randint(0, 10**6)),
                "producer_last_timestamp": _maybe(rng, AS_OF - rng.randint(0, 10**6)),
            })
    return rows


def _hw(replica: dict[str, Any]) -> tuple[int, str]:
    """The HW the LSO is measured against, and where it comes from."""
    end, high, start = replica["log_end_offset"], replica["high_watermark"], replica["log_start_offset"]
    if replica["cut_short"]:
        return end, HW_CAPPED
    if high is not None:
        return high, replica["hw_source"] or "checkpoint"
    return (end if end is not None else start if start is not None else 0), "log_end"


def _batches(rng: random.Random, replicas: list[dict[str, Any]]) -> list[dict[str, Any]]:
    rows = []
    for replica in replicas:
        offset = replica["log_start_offset"] or 0
        while offset < (replica["log_end_offset"] or 0):
            count = rng.randint(1, 6)
            control = rng.random() < 0.2
            rows.append({
                "broker_id": replica["broker_id"], "log_dir": replica["log_dir"], "topic": replica["topic"],
                "partition": replica["partition"], "segment_base_offset": 0, "position": offset,
                "base_offset": offset, "last_offset": offset + (0 if control else count - 1), "magic": 2,
                "codec": "none", "timestamp_type": "CreateTime", "is_transactional": True, "is_control": control,
                "producer_id": 1, "producer_epoch": 0, "base_sequence": 0, "last_sequence": 0,
                "record_count": 1 if control else count, "first_timestamp": AS_OF, "max_timestamp": AS_OF,
                "delete_horizon_timestamp": -1, "partition_leader_epoch": 0, "stored_crc": 0, "computed_crc": 0,
                "crc_ok": True, "size_bytes": rng.randint(70, 900), "file": "00000000000000000000.log",
            })
            offset += 1 if control else count
    return rows


def _expected(replicas: list[dict[str, Any]], transactions: list[dict[str, Any]], batches: list[dict[str, Any]],
              keys: tuple[str, ...]) -> dict[tuple[Any, ...], dict[str, Any]]:
    """The leader's rule, a replica at a time: firstUnstable is the first offset of the earliest
    open transaction or one whose marker is not below the HW, clamped up to the log start;
    LSO = firstUnstable if below the HW, else the HW; held records are those of the data batches
    from the LSO to the HW."""
    out = {}
    for replica in replicas:
        key = tuple(replica[k] for k in keys)
        end, high, start = replica["log_end_offset"], replica["high_watermark"], replica["log_start_offset"]
        hw, source = _hw(replica)
        mine = [t for t in transactions if tuple(t[k] for k in keys) == key]
        unstable = sorted((t for t in mine if t["first_offset"] is not None and (
            t["state"] == "open" or (t["marker_offset"] is not None and t["marker_offset"] >= hw))),
            key=lambda t: (t["first_offset"], t["producer_id"]))
        first = max(unstable[0]["first_offset"], start or 0) if unstable else None
        lso = first if first is not None and first < hw else hw
        held = lso < hw
        data = [b for b in batches if tuple(b[k] for k in keys) == key and not b["is_control"]
                and b["last_offset"] >= lso and b["base_offset"] < hw]
        culprit = unstable[0] if unstable else None
        since = None
        if held and culprit is not None:
            since = next((v for v in (culprit["first_timestamp"], culprit["producer_last_timestamp"])
                          if v is not None), None)
        out[key] = {
            "hw_source": source, "effective_high_watermark": hw, "checkpoint_high_watermark": high,
            "high_watermark": end if replica["cut_short"] else high,
            "log_end_offset": end if end is not None else start,
            "first_unstable_offset": first, "last_stable_offset": lso, "lso_below_hw": held,
            "open_transactions": sum(t["state"] == "open" for t in mine),
            "held_records": sum(min(b["last_offset"], hw - 1) - max(b["base_offset"], lso) + 1 for b in data)
            if held else 0,
            "held_bytes": sum(b["size_bytes"] for b in data) if held else 0,
            "held_since_timestamp": since, "held_ms": None if since is None else AS_OF - since,
            "culprit_producer_id": culprit["producer_id"] if since is not None and culprit else None,
            "culprit_first_offset": culprit["first_offset"] if since is not None and culprit else None,
        }
    return out


@pytest.mark.parametrize("seed", range(12))
def test_stability_rows_follow_the_leaders_rule_from_batches_and_from_a_frame(spark: Any, seed: int,
                                                                               tmp_path: Path) -> None:
    rng = random.Random(seed)
    copies = seed % 3 == 2
    keys = COPY_COLUMNS if copies else PARTITION_COLUMNS
    replicas = _replicas(rng, copies)
    transactions = _transactions(rng, replicas)
    batches = _batches(rng, replicas)
    ptx_schema = pa.schema([in_ms(PARTITION_TRANSACTIONS).field(n).with_nullable(True)  # as read: epoch ms
                            for n in (*COPY_COLUMNS, "txn_seq", *TRANSACTION_COLUMNS)])
    ptx = pa.Table.from_pylist(transactions, schema=ptx_schema)
    (tmp_path / "batches").mkdir()
    pq.write_table(declared(pa.Table.from_pylist(batches, schema=in_ms(BATCHES)), BATCHES),
                   tmp_path / "batches" / "part-00000.parquet")
    batch_files = describe_tables(tmp_path, ["batches"]).table("batches")
    # the record batches a few rows at a time, as the driver reads a table's files
    from_batches = partition_stability(batch_files, ptx.to_batches(max_chunksize=5), replicas, as_of_ms=AS_OF,
                                       keys=keys)
    from_frame = partition_stability(batch_files, narrowed_candidates(arrow_frame(spark, ptx), replicas, keys),
                                     replicas, as_of_ms=AS_OF, keys=keys)
    assert from_batches.schema == STABILITY_ROWS
    assert from_batches.equals(from_frame)
    expected = _expected(replicas, transactions, batches, keys)
    got = {tuple(row[k] for k in keys): {name: row[name] for name in expected[next(iter(expected))]}
           for row in from_batches.to_pylist()}
    assert got == expected


def test_the_seeds_reach_every_case() -> None:
    """Held and not held, capped, log-end and checkpointed HWs, an LSO clamped to the log start."""
    seen: set[str] = set()
    for seed in range(12):
        rng = random.Random(seed)
        copies = seed % 3 == 2
        replicas = _replicas(rng, copies)
        transactions = _transactions(rng, replicas)
        batches = _batches(rng, replicas)
        for row in _expected(replicas, transactions, batches, COPY_COLUMNS if copies else PARTITION_COLUMNS).values():
            seen.add(row["hw_source"])
            seen.add("held" if row["lso_below_hw"] else "not held")
            if row["held_records"]:
                seen.add("records held")
            if row["first_unstable_offset"] is not None and row["first_unstable_offset"] >= row[
                    "effective_high_watermark"]:
                seen.add("unstable at or past the HW")
            if row["culprit_first_offset"] is not None and row["culprit_first_offset"] < row["first_unstable_offset"]:
                seen.add("clamped to the log start")
    assert {"checkpoint", "offsets_file", "log_end", HW_CAPPED, "held", "not held", "records held",
            "unstable at or past the HW", "clamped to the log start"} <= seen
