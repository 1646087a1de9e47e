"""The rule of time columns (``schemas``' docstring) over every table written, and its helpers."""

from __future__ import annotations

import pyarrow as pa
import pytest

from txn_audit import schemas
from txn_audit.schemas import ALL_TABLES, NO_TIME, TIMESTAMP, declared, in_ms, read_ms, time_column_faults

#: every schema of a file in an output or the warehouse: the tables, and what the workers report
WRITTEN = {**ALL_TABLES, "written_files": schemas.WRITTEN_FILES}


@pytest.mark.parametrize("name", sorted(WRITTEN))
def test_every_written_schema_follows_the_rule(name: str) -> None:
    assert time_column_faults(WRITTEN[name]) == []


def test_instants_are_timestamps_and_durations_integers() -> None:
    instants = {(t, f.name) for t, s in ALL_TABLES.items() for f in s if f.type == TIMESTAMP}
    assert ("findings", "first_timestamp") in instants and ("incidents", "held_since_timestamp") in instants
    assert ("batches", "delete_horizon_timestamp") in instants
    assert ("reported_transactions", "run_timestamp") in instants
    for table, schema in ALL_TABLES.items():
        for f in schema:
            if f.type == TIMESTAMP:
                assert f.nullable, (table, f.name)  # Kafka's -1 is null there


@pytest.mark.parametrize("field, fault", [
    (pa.field("held_ms", pa.int64()), None),
    (pa.field("timestamp_type", pa.string()), None),  # CreateTime / LogAppendTime: no time
    (pa.field("run_timestamp", pa.int64()), "an instant typed int64"),
    (pa.field("held_ms", TIMESTAMP), "a duration typed"),
    (pa.field("duration_min", pa.int64()), "a time named neither"),
    (pa.field("run_at", pa.int64()), "a time named neither"),
    (pa.field("started", pa.timestamp("ms")), "named neither"),
    (pa.field("tp", pa.struct([pa.field("commit_timestamp", pa.int64())])), "tp.commit_timestamp"),
])
def test_the_rule_finds_what_breaks_it(field: pa.Field, fault: str | None) -> None:
    faults = time_column_faults(pa.schema([field]))
    if fault is None:
        assert faults == []
    else:
        assert len(faults) == 1 and fault in faults[0]


def test_no_table_keeps_a_name_of_version_1() -> None:
    # an instant named as a duration (``*_timestamp_ms``) passes the names' rule only by its type:
    # the renamed columns are gone
    names = {f.name for s in ALL_TABLES.values() for f in s}
    assert not names & {"first_timestamp_ms", "last_timestamp_ms", "held_since_ms", "delete_horizon_ms",
                        "run_at_ms", "max_transaction_timeout_min", "duration_min"}


def test_declared_then_read_as_ms_gives_kafkas_integers_back() -> None:
    schema = pa.schema([pa.field("timestamp", TIMESTAMP), pa.field("held_ms", pa.int64())])
    ms = pa.table({"timestamp": pa.array([1795000720505, NO_TIME, None], pa.int64()), "held_ms": [1, 2, 3]})
    written = declared(ms, schema)
    assert written.schema == schema
    assert written.column("timestamp").null_count == 2  # -1 is no time
    back = read_ms(written)
    assert back.schema == in_ms(schema)
    assert back.column("timestamp").to_pylist() == [1795000720505, None, None]
    assert back.column("held_ms").to_pylist() == [1, 2, 3]


def test_in_ms_leaves_a_schema_without_instants_alone() -> None:
    assert in_ms(ALL_TABLES["segments"]) is ALL_TABLES["segments"]
    assert all(f.type != TIMESTAMP for s in ALL_TABLES.values() for f in in_ms(s))
