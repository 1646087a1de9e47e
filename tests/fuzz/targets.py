"""What the fuzz suite damages (seeds) and what must still hold afterwards (checks).

A ``Target`` is one decoder family: seeds (small real files from ``../shared/realcorpus`` and
``sample_data/dump``, plus a synthetic segment with legacy entries and every codec) and a
``check(seed, damaged)`` that decodes the damaged bytes and raises ``AssertionError`` when a
property fails. Any other exception coming out of a check is an escaped decoder exception,
which is a failure too. The properties, per family:

* every decoder: only ``CorruptInputError`` may leave the pure decoders; nothing at all may
  leave ``txn_audit.ingest.worker.decode_task``, and it writes no ``decoder_error`` row (that
  row means an exception was caught inside txn-audit);
* ``.log`` files: every batch that ends before the first damaged byte decodes exactly as in
  the intact file, no issue is placed before the damaged batch, a damage that leaves no issue
  only touched bytes no checksum covers (the verified part of every decoded batch is byte for
  byte one of the intact file's), the column-wise and the per-batch paths agree (for
  coordinator segments: ``fast_coordinator`` and the reference record decoders, also with the
  CRCs recomputed so that the damage reaches the records: ``worker.coordinator``), and
  ``tracemalloc``'s peak stays within a few MiB of the file size whatever the length fields say;
* producer snapshots: any change is reported (the CRC and the exact length cover every byte);
* indexes: entries before the damaged one are unchanged;
* text parsers: they never raise, and the worker's text path writes no ``decoder_error``.
"""

from __future__ import annotations

import functools
import io
import struct
import tempfile
import tracemalloc
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
from crc32c import crc32c

from tests.fuzz.mutations import Fields, first_difference
from tests.realcorpus import REALCORPUS
from txn_audit.errors import CorruptInputError
from txn_audit.formats.checkpoint import (
    decode_leader_epoch_checkpoint,
    decode_offset_checkpoint,
    decode_partition_metadata,
    decode_properties,
)
from txn_audit.formats.consumer_offsets import decode_offset_commit_value, decode_offsets_key
from txn_audit.formats.dumplog_text import iter_dump_log
from txn_audit.formats.fast_headers import decode_headers
from txn_audit.formats.legacy import encode_legacy_message, encode_legacy_wrapper
from txn_audit.formats.model import BatchHeader, DecodeIssue, Record, TopicPartitions, TxnLogValue
from txn_audit.formats.offset_index import decode_offset_index, decode_time_index
from txn_audit.formats.record_batch import control_marker_of, encode_batch, encode_control_batch
from txn_audit.formats.segment import iter_batches, iter_records
from txn_audit.formats.snapshot import decode_producer_snapshot
from txn_audit.formats.transactions_text import parse_transactions_output
from txn_audit.formats.txn_state import decode_txn_log_key, decode_txn_log_value, encode_txn_log_value
from txn_audit.formats.txnindex import ENTRY_SIZE as TXNINDEX_ENTRY
from txn_audit.formats.txnindex import decode_txn_index
from txn_audit.ingest.tasks import FileTask, TableRows
from txn_audit.ingest.worker import _decode_log, decode_task
from txn_audit.schemas import DECODED_TABLES

REPO = Path(__file__).resolve().parents[2]
SAMPLE = REPO / "sample_data" / "dump"
T0 = 1_795_377_608_870
MiB = 1 << 20
#: tracemalloc peak allowed on top of the file's own size (the worker's row buffers and the
#: column-wise walk's fixed scratch arrays); a 2 GiB length field must not come near it.
MEMORY_SLACK = 8 * MiB


@dataclass(frozen=True)
class Seed:
    name: str
    data: bytes
    fields: Fields
    kind: str = "log"  # what the bytes are: log | snapshot | txnindex | index | timeindex | ... (per target)
    topic: str = "t"


@dataclass(frozen=True)
class Target:
    name: str
    seeds: Callable[[], list[Seed]]
    check: Callable[[Seed, bytes], int | None]  # returns the tracemalloc peak when it measured one


# -- decoding through the worker ---------------------------------------------------------


def _scratch() -> Path:
    return Path(_scratch_dir().name)


@functools.cache
def _scratch_dir() -> tempfile.TemporaryDirectory[str]:
    return tempfile.TemporaryDirectory(prefix="txn-audit-fuzz-")


