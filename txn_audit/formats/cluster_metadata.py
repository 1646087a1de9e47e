"""The KRaft metadata log (``__cluster_metadata-0``): records, and the partition leadership they set.

The folder holds segments ``<20-digit base offset>.log`` and snapshots
``<20-digit end offset>-<10-digit epoch>.checkpoint``, both v2 record batches (``record_batch``).
A snapshot holds the whole metadata state of the log before its end offset; its batch offsets
count from 0 inside the file and are not log offsets. Control batches (leader change, snapshot
header and footer, KRaft voters) carry no metadata and are skipped.

Every data record has a null key and a value framed as::

    uvarint frameVersion (= 1; 0 was the 2.8 KRaft preview, which no release reads)
    uvarint type         (the record's apiKey, at most 32767)
    uvarint version      (the record's version, at most 32767)
    message              (flexible encoding, nothing may follow it)

Flexible encoding: int8/int32 big-endian, uuid 16 bytes (rendered as ``partition.metadata`` does:
URL-safe base64 without padding, 22 characters), compact string uvarint(length + 1) + UTF-8,
compact array uvarint(count + 1) + elements (0 = null), then a tagged-field section: uvarint
count, per field uvarint tag, uvarint size, payload. Tags a version does not define are skipped.

The six messages decoded here, fields in wire order (``[]`` = compact array)::

    2 TopicRecord v0:           name string, topicId uuid
    3 PartitionRecord v0-2:     partitionId int32, topicId uuid, replicas []int32, isr []int32,
                                removingReplicas []int32, addingReplicas []int32, leader int32,
                                leaderEpoch int32, partitionEpoch int32, directories []uuid (v1+);
                                tags 0 leaderRecoveryState int8 (default 0), v2+: 1 eligibleLeaderReplicas
                                and 2 lastKnownElr, nullable []int32 (default null)
    5 PartitionChangeRecord v0-2: partitionId int32, topicId uuid; tags 0 isr, 2 replicas,
                                3 removingReplicas, 4 addingReplicas (nullable []int32, null = unchanged),
                                1 leader int32 (-2 NO_LEADER_CHANGE, -1 NO_LEADER), 5 leaderRecoveryState int8
                                (-1 = unchanged), v1+: 8 directories nullable []uuid, v2+: 6
                                eligibleLeaderReplicas and 7 lastKnownElr nullable []int32
    4 ConfigRecord v0:          resourceType int8 (2 topic, 4 broker), resourceName string ("" for the
                                cluster's default of a broker config), name string, value nullable string
                                (null = the config is deleted)
    9 RemoveTopicRecord v0:     topicId uuid
   12 FeatureLevelRecord v0:    name string, featureLevel int16 (0 = the feature is switched off)

Any other type decodes to its type and version only. ``METADATA_RECORD_TYPES`` names every type
up to Kafka 4.4; the transaction markers 23/24/25 (Begin/End/AbortTransactionRecord) bracket
records that apply together, or not at all.

Replay follows the broker's metadata image: a TopicRecord starts a topic with no partitions, a
PartitionRecord replaces the partition's registration, a PartitionChangeRecord merges into it
(every field that is not null replaces the old one; a leader other than NO_LEADER_CHANGE
replaces the leader **and adds one to the leader epoch**, even when it names the same broker,
which is how the controller forces an epoch bump; the partition epoch always grows by one), a
RemoveTopicRecord drops the topic and its partitions. A change to a partition that does not
exist, or the removal of an unknown topic, is refused, as the broker's loader refuses it (it
reports the fault and goes on). Not modelled: ClearElrRecord (type 28, written when eligible
leader replicas are switched off), which bumps the partition epoch of partitions with a
non-empty ELR.

The topics' configs (``topic_configs``) replay the ConfigRecords of the topic resource in the same
order; a RemoveTopicRecord drops the configs of the topic it removes, as the controller deletes
them with the topic. The finalized feature levels replay the FeatureLevelRecords the same way.
``metadata.version``'s level names a release (``MetadataVersion.java``: 21 is 3.9-IV0, 22 is
4.0-IV0): a broker never runs a level above the highest its release knows, so a level of
``METADATA_VERSION_4_0`` or more proves brokers of 4.0 or later (a lower one proves nothing: a
4.x cluster may not have finalized its upgrade).

Kafka sources: ``ConfigRecord.json``, ``ConfigurationControlManager.java``, ``TopicRecord.json``,
``PartitionRecord.json``, ``PartitionChangeRecord.json``,
``RemoveTopicRecord.json``, ``FeatureLevelRecord.json``, ``MetadataVersion.java``,
``AbstractApiMessageSerde.java``, ``LeaderConstants.java``,
``PartitionRegistration.java`` (``merge``), ``TopicsDelta.java``, ``TopicDelta.java``,
``MetadataBatchLoader.java`` (transactions), ``Uuid.java`` (``toString``), ``Snapshots.java``.
"""

from __future__ import annotations

