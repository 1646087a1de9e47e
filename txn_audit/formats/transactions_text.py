"""``kafka-transactions.sh`` table output (``list``, ``describe``, ``describe-producers``,
``find-hanging``), read into plain values.

``TransactionsCommand`` (3.0 → 4.2, unchanged headers) prints a header row and one row per
item through ``ToolsUtils.prettyPrintTable``: every cell left-aligned, padded with spaces to
its column's width, and followed by a tab. Cells are split at tabs; a copy whose tabs became
spaces is split at runs of blanks when that gives the right number of cells. ``None`` cells
(no open transaction, no start time) become ``None``. Lines starting with ``#`` are comments;
a ``# $ <command>`` comment gives the command (the topic and partition of a
``describe-producers``) and ``run at <ISO time>`` the wall-clock time of the run, which is
what ``find-hanging``'s ``Duration(min)`` is measured against. Lines that do not fit the table
become ``TextIssue`` values with their line numbers.

Use: extra coordinator evidence (``list``/``describe``) and producer-state evidence
(``describe-producers``) when ``__transaction_state`` is not in a dump, and ``find-hanging``
rows to compare with txn-audit's own hanging verdict.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Final

from txn_audit.formats.dumplog_text import TextIssue, excerpt
from txn_audit.formats.model import IssueKind, Severity

LIST_HEADERS: Final = ("TransactionalId", "Coordinator", "ProducerId", "TransactionState")
DESCRIBE_HEADERS: Final = (
    "CoordinatorId", "TransactionalId", "ProducerId", "ProducerEpoch", "TransactionState", "TransactionTimeoutMs",
    "CurrentTransactionStartTimeMs", "TransactionDurationMs", "TopicPartitions",
)
DESCRIBE_PRODUCERS_HEADERS: Final = (
    "ProducerId", "ProducerEpoch", "LatestCoordinatorEpoch", "LastSequence", "LastTimestamp",
    "CurrentTransactionStartOffset",
)
FIND_HANGING_HEADERS: Final = (
    "Topic", "Partition", "ProducerId", "ProducerEpoch", "CoordinatorEpoch", "StartOffset", "LastTimestamp",
    "Duration(min)",
)
#: output kind → its header cells
HEADERS: Final[dict[str, tuple[str, ...]]] = {
    "list": LIST_HEADERS,
    "describe": DESCRIBE_HEADERS,
    "describe-producers": DESCRIBE_PRODUCERS_HEADERS,
    "find-hanging": FIND_HANGING_HEADERS,
}

_RUN_AT = re.compile(r"run at (\S+)")
_TOPIC_OPT = re.compile(r"--topic[ =](\S+)")
_PARTITION_OPT = re.compile(r"--partition[ =](\d+)")
_TOPIC_PARTITION = re.compile(r"(?P<topic>.+)-(?P<partition>\d+)$")


@dataclass(frozen=True, slots=True)
class ListedTransaction:
    """A ``list`` row."""

    line: int
    transactional_id: str
    coordinator_id: int
    producer_id: int
    state: str


@dataclass(frozen=True, slots=True)
class DescribedTransaction:
    """A ``describe --transactional-id`` row: the coordinator's current view of the id."""

    line: int
    coordinator_id: int
    transactional_id: str
    producer_id: int
    producer_epoch: int
    state: str
    txn_timeout_ms: int
    current_txn_start_time_ms: int | None
    txn_duration_ms: int | None
    topic_partitions: tuple[tuple[str, int], ...]


@dataclass(frozen=True, slots=True)
class DescribedProducer:
    """A ``describe-producers --topic T --partition P`` row: one producer's state on the leader."""

    line: int
    topic: str | None
    partition: int | None
    producer_id: int
    producer_epoch: int
    coordinator_epoch: int  # LatestCoordinatorEpoch; -1 when no marker was written yet
    last_sequence: int
    last_timestamp: int
    current_txn_start_offset: int | None


@dataclass(frozen=True, slots=True)
class HangingTransaction:
    """A ``find-hanging`` row."""

    line: int
    topic: str
    partition: int
    producer_id: int
    producer_epoch: int
    coordinator_epoch: int
    start_offset: int
    last_timestamp: int
    duration_min: int


Row = ListedTransaction | DescribedTransaction | DescribedProducer | HangingTransaction


@dataclass
class TransactionsOutput:
    """One ``kafka-transactions.sh`` output file. ``kind`` is None when no header was found."""

    file: str
    kind: str | None = None
    command: str | None = None
    run_at_ms: int | None = None
    rows: list[Row] = field(default_factory=list)
    issues: list[TextIssue] = field(default_factory=list)


