"""The ``__remote_log_metadata`` decoder and replay (``remote_log_metadata``) against Kafka's own tool and brokers.

(a) Oracle, record by record: each ``tools/dump-log/[broker-<id>/]__remote_log_metadata-<n>.txt``
of a corpus scenario is what the release's ``kafka-dump-log.sh --remote-log-metadata-decoder``
printed for the files of the copied ``__remote_log_metadata-<n>`` folder: one ``toString`` per
record. For the same ``.log`` files, the binary decoder must give a record at every printed offset
and at no other, with the printed CreateTime, a null key, and every field the text shows (read by
``remote_log_record_from_text``); and the test's own encoder must write back the broker's bytes.

(b) Oracle, replay: the remote segments replayed from both partitions of the topic whose copy
finished cover each tiered partition from its log start offset to the ``latestTiered`` offset the
broker gave (Admin ``listOffsets``, ``expected.json``'s ``tiered_offsets``) with no gap, under the
topic id of ``partition.metadata``; the local log takes over at or below the next offset; and they
are exactly the ``.log`` files the harness listed in the broker's remote store (LocalTieredStorage:
``<topic>-<partition>-<topic id>/<start offset>-<segment id>.log <size>``).

(c) Values built here, with a small encoder of the wire layout: every version round-trips, unknown
tags are skipped, unknown versions and every truncation are refused, arbitrary bytes never crash.

(d) The text reader refuses what is not Kafka's text.
"""

from __future__ import annotations

import base64
import re
import string
from dataclasses import dataclass, replace
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.kafkacorpus import CorpusScenario, scenarios
from txn_audit.errors import CorruptInputError
from txn_audit.formats.checkpoint import decode_partition_metadata
from txn_audit.formats.cluster_metadata import uuid_string
from txn_audit.formats.layout import PARTITION_METADATA, parse_log_file_name
from txn_audit.formats.model import BatchHeader, IssueKind, Record
from txn_audit.formats.primitives import (
    INT32_MAX,
    INT32_MIN,
    INT64_MAX,
    INT64_MIN,
    pack_i8,
    pack_i32,
    pack_i64,
    write_compact_string,
    write_uvarint,
)
from txn_audit.formats.record_batch import decode_records, encode_batch, encode_control_batch
from txn_audit.formats.remote_log_metadata import (
    COPY_SEGMENT_FINISHED,
    COPY_SEGMENT_STARTED,
    DELETE_PARTITION_FINISHED,
    DELETE_PARTITION_MARKED,
    DELETE_PARTITION_STARTED,
    DELETE_SEGMENT_FINISHED,
    DELETE_SEGMENT_STARTED,
    HIGHEST_VERSIONS,
    REMOTE_LOG_METADATA_TOPIC,
    REMOTE_LOG_SEGMENT_METADATA_RECORD,
    REMOTE_LOG_SEGMENT_METADATA_SNAPSHOT_RECORD,
    REMOTE_LOG_SEGMENT_METADATA_UPDATE_RECORD,
    REMOTE_LOG_SEGMENT_STATES,
    REMOTE_PARTITION_DELETE_METADATA_RECORD,
    REMOTE_PARTITION_DELETE_STATES,
    OtherRemoteLogRecord,
    RemoteLogRecord,
    RemotePartitionDelete,
    RemoteSegmentRecord,
    RemoteSegmentUpdate,
    RemoteSegments,
    decode_remote_log_record,
    is_valid_segment_transition,
    iter_remote_log_records,
    remote_log_record_from_text,
    remote_segments,
)
from txn_audit.formats.segment import iter_batches

# -- the corpus ------------------------------------------------------------------------


@dataclass(frozen=True)
class RemoteLogDump:
    """One ``__remote_log_metadata-<n>`` folder of a corpus scenario, and kafka-dump-log's text of it."""

    scenario: CorpusScenario
    text: Path

    @property
    def id(self) -> str:
        return f"{self.scenario.id}/{self.text.relative_to(self.scenario.folder / 'tools' / 'dump-log')}"

    @property
    def prints_txn_index_empty(self) -> bool:
        """``txnIdxEmpty`` is in ``RemoteLogSegmentMetadata.toString`` from Kafka 4.0 on."""
        return int(self.scenario.version.split(".")[0]) >= 4


def _folders(scenario: CorpusScenario) -> list[Path]:
    return sorted(p for p in (scenario.folder / "logdirs").rglob(f"{REMOTE_LOG_METADATA_TOPIC}-*") if p.is_dir())


def _dumps() -> list[RemoteLogDump]:
    return [RemoteLogDump(s, p) for s in scenarios()
            for p in sorted((s.folder / "tools" / "dump-log").rglob(f"{REMOTE_LOG_METADATA_TOPIC}-*.txt"))]


DUMPS = _dumps()
WITH_TOPIC = [s for s in scenarios() if _folders(s)]
TIERED = [s for s in WITH_TOPIC if s.expected.get("tiered_offsets")]

needs_dumps = pytest.mark.skipif(not DUMPS, reason="no __remote_log_metadata dump in tests/corpus")
needs_tiered = pytest.mark.skipif(not TIERED, reason="no tiered-storage scenario in tests/corpus")


# -- (a) kafka-dump-log --remote-log-metadata-decoder -----------------------------------------

_RECORD_LINE = re.compile(
    r"^\| offset: (?P<offset>\d+) CreateTime: (?P<timestamp>-?\d+) keySize: (?P<key_size>-?\d+) "
    r"valueSize: (?P<value_size>-?\d+) .*?headerKeys: \[[^\]]*\] payload: (?P<payload>.*)$"
)


@dataclass(frozen=True)
class PrintedRecord:
    offset: int
    timestamp: int
    key_size: int
    value_size: int
    payload: str


@dataclass
class TextSection:
    path: str
    records: list[PrintedRecord]


