"""Scale benchmark: the same bytes over many partitions, and over three brokers' copies.

Three dumps of the realistic workload (``realistic_dump.py``), written once into ``--data-dir``
and reused:

* **few**: ``--gib`` of traffic on 16 data partitions (4 topics × 4) and the coordinator's 50;
* **many**: the same bytes dealt to ``--lanes`` sets of 16 data partitions (``--lanes 125``:
  2,000 data partitions, 2,050 in all; ``--lanes 625``: 10,000);
* **rf3**: the **few** dump as a 3-broker cluster with replication factor 3 keeps it: three log
  dirs (``broker-1`` .. ``broker-3``, told apart by ``meta.properties``), each a copy of every
  partition (hard links to the same files: the scan reads each copy's bytes all the same).

Each is scanned by the CLI in a subprocess (``scan_bench.run_scan``: wall time, JVM start
included; the peak RSS of the driver's Python process and of its JVM, sampled from ``/proc``),
``--repeat`` times taking turns, after one scan of **few** that is not counted; the table shows
the medians and the ratios the scale targets are set on: **many** against **few** (≤ 1.5×) with
the cost per partition, **rf3** against **few** (≤ 3×), and the driver's peak RSS (≤ 2 GiB; the
target is set at 10,000 partitions).

Usage::

    python benchmarks/scale_bench.py                     # 0.25 GiB, 2,000 partitions, 1 round
    python benchmarks/scale_bench.py --lanes 625 --repeat 3
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from realistic_dump import GIB, write_realistic_dump  # noqa: E402  (sibling modules of this script)
from scan_bench import ScanRun, expected_findings, machine, run_scan, warm  # noqa: E402

#: the targets of the scale issue: many partitions against 16, three copies against one, driver RSS
MANY_RATIO = 1.5
COPIES_RATIO = 3.0
DRIVER_MIB = 2048
BROKERS = 3
#: findings of a damaged file: one per copy holding it (the rf3 dump's copies share the bytes)
PER_COPY = ("corrupt_batch", "truncated_segment")


@dataclass
class Layout:
    """One dump of the benchmark and its scans."""

    name: str
    dump: Path
    partitions: int  # data and coordinator partitions, one copy each
    copies: int
    runs: list[ScanRun]

    def median_wall(self) -> float:
        return statistics.median(run.wall_s for run in self.runs)

    def peak_mib(self, role: str) -> float:
        return max(run.peak_kib.get(role, 0) for run in self.runs) / 1024

    def cpu_s(self, role: str | None = None) -> float:
        """The median CPU seconds of its scans, of processes in ``role`` (None: all)."""
        return statistics.median(sum(v for k, v in run.cpu_s.items() if role in (None, k)) for run in self.runs)


def realistic(data_dir: Path, gib: float, lanes: int) -> Path:
    """The realistic dump of ``gib`` over ``lanes`` sets of 16 data partitions, written once."""
    dump = data_dir / f"realistic-{gib:g}g-lanes{lanes}"
    if not (dump / "shape.json").exists():
        started = time.perf_counter()
        write_realistic_dump(dump, size_bytes=int(gib * GIB), lanes=lanes)
        print(f"# wrote {dump} in {time.perf_counter() - started:.0f} s", file=sys.stderr)
    return dump


def replicated(one: Path, brokers: int = BROKERS) -> Path:
    """``one`` (a one-broker dump) as ``brokers`` brokers each holding a copy of every partition:
    hard links to its files, each log dir's ``meta.properties`` naming its own node."""
    dump = one.with_name(f"{one.name}-rf{brokers}")
    if (dump / "shape.json").exists():
        return dump
    source = one / "broker-1"
    for node in range(1, brokers + 1):
        target = dump / f"broker-{node}"
        for path in sorted(source.rglob("*")):
            dest = target / path.relative_to(source)
            if path.is_dir():
                dest.mkdir(parents=True, exist_ok=True)
            elif path.name == "meta.properties":
                dest.parent.mkdir(parents=True, exist_ok=True)
                dest.write_text(path.read_text().replace("node.id=1", f"node.id={node}"))
            else:
                dest.parent.mkdir(parents=True, exist_ok=True)
                os.link(path, dest)
    (dump / "shape.json").write_text((one / "shape.json").read_text())
    return dump


def partitions_of(dump: Path) -> int:
    """The partitions of one copy: the folders of the first log dir."""
    first = sorted(p for p in dump.iterdir() if p.is_dir())[0]
    return sum(1 for p in first.iterdir() if p.is_dir())


