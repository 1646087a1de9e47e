"""The one programmatic entry point: the CLI, the nightly job and notebooks all call this.

``ingest`` decodes a dump into the raw tables; ``scan`` does ingest + reconstruct + detect and
returns a ``ScanResult`` whose ``to_json()`` is the stable JSON contract of
``txn-audit scan --format json`` (documented in the README).
"""

from __future__ import annotations

import dataclasses
import os
import tempfile
import threading
from collections import Counter
from collections.abc import Callable, Mapping
from contextlib import nullcontext
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from txn_audit.audit_time import AuditTime
from txn_audit.errors import UsageError
from txn_audit.fixes import (
    FIXES_SCRIPT,
    UNKNOWN_RELEASE,
    BrokerRelease,
    Connection,
    Fix,
    broker_release,
    fixes,
    fixes_json,
    fixes_script,
)
from txn_audit.ingest.discover import discover
from txn_audit.ledger import LEDGER_FILE, Ledger
from txn_audit.outputs import MARKER, link_tree, staged_output, write_json_atomic, write_text_atomic
from txn_audit.results import BlockedConsumer, Finding, Incident, PartitionStatus, ReplicaStatus
from txn_audit.schemas import ALL_TABLES
from txn_audit.severity import MOST_SEVERE_FIRST, Severity
from txn_audit.spark import build_session
from txn_audit.stages import AUDIT_STAGES, IngestResult, Scan, Stage, ingest_tables, newest_timestamp, run_stages
from txn_audit.timeparse import format_time_ms
from txn_audit.tuning.imports import import_early
from txn_audit.tuning.sql import sized_for
from txn_audit.usage import DEFAULTS, AuditOptions, ExitCode, InputKind, check_out

if TYPE_CHECKING:
    from datetime import date

    from pyspark.sql import SparkSession

    from txn_audit.stores import Store
    from txn_audit.warehouse import PublishedRun

__all__ = [
    "AuditOptions", "ExitCode", "Finding", "IngestResult", "InputKind", "NightlyResult", "PartitionStatus",
    "ReplicaStatus", "ScanResult", "Severity", "ingest", "ingest_exit_code", "run_nightly", "scan",
    "scan_exit_code", "verdict", "newest_timestamp",
]

#: the JSON's names of the findings' and incidents' columns the tables renamed when their times
#: became timestamps: the JSON keeps its keys (never renamed), each instant its epoch ms integer
JSON_FINDING_NAMES = {"first_timestamp": "first_timestamp_ms", "last_timestamp": "last_timestamp_ms"}
JSON_INCIDENT_NAMES = {"held_since_timestamp": "held_since_ms"}
JSON_FINDING_KEYS = (
    "kind", "severity", "topic", "partition", "producer_id", "producer_epoch", "transactional_id", "first_offset",
    "last_offset", "first_timestamp", "last_timestamp", "evidence", "remediation", "incident_id",
)
#: an incident's keys in the JSON: every column of the ``incidents`` table
JSON_INCIDENT_KEYS = tuple(f.name for f in dataclasses.fields(Incident))
JSON_PARTITION_KEYS = (
    "topic", "partition", "high_watermark", "hw_source", "last_stable_offset", "log_start_offset",
    "open_transactions", "held_records", "held_bytes", "log_end_offset", "broker_id", "replicas", "chosen_replica",
    "replica_choice_reason",
)


#: a blocked consumer group's keys in the JSON: every column of the ``blocked_consumers`` table
JSON_BLOCKED_KEYS = tuple(f.name for f in dataclasses.fields(BlockedConsumer))
JSON_REPLICA_KEYS = (
    "topic", "partition", "broker_id", "log_dir", "replica_rank", "chosen", "leader_epoch", "metadata_leader",
    "in_isr", "log_start_offset", "log_end_offset", "high_watermark", "hw_source", "checkpoint_high_watermark",
    "last_stable_offset", "open_transactions", "held_records", "divergence", "divergent_offset", "replica_holds",
    "chosen_holds",
)


