"""What a command may be asked for, checked before Spark starts.

The exit codes (``ExitCode``), the input kinds, and the checks of the options (the dump, ``--out``, the audit
times) that every command runs first, so that a mistake is a usage error (exit code 2) within a
second or two instead of after the JVM has started. Standard library only: the command line
imports this module, not ``txn_audit.api``, until the options are known to be good.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from enum import IntEnum, StrEnum
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from txn_audit.errors import CorruptInputError, OutputError, OutputInUseError, TxnAuditError, UsageError
from txn_audit.formats.layout import parse_log_file_name, parse_partition_dir
from txn_audit.outputs import check_target
from txn_audit.severity import Severity


class ExitCode(IntEnum):
    """Process exit codes of every txn-audit command and of the nightly job: the contract a
    monitor (cron, a CI job, Nagios through a wrapper) reads, the README's table. A verdict's
    codes (0, 1, 4) rise with the worst finding at or above ``--fail-on``; every failure has a
    code of its own, never one of a verdict's."""

    OK = 0  # clean: no finding at or above --fail-on
    WARNING = 1  # findings at or above --fail-on, none critical
    USAGE = 2  # bad arguments (the command line's own errors too), a missing dump, no Java
    CORRUPT_INPUT = 3  # unreadable or corrupt input under --strict
    CRITICAL = 4  # a critical finding (at or above --fail-on)
    INTERNAL = 70  # a failure inside txn-audit: a bug, its traceback printed (sysexits' EX_SOFTWARE)
    OUTPUT = 73  # the output could not be written: a full disk, a permission denied, its folder removed
    BUSY = 75  # another run is writing the same output: nothing changed, run again later (EX_TEMPFAIL)

    @property
    def is_verdict(self) -> bool:
        """Whether the code is a verdict's (the scan ran to its end), not a failure's."""
        return self in (ExitCode.OK, ExitCode.WARNING, ExitCode.CRITICAL)

    @property
    def meaning(self) -> str:
        """What the code says, as ``--help`` and the README's table say it."""
        return _EXIT_MEANINGS[self]

    @classmethod
    def of_verdict(cls, worst: Severity | None, fail_on: Severity) -> ExitCode:
        """The code of a verdict whose worst finding is ``worst`` (None: no finding): 0 below
        ``fail_on``, else 4 for a critical finding and 1 for any other."""
        if worst is None or worst < fail_on:
            return cls.OK
        return cls.CRITICAL if worst is Severity.CRITICAL else cls.WARNING

    @classmethod
    def of_error(cls, err: TxnAuditError) -> ExitCode:
        """The code of a run that ended with ``err``."""
        if isinstance(err, OutputInUseError):
            return cls.BUSY
        if isinstance(err, OutputError):
            return cls.OUTPUT
        if isinstance(err, CorruptInputError):
            return cls.CORRUPT_INPUT
        return cls.USAGE


_EXIT_MEANINGS: dict[ExitCode, str] = {
    ExitCode.OK: "clean: no finding at or above --fail-on",
    ExitCode.WARNING: "findings at or above --fail-on, none critical",
    ExitCode.USAGE: "usage error: a bad option or argument, a missing dump, no Java",
    ExitCode.CORRUPT_INPUT: "unreadable or corrupt input, under --strict",
    ExitCode.CRITICAL: "a critical finding",
    ExitCode.INTERNAL: "internal failure (a bug): its traceback is printed",
    ExitCode.OUTPUT: "output not written (disk full, permission denied, folder removed)",
    ExitCode.BUSY: "another run is writing the same output; nothing was changed",
}


def fail_on_severity(fail_on: str | None, min_severity: str = Severity.WARNING) -> Severity:
    """The lowest severity that makes the exit code non-zero: ``--fail-on``, else
    ``--min-severity`` (what is listed is what fails, as before ``--fail-on`` existed).
    ``UsageError`` for a ``--fail-on`` below ``--min-severity``: a finding that decides the exit
    code is always listed."""
    floor = Severity.parse(min_severity, "--min-severity")
    if fail_on is None:
        return floor
    chosen = Severity.parse(fail_on, "--fail-on")
    if chosen < floor:
        raise UsageError(f"--fail-on {chosen.value} is below --min-severity {floor.value}: the findings that set "
                         f"the exit code would not be listed; give --min-severity {chosen.value} too")
    return chosen


class InputKind(StrEnum):
    """What a dump holds (``txn_audit.ingest.discover``)."""

    AUTO = "auto"  # log dirs when there are any, else text
    LOGDIRS = "logdirs"  # copies of broker log dirs
    TEXT = "text"  # kafka-dump-log.sh / kafka-transactions.sh text output, an offsets file


