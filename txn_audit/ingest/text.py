"""Ingest of Kafka tools' text output: ``kafka-dump-log`` dumps fill the same raw tables as the
binary log dirs, so everything downstream is shared.

``discover_text`` inventories a folder (or one file) of text dumps: each file is sniffed
(``formats.input_kind``); dump-log files become ``dumplog_text`` tasks, and their ``Dumping``
lines name the partitions (and so the ``partition_offsets`` rows). A text dump has no checkpoint
files: the high watermark comes from an offsets file beside it (``kafka-get-offsets.sh`` output
or offsets JSON, ``hw_source = offsets_file``), else it is null and the log end stands in for it
(``hw_source = log_end``, and findings that depend on it say so). ``kafka-transactions.sh``
outputs and offsets files are small and read here, on the driver, into the
``reported_transactions`` table and the replicas' high watermarks. ``decode_text_task`` runs on
the workers like the binary decoders and adds rows in the same column order.

What the text does not carry is filled with Kafka's own sentinels only where the column cannot
be null and nothing downstream reads it (marker key/value versions -1, delete horizon -1 when
the tool predates it, computed CRC -1 for a batch Kafka called invalid, the key version -1 of an
offset commit printed before the JSON form); a first timestamp the
text lacks falls back to the batch's max timestamp, and every such gap is reported as an
``incomplete_text`` issue of the file. A marker whose type the text does not show (no
``--deep-iteration``) still closes its transaction, with ``marker_type = UNKNOWN`` and coordinator
epoch -1: the outcome is never guessed, and the section's issue says why it is unknown.
"""

from __future__ import annotations

import os
import posixpath
import re
from collections.abc import Iterator
from dataclasses import replace
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
    TextOffsetCommit,
    TextSnapshotEntry,
    TextTxnLogRecord,
    metadata_entry,
    remote_log_entry,
    section_of,
)
from txn_audit.formats.cluster_metadata import MetadataRecord, live_segments, newest_snapshot, replay_configs
from txn_audit.formats.layout import CLUSTER_METADATA_TOPIC, REMOTE_LOG_METADATA_TOPIC
from txn_audit.formats.model import IssueKind, Severity
from txn_audit.formats.remote_log_metadata import RemoteLogRecord
from txn_audit.formats.offsets_text import parse_get_offsets, parse_offsets_json
from txn_audit.formats.transactions_text import (
    DescribedProducer,
    DescribedTransaction,
    ListedTransaction,
    TransactionsOutput,
    parse_transactions_output,
)
from txn_audit.ingest.inventory import Inventory, LogDir, PartitionReplica, issue_row
from txn_audit.ingest.storage import DIR, FILE, SYMLINK, DumpLocation, Entry, open_stream, resolve_dump
from txn_audit.ingest.tasks import FileTask, TableRows
from txn_audit.schemas import RAW_TABLES, REPORTED_TRANSACTIONS, in_ms

TEXT_TASK_KIND = "dumplog_text"
UNKNOWN_MARKER = "UNKNOWN"  # a control batch dumped without its record: COMMIT or ABORT is not known
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


def placed(section: DumpSection, folder: str) -> DumpSection:
    """``section`` placed among the dump's copies. ``folder``: where its text file lies below
    the folder that holds every dump-log file (``broker-2`` for ``dump-log/broker-2/orders-3.txt``),
    which leads the copy's log dir: each broker prints the same paths
    (``/var/lib/kafka/data/orders-3/...``), and the folders keep their copies apart."""
    if section.topic is None or not folder:
        return section
    return replace(section, log_dir=posixpath.normpath(posixpath.join(folder, (section.log_dir or "").lstrip("/"))))


def _text_folders(dumps: list[str]) -> dict[str, str]:
    """Each dump-log file's folder below the folder that holds them all (``""``: that one)."""
    folders = {rel: posixpath.dirname(rel) for rel in dumps}
    common = posixpath.commonpath(list(folders.values())) if folders else ""
    return {rel: "" if folder == common else posixpath.relpath(folder, common or ".")
            for rel, folder in folders.items()}


