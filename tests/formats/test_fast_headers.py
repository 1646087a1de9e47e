"""The vectorised header path equals the reference walk, whole, chunked and sliced."""

from __future__ import annotations

import dataclasses
import inspect
import mmap
import re
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.kafkacorpus import CORPUS
from tests.realcorpus import REALCORPUS, SCENARIOS, needs_corpus
from txn_audit.formats import fast_headers as fh
from txn_audit.formats.legacy import encode_legacy_message
from txn_audit.formats.model import BatchHeader, DecodeIssue, OffsetIndexEntry, Record
from txn_audit.formats.offset_index import decode_offset_index, slice_starts
from txn_audit.formats.record_batch import encode_batch, encode_control_batch
from txn_audit.formats.segment import iter_batches
from txn_audit.sample.large import write_large_dump

REPO = Path(__file__).resolve().parents[2]
SAMPLE_LOGS = sorted((REPO / "sample_data" / "dump").rglob("*.log"))
CORPUS_LOGS = sorted(p for s in SCENARIOS for p in (REALCORPUS / s / "logdirs").rglob("*.log"))
KAFKA_CORPUS_LOGS = sorted(CORPUS.rglob("*.log"))
REAL_LOGS = [pytest.param(p, marks=needs_corpus, id=f"realcorpus/{p.relative_to(REALCORPUS)}") for p in CORPUS_LOGS] + [
    pytest.param(p, id=f"corpus/{p.relative_to(CORPUS)}") for p in KAFKA_CORPUS_LOGS
]
HEADER_FIELDS = [f.name for f in dataclasses.fields(BatchHeader)]
T0 = 1_795_377_608_870
INT64 = 1 << 64


def _wrap64(v: int) -> int:
    return (v + (1 << 63)) % INT64 - (1 << 63)


def _reference(buf: bytes | mmap.mmap, **kw: object) -> tuple[list[BatchHeader], list[DecodeIssue], list[int]]:
    """Headers, issues, and for each issue how many headers the walk had yielded before it."""
    headers: list[BatchHeader] = []
    issues: list[DecodeIssue] = []
    rows: list[int] = []
    for item in iter_batches(buf, **kw):  # type: ignore[arg-type]
        if isinstance(item, DecodeIssue):
            issues.append(item)
            rows.append(len(headers))
        else:
            # the columns are int64, like the table: only absurd base offsets can wrap
            headers.append(item if -(1 << 63) <= item.last_offset < (1 << 63)
                           else BatchHeader(*[_wrap64(getattr(item, f)) if f == "last_offset" else getattr(item, f)
                                              for f in BatchHeader.__dataclass_fields__]))
    return headers, issues, rows


def _assert_same(buf: bytes | mmap.mmap, got: fh.SegmentHeaders, **kw: object) -> None:
    headers, issues, rows = _reference(buf, **kw)
    assert got.columns.headers() == headers
    assert got.issues == issues
    assert got.issue_rows == rows


def _assert_fields_agree(buf: bytes | mmap.mmap, got: fh.SegmentHeaders, **kw: object) -> None:
    """The fast path's columns equal the reference walk's headers field by field, then its issues."""
    headers, issues, rows = _reference(buf, **kw)
    assert len(got.columns) == len(headers)
    for name in HEADER_FIELDS:
        assert getattr(got.columns, name).tolist() == [getattr(h, name) for h in headers], name
    assert got.issues == issues
    assert got.issue_rows == rows


def _assert_equal(a: fh.SegmentHeaders, b: fh.SegmentHeaders) -> None:
    for f in fh._FIELDS:
        x, y = getattr(a.columns, f.name), getattr(b.columns, f.name)
        assert x.dtype == y.dtype and np.array_equal(x, y), f.name
    assert a.issues == b.issues
    assert a.issue_rows == b.issue_rows
    assert a.stop == b.stop


def _chunked(buf: bytes, max_batches: int) -> fh.SegmentHeaders:
    cols, issues, rows, n = [], [], [], 0
    stop = len(buf)
    for chunk in fh.iter_header_chunks(buf, max_batches=max_batches):
        assert len(chunk.columns) <= max_batches + 1
        cols.append(chunk.columns)
        issues += chunk.issues
        rows += [n + r for r in chunk.issue_rows]
        n += len(chunk.columns)
        stop = chunk.lost_at if chunk.lost_at is not None else stop
    return fh.SegmentHeaders(fh.HeaderColumns.concat(cols), issues, rows, stop)


