"""The one programmatic entry point: the CLI, the nightly job and notebooks all call this.

``ingest`` decodes a dump into the raw tables; ``scan`` does ingest + reconstruct + detect and
returns a ``ScanResult`` whose ``to_json()`` is the stable JSON contract of
``txn-audit scan --format json`` (documented in the README).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import tempfile
import threading
from collections import Counter
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from txn_audit.audit_time import AuditTime, CopyEvidence, choose_audit_time
from txn_audit.errors import UsageError
from txn_audit.formats.layout import TRANSACTION_STATE_TOPIC
from txn_audit.ingest.discover import Inventory, discover
from txn_audit.ingest.job import write_raw_tables
from txn_audit.manifest import MANIFEST_FILE, TIME_COLUMNS
from txn_audit.outputs import MARKER, link_tree, staged_output, write_json_atomic
from txn_audit.progress import spark_progress
from txn_audit.results import Finding, Incident, PartitionStatus, ReplicaStatus
from txn_audit.schemas import RAW_TABLES
from txn_audit.severity import SEVERITIES, Severity
from txn_audit.spark import build_session
from txn_audit.timeparse import format_time_ms
from txn_audit.tuning.imports import import_early
from txn_audit.tuning.sql import sized_for
from txn_audit.usage import DEFAULTS, AuditOptions, ExitCode, InputKind, check_out

if TYPE_CHECKING:
    from concurrent.futures import Future
    from datetime import date

    from pyspark.sql import DataFrame, SparkSession

    from txn_audit.detect.incidents import TransactionContext
    from txn_audit.manifest import Manifest
    from txn_audit.quality import SuiteRun
    from txn_audit.tables import RawTables
    from txn_audit.warehouse import PublishedRun

__all__ = [
    "AuditOptions", "ExitCode", "Finding", "IngestResult", "InputKind", "NightlyResult", "PartitionStatus",
    "ReplicaStatus", "ScanResult", "Severity", "ingest", "ingest_exit_code", "run_nightly", "scan",
    "scan_exit_code", "verdict",
]

INGEST_STAMP = "_ingest.json"
JSON_FINDING_KEYS = (
    "kind", "severity", "topic", "partition", "producer_id", "producer_epoch", "transactional_id", "first_offset",
    "last_offset", "first_timestamp_ms", "last_timestamp_ms", "evidence", "remediation", "incident_id",
)
#: an incident's keys in the JSON: every column of the ``incidents`` table
JSON_INCIDENT_KEYS = tuple(f.name for f in dataclasses.fields(Incident))
JSON_PARTITION_KEYS = (
    "topic", "partition", "high_watermark", "hw_source", "last_stable_offset", "log_start_offset",
    "open_transactions", "held_records", "held_bytes", "log_end_offset", "broker_id", "replicas", "chosen_replica",
    "replica_choice_reason",
)


JSON_REPLICA_KEYS = (
    "topic", "partition", "broker_id", "log_dir", "replica_rank", "chosen", "leader_epoch", "metadata_leader",
    "in_isr", "log_start_offset", "log_end_offset", "high_watermark", "hw_source", "checkpoint_high_watermark",
    "last_stable_offset", "open_transactions", "held_records", "divergence", "divergent_offset", "replica_holds",
    "chosen_holds",
)


@dataclass
class IngestResult:
    dump: str  # the dump as given: a local path or a URI (credentials removed)
    tables_dir: Path
    row_counts: dict[str, int]
    issue_counts: dict[str, int]
    brokers: list[int | None]
    log_dirs: list[str]
    partitions: int
    files: int
    decoded_files: int
    reused: bool = False
    issues_preview: list[dict[str, Any]] = field(default_factory=list)
    #: what the dump shows of when it was copied (the default audit time: ``audit_time``)
    copy_evidence: CopyEvidence = field(default_factory=CopyEvidence)

    @property
    def total_issues(self) -> int:
        return sum(self.issue_counts.values())


def ingest_exit_code(result: IngestResult, *, strict: bool) -> ExitCode:
    """Under ``strict`` any decode issue (even a warning) is exit code 3."""
    return ExitCode.CORRUPT_INPUT if strict and result.total_issues else ExitCode.OK


def _fingerprint(inventory: Inventory) -> str:
    """Identity of the input (every file's path, size and modification time) and of the table
    layout, so that tables written by another version of the schemas are never reused."""
    digest = hashlib.sha256()
    digest.update(str(inventory.root).encode() + b"\0")
    for name, schema in sorted(RAW_TABLES.items()):
        digest.update(f"{name}:{schema}\n".encode())
    for row in sorted(inventory.segments, key=lambda r: r["path"]):
        mtime = inventory.mtimes.get(row["path"])
        digest.update(f"{row['path']}\0{row['size_bytes']}\0{-1 if mtime is None else mtime}\n".encode())
    return digest.hexdigest()


#: how many decode issues an ingest's result shows (``IngestResult.issues_preview``)
ISSUES_PREVIEW = 20


def _issue_preview(tables_dir: Path) -> list[dict[str, Any]]:
    """The first ``ISSUES_PREVIEW`` decode issues, errors first, then warnings, then the rest,
    each by file and position; read on the driver with pyarrow (no Spark job: issues are few)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from txn_audit.tables import read_arrow_table

    issues = read_arrow_table(tables_dir, "decode_issues")
    severity = issues["severity"]
    rank = pc.fill_null(pc.if_else(pc.equal(severity, "error"), 0,
                                   pc.if_else(pc.equal(severity, "warning"), 1, 2)), 2)
    keys = pa.table({"rank": rank, "file": issues["file"], "position": issues["position"]})
    # as Spark orders them: ascending, absent positions first
    order = pc.sort_indices(keys, sort_keys=[(name, "ascending", "at_start") for name in keys.column_names])
    shown: list[dict[str, Any]] = issues.take(order[:ISSUES_PREVIEW]).to_pylist()
    return shown


def ingest(
    dump: str | Path,  # a local path, or a file://, s3:// or hdfs:// URI (txn_audit.ingest.storage)
    out: str | Path,
    *,
    spark: SparkSession | None = None,
    progress: bool = True,
    on_stage: Callable[[str], None] | None = None,
    input_kind: str = "auto",
    verbose: bool = False,
) -> IngestResult:
    """Decode every file of ``dump`` into the raw Parquet tables under ``out/<table>/``.

    ``input_kind``: ``logdirs`` (copies of broker log dirs), ``text`` (kafka-dump-log and
    kafka-transactions.sh text output) or ``auto`` (log dirs when there are any, else text).

    ``out`` is replaced as a whole, in one step, once every table is written; until then (and
    if the run fails or is killed) the previous content of ``out`` stays as it was. The dump,
    ``out`` and what the dump holds are checked before Spark starts (``UsageError``); Spark's own
    log lines stay off the console unless ``verbose``.
    """
    target = Path(out)
    check_dump(dump, input_kind)
    check_out(target)
    inventory = discover(dump, input_kind)
    spark = spark or build_session(verbose=verbose, input_bytes=inventory.input_bytes)
    with staged_output(target) as stage:
        result = _ingest(dump, stage, spark=spark, progress=progress, reuse=False, on_stage=on_stage,
                         input_kind=input_kind, inventory=inventory)
    result.tables_dir = target
    return result


def _ingest(
    dump: str | Path,
    out: Path,
    *,
    spark: SparkSession | None,
    progress: bool,
    reuse: bool,
    on_stage: Callable[[str], None] | None,
    input_kind: str = "auto",
    inventory: Inventory | None = None,
) -> IngestResult:
    """Decode into ``out`` (a folder of its own). With ``reuse``, tables already in ``out`` from
    the very same input (same files, sizes and modification times) are kept. ``inventory``: the
    dump as ``discover`` found it, when the caller already did."""
    if inventory is None:
        inventory = discover(dump, input_kind)
    tables_dir = Path(out)
    stamp = tables_dir / INGEST_STAMP
    fingerprint = _fingerprint(inventory)
    spark = spark or build_session()
    reused = False
    # the manifest of the tables' files comes with them: tables without one are written again
    if reuse and stamp.is_file() and (tables_dir / MANIFEST_FILE).is_file() \
            and all((tables_dir / t).is_dir() for t in RAW_TABLES):
        previous = json.loads(stamp.read_text())
        if previous.get("fingerprint") == fingerprint:
            row_counts, issue_counts, reused = previous["row_counts"], previous["issue_counts"], True
    if not reused:
        with spark_progress(spark, "decoding log segments", enabled=progress):
            written = write_raw_tables(spark, inventory, tables_dir, on_stage=on_stage)
        row_counts, issue_counts = written.row_counts, written.issue_counts
        write_json_atomic(
            stamp,
            {"input": str(inventory.root), "fingerprint": fingerprint, "row_counts": row_counts,
             "issue_counts": issue_counts},
        )
    return IngestResult(
        dump=inventory.storage.display,
        tables_dir=tables_dir,
        row_counts=row_counts,
        issue_counts=issue_counts,
        brokers=inventory.brokers,
        log_dirs=[d.rel for d in inventory.log_dirs],
        partitions=len(inventory.replicas),
        files=len(inventory.segments),
        decoded_files=len(inventory.tasks),
        reused=reused,
        issues_preview=_issue_preview(tables_dir),
        copy_evidence=inventory.copy_evidence(),
    )


# -- scan ---------------------------------------------------------------------------------


def check_dump(dump: str | Path, input_kind: str = "auto") -> None:
    """Raise ``UsageError`` unless ``dump`` names an existing folder or file on storage that can be
    read, and is not a mistake ``txn_audit.usage.check_dump`` recognises (a segment file given
    instead of its log dir, an empty folder)."""
    from txn_audit.ingest.storage import DIR, FILE, resolve_dump
    from txn_audit.usage import check_dump as check_dump_argument

    check_dump_argument(dump, input_kind)
    location = resolve_dump(dump)
    if location.info().kind not in (DIR, FILE):
        raise UsageError(f"dump not found: {location.display}")


@dataclass
class ScanResult:
    """What ``scan`` found. ``partitions``, ``replicas`` and ``findings`` are the rows of the
    ``partition_stability``, ``replica_stability`` and ``findings`` tables (``txn_audit.results``);
    ``to_json()`` is the JSON contract."""

    input: str
    as_of_ms: int
    #: the options the scan ran with, at its audit time
    options: AuditOptions
    #: how ``as_of_ms`` was chosen (``txn_audit.audit_time``)
    audit_time: AuditTime
    #: one per partition, by topic and partition
    partitions: list[PartitionStatus]
    #: every live copy of every partition, by topic and partition, the chosen ones first
    replicas: list[ReplicaStatus]
    #: in the one finding order (``txn_audit.detect.finding_order``): most severe first
    findings: list[Finding]
    ingest: IngestResult
    out_dir: Path | None
    #: one per root cause (``txn_audit.detect.incidents``), most severe first; every finding
    #: names its incident by ``incident_id``
    incidents: list[Incident] = field(default_factory=list)

    def counts(self, min_severity: Severity = Severity.INFO) -> Counter[str]:
        """Findings by kind, of those at or above ``min_severity``."""
        return Counter(f.kind for f in self.at_or_above(min_severity))

    def at_or_above(self, min_severity: Severity) -> list[Finding]:
        """The findings at or above ``min_severity``, in the one finding order."""
        floor = Severity(min_severity)
        return [f for f in self.findings if f.severity >= floor]

    def incidents_at_or_above(self, min_severity: Severity) -> list[Incident]:
        """The incidents at or above ``min_severity``, most severe first."""
        floor = Severity(min_severity)
        return [i for i in self.incidents if i.severity >= floor]

    def findings_of(self, incident: Incident) -> list[Finding]:
        """The findings of ``incident`` (its cause and consequences), in the one finding order."""
        return [f for f in self.findings if f.incident_id == incident.incident_id]

    def lso_below_hw(self) -> list[PartitionStatus]:
        """The partitions whose last stable offset is below their high watermark (records held)."""
        return [p for p in self.partitions if p.lso_below_hw]

    def summary(self) -> dict[str, Any]:
        by_severity = Counter(f.severity for f in self.findings)
        incidents_by_severity = Counter(i.severity for i in self.incidents)
        return {
            "verdict": verdict(self, Severity.WARNING),
            "incidents_by_severity": {s.value: incidents_by_severity.get(s, 0) for s in SEVERITIES},
            "incidents_by_kind": dict(sorted(Counter(i.kind for i in self.incidents).items())),
            "findings_by_severity": {s.value: by_severity.get(s, 0) for s in SEVERITIES},
            "findings_by_kind": dict(sorted(Counter(f.kind for f in self.findings).items())),
            "partitions": len(self.partitions),
            "partitions_with_lso_below_hw": len(self.lso_below_hw()),
            "hw_sources": dict(sorted(Counter(p.hw_source for p in self.partitions).items())),
            "brokers": [b for b in self.ingest.brokers],
            "files": self.ingest.files,
            "decoded_files": self.ingest.decoded_files,
            "decode_issues": self.ingest.issue_counts,
            "table_rows": self.ingest.row_counts,
            "options": self.options.durations(),
            "tables": None if self.out_dir is None else str(self.out_dir / "tables"),
        }

    def to_json(self) -> dict[str, Any]:
        several = {(r.topic, r.partition) for r in self.replicas if r.replica_rank > 1}
        return {
            "as_of_ms": self.as_of_ms,
            "audit_time": self.audit_time.to_json(),
            "input": self.input,
            "partitions": [_pick(p, JSON_PARTITION_KEYS) for p in self.partitions],
            # the copies of the partitions the dump holds several of, each audited on its own data
            "replicas": [_pick(r, JSON_REPLICA_KEYS) for r in self.replicas if (r.topic, r.partition) in several],
            "incidents": [_pick(i, JSON_INCIDENT_KEYS) for i in self.incidents],
            "findings": [_pick(f, JSON_FINDING_KEYS) for f in self.findings],
            "summary": self.summary(),
        }


def _pick(row: Finding | Incident | PartitionStatus | ReplicaStatus, keys: tuple[str, ...]) -> dict[str, Any]:
    # a severity goes out as its plain string, a tuple as a list
    def plain(value: Any) -> Any:
        return value.value if isinstance(value, Severity) else list(value) if isinstance(value, tuple) else value

    return {k: plain(getattr(row, k)) for k in keys}


def verdict(result: ScanResult, min_severity: Severity) -> str:
    """One line: CLEAN, or the worst severity and the incidents by cause, at or above
    ``min_severity`` (findings by kind for a result without incidents)."""
    relevant = result.at_or_above(min_severity)
    if not relevant:
        return f"CLEAN: no findings at or above {Severity(min_severity).value} in {len(result.partitions)} partitions"
    worst = max(f.severity for f in relevant).value.upper()
    incidents = result.incidents_at_or_above(min_severity)
    if not incidents:
        counts = Counter(f.kind for f in relevant)
        return f"{worst}: " + ", ".join(f"{n} {kind.replace('_', ' ')}" for kind, n in counts.most_common())
    causes = Counter(i.kind for i in incidents)
    parts = ", ".join(f"{n} {kind.replace('_', ' ')}" for kind, n in causes.most_common())
    findings = sum(i.findings for i in incidents)
    return (f"{worst}: {len(incidents)} incident{'s' if len(incidents) != 1 else ''} ({parts}; "
            f"{findings} finding{'s' if findings != 1 else ''})")


def scan_exit_code(result: ScanResult, *, min_severity: Severity, strict: bool) -> ExitCode:
    """3 under ``strict`` when anything could not be decoded, else 1 when there are findings at or
    above ``min_severity``, else 0."""
    if strict and result.ingest.total_issues:
        return ExitCode.CORRUPT_INPUT
    return ExitCode.FINDINGS if result.at_or_above(min_severity) else ExitCode.OK


def newest_timestamp(raw: RawTables) -> int | None:
    """The newest timestamp anywhere in the dump (the default audit time): the highest value of
    each table's ``manifest.TIME_COLUMNS`` column, from the files' statistics where the manifest
    gives every row group's (``TableManifest.newest_times``), else from the column, read with
    pyarrow (a row group whose values are all null)."""
    import pyarrow.compute as pc

    from txn_audit.replica_tasks.reading import manifest_dataset

    found: list[int] = []
    for name, column in TIME_COLUMNS.items():
        files = raw.files(name)
        times = files.newest_times()
        if times is None and (dataset := manifest_dataset(files)) is not None:
            newest = pc.max(dataset.to_table(columns=[column]).column(column)).as_py()
            times = [] if newest is None else [int(newest)]
        found.extend(times or ())
    return max(found) if found else None


def transaction_context(txn_log: DataFrame, findings: list[Finding],
                        cleaned_logs: Mapping[int, int] | None = None) -> TransactionContext:
    """What the incidents need from ``txn_log`` (``detect.incidents.TransactionContext``): the
    partitions each producer id of a ``hanging_transaction`` finding was ever listed with, and
    which of those producers' coordinator logs the cleaner compacted (``cleaned_logs``: per
    ``__transaction_state`` partition, its cleaner-offset-checkpoint entry; a producer with no
    record left may have had its records in any of them). No Spark job when nothing hangs."""
    from pyspark.sql import functions as F

    from txn_audit.detect.incidents import TransactionContext

    producers = sorted({f.producer_id for f in findings if f.kind == "hanging_transaction"
                        and f.producer_id is not None})
    if not producers:
        return TransactionContext()
    listed: dict[int, set[str]] = {pid: set() for pid in producers}
    pairs = (txn_log.where(F.col("producer_id").isin(producers) & F.col("topic_partitions").isNotNull())
             .select("producer_id", F.explode("topic_partitions").alias("tp"))
             .select("producer_id", F.concat(F.col("tp.topic"), F.lit("-"), F.col("tp.partition").cast("string")))
             .distinct().collect())
    for pid, place in pairs:
        listed[int(pid)].add(str(place))
    cleaned = {p: offset for p, offset in (cleaned_logs or {}).items() if offset > 0}
    compacted: dict[int, str] = {}
    if cleaned:
        held: dict[int, set[int]] = {pid: set() for pid in producers}
        for pid, partition in (txn_log.where(F.col("producer_id").isin(producers))
                               .select("producer_id", "partition").distinct().collect()):
            held[int(pid)].add(int(partition))
        for pid, partitions in held.items():
            where = sorted(p for p in (partitions or cleaned) if p in cleaned)
            if where:
                compacted[pid] = ", ".join(f"{TRANSACTION_STATE_TOPIC}-{p} cleaned below offset {cleaned[p]}"
                                           for p in where)
    return TransactionContext({pid: frozenset(places) for pid, places in listed.items()}, compacted)


def _cleaned_coordinator_logs(raw: RawTables) -> dict[int, int]:
    """Per ``__transaction_state`` partition, how far the cleaner compacted it (the highest
    cleaner-offset-checkpoint entry of its copies)."""
    from txn_audit.detect import Compaction

    cleaned: dict[int, int] = {}
    for (topic, partition, _), offset in Compaction.read(raw).cleaned.items():
        if topic == TRANSACTION_STATE_TOPIC:
            cleaned[partition] = max(offset, cleaned.get(partition, 0))
    return cleaned


def _read_findings(tables_dir: Path) -> list[Finding]:
    """The findings table: one file in the one finding order (``detect.write_findings``), read as
    it is, without a Spark job."""
    from txn_audit.tables import read_arrow_table

    return [Finding.from_row(r) for r in read_arrow_table(tables_dir, "findings").to_pylist()]


def _write_incidents(tables_dir: Path, findings: list[Finding], partitions: list[PartitionStatus],
                     context: TransactionContext, late_tolerance_ms: int) -> tuple[list[Incident], list[Finding]]:
    """Group ``findings`` (the findings table's rows) into the incidents table, and write them
    back with their ``incident_id``; both as written."""
    from txn_audit.detect.incidents import build_incidents, write_incidents

    incidents, grouped = build_incidents(findings, partitions, context, late_tolerance_ms=late_tolerance_ms)
    write_incidents(tables_dir, incidents, grouped)
    return incidents, grouped


def _import_early(*, quality: bool, report: bool) -> threading.Thread | None:
    """Import Great Expectations with the quality package (``quality``) and the report
    (``report``) on a daemon thread while the JVM starts, which it returns
    (``tuning.imports.import_early``: how, and why)."""
    loads: list[Callable[[], object]] = []
    if quality:
        loads.append(_import_quality)
    if report:
        loads.append(_import_report)
    return import_early(*loads)


def _import_quality() -> None:
    from txn_audit.quality import import_great_expectations

    import_great_expectations()


def _import_report() -> None:
    import txn_audit.report  # noqa: F401 - imported for _import_early


def _check_raw_tables(spark: SparkSession, tables_dir: Path, quality_dir: Path, manifest: Manifest | None) -> SuiteRun:
    """Start the suites' run with the raw tables' suites (``manifest``: that of their files)."""
    from txn_audit.quality import SuiteRun
    from txn_audit.tables import load_tables

    run = SuiteRun(quality_dir)
    run.validate(load_tables(spark, tables_dir, RAW_TABLES), manifest=manifest)
    return run


def _check_rebuilt_tables(spark: SparkSession, tables_dir: Path, before: Future[SuiteRun]) -> SuiteRun:
    """Go on with the suites' run (``before``'s) with the suites of the derived tables that are
    final once the transactions are rebuilt (all but ``schemas.DETECTION_TABLES``)."""
    from txn_audit.schemas import DERIVED_TABLES, DETECTION_TABLES
    from txn_audit.tables import load_tables

    run = before.result()
    run.validate(load_tables(spark, tables_dir, [name for name in DERIVED_TABLES if name not in DETECTION_TABLES]))
    return run


def _check_quality(spark: SparkSession, tables_dir: Path, run: SuiteRun) -> None:
    """End the suites' run with the suites of the tables detection writes
    (``schemas.DETECTION_TABLES``); broken invariants join the findings table."""
    from txn_audit.detect import add_findings
    from txn_audit.schemas import DETECTION_TABLES
    from txn_audit.tables import load_tables

    run.validate(load_tables(spark, tables_dir, DETECTION_TABLES))
    add_findings(spark, tables_dir / "findings", run.finish().findings())


def scan(
    dump: str | Path,
    out: str | Path | None = None,
    *,
    options: AuditOptions = DEFAULTS,
    spark: SparkSession | None = None,
    on_stage: Callable[[str], None] | None = None,
) -> ScanResult:
    """Ingest, reconstruct and detect; then the data-quality suites (``out/quality/``) and the
    HTML report (``out/report.html``), as ``options`` ask. Tables go to ``out/tables/``, the JSON
    to ``out/summary.json``; without ``out`` everything is computed in a temporary folder that is
    removed afterwards. ``dump`` is a local path or a ``file://``, ``s3://`` or ``hdfs://`` URI.

    The dump and ``out`` are checked before Spark starts (``UsageError``), as ``options`` were
    when built; Spark's own log lines stay off the console unless ``options.verbose``."""
    check_dump(dump, options.input_kind)  # a missing dump or unreachable storage is a usage error before Spark starts
    check_out(out)
    inventory = discover(dump, options.input_kind)
    if spark is None:  # while the JVM starts
        _import_early(quality=options.quality, report=options.report and out is not None)
    spark = spark or build_session(verbose=options.verbose, input_bytes=inventory.input_bytes)
    if out is None:
        with tempfile.TemporaryDirectory(prefix="txn-audit-") as tmp, sized_for(spark, inventory.input_bytes):
            return _scan(spark, dump, Path(tmp), None, replace(options, report=False), on_stage, inventory)
    target = Path(out)
    with staged_output(target) as stage, sized_for(spark, inventory.input_bytes):
        previous = target / "tables"
        if (target / MARKER).exists() and (previous / INGEST_STAMP).is_file():
            # the raw tables of the last run come along by hard link; _ingest keeps them only
            # if the dump is unchanged, and the previous output is never written to
            (stage / "tables").mkdir()
            for name in [*RAW_TABLES, INGEST_STAMP, MANIFEST_FILE]:
                if (previous / name).is_dir():
                    link_tree(previous / name, stage / "tables" / name)
                elif (previous / name).is_file():
                    os.link(previous / name, stage / "tables" / name)
        result = _scan(spark, dump, stage, target, options, on_stage, inventory)
    result.ingest.tables_dir = target / "tables"
    return result


def _scan(
    spark: SparkSession,
    dump: str | Path,
    work: Path,
    out_dir: Path | None,
    options: AuditOptions,
    on_stage: Callable[[str], None] | None,
    inventory: Inventory,
) -> ScanResult:
    from txn_audit.tables import load_raw_tables

    tables_dir = work / "tables"
    ingested = _ingest(dump, tables_dir, spark=spark, progress=options.progress, reuse=True, on_stage=on_stage,
                       input_kind=options.input_kind, inventory=inventory)
    raw = load_raw_tables(spark, tables_dir)  # with the manifest ingest saved beside the tables
    audit_time = choose_audit_time(options.as_of_ms, ingested.copy_evidence, newest_timestamp(raw))
    options = options.at(audit_time.ms)
    if on_stage:
        on_stage("rebuilding transactions")
    # leaving the pool waits for its thread, whatever happened, before the staging folder may go
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="txn-audit-quality") as pool:
        # the raw tables are final: their suites run beside the rebuilding, on the driver's other core
        raw_suites = pool.submit(_check_raw_tables, spark, tables_dir, work / "quality", raw.manifest) \
            if options.quality else None
        return _rebuild_and_detect(spark, ingested, tables_dir, work, out_dir, raw, options, on_stage,
                                   raw_suites, pool, audit_time=audit_time)