import re
import struct
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from txn_audit.errors import CorruptInputError
from txn_audit.formats.api_message import (
    FRAME_VERSION,
    UUID_SIZE,
    expect_end,
    read_frame,
    read_uuid,
    tagged_fields,
    uuid_string,
)
from txn_audit.formats.layout import LogFileName, parse_log_file_name
from txn_audit.formats.model import BatchHeader, DecodeIssue, IssueKind
from txn_audit.formats.primitives import Buffer, Reader
from txn_audit.formats.record_batch import SegmentBuffer, decode_records
from txn_audit.formats.records import MAGIC_VALUE_V2
from txn_audit.formats.segment import iter_batches

__all__ = [
    "ABORT_TRANSACTION_RECORD",
    "BEGIN_TRANSACTION_RECORD",
    "BROKER_RESOURCE",
    "CLEANUP_POLICY",
    "CONFIG_RECORD",
    "END_TRANSACTION_RECORD",
    "FEATURE_LEVEL_RECORD",
    "FRAME_VERSION",
    "METADATA_RECORD_TYPES",
    "METADATA_VERSION",
    "METADATA_VERSION_4_0",
    "NO_LEADER",
    "NO_LEADER_CHANGE",
    "PARTITION_CHANGE_RECORD",
    "PARTITION_RECORD",
    "REMOVE_TOPIC_RECORD",
    "TOPIC_RECORD",
    "TOPIC_RESOURCE",
    "ClusterMetadata",
    "ConfigRecord",
    "FeatureLevelRecord",
    "LeadershipChange",
    "MetadataEntry",
    "MetadataRecord",
    "OtherMetadataRecord",
    "PartitionChangeRecord",
    "PartitionLeadership",
    "PartitionRecord",
    "RemoveTopicRecord",
    "TopicConfigs",
    "TopicRecord",
    "decode_metadata_record",
    "iter_metadata_records",
    "leadership_history",
    "live_segments",
    "merge_partition_change",
    "newest_snapshot",
    "newest_timestamp",
    "json_type_name",
    "read_cluster_metadata",
    "record_from_json",
    "replay_configs",
    "topic_configs",
    "replay_partition_leadership",
    "uuid_string",
]


TOPIC_RECORD: Final = 2
PARTITION_RECORD: Final = 3
CONFIG_RECORD: Final = 4
PARTITION_CHANGE_RECORD: Final = 5
REMOVE_TOPIC_RECORD: Final = 9
FEATURE_LEVEL_RECORD: Final = 12
BEGIN_TRANSACTION_RECORD: Final = 23
END_TRANSACTION_RECORD: Final = 24
ABORT_TRANSACTION_RECORD: Final = 25

#: highest version of each decoded message (Kafka 3.3 to 4.4)
HIGHEST_VERSIONS: Final[dict[int, int]] = {
    TOPIC_RECORD: 0,
    PARTITION_RECORD: 2,
    CONFIG_RECORD: 0,
    PARTITION_CHANGE_RECORD: 2,
    REMOVE_TOPIC_RECORD: 0,
    FEATURE_LEVEL_RECORD: 0,
}

#: every metadata record type up to Kafka 4.4, by apiKey (6, 13 and 16 were never used)
METADATA_RECORD_TYPES: Final[dict[int, str]] = {
    0: "RegisterBrokerRecord",
    1: "UnregisterBrokerRecord",
    2: "TopicRecord",
    3: "PartitionRecord",
    4: "ConfigRecord",
    5: "PartitionChangeRecord",
    7: "FenceBrokerRecord",
    8: "UnfenceBrokerRecord",
    9: "RemoveTopicRecord",
    10: "DelegationTokenRecord",
    11: "UserScramCredentialRecord",
    12: "FeatureLevelRecord",
    14: "ClientQuotaRecord",
    15: "ProducerIdsRecord",
    17: "BrokerRegistrationChangeRecord",
    18: "AccessControlEntryRecord",
    19: "RemoveAccessControlEntryRecord",
    20: "NoOpRecord",
    21: "ZkMigrationStateRecord",
    22: "RemoveUserScramCredentialRecord",
    23: "BeginTransactionRecord",
    24: "EndTransactionRecord",
    25: "AbortTransactionRecord",
    26: "RemoveDelegationTokenRecord",
    27: "RegisterControllerRecord",
    28: "ClearElrRecord",
    29: "UnregisterControllerRecord",
}

#: ConfigRecord's resourceType (``ConfigResource.Type``)
TOPIC_RESOURCE: Final = 2
BROKER_RESOURCE: Final = 4

#: the feature whose level names the metadata's release, and the first level of Kafka 4.0 (4.0-IV0)
METADATA_VERSION: Final = "metadata.version"
METADATA_VERSION_4_0: Final = 22

NO_LEADER: Final = -1  # the partition has no leader
NO_LEADER_CHANGE: Final = -2  # PartitionChangeRecord.leader default: the leader stays