# -- real files ----------------------------------------------------------------------------


@pytest.mark.parametrize("path", REAL_LOGS)
def test_real_segment_agrees_with_the_reference_field_by_field(path: Path) -> None:
    """Every segment a real broker wrote (both corpora): the two header walks agree."""
    data = path.read_bytes()
    _assert_fields_agree(data, fh.decode_headers(data))
    _assert_fields_agree(data, fh.decode_headers(data, verify_crc=False), verify_crc=False)


def test_the_kafka_corpus_is_there() -> None:
    assert len(KAFKA_CORPUS_LOGS) >= 100


@pytest.mark.parametrize("name", HEADER_FIELDS)
def test_the_field_by_field_check_catches_one_wrong_field(name: str) -> None:
    data = _mixed()
    got = fh.decode_headers(data)
    _assert_fields_agree(data, got)
    column = getattr(got.columns, name).copy()
    column[-1] = ~column[-1] if column.dtype == np.bool_ else column[-1] ^ 1
    bad = dataclasses.replace(got, columns=dataclasses.replace(got.columns, **{name: column}))
    with pytest.raises(AssertionError, match=f"^{name}"):
        _assert_fields_agree(data, bad)


def test_the_compiled_walk_has_no_byte_offsets_of_its_own() -> None:
    """Its offsets and sizes are the layout constants of ``record_batch`` and ``records``."""
    source = inspect.getsource(fh._scan.py_func)
    body = source[source.index('"""', source.index('"""') + 3) :]
    assert not re.findall(r"pos \+ \d|\b(?:12|17|21|49|61)\b", body)


def test_real_corpus_is_there_or_skipped() -> None:
    if not SCENARIOS:
        pytest.skip(f"real corpus not found at {REALCORPUS}")
    assert len(CORPUS_LOGS) >= 20


@pytest.mark.parametrize("path", SAMPLE_LOGS, ids=lambda p: str(p.relative_to(REPO / "sample_data")))
def test_sample_dump_segment_equals_reference(path: Path) -> None:
    with open(path, "rb") as handle:
        if path.stat().st_size == 0:
            data: bytes | mmap.mmap = b""
        else:
            data = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
        got = fh.decode_headers(data)
        _assert_same(data, got)
        _assert_equal(got, _chunked(bytes(data), 2))
        del got
        if isinstance(data, mmap.mmap):
            data.close()  # nothing may still hold the map


def test_sample_dump_damage_is_reported_like_the_reference() -> None:
    kinds = {}
    for path in SAMPLE_LOGS:
        got = fh.decode_headers(path.read_bytes())
        kinds.update({i.kind: (path.name, i.position, got.stop) for i in got.issues})
    assert set(kinds) == {"crc_mismatch", "truncated_tail"}
    _name, position, stop = kinds["truncated_tail"]
    assert stop == position  # the walk ended at the torn batch


def test_the_table_driven_crc_agrees(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fh, "_crc_choice", (fh.CRC_TABLE, 0, "table"))
    for path in SAMPLE_LOGS:
        data = path.read_bytes()
        _assert_same(data, fh.decode_headers(data))


def test_crc_kernel_is_chosen_and_named() -> None:
    assert "CRC" in fh.crc_implementation() or "crc32c" in fh.crc_implementation()


# -- synthetic and mutated segments --------------------------------------------------------


def _v2(base: int, n: int = 3, **kw: object) -> bytes:
    records = [Record(base + i, T0 + i, b"k%d" % i, b"v" * (5 + 7 * i)) for i in range(n)]
    return encode_batch(records, base_offset=base, **kw)  # type: ignore[arg-type]


