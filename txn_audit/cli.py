"""``txn-audit`` command line: a thin shell over ``txn_audit.api``.

Exit codes: ``txn_audit.usage.ExitCode`` (0 clean, 1 warnings, 4 critical findings at or
above ``--fail-on``; 2 a usage error, click's own included, each told on one ``error:`` line;
3 corrupt input under ``--strict``; 73 an output that cannot be written, 75 an output another
run is writing, 70 a failure inside txn-audit). Help is click's plain formatter: it reads at 80
columns, option names whole.
"""

from __future__ import annotations

import argparse
import atexit
import inspect
import json
import os
import sys
import traceback
import typing
from collections.abc import Callable, Iterable
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text
from typer._click.core import Context as ClickContext
from typer._click.exceptions import ClickException, NoArgsIsHelpError
from typer._click.formatting import HelpFormatter
from typer.core import TyperCommand, TyperGroup
from typer.models import OptionInfo

from txn_audit import __version__
from txn_audit.errors import TxnAuditError
from txn_audit.severity import Severity
from txn_audit.usage import (
    DEFAULTS,
    AuditOptions,
    ExitCode,
    InputKind,
    check_dump,
    check_out,
    default_text,
    fail_on_severity,
)

if TYPE_CHECKING:
    # txn_audit.api (and pyspark, pyarrow, numba) is imported once the options are checked
    from txn_audit.api import IngestResult, ScanResult
    from txn_audit.results import Incident

#: the name the console script runs under (usage lines, shell completion's variable)
PROG_NAME = "txn-audit"

out_console = Console()
err_console = Console(stderr=True)


def _error_line(message: str) -> None:
    """``error: message`` on stderr, one line however long (a log keeps it whole)."""
    err_console.print(Text.assemble(("error:", "bold red"), " ", " ".join(message.split())), soft_wrap=True)


#: stands for a hyphen while click wraps help text, so that no line breaks inside a word at one
#: (an option name, find-hanging's)
_KEEP_HYPHEN = "\u2011"


class WholeWordsFormatter(HelpFormatter):
    """click's help formatter, wrapping at spaces only: an option name in a sentence stays whole."""

    def write_text(self, text: str) -> None:
        super().write_text(text.replace("-", _KEEP_HYPHEN))

    def write_dl(self, rows: typing.Sequence[tuple[str, str]], col_max: int = 30, col_spacing: int = 2) -> None:
        super().write_dl([(term, text.replace("-", _KEEP_HYPHEN)) for term, text in rows], col_max, col_spacing)

    def getvalue(self) -> str:
        return super().getvalue().replace(_KEEP_HYPHEN, "-")


class HelpContext(typer.Context):
    """A command's context, its help written by ``WholeWordsFormatter``."""

    formatter_class = WholeWordsFormatter


class Command(TyperCommand):
    """A txn-audit command: its arguments shown by their metavar alone (``DUMP``), in the usage
    line and in the help, as click's convention has it."""

    context_class = HelpContext

    def collect_usage_pieces(self, ctx: ClickContext) -> list[str]:
        return [piece[1:-1] if piece.startswith("{") and piece.endswith("}") else piece
                for piece in super().collect_usage_pieces(ctx)]

    def format_options(self, ctx: ClickContext, formatter: HelpFormatter) -> None:
        arguments: list[tuple[str, str]] = []
        options: list[tuple[str, str]] = []
        for param in self.get_params(ctx):
            record = param.get_help_record(ctx)
            if record is None:
                continue
            if param.param_type_name == "argument":
                arguments.append((param.metavar or (param.name or "").upper(), record[1]))
            else:
                options.append(record)
        for title, rows in (("Arguments", arguments), ("Options", options)):
            if rows:
                with formatter.section(title):
                    formatter.write_dl(rows)