# PartitionRecord tags
TAG_LEADER_RECOVERY_STATE: Final = 0
TAG_ELIGIBLE_LEADER_REPLICAS: Final = 1
TAG_LAST_KNOWN_ELR: Final = 2
# PartitionChangeRecord tags
TAG_CHANGE_ISR: Final = 0
TAG_CHANGE_LEADER: Final = 1
TAG_CHANGE_REPLICAS: Final = 2
TAG_CHANGE_REMOVING_REPLICAS: Final = 3
TAG_CHANGE_ADDING_REPLICAS: Final = 4
TAG_CHANGE_LEADER_RECOVERY_STATE: Final = 5
TAG_CHANGE_ELIGIBLE_LEADER_REPLICAS: Final = 6
TAG_CHANGE_LAST_KNOWN_ELR: Final = 7
TAG_CHANGE_DIRECTORIES: Final = 8

_CORRUPT: Final = IssueKind.CORRUPT_RECORD.value
_UNKNOWN_VERSION: Final = IssueKind.UNKNOWN_VERSION.value
_TAIL_KINDS: Final = frozenset({IssueKind.TRUNCATED_TAIL.value, IssueKind.ZERO_FILLED_TAIL.value})


# -- records ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TopicRecord:
    version: int
    name: str
    topic_id: str

    @property
    def record_type(self) -> int:
        return TOPIC_RECORD


@dataclass(frozen=True, slots=True)
class PartitionRecord:
    """A partition's whole registration. Fields a version lacks keep their defaults."""

    version: int
    partition_id: int
    topic_id: str
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    removing_replicas: tuple[int, ...]
    adding_replicas: tuple[int, ...]
    leader: int
    leader_recovery_state: int
    leader_epoch: int
    partition_epoch: int
    directories: tuple[str, ...] = ()
    eligible_leader_replicas: tuple[int, ...] | None = None
    last_known_elr: tuple[int, ...] | None = None

    @property
    def record_type(self) -> int:
        return PARTITION_RECORD


@dataclass(frozen=True, slots=True)
class PartitionChangeRecord:
    """What changed in a partition; ``None`` (and ``NO_LEADER_CHANGE``, -1 recovery state) = unchanged."""

    version: int
    partition_id: int
    topic_id: str
    isr: tuple[int, ...] | None = None
    leader: int = NO_LEADER_CHANGE
    replicas: tuple[int, ...] | None = None
    removing_replicas: tuple[int, ...] | None = None
    adding_replicas: tuple[int, ...] | None = None
    leader_recovery_state: int = -1
    directories: tuple[str, ...] | None = None
    eligible_leader_replicas: tuple[int, ...] | None = None
    last_known_elr: tuple[int, ...] | None = None

    @property
    def record_type(self) -> int:
        return PARTITION_CHANGE_RECORD


@dataclass(frozen=True, slots=True)
class RemoveTopicRecord:
    version: int
    topic_id: str

    @property
    def record_type(self) -> int:
        return REMOVE_TOPIC_RECORD


@dataclass(frozen=True, slots=True)
class ConfigRecord:
    version: int
    resource_type: int
    resource_name: str
    name: str
    value: str | None  # None: the config is deleted

    @property
    def record_type(self) -> int:
        return CONFIG_RECORD


@dataclass(frozen=True, slots=True)
class FeatureLevelRecord:
    version: int
    name: str
    feature_level: int

    @property
    def record_type(self) -> int:
        return FEATURE_LEVEL_RECORD


@dataclass(frozen=True, slots=True)
class OtherMetadataRecord:
    """Any record type not decoded here: its type and version only."""

    record_type: int
    version: int


MetadataRecord = (TopicRecord | PartitionRecord | PartitionChangeRecord | ConfigRecord | RemoveTopicRecord
                  | FeatureLevelRecord | OtherMetadataRecord)


@dataclass(frozen=True, slots=True)
class MetadataEntry:
    """A metadata record with its offset and timestamp in the file it was read from."""

    offset: int
    timestamp: int
    record: MetadataRecord


@dataclass(frozen=True, slots=True)
class PartitionLeadership:
    """A partition's leadership after replay; ``offset``: the metadata log offset that last set it."""

    topic: str | None
    topic_id: str
    partition: int
    leader: int
    leader_epoch: int
    partition_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    offset: int


@dataclass(frozen=True, slots=True)
class ClusterMetadata:
    """The replayed state of one ``__cluster_metadata-0`` folder.

    ``last_offset`` is the highest metadata log offset read (a record's, or a control batch's last
    offset; the snapshot's end offset - 1 when no log record follows it; -1 when nothing was
    read). ``snapshot`` is the name of the snapshot replayed first, if any.
    """

    partitions: dict[tuple[str, int], PartitionLeadership]
    last_offset: int
    snapshot: str | None


# -- decoding one record value ---------------------------------------------------------


