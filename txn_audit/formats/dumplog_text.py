"""``kafka-dump-log.sh`` (DumpLogSegments) text output, read back into the values the binary
decoders produce.

The parser streams one text file line by line and yields, in file order, the things the
dump shows: a ``DumpSection`` per ``Dumping <path>`` line (topic, partition and log dir come
from that path), a ``TextBatch`` per batch line (with its record lines), a ``TextMarker`` per
COMMIT/ABORT control batch, a ``TextTxnLogRecord`` per ``__transaction_state`` record printed
by ``--transaction-log-decoder``, a ``TextOffsetCommit`` per ``__consumer_offsets`` offset
commit printed by ``--offsets-decoder``, a ``TextSnapshotEntry`` per producer-snapshot line, a
``TextAbortedTxn`` per ``.txnindex`` line, and a ``TextIssue`` per line that does not parse
(with its line number and an excerpt). ``.index``/``.timeindex`` dumps and KRaft snapshots are
recognised and skipped. Field names follow the raw-table columns of ``txn_audit.schemas``;
a field the text does not carry is ``None`` (never a guess): the batch's first timestamp
under ``LogAppendTime`` or without record lines, the computed CRC of an invalid batch, the
marker type of a control batch dumped without ``--deep-iteration``, the value version,
start timestamp and tagged fields of a coordinator record before the JSON form, the key and
value versions, leader epoch and commit/expire timestamps of an offset commit before the JSON
form, and so on.

Every variant Kafka 2.4 → 4.4 prints is read (kafka-formats.md section 7, checked against
``DumpLogSegments`` at each tag, and against the real output of 2.8.2, 3.6.2, 3.9.2, 4.0.2, 4.1.2
and 4.4.0 brokers in ``tests/corpus``):

* batch line: codec in upper case (enum name) up to 2.8, lower case from 3.0;
  ``deleteHorizonMs: OptionalLong...`` from 3.2; legacy (magic 0/1) ``offset: ...`` lines;
* header: ``Starting offset: N`` up to 3.2, ``Log starting offset: N`` from 3.3;
* record lines: ``keysize``/``valuesize`` (2.4-2.7), the verbose 2.8 line repeating batch
  fields, ``keySize``/``valueSize`` (3.0+); ``endTxnMarker``/``controlType`` suffixes;
  ``--skip-record-metadata`` content-only lines;
* ``--transaction-log-decoder``: ``transactionalId=`` keys and ``Set(...)`` partitions
  (2.4.0), ``transaction_metadata::`` keys with ``Set(...)`` (2.4.1), ``[t-p,...]`` (2.5 - 4.0),
  JSON keys and values (4.1+, numeric or named ``transactionStatus``), ``<DELETE>``
  tombstones, ``unknown::version=`` and ``Unknown record type``/``Error at offset`` keys;
* ``--offsets-decoder`` (``__consumer_offsets``): ``offset::<group>:<topic>:<partition>`` keys
  with ``<offset>[:<metadata>]`` values and ``{"metadata":...}`` group keys (2.4.0; a deleted
  offset is printed without key and payload), ``offset_commit::group=<g>,partition=<t>-<p>`` keys
  with ``offset=<n>[,metadata=<m>]`` or ``<DELETE>`` values and ``group_metadata::`` keys
  (2.4.1 - 3.7), JSON ``{"type":"<key version>","data":{...}}`` keys and
  ``{"version":"<value version>","data":{...}}`` values (3.8+); group metadata and the other
  record types of the group coordinator are skipped, as the binary decoder skips them;
* snapshot lines: ``Some(n)``/``None`` up to 3.4, ``OptionalLong[n]``/``OptionalLong.empty``
  from 3.5, ``lastTimestamp:`` from 3.1, with or without the batch-metadata part;
* ``.txnindex`` lines (unchanged), the ``Found N invalid bytes`` trailer, and stderr
  messages when the output was captured with ``2>&1``.

Raw record contents printed with the default decoder may contain newlines; a record line
whose printed key and payload are shorter than its ``keySize``/``valueSize`` takes the lines
that follow as the rest of its content.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path, PurePosixPath
from typing import Any, Final

from txn_audit.formats.cluster_metadata import MetadataRecord, record_from_json
from txn_audit.formats.remote_log_metadata import RemoteLogEntry, remote_log_record_from_text
from txn_audit.formats.layout import (
    CLUSTER_METADATA_TOPIC,
    CONSUMER_OFFSETS_TOPIC,
    TRANSACTION_STATE_TOPIC,
    parse_log_file_name,
    parse_partition_dir,
)
from txn_audit.formats.model import TXN_STATES, AbortedTxn, DecodeIssue, IssueKind, Severity
from txn_audit.formats.record_batch import MARKER_TYPE_CODES

EXCERPT_CHARS: Final = 160
_STATE_CODES: Final = {name: code for code, name in TXN_STATES.items()}
_TT: Final = r"(?P<tt>CreateTime|LogAppendTime|NoTimestampType)"
_INT: Final = r"-?\d+"


def _rx(template: str) -> re.Pattern[str]:
    """A pattern from a template whose spaces (outside ``[...]`` classes) match any run of blanks."""
    out, in_class, escaped = [], False, False
    for ch in template:
        if escaped:
            escaped = False
        elif ch == "\\":
            escaped = True
        elif ch == "[":
            in_class = True
        elif ch == "]":
            in_class = False
        elif ch == " " and not in_class:
            out.append(r"[ \t]+")
            continue
        out.append(ch)
    return re.compile("".join(out))


# -- line patterns -----------------------------------------------------------------------

_BATCH_V2 = _rx(
    rf"baseOffset: (?P<base>{_INT}) lastOffset: (?P<last>{_INT}) count: (?P<count>{_INT}|null)"
    rf" baseSequence: (?P<bseq>{_INT}) lastSequence: (?P<lseq>{_INT}) producerId: (?P<pid>{_INT})"
    rf" producerEpoch: (?P<epoch>{_INT}) partitionLeaderEpoch: (?P<ple>{_INT})"
    r" isTransactional: (?P<txn>true|false) isControl: (?P<ctl>true|false)"
    r"(?: deleteHorizonMs: (?P<dh>OptionalLong\.empty|OptionalLong\[-?\d+\]))?"
    rf" position: (?P<pos>\d+) {_TT}: (?P<maxts>{_INT}) size: (?P<size>\d+) magic: (?P<magic>\d+)"
    r" compresscodec: (?P<codec>\w+) crc: (?P<crc>\d+) isvalid: (?P<valid>true|false)[ \t]*$"
)
_BATCH_LEGACY = _rx(
    rf"offset: (?P<last>{_INT}) position: (?P<pos>\d+) {_TT}: (?P<maxts>{_INT}) size: (?P<size>\d+)"
    r" magic: (?P<magic>\d+) compresscodec: (?P<codec>\w+) crc: (?P<crc>\d+) isvalid: (?P<valid>true|false)[ \t]*$"
)
_SEQ_HEADERS = rf"(?: sequence: (?P<seq>{_INT}) headerKeys: \[(?P<hk>.*?)\](?=[ \t]|$))?"
_RECORD_30 = _rx(
    rf"\| offset: (?P<off>{_INT}) {_TT}: (?P<ts>{_INT}) keySize: (?P<ks>{_INT}) valueSize: (?P<vs>{_INT})"
    + _SEQ_HEADERS
    + r"(?: isValid: (?P<lvalid>true|false) crc: (?P<lcrc>\d+|null)\})?"
)
_RECORD_24 = _rx(
    rf"\| offset: (?P<off>{_INT}) {_TT}: (?P<ts>{_INT}) keysize: (?P<ks>{_INT}) valuesize: (?P<vs>{_INT})"
    + _SEQ_HEADERS
    + r"(?: crc: (?P<lcrc>\d+|null) isvalid: (?P<lvalid>true|false))?"
)
_RECORD_28 = _rx(
    rf"\| offset: (?P<off>{_INT}) isValid: (?:true|false) crc: (?:\d+|null) keySize: (?P<ks>{_INT})"
    rf" valueSize: (?P<vs>{_INT}) {_TT}: (?P<ts>{_INT}) baseOffset: {_INT} lastOffset: {_INT}"
    rf" baseSequence: {_INT} lastSequence: {_INT} producerEpoch: {_INT} partitionLeaderEpoch: {_INT}"
    r" batchSize: \d+ magic: \d+ compressType: \w+ position: \d+"
    + _SEQ_HEADERS
    + r"(?: crc: (?P<lcrc>\d+|null) isvalid: (?P<lvalid>true|false))?"
)
_MARKER_SUFFIX = _rx(rf" endTxnMarker: (?P<type>COMMIT|ABORT) coordinatorEpoch: (?P<ce>{_INT})[ \t]*$")
_CONTROL_SUFFIX = _rx(r" controlType: (?P<name>\w+)\((?P<id>-?\d+)\)[ \t]*$")
_KRAFT_SUFFIX = re.compile(r"[ \t]+(?P<name>SnapshotHeader|SnapshotFooter|KRaftVersion|KRaftVoters|LeaderChange:)[ \t]")
_CONTENT_ONLY = re.compile(r"\|?[ \t]*(?:key|payload): ")
_LOG_HEADER = _rx(r"(?P<which>Log starting offset|Starting offset): (?P<base>\d+)[ \t]*$")
_KRAFT_HEADER = re.compile(r"(?:Snapshot end offset: \d+, epoch: \d+|KRaft bootstrap snapshot)\s*$")
_TRAILER = _rx(r"Found (?P<n>\d+) invalid bytes at the end of (?P<name>.+)$")
_SNAPSHOT = _rx(
    rf"producerId: (?P<pid>{_INT}) producerEpoch: (?P<epoch>{_INT}) coordinatorEpoch: (?P<ce>{_INT})"
    r" currentTxnFirstOffset: (?P<ctfo>None|Some\(-?\d+\)|OptionalLong\.empty|OptionalLong\[-?\d+\])"
    rf"(?: lastTimestamp: (?P<lts>{_INT}))?"
    rf"(?: firstSequence: (?P<fseq>{_INT}) lastSequence: (?P<lseq>{_INT}) lastOffset: (?P<lo>{_INT})"
    rf" offsetDelta: (?P<delta>{_INT}) timestamp: (?P<ts>{_INT}))?[ \t]*$"
)
_TXNINDEX = _rx(
    rf"version: (?P<v>{_INT}) producerId: (?P<pid>{_INT}) firstOffset: (?P<first>{_INT})"
    rf" lastOffset: (?P<last>{_INT}) lastStableOffset: (?P<lso>{_INT})[ \t]*$"
)
_INDEX_LINE = _rx(rf"(?:offset: {_INT} position: \d+|timestamp: {_INT} offset: {_INT})[ \t]*$")
_INDEX_NOTE = re.compile(r".+ (?:is empty\.|passed sanity check\.)$")
_SNAPSHOT_CRC = re.compile(r"Snapshot is corrupt \(CRC is no longer valid\)\. Stored crc: (\d+)\. Computed crc: (\d+)")
_SNAPSHOT_BAD = re.compile(r"Snapshot (?:contained an unknown file version|failed schema validation)")
#: stderr messages of DumpLogSegments that say nothing about transactions (kept out of the issues)
_STDERR_NOISE = re.compile(
    r"(?:Ignoring unknown file |Non-consecutive offsets in |Mismatches in :|Found timestamp mismatch in :"
    r"|Found out of order timestamp in :|The following indexed offsets are not found in the log\."
    r"|Indexed offset: |[ \t]+(?:-?\d+ is followed by -?\d+|Index offset: |Index timestamp: ))"
)
_EXCEPTION = re.compile(r"(?:Exception in thread |[\w.$]+(?:Exception|Error)(?::|$))")
_STACK = re.compile(r"(?:\tat |\t\.\.\. \d+ more|Caused by: |[ \t]+at )")

# --transaction-log-decoder payloads
_TXN_KEY_TEXT = re.compile(r"(?:transaction_metadata::)?transactionalId=(?P<id>.*)$", re.S)
_TXN_VALUE_TEXT = re.compile(
    r"producerId:(?P<pid>-?\d+),producerEpoch:(?P<epoch>-?\d+),state=(?P<state>\w+),"
    r"partitions=(?:\[(?P<list>.*)\]|(?:Hash)?Set\((?P<set>.*)\)),"
    r"txnLastUpdateTimestamp=(?P<upd>-?\d+),txnTimeoutMs=(?P<timeout>-?\d+)$",
    re.S,
)
_TXN_UNKNOWN_KEY = re.compile(r"unknown::version=(?P<v>-?\d+)$")
_TXN_SKIPPED = re.compile(
    r"(?:Unknown record type (?P<type>-?\d+)|Error) at offset (?P<off>-?\d+), skipping\.(?P<msg>.*)$"
)
_PARTITION_ENTRY = re.compile(r"(?P<topic>.+)-(?P<partition>\d+)$")

# --offsets-decoder payloads (a topic name is [a-zA-Z0-9._-]+, so the last separator is the right one)
_OFFSET_KEY_PLAIN = re.compile(r"offset::(?P<group>.*):(?P<topic>[\w.-]+):(?P<partition>\d+)$", re.S)
_OFFSET_VALUE_PLAIN = re.compile(r"(?P<offset>-?\d+)(?::(?P<metadata>.*))?$", re.S)
_OFFSET_KEY_TEXT = re.compile(r"offset_commit::group=(?P<group>.*),partition=(?P<topic>[\w.-]+)-(?P<partition>\d+)$",
                              re.S)
_OFFSET_VALUE_TEXT = re.compile(r"offset=(?P<offset>-?\d+)(?:,metadata=(?P<metadata>.*))?$", re.S)
_GROUP_KEY_TEXT = re.compile(r"group_metadata::group=.*$", re.S)
#: key versions (record types) of an offset commit; group metadata is 2, the new coordinator's records 3+
_OFFSET_COMMIT_KEY_TYPES: Final = (0, 1)
_OFFSET_COMMIT_VALUE_VERSIONS: Final = (0, 1, 2, 3, 4)

#: the newest Kafka release whose kafka-dump-log output is checked against real brokers (tests/corpus)
NEWEST_VERIFIED: Final = "4.4"
#: feature → (first, last) Kafka version printing it; a parsed file's features bound its tool version
FEATURE_VERSIONS: Final[dict[str, tuple[str, str]]] = {
    "starting_offset": ("2.4", "3.2"),
    "log_starting_offset": ("3.3", NEWEST_VERIFIED),
    "codec_upper": ("2.4", "2.8"),
    "codec_lower": ("3.0", NEWEST_VERIFIED),
    "no_delete_horizon": ("2.4", "3.1"),
    "delete_horizon": ("3.2", NEWEST_VERIFIED),
    "record_lowercase_sizes": ("2.4", "2.7"),
    "record_verbose": ("2.8", "2.8"),
    "record_camelcase_sizes": ("3.0", NEWEST_VERIFIED),
    "snapshot_scala_option": ("2.4", "3.4"),
    "snapshot_optionallong": ("3.5", NEWEST_VERIFIED),
    "snapshot_no_last_timestamp": ("2.4", "3.0"),
    "snapshot_last_timestamp": ("3.1", NEWEST_VERIFIED),
    "txn_key_plain": ("2.4", "2.4"),
    "txn_partitions_set": ("2.4", "2.4"),
    "txn_text": ("2.4", "4.0"),
    "txn_json": ("4.1", NEWEST_VERIFIED),
    "offsets_key_plain": ("2.4", "2.4"),
    "offsets_text": ("2.4", "3.7"),
    "offsets_json": ("3.8", NEWEST_VERIFIED),
}


def _version_key(v: str) -> tuple[int, ...]:
    return tuple(int(p) for p in v.split("."))


# -- values ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class DumpSection:
    """The file a ``Dumping <path>`` line announces. Names come from the path as printed;
    ``log_dir`` is the folder above the partition folder (``""`` when the path has none)."""

    line: int
    path: str
    file_name: str
    kind: str  # log | snapshot | txnindex | index | timeindex | kraft_snapshot | other
    status: str  # live | deleted | cleaned | swap | partial (from the file name)
    base_offset: int | None
    topic: str | None
    partition: int | None
    replica_status: str | None
    log_dir: str | None


@dataclass(frozen=True, slots=True)
class TextIssue:
    """A line (or a section) the text does not explain, with where it is."""

    section: DumpSection | None
    line: int
    kind: str
    severity: str
    reason: str
    excerpt: str

    def to_decode_issue(self) -> DecodeIssue:
        """The ``decode_issues`` value: ``position`` is the line number (1-based)."""
        detail = f"line {self.line}: {self.reason}"
        if self.excerpt:
            detail += f": {self.excerpt!r}"
        return DecodeIssue(position=self.line, kind=self.kind, severity=self.severity, detail=detail)


@dataclass(frozen=True, slots=True)
class TextRecord:
    """One record line (``| offset: ...``). ``None`` where the line does not print a field."""

    line: int
    offset: int | None
    timestamp: int | None
    key_size: int | None
    value_size: int | None
    sequence: int | None
    header_keys: str | None  # as printed between the brackets
    marker_type: str | None  # COMMIT | ABORT (end-transaction control records)
    coordinator_epoch: int | None
    control_type: str | None  # any other control record: "LEADER_CHANGE(2)", "SnapshotHeader", ...
    key: str | None
    payload: str | None


@dataclass(frozen=True, slots=True)
class TextBatch:
    """A batch line and its record lines (the columns of ``batches``; ``None`` = not in the text).

    Legacy (magic 0/1) entries have no producer fields: they are Kafka's -1/False, as the binary
    decoder gives them. ``computed_crc`` is the stored CRC when Kafka said ``isvalid: true``.
    """

    section: DumpSection
    line: int
    position: int
    base_offset: int | None
    last_offset: int
    magic: int
    codec: str
    timestamp_type: str
    is_transactional: bool
    is_control: bool
    producer_id: int
    producer_epoch: int
    base_sequence: int
    last_sequence: int
    record_count: int | None
    first_timestamp: int | None
    max_timestamp: int
    delete_horizon_ms: int | None
    partition_leader_epoch: int
    stored_crc: int
    computed_crc: int | None
    crc_ok: bool
    size_bytes: int
    records: tuple[TextRecord, ...] = ()

    @property
    def deep(self) -> bool:
        """Whether record lines were printed for this batch (``--deep-iteration``)."""
        return bool(self.records)


@dataclass(frozen=True, slots=True)
class TextMarker:
    """A COMMIT/ABORT marker (the columns of ``control_markers``). Without record lines only the
    batch line is known: ``marker_type``, ``control_type`` and ``coordinator_epoch`` are None.
    The text never shows the marker's key and value versions."""

    section: DumpSection
    line: int
    offset: int
    producer_id: int
    producer_epoch: int
    marker_type: str | None
    control_type: int | None
    coordinator_epoch: int | None
    timestamp: int | None
    key_version: int | None
    value_version: int | None
    position: int


