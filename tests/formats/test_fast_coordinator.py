"""The vectorised coordinator-record path gives the reference decoders' rows, or leaves the batch
to them (``fallback``), and the worker's output is the same either way.

Checked on every ``__transaction_state`` / ``__consumer_offsets`` segment of the real corpora
(``../shared/realcorpus``, ``tests/corpus/kafka-*``: Kafka 2.8.2 to 4.4.0) and of the sample
dump, on generated records of every key and value version, and on mutated segments (the fuzz
suite's operators, with and without the CRCs recomputed so the damage reaches the records).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.fuzz.mutations import OPERATORS, Fields
from tests.fuzz.targets import fix_crcs
from tests.kafkacorpus import CORPUS
from tests.realcorpus import REALCORPUS
from txn_audit.formats import fast_coordinator as fc
from txn_audit.formats.consumer_offsets import encode_group_metadata_key, encode_offset_commit_key
from txn_audit.formats.consumer_offsets import encode_offset_commit_value as encode_commit
from txn_audit.formats.fast_headers import decode_headers
from txn_audit.formats.model import (
    GroupMetadataKey,
    OffsetCommitKey,
    OffsetCommitValue,
    Record,
    TopicPartitions,
    TxnLogValue,
)
from txn_audit.formats.primitives import pack_i16, read_varint, read_varlong, write_uvarint
from txn_audit.formats.record_batch import encode_batch
from txn_audit.formats.txn_state import encode_txn_log_key, encode_txn_log_value
from txn_audit.ingest.tasks import FileTask, TableRows
from txn_audit.ingest.worker import _add_coordinator_records, _decode_log
from txn_audit.schemas import DECODED_TABLES, OFFSET_COMMITS, TXN_LOG, in_ms

REPO = Path(__file__).resolve().parents[2]
TXN, OFFSETS = "__transaction_state", "__consumer_offsets"
T0 = 1_795_377_608_870


def _segments() -> list[Path]:
    roots = [REALCORPUS, CORPUS, REPO / "sample_data" / "dump"]
    found = []
    for root in roots:
        if root.is_dir():
            for topic in (TXN, OFFSETS):
                found += [p for p in root.rglob(f"{topic}-*/*.log") if p.stat().st_size > 0]
    return sorted(found)


SEGMENTS = _segments()


def _topic(path: Path) -> str:
    return path.parent.name.rsplit("-", 1)[0]


def _task(topic: str, size: int) -> FileTask:
    return FileTask("-", f"{topic}-0/00000000000000000000.log", "log", 1, "ld", topic, 0, 7, size)


def _reference_rows(topic: str, data: bytes, rows: np.ndarray) -> tuple[list[dict[str, Any]], int]:
    """The reference's rows for the batches at ``rows`` (those the fast path decoded), and how
    many issues it wrote for them (the fast path must not take a batch the reference reports)."""
    cols = decode_headers(data).columns
    table = "txn_log" if topic == TXN else "offset_commits"
    schema = TXN_LOG if topic == TXN else OFFSET_COMMITS
    task = _task(topic, len(data))
    out = TableRows()
    for j in rows.tolist():
        _add_coordinator_records(task, data, cols.header(j), out)
    return [dict(zip(schema.names, row, strict=True)) for row in out.rows[table]], len(out.rows["decode_issues"])


def _fast(topic: str, data: bytes) -> tuple[fc.CoordinatorRecords, np.ndarray]:
    cols = decode_headers(data).columns
    rows = np.flatnonzero(~cols.is_control & cols.crc_ok & (cols.record_count != 0))
    kind = fc.TRANSACTION_STATE if topic == TXN else fc.CONSUMER_OFFSETS
    return fc.decode_coordinator_batches(data, cols, rows, kind), rows


def _check_decoder(topic: str, data: bytes) -> tuple[int, int, int]:
    """Fast rows = reference rows for every batch not handed back; returns (batches, fallback, rows)."""
    got, rows = _fast(topic, data)
    decoded = np.setdiff1d(rows, got.fallback)
    expected, issues = _reference_rows(topic, data, decoded)
    assert issues == 0
    names = got.table.column_names
    assert got.table.to_pylist() == [{k: row[k] for k in names} for row in expected]
    assert len(got.batch) == got.table.num_rows
    return len(rows), len(got.fallback), got.table.num_rows


def _worker(topic: str, data: bytes, *, fast: bool, pause_every: int = 8192) -> dict[str, list[dict[str, Any]]]:
    out = TableRows()
    batches: list[pa.RecordBatch] = []
    for _ in _decode_log(_task(topic, len(data)), data, out, pause_every, fast=fast):
        batches += out.drain()
    batches += out.drain()
    tables: dict[str, list[dict[str, Any]]] = {name: [] for name in DECODED_TABLES}
    for b in batches:
        for name in DECODED_TABLES:
            tables[name] += b.column(name).filter(pa.compute.equal(b.column("table"), name)).to_pylist()
    return tables


def _check_worker(topic: str, data: bytes, pause_every: int = 8192) -> dict[str, list[dict[str, Any]]]:
    fast = _worker(topic, data, fast=True, pause_every=pause_every)
    assert fast == _worker(topic, data, fast=False)
    return fast


def test_columns_are_the_tables() -> None:
    """The decoder's columns are the worker's tables' columns, same names, order and types (instants as
    the workers hold them: epoch ms, ``schemas.in_ms``)."""
    for cols, schema in ((fc.TXN_LOG_COLUMNS, in_ms(TXN_LOG)), (fc.OFFSET_COMMIT_COLUMNS, in_ms(OFFSET_COMMITS))):
        fields = {f.name: f.type for f in schema}
        assert [(f.name, f.type) for f in cols] == [(n, fields[n]) for n in cols.names]
        assert [n for n in schema.names if n in cols.names] == cols.names


# -- real segments -----------------------------------------------------------------------


def _id(path: Path) -> str:
    for root in (REALCORPUS, CORPUS, REPO):
        if path.is_relative_to(root):
            return str(path.relative_to(root))
    return str(path)


@pytest.mark.parametrize("path", SEGMENTS, ids=[_id(p) for p in SEGMENTS])
def test_real_segments(path: Path) -> None:
    """Every record a Kafka broker wrote is decoded column-wise, exactly as the reference does."""
    data = path.read_bytes()
    batches, fallback, _ = _check_decoder(_topic(path), data)
    assert fallback == 0, f"{fallback} of {batches} batches fell back"


def test_real_segments_are_there() -> None:
    versions = {p.relative_to(CORPUS).parts[0] for p in SEGMENTS if p.is_relative_to(CORPUS)}
    assert {"kafka-2.8.2", "kafka-4.4.0"} <= versions
    assert sum(1 for p in SEGMENTS if _topic(p) == OFFSETS) and sum(1 for p in SEGMENTS if _topic(p) == TXN)


@pytest.mark.parametrize("path", [p for p in SEGMENTS if p.is_relative_to(CORPUS)],
                         ids=[_id(p) for p in SEGMENTS if p.is_relative_to(CORPUS)])
def test_real_segments_through_the_worker(path: Path) -> None:
    """The worker's output (every table, issues included) equals the per-batch reference path's.
    (``tests/ingest/test_worker_fast_path.py`` does the same for ``../shared/realcorpus``.)"""
    _check_worker(_topic(path), path.read_bytes(), pause_every=7)


# -- generated records -------------------------------------------------------------------

_names = st.text(min_size=0, max_size=12)
_i64 = st.integers(-(1 << 63), (1 << 63) - 1)
_i32 = st.integers(-(1 << 31), (1 << 31) - 1)
_i16 = st.integers(-(1 << 15), (1 << 15) - 1)


@st.composite
def _txn_value(draw: st.DrawFn) -> bytes | None:
    if draw(st.integers(0, 9)) == 0:
        return None  # tombstone
    version = draw(st.integers(0, 1))
    parts = draw(st.none() | st.lists(st.builds(TopicPartitions, _names, st.lists(_i32, max_size=4).map(tuple)),
                                      max_size=3).map(tuple))
    tags = {}
    if version == 1:
        tags = dict(previous_producer_id=draw(st.sampled_from([-1]) | _i64),
                    next_producer_id=draw(st.sampled_from([-1]) | _i64),
                    client_transaction_version=draw(st.sampled_from([0, 2]) | _i16),
                    next_producer_epoch=draw(st.sampled_from([-1]) | _i16))
    value = TxnLogValue(version=version, producer_id=draw(_i64), producer_epoch=draw(_i16), txn_timeout_ms=draw(_i32),
                        state_code=draw(st.integers(-128, 127)), topic_partitions=parts,
                        txn_last_update_timestamp=draw(_i64), txn_start_timestamp=draw(_i64), **tags)
    data = encode_txn_log_value(value)
    if version == 1 and draw(st.booleans()):
        # a hand-written tagged section: unknown tags, any order, repeats (the last one wins)
        data = encode_txn_log_value(TxnLogValue(*[getattr(value, f) for f in (
            "version", "producer_id", "producer_epoch", "txn_timeout_ms", "state_code", "topic_partitions",
            "txn_last_update_timestamp", "txn_start_timestamp")]))[:-1]
        fields = draw(st.lists(st.tuples(st.integers(0, 6), st.binary(max_size=3)), max_size=4))
        data += write_uvarint(len(fields))
        for tag, payload in fields:
            if tag in (0, 1):
                payload = draw(_i64).to_bytes(8, "big", signed=True)
            elif tag in (2, 3):
                payload = draw(_i16).to_bytes(2, "big", signed=True)
            data += write_uvarint(tag) + write_uvarint(len(payload)) + payload
    return data


@st.composite
def _txn_record(draw: st.DrawFn) -> tuple[bytes | None, bytes | None]:
    return encode_txn_log_key(draw(_names)), draw(_txn_value())


@st.composite
def _offsets_record(draw: st.DrawFn) -> tuple[bytes | None, bytes | None]:
    key_kind = draw(st.integers(0, 5))
    if key_kind == 4:
        return encode_group_metadata_key(GroupMetadataKey(2, draw(_names))), draw(st.none() | st.binary(max_size=8))
    if key_kind == 5:  # a newer coordinator record type: skipped unread
        return pack_i16(draw(st.integers(3, 20))) + draw(st.binary(max_size=8)), draw(st.none() | st.binary(max_size=8))
    key = encode_offset_commit_key(OffsetCommitKey(draw(st.integers(0, 1)), draw(_names), draw(_names), draw(_i32)))
    if draw(st.integers(0, 9)) == 0:
        return key, None
    value = OffsetCommitValue(version=draw(st.integers(0, 4)), committed_offset=draw(_i64), leader_epoch=draw(_i32),
                              metadata=draw(_names), commit_timestamp=draw(_i64), expire_timestamp=draw(_i64))
    return key, encode_commit(value)


@st.composite
def _segment(draw: st.DrawFn, topic: str) -> tuple[bytes, int]:
    """A segment of generated coordinator batches; and how many of them are compressed."""
    record = _txn_record() if topic == TXN else _offsets_record()
    parts, base, compressed = [], draw(st.integers(0, 1 << 40)), 0
    for _ in range(draw(st.integers(1, 5))):
        kvs = draw(st.lists(record, min_size=1, max_size=4))
        records = [Record(base + i, T0 + draw(st.integers(-5, 5)), k, v) for i, (k, v) in enumerate(kvs)]
        codec = draw(st.sampled_from([0, 0, 0, 1]))
        compressed += codec != 0
        parts.append(encode_batch(records, base_offset=base, producer_id=draw(st.integers(-1, 99)),
                                  producer_epoch=draw(st.integers(-1, 9)), is_transactional=draw(st.booleans()),
                                  compression=codec, timestamp_type=draw(st.integers(0, 1)),
                                  max_timestamp=T0 + 100))
        base += len(records)
    return b"".join(parts), compressed


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(topic=st.sampled_from([TXN, OFFSETS]), data=st.data())
def test_generated_records(topic: str, data: st.DataObject) -> None:
    segment, compressed = data.draw(_segment(topic))
    batches, fallback, _ = _check_decoder(topic, segment)
    assert fallback == compressed  # every uncompressed batch of well-formed records is decoded column-wise
    _check_worker(topic, segment, pause_every=data.draw(st.sampled_from([1, 2, 8192])))


# -- damaged segments --------------------------------------------------------------------


def _seed(path: Path, limit: int = 6000) -> bytes:
    data = path.read_bytes()
    cols = decode_headers(data).columns
    ends = cols.position + cols.size_bytes
    keep = int(ends[ends <= limit][-1]) if np.any(ends <= limit) else int(ends[0])
    return data[:keep]


def _generated_seed(topic: str) -> bytes:
    """Multi-record batches of every version (what the real seeds lack: real coordinator
    batches mostly hold one record), uncompressed, so that a lowered records count or a
    damaged record reaches the record decoders."""
    parts, base = [], 0
    for i in range(6):
        kvs: list[tuple[bytes, bytes | None]] = []
        for k in range(3):
            n = 3 * i + k
            if topic == TXN:
                value = TxnLogValue(version=n % 2, producer_id=n, producer_epoch=1, txn_timeout_ms=60000,
                                    state_code=n % 8, topic_partitions=(TopicPartitions("t\u00e9", (0, n)),),
                                    txn_last_update_timestamp=T0 + n, txn_start_timestamp=T0,
                                    next_producer_id=n if n % 2 else -1)
                kvs.append((encode_txn_log_key(f"tid-\u00e9{n}"), None if n % 7 == 6 else encode_txn_log_value(value)))
            else:
                key = encode_offset_commit_key(OffsetCommitKey(n % 2, f"g\u00e9{n}", "topic", n))
                value = OffsetCommitValue(n % 5, n, 3, "m\u00e9", T0 + n, T0 + 99)
                kvs.append((key, None if n % 7 == 6 else encode_commit(value)))
        records = [Record(base + k, T0 + k, key, v) for k, (key, v) in enumerate(kvs)]
        parts.append(encode_batch(records, base_offset=base, producer_id=5, producer_epoch=0))
        base += len(records)
    return b"".join(parts)


def _seeds() -> list[tuple[str, bytes]]:
    picks = [
        REPO / "sample_data/dump/broker-1/__transaction_state-1/00000000000000000426.log",
        REPO / "sample_data/dump/broker-1/__consumer_offsets-0/00000000000000000000.log",
        *[p for p in SEGMENTS if p.is_relative_to(CORPUS / "kafka-4.4.0") and _topic(p) == TXN][:1],
        *[p for p in SEGMENTS if p.is_relative_to(CORPUS / "kafka-4.4.0") and _topic(p) == OFFSETS][:1],
        *[p for p in SEGMENTS if p.is_relative_to(CORPUS / "kafka-2.8.2") and _topic(p) == OFFSETS][:1],
    ]
    return [(_topic(p), _seed(p)) for p in picks if p.is_file()] + [(t, _generated_seed(t)) for t in (TXN, OFFSETS)]


SEEDS = _seeds()


def _record_spots(data: bytes, position: int, count: int) -> tuple[list[int], list[int]]:
    """Where the records of the batch at ``position`` keep their keys and values (or -1)."""
    keys, values = [], []
    p = position + 61
    for _ in range(count):
        _, p = read_varint(data, p, len(data))  # length
        p += 1  # attributes
        _, p = read_varlong(data, p, len(data))
        _, p = read_varint(data, p, len(data))
        n, p = read_varint(data, p, len(data))
        keys.append(p if n >= 0 else -1)
        p += max(n, 0)
        n, p = read_varint(data, p, len(data))
        values.append(p if n >= 0 else -1)
        p += max(n, 0)
        _, p = read_varint(data, p, len(data))  # no headers in these seeds
    return keys, values


def _fields(data: bytes) -> Fields:
    """Batch lengths, magics and counts, and in the records: key and value versions (as
    magics), the first string length of each key (as a length)."""
    cols = decode_headers(data).columns
    pos = cols.position.tolist()
    lengths, magics = [(p + 8, ">i") for p in pos], [(p + 16, ">b") for p in pos]
    for p, count, control in zip(pos, cols.record_count.tolist(), cols.is_control.tolist(), strict=True):
        if control or cols.compression[pos.index(p)]:
            continue
        keys, values = _record_spots(data, p, count)
        magics += [(k, ">h") for k in keys if k >= 0] + [(v, ">h") for v in values if v >= 0]
        lengths += [(k + 2, ">h") for k in keys if k >= 0]
    return Fields(tuple(lengths), tuple(magics), tuple((p + 57, ">i") for p in pos), tuple(pos))


@pytest.mark.parametrize("operator", sorted(OPERATORS))
@settings(max_examples=40, deadline=None, database=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data())
def test_damaged_segments(operator: str, data: st.DataObject) -> None:
    """Under mutation the fast and the reference paths never differ and nothing raises; most
    examples recompute the CRCs, so that the damage reaches the record decoders."""
    topic, seed = SEEDS[data.draw(st.integers(0, len(SEEDS) - 1), label="seed")]
    damaged = OPERATORS[operator](seed, lambda lo, hi: data.draw(st.integers(lo, hi)), _fields(seed))
    if data.draw(st.integers(0, 3), label="fix crcs"):
        damaged = fix_crcs(damaged)
    rows = _check_worker(topic, damaged, pause_every=data.draw(st.sampled_from([1, 3, 8192])))
    assert all(i["kind"] != "decoder_error" for i in rows["decode_issues"])
    if damaged[16:17] == b"\x02":
        _check_decoder(topic, damaged)


_UTF8_EDGES = [
    b"", b"plain", b"\xc3\xa9", b"\xc2\x80", b"\xc1\xbf", b"\xc0\x80", b"\xe0\xa0\x80", b"\xe0\x9f\xbf",
    b"\xed\x9f\xbf", b"\xed\xa0\x80", b"\xed\xbf\xbf", b"\xee\x80\x80", b"\xef\xbf\xbf", b"\xf0\x90\x80\x80",
    b"\xf0\x8f\xbf\xbf", b"\xf4\x8f\xbf\xbf", b"\xf4\x90\x80\x80", b"\xf5\x80\x80\x80", b"\xff", b"\x80",
    b"\xe2\x82", b"\xf0\x9f\x98", b"a\xc3", b"\xe2\x28\xa1",
]


def _utf8_agrees(raw: bytes) -> None:
    try:
        raw.decode("utf-8")
        python = True
    except UnicodeDecodeError:
        python = False
    padded = np.frombuffer(b"\xc3" + raw + b"\xa9", np.uint8)  # bytes around it must not matter
    assert fc._utf8_ok(padded, 1, len(raw)) == python, raw


@pytest.mark.parametrize("raw", _UTF8_EDGES)
def test_utf8_edges(raw: bytes) -> None:
    """Strings are checked as Python's strict decoder checks them (the reference decodes them)."""
    _utf8_agrees(raw)


