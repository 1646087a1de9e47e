"""kafka-dump-log text read back into the binary decoders' values.

(a) The real oracle: every realcorpus ``tools/dump-log`` file parses into exactly what the
binary decoders give for the matching ``logdirs/`` files. (b) One fixture per tool-output
variant (2.4 → 4.2), each derived from the 3.6.2 corpus text per ``DumpLogSegments`` at that
tag. (c) Lines that do not parse become issues with their line numbers. (d) ``--offsets-decoder``
dumps of ``__consumer_offsets``: every real one in ``tests/corpus`` gives the binary decoder's
offset commits of the same ``.log``, and one rendering per tool-output form.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.realcorpus import SCENARIOS, needs_corpus, scenario_dir
from txn_audit.formats.consumer_offsets import decode_offset_commit_value, decode_offsets_key
from txn_audit.formats.dumplog_text import (
    DumpSection,
    TextBatch,
    TextOffsetCommit,
    iter_dump_log,
    parse_dump_log,
    section_of,
)
from txn_audit.formats.layout import TRANSACTION_STATE_TOPIC
from txn_audit.formats.model import (
    AbortedTxn,
    BatchHeader,
    GroupMetadataKey,
    IssueKind,
    OffsetCommitKey,
    OffsetCommitValue,
)
from txn_audit.formats.record_batch import decode_records
from txn_audit.formats.segment import iter_batches

FIXTURES = Path(__file__).parent / "fixtures" / "dumplog"


# -- (a) the 3.6.2 realcorpus text (field by field against the binary: test_dumplog_real.py) ----


def _dump_files() -> list[tuple[str, Path]]:
    return [(s, p) for s in SCENARIOS for p in sorted((scenario_dir(s) / "tools" / "dump-log").glob("*.txt"))]


DUMP_FILES = _dump_files()


@needs_corpus
def test_realcorpus_covers_every_row_kind() -> None:
    totals = {"batches": 0, "markers": 0, "txn_log": 0, "snapshots": 0, "aborted_txns": 0}
    for _, path in DUMP_FILES:
        parsed = parse_dump_log(path)
        for name in totals:
            totals[name] += len(getattr(parsed, name))
    assert all(n > 0 for n in totals.values()), totals
    assert {b.codec for _, p in DUMP_FILES for b in parse_dump_log(p).batches} == {
        "none", "gzip", "snappy", "lz4", "zstd"
    }


@needs_corpus
def test_streaming_matches_whole_file() -> None:
    scenario, path = next((s, p) for s, p in DUMP_FILES if p.stem.startswith("orders"))
    with path.open("rb") as fh:
        items = list(iter_dump_log(fh, file=path.name))
    parsed = parse_dump_log(path)
    assert [i for i in items if isinstance(i, TextBatch)] == parsed.batches


# -- (b) one fixture per format variant -------------------------------------------------

#: fixture → (Kafka versions its features allow, first timestamp of a no-batch snapshot entry known,
#:            deleteHorizonMs printed, tombstone present, JSON payloads). Real output of 2.8.2, 3.6.2,
#: 3.9.2, 4.0.2, 4.1.2 and 4.4.0 is checked in test_dumplog_real.py; a fixture stays for a release
#: the corpus lacks, and 4.1.0 for what no real dump holds (its header says what).
VARIANTS = {
    "2.4.0": (("2.4", "2.4"), False, False, False, False),
    "2.4.1": (("2.4", "2.4"), False, False, True, False),
    "3.0.0": (("3.0", "3.0"), False, False, True, False),
    "3.2.0": (("3.2", "3.2"), True, True, True, False),
    "3.3.0": (("3.3", "3.4"), True, True, True, False),
    "3.5.0": (("3.5", "4.0"), True, True, True, False),
    "4.1.0": (("4.1", "4.4"), True, True, True, True),
}

_TXN_ROWS = [  # offset, state, epoch, partitions, last update, start timestamp (JSON only)
    (0, "Empty", 0, None, 1795377901583, -1),
    (1, "Ongoing", 0, [("tmo", 0), ("tmo", 1)], 1795377901654, 1795377901654),
    (2, "PrepareAbort", 1, [("tmo", 0), ("tmo", 1)], 1795377915001, 1795377901654),
    (3, "CompleteAbort", 1, [], 1795377915006, 1795377901654),
]


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_fixture_variant(variant: str) -> None:
    versions, snapshot_ts_known, has_dh, has_tombstone, is_json = VARIANTS[variant]
    path = FIXTURES / f"{variant}.txt"
    assert path.read_text().startswith(f"# Follows DumpLogSegments.scala at Kafka {variant}")
    parsed = parse_dump_log(path)
    assert parsed.issues == []
    assert parsed.kafka_versions() == versions

    kinds = [(s.topic, s.partition, s.kind) for s in parsed.sections]
    assert kinds == [
        (TRANSACTION_STATE_TOPIC, 0, "log"), ("tmo", 0, "log"), ("tmo", 0, "txnindex"), ("tmo", 0, "index"),
        ("tmo", 0, "snapshot"), ("hang", 1, "snapshot"),
    ]

    # batches: every field of the batch line, the first timestamp from the first record line
    data = [b for b in parsed.batches if b.section.topic == "tmo"]
    assert [(b.base_offset, b.last_offset, b.record_count, b.position, b.size_bytes) for b in data] == [
        (0, 9, 10, 0, 291), (10, 10, 1, 291, 78)
    ]
    first = data[0]
    assert (first.producer_id, first.producer_epoch, first.base_sequence, first.last_sequence) == (0, 0, 0, 9)
    assert (first.codec, first.timestamp_type, first.is_transactional, first.is_control) == (
        "none", "CreateTime", True, False
    )
    assert (first.first_timestamp, first.max_timestamp, first.stored_crc, first.crc_ok) == (
        1795377901631, 1795377901631, 1845305370, True
    )
    assert first.computed_crc == first.stored_crc
    assert first.delete_horizon_ms == (-1 if has_dh else None)
    assert [r.offset for r in first.records] == list(range(10))
    assert [r.sequence for r in first.records] == list(range(10))
    assert first.records[5].key == "k10" and first.records[5].payload == "uncommitted-10"

    (marker,) = parsed.markers
    assert (marker.offset, marker.producer_id, marker.producer_epoch, marker.marker_type, marker.control_type,
            marker.coordinator_epoch, marker.timestamp, marker.position) == (
        10, 0, 1, "ABORT", 0, 0, 1795377915015, 291
    )

    # coordinator records
    rows = [t for t in parsed.txn_log if t.transactional_id == "tmo-txn"]
    assert [(t.offset, t.state, t.producer_epoch, None if t.topic_partitions is None else sorted(t.topic_partitions),
             t.txn_last_update_timestamp) for t in rows if not t.tombstone] == [r[:5] for r in _TXN_ROWS]
    assert all((t.producer_id, t.txn_timeout_ms, t.key_version) == (0, 10000, 0) for t in rows if not t.tombstone)
    assert [t.state_code for t in rows if not t.tombstone] == [0, 1, 3, 5]
    tombstones = [t for t in rows if t.tombstone]
    assert [(t.offset, t.producer_id, t.state) for t in tombstones] == ([(4, None, None)] if has_tombstone else [])
    if is_json:
        assert [t.txn_start_timestamp for t in rows if not t.tombstone] == [r[5] for r in _TXN_ROWS]
        assert all((t.value_version, t.previous_producer_id, t.next_producer_id, t.next_producer_epoch,
                    t.client_transaction_version) == (0, -1, -1, -1, 0) for t in rows if not t.tombstone)
        (v1,) = [t for t in parsed.txn_log if t.transactional_id == "txnId"]
        assert (v1.value_version, v1.producer_id, v1.previous_producer_id, v1.next_producer_id, v1.producer_epoch,
                v1.next_producer_epoch, v1.txn_timeout_ms, v1.state, v1.txn_last_update_timestamp,
                v1.txn_start_timestamp, v1.client_transaction_version) == (
            1, 12, 11, 10, 2, -1, 14, "Empty", 123, 13, 0
        )
        assert v1.topic_partitions == (("topic1", 0), ("topic1", 1), ("topic1", 2), ("topic2", 3), ("topic2", 4),
                                       ("topic2", 5))
    else:
        assert all(t.value_version is None and t.txn_start_timestamp is None and t.previous_producer_id is None
                   and t.client_transaction_version is None for t in rows)

    # .txnindex
    assert [a.entry for a in parsed.aborted_txns] == [AbortedTxn(0, 0, 0, 10, 11)]

    # producer snapshots: an entry without batch metadata, and an open transaction
    no_batch, open_txn = parsed.snapshots
    assert (no_batch.producer_id, no_batch.producer_epoch, no_batch.coordinator_epoch,
            no_batch.current_txn_first_offset, no_batch.has_batch_metadata) == (0, 1, 0, -1, False)
    assert (no_batch.last_sequence, no_batch.last_offset, no_batch.offset_delta) == (-1, -1, 0)
    assert no_batch.timestamp == (1795377915015 if snapshot_ts_known else None)
    assert (open_txn.producer_id, open_txn.producer_epoch, open_txn.coordinator_epoch,
            open_txn.current_txn_first_offset, open_txn.last_sequence, open_txn.last_offset,
            open_txn.offset_delta, open_txn.timestamp, open_txn.first_sequence) == (
        0, 0, -1, 0, 0, 0, 0, 1795377608971, 0
    )
    assert all(s.crc_ok for s in parsed.snapshots)


def test_json_status_by_name() -> None:
    """Post-4.2 JSON (KAFKA-20712) names the state instead of its code."""
    text = "\n".join([
        "Dumping d/__transaction_state-2/00000000000000000000.log",
        "Log starting offset: 0",
        "baseOffset: 0 lastOffset: 0 count: 1 baseSequence: -1 lastSequence: -1 producerId: -1 producerEpoch: -1 "
        "partitionLeaderEpoch: 0 isTransactional: false isControl: false deleteHorizonMs: OptionalLong.empty "
        "position: 0 CreateTime: 5 size: 120 magic: 2 compresscodec: none crc: 1 isvalid: true",
        '| offset: 0 CreateTime: 5 keySize: 5 valueSize: 40 sequence: -1 headerKeys: [] key: {"type":"0","data":'
        '{"transactionalId":"a b"}} payload: {"version":"1","data":{"producerId":3,"producerEpoch":4,'
        '"transactionTimeoutMs":60000,"transactionStatus":"Ongoing","transactionPartitions":[{"topic":"t",'
        '"partitionIds":[2]}],"transactionLastUpdateTimestampMs":9,"transactionStartTimestampMs":8,'
        '"clientTransactionVersion":2}}',
    ])
    parsed = parse_dump_log(text)
    assert parsed.issues == []
    (t,) = parsed.txn_log
    assert (t.transactional_id, t.state, t.state_code, t.topic_partitions, t.client_transaction_version) == (
        "a b", "Ongoing", 1, (("t", 2),), 2
    )
    assert parsed.sections[0].log_dir == "d"


# -- (c) what the text lacks, and lines that do not parse -------------------------------

_V2 = (
    "baseOffset: {b} lastOffset: {l} count: {c} baseSequence: {bs} lastSequence: {ls} producerId: {p} "
    "producerEpoch: 0 partitionLeaderEpoch: 0 isTransactional: true isControl: {ctl} deleteHorizonMs: "
    "OptionalLong.empty position: {pos} CreateTime: 100 size: {size} magic: 2 compresscodec: none crc: 7 "
    "isvalid: true"
)


def test_garbage_lines_become_issues_with_line_numbers() -> None:
    lines = [
        "stray text before any file",  # 1
        "Dumping /data/kafka/t-0/00000000000000000000.log",  # 2
        "Log starting offset: 0",  # 3
        _V2.format(b=0, l=1, c=2, bs=0, ls=1, p=5, ctl="false", pos=0, size=100),  # 4
        "| offset: 0 CreateTime: 100 keySize: 1 valueSize: 1 sequence: 0 headerKeys: [] key: a payload: b",  # 5
        "this line is garbage",  # 6
        "| offset: 1 CreateTime: 100 keySize: 1 valueSize: 1 sequence: 1 headerKeys: [] key: a payload: b",  # 7
        "baseOffset: 2 lastOffset: oops",  # 8
        "Found 17 invalid bytes at the end of 00000000000000000000.log",  # 9
        "Dumping /data/kafka/t-0/00000000000000000002.snapshot",  # 10
        "producerId: 5 producerEpoch: zero",  # 11
        "Snapshot is corrupt (CRC is no longer valid). Stored crc: 1. Computed crc: 2",  # 12
        "Dumping /data/kafka/t-0/00000000000000000000.txnindex",  # 13
        "version: 0 producerId: 5 firstOffset: 0 lastOffset: 3 lastStableOffset: 0",  # 14
        "version: 0 producerId: 5",  # 15
        "Dumping /data/kafka/t-0/00000000000000000000.timeindex",  # 16
        "timestamp: 100 offset: 1",  # 17
        'Exception in thread "main" java.lang.IllegalStateException: boom',  # 18
        "\tat kafka.tools.DumpLogSegments$.main(DumpLogSegments.scala:1)",  # 19
        "Dumping /data/kafka/t-0/00000000000000000000.index",  # 20
        "offset: 1 position: 0",  # 21
        "/data/kafka/t-0/00000000000000000000.index passed sanity check.",  # 22
        "Non-consecutive offsets in /data/kafka/t-0/00000000000000000000.log",  # 23 (stderr noise)
        "  1 is followed by 3",  # 24
    ]
    parsed = parse_dump_log(lines, file="dump.txt")
    got = [(i.line, i.kind) for i in parsed.issues]
    assert got == [
        (1, IssueKind.UNPARSED_LINE),
        (6, IssueKind.UNPARSED_LINE),
        (8, IssueKind.UNPARSED_LINE),
        (9, IssueKind.TRUNCATED_TAIL),
        (11, IssueKind.UNPARSED_LINE),
        (12, IssueKind.CRC_MISMATCH),
        (15, IssueKind.UNPARSED_LINE),
        (18, IssueKind.INCOMPLETE_TEXT),
    ]
    issue = parsed.issues[1].to_decode_issue()
    assert issue.position == 6 and issue.detail.startswith("line 6: ") and "this line is garbage" in issue.detail
    assert parsed.issues[0].section is None and parsed.issues[1].section == parsed.sections[0]
    # the parseable lines around the garbage still count
    (batch,) = parsed.batches
    assert [r.offset for r in batch.records] == [0, 1]
    assert batch.section.log_dir == "/data/kafka" and batch.section.topic == "t"
    assert len(parsed.aborted_txns) == 1 and parsed.snapshots == []


def test_long_excerpt_is_cut() -> None:
    parsed = parse_dump_log(["Dumping x/t-0/00000000000000000000.txnindex", "x" * 1000])
    (issue,) = parsed.issues
    assert len(issue.excerpt) <= 160 and issue.excerpt.endswith("...")


def test_a_zero_filled_stretch_is_lines_reported_not_a_file_skipped() -> None:
    """A damaged copy of a dump with NUL bytes: each line they spoil is an issue that shows them
    (``\\0``), the lines around it still count."""
    lines = [
        "Dumping /data/kafka/t-0/00000000000000000000.log",  # 1
        "Log starting offset: 0",  # 2
        _V2.format(b=0, l=1, c=2, bs=0, ls=1, p=5, ctl="false", pos=0, size=100),  # 3
        "| offset: 0 CreateTime: 100 keySize: 1 valueSize: 1 sequence: 0 headerKeys: [] key: a payload: b",  # 4
        "\x00" * 30,  # 5
        "| offset: 1 CreateTime: 100 keySize: 1 valueSize: 1 sequence: 1 headerKeys: [] key: a payload: b",  # 6
    ]
    parsed = parse_dump_log(lines, file="dump.txt")
    (issue,) = parsed.issues
    assert (issue.line, issue.kind) == (5, IssueKind.UNPARSED_LINE)
    assert "\x00" not in issue.excerpt and issue.excerpt.startswith("\\0\\0")
    (batch,) = parsed.batches
    assert [r.offset for r in batch.records] == [0, 1]


def test_dump_without_deep_iteration_leaves_markers_unknown() -> None:
    lines = [
        "Dumping logdirs/t-0/00000000000000000000.log",
        "Starting offset: 0",
        _V2.format(b=0, l=1, c=2, bs=0, ls=1, p=5, ctl="false", pos=0, size=100).replace(
            " deleteHorizonMs: OptionalLong.empty", ""
        ),
        _V2.format(b=2, l=2, c=1, bs=-1, ls=-1, p=5, ctl="true", pos=100, size=78).replace(
            " deleteHorizonMs: OptionalLong.empty", ""
        ),
    ]
    parsed = parse_dump_log(lines)
    data, control = parsed.batches
    assert not data.deep and data.first_timestamp is None and data.delete_horizon_ms is None
    (marker,) = parsed.markers
    assert (marker.offset, marker.producer_id, marker.timestamp, marker.position) == (2, 5, 100, 100)
    assert marker.marker_type is None and marker.coordinator_epoch is None and marker.control_type is None
    (issue,) = parsed.issues
    assert issue.kind == IssueKind.INCOMPLETE_TEXT and issue.line == 1 and "marker type" in issue.reason


def test_transaction_state_without_decoder_is_reported() -> None:
    lines = [
        "Dumping logdirs/__transaction_state-0/00000000000000000000.log",
        "Log starting offset: 0",
        _V2.format(b=0, l=0, c=1, bs=-1, ls=-1, p=-1, ctl="false", pos=0, size=116),
        "| offset: 0 CreateTime: 100 keySize: 11 valueSize: 37 sequence: -1 headerKeys: []",
    ]
    parsed = parse_dump_log(lines)
    assert parsed.txn_log == []
    (issue,) = parsed.issues
    assert issue.kind == IssueKind.INCOMPLETE_TEXT and "--transaction-log-decoder" in issue.reason


def test_truncated_text_inside_a_batch() -> None:
    lines = [
        "Dumping logdirs/t-0/00000000000000000000.log",
        "Log starting offset: 0",
        _V2.format(b=0, l=2, c=3, bs=0, ls=2, p=5, ctl="false", pos=0, size=100),
        "| offset: 0 CreateTime: 100 keySize: 1 valueSize: 1 sequence: 0 headerKeys: [] key: a payload: b",
    ]
    parsed = parse_dump_log(lines)
    (issue,) = parsed.issues
    assert issue.kind == IssueKind.INCOMPLETE_TEXT and issue.line == 3 and "count 3 but 1 record lines" in issue.reason


def test_payload_with_newlines_continues_on_the_next_lines() -> None:
    payload = "line one\nline two\n| offset: no"  # 30 bytes, two of them newlines
    text = "\n".join([
        "Dumping logdirs/t-0/00000000000000000000.log",
        "Log starting offset: 0",
        _V2.format(b=0, l=1, c=2, bs=0, ls=1, p=5, ctl="false", pos=0, size=100),
        f"| offset: 0 CreateTime: 100 keySize: 1 valueSize: {len(payload.encode())} sequence: 0 headerKeys: [] "
        f"key: k payload: {payload}",
        "| offset: 1 CreateTime: 101 keySize: -1 valueSize: 1 sequence: 1 headerKeys: [] payload: z",
    ])
    parsed = parse_dump_log(text)
    assert parsed.issues == []
    (batch,) = parsed.batches
    assert [r.payload for r in batch.records] == [payload, "z"]
    assert batch.records[1].key is None and batch.records[1].key_size == -1


def test_record_line_variants_and_control_types() -> None:
    lines = [
        "Dumping logdirs/t-0/00000000000000000000.log",
        "Starting offset: 0",
        # 2.4-2.7 legacy (magic 1) entry: batch line 'offset:' and 'crc ... isvalid' record lines
        "offset: 1 position: 0 CreateTime: 50 size: 90 magic: 1 compresscodec: GZIP crc: 3 isvalid: true",
        "| offset: 0 CreateTime: 40 keysize: -1 valuesize: 2 crc: 11 isvalid: true payload: hi",
        "| offset: 1 CreateTime: 50 keysize: -1 valuesize: 2 crc: 12 isvalid: true payload: ho",
        # 3.0+ legacy record (with the stray '}')
        "offset: 2 position: 90 CreateTime: 60 size: 40 magic: 1 compresscodec: none crc: 4 isvalid: false",
        "| offset: 2 CreateTime: 60 keySize: -1 valueSize: 2 isValid: false crc: 4}",
        # a non-marker control record in a data partition
        _V2.format(b=3, l=3, c=1, bs=-1, ls=-1, p=5, ctl="true", pos=130, size=80),
        "| offset: 3 CreateTime: 100 keySize: 4 valueSize: 6 sequence: -1 headerKeys: [] controlType: LEADER_CHANGE(2)",
    ]
    parsed = parse_dump_log(lines)
    wrapper, broken, control = parsed.batches
    assert (wrapper.base_offset, wrapper.last_offset, wrapper.record_count, wrapper.codec, wrapper.producer_id,
            wrapper.first_timestamp) == (0, 1, 2, "gzip", -1, 40)
    assert (broken.base_offset, broken.crc_ok, broken.computed_crc) == (2, False, None)
    assert control.records[0].control_type == "LEADER_CHANGE(2)"
    assert parsed.markers == []
    assert [(i.line, i.kind) for i in parsed.issues] == [(9, IssueKind.UNEXPECTED_CONTROL)]


def test_section_of_paths() -> None:
    s = section_of(7, "/var/lib/kafka/data/my.topic-with-dash-12/00000000000000000042.log.deleted")
    assert isinstance(s, DumpSection)
    assert (s.topic, s.partition, s.kind, s.status, s.base_offset, s.log_dir) == (
        "my.topic-with-dash", 12, "log", "deleted", 42, "/var/lib/kafka/data"
    )
    assert section_of(1, "00000000000000000000.log").topic is None
    assert section_of(1, "m/__cluster_metadata-0/00000000000000000100-0000000001.checkpoint").kind == "kraft_snapshot"


# -- (d) --offsets-decoder: __consumer_offsets records become offset commits ------------------------

#: offset_commits fields every --offsets-decoder form prints; the forms before 3.8 print nothing else
_OFFSETS_TEXT_FIELDS = ("offset", "record_timestamp", "group_id", "commit_topic", "commit_partition", "tombstone",
                        "committed_offset", "metadata", "is_transactional", "producer_id", "producer_epoch",
                        "position")
_OFFSETS_JSON_ONLY = ("key_version", "value_version", "leader_epoch", "commit_timestamp", "expire_timestamp")


def _kafka_corpus_offsets_dumps() -> list[tuple[str, Path]]:
    from tests.kafkacorpus import scenarios

    return [(s.id, p) for s in scenarios()
            for p in sorted((s.folder / "tools" / "dump-log").glob("__consumer_offsets-*.txt"))]


OFFSETS_DUMPS = _kafka_corpus_offsets_dumps()


def _binary_offset_commits(data: bytes) -> list[dict[str, object]]:
    """What the binary decoder makes of a ``__consumer_offsets`` segment (as ``ingest.worker`` does)."""
    out: list[dict[str, object]] = []
    for h in iter_batches(data):
        if not isinstance(h, BatchHeader) or h.is_control or not h.crc_ok:
            continue
        for r in decode_records(data, h):
            assert r.key is not None
            k = decode_offsets_key(r.key)
            if not isinstance(k, OffsetCommitKey):
                continue
            v = decode_offset_commit_value(r.value)
            out.append({
                "offset": r.offset, "record_timestamp": r.timestamp, "group_id": k.group, "commit_topic": k.topic,
                "commit_partition": k.partition, "key_version": k.version, "tombstone": v is None,
                "value_version": None if v is None else v.version,
                "committed_offset": None if v is None else v.committed_offset,
                "leader_epoch": None if v is None else v.leader_epoch, "metadata": None if v is None else v.metadata,
                "commit_timestamp": None if v is None else v.commit_timestamp,
                "expire_timestamp": None if v is None else v.expire_timestamp,
                "is_transactional": h.is_transactional, "producer_id": h.producer_id,
                "producer_epoch": h.producer_epoch, "position": h.position,
            })
    return out


@pytest.mark.parametrize(("scenario", "path"), OFFSETS_DUMPS, ids=[f"{s}:{p.stem}" for s, p in OFFSETS_DUMPS])
def test_kafka_corpus_offset_commits_equal_binary(scenario: str, path: Path) -> None:
    """Every real ``--offsets-decoder`` dump gives the binary decoder's offset commits of the same files,
    field by field where its form prints the field (the JSON form of 3.8+ prints them all)."""
    parsed = parse_dump_log(path)
    assert parsed.issues == []
    assert parsed.command is not None and "--offsets-decoder" in parsed.command
    version = tuple(int(p) for p in scenario.split("/")[0].split(".")[:2])
    versions = parsed.kafka_versions()
    assert versions is not None
    low, high = (tuple(int(p) for p in v.split(".")) for v in versions)
    assert low <= version <= high
    if parsed.offset_commits:
        assert ("offsets_json" in parsed.features) == (version >= (3, 8))
    json_form = "offsets_json" in parsed.features
    fields = _OFFSETS_TEXT_FIELDS + (_OFFSETS_JSON_ONLY if json_form else ())
    by_section: dict[str, list[TextOffsetCommit]] = {s.path: [] for s in parsed.sections}
    for commit in parsed.offset_commits:
        by_section[commit.section.path].append(commit)
    for section in parsed.sections:
        if section.kind != "log":
            continue
        want = _binary_offset_commits((path.parents[2] / section.path).read_bytes())
        got = by_section[section.path]
        assert [{f: getattr(c, f) for f in fields} for c in got] == [{f: w[f] for f in fields} for w in want]
        if not json_form:  # what the text form does not print stays unknown
            assert all(getattr(c, f) is None for c in got for f in _OFFSETS_JSON_ONLY)


def test_kafka_corpus_has_offset_commits() -> None:
    """The eos scenarios commit offsets in transactions: their dumps must give offset commits."""
    eos = [p for s, p in OFFSETS_DUMPS if s.endswith(("/eos", "/eos-crashed"))]
    if not eos:
        pytest.skip("no eos scenario in tests/corpus yet")
    assert sum(len(parse_dump_log(p).offset_commits) for p in eos) > 0


#: tool version → (kafka_versions of the dump, the key's form)
OFFSETS_VARIANTS = {"2.4.0": (("2.4", "2.4"), "plain"), "2.4.1": (("2.4", "2.7"), "text"),
                    "3.6.2": (("3.3", "3.7"), "text"), "4.1.2": (("3.8", "4.4"), "json")}

_OFFSETS_RECORDS: list[tuple[OffsetCommitKey | GroupMetadataKey, OffsetCommitValue | None]] = [
    (OffsetCommitKey(1, "eos-group", "eos-in", 0), OffsetCommitValue(3, 20, 5, "", 1795611882497, -1)),
    (OffsetCommitKey(0, "g:x,partition=odd", "t.x-y", 12), OffsetCommitValue(1, 7, -1, "m:d,a=1 b", 2000, 9000)),
    (GroupMetadataKey(2, "eos-group"), None),
    (OffsetCommitKey(1, "eos-group", "eos-in", 1), None),
    (OffsetCommitKey(1, "eos-group", "eos-in", 1), OffsetCommitValue(4, 30, -1, "", 1795611882633, -1)),
]


def _offsets_text(variant: str) -> str:
    """A ``__consumer_offsets`` dump of ``_OFFSETS_RECORDS`` (one transactional batch) as
    ``kafka-dump-log --offsets-decoder`` prints it at ``variant`` (``DumpLogSegments.scala``
    ``OffsetsMessageParser`` at 2.4.0, ``GroupMetadataManager.formatRecordKeyAndValue`` at 2.4.1-3.7,
    ``OffsetsMessageParser`` JSON from 3.8 / ``DumpLogSegments.java`` in 4.x)."""
    form = OFFSETS_VARIANTS[variant][1]
    old = variant < "3.0"
    n = len(_OFFSETS_RECORDS)
    lines = ["# $ bin/kafka-dump-log.sh --offsets-decoder --files logdirs/__consumer_offsets-3/00000000000000000000.log",
             "Dumping logdirs/__consumer_offsets-3/00000000000000000000.log",
             "Starting offset: 0" if old else "Log starting offset: 0",
             f"baseOffset: 0 lastOffset: {n - 1} count: {n} baseSequence: 0 lastSequence: {n - 1} producerId: 7 "
             "producerEpoch: 2 partitionLeaderEpoch: 0 isTransactional: true isControl: false"
             + ("" if old else " deleteHorizonMs: OptionalLong.empty")
             + f" position: 0 CreateTime: 1000 size: 500 magic: 2 compresscodec: {'NONE' if old else 'none'} crc: 9 "
             "isvalid: true"]
    for offset, (key, value) in enumerate(_OFFSETS_RECORDS):
        sizes = "keysize: 20 valuesize: {}" if old else "keySize: 20 valueSize: {}"
        line = f"| offset: {offset} CreateTime: {1000 + offset} " + sizes.format(-1 if value is None else 30)
        line += f" sequence: {offset} headerKeys: []"
        if isinstance(key, GroupMetadataKey):
            if form == "plain":
                line += ' key: {"metadata":"eos-group"} payload: {"protocolType":"consumer","protocol":"range",' \
                        '"generationId":1,"assignment":"{}"}'
            elif form == "text":
                line += " key: group_metadata::group=eos-group payload: <DELETE>"
            else:
                line += ' key: {"type":"2","data":{"group":"eos-group"}} payload: <DELETE>'
        elif form == "plain":
            if value is not None:  # a deleted offset is printed with neither key nor payload
                line += f" key: offset::{key.group}:{key.topic}:{key.partition} payload: {value.committed_offset}"
                line += f":{value.metadata}" if value.metadata else ""
        elif form == "text":
            line += f" key: offset_commit::group={key.group},partition={key.topic}-{key.partition} payload: "
            if value is None:
                line += "<DELETE>"
            else:
                line += f"offset={value.committed_offset}" + (f",metadata={value.metadata}" if value.metadata else "")
        else:
            compact = {"separators": (",", ":")}
            line += " key: " + json.dumps({"type": str(key.version), "data": {
                "group": key.group, "topic": key.topic, "partition": key.partition}}, **compact)
            if value is None:
                line += " payload: <DELETE>"
            else:
                data: dict[str, object] = {"offset": value.committed_offset}
                if value.version >= 3:
                    data["leaderEpoch"] = value.leader_epoch
                data |= {"metadata": value.metadata, "commitTimestamp": value.commit_timestamp}
                if value.version == 1:
                    data["expireTimestamp"] = value.expire_timestamp
                line += " payload: " + json.dumps({"version": str(value.version), "data": data}, **compact)
        lines.append(line)
    return "\n".join(lines)


@pytest.mark.parametrize("variant", sorted(OFFSETS_VARIANTS))
def test_offsets_decoder_forms(variant: str) -> None:
    versions, form = OFFSETS_VARIANTS[variant]
    parsed = parse_dump_log(_offsets_text(variant))
    assert parsed.kafka_versions() == versions
    fields = _OFFSETS_TEXT_FIELDS + (_OFFSETS_JSON_ONLY if form == "json" else ())
    want = []
    for offset, (key, value) in enumerate(_OFFSETS_RECORDS):
        if not isinstance(key, OffsetCommitKey) or (form == "plain" and value is None):
            continue
        row: dict[str, object] = {
            "offset": offset, "record_timestamp": 1000 + offset, "group_id": key.group, "commit_topic": key.topic,
            "commit_partition": key.partition, "key_version": key.version, "tombstone": value is None,
            "value_version": None, "committed_offset": None, "leader_epoch": None, "metadata": None,
            "commit_timestamp": None, "expire_timestamp": None, "is_transactional": True, "producer_id": 7,
            "producer_epoch": 2, "position": 0,
        }
        if value is not None:
            row |= {"value_version": value.version, "committed_offset": value.committed_offset,
                    "leader_epoch": value.leader_epoch, "metadata": value.metadata,
                    "commit_timestamp": value.commit_timestamp, "expire_timestamp": value.expire_timestamp}
        if form != "json":
            row |= dict.fromkeys(_OFFSETS_JSON_ONLY)
        want.append(row)
    assert [{f: getattr(c, f) for f in fields + _OFFSETS_JSON_ONLY} for c in parsed.offset_commits] == want
    if form == "plain":  # the deleted offset of 2.4.0 is said to be missing
        (issue,) = parsed.issues
        assert issue.kind == IssueKind.INCOMPLETE_TEXT and issue.reason.startswith("1 __consumer_offsets records")
    else:
        assert parsed.issues == []


def test_offsets_decoder_skips_and_issues() -> None:
    """Records that are no offset commit are skipped as the binary decoder skips them; what the tool
    could not decode, or printed without the decoder, is an issue."""
    head = [
        "Dumping logdirs/__consumer_offsets-0/00000000000000000000.log",
        "Log starting offset: 0",
        _V2.format(b=0, l=6, c=7, bs=0, ls=6, p=-1, ctl="false", pos=0, size=900).replace(
            "isTransactional: true", "isTransactional: false"),
    ]
    rec = "| offset: {} CreateTime: 100 keySize: 20 valueSize: 30 sequence: {} headerKeys: []"
    lines = head + [
        rec.format(0, 0) + ' key: {"type":"3","data":{"groupId":"g"}} payload: {"version":"0","data":{"epoch":1}}',
        rec.format(1, 1) + " key: Unknown record type 99 at offset 1, skipping.",
        rec.format(2, 2) + " key: Error at offset 2, skipping. Unknown offset message version: 9",  # line 6
        rec.format(3, 3) + " key: unknown::version=5",
        rec.format(4, 4) + " key: offset_commit::group=g,partition=t-0 payload: offset=x",  # line 8
        rec.format(5, 5) + ' key: {"type":"1","data":{"group":"g","topic":"t","partition":0}} payload: '
                           '{"version":"7","data":{}}',  # line 9
        rec.format(6, 6) + ' key: {"type":"1","data":{"group":"g","topic":"t","partition":0}} payload: '
                           '{"version":"4","data":{"offset":1,"metadata":"","commitTimestamp":5}}',  # line 10
    ]
    parsed = parse_dump_log(lines)
    assert parsed.offset_commits == []
    assert [(i.line, i.kind) for i in parsed.issues] == [
        (6, IssueKind.CORRUPT_RECORD), (8, IssueKind.UNPARSED_LINE), (9, IssueKind.UNKNOWN_VERSION),
        (10, IssueKind.UNPARSED_LINE),  # a v4 value without its leaderEpoch
    ]
    assert "offsets_json" in parsed.features

    # dumped without --offsets-decoder (raw key bytes) or without --print-data-log (no key)
    raw = head[:2] + [head[2].replace("lastOffset: 6 count: 7", "lastOffset: 1 count: 2")] + [
        rec.format(0, 0) + " key: \x00\x01\x00\x01g\x00\x01t\x00\x00\x00\x00 payload: \x00\x03",
        rec.format(1, 1),
    ]
    parsed = parse_dump_log(raw)
    assert parsed.offset_commits == []
    (issue,) = parsed.issues
    assert issue.kind == IssueKind.INCOMPLETE_TEXT and issue.line == 1 and "--offsets-decoder" in issue.reason
