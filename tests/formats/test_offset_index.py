"""Offset index (``.index``) and time index (``.timeindex``)."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from txn_audit.formats.model import OffsetIndexEntry, TimeIndexEntry
from txn_audit.formats.offset_index import (
    batch_boundaries,
    decode_offset_index,
    decode_time_index,
    encode_offset_index,
    encode_time_index,
)

BASE = 475
IDX = [OffsetIndexEntry(520, 4163), OffsetIndexEntry(560, 8300), OffsetIndexEntry(601, 12500)]
TIX = [TimeIndexEntry(1_795_378_193_700, 519), TimeIndexEntry(1_795_378_193_800, 560)]


def test_offset_layout() -> None:
    raw = encode_offset_index(IDX, base_offset=BASE)
    assert raw[:8] == struct.pack(">ii", 45, 4163)
    assert decode_offset_index(raw, base_offset=BASE) == (IDX, [])


def test_time_layout() -> None:
    raw = encode_time_index(TIX, base_offset=BASE)
    assert raw[:12] == struct.pack(">qi", 1_795_378_193_700, 44)
    assert decode_time_index(raw, base_offset=BASE) == (TIX, [])


def test_preallocated_zero_tail_is_ignored() -> None:
    raw = encode_offset_index(IDX, base_offset=BASE, preallocated_bytes=1024)
    assert len(raw) == 1024
    assert decode_offset_index(raw, base_offset=BASE) == (IDX, [])
    traw = encode_time_index(TIX, base_offset=BASE, preallocated_bytes=1200)
    assert decode_time_index(traw, base_offset=BASE) == (TIX, [])


def test_first_entry_may_have_relative_offset_zero() -> None:
    first = [OffsetIndexEntry(BASE, 0), OffsetIndexEntry(BASE + 9, 5000)]
    raw = encode_offset_index(first, base_offset=BASE, preallocated_bytes=80)
    assert decode_offset_index(raw, base_offset=BASE) == (first, [])
    # a one-entry file of zeros is that entry; a longer file of zeros is an empty active index
    assert decode_offset_index(bytes(8), base_offset=BASE) == ([OffsetIndexEntry(BASE, 0)], [])
    assert decode_offset_index(bytes(8 * 1000), base_offset=BASE) == ([], [])
    assert decode_time_index(bytes(12 * 1000), base_offset=BASE) == ([], [])


def test_empty_files() -> None:
    assert decode_offset_index(b"", base_offset=0) == ([], [])
    assert decode_time_index(b"", base_offset=0) == ([], [])


def test_garbage_after_zero_entry_is_a_warning() -> None:
    raw = bytearray(encode_offset_index(IDX, base_offset=BASE, preallocated_bytes=80))
    raw[60] = 7
    entries, issues = decode_offset_index(bytes(raw), base_offset=BASE)
    assert entries == IDX
    assert [(i.kind, i.severity, i.position) for i in issues] == [("bad_index", "warning", 24)]


@pytest.mark.parametrize("extra", [1, 5, 7])
def test_fragment_is_a_warning(extra: int) -> None:
    raw = encode_offset_index(IDX, base_offset=BASE) + b"\x01" * extra
    entries, issues = decode_offset_index(raw, base_offset=BASE)
    assert entries == IDX and len(issues) == 1 and issues[0].position == 24
    tentries, tissues = decode_time_index(encode_time_index(TIX, base_offset=BASE) + b"\x01" * extra, base_offset=BASE)
    assert tentries == TIX and len(tissues) == 1 and tissues[0].position == 24


def test_out_of_order_entries_are_warnings() -> None:
    bad = [OffsetIndexEntry(560, 8300), OffsetIndexEntry(540, 9000), OffsetIndexEntry(600, 8000)]
    entries, issues = decode_offset_index(encode_offset_index(bad, base_offset=BASE), base_offset=BASE)
    assert entries == bad and [i.position for i in issues] == [8, 16]
    tbad = [TimeIndexEntry(10, 500), TimeIndexEntry(10, 510), TimeIndexEntry(20, 505)]
    tentries, tissues = decode_time_index(encode_time_index(tbad, base_offset=BASE), base_offset=BASE)
    assert tentries == tbad and [i.position for i in tissues] == [12, 24]


def test_encoder_rejects_offsets_beyond_int32() -> None:
    with pytest.raises(ValueError):
        encode_offset_index([OffsetIndexEntry(2**31 + BASE, 0)], base_offset=BASE)


def test_index_boundaries_are_sorted_distinct_positions() -> None:
    entries = [OffsetIndexEntry(9, 300), OffsetIndexEntry(3, 100), OffsetIndexEntry(9, 300), OffsetIndexEntry(5, 200)]
    assert batch_boundaries(entries) == [100, 200, 300]
    assert batch_boundaries([]) == []


@given(st.lists(st.tuples(st.integers(1, 1000), st.integers(1, 100_000)), max_size=30), st.integers(0, 2**40))
def test_offset_round_trip(steps: list[tuple[int, int]], base: int) -> None:
    rel, pos, items = 0, 0, []
    for d_off, d_pos in steps:
        rel, pos = rel + d_off, pos + d_pos
        items.append(OffsetIndexEntry(base + rel, pos))
    raw = encode_offset_index(items, base_offset=base, preallocated_bytes=8 * (len(items) + 3))
    assert decode_offset_index(raw, base_offset=base) == (items, [])


@given(st.lists(st.tuples(st.integers(1, 10**6), st.integers(0, 50)), max_size=30), st.integers(0, 2**40))
def test_time_round_trip(steps: list[tuple[int, int]], base: int) -> None:
    ts, rel, items = 1_700_000_000_000, 1, []
    for d_ts, d_off in steps:
        ts, rel = ts + d_ts, rel + d_off
        items.append(TimeIndexEntry(ts, base + rel))
    raw = encode_time_index(items, base_offset=base)
    assert decode_time_index(raw, base_offset=base) == (items, [])