def rows_of(out: TableRows) -> dict[str, list[dict[str, Any]]]:
    """Every table's rows (as dicts) from a worker's buffers, in the order written."""
    rows: dict[str, list[dict[str, Any]]] = {name: [] for name in DECODED_TABLES}
    for batch in out.drain():
        names = batch.column("table").to_pylist()
        for name in set(names):
            mask = pa.array([n == name for n in names])
            rows[name] += batch.column(name).filter(mask).to_pylist()
    return rows


def run_task(kind: str, topic: str, data: bytes, *, name: str = "00000000000000000000.log") -> dict[str, list[dict[str, Any]]]:
    """``decode_task`` on ``data`` written to a scratch file; drained as a worker drains it."""
    path = _scratch() / name
    path.write_bytes(data)
    task = FileTask(str(path), f"{topic}-0/{name}", kind, 1, "ld", topic, 0, 0, len(data))
    out = TableRows()
    rows: dict[str, list[dict[str, Any]]] = {n: [] for n in DECODED_TABLES}
    for _ in decode_task(task, out):
        for table, got in rows_of(out).items():
            rows[table] += got
    for table, got in rows_of(out).items():
        rows[table] += got
    return rows


def _no_decoder_error(rows: dict[str, list[dict[str, Any]]], size: int, *, binary: bool = True) -> None:
    for issue in rows["decode_issues"]:
        assert issue["kind"] != "decoder_error", issue
        assert issue["position"] is not None and issue["position"] >= -1, issue
        if binary:
            assert issue["position"] <= size, (issue, size)


# -- .log files --------------------------------------------------------------------------


def _headers(data: bytes) -> list[BatchHeader]:
    items = list(iter_batches(data))
    assert all(isinstance(i, BatchHeader) for i in items), f"seed is not intact: {items}"
    return items  # type: ignore[return-value]


def _log_fields(data: bytes) -> Fields:
    lengths, magics, counts, bounds = [], [], [], []
    for h in _headers(data):
        lengths.append((h.position + 8, ">i"))
        magics.append((h.position + 16, ">b"))
        if h.magic == 2:
            counts.append((h.position + 57, ">i"))
        bounds.append(h.position)
    return Fields(tuple(lengths), tuple(magics), tuple(counts), tuple(bounds))


def _prefix(data: bytes, limit: int) -> bytes:
    """The whole batches of ``data`` that fit in ``limit`` bytes (at least one)."""
    end = 0
    for h in _headers(data):
        stop = h.position + h.size_bytes
        if stop > limit and end:
            break
        end = stop
    return data[:end]


def synthetic_segment() -> bytes:
    """Legacy v1 and compressed v0 entries, a v2 batch per codec and an ABORT marker."""
    parts = [
        encode_legacy_message(offset=0, key=b"a", value=b"legacy v1", magic=1, timestamp=T0),
        encode_legacy_wrapper([Record(1, T0, b"b", b"x" * 30), Record(2, T0, None, b"y")], magic=0, compression=1),
    ]
    base = 3
    for codec in range(5):
        records = [Record(base + i, T0 + i, b"k%d" % i, b"v" * (5 + i)) for i in range(3)]
        parts.append(encode_batch(records, base_offset=base, producer_id=2, producer_epoch=0, base_sequence=base,
                                  is_transactional=True, compression=codec))
        base += 3
    parts.append(encode_control_batch(offset=base, producer_id=2, producer_epoch=0, marker_type="ABORT",
                                      coordinator_epoch=0, timestamp=T0 + 50))
    return b"".join(parts)


