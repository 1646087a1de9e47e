"""The warehouse of nightly runs: every table's history, partitioned by audit date.

Layout (Hive-style partition folders, so Spark and ``pyarrow.dataset(..., partitioning="hive")``
both read ``audit_date`` as a column; the Parquet files themselves do not hold it)::

    <warehouse>/<table>/audit_date=YYYY-MM-DD/part-00000.parquet ...
    <warehouse>/runs/audit_date=YYYY-MM-DD/summary.json, fixes.sh, report.html, quality/, run.json

A date's ``run.json`` records the version of the schemas its tables were written with
(``schema_version``; none: version 1); readers of earlier dates bring them to the current
schemas with ``txn_audit.migrate`` (``explore.load_history``).

Publishing a date replaces each of its partition folders in one step (built in a hidden
sibling, then swapped in), so readers see the old partition or the new one, never a mix; a
rerun of the same date leaves one copy, and other dates are never touched. The run folder is
published last: a date is listed by ``audit_dates`` once its run is complete.

The warehouse may also be an ``s3://``, ``webhdfs://`` or ``hdfs://`` URI: the scan's output is
still built locally, then published by ``txn_audit.stores`` (HDFS: the same swap, by renames in
the NameNode; S3: fresh file names and the date's ``runs/audit_date=D/run.json`` written last as
the commit point, which ``audit_dates`` lists dates by; that module's docstring says what a
reader listing the folders can see meanwhile).
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlparse

import pyarrow.parquet as pq

from txn_audit.errors import UsageError
from txn_audit.migrate import SCHEMA_VERSION, manifest_version
from txn_audit.outputs import FIXES_SCRIPT, MARKER, link_tree, staged_output, write_json_atomic
from txn_audit.schemas import ALL_TABLES

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

PARTITION_COLUMN = "audit_date"
RUNS = "runs"
RUN_FILES = ("summary.json", FIXES_SCRIPT, "report.html")
RUN_FOLDERS = ("quality",)
RUN_MANIFEST = "run.json"
_PARTITION = re.compile(rf"^{PARTITION_COLUMN}=(\d{{4}}-\d{{2}}-\d{{2}})$")
# Spark names its files part-<task>-<write job uuid>-c<n>.<codec>.parquet
_SPARK_FILE = re.compile(r"^part-(\d+)-([0-9a-f-]{36})")


@dataclass(frozen=True)
class PublishedRun:
    """Where one audit date went: a partition folder and a row count per table, and the run folder."""

    audit_date: date
    warehouse: Path | str  # a local folder, or the URI of a store
    tables: dict[str, Path | str]
    row_counts: dict[str, int]
    run_dir: Path | str

    def to_json(self) -> dict[str, Any]:
        return {
            "audit_date": self.audit_date.isoformat(),
            "warehouse": str(self.warehouse),
            "tables": {name: str(path) for name, path in self.tables.items()},
            "row_counts": self.row_counts,
            "run_dir": str(self.run_dir),
        }


def partition_name(audit_date: date) -> str:
    """``audit_date=YYYY-MM-DD``: the folder name of one date's partition."""
    return f"{PARTITION_COLUMN}={audit_date.isoformat()}"


def resolve(location: str | Path) -> Path:
    """A local folder from a path or a ``file://`` URI; other schemes are refused (a warehouse on a
    store is handled by ``txn_audit.stores``, see ``check_location``)."""
    if isinstance(location, Path):
        return location.absolute()
    parsed = urlparse(location)
    if parsed.scheme == "file":
        if parsed.netloc not in ("", "localhost"):
            raise UsageError(f"{location}: a file:// URI must name a local path (file:///path)")
        return Path(unquote(parsed.path)).absolute()
    if parsed.scheme and len(parsed.scheme) > 1:  # "C:" is a drive, not a scheme
        raise UsageError(f"{location}: only local paths and file:// URIs are supported, not {parsed.scheme}://")
    return Path(location).absolute()