def table(layouts: dict[str, Layout]) -> list[str]:
    few, many, rf3 = layouts["few"], layouts["many"], layouts["rf3"]
    base = few.median_wall()
    lines = ["| dump | partitions × copies | scan wall (median) | vs few | wall per further partition copy | "
             "CPU (driver / all) | CPU per further partition copy (driver / all) | driver peak RSS (Python / JVM) "
             "| runs |", "|---|---|---|---|---|---|---|---|---|"]
    for layout in (few, many, rf3):
        extra = layout.partitions * layout.copies - few.partitions
        per = f"{(layout.median_wall() - base) / extra * 1000:.1f} ms" if extra > 0 else "—"
        cpu = (f"{(layout.cpu_s('driver') - few.cpu_s('driver')) / extra * 1000:.1f} / "
               f"{(layout.cpu_s() - few.cpu_s()) / extra * 1000:.1f} ms") if extra > 0 else "—"
        lines.append(
            f"| {layout.name} | {layout.partitions:,} × {layout.copies} | {layout.median_wall():.1f} s | "
            f"{layout.median_wall() / base:.2f}× | {per} | {layout.cpu_s('driver'):.1f} / {layout.cpu_s():.1f} s | "
            f"{cpu} | {layout.peak_mib('driver'):.0f} / {layout.peak_mib('jvm'):.0f} MiB | "
            f"{', '.join(f'{r.wall_s:.1f}' for r in layout.runs)} |")
    many_ratio, copies_ratio = many.median_wall() / base, rf3.median_wall() / base
    driver = many.peak_mib("driver")
    lines += [
        "",
        f"many partitions vs few: {many_ratio:.2f}× (target <= {MANY_RATIO}×): "
        f"{'met' if many_ratio <= MANY_RATIO else 'NOT met'}",
        f"{BROKERS} copies vs one: {copies_ratio:.2f}× (target <= {COPIES_RATIO}×): "
        f"{'met' if copies_ratio <= COPIES_RATIO else 'NOT met'}",
        f"driver (Python) peak RSS at {many.partitions:,} partitions: {driver:.0f} MiB (target <= {DRIVER_MIB} MiB "
        f"at 10,000): {'met' if driver <= DRIVER_MIB else 'NOT met'}{'' if many.partitions >= 10_000 else ' here'}; "
        f"the JVM's ({many.peak_mib('jvm'):.0f} MiB) is local mode's executor too, its heap set by --driver-memory",
    ]
    return lines


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", type=Path, default=Path(tempfile.gettempdir()) / "txn-audit-scale-bench")
    parser.add_argument("--gib", type=float, default=0.25, help="bytes of each dump (one copy), GiB")
    parser.add_argument("--lanes", type=int, default=125, help="sets of 16 data partitions of the many dump")
    parser.add_argument("--repeat", type=int, default=1, help="scans of each dump, taking turns")
    parser.add_argument("--scan-flags", default="", help="extra flags for txn-audit scan")
    args = parser.parse_args(argv)
    args.data_dir.mkdir(parents=True, exist_ok=True)
    few_dump = realistic(args.data_dir, args.gib, 1)
    dumps = {"few": (few_dump, 1), "many": (realistic(args.data_dir, args.gib, args.lanes), 1),
             "rf3": (replicated(few_dump), BROKERS)}
    layouts = {name: Layout(name, dump, partitions_of(dump), copies, []) for name, (dump, copies) in dumps.items()}
    expected = {name: {kind: count * (layout.copies if kind in PER_COPY else 1)
                       for kind, count in expected_findings(layout.dump).items()}
                for name, layout in layouts.items()}
    # one scan not counted: one-off costs (numba compiling its cache on a fresh install, the
    # first JVM's class loading) would otherwise land on whichever dump is timed first
    first = run_scan(few_dump, args.data_dir / "out-warm-up", args.gib, args.scan_flags.split())
    print(f"# warm-up scan of few: {first.wall_s:.1f} s, not counted", file=sys.stderr)
    for turn in range(args.repeat):
        for name, layout in layouts.items():
            warm(layout.dump)
            run = run_scan(layout.dump, args.data_dir / f"out-{name}", args.gib, args.scan_flags.split())
            layout.runs.append(run)
            verdict = "as planted" if run.finding_kinds == expected[name] else f"UNEXPECTED {run.finding_kinds}"
            print(f"# turn {turn + 1}: {name} ({layout.partitions:,} partitions × {layout.copies}) "
                  f"{run.wall_s:.1f} s, findings {verdict}", file=sys.stderr)
    print(f"# {machine()}; {args.gib:g} GiB of realistic traffic per copy; {args.repeat} scan(s) of each")
    print("\n".join(table(layouts)))
    print(json.dumps({name: {"walls": [r.wall_s for r in layout.runs], "partitions": layout.partitions,
                             "copies": layout.copies, "driver_mib": layout.peak_mib("driver"),
                             "jvm_mib": layout.peak_mib("jvm"), "cpu_s": [r.cpu_s for r in layout.runs]}
                      for name, layout in layouts.items()}))


if __name__ == "__main__":
    main()
