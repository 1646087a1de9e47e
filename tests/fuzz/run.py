"""The long mutation run: ``python -m tests.fuzz.run --mutations 10000`` (``make fuzz``).

Applies every operator of ``tests.fuzz.mutations`` to every seed of every target of
``tests.fuzz.targets`` in turn, with a seeded ``random.Random`` (so a run is reproducible from
its ``--seed``), checks the same properties as the hypothesis suite, and prints a table of
targets x operators: mutations, failures, time and the largest ``tracemalloc`` peak measured.
Every failure is printed with what reproduces it. Exit status 1 if any mutation failed.
"""

from __future__ import annotations

import argparse
import platform
import random
import resource
import sys
import time
import traceback
from collections import defaultdict
from datetime import UTC, datetime

from tests.fuzz.mutations import OPERATORS
from tests.fuzz.targets import TARGETS, Seed

MiB = 1 << 20


def _row(cells: list[str], widths: list[int]) -> str:
    return "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths, strict=True)))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mutations", type=int, default=10_000, help="total number of mutations (default 10000)")
    parser.add_argument("--seed", type=int, default=20261123, help="random seed (default 20261123)")
    parser.add_argument("--targets", default=",".join(TARGETS), help="comma-separated targets (default: all)")
    args = parser.parse_args(argv)

    names = [t for t in args.targets.split(",") if t]
    unknown = [t for t in names if t not in TARGETS]
    if unknown:
        parser.error(f"unknown targets {unknown}; known: {', '.join(TARGETS)}")
    seeds: dict[str, list[Seed]] = {name: TARGETS[name].seeds() for name in names}
    plan = [(name, seed, op) for name in names for seed in seeds[name] for op in OPERATORS]
    if not plan:
        print("no seeds found (is the sample dump present?)", file=sys.stderr)
        return 2

    rng = random.Random(args.seed)
    count: dict[tuple[str, str], int] = defaultdict(int)
    failed: dict[tuple[str, str], int] = defaultdict(int)
    spent: dict[tuple[str, str], float] = defaultdict(float)
    peak: dict[tuple[str, str], int] = defaultdict(int)
    failures: list[str] = []
    started = time.perf_counter()
    for i in range(args.mutations):
        name, seed, op = plan[i % len(plan)]
        damaged = OPERATORS[op](seed.data, rng.randint, seed.fields)
        t0 = time.perf_counter()
        try:
            measured = TARGETS[name].check(seed, damaged)
        except Exception as err:  # noqa: BLE001 - every failure is counted and printed, the run goes on
            failed[(name, op)] += 1
            if len(failures) < 50:
                failures.append(
                    f"#{i} {name} / {seed.name} / {op}: {type(err).__name__}: {str(err)[:300]}\n"
                    f"    damaged {len(damaged)} bytes (seed {len(seed.data)}); head {damaged[:48].hex()}\n"
                    f"    {traceback.format_exc(limit=-2).strip().splitlines()[-3:]}"
                )
            measured = None
        spent[(name, op)] += time.perf_counter() - t0
        count[(name, op)] += 1
        if measured is not None:
            peak[(name, op)] = max(peak[(name, op)], measured)
    elapsed = time.perf_counter() - started

    widths = [18, 10, 9, 9, 12]
    print(f"txn-audit mutation run {datetime.now(UTC):%Y-%m-%dT%H:%M:%SZ}: {args.mutations} mutations, "
          f"seed {args.seed}, {platform.node() or '?'} ({platform.machine()}, python {platform.python_version()})")
    for name in names:
        print()
        print(f"{name} ({len(seeds[name])} seeds)")
        print(_row(["operator", "mutations", "failures", "seconds", "peak KiB"], widths))
        for op in OPERATORS:
            key = (name, op)
            print(_row([op, str(count[key]), str(failed[key]), f"{spent[key]:.2f}",
                        str(peak[key] // 1024) if key in peak else "-"], widths))
    total_failed = sum(failed.values())
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
    print()
    print(f"total: {sum(count.values())} mutations, {total_failed} failures, {elapsed:.1f} s, "
          f"max RSS {rss} MiB")
    for line in failures:
        print(line)
    return 1 if total_failed else 0


if __name__ == "__main__":
    sys.exit(main())
