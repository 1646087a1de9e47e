"""Paired comparison of two versions of txn-audit: full CLI scans of one dump, taking turns.

    .venv/bin/python benchmarks/pair_bench.py DUMP --a TREE_A --b TREE_B --rounds 8

A side is a source tree, usually a worktree of one commit (``git worktree add ../a COMMIT``),
run with this environment's Python and ``PYTHONPATH=TREE``, plus environment variables for that
side alone (``--env-b JAVA_TOOL_OPTIONS=-XX:...``, ``--env-b "PYSPARK_SUBMIT_ARGS=--conf k=v
pyspark-shell"``): the same tree on both sides compares settings, and on both sides with no
variables shows the noise of the machine itself (an A/A run).

A small VM's speed drifts by tens of percent within an hour, so single scans compare nothing.
Here the dump is read into the page cache, each side scans it once to warm its caches (numba's
compiled kernels are per source tree; the JVM's class archive is written by a first session),
then the sides take turns in ABBA order (A B, B A, A B, ...), a few seconds apart (a JVM still
ending slows the next scan's start). Each scan is ``scan_bench.run_scan``'s, ``txn-audit scan DUMP
--out DIR --format json --no-progress`` (the full audit unless ``--scan-flags`` say otherwise):
the wall time, JVM start included, and the CPU time of the driver, the JVM and the Python
workers (``/proc``, as ``scan_bench.Sampler`` samples it). The report gives each pair, then per
measure the medians, the mean paired difference B - A with its 95 % Student t interval, how
many pairs B was lower in and the sign test's p-value. Run an A/A comparison first: on a small
VM, differences of a second come and go with no change at all. The two sides' outputs of the
first measured round are compared as soon as it ends, every table (rows in any order) and the
findings: a change meant only to be faster must leave them equal.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.dataset as ds

sys.path.insert(0, str(Path(__file__).resolve().parent))
from scan_bench import GIB, ScanRun, run_scan, warm  # noqa: E402  (a sibling module of this script)

#: the process roles whose CPU time the report lists, besides their sum
ROLES = ("driver", "jvm", "worker")


@dataclass(frozen=True)
class Side:
    name: str
    tree: Path
    env: dict[str, str] = field(default_factory=dict)

    def describe(self) -> str:
        extra = " ".join(f"{key}={value!r}" for key, value in sorted(self.env.items()))
        return f"{self.name} = {self.tree}" + (f" with {extra}" if extra else "")


@dataclass(frozen=True)
class Paired:
    """The paired differences B - A of one measure: their mean with its 95 % Student t interval
    (None for a single pair), in how many of the ``n`` pairs B was lower and in how many higher,
    and the two-sided sign test's p-value of those counts."""

    mean: float
    interval: tuple[float, float] | None
    b_lower: int
    b_higher: int
    n: int
    sign_p: float


#: Student's t, two-sided 95 %: the 0.975 quantile for 1 to 30 degrees of freedom (more: the
#: value for 30, a little wider than the exact one)
T_975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145,
         2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048,
         2.045, 2.042)


def turns(rounds: int) -> list[tuple[str, str]]:
    """The order of the two sides in each round: A B, then B A, and so on (ABBA), so that a
    drift of the machine's speed over the rounds weighs on both sides alike."""
    return [("a", "b") if index % 2 == 0 else ("b", "a") for index in range(rounds)]


def sign_test(lower: int, higher: int) -> float:
    """The two-sided exact sign test's p-value of ``lower`` against ``higher`` (ties left out)."""
    n = lower + higher
    if n == 0:
        return 1.0
    tail: float = sum(math.comb(n, k) for k in range(min(lower, higher) + 1)) / 2**n
    return min(1.0, 2 * tail)