def check_location(warehouse: str | Path) -> None:
    """Refuse a warehouse that cannot be used (``UsageError``) before a scan, not after: a bad
    path or URI, a store that cannot be reached."""
    from txn_audit import stores

    if stores.is_remote(warehouse):
        assert isinstance(warehouse, str)
        stores.check_warehouse(warehouse)
    else:
        resolve(warehouse)


def publish_run(spark: SparkSession | None, scan_out: Path, warehouse: str | Path, audit_date: date,
                run: str | None = None) -> PublishedRun:
    """Publish a scan's output folder (``txn-audit scan --out``) as ``audit_date`` of ``warehouse``.

    Every table of ``scan_out/tables/`` becomes ``<warehouse>/<table>/audit_date=.../`` (its
    files in a fixed order under fixed names, so the same scan gives the same partition), then
    the report, ``summary.json`` and ``quality/`` go to ``<warehouse>/runs/audit_date=.../``.
    ``spark``, when given, forgets what it had listed of these tables, so it reads the new files.
    ``run`` names the run on a store (``stores.new_run_id``, fresh by default).
    """
    from txn_audit import stores

    source = Path(scan_out)
    missing = [name for name in ALL_TABLES if not (source / "tables" / name).is_dir()]
    if missing or not (source / "summary.json").is_file():
        raise UsageError(f"{source} is not a complete scan output (missing: {', '.join(missing) or 'summary.json'})")
    if stores.is_remote(warehouse):
        assert isinstance(warehouse, str)
        return _publish_to_store(source, warehouse, audit_date, run)
    root = resolve(warehouse)
    if root.exists() and not root.is_dir():
        raise UsageError(f"warehouse {root} is a file, not a folder")
    part = partition_name(audit_date)
    for target in [*(root / name / part for name in ALL_TABLES), root / RUNS / part]:
        if target.is_dir() and any(target.iterdir()) and not (target / MARKER).exists():
            raise UsageError(f"{target} holds files that txn-audit did not write; move them away or use another "
                             "warehouse")
    tables: dict[str, Path | str] = {}
    row_counts: dict[str, int] = {}
    for name, schema in ALL_TABLES.items():
        if PARTITION_COLUMN in schema.names:
            raise ValueError(f"table {name} has a column named {PARTITION_COLUMN}, the warehouse's partition column")
        files = _data_files(source / "tables" / name)
        target = root / name / part
        with staged_output(target) as stage:
            if files:
                for index, file in enumerate(files):
                    _link_or_copy(file, stage / f"part-{index:05d}.parquet")
            else:  # an empty table still has its schema on disk
                pq.write_table(schema.empty_table(), stage / "part-00000.parquet")
        tables[name] = target
        row_counts[name] = sum(pq.read_metadata(file).num_rows for file in files)
    run_dir = root / RUNS / part
    with staged_output(run_dir) as stage:
        for run_file in RUN_FILES:
            if (source / run_file).is_file():
                _link_or_copy(source / run_file, stage / run_file)
        for folder in RUN_FOLDERS:
            if (source / folder).is_dir():
                link_tree(source / folder, stage / folder)
        write_json_atomic(stage / RUN_MANIFEST, run_manifest(audit_date, row_counts))
    if spark is not None:
        for name in ALL_TABLES:
            spark.catalog.refreshByPath(str(root / name))
    return PublishedRun(audit_date=audit_date, warehouse=root, tables=tables, row_counts=row_counts, run_dir=run_dir)


def run_manifest(audit_date: date, row_counts: dict[str, int]) -> dict[str, Any]:
    """A date's run manifest (``runs/audit_date=D/run.json``): its date, each table's rows and the
    version of the schemas its tables were written with (``migrate.SCHEMA_VERSION``)."""
    return {"audit_date": audit_date.isoformat(), "row_counts": row_counts, "schema_version": SCHEMA_VERSION}


