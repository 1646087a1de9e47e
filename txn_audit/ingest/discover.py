"""Find the broker log dirs, partition folders and files of a dump, and say what each one is.

A dump may be one broker's log dir, several log dirs of one broker, or several brokers side by
side, at any depth. A log dir is a folder holding ``meta.properties`` (which names the broker)
or, failing that, one holding partition folders and Kafka's checkpoint files. Every file met is
inventoried (the ``segments`` table) with whether it will be decoded and, if not, why; problems
with the layout itself become ``decode_issues`` rows. Only small files are read here, on the
driver: checkpoints, properties, leader-epoch checkpoints, and the KRaft metadata log (its
partitions' leadership over time, ``metadata_partitions``); segments are decoded later on Spark
workers. The
tree is listed once (``txn_audit.ingest.storage``), so a dump on S3 or HDFS is discovered by the
same code as a local one.
"""

from __future__ import annotations

import os
import posixpath
from dataclasses import dataclass, field
from txn_audit.errors import CorruptInputError, UsageError
from txn_audit.formats.checkpoint import (
    decode_leader_epoch_checkpoint,
    decode_offset_checkpoint,
    decode_partition_metadata,
    decode_properties,
)
from txn_audit.formats.cluster_metadata import leadership_history, newest_timestamp, topic_configs
from txn_audit.formats.layout import (
    CHECKPOINT_FILES,
    CLUSTER_METADATA_TOPIC,
    CLEAN_SHUTDOWN_FILE,
    LEADER_EPOCH_CHECKPOINT,
    LOG_DIR_FOLDERS,
    META_PROPERTIES,
    PARTITION_FILES,
    PARTITION_METADATA,
    REMOTE_LOG_METADATA_TOPIC,
    LogFileName,
    parse_log_file_name,
    parse_partition_dir,
)
from txn_audit.formats.model import IssueKind, Severity
from txn_audit.formats.remote_log_metadata import RemoteLogRecord, iter_remote_log_records
from txn_audit.ingest.storage import DIR, FILE, SYMLINK, DumpLocation, Entry, Listing, join, resolve_dump
from txn_audit.ingest.inventory import Inventory as Inventory  # what discover() returns: importable from here
from txn_audit.ingest.inventory import LogDir, PartitionReplica, issue_row
from txn_audit.ingest.tasks import FileTask
from txn_audit.ingest.text import discover_text, read_tool_outputs

#: Partitions whose contents say nothing about transactions: inventoried, not decoded, and not
#: audited partitions (no ``partition_offsets`` row).
NOT_AUDITED_TOPICS = {CLUSTER_METADATA_TOPIC: "KRaft metadata log (no transactions)"}
DECODED_KINDS = {"log", "snapshot", "txnindex"}
#: Log-dir level files that are known and need no decoding for a transaction audit.
KNOWN_LOG_DIR_FILES = {".lock", "bootstrap.checkpoint", CLEAN_SHUTDOWN_FILE, META_PROPERTIES}


def _is_partition_dir(listing: Listing, rel: str, name: str | None = None) -> bool:
    return listing.kind(rel) == DIR and parse_partition_dir(name or posixpath.basename(rel)) is not None


def _not_utf8(name: str) -> bool:
    """A file name whose bytes are not UTF-8 (Python keeps them as surrogates): no table can hold it."""
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def _not_utf8_issue(inv: Inventory, broker: int | None, log_dir: str, topic: str | None, partition: int | None,
                    rel: str) -> None:
    shown = rel.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    inv.issues.append(issue_row(broker, log_dir, topic, partition, shown, IssueKind.UNRECOGNISED_FILE,
                                 Severity.WARNING, "name is not UTF-8 (Kafka never writes such a name): not audited"))


def _holds_log_dir_files(listing: Listing, rel: str) -> bool:
    """True for a folder with a log dir's own files: such a folder is never a partition folder,
    even when its name reads like one (``broker-1``)."""
    return any(listing.kind(join(rel, name)) == FILE for name in (META_PROPERTIES, *CHECKPOINT_FILES))