@dataclass(frozen=True, slots=True)
class TextTxnLogRecord:
    """A ``__transaction_state`` record printed by ``--transaction-log-decoder`` (the columns of
    ``txn_log``). The text forms before 4.1 omit the value version, the start timestamp and the
    tagged fields (None here); the JSON form of 4.1+ has them all."""

    section: DumpSection
    line: int
    position: int  # the batch's byte position
    offset: int
    record_timestamp: int
    transactional_id: str
    key_version: int
    value_version: int | None
    tombstone: bool
    producer_id: int | None
    producer_epoch: int | None
    previous_producer_id: int | None
    next_producer_id: int | None
    next_producer_epoch: int | None
    txn_timeout_ms: int | None
    state_code: int | None
    state: str | None
    topic_partitions: tuple[tuple[str, int], ...] | None  # None: the Empty state's null list
    txn_last_update_timestamp: int | None
    txn_start_timestamp: int | None
    client_transaction_version: int | None


# the fields of a TextTxnLogRecord that come from the record's value, named as in the parsed payload
TXN_VALUE_FIELDS = tuple(f for f in TextTxnLogRecord.__dataclass_fields__
                         if f not in ("section", "line", "position", "offset", "record_timestamp",
                                      "transactional_id", "key_version", "tombstone"))