_LOG_SEEDS: tuple[tuple[str, Path, str, int], ...] = (
    ("sample:orders-2 gzip+markers", SAMPLE / "broker-1/orders-2/00000000000000000226.log", "orders", 4096),
    ("sample:clicks-0 snappy", SAMPLE / "broker-2/clicks-0/00000000000000001837.log", "clicks", 4096),
    ("sample:inventory-0 lz4+markers", SAMPLE / "broker-2/inventory-0/00000000000000000000.log", "inventory", 3000),
    ("sample:payments.v2-0 zstd+markers", SAMPLE / "broker-2/payments.v2-0/00000000000000000234.log", "payments.v2", 3000),
    ("sample:__transaction_state-1", SAMPLE / "broker-1/__transaction_state-1/00000000000000000426.log",
     "__transaction_state", 4096),
    ("sample:__consumer_offsets-0", SAMPLE / "broker-1/__consumer_offsets-0/00000000000000000000.log",
     "__consumer_offsets", 3000),
    ("real:hanging hang-0", REALCORPUS / "hanging-unadded-partition/logdirs/hang-0/00000000000000000000.log", "hang", 4096),
    ("real:timeout-abort __transaction_state-0",
     REALCORPUS / "timeout-abort/logdirs/__transaction_state-0/00000000000000000000.log", "__transaction_state", 4096),
    ("real:crashed-producer crash-2 gzip",
     REALCORPUS / "crashed-producer/logdirs/crash-2/00000000000000000000.log", "crash", 2500),
)


@functools.cache
def log_seeds() -> list[Seed]:
    seeds = [Seed("synthetic legacy+codecs", (s := synthetic_segment()), _log_fields(s), "log", "legacy")]
    for name, path, topic, limit in _LOG_SEEDS:
        if path.is_file():
            data = _prefix(path.read_bytes(), limit)
            seeds.append(Seed(name, data, _log_fields(data), "log", topic))
    return seeds


@functools.cache
def _reference(seed: Seed) -> dict[str, list[dict[str, Any]]]:
    rows = run_task("log", seed.topic, seed.data)
    assert rows["decode_issues"] == [], f"seed {seed.name} is not intact: {rows['decode_issues']}"
    return rows


def check_worker_log(seed: Seed, damaged: bytes, *, crc_fixed: bool = False) -> int:
    ref = _reference(seed)
    tracemalloc.start()
    try:
        rows = run_task("log", seed.topic, damaged)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < len(damaged) + MEMORY_SLACK, f"tracemalloc peak {peak} bytes for a {len(damaged)}-byte file"
    _no_decoder_error(rows, len(damaged))
    issues = rows["decode_issues"]
    cut = first_difference(seed.data, damaged)
    ref_batches = ref["batches"]
    intact = [b for b in ref_batches if b["position"] + b["size_bytes"] <= cut]
    damaged_at = next((b["position"] for b in ref_batches if b["position"] + b["size_bytes"] > cut), len(seed.data))
    # every batch before the first damaged byte is decoded as before ...
    assert rows["batches"][: len(intact)] == intact, f"first damaged byte {cut}"
    ends = {b["position"] for b in intact}
    assert [m for m in rows["control_markers"] if m["position"] in ends] == [
        m for m in ref["control_markers"] if m["position"] in ends
    ]
    if intact:
        last = intact[-1]["last_offset"]
        for table in ("txn_log", "offset_commits"):
            kept = [r for r in ref[table] if r["offset"] <= last]
            assert rows[table][: len(kept)] == kept, table
    # ... and nothing is blamed on them
    assert all(i["position"] >= damaged_at for i in issues), (damaged_at, issues)
    if not issues and not crc_fixed:
        _assert_only_unverified_bytes_changed(seed.data, damaged, rows["batches"])
    _assert_paths_agree(seed.topic, damaged)  # for coordinator topics: fast_coordinator against the reference
    return peak


def _assert_only_unverified_bytes_changed(intact: bytes, damaged: bytes, batches: list[dict[str, Any]]) -> None:
    """No issue: each decoded batch's checksummed part (from the magic byte on) is an intact one."""
    verified = {intact[h.position + 16 : h.position + h.size_bytes] for h in _headers(intact)}
    for b in batches:
        body = damaged[b["position"] + 16 : b["position"] + b["size_bytes"]]
        assert body in verified, f"silently accepted a changed batch at {b['position']}"


def _assert_paths_agree(topic: str, data: bytes) -> None:
    task = FileTask("-", f"{topic}-0/x.log", "log", 1, "ld", topic, 0, 0, len(data))
    got = []
    for fast in (True, False):
        out = TableRows()
        for _ in _decode_log(task, data, out, 3, fast=fast):
            pass
        got.append(rows_of(out))
    assert got[0] == got[1], "column-wise and per-batch decoding differ"