def ingest_exit_code(result: IngestResult, *, strict: bool) -> ExitCode:
    """Under ``strict`` any decode issue (even a warning) is exit code 3."""
    return ExitCode.CORRUPT_INPUT if strict and result.total_issues else ExitCode.OK


def ingest(
    dump: str | Path,  # a local path, or a file://, s3://, webhdfs:// or hdfs:// URI (storage)
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
    if the run fails or is killed) the previous content of ``out`` stays as it was. One run at a
    time writes ``out`` (``OutputInUseError``); a write its storage refuses is ``OutputError``
    (``outputs.staged_output``). The dump,
    ``out`` and what the dump holds are checked before Spark starts (``UsageError``); Spark's own
    log lines stay off the console unless ``verbose``.
    """
    target = Path(out)
    check_dump(dump, input_kind)
    check_out(target)
    with staged_output(target) as stage:  # its lock taken before Spark starts
        inventory = discover(dump, input_kind)
        spark = spark or build_session(verbose=verbose, input_bytes=inventory.input_bytes)
        _, result = ingest_tables(spark, inventory, stage, progress=progress, on_stage=on_stage)
    result.tables_dir = target
    return result


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
    #: in the one finding order (``txn_audit.results.finding_order``): most severe first
    findings: list[Finding]
    ingest: IngestResult
    out_dir: Path | None
    #: one per root cause (``txn_audit.detect.incidents``), most severe first; every finding
    #: names its incident by ``incident_id``
    incidents: list[Incident] = field(default_factory=list)
    #: the consumer groups a held LSO blocks (``blocked_consumers``), by topic, partition and group
    blocked_consumers: list[BlockedConsumer] = field(default_factory=list)
    #: where the output went when ``--out`` is a store (``txn_audit.stores``): the URI of the
    #: complete output (on S3 the run's folder that the pointer names); ``out_dir`` is then None
    out_uri: str | None = None
    #: the release of the dump's brokers, which decides the commands' form (``txn_audit.fixes``)
    release: BrokerRelease = UNKNOWN_RELEASE

    @property
    def connection(self) -> Connection:
        """How the commands name the cluster (``--bootstrap-server``, ``--command-config``)."""
        return Connection(self.options.bootstrap_server, self.options.command_config)

    def fixes(self, incidents: list[Incident] | None = None) -> list[Fix]:
        """The fix of each incident (of ``incidents``; default: all) that has a command, in the
        form of the dump's brokers and naming the cluster as the options give it."""
        return fixes(self.incidents if incidents is None else incidents, self.findings, self.release,
                     self.connection)

    def fixes_script(self) -> str:
        """``fixes.sh``: every fix, for an operator to review, then run (``txn_audit.fixes``)."""
        return fixes_script(self.fixes(), self.findings, dump=self.input, as_of_ms=self.as_of_ms,
                            release=self.release, connection=self.connection)

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
            "incidents_by_severity": {s.value: incidents_by_severity.get(s, 0) for s in MOST_SEVERE_FIRST},
            "incidents_by_kind": dict(sorted(Counter(i.kind for i in self.incidents).items())),
            "findings_by_severity": {s.value: by_severity.get(s, 0) for s in MOST_SEVERE_FIRST},
            "findings_by_kind": dict(sorted(Counter(f.kind for f in self.findings).items())),
            "partitions": len(self.partitions),
            "partitions_with_lso_below_hw": len(self.lso_below_hw()),
            "consumer_groups_blocked": len({b.group_id for b in self.blocked_consumers}),
            "hw_sources": dict(sorted(Counter(p.hw_source for p in self.partitions).items())),
            "brokers": [b for b in self.ingest.brokers],
            "files": self.ingest.files,
            "decoded_files": self.ingest.decoded_files,
            "decode_issues": self.ingest.issue_counts,
            "table_rows": self.ingest.row_counts,
            "options": self.options.durations(),
            # the release of the dump's brokers as far as the commands' form goes (txn_audit.fixes)
            "brokers_release": self.release.to_json(),
            "tables": (f"{self.out_uri.split('?')[0]}/tables" if self.out_uri
                       else None if self.out_dir is None else str(self.out_dir / "tables")),
        }

    def to_json(self) -> dict[str, Any]:
        several = {(r.topic, r.partition) for r in self.replicas if r.replica_rank > 1}
        by_incident = {fix.incident.incident_id: fix for fix in self.fixes()}
        connection = self.connection
        return {
            "as_of_ms": self.as_of_ms,
            "audit_time": self.audit_time.to_json(),
            "input": self.input,
            "partitions": [_pick(p, JSON_PARTITION_KEYS) for p in self.partitions],
            # the copies of the partitions the dump holds several of, each audited on its own data
            "replicas": [_pick(r, JSON_REPLICA_KEYS) for r in self.replicas if (r.topic, r.partition) in several],
            # commands filled, in the form of the dump's brokers (txn_audit.fixes)
            "incidents": [fixes_json(by_incident.get(i.incident_id), _pick(i, JSON_INCIDENT_KEYS, JSON_INCIDENT_NAMES)
                                     | {"remediation": connection.fill_text(i.remediation)}) for i in self.incidents],
            "blocked_consumers": [_pick(b, JSON_BLOCKED_KEYS) for b in self.blocked_consumers],
            "findings": [_pick(f, JSON_FINDING_KEYS, JSON_FINDING_NAMES)
                         | {"remediation": connection.fill_text(f.remediation)} for f in self.findings],
            "summary": self.summary(),
        }