@dataclass(frozen=True, slots=True)
class TextOffsetCommit:
    """An offset commit of ``__consumer_offsets`` printed by ``--offsets-decoder`` (the columns of
    ``offset_commits``; the batch fields come from its batch line). The text forms before 3.8
    print the group, the partition, the offset and the metadata only: the key and value
    versions, the leader epoch and the commit and expire timestamps are None. The JSON form of
    3.8+ prints the versions, so a field the value version does not have is its default (-1),
    as the binary decoder gives it."""

    section: DumpSection
    line: int
    position: int  # the batch's byte position
    offset: int
    record_timestamp: int
    group_id: str
    commit_topic: str
    commit_partition: int
    key_version: int | None
    value_version: int | None
    tombstone: bool
    committed_offset: int | None
    leader_epoch: int | None
    metadata: str | None
    commit_timestamp: int | None
    expire_timestamp: int | None
    is_transactional: bool
    producer_id: int
    producer_epoch: int


# the fields of a TextOffsetCommit that come from the record's value, named as in the parsed payload
OFFSET_VALUE_FIELDS: Final = ("value_version", "committed_offset", "leader_epoch", "metadata", "commit_timestamp",
                              "expire_timestamp")


@dataclass(frozen=True, slots=True)
class TextSnapshotEntry:
    """A producer-snapshot line (the columns of ``producer_snapshots``).

    An entry printed without its batch part had ``lastOffset < 0`` on disk, and Kafka writes such
    an entry with lastSequence -1, lastOffset -1 and offsetDelta 0; its timestamp is only printed
    from 3.1 (``lastTimestamp``), before that it is None. Only snapshots whose CRC Kafka accepted
    are printed, so ``crc_ok`` is always True.
    """

    section: DumpSection
    line: int
    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_offset: int
    offset_delta: int
    timestamp: int | None
    coordinator_epoch: int
    current_txn_first_offset: int
    first_sequence: int | None
    has_batch_metadata: bool
    crc_ok: bool = True


@dataclass(frozen=True, slots=True)
class TextAbortedTxn:
    """A ``.txnindex`` line: every field of the binary entry."""

    section: DumpSection
    line: int
    version: int
    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int

    @property
    def entry(self) -> AbortedTxn:
        return AbortedTxn(self.version, self.producer_id, self.first_offset, self.last_offset, self.last_stable_offset)