@settings(max_examples=500, deadline=None)
@given(raw=st.binary(max_size=12) | st.lists(st.sampled_from(_UTF8_EDGES), max_size=4).map(b"".join))
def test_utf8_like_python(raw: bytes) -> None:
    _utf8_agrees(raw)


@pytest.mark.parametrize("raw", _UTF8_EDGES)
def test_bad_strings_fall_back(raw: bytes) -> None:
    """A transactional id, group or metadata the reference rejects as UTF-8 leaves its batch
    to the reference, which reports it; the worker's output is the same either way."""
    for topic in (TXN, OFFSETS):
        key = (encode_txn_log_key("x") if topic == TXN else encode_offset_commit_key(OffsetCommitKey(1, "x", "t", 0)))
        key = key[:2] + len(raw).to_bytes(2, "big") + raw + key[5:]
        good = encode_txn_log_key("ok") if topic == TXN else encode_offset_commit_key(OffsetCommitKey(1, "g", "t", 0))
        value = (encode_txn_log_value(TxnLogValue(0, 1, 0, 100, 0, None, T0, -1)) if topic == TXN
                 else encode_commit(OffsetCommitValue(3, 1, 0, "", T0, -1)))
        segment = encode_batch([Record(0, T0, good, value), Record(1, T0, key, value)], base_offset=0) + encode_batch(
            [Record(2, T0, good, value)], base_offset=2)
        rows = _check_worker(topic, segment)
        batches, fallback, _ = _check_decoder(topic, segment)
        try:
            raw.decode("utf-8")
        except UnicodeDecodeError:
            assert fallback == 1 and len(rows["decode_issues"]) == 1
        else:
            assert fallback == 0 and rows["decode_issues"] == []