class ParsedDump:
    """The command line and the per-file record lines of a dump (a small parser of its own)."""

    def __init__(self, text: str) -> None:
        lines = text.splitlines()
        m = re.match(r"# \$ bin/kafka-dump-log\.sh (?P<flags>.*) --files (?P<files>\S+)$", lines[0])
        assert m is not None, lines[0]
        self.flags = m["flags"].split()
        self.files = m["files"].split(",")
        self.sections: list[TextSection] = []
        for line in lines[1:]:
            if line.startswith("Dumping "):
                self.sections.append(TextSection(line.removeprefix("Dumping ").strip(), []))
            elif r := _RECORD_LINE.match(line):
                self.sections[-1].records.append(PrintedRecord(
                    int(r["offset"]), int(r["timestamp"]), int(r["key_size"]), int(r["value_size"]), r["payload"]))


def _as_printed(record: RemoteLogRecord, *, txn_index_empty_printed: bool) -> RemoteLogRecord:
    """What the text form shows of a decoded record: the rest is None, as the text reader gives it."""
    if isinstance(record, RemoteSegmentRecord):
        return replace(record, version=None, custom_metadata=None, broker_leader_epoch=None,
                       txn_index_empty=record.txn_index_empty if txn_index_empty_printed else None)
    if isinstance(record, RemoteSegmentUpdate):
        return replace(record, version=None, custom_metadata=None, broker_leader_epoch=None, end_offset=None)
    if isinstance(record, RemotePartitionDelete):
        return replace(record, version=None, broker_leader_epoch=None, end_offset=None)
    return record


@needs_dumps
@pytest.mark.parametrize("dump", DUMPS, ids=[d.id for d in DUMPS])
def test_records_equal_kafka_dump_log(dump: RemoteLogDump) -> None:
    parsed = ParsedDump(dump.text.read_text())
    assert "--remote-log-metadata-decoder" in parsed.flags
    folder = dump.scenario.folder / Path(parsed.files[0]).parent
    # every segment and producer snapshot of the folder was dumped, once, in the order given
    on_disk = sorted(str(p.relative_to(dump.scenario.folder)) for p in folder.iterdir()
                     if p.suffix in (".log", ".snapshot"))
    assert sorted(parsed.files) == on_disk
    assert [s.path for s in parsed.sections] == parsed.files
    compared = 0
    for section in parsed.sections:
        if not section.path.endswith(".log"):
            assert section.records == [], section.path
            continue
        data = (dump.scenario.folder / section.path).read_bytes()
        entries = list(iter_remote_log_records(data, allow_truncated_tail=False))
        # every record accounted for both ways, in the same order
        assert [e.offset for e in entries] == [p.offset for p in section.records], section.path
        raw = {r.offset: r for h in iter_batches(data) if isinstance(h, BatchHeader) for r in decode_records(data, h)}
        for entry, printed in zip(entries, section.records, strict=True):
            where = f"{section.path} offset {entry.offset}"
            assert entry.timestamp == printed.timestamp, where
            assert raw[entry.offset].key is None and printed.key_size == -1, where
            assert len(raw[entry.offset].value or b"") == printed.value_size, where
            from_text = remote_log_record_from_text(printed.payload)
            assert from_text == _as_printed(entry.record, txn_index_empty_printed=dump.prints_txn_index_empty), where
            compared += 1
    assert compared > 0


@needs_dumps
def test_every_folder_of_the_topic_was_dumped() -> None:
    dumped = {str(d.scenario.folder / Path(ParsedDump(d.text.read_text()).files[0]).parent) for d in DUMPS}
    assert {str(f) for s in WITH_TOPIC for f in _folders(s)} == dumped


@needs_dumps
def test_the_corpus_holds_both_record_kinds_and_both_txn_index_flags() -> None:
    """The brokers wrote metadata records and updates; a 4.x broker the TxnIndexEmpty tag (true)
    and its absence (false), a 3.x broker never the tag."""
    kinds: set[type] = set()
    flags: dict[bool, set[bool | None]] = {True: set(), False: set()}
    for dump in DUMPS:
        folder = dump.scenario.folder / Path(ParsedDump(dump.text.read_text()).files[0]).parent
        for segment in sorted(folder.glob("*.log")):
            for entry in iter_remote_log_records(segment.read_bytes()):
                kinds.add(type(entry.record))
                if isinstance(entry.record, RemoteSegmentRecord):
                    flags[dump.prints_txn_index_empty].add(entry.record.txn_index_empty)
    assert {RemoteSegmentRecord, RemoteSegmentUpdate} <= kinds
    assert flags[True] == {True, False}
    assert flags[False] in (set(), {False})


@needs_dumps
@pytest.mark.parametrize("dump", DUMPS, ids=[d.id for d in DUMPS])
def test_the_encoder_here_writes_the_brokers_bytes(dump: RemoteLogDump) -> None:
    """The test's encoder (used in (c)) is the broker's wire layout: it rewrites each real value."""
    folder = dump.scenario.folder / Path(ParsedDump(dump.text.read_text()).files[0]).parent
    for segment in sorted(folder.glob("*.log")):
        data = segment.read_bytes()
        for header in iter_batches(data):
            assert isinstance(header, BatchHeader)
            for rec in decode_records(data, header):
                assert encode(decode_remote_log_record(rec.value)) == rec.value, f"{segment} offset {rec.offset}"


# -- (b) replay against the broker ----------------------------------------------------------


def _replay(scenario: CorpusScenario) -> RemoteSegments:
    records: list[RemoteLogRecord] = []
    for folder in _folders(scenario):
        segments = sorted((parsed.base_offset, p) for p in folder.glob("*.log")
                          if (parsed := parse_log_file_name(p.name)) is not None and parsed.is_live)
        for _, path in segments:
            records += [e.record for e in iter_remote_log_records(path.read_bytes())]
    return remote_segments(records)