def _rebuild_and_detect(
    spark: SparkSession,
    ingested: IngestResult,
    tables_dir: Path,
    work: Path,
    out_dir: Path | None,
    raw: RawTables,
    options: AuditOptions,
    on_stage: Callable[[str], None] | None,
    raw_suites: Future[SuiteRun] | None,
    suites_thread: ThreadPoolExecutor,
    *,
    audit_time: AuditTime,
) -> ScanResult:
    """``_scan`` from the raw tables on, with ``options`` at the audit time; ``raw_suites``: the
    raw tables' suites, running on ``suites_thread`` (a pool of one thread, which runs the
    suites' parts in turn), when the data-quality suites are to run."""
    from txn_audit.detect import write_detected
    from txn_audit.reconstruct import DerivedOutput, reconstruct
    from txn_audit.tables import read_arrow_table

    as_of_ms, late_tolerance_ms = options.audit_ms, options.late_tolerance_ms
    with spark_progress(spark, "rebuilding transactions", enabled=options.progress):
        # derived tables are written once under tables_dir and read back; helpers live in a local checkpoint
        output = DerivedOutput(str(tables_dir))
        recon = reconstruct(raw, as_of_ms=as_of_ms, late_tolerance_ms=late_tolerance_ms, output=output)
        # the rebuilt tables are final: their suites run beside detection, once the raw tables' are done
        suites = None if raw_suites is None else suites_thread.submit(_check_rebuilt_tables, spark, tables_dir,
                                                                      raw_suites)
        if on_stage:
            on_stage("detecting")
        write_detected(raw, recon, options, tables_dir / "findings")
        output.clear_work()  # the rules have read what the passes handed on
        # one row per partition: read without a Spark job
        partitions = sorted((PartitionStatus.from_row(r) for r in read_arrow_table(tables_dir, "partition_stability")
                             .to_pylist()), key=lambda p: (p.topic, p.partition))
        findings = _read_findings(tables_dir)
        context = transaction_context(raw.frames["txn_log"], findings, _cleaned_coordinator_logs(raw))
        # the incidents table exists when the suites check every table; their findings join it after
        incidents, findings = _write_incidents(tables_dir, findings, partitions, context, late_tolerance_ms)
        if suites is not None:
            if on_stage:
                on_stage("checking data quality")
            _check_quality(spark, tables_dir, suites.result())
            incidents, findings = _write_incidents(tables_dir, _read_findings(tables_dir), partitions, context,
                                                   late_tolerance_ms)
    # one row per copy of a partition: read without a Spark job
    copies = read_arrow_table(tables_dir, "replica_stability").to_pylist()
    replicas = sorted((ReplicaStatus.from_row(r) for r in copies),
                      key=lambda r: (r.topic or "", r.partition or 0, r.replica_rank))
    result = ScanResult(
        input=ingested.dump,
        as_of_ms=as_of_ms,
        options=options,
        audit_time=audit_time,
        partitions=partitions,
        replicas=replicas,
        findings=findings,
        ingest=ingested,
        out_dir=out_dir,
        incidents=incidents,
    )
    write_json_atomic(work / "summary.json", result.to_json())
    if options.report:
        from txn_audit.report import write_report

        if on_stage:
            on_stage("writing the report")
        write_report(work, quality_results=work / "quality" / "results.json" if raw_suites is not None else None)
    return result


