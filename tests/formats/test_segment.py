"""The segment framing walk: ordering, tails, damaged framing, inputs, speed."""

from __future__ import annotations

import mmap
import struct
import time
import tracemalloc
from pathlib import Path

import pytest

from txn_audit.formats.legacy import encode_legacy_message
from txn_audit.formats.model import BatchHeader, DecodeIssue, Record
from txn_audit.formats.record_batch import encode_batch, encode_control_batch
from txn_audit.formats.segment import iter_batches, iter_records

T0 = 1_795_377_608_870


def _batch(base: int, n: int = 3, **kw: object) -> bytes:
    records = [Record(base + i, T0 + i, b"k%d" % i, b"v" * (10 + i)) for i in range(n)]
    return encode_batch(records, base_offset=base, **kw)  # type: ignore[arg-type]


def _segment() -> tuple[bytes, list[int]]:
    """Five entries of assorted kinds and their positions."""
    parts = [
        _batch(0),
        _batch(3, compression=1, producer_id=5, producer_epoch=0, base_sequence=0, is_transactional=True),
        encode_control_batch(offset=6, producer_id=5, producer_epoch=0, marker_type="COMMIT", coordinator_epoch=1,
                             timestamp=T0 + 9),
        _batch(7, n=10, compression=4),
        _batch(17, n=1, compression=2),
    ]
    positions = [sum(len(p) for p in parts[:i]) for i in range(len(parts))]
    return b"".join(parts), positions


def _split(items: list[BatchHeader | DecodeIssue]) -> tuple[list[BatchHeader], list[DecodeIssue]]:
    return [i for i in items if isinstance(i, BatchHeader)], [i for i in items if isinstance(i, DecodeIssue)]


def test_clean_segment() -> None:
    data, positions = _segment()
    headers, issues = _split(list(iter_batches(data)))
    assert issues == []
    assert [h.position for h in headers] == positions
    assert [(h.base_offset, h.last_offset) for h in headers] == [(0, 2), (3, 5), (6, 6), (7, 16), (17, 17)]
    assert [h.is_control for h in headers] == [False, False, True, False, False]
    assert sum(len(iter_records(data, h)) for h in headers) == 3 + 3 + 1 + 10 + 1


def test_empty_inputs() -> None:
    assert list(iter_batches(b"")) == []
    data, positions = _segment()
    assert list(iter_batches(data, start=len(data))) == []


def test_start_and_end() -> None:
    data, positions = _segment()
    headers, issues = _split(list(iter_batches(data, start=positions[1], end=positions[4])))
    assert issues == [] and [h.position for h in headers] == positions[1:4]
    items = list(iter_batches(data, end=positions[2] + 20))
    assert isinstance(items[-1], DecodeIssue)
    assert (items[-1].kind, items[-1].position, items[-1].severity) == ("truncated_tail", positions[2], "warning")


@pytest.mark.parametrize("zeros", [1, 11, 12, 16, 17, 61, 4096, 70_000])
def test_zero_filled_tail(zeros: int) -> None:
    data, positions = _segment()
    headers, issues = _split(list(iter_batches(data + bytes(zeros))))
    assert [h.position for h in headers] == positions
    assert [(i.kind, i.severity, i.position) for i in issues] == [("zero_filled_tail", "info", len(data))]


@pytest.mark.parametrize("junk", [b"\x01", b"\x00" * 16 + b"\x01", b"\x00" * 70_000 + b"\x07"])
def test_nonzero_short_tail_is_truncated(junk: bytes) -> None:
    data, positions = _segment()
    headers, issues = _split(list(iter_batches(data + junk)))
    assert len(headers) == 5
    expected_kind = "truncated_tail" if len(junk) < 17 else "bad_length"  # size field 0 < 14
    assert [(i.kind, i.position) for i in issues] == [(expected_kind, len(data))]


def test_partial_last_batch() -> None:
    data, positions = _segment()
    headers, issues = _split(list(iter_batches(data[:-1])))
    assert [h.position for h in headers] == positions[:4]
    assert [(i.kind, i.severity, i.position) for i in issues] == [("truncated_tail", "warning", positions[4])]


@pytest.mark.parametrize("size", [-1, -(2**31), 0, 13])
def test_size_below_minimum_is_bad_length(size: int) -> None:
    data, positions = _segment()
    broken = bytearray(data)
    struct.pack_into(">i", broken, positions[2] + 8, size)
    headers, issues = _split(list(iter_batches(bytes(broken))))
    assert [h.position for h in headers] == positions[:2]
    assert [(i.kind, i.severity, i.position) for i in issues] == [("bad_length", "error", positions[2])]


