"""Codec round trips, snappy framing detection, and error reporting."""

from __future__ import annotations

import gzip
import struct

import cramjam
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from txn_audit.errors import CorruptInputError
from txn_audit.formats.compression import XERIAL_MAGIC, compress, decompress, is_xerial_snappy

CODECS = [0, 1, 2, 3, 4]
PAYLOADS = [b"", b"x", b"hello world " * 5000, bytes(range(256)) * 700]


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("payload", PAYLOADS, ids=["empty", "one", "text", "binary"])
def test_round_trip(codec: int, payload: bytes) -> None:
    packed = compress(codec, payload)
    assert decompress(codec, packed) == payload
    assert decompress(codec, memoryview(packed)) == payload


@settings(max_examples=60, deadline=None)
@given(codec=st.sampled_from(CODECS), payload=st.binary(max_size=5000))
def test_round_trip_property(codec: int, payload: bytes) -> None:
    assert decompress(codec, compress(codec, payload)) == payload


def test_snappy_xerial_layout() -> None:
    payload = b"abc" * 30000  # > 32 KiB: several xerial blocks
    packed = compress(2, payload)
    assert packed[:8] == XERIAL_MAGIC == b"\x82SNAPPY\x00"
    assert struct.unpack(">ii", packed[8:16]) == (1, 1)
    assert is_xerial_snappy(packed)
    # walk the blocks by hand: int32 length + raw snappy each
    pos, out = 16, b""
    while pos < len(packed):
        (n,) = struct.unpack_from(">i", packed, pos)
        out += bytes(cramjam.snappy.decompress_raw(packed[pos + 4 : pos + 4 + n]))
        pos += 4 + n
    assert out == payload
    assert len(out) > 2 * 32 * 1024


def test_snappy_raw_is_accepted() -> None:
    payload = b"librdkafka writes raw snappy " * 100
    raw = compress(2, payload, xerial=False)
    assert not is_xerial_snappy(raw)
    assert decompress(2, raw) == payload


def test_snappy_concatenated_xerial_streams() -> None:
    a, b = b"first " * 100, b"second " * 100
    assert decompress(2, compress(2, a) + compress(2, b)) == a + b


def test_snappy_xerial_block_overrun_is_reported() -> None:
    packed = bytearray(compress(2, b"abc" * 100))
    struct.pack_into(">i", packed, 16, 10_000)
    with pytest.raises(CorruptInputError) as info:
        decompress(2, bytes(packed), position=1000)
    assert info.value.kind == "decompression_error"
    assert info.value.position == 1016


def test_gzip_is_standard_and_multi_member() -> None:
    assert gzip.decompress(compress(1, b"payload")) == b"payload"
    assert decompress(1, gzip.compress(b"a") + gzip.compress(b"b")) == b"ab"


def test_lz4_is_a_frame_with_independent_blocks() -> None:
    packed = compress(3, b"q" * 100_000)
    assert packed[:4] == b"\x04\x22\x4d\x18"
    flg = packed[4]
    assert flg >> 6 == 1  # frame version 01
    assert flg & 0x20  # block independence, as Kafka's Lz4BlockOutputStream writes


def test_lz4_bad_header_checksum_only_tolerated_for_magic0() -> None:
    payload = b"old kafka lz4 " * 50
    packed = bytearray(compress(3, payload))
    hc_at = 6 + (8 if packed[4] & 0x08 else 0)
    packed[hc_at] ^= 0x5A
    with pytest.raises(CorruptInputError) as info:
        decompress(3, bytes(packed), magic=1)
    assert info.value.kind == "decompression_error"
    assert decompress(3, bytes(packed), magic=0) == payload


def test_zstd_multiple_frames() -> None:
    assert decompress(4, compress(4, b"one") + compress(4, b"two")) == b"onetwo"


@pytest.mark.parametrize("codec", [1, 2, 3, 4])
@pytest.mark.parametrize("garbage", [b"", b"\x07", b"not compressed at all" * 3, b"\xff" * 64])
def test_garbage_raises_decompression_error(codec: int, garbage: bytes) -> None:
    with pytest.raises(CorruptInputError) as info:
        decompress(codec, garbage, position=77)
    assert info.value.kind == "decompression_error"
    assert info.value.position >= 77


@pytest.mark.parametrize("codec", [1, 2, 3, 4])
def test_truncated_stream_raises(codec: int) -> None:
    packed = compress(codec, bytes(range(256)) * 64)
    with pytest.raises(CorruptInputError) as info:
        decompress(codec, packed[: len(packed) // 2])
    assert info.value.kind == "decompression_error"


@pytest.mark.parametrize("codec", [5, 6, 7, -1])
def test_unknown_codec(codec: int) -> None:
    with pytest.raises(CorruptInputError) as info:
        decompress(codec, b"abc", position=5)
    assert (info.value.kind, info.value.position) == ("decompression_error", 5)
    with pytest.raises(ValueError):
        compress(codec, b"abc")