def _count(r: Reader, what: str, element_size: int, *, nullable: bool) -> int | None:
    """A compact array's element count; ``None`` for a null array (only where allowed)."""
    start = r.pos
    n = r.uvarint() - 1
    if n < 0:
        if nullable:
            return None
        raise CorruptInputError(_CORRUPT, start, f"{what}: null for a non-nullable array")
    if n * element_size > r.remaining:
        raise CorruptInputError(_CORRUPT, start, f"{what}: {n} elements exceed the {r.remaining} bytes left")
    return n


def _int32_array(r: Reader, what: str) -> tuple[int, ...]:
    n = _count(r, what, 4, nullable=False)
    assert n is not None
    return struct.unpack(f">{n}i", r.raw(4 * n, what))


def _nullable_int32_array(r: Reader, what: str) -> tuple[int, ...] | None:
    n = _count(r, what, 4, nullable=True)
    if n is None:
        return None
    return struct.unpack(f">{n}i", r.raw(4 * n, what))


def _uuid_array(r: Reader, what: str, *, nullable: bool) -> tuple[str, ...] | None:
    n = _count(r, what, UUID_SIZE, nullable=nullable)
    if n is None:
        return None
    return tuple(read_uuid(r) for _ in range(n))


def _topic_record(r: Reader, version: int) -> TopicRecord:
    name = r.compact_string()
    assert name is not None  # non-nullable read raises instead
    topic_id = read_uuid(r)
    for _tag, _payload in tagged_fields(r, "TopicRecord"):
        pass  # none defined
    return TopicRecord(version, name, topic_id)


def _partition_record(r: Reader, version: int) -> PartitionRecord:
    partition_id = r.int32()
    topic_id = read_uuid(r)
    replicas = _int32_array(r, "replicas")
    isr = _int32_array(r, "isr")
    removing = _int32_array(r, "removingReplicas")
    adding = _int32_array(r, "addingReplicas")
    leader = r.int32()
    leader_epoch = r.int32()
    partition_epoch = r.int32()
    directories: tuple[str, ...] = ()
    if version >= 1:
        dirs = _uuid_array(r, "directories", nullable=False)
        assert dirs is not None
        directories = dirs
    recovery = 0
    elr: tuple[int, ...] | None = None
    last_known_elr: tuple[int, ...] | None = None
    for tag, t in tagged_fields(r, "PartitionRecord"):
        if tag == TAG_LEADER_RECOVERY_STATE:
            recovery = t.int8()
        elif tag == TAG_ELIGIBLE_LEADER_REPLICAS and version >= 2:
            elr = _nullable_int32_array(t, "eligibleLeaderReplicas")
        elif tag == TAG_LAST_KNOWN_ELR and version >= 2:
            last_known_elr = _nullable_int32_array(t, "lastKnownElr")
        else:
            continue  # a tag this version does not define
        expect_end(t, f"PartitionRecord tagged field {tag}")
    return PartitionRecord(
        version, partition_id, topic_id, replicas, isr, removing, adding, leader, recovery, leader_epoch,
        partition_epoch, directories, elr, last_known_elr,
    )


#: PartitionChangeRecord tags holding a nullable []int32: tag -> (field name, first version)
_CHANGE_ARRAYS: Final[dict[int, tuple[str, int]]] = {
    TAG_CHANGE_ISR: ("isr", 0),
    TAG_CHANGE_REPLICAS: ("replicas", 0),
    TAG_CHANGE_REMOVING_REPLICAS: ("removingReplicas", 0),
    TAG_CHANGE_ADDING_REPLICAS: ("addingReplicas", 0),
    TAG_CHANGE_ELIGIBLE_LEADER_REPLICAS: ("eligibleLeaderReplicas", 2),
    TAG_CHANGE_LAST_KNOWN_ELR: ("lastKnownElr", 2),
}


def _partition_change_record(r: Reader, version: int) -> PartitionChangeRecord:
    partition_id = r.int32()
    topic_id = read_uuid(r)
    arrays: dict[int, tuple[int, ...] | None] = {}
    leader = NO_LEADER_CHANGE
    recovery = -1
    directories: tuple[str, ...] | None = None
    for tag, t in tagged_fields(r, "PartitionChangeRecord"):
        array = _CHANGE_ARRAYS.get(tag)
        if array is not None and version >= array[1]:
            arrays[tag] = _nullable_int32_array(t, array[0])
        elif tag == TAG_CHANGE_LEADER:
            leader = t.int32()
        elif tag == TAG_CHANGE_LEADER_RECOVERY_STATE:
            recovery = t.int8()
        elif tag == TAG_CHANGE_DIRECTORIES and version >= 1:
            directories = _uuid_array(t, "directories", nullable=True)
        else:
            continue  # a tag this version does not define
        expect_end(t, f"PartitionChangeRecord tagged field {tag}")
    return PartitionChangeRecord(
        version,
        partition_id,
        topic_id,
        isr=arrays.get(TAG_CHANGE_ISR),
        leader=leader,
        replicas=arrays.get(TAG_CHANGE_REPLICAS),
        removing_replicas=arrays.get(TAG_CHANGE_REMOVING_REPLICAS),
        adding_replicas=arrays.get(TAG_CHANGE_ADDING_REPLICAS),
        leader_recovery_state=recovery,
        directories=directories,
        eligible_leader_replicas=arrays.get(TAG_CHANGE_ELIGIBLE_LEADER_REPLICAS),
        last_known_elr=arrays.get(TAG_CHANGE_LAST_KNOWN_ELR),
    )


