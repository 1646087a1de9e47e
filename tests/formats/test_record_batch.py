"""v2 record batches: header, records, control markers, encoders, boundary vectors."""

from __future__ import annotations

import struct
from typing import Any

import pytest
from crc32c import crc32c
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.formats._corpus import dumped_log_files, log_path
from tests.realcorpus import needs_corpus
from txn_audit.errors import CorruptInputError
from txn_audit.formats.model import BatchHeader, Record, RecordHeader
from txn_audit.formats import record_batch, records
from txn_audit.formats.primitives import INT32_MAX, write_varint
from txn_audit.formats.record_batch import (
    HEADER_STRUCT,
    control_marker_of,
    decode_batch_header,
    decode_control_marker,
    decode_records,
    encode_batch,
    encode_control_batch,
    increment_sequence,
)
from txn_audit.formats.segment import iter_batches

T0 = 1_795_377_608_870
CODECS = [0, 1, 2, 3, 4]


def _records(n: int, *, base_offset: int = 0, t0: int = T0) -> list[Record]:
    return [
        Record(
            offset=base_offset + i,
            timestamp=t0 + 7 * i,
            key=None if i % 3 == 0 else f"key-{i}".encode(),
            value=None if i % 5 == 4 else (b"value-%d|" % i) * (i + 1),
            headers=(RecordHeader("trace", b"t%d" % i), RecordHeader("nil", None)) if i % 2 else (),
        )
        for i in range(n)
    ]


def _expected(records: list[Record], *, base_sequence: int, ts: int | None = None) -> list[Record]:
    """What decoding should give back: derived sequences, LogAppendTime timestamps."""
    base = records[0].offset if records else 0
    return [
        Record(
            r.offset,
            r.timestamp if ts is None else ts,
            r.key,
            r.value,
            r.headers,
            -1 if base_sequence < 0 else increment_sequence(base_sequence, r.offset - base),
            r.attributes,
        )
        for r in records
    ]


KINDS: dict[str, dict[str, Any]] = {
    "plain": {},
    "idempotent": {"producer_id": 42, "producer_epoch": 3, "base_sequence": 17},
    "transactional": {"producer_id": 42, "producer_epoch": 3, "base_sequence": 17, "is_transactional": True},
}


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("kind", sorted(KINDS))
@pytest.mark.parametrize("timestamp_type", [0, 1])
def test_round_trip(codec: int, kind: str, timestamp_type: int) -> None:
    records = _records(25, base_offset=1000)
    append_time = T0 + 99_999 if timestamp_type else None
    data = encode_batch(
        records,
        base_offset=1000,
        compression=codec,
        timestamp_type=timestamp_type,
        partition_leader_epoch=5,
        max_timestamp=append_time,
        **KINDS[kind],
    )
    h = decode_batch_header(data, 0)
    base_sequence = int(KINDS[kind].get("base_sequence", -1))
    assert (h.position, h.base_offset, h.last_offset, h.size_bytes, h.magic) == (0, 1000, 1024, len(data), 2)
    assert h.partition_leader_epoch == 5
    assert h.compression == codec and h.codec_name == ["none", "gzip", "snappy", "lz4", "zstd"][codec]
    assert h.timestamp_type == timestamp_type
    assert h.is_transactional == (kind == "transactional")
    assert not h.is_control and not h.has_delete_horizon
    assert h.producer_id == int(KINDS[kind].get("producer_id", -1))
    assert h.base_sequence == base_sequence
    assert h.last_sequence == (-1 if base_sequence < 0 else base_sequence + 24)
    assert h.record_count == 25
    assert h.first_timestamp == T0
    assert h.max_timestamp == (append_time if timestamp_type else T0 + 7 * 24)
    assert h.delete_horizon_ms == -1
    assert h.crc_ok and h.stored_crc == crc32c(data[21:])
    assert decode_records(data, h) == _expected(records, base_sequence=base_sequence, ts=append_time)


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("marker", ["COMMIT", "ABORT"])
def test_control_round_trip(codec: int, marker: str) -> None:
    """A marker built through the general encoder with any codec still reads back."""
    record = Record(77, T0, struct.pack(">hh", 0, 1 if marker == "COMMIT" else 0), struct.pack(">hi", 0, 9))
    data = encode_batch(
        [record], base_offset=77, producer_id=4, producer_epoch=1, is_transactional=True, is_control=True,
        compression=codec,
    )
    h = decode_batch_header(data, 0)
    assert h.is_control and h.is_transactional
    m = control_marker_of(data, h)
    assert m is not None
    assert (m.offset, m.producer_id, m.producer_epoch, m.marker_type, m.coordinator_epoch, m.timestamp) == (
        77, 4, 1, marker, 9, T0,
    )
    assert (m.control_type, m.key_version, m.value_version) == (1 if marker == "COMMIT" else 0, 0, 0)