def _local_base_offsets(scenario: CorpusScenario, name: str) -> list[int]:
    """Base offsets of the live ``.log`` segments of every copy of partition ``name``."""
    return sorted(parsed.base_offset for folder in (scenario.folder / "logdirs").rglob(name) if folder.is_dir()
                  for p in folder.glob("*.log") if (parsed := parse_log_file_name(p.name)) is not None
                  and parsed.is_live)


@needs_tiered
@pytest.mark.parametrize("scenario", TIERED, ids=[s.id for s in TIERED])
def test_copied_segments_cover_each_partition_up_to_latest_tiered(scenario: CorpusScenario) -> None:
    replay = _replay(scenario)
    for name, offsets in scenario.expected["tiered_offsets"].items():
        latest_tiered = offsets["latest_tiered"]
        copied = replay.of_partition(offsets["topic"], offsets["partition"], COPY_SEGMENT_FINISHED)
        assert copied, name
        assert copied[0].start_offset == offsets["log_start_offset"], name
        for before, after in zip(copied, copied[1:], strict=False):
            assert after.start_offset == before.end_offset + 1, (name, before.segment_id, after.segment_id)
        assert copied[-1].end_offset == latest_tiered, name
        # every epoch of a segment starts inside it
        assert all(s.start_offset <= o <= s.end_offset for s in copied for _, o in s.segment_leader_epochs), name
        # the local log takes over with no gap
        local = _local_base_offsets(scenario, name)
        assert local and local[0] <= latest_tiered + 1, name
        # under the partition's topic id
        for meta in (scenario.folder / "logdirs").rglob(f"{name}/{PARTITION_METADATA}"):
            assert {s.topic_id for s in copied} == {decode_partition_metadata(meta.read_text())["topic_id"]}, meta


_REMOTE_LOG_FILE = re.compile(
    r"^remote-store/kafka-tiered-storage/(?P<topic>.+)-(?P<partition>\d+)-(?P<topic_id>[A-Za-z0-9_-]{22})/"
    r"(?P<start>\d{20})-(?P<segment_id>[A-Za-z0-9_-]{22})\.log (?P<size>\d+)$"
)

WITH_STORE = [s for s in TIERED if s.expected.get("remote_store_files")]


@pytest.mark.skipif(not WITH_STORE, reason="no scenario in tests/corpus lists its remote store")
@pytest.mark.parametrize("scenario", WITH_STORE, ids=[s.id for s in WITH_STORE])
def test_copied_segments_are_the_remote_stores_log_files(scenario: CorpusScenario) -> None:
    stored = {(m["topic"], int(m["partition"]), m["topic_id"], int(m["start"]), m["segment_id"], int(m["size"]))
              for listing in scenario.expected["remote_store_files"].values() for line in listing
              if (m := _REMOTE_LOG_FILE.match(line))}
    assert stored
    replay = _replay(scenario)
    copied = {(s.topic, s.partition, s.topic_id, s.start_offset, s.segment_id, s.segment_size_bytes)
              for s in replay.segments.values() if s.state == COPY_SEGMENT_FINISHED}
    assert copied == stored
    # no copy was left half done, and no segment deleted
    assert {s.state for s in replay.segments.values()} == {COPY_SEGMENT_FINISHED}
    assert replay.partition_deletes == {}


# -- (c) values built here ------------------------------------------------------------------

T = 1_796_589_556_776
TOPIC_ID = "yDyD0suJRMiJGFUJKZFNtg"
SEGMENT_ID = "NVkEOV1VQGyPQQjnneghvg"
OTHER_SEGMENT_ID = "cN3zcRrjRA6Z9v1fMFOr7g"

_SEGMENT_STATE_IDS = {name: code for code, name in REMOTE_LOG_SEGMENT_STATES.items()}
_DELETE_STATE_IDS = {name: code for code, name in REMOTE_PARTITION_DELETE_STATES.items()}


def _uuid(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "==")


def _tags(fields: dict[int, bytes]) -> bytes:
    out = write_uvarint(len(fields))
    for tag, payload in sorted(fields.items()):
        out += write_uvarint(tag) + write_uvarint(len(payload)) + payload
    return out


def _frame(api_key: int, version: int, body: bytes, *, frame: int = 1) -> bytes:
    return write_uvarint(frame) + write_uvarint(api_key) + write_uvarint(version) + body


def _nullable_bytes(value: bytes | None) -> bytes:
    return write_uvarint(0) if value is None else write_uvarint(len(value) + 1) + value


def _topic_id_partition(topic_id: str, topic: str, partition: int, nested: dict[int, bytes]) -> bytes:
    return write_compact_string(topic) + _uuid(topic_id) + pack_i32(partition) + _tags(nested)


def _segment_id(record: RemoteSegmentRecord | RemoteSegmentUpdate, nested: dict[int, bytes]) -> bytes:
    return (_topic_id_partition(record.topic_id, record.topic, record.partition, nested) + _uuid(record.segment_id)
            + _tags(nested))


