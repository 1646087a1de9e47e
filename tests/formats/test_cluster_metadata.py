"""The KRaft metadata log decoder and replay (``cluster_metadata``) against Kafka's own tools and brokers.

(a) Oracle, record by record: each ``tools/dump-log/[broker-<id>/]__cluster_metadata-0.txt`` of a
corpus scenario is what the release's ``kafka-dump-log.sh --cluster-metadata-decoder`` printed for
the ``.log`` and ``.checkpoint`` files of the copied ``__cluster_metadata-0`` folder: one JSON
payload per metadata record. For the same files, the decoder must give the same records at the
same offsets (control records at the control lines' offsets), the same type and version for
every record, and for TopicRecord, PartitionRecord, PartitionChangeRecord and RemoveTopicRecord
every field the JSON prints (a tagged field at its default is not printed).

(b) Oracle, replay: the leadership replayed from each live broker's metadata log as of the time
the harness read the partitions' offsets (Admin ``listOffsets``) names the leader the broker gave
then (``expected.json``), its leader epoch is the newest one of the leader replica's
``leader-epoch-checkpoint``, and its topic ids are the ones in ``partition.metadata``.

(c) Merge rules, snapshots, transactions and bad input, on records built here.
"""

from __future__ import annotations

import base64
import json
import re
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.kafkacorpus import CorpusScenario, scenarios
from txn_audit.errors import CorruptInputError
from txn_audit.formats.checkpoint import decode_leader_epoch_checkpoint, decode_partition_metadata
from txn_audit.formats.cluster_metadata import (
    ABORT_TRANSACTION_RECORD,
    BEGIN_TRANSACTION_RECORD,
    END_TRANSACTION_RECORD,
    METADATA_RECORD_TYPES,
    NO_LEADER,
    NO_LEADER_CHANGE,
    PARTITION_CHANGE_RECORD,
    PARTITION_RECORD,
    CONFIG_RECORD,
    REMOVE_TOPIC_RECORD,
    TOPIC_RECORD,
    ConfigRecord,
    FeatureLevelRecord,
    LeadershipChange,
    MetadataRecord,
    OtherMetadataRecord,
    PartitionChangeRecord,
    PartitionLeadership,
    PartitionRecord,
    RemoveTopicRecord,
    TopicRecord,
    decode_metadata_record,
    iter_metadata_records,
    leadership_history,
    merge_partition_change,
    newest_snapshot,
    newest_timestamp,
    topic_configs,
    record_from_json,
    METADATA_VERSION_4_0,
    FEATURE_LEVEL_RECORD,
    read_cluster_metadata,
    replay_partition_leadership,
    uuid_string,
)
from txn_audit.formats.layout import LEADER_EPOCH_CHECKPOINT, PARTITION_METADATA, parse_partition_dir
from txn_audit.formats.model import BatchHeader, IssueKind, Record
from txn_audit.formats.primitives import pack_i8, pack_i16, pack_i32, write_compact_string, write_uvarint
from txn_audit.formats.record_batch import decode_records, encode_batch
from txn_audit.formats.segment import iter_batches

METADATA_FOLDER = "__cluster_metadata-0"


# -- the corpus ------------------------------------------------------------------------


@dataclass(frozen=True)
class MetadataDump:
    """One broker's metadata log in a corpus scenario, and kafka-dump-log's text of it."""

    scenario: CorpusScenario
    text: Path

    @property
    def id(self) -> str:
        return f"{self.scenario.id}/{self.text.relative_to(self.scenario.folder / 'tools' / 'dump-log')}"


def _dumps() -> list[MetadataDump]:
    return [MetadataDump(s, p) for s in scenarios()
            for p in sorted((s.folder / "tools" / "dump-log").rglob(f"{METADATA_FOLDER}.txt"))]


def _kraft_scenarios() -> list[CorpusScenario]:
    return [s for s in scenarios() if s.expected["mode"].startswith("KRaft")]


DUMPS = _dumps()
KRAFT = _kraft_scenarios()


def _folders(scenario: CorpusScenario) -> list[Path]:
    return sorted((scenario.folder / "logdirs").rglob(METADATA_FOLDER))


def _files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file()}


# -- (a) kafka-dump-log --cluster-metadata-decoder ---------------------------------------

_RECORD_LINE = re.compile(r"^\| offset: (?P<offset>-?\d+) .*? headerKeys: \[[^\]]*\] (?P<rest>.*)$")


@dataclass
class TextSection:
    path: str
    payloads: dict[int, dict[str, Any]]  # offset -> the printed JSON
    controls: list[int]  # offsets of the control record lines


