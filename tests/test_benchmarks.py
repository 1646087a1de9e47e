"""The benchmarks' realistic dump generator, the scan benchmark's table and the paired
comparison (its statistics and output comparison without Spark; one short run with it)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from txn_audit.formats.model import BatchHeader
from txn_audit.formats.record_batch import decode_control_marker
from txn_audit.formats.segment import iter_batches, iter_records
from txn_audit.formats.txn_state import decode_txn_log_key, decode_txn_log_value, txn_partition_for

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))

import pair_bench  # noqa: E402
import realistic_dump  # noqa: E402
import scale_bench  # noqa: E402
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


def _lane_of(topic: str) -> int:
    """The lane of a data topic of the realistic dump (``realistic_dump.lane_topic``)."""
    base, _, lane = topic.rpartition(".l")
    return int(lane) if base and lane.isdigit() else 0


def test_lanes_deal_each_copy_to_partitions_of_its_own(tmp_path: Path) -> None:
    """With ``lanes``, copy ``c`` of the block writes to lane ``c % lanes``'s topics only, and its
    coordinator records list that lane's partitions: the coordinator and the markers agree per lane."""
    lanes = 3
    shape = realistic_dump.write_realistic_dump(tmp_path, size_bytes=3 << 20, txns_per_producer=4, lanes=lanes)
    root = tmp_path / "broker-1"
    data = [p for p in root.iterdir() if p.is_dir() and not p.name.startswith("__")]
    assert shape.partitions == len(data) + realistic_dump.TXN_STATE_PARTITIONS == 16 * lanes + 50
    assert shape.copies >= lanes and {_lane_of(p.name.rpartition("-")[0]) for p in data} == set(range(lanes))
    listed_lanes: dict[int, set[int]] = {}
    for path in root.glob(f"{realistic_dump.TXN_STATE_TOPIC}-*/*.log"):
        for data_bytes, h in _batches(path):
            for record in iter_records(data_bytes, h):
                assert record.key is not None
                tid = decode_txn_log_key(record.key).transactional_id
                value = decode_txn_log_value(record.value)
                if value is None or ".c" not in tid:
                    continue
                copy = int(tid.rpartition(".c")[2])
                assert value.producer_id // realistic_dump.PID_STRIDE == copy
                for listed in value.topic_partitions or ():
                    listed_lanes.setdefault(copy, set()).add(_lane_of(listed.topic))
    assert len(listed_lanes) == shape.copies
    assert all(found == {copy % lanes} for copy, found in listed_lanes.items())
    written: dict[int, set[int]] = {}
    for folder in data:
        for path in folder.glob("*.log"):
            for _, h in _batches(path):
                if 0 <= h.producer_id < realistic_dump.ANOMALY_PID:
                    written.setdefault(h.producer_id // realistic_dump.PID_STRIDE, set()).add(
                        _lane_of(folder.name.rpartition("-")[0]))
    assert all(found == {copy % lanes} for copy, found in written.items() if copy < shape.copies)


def test_the_replicated_dump_is_every_partition_once_per_broker(tmp_path: Path) -> None:
    """``scale_bench.replicated``: three log dirs of hard links to the one broker's files, each
    ``meta.properties`` naming its own node; the input files are not changed."""
    one = tmp_path / "one"
    realistic_dump.write_realistic_dump(one, size_bytes=1 << 20, txns_per_producer=2)
    source = one / "broker-1"
    before = (source / "meta.properties").read_text()
    three = scale_bench.replicated(one)
    assert sorted(p.name for p in three.iterdir() if p.is_dir()) == ["broker-1", "broker-2", "broker-3"]
    for node in (1, 2, 3):
        copy = three / f"broker-{node}"
        assert f"node.id={node}" in (copy / "meta.properties").read_text()
        assert scale_bench.partitions_of(three) == sum(1 for p in source.iterdir() if p.is_dir())
        for log in source.glob("*/*.log"):
            assert (copy / log.relative_to(source)).stat().st_ino == log.stat().st_ino
    assert (source / "meta.properties").read_text() == before
    assert scale_bench.replicated(one) == three  # written once


