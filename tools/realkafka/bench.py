"""``python -m tools.realkafka.bench``: a benchmark dump written by a real Kafka broker.

    python -m tools.realkafka.bench --out DIR [--version 4.4.0] [--mb 256]

One broker of the release (KRaft; transaction version 2 from 4.0), fresh, on 127.0.0.1, under
the load of Kafka's own Java client (``driver/TxnDriver.java``) until its data partitions hold
about ``--mb`` MB: on each of 2 topics × 4 partitions, transactional producers (one per codec:
gzip, lz4, zstd, snappy, none; every fifth transaction aborted after a flush), beside idempotent
(lz4) and plain (snappy, acks=1) producers, all at once, in rounds. The broker then stops
cleanly, its log dir is copied to ``DIR/logdirs`` (built beside and swapped in) and
``DIR/load.json`` says what ran. Unlike a corpus scenario, no tool output is recorded: the dump
is for ``benchmarks/scan_bench.py --real-broker`` to scan, not a verdict to compare with.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from tools.realkafka.cluster import Cluster
from tools.realkafka.dist import HarnessError, fetch, version_tuple
from tools.realkafka.record import Recorder
from tools.realkafka.scenarios import run_parallel

__all__ = ["write_bench_dump"]

TOPICS = ("bench-orders", "bench-payments")
PARTITIONS = 4
CODECS = ("gzip", "lz4", "zstd", "snappy", "none")
#: per transactional producer and round: transactions, and records per partition in each
TRANSACTIONS_PER_ROUND = 40
RECORDS = 500
ABORT_EVERY = 5
NON_TRANSACTIONAL_PER_ROUND = 200_000
#: the broker's own defaults where the corpus's settings shrink them for small folders, but
#: segments of 64 MiB, so that a few hundred MB make several per partition
SETTINGS = {
    "log.segment.bytes": str(64 << 20),
    "log.index.size.max.bytes": str(10 << 20),
    "transaction.state.log.segment.bytes": str(100 << 20),
}


def _data_bytes(cluster: Cluster) -> int:
    return sum(f.stat().st_size for t in TOPICS for f in cluster.brokers[0].log_dir.glob(f"{t}-*/*.log"))


def _round() -> list[tuple[str, dict[str, Any]]]:
    """One round of the load: every producer at once."""
    runs: list[tuple[str, dict[str, Any]]] = []
    for topic in TOPICS:
        for codec in CODECS:
            runs.append(("txn", {"id": f"{topic}-{codec}-txn", "topic": topic,
                                 "partitions": ",".join(str(p) for p in range(PARTITIONS)),
                                 "count": TRANSACTIONS_PER_ROUND, "records": RECORDS, "abort_every": ABORT_EVERY,
                                 "compression": codec}))
        runs.append(("idempotent", {"topic": topic, "count": NON_TRANSACTIONAL_PER_ROUND, "compression": "lz4"}))
        runs.append(("plain", {"topic": topic, "count": NON_TRANSACTIONAL_PER_ROUND, "compression": "snappy"}))
    return runs


def write_bench_dump(out: Path, *, version: str = "4.4.0", megabytes: int = 256,
                     work_root: Path | None = None) -> dict[str, Any]:
    """Write ``out/logdirs`` and ``out/load.json``; returns what ``load.json`` says."""
    dist = fetch(version)
    out.parent.mkdir(parents=True, exist_ok=True)
    building = Path(tempfile.mkdtemp(prefix=f".{out.name}-", dir=out.parent))
    work = Path(tempfile.mkdtemp(prefix="realkafka-bench-", dir=work_root))
    features = {"transaction.version": 2} if version_tuple(version) >= (4, 0) else {}
    cluster = Cluster(dist, work, size=1, settings=SETTINGS, features=features)
    started = time.monotonic()
    rounds = 0
    try:
        cluster.start()
        for topic in TOPICS:
            cluster.create_topics(f"{topic}:{PARTITIONS}:1")
        while _data_bytes(cluster) < megabytes * 1_000_000:
            run_parallel(cluster, _round())
            rounds += 1
            print(f"[bench] round {rounds}: {_data_bytes(cluster) / 1e6:.0f} MB of data segments", file=sys.stderr)
        cluster.stop_all()
        Recorder(cluster, building).copy_log_dirs()
        load = {
            "kafka_version": version, "features": features, "topics": list(TOPICS), "partitions": PARTITIONS,
            "transactional_producers": [f"{t}-{c}-txn" for t in TOPICS for c in CODECS],
            "rounds": rounds, "transactions": rounds * len(TOPICS) * len(CODECS) * TRANSACTIONS_PER_ROUND,
            "aborted_every": ABORT_EVERY, "records_per_partition_and_transaction": RECORDS,
            "non_transactional_records": rounds * len(TOPICS) * 2 * NON_TRANSACTIONAL_PER_ROUND,
            "data_bytes": sum(f.stat().st_size for f in (building / "logdirs").rglob("*.log")
                              if not f.parent.name.startswith("__")),
            "seconds": round(time.monotonic() - started, 1),
        }
        (building / "load.json").write_text(json.dumps(load, indent=2) + "\n")
    except BaseException:
        shutil.rmtree(building, ignore_errors=True)
        raise
    finally:
        cluster.close()
        shutil.rmtree(work, ignore_errors=True)
    shutil.rmtree(out, ignore_errors=True)
    building.rename(out)
    return load


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.realkafka.bench", description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True, help="the dump's folder (replaced)")
    parser.add_argument("--version", default="4.4.0", help="the Kafka release (default 4.4.0)")
    parser.add_argument("--mb", type=int, default=256, help="data segments' size to reach, in MB (default 256)")
    args = parser.parse_args(argv)
    try:
        load = write_bench_dump(args.out, version=args.version, megabytes=args.mb)
    except HarnessError as err:
        print(f"[bench] failed: {err}", file=sys.stderr)
        return 1
    print(json.dumps(load, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