_COORDINATOR_SEEDS: tuple[tuple[str, Path, str], ...] = (
    ("real:4.4.0 epoch-rotation __transaction_state-2 (v1 values)",
     REPO / "tests/corpus/kafka-4.4.0/epoch-rotation/logdirs/__transaction_state-2/00000000000000000000.log",
     "__transaction_state"),
    ("sample:__transaction_state-1", SAMPLE / "broker-1/__transaction_state-1/00000000000000000426.log",
     "__transaction_state"),
    ("sample:__consumer_offsets-0", SAMPLE / "broker-1/__consumer_offsets-0/00000000000000000000.log",
     "__consumer_offsets"),
)


@functools.cache
def coordinator_seeds() -> list[Seed]:
    seeds = []
    for name, path, topic in _COORDINATOR_SEEDS:
        if path.is_file():
            data = _prefix(path.read_bytes(), 3000)
            seeds.append(Seed(name, data, _log_fields(data), "log", topic))
    return seeds


def check_worker_coordinator(seed: Seed, damaged: bytes) -> None:
    """Coordinator segments, CRCs recomputed so the damage reaches the record decoders: the
    worker's column-wise path (``fast_coordinator``) writes exactly what the reference path
    writes, rows and issues, and neither raises."""
    data = fix_crcs(damaged)
    _assert_paths_agree(seed.topic, data)
    _no_decoder_error(run_task("log", seed.topic, data), len(data))


def check_worker_log_crc_fixed(seed: Seed, damaged: bytes) -> int:
    """``check_worker_log`` after ``fix_crcs``: the damage is inside batches the decoder trusts."""
    return check_worker_log(seed, fix_crcs(damaged), crc_fixed=True)


def check_segment(seed: Seed, damaged: bytes) -> None:
    """The pure walk, the records inside every batch, control markers and the compiled walk."""
    items = list(iter_batches(damaged))
    for item in items:
        if isinstance(item, BatchHeader):
            try:
                iter_records(damaged, item)
            except CorruptInputError:
                pass
            if item.is_control:
                try:
                    control_marker_of(damaged, item)
                except CorruptInputError:
                    pass
    fast = decode_headers(damaged)
    assert fast.columns.headers() == [i for i in items if isinstance(i, BatchHeader)]
    assert fast.issues == [i for i in items if isinstance(i, DecodeIssue)]


# -- producer snapshots, indexes -----------------------------------------------------------


def _files(pattern: str, limit: int = 4) -> list[Path]:
    found = sorted(p for p in SAMPLE.glob(pattern) if p.stat().st_size > 0)
    return sorted(found, key=lambda p: -p.stat().st_size)[:limit]


@functools.cache
def snapshot_seeds() -> list[Seed]:
    paths = _files("*/*/*.snapshot", 3) + sorted(REALCORPUS.glob("healthy/logdirs/__transaction_state-0/*.snapshot"))[:1]
    seeds = []
    for p in paths:
        data = p.read_bytes()
        count = (len(data) - 10) // 46
        lengths = ((6, ">i"),)
        seeds.append(Seed(f"snapshot:{p.parent.name}/{p.name}", data, Fields(lengths, ((0, ">h"),), lengths,
                                                                              tuple(10 + 46 * i for i in range(count))),
                          "snapshot"))
    return seeds


def check_snapshot(seed: Seed, damaged: bytes) -> None:
    try:
        decode_producer_snapshot(damaged)
        pure_rejected = False
    except CorruptInputError as err:
        assert err.kind == "bad_snapshot", err
        pure_rejected = True
    rows = run_task("snapshot", seed.topic, damaged, name="00000000000000000001.snapshot")
    _no_decoder_error(rows, len(damaged))
    if damaged != seed.data:
        assert rows["decode_issues"], "a changed snapshot went unreported"
    if pure_rejected:
        assert rows["producer_snapshots"] == []


@functools.cache
def txnindex_seeds() -> list[Seed]:
    seeds = []
    for p in _files("*/*/*.txnindex", 3):
        data = p.read_bytes()
        starts = tuple(range(0, len(data), TXNINDEX_ENTRY))
        seeds.append(Seed(f"txnindex:{p.parent.name}/{p.name}", data,
                          Fields((), tuple((s, ">h") for s in starts), (), starts), "txnindex"))
    return seeds