def kind_of_header(line: str) -> str | None:
    """The output kind whose header this line is (None if it is none of them)."""
    cells = _cells(line, None)
    if cells is None:
        return None
    for kind, headers in HEADERS.items():
        if tuple(cells) == headers:
            return kind
    return None


def _cells(line: str, expected: int | None) -> list[str] | None:
    if "\t" in line:
        cells = [c.strip() for c in line.split("\t")]
        if cells and cells[-1] == "":
            cells.pop()  # every cell is followed by a tab
        if expected is None or len(cells) == expected:
            return cells
        if len(cells) == expected - 1 and line.rstrip("\n").endswith("\t"):
            return [*cells, ""]  # the last cell is empty; its tab was the one popped above
    words = line.split()
    if expected is None or len(words) == expected:
        return words
    return None


def _optional(cell: str) -> int | None:
    return None if cell == "None" else int(cell)


def _partitions(cell: str) -> tuple[tuple[str, int], ...]:
    out = []
    for item in cell.split(",") if cell else []:
        m = _TOPIC_PARTITION.match(item)
        if m is None:
            raise ValueError(f"{item!r} is not <topic>-<partition>")
        out.append((m["topic"], int(m["partition"])))
    return tuple(out)


def _iso_ms(text: str) -> int | None:
    try:
        return int(datetime.strptime(text, "%Y-%m-%dT%H:%M:%S%z").timestamp() * 1000)
    except ValueError:
        try:
            return int(datetime.fromisoformat(text).timestamp() * 1000)
        except ValueError:
            return None


def _row(kind: str, n: int, c: list[str], topic: str | None, partition: int | None) -> Row:
    if kind == "list":
        return ListedTransaction(n, c[0], int(c[1]), int(c[2]), c[3])
    if kind == "describe":
        return DescribedTransaction(n, int(c[0]), c[1], int(c[2]), int(c[3]), c[4], int(c[5]), _optional(c[6]),
                                    _optional(c[7]), _partitions(c[8]))
    if kind == "describe-producers":
        return DescribedProducer(n, topic, partition, int(c[0]), int(c[1]), int(c[2]), int(c[3]), int(c[4]),
                                 _optional(c[5]))
    return HangingTransaction(n, c[0], int(c[1]), int(c[2]), int(c[3]), int(c[4]), int(c[5]), int(c[6]), int(c[7]))


def parse_transactions_output(
    source: str | Path | Iterable[str], file: str = "", *, topic: str | None = None, partition: int | None = None
) -> TransactionsOutput:
    """Parse one output (a path, the text, or its lines). ``topic``/``partition`` name the
    partition of a ``describe-producers`` output when its command line is not in the text."""
    if isinstance(source, Path):
        lines: Iterable[str] = source.read_text(encoding="utf-8", errors="replace").split("\n")
        file = file or str(source)
    elif isinstance(source, str):
        lines = source.split("\n")
    else:
        lines = source
    out = TransactionsOutput(file=file)
    headers: tuple[str, ...] | None = None
    row_kind = ""  # the table's kind, once its header is read
    for n, raw in enumerate(lines, 1):
        line = raw.rstrip("\r\n")
        if not line.strip():
            continue
        if line.startswith("#"):
            if line.startswith("# $ ") and out.command is None:
                out.command = line[4:].strip()
                topic = topic or ((m := _TOPIC_OPT.search(out.command)) and m[1]) or None
                if partition is None and (m := _PARTITION_OPT.search(out.command)):
                    partition = int(m[1])
            elif (m := _RUN_AT.search(line)) is not None and out.run_at_ms is None:
                out.run_at_ms = _iso_ms(m[1])
            continue
        if headers is None:
            kind = kind_of_header(line)
            if kind is None:
                out.issues.append(TextIssue(None, n, IssueKind.UNPARSED_LINE.value, Severity.WARNING.value,
                                            "not a kafka-transactions.sh table header", excerpt(line)))
                continue
            out.kind, headers, row_kind = kind, HEADERS[kind], kind
            continue
        cells = _cells(line, len(headers))
        if cells is None:
            out.issues.append(TextIssue(None, n, IssueKind.UNPARSED_LINE.value, Severity.WARNING.value,
                                        f"expected {len(headers)} cells for a {out.kind} row", excerpt(line)))
            continue
        try:
            out.rows.append(_row(row_kind, n, cells, topic, partition))
        except ValueError as err:
            out.issues.append(TextIssue(None, n, IssueKind.UNPARSED_LINE.value, Severity.WARNING.value,
                                        f"{out.kind} row that does not parse ({err})", excerpt(line)))
    return out