class ParsedDump:
    """The command line and the per-file record lines of a metadata dump (a small parser of its own)."""

    def __init__(self, text: str) -> None:
        lines = text.splitlines()
        m = re.match(r"# \$ bin/kafka-dump-log\.sh (?P<flags>.*) --files (?P<files>\S+)$", lines[0])
        assert m is not None, lines[0]
        self.flags = m["flags"].split()
        self.files = m["files"].split(",")
        self.sections: list[TextSection] = []
        for line in lines[1:]:
            if line.startswith("Dumping "):
                self.sections.append(TextSection(line.removeprefix("Dumping ").strip(), {}, []))
                continue
            r = _RECORD_LINE.match(line)
            if r is None:
                continue
            section = self.sections[-1]
            offset, rest = int(r["offset"]), r["rest"]
            if rest.startswith("payload: "):
                assert offset not in section.payloads, f"offset {offset} printed twice"
                section.payloads[offset] = json.loads(rest.removeprefix("payload: "))
            else:
                section.controls.append(offset)


@dataclass
class BinaryFile:
    records: dict[int, MetadataRecord]
    controls: list[int]


def _binary(data: bytes) -> BinaryFile:
    records = {e.offset: e.record for e in iter_metadata_records(data)}
    controls = []
    for h in iter_batches(data):
        if isinstance(h, BatchHeader) and h.is_control:
            controls += [r.offset for r in decode_records(data, h)]
    return BinaryFile(records, controls)


def _type_name(record_type: int) -> str:
    """``PartitionChangeRecord`` -> ``PARTITION_CHANGE_RECORD``, the JSON's ``type``."""
    return re.sub(r"(?<!^)(?=[A-Z])", "_", METADATA_RECORD_TYPES[record_type]).upper()


def _ints(values: tuple[int, ...]) -> list[int]:
    return list(values)


def _as_json(record: MetadataRecord) -> dict[str, Any]:
    """The decoded record in the vocabulary of Kafka's JSON form: tagged fields at their default
    and fields the version lacks are left out, as the tool leaves them out."""
    if isinstance(record, TopicRecord):
        return {"name": record.name, "topicId": record.topic_id}
    if isinstance(record, RemoveTopicRecord):
        return {"topicId": record.topic_id}
    if isinstance(record, FeatureLevelRecord):
        return {"name": record.name, "featureLevel": record.feature_level}
    if isinstance(record, ConfigRecord):
        return {"resourceType": record.resource_type, "resourceName": record.resource_name, "name": record.name,
                "value": record.value}
    if isinstance(record, PartitionRecord):
        out: dict[str, Any] = {
            "partitionId": record.partition_id, "topicId": record.topic_id, "replicas": _ints(record.replicas),
            "isr": _ints(record.isr), "removingReplicas": _ints(record.removing_replicas),
            "addingReplicas": _ints(record.adding_replicas), "leader": record.leader,
            "leaderEpoch": record.leader_epoch, "partitionEpoch": record.partition_epoch,
        }
        if record.leader_recovery_state != 0:
            out["leaderRecoveryState"] = record.leader_recovery_state
        if record.version >= 1:
            out["directories"] = list(record.directories)
        if record.eligible_leader_replicas is not None:
            out["eligibleLeaderReplicas"] = _ints(record.eligible_leader_replicas)
        if record.last_known_elr is not None:
            out["lastKnownElr"] = _ints(record.last_known_elr)
        return out
    assert isinstance(record, PartitionChangeRecord)
    change: dict[str, Any] = {"partitionId": record.partition_id, "topicId": record.topic_id}
    arrays = {"isr": record.isr, "replicas": record.replicas, "removingReplicas": record.removing_replicas,
              "addingReplicas": record.adding_replicas, "eligibleLeaderReplicas": record.eligible_leader_replicas,
              "lastKnownElr": record.last_known_elr}
    change |= {k: _ints(v) for k, v in arrays.items() if v is not None}
    if record.leader != NO_LEADER_CHANGE:
        change["leader"] = record.leader
    if record.leader_recovery_state != -1:
        change["leaderRecoveryState"] = record.leader_recovery_state
    if record.directories is not None:
        change["directories"] = list(record.directories)
    return change


needs_dumps = pytest.mark.skipif(not DUMPS, reason="no metadata log dump in tests/corpus")


@needs_dumps
@pytest.mark.parametrize("dump", DUMPS, ids=[d.id for d in DUMPS])
def test_records_equal_kafka_dump_log(dump: MetadataDump) -> None:
    parsed = ParsedDump(dump.text.read_text())
    assert "--cluster-metadata-decoder" in parsed.flags
    folder = dump.scenario.folder / Path(parsed.files[0]).parent
    # every segment and snapshot of the folder was dumped, once, in the order given
    on_disk = sorted(str(p.relative_to(dump.scenario.folder)) for p in folder.iterdir()
                     if p.suffix in (".log", ".checkpoint"))
    assert sorted(parsed.files) == on_disk
    assert [s.path for s in parsed.sections] == parsed.files
    for section in parsed.sections:
        binary = _binary((dump.scenario.folder / section.path).read_bytes())
        assert binary.controls == section.controls, section.path
        assert list(binary.records) == list(section.payloads), section.path
        for offset, printed in section.payloads.items():
            record = binary.records[offset]
            where = f"{section.path} offset {offset}"
            assert (_type_name(record.record_type), record.version) == (printed["type"], printed["version"]), where
            if not isinstance(record, OtherMetadataRecord):
                assert _as_json(record) == printed["data"], where


