"""Prove a refactor leaves every output unchanged: snapshot the scans of a commit, then compare two snapshots.

``snapshot OUT_DIR [--only NAME ...]`` scans, in one local SparkSession, every scenario the corpus
tests scan, the way they scan it, and writes a digest of each scan under ``OUT_DIR/<scenario>/``:

- ``realcorpus/<name>``: ``../shared/realcorpus/<name>/logdirs`` (or ``$TXN_AUDIT_REALCORPUS``) at
  find-hanging's run time with its one-minute timeout (``tests/audit/test_scan_realcorpus.py``);
- ``realcorpus-text/<name>``: the same scenario's ``tools/`` folder as a text dump (``input_kind="text"``);
- ``kafka-<version>/<name>``: every scenario of ``tests/corpus`` (``tests/kafkacorpus.py``), as
  ``tests/audit/test_scan_kafka_corpus.py`` scans its log dirs (not its text dumps, which would
  double a snapshot's time);
- ``sample``: the bundled ``sample_data/dump`` at its manifest's ``as_of_ms`` (what ``make demo``
  scans, at a fixed audit time), with the default timeout.

Every scan runs the data-quality suites (the default). The HTML report is off: plotly gives each
figure a random ``div`` id, so ``report.html`` differs between two runs of the same code.

A scenario's digest is a folder of JSON-lines files, each line one canonical JSON value (sorted
keys, maps as objects, bytes as hex), the lines sorted, so row order and Parquet file layout do
not matter but every value, and each table's column names and types, do:

- ``tables/<table>.jsonl``: every table folder under the scan's ``tables/`` (raw and derived,
  findings and incidents included; ``_``/``.`` entries skipped), read with pyarrow, plus a line
  with the schema;
- ``summary.jsonl``: ``summary.json``, a line per scalar (``{"key": "summary.partitions", ...}``)
  and a line per element of a list of objects (``{"list": "findings", "row": ...}``);
- ``result_findings.jsonl``, ``result_incidents.jsonl``: ``ScanResult.findings`` and ``.incidents``;
- ``quality.jsonl``: ``quality/results.json`` (each check, the statistics);
- ``error.jsonl``: instead of the above, the exception a scan raised.

Normalized away: absolute paths, in every value of every file: the dump's path (as given and
resolved) becomes ``<dump>`` (``summary.json``'s ``input``), the scan's output folder ``<out>``
(``summary.tables``), the repository ``<repo>``. Dropped from ``summary.json``: the keys in
``VOLATILE_KEYS`` (none today: it holds no wall-clock time, duration of the run, version or host
name; the durations it gives are the scan's options). Not digested: ``report.html`` (off),
``quality/docs/`` (Great Expectations' HTML pages, which carry run times), the tables' own
``_ledger.json`` (file names, sizes and modification times of this copy; older commits wrote
``_ingest.json`` and ``_manifest.json``).
``OUT_DIR/_snapshot.json`` keeps where the package was imported from and each scan's seconds;
``compare`` ignores it.

``compare A_DIR B_DIR`` exits 0 when both hold the same digests, else 1, printing for each
differing file its row counts and the first rows found on one side only.

Run it with the interpreter of the checkout to test: the script imports ``txn_audit`` and ``tests``
from the repository it lies in, and hands that folder to Spark's Python workers (``PYTHONPATH``);
the snapshot stops if a worker imports ``txn_audit`` from elsewhere.
"""

from __future__ import annotations

import argparse
import dataclasses
import enum
import fnmatch
import json
import os
import shutil
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import date, datetime
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any

REPO = Path(__file__).resolve().parents[1]

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from txn_audit.api import AuditOptions, ScanResult

#: keys dropped from summary.json (dotted paths) because they differ between two runs of the same code
VOLATILE_KEYS: frozenset[str] = frozenset()
#: the find-hanging timeout the corpus tests judge with
ONE_MINUTE = 60_000
#: rows shown per side for a differing file
SHOWN = 3
SHOWN_CHARS = 600
META = "_snapshot.json"


@dataclass(frozen=True)
class Scenario:
    name: str  # the digest's folder under OUT_DIR, e.g. kafka-4.4.0/healthy
    dump: Path
    options: Callable[[], AuditOptions]  # built after the import of the package under test


def _use_this_checkout() -> None:
    """Import ``txn_audit`` and ``tests`` from this repository, here and in Spark's Python workers."""
    sys.path.insert(0, str(REPO))
    given = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = str(REPO) + (os.pathsep + given if given else "")