def _looks_like_log_dir(listing: Listing, rel: str) -> bool:
    if listing.kind(join(rel, META_PROPERTIES)) == FILE:
        return True
    try:
        children = listing.children(rel)
    except OSError:
        return False
    partitions = [c for c in children if _is_partition_dir(listing, c.rel)]
    if any(_holds_log_dir_files(listing, c.rel) for c in partitions):
        return False  # e.g. a dump of broker-1/, broker-2/ side by side
    has_checkpoint = any(c.name in CHECKPOINT_FILES for c in children)
    return bool(partitions) and (
        has_checkpoint or not any(c.kind == DIR and not _is_partition_dir(listing, c.rel)
                                  and c.name not in LOG_DIR_FOLDERS for c in children)
    )


def discover(dump: str | os.PathLike[str] | DumpLocation, input_kind: str = "auto") -> Inventory:
    """Inventory every file under ``dump`` (a local path, or a ``file://``, ``s3://`` or ``hdfs://``
    URI: see ``txn_audit.ingest.storage``). Raises ``UsageError`` if it is not a readable folder.

    ``input_kind``: ``logdirs`` (broker log dirs), ``text`` (kafka-dump-log text output, see
    ``txn_audit.ingest.text``) or ``auto`` (log dirs if there are any, else text dumps).
    """
    if input_kind not in ("auto", "logdirs", "text"):
        raise UsageError(f"input kind must be auto, logdirs or text, got {input_kind!r}")
    location = resolve_dump(dump)
    top = location.info()
    if top.kind not in (DIR, FILE):
        raise UsageError(f"dump not found: {location.display}")
    if input_kind == "text" or (input_kind == "auto" and top.kind == FILE):
        return discover_text(location)
    if top.kind != DIR:
        raise UsageError(f"dump must be a folder of broker log dirs, got a file: {location.display}")
    listing = location.listing()
    only: set[str] | None = None
    found_dirs: list[str] = []
    root_name = posixpath.basename(location.root.rstrip("/"))
    holder = location.parent()
    if (holder is not None and _is_partition_dir(listing, ".", root_name) and not _looks_like_log_dir(listing, ".")
            and not any(c.kind == DIR for c in listing.children("."))):  # a partition folder holds no folders
        # the user pointed at one partition folder: audit it as a log dir of unknown broker
        location, listing = holder, holder.listing_of_child(root_name, CLEAN_SHUTDOWN_FILE)
        found_dirs.append(".")
        only = {root_name}
    inv = Inventory(root=location.task_path("."), location=location)
    beside: list[Entry] = []  # files outside every log dir: the tools' outputs, if any
    if only is None:
        _walk(inv, listing, ".", found_dirs, beside)
    if not found_dirs and input_kind == "auto":
        try:
            return discover_text(location)
        except UsageError:
            pass
    if not found_dirs:
        links = [i["file"] for i in inv.issues if i["kind"] == IssueKind.NOT_AUDITED and "symbolic link" in i["detail"]]
        shown = "; symbolic links are not followed: " + ", ".join(
            f"{rel} -> {_link_target(location, rel)}" for rel in links[:SHOWN_LINKS]) + \
            (f" and {len(links) - SHOWN_LINKS} more" if len(links) > SHOWN_LINKS else "") + \
            " (scan what they point to, or copy it into the dump)" if links else ""
        raise UsageError(
            f"no Kafka log dir found under {location.display}: expected folders holding meta.properties, "
            f"checkpoint files and <topic>-<partition> folders{shown}"
        )
    for rel in sorted(found_dirs):
        _scan_log_dir(inv, listing, rel, only)
    read_tool_outputs(inv, location, beside)
    inv.tasks.sort(key=lambda t: (-t.size_bytes, t.rel_path))
    return inv


#: symbolic links a "no Kafka log dir found" error names
SHOWN_LINKS = 3


def _link_target(location: DumpLocation, rel: str) -> str:
    """Where the symbolic link ``rel`` of a local dump points ("?" when it cannot be read)."""
    try:
        return os.readlink(location.fs_path(rel))
    except OSError:
        return "?"


