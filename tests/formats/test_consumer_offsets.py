"""``__consumer_offsets`` keys and OffsetCommitValue v0-v4."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from txn_audit.errors import CorruptInputError
from txn_audit.formats.consumer_offsets import (
    UnknownOffsetsKey,
    decode_offset_commit_value,
    decode_offsets_key,
    encode_group_metadata_key,
    encode_offset_commit_key,
    encode_offset_commit_value,
    encode_offsets_key,
)
from txn_audit.formats.model import GroupMetadataKey, OffsetCommitKey, OffsetCommitValue

int32 = st.integers(-(2**31), 2**31 - 1)
int64 = st.integers(-(2**63), 2**63 - 1)
names = st.text(st.characters(codec="utf-8"), max_size=30)


def test_offset_commit_key_layout() -> None:
    raw = encode_offset_commit_key(OffsetCommitKey(1, "my-group", "orders", 3))
    assert raw == b"\x00\x01" + b"\x00\x08my-group" + b"\x00\x06orders" + struct.pack(">i", 3)
    assert decode_offsets_key(raw) == OffsetCommitKey(1, "my-group", "orders", 3)


def test_group_metadata_key() -> None:
    raw = encode_group_metadata_key(GroupMetadataKey(2, "g"))
    assert raw == b"\x00\x02\x00\x01g"
    assert decode_offsets_key(raw) == GroupMetadataKey(2, "g")


@pytest.mark.parametrize("version", [3, 4, 5, 16, 0x7FFF])
def test_newer_record_types_are_not_errors(version: int) -> None:
    assert decode_offsets_key(struct.pack(">h", version) + b"\x00\x01g\x01\x02") == UnknownOffsetsKey(version)


def test_negative_key_version_and_truncation_raise() -> None:
    with pytest.raises(CorruptInputError) as err:
        decode_offsets_key(b"\xff\xff\x00\x01g")
    assert err.value.kind == "unknown_version"
    with pytest.raises(CorruptInputError) as err:
        decode_offsets_key(encode_offset_commit_key(OffsetCommitKey(0, "g", "t", 1))[:-1])
    assert err.value.kind == "corrupt_record"
    with pytest.raises(CorruptInputError):
        decode_offsets_key(encode_group_metadata_key(GroupMetadataKey(2, "g")) + b"\x00")


@given(st.sampled_from([0, 1]), names, names, int32)
def test_offset_commit_key_round_trip(version: int, group: str, topic: str, partition: int) -> None:
    key = OffsetCommitKey(version, group, topic, partition)
    assert decode_offsets_key(encode_offsets_key(key)) == key


@given(names)
def test_group_key_round_trip(group: str) -> None:
    key = GroupMetadataKey(2, group)
    assert decode_offsets_key(encode_offsets_key(key)) == key


def test_unknown_key_cannot_be_encoded() -> None:
    with pytest.raises(ValueError):
        encode_offsets_key(UnknownOffsetsKey(3))


@pytest.mark.parametrize(
    ("version", "expected"),
    [
        (0, b"\x00\x00" + struct.pack(">q", 5) + b"\x00\x02md" + struct.pack(">q", 1000)),
        (1, b"\x00\x01" + struct.pack(">q", 5) + b"\x00\x02md" + struct.pack(">qq", 1000, 2000)),
        (2, b"\x00\x02" + struct.pack(">q", 5) + b"\x00\x02md" + struct.pack(">q", 1000)),
        (3, b"\x00\x03" + struct.pack(">qi", 5, 7) + b"\x00\x02md" + struct.pack(">q", 1000)),
        (4, b"\x00\x04" + struct.pack(">qi", 5, 7) + b"\x03md" + struct.pack(">q", 1000) + b"\x00"),
    ],
)
def test_value_layout_per_version(version: int, expected: bytes) -> None:
    full = OffsetCommitValue(version, 5, 7, "md", 1000, 2000)
    assert encode_offset_commit_value(full) == expected
    got = decode_offset_commit_value(expected)
    assert got == OffsetCommitValue(
        version, 5, 7 if version >= 3 else -1, "md", 1000, 2000 if version == 1 else -1
    )


def test_value_v4_skips_tagged_fields() -> None:
    raw = b"\x00\x04" + struct.pack(">qi", 5, 7) + b"\x01" + struct.pack(">q", 1000) + b"\x01\x05\x02ab"
    assert decode_offset_commit_value(raw) == OffsetCommitValue(4, 5, 7, "", 1000, -1)


def test_value_tombstone_and_errors() -> None:
    assert decode_offset_commit_value(None) is None
    with pytest.raises(CorruptInputError) as err:
        decode_offset_commit_value(b"\x00\x05" + bytes(30))
    assert err.value.kind == "unknown_version"
    ok = encode_offset_commit_value(OffsetCommitValue(3, 5, 7, "", 1, -1))
    for bad in (ok[:-1], ok + b"\x00"):
        with pytest.raises(CorruptInputError) as err:
            decode_offset_commit_value(bad)
        assert err.value.kind == "corrupt_record"
    with pytest.raises(ValueError):
        encode_offset_commit_value(OffsetCommitValue(5, 5, 7, "", 1, -1))


@st.composite
def values(draw: st.DrawFn) -> OffsetCommitValue:
    v = draw(st.integers(0, 4))
    return OffsetCommitValue(
        v,
        draw(int64),
        draw(int32) if v >= 3 else -1,
        draw(names),
        draw(int64),
        draw(int64) if v == 1 else -1,
    )


@given(values())
def test_value_round_trip(v: OffsetCommitValue) -> None:
    assert decode_offset_commit_value(encode_offset_commit_value(v)) == v


@given(st.integers(0, 4), st.binary(max_size=40))
def test_value_garbage_never_crashes(version: int, raw: bytes) -> None:
    try:
        decode_offset_commit_value(struct.pack(">h", version) + raw)
    except CorruptInputError:
        pass