DumpItem = (DumpSection | TextBatch | TextMarker | TextTxnLogRecord | TextOffsetCommit | TextSnapshotEntry
            | TextAbortedTxn | TextIssue)


@dataclass
class ParsedDumpLog:
    """Everything one dump-log text file holds, in lists (for tests and small files)."""

    file: str
    command: str | None = None
    sections: list[DumpSection] = field(default_factory=list)
    batches: list[TextBatch] = field(default_factory=list)
    markers: list[TextMarker] = field(default_factory=list)
    txn_log: list[TextTxnLogRecord] = field(default_factory=list)
    offset_commits: list[TextOffsetCommit] = field(default_factory=list)
    snapshots: list[TextSnapshotEntry] = field(default_factory=list)
    aborted_txns: list[TextAbortedTxn] = field(default_factory=list)
    issues: list[TextIssue] = field(default_factory=list)
    features: set[str] = field(default_factory=set)

    def kafka_versions(self) -> tuple[str, str] | None:
        """The range of Kafka versions whose tool prints every feature seen (None if they clash)."""
        return kafka_versions(self.features)


def kafka_versions(features: Iterable[str]) -> tuple[str, str] | None:
    low, high = "2.4", NEWEST_VERIFIED
    for f in features:
        first, last = FEATURE_VERSIONS.get(f, ("2.4", NEWEST_VERIFIED))
        if _version_key(first) > _version_key(low):
            low = first
        if _version_key(last) < _version_key(high):
            high = last
    return (low, high) if _version_key(low) <= _version_key(high) else None


# -- helpers -----------------------------------------------------------------------------


def excerpt(line: str) -> str:
    """The start of a line for a message; NUL bytes (a zero-filled stretch of a damaged copy)
    shown as ``\\0``, so that the message prints."""
    line = line.replace("\x00", "\\0")
    return line if len(line) <= EXCERPT_CHARS else line[: EXCERPT_CHARS - 3] + "..."


def _optional_long(text: str) -> int:
    """``OptionalLong[5]``/``Some(5)`` → 5, ``OptionalLong.empty``/``None`` → -1 (Kafka's sentinel)."""
    m = re.search(r"-?\d+", text)
    return int(m.group()) if m else -1


#: the kinds of file a partition folder holds (``DumpSection.kind``)
PARTITION_FILE_KINDS = ("log", "snapshot", "txnindex", "index", "timeindex", "kraft_snapshot")


def section_of(line: int, path: str, text_file: str = "") -> DumpSection:
    """The section a ``Dumping <path>`` line opens: what the file is, from its name and folders.
    A path printed without its partition folder (``--files 00000000000000000000.log`` run inside
    it) takes the partition ``text_file`` (the dump's own name, ``orders-3.txt``) is named after."""
    p = PurePosixPath(path.replace("\\", "/"))
    name = p.name
    parsed = parse_log_file_name(name)
    kind, status, base = "other", "live", None
    if parsed is not None:
        kind = "kraft_snapshot" if parsed.kind == "checkpoint" else parsed.kind
        status, base = parsed.status, parsed.base_offset
    elif name.endswith(".checkpoint"):
        kind = "kraft_snapshot"
    part = parse_partition_dir(p.parent.name) if p.parent.name else None
    log_dir: str | None = None
    if part is not None:
        grand = p.parent.parent
        log_dir = "" if str(grand) == "." else str(grand)
    elif kind in PARTITION_FILE_KINDS and text_file:
        part = parse_partition_dir(PurePosixPath(text_file.replace("\\", "/")).stem)
        log_dir = "" if part is not None else None
    topic = part.topic if part else None
    partition = part.partition if part else None
    return DumpSection(
        line=line, path=path, file_name=name, kind=kind, status=status, base_offset=base, topic=topic,
        partition=partition, replica_status=part.status if part else None, log_dir=log_dir,
    )


#: a record line with a payload, as ``--cluster-metadata-decoder`` (3.3+, JSON) and
#: ``--remote-log-metadata-decoder`` (3.6+, the record's ``toString``) print it
_PAYLOAD_RECORD = re.compile(r"^\| offset: (?P<off>-?\d+) CreateTime: (?P<ts>-?\d+) .*? payload: (?P<payload>.*?)\s*$")


def metadata_entry(line: str) -> tuple[int, int, MetadataRecord] | None:
    """A record line of a ``--cluster-metadata-decoder`` dump as ``(timestamp, offset, record)``,
    as ``cluster_metadata.replay_configs`` takes them; None for any other line (a batch, a control
    record). Raises ``ValueError`` for a record line whose payload is not a metadata record's JSON."""
    m = _PAYLOAD_RECORD.match(line)
    if m is None:
        return None
    try:
        record = record_from_json(json.loads(m["payload"]))
    except (KeyError, TypeError, ValueError, AttributeError) as err:
        raise ValueError(f"not a metadata record's JSON ({type(err).__name__}: {err})") from err
    return int(m["ts"]), int(m["off"]), record


def remote_log_entry(line: str) -> RemoteLogEntry | None:
    """A record line of a ``--remote-log-metadata-decoder`` dump as ``(offset, timestamp, record)``
    (``remote_log_metadata.remote_log_record_from_text``); None for any other line. Raises
    ``ValueError`` for a record line whose payload is not a remote log metadata record's text."""
    m = _PAYLOAD_RECORD.match(line)
    if m is None:
        return None
    return RemoteLogEntry(int(m["off"]), int(m["ts"]), remote_log_record_from_text(m["payload"]))


def _partitions_of(text: str, sep: str) -> tuple[tuple[str, int], ...]:
    out = []
    for item in text.split(sep) if text.strip() else []:
        m = _PARTITION_ENTRY.match(item.strip())
        if m is None:
            raise ValueError(f"partition entry {item!r} is not <topic>-<partition>")
        out.append((m["topic"], int(m["partition"])))
    return tuple(out)


@dataclass(frozen=True, slots=True)
class _TxnPayload:
    transactional_id: str
    key_version: int
    value: dict[str, object] | None  # None: tombstone


def _parse_txn_text(key: str, payload: str | None) -> tuple[_TxnPayload | None, set[str]]:
    """A pre-4.1 text key/payload pair; (None, features) when it is not one."""
    m = _TXN_KEY_TEXT.match(key)
    if m is None or payload is None:
        return None, set()
    features = {"txn_text"} | (set() if key.startswith("transaction_metadata::") else {"txn_key_plain"})
    if payload == "<DELETE>":
        return _TxnPayload(m["id"], 0, None), features
    v = _TXN_VALUE_TEXT.match(payload)
    if v is None:
        return None, set()
    if v["set"] is not None:
        features.add("txn_partitions_set")
        parts = _partitions_of(v["set"], ",")
    else:
        parts = _partitions_of(v["list"], ",")
    state = v["state"]
    value: dict[str, object] = {
        "producer_id": int(v["pid"]),
        "producer_epoch": int(v["epoch"]),
        "txn_timeout_ms": int(v["timeout"]),
        "state": state,
        "state_code": _STATE_CODES.get(state),
        # the writer stores a null list for Empty (TransactionLog.valueToBytes); the text prints []
        "topic_partitions": None if state == "Empty" and not parts else parts,
        "txn_last_update_timestamp": int(v["upd"]),
    }
    return _TxnPayload(m["id"], 0, value), features