def test_the_scale_table_gives_the_ratios_and_the_cost_per_partition_copy() -> None:
    def layout(name: str, partitions: int, copies: int, walls: list[float], cpu: float, driver_mib: int) -> Any:
        runs = [scan_bench.ScanRun(0.25, wall, 0, [], {"driver": driver_mib << 10, "jvm": 1 << 20}, 0,
                                   cpu_s={"driver": cpu / 4, "worker": cpu * 3 / 4}) for wall in walls]
        return scale_bench.Layout(name, Path(name), partitions, copies, runs)

    lines = scale_bench.table({"few": layout("few", 66, 1, [10.0, 12.0, 11.0], 20.0, 400),
                               "many": layout("many", 2066, 1, [31.0, 29.0, 30.0], 60.0, 900),
                               "rf3": layout("rf3", 66, 3, [20.0, 21.0, 22.0], 40.0, 500)})
    many = next(line for line in lines if line.startswith("| many"))
    # median 30 s against 11 s; 19 s and 40 s of CPU (10 of the driver) over 2,000 more partitions
    assert "| 30.0 s | 2.73× | 9.5 ms | 15.0 / 60.0 s | 5.0 / 20.0 ms | 900 / 1024 MiB |" in many
    rf3 = next(line for line in lines if line.startswith("| rf3"))
    assert "| 21.0 s | 1.91× | 75.8 ms |" in rf3  # (21 - 11) s over 132 more partition copies
    assert any("2.73× (target <= 1.5×): NOT met" in line for line in lines)
    assert any("1.91× (target <= 3.0×): met" in line for line in lines)
    assert any("900 MiB (target <= 2048 MiB at 10,000): met here" in line for line in lines)


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
    assert not any(line.startswith("| CPU per further GiB") for line in lines)  # the runs counted no CPU
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


def test_pairs_take_turns_and_their_differences_have_an_interval() -> None:
    assert pair_bench.turns(4) == [("a", "b"), ("b", "a"), ("a", "b"), ("b", "a")]
    faster = pair_bench.paired([10.0, 12.0, 11.0, 13.0], [9.0, 11.5, 9.5, 12.0])
    assert faster.mean == pytest.approx(-1.0) and (faster.b_lower, faster.b_higher, faster.n) == (4, 0, 4)
    # differences -1, -0.5, -1.5, -1: standard deviation 0.408, t(3) 3.182, half-width 0.650
    assert faster.interval == pytest.approx((-1.650, -0.350), abs=1e-3)
    assert faster.sign_p == pytest.approx(0.125)  # four of four: 2 / 2**4
    mixed = pair_bench.paired([10.0, 10.0, 10.0, 10.0], [12.0, 8.0, 11.0, 9.0])
    assert mixed.mean == pytest.approx(0.0) and mixed.sign_p == 1.0
    assert mixed.interval is not None and mixed.interval[0] < 0 < mixed.interval[1]
    same = pair_bench.paired([5.0, 6.0], [5.0, 6.0])
    assert (same.mean, same.interval, same.b_lower, same.b_higher, same.sign_p) == (0.0, (0.0, 0.0), 0, 0, 1.0)
    assert pair_bench.paired([5.0], [4.0]).interval is None
    # one of eight lower, as in an A/A run of this VM: 2 * 9 / 256
    assert pair_bench.sign_test(1, 7) == pytest.approx(0.0703, abs=1e-4)
    assert pair_bench.sign_test(0, 12) < 0.001 and pair_bench.sign_test(6, 6) == 1.0
    many = pair_bench.paired([0.0] * 40, [float(i % 3) for i in range(40)])
    assert many.interval is not None and many.interval[0] > 0  # past 30 pairs: t at 30 degrees
    with pytest.raises(ValueError):
        pair_bench.paired([1.0], [1.0, 2.0])
    def run(wall: float, cpu: dict[str, float]) -> Any:
        return scan_bench.ScanRun(1, wall, 0, [], {}, 0, cpu_s=cpu)

    lines = pair_bench.report([run(10.0, {"jvm": 8.0, "driver": 2.0})] * 2,
                              [run(9.0, {"jvm": 7.0, "driver": 2.0, "worker": 1.0})] * 2)
    assert lines[0].startswith("| measure |")
    assert "| wall s | 10.00 | 9.00 | -1.00 | -1.00 to -1.00 | 2/2 | 0.50 |" in lines
    assert any(line.startswith("| CPU s, worker | 0.00 | 1.00 | +1.00 |") for line in lines)


