"""The warehouse keeps reading earlier dates: a date published before the time columns became
timestamps (schema version 1, ``tests/fixtures/warehouse-v1``, made from the bundled sample as
its README says) is read with the current names and types, beside a date published now."""

from __future__ import annotations

import json
import shutil
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd
import pyarrow.parquet as pq

from txn_audit import explore, warehouse
from txn_audit.migrate import SCHEMA_VERSION, V1_MINUTES, V1_RENAMES, migrate
from txn_audit.schemas import ALL_TABLES, TIMESTAMP

if TYPE_CHECKING:
    from tests.conftest import SampleScan

V1 = Path(__file__).resolve().parents[1] / "fixtures" / "warehouse-v1"
OLD, NEW = date(2026, 1, 15), date(2026, 1, 16)


def _v1_rows(name: str) -> list[dict[str, Any]]:
    """The fixture's rows of table ``name`` as version 1 wrote them (int64 ms, -1 kept)."""
    folder = V1 / name / warehouse.partition_name(OLD)
    return pq.read_table(folder / "part-00000.parquet").to_pylist() if folder.is_dir() else []


def _expected(name: str, row: dict[str, Any]) -> dict[str, Any]:
    """A version-1 row as the current schema gives it: renamed, instants in epoch ms or None."""
    renames = V1_RENAMES.get(name, {})
    out = {renames.get(k, k): v for k, v in row.items()}
    for column in V1_MINUTES.get(name, ()):
        if out.get(column) is not None:
            out[column] *= 60_000
    schema = ALL_TABLES[name]
    return {f.name: (None if f.type == TIMESTAMP and out.get(f.name) == -1 else out.get(f.name)) for f in schema}


def _as_ms(frame: pd.DataFrame) -> list[dict[str, Any]]:
    """``load_history``'s rows of one date, instants back in epoch ms, without ``audit_date``."""
    return explore.rows(frame.drop(columns=[warehouse.PARTITION_COLUMN]))


def _same(value: Any) -> Any:
    """A value as the comparison takes it: arrays as lists, numpy numbers as Python's."""
    if hasattr(value, "tolist"):
        return value.tolist()
    if isinstance(value, list):
        return [_same(v) for v in value]
    return value


def test_a_version_1_date_has_no_version_and_reads_migrated(tmp_path: Path) -> None:
    root = tmp_path / "warehouse"
    shutil.copytree(V1, root)
    assert "schema_version" not in json.loads((root / "runs" / warehouse.partition_name(OLD) / "run.json").read_text())
    assert warehouse.schema_version(root, OLD) == 1
    history = explore.load_history(root)
    for name, schema in ALL_TABLES.items():
        frame = history[name]
        assert list(frame.columns) == [*schema.names, warehouse.PARTITION_COLUMN], name
        for f in schema:
            if f.type == TIMESTAMP:
                assert str(frame[f.name].dtype) == "datetime64[ms, UTC]", (name, f.name)
        got = [{k: _same(v) for k, v in r.items()} for r in _as_ms(frame)]
        assert got == [{k: _same(v) for k, v in _expected(name, r).items()} for r in _v1_rows(name)], name
    assert history["findings"]["first_timestamp"].notna().any()
    assert history["incidents"]["held_since_timestamp"].isna().any()  # -1 or null: no time


def test_migrate_refuses_a_newer_version() -> None:
    import pytest

    with pytest.raises(ValueError, match="schema version 3"):
        migrate("findings", ALL_TABLES["findings"].empty_table(), 3)


def test_an_old_date_and_a_new_date_read_together(sample_scan: SampleScan, tmp_path: Path) -> None:
    root = tmp_path / "warehouse"
    shutil.copytree(V1, root)
    published = warehouse.publish_run(None, sample_scan.out, root, NEW)
    manifest = json.loads((Path(published.run_dir) / warehouse.RUN_MANIFEST).read_text())
    assert manifest["schema_version"] == SCHEMA_VERSION == warehouse.schema_version(root, NEW)
    for name in ALL_TABLES:  # the new date's files hold the declared types
        files = list((root / name / warehouse.partition_name(NEW)).glob("*.parquet"))
        assert files and pq.read_schema(files[0]).remove_metadata() == ALL_TABLES[name].remove_metadata(), name
    history = explore.load_history(root)
    assert list(history["runs"][warehouse.PARTITION_COLUMN]) == [pd.Timestamp(OLD), pd.Timestamp(NEW)]
    for name, schema in ALL_TABLES.items():
        frame = history[name]
        assert list(frame.columns) == [*schema.names, warehouse.PARTITION_COLUMN], name
        old = frame[frame[warehouse.PARTITION_COLUMN] == pd.Timestamp(OLD)]
        new = [{k: _same(v) for k, v in r.items()}
               for r in _as_ms(frame[frame[warehouse.PARTITION_COLUMN] == pd.Timestamp(NEW)])]
        # the same dump scanned by both versions: each row the old date kept is a row of the new one
        for row in _as_ms(old):
            assert {k: _same(v) for k, v in row.items()} in new, (name, row)
    findings = history["findings"]
    assert findings["first_timestamp"].dtype == "datetime64[ms, UTC]"
    assert explore.describe_history(history).startswith("audit_dates=2026-01-15,2026-01-16 findings=3,")