def _parse_txn_json(key: str, payload: str | None) -> _TxnPayload | None:
    """A 4.1+ JSON key/payload pair; None when it is not one. Absent tagged fields are defaults."""
    try:
        k = json.loads(key)
        key_version = int(k["type"])
        tid = k["data"]["transactionalId"]
    except (ValueError, KeyError, TypeError):
        return None
    if not isinstance(tid, str):
        return None
    if payload is None:
        return None
    if payload == "<DELETE>":
        return _TxnPayload(tid, key_version, None)
    try:
        v = json.loads(payload)
        version = int(v["version"])
        d = v["data"]
        status = d["transactionStatus"]
        if isinstance(status, str) and not status.lstrip("-").isdigit():
            state_code = _STATE_CODES.get(status)
            state = status
        else:
            state_code = int(status)
            state = TXN_STATES.get(state_code, f"Unknown({state_code})")
        parts_json = d.get("transactionPartitions")
        parts = None if parts_json is None else tuple(
            (str(tp["topic"]), int(p)) for tp in parts_json for p in tp["partitionIds"]
        )
        value: dict[str, object] = {
            "value_version": version,
            "producer_id": int(d["producerId"]),
            "producer_epoch": int(d["producerEpoch"]),
            "previous_producer_id": int(d.get("previousProducerId", -1)),
            "next_producer_id": int(d.get("nextProducerId", -1)),
            "next_producer_epoch": int(d.get("nextProducerEpoch", -1)),
            "txn_timeout_ms": int(d["transactionTimeoutMs"]),
            "state_code": state_code,
            "state": state,
            "topic_partitions": parts,
            "txn_last_update_timestamp": int(d["transactionLastUpdateTimestampMs"]),
            "txn_start_timestamp": int(d["transactionStartTimestampMs"]),
            "client_transaction_version": int(d.get("clientTransactionVersion", 0)),
        }
    except (ValueError, KeyError, TypeError):
        return None
    return _TxnPayload(tid, key_version, value)


@dataclass(frozen=True, slots=True)
class _OffsetsPayload:
    """What an ``--offsets-decoder`` key/payload pair says. ``commit`` is False for the records that
    are no offset commit (group metadata, the new coordinator's record types): they are skipped."""

    commit: bool
    group: str = ""
    topic: str = ""
    partition: int = -1
    key_version: int | None = None
    value: dict[str, object] | None = None  # None: tombstone
    unknown_value_version: int | None = None  # a JSON value of a version no broker writes


_NOT_A_COMMIT: Final = _OffsetsPayload(commit=False)


def _parse_offsets(key: str, payload: str | None) -> tuple[_OffsetsPayload | None, set[str]]:
    """An ``--offsets-decoder`` key/payload pair of any version; (None, features) when it is not one.

    ``ValueError`` when the key is one of the decoder's forms but the pair does not parse.
    """
    if key.startswith("{"):
        try:
            k = json.loads(key)
        except ValueError:
            return None, set()
        if not isinstance(k, dict):
            return None, set()
        if "type" not in k:
            if set(k) == {"metadata"}:  # 2.4.0 group metadata key
                return _NOT_A_COMMIT, {"offsets_key_plain"}
            return None, set()
        return _parse_offsets_json(k, payload), {"offsets_json"}
    if (m := _OFFSET_KEY_TEXT.match(key)) is not None:
        features = {"offsets_text"}
        if payload == "<DELETE>":
            return _OffsetsPayload(True, m["group"], m["topic"], int(m["partition"])), features
        v = _OFFSET_VALUE_TEXT.match(payload or "")
        if v is None:
            raise ValueError("offset commit value is not offset=<n>[,metadata=<m>] or <DELETE>")
        value: dict[str, object] = {"committed_offset": int(v["offset"]), "metadata": v["metadata"] or ""}
        return _OffsetsPayload(True, m["group"], m["topic"], int(m["partition"]), value=value), features
    if _GROUP_KEY_TEXT.match(key):
        return _NOT_A_COMMIT, {"offsets_text"}
    if (m := _OFFSET_KEY_PLAIN.match(key)) is not None:
        v = _OFFSET_VALUE_PLAIN.match(payload or "")
        if v is None:
            raise ValueError("offset commit value is not <offset>[:<metadata>]")
        value = {"committed_offset": int(v["offset"]), "metadata": v["metadata"] or ""}
        return _OffsetsPayload(True, m["group"], m["topic"], int(m["partition"]), value=value), {"offsets_key_plain"}
    return None, set()


def _parse_offsets_json(key: dict[str, object], payload: str | None) -> _OffsetsPayload:
    """A 3.8+ JSON key/payload pair (key already parsed). Raises ``ValueError`` when it does not parse."""
    try:
        key_type = int(key["type"])  # type: ignore[call-overload]  # any JSON value: a bad one raises, caught below
        if key_type not in _OFFSET_COMMIT_KEY_TYPES:
            return _NOT_A_COMMIT
        d = key["data"]
        if not isinstance(d, dict):
            raise TypeError("the key's data is not an object")
        group, topic, partition = d["group"], d["topic"], int(d["partition"])
        if not isinstance(group, str) or not isinstance(topic, str):
            raise TypeError("group and topic must be strings")
        if payload == "<DELETE>":
            return _OffsetsPayload(True, group, topic, partition, key_type)
        v = json.loads(payload or "")
        version = int(v["version"])
        if version not in _OFFSET_COMMIT_VALUE_VERSIONS:
            return _OffsetsPayload(True, group, topic, partition, key_type, unknown_value_version=version)
        data = v["data"]
        metadata = data["metadata"]
        if not isinstance(metadata, str):
            raise TypeError("metadata must be a string")
        value: dict[str, object] = {
            "value_version": version,
            "committed_offset": int(data["offset"]),
            # a field the version does not have is its default, as the binary decoder gives it
            "leader_epoch": int(data["leaderEpoch"]) if version >= 3 else -1,
            "metadata": metadata,
            "commit_timestamp": int(data["commitTimestamp"]),
            "expire_timestamp": int(data["expireTimestamp"]) if version == 1 else -1,
        }
    except KeyError as err:
        raise ValueError(f"offset commit JSON lacks the field {err}") from err
    except TypeError as err:
        raise ValueError(f"offset commit JSON has a field of the wrong type: {err}") from err
    return _OffsetsPayload(True, group, topic, partition, key_type, value)


def _split_content(rest: str) -> tuple[str | None, str | None] | None:
    """`` key: K payload: V`` (either part optional) → (K, V); None if ``rest`` is not content."""
    if not rest.strip():
        return None, None
    m = re.match(r"[ \t]*key: ", rest)
    if m:
        body = rest[m.end() :]
        i = body.find(" payload: ")
        return (body, None) if i < 0 else (body[:i], body[i + len(" payload: ") :])
    m = re.match(r"[ \t]*payload: ", rest)
    if m:
        return None, rest[m.end() :]
    return None


# -- the parser --------------------------------------------------------------------------


