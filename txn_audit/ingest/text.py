"""Ingest of Kafka tools' text output: ``kafka-dump-log`` dumps fill the same raw tables as the
binary log dirs, so everything downstream is shared.

``discover_text`` inventories a folder (or one file) of text dumps: each file is sniffed
(``formats.input_kind``); dump-log files become ``dumplog_text`` tasks, and their ``Dumping``
lines name the partitions (and so the ``partition_offsets`` rows: a text dump has no checkpoint
files, so the high watermark is null and the log end stands in for it, ``hw_source = log_end``).
``kafka-transactions.sh`` outputs are inventoried, not loaded. ``decode_text_task`` runs on the
workers like the binary decoders and adds rows in the same column order.

What the text does not carry is filled with Kafka's own sentinels only where the column cannot
be null and nothing downstream reads it (marker key/value versions -1, delete horizon -1 when
the tool predates it, computed CRC -1 for a batch Kafka called invalid); a first timestamp the
text lacks falls back to the batch's max timestamp, and every such gap is reported as an
``incomplete_text`` issue of the file. Markers whose type the text does not show are left out
(with their issue), never guessed.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa

from txn_audit.errors import UsageError
from txn_audit.formats import input_kind
from txn_audit.formats.dumplog_text import (
    DumpLogParser,
    DumpSection,
    TextAbortedTxn,
    TextBatch,
    TextIssue,
    TextMarker,
    TextSnapshotEntry,
    TextTxnLogRecord,
    section_of,
)
from txn_audit.formats.layout import CLUSTER_METADATA_TOPIC
from txn_audit.formats.model import IssueKind, Severity
from txn_audit.ingest.discover import Inventory, LogDir, PartitionReplica, _issue_row, _rel
from txn_audit.ingest.worker import FileTask, TableRows, open_regular
from txn_audit.schemas import RAW_TABLES

TEXT_TASK_KIND = "dumplog_text"
_SENTINEL = -1


def _audited(section: DumpSection | None) -> bool:
    return (
        section is not None
        and section.topic is not None
        and section.topic != CLUSTER_METADATA_TOPIC
        and section.status == "live"
        and section.replica_status == "live"
    )


def _log_dir(section: DumpSection) -> str:
    return section.log_dir or "."


def _files(root: Path) -> list[Path]:
    if root.is_file():
        return [root]
    out = []
    for current, dirnames, files in os.walk(root, followlinks=False):
        dirnames.sort()
        out.extend(Path(current) / f for f in sorted(files))
    return out


def discover_text(dump: str | os.PathLike[str]) -> Inventory:
    """Inventory a folder (or a file) of tool text output. Raises ``UsageError`` if it holds no
    dump-log text."""
    target = Path(dump)
    if not target.exists():
        raise UsageError(f"dump not found: {target}")
    root = target.parent if target.is_file() else target
    inv = Inventory(root=root.resolve())
    replicas: dict[tuple[str, str, int], PartitionReplica] = {}
    for path in _files(target):
        rel = _rel(inv.root, path.resolve())
        try:
            kind = input_kind.sniff_file(path)
            size = path.stat().st_size
        except OSError as err:
            inv.issues.append(_issue_row(None, ".", None, None, rel, IssueKind.UNREADABLE_FILE, Severity.ERROR,
                                         f"cannot read: {err.strerror}"))
            continue
        decoded = kind == input_kind.DUMP_LOG
        skip = None
        if kind.startswith(input_kind.TRANSACTIONS_PREFIX):
            skip = "kafka-transactions.sh output: evidence to compare with, not loaded into the tables"
        elif not decoded:
            skip = f"{kind} file: not a Kafka tool's text output that txn-audit reads"
        inv.segments.append({
            "broker_id": None, "log_dir": ".", "topic": None, "partition": None, "path": rel,
            "file_name": path.name, "kind": kind, "base_offset": None, "size_bytes": size, "status": "live",
            "replica_status": None, "decoded": decoded, "skip_reason": skip,
        })
        if not decoded:
            continue
        with path.open("rb") as fh:
            for raw in fh:
                if not raw.startswith(b"Dumping "):
                    continue
                section = section_of(0, raw[len(b"Dumping ") :].decode("utf-8", "replace").strip())
                if not _audited(section):
                    continue
                key = (_log_dir(section), section.topic, section.partition)  # type: ignore[assignment]
                replica = replicas.get(key)  # type: ignore[arg-type]
                if replica is None:
                    replica = PartitionReplica(None, key[0], key[1], key[2], "live")  # type: ignore[arg-type]
                    replicas[key] = replica  # type: ignore[index]
                if section.kind == "log" and section.base_offset is not None:
                    if section.base_offset not in replica.log_base_offsets:
                        replica.log_base_offsets.append(section.base_offset)
        inv.tasks.append(FileTask(path=str(path.resolve()), rel_path=rel, kind=TEXT_TASK_KIND, broker_id=None,
                                  log_dir=".", topic="", partition=-1, base_offset=-1, size_bytes=size))
    if not inv.tasks:
        raise UsageError(f"no kafka-dump-log text found under {target}")
    for log_dir in sorted({r.log_dir for r in replicas.values()}):
        inv.log_dirs.append(LogDir(path=root, rel=log_dir, broker_id=None, clean_shutdown=False))
    inv.replicas = [replicas[k] for k in sorted(replicas)]
    inv.tasks.sort(key=lambda t: (-t.size_bytes, t.rel_path))
    return inv


def _out_of_range(value: Any, type_: pa.DataType | pa.Schema, name: str = "") -> str | None:
    """What in a row does not fit its column's integer width (a number the text made up), or None."""
    if isinstance(type_, pa.Schema):
        fields = list(type_)
        return next((w for v, f in zip(value, fields, strict=True) if (w := _out_of_range(v, f.type, f.name))), None)
    if value is None:
        return None
    if pa.types.is_integer(type_) and not isinstance(value, bool):
        bits = type_.bit_width
        low = 0 if pa.types.is_unsigned_integer(type_) else -(1 << (bits - 1))
        high = (1 << bits) - 1 if pa.types.is_unsigned_integer(type_) else (1 << (bits - 1)) - 1
        return None if low <= value <= high else f"{name} {value} is outside the {type_} range"
    if pa.types.is_list(type_):
        return next((w for v in value if (w := _out_of_range(v, type_.value_type, name))), None)
    if pa.types.is_struct(type_):
        subs = [type_.field(i) for i in range(type_.num_fields)]
        return next((w for f in subs if (w := _out_of_range(value.get(f.name), f.type, f"{name}.{f.name}"))), None)
    return None


