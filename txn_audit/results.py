"""The typed results of a scan: one frozen dataclass per row of the tables it reads back.

``Finding`` is a row of the ``findings`` table, ``PartitionStatus`` of ``partition_stability`` and
``ReplicaStatus`` of ``replica_stability``, ``BlockedConsumer`` of ``blocked_consumers``
(``txn_audit.schemas``): the fields are the table's
columns, same names, same order, a nullable column's field may be None (``tests/test_results.py``
checks them against the schemas). The JSON contract (``api.ScanResult.to_json``) is a selection
of these fields.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Self

from txn_audit.severity import SEVERITIES, Severity

__all__ = ["BlockedConsumer", "Finding", "Incident", "PartitionStatus", "ReplicaStatus"]


class _Row:
    """Building from, and giving back, a table row as a mapping of column to value."""

    __dataclass_fields__: ClassVar[dict[str, Any]]  # every subclass is a dataclass

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> Self:
        """The result of one table row (extra keys are ignored; a field with a default may be
        absent, as in a table written before that column existed)."""
        return cls(**{f.name: row[f.name] for f in dataclasses.fields(cls)
                      if f.name in row or f.default is dataclasses.MISSING})

    def to_row(self) -> dict[str, Any]:
        """The table row: column name to value, in the table's column order."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}


@dataclass(frozen=True)
class Finding(_Row):
    """One problem the audit recognised: a row of the ``findings`` table."""

    kind: str
    severity: Severity
    topic: str | None
    partition: int | None
    broker_id: int | None
    producer_id: int | None
    producer_epoch: int | None
    transactional_id: str | None
    first_offset: int | None
    last_offset: int | None
    first_timestamp: int | None
    last_timestamp: int | None
    evidence: str
    remediation: str | None
    remediation_pre_3_0: str | None
    file: str | None
    #: the incident it belongs to (``Incident.incident_id``); None until incidents are built
    incident_id: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "severity", Severity(self.severity))  # a table row gives the plain string


def finding_order(finding: Finding) -> tuple[Any, ...]:
    """The one order of findings, wherever they are listed (the table, the JSON, the terminal,
    the report), as a sort key: most severe first, then by kind, topic, partition, first offset,
    evidence and producer, absent values last."""
    def last(value: Any) -> tuple[bool, Any]:
        return (value is None, 0 if value is None else value)

    return (-SEVERITIES.index(finding.severity), finding.kind, last(finding.topic), last(finding.partition),
            last(finding.first_offset), finding.evidence, last(finding.producer_id))


@dataclass(frozen=True)
class PartitionStatus(_Row):
    """A partition's stability, from the replica chosen to speak for it: a row of
    ``partition_stability``. ``lso_below_hw`` and ``effective_high_watermark`` are its status,
    computed once by the reconstruction and shown as is by every output."""

    topic: str
    partition: int
    broker_id: int | None
    log_dir: str | None
    high_watermark: int | None
    hw_source: str
    checkpoint_high_watermark: int | None
    log_start_offset: int | None
    log_end_offset: int | None
    first_unstable_offset: int | None
    last_stable_offset: int | None
    open_transactions: int
    held_records: int
    held_bytes: int
    held_since_timestamp: int | None
    held_ms: int | None
    culprit_producer_id: int | None
    culprit_producer_epoch: int | None
    culprit_transactional_id: str | None
    culprit_first_offset: int | None
    unstable_at_batch_start: bool
    effective_high_watermark: int | None
    lso_below_hw: bool
    replicas: int
    chosen_replica: str
    replica_choice_reason: str


@dataclass(frozen=True)
class ReplicaStatus(_Row):
    """One live copy of a partition, audited on its own data: a row of ``replica_stability``."""

    broker_id: int | None
    log_dir: str | None
    topic: str | None
    partition: int | None
    high_watermark: int | None
    hw_source: str
    checkpoint_high_watermark: int | None
    log_start_offset: int | None
    log_end_offset: int | None
    first_unstable_offset: int | None
    last_stable_offset: int | None
    open_transactions: int
    held_records: int
    held_bytes: int
    held_since_timestamp: int | None
    held_ms: int | None
    culprit_producer_id: int | None
    culprit_producer_epoch: int | None
    culprit_transactional_id: str | None
    culprit_first_offset: int | None
    unstable_at_batch_start: bool
    effective_high_watermark: int | None
    lso_below_hw: bool
    replica_rank: int
    replica_name: str
    chosen: bool
    leader_epoch: int | None
    metadata_leader: int | None
    metadata_leader_epoch: int | None
    in_isr: bool | None
    divergence: str | None
    divergent_offset: int | None
    replica_holds: str | None
    chosen_holds: str | None


@dataclass(frozen=True)
class BlockedConsumer(_Row):
    """A consumer group whose committed offset on a partition sits at or below the LSO an open
    transaction holds there: a row of ``blocked_consumers`` (``txn_audit.detect.blocked_consumers``
    says the rule)."""

    group_id: str
    topic: str
    partition: int
    committed_offset: int
    commit_timestamp: int | None
    commit_log_partition: int
    commit_log_offset: int
    transactional_commit: bool
    last_stable_offset: int
    high_watermark: int
    records_behind: int
    records_to_lso: int
    held_since_timestamp: int | None
    time_behind_ms: int | None
    time_behind_from: str
    culprit_producer_id: int | None
    culprit_transactional_id: str | None


@dataclass(frozen=True)
class Incident(_Row):
    """One root cause and the findings it explains: a row of the ``incidents`` table
    (``txn_audit.detect.incidents`` builds them)."""

    incident_id: str
    kind: str
    severity: Severity
    topic: str | None
    partition: int | None
    broker_id: int | None
    producer_id: int | None
    producer_epoch: int | None
    transactional_id: str | None
    first_offset: int | None
    partitions: tuple[str, ...]
    consequences: tuple[str, ...]
    findings: int
    held_records: int
    held_since_timestamp: int | None
    summary: str
    remediation: str
    #: the remediation's commands, one each, to be run as they are (copied whole from a log);
    #: empty when the remediation says why no command is needed
    commands: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "severity", Severity(self.severity))
        object.__setattr__(self, "partitions", tuple(self.partitions))
        object.__setattr__(self, "consequences", tuple(self.consequences))
        object.__setattr__(self, "commands", tuple(self.commands))

    def to_row(self) -> dict[str, Any]:
        row = super().to_row()
        return row | {"severity": self.severity.value, "partitions": list(self.partitions),
                      "consequences": list(self.consequences), "commands": list(self.commands)}