def _mixed() -> bytes:
    parts = [
        _v2(0),
        _v2(3, producer_id=7, producer_epoch=2, base_sequence=0x7FFFFFFE, is_transactional=True),
        encode_control_batch(offset=6, producer_id=7, producer_epoch=2, marker_type="ABORT", coordinator_epoch=4,
                             timestamp=T0 + 9),
        _v2(7, n=4, compression=3, delete_horizon_ms=T0 + 100, timestamp_type=1, max_timestamp=T0 + 50),
        encode_legacy_message(offset=11, key=b"a", value=b"b", magic=1, timestamp=T0),
        encode_legacy_message(offset=12, key=None, value=b"c", magic=0),
        _v2(13, n=1, compression=4, partition_leader_epoch=-1),
        _v2(10, n=2),  # offsets going backwards
        _v2(20, n=0),
    ]
    return b"".join(parts)


MIXED = _mixed()


@pytest.mark.parametrize("max_batches", [1, 2, 5, 1 << 10])
def test_mixed_entries_in_any_chunking(max_batches: int) -> None:
    got = _chunked(MIXED, max_batches)
    _assert_same(MIXED, got)
    assert {i.kind for i in got.issues} == {"offset_order"}


def test_start_end_and_previous_offset() -> None:
    whole = fh.decode_headers(MIXED)
    positions = whole.columns.position.tolist()
    cut = positions[4]
    head = fh.decode_headers(MIXED, end=cut)
    tail = fh.decode_headers(MIXED, start=cut, prev_last_offset=int(head.columns.last_offset[-1]))
    _assert_same(MIXED, head, end=cut)
    assert head.columns.headers() + tail.columns.headers() == whole.columns.headers()
    assert head.issues + tail.issues == whole.issues
    assert head.stop == cut and tail.stop == len(MIXED)


def _mutate(data: bytes, edits: list[tuple[int, int]], cut: int, pad: bytes) -> bytes:
    out = bytearray(data)
    for pos, value in edits:
        out[pos % len(out)] = value
    return bytes(out[: max(0, len(out) - cut)]) + pad


@settings(max_examples=300, deadline=None)
@given(
    edits=st.lists(st.tuples(st.integers(0, 1 << 20), st.integers(0, 255)), max_size=4),
    cut=st.integers(0, 200),
    pad=st.sampled_from([b"", bytes(40), bytes(7), b"\x00" * 16 + b"\x01", b"\xff" * 30]),
    max_batches=st.sampled_from([1, 3, 1 << 10]),
)
def test_mutated_segments_agree(edits: list[tuple[int, int]], cut: int, pad: bytes, max_batches: int) -> None:
    data = _mutate(MIXED, edits, cut, pad)
    _assert_same(data, _chunked(data, max_batches))


@settings(max_examples=150, deadline=None)
@given(
    field=st.sampled_from([0, 8, 12, 16, 17, 21, 23, 27, 35, 43, 51, 53, 57]),
    value=st.binary(min_size=8, max_size=8),
    which=st.integers(0, 8),
)
def test_header_field_mutations_agree(field: int, value: bytes, which: int) -> None:
    """Overwrite one header field of one entry with arbitrary bytes: sizes, magic, sequences."""
    positions = fh.decode_headers(MIXED).columns.position.tolist()
    pos = positions[which % len(positions)] + field
    data = bytearray(MIXED)
    width = {0: 8, 8: 4, 12: 4, 16: 1, 17: 4, 21: 2, 23: 4, 27: 8, 35: 8, 43: 8, 51: 2, 53: 4, 57: 4}[field]
    data[pos : pos + width] = value[:width]
    _assert_same(bytes(data), fh.decode_headers(bytes(data)))


@settings(max_examples=60, deadline=None)
@given(st.binary(max_size=400))
def test_random_bytes_agree(data: bytes) -> None:
    _assert_same(data, fh.decode_headers(data))


# -- one large segment, sliced ---------------------------------------------------------------


@pytest.fixture(scope="module")
def large(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[mmap.mmap, list[OffsetIndexEntry]]]:
    log = write_large_dump(tmp_path_factory.mktemp("large"), segment_bytes=48 << 20)
    entries, issues = decode_offset_index(log.with_suffix(".index").read_bytes(), base_offset=0)
    assert not issues and len(entries) > 10_000
    with open(log, "rb") as handle:
        mapped = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
        yield mapped, entries
        mapped.close()