def encode(record: RemoteLogRecord, *, tags: dict[int, bytes] | None = None,
           nested: dict[int, bytes] | None = None) -> bytes:
    """The value of ``record`` as Kafka writes it (a tagged field at its default is left out);
    ``tags`` adds fields to the message's tagged-field section, ``nested`` to every nested struct's."""
    extra, inner = dict(tags or {}), dict(nested or {})
    if isinstance(record, OtherRemoteLogRecord):
        return _frame(record.api_key, record.version, b"")
    assert record.version is not None
    fields: dict[int, bytes] = {}
    if isinstance(record, RemoteSegmentRecord):
        body = _segment_id(record, inner) + pack_i64(record.start_offset) + pack_i64(record.end_offset)
        body += pack_i32(record.broker_id) + pack_i64(record.max_timestamp_ms) + pack_i64(record.event_timestamp_ms)
        body += write_uvarint(len(record.segment_leader_epochs) + 1) + b"".join(
            pack_i32(epoch) + pack_i64(offset) + _tags(inner) for epoch, offset in record.segment_leader_epochs)
        body += pack_i32(record.segment_size_bytes) + _nullable_bytes(record.custom_metadata)
        body += pack_i8(_SEGMENT_STATE_IDS[record.state])
        if record.txn_index_empty:
            fields[0] = b"\x01"
        if record.broker_leader_epoch:  # v1+, default 0
            fields[1] = pack_i32(record.broker_leader_epoch)
        api_key = REMOTE_LOG_SEGMENT_METADATA_RECORD
    elif isinstance(record, RemoteSegmentUpdate):
        body = _segment_id(record, inner) + pack_i32(record.broker_id) + pack_i64(record.event_timestamp_ms)
        body += _nullable_bytes(record.custom_metadata) + pack_i8(_SEGMENT_STATE_IDS[record.state])
        if record.broker_leader_epoch not in (None, -1):  # v1+, default -1
            fields[0] = pack_i32(record.broker_leader_epoch)
        if record.end_offset not in (None, -1):
            fields[1] = pack_i64(record.end_offset)
        api_key = REMOTE_LOG_SEGMENT_METADATA_UPDATE_RECORD
    else:
        body = _topic_id_partition(record.topic_id, record.topic, record.partition, inner)
        body += pack_i32(record.broker_id) + pack_i64(record.event_timestamp_ms)
        body += pack_i8(_DELETE_STATE_IDS[record.state])
        if record.broker_leader_epoch:  # v1+, default 0
            fields[0] = pack_i32(record.broker_leader_epoch)
        if record.end_offset:
            fields[1] = pack_i64(record.end_offset)
        api_key = REMOTE_PARTITION_DELETE_METADATA_RECORD
    return _frame(api_key, record.version, body + _tags(fields | extra))


SEGMENT = RemoteSegmentRecord(
    topic_id=TOPIC_ID, topic="ts", partition=0, segment_id=SEGMENT_ID, start_offset=0, end_offset=3, broker_id=1,
    max_timestamp_ms=T - 1500, event_timestamp_ms=T, segment_leader_epochs=((0, 0), (2, 3)), segment_size_bytes=226,
    custom_metadata=None, custom_metadata_size=None, state=COPY_SEGMENT_STARTED, txn_index_empty=True, version=0,
)
UPDATE = RemoteSegmentUpdate(
    topic_id=TOPIC_ID, topic="ts", partition=0, segment_id=SEGMENT_ID, custom_metadata=b"path/1",
    custom_metadata_size=6, state=COPY_SEGMENT_FINISHED, event_timestamp_ms=T + 91, broker_id=2, version=0,
)
DELETE = RemotePartitionDelete(
    topic_id=TOPIC_ID, topic="ts", partition=0, state=DELETE_PARTITION_MARKED, event_timestamp_ms=T + 500,
    broker_id=3, version=0,
)


def _at_version(record: RemoteSegmentRecord | RemoteSegmentUpdate | RemotePartitionDelete,
                version: int) -> RemoteSegmentRecord | RemoteSegmentUpdate | RemotePartitionDelete:
    """``record`` at ``version``, with the v1 fields set (to values other than their defaults) from v1."""
    if isinstance(record, RemoteSegmentRecord):
        return replace(record, version=version, broker_leader_epoch=7 if version >= 1 else None)
    return replace(record, version=version, broker_leader_epoch=7 if version >= 1 else None,
                   end_offset=42 if version >= 1 else None)


@pytest.mark.parametrize("version", [0, 1])
@pytest.mark.parametrize("record", [SEGMENT, UPDATE, DELETE], ids=["segment", "update", "delete"])
def test_every_version_round_trips(record: RemoteSegmentRecord | RemoteSegmentUpdate | RemotePartitionDelete,
                                   version: int) -> None:
    assert version <= HIGHEST_VERSIONS[record.api_key]
    versioned = _at_version(record, version)
    assert decode_remote_log_record(encode(versioned)) == versioned


def test_v1_tagged_fields_take_their_defaults_when_left_out() -> None:
    segment = decode_remote_log_record(encode(replace(SEGMENT, version=1, txn_index_empty=False)))
    assert isinstance(segment, RemoteSegmentRecord)
    assert (segment.broker_leader_epoch, segment.txn_index_empty) == (0, False)
    update = decode_remote_log_record(encode(replace(UPDATE, version=1)))
    assert isinstance(update, RemoteSegmentUpdate)
    assert (update.broker_leader_epoch, update.end_offset) == (-1, -1)
    delete = decode_remote_log_record(encode(replace(DELETE, version=1)))
    assert isinstance(delete, RemotePartitionDelete)
    assert (delete.broker_leader_epoch, delete.end_offset) == (0, 0)


def test_unknown_tags_are_skipped() -> None:
    for record in (SEGMENT, UPDATE, DELETE):
        noisy = encode(record, tags={9: b"future", 30: b""}, nested={0: b"x", 5: b"\x00\x01"})
        assert decode_remote_log_record(noisy) == record
    # the v1 tags are not defined at version 0: skipped there
    segment = decode_remote_log_record(encode(SEGMENT, tags={1: pack_i32(7)}))
    assert isinstance(segment, RemoteSegmentRecord) and segment.broker_leader_epoch is None
    update = decode_remote_log_record(encode(UPDATE, tags={0: pack_i32(7), 1: pack_i64(42)}))
    assert update == UPDATE
    delete = decode_remote_log_record(encode(DELETE, tags={0: pack_i32(7), 1: pack_i64(42)}))
    assert delete == DELETE


def test_txn_index_empty_reads_any_nonzero_byte_as_true() -> None:
    for payload, want in ((b"\x00", False), (b"\x01", True), (b"\x02", True)):
        record = decode_remote_log_record(encode(replace(SEGMENT, txn_index_empty=False), tags={0: payload}))
        assert isinstance(record, RemoteSegmentRecord) and record.txn_index_empty is want