def _walk(inv: Inventory, listing: Listing, rel: str, found: list[str], beside: list[Entry]) -> None:
    """Find the log dirs under ``rel`` top-down; a log dir's own folders are not searched further.
    The files outside every log dir go to ``beside``."""
    if rel in listing.errors:
        inv.issues.append(issue_row(None, ".", None, None, rel, IssueKind.UNREADABLE_FILE, Severity.ERROR,
                                     f"cannot list folder: {listing.errors[rel]}"))
        return
    if _looks_like_log_dir(listing, rel):
        found.append(rel)
        return
    for child in listing.children(rel):
        if _not_utf8(child.name):
            _not_utf8_issue(inv, None, ".", None, None, child.rel)
        elif child.kind == DIR:
            _walk(inv, listing, child.rel, found, beside)
        elif child.kind == FILE:
            beside.append(child)
        elif child.kind == SYMLINK:  # listed, never entered
            inv.issues.append(issue_row(None, ".", None, None, child.rel, IssueKind.NOT_AUDITED, Severity.WARNING,
                                         "symbolic link not followed: what it points to is not part of the audit"))


def _read_text(inv: Inventory, rel: str, broker: int | None, log_dir: str) -> str | None:
    try:
        return inv.storage.read_bytes(rel).decode("utf-8", errors="strict")
    except (OSError, UnicodeDecodeError) as err:
        reason = (err.strerror or str(err)) if isinstance(err, OSError) else "not UTF-8 text"
        inv.issues.append(issue_row(broker, log_dir, None, None, rel, IssueKind.UNREADABLE_FILE,
                                     Severity.ERROR, f"cannot read: {reason}"))
        return None


def _scan_log_dir(inv: Inventory, listing: Listing, rel: str, only: set[str] | None) -> None:
    broker: int | None = None
    meta = join(rel, META_PROPERTIES)
    if listing.kind(meta) == FILE and only is None:
        text = _read_text(inv, meta, None, rel)
        if text is not None:
            try:
                props = decode_properties(text)
            except CorruptInputError as err:
                props = {}
                inv.issues.append(issue_row(None, rel, None, None, meta, IssueKind.BAD_CHECKPOINT,
                                             Severity.ERROR, err.detail))
            raw = props.get("node.id", props.get("broker.id"))
            try:
                broker = int(raw) if raw is not None else None
            except ValueError:
                broker = None
            if broker is None:
                inv.issues.append(issue_row(None, rel, None, None, meta, IssueKind.BAD_CHECKPOINT,
                                             Severity.WARNING, "meta.properties has no usable node.id/broker.id"))
    elif only is None:
        inv.issues.append(issue_row(None, rel, None, None, rel, IssueKind.UNRECOGNISED_FILE, Severity.INFO,
                                     "log dir without meta.properties: broker id unknown"))
    clean = listing.get(join(rel, CLEAN_SHUTDOWN_FILE)) is not None
    ld = LogDir(path=inv.storage.display_of(rel), rel=rel, broker_id=broker, clean_shutdown=clean)
    inv.log_dirs.append(ld)

    try:
        children = listing.children(rel)
    except OSError as err:
        inv.issues.append(issue_row(broker, rel, None, None, rel, IssueKind.UNREADABLE_FILE, Severity.ERROR,
                                     f"cannot list log dir: {err.strerror}"))
        return
    for child in children:
        if only is not None and child.name not in only:
            continue
        if _not_utf8(child.name):
            _not_utf8_issue(inv, broker, rel, None, None, child.rel)
            continue
        if child.kind == SYMLINK:
            _inventory(inv, ld, None, None, None, child, kind="symlink", status="live", decoded=False,
                       skip_reason="symbolic link: not followed")
            inv.issues.append(issue_row(broker, rel, None, None, child.rel, IssueKind.NOT_AUDITED, Severity.WARNING,
                                         "symbolic link not followed: what it points to is not part of the audit"))
            continue
        if child.kind == DIR:
            parsed = parse_partition_dir(child.name)
            if parsed is None and child.name in LOG_DIR_FOLDERS:
                _inventory(inv, ld, None, None, None, child, kind="folder", status="live", decoded=False,
                           skip_reason="the tiered storage's cache of remote segments' indexes: no records")
                continue
            if parsed is None:
                _inventory(inv, ld, None, None, None, child, kind="folder", status="live", decoded=False,
                           skip_reason="not a <topic>-<partition> folder")
                inv.issues.append(issue_row(broker, rel, None, None, child.rel, IssueKind.UNRECOGNISED_FILE,
                                             Severity.WARNING, "folder name is not <topic>-<partition>: not audited"))
                continue
            _scan_partition(inv, listing, ld, child.rel, parsed.topic, parsed.partition, parsed.status)
            continue
        if child.name in CHECKPOINT_FILES:
            text = _read_text(inv, child.rel, broker, rel)
            if text is not None:
                try:
                    ld.checkpoints[child.name] = decode_offset_checkpoint(text)
                except CorruptInputError as err:
                    inv.issues.append(issue_row(broker, rel, None, None, child.rel, IssueKind.BAD_CHECKPOINT,
                                                 Severity.ERROR, err.detail, err.position))
            _inventory(inv, ld, None, None, None, child, kind="checkpoint", status="live", decoded=True)
        elif child.name in KNOWN_LOG_DIR_FILES:
            _inventory(inv, ld, None, None, None, child, kind="metadata", status="live",
                       decoded=child.name == META_PROPERTIES,
                       skip_reason=None if child.name == META_PROPERTIES else "not needed for a transaction audit")
        else:
            _inventory(inv, ld, None, None, None, child, kind="other", status="live", decoded=False,
                       skip_reason="unknown file")
            inv.issues.append(issue_row(broker, rel, None, None, child.rel, IssueKind.UNRECOGNISED_FILE,
                                         Severity.INFO, "unknown file in a log dir: not audited"))