class Commands(TyperGroup):
    """txn-audit's command group. Run standalone (the console script, ``CliRunner``), a usage
    error click finds itself (a bad choice, a missing argument, an unknown option or command)
    is one ``error:`` line and exit code 2, as every mistake txn-audit finds; anything raised
    that no command turned into an exit code is a failure inside txn-audit: its traceback,
    an ``error:`` line and exit code 70."""

    def main(self, args: typing.Sequence[str] | None = None, prog_name: str | None = None,
             complete_var: str | None = None, standalone_mode: bool = True, windows_expand_args: bool = True,
             **extra: typing.Any) -> typing.Any:
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, False, windows_expand_args, **extra)
        code: typing.Any
        try:  # exits (typer.Exit, --help) come back as their code; usage errors are raised
            code = super().main(args, prog_name, complete_var, False, windows_expand_args, **extra)
        except NoArgsIsHelpError as err:  # no command at all: the help, as click gives it
            err.show()
            code = err.exit_code
        except ClickException as err:
            _error_line(err.format_message().replace(": Value error, ", ": "))
            code = ExitCode.USAGE if err.exit_code == 2 else err.exit_code
        except Exception as err:  # noqa: BLE001 - the last resort: a bug, told as one
            traceback.print_exc()
            _error_line(f"internal failure, {type(err).__name__}: {err} (a bug in txn-audit; exit code "
                        f"{int(ExitCode.INTERNAL)})")
            code = ExitCode.INTERNAL
        sys.exit(int(code) if isinstance(code, int) else 0)


Commands.context_class = HelpContext


def _show_version(value: bool) -> None:
    if value:
        out_console.print(f"{PROG_NAME} {__version__}", markup=False, highlight=False)
        raise typer.Exit()


app = typer.Typer(
    name=PROG_NAME,
    cls=Commands,
    help="Audit Apache Kafka transactions offline, from copies of broker log directories.",
    no_args_is_help=True,
    add_completion=True,  # --install-completion / --show-completion for bash, zsh, fish, PowerShell
    pretty_exceptions_enable=False,
    rich_markup_mode=None,  # click's formatter: full option names, paragraphs re-wrapped to the terminal
    context_settings={"max_content_width": 100},
)


@app.callback()
def _commands(
    version: Annotated[bool, typer.Option("--version", callback=_show_version, is_eager=True,
                                          help="Print txn-audit's version and exit.")] = False,
) -> None:
    """Audit Apache Kafka transactions offline, from copies of broker log directories."""
#: the width of output that is not a terminal (a pipe, a file, a CI log): as wide as each line
#: needs, so that no name is cut and no command is wrapped
UNBOUNDED_WIDTH = 100_000
#: the evidence column's width in such output: sentences wrap at words, as on a terminal
EVIDENCE_WIDTH = 72


def _console() -> Console:
    """``out_console`` on a terminal; elsewhere a console that never cuts or wraps a line."""
    return out_console if out_console.is_terminal else Console(width=UNBOUNDED_WIDTH)


class OutputFormat(StrEnum):
    """How ``scan`` prints its result."""

    TABLE = "table"
    JSON = "json"


INPUT_KIND_HELP = (
    "What DUMP holds: logdirs (copies of broker log dirs), text (kafka-dump-log.sh text dumps, "
    "kafka-transactions.sh outputs, an offsets file) or auto: log dirs when any are found, else text."
)

DUMP_HELP = (
    "Folder holding broker log dir(s): one log dir, several log dirs of one broker, or several brokers "
    "side by side (told apart by meta.properties). A local path or a file://, s3://, webhdfs:// or hdfs:// "
    "URI, e.g. s3://bucket/dumps/2026-11-20 (S3 settings from AWS_* variables or ~/.aws; an S3-compatible server "
    "via AWS_ENDPOINT_URL or ?endpoint_override=host:port&scheme=http) or webhdfs://namenode:9870/dumps/2026-11-20 "
    "(HDFS over the NameNode's HTTP port; hdfs:// needs Hadoop's libhdfs). Or a folder (or one file) of "
    "kafka-dump-log.sh text output, with kafka-transactions.sh outputs and an offsets file beside it."
)


def _fail(message: str, code: ExitCode = ExitCode.USAGE) -> typer.Exit:
    _error_line(message)
    return typer.Exit(int(code))


def _failed(err: TxnAuditError) -> typer.Exit:
    """A run that ended with ``err``: its line, and its code (``ExitCode.of_error``)."""
    return _fail(str(err), ExitCode.of_error(err))


def _exit_codes_help(codes: Iterable[ExitCode]) -> str:
    """``codes`` and their meanings, a line each, kept as they are by click's formatter (``\\b``)."""
    return "\b\nExit codes:\n" + "\n".join(f"  {int(c):>2}  {c.meaning}" for c in codes)