def scenarios() -> list[Scenario]:
    """Every scenario a snapshot scans, in the order scanned."""
    from tests.audit.test_scan_realcorpus import _find_hanging_time
    from tests.kafkacorpus import scenarios as kafka_scenarios
    from tests.realcorpus import REALCORPUS, SCENARIOS, scenario_dir
    from txn_audit.api import AuditOptions

    def corpus_options(as_of_ms: int, input_kind: str = "auto") -> Callable[[], AuditOptions]:
        return lambda: AuditOptions(as_of_ms=as_of_ms, max_transaction_timeout_ms=ONE_MINUTE, progress=False,
                                    report=False, input_kind=input_kind)

    if not SCENARIOS:
        print(f"warning: no real corpus at {REALCORPUS} (set TXN_AUDIT_REALCORPUS): its scenarios are left out",
              file=sys.stderr)
    found = [Scenario(f"realcorpus/{name}", scenario_dir(name) / "logdirs", corpus_options(_find_hanging_time(name)))
             for name in SCENARIOS]
    found += [Scenario(f"realcorpus-text/{name}", scenario_dir(name) / "tools",
                       corpus_options(_find_hanging_time(name), "text")) for name in SCENARIOS]
    found += [Scenario(f"kafka-{s.version}/{s.name}", s.folder / "logdirs", corpus_options(s.as_of_ms))
              for s in kafka_scenarios()]
    sample = REPO / "sample_data" / "dump"
    as_of_ms = int(json.loads((sample / "manifest.json").read_text())["as_of_ms"])
    found.append(Scenario("sample", sample, lambda: AuditOptions(as_of_ms=as_of_ms, progress=False, report=False)))
    return found


# -- canonical lines ------------------------------------------------------------------------------


def _plain(value: Any) -> Any:
    """``value`` as JSON can hold it: enums by value, dataclasses as objects, tuples as lists."""
    if isinstance(value, enum.Enum):
        return _plain(value.value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        items = [_plain(v) for v in value]
        return sorted(items, key=repr) if isinstance(value, set | frozenset) else items
    if isinstance(value, bytes):
        return {"bytes": value.hex()}
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, Decimal | Path):
        return str(value)
    return value


class Canon:
    """Canonical JSON lines, with the absolute paths of one scan replaced by placeholders."""

    def __init__(self, paths: dict[str, str]) -> None:
        # the longest first: the dump lies inside the repository
        self.paths = sorted(((k, v) for k, v in paths.items() if k), key=lambda kv: -len(kv[0]))

    def line(self, value: Any) -> str:
        text = json.dumps(_plain(value), sort_keys=True, ensure_ascii=False, separators=(",", ":"))
        for path, placeholder in self.paths:
            text = text.replace(path, placeholder)
        return text

    def write(self, file: Path, values: Iterable[Any]) -> None:
        file.parent.mkdir(parents=True, exist_ok=True)
        file.write_text("".join(f"{line}\n" for line in sorted(self.line(v) for v in values)), encoding="utf-8")


def table_rows(folder: Path) -> list[Any]:
    """A Parquet table folder's schema (one value) and rows, maps as objects."""
    import pyarrow.parquet as pq

    table = pq.read_table(folder)
    schema = {"schema": [[f.name, str(f.type)] for f in table.schema]}
    return [schema, *table.to_pylist(maps_as_pydicts="lossy")]


def summary_rows(value: Any, key: str = "") -> list[Any]:
    """``summary.json`` as lines: one per scalar or list of scalars, one per object of a list of objects."""
    if key in VOLATILE_KEYS:
        return []
    if isinstance(value, dict):
        return [row for k, v in value.items() for row in summary_rows(v, f"{key}.{k}" if key else k)]
    if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
        return [{"list": key, "row": v} for v in value]
    return [{"key": key, "value": value}]


def write_digest(dest: Path, scan_out: Path, result: ScanResult, canon: Canon) -> None:
    tables = scan_out / "tables"
    for folder in sorted(tables.iterdir()):
        if folder.is_dir() and not folder.name.startswith(("_", ".")):
            canon.write(dest / "tables" / f"{folder.name}.jsonl", table_rows(folder))
    canon.write(dest / "summary.jsonl", summary_rows(json.loads((scan_out / "summary.json").read_text())))
    canon.write(dest / "result_findings.jsonl", result.findings)
    canon.write(dest / "result_incidents.jsonl", result.incidents)
    quality = scan_out / "quality" / "results.json"
    if quality.is_file():
        checks = json.loads(quality.read_text())
        rest = {k: v for k, v in checks.items() if k != "results"}
        canon.write(dest / "quality.jsonl", [*({"check": c} for c in checks.get("results", [])), rest])


# -- snapshot -------------------------------------------------------------------------------------


def _worker_package(spark: SparkSession) -> str:
    """Where a Spark Python worker imports ``txn_audit`` from."""
    def where(_: Any) -> str:
        import txn_audit

        return str(Path(txn_audit.__file__).resolve().parent)

    return str(spark.sparkContext.parallelize([0], 1).map(where).collect()[0])


