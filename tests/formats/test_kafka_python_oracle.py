"""kafka-python's independent decoder (``kafka.record.MemoryRecords``) agrees with ours.

The test venv has no python-snappy / lz4 / zstandard, so kafka-python's codec hooks are pointed
at cramjam's *raw* primitives (``snappy.decompress_raw`` etc.). kafka-python's own framing code
(xerial detection, batch and record parsing, CRC) stays in play; only the codec kernels are
shared with us.
"""

from __future__ import annotations

import collections
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import cramjam
import pytest

from tests.formats._corpus import dumped_log_files, ids, log_path
from tests.realcorpus import DumpedFile, needs_corpus
from txn_audit.formats.model import BatchHeader, Record, RecordHeader
from txn_audit.formats.record_batch import decode_records, encode_batch
from txn_audit.formats.segment import iter_batches

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")  # kafka-python import noise

CASES = dumped_log_files()


@pytest.fixture
def kafka_codecs(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    import kafka.codec as kc
    import kafka.record.default_records as dr

    def lz4_decode(data: bytes) -> bytes:
        return bytes(cramjam.lz4.decompress(data))

    def zstd_decode(data: bytes) -> bytes:
        return bytes(cramjam.zstd.decompress(data))

    monkeypatch.setattr(
        kc,
        "snappy",
        SimpleNamespace(
            decompress=lambda b: bytes(cramjam.snappy.decompress_raw(bytes(b))),
            compress=lambda b: bytes(cramjam.snappy.compress_raw(bytes(b))),
        ),
    )
    monkeypatch.setattr(kc, "lz4", SimpleNamespace())
    monkeypatch.setattr(kc, "zstd", SimpleNamespace())
    monkeypatch.setattr(dr, "lz4_decode", lz4_decode)
    monkeypatch.setattr(dr, "zstd_decode", zstd_decode)
    yield


def _their_batches(data: bytes) -> list[Any]:
    from kafka.record import MemoryRecords

    out = []
    records = MemoryRecords(data)
    while records.has_next():
        out.append(records.next_batch())
    return out


def _compare(data: bytes, codecs_seen: collections.Counter[str]) -> None:
    ours = [h for h in iter_batches(data) if isinstance(h, BatchHeader)]
    theirs = _their_batches(data)
    assert len(ours) == len(theirs)
    for h, b in zip(ours, theirs, strict=True):
        assert b.validate_crc() is True  # must run before iterating
        assert h.crc_ok
        assert h.base_offset == b.base_offset
        assert h.last_offset == b.last_offset
        assert h.producer_id == b.producer_id
        assert h.producer_epoch == b.producer_epoch
        assert h.base_sequence == b.base_sequence
        assert h.last_sequence == b.last_sequence
        assert h.is_transactional == b.is_transactional
        assert h.is_control == b.is_control_batch
        assert h.partition_leader_epoch == b.leader_epoch
        assert h.record_count == b.records_count
        assert h.max_timestamp == b.max_timestamp
        assert h.first_timestamp == b.first_timestamp
        assert h.compression == b.compression_type
        assert h.timestamp_type == b.timestamp_type
        assert h.stored_crc == b.crc
        assert h.size_bytes == b.size_in_bytes
        mine = decode_records(data, h)
        theirs_records = list(b)
        assert len(mine) == len(theirs_records)
        for r, t in zip(mine, theirs_records, strict=True):
            assert r.offset == t.offset
            assert r.timestamp == t.timestamp
            assert r.key == t.key
            assert r.value == t.value
            assert [(x.key, x.value) for x in r.headers] == list(t.headers)
        codecs_seen[h.codec_name] += 1


@needs_corpus
@pytest.mark.parametrize(("scenario", "dumped"), CASES, ids=ids(CASES))
def test_real_file_agrees_with_kafka_python(kafka_codecs: None, scenario: str, dumped: DumpedFile) -> None:
    _compare(log_path(scenario, dumped).read_bytes(), collections.Counter())


@needs_corpus
def test_every_codec_is_compared(kafka_codecs: None) -> None:
    seen: collections.Counter[str] = collections.Counter()
    for scenario, dumped in CASES:
        _compare(log_path(scenario, dumped).read_bytes(), seen)
    assert set(seen) == {"none", "gzip", "snappy", "lz4", "zstd"}


@pytest.mark.parametrize("codec", [0, 1, 2, 3, 4])
@pytest.mark.parametrize("xerial", [True, False])
def test_our_encoder_is_read_by_kafka_python(kafka_codecs: None, codec: int, xerial: bool) -> None:
    """The other direction (synthetic, runs without the corpus too): kafka-python reads our
    batches, including xerial-framed snappy, which the real corpus does not contain."""
    records = [
        Record(100 + i, 1_700_000_000_000 + 3 * i, f"k{i}".encode(), b"v" * (i * 700), (RecordHeader("h", b"x"),))
        for i in range(40)
    ]
    data = encode_batch(
        records,
        base_offset=100,
        producer_id=7,
        producer_epoch=2,
        base_sequence=2**31 - 5,
        is_transactional=True,
        compression=codec,
        xerial_snappy=xerial,
    )
    _compare(data, collections.Counter())
    (batch,) = _their_batches(data)
    assert [r.offset for r in batch] == [r.offset for r in records]