# -- the audit options, shared by ``scan`` and the nightly job (``argparse_audit_options``) ----

#: the durations' defaults as the command line takes them (``usage.AuditOptions``)
DEFAULT_MAX_TRANSACTION_TIMEOUT = default_text(DEFAULTS.max_transaction_timeout_ms)
DEFAULT_LATE_TOLERANCE = default_text(DEFAULTS.late_tolerance_ms)

AsOfOption = Annotated[
    str | None,
    typer.Option("--as-of", metavar="TIME",
                 help="Audit time: ISO-8601, epoch milliseconds (not seconds) or 'now'; ages are "
                 "measured to it. Default: when the copy was taken, as the dump shows it (the KRaft metadata "
                 "log's newest record, else the files' times where they agree with the records, else the newest "
                 "record), so a dump audits the same any day. What the dump proves (a transaction the "
                 "coordinator ended without a partition) does not depend on it."),
]
MaxTransactionTimeoutOption = Annotated[
    str, typer.Option("--max-transaction-timeout", metavar="DURATION",
                      help="An open transaction whose producer last wrote longer "
                      "ago than this, and that the coordinator does not list, is hanging (find-hanging's rule; "
                      "Kafka's default transaction.max.timeout.ms).")
]
LateToleranceOption = Annotated[
    str, typer.Option("--late-tolerance", metavar="DURATION",
                      help="How much earlier than the previous marker a batch may be "
                      "created before it counts as a late arrival (clients stamp records at send time, "
                      "so healthy traffic shows ~0.1 s).")
]
MinSeverityOption = Annotated[
    Severity, typer.Option("--min-severity", metavar="SEVERITY", help="List the incidents and findings at or "
                           "above this severity: info, warning or critical.")
]
FailOnOption = Annotated[
    Severity | None, typer.Option("--fail-on", metavar="SEVERITY", show_default=False, help="The lowest severity "
                                  "that makes the exit code non-zero (info, warning or critical; not below "
                                  "--min-severity): 4 when a critical finding is found, else 1. Default: "
                                  "--min-severity's.")
]
StrictOption = Annotated[
    bool, typer.Option("--strict", help="Exit with code 3 if any file or byte could not be decoded, whatever "
                       "the findings.")
]
InputKindOption = Annotated[InputKind, typer.Option("--input-kind", metavar="KIND", help=INPUT_KIND_HELP)]
VerboseOption = Annotated[
    bool, typer.Option("--verbose", help="Show Spark's own log lines on stderr (the JVM's start-up notices, "
                       "Spark's warnings); without it they stay off the screen.")
]

#: the ``scan`` options the nightly job takes too, with the same names, defaults and help
AUDIT_OPTIONS = ("as_of", "max_transaction_timeout", "late_tolerance", "min_severity", "fail_on", "strict",
                 "bootstrap_server", "command_config", "verbose")


def add_audit_options(parser: argparse.ArgumentParser, names: Iterable[str] = AUDIT_OPTIONS) -> None:
    """Add the ``scan`` command's options ``names`` to ``parser`` (the nightly job's), as this
    module defines them: same flags, defaults, choices and help. Each lands in ``parser``'s
    namespace under its parameter name, as a string (or a bool for a flag)."""
    parameters = inspect.signature(scan_command, eval_str=True).parameters
    for name in names:
        param = parameters[name]
        kind, info = typing.get_args(param.annotation)[:2]  # Annotated[type, typer.Option(...)]
        assert isinstance(info, OptionInfo), name
        kind = next((k for k in typing.get_args(kind) if k is not type(None)), kind)  # X | None: X
        # typer.Option("--flag", ...) in an Annotated hint: the first name is held as the default
        flags = [d for d in (info.default, *(info.param_decls or ())) if isinstance(d, str) and d.startswith("-")]
        help_text = (info.help or "").replace("%", "%%")  # argparse formats help with %
        if kind is bool:
            parser.add_argument(*flags, dest=name, action="store_true", help=help_text)
            continue
        default = param.default.value if isinstance(param.default, StrEnum) else param.default
        choices = [c.value for c in kind] if isinstance(kind, type) and issubclass(kind, StrEnum) else None
        parser.add_argument(*flags, dest=name, default=default, choices=choices, metavar=info.metavar,
                            help=help_text if default is None else f"{help_text} (default: {default})")