def _pick(row: Finding | Incident | PartitionStatus | ReplicaStatus | BlockedConsumer,
          keys: tuple[str, ...], names: Mapping[str, str] | None = None) -> dict[str, Any]:
    """``keys`` of ``row``, each under its JSON name (``names``: those that differ from the column's)."""
    names = names or {}
    # a severity goes out as its plain string, a tuple as a list
    def plain(value: Any) -> Any:
        return value.value if isinstance(value, Severity) else list(value) if isinstance(value, tuple) else value

    return {names.get(k, k): plain(getattr(row, k)) for k in keys}


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


def scan_exit_code(result: ScanResult, *, fail_on: Severity, strict: bool) -> ExitCode:
    """3 under ``strict`` when anything could not be decoded, else the verdict's code
    (``ExitCode.of_verdict``): 4 for a critical finding, 1 for other findings at or above
    ``fail_on``, else 0."""
    if strict and result.ingest.total_issues:
        return ExitCode.CORRUPT_INPUT
    worst = max((f.severity for f in result.findings), default=None)
    return ExitCode.of_verdict(worst, Severity(fail_on))


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
    removed afterwards. ``dump`` is a local path or a ``file://``, ``s3://``, ``webhdfs://`` or ``hdfs://`` URI.

    The dump and ``out`` are checked before Spark starts (``UsageError``), as ``options`` were
    when built, and a local ``out``'s lock is taken (``OutputInUseError`` while another run
    writes it); a write its storage refuses is ``OutputError`` (``outputs.staged_output``);
    Spark's own log lines stay off the console unless ``options.verbose``."""
    from txn_audit import stores

    check_dump(dump, options.input_kind)  # a missing dump or unreachable storage is a usage error before Spark starts
    check_out(out)
    store = stores.check_output(out) if isinstance(out, str) and stores.is_remote(out) else None
    target = None if out is None or store is not None else Path(out)
    # a local output's lock is taken before Spark starts: a run into an output another run is
    # writing stops at once (``outputs.staged_output``)
    with staged_output(target) if target is not None else nullcontext(None) as stage:
        inventory = discover(dump, options.input_kind)
        if spark is None:  # while the JVM starts
            _import_early(quality=options.quality, report=options.report and out is not None)
        spark = spark or build_session(verbose=options.verbose, input_bytes=inventory.input_bytes)
        if store is not None:
            return _scan_to_store(spark, inventory, store, options, on_stage)
        if target is None or stage is None:
            with tempfile.TemporaryDirectory(prefix="txn-audit-") as tmp, sized_for(spark, inventory.input_bytes):
                return _scan(Scan(spark, inventory, Path(tmp), replace(options, report=False), on_stage))
        with sized_for(spark, inventory.input_bytes):
            _link_previous(target, stage)
            result = _scan(Scan(spark, inventory, stage, options, on_stage, out_dir=target))
    result.ingest.tables_dir = target / "tables"
    return result