class DumpLogParser:
    """Streaming parser of one dump-log text file: ``feed`` each line, then ``finish``."""

    def __init__(self, file: str = "") -> None:
        self.file = file
        self.command: str | None = None
        self.features: set[str] = set()
        self._line_no = 0
        self._section: DumpSection | None = None
        self._batch: dict[str, Any] | None = None  # the batch line's fields, by TextBatch field name
        self._records: list[TextRecord] = []
        self._pending_bytes = 0  # content bytes a record line still owes (payload with newlines)
        self._in_stack = False
        self._txn_undecoded = 0  # __transaction_state records printed without the decoder
        self._offsets_undecoded = 0  # __consumer_offsets records printed without the decoder (or their key)
        self._control_without_records = 0

    # public API

    def feed(self, raw: str | bytes) -> Iterator[DumpItem]:
        """Parse the next line (without or with its line end); yields what it completes."""
        self._line_no += 1
        line = raw.decode("utf-8", errors="replace") if isinstance(raw, bytes) else raw
        if line.endswith("\n"):
            line = line[:-1]
        if line.endswith("\r"):
            line = line[:-1]
        yield from self._line(line)

    def finish(self) -> Iterator[DumpItem]:
        """Flush the batch in progress and the section-level issues."""
        yield from self._close_section()

    # internals

    def _issue(self, kind: str, severity: str, reason: str, line: str = "", at: int | None = None) -> TextIssue:
        return TextIssue(self._section, self._line_no if at is None else at, str(kind), str(severity), reason,
                         excerpt(line))

    def _unparsed(self, line: str, reason: str) -> TextIssue:
        return self._issue(IssueKind.UNPARSED_LINE, Severity.WARNING, reason, line)

    def _line(self, line: str) -> Iterator[DumpItem]:
        if self._pending_bytes > 0 and not self._structural(line):
            self._pending_bytes -= len(line.encode("utf-8")) + 1
            if self._records:
                r = self._records[-1]
                if r.payload is not None:
                    self._records[-1] = _replace(r, payload=r.payload + "\n" + line)
                elif r.key is not None:
                    self._records[-1] = _replace(r, key=r.key + "\n" + line)
            return
        self._pending_bytes = 0
        if self._in_stack:
            if _STACK.match(line):
                return
            self._in_stack = False
        if line.startswith("Dumping "):
            yield from self._close_section()
            self._section = section_of(self._line_no, line[len("Dumping ") :].strip(), self.file)
            yield self._section
            if self._section.topic is None and self._section.kind in PARTITION_FILE_KINDS:
                yield self._issue(
                    IssueKind.UNRECOGNISED_FILE, Severity.WARNING,
                    "neither the dumped path nor the file's name names a partition (a <topic>-<partition> "
                    "folder, or a file named <topic>-<partition>.txt): its rows are not audited", line,
                )
            return
        if not line.strip():
            return
        if line.startswith("#"):
            if self.command is None and line.startswith("# $ "):
                self.command = line[4:].strip()
            return
        stripped = line.strip()
        if _STDERR_NOISE.match(line):
            return
        m = _SNAPSHOT_CRC.match(stripped)
        if m:
            yield self._issue(IssueKind.CRC_MISMATCH, Severity.ERROR,
                              f"producer snapshot CRC stored {m[1]} computed {m[2]}; the broker would discard this "
                              "snapshot and kafka-dump-log printed none of its entries", line)
            return
        if _SNAPSHOT_BAD.match(stripped):
            yield self._issue(IssueKind.BAD_SNAPSHOT, Severity.ERROR, "kafka-dump-log could not read the snapshot",
                              line)
            return
        if _EXCEPTION.match(line):
            self._in_stack = True
            yield self._issue(IssueKind.INCOMPLETE_TEXT, Severity.ERROR,
                              "kafka-dump-log failed here: the rest of this file's dump is missing", line)
            return
        section = self._section
        if section is None:
            yield self._unparsed(line, "line before any 'Dumping <path>' line")
            return
        kind = section.kind
        if kind == "log" and section.topic != CLUSTER_METADATA_TOPIC:
            yield from self._log_line(line)
        elif kind == "snapshot":
            yield from self._snapshot_line(line)
        elif kind == "txnindex":
            yield from self._txnindex_line(line)
        elif kind in ("index", "timeindex"):
            if not (_INDEX_LINE.match(stripped) or _INDEX_NOTE.match(stripped)):
                yield self._unparsed(line, f"not a .{kind} entry line")
        elif kind == "kraft_snapshot" or section.topic == CLUSTER_METADATA_TOPIC:
            return  # KRaft metadata: not audited
        else:
            yield self._unparsed(line, f"kafka-dump-log prints nothing for {section.file_name}")

    @staticmethod
    def _structural(line: str) -> bool:
        """Whether a line reads as one the tool starts by itself (then it is no payload continuation)."""
        if line.startswith("Dumping "):
            return True
        if line.startswith("|"):
            patterns = (_RECORD_30, _RECORD_24, _RECORD_28)
        else:
            patterns = (_BATCH_V2, _BATCH_LEGACY, _TRAILER)
        return any(p.match(line) for p in patterns)

    # .log sections

    def _log_line(self, line: str) -> Iterator[DumpItem]:
        if line.startswith("|"):
            yield from self._record_line(line)
            return
        m = _BATCH_V2.match(line) or _BATCH_LEGACY.match(line)
        if m is not None:
            yield from self._flush_batch()
            self._start_batch(m)
            return
        m = _LOG_HEADER.match(line)
        if m is not None:
            self.features.add("log_starting_offset" if m["which"] == "Log starting offset" else "starting_offset")
            base = self._section.base_offset if self._section else None
            if base is not None and int(m["base"]) != base:
                yield self._unparsed(line, f"starting offset {m['base']} differs from the file name's {base}")
            return
        if _KRAFT_HEADER.match(line):
            return
        m = _TRAILER.match(line)
        if m is not None:
            yield from self._flush_batch()
            yield self._issue(
                IssueKind.TRUNCATED_TAIL, Severity.WARNING,
                f"kafka-dump-log found {m['n']} invalid bytes after the last whole batch (a torn batch or "
                "preallocated zeros: the text cannot tell which)", line,
            )
            return
        if _CONTENT_ONLY.match(line):
            return  # --skip-record-metadata content without the leading "|"
        yield self._unparsed(line, "not a batch, record or header line of a .log dump")

    def _start_batch(self, m: re.Match[str]) -> None:
        g = m.groupdict()
        codec = g["codec"]
        self.features.add("codec_lower" if codec == codec.lower() else "codec_upper")
        magic = int(g["magic"])
        legacy = "base" not in g
        if not legacy:
            self.features.add("delete_horizon" if g["dh"] is not None else "no_delete_horizon")
        valid = g["valid"] == "true"
        crc = int(g["crc"])
        self._batch = {
            "line": self._line_no,
            "position": int(g["pos"]),
            "base_offset": None if legacy else int(g["base"]),
            "last_offset": int(g["last"]),
            "magic": magic,
            "codec": codec.lower(),
            "timestamp_type": g["tt"],
            "is_transactional": False if legacy else g["txn"] == "true",
            "is_control": False if legacy else g["ctl"] == "true",
            "producer_id": -1 if legacy else int(g["pid"]),
            "producer_epoch": -1 if legacy else int(g["epoch"]),
            "base_sequence": -1 if legacy else int(g["bseq"]),
            "last_sequence": -1 if legacy else int(g["lseq"]),
            "record_count": None if legacy or g["count"] == "null" else int(g["count"]),
            "max_timestamp": int(g["maxts"]),
            "delete_horizon_ms": None if legacy or g["dh"] is None else _optional_long(g["dh"]),
            "partition_leader_epoch": -1 if legacy else int(g["ple"]),
            "stored_crc": crc,
            "computed_crc": crc if valid else None,
            "crc_ok": valid,
            "size_bytes": int(g["size"]),
        }
        if legacy:
            self._batch["delete_horizon_ms"] = -1  # legacy entries have no such field: the binary's sentinel
        self._records = []

    def _record_line(self, line: str) -> Iterator[DumpItem]:
        if self._batch is None:
            yield self._unparsed(line, "record line without a batch line before it")
            return
        m = _RECORD_30.match(line)
        feature = "record_camelcase_sizes"
        if m is None:
            m, feature = _RECORD_24.match(line), "record_lowercase_sizes"
        if m is None:
            m, feature = _RECORD_28.match(line), "record_verbose"
        if m is None:
            content = _split_content(line[1:])
            if content is not None and content != (None, None):  # --skip-record-metadata
                self._records.append(TextRecord(self._line_no, None, None, None, None, None, None, None, None, None,
                                                content[0], content[1]))
                return
            yield self._unparsed(line, "record line that does not parse")
            return
        self.features.add(feature)
        g = m.groupdict()
        rest = line[m.end() :]
        marker_type = ce = control = key = payload = None
        mm = _MARKER_SUFFIX.match(rest)
        if mm:
            marker_type, ce = mm["type"], int(mm["ce"])
        elif (mc := _CONTROL_SUFFIX.match(rest)) is not None:
            control = f"{mc['name']}({mc['id']})"
        elif (mk := _KRAFT_SUFFIX.match(rest)) is not None:
            control = mk["name"].rstrip(":")
        else:
            content = _split_content(rest)
            if content is None:
                yield self._unparsed(line, "record line with an unknown ending")
                return
            key, payload = content
        key_size, value_size = int(g["ks"]), int(g["vs"])
        record = TextRecord(
            line=self._line_no,
            offset=int(g["off"]),
            timestamp=int(g["ts"]),
            key_size=key_size,
            value_size=value_size,
            sequence=int(g["seq"]) if g.get("seq") is not None else None,
            header_keys=g.get("hk"),
            marker_type=marker_type,
            coordinator_epoch=ce,
            control_type=control,
            key=key,
            payload=payload,
        )
        self._records.append(record)
        section = self._section
        if (key is not None or payload is not None) and section is not None and section.topic not in (
            TRANSACTION_STATE_TOPIC,
            CONSUMER_OFFSETS_TOPIC,
        ):
            owed = (6 + key_size if key_size >= 0 and key is not None else 0) + (
                10 + value_size if value_size >= 0 and payload is not None else 0
            )
            shown = (6 + len(key.encode()) if key is not None else 0) + (
                10 + len(payload.encode()) if payload is not None else 0
            )
            if value_size >= 0 and payload is None and key is not None:
                owed += 10 + value_size  # the payload follows on a later line
            self._pending_bytes = owed - shown

    def _flush_batch(self) -> Iterator[DumpItem]:
        b = self._batch
        if b is None:
            return
        self._batch = None
        self._pending_bytes = 0
        section = self._section
        assert section is not None
        records = tuple(self._records)
        self._records = []
        count = b["record_count"]
        if records and b["base_offset"] is None and records[0].offset is not None:
            b["base_offset"] = records[0].offset  # legacy wrapper: its first inner offset
        if b["base_offset"] is None and b["codec"] == "none" and b["magic"] in (0, 1):
            b["base_offset"] = b["last_offset"]  # an uncompressed legacy entry is one message
        if count is None and b["magic"] in (0, 1) and (records or b["codec"] == "none"):
            count = len(records) if records else 1
        first_ts = None
        horizon = b.get("delete_horizon_ms")
        if horizon is not None and horizon != -1:
            # the cleaner stored its delete horizon in the header's baseTimestamp field: the batch's
            # first timestamp is not in its header, as the binary decoder says (-1)
            first_ts = -1
        elif records and records[0].timestamp is not None and b["timestamp_type"] == "CreateTime":
            first_ts = records[0].timestamp
        elif b["magic"] == 0:
            first_ts = -1
        b["record_count"] = count
        b["first_timestamp"] = first_ts
        batch = TextBatch(section=section, records=records, **b)
        yield batch
        if records and count is not None and len(records) != count and all(r.offset is not None for r in records):
            yield self._issue(
                IssueKind.INCOMPLETE_TEXT, Severity.WARNING,
                f"batch at position {batch.position} has count {count} but {len(records)} record lines",
                at=batch.line,
            )
        if batch.is_control:
            yield from self._markers(batch)
        elif section.topic == TRANSACTION_STATE_TOPIC:
            yield from self._txn_records(batch)
        elif section.topic == CONSUMER_OFFSETS_TOPIC:
            yield from self._offset_records(batch)

    def _markers(self, batch: TextBatch) -> Iterator[DumpItem]:
        if not batch.crc_ok:
            return  # like the binary path: the contents of a batch failing its CRC are not trusted
        if not batch.records:
            if batch.record_count == 0:
                return
            self._control_without_records += 1
            one = batch.record_count == 1
            yield TextMarker(
                batch.section, batch.line, batch.last_offset if one else batch.base_offset or batch.last_offset,
                batch.producer_id, batch.producer_epoch, None, None, None,
                batch.max_timestamp if one else None, None, None, batch.position,
            )
            return
        first = batch.records[0]
        if first.marker_type is None:
            if first.control_type is not None:
                yield self._issue(
                    IssueKind.UNEXPECTED_CONTROL, Severity.WARNING,
                    f"control record {first.control_type} at offset {first.offset} is not a transaction marker",
                    at=first.line,
                )
            return
        yield TextMarker(
            batch.section, first.line, first.offset if first.offset is not None else batch.last_offset,
            batch.producer_id, batch.producer_epoch, first.marker_type, MARKER_TYPE_CODES[first.marker_type],
            first.coordinator_epoch, first.timestamp, None, None, batch.position,
        )

    def _txn_records(self, batch: TextBatch) -> Iterator[DumpItem]:
        if not batch.crc_ok:
            return
        for r in batch.records:
            if r.offset is None or r.timestamp is None:
                continue
            if r.key is None:
                if r.key_size is not None and r.key_size >= 0:
                    self._txn_undecoded += 1
                else:
                    yield self._issue(IssueKind.CORRUPT_RECORD, Severity.ERROR,
                                      f"__transaction_state record at offset {r.offset} without a key", at=r.line)
                continue
            if (u := _TXN_UNKNOWN_KEY.match(r.key)) is not None:
                yield self._issue(IssueKind.UNKNOWN_VERSION, Severity.WARNING,
                                  f"record at offset {r.offset}: key version {u['v']} is not known", at=r.line)
                continue
            if (s := _TXN_SKIPPED.match(r.key)) is not None:
                if s["type"] is not None:
                    yield self._issue(IssueKind.UNKNOWN_VERSION, Severity.WARNING,
                                      f"record at offset {r.offset}: record type {s['type']} is not known", at=r.line)
                else:
                    yield self._issue(IssueKind.CORRUPT_RECORD, Severity.ERROR,
                                      f"record at offset {r.offset}: kafka-dump-log could not decode it:{s['msg']}",
                                      at=r.line)
                continue
            parsed: _TxnPayload | None
            if r.key.startswith("{"):
                parsed = _parse_txn_json(r.key, r.payload)
                if parsed is not None:
                    self.features.add("txn_json")
            else:
                try:
                    parsed, feats = _parse_txn_text(r.key, r.payload)
                except ValueError:
                    parsed, feats = None, set()
                self.features |= feats
            if parsed is None:
                if _TXN_KEY_TEXT.match(r.key) or r.key.startswith("{"):
                    yield self._issue(IssueKind.UNPARSED_LINE, Severity.WARNING,
                                      f"transaction-log record at offset {r.offset} does not parse",
                                      r.key + (" payload: " + r.payload if r.payload is not None else ""), at=r.line)
                else:
                    self._txn_undecoded += 1
                continue
            value = parsed.value or {}
            value_fields: dict[str, Any] = {name: value.get(name) for name in TXN_VALUE_FIELDS}
            yield TextTxnLogRecord(
                section=batch.section, line=r.line, position=batch.position, offset=r.offset,
                record_timestamp=r.timestamp, transactional_id=parsed.transactional_id,
                key_version=parsed.key_version, tombstone=parsed.value is None, **value_fields,
            )

    def _offset_records(self, batch: TextBatch) -> Iterator[DumpItem]:
        if not batch.crc_ok:
            return  # like the binary path: the contents of a batch failing its CRC are not trusted
        for r in batch.records:
            if r.offset is None or r.timestamp is None:
                continue
            if r.key is None:
                # no --print-data-log/--offsets-decoder, or a deleted offset as 2.4.0 prints it (no key, no payload)
                self._offsets_undecoded += 1
                continue
            if (u := _TXN_UNKNOWN_KEY.match(r.key)) is not None:
                if int(u["v"]) < 0:  # 3+ are the new coordinator's record types: skipped, as the binary does
                    yield self._issue(IssueKind.UNKNOWN_VERSION, Severity.WARNING,
                                      f"record at offset {r.offset}: key version {u['v']} is not known", at=r.line)
                continue
            if (s := _TXN_SKIPPED.match(r.key)) is not None:
                if s["type"] is None:
                    yield self._issue(IssueKind.CORRUPT_RECORD, Severity.ERROR,
                                      f"record at offset {r.offset}: kafka-dump-log could not decode it:{s['msg']}",
                                      at=r.line)
                elif int(s["type"]) < 0:
                    yield self._issue(IssueKind.UNKNOWN_VERSION, Severity.WARNING,
                                      f"record at offset {r.offset}: record type {s['type']} is not known",
                                      at=r.line)
                continue  # a record type the tool does not know is none of the offset commits it knows
            try:
                parsed, feats = _parse_offsets(r.key, r.payload)
            except ValueError as err:
                yield self._issue(IssueKind.UNPARSED_LINE, Severity.WARNING,
                                  f"__consumer_offsets record at offset {r.offset} does not parse ({err})",
                                  r.key + (" payload: " + r.payload if r.payload is not None else ""), at=r.line)
                continue
            self.features |= feats
            if parsed is None:
                self._offsets_undecoded += 1  # raw bytes: dumped without --offsets-decoder
                continue
            if not parsed.commit:
                continue
            if parsed.unknown_value_version is not None:
                yield self._issue(IssueKind.UNKNOWN_VERSION, Severity.WARNING,
                                  f"record at offset {r.offset}: OffsetCommitValue version "
                                  f"{parsed.unknown_value_version}, only 0-4 are known", at=r.line)
                continue
            value = parsed.value or {}
            commit_fields: dict[str, Any] = {name: value.get(name) for name in OFFSET_VALUE_FIELDS}
            yield TextOffsetCommit(
                section=batch.section, line=r.line, position=batch.position, offset=r.offset,
                record_timestamp=r.timestamp, group_id=parsed.group, commit_topic=parsed.topic,
                commit_partition=parsed.partition, key_version=parsed.key_version, tombstone=parsed.value is None,
                is_transactional=batch.is_transactional, producer_id=batch.producer_id,
                producer_epoch=batch.producer_epoch, **commit_fields,
            )

    def _close_section(self) -> Iterator[DumpItem]:
        yield from self._flush_batch()
        section = self._section
        if section is not None and self._txn_undecoded:
            yield self._issue(
                IssueKind.INCOMPLETE_TEXT, Severity.WARNING,
                f"{self._txn_undecoded} __transaction_state records printed without --print-data-log and "
                "--transaction-log-decoder: the coordinator's records cannot be read from this dump",
                at=section.line,
            )
        if section is not None and self._offsets_undecoded:
            yield self._issue(
                IssueKind.INCOMPLETE_TEXT, Severity.WARNING,
                f"{self._offsets_undecoded} __consumer_offsets records printed without --print-data-log and "
                "--offsets-decoder (or, by kafka-dump-log 2.4.0, deleted offsets printed without their key): "
                "their offset commits cannot be read from this dump",
                at=section.line,
            )
        if section is not None and self._control_without_records:
            yield self._issue(
                IssueKind.INCOMPLETE_TEXT, Severity.WARNING,
                f"{self._control_without_records} control batches dumped without --deep-iteration: "
                "their marker type (COMMIT/ABORT) and coordinator epoch are unknown",
                at=section.line,
            )
        self._txn_undecoded = 0
        self._offsets_undecoded = 0
        self._control_without_records = 0

    # .snapshot and .txnindex sections

    def _snapshot_line(self, line: str) -> Iterator[DumpItem]:
        m = _SNAPSHOT.match(line)
        if m is None:
            yield self._unparsed(line, "not a producer-snapshot entry line")
            return
        g = m.groupdict()
        ctfo = g["ctfo"]
        self.features.add("snapshot_optionallong" if ctfo.startswith("OptionalLong") else "snapshot_scala_option")
        self.features.add("snapshot_last_timestamp" if g["lts"] is not None else "snapshot_no_last_timestamp")
        has_batch = g["lo"] is not None
        lts = int(g["lts"]) if g["lts"] is not None else None
        section = self._section
        assert section is not None, "snapshot lines are read inside their section"
        yield TextSnapshotEntry(
            section=section,
            line=self._line_no,
            producer_id=int(g["pid"]),
            producer_epoch=int(g["epoch"]),
            last_sequence=int(g["lseq"]) if has_batch else -1,
            last_offset=int(g["lo"]) if has_batch else -1,
            offset_delta=int(g["delta"]) if has_batch else 0,
            timestamp=lts if lts is not None else (int(g["ts"]) if has_batch else None),
            coordinator_epoch=int(g["ce"]),
            current_txn_first_offset=_optional_long(ctfo),
            first_sequence=int(g["fseq"]) if has_batch else None,
            has_batch_metadata=has_batch,
        )

    def _txnindex_line(self, line: str) -> Iterator[DumpItem]:
        m = _TXNINDEX.match(line)
        if m is None:
            yield self._unparsed(line, "not a .txnindex entry line")
            return
        section = self._section
        assert section is not None, "txnindex lines are read inside their section"
        yield TextAbortedTxn(section, self._line_no, int(m["v"]), int(m["pid"]), int(m["first"]),
                             int(m["last"]), int(m["lso"]))