@app.command("ingest", cls=Command, short_help="Decode a dump into raw Parquet tables.",
             epilog=_exit_codes_help((ExitCode.OK, ExitCode.USAGE, ExitCode.CORRUPT_INPUT, ExitCode.INTERNAL,
                                      ExitCode.OUTPUT, ExitCode.BUSY)))
def ingest_command(
    dump: Annotated[str, typer.Argument(metavar="DUMP", help=DUMP_HELP, show_default=False)],
    out: Annotated[
        Path, typer.Option("--out", "-o", metavar="DIR", help="Folder to write the Parquet tables to "
                           "(DIR/<table>/).")
    ],
    strict: StrictOption = False,
    progress: Annotated[bool, typer.Option(help="Show a progress bar on a terminal.")] = True,
    input_kind: InputKindOption = InputKind.AUTO,
    verbose: VerboseOption = False,
) -> None:
    """Decode a dump of Kafka log dirs into raw Parquet tables and print a row count per table.

    The tables are the README's (segments, batches, control_markers, txn_log and the rest): one folder
    each under DIR. Input files are only read, never changed.
    """
    try:  # before Spark, and before importing what it needs: a mistake is told at once
        check_dump(dump, input_kind)
        check_out(out)
    except TxnAuditError as err:
        raise _failed(err) from None
    from txn_audit import api

    try:
        result = api.ingest(dump, out, progress=progress, on_stage=_stage_printer(), input_kind=input_kind,
                            verbose=verbose)
    except TxnAuditError as err:
        raise _failed(err) from None
    _print_ingest(result)
    code = api.ingest_exit_code(result, strict=strict)
    if code is ExitCode.CORRUPT_INPUT:
        err_console.print(f"[bold red]--strict:[/] {result.total_issues} decode issue(s); exit code 3")
    raise typer.Exit(int(code))




@app.command("scan", cls=Command, short_help="Audit every transaction in a dump.", epilog=_exit_codes_help(ExitCode))
def scan_command(
    dump: Annotated[str, typer.Argument(metavar="DUMP", help=DUMP_HELP, show_default=False)],
    out: Annotated[
        str | None,
        typer.Option("--out", "-o", metavar="DIR",
                     help="Keep the results: DIR/tables/<table>/ (Parquet), DIR/summary.json, "
                     "DIR/report.html and DIR/quality/ (results.json, Data Docs). DIR is replaced as a whole "
                     "when the run is complete; an ingest already in DIR from the same input is reused. DIR is a "
                     "local path or a store's URI: s3://bucket/folder (the output is published under a run "
                     "folder that DIR/.txn-audit-output names, written last), webhdfs://namenode:9870/folder or "
                     "hdfs://namenode:8020/folder (swapped in by renames); the run is built locally first. One run "
                     "at a time writes a local DIR: another stops at once (exit code 75)."),
    ] = None,
    as_of: AsOfOption = None,
    max_transaction_timeout: MaxTransactionTimeoutOption = DEFAULT_MAX_TRANSACTION_TIMEOUT,
    late_tolerance: LateToleranceOption = DEFAULT_LATE_TOLERANCE,
    min_severity: MinSeverityOption = Severity.WARNING,
    fail_on: FailOnOption = None,
    output_format: Annotated[
        OutputFormat, typer.Option("--format", metavar="FORMAT",
                                   help="table: a verdict and tables on the terminal; json: the JSON "
                                   "contract documented in the README, on stdout.")
    ] = OutputFormat.TABLE,
    strict: StrictOption = False,
    quality: Annotated[bool, typer.Option(help="Run the data-quality suites over every table "
                                          "(broken invariants become invariant_violation findings).")] = True,
    report: Annotated[bool, typer.Option(help="Write DIR/report.html (needs --out).")] = True,
    progress: Annotated[bool, typer.Option(help="Show a progress bar on a terminal.")] = True,
    input_kind: InputKindOption = InputKind.AUTO,
    verbose: VerboseOption = False,
    bootstrap_server: Annotated[
        str | None, typer.Option("--bootstrap-server", metavar="HOST:PORT",
                                 help="The cluster the printed fixes name (HOST:PORT, or several separated by commas); "
                                 "without it they say <broker>.")
    ] = None,
    command_config: Annotated[
        str | None, typer.Option("--command-config", metavar="FILE",
                                 help="The client properties file the printed fixes pass to Kafka's tools (a "
                                 "secured cluster's credentials).")
    ] = None,
) -> None:
    """Audit every transaction in a dump: hanging, open, late, absorbed, stuck LSOs and more.

    Prints a verdict line that counts incidents, the incidents (one per root cause: what
    happened, its findings beneath it and the repair commands, or why none is needed) and the
    partitions whose last stable offset is behind the high watermark. Every repair command is
    printed whole on a line of its own, below the incidents; when stdout is not a terminal,
    nothing is cut or wrapped. With --out, DIR/fixes.sh holds every fix, commented out, for an
    operator to review and run. The exit code says the verdict to a monitor: 0 clean, 1
    warnings, 4 a critical finding, counting the findings at or above --fail-on; a failure has a
    code of its own.
    """
    try:  # before Spark, and before importing what it needs: a mistake is told at once
        options = AuditOptions.from_text(
            as_of, max_transaction_timeout, late_tolerance, progress=progress and output_format is OutputFormat.TABLE,
            quality=quality, report=report, input_kind=InputKind(input_kind).value, verbose=verbose,
            bootstrap_server=bootstrap_server, command_config=command_config)
        threshold = fail_on_severity(fail_on, min_severity)
        check_dump(dump, input_kind)
        check_out(out)
    except TxnAuditError as err:
        raise _failed(err) from None
    from txn_audit import api

    try:
        result = api.scan(dump, out, options=options, on_stage=_stage_printer())
    except TxnAuditError as err:
        raise _failed(err) from None
    if output_format is OutputFormat.JSON:
        sys.stdout.write(json.dumps(result.to_json(), indent=2, sort_keys=False) + "\n")
    else:
        _print_scan(result, min_severity)
    code = api.scan_exit_code(result, fail_on=threshold, strict=strict)
    if code is ExitCode.CORRUPT_INPUT:
        err_console.print(f"[bold red]--strict:[/] {result.ingest.total_issues} decode issue(s); exit code 3")
    raise typer.Exit(int(code))