# -- hypothesis --------------------------------------------------------------------------

_bytes_or_none = st.none() | st.binary(max_size=300)
_header = st.builds(RecordHeader, st.text(max_size=20), _bytes_or_none)
_record_parts = st.tuples(
    st.integers(0, 5),  # offset gap (compaction leaves gaps)
    st.integers(-(2**40), 2**40),  # timestamp delta from the first record
    _bytes_or_none,
    _bytes_or_none,
    st.lists(_header, max_size=4).map(tuple),
    st.integers(0, 255),  # record attributes byte
)


@settings(max_examples=150, deadline=None)
@given(
    parts=st.lists(_record_parts, max_size=30),
    base_offset=st.integers(0, 2**62),
    base_timestamp=st.integers(0, 2**50),
    codec=st.sampled_from(CODECS),
    base_sequence=st.sampled_from([-1, 0, 5, INT32_MAX - 3, INT32_MAX]),
    flags=st.tuples(st.booleans(), st.booleans(), st.booleans()),
)
def test_round_trip_property(
    parts: list[tuple[int, int, bytes | None, bytes | None, tuple[RecordHeader, ...], int]],
    base_offset: int,
    base_timestamp: int,
    codec: int,
    base_sequence: int,
    flags: tuple[bool, bool, bool],
) -> None:
    transactional, log_append, horizon = flags
    records: list[Record] = []
    offset = base_offset
    for gap, dt, key, value, headers, attrs in parts:
        offset += gap
        records.append(Record(offset, base_timestamp + dt if records else base_timestamp, key, value, headers, -1, attrs))
        offset += 1
    append_time = base_timestamp + 12345 if log_append else None
    horizon_ms = base_timestamp + 86_400_000 if horizon else None
    data = encode_batch(
        records,
        base_offset=base_offset,
        producer_id=11 if base_sequence >= 0 else -1,
        producer_epoch=0 if base_sequence >= 0 else -1,
        base_sequence=base_sequence,
        is_transactional=transactional,
        compression=codec,
        timestamp_type=int(log_append),
        max_timestamp=append_time,
        delete_horizon_ms=horizon_ms,
    )
    (h,) = iter_batches(data)
    assert isinstance(h, BatchHeader) and h.crc_ok
    assert h.record_count == len(records)
    assert h.has_delete_horizon == horizon
    if horizon:
        assert (h.first_timestamp, h.delete_horizon_ms) == (-1, horizon_ms)
    else:
        assert h.first_timestamp == (records[0].timestamp if records else -1)
    got = decode_records(data, h)
    expected_seq = [
        -1 if base_sequence < 0 else increment_sequence(base_sequence, r.offset - base_offset) for r in records
    ]
    assert [r.sequence for r in got] == expected_seq
    assert [(r.offset, r.key, r.value, r.headers, r.attributes) for r in got] == [
        (r.offset, r.key, r.value, r.headers, r.attributes) for r in records
    ]
    assert [r.timestamp for r in got] == [append_time if log_append else r.timestamp for r in records]


# -- boundary vectors --------------------------------------------------------------------


def test_crc32c_check_value() -> None:
    assert crc32c(b"123456789") == 0xE3069283


