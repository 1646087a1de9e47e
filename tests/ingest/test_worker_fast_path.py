"""The worker's column-wise path for v2 segments writes exactly what the per-batch path writes."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.realcorpus import REALCORPUS, SCENARIOS
from txn_audit.formats.model import Record
from txn_audit.formats.record_batch import encode_batch, encode_control_batch
from txn_audit.ingest.discover import discover
from txn_audit.ingest.worker import FileTask, TableRows, _decode_log, decode_task
from txn_audit.schemas import DECODED_TABLES

REPO = Path(__file__).resolve().parents[2]
T0 = 1_795_377_608_870


def _tables(task: FileTask, data: bytes, *, fast: bool, pause_every: int = 8192) -> dict[str, pa.Table]:
    out = TableRows()
    batches: list[pa.RecordBatch] = []
    for _ in _decode_log(task, data, out, pause_every, fast=fast):
        batches += out.drain()
    batches += out.drain()
    tables = {}
    for name in DECODED_TABLES:
        parts = [b.column(name).filter(pa.compute.equal(b.column("table"), name)) for b in batches]
        tables[name] = pa.concat_arrays([p for p in parts if len(p)]) if any(len(p) for p in parts) else None
    return tables


def _task(path: Path, topic: str = "t", rel: str = "t-0/00000000000000000000.log") -> FileTask:
    return FileTask(str(path), rel, "log", 1, "ld", topic, 0, 0, path.stat().st_size)


def _log_tasks() -> list[FileTask]:
    tasks = [t for t in discover(REPO / "sample_data" / "dump").tasks if t.kind == "log"]
    for name in SCENARIOS:
        tasks += [t for t in discover(REALCORPUS / name / "logdirs").tasks if t.kind == "log"]
    return tasks


@pytest.mark.parametrize("task", _log_tasks(), ids=lambda t: t.path.split("/dump/")[-1].split("/realcorpus/")[-1])
def test_real_and_sample_segments(task: FileTask) -> None:
    data = Path(task.path).read_bytes()
    assert _tables(task, data, fast=True, pause_every=5) == _tables(task, data, fast=False)


def _segment() -> bytes:
    parts = []
    for i in range(6):
        base = i * 4
        parts.append(encode_batch([Record(base + k, T0 + k, b"k", b"v" * 20) for k in range(3)], base_offset=base,
                                  producer_id=9, producer_epoch=1, base_sequence=3 * i, is_transactional=True))
        parts.append(encode_control_batch(offset=base + 3, producer_id=9, producer_epoch=1,
                                          marker_type="COMMIT" if i % 2 else "ABORT", coordinator_epoch=2,
                                          timestamp=T0 + 9))
    return b"".join(parts)


SEGMENT = _segment()


@settings(max_examples=120, deadline=None)
@given(
    edits=st.lists(st.tuples(st.integers(0, len(SEGMENT) - 1), st.integers(0, 255)), max_size=3),
    cut=st.integers(0, 120),
    pause_every=st.sampled_from([1, 2, 8192]),
)
def test_damaged_segments(tmp_path_factory: pytest.TempPathFactory, edits: list[tuple[int, int]], cut: int,
                          pause_every: int) -> None:
    data = bytearray(SEGMENT)
    data[16] = 2  # stays a v2 segment, so the column-wise path is the one taken
    for pos, value in edits:
        if pos != 16:
            data[pos] = value
    blob = bytes(data[: len(data) - cut])
    path = tmp_path_factory.mktemp("seg") / "00000000000000000000.log"
    path.write_bytes(blob)
    task = _task(path)
    assert _tables(task, blob, fast=True, pause_every=pause_every) == _tables(task, blob, fast=False)


def test_decode_task_takes_the_column_path_for_data_segments(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(SEGMENT)
    out = TableRows()
    for _ in decode_task(_task(path), out):
        pass
    assert len(out.parts["batches"]) == 1 and not out.rows["batches"]
    assert sum(len(p) for p in out.parts["control_markers"]) == 6 and not out.rows["control_markers"]


def test_unknown_broker_id(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(SEGMENT)
    task = FileTask(str(path), "t-0/x.log", "log", None, "ld", "t", 0, 0, len(SEGMENT))
    assert _tables(task, SEGMENT, fast=True) == _tables(task, SEGMENT, fast=False)
