"""Names of the folders and files in a broker's log dirs (pure string parsing, no I/O).

Partition folders (``LocalLog.parseTopicPartitionName``): ``<topic>-<partition>``, where the
topic may itself contain ``-`` and ``.`` (split at the **last** ``-``), or a renamed replica
``<topic>-<partition>.<uuid>-delete`` / ``-future`` / ``-stray`` (for these the name must match
``^(\\S+)-(\\S+)\\.(\\S+)<suffix>$`` and everything from the last ``.`` is dropped first; the
topic of ``-delete``/``-stray`` folders may be truncated to keep the name within 255 chars).

Files in a partition folder (``LogFileUtils``, ``LogLoader``, ``Snapshots``):
``<20-digit offset>.<ext>`` with ext ``log``/``index``/``timeindex``/``txnindex``/``snapshot``,
optionally followed by ``.deleted`` (asynchronous delete pending), ``.cleaned`` (output of an
interrupted compaction) or ``.swap`` (compaction output awaiting its swap); KRaft metadata
snapshots ``<20-digit offset>-<10-digit epoch>.checkpoint`` (``.part`` while being written);
and the non-segment files ``leader-epoch-checkpoint``, ``partition.metadata``, ``quorum-state``.

Kafka sources: ``LocalLog.scala`` (``parseTopicPartitionName``, dir suffixes),
``LogFileUtils.java``, ``LogLoader.java``, ``LogManager.scala`` (log-dir level file names),
``raft/.../Snapshots.java``, ``Topic.java``. See kafka-formats.md sections 1.1-1.3.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final, Literal

from txn_audit.formats.primitives import INT32_MAX, INT64_MAX

# -- log-dir level files ---------------------------------------------------------------

REPLICATION_OFFSET_CHECKPOINT: Final = "replication-offset-checkpoint"  # high watermarks
RECOVERY_POINT_OFFSET_CHECKPOINT: Final = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT: Final = "log-start-offset-checkpoint"
CLEANER_OFFSET_CHECKPOINT: Final = "cleaner-offset-checkpoint"
META_PROPERTIES: Final = "meta.properties"
CLEAN_SHUTDOWN_FILE: Final = ".kafka_cleanshutdown"
BOOTSTRAP_CHECKPOINT: Final = "bootstrap.checkpoint"
LOCK_FILE: Final = ".lock"

#: the four ``version / count / topic partition offset`` files of a log dir
CHECKPOINT_FILES: Final = frozenset(
    {
        REPLICATION_OFFSET_CHECKPOINT,
        RECOVERY_POINT_OFFSET_CHECKPOINT,
        LOG_START_OFFSET_CHECKPOINT,
        CLEANER_OFFSET_CHECKPOINT,
    }
)
#: every file Kafka itself keeps at the top of a log dir
LOG_DIR_FILES: Final = CHECKPOINT_FILES | {META_PROPERTIES, CLEAN_SHUTDOWN_FILE, BOOTSTRAP_CHECKPOINT, LOCK_FILE}
#: the tiered storage's (KIP-405, 3.6+) cache of the remote segments' offset, time and
#: transaction indexes, a folder at the top of the log dir: a copy of what the remote store
#: holds, fetched on demand, with none of the log's records
REMOTE_LOG_INDEX_CACHE: Final = "remote-log-index-cache"
#: every folder Kafka itself keeps at the top of a log dir that is no partition's
LOG_DIR_FOLDERS: Final = frozenset({REMOTE_LOG_INDEX_CACHE})

# -- partition-folder level files ------------------------------------------------------

LEADER_EPOCH_CHECKPOINT: Final = "leader-epoch-checkpoint"
PARTITION_METADATA: Final = "partition.metadata"
QUORUM_STATE: Final = "quorum-state"  # only in __cluster_metadata-0
#: known files of a partition folder that are not segment files (``parse_log_file_name`` → None)
PARTITION_FILES: Final = frozenset({LEADER_EPOCH_CHECKPOINT, PARTITION_METADATA, QUORUM_STATE})

SEGMENT_EXTENSIONS: Final = ("log", "index", "timeindex", "txnindex", "snapshot")

# -- topics ----------------------------------------------------------------------------

TRANSACTION_STATE_TOPIC: Final = "__transaction_state"
CONSUMER_OFFSETS_TOPIC: Final = "__consumer_offsets"
CLUSTER_METADATA_TOPIC: Final = "__cluster_metadata"
#: the tiered storage's (KIP-405) record of the remote segments, kept by TopicBasedRemoteLogMetadataManager
REMOTE_LOG_METADATA_TOPIC: Final = "__remote_log_metadata"
INTERNAL_TOPICS: Final = frozenset({TRANSACTION_STATE_TOPIC, CONSUMER_OFFSETS_TOPIC, CLUSTER_METADATA_TOPIC})
#: internal topics the log cleaner compacts: batches are removed and rewritten, each replica on its own
COMPACTED_TOPICS: Final = (CONSUMER_OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC)

ReplicaStatus = Literal["live", "delete", "future", "stray"]
FileStatus = Literal["live", "deleted", "cleaned", "swap", "partial"]

_NS: Final = r"[^ \t\n\x0b\f\r]"  # Java regex \S
_DIR_SUFFIXES: Final[dict[str, ReplicaStatus]] = {"-delete": "delete", "-future": "future", "-stray": "stray"}
_SUFFIX_PATTERN: Final = {s: re.compile(rf"({_NS}+)-({_NS}+)\.({_NS}+){s}") for s in _DIR_SUFFIXES}
_PARTITION: Final = re.compile(r"\+?[0-9]+")  # Integer.parseInt after a split at the last '-'
_SEGMENT_FILE: Final = re.compile(
    r"(?P<offset>[0-9]{20})\.(?P<ext>log|index|timeindex|txnindex|snapshot)(?:\.(?P<status>deleted|cleaned|swap))?"
)
_FILE_STATUS: Final[dict[str | None, FileStatus]] = {
    None: "live",
    "deleted": "deleted",
    "cleaned": "cleaned",
    "swap": "swap",
    "part": "partial",
}
_KRAFT_SNAPSHOT: Final = re.compile(
    r"(?P<offset>[0-9]{20})-(?P<epoch>[0-9]{10})\.checkpoint(?:\.(?P<status>part|deleted))?"
)


@dataclass(frozen=True, slots=True)
class PartitionDirName:
    """A parsed partition folder name. ``uuid`` is set for delete/future/stray folders."""

    topic: str
    partition: int
    status: ReplicaStatus
    uuid: str | None = None

    @property
    def is_live(self) -> bool:
        return self.status == "live"

    @property
    def is_internal(self) -> bool:
        return self.topic in INTERNAL_TOPICS


@dataclass(frozen=True, slots=True)
class LogFileName:
    """A parsed segment-family file name.

    ``kind`` is the extension (``log``, ``index``, ``timeindex``, ``txnindex``, ``snapshot``) or
    ``checkpoint`` for a KRaft metadata snapshot; ``base_offset`` is the offset in the name (a
    segment's base offset, a producer snapshot's replay-from offset, a KRaft snapshot's end
    offset); ``epoch`` only for KRaft snapshots. ``status`` is ``live`` or the pending-operation
    suffix (``partial`` = a KRaft ``.checkpoint.part`` still being written).
    """

    name: str
    kind: str
    base_offset: int
    status: FileStatus
    epoch: int | None = None

    @property
    def is_live(self) -> bool:
        return self.status == "live"


def parse_partition_dir(name: str) -> PartitionDirName | None:
    """Parse a partition folder name exactly as the broker does; ``None`` if Kafka would reject it.

    The partition must parse as a Java int: ASCII digits (``Integer.parseInt`` would also take a
    leading ``+``, so ``t-+1`` is partition 1 of ``t``, as for the broker) within int32 range.
    """
    if not name or "-" not in name:
        return None
    status: ReplicaStatus = "live"
    uuid: str | None = None
    base = name
    for suffix, st in _DIR_SUFFIXES.items():
        if name.endswith(suffix):
            if not _SUFFIX_PATTERN[suffix].fullmatch(name):
                return None
            dot = name.rfind(".")
            base = name[:dot]
            uuid = name[dot + 1 : -len(suffix)]
            status = st
            break
    dash = base.rfind("-")
    if dash < 0:
        return None
    topic, part = base[:dash], base[dash + 1 :]
    if not topic or not _PARTITION.fullmatch(part):
        return None
    partition = int(part)
    if partition > INT32_MAX:
        return None
    return PartitionDirName(topic=topic, partition=partition, status=status, uuid=uuid)


def parse_log_file_name(name: str) -> LogFileName | None:
    """Parse a segment-family file name; ``None`` for anything else.

    The known non-segment files (``PARTITION_FILES``: leader-epoch-checkpoint,
    partition.metadata, quorum-state) also give ``None``: they carry no offset; test
    membership in ``PARTITION_FILES`` (or use ``is_known_partition_file``) to tell them from
    unknown files.
    """
    m = _SEGMENT_FILE.fullmatch(name)
    if m is not None:
        if int(m["offset"]) > INT64_MAX:
            return None  # Long.parseLong rejects it: not a name Kafka wrote
        return LogFileName(
            name=name,
            kind=m["ext"],
            base_offset=int(m["offset"]),
            status=_FILE_STATUS[m["status"]],
        )
    m = _KRAFT_SNAPSHOT.fullmatch(name)
    if m is not None:
        if int(m["offset"]) > INT64_MAX or int(m["epoch"]) > INT32_MAX:
            return None
        return LogFileName(
            name=name,
            kind="checkpoint",
            base_offset=int(m["offset"]),
            status=_FILE_STATUS[m["status"]],
            epoch=int(m["epoch"]),
        )
    return None


def is_known_partition_file(name: str) -> bool:
    """Whether ``name`` is a file Kafka keeps in a partition folder (segment family or not)."""
    return name in PARTITION_FILES or parse_log_file_name(name) is not None


def segment_file_name(base_offset: int, ext: str) -> str:
    """``<20-digit offset>.<ext>`` (``LogFileUtils.filenamePrefixFromOffset``)."""
    if base_offset < 0:
        raise ValueError(f"negative offset {base_offset}")
    return f"{base_offset:020d}.{ext}"


def partition_dir_name(topic: str, partition: int) -> str:
    return f"{topic}-{partition}"