def _inventory(
    inv: Inventory, ld: LogDir, topic: str | None, partition: int | None, replica_status: str | None,
    entry: Entry, *, kind: str, status: str, decoded: bool, base_offset: int | None = None,
    skip_reason: str | None = None,
) -> None:
    inv.mtimes[entry.rel] = entry.mtime_ns
    inv.segments.append(
        {
            "broker_id": ld.broker_id, "log_dir": ld.rel, "topic": topic, "partition": partition,
            "path": entry.rel, "file_name": entry.name, "kind": kind, "base_offset": base_offset,
            "size_bytes": entry.size, "status": status, "replica_status": replica_status, "decoded": decoded,
            "skip_reason": skip_reason,
        }
    )


@dataclass
class _PartitionLogs:
    """What a partition folder holds that is read after its files are listed: the base offsets
    of its ``.swap`` segments, and the live segments of the KRaft metadata log and of the tiered
    storage's metadata topic (base offset, file), read on the driver."""

    swap_bases: list[int] = field(default_factory=list)
    metadata_files: list[Entry] = field(default_factory=list)
    remote_files: list[tuple[int, Entry]] = field(default_factory=list)


#: why a replica not live is not audited, by its status
_NOT_LIVE = {
    "delete": "replica folder renamed for deletion",
    "future": "replica copy still being built by a log-dir move",
    "stray": "replica not assigned to this broker (stray)",
}


def _scan_partition(
    inv: Inventory, listing: Listing, ld: LogDir, path: str, topic: str, partition: int, replica_status: str
) -> None:
    """One partition folder of ``ld``: its replica (a live one of an audited topic joins the
    inventory's), each file inventoried (``_partition_file``), then the metadata logs it holds read
    and its ``.swap`` segments warned of. The KRaft metadata log is read for the leadership it
    records (``metadata_partitions``), never audited: no partition_offsets row, so no partition
    of the scan's results."""
    broker = ld.broker_id
    replica = PartitionReplica(broker, ld.rel, topic, partition, replica_status)
    if replica_status == "live" and topic not in NOT_AUDITED_TOPICS:
        inv.replicas.append(replica)
    try:
        children = listing.children(path)
    except OSError as err:
        inv.issues.append(issue_row(broker, ld.rel, topic, partition, path, IssueKind.UNREADABLE_FILE,
                                     Severity.ERROR, f"cannot list partition folder: {err.strerror}"))
        return
    logs = _PartitionLogs()
    for child in children:
        _partition_file(inv, ld, replica, child, logs)
    if logs.metadata_files:
        _read_metadata_log(inv, ld, path, topic, partition, logs.metadata_files)
    if logs.remote_files:
        _read_remote_log_metadata(inv, ld, topic, partition, [entry for _, entry in sorted(logs.remote_files)])
    for base in logs.swap_bases:
        inv.issues.append(issue_row(
            broker, ld.rel, topic, partition, path, IssueKind.NOT_AUDITED, Severity.WARNING,
            f"a .swap segment at base offset {base} is present: on restart the broker may replace the live "
            "segments it covers; this audit reads the live segments"))


