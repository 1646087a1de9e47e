"""A scan, stage by stage: ingest → reconstruct → detect → quality → incidents, then the report.

Each stage is a function from the scan's ledger (``txn_audit.ledger``: the input's fingerprint,
the options, every table written) to the ledger with the tables it wrote; ``run_stages`` runs
them in order and saves the ledger after each, in one step. The data-quality suites of the
tables a stage does not change are declared beside it (``Stage.suites``) and run on a thread of
their own while it works, one part after another (``quality.SuiteRun``); the quality stage ends
the run. What a stage hands on in memory is in ``Scan``: the rebuilt transactions' frames
(``reconstruct.Reconstruction``, which detection reads several times) and the findings before
their incidents; the rest goes through the ledger's tables. The rules write their findings as a
working table; the incidents stage writes the ``findings`` table, with the data-quality
suites' findings, and the ``incidents`` table, each once.
"""

from __future__ import annotations

import hashlib
import shutil
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from txn_audit.audit_time import AuditTime, CopyEvidence, choose_audit_time
from txn_audit.formats.layout import TRANSACTION_STATE_TOPIC
from txn_audit.ingest.discover import Inventory
from txn_audit.ledger import RAW, TABLE, WORK, Entry, Ledger
from txn_audit.manifest import TIME_COLUMNS
from txn_audit.progress import spark_progress
from txn_audit.results import BlockedConsumer, Finding, Incident, PartitionStatus, finding_order
from txn_audit.schemas import DERIVED_TABLES, DETECTION_TABLES, RAW_TABLES
from txn_audit.usage import AuditOptions

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from txn_audit.detect.incidents import TransactionContext
    from txn_audit.quality import SuiteRun
    from txn_audit.reconstruct import Reconstruction
    from txn_audit.tables import RawTables

__all__ = ["INGEST", "IngestResult", "Scan", "Stage", "AUDIT_STAGES", "ingest_tables", "newest_timestamp",
           "run_stages"]

#: the derived tables reconstruct writes: final once the transactions are rebuilt
REBUILT_TABLES = tuple(name for name in DERIVED_TABLES if name not in DETECTION_TABLES)
#: the derived table written from reconstruct's tables by a rule (``detect.blocked_consumer_rows``)
BLOCKED = "blocked_consumers"
#: the working tables: what the passes hand to the rules, and the rules' findings before their incidents
PASS_WORK = ("prepares", "prepare_follows")
DETECTED = "detected"
#: how many decode issues an ingest's result shows (``IngestResult.issues_preview``)
ISSUES_PREVIEW = 20


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


def fingerprint(inventory: Inventory) -> str:
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


def ingest_tables(spark: SparkSession, inventory: Inventory, tables_dir: Path, *, progress: bool,
                  on_stage: Callable[[str], None] | None,
                  previous: Ledger | None = None) -> tuple[Ledger, IngestResult]:
    """Decode the dump into the raw tables under ``tables_dir`` (a folder of its own), and the
    ledger of them. ``previous``: the ledger of tables already there, kept when it shows the
    raw tables of the very same input (same files, sizes and modification times)."""
    from txn_audit.ingest.job import write_raw_tables

    found = fingerprint(inventory)
    reused = previous is not None and previous.fingerprint == found \
        and all(name in previous.entries and (tables_dir / name).is_dir() for name in RAW_TABLES)
    if previous is not None and reused:
        ledger = previous.without(WORK)  # the derived tables too, which ``choose_time`` judges
    else:
        with spark_progress(spark, "decoding log segments", enabled=progress):
            written = write_raw_tables(spark, inventory, tables_dir, on_stage=on_stage)
        assert written.manifest is not None  # ingest describes what it wrote
        ledger = Ledger(str(tables_dir.absolute()), str(inventory.root), found, written.row_counts,
                        written.issue_counts,
                        {name: Entry(files, INGEST, RAW) for name, files in written.manifest.tables.items()})
    ledger.save()
    return ledger, IngestResult(
        dump=inventory.storage.display, tables_dir=tables_dir, row_counts=dict(ledger.row_counts),
        issue_counts=dict(ledger.issue_counts), brokers=inventory.brokers,
        log_dirs=[d.rel for d in inventory.log_dirs], partitions=len(inventory.replicas),
        files=len(inventory.segments), decoded_files=len(inventory.tasks), reused=reused,
        issues_preview=issue_preview(tables_dir), copy_evidence=inventory.copy_evidence())


def issue_preview(tables_dir: Path) -> list[dict[str, Any]]:
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


