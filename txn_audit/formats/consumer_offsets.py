"""Records of the ``__consumer_offsets`` topic that matter to a transaction audit.

Key (int16 version, then a non-flexible body):

* versions 0 and 1: ``OffsetCommitKey`` — group string16, topic string16, partition int32
  (the two versions are byte-identical; 0 is what old brokers wrote).
* version 2: ``GroupMetadataKey`` — group string16 (its value is group membership, not needed
  here and not decoded).
* version 3 and up: other record types of the new group coordinator (KIP-848 consumer groups,
  share groups, ...; from 4.1 the "version" is called the record type). They are returned as
  ``UnknownOffsetsKey`` — **not** an error — so callers skip them the way Kafka's own
  ``GroupMetadataManager.readMessageKey`` returns ``UnknownKey``. A negative version is corrupt.

Value ``OffsetCommitValue`` (int16 version, then):

* v0: offset int64, metadata string16, commitTimestamp int64
* v1: offset int64, metadata string16, commitTimestamp int64, expireTimestamp int64
* v2: offset int64, metadata string16, commitTimestamp int64
* v3: offset int64, leaderEpoch int32, metadata string16, commitTimestamp int64
* v4 (flexible): offset int64, leaderEpoch int32, metadata compact string, commitTimestamp
  int64, tagged fields (none defined; skipped by size).

Absent fields decode to their defaults (leaderEpoch -1, expireTimestamp -1). A null value is a
tombstone (offsets deleted/expired) and decodes to ``None``. Brokers write v1 when an expire
timestamp is set, otherwise v3 (v2 for inter-broker protocol 2.1-IV0).

Kafka sources: ``OffsetCommitKey.json``, ``OffsetCommitValue.json``, ``GroupMetadataKey.json``,
``GroupMetadataManager.scala`` (``readMessageKey``, ``readOffsetMessageValue``,
``offsetCommitValue``), ``GroupCoordinatorRecordSerde.java``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from txn_audit.errors import CorruptInputError
from txn_audit.formats.model import GroupMetadataKey, IssueKind, OffsetCommitKey, OffsetCommitValue
from txn_audit.formats.primitives import (
    Buffer,
    Reader,
    pack_i16,
    pack_i32,
    pack_i64,
    write_compact_string,
    write_string16,
    write_uvarint,
)

OFFSET_COMMIT_KEY_VERSIONS: Final = (0, 1)
GROUP_METADATA_KEY_VERSION: Final = 2
OFFSET_COMMIT_VALUE_VERSIONS: Final = (0, 1, 2, 3, 4)

_CORRUPT: Final = IssueKind.CORRUPT_RECORD.value
_UNKNOWN_VERSION: Final = IssueKind.UNKNOWN_VERSION.value


@dataclass(frozen=True, slots=True)
class UnknownOffsetsKey:
    """A key version this module does not decode (new-coordinator record types, >= 3).

    Not an error: ``__consumer_offsets`` legitimately holds such records on 3.7+ clusters
    using KIP-848 groups. Callers skip the record (its value is not decoded).
    """

    version: int


OffsetsKey = OffsetCommitKey | GroupMetadataKey | UnknownOffsetsKey


def decode_offsets_key(data: Buffer) -> OffsetsKey:
    """Decode a ``__consumer_offsets`` record key; see the module docstring for the versions."""
    r = Reader(data, kind=_CORRUPT)
    version = r.int16()
    if version in OFFSET_COMMIT_KEY_VERSIONS:
        group = r.string16()
        topic = r.string16()
        partition = r.int32()
        assert group is not None and topic is not None
        _expect_end(r, "OffsetCommitKey")
        return OffsetCommitKey(version=version, group=group, topic=topic, partition=partition)
    if version == GROUP_METADATA_KEY_VERSION:
        group = r.string16()
        assert group is not None
        _expect_end(r, "GroupMetadataKey")
        return GroupMetadataKey(version=version, group=group)
    if version < 0:
        raise CorruptInputError(_UNKNOWN_VERSION, 0, f"__consumer_offsets key version {version}")
    return UnknownOffsetsKey(version=version)


def encode_offsets_key(key: OffsetsKey) -> bytes:
    """Key bytes of any supported key (``UnknownOffsetsKey`` cannot be encoded)."""
    if isinstance(key, OffsetCommitKey):
        return encode_offset_commit_key(key)
    if isinstance(key, GroupMetadataKey):
        return encode_group_metadata_key(key)
    raise ValueError(f"cannot encode a key of unknown version {key.version}")


def encode_offset_commit_key(key: OffsetCommitKey) -> bytes:
    if key.version not in OFFSET_COMMIT_KEY_VERSIONS:
        raise ValueError(f"OffsetCommitKey version {key.version} (0 or 1)")
    return pack_i16(key.version) + write_string16(key.group) + write_string16(key.topic) + pack_i32(key.partition)


def encode_group_metadata_key(key: GroupMetadataKey) -> bytes:
    if key.version != GROUP_METADATA_KEY_VERSION:
        raise ValueError(f"GroupMetadataKey version {key.version} (only 2)")
    return pack_i16(key.version) + write_string16(key.group)


def decode_offset_commit_value(data: Buffer | None) -> OffsetCommitValue | None:
    """Decode an ``OffsetCommitValue``; ``None`` (tombstone) decodes to ``None``.

    Versions other than 0-4 raise ``unknown_version`` (Kafka throws too); truncation, bad
    strings and trailing bytes raise ``corrupt_record``.
    """
    if data is None:
        return None
    r = Reader(data, kind=_CORRUPT)
    version = r.int16()
    if version not in OFFSET_COMMIT_VALUE_VERSIONS:
        raise CorruptInputError(_UNKNOWN_VERSION, 0, f"OffsetCommitValue version {version}, only 0-4 are known")
    offset = r.int64()
    leader_epoch = r.int32() if version >= 3 else -1
    metadata = r.compact_string() if version >= 4 else r.string16()
    assert metadata is not None
    commit_ts = r.int64()
    expire_ts = r.int64() if version == 1 else -1
    if version >= 4:
        r.skip_tagged_fields()
    _expect_end(r, "OffsetCommitValue")
    return OffsetCommitValue(
        version=version,
        committed_offset=offset,
        leader_epoch=leader_epoch,
        metadata=metadata,
        commit_timestamp=commit_ts,
        expire_timestamp=expire_ts,
    )


def encode_offset_commit_value(v: OffsetCommitValue) -> bytes:
    """Value bytes of version ``v.version``.

    Fields the version does not carry (leaderEpoch before v3, expireTimestamp outside v1) are
    dropped, as Kafka's generated writer does for these "ignorable" fields; decoding gives
    them back as -1.
    """
    if v.version not in OFFSET_COMMIT_VALUE_VERSIONS:
        raise ValueError(f"OffsetCommitValue version {v.version} (0-4)")
    out = bytearray(pack_i16(v.version))
    out += pack_i64(v.committed_offset)
    if v.version >= 3:
        out += pack_i32(v.leader_epoch)
    out += write_compact_string(v.metadata) if v.version >= 4 else write_string16(v.metadata)
    out += pack_i64(v.commit_timestamp)
    if v.version == 1:
        out += pack_i64(v.expire_timestamp)
    if v.version >= 4:
        out += write_uvarint(0)
    return bytes(out)


def _expect_end(r: Reader, what: str) -> None:
    if r.remaining:
        raise CorruptInputError(_CORRUPT, r.pos, f"{r.remaining} trailing bytes after {what}")