def discover_text(dump: str | os.PathLike[str] | DumpLocation) -> Inventory:
    """Inventory a folder (or a file) of tool text output, local or remote (a location or a dump
    argument, as ``discover`` takes). Raises ``UsageError`` if it holds no dump-log text."""
    location = dump if isinstance(dump, DumpLocation) else resolve_dump(dump)
    top = location.info()
    if top.kind not in (DIR, FILE):
        raise UsageError(f"dump not found: {location.display}")
    holder = location.parent() if top.kind == FILE else location
    if holder is None:
        raise UsageError(f"no kafka-dump-log text found under {location.display}")
    if top.kind == FILE:
        name = posixpath.basename(location.root.rstrip("/"))
        files = [holder.info(name)]
    else:
        files = holder.listing().files_under(".")
    inv = Inventory(root=holder.task_path("."), location=holder)
    dumps: list[Entry] = []  # the dump-log files, read once every file's kind is known
    replicas: dict[tuple[str, str, int], PartitionReplica] = {}
    reported_hw: dict[tuple[str, int], tuple[int, str]] = {}  # (topic, partition) -> (high watermark, file)
    reported_start: dict[tuple[str, int], int] = {}  # (topic, partition) -> log start offset, where reported
    for entry in files:
        rel = entry.rel
        inv.mtimes[rel] = entry.mtime_ns
        if entry.kind != FILE:
            reason = "symbolic link: not followed" if entry.kind == SYMLINK else "not a regular file"
            inv.segments.append(_segment_row(entry, "other", False, reason))
            inv.issues.append(issue_row(None, ".", None, None, rel, IssueKind.NOT_AUDITED, Severity.WARNING,
                                         f"{reason}: not audited"))
            continue
        try:
            kind = input_kind.sniff_bytes(holder.read_bytes(rel, input_kind.SNIFF_BYTES), entry.name)
        except OSError as err:
            inv.issues.append(issue_row(None, ".", None, None, rel, IssueKind.UNREADABLE_FILE, Severity.ERROR,
                                         f"cannot read: {err.strerror or err}"))
            continue
        decoded = kind == input_kind.DUMP_LOG
        read_here = kind in (input_kind.OFFSETS_JSON, input_kind.GET_OFFSETS) or kind.startswith(
            input_kind.TRANSACTIONS_PREFIX)
        skip = None if decoded or read_here else f"{kind} file: not a Kafka tool's text output that txn-audit reads"
        inv.segments.append(_segment_row(entry, kind, decoded or read_here, skip))
        if read_here:
            _read_side_file(inv, holder, rel, kind, reported_hw, reported_start)
            continue
        if decoded:
            dumps.append(entry)
    folders = _text_folders([entry.rel for entry in dumps])
    metadata: dict[str, dict[str, list[tuple[int, int, MetadataRecord]]]] = {}  # copy -> file name -> records
    unread: dict[str, list[tuple[int, str]]] = {}  # text file -> metadata record lines that do not parse
    for entry in dumps:
        rel = entry.rel
        task_path = holder.task_path(rel)
        folder = folders[rel]
        entries: list[tuple[int, int, MetadataRecord]] | None = None  # the metadata log section's records
        remote: list[RemoteLogRecord] | None = None  # the remote log metadata section's records
        with open_stream(task_path) as fh:
            for number, raw in enumerate(fh, start=1):
                if (entries is not None or remote is not None) and raw.startswith(b"| offset: "):
                    line = raw.decode("utf-8", "replace")
                    try:
                        if entries is not None and (record := metadata_entry(line)) is not None:
                            entries.append(record)
                        elif remote is not None and (event := remote_log_entry(line)) is not None:
                            remote.append(event.record)
                    except ValueError as err:
                        unread.setdefault(rel, []).append((number, str(err)))
                    continue
                if not raw.startswith(b"Dumping "):
                    continue
                section = placed(section_of(number, raw[len(b"Dumping ") :].decode("utf-8", "replace").strip(),
                                            rel), folder)
                entries = remote = None
                if section.status == "live" and section.replica_status == "live":
                    if section.topic == CLUSTER_METADATA_TOPIC and section.kind in ("log", "kraft_snapshot"):
                        entries = metadata.setdefault(_log_dir(section), {}).setdefault(section.file_name, [])
                    elif section.topic == REMOTE_LOG_METADATA_TOPIC and section.kind == "log":
                        remote = inv.remote_log_records.setdefault((None, _log_dir(section)), [])
                if section.topic is None or section.partition is None or not _audited(section):
                    continue
                key = (_log_dir(section), section.topic, section.partition)
                replica = replicas.get(key)
                if replica is None:
                    replica = PartitionReplica(None, key[0], key[1], key[2], "live")
                    replicas[key] = replica
                if section.kind == "log" and section.base_offset is not None:
                    if section.base_offset not in replica.log_base_offsets:
                        replica.log_base_offsets.append(section.base_offset)
        inv.tasks.append(FileTask(path=task_path, rel_path=rel, kind=TEXT_TASK_KIND, broker_id=None,
                                  log_dir=folder or ".", topic="", partition=-1, base_offset=-1,
                                  size_bytes=entry.size or 0))
    if not inv.tasks:
        raise UsageError(f"no kafka-dump-log text found under {location.display}")
    for copy in sorted(metadata):
        _read_metadata_text(inv, metadata[copy])
    for rel, lines in sorted(unread.items()):
        shown = ", ".join(str(n) for n, _ in lines[:SHOWN_LINES])
        inv.issues.append(issue_row(None, ".", None, None, rel, IssueKind.UNPARSED_LINE, Severity.WARNING,
                                     f"{len(lines)} record lines of the KRaft or remote log metadata ({shown}) not "
                                     f"read: {lines[0][1]}; the topics' configs, the metadata.version or the "
                                     "remote segments may be missed"))
    for log_dir in sorted({r.log_dir for r in replicas.values()}):
        inv.log_dirs.append(LogDir(path=holder.display, rel=log_dir, broker_id=None, clean_shutdown=False))
    inv.replicas = [replicas[k] for k in sorted(replicas)]
    for replica in inv.replicas:
        known = reported_hw.get((replica.topic, replica.partition))
        replica.reported_high_watermark = known[0] if known else None
        replica.reported_log_start_offset = reported_start.get((replica.topic, replica.partition))
    inv.tasks.sort(key=lambda t: (-t.size_bytes, t.rel_path))
    return inv


