"""The typed results of a scan mirror the tables they are read from, and severities have one order."""

from __future__ import annotations

import dataclasses
import types
import typing

import pyarrow as pa
import pytest

from txn_audit.errors import UsageError
from txn_audit.results import BlockedConsumer, Finding, Incident, PartitionStatus, ReplicaStatus
from txn_audit.schemas import (
    BLOCKED_CONSUMERS,
    FINDINGS,
    INCIDENTS,
    PARTITION_STABILITY,
    REPLICA_STABILITY,
    TIMESTAMP,
)
from txn_audit.severity import SEVERITIES, Severity

PYTHON_TYPES = {pa.string(): str, pa.int32(): int, pa.int64(): int, pa.bool_(): bool, TIMESTAMP: int,  # epoch ms
                pa.list_(pa.string()): tuple[str, ...]}


@pytest.mark.parametrize(("result", "schema"), [(Finding, FINDINGS), (PartitionStatus, PARTITION_STABILITY),
                                                (ReplicaStatus, REPLICA_STABILITY), (Incident, INCIDENTS),
                                                (BlockedConsumer, BLOCKED_CONSUMERS)])
def test_fields_are_the_tables_columns(result: type, schema: pa.Schema) -> None:
    """Same names in the same order; a field may be None exactly where the column is nullable,
    and holds the column's Python type (a finding's severity: a ``Severity``)."""
    hints = typing.get_type_hints(result)
    assert [f.name for f in dataclasses.fields(result)] == schema.names
    for column in schema:
        hint = hints[column.name]
        args = set(typing.get_args(hint)) if isinstance(hint, types.UnionType) else {hint}
        assert (type(None) in args) == column.nullable, column.name
        expected = Severity if column.name == "severity" else PYTHON_TYPES[column.type]
        assert args - {type(None)} == {expected}, column.name


def test_results_are_frozen_and_round_trip_a_row() -> None:
    row = {name: None for name in FINDINGS.names} | {"kind": "stuck_lso", "severity": "warning", "evidence": "e"}
    finding = Finding.from_row(row | {"not_a_column": 1})
    assert finding.severity is Severity.WARNING
    assert finding.to_row() == row and list(finding.to_row()) == FINDINGS.names
    with pytest.raises(dataclasses.FrozenInstanceError):
        finding.kind = "other"  # type: ignore[misc]  # the point: it is frozen


def test_severities_compare_by_rank_not_alphabetically() -> None:
    assert SEVERITIES == (Severity.INFO, Severity.WARNING, Severity.CRITICAL)
    assert Severity.INFO < Severity.WARNING < Severity.CRITICAL
    assert sorted(["critical", "info", "warning"], key=Severity) == ["info", "warning", "critical"]
    assert max(Severity("warning"), Severity("critical"), Severity("info")) is Severity.CRITICAL
    assert Severity.WARNING >= "warning" and not Severity.INFO >= "warning"
    assert [s.rank for s in SEVERITIES] == [0, 1, 2]
    assert Severity.parse("critical") is Severity.CRITICAL
    with pytest.raises(UsageError, match="--min-severity must be one of info, warning, critical"):
        Severity.parse("loud")