def _scan_to_store(spark: SparkSession, inventory: Any, store: Store, options: AuditOptions,
                   on_stage: Callable[[str], None] | None) -> ScanResult:
    """``scan`` with ``out`` on a store: the output is built in a local temporary folder, then
    published whole (``stores.publish_folder``); the local folder is removed afterwards."""
    from txn_audit import stores

    with tempfile.TemporaryDirectory(prefix="txn-audit-out-") as tmp, sized_for(spark, inventory.input_bytes):
        work = Path(tmp) / "out"
        work.mkdir()
        (work / MARKER).write_text("written by txn-audit; the whole folder is replaced by the next run\n")
        result = _scan(Scan(spark, inventory, work, options, on_stage))
        run = stores.new_run_id()
        result.out_uri = stores.output_uri(store, run)
        write_json_atomic(work / "summary.json", result.to_json())  # names where the tables will be
        if on_stage:
            on_stage(f"publishing to {store.display}")
        stores.publish_folder(work, store, run=run)
    return result


def _link_previous(target: Path, stage: Path) -> None:
    """The tables of the last run into ``target`` and its suites' results, by hard link into
    ``stage`` with its ledger: the stages keep what the ledger shows current for the same dump and
    options (``stages.ingest_tables``, ``stages.choose_time``). The previous output is never
    written to: what is not kept is deleted from ``stage``, each file is written anew."""
    previous = target / "tables"
    if not (target / MARKER).exists() or not (previous / LEDGER_FILE).is_file():
        return
    (stage / "tables").mkdir()
    for name in ALL_TABLES:
        if (previous / name).is_dir():
            link_tree(previous / name, stage / "tables" / name)
    if (target / "quality").is_dir():
        link_tree(target / "quality", stage / "quality")
    os.link(previous / LEDGER_FILE, stage / "tables" / LEDGER_FILE)


def _scan(scan: Scan) -> ScanResult:
    """Ingest into ``scan.work`` (keeping raw tables a previous run left there for the same
    input), then the audit's stages and the report's (``stages.run_stages``)."""
    ledger, scan.ingested = ingest_tables(scan.spark, scan.inventory, scan.tables_dir,
                                          progress=scan.options.progress, on_stage=scan.on_stage,
                                          previous=Ledger.load(scan.tables_dir))
    run_stages(scan, STAGES, ledger)
    return scan_result(scan)


def scan_result(scan: Scan) -> ScanResult:
    """What the stages found, as ``scan`` returns it."""
    from txn_audit.tables import read_arrow_table

    assert scan.ingested is not None and scan.audit_time is not None
    # one row per copy of a partition: read without a Spark job
    copies = read_arrow_table(scan.tables_dir, "replica_stability").to_pylist()
    replicas = sorted((ReplicaStatus.from_row(r) for r in copies),
                      key=lambda r: (r.topic or "", r.partition or 0, r.replica_rank))
    return ScanResult(input=scan.ingested.dump, as_of_ms=scan.options.audit_ms, options=scan.options,
                      audit_time=scan.audit_time, partitions=scan.partitions, replicas=replicas,
                      findings=scan.findings, ingest=scan.ingested, out_dir=scan.out_dir, incidents=scan.incidents,
                      release=broker_release(scan.inventory), blocked_consumers=scan.blocked)