@pytest.mark.parametrize("topic", [TXN, OFFSETS])
def test_records_count_lies(topic: str) -> None:
    """A records count one below, one above or far from the records there (CRC recomputed):
    the reference reports the batch, so the fast path must hand it back."""
    seed = _generated_seed(topic)
    cols = decode_headers(seed).columns
    for p, count in zip(cols.position.tolist(), cols.record_count.tolist(), strict=True):
        for lie in (count - 1, count + 1, 2 * count + 1, 1):
            if lie == count:
                continue
            damaged = bytearray(seed)
            damaged[p + 57 : p + 61] = lie.to_bytes(4, "big", signed=True)
            damaged = bytearray(fix_crcs(bytes(damaged)))
            _check_worker(topic, bytes(damaged))
            batches, fallback, _ = _check_decoder(topic, bytes(damaged))
            assert fallback == 1


@pytest.mark.parametrize("topic", [TXN, OFFSETS])
@pytest.mark.parametrize("pause_every", [1, 2, 8192])
def test_issues_in_walk_order(topic: str, pause_every: int) -> None:
    """Walk issues (offset order, CRC) and the issues of batches handed back to the reference
    come out in the reference's order, around batches decoded column-wise."""
    seed = _generated_seed(topic)
    cols = decode_headers(seed).columns
    pos = cols.position.tolist()
    data = bytearray(seed)
    data[pos[1] : pos[1] + 8] = (0).to_bytes(8, "big")  # batch 1: base offset not above batch 0's last
    keys, _ = _record_spots(seed, pos[2], 3)
    data[keys[1] : keys[1] + 2] = (-3).to_bytes(2, "big", signed=True)  # batch 2: a corrupt key version
    keys, _ = _record_spots(seed, pos[4], 3)
    data[keys[0] : keys[0] + 2] = (-3).to_bytes(2, "big", signed=True)  # batch 4: the same, and a CRC mismatch
    data = bytearray(fix_crcs(bytes(data)))
    data[pos[4] + 17] ^= 1
    rows = _check_worker(topic, bytes(data), pause_every=pause_every)
    kinds = [(i["kind"], i["position"]) for i in rows["decode_issues"]]
    assert kinds == [("offset_order", pos[1]), ("unknown_version", pos[2]), ("crc_mismatch", pos[4])]


def test_seeds() -> None:
    assert len(SEEDS) >= 2
    for topic, seed in SEEDS:
        assert _check_worker(topic, seed)["decode_issues"] == []