def test_other_types_give_type_and_version_only() -> None:
    snapshot = _frame(REMOTE_LOG_SEGMENT_METADATA_SNAPSHOT_RECORD, 0, b"\x01anything")
    assert decode_remote_log_record(snapshot) == OtherRemoteLogRecord(REMOTE_LOG_SEGMENT_METADATA_SNAPSHOT_RECORD, 0)
    assert decode_remote_log_record(_frame(999, 7, b"")) == OtherRemoteLogRecord(999, 7)


def test_records_check_the_custom_metadata_length() -> None:
    with pytest.raises(ValueError):
        replace(UPDATE, custom_metadata_size=5)
    assert replace(UPDATE, custom_metadata=None, custom_metadata_size=5).custom_metadata_size == 5  # as text shows it


# hypothesis: any record of any version round-trips through the encoder and through Kafka's text

_i32 = st.integers(INT32_MIN, INT32_MAX)
_i64 = st.integers(INT64_MIN, INT64_MAX)
_ids = st.binary(min_size=16, max_size=16).map(uuid_string)
_topics = st.text(string.ascii_letters + string.digits + "._-", min_size=1, max_size=30)
_partitions = st.integers(0, INT32_MAX)
_custom = st.none() | st.binary(max_size=40)


@st.composite
def segment_records(draw: st.DrawFn) -> RemoteSegmentRecord:
    version = draw(st.sampled_from([0, 1]))
    start = draw(st.integers(0, INT64_MAX))
    epochs = draw(st.dictionaries(_i32, st.integers(start, INT64_MAX), min_size=1, max_size=4))
    custom = draw(_custom)
    return RemoteSegmentRecord(
        topic_id=draw(_ids), topic=draw(_topics), partition=draw(_partitions), segment_id=draw(_ids),
        start_offset=start, end_offset=draw(st.integers(start, INT64_MAX)), broker_id=draw(_i32),
        max_timestamp_ms=draw(_i64), event_timestamp_ms=draw(_i64), segment_leader_epochs=tuple(sorted(epochs.items())),
        segment_size_bytes=draw(_i32), custom_metadata=custom,
        custom_metadata_size=None if custom is None else len(custom),
        state=draw(st.sampled_from(sorted(REMOTE_LOG_SEGMENT_STATES.values()))), txn_index_empty=draw(st.booleans()),
        broker_leader_epoch=draw(_i32) if version else None, version=version,
    )


@st.composite
def update_records(draw: st.DrawFn) -> RemoteSegmentUpdate:
    version = draw(st.sampled_from([0, 1]))
    custom = draw(_custom)
    return RemoteSegmentUpdate(
        topic_id=draw(_ids), topic=draw(_topics), partition=draw(_partitions), segment_id=draw(_ids),
        custom_metadata=custom, custom_metadata_size=None if custom is None else len(custom),
        state=draw(st.sampled_from(sorted(REMOTE_LOG_SEGMENT_STATES.values()))), event_timestamp_ms=draw(_i64),
        broker_id=draw(_i32), broker_leader_epoch=draw(_i32) if version else None,
        end_offset=draw(_i64) if version else None, version=version,
    )


@st.composite
def delete_records(draw: st.DrawFn) -> RemotePartitionDelete:
    version = draw(st.sampled_from([0, 1]))
    return RemotePartitionDelete(
        topic_id=draw(_ids), topic=draw(_topics), partition=draw(_partitions),
        state=draw(st.sampled_from(sorted(REMOTE_PARTITION_DELETE_STATES.values()))), event_timestamp_ms=draw(_i64),
        broker_id=draw(_i32), broker_leader_epoch=draw(_i32) if version else None,
        end_offset=draw(_i64) if version else None, version=version,
    )


def _custom_text(size: int | None) -> str:
    return "Optional.empty" if size is None else f"Optional[CustomMetadata{{{size} bytes}}]"


def java_text(record: RemoteSegmentRecord | RemoteSegmentUpdate | RemotePartitionDelete, *,
              txn_index_empty: bool = True) -> str:
    """What Kafka's ``toString`` prints for the record (4.x; 3.x without ``txn_index_empty``)."""
    tip = f"{record.topic_id}:{record.topic}-{record.partition}"
    if isinstance(record, RemotePartitionDelete):
        return (f"RemotePartitionDeleteMetadata{{topicPartition={tip}, state={record.state}, "
                f"eventTimestampMs={record.event_timestamp_ms}, brokerId={record.broker_id}}}")
    segment_id = f"RemoteLogSegmentId{{topicIdPartition={tip}, id={record.segment_id}}}"
    if isinstance(record, RemoteSegmentUpdate):
        return (f"RemoteLogSegmentMetadataUpdate{{remoteLogSegmentId={segment_id}, "
                f"customMetadata={_custom_text(record.custom_metadata_size)}, state={record.state}, "
                f"eventTimestampMs={record.event_timestamp_ms}, brokerId={record.broker_id}}}")
    epochs = ", ".join(f"{epoch}={offset}" for epoch, offset in sorted(record.segment_leader_epochs))
    text = (f"RemoteLogSegmentMetadata{{remoteLogSegmentId={segment_id}, startOffset={record.start_offset}, "
            f"endOffset={record.end_offset}, brokerId={record.broker_id}, maxTimestampMs={record.max_timestamp_ms}, "
            f"eventTimestampMs={record.event_timestamp_ms}, segmentLeaderEpochs={{{epochs}}}, "
            f"segmentSizeInBytes={record.segment_size_bytes}, "
            f"customMetadata={_custom_text(record.custom_metadata_size)}, state={record.state}")
    if txn_index_empty:
        text += f", txnIdxEmpty={str(record.txn_index_empty).lower()}"
    return text + "}"


_any_record = segment_records() | update_records() | delete_records()


