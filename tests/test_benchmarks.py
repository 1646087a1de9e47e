"""The benchmarks' realistic dump generator and the scan benchmark's table (no Spark)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from txn_audit.formats.model import BatchHeader
from txn_audit.formats.record_batch import decode_control_marker
from txn_audit.formats.segment import iter_batches, iter_records
from txn_audit.formats.txn_state import decode_txn_log_key, decode_txn_log_value, txn_partition_for

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))

import realistic_dump  # noqa: E402
import scan_bench  # noqa: E402

PREPARE_OR_COMPLETE = {2: "COMMIT", 3: "ABORT", 4: "COMMIT", 5: "ABORT"}


@pytest.fixture(scope="module")
def dump(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, realistic_dump.DumpShape]:
    out = tmp_path_factory.mktemp("realistic")
    return out, realistic_dump.write_realistic_dump(out, size_bytes=3 << 20, txns_per_producer=4)


def _batches(path: Path) -> list[tuple[bytes, BatchHeader]]:
    data = path.read_bytes()
    return [(data, h) for h in iter_batches(data) if isinstance(h, BatchHeader)]


def test_coordinator_log_lists_every_transaction_the_markers_close(
    dump: tuple[Path, realistic_dump.DumpShape],
) -> None:
    out, shape = dump
    root = out / "broker-1"
    assert shape.copies >= 2, "the block must be repeated for this test to mean something"
    coordinator: dict[tuple[int, int], set[str]] = {}  # (producer id, epoch) -> outcomes written
    tids: set[str] = set()
    records = 0
    folders = sorted(root.glob(f"{realistic_dump.TXN_STATE_TOPIC}-*"))
    assert len(folders) == realistic_dump.TXN_STATE_PARTITIONS
    for folder in folders:
        partition = int(folder.name.rpartition("-")[2])
        for path in folder.glob("*.log"):
            for data, h in _batches(path):
                for record in iter_records(data, h):
                    assert record.key is not None
                    tid = decode_txn_log_key(record.key).transactional_id
                    assert txn_partition_for(tid, realistic_dump.TXN_STATE_PARTITIONS) == partition
                    value = decode_txn_log_value(record.value)
                    assert value is not None
                    tids.add(tid)
                    records += 1
                    if value.state_code in PREPARE_OR_COMPLETE:
                        coordinator.setdefault((value.producer_id, value.producer_epoch), set()).add(
                            PREPARE_OR_COMPLETE[value.state_code])
    assert records == shape.coordinator_records
    markers: dict[tuple[int, int], set[str]] = {}
    codecs, kinds = set(), set()
    for path in root.glob("*/*.log"):
        if path.parent.name.startswith("__"):
            continue
        for data, h in _batches(path):
            if h.is_control:
                (record,) = iter_records(data, h)
                marker = decode_control_marker(h, record)
                markers.setdefault((h.producer_id, h.producer_epoch), set()).add(marker.marker_type)
                kinds.add("control")
            else:
                codecs.add(h.compression)
                kinds.add("txn" if h.is_transactional else "idempotent" if h.producer_id >= 0 else "plain")
    # every marker closes a transaction the coordinator wrote, with the same outcome, and every
    # transaction the coordinator prepared has a marker somewhere (the stuck one on one partition)
    assert markers and set(markers) == set(coordinator)
    for key, kinds_written in markers.items():
        assert kinds_written <= coordinator[key], key
    copies_of = {t.rpartition(".c")[2] for t in tids if ".c" in t}
    assert len(copies_of) == shape.copies
    assert codecs == {0, 1, 2, 3, 4}
    assert kinds == {"control", "txn", "idempotent", "plain"}


def test_shape_and_planted_anomalies(dump: tuple[Path, realistic_dump.DumpShape]) -> None:
    out, shape = dump
    # what the scan benchmark expects the audit to find (a 0.05 GiB dump's scan found exactly these)
    assert scan_bench.expected_findings(out) == {
        "stuck_lso": 5, "hanging_transaction": 3, "late_arrival": 2, "open_transaction": 2, "absorbed_late_record": 1,
        "sequence_gap": 1, "missing_marker": 1, "coordinator_stuck": 1, "corrupt_batch": 1, "truncated_segment": 1}
    kinds = {a["kind"] for a in shape.anomalies}
    assert {"hanging_transaction", "late_arrival", "absorbed_late_record", "coordinator_stuck", "missing_marker",
            "open_transaction", "sequence_gap", "corrupt_batch", "truncated_segment"} <= kinds
    assert shape.txn_producers >= 50 and shape.idempotent_producers and shape.plain_producers
    assert 0.1 < shape.aborted / shape.transactions < 0.3
    topics = {p.name.rpartition("-")[0] for p in (out / "broker-1").iterdir() if p.is_dir()}
    assert len(topics - {realistic_dump.TXN_STATE_TOPIC}) >= 2
    torn = next(a for a in shape.anomalies if a["kind"] == "truncated_segment")
    seg = out / "broker-1" / "clicks-1" / f"{torn['segment_base_offset']:020d}.log"
    issues = [i.kind for i in iter_batches(seg.read_bytes()) if not isinstance(i, BatchHeader)]
    assert issues == ["crc_mismatch", "truncated_tail"]
    assert (out / "shape.json").exists()


def _run(size: float, wall: float, worker_mib: int = 600, kinds: dict[str, int] | None = None) -> Any:
    return scan_bench.ScanRun(size, wall, 0, [], {"worker": worker_mib << 10}, 0, finding_kinds=kinds or {})


def test_target_table_on_canned_measurements() -> None:
    m = scan_bench.Measurements(
        scans={"realistic": [_run(1, 28.0, kinds={"stuck_lso": 2}), _run(4, 45.0, 1100, {"stuck_lso": 1, "x": 1})],
               "uniform": [_run(1, 40.0), _run(4, 55.0)]},
        kafka_python_s_per_gib={"realistic": 12.0, "uniform": 12.0},
        small={"healthy": 9.0, "eos": 20.0},
        baseline_s=6.0,
        coordinator_rate=1.5e6,
        expected_findings={"realistic": {"stuck_lso": 2}},
    )
    lines = scan_bench.target_table(m)
    text = "\n".join(lines)
    assert lines[0].startswith("| target |")
    assert "| small dump healthy |" in text and "1.50" in text
    assert "| small dump eos |" in text and "3.33" in text
    row = next(line for line in lines if line.startswith("| 1 GiB scan wall,") and "realistic" in line)
    assert row.endswith("| met |")
    # 28 s is under 30 s, but 4.67x a 6 s baseline where 30 s was 2.07x the target's VM's 14.5 s
    per_vm = next(line for line in lines if line.startswith("| 1 GiB scan wall / SparkSession") and "realistic" in line)
    assert "4.67x" in per_vm and per_vm.endswith("| not met |")
    quick = scan_bench.target_table(scan_bench.Measurements(
        scans={"realistic": [_run(1, 12.0)]}, kafka_python_s_per_gib={}, small={"healthy": 9.0}, baseline_s=6.0,
        coordinator_rate=None))
    assert any(line.startswith("| 1 GiB scan wall / SparkSession") and "2.00x" in line and line.endswith("| met |")
               for line in quick)
    rss = next(line for line in lines if "worker peak RSS" in line and "realistic" in line and "4 GiB" in line)
    assert rss.endswith("| not met |")
    assert any("marginal" in line and "uniform" in line for line in lines)
    planted = [line for line in lines if line.startswith("| findings of the planted anomalies")]
    assert len(planted) == 2 and planted[0].endswith("| met |") and "1 missed, 1 unexpected" in planted[1]
    assert any("coordinator records" in line and line.endswith("| met |") for line in lines)
    noisy = scan_bench.target_table(scan_bench.Measurements(
        scans={"realistic": [_run(0.05, 50.0), _run(0.1, 40.0)]}, kafka_python_s_per_gib={"realistic": 12.0},
        small={}, baseline_s=None, coordinator_rate=None))
    assert any("marginal" in line and line.endswith("| inconclusive: larger scan not slower |") for line in noisy)
    missing = scan_bench.target_table(scan_bench.Measurements(scans={}, kafka_python_s_per_gib={}, small={},
                                                              baseline_s=None, coordinator_rate=None))
    assert sum("not measured" in line for line in missing) >= 5


def test_the_real_brokers_dump_has_its_rows() -> None:
    """The real broker's dump: its pace, no finding at warning or above (nothing was planted) and
    a worker's peak RSS; when it could not be written, why."""
    def base(**extra: Any) -> Any:
        return scan_bench.Measurements(scans={}, kafka_python_s_per_gib={}, small={}, baseline_s=None,
                                       coordinator_rate=None, **extra)

    run = scan_bench.ScanRun(0.25, 20.0, 0, [], {"worker": 700 << 10}, 0, loud=0)
    lines = scan_bench.target_table(base(real_broker=run))
    real = [line for line in lines if "| real broker 4.4.0 dump |" in line]
    assert len(real) == 3 and "20.0 s = 80.0 s/GiB" in real[0]
    assert real[1].startswith("| findings at warning or above") and real[1].endswith("| met |")
    assert real[2].endswith("| met |")
    loud = scan_bench.target_table(base(real_broker=scan_bench.ScanRun(0.25, 20.0, 1, [], {}, 0, loud=2)))
    assert any(line.startswith("| findings at warning or above") and line.endswith("| not met |") for line in loud)
    missing = scan_bench.target_table(base(real_broker_missing="not written: no java"))
    assert any("| real broker 4.4.0 dump | not written: no java |" in line for line in missing)