@dataclass
class Scan:
    """What the stages share: the session, the dump, the folder being written (``work``:
    ``tables/``, ``quality/``, ``summary.json``, ``report.html``) and the options (at the audit
    time once reconstruct chose it); and what a stage hands to the next in memory."""

    spark: SparkSession
    inventory: Inventory
    work: Path
    options: AuditOptions
    on_stage: Callable[[str], None] | None = None
    #: where the output goes once the scan is done (None: a temporary folder)
    out_dir: Path | None = None
    ingested: IngestResult | None = None
    audit_time: AuditTime | None = None
    raw: RawTables | None = None
    recon: Reconstruction | None = None
    #: one row per partition (``partition_stability``), by topic and partition
    partitions: list[PartitionStatus] = field(default_factory=list)
    #: the consumer groups a held LSO blocks (``blocked_consumers``), by topic, partition and group
    blocked: list[BlockedConsumer] = field(default_factory=list)
    #: the rules' findings and the data-quality suites', in the one finding order
    findings: list[Finding] = field(default_factory=list)
    incidents: list[Incident] = field(default_factory=list)
    context: TransactionContext | None = None
    suites: Suites | None = None
    #: the tables a previous run left are current for this input and these options (``choose_time``)
    reused: bool = False

    @property
    def tables_dir(self) -> Path:
        return self.work / "tables"


@dataclass(frozen=True)
class Stage:
    """A stage of ``run_stages``: ``name`` (what ``on_stage`` is told; None: nothing), ``run``
    (the ledger in, the ledger with what it wrote out), the tables whose data-quality suites
    run beside it (``suites``), and whether it runs for the scan so far (``runs``)."""

    name: str | None
    run: Callable[[Scan, Ledger], Ledger]
    suites: Sequence[str] = ()
    runs: Callable[[Scan], bool] = lambda scan: True


class Suites:
    """The data-quality suites' run, part after part on one thread (``quality.SuiteRun``)."""

    def __init__(self, scan: Scan, pool: ThreadPoolExecutor) -> None:
        self.scan, self.pool = scan, pool
        self.run: Future[SuiteRun] | None = None

    def check(self, names: Sequence[str], ledger: Ledger) -> None:
        """Run the suites of tables ``names`` after those started before, on the thread."""
        self.run = self.pool.submit(self._check, self.run, names, ledger)

    def _check(self, before: Future[SuiteRun] | None, names: Sequence[str], ledger: Ledger) -> SuiteRun:
        from txn_audit.quality import SuiteRun
        from txn_audit.tables import load_tables

        run = SuiteRun(self.scan.work / "quality") if before is None else before.result()
        raw = [name for name in names if name in RAW_TABLES]
        run.validate(load_tables(self.scan.spark, self.scan.tables_dir, names), manifest=ledger.raw if raw else None)
        return run

    def finish(self, tables: Mapping[str, DataFrame]) -> list[Finding]:
        """End the run with the suites of ``tables`` (frames of rows about to be written); the
        findings of broken invariants."""
        assert self.run is not None
        run = self.run.result()
        run.validate(tables)
        return [Finding.from_row(row) for row in run.finish().findings()]


def run_stages(scan: Scan, stages: Sequence[Stage], ledger: Ledger) -> Ledger:
    """Run ``stages`` in order, each on the ledger the one before it gave, saved after each; the
    suites each declares run beside it when the options ask for the data-quality suites.
    Leaving the pool waits for the suites' thread, whatever happened, before the output may go."""
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="txn-audit-quality") as pool:
        scan.suites = Suites(scan, pool) if scan.options.quality else None
        for stage in stages:
            if not stage.runs(scan):
                continue
            if stage.name and scan.on_stage:
                scan.on_stage(stage.name)
            if stage.suites and scan.suites is not None:
                scan.suites.check(stage.suites, ledger)
            ledger = stage.run(scan, ledger)
            ledger.save()
    return ledger


