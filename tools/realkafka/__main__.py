"""``python -m tools.realkafka``: write real-broker scenario folders (``make kafka-corpus``).

    python -m tools.realkafka --versions 4.4.0 3.6.2 --scenarios healthy crashed-producer \
        [--out tests/corpus] [--work DIR] [--keep-work]

For each version and scenario: fetch the release (Maven Central, cached), start a fresh cluster
on 127.0.0.1, run the scenario, record what Kafka's tools say while the brokers run, stop them,
and write ``<out>/kafka-<version>/<scenario>/`` (built beside it and swapped in when complete).
A scenario a release cannot run is listed with the reason and skipped; any other failure stops
that scenario with its message; it is run once more from a fresh cluster, and if it fails again
the run goes on with the next, exiting 1 at the end.
"""

from __future__ import annotations

import argparse
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path

from tools.realkafka.cluster import Cluster
from tools.realkafka.dist import HarnessError, fetch
from tools.realkafka.index import write_index
from tools.realkafka.record import Recorder, now_ms
from tools.realkafka.scenarios import (HANGING_WAIT_S, REMOTE_STORE, SCENARIOS, Scenario, read_offset_checkpoint,
                                      topic_configs)

DEFAULT_VERSIONS = ("2.8.2", "3.6.2", "3.9.2", "4.0.2", "4.1.2", "4.4.0")
# a scenario is a race between real processes on two cores (a broker that misses its shutdown
# deadline, a client timing out): a failed one is run again from a fresh cluster, once
ATTEMPTS = 2
REPO = Path(__file__).resolve().parents[2]