def decode_text_task(task: FileTask, out: TableRows, pause_every: int = 8192) -> Iterator[None]:
    """Parse one dump-log text file into ``out`` (the binary decoders' rows, same column order)."""
    parser = DumpLogParser(task.rel_path)
    file = task.rel_path
    first_ts_fallback: dict[str, int] = {}
    sections: dict[str, DumpSection] = {}

    def issue(section: DumpSection | None, line: int, kind: str, severity: str, detail: str) -> None:
        replica = (None, _log_dir(section), section.topic, section.partition) if section else (None, ".", None, None)
        out.add("decode_issues", replica + (file, line, kind, severity, detail))

    def add(section: DumpSection, item: object, table: str, row: tuple[Any, ...]) -> None:
        wrong = _out_of_range(row, RAW_TABLES[table])
        if wrong is None:
            out.add(table, row)
            return
        line = getattr(item, "line", section.line)
        issue(section, line, IssueKind.UNPARSED_LINE, Severity.ERROR,
              f"line {line}: {wrong}, which Kafka cannot have written: the {table} row is left out")

    def handle(items: Iterator[object]) -> None:
        for item in items:
            if isinstance(item, TextIssue):
                d = item.to_decode_issue()
                issue(item.section, d.position, d.kind, d.severity, d.detail)
                continue
            if isinstance(item, DumpSection):
                sections[item.path] = item
                continue
            section = getattr(item, "section", None)
            if not _audited(section):
                continue
            assert section is not None
            replica = (None, _log_dir(section), section.topic, section.partition)
            seg = section.base_offset if section.base_offset is not None else _SENTINEL
            if isinstance(item, TextBatch):
                first_ts = item.first_timestamp
                if first_ts is None:
                    first_ts = item.max_timestamp
                    first_ts_fallback[section.path] = first_ts_fallback.get(section.path, 0) + 1
                add(section, item, "batches", replica + (
                    seg, item.position, item.base_offset if item.base_offset is not None else item.last_offset,
                    item.last_offset, item.magic, item.codec, item.timestamp_type, item.is_transactional,
                    item.is_control, item.producer_id, item.producer_epoch, item.base_sequence, item.last_sequence,
                    item.record_count if item.record_count is not None else len(item.records), first_ts,
                    item.max_timestamp, item.delete_horizon_ms if item.delete_horizon_ms is not None else _SENTINEL,
                    item.partition_leader_epoch, item.stored_crc,
                    item.computed_crc if item.computed_crc is not None else _SENTINEL, item.crc_ok,
                    item.size_bytes, file,
                ))
                if not item.crc_ok:
                    issue(section, item.line, IssueKind.CRC_MISMATCH, Severity.ERROR,
                          f"line {item.line}: kafka-dump-log printed isvalid: false for the batch at position "
                          f"{item.position} (stored CRC {item.stored_crc})")
            elif isinstance(item, TextMarker):
                if item.marker_type is None or item.coordinator_epoch is None or item.timestamp is None:
                    continue  # the section's incomplete_text issue says why
                add(section, item, "control_markers", replica + (
                    item.offset, item.producer_id, item.producer_epoch, item.marker_type, item.control_type,
                    item.coordinator_epoch, item.timestamp, _SENTINEL, _SENTINEL, seg, item.position, file,
                ))
            elif isinstance(item, TextTxnLogRecord):
                parts = None if item.topic_partitions is None else [
                    {"topic": t, "partition": p} for t, p in item.topic_partitions
                ]
                add(section, item, "txn_log", replica + (
                    item.offset, item.record_timestamp, item.transactional_id, item.key_version, item.value_version,
                    item.tombstone, item.producer_id, item.producer_epoch, item.previous_producer_id,
                    item.next_producer_id, item.next_producer_epoch, item.txn_timeout_ms, item.state_code,
                    item.state, parts, item.txn_last_update_timestamp, item.txn_start_timestamp,
                    item.client_transaction_version, seg, file,
                ))
            elif isinstance(item, TextSnapshotEntry):
                add(section, item, "producer_snapshots", replica + (
                    seg, item.producer_id, item.producer_epoch, item.last_sequence, item.last_offset,
                    item.offset_delta, item.timestamp if item.timestamp is not None else _SENTINEL,
                    item.coordinator_epoch, item.current_txn_first_offset, item.crc_ok, file,
                ))
            elif isinstance(item, TextAbortedTxn):
                add(section, item, "aborted_txns", replica + (
                    seg, item.version, item.producer_id, item.first_offset, item.last_offset,
                    item.last_stable_offset, file,
                ))

    with open_regular(task.path) as fh:
        for n, raw in enumerate(fh, 1):
            handle(parser.feed(raw))
            if n % pause_every == 0:
                yield
    handle(parser.finish())
    for path, count in sorted(first_ts_fallback.items()):
        section = sections.get(path)
        issue(section, section.line if section else 0, IssueKind.INCOMPLETE_TEXT, Severity.WARNING,
              f"{path}: {count} batches without a printed first timestamp (no record lines, or LogAppendTime): "
              "their max timestamp stands in for it, so ages and late-arrival checks there are approximate")
