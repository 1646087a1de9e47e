"""``txn_audit.explore``: what notebooks read agrees with the Parquet tables read directly."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow.compute as pc
import pytest

from tests.notebooks.conftest import EARLIER, LATER, RESOLVED_KIND, Warehouse, read_table
from txn_audit import explore
from txn_audit.errors import UsageError
from txn_audit.schemas import ALL_TABLES
from txn_audit.severity import Severity

if TYPE_CHECKING:
    from tests.conftest import SampleScan



@pytest.fixture(scope="module")
def scan(sample_scan: SampleScan) -> explore.ScanTables:
    return explore.load_scan(sample_scan.out)


def test_load_scan_reads_every_table(scan: explore.ScanTables, sample_scan: SampleScan) -> None:
    assert scan.names == list(ALL_TABLES)
    for name in ALL_TABLES:
        direct = read_table(sample_scan.out / "tables", name)
        assert len(scan[name]) == direct.num_rows, name
        assert list(scan[name].columns) == direct.schema.names
    assert scan.as_of_ms == sample_scan.result.as_of_ms
    assert scan.verdict.startswith("CRITICAL")
    # offsets stay integers next to nulls
    assert str(scan["findings"]["first_offset"].dtype) == "Int64"


def test_load_scan_refuses_other_folders(tmp_path: Path, warehouse: Warehouse) -> None:
    for folder in (tmp_path, tmp_path / "missing", warehouse.root):
        with pytest.raises(UsageError, match="not a txn-audit scan output"):
            explore.load_scan(folder)


def test_partition_view_matches_direct_queries(scan: explore.ScanTables, sample_scan: SampleScan) -> None:
    tables = sample_scan.out / "tables"
    ptx = read_table(tables, "partition_transactions").to_pylist()
    targets = {(t["topic"], t["partition"], None) for t in ptx} | {(t["topic"], t["partition"], t["producer_id"])
                                                                    for t in ptx}
    assert len(targets) > 10
    for topic, partition, producer in sorted(targets, key=str):
        view = explore.partition_view(scan, explore.Target(topic, partition, producer))
        where = (pc.field("topic") == topic) & (pc.field("partition") == partition)
        mine = where if producer is None else where & (pc.field("producer_id") == producer)
        expected_ptx = read_table(tables, "partition_transactions", mine)
        assert sorted(zip(view.transactions["producer_id"], view.transactions["txn_seq"], strict=True)) == sorted(
            zip(expected_ptx["producer_id"].to_pylist(), expected_ptx["txn_seq"].to_pylist(), strict=True))
        markers = read_table(tables, "control_markers", mine)
        assert list(view.markers["offset"]) == sorted(markers["offset"].to_pylist())
        batches = read_table(tables, "batches", mine & ~pc.field("is_control"))
        assert list(view.batches["base_offset"]) == sorted(batches["base_offset"].to_pylist())
        findings = [f for f in read_table(tables, "findings", where).to_pylist()
                    if producer is None or f["producer_id"] in (None, producer)]
        assert Counter(view.findings["kind"]) == Counter(f["kind"] for f in findings)
        assert len(view.stability) == read_table(tables, "partition_stability", where).num_rows == 1
        assert view.counts()["transactions"] == expected_ptx.num_rows


def test_choose_target(scan: explore.ScanTables, sample_scan: SampleScan) -> None:
    tables = sample_scan.out / "tables"
    with_txns = {(t["topic"], t["partition"]) for t in read_table(tables, "partition_transactions").to_pylist()}
    findings = [f for f in read_table(tables, "findings").to_pylist() if (f["topic"], f["partition"]) in with_txns]
    worst = max(Severity(f["severity"]).rank for f in findings)
    target = explore.choose_target(scan)
    assert any((f["topic"], f["partition"], f["producer_id"]) == (target.topic, target.partition, target.producer_id)
               and Severity(f["severity"]).rank == worst for f in findings)
    # a partition without findings: its busiest producer
    quiet = sorted(with_txns - {(f["topic"], f["partition"]) for f in findings})
    assert quiet
    topic, partition = quiet[0]
    chosen = explore.choose_target(scan, topic, partition)
    counts = Counter(t["producer_id"] for t in read_table(tables, "partition_transactions").to_pylist()
                     if (t["topic"], t["partition"]) == (topic, partition))
    assert (chosen.topic, chosen.partition) == (topic, partition)
    assert counts[chosen.producer_id] == max(counts.values())
    with pytest.raises(UsageError, match="not in this scan"):
        explore.choose_target(scan, "no-such-topic")
    with pytest.raises(UsageError, match="not in this scan"):
        explore.choose_target(scan, topic, 999)
    with pytest.raises(UsageError, match="wrote nothing"):
        explore.choose_target(scan, topic, partition, 987654)


def test_partition_figures(scan: explore.ScanTables) -> None:
    view = explore.partition_view(scan, explore.choose_target(scan))
    timeline = explore.timeline_figure(view, scan.as_of_ms)
    assert timeline is not None
    bars = [trace for trace in timeline.data if trace.type == "bar"]
    assert sum(len(trace.y) for trace in bars) == len(view.transactions)
    assert any(trace.name == "late records" for trace in timeline.data)
    assert {trace.name for trace in timeline.data} >= {f"{m} marker" for m in set(view.markers["marker_type"])}
    for fig in (explore.offsets_figure(view), explore.batches_figure(view), explore.stability_figure(scan)):
        assert fig is not None and len(fig.data) > 0


def test_load_history_reads_both_dates(warehouse: Warehouse) -> None:
    history = explore.load_history(warehouse.root)
    dates = [EARLIER, LATER]
    assert [d.date() for d in history["runs"]["audit_date"]] == dates
    for name in ALL_TABLES:
        frame = history[name]
        per_date = Counter(d.date() for d in frame["audit_date"])
        for day, scan_out in zip(dates, (warehouse.earlier_scan, warehouse.later_scan), strict=True):
            assert per_date[day] == read_table(scan_out / "tables", name).num_rows, (name, day)
        assert set(per_date) <= set(dates)  # hidden staging folders and the unfinished date are skipped


def test_findings_trends(warehouse: Warehouse) -> None:
    history = explore.load_history(warehouse.root)
    later = read_table(warehouse.later_scan / "tables", "findings").to_pylist()
    earlier = read_table(warehouse.earlier_scan / "tables", "findings").to_pylist()
    by_severity = explore.findings_by_date(history, "severity")
    for day, rows in ((EARLIER, earlier), (LATER, later)):
        counts = Counter(f["severity"] for f in rows)
        assert {s: int(by_severity.loc[str(day), s]) for s in by_severity.columns} == \
            {s: counts.get(s, 0) for s in by_severity.columns}
    by_kind = explore.findings_by_date(history, "kind")
    assert int(by_kind.loc[str(EARLIER), RESOLVED_KIND]) == 0
    assert int(by_kind.loc[str(LATER), RESOLVED_KIND]) == sum(f["kind"] == RESOLVED_KIND for f in later) > 0
    assert set(explore.new_findings(history)["kind"]) == {RESOLVED_KIND}
    assert explore.findings_trend_figure(history, "kind") is not None


def test_lso_lag(warehouse: Warehouse) -> None:
    history = explore.load_history(warehouse.root)
    lag = explore.lso_lag(history)
    for day, scan_out in ((EARLIER, warehouse.earlier_scan), (LATER, warehouse.later_scan)):
        stability = read_table(scan_out / "tables", "partition_stability").to_pylist()
        expected = {(r["topic"], r["partition"]): r["effective_high_watermark"] - r["last_stable_offset"]
                    for r in stability}
        got = lag[lag["audit_date"] == str(day)]
        assert {(t, int(p)): int(v) for t, p, v in zip(got["topic"], got["partition"], got["lso_lag"], strict=True)} \
            == expected
        # lagging exactly where the table says the LSO is below the HW
        assert {(t, int(p)) for t, p, v in zip(got["topic"], got["partition"], got["lso_lag"], strict=True) if v > 0} \
            == {(r["topic"], r["partition"]) for r in stability if r["lso_below_hw"]}
    quiet = lag[(lag["topic"] == warehouse.quiet_partition[0]) & (lag["partition"] == warehouse.quiet_partition[1])]
    assert [int(v) for v in quiet.sort_values("audit_date")["lso_lag"]][0] == 0
    assert [int(v) for v in quiet.sort_values("audit_date")["lso_lag"]][1] > 0
    fig = explore.lso_lag_figure(history)
    assert fig is not None
    assert warehouse.quiet_partition[0] + f"-{warehouse.quiet_partition[1]}" in {trace.name for trace in fig.data}


def test_load_history_refuses_other_folders(tmp_path: Path, sample_scan: SampleScan) -> None:
    with pytest.raises(UsageError, match="does not exist"):
        explore.load_history(tmp_path / "missing")
    for folder in (tmp_path, sample_scan.out):
        with pytest.raises(UsageError, match="not a txn-audit warehouse"):
            explore.load_history(folder)