SEVERITY_COLOURS = {Severity.CRITICAL: "red", Severity.WARNING: "yellow", Severity.INFO: "cyan"}


def _print_scan(result: ScanResult, min_severity: Severity) -> None:
    """The scan's verdict, its incidents at or above ``min_severity`` with their findings and
    fixes, and the partitions whose LSO is held, as tables that read on a terminal and in a log."""
    console = _console()
    terminal = console is out_console
    _print_heading(console, result, min_severity)
    incidents = result.incidents_at_or_above(min_severity)
    fixes = result.fixes(incidents)
    if incidents:
        console.print(_incident_table(result, incidents, terminal, [f.incident.incident_id for f in fixes]))
    if fixes:
        from txn_audit.fixes import fix_lines

        # each command whole on a line of its own, to be copied in one piece, on a terminal as in a log
        console.print("Fixes, one command per line:", style="bold", markup=False, highlight=False)
        for number, fix in enumerate(fixes, 1):
            console.print(f"# [{number}] {fix.title}", markup=False, highlight=False, soft_wrap=True)
            for line in fix_lines(fix):
                console.print(line, markup=False, highlight=False, soft_wrap=True)
    if result.lso_below_hw():  # the partition status of partition_stability, as summary.json counts it
        console.print(_held_table(result, terminal))
    if result.blocked_consumers:
        console.print(_blocked_table(result, terminal))
    hidden = len(result.incidents) - len(incidents)
    if hidden:
        console.print(f"[dim]{hidden} incident(s) below {min_severity.value} not shown "
                      "(--min-severity info shows them)[/]")
    elif result.at_or_above(min_severity) and not incidents:  # a result read without incidents
        console.print(f"[dim]{len(result.at_or_above(min_severity))} finding(s); see the JSON's findings[/]")