def read_tool_outputs(inv: Inventory, holder: DumpLocation, files: list[Entry]) -> None:
    """Read the Kafka tools' outputs among ``files``, the files of a dump of log dirs outside
    every log dir (a scenario's ``tools/`` beside its ``logdirs/``): kafka-transactions.sh
    outputs go to ``reported_transactions`` (``find-hanging``'s is compared with the verdicts:
    ``tool_disagreement``), offsets files give a partition's high watermark and log start where
    the log dir's checkpoints do not. Every file is listed in ``segments``, with why it was not
    read when it was not: a kafka-dump-log text beside the log dirs is not read (the log dirs
    are what it printed), nor a JSON document that holds no partition's offsets."""
    reported_hw: dict[tuple[str, int], tuple[int, str]] = {}
    reported_start: dict[tuple[str, int], int] = {}
    for entry in files:
        inv.mtimes[entry.rel] = entry.mtime_ns
        try:
            text = holder.read_bytes(entry.rel, input_kind.SNIFF_BYTES)
        except OSError as err:
            inv.issues.append(issue_row(None, ".", None, None, entry.rel, IssueKind.UNREADABLE_FILE, Severity.ERROR,
                                         f"cannot read: {err.strerror or err}"))
            continue
        kind = input_kind.sniff_bytes(text, entry.name)
        skip = None
        if kind == input_kind.DUMP_LOG:
            skip = "kafka-dump-log text beside the log dirs: the log dirs themselves are audited"
        elif kind == input_kind.OFFSETS_JSON and not _offsets_entries(holder, entry.rel):
            skip = "JSON without partition offsets: not an offsets file"
        elif kind not in (input_kind.OFFSETS_JSON, input_kind.GET_OFFSETS) and not kind.startswith(
                input_kind.TRANSACTIONS_PREFIX):
            skip = f"{kind} file beside the log dirs: not a Kafka tool's output that txn-audit reads"
        inv.segments.append(_segment_row(entry, kind, skip is None, skip))
        if skip is None:
            _read_side_file(inv, holder, entry.rel, kind, reported_hw, reported_start)
    for replica in inv.replicas:
        key = (replica.topic, replica.partition)
        if key in reported_hw:
            replica.reported_high_watermark = reported_hw[key][0]
        if key in reported_start:
            replica.reported_log_start_offset = reported_start[key]