def run_scenario(version: str, scenario: Scenario, out_root: Path, work_root: Path, *, keep_work: bool = False) -> Path:
    """One scenario on one release; returns the folder written."""
    dist = fetch(version)
    target = out_root / f"kafka-{version}" / scenario.name
    target.parent.mkdir(parents=True, exist_ok=True)
    building = Path(tempfile.mkdtemp(prefix=f".{scenario.name}-", dir=target.parent))
    work = work_root / f"kafka-{version}-{scenario.name}"
    shutil.rmtree(work, ignore_errors=True)
    cluster = Cluster(dist, work, size=scenario.brokers, settings=scenario.broker_settings(dist),
                      features=scenario.features(dist), voters=scenario.voters)
    started = now_ms()
    try:
        cluster.start()
        for t in scenario.topics:
            placed = f":{len(t.replicas)}:{'/'.join(map(str, t.replicas))}" if t.replicas else f":{scenario.brokers}"
            cluster.create_topics(f"{t.name}:{t.partitions}{placed}", **dict(t.configs))
        recorder = Recorder(cluster, building)
        outcome = scenario.run(cluster)
        topics = [t.name for t in scenario.topics]
        recorder.settle(topics)
        recorder.describe_features()
        recorder.read_offsets(topics)
        recorder.describe_transactions()
        if outcome.describe_groups:
            recorder.describe_consumer_groups()
        for t in scenario.topics:
            recorder.describe_producers(t.name, t.partitions)
        if outcome.wait_for_hanging:
            time.sleep(HANGING_WAIT_S)
        recorder.run_find_hanging(outcome.find_hanging_broker)
        # the last word of the live cluster, just before it stops: what the copied log dirs hold
        recorder.read_offsets(topics, after_wait=True)
        if scenario.tiered:
            recorder.read_tiered_offsets(topics)
        if scenario.record_cleaner or any(t.configs for t in scenario.topics):
            internal = sorted({p["topic"] for p in recorder.offsets.values() if p["topic"].startswith("__")})
            described = topics + (internal if scenario.record_cleaner else [])
            outcome.notes["topic_configs"] = topic_configs(cluster, described)
        cluster.stop_all()
        recorder.copy_log_dirs()
        if scenario.tiered:
            # the remote store (LocalTieredStorage's folder) is listed, not copied
            outcome.notes["remote_store_files"] = {
                str(b.node_id): sorted(f"{f.relative_to(b.folder)} {f.stat().st_size}"
                                       for f in (b.folder / REMOTE_STORE).rglob("*") if f.is_file())
                for b in cluster.brokers}
        if scenario.record_cleaner:
            # what the cleaner had checkpointed when the brokers stopped, per broker's copied log dir
            logdirs = building / "logdirs"
            holders = ([logdirs] if scenario.brokers == 1
                       else [logdirs / f"broker-{b.node_id}" for b in cluster.brokers])
            outcome.notes["cleaner_offset_checkpoint"] = {
                str(b.node_id): read_offset_checkpoint(h / "cleaner-offset-checkpoint")
                for b, h in zip(cluster.brokers, holders, strict=True)}
        recorder.dump_logs()
        recorder.write_expected(scenario.name, description=outcome.description, anomalies=outcome.anomalies,
                                notes=outcome.notes, started_ms=started)
    except BaseException:
        shutil.rmtree(building, ignore_errors=True)
        raise
    finally:
        cluster.close()
        if not keep_work:
            shutil.rmtree(work, ignore_errors=True)
    old = target.with_name(f".{scenario.name}.old")
    shutil.rmtree(old, ignore_errors=True)
    if target.exists():
        target.rename(old)
    building.rename(target)
    shutil.rmtree(old, ignore_errors=True)
    return target


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.realkafka", description=__doc__.split("\n\n")[0])
    parser.add_argument("--versions", nargs="+", default=list(DEFAULT_VERSIONS),
                        help=f"Kafka releases (default: {' '.join(DEFAULT_VERSIONS)})")
    parser.add_argument("--scenarios", nargs="+", default=list(SCENARIOS), choices=list(SCENARIOS),
                        metavar="SCENARIO", help=f"scenarios (default: all: {' '.join(SCENARIOS)})")
    parser.add_argument("--out", type=Path, default=REPO / "tests" / "corpus", help="corpus root (default: tests/corpus)")
    parser.add_argument("--work", type=Path, default=None, help="brokers' work folder (default: a temporary one)")
    parser.add_argument("--keep-work", action="store_true", help="keep the brokers' folders and logs")
    args = parser.parse_args(argv)
    # a SIGTERM ends the run as an exception, so that every broker is stopped and no half-written
    # folder is left behind
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    work_root = args.work or Path(tempfile.mkdtemp(prefix="realkafka-"))
    failed = []
    for version in args.versions:
        try:
            dist = fetch(version)
        except HarnessError as e:
            print(f"[realkafka] {version}: {e}", file=sys.stderr)
            failed.append((version, "fetch"))
            continue
        for name in args.scenarios:
            scenario = SCENARIOS[name]
            why = scenario.unsupported(dist)
            if why:
                print(f"[realkafka] {version} {name}: not run: {why}", flush=True)
                continue
            t0 = time.monotonic()
            folder = None
            for attempt in range(1, ATTEMPTS + 1):
                print(f"[realkafka] {version} {name}: running" + (f" (attempt {attempt})" if attempt > 1 else ""),
                      flush=True)
                try:
                    folder = run_scenario(version, scenario, args.out, work_root, keep_work=args.keep_work)
                    break
                except (HarnessError, OSError, ValueError, KeyError, StopIteration) as e:
                    print(f"[realkafka] {version} {name}: FAILED: {e}", file=sys.stderr, flush=True)
            if folder is None:
                failed.append((version, name))
                continue
            print(f"[realkafka] {version} {name}: wrote {folder} in {time.monotonic() - t0:.0f} s", flush=True)
    if not args.work and not args.keep_work:
        shutil.rmtree(work_root, ignore_errors=True)
    print(f"[realkafka] index: {write_index(args.out)}", flush=True)
    if failed:
        print(f"[realkafka] failed: {', '.join(f'{v} {n}' for v, n in failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