def _partition_file(inv: Inventory, ld: LogDir, replica: PartitionReplica, child: Entry, logs: _PartitionLogs) -> None:
    """One entry of a partition folder, inventoried: a name that is not UTF-8 or an entry that is
    not a regular file is a warning; a file that is no segment or index is a state file
    (``_state_file``); a segment or index is decoded unless ``_segment_skip`` says why not."""
    broker, topic, partition, replica_status = replica.broker_id, replica.topic, replica.partition, \
        replica.replica_status
    if _not_utf8(child.name):
        _not_utf8_issue(inv, broker, ld.rel, topic, partition, child.rel)
        return
    if child.kind != FILE:
        reason = ("symbolic link: not followed" if child.kind == SYMLINK
                  else "unexpected folder" if child.kind == DIR else "not a regular file")
        _inventory(inv, ld, topic, partition, replica_status, child, kind="other", status="live", decoded=False,
                   skip_reason=reason)
        inv.issues.append(issue_row(broker, ld.rel, topic, partition, child.rel, IssueKind.NOT_AUDITED,
                                     Severity.WARNING, f"{reason}: not audited"))
        return
    name = parse_log_file_name(child.name)
    if name is None:
        _state_file(inv, ld, replica, child)
        return
    skip = _segment_skip(name, replica)
    if name.status == "swap":
        logs.swap_bases.append(name.base_offset)
    _inventory(inv, ld, topic, partition, replica_status, child, kind=name.kind, status=name.status,
               decoded=skip is None, base_offset=name.base_offset, skip_reason=skip)
    live = name.status == "live" and replica_status == "live"
    if live and name.kind == "log":
        replica.log_base_offsets.append(name.base_offset)
    if live and topic == CLUSTER_METADATA_TOPIC and name.kind in ("log", "checkpoint"):
        logs.metadata_files.append(child)
    if live and topic == REMOTE_LOG_METADATA_TOPIC and name.kind == "log":
        logs.remote_files.append((name.base_offset, child))
    if skip is None:
        inv.tasks.append(FileTask(
            path=inv.storage.task_path(child.rel), rel_path=child.rel, kind=name.kind, broker_id=broker,
            log_dir=ld.rel, topic=topic, partition=partition, base_offset=name.base_offset,
            size_bytes=child.size or 0))


def _segment_skip(name: LogFileName, replica: PartitionReplica) -> str | None:
    """Why a segment or index file of ``replica`` is not decoded; None: it is."""
    if name.status != "live":
        return {
            "deleted": "scheduled for deletion (.deleted): below the log start offset",
            "cleaned": "output of an interrupted compaction (.cleaned)",
            "swap": "compaction result not yet swapped in (.swap)",
        }.get(name.status, name.status)
    if replica.replica_status != "live":
        return _NOT_LIVE.get(replica.replica_status, f"replica status {replica.replica_status}")
    if replica.topic in NOT_AUDITED_TOPICS:
        return NOT_AUDITED_TOPICS[replica.topic]
    if name.kind not in DECODED_KINDS:
        return "index file: derived data, not needed for the audit"
    return None