def paired(a: list[float], b: list[float]) -> Paired:
    """The differences ``b[i] - a[i]``: their mean, its 95 % t interval, and the sign test.

    A small VM's noise comes in bursts (another tenant, a slow minute), which a few pairs cannot
    average out: the t interval and the sign test, both wider than a bootstrap's for a handful of
    pairs, err on the side of "no difference"; an A/A run (one tree on both sides) shows what
    the machine alone gives."""
    if len(a) != len(b) or not a:
        raise ValueError("paired measures need as many values on each side, at least one")
    diffs = np.asarray(b, dtype=float) - np.asarray(a, dtype=float)
    mean = float(diffs.mean())
    interval = None
    if len(diffs) > 1:
        half = T_975[min(len(diffs) - 1, len(T_975)) - 1] * float(diffs.std(ddof=1)) / math.sqrt(len(diffs))
        interval = (mean - half, mean + half)
    lower, higher = int((diffs < 0).sum()), int((diffs > 0).sum())
    return Paired(mean, interval, lower, higher, len(diffs), sign_test(lower, higher))


def scan(side: Side, dump: Path, out: Path, flags: list[str], size_gib: float) -> ScanRun:
    """One full CLI scan of ``dump`` (``size_gib``) into ``out`` with ``side``'s code and environment."""
    run = run_scan(dump, out, size_gib, flags, env={"PYTHONPATH": str(side.tree), **side.env}, cwd=side.tree)
    if run.failed:
        raise SystemExit(f"side {side.name}: the scan of {dump} failed with exit code {run.exit_code}: {run.failed}")
    return run


def _sorted_table(folder: Path) -> pa.Table:
    """A table's rows in one order: sorted by every column that can be a sort key."""
    table = ds.dataset(str(folder), format="parquet").to_table()
    keys = [(f.name, "ascending") for f in table.schema
            if not pa.types.is_nested(f.type) and not pa.types.is_dictionary(f.type)]
    return table.sort_by(keys) if keys else table


def _tables(tables_dir: Path) -> set[str]:
    return {p.name for p in tables_dir.iterdir() if p.is_dir() and not p.name.startswith(("_", "."))}


def differing_outputs(a: Path, b: Path) -> list[str]:
    """What differs between two scans' outputs (their ``--out`` folders): each table whose rows
    are not the same (in any order), a table only one of them has, and the findings of
    ``summary.json``. Empty when they are the same."""
    differ: list[str] = []
    a_tables, b_tables = _tables(a / "tables"), _tables(b / "tables")
    differ += [f"{name} (only in A)" for name in sorted(a_tables - b_tables)]
    differ += [f"{name} (only in B)" for name in sorted(b_tables - a_tables)]
    for name in sorted(a_tables & b_tables):
        left, right = _sorted_table(a / "tables" / name), _sorted_table(b / "tables" / name)
        if not left.schema.equals(right.schema) or not left.equals(right):
            differ.append(name)
    findings = [json.loads((out / "summary.json").read_text()).get("findings") for out in (a, b)]
    if findings[0] != findings[1]:
        differ.append("summary.json findings")
    return differ


def _measures(scans: list[ScanRun]) -> dict[str, list[float]]:
    out = {"wall s": [s.wall_s for s in scans], "CPU s, all": [sum(s.cpu_s.values()) for s in scans]}
    for role in ROLES:
        out[f"CPU s, {role}"] = [s.cpu_s.get(role, 0.0) for s in scans]
    return out


def report(a: list[ScanRun], b: list[ScanRun]) -> list[str]:
    """The table of every measure: medians, mean difference B - A with its interval, the pairs
    where B was lower, and the sign test."""
    lines = ["| measure | A median | B median | B - A mean | 95 % t interval | B lower in | sign test p |",
             "| --- | ---: | ---: | ---: | --- | ---: | ---: |"]
    for (name, left), right in zip(_measures(a).items(), _measures(b).values(), strict=True):
        p = paired(left, right)
        interval = "-" if p.interval is None else f"{p.interval[0]:+.2f} to {p.interval[1]:+.2f}"
        lines.append(f"| {name} | {np.median(left):.2f} | {np.median(right):.2f} | {p.mean:+.2f} | {interval} | "
                     f"{p.b_lower}/{p.n} | {p.sign_p:.2f} |")
    return lines