@pytest.mark.parametrize(
    ("base", "delta", "last"),
    [
        (0, 0, 0),
        (5, 10, 15),
        (INT32_MAX - 10, 10, INT32_MAX),
        (INT32_MAX - 10, 11, 0),
        (INT32_MAX - 10, 15, 4),
        (INT32_MAX, 0, INT32_MAX),
        (INT32_MAX, 1, 0),
        (INT32_MAX, 5, 4),
        (-1, 7, -1),
    ],
)
def test_sequence_wrap(base: int, delta: int, last: int) -> None:
    records = [Record(100 + i, T0, b"k", b"v") for i in range(delta + 1)]
    pid = -1 if base < 0 else 1
    data = encode_batch(records, base_offset=100, producer_id=pid, producer_epoch=pid, base_sequence=base)
    h = decode_batch_header(data, 0)
    assert h.last_sequence == last
    seqs = [r.sequence for r in decode_records(data, h)]
    assert seqs[-1] == last
    if base >= 0:
        assert seqs == [(base + i) % 2**31 for i in range(delta + 1)]


def test_marker_layout_byte_for_byte() -> None:
    data = encode_control_batch(
        offset=0x0102030405, producer_id=0x1122334455, producer_epoch=0x0A0B, marker_type="COMMIT",
        coordinator_epoch=0x01020304, timestamp=0x0000018C0D0E0F10, partition_leader_epoch=7,
    )
    assert len(data) == 78
    body = bytes.fromhex(
        "0030"  # attributes: transactional | control
        "00000000"  # lastOffsetDelta
        "0000018c0d0e0f10"  # baseTimestamp
        "0000018c0d0e0f10"  # maxTimestamp
        "0000001122334455"  # producerId
        "0a0b"  # producerEpoch
        "ffffffff"  # baseSequence
        "00000001"  # recordsCount
        "20"  # record length varint 16
        "00"  # attributes
        "00"  # timestampDelta
        "00"  # offsetDelta
        "08" "00000001"  # keyLength 4, key: version 0, type 1 (COMMIT)
        "0c" "000001020304"  # valueLength 6, value: version 0, coordinatorEpoch
        "00"  # headerCount
    )
    head = bytes.fromhex("0000000102030405" "00000042" "00000007" "02")
    assert data == head + struct.pack(">I", crc32c(body)) + body
    abort = encode_control_batch(
        offset=5, producer_id=1, producer_epoch=0, marker_type="ABORT", coordinator_epoch=0, timestamp=T0
    )
    assert abort[61:] == bytes.fromhex("2000000008000000000c00000000000000")


@needs_corpus
def test_encoder_reproduces_real_markers() -> None:
    """Every control batch the real broker wrote is re-created byte for byte."""
    seen = 0
    for scenario, dumped in dumped_log_files():
        data = log_path(scenario, dumped).read_bytes()
        for h in iter_batches(data):
            if isinstance(h, BatchHeader) and h.is_control:
                m = control_marker_of(data, h)
                assert m is not None
                rebuilt = encode_control_batch(
                    offset=m.offset, producer_id=m.producer_id, producer_epoch=m.producer_epoch,
                    marker_type=m.marker_type, coordinator_epoch=m.coordinator_epoch, timestamp=m.timestamp,
                    partition_leader_epoch=h.partition_leader_epoch,
                )
                assert rebuilt == data[h.position : h.position + h.size_bytes]
                seen += 1
    assert seen > 100


def test_delete_horizon() -> None:
    records = _records(4, base_offset=10)
    horizon = T0 + 86_400_000
    data = encode_batch(records, base_offset=10, delete_horizon_ms=horizon)
    h = decode_batch_header(data, 0)
    assert h.attributes & 0x40 and h.has_delete_horizon
    assert (h.first_timestamp, h.delete_horizon_ms, h.max_timestamp) == (-1, horizon, T0 + 21)
    assert [r.timestamp for r in decode_records(data, h)] == [r.timestamp for r in records]