@needs_dumps
@pytest.mark.parametrize("dump", DUMPS, ids=[d.id for d in DUMPS])
def test_records_read_back_from_the_tools_json_are_the_binary_ones(dump: MetadataDump) -> None:
    """``record_from_json`` (how a text dump's metadata is read) gives the binary decoder's record
    for the types the configs' replay reads, and the type and version of any other."""
    parsed = ParsedDump(dump.text.read_text())
    for section in parsed.sections:
        binary = _binary((dump.scenario.folder / section.path).read_bytes())
        for offset, printed in section.payloads.items():
            record = binary.records[offset]
            replayed = isinstance(record, (TopicRecord, RemoveTopicRecord, ConfigRecord, FeatureLevelRecord,
                                           OtherMetadataRecord))
            want = record if replayed else OtherMetadataRecord(record.record_type, record.version)
            assert record_from_json(printed) == want, f"{section.path} offset {offset}"


@needs_dumps
def test_dumps_cover_every_decoded_record_kind() -> None:
    """The corpus holds every version 3.3-4.4 write of the records this oracle compares
    (RemoveTopicRecord: no scenario deletes a topic; it is covered by (c))."""
    by_name = {_type_name(record_type): record_type for record_type in METADATA_RECORD_TYPES}
    seen: set[tuple[int, int]] = set()
    for dump in DUMPS:
        for section in ParsedDump(dump.text.read_text()).sections:
            seen |= {(by_name[p["type"]], p["version"]) for p in section.payloads.values()}
    assert {(TOPIC_RECORD, 0), (PARTITION_RECORD, 0), (PARTITION_RECORD, 1), (PARTITION_RECORD, 2),
            (PARTITION_CHANGE_RECORD, 0), (PARTITION_CHANGE_RECORD, 1), (PARTITION_CHANGE_RECORD, 2),
            (CONFIG_RECORD, 0), (FEATURE_LEVEL_RECORD, 0)} <= seen


# -- (b) replay against the brokers ------------------------------------------------------


@dataclass(frozen=True)
class Moment:
    """When the harness read the partitions' offsets, and what the broker said then."""

    key: str  # "partitions" | "partitions_after_find_hanging_wait"
    at_ms: int


def _moments(scenario: CorpusScenario) -> list[Moment]:
    reads = [int(c["at_ms"]) for c in scenario.expected["tool_commands"] if c["file"] == "tools/offsets.json"]
    return [Moment("partitions", reads[0]), Moment("partitions_after_find_hanging_wait", reads[-1])]


@dataclass
class BrokerView:
    """One broker's metadata log replayed as of a moment; ``live``: it still wrote metadata after it."""

    folder: Path
    moment: Moment
    files: dict[str, bytes]

    @cached_property
    def as_of(self) -> dict[str, PartitionLeadership]:
        replay = read_cluster_metadata(self.files, until_timestamp_ms=self.moment.at_ms)
        return {f"{s.topic}-{s.partition}": s for s in replay.partitions.values()}

    @property
    def live(self) -> bool:
        later = read_cluster_metadata(self.files).last_offset
        return later > read_cluster_metadata(self.files, until_timestamp_ms=self.moment.at_ms).last_offset


def _live_views(scenario: CorpusScenario) -> list[BrokerView]:
    views = []
    for moment in _moments(scenario):
        live = [v for f in _folders(scenario) if (v := BrokerView(f, moment, _files(f))).live]
        # a broker down at that moment saw nothing of it; every scenario keeps one up
        assert live, f"no broker's metadata log goes past {moment.key}"
        if scenario.brokers == 1:
            assert len(live) == 1
        views += live
    return views


needs_kraft = pytest.mark.skipif(not KRAFT, reason="no KRaft scenario in tests/corpus")


@needs_kraft
@pytest.mark.parametrize("scenario", KRAFT, ids=[s.id for s in KRAFT])
def test_replayed_leader_is_the_brokers(scenario: CorpusScenario) -> None:
    compared = 0
    for view in _live_views(scenario):
        for name, reported in scenario.expected[view.moment.key].items():
            if reported.get("leader") is None:
                continue
            state = view.as_of.get(name)
            assert state is not None, f"{view.folder}: no {name} as of {view.moment.key}"
            assert state.leader == reported["leader"], f"{view.folder}: {name} as of {view.moment.key}"
            compared += 1
    assert compared > 0


