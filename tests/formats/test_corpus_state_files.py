"""Real-broker corpus: state files decoded by us versus what Kafka's own tools printed.

Oracles: ``kafka-dump-log`` text (``--transaction-log-decoder`` payloads, producer-snapshot
lines, ``.txnindex`` lines, batch positions), ``tools/offsets.json`` (high watermarks read
through the Kafka protocol) and the broker's own directory listing.
"""

from __future__ import annotations

import re
import struct
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.realcorpus import (
    SCENARIOS,
    DumpedFile,
    dump_log,
    dumped_partitions,
    needs_corpus,
    offsets_json,
    scenario_dir,
)
from txn_audit.formats.checkpoint import (
    decode_leader_epoch_checkpoint,
    decode_offset_checkpoint,
    decode_partition_metadata,
    decode_properties,
)
from txn_audit.formats.layout import (
    LOG_DIR_FILES,
    PARTITION_FILES,
    REPLICATION_OFFSET_CHECKPOINT,
    TRANSACTION_STATE_TOPIC,
    parse_log_file_name,
    parse_partition_dir,
    segment_file_name,
)
from txn_audit.formats.model import TxnLogValue
from txn_audit.formats.offset_index import batch_boundaries, decode_offset_index, decode_time_index
from txn_audit.formats.primitives import Reader
from txn_audit.formats.snapshot import decode_producer_snapshot, first_sequence, has_batch_metadata
from txn_audit.formats.txn_state import decode_txn_log_key, decode_txn_log_value, txn_partition_for
from txn_audit.formats.txnindex import decode_txn_index, decode_txn_index_columns

pytestmark = needs_corpus

_PAYLOAD = re.compile(
    r"producerId:(-?\d+),producerEpoch:(-?\d+),state=(\w+),partitions=\[(.*)\],"
    r"txnLastUpdateTimestamp=(-?\d+),txnTimeoutMs=(-?\d+)"
)


# -- a deliberately tiny, test-local walker of uncompressed v2 .log files ----------------


def _records(data: bytes) -> Iterator[tuple[int, bytes | None, bytes | None]]:
    """``(offset, key, value)`` of every data record of uncompressed magic-2 batches."""
    pos = 0
    while pos + 12 <= len(data):
        base_offset, length = struct.unpack_from(">qi", data, pos)
        end = pos + 12 + length
        assert length >= 49 and end <= len(data), f"bad frame at {pos}"
        assert data[pos + 16] == 2, "only magic 2 is expected here"
        (attributes,) = struct.unpack_from(">h", data, pos + 21)
        assert attributes & 0x07 == 0, "__transaction_state is never compressed"
        (count,) = struct.unpack_from(">i", data, pos + 57)
        if not attributes & 0x20:  # control batches carry no key/value records
            r = Reader(data, pos + 61, end)
            for _ in range(count):
                size = r.varint()
                stop = r.pos + size
                r.int8()  # attributes
                r.varlong()  # timestamp delta
                offset_delta = r.varint()
                key = r.varint_bytes()
                value = r.varint_bytes()
                for _ in range(r.varint()):
                    r.varint_bytes()
                    r.varint_bytes()
                assert r.pos == stop
                yield base_offset + offset_delta, key, value
            assert r.pos == end
        pos = end
    assert pos == len(data)


def _sections(kind: str) -> list[tuple[str, DumpedFile]]:
    out = []
    for scenario in SCENARIOS:
        for partition in dumped_partitions(scenario):
            for dumped in dump_log(scenario, partition):
                if dumped.path.endswith(kind):
                    out.append((scenario, dumped))
    return out


def _ids(cases: list[tuple[str, DumpedFile]]) -> list[str]:
    return [f"{s}:{d.path.removeprefix('logdirs/')}" for s, d in cases]


TXN_LOGS = [c for c in _sections(".log") if c[1].path.split("/")[1].startswith(TRANSACTION_STATE_TOPIC)]
SNAPSHOTS = _sections(".snapshot")
TXN_INDEXES = _sections(".txnindex")
LOGS = _sections(".log")


def _as_text(v: TxnLogValue | None) -> tuple[object, ...] | str:
    if v is None:
        return "<DELETE>"
    parts = set()
    # DumpLogSegments prints the partitions of TransactionMetadata, which ignores them for Empty
    if v.state != "Empty" and v.topic_partitions:
        parts = {(tp.topic, p) for tp in v.topic_partitions for p in tp.partitions}
    return (v.producer_id, v.producer_epoch, v.state, parts, v.txn_last_update_timestamp, v.txn_timeout_ms)


