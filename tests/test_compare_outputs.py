"""``scripts/compare_outputs.py`` on hand-made snapshots (no Spark): equal ones pass, a difference is shown."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "compare_outputs.py"


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("compare_outputs", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclass looks its module up
    spec.loader.exec_module(module)
    return module


def _snapshot(root: Path, rows: list[dict[str, object]], scan_dir: str) -> Path:
    """A snapshot of one scenario: a table, and a summary that names where the scan went."""
    script = _script()
    canon = script.Canon({scan_dir: "<out>"})
    canon.write(root / "kafka-4.4.0" / "healthy" / "tables" / "batches.jsonl", rows)
    canon.write(root / "kafka-4.4.0" / "healthy" / "summary.jsonl",
                script.summary_rows({"summary": {"tables": f"{scan_dir}/tables", "partitions": 2}}))
    return root


def test_equal_snapshots_pass_whatever_the_row_order_and_scan_folder(tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    rows = [{"offset": 1, "headers": {"b": 1, "a": 2}}, {"offset": 0, "headers": {}}]
    a = _snapshot(tmp_path / "a", rows, str(tmp_path / "one"))
    b = _snapshot(tmp_path / "b", rows[::-1], str(tmp_path / "other"))
    assert _script().compare(a, b) == 0
    assert "EQUAL" in capsys.readouterr().out


def test_a_changed_row_is_shown_from_both_sides(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a = _snapshot(tmp_path / "a", [{"offset": 0, "lso": 5}, {"offset": 1, "lso": 7}], str(tmp_path / "one"))
    b = _snapshot(tmp_path / "b", [{"offset": 0, "lso": 5}, {"offset": 1, "lso": 8}], str(tmp_path / "one"))
    (b / "sample").mkdir()
    (b / "sample" / "summary.jsonl").write_text("{}\n")
    assert _script().compare(a, b) == 1
    out = capsys.readouterr().out
    assert "kafka-4.4.0/healthy/tables/batches.jsonl: A 2 rows, B 2 rows; 1 only in A, 1 only in B" in out
    assert '  A: {"lso":7,"offset":1}' in out and '  B: {"lso":8,"offset":1}' in out
    assert "sample/summary.jsonl: only in B" in out
