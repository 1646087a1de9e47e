"""Producer-state ``.snapshot`` files."""

from __future__ import annotations

import struct

import pytest
from crc32c import crc32c
from hypothesis import given
from hypothesis import strategies as st

from txn_audit.errors import CorruptInputError
from txn_audit.formats.model import ProducerSnapshotEntry
from txn_audit.formats.snapshot import (
    decode_producer_snapshot,
    encode_producer_snapshot,
    first_sequence,
    has_batch_metadata,
)

E1 = ProducerSnapshotEntry(3, 0, 6, 420, 1, 1_795_378_193_605, 0, -1)
E2 = ProducerSnapshotEntry(1, 2, -1, -1, 0, 1_795_378_193_668, 5, 530)

entries = st.builds(
    ProducerSnapshotEntry,
    st.integers(-(2**63), 2**63 - 1),
    st.integers(-(2**15), 2**15 - 1),
    st.integers(-(2**31), 2**31 - 1),
    st.integers(-(2**63), 2**63 - 1),
    st.integers(-(2**31), 2**31 - 1),
    st.integers(-(2**63), 2**63 - 1),
    st.integers(-(2**31), 2**31 - 1),
    st.integers(-(2**63), 2**63 - 1),
)


def test_layout() -> None:
    raw = encode_producer_snapshot([E1])
    assert len(raw) == 10 + 46
    body = struct.pack(">i", 1) + struct.pack(">qhiqiqiq", 3, 0, 6, 420, 1, 1_795_378_193_605, 0, -1)
    assert raw == struct.pack(">hI", 1, crc32c(body)) + body
    snap = decode_producer_snapshot(raw)
    assert snap.version == 1 and snap.crc_ok and snap.entries == (E1,)


def test_empty_snapshot_is_ten_bytes() -> None:
    raw = encode_producer_snapshot([])
    assert len(raw) == 10
    snap = decode_producer_snapshot(raw)
    assert snap.entries == () and snap.crc_ok


@given(st.lists(entries, max_size=8))
def test_round_trip(items: list[ProducerSnapshotEntry]) -> None:
    snap = decode_producer_snapshot(encode_producer_snapshot(items))
    assert snap.crc_ok and list(snap.entries) == items


def test_crc_mismatch_is_reported_not_raised() -> None:
    raw = bytearray(encode_producer_snapshot([E1, E2]))
    raw[20] ^= 0x01
    snap = decode_producer_snapshot(bytes(raw))
    assert not snap.crc_ok
    assert snap.computed_crc == crc32c(bytes(raw[6:]))
    assert snap.stored_crc == struct.unpack(">I", raw[2:6])[0]
    assert len(snap.entries) == 2


@pytest.mark.parametrize("version", [0, 2, -1])
def test_wrong_version(version: int) -> None:
    raw = struct.pack(">h", version) + encode_producer_snapshot([E1])[2:]
    with pytest.raises(CorruptInputError) as err:
        decode_producer_snapshot(raw)
    assert err.value.kind == "bad_snapshot" and str(version) in err.value.detail


@pytest.mark.parametrize(
    "mutate",
    [
        lambda b: b[:-1],  # truncated entry
        lambda b: b + b"\x00",  # extra byte
        lambda b: b[:6] + struct.pack(">i", 3) + b[10:],  # count says 3, holds 2
        lambda b: b[:6] + struct.pack(">i", -1) + b[10:],  # null array
        lambda b: b[:9],  # short header
        lambda b: b"",
    ],
    ids=["truncated", "extra-byte", "count-too-high", "negative-count", "short-header", "empty"],
)
def test_count_must_match_length(mutate: object) -> None:
    raw = mutate(encode_producer_snapshot([E1, E2]))  # type: ignore[operator]
    with pytest.raises(CorruptInputError) as err:
        decode_producer_snapshot(raw)
    assert err.value.kind == "bad_snapshot"


def test_first_sequence_wraps_at_31_bits() -> None:
    assert first_sequence(E1) == 5
    wrapped = ProducerSnapshotEntry(1, 0, 2, 100, 5, 0, 0, -1)
    assert first_sequence(wrapped) == 2**31 - 1 - 3 + 1
    assert has_batch_metadata(E1) and not has_batch_metadata(E2)