# -- nightly ------------------------------------------------------------------------------


@dataclass
class NightlyResult:
    scan: ScanResult
    published: PublishedRun
    min_severity: Severity
    exit_code: ExitCode

    def summary_lines(self) -> list[str]:
        """What the nightly job logs: verdict, each incident at or above the chosen severity (its
        cause, place and fix), findings by kind, where the run went."""
        published = self.published
        by_kind = ", ".join(f"{kind}={n}" for kind, n in sorted(self.scan.counts().items())) or "none"
        rows = sum(published.row_counts.values())
        incidents = [f"incident {i.incident_id}: {i.severity.value} {i.kind} on {', '.join(i.partitions) or '-'}; "
                     f"fix: {' | '.join(i.remediation.splitlines())}"
                     for i in self.scan.incidents_at_or_above(self.min_severity)]
        audit = self.scan.audit_time
        return [
            f"verdict: {verdict(self.scan, self.min_severity)}",
            f"audit time {format_time_ms(audit.ms)}: {audit.how}" + (f"; warning: {audit.warning}" if audit.warning
                                                                      else ""),
            *incidents,
            f"findings by kind: {by_kind}",
            f"audit date {published.audit_date.isoformat()}: {len(published.tables)} tables, {rows} rows, "
            f"in {published.warehouse}/<table>/{published.tables['findings'].name}/",
            f"report, summary and data-quality results: {published.run_dir}",
            f"exit code {int(self.exit_code)} ({self.exit_code.name.lower()})",
        ]