def _config_record(r: Reader, version: int) -> ConfigRecord:
    resource_type = r.int8()
    resource_name = r.compact_string()
    name = r.compact_string()
    value = r.compact_string(nullable=True)
    assert resource_name is not None and name is not None  # non-nullable reads raise instead
    for _tag, _payload in tagged_fields(r, "ConfigRecord"):
        pass  # none defined
    return ConfigRecord(version, resource_type, resource_name, name, value)


def _remove_topic_record(r: Reader, version: int) -> RemoveTopicRecord:
    topic_id = read_uuid(r)
    for _tag, _payload in tagged_fields(r, "RemoveTopicRecord"):
        pass  # none defined
    return RemoveTopicRecord(version, topic_id)


def _feature_level_record(r: Reader, version: int) -> FeatureLevelRecord:
    name = r.compact_string()
    level = r.int16()
    assert name is not None  # non-nullable reads raise instead
    for _tag, _payload in tagged_fields(r, "FeatureLevelRecord"):
        pass  # none defined
    return FeatureLevelRecord(version, name, level)


def json_type_name(record_type: int) -> str:
    """The ``type`` ``kafka-dump-log --cluster-metadata-decoder`` prints for a record type
    (``FeatureLevelRecord`` -> ``FEATURE_LEVEL_RECORD``)."""
    return re.sub(r"(?<!^)(?=[A-Z])", "_", METADATA_RECORD_TYPES[record_type]).upper()


_TYPES_BY_JSON_NAME: Final = {json_type_name(record_type): record_type for record_type in METADATA_RECORD_TYPES}


def record_from_json(payload: Mapping[str, Any]) -> MetadataRecord:
    """A record from the JSON ``kafka-dump-log --cluster-metadata-decoder`` prints
    (``{"type": "CONFIG_RECORD", "version": 0, "data": {...}}``): the types ``replay_configs``
    reads in full, any other one as its type and version. Raises ``KeyError``, ``TypeError`` or
    ``ValueError`` on a payload that is not one."""
    record_type, version, data = _TYPES_BY_JSON_NAME[payload["type"]], int(payload["version"]), payload["data"]
    if record_type == TOPIC_RECORD:
        return TopicRecord(version, str(data["name"]), str(data["topicId"]))
    if record_type == REMOVE_TOPIC_RECORD:
        return RemoveTopicRecord(version, str(data["topicId"]))
    if record_type == CONFIG_RECORD:
        value = data.get("value")
        return ConfigRecord(version, int(data["resourceType"]), str(data["resourceName"]), str(data["name"]),
                            None if value is None else str(value))
    if record_type == FEATURE_LEVEL_RECORD:
        return FeatureLevelRecord(version, str(data["name"]), int(data["featureLevel"]))
    return OtherMetadataRecord(record_type, version)


def decode_metadata_record(value: Buffer | None) -> MetadataRecord:
    """Decode one record value of the metadata log (frame, then the message of the six known types).

    Raises ``CorruptInputError``: ``unknown_version`` for a frame version other than 1 or a
    version above the highest known of a decoded type, ``corrupt_record`` for a null value,
    truncation, impossible lengths, bad UTF-8 or bytes left after the message.
    """
    if value is None:
        raise CorruptInputError(_CORRUPT, 0, "null value: metadata records always have one")
    r = Reader(value, kind=_CORRUPT)
    record_type, version = read_frame(r)
    highest = HIGHEST_VERSIONS.get(record_type)
    if highest is None:
        return OtherMetadataRecord(record_type, version)
    name = METADATA_RECORD_TYPES[record_type]
    if version > highest:
        raise CorruptInputError(_UNKNOWN_VERSION, 0, f"{name} version {version}, at most {highest} is known")
    record: MetadataRecord
    if record_type == TOPIC_RECORD:
        record = _topic_record(r, version)
    elif record_type == PARTITION_RECORD:
        record = _partition_record(r, version)
    elif record_type == PARTITION_CHANGE_RECORD:
        record = _partition_change_record(r, version)
    elif record_type == CONFIG_RECORD:
        record = _config_record(r, version)
    elif record_type == FEATURE_LEVEL_RECORD:
        record = _feature_level_record(r, version)
    else:
        record = _remove_topic_record(r, version)
    expect_end(r, name)
    return record


# -- walking a segment or snapshot -----------------------------------------------------