def test_empty_batch_after_compaction() -> None:
    data = encode_batch([], base_offset=50, producer_id=3, producer_epoch=0, base_sequence=9, last_offset_delta=4)
    assert len(data) == 61
    h = decode_batch_header(data, 0)
    assert (h.base_offset, h.last_offset, h.record_count, h.last_sequence) == (50, 54, 0, 13)
    assert decode_records(data, h) == []
    control = encode_batch([], base_offset=8, producer_id=3, producer_epoch=0, is_transactional=True, is_control=True)
    assert control_marker_of(control, decode_batch_header(control, 0)) is None


def test_header_at_offset_inside_buffer_and_without_crc() -> None:
    data = b"\xaa" * 13 + encode_batch(_records(3), base_offset=0) + b"\xbb" * 5
    h = decode_batch_header(memoryview(data), 13)
    assert h.position == 13 and h.crc_ok
    assert len(decode_records(data, h)) == 3
    broken = bytearray(data)
    broken[13 + 40] ^= 1
    assert not decode_batch_header(bytes(broken), 13).crc_ok
    quiet = decode_batch_header(bytes(broken), 13, verify_crc=False)
    assert quiet.computed_crc == quiet.stored_crc


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # kafka-python import noise
def test_kafka_python_builder_is_decoded() -> None:
    """An independent encoder (kafka-python's DefaultRecordBatchBuilder) read by our decoder."""
    from kafka.record.default_records import DefaultRecordBatchBuilder

    builder = DefaultRecordBatchBuilder(
        magic=2, compression_type=1, is_transactional=True, producer_id=9, producer_epoch=2,
        base_sequence=INT32_MAX - 1, batch_size=1 << 20,
    )
    for i in range(5):
        builder.append(i, timestamp=T0 + i, key=None if i == 2 else b"k%d" % i, value=b"v" * i,
                       headers=[("h", b"x"), ("n", None)])
    data = bytes(builder.build())
    h = decode_batch_header(data, 0)
    assert (h.producer_id, h.producer_epoch, h.base_sequence, h.last_sequence) == (9, 2, INT32_MAX - 1, 2)
    assert h.is_transactional and h.crc_ok and h.compression == 1
    got = decode_records(data, h)
    assert [r.key for r in got] == [b"k0", b"k1", None, b"k3", b"k4"]
    assert [r.sequence for r in got] == [INT32_MAX - 1, INT32_MAX, 0, 1, 2]
    assert [r.timestamp for r in got] == [T0 + i for i in range(5)]
    assert got[0].headers == (RecordHeader("h", b"x"), RecordHeader("n", None))


# -- corrupt records -----------------------------------------------------------------------


def _rebuild(records_area: bytes, count: int, *, compression: int = 0) -> bytes:
    """A batch with a hand-made record area and a correct CRC."""
    head = bytearray(HEADER_STRUCT.pack(0, 49 + len(records_area), 0, 2, 0, compression, count - 1, T0, T0, -1, -1, -1, count))
    out = head + records_area
    struct.pack_into(">I", out, 17, crc32c(bytes(out[21:])))
    return bytes(out)


def _one_record(body_extra: bytes = b"", length_adjust: int = 0) -> bytes:
    body = b"\x00" + b"\x00" + b"\x00" + write_varint(1) + b"k" + write_varint(1) + b"v" + b"\x00" + body_extra
    return write_varint(len(body) + length_adjust) + body


def _framed(body: bytes) -> bytes:
    return write_varint(len(body)) + body


_NULLS = write_varint(-1) + write_varint(-1)  # null key, null value