def choose_time(scan: Scan, ledger: Ledger) -> Ledger:
    """The audit time (``audit_time``: ``--as-of``, else the copy's time); then whether the
    tables a previous run of the same input left (``ingest_tables``) are current: the ledger
    shows every derived table written with these options at this time (``AuditOptions.recorded``)
    and, when the suites are asked for, their results. Current, they are kept and the audit's
    stages do not run (``Scan.reused``); otherwise they go."""
    from txn_audit.replica_tasks.commit import drop_table
    from txn_audit.tables import RawTables, load_tables

    assert scan.ingested is not None
    raw = scan.raw = RawTables(load_tables(scan.spark, scan.tables_dir, RAW_TABLES), ledger.raw)
    scan.audit_time = choose_audit_time(scan.options.as_of_ms, scan.ingested.copy_evidence, newest_timestamp(raw))
    options = scan.options = scan.options.at(scan.audit_time.ms)
    quality = scan.work / "quality"
    scan.reused = ledger.options == options.recorded() and all(name in ledger.entries for name in DERIVED_TABLES) \
        and (not options.quality or (quality / "results.json").is_file())
    if scan.reused:
        return ledger
    for name in DERIVED_TABLES:
        drop_table(str(scan.tables_dir / name))
    shutil.rmtree(quality, ignore_errors=True)
    return ledger.without(TABLE).without(WORK).ran_with(options.recorded())


def fresh(scan: Scan) -> bool:
    """Whether the audit's tables are to be written (not ``Scan.reused``)."""
    return not scan.reused


def rebuild(scan: Scan, ledger: Ledger) -> Ledger:
    """Reconstruct: the derived tables from the raw ones, and the pass's working tables; then
    the consumer groups a held LSO blocks (``blocked_consumers``), from the partitions' status."""
    from txn_audit.detect import blocked_consumer_rows
    from txn_audit.reconstruct import DerivedOutput, reconstruct

    assert scan.raw is not None
    raw, options = scan.raw, scan.options
    with spark_progress(scan.spark, "rebuilding transactions", enabled=options.progress):
        scan.recon = reconstruct(raw, as_of_ms=options.audit_ms, late_tolerance_ms=options.late_tolerance_ms,
                                 output=DerivedOutput(str(scan.tables_dir)))
        blocked = blocked_consumer_rows(raw, scan.recon, options.audit_ms)
        scan.recon.output.keep_rows(scan.spark, BLOCKED, blocked)
        scan.blocked = [BlockedConsumer.from_row(r) for r in blocked.to_pylist()]
    return (ledger.with_tables(RECONSTRUCT, REBUILT_TABLES)
            .with_tables(RECONSTRUCT, [n for n in PASS_WORK if (scan.tables_dir / "_work" / n).is_dir()], WORK,
                         "_work"))


def detect(scan: Scan, ledger: Ledger) -> Ledger:
    """Every rule, into the working table of the findings before their incidents; each
    partition's status and what the incidents need of the coordinator log, on the driver."""
    from txn_audit.detect import write_detected

    assert scan.raw is not None and scan.recon is not None
    with spark_progress(scan.spark, "detecting", enabled=scan.options.progress):
        write_detected(scan.raw, scan.recon, scan.options, scan.tables_dir / "_work" / DETECTED)
    ledger = drop_work(ledger, scan, PASS_WORK)  # the rules have read what the passes handed on
    scan.findings = sorted(_read_work_findings(scan.tables_dir / "_work" / DETECTED), key=finding_order)
    scan.partitions = partition_rows(scan.tables_dir)
    scan.context = transaction_context(scan.raw["txn_log"], scan.findings, cleaned_coordinator_logs(scan.raw),
                                       scan.blocked)
    return ledger.with_tables(DETECT, [DETECTED], WORK, "_work")


def check_quality(scan: Scan, ledger: Ledger) -> Ledger:
    """End the data-quality suites' run with the findings and incidents tables as the rules'
    findings make them; broken invariants join the findings."""
    from txn_audit.detect.incidents import build_incidents, incident_tables
    from txn_audit.tables import arrow_frame

    assert scan.suites is not None
    incidents, grouped = build_incidents(scan.findings, scan.partitions, scan.context,
                                         late_tolerance_ms=scan.options.late_tolerance_ms)
    frames = {name: arrow_frame(scan.spark, rows) for name, rows in incident_tables(incidents, grouped).items()}
    broken = scan.suites.finish(frames)
    scan.findings = sorted([*scan.findings, *broken], key=finding_order)
    return ledger


def group_incidents(scan: Scan, ledger: Ledger) -> Ledger:
    """Every finding grouped by its root cause: the ``incidents`` table and the ``findings``
    table with each finding's incident, each written once."""
    from txn_audit.detect.incidents import build_incidents, write_incidents

    scan.incidents, scan.findings = build_incidents(scan.findings, scan.partitions, scan.context,
                                                    late_tolerance_ms=scan.options.late_tolerance_ms)
    write_incidents(scan.tables_dir, scan.incidents, scan.findings)
    return drop_work(ledger, scan, [DETECTED]).with_tables(INCIDENTS, DETECTION_TABLES)