def _data_batches(buf: SegmentBuffer, *, allow_truncated_tail: bool) -> Iterator[tuple[BatchHeader, bool]]:
    """Each batch header with whether it holds metadata records (False: a control batch)."""
    for item in iter_batches(buf):
        if isinstance(item, DecodeIssue):
            if allow_truncated_tail and item.kind in _TAIL_KINDS:
                return  # a torn active segment: the broker truncates it on restart
            raise CorruptInputError(item.kind, item.position, item.detail)
        if item.magic != MAGIC_VALUE_V2:
            raise CorruptInputError(IssueKind.BAD_MAGIC.value, item.position, f"magic {item.magic} in the metadata log")
        if not item.crc_ok:
            raise CorruptInputError(
                IssueKind.CRC_MISMATCH.value,
                item.position,
                f"stored CRC-32C {item.stored_crc:#010x}, computed {item.computed_crc:#010x}",
            )
        yield item, not item.is_control


def iter_metadata_records(buf: SegmentBuffer, *, allow_truncated_tail: bool = True) -> Iterator[MetadataEntry]:
    """The metadata records of a segment or snapshot file in file order, control batches skipped.

    Damage raises ``CorruptInputError`` (position: the batch's byte offset in the file), except
    a torn or zero-filled tail when ``allow_truncated_tail`` (the normal end of a crashed
    broker's active segment; a snapshot is written whole, so pass False for one).
    """
    for _header, entry in _walk(buf, allow_truncated_tail=allow_truncated_tail):
        if entry is not None:
            yield entry


def _walk(buf: SegmentBuffer, *, allow_truncated_tail: bool) -> Iterator[tuple[BatchHeader, MetadataEntry | None]]:
    """(batch header, entry) per metadata record, and (header, None) per control batch."""
    for header, has_records in _data_batches(buf, allow_truncated_tail=allow_truncated_tail):
        if not has_records:
            yield header, None
            continue
        for rec in decode_records(buf, header):
            try:
                record = decode_metadata_record(rec.value)
            except CorruptInputError as err:
                raise CorruptInputError(
                    err.kind, header.position, f"metadata record at offset {rec.offset}: {err.detail}"
                ) from err
            yield header, MetadataEntry(rec.offset, rec.timestamp, record)


# -- replay ----------------------------------------------------------------------------


class _Image:
    """The topics and partitions replayed so far, keyed by topic id."""

    def __init__(self) -> None:
        self.names: dict[str, str] = {}
        self.partitions: dict[str, dict[int, PartitionLeadership]] = {}

    def apply(self, offset: int, record: MetadataRecord) -> PartitionLeadership | None:
        """Apply ``record``; the partition state it set, if it set one."""
        if isinstance(record, TopicRecord):
            self.names[record.topic_id] = record.name
            self.partitions[record.topic_id] = {}  # a new topic starts with no partitions
        elif isinstance(record, PartitionRecord):
            state = self.partitions.setdefault(record.topic_id, {})[record.partition_id] = PartitionLeadership(
                topic=self.names.get(record.topic_id),
                topic_id=record.topic_id,
                partition=record.partition_id,
                leader=record.leader,
                leader_epoch=record.leader_epoch,
                partition_epoch=record.partition_epoch,
                replicas=record.replicas,
                isr=record.isr,
                offset=offset,
            )
            return state
        elif isinstance(record, PartitionChangeRecord):
            topic = self.partitions.get(record.topic_id)
            previous = None if topic is None else topic.get(record.partition_id)
            if topic is not None and previous is not None:
                changed = topic[record.partition_id] = merge_partition_change(previous, record, offset)
                return changed
        elif isinstance(record, RemoveTopicRecord):
            self.names.pop(record.topic_id, None)
            self.partitions.pop(record.topic_id, None)
        return None

    def leadership(self) -> dict[tuple[str, int], PartitionLeadership]:
        return {
            (topic_id, p): state
            for topic_id, parts in sorted(self.partitions.items())
            for p, state in sorted(parts.items())
        }


def merge_partition_change(
    previous: PartitionLeadership, change: PartitionChangeRecord, offset: int
) -> PartitionLeadership:
    """``previous`` with ``change`` applied, as the broker merges it into a partition registration.

    Null arrays keep the old value. A leader other than ``NO_LEADER_CHANGE`` (``NO_LEADER``
    included) replaces the leader and adds one to the leader epoch; the partition epoch always
    adds one.
    """
    if change.leader == NO_LEADER_CHANGE:
        leader, leader_epoch = previous.leader, previous.leader_epoch
    else:
        leader, leader_epoch = change.leader, previous.leader_epoch + 1
    return PartitionLeadership(
        topic=previous.topic,
        topic_id=previous.topic_id,
        partition=previous.partition,
        leader=leader,
        leader_epoch=leader_epoch,
        partition_epoch=previous.partition_epoch + 1,
        replicas=previous.replicas if change.replicas is None else change.replicas,
        isr=previous.isr if change.isr is None else change.isr,
        offset=offset,
    )