def check_txnindex(seed: Seed, damaged: bytes) -> None:
    ref, ref_issues = decode_txn_index(seed.data, segment_base_offset=0)
    got, _ = decode_txn_index(damaged, segment_base_offset=0)
    whole = first_difference(seed.data, damaged) // TXNINDEX_ENTRY
    assert got[:whole] == ref[:whole]
    rows = run_task("txnindex", seed.topic, damaged, name="00000000000000000000.txnindex")
    _no_decoder_error(rows, len(damaged))
    if len(damaged) % TXNINDEX_ENTRY:
        assert any(i["kind"] == "bad_index" for i in rows["decode_issues"]), "a torn entry went unreported"


@functools.cache
def index_seeds() -> list[Seed]:
    seeds = []
    for pattern, kind, size in (("*/*/*.index", "index", 8), ("*/*/*.timeindex", "timeindex", 12)):
        for p in _files(pattern, 2):
            data = p.read_bytes()
            seeds.append(Seed(f"{kind}:{p.parent.name}/{p.name}", data,
                              Fields(boundaries=tuple(range(0, len(data), size))), kind))
    return seeds


def check_index(seed: Seed, damaged: bytes) -> None:
    decode, size = (decode_offset_index, 8) if seed.kind == "index" else (decode_time_index, 12)
    ref, _ = decode(seed.data, base_offset=100)
    got, issues = decode(damaged, base_offset=100)
    whole = first_difference(seed.data, damaged) // size
    assert got[: min(whole, len(got))] == ref[: min(whole, len(got))]
    assert all(isinstance(i, DecodeIssue) and 0 <= i.position <= len(damaged) for i in issues)


# -- checkpoints and properties ----------------------------------------------------------

_TEXT_DECODERS: dict[str, Callable[[str], object]] = {
    "replication-offset-checkpoint": decode_offset_checkpoint,
    "leader-epoch-checkpoint": decode_leader_epoch_checkpoint,
    "partition.metadata": decode_partition_metadata,
    "meta.properties": decode_properties,
}


@functools.cache
def checkpoint_seeds() -> list[Seed]:
    seeds = []
    for name in _TEXT_DECODERS:
        p = next(p for p in sorted(SAMPLE.rglob(name)) if p.stat().st_size > 0)
        seeds.append(Seed(f"checkpoint:{name}", p.read_bytes(), Fields(), name))
    return seeds


def check_checkpoint(seed: Seed, damaged: bytes) -> None:
    try:
        text = damaged.decode("utf-8")
    except UnicodeDecodeError:
        return  # discovery reports undecodable text as unreadable_file before any parser sees it
    try:
        _TEXT_DECODERS[seed.kind](text)
    except CorruptInputError as err:
        assert err.kind == "bad_checkpoint", err
        assert 0 <= err.position <= len(damaged) + 1, err


# -- coordinator records -----------------------------------------------------------------


def _records(path: Path, limit: int) -> list[Record]:
    data = path.read_bytes()
    out: list[Record] = []
    for h in _headers(data):
        if not h.is_control:
            out += iter_records(data, h)
        if len(out) >= limit:
            break
    return out[:limit]


def _flexible_value() -> bytes:
    """A v1 value with every known tagged field set (what 4.x coordinators write)."""
    return encode_txn_log_value(TxnLogValue(
        version=1, producer_id=7, producer_epoch=3, txn_timeout_ms=60000, state_code=1,
        topic_partitions=(TopicPartitions("orders", (0, 2)), TopicPartitions("payments", (1,))),
        txn_last_update_timestamp=T0, txn_start_timestamp=T0 - 5, previous_producer_id=6, next_producer_id=8,
        client_transaction_version=2, next_producer_epoch=0))


@functools.cache
def txn_state_seeds() -> list[Seed]:
    seeds = []
    path = SAMPLE / "broker-1/__transaction_state-1/00000000000000000426.log"
    for i, r in enumerate(_records(path, 4)):
        assert r.key is not None
        seeds.append(Seed(f"txn_state key {i}", r.key, Fields(((2, ">h"),), ((0, ">h"),)), "key"))
        if r.value is not None:
            seeds.append(Seed(f"txn_state value {i}", r.value, Fields((), ((0, ">h"),), ((17, ">i"),)), "value"))
    seeds.append(Seed("txn_state value v1 tagged", _flexible_value(), Fields((), ((0, ">h"),)), "value"))
    return seeds