def _out(folder: Path, tables: dict[str, list[pa.Table]], findings: list[dict[str, Any]]) -> Path:
    for name, parts in tables.items():
        (folder / "tables" / name).mkdir(parents=True)
        for index, part in enumerate(parts):
            pq.write_table(part, folder / "tables" / name / f"part-{index}.parquet")
    (folder / "tables" / "_work").mkdir()
    (folder / "summary.json").write_text(json.dumps({"findings": findings}))
    return folder


def test_outputs_compare_by_rows_in_any_order(tmp_path: Path) -> None:
    rows = pa.table({"topic": ["a", "b", "c"], "offset": [3, 1, 2],
                     "listed": [[{"topic": "a", "partition": 0}], None, []]})
    found = [{"kind": "hanging_transaction", "topic": "a"}]
    a = _out(tmp_path / "a", {"t": [rows], "u": [rows]}, found)
    # the same rows, split and ordered otherwise, as Spark's tasks may write them
    b = _out(tmp_path / "b", {"t": [rows.slice(2), rows.slice(0, 2)], "u": [rows.take([2, 0, 1])]}, found)
    assert pair_bench.differing_outputs(a, b) == []
    changed = rows.set_column(1, "offset", pa.array([3, 1, 5]))
    c = _out(tmp_path / "c", {"t": [changed], "v": [rows]}, [])
    assert pair_bench.differing_outputs(a, c) == ["u (only in A)", "v (only in B)", "t", "summary.json findings"]
    nested = rows.set_column(2, "listed", pa.array([[{"topic": "a", "partition": 1}], None, []]))
    d = _out(tmp_path / "d", {"t": [nested], "u": [rows]}, found)
    assert pair_bench.differing_outputs(a, d) == ["t"]


def test_the_sampler_counts_the_cpu_of_every_process_of_the_tree() -> None:
    burn = "import time\nwhile time.process_time() < 0.6: pass\n"
    parent = (f"import subprocess, sys\nchild = subprocess.Popen([sys.executable, '-c', {burn!r}])\n"
              f"{burn}child.wait()\ntime.sleep(0.5)\n")
    proc = subprocess.Popen([sys.executable, "-c", "import time\n" + parent])
    sampler = scan_bench.Sampler(proc.pid, interval=0.05)
    sampler.start()
    proc.wait()
    sampler.stop.set()
    sampler.join()
    cpu = sampler.cpu_s()
    # each burns 0.6 s of its own CPU; the child's is counted as of its last sample before it ended
    assert 0.5 <= cpu["driver"] <= 1.5, cpu
    assert 0.4 <= cpu["other"] <= 1.5, cpu