@settings(max_examples=300, deadline=None)
@given(_any_record)
def test_any_record_round_trips_through_the_bytes_and_the_text(
        record: RemoteSegmentRecord | RemoteSegmentUpdate | RemotePartitionDelete) -> None:
    assert decode_remote_log_record(encode(record)) == record
    assert remote_log_record_from_text(java_text(record)) == _as_printed(record, txn_index_empty_printed=True)
    assert remote_log_record_from_text(java_text(record, txn_index_empty=False)) == _as_printed(
        record, txn_index_empty_printed=False)


def test_a_present_custom_metadata_reads_as_its_length() -> None:
    with_custom = replace(SEGMENT, custom_metadata=b"\x00" * 12, custom_metadata_size=12)
    from_text = remote_log_record_from_text(java_text(with_custom))
    assert isinstance(from_text, RemoteSegmentRecord)
    assert (from_text.custom_metadata, from_text.custom_metadata_size) == (None, 12)
    empty = remote_log_record_from_text(java_text(replace(UPDATE, custom_metadata=b"", custom_metadata_size=0)))
    assert isinstance(empty, RemoteSegmentUpdate) and empty.custom_metadata_size == 0


# bad input

GOOD_VALUES = [
    encode(SEGMENT),
    encode(_at_version(SEGMENT, 1)),
    encode(UPDATE),
    encode(_at_version(UPDATE, 1)),
    encode(DELETE),
    encode(_at_version(DELETE, 1)),
]
GOOD_IDS = ["segment-v0", "segment-v1", "update-v0", "update-v1", "delete-v0", "delete-v1"]


@pytest.mark.parametrize("value", GOOD_VALUES, ids=GOOD_IDS)
def test_every_truncation_is_corrupt(value: bytes) -> None:
    decode_remote_log_record(value)
    for n in range(len(value)):
        with pytest.raises(CorruptInputError):
            decode_remote_log_record(value[:n])


@pytest.mark.parametrize("api_key", sorted(HIGHEST_VERSIONS))
def test_a_version_above_the_highest_known_is_refused(api_key: int) -> None:
    record = {REMOTE_LOG_SEGMENT_METADATA_RECORD: SEGMENT, REMOTE_LOG_SEGMENT_METADATA_UPDATE_RECORD: UPDATE,
              REMOTE_PARTITION_DELETE_METADATA_RECORD: DELETE}[api_key]
    value = encode(replace(record, version=HIGHEST_VERSIONS[api_key] + 1))
    with pytest.raises(CorruptInputError) as err:
        decode_remote_log_record(value)
    assert err.value.kind == IssueKind.UNKNOWN_VERSION


@pytest.mark.parametrize("frame", [0, 2, 127])
def test_unknown_frame_version(frame: int) -> None:
    with pytest.raises(CorruptInputError) as err:
        decode_remote_log_record(_frame(REMOTE_LOG_SEGMENT_METADATA_RECORD, 0, encode(SEGMENT)[3:], frame=frame))
    assert err.value.kind == IssueKind.UNKNOWN_VERSION


def _with_state_byte(record: RemoteSegmentRecord | RemoteSegmentUpdate | RemotePartitionDelete, code: int) -> bytes:
    """``record``'s value with its state byte (the last byte before the empty tag section) set to ``code``."""
    value = bytearray(encode(replace(record, txn_index_empty=False) if isinstance(record, RemoteSegmentRecord)
                             else record))
    value[-2] = code & 0xFF
    return bytes(value)


@pytest.mark.parametrize(
    ("value", "kind"),
    [
        (encode(SEGMENT) + b"\x00", IssueKind.CORRUPT_RECORD),  # a byte after the message
        (_with_state_byte(SEGMENT, 4), IssueKind.CORRUPT_RECORD),  # no such RemoteLogSegmentState
        (_with_state_byte(UPDATE, -1), IssueKind.CORRUPT_RECORD),
        (_with_state_byte(DELETE, 3), IssueKind.CORRUPT_RECORD),  # no such RemotePartitionDeleteState
        (encode(replace(SEGMENT, start_offset=-1)), IssueKind.CORRUPT_RECORD),  # Kafka refuses these segments
        (encode(replace(SEGMENT, start_offset=5, end_offset=4)), IssueKind.CORRUPT_RECORD),
        (encode(replace(SEGMENT, segment_leader_epochs=())), IssueKind.CORRUPT_RECORD),
        (encode(SEGMENT).replace(b"\x03ts", b"\x00ts", 1), IssueKind.CORRUPT_RECORD),  # a null topic name
        (encode(SEGMENT).replace(b"\x03ts", b"\x03\xff\xfe", 1), IssueKind.CORRUPT_RECORD),  # not UTF-8
        (encode(replace(SEGMENT, txn_index_empty=False), tags={0: b"\x01\x00"}), IssueKind.CORRUPT_RECORD),  # long
        (encode(replace(SEGMENT, txn_index_empty=False), tags={0: b""}), IssueKind.CORRUPT_RECORD),  # short
        (write_uvarint(1) + write_uvarint(1 << 20) + b"\x00", IssueKind.CORRUPT_RECORD),  # apiKey beyond a short
        (write_uvarint(1) + write_uvarint(0) + write_uvarint(1 << 16), IssueKind.CORRUPT_RECORD),  # version too
        (None, IssueKind.CORRUPT_RECORD),
    ],
    ids=["trailing-byte", "segment-state", "update-state", "delete-state", "negative-start", "end-before-start",
         "no-epochs", "null-topic", "bad-utf8", "tag-too-long", "tag-too-short", "api-key-beyond-short",
         "version-beyond-short", "null-value"],
)
def test_bad_values(value: bytes | None, kind: str) -> None:
    with pytest.raises(CorruptInputError) as err:
        decode_remote_log_record(value)
    assert err.value.kind == kind


def test_an_epoch_count_past_the_end_is_refused_before_reading() -> None:
    value = encode(SEGMENT)
    marker = write_uvarint(3) + pack_i32(0) + pack_i64(0)  # the two-entry array starts here
    at = value.index(marker)
    bad = value[:at] + write_uvarint(1_000_000) + value[at + 1:]
    with pytest.raises(CorruptInputError) as err:
        decode_remote_log_record(bad)
    assert "exceed" in err.value.detail