@dataclass(frozen=True)
class AuditOptions:
    """Every option of a scan, each default given here once. Each shell (the command line, the
    nightly job, a notebook that scans) builds one and passes it whole; ``ScanResult.options`` keeps it.
    Checked when built (``UsageError``): a scan never starts with options it cannot use."""

    #: the time ages are measured to; None: chosen from the dump (``txn_audit.audit_time``)
    as_of_ms: int | None = None
    #: an open transaction whose producer last wrote longer ago than this, and that the
    #: coordinator does not list, is hanging (find-hanging's --max-transaction-timeout; Kafka's
    #: default transaction.max.timeout.ms, the longest a producer may ask for)
    max_transaction_timeout_ms: int = 15 * 60_000
    #: how much earlier than the previous marker a batch may be created before it is late
    #: (clients stamp records at send time: healthy traffic shows about 0.1 s)
    late_tolerance_ms: int = 1_000
    #: a coordinator in Prepare* for less than this is writing its markers, not stuck
    prepare_grace_ms: int = 30_000
    #: clock skew allowed between the coordinator's and the partition leaders' timestamps
    clock_skew_ms: int = 1_000
    #: what the dump holds (``InputKind``)
    input_kind: str = InputKind.AUTO.value
    #: run the data-quality suites over every table
    quality: bool = True
    #: write report.html beside the tables (with an output folder)
    report: bool = True
    #: show a progress bar on a terminal
    progress: bool = True
    #: show Spark's own log lines
    verbose: bool = False
    #: the cluster the printed commands name (``HOST:PORT[,HOST:PORT...]``); None: ``<broker>``
    bootstrap_server: str | None = None
    #: the client properties file the printed commands name (``--command-config``); None: none
    command_config: str | None = None

    def __post_init__(self) -> None:
        if self.max_transaction_timeout_ms <= 0 or self.late_tolerance_ms < 0:
            raise UsageError("--max-transaction-timeout must be positive and --late-tolerance not negative")
        if self.prepare_grace_ms < 0 or self.clock_skew_ms < 0:
            raise UsageError("the prepare grace and the clock skew must not be negative")
        if self.input_kind not in {k.value for k in InputKind}:
            raise UsageError(f"input kind {self.input_kind!r}: one of {', '.join(k.value for k in InputKind)}")
        if self.bootstrap_server is not None:
            check_bootstrap_server(self.bootstrap_server)
        if self.command_config is not None and (not self.command_config.strip() or "\n" in self.command_config):
            raise UsageError(f"--command-config {self.command_config!r}: give the path of a client properties file")

    @staticmethod
    def from_text(as_of: str | None = None, max_transaction_timeout: str | None = None,
                  late_tolerance: str | None = None, **rest: Any) -> AuditOptions:
        """The options with the audit time and durations as typed on a command line (``--as-of``,
        ``--max-transaction-timeout``, ``--late-tolerance``; None: the default), and ``rest``
        as they are: ``UsageError`` on a bad one."""
        from txn_audit.timeparse import parse_duration_ms, parse_time_ms

        times: dict[str, Any] = {}
        if as_of is not None:
            times["as_of_ms"] = parse_time_ms(as_of)
        if max_transaction_timeout is not None:
            times["max_transaction_timeout_ms"] = parse_duration_ms(max_transaction_timeout)
        if late_tolerance is not None:
            times["late_tolerance_ms"] = parse_duration_ms(late_tolerance)
        return AuditOptions(**times, **rest)

    @property
    def audit_ms(self) -> int:
        """The audit time, once chosen (``at``)."""
        if self.as_of_ms is None:
            raise ValueError("no audit time yet: AuditOptions.at(the chosen time) gives one")
        return self.as_of_ms

    def at(self, as_of_ms: int) -> AuditOptions:
        """These options at the audit time chosen for a dump."""
        return replace(self, as_of_ms=as_of_ms)

    def recorded(self) -> dict[str, Any]:
        """What the tables a scan writes depend on (the audit time, the durations, whether the
        suites' findings join the rules'), as the scan's ledger records them (``txn_audit.ledger``)."""
        return {"as_of_ms": self.as_of_ms, "max_transaction_timeout_ms": self.max_transaction_timeout_ms,
                "late_tolerance_ms": self.late_tolerance_ms, "prepare_grace_ms": self.prepare_grace_ms,
                "clock_skew_ms": self.clock_skew_ms, "quality": self.quality}

    def durations(self) -> dict[str, int]:
        """The durations the verdicts depend on, as ``summary.json``'s ``options`` gives them."""
        return {"max_transaction_timeout_ms": self.max_transaction_timeout_ms,
                "late_tolerance_ms": self.late_tolerance_ms}