def _payload(text: str) -> tuple[object, ...] | str:
    if text == "<DELETE>":
        return text
    m = _PAYLOAD.fullmatch(text)
    assert m, text
    pid, epoch, state, parts, last, timeout = m.groups()
    tps = {(t, int(p)) for t, p in (x.rsplit("-", 1) for x in parts.split(",") if x)}
    return (int(pid), int(epoch), state, tps, int(last), int(timeout))


@pytest.mark.parametrize(("scenario", "dumped"), TXN_LOGS, ids=_ids(TXN_LOGS))
def test_transaction_log_records_match_decoder_text(scenario: str, dumped: DumpedFile) -> None:
    data = (scenario_dir(scenario) / dumped.path).read_bytes()
    ours = list(_records(data))
    theirs = [rec for b in dumped.batches for rec in b.records]
    assert [o for o, _, _ in ours] == [int(rec["offset"]) for rec in theirs]
    partition = int(dumped.path.split("/")[1].rsplit("-", 1)[1])
    for (offset, key, value), rec in zip(ours, theirs, strict=True):
        assert key is not None
        k = decode_txn_log_key(key)
        assert rec["key"] == f"transaction_metadata::transactionalId={k.transactional_id}"
        assert int(rec["keySize"]) == len(key)
        assert int(rec["valueSize"]) == (-1 if value is None else len(value))
        v = decode_txn_log_value(value)
        assert _as_text(v) == _payload(rec["payload"]), f"offset {offset}"
        assert v is None or (v.version == 0 and v.unknown_tags == ())  # 3.6 writes v0 only
        # the coordinator put it where the hash says (3 partitions in every scenario)
        assert txn_partition_for(k.transactional_id, 3) == partition


def test_compacted_away_transaction_records_decode() -> None:
    """The ``.log.deleted`` files of ``healthy`` hold pre-compaction history: all of it decodes."""
    n = 0
    for path in sorted(scenario_dir("healthy").glob(f"logdirs/{TRANSACTION_STATE_TOPIC}-*/*.log.deleted")):
        for _, key, value in _records(path.read_bytes()):
            assert key is not None
            decode_txn_log_key(key)
            v = decode_txn_log_value(value)
            assert v is not None and v.state_code in range(6)
            n += 1
    assert n > 100


def _opt(text: str) -> int:
    return -1 if text == "OptionalLong.empty" else int(text.removeprefix("OptionalLong[").removesuffix("]"))


@pytest.mark.parametrize(("scenario", "dumped"), SNAPSHOTS, ids=_ids(SNAPSHOTS))
def test_producer_snapshots_match_dump(scenario: str, dumped: DumpedFile) -> None:
    snap = decode_producer_snapshot((scenario_dir(scenario) / dumped.path).read_bytes())
    assert snap.crc_ok and snap.version == 1
    assert len(snap.entries) == len(dumped.lines)
    for e, line in zip(snap.entries, dumped.lines, strict=True):
        assert e.producer_id == int(line["producerId"])
        assert e.producer_epoch == int(line["producerEpoch"])
        assert e.coordinator_epoch == int(line["coordinatorEpoch"])
        assert e.current_txn_first_offset == _opt(line["currentTxnFirstOffset"])
        assert e.timestamp == int(line["lastTimestamp"])
        assert has_batch_metadata(e) == ("lastOffset" in line)
        if has_batch_metadata(e):
            assert e.last_sequence == int(line["lastSequence"])
            assert e.last_offset == int(line["lastOffset"])
            assert e.offset_delta == int(line["offsetDelta"])
            assert e.timestamp == int(line["timestamp"])
            assert first_sequence(e) == int(line["firstSequence"])


def test_every_snapshot_file_has_a_valid_crc() -> None:
    """Including the ``.snapshot.deleted`` files and ``__cluster_metadata``'s, never dumped."""
    paths = [p for s in SCENARIOS for p in scenario_dir(s).glob("logdirs/*/*.snapshot*")]
    assert len(paths) > len(SNAPSHOTS)
    for path in paths:
        assert decode_producer_snapshot(path.read_bytes()).crc_ok, path