def _offsets_entries(holder: DumpLocation, rel: str) -> bool:
    """Whether the JSON file ``rel`` names at least one partition's offsets."""
    try:
        entries, _ = parse_offsets_json(holder.read_bytes(rel).decode("utf-8", errors="replace"))
    except OSError:
        return True  # read again, and its error reported, by ``_read_side_file``
    return bool(entries)


def _read_metadata_text(inv: Inventory, files: dict[str, list[tuple[int, int, MetadataRecord]]]) -> None:
    """One copy's ``__cluster_metadata-0`` as ``--cluster-metadata-decoder`` printed it (file name
    -> its records), read as the binary log is (``discover._read_metadata_log``): the newest
    snapshot's records, then the log's after it, for the configs and feature levels; the log's
    newest record dates the copy."""
    snapshot = newest_snapshot(files)
    start = 0 if snapshot is None else snapshot.base_offset
    stamped = [] if snapshot is None else [(-1, start - 1, record) for _, _, record in files[snapshot.name]]
    log_entries = [entry for segment in live_segments(files) for entry in files[segment.name] if entry[1] >= start]
    stamped += log_entries
    if not stamped:
        return
    newest = max((ts for ts, _, _ in log_entries), default=None)
    inv.read_metadata_copy(replay_configs(stamped), max(offset for _, offset, _ in stamped), newest)


_OPTION_INT = r"--{name}[ =](-?\d+)"


def _option_int(command: str | None, name: str) -> int | None:
    m = re.search(_OPTION_INT.format(name=re.escape(name)), command or "")
    return int(m[1]) if m else None


def _read_side_file(
    inv: Inventory, holder: DumpLocation, rel: str, kind: str, reported_hw: dict[tuple[str, int], tuple[int, str]],
    reported_start: dict[tuple[str, int], int],
) -> None:
    """Read an offsets file or a kafka-transactions.sh output (small files) on the driver."""

    def issue(line: int, kind_: str, severity: str, detail: str) -> None:
        inv.issues.append(issue_row(None, ".", None, None, rel, kind_, severity, detail, line))

    try:
        text = holder.read_bytes(rel).decode("utf-8")
    except (OSError, UnicodeDecodeError) as err:
        reason = (err.strerror or str(err)) if isinstance(err, OSError) else "not UTF-8 text"
        issue(0, IssueKind.UNREADABLE_FILE, Severity.ERROR, f"cannot read: {reason}")
        return
    if kind.startswith(input_kind.TRANSACTIONS_PREFIX):
        output = parse_transactions_output(text, rel)
        for text_issue in output.issues:
            d = text_issue.to_decode_issue()
            issue(d.position, d.kind, d.severity, d.detail)
        inv.reported.extend(_reported_rows(output))
        return
    parse = parse_offsets_json if kind == input_kind.OFFSETS_JSON else parse_get_offsets
    entries, issues = parse(text)
    for text_issue in issues:
        d = text_issue.to_decode_issue()
        issue(d.position, d.kind, d.severity, d.detail)
    for entry in entries:
        key = (entry.topic, entry.partition)
        seen = reported_hw.get(key)
        if entry.log_start_offset is not None:
            reported_start.setdefault(key, entry.log_start_offset)
        if seen is None:
            reported_hw[key] = (entry.high_watermark, rel)
        elif seen[0] != entry.high_watermark:
            issue(0, IssueKind.UNPARSED_LINE, Severity.WARNING,
                  f"high watermark {entry.high_watermark} of {entry.topic}-{entry.partition} differs from "
                  f"{seen[0]} in {seen[1]}, which is used")