def schema_version(warehouse: str | Path, audit_date: date) -> int:
    """The schema version of ``audit_date``'s tables in the local ``warehouse``, from its run
    manifest (``migrate.manifest_version``: 1 when it records none, as before versions were)."""
    import json

    path = resolve(warehouse) / RUNS / partition_name(audit_date) / RUN_MANIFEST
    try:
        manifest = json.loads(path.read_text())
    except (OSError, ValueError):
        return 1
    return manifest_version(manifest) if isinstance(manifest, dict) else 1


def _publish_to_store(source: Path, warehouse: str, audit_date: date, run: str | None) -> PublishedRun:
    """``publish_run`` to a store: each table's files in row order and the run's files (linked
    into a local folder of this run), handed to ``stores.publish_date``."""
    from txn_audit import stores

    store = stores.check_warehouse(warehouse)
    tables: dict[str, list[Path]] = {}
    row_counts: dict[str, int] = {}
    with tempfile.TemporaryDirectory(prefix="txn-audit-publish-") as tmp:
        for name, schema in ALL_TABLES.items():
            if PARTITION_COLUMN in schema.names:
                raise ValueError(f"table {name} has a column named {PARTITION_COLUMN}, the warehouse's partition "
                                 "column")
            files = _data_files(source / "tables" / name)
            row_counts[name] = sum(pq.read_metadata(file).num_rows for file in files)
            if not files:  # an empty table still has its schema in the warehouse
                empty = Path(tmp) / "empty" / f"{name}.parquet"
                empty.parent.mkdir(exist_ok=True)
                pq.write_table(schema.empty_table(), empty)
                files = [empty]
            tables[name] = files
        run_dir = Path(tmp) / "run"
        run_dir.mkdir()
        for run_file in RUN_FILES:
            if (source / run_file).is_file():
                _link_or_copy(source / run_file, run_dir / run_file)
        for folder in RUN_FOLDERS:
            if (source / folder).is_dir():
                link_tree(source / folder, run_dir / folder)
        uris = stores.publish_date(store, tables, run_dir, audit_date,
                                   run_manifest(audit_date, row_counts), run)
    return PublishedRun(audit_date=audit_date, warehouse=store.display,
                        tables={name: uris[name] for name in ALL_TABLES}, row_counts=row_counts,
                        run_dir=uris["runs"])


def audit_dates(warehouse: str | Path) -> list[date]:
    """The dates whose run is complete in ``warehouse``, oldest first."""
    from txn_audit import stores

    if stores.is_remote(warehouse):
        assert isinstance(warehouse, str)
        return stores.audit_dates(stores.open_store(warehouse, "--warehouse"))
    runs = resolve(warehouse) / RUNS
    if not runs.is_dir():
        return []
    found = []
    for entry in runs.iterdir():
        match = _PARTITION.match(entry.name)
        if match and entry.is_dir():
            try:
                found.append(date.fromisoformat(match.group(1)))
            except ValueError:
                continue
    return sorted(found)


def _data_files(folder: Path) -> list[Path]:
    """The Parquet files of a table folder in the order of its rows: write jobs oldest first
    (a table appended to has several), and within a job by task number."""
    files = [
        p for p in folder.iterdir()
        if p.is_file() and p.name.endswith(".parquet") and not p.name.startswith(("_", "."))
    ]
    jobs: dict[str, list[tuple[int, Path]]] = {}
    for path in files:
        match = _SPARK_FILE.match(path.name)
        job, task = (match.group(2), int(match.group(1))) if match else (path.name, 0)
        jobs.setdefault(job, []).append((task, path))
    written = {job: min(p.stat().st_mtime_ns for _, p in members) for job, members in jobs.items()}
    ordered = sorted(jobs, key=lambda job: (written[job], job))
    return [path for job in ordered for _, path in sorted(jobs[job])]


def _link_or_copy(source: Path, dest: Path) -> None:
    try:
        os.link(source, dest)
    except OSError:
        shutil.copy2(source, dest)