@settings(max_examples=400, deadline=None)
@given(st.binary(max_size=120))
def test_arbitrary_bytes_decode_or_raise_corrupt_input(data: bytes) -> None:
    for value in (data, b"\x01\x00\x00" + data, b"\x01\x01\x01" + data, b"\x01\x02\x00" + data,
                  b"\x01\x00\x01\x03ts" + data):
        try:
            decode_remote_log_record(value)
        except CorruptInputError:
            pass


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_corrupted_values_never_crash(data: st.DataObject) -> None:
    value = bytearray(data.draw(st.sampled_from(GOOD_VALUES)))
    for _ in range(data.draw(st.integers(1, 3))):
        value[data.draw(st.integers(0, len(value) - 1))] = data.draw(st.integers(0, 255))
    try:
        list(iter_remote_log_records(segment([bytes(value)])))
    except CorruptInputError:
        pass


# segments


def segment(values: list[bytes], base_offset: int = 0, *, timestamp: int = T) -> bytes:
    records = [Record(offset=base_offset + i, timestamp=timestamp + i, key=None, value=v) for i, v in enumerate(values)]
    return encode_batch(records, base_offset=base_offset, producer_id=0, producer_epoch=0, base_sequence=base_offset)


def test_a_segment_gives_offset_timestamp_and_record() -> None:
    data = segment([encode(SEGMENT), encode(UPDATE)]) + encode_control_batch(
        offset=2, producer_id=5, producer_epoch=0, marker_type="COMMIT", coordinator_epoch=0, timestamp=T) + segment(
        [encode(DELETE)], 3)
    entries = list(iter_remote_log_records(data))
    assert entries == [(0, T, SEGMENT), (1, T + 1, UPDATE), (3, T, DELETE)]  # the control batch skipped
    assert entries[2].record == DELETE and entries[2].offset == 3


def test_a_bad_value_in_a_segment_names_its_batch() -> None:
    first = segment([encode(SEGMENT)])
    data = first + segment([encode(UPDATE)[:-3]], 1)
    with pytest.raises(CorruptInputError) as err:
        list(iter_remote_log_records(data))
    assert err.value.position == len(first)
    assert "offset 1" in err.value.detail


def test_damaged_batches() -> None:
    data = bytearray(segment([encode(SEGMENT), encode(UPDATE)]))
    # a torn tail is the normal end of a crashed broker's active segment, unless told otherwise
    assert list(iter_remote_log_records(bytes(data[:-5]))) == []
    with pytest.raises(CorruptInputError) as err:
        list(iter_remote_log_records(bytes(data[:-5]), allow_truncated_tail=False))
    assert err.value.kind == IssueKind.TRUNCATED_TAIL
    data[-1] ^= 0xFF
    with pytest.raises(CorruptInputError) as err:
        list(iter_remote_log_records(bytes(data)))
    assert err.value.kind == IssueKind.CRC_MISMATCH


# replay


def _update(state: str, at: int, segment_id: str = SEGMENT_ID, **changes: object) -> RemoteSegmentUpdate:
    return replace(UPDATE, state=state, event_timestamp_ms=at, segment_id=segment_id, **changes)


def test_replay_follows_a_segments_life() -> None:
    started = replace(SEGMENT, custom_metadata=b"abc", custom_metadata_size=3)
    life = [started, _update(COPY_SEGMENT_FINISHED, T + 1), _update(DELETE_SEGMENT_STARTED, T + 2, broker_id=4),
            _update(DELETE_SEGMENT_FINISHED, T + 3, custom_metadata=None, custom_metadata_size=None)]
    states = []
    for n in range(1, len(life) + 1):
        replay = remote_segments(life[:n])
        (only,) = replay.segments.values()
        states.append((only.state, only.event_timestamp_ms))
    assert states == [(COPY_SEGMENT_STARTED, T), (COPY_SEGMENT_FINISHED, T + 1), (DELETE_SEGMENT_STARTED, T + 2),
                      (DELETE_SEGMENT_FINISHED, T + 3)]
    final = remote_segments(life).segments[(TOPIC_ID, 0, SEGMENT_ID)]
    # an update replaces state, time, broker and custom metadata, as createWithUpdates does; the rest stays
    assert final == replace(started, state=DELETE_SEGMENT_FINISHED, event_timestamp_ms=T + 3,
                            broker_id=UPDATE.broker_id, custom_metadata=None, custom_metadata_size=None)
    assert remote_segments(life[:3]).segments[(TOPIC_ID, 0, SEGMENT_ID)].broker_id == 4


def test_replay_drops_what_the_broker_drops() -> None:
    finished = [SEGMENT, _update(COPY_SEGMENT_FINISHED, T + 1)]
    kept = remote_segments(finished).segments
    for dropped in (
        _update(COPY_SEGMENT_FINISHED, T + 9, segment_id=OTHER_SEGMENT_ID),  # an update of an unknown segment
        _update(COPY_SEGMENT_STARTED, T + 9),  # an update back to the start
        _update(DELETE_SEGMENT_FINISHED, T + 9),  # a skipped step
        replace(SEGMENT, event_timestamp_ms=T + 9),  # the segment's metadata again, after its copy finished
        replace(SEGMENT, segment_id=OTHER_SEGMENT_ID, state=COPY_SEGMENT_FINISHED),  # metadata not in the first state
    ):
        assert remote_segments([*finished, dropped]).segments == kept, dropped
    # a terminal segment takes no more events
    gone = [*finished, _update(DELETE_SEGMENT_STARTED, T + 2), _update(DELETE_SEGMENT_FINISHED, T + 3)]
    assert remote_segments([*gone, _update(DELETE_SEGMENT_FINISHED, T + 4), SEGMENT]).segments == remote_segments(
        gone).segments
    # the same state again is a valid transition: it applies
    again = remote_segments([*finished, _update(COPY_SEGMENT_FINISHED, T + 5)]).segments
    assert again[(TOPIC_ID, 0, SEGMENT_ID)].event_timestamp_ms == T + 5