@pytest.mark.spark
def test_a_paired_run_of_one_tree_against_itself(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Two scans of a small real-broker dump, one on each side, the same tree: the outputs are
    the same and the report has every measure."""
    root = BENCHMARKS.parent
    dump = root / "tests" / "corpus" / "kafka-4.4.0" / "healthy" / "logdirs"
    started = time.perf_counter()
    pair_bench.main([str(dump), "--a", str(root), "--b", str(root), "--rounds", "1", "--no-warmup",
                     "--pause", "0", "--scan-flags=--no-quality"])
    printed = capsys.readouterr().out
    assert "outputs: every table and the findings the same" in printed, printed
    first_round = printed.split("round 1: ")[1].split("\n")[0]
    walls = [float(part.split(" s ")[0].split()[-1]) for part in first_round.split(", ")]
    assert len(walls) == 2 and sum(walls) <= time.perf_counter() - started
    for measure in ("wall s", "CPU s, all", "CPU s, driver", "CPU s, jvm"):
        assert any(line.startswith(f"| {measure} |") for line in printed.splitlines()), measure
    with pytest.raises(SystemExit, match="not a txn-audit source tree"):
        pair_bench.main([str(dump), "--a", str(tmp_path), "--b", str(root)])
    with pytest.raises(SystemExit, match="KEY=VALUE"):
        pair_bench.main([str(dump), "--a", str(root), "--b", str(root), "--env-b", "JAVA_TOOL_OPTIONS"])


def test_the_cpu_of_a_further_gib_against_the_cores_budget() -> None:
    one, four = _run(1, 20.0), _run(4, 38.0)
    one.cpu_s = {"worker": 10.0, "jvm": 8.0, "driver": 2.0, "other": 0.0}
    four.cpu_s = {"worker": 31.0, "jvm": 11.0, "driver": 8.0, "other": 0.0}
    lines = scan_bench.target_table(scan_bench.Measurements(
        scans={"realistic": [one, four]}, kafka_python_s_per_gib={"realistic": 12.0}, small={}, baseline_s=None,
        coordinator_rate=None, cores=2))
    row = next(line for line in lines if line.startswith("| CPU per further GiB"))
    # 30 s more over 3 GiB, against 0.5 x 12 s on each of 2 cores
    assert "| 10.0 s/GiB (worker 7.0, jvm 1.0, driver 2.0) vs 12.0 s/GiB |" in row
    assert row.endswith("| 0.83 | measured |")
    four_cores = scan_bench.target_table(scan_bench.Measurements(
        scans={"realistic": [one, four]}, kafka_python_s_per_gib={"realistic": 12.0}, small={}, baseline_s=None,
        coordinator_rate=None, cores=4))
    assert any("vs 24.0 s/GiB" in line and "| 0.42 | measured |" in line for line in four_cores)


def test_the_cpu_of_each_stage_and_of_a_further_gib_in_it() -> None:
    one, four = _run(1, 20.0), _run(4, 38.0)
    one.stage_cpu = [("decoding files", {"worker": 0.0, "jvm": 3.0, "driver": 2.0}),
                     ("rebuilding transactions", {"worker": 8.0, "jvm": 5.0, "driver": 2.5})]
    one.cpu_s = {"worker": 12.0, "jvm": 9.0, "driver": 3.5, "other": 1.0}
    four.stage_cpu = [("decoding files", {"worker": 0.0, "jvm": 3.0, "driver": 2.0}),
                      ("rebuilding transactions", {"worker": 14.0, "jvm": 6.5, "driver": 3.0}),
                      ("rebuilding transactions", {"worker": 20.0, "jvm": 7.0, "driver": 3.0})]
    four.cpu_s = {"worker": 29.0, "jvm": 10.0, "driver": 5.0}
    # a second, slower scan of each size, and a failed one: the medians are the lower of two
    slow_one, slow_four = _run(1, 30.0), _run(4, 50.0)
    slow_one.stage_cpu = [(name, {role: 2 * v for role, v in used.items()}) for name, used in one.stage_cpu]
    slow_one.cpu_s = {role: 2 * v for role, v in one.cpu_s.items()}
    slow_four.stage_cpu = [(name, {role: 2 * v for role, v in used.items()}) for name, used in four.stage_cpu]
    slow_four.cpu_s = {role: 2 * v for role, v in four.cpu_s.items()}
    failed = _run(4, 5.0)
    failed.failed, failed.stage_cpu = "exit 2", [("decoding files", {"worker": 0.0, "jvm": 90.0, "driver": 0.0})]
    lines = scan_bench.stage_cpu_table([slow_one, one], [four, failed, slow_four], "realistic")
    rows = {line.split(" | ")[0].lstrip("| "): line for line in lines if line.startswith("| ") and "---" not in line}
    assert rows["(launch)"] == "| (launch) | 5.0 | 5.0 | 0.00 | 0.00 | 0.00 | 0.00 |"
    # decoding: 8 s of the workers, 2 of the JVM, 0.5 of the driver at 1 GiB; 14, 3.5, 1 at 4 GiB
    assert rows["decoding files"] == "| decoding files | 10.5 | 18.5 | 2.67 | 2.00 | 0.50 | 0.17 |"
    # rebuilding, seen twice at 4 GiB, sums both: 4 + 4 + 1 at 1 GiB; 15 + 3.5 + 2 at 4 GiB
    assert rows["rebuilding transactions"] == "| rebuilding transactions | 9.0 | 20.5 | 3.83 | 3.67 | -0.17 | 0.33 |"
    assert scan_bench.stage_cpu_table([_run(1, 20.0)], [four], "realistic") == []


def test_the_sampler_gives_the_cpu_of_the_tree_as_of_now() -> None:
    burn = "import time\nwhile time.process_time() < 0.5: pass\ntime.sleep(30)\n"
    proc = subprocess.Popen([sys.executable, "-c", burn])
    try:
        sampler = scan_bench.Sampler(proc.pid, interval=60)  # its thread samples once, at its start
        sampler.start()
        time.sleep(1.0)
        assert sampler.cpu_s().get("driver", 0.0) < 0.4
        assert 0.4 <= sampler.cpu_now()["driver"] <= 1.0
    finally:
        proc.kill()
        sampler.stop.set()
        sampler.join()