def replay_partition_leadership(
    records: Iterable[tuple[int, MetadataRecord]],
) -> dict[tuple[str, int], PartitionLeadership]:
    """Every partition's leadership after ``(offset, record)`` pairs in log order, by (topic id, partition).

    Pass the newest snapshot's records first, then the log records from its end offset on.
    Records between a BeginTransactionRecord and its EndTransactionRecord apply at the end;
    an AbortTransactionRecord drops them, and so does the end of the input (the broker never
    publishes an unfinished metadata transaction).
    """
    image = _Image()
    for _stamp, offset, record in _published((-1, offset, record) for offset, record in records):
        image.apply(offset, record)
    return image.leadership()


def _published(records: Iterable[tuple[int, int, MetadataRecord]]) -> Iterator[tuple[int, int, MetadataRecord]]:
    """``(timestamp, offset, record)`` triples as the broker publishes them: a metadata
    transaction's records at its end, an aborted or unfinished one's never."""
    pending: list[tuple[int, int, MetadataRecord]] | None = None
    for stamp, offset, record in records:
        kind = record.record_type
        if kind == BEGIN_TRANSACTION_RECORD:
            if pending is None:
                pending = []
        elif kind == END_TRANSACTION_RECORD:
            yield from pending or ()
            pending = None
        elif kind == ABORT_TRANSACTION_RECORD:
            pending = None
        elif pending is not None:
            pending.append((stamp, offset, record))
        else:
            yield stamp, offset, record


@dataclass(frozen=True, slots=True)
class LeadershipChange:
    """A state a partition took: ``timestamp`` of the record that set it (-1 for the states a
    snapshot holds, which apply from the start)."""

    timestamp: int
    state: PartitionLeadership


# -- one folder ------------------------------------------------------------------------


def newest_snapshot(names: Iterable[str]) -> LogFileName | None:
    """The complete snapshot with the highest (end offset, epoch) among file names, if any."""
    snapshots = [
        parsed for name in names
        if (parsed := parse_log_file_name(name)) is not None and parsed.kind == "checkpoint" and parsed.is_live
    ]
    return max(snapshots, key=lambda s: (s.base_offset, s.epoch or 0), default=None)


def live_segments(names: Iterable[str]) -> list[LogFileName]:
    """The live ``.log`` segments among file names, in base-offset order."""
    segments = [
        parsed for name in names
        if (parsed := parse_log_file_name(name)) is not None and parsed.kind == "log" and parsed.is_live
    ]
    return sorted(segments, key=lambda s: s.base_offset)


def _log_records(
    segment: SegmentBuffer, start: int, until_timestamp_ms: int | None
) -> tuple[list[tuple[int, MetadataRecord]], int]:
    """A segment's (offset, record) pairs from offset ``start`` on, and the highest offset among them
    and its control batches (-1 if none); records stamped after ``until_timestamp_ms`` left out."""
    out: list[tuple[int, MetadataRecord]] = []
    last_offset = -1
    for header, entry in _walk(segment, allow_truncated_tail=True):
        if entry is None:  # a control batch
            late = until_timestamp_ms is not None and header.max_timestamp > until_timestamp_ms
            if header.last_offset >= start and not late:
                last_offset = max(last_offset, header.last_offset)
        elif entry.offset >= start and (until_timestamp_ms is None or entry.timestamp <= until_timestamp_ms):
            last_offset = max(last_offset, entry.offset)
            out.append((entry.offset, entry.record))
    return out, last_offset


def read_cluster_metadata(
    files: Mapping[str, SegmentBuffer], *, until_timestamp_ms: int | None = None
) -> ClusterMetadata:
    """Replay one ``__cluster_metadata-0`` folder given as file name -> bytes.

    The newest snapshot's records come first (each at offset snapshot end - 1, the last log
    offset it covers), then the records of the ``.log`` segments from the snapshot's end offset
    on, in offset order. With ``until_timestamp_ms``, log records stamped later are left out
    (the leadership as of that time); the snapshot always applies. Other files are ignored.
    """
    snapshot = newest_snapshot(files)
    records: list[tuple[int, MetadataRecord]] = []
    start = 0 if snapshot is None else snapshot.base_offset
    last_offset = start - 1 if snapshot is not None else -1
    if snapshot is not None:
        records += [(last_offset, e.record) for e in iter_metadata_records(files[snapshot.name],
                                                                           allow_truncated_tail=False)]
    for segment in live_segments(files):
        segment_records, segment_last = _log_records(files[segment.name], start, until_timestamp_ms)
        records += segment_records
        last_offset = max(last_offset, segment_last)
    return ClusterMetadata(
        partitions=replay_partition_leadership(records),
        last_offset=last_offset,
        snapshot=None if snapshot is None else snapshot.name,
    )


#: the topic config that says whether the cleaner compacts a topic, and its broker-wide default
CLEANUP_POLICY: Final = "cleanup.policy"
DEFAULT_CLEANUP_POLICY: Final = "log.cleanup.policy"