@pytest.mark.parametrize(
    ("area", "count"),
    [
        pytest.param(_one_record(length_adjust=+1) + b"\x00", 1, id="declared-longer"),
        pytest.param(_one_record(length_adjust=-1) + b"\x00", 1, id="declared-shorter"),
        pytest.param(_one_record() + b"\x00\x00", 1, id="trailing-bytes"),
        pytest.param(_one_record(), 2, id="fewer-records-than-count"),
        pytest.param(_one_record(length_adjust=+50), 1, id="length-past-batch-end"),
        pytest.param(_framed(b"\x00\x00\x00" + write_varint(-128) + write_varint(100) + b"v\x00"), 1,
                     id="value-overruns"),
        pytest.param(_framed(b"\x00\x00\x00" + _NULLS + write_varint(1) + write_varint(-2) + b"\x00"), 1,
                     id="negative-header-key-size"),
        pytest.param(_framed(b"\x00\x00\x00" + _NULLS + write_varint(-1)), 1, id="negative-header-count"),
        pytest.param(_framed(b"\x00" + b"\xff" * 11 + b"\x00" + _NULLS + b"\x00"), 1, id="varlong-too-long"),
        pytest.param(b"", 1, id="no-records-at-all"),
    ],
)
def test_corrupt_records_are_reported(area: bytes, count: int) -> None:
    data = _rebuild(area, count)
    h = decode_batch_header(data, 0)
    assert h.crc_ok
    with pytest.raises(CorruptInputError) as info:
        decode_records(data, h)
    assert info.value.kind == "corrupt_record"
    assert 61 <= info.value.position <= len(data)


def test_null_key_by_any_negative_length() -> None:
    """Kafka reads any negative key/value length as null (Utils.readBytes)."""
    data = _rebuild(_framed(b"\x00\x00\x00" + write_varint(-128) + write_varint(-5) + b"\x00"), 1)
    (r,) = decode_records(data, decode_batch_header(data, 0))
    assert (r.key, r.value) == (None, None)


def test_corrupt_compressed_records() -> None:
    from txn_audit.formats.compression import compress

    area = compress(3, _one_record() + b"\x00")  # one stray byte inside the compressed stream
    data = _rebuild(area, 1, compression=3)
    with pytest.raises(CorruptInputError) as info:
        decode_records(data, decode_batch_header(data, 0))
    assert (info.value.kind, info.value.position) == ("corrupt_record", 61)
    garbage = _rebuild(b"definitely not zstd", 1, compression=4)
    with pytest.raises(CorruptInputError) as info:
        decode_records(garbage, decode_batch_header(garbage, 0))
    assert (info.value.kind, info.value.position) == ("decompression_error", 61)


def test_negative_record_count() -> None:
    data = _rebuild(b"", -1)
    with pytest.raises(CorruptInputError) as info:
        decode_records(data, decode_batch_header(data, 0))
    assert info.value.kind == "corrupt_record"


def test_header_rejects_non_v2_and_short_buffers() -> None:
    data = bytearray(encode_batch(_records(2), base_offset=0))
    with pytest.raises(CorruptInputError) as info:
        decode_batch_header(bytes(data[:60]), 0)
    assert info.value.kind == "truncated_tail"
    with pytest.raises(CorruptInputError) as info:
        decode_batch_header(bytes(data[:-1]), 0)
    assert info.value.kind == "truncated_tail"
    data[16] = 1
    with pytest.raises(CorruptInputError) as info:
        decode_batch_header(bytes(data), 0)
    assert info.value.kind == "bad_magic"


# -- control markers -----------------------------------------------------------------------


def _marker_header() -> BatchHeader:
    data = encode_control_batch(offset=3, producer_id=8, producer_epoch=1, marker_type="ABORT",
                                coordinator_epoch=2, timestamp=T0)
    return decode_batch_header(data, 0)


@pytest.mark.parametrize(
    ("key", "value", "kind"),
    [
        (struct.pack(">hh", 0, 2), struct.pack(">hi", 0, 0), "unexpected_control"),  # LEADER_CHANGE
        (struct.pack(">hh", 0, 7), struct.pack(">hi", 0, 0), "unexpected_control"),
        (struct.pack(">hh", -1, 1), struct.pack(">hi", 0, 0), "corrupt_record"),
        (b"\x00\x00\x00", struct.pack(">hi", 0, 0), "corrupt_record"),
        (None, struct.pack(">hi", 0, 0), "corrupt_record"),
        (struct.pack(">hh", 0, 1), b"\x00\x00\x00\x00\x00", "corrupt_record"),
        (struct.pack(">hh", 0, 1), struct.pack(">hi", -3, 0), "corrupt_record"),
        (struct.pack(">hh", 0, 1), None, "corrupt_record"),
    ],
)
def test_bad_control_records(key: bytes | None, value: bytes | None, kind: str) -> None:
    with pytest.raises(CorruptInputError) as info:
        decode_control_marker(_marker_header(), Record(3, T0, key, value))
    assert info.value.kind == kind


