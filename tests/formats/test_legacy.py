"""Legacy magic 0/1 messages and compressed wrappers."""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterator
from types import SimpleNamespace

import cramjam
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from txn_audit.errors import CorruptInputError
from txn_audit.formats.compression import compress
from txn_audit.formats.legacy import decode_legacy_entry, encode_legacy_message, encode_legacy_wrapper
from txn_audit.formats.model import BatchHeader, DecodeIssue, Record
from txn_audit.formats.record_batch import encode_batch
from txn_audit.formats.segment import iter_batches, iter_records

T0 = 1_500_000_000_000


def _decode(entry: bytes, pos: int = 0) -> tuple[BatchHeader, list[Record]]:
    (size,) = struct.unpack_from(">i", entry, pos + 8)
    return decode_legacy_entry(entry, pos, size)


def _records(n: int, first: int = 40) -> list[Record]:
    return [
        Record(first + i, T0 + 10 * i, None if i == 1 else b"key%d" % i, None if i == 2 else b"val" * i, attributes=0)
        for i in range(n)
    ]


@pytest.mark.parametrize("magic", [0, 1])
def test_uncompressed_message(magic: int) -> None:
    entry = encode_legacy_message(offset=123, key=b"k", value=b"hello", magic=magic, timestamp=T0)
    h, (r,) = _decode(entry)
    assert (h.base_offset, h.last_offset, h.record_count, h.size_bytes, h.magic) == (123, 123, 1, len(entry), magic)
    assert (h.producer_id, h.producer_epoch, h.base_sequence, h.last_sequence) == (-1, -1, -1, -1)
    assert (h.partition_leader_epoch, h.is_transactional, h.is_control, h.has_delete_horizon) == (-1, False, False, False)
    assert h.compression == 0 and h.crc_ok
    assert h.stored_crc == zlib.crc32(entry[16:])
    ts = T0 if magic == 1 else -1
    assert (h.first_timestamp, h.max_timestamp, h.delete_horizon_ms) == (ts, ts, -1)
    assert (r.offset, r.timestamp, r.key, r.value, r.sequence) == (123, ts, b"k", b"hello", -1)


def test_v0_layout() -> None:
    entry = encode_legacy_message(offset=1, key=None, value=b"ab", magic=0)
    assert entry == (
        bytes.fromhex("0000000000000001" "00000010")
        + struct.pack(">I", zlib.crc32(bytes.fromhex("0000" "ffffffff" "00000002") + b"ab"))
        + bytes.fromhex("0000" "ffffffff" "00000002")
        + b"ab"
    )


@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("codec", [1, 2, 3])
@pytest.mark.parametrize("timestamp_type", [0, 1])
def test_wrapper_round_trip(magic: int, codec: int, timestamp_type: int) -> None:
    records = _records(6)
    entry = encode_legacy_wrapper(records, magic=magic, compression=codec, timestamp_type=timestamp_type,
                                  log_append_time=T0 + 5000)
    h, got = _decode(entry)
    assert (h.base_offset, h.last_offset, h.record_count, h.compression) == (40, 45, 6, codec)
    assert h.crc_ok
    lat = timestamp_type == 1 and magic == 1
    assert h.timestamp_type == (1 if lat else 0)
    if magic == 1:
        expected_ts = [T0 + 5000] * 6 if lat else [r.timestamp for r in records]
        assert h.max_timestamp == (T0 + 5000 if lat else T0 + 50)
        assert h.first_timestamp == expected_ts[0]
    else:
        expected_ts = [-1] * 6
        assert (h.first_timestamp, h.max_timestamp) == (-1, -1)
    assert [(r.offset, r.timestamp, r.key, r.value) for r in got] == [
        (r.offset, ts, r.key, r.value) for r, ts in zip(records, expected_ts, strict=True)
    ]


