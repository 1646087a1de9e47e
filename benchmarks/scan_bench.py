"""End-to-end benchmark: ``txn-audit scan`` over generated dumps of 1 and 4 GiB.

For each size it writes (once, then reuses) a one-broker dump with the sample generator at
scale (``txn_audit/sample/large.py``): several partitions of topic ``bulk`` holding
transactional, idempotent and plain traffic (about 300 bytes per batch), rolled into
128 MiB segments with their ``.index`` files. It reads the dump once into the page cache,
then runs the real CLI as a subprocess, by default the full audit (ingest, reconstruction,
detection, the data-quality suites and the HTML report), and measures:

* the wall time, JVM start included, and when each stage began (the CLI's stage lines);
* the peak RSS (``VmHWM``) of every process the scan starts, sampled from ``/proc``: the
  Python workers (``pyspark.daemon`` and its forks), the JVM, the driver.

In the same run it times kafka-python iterating 1 GiB of the same batches on one core
(``MemoryRecords.next_batch`` reading the header fields and checking each CRC), then prints
one table with the ratios that issue D sets as targets.

Single scans of the same dump move by several seconds on a small machine, so each size is
scanned ``--repeat`` times, the sizes taking turns, and kafka-python timed as often; the table
shows each size's median scan and kafka-python's median time, and lists every scan's time.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from txn_audit.spark import local_driver_memory

GIB = 1 << 30


@dataclass
class ScanRun:
    size_gib: float
    wall_s: float
    exit_code: int
    stages: list[tuple[float, str]]
    peak_kib: dict[str, int]  # by process role: worker, jvm, driver
    peak_total_kib: int
    findings: int = 0
    rows: dict[str, int] = field(default_factory=dict)
    failed: str | None = None


def dump_dir(data_dir: Path, size_gib: float, partitions: int, segment_mb: int) -> Path:
    """A generated dump of about ``size_gib`` of data, written once and reused."""
    from txn_audit.sample.large import write_large_dump

    folder = data_dir / f"dump-{size_gib:g}g-p{partitions}-s{segment_mb}"
    done = folder / ".complete"
    if not done.exists():
        shutil.rmtree(folder, ignore_errors=True)
        started = time.perf_counter()
        write_large_dump(folder, segment_bytes=int(size_gib * GIB) // partitions, partitions=partitions,
                         segment_max_bytes=segment_mb << 20, mixed_traffic=True)
        done.write_text("")
        print(f"# wrote {folder} in {time.perf_counter() - started:.0f} s", file=sys.stderr)
    return folder


def data_logs(dump: Path) -> list[Path]:
    return sorted(p for p in dump.glob("broker-1/bulk-*/*.log"))


def warm(dump: Path) -> int:
    """Read every file once so that the scan reads from the page cache; return the bytes."""
    total = 0
    for path in dump.rglob("*"):
        if path.is_file():
            with open(path, "rb") as handle:
                while chunk := handle.read(8 << 20):
                    total += len(chunk)
    return total


def _descendants(root: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry.name}/stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(entry.name))
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo += children.get(pid, [])
    return out


def _role(pid: int, root: int) -> str:
    try:
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return "gone"
    if "pyspark.daemon" in cmd or "pyspark.worker" in cmd or "pyspark/daemon" in cmd:
        return "worker"
    if "java" in cmd.split(" ", 1)[0]:
        return "jvm"
    return "driver" if pid == root else "other"


def _status_kib(pid: int, key: str) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(key):
                return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return 0


class Sampler(threading.Thread):
    """Samples the RSS of a process tree every ``interval`` seconds until stopped."""

    def __init__(self, root: int, interval: float = 0.2) -> None:
        super().__init__(daemon=True)
        self.root, self.interval = root, interval
        self.peak: dict[str, int] = {}
        self.peak_total = 0
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            total = 0
            for pid in _descendants(self.root):
                role = _role(pid, self.root)  # read each time: spark-submit's shell execs the JVM
                if role == "gone":
                    continue
                hwm = _status_kib(pid, "VmHWM:")
                total += _status_kib(pid, "VmRSS:")
                self.peak[role] = max(self.peak.get(role, 0), hwm)
            self.peak_total = max(self.peak_total, total)
            self.stop.wait(self.interval)


def cli() -> list[str]:
    script = Path(sys.executable).with_name("txn-audit")
    return [str(script)] if script.exists() else [sys.executable, "-c", "from txn_audit.cli import main; main()"]


def run_scan(dump: Path, out: Path, size_gib: float, flags: list[str], driver_memory: str | None = None) -> ScanRun:
    shutil.rmtree(out, ignore_errors=True)
    command = [*cli(), "scan", str(dump), "--out", str(out), "--format", "json", "--no-progress", *flags]
    stages: list[tuple[float, str]] = []
    started = time.perf_counter()
    env = dict(os.environ)
    if driver_memory:  # local mode: the JVM, with its executor, is the driver
        env["PYSPARK_SUBMIT_ARGS"] = f"--driver-memory {driver_memory} pyspark-shell"
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    sampler = Sampler(proc.pid)
    sampler.start()
    stdout_parts: list[str] = []
    reader = threading.Thread(target=lambda: stdout_parts.append(proc.stdout.read()), daemon=True)  # type: ignore[union-attr]
    reader.start()
    errors: list[str] = []
    for line in proc.stderr:  # type: ignore[union-attr]
        stages.append((time.perf_counter() - started, line.strip()))
        errors.append(line)
    code = proc.wait()
    wall = time.perf_counter() - started
    sampler.stop.set()
    sampler.join()
    reader.join()
    (out.parent / f"{out.name}.stderr.txt").write_text("".join(f"{at:8.1f} {line}\n" for at, line in stages))
    if code not in (0, 1) or not "".join(stdout_parts).strip():
        cause = next((line for line in reversed(errors) if "Error" in line or "Exception" in line), "").strip()
        print(f"# scan of {dump} failed with exit code {code}: {cause[:300]}", file=sys.stderr)
        return ScanRun(size_gib, wall, code, stages, sampler.peak, sampler.peak_total, failed=cause[:200] or "failed")
    summary = json.loads("".join(stdout_parts))
    rows = summary.get("summary", {}).get("table_rows", {})
    return ScanRun(size_gib, wall, code, stages, sampler.peak, sampler.peak_total,
                   findings=len(summary.get("findings", [])), rows=rows)


def kafka_python_seconds(logs: list[Path], limit: int) -> tuple[float, int, int]:
    """Seconds kafka-python takes to iterate ``limit`` bytes of ``logs`` on one core (a fresh,
    pinned process), the batches and the bytes it iterated."""
    code = r"""