def _reported_rows(output: TransactionsOutput) -> list[dict[str, Any]]:
    """``reported_transactions`` rows of one kafka-transactions.sh output."""
    assert output.kind is not None or not output.rows
    base: dict[str, Any] = {name: None for name in REPORTED_TRANSACTIONS.names}
    base.update(file=output.file, tool=output.kind or "unknown", command=output.command,
                run_timestamp=output.run_at_ms)
    if output.kind == "find-hanging":
        base.update(broker_id=_option_int(output.command, "broker-id"),
                    max_transaction_timeout_ms=_minutes_ms(_option_int(output.command, "max-transaction-timeout")))
    if not output.rows:
        return [base] if output.kind is not None else []
    rows = []
    for r in output.rows:
        row = dict(base, line=r.line, producer_id=r.producer_id)
        if isinstance(r, ListedTransaction):
            row.update(transactional_id=r.transactional_id, coordinator_id=r.coordinator_id, state=r.state)
        elif isinstance(r, DescribedTransaction):
            row.update(transactional_id=r.transactional_id, coordinator_id=r.coordinator_id,
                       producer_epoch=r.producer_epoch, state=r.state, txn_timeout_ms=r.txn_timeout_ms,
                       txn_start_timestamp=r.current_txn_start_time_ms,
                       topic_partitions=[{"topic": t, "partition": p} for t, p in r.topic_partitions])
        elif isinstance(r, DescribedProducer):
            row.update(topic=r.topic, partition=r.partition, producer_epoch=r.producer_epoch,
                       coordinator_epoch=r.coordinator_epoch, last_sequence=r.last_sequence,
                       last_timestamp=r.last_timestamp, start_offset=r.current_txn_start_offset)
        else:
            row.update(topic=r.topic, partition=r.partition, producer_epoch=r.producer_epoch,
                       coordinator_epoch=r.coordinator_epoch, start_offset=r.start_offset,
                       last_timestamp=r.last_timestamp, duration_ms=_minutes_ms(r.duration_min))
        rows.append(row)
    return rows


def _minutes_ms(minutes: int | None) -> int | None:
    """A duration the tool gives in minutes, in ms (the tables' unit of durations)."""
    return None if minutes is None else minutes * 60_000


def _segment_row(entry: Entry, kind: str, decoded: bool, skip: str | None) -> dict[str, object]:
    return {
        "broker_id": None, "log_dir": ".", "topic": None, "partition": None, "path": entry.rel,
        "file_name": entry.name, "kind": kind, "base_offset": None, "size_bytes": entry.size, "status": "live",
        "replica_status": None, "decoded": decoded, "skip_reason": skip,
    }


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


#: how many of the lines an issue was seen on it names
SHOWN_LINES = 3


def _lines_text(same: list[TextIssue]) -> str:
    """One issue's detail for every line that shows it (same section, kind and reason): the
    first ``SHOWN_LINES`` line numbers, how many more, the reason and the first line's text."""
    if len(same) == 1:
        return same[0].to_decode_issue().detail
    lines = ", ".join(str(i.line) for i in same[:SHOWN_LINES])
    more = f" and {len(same) - SHOWN_LINES} more" if len(same) > SHOWN_LINES else ""
    excerpt = f": {same[0].excerpt!r}" if same[0].excerpt else ""
    return f"{len(same)} lines ({lines}{more}): {same[0].reason}{excerpt}"