@pytest.mark.parametrize(
    ("current", "target", "valid"),
    [
        (None, COPY_SEGMENT_STARTED, True), (None, COPY_SEGMENT_FINISHED, False),
        (COPY_SEGMENT_STARTED, COPY_SEGMENT_FINISHED, True), (COPY_SEGMENT_STARTED, DELETE_SEGMENT_STARTED, True),
        (COPY_SEGMENT_STARTED, DELETE_SEGMENT_FINISHED, False), (COPY_SEGMENT_FINISHED, DELETE_SEGMENT_STARTED, True),
        (COPY_SEGMENT_FINISHED, COPY_SEGMENT_STARTED, False), (DELETE_SEGMENT_STARTED, DELETE_SEGMENT_FINISHED, True),
        (DELETE_SEGMENT_STARTED, COPY_SEGMENT_FINISHED, False),
        (DELETE_SEGMENT_FINISHED, DELETE_SEGMENT_FINISHED, True),
    ],
)
def test_segment_transitions_are_kafkas(current: str | None, target: str, valid: bool) -> None:
    assert is_valid_segment_transition(current, target) is valid


def test_replay_keeps_each_partitions_newest_delete_state_and_ignores_other_types() -> None:
    other = replace(DELETE, partition=1, state=DELETE_PARTITION_MARKED)
    replay = remote_segments([DELETE, other, OtherRemoteLogRecord(REMOTE_LOG_SEGMENT_METADATA_SNAPSHOT_RECORD, 0),
                              replace(DELETE, state=DELETE_PARTITION_STARTED),
                              replace(DELETE, state=DELETE_PARTITION_FINISHED, event_timestamp_ms=T + 900)])
    assert replay.segments == {}
    assert {k: (d.state, d.event_timestamp_ms) for k, d in replay.partition_deletes.items()} == {
        (TOPIC_ID, 0): (DELETE_PARTITION_FINISHED, T + 900), (TOPIC_ID, 1): (DELETE_PARTITION_MARKED, T + 500)}


def test_of_partition_sorts_by_start_offset_and_filters_by_state() -> None:
    later = replace(SEGMENT, segment_id=OTHER_SEGMENT_ID, start_offset=4, end_offset=7)
    replay = remote_segments([later, SEGMENT, _update(COPY_SEGMENT_FINISHED, T + 1)])
    assert [s.segment_id for s in replay.of_partition("ts", 0)] == [SEGMENT_ID, OTHER_SEGMENT_ID]
    assert [s.segment_id for s in replay.of_partition("ts", 0, COPY_SEGMENT_FINISHED)] == [SEGMENT_ID]
    assert replay.of_partition("ts", 1) == [] and replay.of_partition("other", 0) == []


# -- (d) the text reader refuses what is not Kafka's text ----------------------------------------

_GOOD_TEXT = java_text(SEGMENT)


@pytest.mark.parametrize(
    "payload",
    [
        "",
        "Error at offset 3, skipping. Could not deserialize metadata record due to unknown frame version 2",
        _GOOD_TEXT[:-1],  # no closing brace
        _GOOD_TEXT + "}",
        _GOOD_TEXT.replace("RemoteLogSegmentMetadata{", "RemoteLogSegmentMetadataSnapshot{"),
        _GOOD_TEXT.replace("state=COPY_SEGMENT_STARTED", "state=COPY_SEGMENT_PAUSED"),
        _GOOD_TEXT.replace("segmentLeaderEpochs={0=0, 2=3}", "segmentLeaderEpochs={}"),
        _GOOD_TEXT.replace("segmentLeaderEpochs={0=0, 2=3}", "segmentLeaderEpochs={0=0,2=3}"),
        _GOOD_TEXT.replace("segmentLeaderEpochs={0=0, 2=3}", "segmentLeaderEpochs={0=0, 0=3}"),
        _GOOD_TEXT.replace("startOffset=0", "startOffset=x"),
        _GOOD_TEXT.replace("startOffset=0, endOffset=3", "startOffset=4, endOffset=3"),
        _GOOD_TEXT.replace("brokerId=1", "brokerId=2147483648"),  # beyond an int
        _GOOD_TEXT.replace("endOffset=3", "endOffset=9223372036854775808"),  # beyond a long
        _GOOD_TEXT.replace(f"{TOPIC_ID}:ts-0", f"{TOPIC_ID}:ts"),  # no partition
        _GOOD_TEXT.replace(f"{TOPIC_ID}:", "abc:"),  # not a 22-character id
        _GOOD_TEXT.replace("txnIdxEmpty=true", "txnIdxEmpty=yes"),
        _GOOD_TEXT.replace("customMetadata=Optional.empty", "customMetadata=Optional[CustomMetadata{x bytes}]"),
        _GOOD_TEXT.replace(", brokerId=1", ""),  # a field missing
        java_text(UPDATE).replace("state=COPY_SEGMENT_FINISHED", "state=DELETE_PARTITION_MARKED"),
        java_text(DELETE).replace("state=DELETE_PARTITION_MARKED", "state=COPY_SEGMENT_STARTED"),
        java_text(DELETE).replace(", brokerId=3", ", brokerId=3, extra=1"),
    ],
)
def test_text_reader_refuses_malformed_payloads(payload: str) -> None:
    with pytest.raises(ValueError):
        remote_log_record_from_text(payload)


def test_text_reader_takes_topics_with_dashes_and_dots() -> None:
    record = replace(DELETE, topic="orders-v2.eu-1", partition=12)
    assert remote_log_record_from_text(java_text(record)) == _as_printed(record, txn_index_empty_printed=True)
