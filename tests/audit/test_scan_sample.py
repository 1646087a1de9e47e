"""Every anomaly planted in the sample dump is found, with the right kind and place, and
nothing else at warning or above."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import SampleScan
from txn_audit.results import Finding

pytestmark = pytest.mark.spark


def _matches(f: Finding, a: dict[str, Any]) -> bool:
    if (f.topic, f.partition) != (a["topic"], a["partition"]):
        return False
    if f.first_offset is None:
        return True
    return a["first_offset"] <= f.first_offset <= max(a["last_offset"], a.get("closing_marker_offset", -1))


def test_every_planted_anomaly_is_found(sample_scan: SampleScan) -> None:
    manifest, result = sample_scan.manifest, sample_scan.result
    for anomaly in manifest["anomalies"]:
        for kind in anomaly["expected_findings"]:
            hits = [f for f in result.findings if f.kind == kind and _matches(f, anomaly)]
            assert hits, f"{kind} not found for planted {anomaly['kind']} at {anomaly['topic']}-{anomaly['partition']}"


def test_nothing_else_at_warning_or_above(sample_scan: SampleScan) -> None:
    manifest, result = sample_scan.manifest, sample_scan.result
    unexplained = [
        (f.kind, f.topic, f.partition, f.first_offset, f.evidence)
        for f in result.at_or_above("warning")
        if not any(f.kind in a["expected_findings"] and _matches(f, a) for a in manifest["anomalies"])
    ]
    assert unexplained == []


#: the cause each planted anomaly is (the sample names an anomaly by the finding it plants)
SAMPLE_CAUSES = {
    "hanging_transaction": "stray_write",  # a batch on a partition never added to the transaction
    "late_arrival": "late_arrival",
    "absorbed_late_record": "late_arrival",
    "sequence_gap": "sequence_gap",
    "missing_marker": "missing_marker",
    "open_transaction": "open_transaction",
    "coordinator_stuck": "coordinator_stuck",
    "corrupt_batch": "corruption",
    "truncated_segment": "corruption",
}


def test_each_planted_anomaly_is_one_incident_of_its_cause(sample_scan: SampleScan) -> None:
    manifest, result = sample_scan.manifest, sample_scan.result
    explained = set()
    for anomaly in manifest["anomalies"]:
        hits = [i for i in result.incidents if any(f.kind in anomaly["expected_findings"] and _matches(f, anomaly)
                                                   for f in result.findings_of(i))]
        assert [(i.kind, i.topic, i.partition) for i in hits] == [
            (SAMPLE_CAUSES[anomaly["kind"]], anomaly["topic"], anomaly["partition"])], anomaly["kind"]
        # every finding the anomaly plants is a consequence of that one incident
        assert set(anomaly["expected_findings"]) <= set(hits[0].consequences), anomaly["kind"]
        explained.add(hits[0].incident_id)
    loud = [(i.kind, i.summary) for i in result.incidents_at_or_above("warning") if i.incident_id not in explained]
    assert loud == []
    assert {f.incident_id for f in result.findings} == {i.incident_id for i in result.incidents}
    on_disk = json.loads((sample_scan.out / "summary.json").read_text())
    assert [i["incident_id"] for i in on_disk["incidents"]] == [i.incident_id for i in result.incidents]
    assert all(f["incident_id"] for f in on_disk["findings"])


def test_summary_json_is_written_and_matches(sample_scan: SampleScan) -> None:
    result, out = sample_scan.result, sample_scan.out
    on_disk = json.loads((out / "summary.json").read_text())
    assert on_disk == json.loads(json.dumps(result.to_json()))
    assert set(on_disk) == {"as_of_ms", "audit_time", "input", "partitions", "replicas", "incidents", "findings",
                            "blocked_consumers", "summary"}
    assert on_disk["as_of_ms"] == result.as_of_ms == json.loads(
        (Path(result.input) / "manifest.json").read_text())["as_of_ms"]
    for table in ("batches", "partition_transactions", "transactions", "partition_stability", "findings"):
        assert (out / "tables" / table).is_dir()


def _digest(root: Path) -> dict[str, str]:
    import hashlib

    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


def _rows_in_file_order(table_dir: Path) -> list[dict[str, Any]]:
    """The rows of a table's files, instants in epoch ms (as the package reads them)."""
    import pyarrow.parquet as pq

    from txn_audit.schemas import read_ms

    rows: list[dict[str, Any]] = []
    for part in sorted(table_dir.glob("part-*.parquet"), key=lambda p: p.name.split("-")[1]):
        rows.extend(read_ms(pq.read_table(part)).to_pylist())
    return rows


def test_same_input_same_tables_and_the_dump_is_untouched(
    sample_scan: SampleScan, spark: Any, tmp_path: Path
) -> None:
    from txn_audit import api
    from txn_audit.ledger import Ledger
    from txn_audit.sample import write_sample
    from txn_audit.schemas import ALL_TABLES

    pristine = tmp_path / "pristine"
    write_sample(pristine, seed=7)
    assert _digest(sample_scan.dump) == _digest(pristine), "the first scan changed its input"
    again = api.scan(sample_scan.dump, tmp_path / "again", spark=spark, options=api.AuditOptions(progress=False))
    assert _digest(sample_scan.dump) == _digest(pristine), "the second scan changed its input"
    assert not again.ingest.reused
    for table in ALL_TABLES:
        first = _rows_in_file_order(sample_scan.out / "tables" / table)
        second = _rows_in_file_order(tmp_path / "again" / "tables" / table)
        assert first == second, f"{table} differs between two scans of the same dump"
    assert again.findings == sample_scan.result.findings
    # a rerun into the same folder keeps the decoded tables (same dump) and replaces the rest
    written = Ledger.load(tmp_path / "again" / "tables")
    assert written is not None and written.raw.table("batches") is not None
    stages: list[str] = []
    rerun = api.scan(sample_scan.dump, tmp_path / "again", spark=spark, options=api.AuditOptions(progress=False),
                     on_stage=stages.append)
    # the same dump and options: every table is current, no stage of the audit runs again
    assert rerun.ingest.reused and rerun.findings == again.findings and rerun.incidents == again.incidents
    assert rerun.partitions == again.partitions and rerun.to_json() == again.to_json()
    assert stages == ["writing the report"]
    kept = Ledger.load(tmp_path / "again" / "tables")  # the tables' ledger comes along with them
    assert kept is not None and kept.raw.tables == written.raw.tables and kept.fingerprint == written.fingerprint
    assert kept.entries == written.entries and kept.options == written.options
    for table in ALL_TABLES:
        assert _rows_in_file_order(tmp_path / "again" / "tables" / table) == _rows_in_file_order(
            sample_scan.out / "tables" / table), table
    # other options: the decoded tables are kept, the audit runs again
    stages.clear()
    other = api.scan(sample_scan.dump, tmp_path / "again", spark=spark, on_stage=stages.append,
                     options=api.AuditOptions(progress=False, late_tolerance_ms=60_000))
    assert other.ingest.reused and "rebuilding transactions" in stages and "detecting" in stages
    changed = Ledger.load(tmp_path / "again" / "tables")
    assert changed is not None and changed.options is not None and changed.options["late_tolerance_ms"] == 60_000
    written_findings = _rows_in_file_order(tmp_path / "again" / "tables" / "findings")
    assert [api.Finding.from_row(r) for r in written_findings] == other.findings
