"""Records of the ``__transaction_state`` topic: ``TransactionLogKey`` and ``TransactionLogValue``.

Each record key and value is an int16 version followed by the message body (no varint framing
beyond what the version's encoding uses):

* key, version 0 only (non-flexible): ``transactionalId`` as int16 length + UTF-8.
* value, version 0 (non-flexible): ProducerId int64, ProducerEpoch int16, TransactionTimeoutMs
  int32, TransactionStatus int8, TransactionPartitions (int32 count, -1 = null; per element
  Topic string16 and PartitionIds int32 count + int32s), TransactionLastUpdateTimestampMs
  int64, TransactionStartTimestampMs int64.
* value, version 1 (flexible, written by 3.9+ when transaction.version >= 1): the same fields
  with compact strings/arrays, a tagged-field section per partition element, and a final
  tagged-field section: 0 PreviousProducerId int64, 1 NextProducerId int64,
  2 ClientTransactionVersion int16, 3 NextProducerEpoch int16.
* a null value is a tombstone (the transactional id expired).

The coordinator places a transactional id on partition ``Utils.abs(id.hashCode()) % P``
(``txn_partition_for``; ``txn_partitions_for`` for many ids at once).

Kafka sources: ``TransactionLogKey.json``, ``TransactionLogValue.json``,
``TransactionLog.scala`` (``keyToBytes``/``valueToBytes``/``readTxnRecordKey``/
``readTxnRecordValue``), ``TransactionStateManager.scala`` (``partitionFor``), ``Utils.java``
(``abs``). See kafka-formats.md section 4.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

import numpy as np

from txn_audit.errors import CorruptInputError
from txn_audit.formats.model import IssueKind, TopicPartitions, TxnLogKey, TxnLogValue
from txn_audit.formats.primitives import (
    INT32_MIN,
    Buffer,
    Reader,
    pack_i8,
    pack_i16,
    pack_i32,
    pack_i64,
    write_compact_string,
    write_string16,
    write_uvarint,
)

KEY_VERSION: Final = 0
HIGHEST_VALUE_VERSION: Final = 1

TAG_PREVIOUS_PRODUCER_ID: Final = 0
TAG_NEXT_PRODUCER_ID: Final = 1
TAG_CLIENT_TRANSACTION_VERSION: Final = 2
TAG_NEXT_PRODUCER_EPOCH: Final = 3

#: known tagged fields of the v1 value: tag -> (TxnLogValue attribute, payload size, default)
_TAGS: Final[dict[int, tuple[str, int, int]]] = {
    TAG_PREVIOUS_PRODUCER_ID: ("previous_producer_id", 8, -1),
    TAG_NEXT_PRODUCER_ID: ("next_producer_id", 8, -1),
    TAG_CLIENT_TRANSACTION_VERSION: ("client_transaction_version", 2, 0),
    TAG_NEXT_PRODUCER_EPOCH: ("next_producer_epoch", 2, -1),
}

_CORRUPT: Final = IssueKind.CORRUPT_RECORD.value
_UNKNOWN_VERSION: Final = IssueKind.UNKNOWN_VERSION.value


# -- keys ------------------------------------------------------------------------------


def decode_txn_log_key(data: Buffer) -> TxnLogKey:
    """Decode a record key. Only version 0 exists; anything else raises ``unknown_version``.

    Kafka 3.0+ skips records with unknown key versions; the caller decides whether to do the
    same (the error says which version it was).
    """
    r = Reader(data, kind=_CORRUPT)
    version = r.int16()
    if version != KEY_VERSION:
        raise CorruptInputError(_UNKNOWN_VERSION, 0, f"TransactionLogKey version {version}, only 0 is known")
    tid = r.string16()
    assert tid is not None  # non-nullable read raises instead
    _expect_end(r, "TransactionLogKey")
    return TxnLogKey(version=version, transactional_id=tid)


def encode_txn_log_key(transactional_id: str) -> bytes:
    """Version-0 key bytes, exactly as the coordinator writes them."""
    return pack_i16(KEY_VERSION) + write_string16(transactional_id)


# -- values ----------------------------------------------------------------------------


def decode_txn_log_value(data: Buffer | None) -> TxnLogValue | None:
    """Decode a record value; ``None`` (a null value) is a tombstone and decodes to ``None``.

    Raises ``CorruptInputError`` with kind ``unknown_version`` for versions other than 0/1 and
    ``corrupt_record`` for truncation, impossible lengths, bad UTF-8 or trailing bytes (the
    generated Java reader would silently ignore trailing bytes; for an auditor they mean the
    record is not what it claims to be).
    """
    if data is None:
        return None
    r = Reader(data, kind=_CORRUPT)
    version = r.int16()
    if version < 0 or version > HIGHEST_VALUE_VERSION:
        raise CorruptInputError(_UNKNOWN_VERSION, 0, f"TransactionLogValue version {version}, only 0 and 1 are known")
    flexible = version >= 1
    producer_id = r.int64()
    producer_epoch = r.int16()
    txn_timeout_ms = r.int32()
    state_code = r.int8()
    partitions = _read_partitions(r, flexible)
    last_update = r.int64()
    start = r.int64()
    tagged: dict[int, int] = {}
    unknown: list[int] = []
    if flexible:
        for _ in range(r.uvarint()):
            tag = r.uvarint()
            size = r.uvarint()
            known = _TAGS.get(tag)
            if known is None:
                r.raw(size, f"unknown tagged field {tag}")
                unknown.append(tag)
                continue
            attr, expected, _default = known
            if size != expected:
                raise CorruptInputError(
                    _CORRUPT, r.pos, f"tagged field {tag} ({attr}) has size {size}, expected {expected}"
                )
            tagged[tag] = r.int64() if expected == 8 else r.int16()
    _expect_end(r, "TransactionLogValue")
    return TxnLogValue(
        version=version,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        txn_timeout_ms=txn_timeout_ms,
        state_code=state_code,
        topic_partitions=partitions,
        txn_last_update_timestamp=last_update,
        txn_start_timestamp=start,
        previous_producer_id=tagged.get(TAG_PREVIOUS_PRODUCER_ID, -1),
        next_producer_id=tagged.get(TAG_NEXT_PRODUCER_ID, -1),
        client_transaction_version=tagged.get(TAG_CLIENT_TRANSACTION_VERSION, 0),
        next_producer_epoch=tagged.get(TAG_NEXT_PRODUCER_EPOCH, -1),
        unknown_tags=tuple(unknown),
    )


def _read_partitions(r: Reader, flexible: bool) -> tuple[TopicPartitions, ...] | None:
    count = _array_count(r, flexible, nullable=True, what="TransactionPartitions")
    if count is None:
        return None
    out = []
    for _ in range(count):
        topic = r.compact_string() if flexible else r.string16()
        assert topic is not None
        n = _array_count(r, flexible, nullable=False, what="PartitionIds")
        assert n is not None
        if n * 4 > r.remaining:
            raise CorruptInputError(_CORRUPT, r.pos, f"PartitionIds count {n} exceeds the {r.remaining} bytes left")
        ids = tuple(r.int32() for _ in range(n))
        if flexible:
            r.skip_tagged_fields()  # per-element tags: none are defined
        out.append(TopicPartitions(topic=topic, partitions=ids))
    return tuple(out)


def _array_count(r: Reader, flexible: bool, *, nullable: bool, what: str) -> int | None:
    """Array length in either encoding; ``None`` for a null array (only where allowed)."""
    start = r.pos
    n = r.uvarint() - 1 if flexible else r.int32()
    if n == -1 and nullable:
        return None
    if n < 0:
        raise CorruptInputError(_CORRUPT, start, f"{what}: array length {n}")
    # every element takes at least one byte: a count beyond the remaining bytes is corrupt,
    # and rejecting it here avoids looping over a garbage count of billions
    if n > r.remaining:
        raise CorruptInputError(_CORRUPT, start, f"{what}: array length {n} exceeds the {r.remaining} bytes left")
    return n


def _expect_end(r: Reader, what: str) -> None:
    if r.remaining:
        raise CorruptInputError(_CORRUPT, r.pos, f"{r.remaining} trailing bytes after {what}")


def encode_txn_log_value(v: TxnLogValue) -> bytes:
    """Value bytes of version ``v.version`` (0 or 1), as the coordinator writes them.

    v1 writes only tagged fields that differ from their defaults, in ascending tag order.
    ``unknown_tags`` cannot be re-encoded (their payload is not kept) and are ignored. A v0
    value carrying non-default tagged fields raises ``ValueError``, like Kafka's generated
    writer, instead of silently losing them.
    """
    if v.version not in (0, 1):
        raise ValueError(f"TransactionLogValue version {v.version} is not writable (0 or 1)")
    flexible = v.version == 1
    tags = [(tag, attr, size) for tag, (attr, size, default) in sorted(_TAGS.items()) if getattr(v, attr) != default]
    if not flexible and tags:
        raise ValueError(f"tagged fields {[a for _, a, _ in tags]} cannot be written at version 0")
    out = bytearray()
    out += pack_i16(v.version)
    out += pack_i64(v.producer_id)
    out += pack_i16(v.producer_epoch)
    out += pack_i32(v.txn_timeout_ms)
    out += pack_i8(v.state_code)
    parts = v.topic_partitions
    if parts is None:
        out += write_uvarint(0) if flexible else pack_i32(-1)
    else:
        out += write_uvarint(len(parts) + 1) if flexible else pack_i32(len(parts))
        for tp in parts:
            out += write_compact_string(tp.topic) if flexible else write_string16(tp.topic)
            out += write_uvarint(len(tp.partitions) + 1) if flexible else pack_i32(len(tp.partitions))
            for p in tp.partitions:
                out += pack_i32(p)
            if flexible:
                out += write_uvarint(0)
    out += pack_i64(v.txn_last_update_timestamp)
    out += pack_i64(v.txn_start_timestamp)
    if flexible:
        out += write_uvarint(len(tags))
        for tag, attr, size in tags:
            out += write_uvarint(tag) + write_uvarint(size)
            out += pack_i64(getattr(v, attr)) if size == 8 else pack_i16(getattr(v, attr))
    return bytes(out)


# -- partitioning ----------------------------------------------------------------------


def java_string_hash(s: str) -> int:
    """Java ``String.hashCode``: ``31*h + c`` over UTF-16 code units, wrapped to a signed int32.

    Characters outside the BMP count as two surrogate units, exactly as in Java; lone
    surrogates (possible in a Python ``str``) are encoded as themselves.
    """
    units = s.encode("utf-16-be", "surrogatepass")
    h = 0
    for i in range(0, len(units), 2):
        h = (31 * h + ((units[i] << 8) | units[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def kafka_abs(n: int) -> int:
    """Kafka ``Utils.abs``: ``Integer.MIN_VALUE`` maps to 0 (``Math.abs`` would stay negative)."""
    return 0 if n == INT32_MIN else abs(n)


def txn_partition_for(transactional_id: str, num_partitions: int) -> int:
    """The ``__transaction_state`` partition that holds ``transactional_id``.

    ``num_partitions`` must be the topic's real partition count, not the config default. The
    group coordinator uses the same formula for ``__consumer_offsets``.
    """
    if num_partitions <= 0:
        raise ValueError(f"num_partitions must be positive, got {num_partitions}")
    return kafka_abs(java_string_hash(transactional_id)) % num_partitions


#: ``String.hashCode`` and ``Utils.abs`` work on 32 bits
_INT32_MASK: Final = (1 << 32) - 1


def java_string_hashes(values: Sequence[str]) -> np.ndarray:
    """``java_string_hash`` of each of ``values`` (int64), computed over all their UTF-16 units at
    once: unit ``i`` of a string of ``n`` units weighs ``31 ** (n - 1 - i)``, modulo 2**32."""
    encoded = [value.encode("utf-16-le", "surrogatepass") for value in values]
    lengths = np.fromiter((len(units) >> 1 for units in encoded), np.int64, len(encoded))
    hashes = np.zeros(len(encoded), np.uint64)
    total = int(lengths.sum())
    if total:
        units = np.frombuffer(b"".join(encoded), "<u2").astype(np.uint64)
        ends = np.cumsum(lengths)
        from_end = np.repeat(ends, lengths) - np.arange(total) - 1
        powers = np.ones(int(lengths.max()), np.uint64)
        for exponent in range(1, powers.size):
            powers[exponent] = (int(powers[exponent - 1]) * 31) & _INT32_MASK
        terms = units * powers[from_end]  # below 2**48: no wrap
        filled = lengths > 0
        # sums wrap modulo 2**64, of which 2**32 is a divisor
        hashes[filled] = np.add.reduceat(terms, (ends - lengths)[filled]) & np.uint64(_INT32_MASK)
    signed = hashes.astype(np.int64)
    return np.where(signed >= 1 << 31, signed - (1 << 32), signed)


def txn_partitions_for(transactional_ids: Sequence[str], num_partitions: int) -> np.ndarray:
    """``txn_partition_for`` of each of ``transactional_ids`` (int64), at once."""
    if num_partitions <= 0:
        raise ValueError(f"num_partitions must be positive, got {num_partitions}")
    hashes = java_string_hashes(transactional_ids)
    return np.where(hashes == INT32_MIN, 0, np.abs(hashes)) % num_partitions
