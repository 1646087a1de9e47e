"""``txn-audit`` command line: a thin shell over ``txn_audit.api``.

Exit codes: 0 clean, 1 findings at or above the chosen severity, 2 usage or environment
error, 3 unreadable/corrupt input under ``--strict``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.text import Text
from rich.table import Table

from txn_audit.api import ExitCode, IngestResult, ScanResult, ingest_exit_code
from txn_audit.errors import TxnAuditError

app = typer.Typer(
    name="txn-audit",
    help="Audit Apache Kafka transactions offline, from copies of broker log directories.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

out_console = Console()
err_console = Console(stderr=True)


SEVERITY_CHOICES = ("info", "warning", "critical")
FORMAT_CHOICES = ("table", "json")
INPUT_KIND_CHOICES = ("auto", "logdirs", "text")
INPUT_KIND_HELP = (
    "What DUMP holds: logdirs (copies of broker log dirs), text (kafka-dump-log.sh text dumps, "
    "kafka-transactions.sh outputs, an offsets file) or auto: log dirs when any are found, else text."
)


def _check_input_kind(input_kind: str) -> None:
    if input_kind not in INPUT_KIND_CHOICES:
        raise _fail(f"--input-kind must be one of {', '.join(INPUT_KIND_CHOICES)}, got {input_kind!r}")


DUMP_HELP = (
    "Folder holding broker log dir(s): one log dir, several log dirs of one broker, or several brokers "
    "side by side (told apart by meta.properties). A local path or a file://, s3:// or hdfs:// URI, e.g. "
    "s3://bucket/dumps/2026-11-20 (S3 settings from AWS_* variables or ~/.aws; an S3-compatible server via "
    "AWS_ENDPOINT_URL or ?endpoint_override=host:port&scheme=http). Or a folder (or one file) of "
    "kafka-dump-log.sh text output, with kafka-transactions.sh outputs and an offsets file beside it."
)


def _fail(message: str, code: ExitCode = ExitCode.USAGE) -> typer.Exit:
    err_console.print(f"[bold red]error:[/] {message}")
    return typer.Exit(int(code))


@app.command("ingest")
def ingest_command(
    dump: Annotated[
        str,
        typer.Argument(
            help=DUMP_HELP,
            show_default=False,
        ),
    ],
    out: Annotated[
        Path, typer.Option("--out", "-o", help="Folder to write the Parquet tables to (DIR/<table>/).")
    ],
    strict: Annotated[
        bool, typer.Option("--strict", help="Exit with code 3 if any file or byte could not be decoded.")
    ] = False,
    progress: Annotated[bool, typer.Option(help="Show a progress bar on a terminal.")] = True,
    input_kind: Annotated[str, typer.Option("--input-kind", help=INPUT_KIND_HELP)] = "auto",
) -> None:
    """Decode a dump of Kafka log dirs into raw Parquet tables and print a row count per table.

    Tables: segments, batches, control_markers, txn_log, producer_snapshots, aborted_txns,
    partition_offsets, offset_commits, decode_issues. Input files are only read, never changed.
    """
    from txn_audit import api

    _check_input_kind(input_kind)
    try:
        result = api.ingest(dump, out, progress=progress, on_stage=_stage_printer(), input_kind=input_kind)
    except TxnAuditError as err:
        raise _fail(str(err)) from None
    _print_ingest(result)
    code = ingest_exit_code(result, strict=strict)
    if code is ExitCode.CORRUPT_INPUT:
        err_console.print(f"[bold red]--strict:[/] {result.total_issues} decode issue(s); exit code 3")
    raise typer.Exit(int(code))




@app.command("scan")
def scan_command(
    dump: Annotated[
        str,
        typer.Argument(
            help=DUMP_HELP,
            show_default=False,
        ),
    ],
    out: Annotated[
        Path | None,
        typer.Option("--out", "-o", help="Keep the results: DIR/tables/<table>/ (Parquet), DIR/summary.json, "
                     "DIR/report.html and DIR/quality/ (results.json, Data Docs). DIR is replaced as a whole "
                     "when the run is complete; an ingest already in DIR from the same input is reused."),
    ] = None,
    as_of: Annotated[
        str | None,
        typer.Option("--as-of", help="Audit time, ISO-8601 or epoch milliseconds; ages are measured to it. "
                     "Default: the newest timestamp in the dump, so an old dump audits the same any day."),
    ] = None,
    max_transaction_timeout: Annotated[
        str, typer.Option("--max-transaction-timeout", help="An open transaction whose producer last wrote longer "
                          "ago than this, and that the coordinator does not list, is hanging (find-hanging's rule; "
                          "Kafka's default transaction.max.timeout.ms is 15m).")
    ] = "15m",
    late_tolerance: Annotated[
        str, typer.Option("--late-tolerance", help="How much earlier than the previous marker a batch may be "
                          "created before it counts as a late arrival (clients stamp records at send time, "
                          "so healthy traffic shows ~0.1 s).")
    ] = "1s",
    min_severity: Annotated[
        str, typer.Option("--min-severity", help="Findings at or above this severity (info, warning, critical) "
                          "are listed and make the exit code 1.")
    ] = "warning",
    output_format: Annotated[
        str, typer.Option("--format", help="table: a verdict and tables on the terminal; json: the JSON contract "
                          "documented in the README, on stdout.")
    ] = "table",
    strict: Annotated[
        bool, typer.Option("--strict", help="Exit with code 3 if any file or byte could not be decoded.")
    ] = False,
    quality: Annotated[bool, typer.Option(help="Run the data-quality suites over every table "
                                          "(broken invariants become invariant_violation findings).")] = True,
    report: Annotated[bool, typer.Option(help="Write DIR/report.html (needs --out).")] = True,
    progress: Annotated[bool, typer.Option(help="Show a progress bar on a terminal.")] = True,
    input_kind: Annotated[str, typer.Option("--input-kind", help=INPUT_KIND_HELP)] = "auto",
) -> None:
    """Audit every transaction in a dump: hanging, open, late, absorbed, stuck LSOs and more.

    Prints a verdict line, the findings (with the evidence and the repair command) and the
    partitions whose last stable offset is behind the high watermark. Exit code 0 when clean,
    1 when there are findings at or above --min-severity, 2 on usage errors, 3 on corrupt
    input under --strict.
    """
    from txn_audit import api
    from txn_audit.timeparse import parse_duration_ms, parse_time_ms

    if min_severity not in SEVERITY_CHOICES:
        raise _fail(f"--min-severity must be one of {', '.join(SEVERITY_CHOICES)}, got {min_severity!r}")
    if output_format not in FORMAT_CHOICES:
        raise _fail(f"--format must be one of {', '.join(FORMAT_CHOICES)}, got {output_format!r}")
    _check_input_kind(input_kind)
    try:
        as_of_ms = parse_time_ms(as_of) if as_of is not None else None
        timeout_ms = parse_duration_ms(max_transaction_timeout)
        tolerance_ms = parse_duration_ms(late_tolerance)
        result = api.scan(
            dump, out, as_of_ms=as_of_ms, max_transaction_timeout_ms=timeout_ms, late_tolerance_ms=tolerance_ms,
            progress=progress and output_format == "table", on_stage=_stage_printer(), quality=quality,
            report=report, input_kind=input_kind,
        )
    except TxnAuditError as err:
        raise _fail(str(err)) from None
    if output_format == "json":
        sys.stdout.write(json.dumps(result.to_json(), indent=2, sort_keys=False) + "\n")
    else:
        _print_scan(result, min_severity)
    code = api.scan_exit_code(result, min_severity=min_severity, strict=strict)
    if code is ExitCode.CORRUPT_INPUT:
        err_console.print(f"[bold red]--strict:[/] {result.ingest.total_issues} decode issue(s); exit code 3")
    raise typer.Exit(int(code))


def _print_scan(result: ScanResult, min_severity: str) -> None:
    from txn_audit.api import verdict
    from txn_audit.schemas import HW_CAPPED
    from txn_audit.timeparse import format_time_ms

    colour = {"CLEAN": "green", "INFO": "cyan", "WARNING": "yellow", "CRITICAL": "red"}
    line = verdict(result, min_severity)
    out_console.print(f"[bold {colour.get(line.split(':')[0], 'white')}]{line}[/]")
    out_console.print(
        f"[dim]{result.input}: {len(result.partitions)} partitions"
        + (f" ({several} with copies on several brokers, each audited from one: the JSON's replicas and the "
           "report's Replicas section say which and why)"
           if (several := sum(1 for p in result.partitions if (p.get("replicas") or 1) > 1)) else "")
        + f", {result.ingest.files} files, audit time {format_time_ms(result.as_of_ms)}"
        + (f"; tables in {result.out_dir / 'tables'}" if result.out_dir else "") + "[/]"
    )
    shown = result.at_or_above(min_severity)
    if shown:
        # two columns: what and where stacked in the first, the sentence to check in the second,
        # so that the table stays readable at 80 columns and in a nightly log
        sev_colour = {"critical": "red", "warning": "yellow", "info": "cyan"}
        table = Table(title="Findings", title_justify="left", show_lines=True, expand=True)
        table.add_column("finding", no_wrap=True, ratio=2)
        table.add_column("evidence / fix", ratio=3, overflow="fold")
        for f in shown:
            where = (f"{f['topic']}-{f['partition']}" if f["topic"] is not None
                     else f["file"] or (f"broker {f['broker_id']}" if f["broker_id"] is not None else "-"))
            head = Text.assemble((f["severity"].upper(), f"bold {sev_colour.get(f['severity'], 'white')}"),
                                 " ", (f["kind"], "bold"), "\n", where)
            if f["producer_id"] is not None:
                head.append(f"\nproducer {f['producer_id']}/{f['producer_epoch']}")
                if f["transactional_id"]:
                    head.append(f"\n({f['transactional_id']})")
            if f["first_offset"] is not None:
                head.append(f"\noffset {f['first_offset']}" if f["last_offset"] in (None, f["first_offset"])
                            else f"\noffsets {f['first_offset']}-{f['last_offset']}")
            body = Text(f["evidence"])
            if f["remediation"]:
                body.append("\nfix: ", style="bold").append(f["remediation"])
            table.add_row(head, body)
        out_console.print(table)
    def hw_of(p: dict[str, Any]) -> int | None:
        return p["log_end_offset"] if p.get("hw_source") == "log_end" else p["high_watermark"]

    stuck = [p for p in result.partitions if hw_of(p) is not None and p["last_stable_offset"] < hw_of(p)]
    if stuck:
        table = Table(title="Partitions whose LSO is below the high watermark", title_justify="left")
        copies = any((p.get("replicas") or 1) > 1 for p in result.partitions)
        for col in ("partition", "HW", "HW from", "LSO", "held records", "held bytes", "held for", "culprit",
                    *(["copy audited"] if copies else [])):
            table.add_column(col, justify="right" if col in ("HW", "LSO", "held records", "held bytes", "held for")
                             else "left")
        for p in stuck:
            held_for = "-" if p["held_ms"] is None else f"{p['held_ms'] / 1000:.1f} s"
            culprit = "-" if p["culprit_producer_id"] is None else (
                f"producer {p['culprit_producer_id']}" + (f" ({p['culprit_transactional_id']})"
                                                         if p["culprit_transactional_id"] else ""))
            hw_from = {"checkpoint": "checkpoint", "offsets_file": "offsets file",
                       HW_CAPPED: "log end (the checkpoint says more)"}.get(
                p.get("hw_source") or "checkpoint", "log end (HW unknown)")
            cells = [f"{p['topic']}-{p['partition']}", str(hw_of(p)), hw_from, str(p["last_stable_offset"]),
                     f"{p['held_records']:,}", f"{p['held_bytes']:,}", held_for, culprit]
            table.add_row(*cells, *([p["chosen_replica"]] if copies else []))
        out_console.print(table)
    hidden = len(result.findings) - len(shown)
    if hidden:
        out_console.print(f"[dim]{hidden} finding(s) below {min_severity} not shown (--min-severity info shows them)[/]")


@app.command("sample")
def sample_command(
    out: Annotated[Path, typer.Option("--out", "-o", help="Folder to write the sample dump to.")],
    seed: Annotated[int, typer.Option(help="Random seed: the same seed writes the same bytes.")] = 7,
    force: Annotated[bool, typer.Option("--force", help="Replace OUT if it already holds a dump.")] = False,
) -> None:
    """Write a small, realistic dump of two brokers' log dirs with planted anomalies.

    OUT/manifest.json lists every planted anomaly (kind, topic, partition, producer, offsets),
    so a scan of OUT can be checked against it.
    """
    from txn_audit.sample import write_sample

    try:
        manifest = write_sample(out, seed=seed, force=force)
    except TxnAuditError as err:
        raise _fail(str(err)) from None
    out_console.print(
        f"wrote sample dump to [bold]{out}[/]: {len(manifest['brokers'])} broker(s), "
        f"{len(manifest['partitions'])} partitions, {len(manifest['anomalies'])} planted anomalies "
        f"(see {out / 'manifest.json'})"
    )


def _stage_printer() -> object:
    def on_stage(stage: str) -> None:
        if not err_console.is_terminal:
            err_console.print(f"[dim]{stage}[/]")

    return on_stage


def _print_ingest(result: IngestResult) -> None:
    brokers = ", ".join("?" if b is None else str(b) for b in result.brokers)
    out_console.print(
        f"Ingested [bold]{result.dump}[/]: broker(s) {brokers}; {len(result.log_dirs)} log dir(s), "
        f"{result.partitions} partitions, {result.files} files ({result.decoded_files} decoded)"
    )
    table = Table(title=f"Tables in {result.tables_dir}", title_justify="left")
    table.add_column("table")
    table.add_column("rows", justify="right")
    for name, count in result.row_counts.items():
        table.add_row(name, f"{count:,}")
    out_console.print(table)
    if result.total_issues:
        parts = ", ".join(f"{n} {sev}" for sev, n in sorted(result.issue_counts.items()))
        out_console.print(f"[yellow]decode issues:[/] {parts} (see the decode_issues table)")
        issues = Table(show_header=True)
        for col in ("severity", "kind", "file", "position", "detail"):
            issues.add_column(col, overflow="fold")
        for row in result.issues_preview[:10]:
            issues.add_row(*(str(row.get(c, "")) for c in ("severity", "kind", "file", "position", "detail")))
        out_console.print(issues)
    else:
        out_console.print("[green]every file decoded cleanly[/]")


def main() -> None:
    """Console-script entry point."""
    try:
        app()
    except KeyboardInterrupt:
        err_console.print("interrupted")
        sys.exit(130)


if __name__ == "__main__":
    main()
