"""Plain values produced by the decoders of ``txn_audit.formats``.

Every decoder in this package returns these frozen dataclasses (or yields them), never raw
tuples, so that the ingest layer, the tests and the sample generator speak one vocabulary.
Field names follow the Parquet column names of ``txn_audit.schemas`` where a value becomes a
column. Kafka's "none" sentinels (-1) are kept as -1, exactly as they are on disk.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from txn_audit.formats.compression import CODEC_NAMES

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_TIMESTAMP = -1
NO_PARTITION_LEADER_EPOCH = -1

TIMESTAMP_TYPE_NAMES: dict[int, str] = {0: "CreateTime", 1: "LogAppendTime"}


class Severity(StrEnum):
    INFO = "info"
    WARNING = "warning"
    ERROR = "error"


class IssueKind(StrEnum):
    """Kinds of ``decode_issues`` rows. Stable strings: downstream findings key on them."""

    TRUNCATED_TAIL = "truncated_tail"          # partial last batch: normal end of a crashed active segment
    ZERO_FILLED_TAIL = "zero_filled_tail"      # preallocated zeros after the last batch
    CRC_MISMATCH = "crc_mismatch"              # stored CRC differs from the computed one
    BAD_LENGTH = "bad_length"                  # a length/size field that cannot be right
    BAD_MAGIC = "bad_magic"                    # record format version other than 0, 1, 2
    UNKNOWN_VERSION = "unknown_version"        # a versioned structure with a version we cannot read
    CORRUPT_RECORD = "corrupt_record"          # records inside a batch that do not parse
    DECOMPRESSION_ERROR = "decompression_error"
    UNEXPECTED_CONTROL = "unexpected_control"  # control record of a type that has no place in a topic partition
    OFFSET_ORDER = "offset_order"              # batch offsets going backwards inside a segment
    BAD_CHECKPOINT = "bad_checkpoint"          # text checkpoint / properties file that does not parse
    BAD_INDEX = "bad_index"                    # .index / .timeindex / .txnindex problems
    BAD_SNAPSHOT = "bad_snapshot"              # producer-state snapshot problems
    UNREADABLE_FILE = "unreadable_file"        # permission denied, I/O error, vanished file
    UNRECOGNISED_FILE = "unrecognised_file"    # a file or folder the layout rules do not explain
    NOT_AUDITED = "not_audited"                # a file kept out of the audit on purpose (swap, symlink, ...)
    DECODER_ERROR = "decoder_error"            # an unexpected failure inside txn-audit while decoding a file
    UNPARSED_LINE = "unparsed_line"            # a line of a tool's text output that does not parse
    INCOMPLETE_TEXT = "incomplete_text"        # a text dump that lacks what the audit needs (no records, no decoder)


@dataclass(frozen=True, slots=True)
class DecodeIssue:
    """Something that could not be decoded, with where it is. ``position`` is a byte offset."""

    position: int
    kind: str
    severity: str
    detail: str


@dataclass(frozen=True, slots=True)
class BatchHeader:
    """Header of one entry of a ``.log`` file: a v2 record batch or a legacy (v0/v1) message.

    For legacy messages the producer fields are -1 and ``base_offset`` is the first inner offset
    of a compressed wrapper (``last_offset`` is the wrapper's own offset).
    """

    position: int
    base_offset: int
    last_offset: int
    size_bytes: int
    magic: int
    partition_leader_epoch: int
    attributes: int
    compression: int
    timestamp_type: int
    is_transactional: bool
    is_control: bool
    has_delete_horizon: bool
    producer_id: int
    producer_epoch: int
    base_sequence: int
    last_sequence: int
    record_count: int
    first_timestamp: int
    max_timestamp: int
    delete_horizon_ms: int
    stored_crc: int
    computed_crc: int

    @property
    def crc_ok(self) -> bool:
        return self.stored_crc == self.computed_crc

    @property
    def codec_name(self) -> str:
        return CODEC_NAMES.get(self.compression, f"unknown({self.compression})")


@dataclass(frozen=True, slots=True)
class RecordHeader:
    key: str
    value: bytes | None


@dataclass(frozen=True, slots=True)
class Record:
    """One record of a batch (v2) or one legacy message, with absolute offset and timestamp."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[RecordHeader, ...] = ()
    sequence: int = NO_SEQUENCE
    attributes: int = 0


@dataclass(frozen=True, slots=True)
class ControlMarker:
    """A COMMIT/ABORT transaction marker (control record types 0 and 1)."""

    offset: int
    producer_id: int
    producer_epoch: int
    marker_type: str  # 'COMMIT' | 'ABORT'
    control_type: int
    coordinator_epoch: int
    timestamp: int
    key_version: int
    value_version: int


@dataclass(frozen=True, slots=True)
class TopicPartitions:
    topic: str
    partitions: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class TxnLogKey:
    version: int
    transactional_id: str


@dataclass(frozen=True, slots=True)
class TxnLogValue:
    """``TransactionLogValue`` v0/v1 including the v1 tagged fields (defaults when absent)."""

    version: int
    producer_id: int
    producer_epoch: int
    txn_timeout_ms: int
    state_code: int
    topic_partitions: tuple[TopicPartitions, ...] | None
    txn_last_update_timestamp: int
    txn_start_timestamp: int
    previous_producer_id: int = -1
    next_producer_id: int = -1
    client_transaction_version: int = 0
    next_producer_epoch: int = -1
    unknown_tags: tuple[int, ...] = ()

    @property
    def state(self) -> str:
        return TXN_STATES.get(self.state_code, f"Unknown({self.state_code})")


TXN_STATES: dict[int, str] = {
    0: "Empty",
    1: "Ongoing",
    2: "PrepareCommit",
    3: "PrepareAbort",
    4: "CompleteCommit",
    5: "CompleteAbort",
    6: "Dead",
    7: "PrepareEpochFence",
}
#: the states of a decided transaction whose markers are still to be written
PREPARE_STATES = (TXN_STATES[2], TXN_STATES[3])
#: a producer id's last epoch (Short.MAX_VALUE): past it the coordinator gives the id a new producer id
LAST_PRODUCER_EPOCH = 32767


@dataclass(frozen=True, slots=True)
class OffsetCommitKey:
    version: int
    group: str
    topic: str
    partition: int


@dataclass(frozen=True, slots=True)
class GroupMetadataKey:
    version: int
    group: str


@dataclass(frozen=True, slots=True)
class OffsetCommitValue:
    version: int
    committed_offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp: int
    expire_timestamp: int


@dataclass(frozen=True, slots=True)
class ProducerSnapshotEntry:
    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_offset: int
    offset_delta: int
    timestamp: int
    coordinator_epoch: int
    current_txn_first_offset: int


@dataclass(frozen=True, slots=True)
class ProducerSnapshot:
    version: int
    stored_crc: int
    computed_crc: int
    entries: tuple[ProducerSnapshotEntry, ...]

    @property
    def crc_ok(self) -> bool:
        return self.stored_crc == self.computed_crc


@dataclass(frozen=True, slots=True)
class AbortedTxn:
    version: int
    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int


@dataclass(frozen=True, slots=True)
class OffsetIndexEntry:
    offset: int  # absolute offset (segment base + relative)
    position: int


@dataclass(frozen=True, slots=True)
class TimeIndexEntry:
    timestamp: int
    offset: int  # absolute offset


@dataclass(frozen=True, slots=True)
class OffsetCheckpoint:
    """``replication-offset-checkpoint`` and friends: version 0, then ``topic partition offset``."""

    version: int
    entries: dict[tuple[str, int], int] = field(default_factory=dict)
