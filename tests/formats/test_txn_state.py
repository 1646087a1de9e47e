"""``__transaction_state`` keys and values: layouts, sizes, tags, errors, partitioning."""

from __future__ import annotations

import dataclasses
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from txn_audit.errors import CorruptInputError
from txn_audit.formats.model import TXN_STATES, TopicPartitions, TxnLogKey, TxnLogValue
from txn_audit.formats.txn_state import (
    decode_txn_log_key,
    decode_txn_log_value,
    encode_txn_log_key,
    encode_txn_log_value,
    java_string_hash,
    java_string_hashes,
    kafka_abs,
    txn_partition_for,
    txn_partitions_for,
)

T = 1_795_378_199_343
EMPTY_V0 = TxnLogValue(0, 3, 0, 60000, 0, None, T, -1)
ONGOING_V0 = TxnLogValue(0, 3, 0, 60000, 1, (TopicPartitions("abcdefghijkl", (0,)),), T, T)

int16 = st.integers(-(2**15), 2**15 - 1)
int32 = st.integers(-(2**31), 2**31 - 1)
int64 = st.integers(-(2**63), 2**63 - 1)
names = st.text(st.characters(codec="utf-8"), max_size=40)
partitions = st.none() | st.lists(
    st.builds(TopicPartitions, names, st.lists(int32, max_size=6).map(tuple)), max_size=4
).map(tuple)


@st.composite
def txn_values(draw: st.DrawFn) -> TxnLogValue:
    version = draw(st.sampled_from([0, 1]))
    v1 = version == 1
    return TxnLogValue(
        version=version,
        producer_id=draw(int64),
        producer_epoch=draw(int16),
        txn_timeout_ms=draw(int32),
        state_code=draw(st.integers(-128, 127)),
        topic_partitions=draw(partitions),
        txn_last_update_timestamp=draw(int64),
        txn_start_timestamp=draw(int64),
        previous_producer_id=draw(st.sampled_from([-1]) | int64) if v1 else -1,
        next_producer_id=draw(st.sampled_from([-1]) | int64) if v1 else -1,
        client_transaction_version=draw(st.sampled_from([0, 2]) | int16) if v1 else 0,
        next_producer_epoch=draw(st.sampled_from([-1]) | int16) if v1 else -1,
    )


# -- keys ------------------------------------------------------------------------------


def test_key_layout() -> None:
    raw = encode_txn_log_key("kafka-txn-0")
    assert raw == bytes.fromhex("0000000b") + b"kafka-txn-0"
    assert len(raw) == 15
    assert decode_txn_log_key(raw) == TxnLogKey(0, "kafka-txn-0")


@given(names)
def test_key_round_trip(tid: str) -> None:
    assert decode_txn_log_key(encode_txn_log_key(tid)) == TxnLogKey(0, tid)


@pytest.mark.parametrize("version", [1, 2, -1, 0x7FFF])
def test_key_unknown_version(version: int) -> None:
    raw = struct.pack(">h", version) + encode_txn_log_key("x")[2:]
    with pytest.raises(CorruptInputError) as err:
        decode_txn_log_key(raw)
    assert err.value.kind == "unknown_version"


@pytest.mark.parametrize(
    "raw",
    [
        b"",
        b"\x00",
        b"\x00\x00\xff\xff",
        b"\x00\x00\x00\x05abc",
        encode_txn_log_key("abc") + b"\x00",
        b"\x00\x00\x00\x02\xc3\x28",
    ],
    ids=["empty", "half-version", "null-id", "short-id", "trailing", "bad-utf8"],
)
def test_key_corrupt(raw: bytes) -> None:
    with pytest.raises(CorruptInputError) as err:
        decode_txn_log_key(raw)
    assert err.value.kind == "corrupt_record"


# -- values: sizes from kafka-formats.md 4.3 --------------------------------------------