def _state_at(history: list[LeadershipChange], at_ms: int | None) -> dict[tuple[str, int], PartitionLeadership]:
    """Each partition's last change stamped at or before ``at_ms`` (every change when None)."""
    found: dict[tuple[str, int], PartitionLeadership] = {}
    for change in history:
        if at_ms is None or change.timestamp <= at_ms:
            found[(change.state.topic_id, change.state.partition)] = change.state
    return found


@needs_kraft
@pytest.mark.parametrize("scenario", KRAFT, ids=[s.id for s in KRAFT])
def test_the_history_at_a_moment_is_the_replay_until_then(scenario: CorpusScenario) -> None:
    """What ``leadership_history`` says of a moment (the state the audit takes at its audit time)
    is the replay of the records stamped until then, for every broker's copy and both moments
    the live brokers were asked; and at the end, the replay of everything."""
    compared = 0
    for folder in _folders(scenario):
        files = _files(folder)
        history, last = leadership_history(files)
        whole = read_cluster_metadata(files)
        assert last == whole.last_offset
        assert _state_at(history, None) == whole.partitions
        for moment in _moments(scenario):
            replay = read_cluster_metadata(files, until_timestamp_ms=moment.at_ms).partitions
            # a partition created later has no state yet at the moment; the rest agree
            assert {k: v for k, v in _state_at(history, moment.at_ms).items() if k in replay} == replay
            compared += len(replay)
    assert compared > 0


@needs_kraft
@pytest.mark.parametrize("scenario", KRAFT, ids=[s.id for s in KRAFT])
def test_replayed_leader_epoch_is_the_leaders_newest(scenario: CorpusScenario) -> None:
    compared = 0
    for view in _live_views(scenario):
        for name, state in view.as_of.items():
            if state.leader == NO_LEADER:
                continue
            holder = scenario.folder / "logdirs" / (f"broker-{state.leader}" if scenario.brokers > 1 else "")
            checkpoint = holder / name / LEADER_EPOCH_CHECKPOINT
            epochs = decode_leader_epoch_checkpoint(checkpoint.read_text()) if checkpoint.is_file() else []
            if not epochs:
                continue  # the replica never appended in any epoch
            assert state.leader_epoch == epochs[-1][0], f"{view.folder}: {name} as of {view.moment.key}"
            compared += 1
    assert compared > 0


@needs_kraft
@pytest.mark.parametrize("scenario", KRAFT, ids=[s.id for s in KRAFT])
def test_topic_ids_are_partition_metadata(scenario: CorpusScenario) -> None:
    compared = 0
    for folder in _folders(scenario):
        replay = read_cluster_metadata(_files(folder))
        ids = {(s.topic, s.partition): s.topic_id for s in replay.partitions.values()}
        for meta in folder.parent.glob(f"*/{PARTITION_METADATA}"):
            part = parse_partition_dir(meta.parent.name)
            if part is None or part.topic == "__cluster_metadata":
                continue
            want = decode_partition_metadata(meta.read_text())["topic_id"]
            assert ids.get((part.topic, part.partition)) == want, meta
            compared += 1
    assert compared > 0


# -- (c) records built here --------------------------------------------------------------

T = 1_795_617_130_516
TOPIC_ID = "CY9evyqBRbezMovGgVRP2w"
OTHER_ID = "Cf0zdqngRIa9qQTdGtlOMw"
DIR_ID = "_BhYxhGJErcn7zArFtRB5g"


def _uuid(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "==")


def _array(values: list[int] | None) -> bytes:
    if values is None:
        return write_uvarint(0)
    return write_uvarint(len(values) + 1) + b"".join(pack_i32(v) for v in values)


def _uuids(values: list[str]) -> bytes:
    return write_uvarint(len(values) + 1) + b"".join(_uuid(v) for v in values)


def _tags(fields: dict[int, bytes]) -> bytes:
    out = write_uvarint(len(fields))
    for tag, payload in sorted(fields.items()):
        out += write_uvarint(tag) + write_uvarint(len(payload)) + payload
    return out


def _frame(record_type: int, version: int, body: bytes, *, frame: int = 1) -> bytes:
    return write_uvarint(frame) + write_uvarint(record_type) + write_uvarint(version) + body


def topic_value(name: str, topic_id: str = TOPIC_ID) -> bytes:
    return _frame(TOPIC_RECORD, 0, write_compact_string(name) + _uuid(topic_id) + _tags({}))