def _replace(record: TextRecord, **changes: Any) -> TextRecord:
    return replace(record, **changes)


def iter_dump_log(lines: Iterable[str | bytes], file: str = "") -> Iterator[DumpItem]:
    """Parse dump-log text line by line (a file object opened in binary mode is best: it splits
    at ``\\n`` only, as the tool wrote them). Yields every item in file order."""
    parser = DumpLogParser(file)
    for raw in lines:
        yield from parser.feed(raw)
    yield from parser.finish()


def parse_dump_log(source: str | Path | Iterable[str | bytes], file: str = "") -> ParsedDumpLog:
    """The whole of a dump-log text (a path, or the lines) as lists."""
    parser = DumpLogParser(file or (str(source) if isinstance(source, Path) else ""))
    out = ParsedDumpLog(file=parser.file)
    sinks: dict[type, list[Any]] = {
        DumpSection: out.sections, TextBatch: out.batches, TextMarker: out.markers, TextTxnLogRecord: out.txn_log,
        TextOffsetCommit: out.offset_commits, TextSnapshotEntry: out.snapshots, TextAbortedTxn: out.aborted_txns,
        TextIssue: out.issues,
    }

    def consume(lines: Iterable[str | bytes]) -> None:
        for raw in lines:
            for item in parser.feed(raw):
                sinks[type(item)].append(item)
        for item in parser.finish():
            sinks[type(item)].append(item)

    if isinstance(source, Path):
        with source.open("rb") as fh:
            consume(fh)
    elif isinstance(source, str):
        consume(source.split("\n"))
    else:
        consume(source)
    out.command = parser.command
    out.features = parser.features
    return out