@pytest.mark.parametrize(("scenario", "dumped"), TXN_INDEXES, ids=_ids(TXN_INDEXES))
def test_txn_indexes_match_dump(scenario: str, dumped: DumpedFile) -> None:
    name = parse_log_file_name(Path(dumped.path).name)
    assert name is not None
    data = (scenario_dir(scenario) / dumped.path).read_bytes()
    entries, issues = decode_txn_index(data, segment_base_offset=name.base_offset)
    printed = [tuple(int(line[k]) for k in ("version", "producerId", "firstOffset", "lastOffset", "lastStableOffset"))
               for line in dumped.lines]
    assert issues == []
    assert [(e.version, e.producer_id, e.first_offset, e.last_offset, e.last_stable_offset) for e in entries] == printed
    columns, column_issues = decode_txn_index_columns(data, segment_base_offset=name.base_offset)
    assert column_issues == []
    assert list(zip(columns.version.tolist(), columns.producer_id.tolist(), columns.first_offset.tolist(),
                    columns.last_offset.tolist(), columns.last_stable_offset.tolist(), strict=True)) == printed


@pytest.mark.parametrize(("scenario", "dumped"), LOGS, ids=_ids(LOGS))
def test_indexes_point_into_the_dumped_log(scenario: str, dumped: DumpedFile) -> None:
    """Every ``.index`` entry is (last offset, position) of a dumped batch; ``.timeindex``
    offsets fall inside the file's batches."""
    log = scenario_dir(scenario) / dumped.path
    name = parse_log_file_name(log.name)
    assert name is not None
    by_position = {int(b.fields["position"]): b.fields for b in dumped.batches}
    entries, issues = decode_offset_index(
        log.with_suffix(".index").read_bytes(), base_offset=name.base_offset
    )
    assert issues == []
    for e in entries:
        assert int(by_position[e.position]["lastOffset"]) == e.offset
    assert set(batch_boundaries(entries)) <= set(by_position)
    tentries, tissues = decode_time_index(log.with_suffix(".timeindex").read_bytes(), base_offset=name.base_offset)
    assert tissues == []
    if dumped.batches:
        first = int(dumped.batches[0].fields["baseOffset"])
        last = int(dumped.batches[-1].fields["lastOffset"])
        assert all(first <= t.offset <= last for t in tentries)
    else:
        assert entries == [] and tentries == []


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_checkpoints_and_properties(scenario: str) -> None:
    logdirs = scenario_dir(scenario) / "logdirs"
    hw = decode_offset_checkpoint((logdirs / REPLICATION_OFFSET_CHECKPOINT).read_text())
    for name, info in offsets_json(scenario).items():
        assert hw.entries[(info["topic"], info["partition"])] == info["high_watermark"], name
    for f in ("recovery-point-offset-checkpoint", "log-start-offset-checkpoint", "cleaner-offset-checkpoint"):
        text = (logdirs / f).read_text()
        cp = decode_offset_checkpoint(text)  # 3.6 leaves cleaner-offset-checkpoint at 0 bytes
        assert cp.version == 0 and (text != "" or cp.entries == {})
    props = decode_properties((logdirs / "meta.properties").read_text())
    assert props["node.id"] == "1" and props["version"] == "1" and props["cluster.id"]
    for d in logdirs.iterdir():
        if d.is_dir():
            meta = decode_partition_metadata((d / "partition.metadata").read_text())
            assert meta["version"] == "0" and len(meta["topic_id"]) == 22
            epochs = decode_leader_epoch_checkpoint((d / "leader-epoch-checkpoint").read_text())
            assert all(e >= 0 and o >= 0 for e, o in epochs)


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_every_name_under_logdirs_is_recognised(scenario: str) -> None:
    logdirs = scenario_dir(scenario) / "logdirs"
    statuses = set()
    for child in sorted(logdirs.iterdir()):
        if not child.is_dir():
            assert child.name in LOG_DIR_FILES, child.name
            continue
        parsed = parse_partition_dir(child.name)
        assert parsed is not None and parsed.status == "live", child.name
        assert f"{parsed.topic}-{parsed.partition}" == child.name
        for f in sorted(child.iterdir()):
            name = parse_log_file_name(f.name)
            if name is None:
                assert f.name in PARTITION_FILES, f
                continue
            suffix = "" if name.status == "live" else f".{name.status}"
            assert segment_file_name(name.base_offset, name.kind) + suffix == f.name
            if parsed.topic == TRANSACTION_STATE_TOPIC:
                statuses.add(name.status)
    if scenario == "healthy":
        assert "deleted" in statuses