@settings(max_examples=60, deadline=None)
@given(
    values=st.lists(st.tuples(st.none() | st.binary(max_size=64), st.none() | st.binary(max_size=200)), min_size=1,
                    max_size=20),
    first=st.integers(0, 2**50),
    magic=st.sampled_from([0, 1]),
    codec=st.sampled_from([0, 1, 2, 3]),
)
def test_property(values: list[tuple[bytes | None, bytes | None]], first: int, magic: int, codec: int) -> None:
    records = [Record(first + i, T0 + i, k, v) for i, (k, v) in enumerate(values)]
    if codec == 0:
        segment = b"".join(
            encode_legacy_message(offset=r.offset, key=r.key, value=r.value, magic=magic, timestamp=r.timestamp)
            for r in records
        )
    else:
        segment = encode_legacy_wrapper(records, magic=magic, compression=codec)
    items = list(iter_batches(segment))
    assert not [i for i in items if isinstance(i, DecodeIssue)]
    got = [r for h in items if isinstance(h, BatchHeader) for r in iter_records(segment, h)]
    assert [(r.offset, r.key, r.value) for r in got] == [(r.offset, r.key, r.value) for r in records]


def test_v1_wrapper_offset_zero_means_base_zero() -> None:
    """librdkafka once sent wrapper offset 0; Kafka then takes the inner offsets as absolute."""
    inner = b"".join(encode_legacy_message(offset=i, key=None, value=b"x", magic=1, timestamp=T0) for i in range(3))
    entry = encode_legacy_message(offset=0, key=None, value=compress(1, inner), magic=1, timestamp=T0, attributes=1)
    h, got = _decode(entry)
    assert [r.offset for r in got] == [0, 1, 2]
    assert (h.base_offset, h.last_offset) == (0, 0)


def test_lz4_v0_with_broken_header_checksum() -> None:
    """Old (magic 0) writers computed a wrong LZ4 HC byte; Kafka ignores it for magic 0."""
    records = _records(3)
    inner = b"".join(encode_legacy_message(offset=r.offset, key=r.key, value=r.value, magic=0) for r in records)
    frame = bytearray(compress(3, inner))
    frame[6 + (8 if frame[4] & 0x08 else 0)] ^= 0xA5
    entry = encode_legacy_message(offset=42, key=None, value=bytes(frame), magic=0, attributes=3)
    h, got = _decode(entry)
    assert [r.offset for r in got] == [40, 41, 42] and h.crc_ok


def _wrapper_with(value: bytes | None, *, attributes: int = 1, offset: int = 10) -> bytes:
    return encode_legacy_message(offset=offset, key=None, value=value, magic=1, timestamp=T0, attributes=attributes)


@pytest.mark.parametrize(
    ("entry", "kind"),
    [
        (_wrapper_with(None), "corrupt_record"),
        (_wrapper_with(b"not gzip"), "decompression_error"),
        (_wrapper_with(compress(4, b"x" * 40), attributes=4), "corrupt_record"),  # zstd is v2-only
        (_wrapper_with(compress(1, b"")), "corrupt_record"),  # no inner messages
        (_wrapper_with(compress(1, _wrapper_with(b"zz"))), "corrupt_record"),  # compressed inner message
        (_wrapper_with(compress(1, encode_legacy_message(offset=0, key=None, value=b"x") + b"\x00" * 5)),
         "corrupt_record"),  # stray bytes after the inner messages
        (_wrapper_with(compress(1, encode_legacy_message(offset=20, key=None, value=b"x")), offset=3),
         "corrupt_record"),  # wrapper offset below the last inner relative offset
        (encode_legacy_message(offset=1, key=b"k", value=b"v")[:-3] + b"\x00\x00\x00\x09", "corrupt_record"),
    ],
)
def test_bad_entries_raise(entry: bytes, kind: str) -> None:
    # re-frame so that the size field matches the bytes (the message body itself is what is broken)
    entry = entry[:8] + struct.pack(">i", len(entry) - 12) + entry[12:]
    with pytest.raises(CorruptInputError) as info:
        _decode(entry)
    assert info.value.kind == kind
    assert 0 <= info.value.position < len(entry)
    issues = [i for i in iter_batches(entry) if isinstance(i, DecodeIssue)]
    assert [i.kind for i in issues if i.kind != "crc_mismatch"] == [kind]