def test_v2_size_below_header_is_bad_length() -> None:
    data, positions = _segment()
    broken = bytearray(data)
    struct.pack_into(">i", broken, positions[1] + 8, 48)
    headers, issues = _split(list(iter_batches(bytes(broken))))
    assert [h.position for h in headers] == positions[:1]
    assert [(i.kind, i.position) for i in issues] == [("bad_length", positions[1])]


def test_bad_magic_is_skipped() -> None:
    data, positions = _segment()
    broken = bytearray(data)
    broken[positions[1] + 16] = 7
    headers, issues = _split(list(iter_batches(bytes(broken))))
    assert [h.position for h in headers] == [positions[0]] + positions[2:]
    assert [(i.kind, i.severity, i.position) for i in issues] == [("bad_magic", "error", positions[1])]


def test_crc_mismatch_yields_header_then_issue() -> None:
    data, positions = _segment()
    broken = bytearray(data)
    broken[positions[3] + 70] ^= 0x10
    items = list(iter_batches(bytes(broken)))
    headers, issues = _split(items)
    assert [h.position for h in headers] == positions
    bad = headers[3]
    assert not bad.crc_ok
    assert items.index(issues[0]) == items.index(bad) + 1
    assert [(i.kind, i.severity, i.position) for i in issues] == [("crc_mismatch", "error", positions[3])]
    quiet_headers, quiet_issues = _split(list(iter_batches(bytes(broken), verify_crc=False)))
    assert quiet_issues == [] and all(h.crc_ok for h in quiet_headers)


def test_offset_order() -> None:
    a, b = _batch(10), _batch(5)
    items = list(iter_batches(a + b + b))
    headers, issues = _split(items)
    assert len(headers) == 3
    assert [(i.kind, i.position) for i in issues] == [("offset_order", len(a)), ("offset_order", len(a + b))]
    assert items.index(issues[0]) == items.index(headers[1]) + 1


def test_huge_size_never_allocates() -> None:
    data, positions = _segment()
    broken = bytearray(data)
    struct.pack_into(">i", broken, positions[3] + 8, 0x7FFFFFFF)
    frozen = bytes(broken)
    tracemalloc.start()
    try:
        items = list(iter_batches(frozen))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 1 << 20
    headers, issues = _split(items)
    assert [h.position for h in headers] == positions[:3]
    assert [(i.kind, i.position) for i in issues] == [("truncated_tail", positions[3])]


def test_legacy_entries_and_iter_records() -> None:
    data = encode_legacy_message(offset=0, key=b"a", value=b"1", magic=1, timestamp=T0) + _batch(1)
    headers, issues = _split(list(iter_batches(data)))
    assert issues == []
    assert [h.magic for h in headers] == [1, 2]
    assert [r.offset for h in headers for r in iter_records(data, h)] == [0, 1, 2, 3]


def test_input_types(tmp_path: Path) -> None:
    data, _ = _segment()
    expected = list(iter_batches(data))
    assert list(iter_batches(bytearray(data))) == expected
    assert list(iter_batches(memoryview(data))) == expected
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(data + bytes(100))
    with path.open("rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        items = list(iter_batches(mm))
        headers, issues = _split(items)
        assert headers == [i for i in expected if isinstance(i, BatchHeader)]
        assert [i.kind for i in issues] == ["zero_filled_tail"]
        assert [r for h in headers for r in iter_records(mm, h)] == [r for h in headers for r in iter_records(data, h)]
    # the mmap closed cleanly: no memoryview export was left behind


def test_abandoned_iterator_releases_mmap(tmp_path: Path) -> None:
    data, _ = _segment()
    path = tmp_path / "x.log"
    path.write_bytes(data)
    with path.open("rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        it = iter_batches(mm)
        next(it)
        it.close()


def test_scan_speed() -> None:
    """The hot path stays cheap: header unpack + one CRC-32C per batch, no record work."""
    template = _batch(0, n=8, compression=1)
    n = 40_000
    data = bytearray(template * n)
    for i in range(n):  # baseOffset is outside the CRC: renumber in place
        struct.pack_into(">q", data, i * len(template), i * 8)
    frozen = bytes(data)
    t = time.perf_counter()
    items = list(iter_batches(frozen))
    elapsed = time.perf_counter() - t
    assert len(items) == n and all(isinstance(i, BatchHeader) for i in items)
    assert elapsed < 5.0, f"{n} batches took {elapsed:.2f}s"