def _report(scan: Scan, ledger: Ledger) -> Ledger:
    """``summary.json``, ``fixes.sh``, and ``report.html`` when the options ask for it."""
    result = scan_result(scan)
    write_json_atomic(scan.work / "summary.json", result.to_json())
    write_text_atomic(scan.work / FIXES_SCRIPT, result.fixes_script() + "\n")
    if scan.options.report:
        from txn_audit.report import write_report

        if scan.on_stage:
            scan.on_stage("writing the report")
        write_report(scan.work, quality_results=scan.work / "quality" / "results.json" if scan.options.quality
                     else None)
    return ledger


#: a scan's stages after ingest: the audit's, then its summary and report
STAGES = (*AUDIT_STAGES, Stage(None, _report))


# -- nightly ------------------------------------------------------------------------------


@dataclass
class NightlyResult:
    scan: ScanResult
    published: PublishedRun
    #: the incidents listed are those at or above it
    min_severity: Severity
    exit_code: ExitCode

    def summary_lines(self) -> list[str]:
        """What the nightly job logs: verdict, each incident at or above the chosen severity (its
        cause, place and fix), findings by kind, where the run went."""
        from txn_audit.warehouse import partition_name

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
            f"in {published.warehouse}/<table>/{partition_name(published.audit_date)}/",
            f"report, summary and data-quality results: {published.run_dir}",
            f"exit code {int(self.exit_code)} ({self.exit_code.name.lower().replace('_', ' ')})",
        ]


def _nightly_source(dump: str | Path, warehouse: str | Path) -> str | Path:
    """The dump the nightly job scans (a local path, or the URI), once it and the warehouse are
    checked (``UsageError``): a segment file or an empty folder says what to give instead; a dump
    that is missing, or a file, is refused: the job takes a folder of log dirs only."""
    from txn_audit.ingest.storage import DIR, resolve_dump
    from txn_audit.usage import check_dump as check_dump_argument
    from txn_audit.warehouse import check_location

    check_dump_argument(dump, InputKind.LOGDIRS)
    location = resolve_dump(dump)
    check_location(warehouse)  # refuse an unusable warehouse before the scan, not after
    if location.info().kind != DIR:
        raise UsageError(f"dump not found or not a folder: {location.display}")
    return Path(location.root) if location.is_local else str(dump)


def run_nightly(
    dump: str | Path,
    warehouse: str | Path,
    audit_date: date,
    *,
    options: AuditOptions = DEFAULTS,
    spark: SparkSession | None = None,
    min_severity: Severity = Severity.WARNING,
    fail_on: Severity | None = None,
    strict: bool = False,
    work_dir: str | Path | None = None,
    on_stage: Callable[[str], None] | None = None,
) -> NightlyResult:
    """The nightly job: ``scan`` the dump (a local path, or a ``file://``, ``s3://`` or ``hdfs://``
    URI) in a temporary folder (under ``work_dir``, which
    executors on other hosts must be able to write to), publish it as ``audit_date`` of the
    warehouse (``txn_audit.warehouse.publish_run``) and give the scan's exit code. ``options``:
    the scan's (the job shows no progress bar); ``fail_on`` (default: ``min_severity``) the
    lowest severity that makes the exit code non-zero, as ``scan``'s (``usage.ExitCode``).
    Spark's own log lines stay off the console unless ``options.verbose``."""
    from txn_audit.usage import fail_on_severity
    from txn_audit.warehouse import publish_run, resolve

    threshold = fail_on_severity(fail_on, min_severity)
    min_severity = Severity.parse(min_severity)
    options = replace(options, progress=False)
    source = _nightly_source(dump, warehouse)
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
    return NightlyResult(result, published, min_severity, scan_exit_code(result, fail_on=threshold, strict=strict))