def test_newer_control_versions_parse_as_v0() -> None:
    m = decode_control_marker(_marker_header(), Record(3, T0, struct.pack(">hhxx", 3, 1), struct.pack(">hix", 1, 44)))
    assert (m.marker_type, m.key_version, m.value_version, m.coordinator_epoch) == ("COMMIT", 3, 1, 44)


def test_marker_type_validation() -> None:
    with pytest.raises(ValueError):
        encode_control_batch(offset=0, producer_id=0, producer_epoch=0, marker_type="MAYBE", coordinator_epoch=0,
                             timestamp=0)
    data = encode_batch(_records(1), base_offset=0)
    with pytest.raises(ValueError):
        control_marker_of(data, decode_batch_header(data, 0))


# -- the header layout -----------------------------------------------------------------

# (offset, size) of each header field in HEADER_STRUCT's order, as the constants give them
_LAYOUT = [
    (records.OFFSET_OFFSET, records.OFFSET_LENGTH),
    (records.SIZE_OFFSET, records.SIZE_LENGTH),
    (record_batch.PARTITION_LEADER_EPOCH_OFFSET, record_batch.PARTITION_LEADER_EPOCH_LENGTH),
    (records.MAGIC_OFFSET, records.MAGIC_LENGTH),
    (record_batch.CRC_OFFSET, record_batch.CRC_LENGTH),
    (record_batch.ATTRIBUTES_OFFSET, record_batch.ATTRIBUTE_LENGTH),
    (record_batch.LAST_OFFSET_DELTA_OFFSET, record_batch.LAST_OFFSET_DELTA_LENGTH),
    (record_batch.BASE_TIMESTAMP_OFFSET, record_batch.BASE_TIMESTAMP_LENGTH),
    (record_batch.MAX_TIMESTAMP_OFFSET, record_batch.MAX_TIMESTAMP_LENGTH),
    (record_batch.PRODUCER_ID_OFFSET, record_batch.PRODUCER_ID_LENGTH),
    (record_batch.PRODUCER_EPOCH_OFFSET, record_batch.PRODUCER_EPOCH_LENGTH),
    (record_batch.BASE_SEQUENCE_OFFSET, record_batch.BASE_SEQUENCE_LENGTH),
    (record_batch.RECORDS_COUNT_OFFSET, record_batch.RECORDS_COUNT_LENGTH),
]


def test_the_layout_constants_are_the_documented_offsets() -> None:
    # the byte offsets of the module docstring (Kafka's DefaultRecordBatch)
    assert [o for o, _ in _LAYOUT] == [0, 8, 12, 16, 17, 21, 23, 27, 35, 43, 51, 53, 57]
    assert record_batch.RECORDS_OFFSET == record_batch.RECORD_BATCH_OVERHEAD == 61
    assert records.LOG_OVERHEAD == 12 and records.HEADER_SIZE_UP_TO_MAGIC == 17
    assert record_batch.MIN_BATCH_LENGTH == 49


def test_the_header_struct_reads_the_fields_at_the_layout_offsets() -> None:
    codes = HEADER_STRUCT.format.lstrip(">")
    assert len(codes) == len(_LAYOUT)
    for i, (offset, size) in enumerate(_LAYOUT):
        assert struct.calcsize(">" + codes[:i]) == offset, codes[i]
        assert struct.calcsize(">" + codes[i]) == size, codes[i]
    end, last = _LAYOUT[-1]
    assert HEADER_STRUCT.size == end + last == record_batch.RECORDS_OFFSET