def partition_value(version: int, *, partition: int = 0, topic_id: str = TOPIC_ID, leader: int = 1,
                    leader_epoch: int = 0, partition_epoch: int = 0, replicas: list[int] | None = None,
                    tags: dict[int, bytes] | None = None) -> bytes:
    replicas = [1, 2, 3] if replicas is None else replicas
    body = pack_i32(partition) + _uuid(topic_id) + _array(replicas) + _array(replicas) + _array([]) + _array([])
    body += pack_i32(leader) + pack_i32(leader_epoch) + pack_i32(partition_epoch)
    if version >= 1:
        body += _uuids([DIR_ID] * len(replicas))
    return _frame(PARTITION_RECORD, version, body + _tags(tags or {}))


def change_value(version: int, tags: dict[int, bytes], *, partition: int = 0, topic_id: str = TOPIC_ID) -> bytes:
    return _frame(PARTITION_CHANGE_RECORD, version, pack_i32(partition) + _uuid(topic_id) + _tags(tags))


def remove_value(topic_id: str = TOPIC_ID) -> bytes:
    return _frame(REMOVE_TOPIC_RECORD, 0, _uuid(topic_id) + _tags({}))


def marker_value(record_type: int) -> bytes:
    body = write_compact_string("t") + _tags({}) if record_type == BEGIN_TRANSACTION_RECORD else _tags({})
    return _frame(record_type, 0, body)


def segment(values: list[bytes], base_offset: int = 0, *, timestamp: int = T) -> bytes:
    records = [Record(offset=base_offset + i, timestamp=timestamp, key=None, value=v) for i, v in enumerate(values)]
    return encode_batch(records, base_offset=base_offset)


def test_uuid_string_is_kafkas_rendering() -> None:
    assert uuid_string(_uuid(TOPIC_ID)) == TOPIC_ID
    assert uuid_string(bytes(16)) == "AAAAAAAAAAAAAAAAAAAAAA"
    with pytest.raises(ValueError):
        uuid_string(bytes(15))


@pytest.mark.parametrize("version", [0, 1, 2])
def test_partition_record_every_version(version: int) -> None:
    tags = {0: pack_i8(1), 1: _array([2]), 2: _array(None), 9: b"future"}
    record = decode_metadata_record(partition_value(version, leader=3, leader_epoch=4, partition_epoch=5, tags=tags))
    assert isinstance(record, PartitionRecord)
    assert (record.version, record.leader, record.leader_epoch, record.partition_epoch) == (version, 3, 4, 5)
    assert (record.replicas, record.isr, record.removing_replicas) == ((1, 2, 3), (1, 2, 3), ())
    assert record.leader_recovery_state == 1
    assert record.directories == ((DIR_ID,) * 3 if version >= 1 else ())
    # tags 1 and 2 exist from version 2; before, they are unknown tags and skipped
    assert record.eligible_leader_replicas == ((2,) if version >= 2 else None)
    assert record.last_known_elr is None


def test_partition_change_record_tags() -> None:
    record = decode_metadata_record(change_value(2, {0: _array([1, 2]), 1: pack_i32(NO_LEADER), 5: pack_i8(0),
                                                     6: _array([3]), 8: _uuids([DIR_ID])}))
    assert record == PartitionChangeRecord(2, 0, TOPIC_ID, isr=(1, 2), leader=NO_LEADER, leader_recovery_state=0,
                                           directories=(DIR_ID,), eligible_leader_replicas=(3,))
    bare = decode_metadata_record(change_value(0, {6: _array([3]), 8: _uuids([DIR_ID])}))
    assert bare == PartitionChangeRecord(0, 0, TOPIC_ID)  # tags 6 and 8 are not defined at version 0


def test_other_types_give_type_and_version_only() -> None:
    assert decode_metadata_record(_frame(20, 0, b"\x01anything")) == OtherMetadataRecord(20, 0)  # NoOpRecord
    assert decode_metadata_record(_frame(999, 7, b"")) == OtherMetadataRecord(999, 7)


def _state() -> PartitionLeadership:
    return PartitionLeadership("t", TOPIC_ID, 0, leader=1, leader_epoch=5, partition_epoch=9, replicas=(1, 2, 3),
                               isr=(1, 2, 3), offset=10)


@pytest.mark.parametrize(
    ("change", "leader", "leader_epoch"),
    [
        (PartitionChangeRecord(0, 0, TOPIC_ID, isr=(1, 2)), 1, 5),  # no leader field: the epoch stays
        (PartitionChangeRecord(0, 0, TOPIC_ID, leader=2), 2, 6),  # a new leader: one more epoch
        (PartitionChangeRecord(0, 0, TOPIC_ID, leader=1, isr=(1,)), 1, 6),  # the same leader named: still one more
        (PartitionChangeRecord(0, 0, TOPIC_ID, leader=NO_LEADER, isr=()), NO_LEADER, 6),  # no leader: one more too
    ],
)
def test_merge_follows_the_leader_field(change: PartitionChangeRecord, leader: int, leader_epoch: int) -> None:
    merged = merge_partition_change(_state(), change, 11)
    assert (merged.leader, merged.leader_epoch, merged.partition_epoch, merged.offset) == (leader, leader_epoch, 10, 11)
    assert merged.isr == (change.isr if change.isr is not None else (1, 2, 3))
    assert merged.replicas == (1, 2, 3)