def run_nightly(
    dump: str | Path,
    warehouse: str | Path,
    audit_date: date,
    *,
    options: AuditOptions = DEFAULTS,
    spark: SparkSession | None = None,
    min_severity: Severity = Severity.WARNING,
    strict: bool = False,
    work_dir: str | Path | None = None,
    on_stage: Callable[[str], None] | None = None,
) -> NightlyResult:
    """The nightly job: ``scan`` the dump (a local path, or a ``file://``, ``s3://`` or ``hdfs://``
    URI) in a temporary folder (under ``work_dir``, which
    executors on other hosts must be able to write to), publish it as ``audit_date`` of the
    warehouse (``txn_audit.warehouse.publish_run``) and give the scan's exit code. ``options``:
    the scan's (the job shows no progress bar). Spark's own log lines
    stay off the console unless ``options.verbose``."""
    from txn_audit.ingest.storage import DIR, resolve_dump
    from txn_audit.usage import check_dump as check_dump_argument
    from txn_audit.warehouse import publish_run, resolve

    min_severity = Severity.parse(min_severity)
    options = replace(options, progress=False)
    # a segment file or an empty folder says what to give instead; a dump that is missing, or a
    # file, is refused below: the job takes a folder of log dirs only
    check_dump_argument(dump, InputKind.LOGDIRS)
    location = resolve_dump(dump)
    resolve(warehouse)  # refuse an unsupported location before the scan, not after
    if location.info().kind != DIR:
        raise UsageError(f"dump not found or not a folder: {location.display}")
    source: str | Path = Path(location.root) if location.is_local else str(dump)
    if spark is None:  # while the JVM starts
        _import_early(quality=True, report=True)
    spark = spark or build_session("txn-audit-nightly", verbose=options.verbose)
    scratch = None if work_dir is None else resolve(work_dir)
    if scratch is not None:
        scratch.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="txn-audit-nightly-", dir=scratch) as tmp:
        out = Path(tmp) / "scan"
        result = scan(source, out, options=options, spark=spark, on_stage=on_stage)
        result.out_dir = None  # the tables now live in the warehouse, one partition per table
        write_json_atomic(out / "summary.json", result.to_json())
        if on_stage:
            on_stage("publishing to the warehouse")
        published = publish_run(spark, out, warehouse, audit_date)
    return NightlyResult(result, published, min_severity, scan_exit_code(result, min_severity=min_severity,
                                                                         strict=strict))
