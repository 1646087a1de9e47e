"""The raw tables' rules on one row (``checks.RowRule``: pyarrow conditions) against each rule
written in Spark SQL, the language a reader of the suites' results checks them in: over rows of
the sample's tables with planted values (nulls, bounds, unknown states), every path that finds
the faults (a frame's batches, the files on the driver, the files by tasks) flags the rows, and
only the rows, that Spark's ``WHERE`` selects, rule by rule."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

from tests.conftest import SampleScan
from txn_audit.manifest import TableManifest, describe_file
from txn_audit.quality import row_faults
from txn_audit.quality.checks import CHECKS, FAULT_COLUMNS, ROW_RULES
from txn_audit.quality.row_faults import fault_schema, faults_frame, faults_of, rules_of
from txn_audit.schemas import ALL_TABLES, declared, frame_in_ms, in_ms, read_ms, spark_schema

#: each rule as SQL, as its check's sentence says it (the oracle)
SQL = {
    "keys_present": "topic IS NULL OR partition IS NULL OR position IS NULL OR base_offset IS NULL "
                    "OR last_offset IS NULL OR magic IS NULL",
    "offsets_ordered": "last_offset < base_offset OR base_offset < 0",
    "control_is_one_record": "is_control AND record_count <> 1 AND crc_ok",
    "v2_size": "magic = 2 AND size_bytes < 61",
    "crc_ok": "NOT crc_ok",
    "marker_type_valid": "marker_type NOT IN ('COMMIT', 'ABORT', 'UNKNOWN')",
    "state_valid": "NOT tombstone AND (state IS NULL OR state NOT IN ('Empty', 'Ongoing', 'PrepareCommit', "
                   "'PrepareAbort', 'CompleteCommit', 'CompleteAbort', 'Dead', 'PrepareEpochFence'))",
    "complete_lists_nothing": "state IN ('Empty', 'CompleteCommit', 'CompleteAbort') AND size(topic_partitions) > 0",
}

#: values planted in the rules' columns: bounds, nulls and strangers
PLANTS: dict[str, list[Any]] = {
    "topic": [None], "partition": [None], "position": [None],
    "base_offset": [None, -1, 0, 5], "last_offset": [None, -1, 0, 4, 5],
    "magic": [None, 0, 1, 2], "size_bytes": [None, 0, 60, 61], "record_count": [None, 0, 1, 2],
    "is_control": [None, True, False], "crc_ok": [None, True, False],
    "marker_type": [None, "COMMIT", "ABORT", "UNKNOWN", "commit", ""],
    "tombstone": [None, True, False],
    "state": [None, "Empty", "Ongoing", "CompleteCommit", "CompleteAbort", "PrepareEpochFence", "Preparing", ""],
    "topic_partitions": [None, [], [{"topic": "clicks", "partition": 0}]],
}

TABLES = tuple(dict.fromkeys(rule.table for rule in ROW_RULES))


def planted_rows(sample_scan: SampleScan, table: str, seed: int, *, nulls: bool) -> pa.Table:
    """The sample's rows of ``table`` (its ``FAULT_COLUMNS``), a third of them with planted values
    in the columns its rules read (``nulls``: also nulls where the table's schema allows none);
    instants in epoch ms, as the scan's frames hold them (``schemas.in_ms``)."""
    rows = read_ms(ds.dataset(sample_scan.out / "tables" / table, format="parquet").to_table(
        columns=list(FAULT_COLUMNS[table]))).to_pylist()
    schema = in_ms(ALL_TABLES[table])
    plants = {name: [v for v in PLANTS[name] if v is not None or nulls or schema.field(name).nullable]
              for name in FAULT_COLUMNS[table] if name in PLANTS}
    fields = [name for name, values in plants.items() if values]
    rng = random.Random(seed)
    for row in rng.sample(rows, len(rows) // 3):
        for name in rng.sample(fields, min(len(fields), rng.randint(1, 3))):
            row[name] = rng.choice(plants[name])
    relaxed = pa.schema([schema.field(name).with_nullable(True) for name in FAULT_COLUMNS[table]])
    return pa.Table.from_pylist(rows, schema=relaxed)


def by_sql(spark: Any, table: str, rows: pa.Table) -> dict[str, set[str]]:
    """The rows (as text) Spark's ``WHERE`` selects for each rule of ``table``."""
    frame = spark.createDataFrame(rows.combine_chunks(), spark_schema(rows.schema))
    frame.createOrReplaceTempView("row_rules_oracle")
    try:
        return {rule.name: {_key(r.asDict(recursive=True)) for r in spark.sql(
            f"SELECT * FROM row_rules_oracle WHERE {SQL[rule.name]}").collect()} for rule in rules_of(table)}
    finally:
        spark.catalog.dropTempView("row_rules_oracle")


def flagged(faults: list[dict[str, Any]], table: str) -> dict[str, set[str]]:
    """The faults (as text) each rule of ``table`` flags; every fault breaks one rule at least."""
    columns = FAULT_COLUMNS[table]
    assert all(any(row[rule.flag] for rule in rules_of(table)) for row in faults)
    return {rule.name: {_key({c: row[c] for c in columns}) for row in faults if row[rule.flag]}
            for rule in rules_of(table)}


def _key(row: dict[str, Any]) -> str:
    return repr(sorted((name, _plain(value)) for name, value in row.items()))


def _plain(value: Any) -> Any:
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, dict) or hasattr(value, "asDict"):
        return sorted(((k, _plain(v)) for k, v in dict(value).items()))
    return value


def write_files(folder: Path, table: str, rows: pa.Table, files: int = 3) -> TableManifest:
    """``rows`` in ``files`` Parquet files of a few rows per row group, typed as ingest writes them
    (``schemas.declared``), and their manifest."""
    typed = pa.schema([ALL_TABLES[table].field(name).with_nullable(True) for name in rows.column_names])
    rows = declared(rows, typed)
    folder.mkdir(parents=True)
    entries = []
    for part in range(files):
        path = folder / f"part-{part}.parquet"
        start, end = part * rows.num_rows // files, (part + 1) * rows.num_rows // files
        pq.write_table(rows.slice(start, end - start), path, row_group_size=64)
        entries.append(describe_file(path, path.name, table))
    return TableManifest(table, tuple(entries), str(folder))


def test_every_rule_is_a_check_that_reads_its_faults() -> None:
    checks = {(c.table, c.name): c for c in CHECKS}
    assert set(SQL) == {rule.name for rule in ROW_RULES}
    for rule in ROW_RULES:
        check = checks[(rule.table, rule.name)]
        assert check.companions == (f"{rule.table}_row_faults",) and rule.flag in (check.query or "")
        assert (check.severity, check.data_health) == (rule.severity, rule.data_health)
        # the rules read no column their faults lack
        faults_of(ds.dataset(fault_schema(rule.table).empty_table()), rule.table)


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("table", TABLES)
def test_the_faults_are_the_rows_spark_s_where_selects(
    spark: Any, sample_scan: SampleScan, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, table: str, seed: int
) -> None:
    with_nulls = planted_rows(sample_scan, table, seed, nulls=True)
    expected = by_sql(spark, table, with_nulls)
    assert all(expected.values()), f"a rule of {table} has no planted fault: {expected}"
    frame = spark.createDataFrame(with_nulls.combine_chunks(), spark_schema(with_nulls.schema))
    found = faults_frame(table, frame)
    assert "MapInArrow" in found._jdf.queryExecution().analyzed().toString()
    assert flagged([r.asDict(recursive=True) for r in found.collect()], table) == expected

    # files hold no null where the table's schema allows none
    in_files = planted_rows(sample_scan, table, seed, nulls=False)
    expected = by_sql(spark, table, in_files)
    assert any(expected.values())
    files = write_files(tmp_path / table, table, in_files)
    assert sum(len(entry.row_groups) for entry in files.files) > 3 and files.rows == in_files.num_rows
    frame = frame_in_ms(spark.read.parquet(str(tmp_path / table)))  # as the scan reads them
    on_driver = faults_frame(table, frame, files)
    assert "LocalRelation" in on_driver._jdf.queryExecution().analyzed().toString()
    assert flagged([r.asDict(recursive=True) for r in on_driver.collect()], table) == expected
    monkeypatch.setattr(row_faults, "DRIVER_ROWS", in_files.num_rows - 1)
    by_tasks = faults_frame(table, frame, files)
    assert "MapInArrow" in by_tasks._jdf.queryExecution().analyzed().toString()
    assert flagged([r.asDict(recursive=True) for r in by_tasks.collect()], table) == expected