import json, mmap, os, sys, time
sys.path.insert(0, sys.argv[1])
from decode_bench import run_kafka_python
os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
limit, paths = int(sys.argv[2]), sys.argv[3:]
n = size = 0
elapsed = 0.0
for path in paths:
    if size >= limit:
        break
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as buf:
        started = time.perf_counter()
        n += run_kafka_python(buf)  # the same iteration the header benchmark times
        elapsed += time.perf_counter() - started
        size += len(buf)
print(json.dumps([elapsed, n, size]))
"""
    done = subprocess.run([sys.executable, "-c", code, str(Path(__file__).resolve().parent), str(limit),
                           *map(str, logs)], capture_output=True, text=True,
                          check=True)
    elapsed, n, size = json.loads(done.stdout)
    return elapsed, n, size


def machine() -> str:
    model = "unknown CPU"
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            model = line.split(":", 1)[1].strip()
            break
    mem_kb = int(next(line.split()[1] for line in Path("/proc/meminfo").read_text().splitlines()
                      if line.startswith("MemTotal")))
    return (f"{os.cpu_count()} CPUs ({model}), {mem_kb / (1 << 20):.1f} GiB RAM, Python {platform.python_version()}")


def median_run(runs: list[ScanRun]) -> ScanRun:
    """The run of median wall time (the lower one of an even count); a failed run if any failed."""
    failed = [run for run in runs if run.failed]
    if failed:
        return failed[0]
    ordered = sorted(runs, key=lambda run: run.wall_s)
    return ordered[(len(ordered) - 1) // 2]


def _is_stage(line: str) -> bool:
    """The CLI's stage lines (not the JVM's log lines or a traceback)."""
    return bool(line) and line[0].islower() and not line.startswith(("at ", "org.", "java.", "scala.", "py4j"))


def _stage_table(run: ScanRun) -> list[str]:
    lines = [f"stages of the {run.size_gib:g} GiB scan (seconds since launch; each stage runs to the next line):"]
    marks = [(0.0, "(launch)"), *((at, name) for at, name in run.stages if _is_stage(name)), (run.wall_s, "(exit)")]
    for (at, name), (nxt, _) in zip(marks, marks[1:]):
        lines.append(f"  {at:7.1f}  +{nxt - at:6.1f}  {name}")
    return lines


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", type=Path, default=Path(tempfile.gettempdir()) / "txn-audit-scan-bench")
    parser.add_argument("--sizes", type=float, nargs="+", default=[1, 4], help="dump sizes in GiB (default 1 4)")
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--segment-mb", type=int, default=128)
    parser.add_argument("--kafka-python-gib", type=float, default=1.0)
    parser.add_argument("--driver-memory", default=None,
                        help="Spark driver memory for the scan, e.g. 4g (default: txn-audit's, a quarter of RAM)")
    parser.add_argument("--scan-flags", default="", help="extra flags for txn-audit scan, e.g. '--no-quality'")
    parser.add_argument("--repeat", type=int, default=3,
                        help="scans per size, the sizes taking turns, and kafka-python timings; the table shows "
                             "the medians (default 3)")
    args = parser.parse_args(argv)
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")
    args.data_dir.mkdir(parents=True, exist_ok=True)
    flags = args.scan_flags.split()

    load_before = os.getloadavg()
    scans: dict[float, list[ScanRun]] = {size: [] for size in args.sizes}
    for turn in range(args.repeat):
        for size in args.sizes:
            dump = dump_dir(args.data_dir, size, args.partitions, args.segment_mb)
            warmed = warm(dump)
            run = run_scan(dump, args.data_dir / f"out-{size:g}g", size, flags, args.driver_memory)
            scans[size].append(run)
            print(f"# scan {turn + 1}/{args.repeat} of the {size:g} GiB dump ({warmed / GIB:.2f} GiB of files): "
                  f"{run.wall_s:.1f} s, exit {run.exit_code}, {run.findings} findings, rows {run.rows}", file=sys.stderr)
    runs = [median_run(scans[size]) for size in args.sizes]
    smallest = dump_dir(args.data_dir, min(args.sizes), args.partitions, args.segment_mb)
    timings = sorted(kafka_python_seconds(data_logs(smallest), int(args.kafka_python_gib * GIB))
                     for _ in range(args.repeat))
    kp_s, kp_batches, kp_bytes = timings[(len(timings) - 1) // 2]
    kp_per_gib = kp_s / (kp_bytes / GIB)
    load_after = os.getloadavg()

    print(f"machine: {machine()}")
    print(f"load average before {load_before[0]:.2f} {load_before[1]:.2f} {load_before[2]:.2f}, "
          f"after {load_after[0]:.2f} {load_after[1]:.2f} {load_after[2]:.2f}")
    print(f"scan flags: {' '.join(flags) or '(none: full audit with quality suites and report)'}; "
          f"driver memory {args.driver_memory or local_driver_memory() + ' (default)'}; {args.partitions} partitions, "
          f"{args.segment_mb} MiB segments")
    print(f"kafka-python: {kp_batches:,} batches, {kp_bytes / GIB:.2f} GiB in {kp_s:.1f} s on one core "
          f"= {kp_per_gib:.1f} s/GiB (median of {', '.join(f'{t[0]:.1f}' for t in timings)} s)")
    for size in args.sizes:
        print(f"scans of {size:g} GiB: {', '.join(f'{r.wall_s:.1f}' for r in scans[size])} s "
              f"(median {median_run(scans[size]).wall_s:.1f} s)")
    print()
    print("| measure | value | target | met |")
    print("| --- | ---: | --- | --- |")
    for run in runs:
        if run.failed:
            print(f"| scan {run.size_gib:g} GiB | FAILED after {run.wall_s:.1f} s: {run.failed} | - | no |")
        met = "yes" if run.wall_s <= 60 and not run.failed else "no"
        print(f"| scan {run.size_gib:g} GiB wall, JVM start included | {run.wall_s:.1f} s "
              f"| {'<= 60 s' if run.size_gib == 1 else '-'} | {met if run.size_gib == 1 else '-'} |")
        print(f"| scan {run.size_gib:g} GiB per GiB | {run.wall_s / run.size_gib:.1f} s/GiB | flat | - |")
        worker = run.peak_kib.get("worker", 0) / 1024
        print(f"| scan {run.size_gib:g} GiB peak RSS of a Python worker | {worker:.0f} MiB | <= 1024 MiB "
              f"| {'yes' if worker <= 1024 else 'no'} |")
        print(f"| scan {run.size_gib:g} GiB peak RSS JVM / Python driver / all processes together | "
              f"{run.peak_kib.get('jvm', 0) / 1024:.0f} / {run.peak_kib.get('driver', 0) / 1024:.0f} / "
              f"{run.peak_total_kib / 1024:.0f} MiB | - | - |")
    finished = [r for r in runs if not r.failed]
    if len(finished) >= 2:
        a, b = min(finished, key=lambda r: r.size_gib), max(finished, key=lambda r: r.size_gib)
        marginal = (b.wall_s - a.wall_s) / (b.size_gib - a.size_gib)
        ratio = marginal / kp_per_gib
        print(f"| marginal cost per extra GiB ({a.size_gib:g} to {b.size_gib:g} GiB) | {marginal:.1f} s/GiB "
              f"| <= {kp_per_gib / 2:.1f} s/GiB | {'yes' if ratio <= 0.5 else 'no'} |")
        print(f"| marginal cost / kafka-python's iteration of 1 GiB | {ratio:.2f} | <= 0.50 "
              f"| {'yes' if ratio <= 0.5 else 'no'} |")
    print(f"| kafka-python iteration, one core | {kp_per_gib:.1f} s/GiB | - | - |")
    print()
    for run in runs:
        print("\n".join(_stage_table(run)))
    print(f"scan rows: {[(r.size_gib, r.rows) for r in finished]}")


if __name__ == "__main__":
    main()