def test_value_sizes() -> None:
    assert len(encode_txn_log_value(EMPTY_V0)) == 37
    complete = dataclasses.replace(EMPTY_V0, state_code=4, topic_partitions=(), txn_start_timestamp=T)
    assert len(encode_txn_log_value(complete)) == 37
    assert len(encode_txn_log_value(ONGOING_V0)) == 59
    empty_v1 = dataclasses.replace(EMPTY_V0, version=1)
    assert len(encode_txn_log_value(empty_v1)) == 35
    assert len(encode_txn_log_value(dataclasses.replace(empty_v1, client_transaction_version=2))) == 39
    assert len(encode_txn_log_value(dataclasses.replace(empty_v1, previous_producer_id=7))) == 45
    assert len(encode_txn_log_value(dataclasses.replace(empty_v1, previous_producer_id=7, next_producer_id=8))) == 55
    ongoing_v1 = dataclasses.replace(ONGOING_V0, version=1, topic_partitions=(TopicPartitions("orders", (0,)),))
    assert len(encode_txn_log_value(ongoing_v1)) == 48


def test_value_v0_layout() -> None:
    raw = encode_txn_log_value(ONGOING_V0)
    expected = (
        struct.pack(">hqhib", 0, 3, 0, 60000, 1)
        + struct.pack(">i", 1)
        + struct.pack(">h", 12)
        + b"abcdefghijkl"
        + struct.pack(">ii", 1, 0)
        + struct.pack(">qq", T, T)
    )
    assert raw == expected
    v = decode_txn_log_value(raw)
    assert v == ONGOING_V0 and v is not None and v.state == "Ongoing"


def test_value_v1_layout_with_tags() -> None:
    v = dataclasses.replace(
        ONGOING_V0, version=1, client_transaction_version=2, previous_producer_id=9, next_producer_epoch=4
    )
    raw = encode_txn_log_value(v)
    expected = (
        struct.pack(">hqhib", 1, 3, 0, 60000, 1)
        + b"\x02"  # compact array: 1 element
        + b"\x0d" + b"abcdefghijkl"  # compact string
        + b"\x02" + struct.pack(">i", 0)  # compact int32 array
        + b"\x00"  # element tags
        + struct.pack(">qq", T, T)
        + b"\x03"  # three tagged fields, ascending
        + b"\x00\x08" + struct.pack(">q", 9)
        + b"\x02\x02" + struct.pack(">h", 2)
        + b"\x03\x02" + struct.pack(">h", 4)
    )
    assert raw == expected
    assert decode_txn_log_value(raw) == v


def test_value_v1_null_and_empty_partitions() -> None:
    for parts, byte in [(None, b"\x00"), ((), b"\x01")]:
        v = dataclasses.replace(EMPTY_V0, version=1, topic_partitions=parts)
        raw = encode_txn_log_value(v)
        assert raw[2 + 15 : 2 + 16] == byte
        assert decode_txn_log_value(raw) == v


def test_value_unknown_tags_are_skipped_and_listed() -> None:
    base = encode_txn_log_value(dataclasses.replace(EMPTY_V0, version=1))[:-1]
    raw = base + b"\x03" + b"\x02\x02\x00\x02" + b"\x07\x03abc" + b"\x90\x01\x00"  # tags 2, 7, 144 (2-byte uvarint)
    v = decode_txn_log_value(raw)
    assert v is not None
    assert v.client_transaction_version == 2
    assert v.unknown_tags == (7, 144)


def test_value_known_tag_with_wrong_size_is_corrupt() -> None:
    base = encode_txn_log_value(dataclasses.replace(EMPTY_V0, version=1))[:-1]
    with pytest.raises(CorruptInputError) as err:
        decode_txn_log_value(base + b"\x01\x00\x04\x00\x00\x00\x01")
    assert err.value.kind == "corrupt_record"


def test_value_tombstone() -> None:
    assert decode_txn_log_value(None) is None


@pytest.mark.parametrize("version", [2, 3, -1])
def test_value_unknown_version(version: int) -> None:
    raw = struct.pack(">h", version) + encode_txn_log_value(EMPTY_V0)[2:]
    with pytest.raises(CorruptInputError) as err:
        decode_txn_log_value(raw)
    assert err.value.kind == "unknown_version"


def test_value_trailing_bytes_are_corrupt() -> None:
    for v in (EMPTY_V0, dataclasses.replace(EMPTY_V0, version=1)):
        with pytest.raises(CorruptInputError) as err:
            decode_txn_log_value(encode_txn_log_value(v) + b"\x00")
        assert err.value.kind == "corrupt_record" and "trailing" in err.value.detail


