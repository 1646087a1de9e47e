"""How findings word what they tell, for the rules computed on the driver (no pyspark here): a
time, a duration, a partition's name, the abort command; and the rows a rule judges
(``rows_where``), each made a ``FINDINGS`` row (``finding_row``). The Spark rules
(``detect.rules``) write durations from the same steps (``DURATION_STEPS``), times in the same
form (``timeparse.format_time_ms``'s) and the command from the same format (``ABORT_COMMAND``),
so that a finding reads the same whichever way it was computed.
"""

from __future__ import annotations

from collections.abc import Mapping
import shlex
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from txn_audit.schemas import FINDINGS
from txn_audit.severity import Severity
from txn_audit.timeparse import format_time_ms

__all__ = ["ABORT_COMMAND", "ABORT_COMMAND_PRE_3_0", "BROKER_PLACEHOLDER", "DURATION_STEPS", "FORCE_TERMINATE_COMMAND",
           "KNOWN_MARKERS", "abort_command_text", "describe_topic_command", "duration_or_null", "duration_text",
           "finding_row", "force_terminate_command_text", "formatted", "offsets_text", "partition_name", "rows_where",
           "time_or_null", "time_text", "value_text"]

#: how a duration is written: below ``below`` milliseconds (None: any), in seconds divided by
#: ``seconds``, with the unit's name, one decimal
DURATION_STEPS: tuple[tuple[int | None, int, str], ...] = (
    (120_000, 1, "s"),
    (2 * 3_600_000, 60, "min"),
    (2 * 86_400_000, 3_600, "h"),
    (None, 86_400, "days"),
)

#: epoch milliseconds as ``2026-11-22 20:00:08.971 UTC``
time_text = format_time_ms

#: what every command a finding gives names the cluster by: ``--bootstrap-server <broker>``, which
#: ``fixes.Connection`` fills with ``scan --bootstrap-server`` (and ``--command-config``) where given.
#: A finding's command is a shell command and nothing else: each word a word of the shell (a name
#: that needs it quoted, as ``shlex.quote`` quotes it), no ``;``, no prose; what to do beyond it is
#: said in the evidence
BROKER_PLACEHOLDER = "<broker>"
#: the command that aborts a hanging transaction (Kafka 3.0+), of its topic, partition and first
#: offset: a ``%`` format, as Python and Spark's ``format_string`` read it alike
ABORT_COMMAND = (f"kafka-transactions.sh --bootstrap-server {BROKER_PLACEHOLDER} abort --topic %s --partition %d "
                 "--start-offset %d")
#: the command that aborts it through a broker before Kafka 3.0, which does not find the
#: transaction by its offset: of its topic, partition, producer id, producer epoch and coordinator
#: epoch (the producer's last marker's there, at least 0)
ABORT_COMMAND_PRE_3_0 = (f"kafka-transactions.sh --bootstrap-server {BROKER_PLACEHOLDER} abort --topic %s "
                         "--partition %d --producer-id %d --producer-epoch %d --coordinator-epoch %d")
#: the command that ends a two-phase-commit transaction (KIP-939) its external transaction
#: manager left open, of its transactional id (``kafka-transactions.sh`` 4.x)
FORCE_TERMINATE_COMMAND = (f"kafka-transactions.sh --bootstrap-server {BROKER_PLACEHOLDER} "
                           "forceTerminateTransaction --transactionalId %s")
#: marker types whose outcome is known; a text dump without --deep-iteration gives UNKNOWN
KNOWN_MARKERS = ("COMMIT", "ABORT")


def duration_text(ms: int) -> str:
    """``ms`` milliseconds as ``95.0 s``, ``12.5 min``, ``3.0 h`` or ``4.2 days`` (``DURATION_STEPS``)."""
    seconds = ms / 1000.0
    for below, size, unit in DURATION_STEPS:
        if below is None or ms < below:
            return f"{_one_decimal(seconds / size)} {unit}"
    raise AssertionError("DURATION_STEPS ends with a step for any duration")


def _one_decimal(value: float) -> str:
    """``value`` with one decimal, rounded half up from its shortest decimal form: as the Spark
    rules' ``%.1f`` (Java's formatter) writes it."""
    return str(Decimal(repr(value)).quantize(Decimal("0.1"), rounding=ROUND_HALF_UP))


def offsets_text(first: int, last: int) -> str:
    """``offset 7`` or ``offsets 7-9``: the offsets from ``first`` to ``last``."""
    return f"offset {first}" if first == last else f"offsets {first}-{last}"


def partition_name(topic: str | None, partition: int | None) -> str:
    """``orders-3``: a partition as Kafka's tools and log folders name it."""
    return f"{topic}-{partition}"


def value_text(value: object) -> str:
    """``value`` as Spark's ``format_string`` (Java's formatter) writes it for ``%s`` or ``%d``:
    ``null`` when unknown."""
    return "null" if value is None else str(value)


def time_or_null(ms: int | None) -> str:
    """``time_text``, or ``null`` for an unknown time, as Spark's ``format_string`` wrote it."""
    return value_text(None if ms is None else time_text(ms))


def duration_or_null(ms: int | None) -> str:
    """``duration_text``, or ``null`` for an unknown duration, as Spark's ``format_string`` wrote it."""
    return value_text(None if ms is None else duration_text(ms))


def formatted(template: str, *values: object) -> str:
    """``template`` (of ``%s`` and ``%d`` only) filled as Spark's ``format_string`` fills it
    (``value_text``)."""
    return template.replace("%d", "%s") % tuple(value_text(value) for value in values)


def abort_command_text(topic: str, partition: int, start_offset: int | None) -> str:
    """``ABORT_COMMAND`` for the transaction open on ``topic``-``partition`` from ``start_offset``."""
    return formatted(ABORT_COMMAND, topic, partition, start_offset)


def force_terminate_command_text(transactional_id: str | None) -> str:
    """``FORCE_TERMINATE_COMMAND`` for ``transactional_id``, quoted for the shell where it needs
    it (a transactional id is any string)."""
    return formatted(FORCE_TERMINATE_COMMAND, shlex.quote(value_text(transactional_id)))


def describe_topic_command(topic: str, *, under_replicated: bool = False) -> str:
    """``kafka-topics.sh --describe`` of ``topic`` (its leaders and ISRs), of its under-replicated
    partitions only when ``under_replicated``."""
    return (f"kafka-topics.sh --bootstrap-server {BROKER_PLACEHOLDER} --describe --topic {shlex.quote(topic)}"
            + (" --under-replicated-partitions" if under_replicated else ""))


def finding_row(source: Mapping[str, Any], kind: str, severity: Severity, evidence: str,
                **given: Any) -> dict[str, Any]:
    """A ``FINDINGS`` row: ``kind``, ``severity``, ``evidence`` and the columns ``given``; every
    other column taken from ``source`` (the row judged) by name, or null."""
    row = {name: source.get(name) for name in FINDINGS.names}
    row.update(given, kind=kind, severity=severity.value, evidence=evidence)
    return row


def rows_where(table: pa.Table, condition: pa.ChunkedArray | pa.Array) -> list[dict[str, Any]]:
    """The rows of ``table`` where ``condition`` holds (null: not), as Python objects: few."""
    rows: list[dict[str, Any]] = table.filter(pc.fill_null(condition, False)).to_pylist()
    return rows
