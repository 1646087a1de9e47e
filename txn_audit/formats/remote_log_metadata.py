"""The tiered storage's metadata topic (``__remote_log_metadata``, KIP-405): records, and the remote segments.

``TopicBasedRemoteLogMetadataManager`` writes one record per event of a remote segment's life
(copy started, copy finished, delete started, delete finished) and of a partition's deletion. The
records of one user partition all go to the same partition of the topic. Every record has a null
key and a value written by ``RemoteLogMetadataSerde`` with the KRaft metadata records' framing
(``AbstractApiMessageSerde``)::

    uvarint frameVersion (= 1; Kafka refuses 0, the 2.8 KRaft preview's, and any other)
    uvarint apiKey       (the message type, at most 32767)
    uvarint version      (the message version, at most 32767)
    message              (flexible encoding, nothing may follow it)

Flexible encoding: int8/int32/int64 big-endian, bool one byte (anything but 0 is true), uuid 16
bytes (rendered as Kafka's ``Uuid.toString``: URL-safe base64 without padding, 22 characters),
compact string uvarint(length + 1) + UTF-8, compact nullable bytes uvarint(length + 1) + bytes
(0 = null), compact array uvarint(count + 1) + elements. The message, every nested struct and
every array element end with their own tagged-field section: uvarint count, per field uvarint
tag, uvarint size, payload. Tags a version does not define are skipped.

The messages, fields in wire order (``{...; tags}`` = a struct with its tagged-field section,
``[]`` = compact array)::

    TopicIdPartitionEntry    = {Name string, Id uuid, Partition int32; tags}
    RemoteLogSegmentIdEntry  = {TopicIdPartition TopicIdPartitionEntry, Id uuid; tags}

    0 RemoteLogSegmentMetadataRecord v0-1:
          RemoteLogSegmentId RemoteLogSegmentIdEntry, StartOffset int64, EndOffset int64,
          BrokerId int32, MaxTimestampMs int64, EventTimestampMs int64,
          SegmentLeaderEpochs [] {LeaderEpoch int32, Offset int64; tags}, SegmentSizeInBytes int32,
          CustomMetadata nullable bytes, RemoteLogSegmentState int8;
          tags 0 TxnIndexEmpty bool (default false), v1+: 1 BrokerLeaderEpoch int32 (default 0)
    1 RemoteLogSegmentMetadataUpdateRecord v0-1:
          RemoteLogSegmentId RemoteLogSegmentIdEntry, BrokerId int32, EventTimestampMs int64,
          CustomMetadata nullable bytes, RemoteLogSegmentState int8;
          v1+: tags 0 BrokerLeaderEpoch int32 (default -1), 1 EndOffset int64 (default -1)
    2 RemotePartitionDeleteMetadataRecord v0-1:
          TopicIdPartition TopicIdPartitionEntry, BrokerId int32, EventTimestampMs int64,
          RemotePartitionDeleteState int8;
          v1+: tags 0 BrokerLeaderEpoch int32 (default 0), 1 EndOffset int64 (default 0)
    3 RemoteLogSegmentMetadataSnapshotRecord: an entry of the broker's local snapshot of the
          metadata, never written to the topic; decoded to its type and version only, as is any
          other apiKey (Kafka's serde refuses those).

Every release from 3.6 to 4.4 writes version 0 of each message (``validVersions`` "0" in the
schemas packaged in the kafka-storage jars 3.9.2, 4.0.2, 4.1.2 and 4.4.0, and at tag 3.6.0).
CustomMetadata is there from 3.6 (KIP-917); the TxnIndexEmpty tag from 4.0 (KAFKA-16780; a 3.x
broker never writes it and a 4.x one writes it only when true, so a record without it reads as
false, as Kafka reads it). Version 1, which adds only the tagged fields marked v1+, is in
apache/kafka's trunk after 4.4 and in no release up to 4.4.0.

RemoteLogSegmentState ids: 0 COPY_SEGMENT_STARTED, 1 COPY_SEGMENT_FINISHED, 2 DELETE_SEGMENT_STARTED,
3 DELETE_SEGMENT_FINISHED. RemotePartitionDeleteState ids: 0 DELETE_PARTITION_MARKED,
1 DELETE_PARTITION_STARTED, 2 DELETE_PARTITION_FINISHED. A value Kafka's deserializer refuses is
refused here too (``corrupt_record``): a state id outside these, and a segment with a negative
start offset, an end offset below its start offset or no leader epoch (the checks of
``RemoteLogSegmentMetadata``'s constructor).

Replay (``remote_segments``) follows the broker's ``RemoteLogMetadataCache``: a
RemoteLogSegmentMetadataRecord adds a segment in COPY_SEGMENT_STARTED; an update moves it along
the valid transitions (COPY_SEGMENT_STARTED -> COPY_SEGMENT_FINISHED or DELETE_SEGMENT_STARTED,
COPY_SEGMENT_FINISHED -> DELETE_SEGMENT_STARTED, DELETE_SEGMENT_STARTED -> DELETE_SEGMENT_FINISHED,
or to the state it has) and replaces its state, event time, broker id and custom metadata
(``RemoteLogSegmentMetadata.createWithUpdates``). The broker drops an update of an unknown segment,
an invalid transition and a metadata record in a state other than COPY_SEGMENT_STARTED; so does the
replay. Unlike the broker's cache, which forgets a segment once DELETE_SEGMENT_FINISHED, the
replay keeps it in that state (and refuses any later event of it). The partitions' delete states
are the newest RemotePartitionDeleteMetadataRecord of each.

Text: ``kafka-dump-log --remote-log-metadata-decoder`` prints each value as the ``toString`` of
what ``RemoteLogMetadataSerde.deserialize`` gives (``remote_log_record_from_text`` reads it)::

    RemoteLogSegmentMetadata{remoteLogSegmentId=RemoteLogSegmentId{topicIdPartition=<topic id>:<topic>-<partition>,
        id=<segment id>}, startOffset=N, endOffset=N, brokerId=N, maxTimestampMs=N, eventTimestampMs=N,
        segmentLeaderEpochs={<epoch>=<offset>, ...}, segmentSizeInBytes=N, customMetadata=Optional.empty |
        Optional[CustomMetadata{<length> bytes}], state=<name>, txnIdxEmpty=<bool> (4.0+ only)}
    RemoteLogSegmentMetadataUpdate{remoteLogSegmentId=RemoteLogSegmentId{...}, customMetadata=...,
        state=<name>, eventTimestampMs=N, brokerId=N}
    RemotePartitionDeleteMetadata{topicPartition=<topic id>:<topic>-<partition>, state=<name>,
        eventTimestampMs=N, brokerId=N}

(one line each). The text never shows the message version, the custom metadata's bytes (only
their length), BrokerLeaderEpoch or EndOffset, nor (before 4.0) txnIdxEmpty: those are None in
what is read from it.

Kafka sources: ``storage/src/main/resources/message/RemoteLogSegmentMetadataRecord.json``,
``RemoteLogSegmentMetadataUpdateRecord.json``, ``RemotePartitionDeleteMetadataRecord.json``,
``RemoteLogSegmentMetadataSnapshotRecord.json``, ``RemoteLogMetadataSerde.java``,
``RemoteLogSegmentMetadataTransform.java``, ``AbstractApiMessageSerde.java``,
``RemoteLogSegmentState.java``, ``RemotePartitionDeleteState.java``, ``RemoteLogSegmentMetadata.java``
(``createWithUpdates``, ``toString``, ``CustomMetadata``), ``RemoteLogSegmentMetadataUpdate.java``,
``RemotePartitionDeleteMetadata.java``, ``RemoteLogSegmentId.java``, ``TopicIdPartition.java``,
``RemoteLogMetadataCache.java``, ``RemotePartitionMetadataStore.java``, ``DumpLogSegments.scala``
(``RemoteMetadataLogMessageParser``), ``Uuid.java``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace
from typing import Final, NamedTuple

from txn_audit.errors import CorruptInputError
from txn_audit.formats.api_message import FRAME_VERSION, expect_end, read_frame, read_uuid, skip_tags, tagged_fields
from txn_audit.formats.layout import REMOTE_LOG_METADATA_TOPIC
from txn_audit.formats.model import DecodeIssue, IssueKind
from txn_audit.formats.primitives import INT32_MAX, INT32_MIN, INT64_MAX, INT64_MIN, Buffer, Reader
from txn_audit.formats.record_batch import SegmentBuffer, decode_records
from txn_audit.formats.records import MAGIC_VALUE_V2
from txn_audit.formats.segment import iter_batches

__all__ = [
    "COPY_SEGMENT_FINISHED",
    "COPY_SEGMENT_STARTED",
    "DELETE_PARTITION_FINISHED",
    "DELETE_PARTITION_MARKED",
    "DELETE_PARTITION_STARTED",
    "DELETE_SEGMENT_FINISHED",
    "DELETE_SEGMENT_STARTED",
    "FRAME_VERSION",
    "HIGHEST_VERSIONS",
    "REMOTE_LOG_METADATA_RECORD_TYPES",
    "REMOTE_LOG_METADATA_TOPIC",
    "REMOTE_LOG_SEGMENT_METADATA_RECORD",
    "REMOTE_LOG_SEGMENT_METADATA_SNAPSHOT_RECORD",
    "REMOTE_LOG_SEGMENT_METADATA_UPDATE_RECORD",
    "REMOTE_LOG_SEGMENT_STATES",
    "REMOTE_PARTITION_DELETE_METADATA_RECORD",
    "REMOTE_PARTITION_DELETE_STATES",
    "TAG_DELETE_BROKER_LEADER_EPOCH",
    "TAG_DELETE_END_OFFSET",
    "TAG_SEGMENT_BROKER_LEADER_EPOCH",
    "TAG_TXN_INDEX_EMPTY",
    "TAG_UPDATE_BROKER_LEADER_EPOCH",
    "TAG_UPDATE_END_OFFSET",
    "UPDATE_NO_BROKER_LEADER_EPOCH",
    "UPDATE_NO_END_OFFSET",
    "OtherRemoteLogRecord",
    "RemoteLogEntry",
    "RemoteLogRecord",
    "RemotePartitionDelete",
    "RemoteSegmentRecord",
    "RemoteSegmentUpdate",
    "RemoteSegments",
    "decode_remote_log_record",
    "is_valid_segment_transition",
    "iter_remote_log_records",
    "remote_log_record_from_text",
    "remote_segments",
]


REMOTE_LOG_SEGMENT_METADATA_RECORD: Final = 0
REMOTE_LOG_SEGMENT_METADATA_UPDATE_RECORD: Final = 1
REMOTE_PARTITION_DELETE_METADATA_RECORD: Final = 2
REMOTE_LOG_SEGMENT_METADATA_SNAPSHOT_RECORD: Final = 3

#: every message type of ``RemoteLogMetadataSerde``, by apiKey
REMOTE_LOG_METADATA_RECORD_TYPES: Final[dict[int, str]] = {
    REMOTE_LOG_SEGMENT_METADATA_RECORD: "RemoteLogSegmentMetadataRecord",
    REMOTE_LOG_SEGMENT_METADATA_UPDATE_RECORD: "RemoteLogSegmentMetadataUpdateRecord",
    REMOTE_PARTITION_DELETE_METADATA_RECORD: "RemotePartitionDeleteMetadataRecord",
    REMOTE_LOG_SEGMENT_METADATA_SNAPSHOT_RECORD: "RemoteLogSegmentMetadataSnapshotRecord",
}

#: highest version of each decoded message (0 in every release 3.6-4.4; 1 in trunk after 4.4)
HIGHEST_VERSIONS: Final[dict[int, int]] = {
    REMOTE_LOG_SEGMENT_METADATA_RECORD: 1,
    REMOTE_LOG_SEGMENT_METADATA_UPDATE_RECORD: 1,
    REMOTE_PARTITION_DELETE_METADATA_RECORD: 1,
}

# RemoteLogSegmentState
COPY_SEGMENT_STARTED: Final = "COPY_SEGMENT_STARTED"
COPY_SEGMENT_FINISHED: Final = "COPY_SEGMENT_FINISHED"
DELETE_SEGMENT_STARTED: Final = "DELETE_SEGMENT_STARTED"
DELETE_SEGMENT_FINISHED: Final = "DELETE_SEGMENT_FINISHED"
#: RemoteLogSegmentState by id
REMOTE_LOG_SEGMENT_STATES: Final[dict[int, str]] = {
    0: COPY_SEGMENT_STARTED,
    1: COPY_SEGMENT_FINISHED,
    2: DELETE_SEGMENT_STARTED,
    3: DELETE_SEGMENT_FINISHED,
}

# RemotePartitionDeleteState
DELETE_PARTITION_MARKED: Final = "DELETE_PARTITION_MARKED"
DELETE_PARTITION_STARTED: Final = "DELETE_PARTITION_STARTED"
DELETE_PARTITION_FINISHED: Final = "DELETE_PARTITION_FINISHED"
#: RemotePartitionDeleteState by id
REMOTE_PARTITION_DELETE_STATES: Final[dict[int, str]] = {
    0: DELETE_PARTITION_MARKED,
    1: DELETE_PARTITION_STARTED,
    2: DELETE_PARTITION_FINISHED,
}

# RemoteLogSegmentMetadataRecord tags
TAG_TXN_INDEX_EMPTY: Final = 0
TAG_SEGMENT_BROKER_LEADER_EPOCH: Final = 1  # v1+
# RemoteLogSegmentMetadataUpdateRecord tags (v1+)
TAG_UPDATE_BROKER_LEADER_EPOCH: Final = 0
TAG_UPDATE_END_OFFSET: Final = 1
# RemotePartitionDeleteMetadataRecord tags (v1+)
TAG_DELETE_BROKER_LEADER_EPOCH: Final = 0
TAG_DELETE_END_OFFSET: Final = 1

#: the defaults of the v1 tagged fields (the schemas' ``default``; a number without one defaults to 0)
UPDATE_NO_BROKER_LEADER_EPOCH: Final = -1
UPDATE_NO_END_OFFSET: Final = -1

#: the fewest bytes a SegmentLeaderEpochEntry takes: int32, int64, an empty tagged-field section
_MIN_EPOCH_ENTRY: Final = 4 + 8 + 1

_CORRUPT: Final = IssueKind.CORRUPT_RECORD.value
_UNKNOWN_VERSION: Final = IssueKind.UNKNOWN_VERSION.value
_TAIL_KINDS: Final = frozenset({IssueKind.TRUNCATED_TAIL.value, IssueKind.ZERO_FILLED_TAIL.value})


# -- records ---------------------------------------------------------------------------


def _check_custom_metadata(custom_metadata: bytes | None, size: int | None) -> None:
    if custom_metadata is not None and size != len(custom_metadata):
        raise ValueError(f"custom_metadata_size {size} for {len(custom_metadata)} bytes of custom metadata")


@dataclass(frozen=True, slots=True)
class RemoteSegmentRecord:
    """A RemoteLogSegmentMetadataRecord: a segment whose copy to the remote store starts (and, in
    ``remote_segments``' answer, that segment's current state).

    ``segment_leader_epochs``: (leader epoch, its first offset in the segment) pairs in wire order.
    ``custom_metadata_size``: the length of the custom metadata, None when there is none (the
    text form shows the length only: there ``custom_metadata`` is None). ``txn_index_empty``,
    ``broker_leader_epoch`` and ``version`` are None where the source does not show them.
    """

    topic_id: str
    topic: str
    partition: int
    segment_id: str
    start_offset: int
    end_offset: int
    broker_id: int
    max_timestamp_ms: int
    event_timestamp_ms: int
    segment_leader_epochs: tuple[tuple[int, int], ...]
    segment_size_bytes: int
    custom_metadata: bytes | None
    custom_metadata_size: int | None
    state: str
    txn_index_empty: bool | None
    broker_leader_epoch: int | None = None
    version: int | None = None

    def __post_init__(self) -> None:
        _check_custom_metadata(self.custom_metadata, self.custom_metadata_size)

    @property
    def api_key(self) -> int:
        return REMOTE_LOG_SEGMENT_METADATA_RECORD

    @property
    def key(self) -> tuple[str, int, str]:
        """(topic id, partition, segment id): what names a remote segment."""
        return self.topic_id, self.partition, self.segment_id


@dataclass(frozen=True, slots=True)
class RemoteSegmentUpdate:
    """A RemoteLogSegmentMetadataUpdateRecord: a remote segment's new state.

    ``broker_leader_epoch`` and ``end_offset`` exist from version 1 (None before, and in text).
    """

    topic_id: str
    topic: str
    partition: int
    segment_id: str
    custom_metadata: bytes | None
    custom_metadata_size: int | None
    state: str
    event_timestamp_ms: int
    broker_id: int
    broker_leader_epoch: int | None = None
    end_offset: int | None = None
    version: int | None = None

    def __post_init__(self) -> None:
        _check_custom_metadata(self.custom_metadata, self.custom_metadata_size)

    @property
    def api_key(self) -> int:
        return REMOTE_LOG_SEGMENT_METADATA_UPDATE_RECORD

    @property
    def key(self) -> tuple[str, int, str]:
        return self.topic_id, self.partition, self.segment_id


@dataclass(frozen=True, slots=True)
class RemotePartitionDelete:
    """A RemotePartitionDeleteMetadataRecord: a step of the deletion of a partition's remote data.

    ``broker_leader_epoch`` and ``end_offset`` exist from version 1 (None before, and in text).
    """

    topic_id: str
    topic: str
    partition: int
    state: str
    event_timestamp_ms: int
    broker_id: int
    broker_leader_epoch: int | None = None
    end_offset: int | None = None
    version: int | None = None

    @property
    def api_key(self) -> int:
        return REMOTE_PARTITION_DELETE_METADATA_RECORD

    @property
    def key(self) -> tuple[str, int]:
        """(topic id, partition)."""
        return self.topic_id, self.partition


@dataclass(frozen=True, slots=True)
class OtherRemoteLogRecord:
    """A RemoteLogSegmentMetadataSnapshotRecord, or a type Kafka does not define: type and version only."""

    api_key: int
    version: int


RemoteLogRecord = RemoteSegmentRecord | RemoteSegmentUpdate | RemotePartitionDelete | OtherRemoteLogRecord


class RemoteLogEntry(NamedTuple):
    """A record of the topic with its offset and timestamp in the segment it was read from."""

    offset: int
    timestamp: int
    record: RemoteLogRecord


# -- decoding one record value ---------------------------------------------------------


def _nullable_bytes(r: Reader, what: str) -> bytes | None:
    """Compact nullable bytes: uvarint(length + 1), 0 = null."""
    n = r.uvarint() - 1
    if n < 0:
        return None
    return r.raw(n, what)


def _state(r: Reader, states: dict[int, str], what: str) -> str:
    start = r.pos
    code = r.int8()
    name = states.get(code)
    if name is None:
        raise CorruptInputError(_CORRUPT, r.base + start, f"{what} id {code} is not one of Kafka's")
    return name


def _topic_id_partition(r: Reader) -> tuple[str, str, int]:
    """TopicIdPartitionEntry: (topic id, topic name, partition)."""
    name = r.compact_string()
    assert name is not None  # a non-nullable read raises instead
    topic_id = read_uuid(r)
    partition = r.int32()
    skip_tags(r, "TopicIdPartitionEntry")
    return topic_id, name, partition


def _segment_id(r: Reader) -> tuple[str, str, int, str]:
    """RemoteLogSegmentIdEntry: (topic id, topic name, partition, segment id)."""
    topic_id, name, partition = _topic_id_partition(r)
    segment_id = read_uuid(r)
    skip_tags(r, "RemoteLogSegmentIdEntry")
    return topic_id, name, partition, segment_id


def _leader_epochs(r: Reader) -> tuple[tuple[int, int], ...]:
    start = r.pos
    n = r.uvarint() - 1
    if n < 0:
        raise CorruptInputError(_CORRUPT, r.base + start, "SegmentLeaderEpochs: null for a non-nullable array")
    if n * _MIN_EPOCH_ENTRY > r.remaining:
        raise CorruptInputError(
            _CORRUPT, r.base + start, f"SegmentLeaderEpochs: {n} entries exceed the {r.remaining} bytes left"
        )
    if n == 0:
        raise CorruptInputError(_CORRUPT, r.base + start, "SegmentLeaderEpochs is empty: Kafka refuses such a segment")
    epochs = []
    for _ in range(n):
        epoch = r.int32()
        offset = r.int64()
        skip_tags(r, "SegmentLeaderEpochEntry")
        epochs.append((epoch, offset))
    return tuple(epochs)


def _segment_record(r: Reader, version: int) -> RemoteSegmentRecord:
    topic_id, topic, partition, segment_id = _segment_id(r)
    offsets_at = r.pos
    start_offset = r.int64()
    end_offset = r.int64()
    broker_id = r.int32()
    max_timestamp = r.int64()
    event_timestamp = r.int64()
    epochs = _leader_epochs(r)
    size = r.int32()
    custom = _nullable_bytes(r, "CustomMetadata")
    state = _state(r, REMOTE_LOG_SEGMENT_STATES, "RemoteLogSegmentState")
    txn_index_empty = False
    broker_leader_epoch = 0 if version >= 1 else None
    for tag, t in tagged_fields(r, "RemoteLogSegmentMetadataRecord"):
        if tag == TAG_TXN_INDEX_EMPTY:
            txn_index_empty = t.int8() != 0
        elif tag == TAG_SEGMENT_BROKER_LEADER_EPOCH and version >= 1:
            broker_leader_epoch = t.int32()
        else:
            continue  # a tag this version does not define
        expect_end(t, f"RemoteLogSegmentMetadataRecord tagged field {tag}")
    if start_offset < 0 or end_offset < start_offset:
        raise CorruptInputError(
            _CORRUPT,
            r.base + offsets_at,
            f"start offset {start_offset}, end offset {end_offset}: Kafka refuses such a segment",
        )
    return RemoteSegmentRecord(
        topic_id=topic_id,
        topic=topic,
        partition=partition,
        segment_id=segment_id,
        start_offset=start_offset,
        end_offset=end_offset,
        broker_id=broker_id,
        max_timestamp_ms=max_timestamp,
        event_timestamp_ms=event_timestamp,
        segment_leader_epochs=epochs,
        segment_size_bytes=size,
        custom_metadata=custom,
        custom_metadata_size=None if custom is None else len(custom),
        state=state,
        txn_index_empty=txn_index_empty,
        broker_leader_epoch=broker_leader_epoch,
        version=version,
    )


def _segment_update(r: Reader, version: int) -> RemoteSegmentUpdate:
    topic_id, topic, partition, segment_id = _segment_id(r)
    broker_id = r.int32()
    event_timestamp = r.int64()
    custom = _nullable_bytes(r, "CustomMetadata")
    state = _state(r, REMOTE_LOG_SEGMENT_STATES, "RemoteLogSegmentState")
    broker_leader_epoch: int | None = None
    end_offset: int | None = None
    if version >= 1:
        broker_leader_epoch, end_offset = UPDATE_NO_BROKER_LEADER_EPOCH, UPDATE_NO_END_OFFSET
    for tag, t in tagged_fields(r, "RemoteLogSegmentMetadataUpdateRecord"):
        if tag == TAG_UPDATE_BROKER_LEADER_EPOCH and version >= 1:
            broker_leader_epoch = t.int32()
        elif tag == TAG_UPDATE_END_OFFSET and version >= 1:
            end_offset = t.int64()
        else:
            continue  # a tag this version does not define
        expect_end(t, f"RemoteLogSegmentMetadataUpdateRecord tagged field {tag}")
    return RemoteSegmentUpdate(
        topic_id=topic_id,
        topic=topic,
        partition=partition,
        segment_id=segment_id,
        custom_metadata=custom,
        custom_metadata_size=None if custom is None else len(custom),
        state=state,
        event_timestamp_ms=event_timestamp,
        broker_id=broker_id,
        broker_leader_epoch=broker_leader_epoch,
        end_offset=end_offset,
        version=version,
    )


def _partition_delete(r: Reader, version: int) -> RemotePartitionDelete:
    topic_id, topic, partition = _topic_id_partition(r)
    broker_id = r.int32()
    event_timestamp = r.int64()
    state = _state(r, REMOTE_PARTITION_DELETE_STATES, "RemotePartitionDeleteState")
    broker_leader_epoch = 0 if version >= 1 else None
    end_offset = 0 if version >= 1 else None
    for tag, t in tagged_fields(r, "RemotePartitionDeleteMetadataRecord"):
        if tag == TAG_DELETE_BROKER_LEADER_EPOCH and version >= 1:
            broker_leader_epoch = t.int32()
        elif tag == TAG_DELETE_END_OFFSET and version >= 1:
            end_offset = t.int64()
        else:
            continue  # a tag this version does not define
        expect_end(t, f"RemotePartitionDeleteMetadataRecord tagged field {tag}")
    return RemotePartitionDelete(
        topic_id=topic_id,
        topic=topic,
        partition=partition,
        state=state,
        event_timestamp_ms=event_timestamp,
        broker_id=broker_id,
        broker_leader_epoch=broker_leader_epoch,
        end_offset=end_offset,
        version=version,
    )


def decode_remote_log_record(value: Buffer | None) -> RemoteLogRecord:
    """Decode one record value of ``__remote_log_metadata`` (frame, then the message).

    Raises ``CorruptInputError``: ``unknown_version`` for a frame version other than 1 or a
    version above the highest known of a decoded type; ``corrupt_record`` for a null value,
    truncation, impossible lengths, bad UTF-8, bytes left after the message, and values Kafka's
    deserializer refuses (see the module doc).
    """
    if value is None:
        raise CorruptInputError(_CORRUPT, 0, "null value: remote log metadata records always have one")
    r = Reader(value, kind=_CORRUPT)
    api_key, version = read_frame(r)
    highest = HIGHEST_VERSIONS.get(api_key)
    if highest is None:
        return OtherRemoteLogRecord(api_key, version)
    name = REMOTE_LOG_METADATA_RECORD_TYPES[api_key]
    if version > highest:
        raise CorruptInputError(_UNKNOWN_VERSION, 0, f"{name} version {version}, at most {highest} is known")
    record: RemoteLogRecord
    if api_key == REMOTE_LOG_SEGMENT_METADATA_RECORD:
        record = _segment_record(r, version)
    elif api_key == REMOTE_LOG_SEGMENT_METADATA_UPDATE_RECORD:
        record = _segment_update(r, version)
    else:
        record = _partition_delete(r, version)
    expect_end(r, name)
    return record


# -- walking a segment -----------------------------------------------------------------


def iter_remote_log_records(buf: SegmentBuffer, *, allow_truncated_tail: bool = True) -> Iterator[RemoteLogEntry]:
    """(offset, timestamp, record) for every data record of a ``__remote_log_metadata`` segment, in
    file order; control batches (none are expected: the manager's producer is not transactional)
    are skipped.

    Damage raises ``CorruptInputError`` (position: the batch's byte offset in the file), except a
    torn or zero-filled tail when ``allow_truncated_tail`` (the normal end of a crashed broker's
    active segment).
    """
    for item in iter_batches(buf):
        if isinstance(item, DecodeIssue):
            if allow_truncated_tail and item.kind in _TAIL_KINDS:
                return
            raise CorruptInputError(item.kind, item.position, item.detail)
        if item.magic != MAGIC_VALUE_V2:
            raise CorruptInputError(
                IssueKind.BAD_MAGIC.value, item.position, f"magic {item.magic} in {REMOTE_LOG_METADATA_TOPIC}"
            )
        if not item.crc_ok:
            raise CorruptInputError(
                IssueKind.CRC_MISMATCH.value,
                item.position,
                f"stored CRC-32C {item.stored_crc:#010x}, computed {item.computed_crc:#010x}",
            )
        if item.is_control:
            continue
        for rec in decode_records(buf, item):
            try:
                record = decode_remote_log_record(rec.value)
            except CorruptInputError as err:
                raise CorruptInputError(
                    err.kind, item.position, f"remote log metadata record at offset {rec.offset}: {err.detail}"
                ) from err
            yield RemoteLogEntry(rec.offset, rec.timestamp, record)


# -- replay ----------------------------------------------------------------------------

#: RemoteLogSegmentState.isValidTransition, besides a state to itself
_NEXT_STATES: Final[dict[str | None, frozenset[str]]] = {
    None: frozenset({COPY_SEGMENT_STARTED}),
    COPY_SEGMENT_STARTED: frozenset({COPY_SEGMENT_FINISHED, DELETE_SEGMENT_STARTED}),
    COPY_SEGMENT_FINISHED: frozenset({DELETE_SEGMENT_STARTED}),
    DELETE_SEGMENT_STARTED: frozenset({DELETE_SEGMENT_FINISHED}),
    DELETE_SEGMENT_FINISHED: frozenset(),
}


def is_valid_segment_transition(current: str | None, target: str) -> bool:
    """Whether a segment in ``current`` (None: unknown yet) may move to ``target``
    (``RemoteLogSegmentState.isValidTransition``)."""
    if current is not None and current == target:
        return True
    return target in _NEXT_STATES.get(current, frozenset())


@dataclass(frozen=True, slots=True)
class RemoteSegments:
    """The replayed state of the topic's records.

    ``segments``: each remote segment by (topic id, partition, segment id), its metadata with the
    newest update applied. ``partition_deletes``: the newest delete record of each (topic id,
    partition) that has one.
    """

    segments: dict[tuple[str, int, str], RemoteSegmentRecord]
    partition_deletes: dict[tuple[str, int], RemotePartitionDelete]

    def of_partition(self, topic: str, partition: int, state: str | None = None) -> list[RemoteSegmentRecord]:
        """The segments of a partition (by topic name), in ``state`` if given, by start offset."""
        found = [s for s in self.segments.values() if s.topic == topic and s.partition == partition
                 and (state is None or s.state == state)]
        return sorted(found, key=lambda s: (s.start_offset, s.end_offset, s.segment_id))


def remote_segments(records: Iterable[RemoteLogRecord]) -> RemoteSegments:
    """Replay decoded records in log order into each remote segment's current state (module doc).

    Records of several partitions of the topic may be chained: a user partition's records all
    live in one of them.
    """
    segments: dict[tuple[str, int, str], RemoteSegmentRecord] = {}
    deletes: dict[tuple[str, int], RemotePartitionDelete] = {}
    for record in records:
        if isinstance(record, RemoteSegmentRecord):
            current = segments.get(record.key)
            if record.state == COPY_SEGMENT_STARTED and is_valid_segment_transition(
                    None if current is None else current.state, record.state):
                segments[record.key] = record
        elif isinstance(record, RemoteSegmentUpdate):
            current = segments.get(record.key)
            if (current is not None and current.state != DELETE_SEGMENT_FINISHED
                    and record.state != COPY_SEGMENT_STARTED
                    and is_valid_segment_transition(current.state, record.state)):
                segments[record.key] = replace(
                    current,
                    state=record.state,
                    event_timestamp_ms=record.event_timestamp_ms,
                    broker_id=record.broker_id,
                    custom_metadata=record.custom_metadata,
                    custom_metadata_size=record.custom_metadata_size,
                )
        elif isinstance(record, RemotePartitionDelete):
            deletes[record.key] = record
    return RemoteSegments(segments, deletes)


# -- the text kafka-dump-log prints ------------------------------------------------------

_UUID_TEXT: Final = r"[A-Za-z0-9_-]{22}"
_NUMBER: Final = r"-?[0-9]+"
_TOPIC_ID_PARTITION: Final = rf"(?P<topic_id>{_UUID_TEXT}):(?P<topic>[A-Za-z0-9._-]+)-(?P<partition>[0-9]+)"
_SEGMENT_ID: Final = rf"RemoteLogSegmentId\{{topicIdPartition={_TOPIC_ID_PARTITION}, id=(?P<segment_id>{_UUID_TEXT})\}}"
_CUSTOM: Final = r"(?P<custom>Optional\.empty|Optional\[CustomMetadata\{(?P<custom_size>[0-9]+) bytes\}\])"

_SEGMENT_TEXT: Final = re.compile(
    rf"RemoteLogSegmentMetadata\{{remoteLogSegmentId={_SEGMENT_ID}, startOffset=(?P<start>{_NUMBER}), "
    rf"endOffset=(?P<end>{_NUMBER}), brokerId=(?P<broker>{_NUMBER}), maxTimestampMs=(?P<max_ts>{_NUMBER}), "
    rf"eventTimestampMs=(?P<event_ts>{_NUMBER}), segmentLeaderEpochs=\{{(?P<epochs>[^{{}}]*)\}}, "
    rf"segmentSizeInBytes=(?P<size>{_NUMBER}), customMetadata={_CUSTOM}, state=(?P<state>[A-Z_]+)"
    r"(?:, txnIdxEmpty=(?P<txn>true|false))?\}"
)
_UPDATE_TEXT: Final = re.compile(
    rf"RemoteLogSegmentMetadataUpdate\{{remoteLogSegmentId={_SEGMENT_ID}, customMetadata={_CUSTOM}, "
    rf"state=(?P<state>[A-Z_]+), eventTimestampMs=(?P<event_ts>{_NUMBER}), brokerId=(?P<broker>{_NUMBER})\}}"
)
_DELETE_TEXT: Final = re.compile(
    rf"RemotePartitionDeleteMetadata\{{topicPartition={_TOPIC_ID_PARTITION}, state=(?P<state>[A-Z_]+), "
    rf"eventTimestampMs=(?P<event_ts>{_NUMBER}), brokerId=(?P<broker>{_NUMBER})\}}"
)
_EPOCH_TEXT: Final = re.compile(rf"(?P<epoch>{_NUMBER})=(?P<offset>{_NUMBER})")


def _int(text: str, low: int, high: int, what: str) -> int:
    value = int(text)
    if not low <= value <= high:
        raise ValueError(f"{what} {value} is out of range")
    return value


def _int32(m: re.Match[str], group: str) -> int:
    return _int(m[group], INT32_MIN, INT32_MAX, group)


def _int64(m: re.Match[str], group: str) -> int:
    return _int(m[group], INT64_MIN, INT64_MAX, group)


def _text_state(m: re.Match[str], states: dict[int, str]) -> str:
    state = m["state"]
    if state not in states.values():
        raise ValueError(f"unknown state {state}")
    return state


def _text_custom_size(m: re.Match[str]) -> int | None:
    size = m["custom_size"]
    return None if size is None else _int(size, 0, INT32_MAX, "custom metadata length")


def _text_epochs(text: str) -> tuple[tuple[int, int], ...]:
    """A Java map's ``toString`` of leader epoch -> start offset: ``0=0, 3=120``."""
    epochs = []
    for part in text.split(", "):
        m = _EPOCH_TEXT.fullmatch(part)
        if m is None:
            raise ValueError(f"segmentLeaderEpochs entry {part!r} is not <epoch>=<offset>")
        epochs.append((_int32(m, "epoch"), _int64(m, "offset")))
    if len({epoch for epoch, _ in epochs}) != len(epochs):
        raise ValueError("segmentLeaderEpochs names an epoch twice")
    return tuple(epochs)


def remote_log_record_from_text(payload: str) -> RemoteSegmentRecord | RemoteSegmentUpdate | RemotePartitionDelete:
    """A record from the payload ``kafka-dump-log --remote-log-metadata-decoder`` prints for it
    (module doc). What the text does not show is None: ``version``, ``custom_metadata`` (its length
    is ``custom_metadata_size``), the v1 fields, and ``txn_index_empty`` where a 3.x tool leaves it
    out. Raises ``ValueError`` on text that is not one of the three forms."""
    text = payload.strip()
    if m := _SEGMENT_TEXT.fullmatch(text):
        txn = m["txn"]
        start, end = _int64(m, "start"), _int64(m, "end")
        if start < 0 or end < start:
            raise ValueError(f"start offset {start}, end offset {end}: Kafka never prints such a segment")
        return RemoteSegmentRecord(
            topic_id=m["topic_id"],
            topic=m["topic"],
            partition=_int32(m, "partition"),
            segment_id=m["segment_id"],
            start_offset=start,
            end_offset=end,
            broker_id=_int32(m, "broker"),
            max_timestamp_ms=_int64(m, "max_ts"),
            event_timestamp_ms=_int64(m, "event_ts"),
            segment_leader_epochs=_text_epochs(m["epochs"]),
            segment_size_bytes=_int32(m, "size"),
            custom_metadata=None,
            custom_metadata_size=_text_custom_size(m),
            state=_text_state(m, REMOTE_LOG_SEGMENT_STATES),
            txn_index_empty=None if txn is None else txn == "true",
        )
    if m := _UPDATE_TEXT.fullmatch(text):
        return RemoteSegmentUpdate(
            topic_id=m["topic_id"],
            topic=m["topic"],
            partition=_int32(m, "partition"),
            segment_id=m["segment_id"],
            custom_metadata=None,
            custom_metadata_size=_text_custom_size(m),
            state=_text_state(m, REMOTE_LOG_SEGMENT_STATES),
            event_timestamp_ms=_int64(m, "event_ts"),
            broker_id=_int32(m, "broker"),
        )
    if m := _DELETE_TEXT.fullmatch(text):
        return RemotePartitionDelete(
            topic_id=m["topic_id"],
            topic=m["topic"],
            partition=_int32(m, "partition"),
            state=_text_state(m, REMOTE_PARTITION_DELETE_STATES),
            event_timestamp_ms=_int64(m, "event_ts"),
            broker_id=_int32(m, "broker"),
        )
    raise ValueError(f"not a remote log metadata payload: {text[:120]!r}")