def test_crc_mismatch_is_detected() -> None:
    entry = bytearray(encode_legacy_message(offset=5, key=b"k", value=b"value", magic=1, timestamp=T0))
    entry[-1] ^= 0x01
    h, _ = _decode(bytes(entry))
    assert not h.crc_ok and h.computed_crc == zlib.crc32(bytes(entry[16:]))
    items = list(iter_batches(bytes(entry)))
    assert isinstance(items[0], BatchHeader)
    assert [i.kind for i in items[1:]] == ["crc_mismatch"]  # type: ignore[union-attr]


def test_mixed_segment_legacy_then_v2() -> None:
    """A topic upgraded from message format 0.10 to 2: legacy entries followed by v2 batches."""
    legacy = encode_legacy_message(offset=0, key=b"a", value=b"1", magic=0) + encode_legacy_wrapper(
        [Record(1, T0, b"b", b"2"), Record(2, T0 + 1, b"c", b"3")], magic=1, compression=2
    )
    v2 = encode_batch([Record(3, T0 + 2, b"d", b"4"), Record(4, T0 + 3, b"e", b"5")], base_offset=3, compression=4)
    segment = legacy + v2
    items = list(iter_batches(segment))
    assert all(isinstance(i, BatchHeader) for i in items)
    headers = [i for i in items if isinstance(i, BatchHeader)]
    assert [(h.magic, h.base_offset, h.last_offset) for h in headers] == [(0, 0, 0), (1, 1, 2), (2, 3, 4)]
    assert [r.value for h in headers for r in iter_records(segment, h)] == [b"1", b"2", b"3", b"4", b"5"]


# -- kafka-python as an independent encoder / decoder --------------------------------------


@pytest.fixture
def kafka_legacy_codecs(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    import kafka.codec as kc
    import kafka.record.legacy_records as lr

    monkeypatch.setattr(
        kc,
        "snappy",
        SimpleNamespace(
            decompress=lambda b: bytes(cramjam.snappy.decompress_raw(bytes(b))),
            compress=lambda b: bytes(cramjam.snappy.compress_raw(bytes(b))),
        ),
    )
    monkeypatch.setattr(kc, "lz4", SimpleNamespace())
    monkeypatch.setattr(lr, "lz4_encode", lambda b: bytes(cramjam.lz4.compress(b)))
    monkeypatch.setattr(lr, "lz4_decode", lambda b: bytes(cramjam.lz4.decompress(b)))
    yield


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
@pytest.mark.parametrize(("magic", "codec"), [(0, 0), (1, 0), (0, 1), (1, 1), (0, 2), (1, 2), (1, 3)])
def test_kafka_python_builder_is_decoded(kafka_legacy_codecs: None, magic: int, codec: int) -> None:
    from kafka.record.legacy_records import LegacyRecordBatchBuilder

    builder = LegacyRecordBatchBuilder(magic=magic, compression_type=codec, batch_size=1 << 20)
    for i in range(4):
        builder.append(i, timestamp=T0 + i, key=b"k%d" % i, value=None if i == 3 else b"v" * (i + 1))
    data = bytes(builder.build())
    items = list(iter_batches(data))
    assert not [i for i in items if isinstance(i, DecodeIssue)]
    headers = [i for i in items if isinstance(i, BatchHeader)]
    got = [r for h in headers for r in iter_records(data, h)]
    assert [(r.offset, r.key, r.value) for r in got] == [(i, b"k%d" % i, None if i == 3 else b"v" * (i + 1)) for i in range(4)]
    if magic == 1:
        assert [r.timestamp for r in got] == [T0 + i for i in range(4)]


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
@pytest.mark.parametrize(("magic", "codec"), [(0, 1), (1, 1), (0, 2), (1, 2), (1, 3)])
def test_our_wrapper_is_read_by_kafka_python(kafka_legacy_codecs: None, magic: int, codec: int) -> None:
    from kafka.record import MemoryRecords

    records = _records(5, first=100)
    data = encode_legacy_wrapper(records, magic=magic, compression=codec)
    (batch,) = list(MemoryRecords(data))
    assert batch.validate_crc()
    assert [(r.offset, r.key, r.value) for r in batch] == [(r.offset, r.key, r.value) for r in records]