def _state_file(inv: Inventory, ld: LogDir, replica: PartitionReplica, child: Entry) -> None:
    """A file of a partition folder that is no segment or index: the leader-epoch checkpoint
    and the partition metadata are read (the replica's newest leader epoch, its topic id); another
    known file is not needed; an unknown one is an info issue."""
    broker, topic, partition = replica.broker_id, replica.topic, replica.partition
    known = child.name in PARTITION_FILES
    read = child.name in (PARTITION_METADATA, LEADER_EPOCH_CHECKPOINT)
    _inventory(inv, ld, topic, partition, replica.replica_status, child, kind="metadata" if known else "other",
               status="live", decoded=read,
               skip_reason=None if read else ("not needed for a transaction audit" if known else "unknown file"))
    if not read:
        if not known:
            inv.issues.append(issue_row(broker, ld.rel, topic, partition, child.rel, IssueKind.UNRECOGNISED_FILE,
                                         Severity.INFO, "unknown file in a partition folder: not audited"))
        return
    text = _read_text(inv, child.rel, broker, ld.rel)
    if text is None:
        return
    try:
        if child.name == LEADER_EPOCH_CHECKPOINT:
            epochs = decode_leader_epoch_checkpoint(text)
            replica.leader_epoch = max(epochs) if epochs else None
        else:
            replica.topic_id = decode_partition_metadata(text).get("topic_id")
    except CorruptInputError as err:
        inv.issues.append(issue_row(broker, ld.rel, topic, partition, child.rel, IssueKind.BAD_CHECKPOINT,
                                     Severity.WARNING, err.detail))


def _read_remote_log_metadata(inv: Inventory, ld: LogDir, topic: str, partition: int, files: list[Entry]) -> None:
    """The records of one partition of the tiered storage's metadata topic, its live segments in
    offset order (read here, on the driver: a record per event of a remote segment, a few per
    segment the broker moved), for ``remote_segments``. A segment that does not decode is a
    warning: the remote segments it lists are then not known."""
    records: list[RemoteLogRecord] = []
    for entry in files:
        try:
            records += [item.record for item in iter_remote_log_records(inv.storage.read_bytes(entry.rel))]
        except OSError as err:
            inv.issues.append(issue_row(ld.broker_id, ld.rel, topic, partition, entry.rel, IssueKind.UNREADABLE_FILE,
                                         Severity.WARNING,
                                         f"cannot read the remote log metadata: {err.strerror or err}"))
            return
        except CorruptInputError as err:
            inv.issues.append(issue_row(ld.broker_id, ld.rel, topic, partition, entry.rel, err.kind, Severity.WARNING,
                                         f"remote log metadata not replayed (the remote segments it lists are not "
                                         f"known): byte {err.position}: {err.detail}"))
            return
    inv.remote_log_records.setdefault((ld.broker_id, ld.rel), []).extend(records)


def _read_metadata_log(inv: Inventory, ld: LogDir, path: str, topic: str, partition: int, files: list[Entry]) -> None:
    """The partitions' leadership over time in one copy of the KRaft metadata log, as rows of
    ``metadata_partitions`` (read here, on the driver: the log is small, its retention and
    snapshots keep it to tens of MB). A log that does not decode is a warning, and the replica
    choice falls back to the leader-epoch checkpoints."""
    try:
        contents = {f.name: inv.storage.read_bytes(f.rel) for f in files}
        history, last_offset = leadership_history(contents)
        newest = newest_timestamp(contents)
        configs = topic_configs(contents)
    except OSError as err:
        inv.issues.append(issue_row(ld.broker_id, ld.rel, topic, partition, path, IssueKind.UNREADABLE_FILE,
                                     Severity.WARNING, f"cannot read the KRaft metadata log: {err.strerror or err}"))
        return
    except CorruptInputError as err:
        inv.issues.append(issue_row(ld.broker_id, ld.rel, topic, partition, path, err.kind, Severity.WARNING,
                                     f"KRaft metadata log not replayed (the replica choice uses the leader-epoch "
                                     f"checkpoints): byte {err.position}: {err.detail}"))
        return
    inv.read_metadata_copy(configs, last_offset, newest)
    for change in history:
        state = change.state
        inv.metadata_partitions.append({
            "broker_id": ld.broker_id, "log_dir": ld.rel, "topic": state.topic, "topic_id": state.topic_id,
            "partition": state.partition, "leader": state.leader, "leader_epoch": state.leader_epoch,
            "partition_epoch": state.partition_epoch, "replicas": list(state.replicas), "isr": list(state.isr),
            "record_offset": state.offset, "record_timestamp": change.timestamp,
            "metadata_end_offset": last_offset,
        })