def reuse(scan: Scan, ledger: Ledger) -> Ledger:
    """What the tables a previous run left say (``choose_time``): each partition's status, the
    findings and the incidents, read on the driver."""
    from txn_audit.tables import read_arrow_table

    scan.partitions = partition_rows(scan.tables_dir)
    scan.blocked = [BlockedConsumer.from_row(r) for r in read_arrow_table(scan.tables_dir, BLOCKED).to_pylist()]
    scan.findings = [Finding.from_row(r) for r in read_arrow_table(scan.tables_dir, "findings").to_pylist()]
    scan.incidents = [Incident.from_row(r) for r in read_arrow_table(scan.tables_dir, "incidents").to_pylist()]
    return ledger


def partition_rows(tables_dir: Path) -> list[PartitionStatus]:
    """One row per partition (``partition_stability``), by topic and partition, read without a
    Spark job."""
    from txn_audit.tables import read_arrow_table

    return sorted((PartitionStatus.from_row(r) for r in read_arrow_table(tables_dir, "partition_stability")
                   .to_pylist()), key=lambda p: (p.topic, p.partition))


def _read_work_findings(path: Path) -> list[Finding]:
    """The rules' findings, read with pyarrow from their working table."""
    import pyarrow.dataset as ds

    from txn_audit.schemas import FINDINGS, in_ms

    rows = ds.dataset(str(path), format="parquet", schema=in_ms(FINDINGS)).to_table().to_pylist()
    return [Finding.from_row(row) for row in rows]


def drop_work(ledger: Ledger, scan: Scan, names: Sequence[str]) -> Ledger:
    """The ledger without working tables ``names``, deleted."""
    from txn_audit.replica_tasks.commit import drop_table

    work = scan.tables_dir / "_work"
    for name in names:
        drop_table(str(work / name))
    if work.is_dir() and not any(work.iterdir()):
        work.rmdir()
    return ledger.dropping(names)


#: the stages' names, as the ledger records who wrote a table
INGEST, RECONSTRUCT, DETECT, INCIDENTS = "ingest", "reconstruct", "detect", "incidents"

#: the stages of an audit after ingest, and the suites beside each
AUDIT_STAGES = (
    Stage(None, choose_time),
    Stage("rebuilding transactions", rebuild, suites=tuple(RAW_TABLES), runs=fresh),  # the raw tables are final
    Stage("detecting", detect, suites=REBUILT_TABLES, runs=fresh),  # so are the rebuilt ones
    Stage("checking data quality", check_quality, runs=lambda scan: fresh(scan) and scan.options.quality),
    Stage(None, group_incidents, runs=fresh),
    Stage(None, reuse, runs=lambda scan: scan.reused),
)


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
                        cleaned_logs: Mapping[int, int] | None = None,
                        blocked: Sequence[BlockedConsumer] = ()) -> TransactionContext:
    """What the incidents need from ``txn_log`` (``detect.incidents.TransactionContext``): the
    partitions each producer id of a ``hanging_transaction`` finding was ever listed with, and
    which of those producers' coordinator logs the cleaner compacted (``cleaned_logs``: per
    ``__transaction_state`` partition, its cleaner-offset-checkpoint entry; a producer with no
    record left may have had its records in any of them), and the consumer groups blocked on each
    partition (``blocked``: ``blocked_consumers`` rows). No Spark job when nothing hangs."""
    from pyspark.sql import functions as F

    from txn_audit.detect.incidents import TransactionContext

    by_place: dict[str, list[BlockedConsumer]] = {}
    for row in blocked:
        by_place.setdefault(f"{row.topic}-{row.partition}", []).append(row)
    blocked_on = {place: tuple(rows) for place, rows in by_place.items()}
    producers = sorted({f.producer_id for f in findings if f.kind == "hanging_transaction"
                        and f.producer_id is not None})
    if not producers:
        return TransactionContext(blocked=blocked_on)
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
    return TransactionContext({pid: frozenset(places) for pid, places in listed.items()}, compacted, blocked_on)


def cleaned_coordinator_logs(raw: RawTables) -> dict[int, int]:
    """Per ``__transaction_state`` partition, how far the cleaner compacted it (the highest
    cleaner-offset-checkpoint entry of its copies)."""
    from txn_audit.detect import Compaction

    cleaned: dict[int, int] = {}
    for (topic, partition, _), offset in Compaction.read(raw).cleaned.items():
        if topic == TRANSACTION_STATE_TOPIC:
            cleaned[partition] = max(offset, cleaned.get(partition, 0))
    return cleaned