def decode_text_task(task: FileTask, out: TableRows, pause_every: int = 8192) -> Iterator[None]:
    """Parse one dump-log text file into ``out`` (the binary decoders' rows, same column order)."""
    parser = DumpLogParser(task.rel_path)
    file = task.rel_path
    folder = "" if task.log_dir == "." else task.log_dir
    first_ts_fallback: dict[str, int] = {}
    sections: dict[str, DumpSection] = {}

    def issue(section: DumpSection | None, line: int, kind: str, severity: str, detail: str) -> None:
        section = None if section is None else placed(section, folder)
        replica = (None, _log_dir(section), section.topic, section.partition) if section else (None, ".", None, None)
        out.add("decode_issues", replica + (file, line, kind, severity, detail))

    def add(section: DumpSection, item: object, table: str, row: tuple[Any, ...]) -> None:
        wrong = _out_of_range(row, in_ms(RAW_TABLES[table]))
        if wrong is None:
            out.add(table, row)
            return
        line = getattr(item, "line", section.line)
        issue(section, line, IssueKind.UNPARSED_LINE, Severity.ERROR,
              f"line {line}: {wrong}, which Kafka cannot have written: the {table} row is left out")

    # the text's issues, one per copy of a partition (or none), kind and reason, however many lines show it
    alike: dict[tuple[object, ...], list[TextIssue]] = {}

    def handle(items: Iterator[object]) -> None:
        for item in items:
            if isinstance(item, TextIssue):
                where = None if item.section is None else (item.section.log_dir, item.section.topic,
                                                           item.section.partition)
                key = (where, item.kind, item.severity, item.reason)
                alike.setdefault(key, []).append(item)
                continue
            if isinstance(item, DumpSection):
                sections[item.path] = item
                continue
            section = getattr(item, "section", None)
            if section is not None:
                section = placed(section, folder)
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
                if item.timestamp is None:
                    continue  # not one record: no marker the broker would write (the section's issue says so)
                known = item.marker_type is not None
                # without --deep-iteration the control batch closes the transaction, but whether it
                # committed or aborted (and the coordinator epoch) is not in the text: UNKNOWN, -1
                add(section, item, "control_markers", replica + (
                    item.offset, item.producer_id, item.producer_epoch,
                    item.marker_type if known else UNKNOWN_MARKER,
                    item.control_type if known and item.control_type is not None else _SENTINEL,
                    item.coordinator_epoch if item.coordinator_epoch is not None else _SENTINEL,
                    item.timestamp, _SENTINEL, _SENTINEL, seg, item.position, file,
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
            elif isinstance(item, TextOffsetCommit):
                add(section, item, "offset_commits", replica + (
                    item.offset, item.record_timestamp, item.group_id, item.commit_topic, item.commit_partition,
                    item.key_version if item.key_version is not None else _SENTINEL, item.value_version,
                    item.tombstone, item.committed_offset, item.leader_epoch, item.metadata, item.commit_timestamp,
                    item.expire_timestamp, item.is_transactional, item.producer_id, item.producer_epoch, seg, file,
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

    with open_stream(task.path) as fh:
        for n, raw in enumerate(fh, 1):
            handle(parser.feed(raw))
            if n % pause_every == 0:
                yield
    handle(parser.finish())
    for same in alike.values():
        first = same[0]
        issue(first.section, first.line, first.kind, first.severity, _lines_text(same))
    for path, count in sorted(first_ts_fallback.items()):
        section = sections.get(path)
        issue(section, section.line if section else 0, IssueKind.INCOMPLETE_TEXT, Severity.WARNING,
              f"{path}: {count} batches without a printed first timestamp (no record lines, or LogAppendTime): "
              "their max timestamp stands in for it, so ages and late-arrival checks there are approximate")