def _print_heading(console: Console, result: ScanResult, min_severity: Severity) -> None:
    """The verdict in its severity's colour, what was scanned, and the audit time."""
    from txn_audit.api import verdict
    from txn_audit.timeparse import format_time_ms

    line = verdict(result, min_severity)
    colour = {s.value.upper(): c for s, c in SEVERITY_COLOURS.items()} | {"CLEAN": "green"}
    console.print(f"[bold {colour.get(line.split(':')[0], 'white')}]{line}[/]")
    console.print(
        f"[dim]{result.input}: {len(result.partitions)} partitions"
        + (f" ({several} with copies on several brokers, each audited from one: the JSON's replicas and the "
           "report's Replicas section say which and why)"
           if (several := sum(1 for p in result.partitions if p.replicas > 1)) else "")
        + f", {result.ingest.files} files"
        + (f"; tables in {result.out_dir / 'tables'}" if result.out_dir else "")
        + (f"; tables in {result.out_uri.split('?')[0]}/tables" if result.out_uri else "") + "[/]"
    )
    console.print(f"[dim]audit time {format_time_ms(result.as_of_ms)}: {result.audit_time.how}[/]")
    if result.audit_time.warning:
        console.print(f"[yellow]warning: {result.audit_time.warning}[/]")


def _incident_table(result: ScanResult, incidents: list[Incident], terminal: bool, fixed: list[str]) -> Table:
    """One row per incident: what and where stacked in the first column; its paragraph, its
    findings beneath it and its fix in the second, so the table reads at 80 columns and in a log.
    A fix with commands (the incident ids ``fixed``, in order) is named by its number, its
    commands printed whole under the table."""
    table = Table(title="Incidents (one per cause; its findings beneath it)", title_justify="left",
                  show_lines=True, expand=terminal)
    if terminal:
        table.add_column("incident", no_wrap=True, ratio=2)
        table.add_column("what happened / findings / fix", ratio=3, overflow="fold")
    else:  # the first column as wide as its longest line, the sentences wrapped at words
        table.add_column("incident", no_wrap=True)
        table.add_column("what happened / findings / fix", max_width=EVIDENCE_WIDTH)
    for incident in incidents:
        where = ", ".join(incident.partitions) or "-"
        head = Text.assemble((incident.severity.value.upper(), f"bold {SEVERITY_COLOURS[incident.severity]}"),
                             " ", (incident.kind.replace("_", " "), "bold"), "\n", where)
        if incident.producer_id is not None:
            head.append(f"\nproducer {incident.producer_id}/{incident.producer_epoch}")
            if incident.transactional_id:
                head.append(f"\n({incident.transactional_id})")
        if incident.first_offset is not None:
            head.append(f"\nfrom offset {incident.first_offset}")
        head.append(f"\n{incident.incident_id}", style="dim")
        body = Text(incident.summary)
        for f in result.findings_of(incident):
            place = (f"{f.topic}-{f.partition}" if f.topic is not None
                     else f.file or (f"broker {f.broker_id}" if f.broker_id is not None else "-"))
            at = "" if f.first_offset is None else f" offset {f.first_offset}"
            body.append(f"\n  - {f.severity.value} {f.kind} {place}{at}")
        fix = incident.remediation
        if incident.incident_id in fixed:
            fix = f"[{fixed.index(incident.incident_id) + 1}] under the table"
        body.append("\nfix: ", style="bold").append(fix)
        table.add_row(head, body)
    return table


def _held_table(result: ScanResult, terminal: bool) -> Table:
    """The partitions whose LSO is below the high watermark: what holds it and since when."""
    from txn_audit.detect.words import duration_text
    from txn_audit.schemas import HW_CAPPED

    table = Table(title="Partitions whose LSO is below the high watermark", title_justify="left")
    copies = any(p.replicas > 1 for p in result.partitions)
    for col in ("partition", "HW", "HW from", "LSO", "held records", "held bytes", "held for", "culprit",
                *(["copy audited"] if copies else [])):
        table.add_column(col, justify="right" if col in ("HW", "LSO", "held records", "held bytes", "held for")
                         else "left", no_wrap=not terminal)
    for p in result.lso_below_hw():
        held_for = "-" if p.held_ms is None else duration_text(p.held_ms)
        culprit = "-" if p.culprit_producer_id is None else (
            f"producer {p.culprit_producer_id}" + (f" ({p.culprit_transactional_id})"
                                                  if p.culprit_transactional_id else ""))
        hw_from = {"checkpoint": "checkpoint", "offsets_file": "offsets file",
                   HW_CAPPED: "log end (the checkpoint says more)"}.get(p.hw_source, "log end (HW unknown)")
        cells = [f"{p.topic}-{p.partition}", str(p.effective_high_watermark), hw_from, str(p.last_stable_offset),
                 f"{p.held_records:,}", f"{p.held_bytes:,}", held_for, culprit]
        table.add_row(*cells, *([p.chosen_replica] if copies else []))
    return table