def _outputs_line(differ: list[str]) -> str:
    return "outputs: every table and the findings the same" if not differ else f"outputs differ: {', '.join(differ)}"


def _env_pairs(values: list[str], option: str) -> dict[str, str]:
    env = {}
    for value in values:
        key, sep, setting = value.partition("=")
        if not sep or not key:
            raise SystemExit(f"{option} takes KEY=VALUE, not {value!r}")
        env[key] = setting
    return env


def _tree(value: str) -> Path:
    tree = Path(value).resolve()
    if not (tree / "txn_audit" / "__init__.py").is_file():
        raise SystemExit(f"{value} is not a txn-audit source tree (no txn_audit/__init__.py)")
    return tree


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("dump", type=Path, help="the dump both sides scan")
    parser.add_argument("--a", required=True, help="side A's source tree")
    parser.add_argument("--b", required=True, help="side B's source tree (the same as A to compare settings)")
    parser.add_argument("--env-a", action="append", default=[], metavar="KEY=VALUE",
                        help="an environment variable for side A's scans (repeatable)")
    parser.add_argument("--env-b", action="append", default=[], metavar="KEY=VALUE",
                        help="an environment variable for side B's scans (repeatable)")
    parser.add_argument("--rounds", type=int, default=8, help="measured rounds, each a scan of each side")
    parser.add_argument("--pause", type=float, default=3.0, help="seconds between two scans")
    parser.add_argument("--no-warmup", action="store_true", help="measure from the first scan of each side")
    parser.add_argument("--scan-flags", default="",
                        help="more flags for txn-audit scan, as one string: --scan-flags=\"--no-quality\"")
    args = parser.parse_args(argv)
    if args.rounds < 1:
        raise SystemExit("--rounds must be at least 1")
    if not args.dump.exists():
        raise SystemExit(f"no such dump: {args.dump}")
    sides = {"a": Side("A", _tree(args.a), _env_pairs(args.env_a, "--env-a")),
             "b": Side("B", _tree(args.b), _env_pairs(args.env_b, "--env-b"))}
    flags = args.scan_flags.split()
    size_gib = warm(args.dump) / GIB
    print(f"# {sides['a'].describe()}\n# {sides['b'].describe()}\n# dump {args.dump}: "
          f"{size_gib * 1024:.0f} MiB read into the page cache", flush=True)
    scans: dict[str, list[ScanRun]] = {"a": [], "b": []}
    with tempfile.TemporaryDirectory(prefix="pair-bench-") as tmp:
        work = Path(tmp)
        if not args.no_warmup:
            for key in ("a", "b"):
                warm_up = scan(sides[key], args.dump, work / "warm", flags, size_gib)
                print(f"# warm-up {sides[key].name}: {warm_up.wall_s:.1f} s", flush=True)
                time.sleep(args.pause)
        differ: list[str] = []
        for index, order in enumerate(turns(args.rounds)):
            parts = []
            for key in order:
                out = work / key
                done = scan(sides[key], args.dump, out, flags, size_gib)
                scans[key].append(done)
                cpu = " ".join(f"{role} {done.cpu_s.get(role, 0.0):.1f}" for role in ROLES)
                parts.append(f"{sides[key].name} {done.wall_s:.1f} s (CPU {cpu})")
                time.sleep(args.pause)
            print(f"round {index + 1}: " + ", ".join(parts), flush=True)
            if index == 0:  # the first round's outputs, compared while the next rounds wait
                differ = differing_outputs(work / "a", work / "b")
                print(_outputs_line(differ), flush=True)
    print()
    print("\n".join(report(scans["a"], scans["b"])))
    print()
    print(_outputs_line(differ))


if __name__ == "__main__":
    main()
