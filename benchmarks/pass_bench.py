"""Memory and time of the producer pass on a replica written by many short-lived producers.

Since Kafka 3.0 every producer is idempotent by default, so each producer instance takes a new
producer id; a partition fed by short-lived clients holds millions of them within its retention.
The pass keeps state per (topic, partition, producer) until its input ends, so its memory grows
with the producers of a task, not with its rows. Each count runs in a fresh process:

* ``K`` producers on one partition, each writing one transactional batch and its COMMIT marker,
  in log order (a window of producers' batches, then their markers), in Arrow batches of 65,536
  rows, as the pass's tasks receive them;
* prints per count the pass's wall time, the process's resident memory before the pass and at
  its peak, and the bytes each producer added.

Usage::

    python benchmarks/pass_bench.py [--producers 250000 1000000 2000000]
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from collections.abc import Iterator

import numpy as np
import pyarrow as pa

BATCH_ROWS = 65_536


def _peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def _log(producers: int) -> Iterator[pa.RecordBatch]:
    """The partition's rows: per window of ``BATCH_ROWS // 2`` producers, their batches then their markers."""
    half = BATCH_ROWS // 2
    for first in range(0, producers, half):
        ids = np.arange(first, min(producers, first + half), dtype=np.int64)
        rows = 2 * len(ids)
        offsets = 2 * first + np.arange(rows, dtype=np.int64)
        is_marker = np.arange(rows) >= len(ids)
        yield pa.RecordBatch.from_pydict({
            "topic": pa.array(["events"] * rows), "partition": pa.array(np.zeros(rows, np.int32)),
            "producer_id": pa.array(np.concatenate([ids, ids]) + 10**9), "broker_id": pa.array(np.ones(rows, np.int32)),
            "epoch": pa.array(np.zeros(rows, np.int32)), "offset": pa.array(offsets),
            "last_offset": pa.array(offsets), "record_count": pa.array(np.ones(rows, np.int32)),
            "size_bytes": pa.array(np.where(is_marker, 78, 300).astype(np.int32)),
            "first_timestamp": pa.array(offsets), "max_timestamp": pa.array(offsets),
            "is_marker": pa.array(is_marker), "is_transactional": pa.array(np.ones(rows, bool)),
            "base_sequence": pa.array(np.where(is_marker, None, 0), pa.int32()),  # type: ignore[call-overload]
            "last_sequence": pa.array(np.where(is_marker, None, 0), pa.int32()),  # type: ignore[call-overload]
            "marker_type": pa.array(np.where(is_marker, "COMMIT", None), pa.string()),  # type: ignore[call-overload]
            "coordinator_epoch": pa.array(np.where(is_marker, 0, None), pa.int32()),  # type: ignore[call-overload]
            "segment_base_offset": pa.array(np.zeros(rows, np.int64)), "position": pa.array(offsets),
        })


def measure(producers: int) -> dict[str, float]:
    """One count, in this process: the pass over ``_log(producers)``."""
    from txn_audit.reconstruct.ordered_pass import transaction_pass

    for _ in transaction_pass(_log(2), late_tolerance_ms=0):  # load the compiled loops first
        pass
    before = _peak_mib()
    started = time.perf_counter()
    transactions = 0
    for out in transaction_pass(_log(producers), late_tolerance_ms=0):
        transactions += out.num_rows - out.column("txn").null_count
    seconds = time.perf_counter() - started
    if transactions != producers:
        raise SystemExit(f"the pass gave {transactions} transactions for {producers} producers")
    return {"producers": producers, "seconds": seconds, "before_mib": before, "peak_mib": _peak_mib()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--producers", type=int, nargs="+", default=[250_000, 1_000_000, 2_000_000])
    parser.add_argument("--one", type=int, help=argparse.SUPPRESS)  # a child process: measure one count
    args = parser.parse_args()
    if args.one is not None:
        print(json.dumps(measure(args.one)))
        return
    print("| producers on one partition | pass wall | resident before | peak resident | bytes per producer |")
    print("| ---: | ---: | ---: | ---: | ---: |")
    for producers in args.producers:
        child = subprocess.run([sys.executable, __file__, "--one", str(producers)], capture_output=True, text=True)
        if child.returncode:
            raise SystemExit(f"the pass over {producers:,} producers failed:\n{child.stderr}")
        row = json.loads(child.stdout.splitlines()[-1])
        per_producer = (row["peak_mib"] - row["before_mib"]) * 2**20 / producers
        print(f"| {producers:,} | {row['seconds']:.1f} s | {row['before_mib']:.0f} MiB | {row['peak_mib']:.0f} MiB "
              f"| {per_producer:.0f} |", flush=True)


if __name__ == "__main__":
    main()
