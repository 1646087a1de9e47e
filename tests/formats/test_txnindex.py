"""Aborted-transaction index (``.txnindex``)."""

from __future__ import annotations

import struct

from hypothesis import given
from hypothesis import strategies as st

from txn_audit.formats.model import AbortedTxn
from txn_audit.formats.txnindex import ENTRY_SIZE, decode_txn_index, decode_txn_index_columns, encode_txn_index

A = AbortedTxn(0, 3, 215, 245, 246)
B = AbortedTxn(0, 1, 374, 410, 409)


def test_layout() -> None:
    raw = encode_txn_index([A])
    assert raw == struct.pack(">hqqqq", 0, 3, 215, 245, 246)
    assert decode_txn_index(raw, segment_base_offset=0) == ([A], [])


def test_empty_file() -> None:
    assert decode_txn_index(b"", segment_base_offset=100) == ([], [])


@given(st.lists(st.tuples(st.integers(0, 2**40), st.integers(1, 50), st.integers(0, 2**40)), max_size=10))
def test_round_trip(steps: list[tuple[int, int, int]]) -> None:
    last = 1000
    items = []
    for pid, gap, lso in steps:
        last += gap
        items.append(AbortedTxn(0, pid, last - 1, last, lso))
    entries, issues = decode_txn_index(encode_txn_index(items), segment_base_offset=1000)
    assert entries == items and issues == []


def test_trailing_fragment_is_a_warning() -> None:
    entries, issues = decode_txn_index(encode_txn_index([A, B]) + b"\x00" * 10, segment_base_offset=0)
    assert entries == [A, B]
    assert [(i.kind, i.severity, i.position) for i in issues] == [("bad_index", "warning", 68)]


def test_version_base_and_order_checks() -> None:
    bad_version = AbortedTxn(1, 3, 500, 501, 502)
    below_base = AbortedTxn(0, 3, 10, 20, 21)
    not_increasing = AbortedTxn(0, 4, 400, 501, 502)
    inverted = AbortedTxn(0, 5, 700, 600, 601)
    entries, issues = decode_txn_index(
        encode_txn_index([below_base, bad_version, not_increasing, inverted]), segment_base_offset=100
    )
    assert len(entries) == 4
    assert all(i.kind == "bad_index" and i.severity == "warning" for i in issues)
    details = [i.detail for i in issues]
    assert any("below the base offset 100" in d for d in details)
    assert any("version 1" in d for d in details)
    assert any("does not follow the previous 501" in d for d in details)
    assert any("firstOffset 700 is after lastOffset 600" in d for d in details)
    assert [i.position for i in issues] == [0, 34, 68, 102]


def _as_entries(data: bytes, base: int) -> tuple[list[AbortedTxn], list[object]]:
    columns, issues = decode_txn_index_columns(data, segment_base_offset=base)
    return [AbortedTxn(*row) for row in zip(columns.version.tolist(), columns.producer_id.tolist(),
                                            columns.first_offset.tolist(), columns.last_offset.tolist(),
                                            columns.last_stable_offset.tolist(), strict=True)], list(issues)


_OFFSETS = st.integers(-(2**63), 2**63 - 1)


@given(st.lists(st.builds(AbortedTxn, st.integers(-(2**15), 2**15 - 1), _OFFSETS, _OFFSETS, _OFFSETS, _OFFSETS),
                max_size=12)
       | st.lists(st.builds(AbortedTxn, st.sampled_from([0, 0, 0, 1, -1]), st.integers(-1, 5), st.integers(-3, 40),
                            st.integers(-3, 40), st.integers(-3, 40)), max_size=12),
       st.binary(max_size=ENTRY_SIZE - 1), st.integers(-5, 50))
def test_the_column_decoder_gives_the_reference_entries_and_issues(entries: list[AbortedTxn], tail: bytes,
                                                                   base: int) -> None:
    """Every field's whole range, and small offsets that break each check (versions, the base
    offset, the order of last offsets, first after last), with and without a torn tail."""
    data = encode_txn_index(entries) + tail
    assert _as_entries(data, base) == decode_txn_index(data, segment_base_offset=base)


@given(st.binary(max_size=8 * ENTRY_SIZE), st.integers(-(2**63), 2**63 - 1))
def test_the_column_decoder_gives_the_reference_answer_on_any_bytes(data: bytes, base: int) -> None:
    assert _as_entries(data, base) == decode_txn_index(data, segment_base_offset=base)


def test_the_column_decoder_reports_each_check_as_the_reference() -> None:
    data = encode_txn_index([AbortedTxn(0, 3, 10, 20, 21), AbortedTxn(1, 3, 500, 501, 502),
                             AbortedTxn(0, 4, 400, 501, 502), AbortedTxn(0, 5, 700, 600, 601)]) + b"\x01"
    entries, issues = _as_entries(data, 100)
    assert len(issues) == 5 and (entries, issues) == decode_txn_index(data, segment_base_offset=100)
