"""Every anomaly planted in the sample dump is found, with the right kind and place, and
nothing else at warning or above."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import SampleScan

pytestmark = pytest.mark.spark


def _matches(f: dict[str, Any], a: dict[str, Any]) -> bool:
    if (f["topic"], f["partition"]) != (a["topic"], a["partition"]):
        return False
    if f["first_offset"] is None:
        return True
    return a["first_offset"] <= f["first_offset"] <= max(a["last_offset"], a.get("closing_marker_offset", -1))


def test_every_planted_anomaly_is_found(sample_scan: SampleScan) -> None:
    manifest, result = sample_scan.manifest, sample_scan.result
    for anomaly in manifest["anomalies"]:
        for kind in anomaly["expected_findings"]:
            hits = [f for f in result.findings if f["kind"] == kind and _matches(f, anomaly)]
            assert hits, f"{kind} not found for planted {anomaly['kind']} at {anomaly['topic']}-{anomaly['partition']}"


def test_nothing_else_at_warning_or_above(sample_scan: SampleScan) -> None:
    manifest, result = sample_scan.manifest, sample_scan.result
    unexplained = [
        (f["kind"], f["topic"], f["partition"], f["first_offset"], f["evidence"])
        for f in result.at_or_above("warning")
        if not any(f["kind"] in a["expected_findings"] and _matches(f, a) for a in manifest["anomalies"])
    ]
    assert unexplained == []


def test_summary_json_is_written_and_matches(sample_scan: SampleScan) -> None:
    result, out = sample_scan.result, sample_scan.out
    on_disk = json.loads((out / "summary.json").read_text())
    assert on_disk == json.loads(json.dumps(result.to_json()))
    assert set(on_disk) == {"as_of_ms", "input", "partitions", "findings", "summary"}
    assert on_disk["as_of_ms"] == result.as_of_ms == json.loads(
        (Path(result.input) / "manifest.json").read_text())["as_of_ms"]
    for table in ("batches", "partition_transactions", "transactions", "partition_stability", "findings"):
        assert (out / "tables" / table).is_dir()