def test_value_bad_counts_are_corrupt() -> None:
    raw = bytearray(encode_txn_log_value(ONGOING_V0))
    raw[17:21] = struct.pack(">i", -2)
    with pytest.raises(CorruptInputError):
        decode_txn_log_value(bytes(raw))
    raw[17:21] = struct.pack(">i", 0x7FFFFFFF)
    with pytest.raises(CorruptInputError):
        decode_txn_log_value(bytes(raw))
    raw = bytearray(encode_txn_log_value(ONGOING_V0))
    raw[35:39] = struct.pack(">i", -1)  # PartitionIds is not nullable
    with pytest.raises(CorruptInputError):
        decode_txn_log_value(bytes(raw))


def test_v0_cannot_carry_tags() -> None:
    with pytest.raises(ValueError):
        encode_txn_log_value(dataclasses.replace(EMPTY_V0, client_transaction_version=2))
    with pytest.raises(ValueError):
        encode_txn_log_value(dataclasses.replace(EMPTY_V0, version=2))


def test_state_names() -> None:
    for code, name in TXN_STATES.items():
        v = decode_txn_log_value(encode_txn_log_value(dataclasses.replace(EMPTY_V0, state_code=code)))
        assert v is not None and v.state == name
    v = decode_txn_log_value(encode_txn_log_value(dataclasses.replace(EMPTY_V0, state_code=9)))
    assert v is not None and v.state == "Unknown(9)"


@settings(max_examples=300)
@given(txn_values())
def test_value_round_trip(v: TxnLogValue) -> None:
    assert decode_txn_log_value(encode_txn_log_value(v)) == v


@settings(max_examples=200)
@given(txn_values(), st.data())
def test_value_truncation_is_always_corrupt(v: TxnLogValue, data: st.DataObject) -> None:
    raw = encode_txn_log_value(v)
    cut = data.draw(st.integers(0, len(raw) - 1))
    with pytest.raises(CorruptInputError):
        decode_txn_log_value(raw[:cut])


@settings(max_examples=300)
@given(st.sampled_from([b"\x00\x00", b"\x00\x01"]), st.binary(max_size=80))
def test_value_garbage_never_crashes(version: bytes, raw: bytes) -> None:
    try:
        decode_txn_log_value(version + raw)
    except CorruptInputError:
        pass


# -- partition of a transactional id (kafka-formats.md 4.6) -----------------------------


@pytest.mark.parametrize(
    ("tid", "hash_code", "partition"),
    [
        ("kafka-txn-0", -1469191130, 30),
        ("my-txn-id", 1405732511, 11),
        ("polygenelubricants", -2147483648, 0),
        ("my-group", None, 12),
        ("", 0, 0),
    ],
)
def test_partition_vectors(tid: str, hash_code: int | None, partition: int) -> None:
    if hash_code is not None:
        assert java_string_hash(tid) == hash_code
    assert txn_partition_for(tid, 50) == partition


def test_hash_counts_utf16_units() -> None:
    assert java_string_hash("\U0001f600") == 0xD83D * 31 + 0xDE00  # one emoji = two surrogates
    assert java_string_hash("é") == 0xE9
    assert kafka_abs(-(2**31)) == 0 and kafka_abs(-5) == 5


@given(names, st.integers(1, 1000))
def test_partition_in_range(tid: str, n: int) -> None:
    h = java_string_hash(tid)
    assert -(2**31) <= h < 2**31
    assert 0 <= txn_partition_for(tid, n) < n


def test_partition_count_must_be_positive() -> None:
    with pytest.raises(ValueError):
        txn_partition_for("x", 0)
    with pytest.raises(ValueError):
        txn_partitions_for(["x"], 0)


@settings(max_examples=200)
@given(st.lists(st.text(max_size=80), max_size=40), st.integers(1, 1000))
def test_many_ids_at_once_as_one_at_a_time(tids: list[str], n: int) -> None:
    """The vectorised hash and partition equal the scalar ones, which follow Java's own."""
    assert java_string_hashes(tids).tolist() == [java_string_hash(tid) for tid in tids]
    assert txn_partitions_for(tids, n).tolist() == [txn_partition_for(tid, n) for tid in tids]


def test_many_ids_at_once_keep_the_vectors() -> None:
    tids = ["kafka-txn-0", "", "polygenelubricants", "my-txn-id", "\U0001f600", "x" * 5000]
    assert txn_partitions_for(tids, 50).tolist()[:4] == [30, 0, 0, 11]
    assert java_string_hashes(tids).tolist()[:5] == [-1469191130, 0, -2147483648, 1405732511, 0xD83D * 31 + 0xDE00]