def _decoded(values: list[bytes], first: int = 0) -> list[tuple[int, MetadataRecord]]:
    return [(first + i, decode_metadata_record(v)) for i, v in enumerate(values)]


def test_replay_creates_changes_and_removes() -> None:
    states = replay_partition_leadership(_decoded([
        topic_value("a"), partition_value(2, partition=0), partition_value(2, partition=1, leader=2),
        topic_value("b", OTHER_ID), partition_value(0, topic_id=OTHER_ID, leader=3),
        change_value(2, {1: pack_i32(3)}, partition=0),
        change_value(2, {0: _array([2])}, partition=1),
        change_value(2, {1: pack_i32(1)}, partition=7),  # no such partition: refused, as the broker refuses it
        remove_value(OTHER_ID),
        remove_value("AAAAAAAAAAAAAAAAAAAAAA"),  # no such topic: refused
    ]))
    assert states == {
        (TOPIC_ID, 0): PartitionLeadership("a", TOPIC_ID, 0, 3, 1, 1, (1, 2, 3), (1, 2, 3), 5),
        (TOPIC_ID, 1): PartitionLeadership("a", TOPIC_ID, 1, 2, 0, 1, (1, 2, 3), (2,), 6),
    }


def test_replay_applies_a_metadata_transaction_whole_or_not_at_all() -> None:
    begin, end, abort = (marker_value(t) for t in (BEGIN_TRANSACTION_RECORD, END_TRANSACTION_RECORD,
                                                    ABORT_TRANSACTION_RECORD))
    created = [topic_value("a"), partition_value(2)]
    assert replay_partition_leadership(_decoded([begin, *created, end]))[(TOPIC_ID, 0)].offset == 2
    assert replay_partition_leadership(_decoded([begin, *created, abort])) == {}
    assert replay_partition_leadership(_decoded([begin, *created])) == {}  # never finished
    after_abort = replay_partition_leadership(_decoded([begin, *created, abort, *created]))
    assert after_abort[(TOPIC_ID, 0)].offset == 5


def test_folder_replays_the_newest_snapshot_then_the_log_after_it() -> None:
    files = {
        # older snapshot: ignored
        "00000000000000000002-0000000001.checkpoint": segment([topic_value("old"), partition_value(0, leader=9)]),
        # newest complete snapshot: the state before offset 5
        "00000000000000000005-0000000001.checkpoint": segment([topic_value("a"), partition_value(
            2, leader=1, leader_epoch=3, partition_epoch=7)]),
        # still being written: ignored
        "00000000000000000009-0000000002.checkpoint.part": segment([remove_value()]),
        # offsets 0-4 are in the snapshot already, 5 and 6 follow it
        "00000000000000000000.log": segment([topic_value("x"), partition_value(2, leader=8), b"\x01\x14\x00\x00",
                                             b"\x01\x14\x00\x00", b"\x01\x14\x00\x00",
                                             change_value(2, {1: pack_i32(2)}),
                                             change_value(2, {0: _array([2, 1])})]),
        "00000000000000000000.index": b"\x00" * 8,
    }
    assert newest_snapshot(files) is not None
    replay = read_cluster_metadata(files)
    assert replay.snapshot == "00000000000000000005-0000000001.checkpoint"
    assert replay.last_offset == 6
    assert replay.partitions == {
        (TOPIC_ID, 0): PartitionLeadership("a", TOPIC_ID, 0, 2, 4, 9, (1, 2, 3), (2, 1), 6)}
    # as of a time before the log's records: the snapshot alone (its records at offset 4)
    early = read_cluster_metadata(files, until_timestamp_ms=T - 1)
    assert early.partitions[(TOPIC_ID, 0)] == PartitionLeadership("a", TOPIC_ID, 0, 1, 3, 7, (1, 2, 3), (1, 2, 3), 4)
    assert early.last_offset == 4


def test_folder_without_snapshot_and_with_several_segments() -> None:
    files = {"00000000000000000002.log": segment([change_value(1, {1: pack_i32(3)})], 2),
             "00000000000000000000.log": segment([topic_value("a"), partition_value(1)])}
    replay = read_cluster_metadata(files)
    assert (replay.snapshot, replay.last_offset) == (None, 2)
    assert replay.partitions[(TOPIC_ID, 0)].leader == 3
    assert read_cluster_metadata({}).last_offset == -1


# -- bad input ---------------------------------------------------------------------------

GOOD_VALUES = [
    topic_value("orders"),
    partition_value(2, tags={0: pack_i8(1), 1: _array([2])}),
    partition_value(0),
    change_value(2, {0: _array([1]), 1: pack_i32(2), 8: _uuids([DIR_ID])}),
    remove_value(),
]