@dataclass(frozen=True)
class TopicConfigs:
    """The configs the metadata log sets: per topic name, and the cluster's defaults of the broker
    configs (``resourceName`` ""), as its records leave them; and the finalized feature levels
    (``features``: name -> level, e.g. ``metadata.version`` -> 25)."""

    topics: Mapping[str, Mapping[str, str]]
    cluster: Mapping[str, str]
    features: Mapping[str, int] = field(default_factory=dict)

    @property
    def metadata_version(self) -> int | None:
        """The finalized ``metadata.version`` level; None when the log does not set it."""
        return self.features.get(METADATA_VERSION)

    def cleanup_policy(self, topic: str) -> str | None:
        """The topic's ``cleanup.policy``, else the cluster's ``log.cleanup.policy``; None when the
        log sets neither (then Kafka's default, ``delete``, applies unless a broker's own file
        sets another: the log does not show it)."""
        return self.topics.get(topic, {}).get(CLEANUP_POLICY, self.cluster.get(DEFAULT_CLEANUP_POLICY))


def topic_configs(files: Mapping[str, SegmentBuffer]) -> TopicConfigs:
    """The configs and feature levels one ``__cluster_metadata-0`` folder (file name -> bytes) sets:
    the newest snapshot's, then the log's records after it (``replay_configs``)."""
    snapshot = newest_snapshot(files)
    start = 0 if snapshot is None else snapshot.base_offset
    stamped: list[tuple[int, int, MetadataRecord]] = []
    if snapshot is not None:
        stamped += [(-1, start - 1, e.record)
                    for e in iter_metadata_records(files[snapshot.name], allow_truncated_tail=False)]
    for segment in live_segments(files):
        walked = _walk(files[segment.name], allow_truncated_tail=True)
        stamped += [(e.timestamp, e.offset, e.record) for _, e in walked if e is not None and e.offset >= start]
    return replay_configs(stamped)


def replay_configs(stamped: Iterable[tuple[int, int, MetadataRecord]]) -> TopicConfigs:
    """The configs and feature levels ``(timestamp, offset, record)`` triples in log order leave, a
    metadata transaction's records only once it ends."""
    names: dict[str, str] = {}
    topics: dict[str, dict[str, str]] = {}
    cluster: dict[str, str] = {}
    features: dict[str, int] = {}
    for _, _, record in _published(stamped):
        if isinstance(record, FeatureLevelRecord):
            features[record.name] = record.feature_level
        elif isinstance(record, TopicRecord):
            names[record.topic_id] = record.name
        elif isinstance(record, RemoveTopicRecord):
            topics.pop(names.pop(record.topic_id, ""), None)
        elif isinstance(record, ConfigRecord):
            if record.resource_type == TOPIC_RESOURCE:
                configs = topics.setdefault(record.resource_name, {})
            elif record.resource_type == BROKER_RESOURCE and record.resource_name == "":
                configs = cluster
            else:
                continue
            if record.value is None:
                configs.pop(record.name, None)
            else:
                configs[record.name] = record.value
    return TopicConfigs(topics, cluster, features)


def newest_timestamp(files: Mapping[str, SegmentBuffer]) -> int | None:
    """The newest batch timestamp (``maxTimestamp``) of one ``__cluster_metadata-0`` folder's live
    ``.log`` segments (file name -> bytes), control batches included; None when they hold no
    batch. The active controller appends a record at least every ``metadata.max.idle.interval.ms``
    (500 ms by default, a NoOpRecord when nothing else changes), so this dates when the copy
    stopped growing: its broker's shutdown, or the copy of a running one."""
    newest: int | None = None
    for segment in live_segments(files):
        for header, _ in _data_batches(files[segment.name], allow_truncated_tail=True):
            newest = header.max_timestamp if newest is None else max(newest, header.max_timestamp)
    return newest


def leadership_history(files: Mapping[str, SegmentBuffer]) -> tuple[list[LeadershipChange], int]:
    """Every state each partition of one ``__cluster_metadata-0`` folder (file name -> bytes) took,
    in log order: the newest snapshot's, then one per log record that changed it; and the highest
    offset read (as ``read_cluster_metadata``). The state at a time ``t`` is a partition's last
    change stamped at or before ``t``: a dump copied after the brokers shut down ends with the
    controlled shutdown's leader moves, which the audit of the traffic before them must not take."""
    snapshot = newest_snapshot(files)
    start = 0 if snapshot is None else snapshot.base_offset
    last_offset = start - 1 if snapshot is not None else -1
    stamped: list[tuple[int, int, MetadataRecord]] = []
    if snapshot is not None:
        stamped += [(-1, last_offset, e.record)
                    for e in iter_metadata_records(files[snapshot.name], allow_truncated_tail=False)]
    for segment in live_segments(files):
        for header, entry in _walk(files[segment.name], allow_truncated_tail=True):
            if entry is None:
                if header.last_offset >= start:
                    last_offset = max(last_offset, header.last_offset)
            elif entry.offset >= start:
                last_offset = max(last_offset, entry.offset)
                stamped.append((entry.timestamp, entry.offset, entry.record))
    image = _Image()
    changes = []
    for stamp, offset, record in _published(stamped):
        state = image.apply(offset, record)
        if state is not None:
            changes.append(LeadershipChange(stamp, state))
    return changes, last_offset