def snapshot(out_dir: Path, only: list[str]) -> int:
    _use_this_checkout()
    import txn_audit
    from txn_audit import api
    from txn_audit.spark import build_session

    chosen = [s for s in scenarios() if not only or any(fnmatch.fnmatchcase(s.name, pattern) for pattern in only)]
    if not chosen:
        print(f"no scenario matches {only}", file=sys.stderr)
        return 2
    driver = str(Path(txn_audit.__file__).resolve().parent)
    spark = build_session("txn-audit-compare-outputs", master="local[2]", shuffle_partitions=2)
    workers = _worker_package(spark)
    print(f"txn_audit from {driver} (driver), {workers} (Spark workers)", flush=True)
    if workers != driver:
        print("the Spark workers import another txn_audit: set PYTHONPATH to this checkout", file=sys.stderr)
        return 2
    out_dir.mkdir(parents=True, exist_ok=True)
    meta: dict[str, Any] = {"txn_audit": driver, "workers": workers, "seconds": {}}
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="compare-outputs-") as tmp:
        for scenario in chosen:
            dest = out_dir / scenario.name
            shutil.rmtree(dest, ignore_errors=True)
            scan_out = Path(tmp) / "scan"
            canon = Canon({str(scenario.dump): "<dump>", str(scenario.dump.resolve()): "<dump>",
                           str(scan_out): "<out>", str(scan_out.resolve()): "<out>", str(REPO): "<repo>"})
            begun = time.monotonic()
            try:
                result = api.scan(scenario.dump, scan_out, spark=spark, options=scenario.options())
                write_digest(dest, scan_out, result, canon)
                said = f"{len(result.findings)} findings, {len(result.incidents)} incidents"
            except Exception as error:  # noqa: BLE001 - a failing scan is an output too, to compare
                shutil.rmtree(dest, ignore_errors=True)
                canon.write(dest / "error.jsonl", [{"type": type(error).__name__, "message": str(error)}])
                said = f"FAILED: {type(error).__name__}: {error}"
            shutil.rmtree(scan_out, ignore_errors=True)
            seconds = time.monotonic() - begun
            meta["seconds"][scenario.name] = round(seconds, 1)
            print(f"{scenario.name}: {seconds:.1f}s ({said})", flush=True)
    meta["total_seconds"] = round(time.monotonic() - started, 1)
    (out_dir / META).write_text(json.dumps(meta, indent=1) + "\n")
    print(f"{len(chosen)} scenarios in {meta['total_seconds']:.0f}s -> {out_dir}", flush=True)
    spark.stop()
    return 0


# -- compare --------------------------------------------------------------------------------------


def _digests(root: Path) -> dict[str, Path]:
    return {str(p.relative_to(root)): p for p in sorted(root.rglob("*.jsonl"))}


def _cut(line: str) -> str:
    return line if len(line) <= SHOWN_CHARS else line[:SHOWN_CHARS] + "..."


def compare(a_dir: Path, b_dir: Path) -> int:
    """0 when both snapshots hold the same digests, else 1, after printing the differences."""
    a, b = _digests(a_dir), _digests(b_dir)
    if not a and not b:
        print(f"no digests in {a_dir} nor {b_dir}", file=sys.stderr)
        return 2
    differing = 0
    for name in sorted(a.keys() | b.keys()):
        if name not in b or name not in a:
            side, there = ("A", a[name]) if name in a else ("B", b[name])
            count = len(there.read_text(encoding="utf-8").splitlines())
            print(f"{name}: only in {side} ({count} rows)")
            differing += 1
            continue
        rows_a = a[name].read_text(encoding="utf-8").splitlines()
        rows_b = b[name].read_text(encoding="utf-8").splitlines()
        only_a = sorted((Counter(rows_a) - Counter(rows_b)).elements())
        only_b = sorted((Counter(rows_b) - Counter(rows_a)).elements())
        if not only_a and not only_b:
            continue
        differing += 1
        print(f"{name}: A {len(rows_a)} rows, B {len(rows_b)} rows; {len(only_a)} only in A, {len(only_b)} only in B")
        for side, rows in (("A", only_a), ("B", only_b)):
            for row in rows[:SHOWN]:
                print(f"  {side}: {_cut(row)}")
    if differing:
        print(f"DIFFERENT: {differing} of {len(a.keys() | b.keys())} files differ")
        return 1
    scans = sum(1 for name in a if name.endswith(("summary.jsonl", "error.jsonl")))
    print(f"EQUAL: {scans} scans, {len(a)} files")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    commands = parser.add_subparsers(dest="command", required=True)
    snap = commands.add_parser("snapshot", help="scan every scenario and write its digest under OUT_DIR")
    snap.add_argument("out_dir", type=Path)
    snap.add_argument("--only", nargs="+", default=[], metavar="NAME",
                      help="scenario names or globs, e.g. sample 'kafka-4.4.0/*' 'realcorpus*/healthy'")
    cmp = commands.add_parser("compare", help="exit 0 when two snapshots are equal, else 1 with the differences")
    cmp.add_argument("a_dir", type=Path)
    cmp.add_argument("b_dir", type=Path)
    args = parser.parse_args(argv)
    if args.command == "snapshot":
        return snapshot(args.out_dir, args.only)
    return compare(args.a_dir, args.b_dir)


if __name__ == "__main__":
    sys.exit(main())
