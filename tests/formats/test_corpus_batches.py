"""Every real ``.log`` file decodes exactly as Kafka's own kafka-dump-log printed it."""

from __future__ import annotations

import mmap

import pytest

from tests.formats._corpus import dumped_log_files, ids, log_path
from tests.realcorpus import DumpedFile, needs_corpus
from txn_audit.formats.model import BatchHeader, DecodeIssue
from txn_audit.formats.record_batch import control_marker_of, decode_records
from txn_audit.formats.segment import iter_batches

pytestmark = needs_corpus

CASES = dumped_log_files()


def _bool(text: str) -> bool:
    assert text in ("true", "false")
    return text == "true"


def _batch_fields(h: BatchHeader) -> dict[str, object]:
    """Our header in kafka-dump-log's vocabulary."""
    return {
        "baseOffset": h.base_offset,
        "lastOffset": h.last_offset,
        "count": h.record_count,
        "baseSequence": h.base_sequence,
        "lastSequence": h.last_sequence,
        "producerId": h.producer_id,
        "producerEpoch": h.producer_epoch,
        "partitionLeaderEpoch": h.partition_leader_epoch,
        "isTransactional": h.is_transactional,
        "isControl": h.is_control,
        "deleteHorizonMs": f"OptionalLong[{h.delete_horizon_ms}]" if h.has_delete_horizon else "OptionalLong.empty",
        "position": h.position,
        ("LogAppendTime" if h.timestamp_type else "CreateTime"): h.max_timestamp,
        "size": h.size_bytes,
        "magic": h.magic,
        "compresscodec": h.codec_name,
        "crc": h.stored_crc,
        "isvalid": h.size_bytes >= 61 and h.crc_ok,
    }


def _dumped_fields(fields: dict[str, str]) -> dict[str, object]:
    out: dict[str, object] = {}
    for key, text in fields.items():
        if key in ("isTransactional", "isControl", "isvalid"):
            out[key] = _bool(text)
        elif key in ("deleteHorizonMs", "compresscodec"):
            out[key] = text
        else:
            out[key] = int(text)
    return out


@pytest.mark.skipif(not CASES, reason="no dumped .log files")
def test_corpus_has_every_codec() -> None:
    codecs = {b.fields["compresscodec"] for _, d in CASES for b in d.batches}
    assert codecs == {"none", "gzip", "snappy", "lz4", "zstd"}


@pytest.mark.parametrize(("scenario", "dumped"), CASES, ids=ids(CASES))
def test_file_matches_dump_log(scenario: str, dumped: DumpedFile) -> None:
    path = log_path(scenario, dumped)
    data = path.read_bytes()
    items = list(iter_batches(data))
    issues = [i for i in items if isinstance(i, DecodeIssue)]
    assert issues == []
    headers = [i for i in items if isinstance(i, BatchHeader)]
    assert len(headers) == len(dumped.batches)
    is_data_topic = "__transaction_state" not in dumped.path and "__cluster_metadata" not in dumped.path
    for header, expected in zip(headers, dumped.batches, strict=True):
        assert _batch_fields(header) == _dumped_fields(expected.fields)
        records = decode_records(data, header)
        assert len(records) == len(expected.records)
        for record, line in zip(records, expected.records, strict=True):
            assert record.offset == int(line["offset"])
            assert record.timestamp == int(line["CreateTime"])
            assert (-1 if record.key is None else len(record.key)) == int(line["keySize"])
            assert (-1 if record.value is None else len(record.value)) == int(line["valueSize"])
            assert record.sequence == int(line["sequence"])
            assert line["headerKeys"] == "[" + ", ".join(h.key for h in record.headers) + "]"
            if is_data_topic and "payload" in line:
                assert record.key is not None and record.key.decode() == line["key"]
                assert record.value is not None and record.value.decode() == line["payload"]
        if header.is_control:
            marker = control_marker_of(data, header)
            assert marker is not None
            (line,) = expected.records
            assert marker.marker_type == line["endTxnMarker"]
            assert marker.coordinator_epoch == int(line["coordinatorEpoch"])
            assert marker.offset == header.base_offset == header.last_offset
            assert (marker.producer_id, marker.producer_epoch) == (header.producer_id, header.producer_epoch)
            assert header.size_bytes == 78
        else:
            assert all("endTxnMarker" not in line for line in expected.records)


@pytest.mark.parametrize(("scenario", "dumped"), CASES[:8], ids=ids(CASES[:8]))
def test_mmap_and_memoryview_inputs_agree(scenario: str, dumped: DumpedFile) -> None:
    path = log_path(scenario, dumped)
    data = path.read_bytes()
    from_bytes = list(iter_batches(data))
    assert list(iter_batches(memoryview(data))) == from_bytes
    if not data:
        return
    with path.open("rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        assert list(iter_batches(mm)) == from_bytes
        headers = [h for h in from_bytes if isinstance(h, BatchHeader)]
        assert [decode_records(mm, h) for h in headers] == [decode_records(data, h) for h in headers]