def _blocked_table(result: ScanResult, terminal: bool) -> Table:
    """The consumer groups blocked at or below a held LSO (``blocked_consumers``)."""
    from txn_audit.detect.words import duration_text

    table = Table(title="Consumer groups blocked by a held LSO", title_justify="left")
    for col in ("group", "partition", "committed", "LSO", "HW", "records behind", "time behind"):
        table.add_column(col, justify="left" if col in ("group", "partition") else "right", no_wrap=not terminal)
    for b in result.blocked_consumers:
        behind = "-" if b.time_behind_ms is None else duration_text(b.time_behind_ms)
        table.add_row(b.group_id, f"{b.topic}-{b.partition}", str(b.committed_offset), str(b.last_stable_offset),
                      str(b.high_watermark), f"{b.records_behind:,}", behind)
    return table


@app.command("sample", cls=Command, short_help="Write a small dump with planted anomalies.")
def sample_command(
    out: Annotated[Path, typer.Option("--out", "-o", metavar="DIR", help="Folder to write the sample dump to.")],
    seed: Annotated[int, typer.Option(metavar="N", help="Random seed: the same seed writes the same bytes.")] = 7,
    force: Annotated[bool, typer.Option("--force", help="Replace DIR if it already holds a dump.")] = False,
) -> None:
    """Write a small, realistic dump of two brokers' log dirs with planted anomalies.

    DIR/manifest.json lists every planted anomaly (kind, topic, partition, producer, offsets),
    so a scan of DIR can be checked against it.
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


def _stage_printer() -> Callable[[str], None]:
    def on_stage(stage: str) -> None:
        if not err_console.is_terminal:
            err_console.print(f"[dim]{stage}[/]")

    return on_stage


def _print_ingest(result: IngestResult) -> None:
    console = _console()  # off a terminal, nothing is cut or wrapped
    brokers = ", ".join("?" if b is None else str(b) for b in result.brokers)
    console.print(
        f"Ingested [bold]{result.dump}[/]: broker(s) {brokers}; {len(result.log_dirs)} log dir(s), "
        f"{result.partitions} partitions, {result.files} files ({result.decoded_files} decoded)"
    )
    table = Table(title=f"Tables in {result.tables_dir}", title_justify="left")
    table.add_column("table")
    table.add_column("rows", justify="right")
    for name, count in result.row_counts.items():
        table.add_row(name, f"{count:,}")
    console.print(table)
    if result.total_issues:
        parts = ", ".join(f"{n} {sev}" for sev, n in sorted(result.issue_counts.items()))
        console.print(f"[yellow]decode issues:[/] {parts} (see the decode_issues table)")
        issues = Table(show_header=True)
        for col in ("severity", "kind", "file", "position", "detail"):
            issues.add_column(col, overflow="fold")
        for row in result.issues_preview[:10]:
            issues.add_row(*(str(row.get(c, "")) for c in ("severity", "kind", "file", "position", "detail")))
        console.print(issues)
    else:
        console.print("[green]every file decoded cleanly[/]")


def main() -> None:
    """Console-script entry point. Once the command is done, the process ends at once
    (``end_process``)."""
    code: int | str | None
    try:
        app(prog_name=PROG_NAME)
        code = 0
    except KeyboardInterrupt:
        err_console.print("interrupted")
        code = 130
    except SystemExit as done:  # typer ends every command so, with its exit code
        code = done.code
    end_process(code)


def end_process(code: int | str | None) -> typing.NoReturn:
    """End the process with ``code`` (as ``sys.exit`` takes it) once its exit handlers have run,
    without the interpreter's teardown of every module it loaded: with Spark, Great Expectations,
    pandas and plotly loaded that teardown took about a second of a scan of a small dump, and
    nothing is left to it. By then every output is written, closed and published, no thread of
    the command is still at work, and the JVM, whose input closes with this process, runs its own
    shutdown."""
    if code is None:
        code = 0
    elif not isinstance(code, int):
        print(code, file=sys.stderr)
        code = 1
    sys.stdout.flush()
    sys.stderr.flush()
    atexit._run_exitfuncs()  # what a normal exit runs: the class archive, logging, temporary folders
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    main()
