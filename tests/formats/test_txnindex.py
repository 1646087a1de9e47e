"""Aborted-transaction index (``.txnindex``)."""

from __future__ import annotations

import struct

from hypothesis import given
from hypothesis import strategies as st

from txn_audit.formats.model import AbortedTxn
from txn_audit.formats.txnindex import decode_txn_index, encode_txn_index

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