@pytest.mark.parametrize("value", GOOD_VALUES, ids=["topic", "partition-v2", "partition-v0", "change", "remove"])
def test_every_truncation_is_corrupt(value: bytes) -> None:
    decode_metadata_record(value)
    for n in range(len(value)):
        with pytest.raises(CorruptInputError):
            decode_metadata_record(value[:n])


@pytest.mark.parametrize("frame", [0, 2, 127])
def test_unknown_frame_version(frame: int) -> None:
    with pytest.raises(CorruptInputError) as err:
        decode_metadata_record(_frame(TOPIC_RECORD, 0, b"", frame=frame))
    assert err.value.kind == IssueKind.UNKNOWN_VERSION


@pytest.mark.parametrize(
    ("value", "kind"),
    [
        (partition_value(2)[:2] + b"\x03" + partition_value(2)[3:], IssueKind.UNKNOWN_VERSION),  # version 3
        (_frame(TOPIC_RECORD, 1, b""), IssueKind.UNKNOWN_VERSION),
        (topic_value("a") + b"\x00", IssueKind.CORRUPT_RECORD),  # a byte after the message
        (_frame(TOPIC_RECORD, 0, write_uvarint(0) + _uuid(TOPIC_ID) + _tags({})), IssueKind.CORRUPT_RECORD),  # null
        (_frame(TOPIC_RECORD, 0, b"\x02\xff" + _uuid(TOPIC_ID) + _tags({})), IssueKind.CORRUPT_RECORD),  # UTF-8
        (change_value(2, {1: pack_i32(1) + b"\x00"}), IssueKind.CORRUPT_RECORD),  # tagged field too long
        (change_value(2, {0: write_uvarint(1_000_000)}), IssueKind.CORRUPT_RECORD),  # count past the end
        (write_uvarint(1) + write_uvarint(1 << 20) + b"\x00", IssueKind.CORRUPT_RECORD),  # type beyond a short
        (None, IssueKind.CORRUPT_RECORD),
    ],
)
def test_bad_values(value: bytes | None, kind: str) -> None:
    with pytest.raises(CorruptInputError) as err:
        decode_metadata_record(value)
    assert err.value.kind == kind


def test_a_bad_value_in_a_segment_names_its_batch() -> None:
    data = segment([topic_value("a")]) + segment([partition_value(2)[:-3]], 1)
    with pytest.raises(CorruptInputError) as err:
        read_cluster_metadata({"00000000000000000000.log": data})
    assert err.value.position == len(segment([topic_value("a")]))
    assert "offset 1" in err.value.detail


def test_damaged_batches() -> None:
    data = bytearray(segment([topic_value("a"), partition_value(2)]))
    # a torn tail is the normal end of a crashed broker's active segment, but not of a snapshot
    assert read_cluster_metadata({"00000000000000000000.log": bytes(data[:-5])}).last_offset == -1
    with pytest.raises(CorruptInputError):
        read_cluster_metadata({"00000000000000000000-0000000000.checkpoint": bytes(data[:-5])})
    data[-1] ^= 0xFF
    with pytest.raises(CorruptInputError) as err:
        read_cluster_metadata({"00000000000000000000.log": bytes(data)})
    assert err.value.kind == IssueKind.CRC_MISMATCH


@settings(max_examples=400, deadline=None)
@given(st.binary(max_size=80))
def test_arbitrary_bytes_decode_or_raise_corrupt_input(data: bytes) -> None:
    for value in (data, b"\x01\x03\x02" + data, b"\x01\x05\x02" + data, b"\x01\x02\x00" + data):
        try:
            decode_metadata_record(value)
        except CorruptInputError:
            pass


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_corrupted_values_in_valid_batches_never_crash(data: st.DataObject) -> None:
    value = bytearray(data.draw(st.sampled_from(GOOD_VALUES)))
    for _ in range(data.draw(st.integers(1, 3))):
        value[data.draw(st.integers(0, len(value) - 1))] = data.draw(st.integers(0, 255))
    try:
        read_cluster_metadata({"00000000000000000000.log": segment([bytes(value)])})
    except CorruptInputError:
        pass


# -- (d) when the copy stopped growing: kafka-python's reading of the same batches --------------


@needs_kraft
@pytest.mark.parametrize("scenario", KRAFT, ids=[s.id for s in KRAFT])
def test_the_newest_timestamp_is_kafka_pythons_newest_batch_and_after_every_tool_run(
        scenario: CorpusScenario) -> None:
    """The metadata log's newest batch timestamp is the newest kafka-python's decoder reads in the
    segments; the newest of a cluster's copies lies after every tool the harness ran against the
    live cluster (a broker killed before them holds an older copy): it dates the copy."""
    from kafka.record import MemoryRecords

    newest = []
    for folder in _folders(scenario):
        theirs = []
        for segment in sorted(folder.glob("*.log")):
            records = MemoryRecords(segment.read_bytes())
            while records.has_next():
                batch = records.next_batch()
                if batch is not None:
                    theirs.append(batch.max_timestamp)
        ours = newest_timestamp(_files(folder))
        assert ours == max(theirs), folder
        newest.append(ours)
    assert max(newest) >= max(int(c["at_ms"]) for c in scenario.expected["tool_commands"])