def check_bootstrap_server(servers: str) -> None:
    """``--bootstrap-server``: ``HOST:PORT``, or several separated by commas, as Kafka's tools take
    it (an IPv6 host in brackets); ``UsageError`` otherwise."""
    for server in servers.split(","):
        host, _, port = server.rpartition(":")
        bad_host = not host or any(c.isspace() for c in host) or (":" in host and not host.startswith("["))
        if bad_host or not port.isdigit() or not 0 < int(port) < 65536:
            raise UsageError(f"--bootstrap-server {servers!r}: expected HOST:PORT, or several separated by commas "
                             "(e.g. kafka-1:9092,kafka-2:9092)")


def default_text(ms: int) -> str:
    """A default duration as the command line shows and takes it: ``15m``, ``1s``, ``250ms``."""
    for unit, size in (("h", 3_600_000), ("m", 60_000), ("s", 1_000)):
        if ms % size == 0:
            return f"{ms // size}{unit}"
    return f"{ms}ms"


#: the defaults, as ``AuditOptions`` gives them
DEFAULTS = AuditOptions()


def local_path(dump: str | os.PathLike[str]) -> Path | None:
    """The local path a dump argument names (a path, even one with a colon in a name, or a
    ``file://`` URI of this host), or None for any other URI."""
    if isinstance(dump, os.PathLike) or "://" not in dump:
        return Path(dump)
    parts = urlsplit(dump)
    if parts.scheme.lower() == "file" and parts.netloc in ("", "localhost"):
        return Path(unquote(parts.path))
    return None


def segment_file_hint(dump: str | os.PathLike[str]) -> str | None:
    """If ``dump`` names one file of a partition folder (``.../orders-0/00000000000000000000.log``),
    the message that says so and names the log dir to give instead; else None."""
    text = os.fspath(dump)
    path = text.split("?", 1)[0].rstrip("/") if "://" in text else text
    name = path.rsplit("/", 1)[-1]
    if parse_log_file_name(name) is None:
        return None
    folder = path[: -len(name)].rstrip("/")
    partition = folder.rsplit("/", 1)[-1]
    if partition and parse_partition_dir(partition) is not None:
        log_dir = folder[: -len(partition)].rstrip("/") or ("/" if folder.startswith("/") else ".")
        where = f"partition {partition}"
    else:
        log_dir, where = folder or ".", "a partition"
    return f"{text} is one file of {where}; DUMP is a whole log dir, or a folder of several: give {log_dir}"


def check_dump(dump: str | os.PathLike[str], input_kind: str = InputKind.AUTO) -> None:
    """The dump argument, as far as it can be checked without reading it: a segment file given
    instead of its log dir, and for a local path one that does not exist or an empty folder.
    ``UsageError`` with what to do instead. Remote storage is checked when it is listed."""
    hint = segment_file_hint(dump)
    if hint is not None:
        raise UsageError(hint)
    path = local_path(dump)
    if path is None:
        return
    if not os.path.lexists(path) or not (path.is_dir() or path.is_file()):
        raise UsageError(f"dump not found: {os.fspath(dump)}")
    if path.is_file():
        if input_kind == InputKind.LOGDIRS:
            raise UsageError(f"dump must be a folder of broker log dirs, got a file: {os.fspath(dump)}")
        return
    if not _holds_a_file(path):
        raise UsageError(f"the dump folder {os.fspath(dump)} is empty (it holds no file at any depth): give the "
                         "folder the broker log dirs were copied to")


def _holds_a_file(folder: Path) -> bool:
    """Whether anything but folders is found under ``folder`` (stops at the first; links not followed)."""
    pending = [folder]
    while pending:
        try:
            with os.scandir(pending.pop()) as entries:
                for entry in entries:
                    if entry.is_dir(follow_symlinks=False):
                        pending.append(Path(entry.path))
                    else:
                        return True
        except OSError:
            return True  # a folder that cannot be listed: ingest reports it as a decode issue
    return False


#: schemes of the stores ``--out`` may name (``txn_audit.stores``, which checks them: ``api.scan``
#: runs its check before Spark starts)
STORE_SCHEMES = ("s3", "webhdfs", "hdfs")


def check_out(out: str | os.PathLike[str] | None) -> None:
    """``--out``: a local folder that is new, empty or written by txn-audit
    (``outputs.check_target``); a store's URI is left to ``stores.check_output``."""
    if isinstance(out, str) and urlsplit(out).scheme.lower() in STORE_SCHEMES:
        return
    if out is not None:
        check_target(Path(out).absolute())