def check_txn_state(seed: Seed, damaged: bytes) -> None:
    try:
        if seed.kind == "key":
            decode_txn_log_key(damaged)
        else:
            decode_txn_log_value(damaged)
    except CorruptInputError as err:
        assert err.kind in ("corrupt_record", "unknown_version"), err
        assert 0 <= err.position <= len(damaged), err


@functools.cache
def consumer_offsets_seeds() -> list[Seed]:
    seeds = []
    path = SAMPLE / "broker-1/__consumer_offsets-0/00000000000000000000.log"
    for i, r in enumerate(_records(path, 3)):
        assert r.key is not None
        seeds.append(Seed(f"offsets key {i}", r.key, Fields(((2, ">h"),), ((0, ">h"),)), "key"))
        if r.value is not None:
            seeds.append(Seed(f"offsets value {i}", r.value, Fields((), ((0, ">h"),)), "value"))
    return seeds


def check_consumer_offsets(seed: Seed, damaged: bytes) -> None:
    try:
        if seed.kind == "key":
            decode_offsets_key(damaged)
        else:
            decode_offset_commit_value(damaged)
    except CorruptInputError as err:
        assert err.kind in ("corrupt_record", "unknown_version"), err
        assert 0 <= err.position <= len(damaged), err


# -- tools' text output ------------------------------------------------------------------


@functools.cache
def dumplog_seeds() -> list[Seed]:
    paths = sorted(REALCORPUS.glob("timeout-abort/tools/dump-log/*.txt"), key=lambda p: -p.stat().st_size)[:2]
    return [Seed(f"dump-log:{p.name}", p.read_bytes(), Fields(boundaries=_line_starts(p.read_bytes())), "text")
            for p in paths]


def _line_starts(data: bytes) -> tuple[int, ...]:
    return (0,) + tuple(i + 1 for i, b in enumerate(data) if b == 0x0A)


def check_dumplog_text(seed: Seed, damaged: bytes) -> None:
    for _ in iter_dump_log(io.BytesIO(damaged), "fuzz.txt"):
        pass
    rows = run_task("dumplog_text", "t", damaged, name="dump.txt")
    _no_decoder_error(rows, len(damaged), binary=False)


@functools.cache
def transactions_seeds() -> list[Seed]:
    paths = sorted(REALCORPUS.glob("*/tools/kafka-transactions-*.txt"))[:4]
    return [Seed(f"kafka-transactions:{p.name}", p.read_bytes(), Fields(boundaries=_line_starts(p.read_bytes())),
                 "text") for p in paths]


def check_transactions_text(seed: Seed, damaged: bytes) -> None:
    out = parse_transactions_output(damaged.decode("utf-8", errors="replace"), "fuzz.txt")
    assert all(i.line >= 0 for i in out.issues)


TARGETS: dict[str, Target] = {
    t.name: t
    for t in (
        Target("worker.log", log_seeds, check_worker_log),
        Target("worker.log+crc", log_seeds, check_worker_log_crc_fixed),
        Target("worker.coordinator", coordinator_seeds, check_worker_coordinator),
        Target("segment", log_seeds, check_segment),
        Target("snapshot", snapshot_seeds, check_snapshot),
        Target("txnindex", txnindex_seeds, check_txnindex),
        Target("offset_index", index_seeds, check_index),
        Target("checkpoint", checkpoint_seeds, check_checkpoint),
        Target("txn_state", txn_state_seeds, check_txn_state),
        Target("consumer_offsets", consumer_offsets_seeds, check_consumer_offsets),
        Target("dumplog_text", dumplog_seeds, check_dumplog_text),
        Target("transactions_text", transactions_seeds, check_transactions_text),
    )
}



def fix_crcs(data: bytes) -> bytes:
    """Recompute the CRC-32C of every framed v2 batch, so that damage inside reaches the record
    parsers, the decompressors and the coordinator-record decoders instead of stopping at the CRC."""
    out = bytearray(data)
    pos = 0
    while pos + 61 <= len(out):
        (size,) = struct.unpack_from(">i", out, pos + 8)
        if size < 14 or pos + 12 + size > len(out):
            break  # framing lost: nothing further is a batch
        if out[pos + 16] == 2 and size >= 49:
            struct.pack_into(">I", out, pos + 17, crc32c(bytes(out[pos + 21 : pos + 12 + size])))
        pos += 12 + size
    return bytes(out)