# -- (e) the topics' configs: what the harness created them with ---------------------------------


WITH_CONFIGS = [s for s in KRAFT if s.expected.get("topic_configs")]


@pytest.mark.skipif(not WITH_CONFIGS, reason="no scenario in tests/corpus records its topics' configs")
@pytest.mark.parametrize("scenario", WITH_CONFIGS, ids=[s.id for s in WITH_CONFIGS])
def test_topic_configs_are_those_the_topics_were_created_with(scenario: CorpusScenario) -> None:
    """Every config the live cluster described for a topic (``describeConfigs``, dynamic topic
    configs) is the one the replayed metadata log sets, and so is its cleanup policy."""
    for folder in _folders(scenario):
        configs = topic_configs(_files(folder))
        for topic, described in scenario.expected["topic_configs"].items():
            assert dict(configs.topics.get(topic, {})) == described, (folder, topic)
            assert configs.cleanup_policy(topic) == described.get("cleanup.policy"), (folder, topic)


def config_value(resource_type: int, resource_name: str, name: str, value: str | None) -> bytes:
    body = pack_i8(resource_type) + write_compact_string(resource_name) + write_compact_string(name)
    body += write_uvarint(0) if value is None else write_compact_string(value)
    return _frame(CONFIG_RECORD, 0, body + _tags({}))


def test_configs_replay_deletions_defaults_and_removed_topics() -> None:
    created = [topic_value("t"), config_value(2, "t", "cleanup.policy", "compact"),
               config_value(4, "", "log.cleanup.policy", "compact,delete"),
               config_value(4, "1", "log.cleanup.policy", "delete")]  # one broker's own: not the cluster's

    def replay(*more: bytes) -> Any:
        return topic_configs({"00000000000000000000.log": segment([*created, *more])})

    configs = replay()
    assert configs.cleanup_policy("t") == "compact" and configs.cleanup_policy("other") == "compact,delete"
    assert replay(config_value(2, "t", "cleanup.policy", None)).cleanup_policy("t") == "compact,delete"
    assert "t" not in replay(remove_value()).topics
    assert topic_configs({}).cleanup_policy("t") is None


# -- (f) the finalized feature levels: what kafka-features describe printed ------------------------


WITH_FEATURES = [s for s in KRAFT if (s.folder / "tools" / "kafka-features-describe.txt").is_file()]
_FEATURE_LINE = re.compile(r"^Feature: (?P<name>\S+)\s.*FinalizedVersionLevel: (?P<level>\S+)", re.MULTILINE)


@pytest.mark.skipif(not WITH_FEATURES, reason="no KRaft scenario in tests/corpus kept kafka-features describe")
@pytest.mark.parametrize("scenario", WITH_FEATURES, ids=[s.id for s in WITH_FEATURES])
def test_feature_levels_are_those_kafka_features_describes(scenario: CorpusScenario) -> None:
    """Every finalized feature ``kafka-features.sh describe`` printed is the level the replayed
    log leaves; ``metadata.version``, printed by its release name (``4.0-IV3``), is at least
    ``METADATA_VERSION_4_0`` exactly when that release is 4.0 or later."""
    described = {m["name"]: m["level"] for m in _FEATURE_LINE.finditer(
        (scenario.folder / "tools" / "kafka-features-describe.txt").read_text())}
    assert "metadata.version" in described
    for folder in _folders(scenario):
        configs = topic_configs(_files(folder))
        for name, level in described.items():
            if name == "metadata.version":
                assert configs.metadata_version is not None, folder
                assert (configs.metadata_version >= METADATA_VERSION_4_0) == (int(level.split(".")[0]) >= 4), folder
            elif level != "0":  # a feature at 0 is off: the log may never have set it
                assert configs.features.get(name) == int(level), (folder, name)


def test_feature_levels_replay_in_order() -> None:
    def feature_value(name: str, level: int) -> bytes:
        return _frame(FEATURE_LEVEL_RECORD, 0, write_compact_string(name) + pack_i16(level) + _tags({}))

    configs = topic_configs({"00000000000000000000.log": segment(
        [feature_value("metadata.version", 21), feature_value("transaction.version", 2),
         feature_value("metadata.version", 25)])})
    assert configs.metadata_version == 25 and configs.features["transaction.version"] == 2
    assert topic_configs({}).metadata_version is None
