"""Coordinator-record decode: the reference decoders against ``fast_coordinator``, on one core.

The log is shaped like a real ``__transaction_state``: 50 partitions (the broker default), many
transactional ids placed by ``txn_partition_for``, and every transaction's records as the
coordinator writes them, one record per batch: ``Ongoing`` once per partition added (the
partition list growing), ``PrepareCommit``/``PrepareAbort``, then ``CompleteCommit``/
``CompleteAbort``, with an ``Empty`` record when an id is initialised. A quarter of the ids are
TV2 clients (flexible v1 values with tagged fields). Records are written with the sample
generator's log and encoders (``txn_audit.sample``), segments kept in memory.

Two measurements, interleaved in the same process (the machine is shared: ratios are what
matter), best of ``--repeat``:

* records: the headers decoded once beforehand; the reference decoder (what the worker ran per
  batch: ``iter_records`` + ``decode_txn_log_key``/``decode_txn_log_value`` + its row tuple)
  against ``decode_coordinator_batches`` (records to Arrow columns);
* worker: ``_decode_log`` on every segment, all tables, the per-batch path against the
  column-wise path (headers, CRCs, batches rows and records).

Usage::

    python benchmarks/coordinator_bench.py [--topic __consumer_offsets] [--ids 4000] [--txns 6] [--repeat 3]
    python benchmarks/coordinator_bench.py --dump DUMP  # a dump's own __transaction_state log

``--topic __consumer_offsets`` measures offset commits instead (``offsets_log``).
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from txn_audit.formats import fast_coordinator
from txn_audit.formats.fast_headers import HeaderColumns, decode_headers
from txn_audit.formats.consumer_offsets import encode_offset_commit_key, encode_offset_commit_value
from txn_audit.formats.model import TXN_STATES, OffsetCommitKey, OffsetCommitValue, TopicPartitions, TxnLogValue
from txn_audit.formats.txn_state import encode_txn_log_key, encode_txn_log_value, txn_partition_for
from txn_audit.ingest.tasks import FileTask, TableRows
from txn_audit.ingest.worker import (
    CONSUMER_OFFSETS_TOPIC,
    TRANSACTION_STATE_TOPIC,
    _add_coordinator_records,
    _decode_log,
)
from txn_audit.sample.broker import PartitionLog
from txn_audit.sample.scenario import BASE_TIME_MS

PARTITIONS = 50
TARGET = 1_000_000  # records/s per core (issue J)
STATE = {name: code for code, name in TXN_STATES.items()}


def _grouped(parts: list[tuple[str, int]] | None) -> tuple[TopicPartitions, ...] | None:
    if parts is None:
        return None
    by_topic: dict[str, list[int]] = {}
    for topic, p in parts:
        by_topic.setdefault(topic, []).append(p)
    return tuple(TopicPartitions(t, tuple(sorted(ps))) for t, ps in sorted(by_topic.items()))


def coordinator_log(ids: int, txns: int, seed: int = 7) -> list[bytes]:
    """The segments of the 50 partitions (each partition's log in one segment)."""
    rng = random.Random(seed)
    logs = [PartitionLog(TRANSACTION_STATE_TOPIC, p, segment_bytes=1 << 40) for p in range(PARTITIONS)]
    now = BASE_TIME_MS
    topics = [f"topic-{t}" for t in range(8)]
    for n in range(ids):
        tid = f"app-{n % 37}-txn-{n:06d}"
        log = logs[txn_partition_for(tid, PARTITIONS)]
        tv2 = n % 4 == 0
        pid, epoch = 1000 + n, 0
        # (state, partitions so far, start time) as the coordinator writes them, one record each
        writes: list[tuple[str, list[tuple[str, int]] | None, int]] = [("Empty", None, -1)]
        for _ in range(txns):
            start = now + len(writes)
            added: list[tuple[str, int]] = []
            for _ in range(rng.randint(1, 5)):
                added.append((rng.choice(topics), rng.randrange(PARTITIONS)))
                writes.append(("Ongoing", list(added), start))
            commit = rng.random() < 0.9
            writes.append(("PrepareCommit" if commit else "PrepareAbort", added, start))
            writes.append(("CompleteCommit" if commit else "CompleteAbort", added, start))
        for state, parts, start in writes:
            now += rng.randint(1, 20)
            if tv2 and state == "Ongoing" and parts is not None and len(parts) == 1:
                epoch += 1  # a TV2 client bumps the epoch every transaction
            value = TxnLogValue(version=1 if tv2 else 0, producer_id=pid, producer_epoch=epoch, txn_timeout_ms=60_000,
                                state_code=STATE[state], topic_partitions=_grouped(parts),
                                txn_last_update_timestamp=now, txn_start_timestamp=start,
                                client_transaction_version=2 if tv2 else 0)
            log.append([(encode_txn_log_key(tid), encode_txn_log_value(value), now)])
    return [bytes(log.segments[0].data) for log in logs if log.segments[0].data]


def offsets_log(groups: int, commits: int, seed: int = 7) -> list[bytes]:
    """``__consumer_offsets`` segments of 50 partitions: each group commits ``commits`` times the
    offsets of 4 to 12 partitions in one batch (v3 values, as brokers write them), every third
    group transactionally (``sendOffsetsToTransaction``)."""
    rng = random.Random(seed)
    logs = [PartitionLog(CONSUMER_OFFSETS_TOPIC, p, segment_bytes=1 << 40) for p in range(PARTITIONS)]
    now = BASE_TIME_MS
    for g in range(groups):
        group = f"consumer-group-{g:05d}"
        log = logs[txn_partition_for(group, PARTITIONS)]
        owned = rng.sample(range(PARTITIONS), rng.randint(4, 12))
        for c in range(commits):
            now += rng.randint(1, 50)
            records = [(encode_offset_commit_key(OffsetCommitKey(1, group, "orders", p)),
                        encode_offset_commit_value(OffsetCommitValue(3, 1000 * c + p, 5, "", now, -1)), now)
                       for p in owned]
            txn = g % 3 == 0
            log.append(records, producer_id=5000 + g if txn else -1, producer_epoch=0 if txn else -1,
                       transactional=txn)
    return [bytes(log.segments[0].data) for log in logs if log.segments[0].data]


def _task(topic: str, size: int) -> FileTask:
    return FileTask("-", f"{topic}-0/00000000000000000000.log", "log", 1, "ld", topic, 0, 0, size)


def reference_records(topic: str, segments: list[tuple[bytes, HeaderColumns]]) -> int:
    n = 0
    for data, cols in segments:
        task = _task(topic, len(data))
        out = TableRows()
        for h in cols.headers():
            _add_coordinator_records(task, data, h, out)
        n += len(out.rows["txn_log"]) + len(out.rows["offset_commits"])
    return n


def fast_records(topic: str, segments: list[tuple[bytes, HeaderColumns]]) -> int:
    n = 0
    kind = fast_coordinator.TRANSACTION_STATE if topic == TRANSACTION_STATE_TOPIC else fast_coordinator.CONSUMER_OFFSETS
    for data, cols in segments:
        rows = np.flatnonzero(~cols.is_control & cols.crc_ok & (cols.record_count != 0))
        got = fast_coordinator.decode_coordinator_batches(data, cols, rows, kind)
        assert len(got.fallback) == 0
        n += got.table.num_rows
    return n


def worker(topic: str, segments: list[bytes], fast: bool) -> int:
    n = 0
    for data in segments:
        out = TableRows()
        for _ in _decode_log(_task(topic, len(data)), data, out, fast=fast):
            pass
        n += len(out)
    return n


def best(runs: list[float]) -> float:
    return min(runs)


def dump_segments(dump: Path) -> list[bytes]:
    """The ``__transaction_state`` segments of a dump's brokers (every partition, every segment)."""
    return [path.read_bytes() for path in sorted(dump.glob(f"broker-*/{TRANSACTION_STATE_TOPIC}-*/*.log"))
            if path.stat().st_size]


def fast_rate(segments: list[bytes], repeat: int, topic: str = TRANSACTION_STATE_TOPIC) -> tuple[int, float]:
    """Records the column-wise path decodes from ``segments`` and its best time of ``repeat``,
    the headers decoded beforehand (the numba compilation is done, or loaded, outside the timing)."""
    with_cols = [(s, decode_headers(s).columns) for s in segments]
    fast_records(topic, with_cols[:1])
    times, records = [], 0
    for _ in range(repeat):
        t = time.perf_counter()
        records = fast_records(topic, with_cols)
        times.append(time.perf_counter() - t)
    return records, best(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--topic", choices=[TRANSACTION_STATE_TOPIC, CONSUMER_OFFSETS_TOPIC],
                        default=TRANSACTION_STATE_TOPIC)
    parser.add_argument("--ids", type=int, default=4000, help="transactional ids (groups for __consumer_offsets)")
    parser.add_argument("--txns", type=int, default=6, help="transactions per id (commits per group)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--dump", type=Path, default=None,
                        help="measure this dump's __transaction_state log instead (benchmarks/realistic_dump.py)")
    args = parser.parse_args()
    if args.dump is not None:
        segments = dump_segments(args.dump)
        shape = f"the log of {args.dump.name}"
        args.topic = TRANSACTION_STATE_TOPIC
    elif args.topic == TRANSACTION_STATE_TOPIC:
        segments = coordinator_log(args.ids, args.txns)
        shape = f"{args.ids} transactional ids"
    else:
        segments = offsets_log(args.ids, args.txns)
        shape = f"{args.ids} groups committing {args.txns} times"
    topic = args.topic
    with_cols = [(s, decode_headers(s).columns) for s in segments]
    batches = sum(len(c) for _, c in with_cols)
    size = sum(len(s) for s in segments)
    fast_records(topic, with_cols[:1])  # compile (or load the cached compilation) outside the timing
    worker(topic, segments[:1], True)
    jobs: dict[str, Callable[[], int]] = {
        "reference": lambda: reference_records(topic, with_cols),
        "fast": lambda: fast_records(topic, with_cols),
        "worker reference": lambda: worker(topic, segments, False),
        "worker fast": lambda: worker(topic, segments, True),
    }
    timings: dict[str, list[float]] = {name: [] for name in jobs}
    counts: dict[str, int] = {}
    for _ in range(args.repeat):
        for name, job in jobs.items():  # interleaved: a burst of load hits both sides alike
            t = time.perf_counter()
            counts[name] = job()
            timings[name].append(time.perf_counter() - t)
    assert counts["reference"] == counts["fast"]
    assert counts["worker reference"] == counts["worker fast"]
    records = counts["fast"]
    print(f"machine: {platform.machine()} {platform.python_implementation()} {platform.python_version()}, "
          f"load {os.getloadavg()[0]:.2f}")
    print(f"log: {topic}, {PARTITIONS} partitions, {shape}, {records} records in {batches} batches, "
          f"{size / 1e6:.1f} MB\n")
    print("| decoder | best s | records/s | vs reference | vs 1 M/s target |")
    print("|---|---:|---:|---:|---:|")
    for kind in ("", "worker "):
        ref = best(timings[f"{kind}reference"])
        for name in (f"{kind}reference", f"{kind}fast"):
            t = best(timings[name])
            rate = records / t
            print(f"| {name} | {t:.3f} | {rate:,.0f} | {ref / t:.1f}x | {rate / TARGET:.2f} |")


if __name__ == "__main__":
    main()