@pytest.fixture(scope="module")
def large_whole(large: tuple[mmap.mmap, list[OffsetIndexEntry]]) -> fh.SegmentHeaders:
    return fh.decode_headers(large[0])


def test_large_segment_equals_reference(large: tuple[mmap.mmap, list[OffsetIndexEntry]],
                                        large_whole: fh.SegmentHeaders) -> None:
    buf = large[0]
    assert len(large_whole.columns) > 100_000 and not large_whole.issues
    assert large_whole.stop == len(buf)
    _assert_same(buf, large_whole)
    sizes = large_whole.columns.size_bytes
    assert 300 < sizes.mean() < 420 and (sizes[~large_whole.columns.is_control] >= 360).all()


def _check_starts(starts: list[int], whole: fh.SegmentHeaders, size: int, slice_bytes: int) -> None:
    assert starts[0] == 0 and starts == sorted(set(starts))
    assert set(starts) <= set(whole.columns.position.tolist())
    ends = starts[1:] + [size]
    assert all(b - a < 2 * slice_bytes for a, b in zip(starts, ends))


@pytest.mark.parametrize("slice_bytes", [3 << 20, 16 << 20])
def test_sliced_decode_from_the_index_equals_whole(
    large: tuple[mmap.mmap, list[OffsetIndexEntry]], large_whole: fh.SegmentHeaders, slice_bytes: int
) -> None:
    buf, entries = large
    starts = slice_starts(buf, entries, slice_bytes=slice_bytes)
    assert len(starts) >= len(buf) // slice_bytes - 1
    _check_starts(starts, large_whole, len(buf), slice_bytes)
    _assert_equal(fh.decode_sliced(buf, starts), large_whole)


def test_missing_or_stale_index_falls_back_to_a_walk(
    large: tuple[mmap.mmap, list[OffsetIndexEntry]], large_whole: fh.SegmentHeaders
) -> None:
    buf, entries = large
    slice_bytes = 5 << 20
    half = len(entries) // 2
    stale = [OffsetIndexEntry(e.offset, e.position + 3) for e in entries[:half]]  # every one off the mark
    stale += entries[half : half + 100]  # then a short run of good ones, then nothing
    stale += [OffsetIndexEntry(10**12, len(buf) + 4096)]  # past the end of the file
    for index in ([], stale):
        starts = slice_starts(buf, index, slice_bytes=slice_bytes)
        _check_starts(starts, large_whole, len(buf), slice_bytes)
        assert len(starts) >= len(buf) // slice_bytes - 1
        _assert_equal(fh.decode_sliced(buf, starts), large_whole)


def test_slices_that_do_not_start_on_batches_are_redecoded(
    large: tuple[mmap.mmap, list[OffsetIndexEntry]], large_whole: fh.SegmentHeaders
) -> None:
    buf, _ = large
    positions = large_whole.columns.position
    good = int(positions[len(positions) // 2])
    starts = [0, int(positions[1000]), good + 5, good + 4096, len(buf) - 30]
    _assert_equal(fh.decode_sliced(buf, starts), large_whole)


def test_sliced_damage_and_boundary_order_checks() -> None:
    """A CRC mismatch, an offset going back right at a boundary, and a torn tail."""
    parts = [_v2(0), _v2(3), _v2(6), _v2(2), _v2(9)]
    blob = bytearray(b"".join(parts))
    starts = [0] + [sum(map(len, parts[:k])) for k in range(1, len(parts))]
    blob[starts[3] + 70] ^= 1  # CRC mismatch on the batch that also goes backwards
    blob += _v2(20)[:30]
    data = bytes(blob)
    whole = fh.decode_headers(data)
    assert [i.kind for i in whole.issues] == ["crc_mismatch", "offset_order", "truncated_tail"]
    for cut in ([0, starts[3]], [0, starts[2], starts[3], starts[4]], starts, [0, starts[4] + 1]):
        _assert_equal(fh.decode_sliced(data, cut), whole)


def test_a_callers_memoryview_stays_usable() -> None:
    view = memoryview(MIXED)
    _assert_same(MIXED, fh.decode_headers(view))
    assert view.tobytes() == MIXED
    assert len(list(fh.iter_header_chunks(bytearray(MIXED), max_batches=2))) >= 2
