"""Per-file decoding that runs inside Spark's Python workers.

A ``FileTask`` names one file, or a slice of a large segment; ``decode_task`` decodes it with
the pure ``formats`` layer and fills ``TableRows`` buffers (rows of the combined decode schema,
``txn_audit.schemas.combined_decode_schema``); ``write_partition`` (what the ingest job runs)
writes them as Parquet files per table. Nothing here raises for bad input: every
problem becomes a ``decode_issues`` row, and an unexpected failure of the decoder itself
becomes a ``decoder_error`` row naming the file, so one bad file never stops an audit.

Files are opened read-only. Up to ``READ_LIMIT`` bytes a file is read into memory; a larger one
is memory-mapped, so a large segment is paged, not loaded. Reading is what makes a file that
shrinks under the worker harmless (it is decoded as it was read): a mapped file truncated while
it is being decoded ends the worker with SIGBUS, which no Python code can catch. That risk is
left only for files above ``READ_LIMIT`` (a dump is expected to be a copy, not a live log dir).
Files on remote storage are read through ``pyarrow.fs`` (``txn_audit.ingest.storage``).
"""

from __future__ import annotations

import mmap
import os
import uuid
from collections.abc import Generator, Iterator, Mapping
from contextlib import closing, contextmanager
from dataclasses import replace
from typing import Any, cast

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from txn_audit.errors import CorruptInputError
from txn_audit.formats.compression import CODEC_NAMES
from txn_audit.formats.consumer_offsets import (
    decode_offset_commit_value,
    decode_offsets_key,
)
from txn_audit.formats import fast_coordinator
from txn_audit.formats.fast_headers import HeaderChunk, HeaderColumns, iter_header_chunks
from txn_audit.formats.fast_markers import MarkerColumns, canonical_markers
from txn_audit.formats.model import (
    TIMESTAMP_TYPE_NAMES,
    BatchHeader,
    DecodeIssue,
    IssueKind,
    OffsetCommitKey,
    Severity,
)
from txn_audit.formats.record_batch import MARKER_TYPE_NAMES, control_marker_of
from txn_audit.formats.segment import iter_batches, iter_records
from txn_audit.formats.snapshot import decode_producer_snapshot
from txn_audit.formats.txn_state import decode_txn_log_key, decode_txn_log_value
from txn_audit.formats.txnindex import decode_txn_index_columns
from txn_audit.ingest.storage import is_remote_path, open_buffer, open_regular
from txn_audit.ingest.tasks import FileTask, TableRows
from txn_audit.ingest.text import decode_text_task
from txn_audit.schemas import (
    DECODED_TABLES,
    RAW_TABLES,
    REPLICA_ROW_GROUP_TABLES,
    REPLICA_COLUMNS,
    WORKER_OUTPUTS,
    WRITTEN_FILES,
    Replica,
    declared,
    raw_writer_options,
    replicas_metadata,
)

TRANSACTION_STATE_TOPIC = "__transaction_state"
CONSUMER_OFFSETS_TOPIC = "__consumer_offsets"


TASK_FIELDS: tuple[str, ...] = tuple(FileTask.__dataclass_fields__)


def task_rows(tasks: list[FileTask]) -> list[dict[str, Any]]:
    """``tasks`` as rows of ``TASK_FIELDS`` (their fields are scalars: no copy is needed, and
    ``dataclasses.asdict`` would copy each value, 0.2 ms a task on thousands of files)."""
    return [{name: getattr(t, name) for name in TASK_FIELDS} for t in tasks]


#: Files up to this size are read into memory, larger ones memory-mapped (see the module doc).
READ_LIMIT = 64 << 20


@contextmanager
def open_readonly(path: str) -> Iterator[bytes | mmap.mmap]:
    """A regular file's bytes, read or mapped read-only (see ``READ_LIMIT``); never written.

    Raises ``OSError`` for anything but a regular file (see ``open_regular``). A remote URI
    (``s3://``, ``webhdfs://``, ``hdfs://``) is read through ``pyarrow.fs`` (see ``storage.open_buffer``).
    """
    if is_remote_path(path):
        with open_buffer(path) as remote:
            yield remote
        return
    with open_regular(path) as handle:
        if os.fstat(handle.fileno()).st_size <= READ_LIMIT:
            yield handle.read()  # reads to the end, however long the file is by now
            return
        mapped = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
        try:
            yield mapped
        finally:
            mapped.close()


def _issue(kind: str, severity: str, detail: str, position: int | None = None) -> DecodeIssue:
    return DecodeIssue(position=-1 if position is None else position, kind=kind, severity=severity, detail=detail)


def _size_changed(task: FileTask, size: int) -> bool:
    """Whether the file is no longer the size discovery saw. A slice knows its file's size only
    when it runs to the end; an earlier slice can only tell that the file no longer reaches it."""
    if not task.is_slice:
        return size != task.size_bytes
    if task.end is None:
        return size != task.start + task.size_bytes
    return size < task.end


def _changed(task: FileTask, size: int) -> DecodeIssue:
    listed = task.start + task.size_bytes  # the file's size, or for a slice the end of its range
    return _issue(
        IssueKind.UNREADABLE_FILE,
        Severity.WARNING,
        f"the file has {size} bytes but {'had' if task.end is None else 'reached byte'} {listed} when the dump "
        "was listed: it changed during the audit (is this a live log dir rather than a copy?); decoded as read now",
        min(size, listed),
    )


def decode_task(task: FileTask, out: TableRows) -> Iterator[None]:
    """Decode one file into ``out``; never raises for problems with the file itself.

    A generator: it pauses every few thousand batches so that the caller can drain ``out``,
    which keeps a worker's memory flat however large the segment is.
    """
    try:
        if task.kind == "dumplog_text":
            yield from decode_text_task(task, out)
            return
        with open_readonly(task.path) as buf:
            if _size_changed(task, len(buf)):
                out.issue(task, _changed(task, len(buf)))
            if task.kind == "log":
                yield from _decode_log(task, buf, out)
            elif task.kind == "snapshot":
                _decode_snapshot(task, bytes(buf), out)
            elif task.kind == "txnindex":
                _decode_txnindex(task, bytes(buf), out)
            else:
                out.issue(task, _issue(IssueKind.DECODER_ERROR, Severity.ERROR, f"no decoder for kind {task.kind!r}"))
    except OSError as err:
        reason = err.strerror or " ".join(str(err).split()) or type(err).__name__
        out.issue(task, _issue(IssueKind.UNREADABLE_FILE, Severity.ERROR, f"cannot read the file: {reason}"))
    except Exception as err:  # noqa: BLE001 - a decoder bug must not end the audit; it is reported instead
        out.issue(
            task,
            _issue(
                IssueKind.DECODER_ERROR,
                Severity.ERROR,
                f"txn-audit failed while decoding this file ({type(err).__name__}: {err}); "
                "rows before the failure were kept",
            ),
        )


def _decode_log(
    task: FileTask, buf: bytes | mmap.mmap, out: TableRows, pause_every: int = 8192, *, fast: bool = True
) -> Iterator[None]:
    if fast and task.topic not in (TRANSACTION_STATE_TOPIC, CONSUMER_OFFSETS_TOPIC) and (
        task.is_slice or (len(buf) > 16 and buf[16] == 2)
    ):
        yield from _decode_log_columns(task, buf, out, pause_every)
        return
    if fast and task.topic in _COORDINATOR_KINDS and not task.is_slice and len(buf) > 16 and buf[16] == 2:
        yield from _decode_coordinator_log(task, buf, out, pause_every)
        return
    replica = task.replica()
    seg = task.base_offset
    file = task.rel_path
    wants_records = task.topic in (TRANSACTION_STATE_TOPIC, CONSUMER_OFFSETS_TOPIC)
    add_batch = out.rows["batches"].append
    for n, item in enumerate(iter_batches(buf), 1):
        if n % pause_every == 0:
            yield
        if isinstance(item, DecodeIssue):
            out.issue(task, item)
            continue
        h = item
        add_batch(
            replica
            + (
                seg,
                h.position,
                h.base_offset,
                h.last_offset,
                h.magic,
                h.codec_name,
                TIMESTAMP_TYPE_NAMES.get(h.timestamp_type, str(h.timestamp_type)),
                h.is_transactional,
                h.is_control,
                h.producer_id,
                h.producer_epoch,
                h.base_sequence,
                h.last_sequence,
                h.record_count,
                h.first_timestamp,
                h.max_timestamp,
                h.delete_horizon_ms,
                h.partition_leader_epoch,
                h.stored_crc,
                h.computed_crc,
                h.stored_crc == h.computed_crc,
                h.size_bytes,
                file,
            )
        )
        if h.stored_crc != h.computed_crc:
            continue  # contents of a batch that fails its CRC are not trusted (crc_mismatch already reported)
        if h.is_control:
            _add_marker(task, buf, h, out)
        elif wants_records and h.record_count != 0:  # a negative count is reported by the record parser
            _add_coordinator_records(task, buf, h, out)


_CODECS = pa.array([CODEC_NAMES.get(c, f"unknown({c})") for c in range(8)], pa.string())
_TIMESTAMP_TYPES = pa.array([TIMESTAMP_TYPE_NAMES.get(t, str(t)) for t in range(2)], pa.string())


def _task_columns(task: FileTask, n: int) -> dict[str, pa.Array]:
    """The columns every row of ``task`` shares, ``n`` times: its replica, segment and file."""
    return {
        "broker_id": pa.repeat(pa.scalar(task.broker_id, pa.int32()), n),
        "log_dir": pa.repeat(pa.scalar(task.log_dir, pa.string()), n),
        "topic": pa.repeat(pa.scalar(task.topic, pa.string()), n),
        "partition": pa.repeat(pa.scalar(task.partition, pa.int32()), n),
        "segment_base_offset": pa.repeat(pa.scalar(task.base_offset, pa.int64()), n),
        "file": pa.repeat(pa.scalar(task.rel_path, pa.string()), n),
    }


def _batch_struct(task: FileTask, cols: HeaderColumns) -> pa.StructArray:
    """``batches`` rows of one chunk, column by column (the same values the tuple path writes)."""
    n = len(cols)
    values: dict[str, Any] = {
        **_task_columns(task, n),
        "codec": _CODECS.take(cols.compression),
        "timestamp_type": _TIMESTAMP_TYPES.take(cols.timestamp_type),
        "delete_horizon_timestamp": cols.delete_horizon_ms,  # the decoder's (Kafka's) name
        "crc_ok": cols.crc_ok,
    }
    return _struct_of("batches", values, cols)


def _struct_of(table: str, values: Mapping[str, Any], columns: object = None) -> pa.StructArray:
    """Rows of ``table`` (``WORKER_OUTPUTS``), each column ``values``' of its name or else the
    attribute of ``columns`` of that name (NumPy arrays or Arrow arrays), of the column's type."""
    schema = WORKER_OUTPUTS[table]
    arrays = []
    for f in schema:
        value = values[f.name] if f.name in values else getattr(columns, f.name)
        arrays.append(value if isinstance(value, pa.Array) else pa.array(value, type=f.type))
    return pa.StructArray.from_arrays(arrays, fields=list(schema))


def _decode_log_columns(task: FileTask, buf: bytes | mmap.mmap, out: TableRows, pause_every: int) -> Iterator[None]:
    """``_decode_log`` for a v2 data segment through ``fast_headers``: the same rows and issues,
    in the same order; only control batches are visited one by one (for their markers).

    Pages of the map behind each finished chunk are handed back (they stay in the page
    cache), so a worker's memory does not grow with the size of the segment.

    A slice task decodes only its byte range and adds one ``slice_summary`` row. If its walk
    stops before the slice's end (a batch runs over it, or the framing is lost), the issue
    about that last step is left out: the driver decodes again from there, with the rest of
    the file in view, as the whole-file walk would.
    """
    released = (task.start // mmap.PAGESIZE) * mmap.PAGESIZE
    end = len(buf) if task.end is None else min(task.end, len(buf))
    rows, first_base, first_position, last_offset, stop = 0, None, None, None, end
    with closing(  # type: ignore[type-var]  # a generator, typed as an Iterator: it has close()
        iter_header_chunks(buf, start=task.start, end=end, prev_last_offset=task.prev_last_offset,
                           max_batches=pause_every)
    ) as chunks:
        for chunk in chunks:
            cols = chunk.columns
            if chunk.lost_at is not None:
                stop = chunk.lost_at
                if task.is_slice and end < len(buf) and chunk.issues:
                    chunk = replace(chunk, issues=chunk.issues[:-1], issue_rows=chunk.issue_rows[:-1])
            _add_chunk(task, buf, chunk, out)
            if len(cols):
                if first_base is None:
                    first_base, first_position = int(cols.base_offset[0]), int(cols.position[0])
                last_offset = int(cols.last_offset[-1])
                rows += len(cols)
            if len(cols) and isinstance(buf, mmap.mmap) and hasattr(mmap, "MADV_DONTNEED"):
                done = (int(cols.position[-1] + cols.size_bytes[-1]) // mmap.PAGESIZE) * mmap.PAGESIZE
                if done > released:
                    buf.madvise(mmap.MADV_DONTNEED, released, done - released)  # read-only map: refaults from the file
                    released = done
            yield
    if task.is_slice:
        out.add("slice_summary", (task.task, task.start, stop, rows, first_base, first_position, last_offset))


def _add_chunk(task: FileTask, buf: bytes | mmap.mmap, chunk: HeaderChunk, out: TableRows) -> None:
    """Rows of one chunk, and the markers of its control batches, with issues in walk order."""
    cols = chunk.columns
    if len(cols):
        out.add_struct("batches", _batch_struct(task, cols))
    issues, issue_rows = chunk.issues, chunk.issue_rows
    k = 0
    controls = np.flatnonzero(cols.is_control & cols.crc_ok)
    fast = canonical_markers(buf, cols, controls)
    if len(fast) == len(controls):  # the usual case: every marker read column-wise
        if len(fast):
            out.add_struct("control_markers", _marker_struct(task, cols, fast))
        for issue in issues:
            out.issue(task, issue)
        return
    # markers in batch order: runs of canonical ones column-wise, the others one by one
    is_fast = np.isin(controls, fast.rows)
    fast_before: list[int] = (np.cumsum(is_fast) - is_fast).tolist()
    fast_at = 0
    for i, j in enumerate(controls.tolist()):
        if is_fast[i]:
            continue
        run = fast_before[i] - fast_at
        if run:
            out.add_struct("control_markers", _marker_struct(task, cols, fast, slice(fast_at, fast_at + run)))
            fast_at += run
        while k < len(issues) and issue_rows[k] <= j:  # issues the walk met before batch j
            out.issue(task, issues[k])
            k += 1
        _add_marker(task, buf, cols.header(j), out)
    if fast_at < len(fast):
        out.add_struct("control_markers", _marker_struct(task, cols, fast, slice(fast_at, len(fast))))
    for issue in issues[k:]:
        out.issue(task, issue)


_MARKER_TYPES = pa.array(MARKER_TYPE_NAMES, pa.string())


def _marker_struct(task: FileTask, cols: HeaderColumns, fast: MarkerColumns,
                   part: slice = slice(None)) -> pa.StructArray:
    """``control_markers`` rows of canonical markers (the same values ``_add_marker`` writes)."""
    rows = fast.rows[part]
    n = len(rows)
    values: dict[str, Any] = {
        **_task_columns(task, n),
        "offset": fast.offset[part],
        "producer_id": fast.producer_id[part],
        "producer_epoch": fast.producer_epoch[part],
        "marker_type": _MARKER_TYPES.take(fast.control_type[part]),
        "control_type": fast.control_type[part],
        "coordinator_epoch": fast.coordinator_epoch[part],
        "timestamp": fast.timestamp[part],
        "key_version": fast.key_version[part],
        "value_version": fast.value_version[part],
        "position": cols.position[rows],
    }
    return _struct_of("control_markers", values)


def _add_marker(task: FileTask, buf: bytes | mmap.mmap, h: BatchHeader, out: TableRows) -> None:
    try:
        marker = control_marker_of(buf, h)
    except CorruptInputError as err:
        sev = Severity.WARNING if err.kind == IssueKind.UNEXPECTED_CONTROL else Severity.ERROR
        out.issue(task, _issue(err.kind, sev, f"control batch at offset {h.base_offset}: {err.detail}", err.position))
        return
    if marker is None:
        return  # an empty control batch (compaction left it): carries no marker
    out.add(
        "control_markers",
        task.replica()
        + (
            marker.offset,
            marker.producer_id,
            marker.producer_epoch,
            marker.marker_type,
            marker.control_type,
            marker.coordinator_epoch,
            marker.timestamp,
            marker.key_version,
            marker.value_version,
            task.base_offset,
            h.position,
            task.rel_path,
        ),
    )


# -- coordinator segments, column-wise --------------------------------------------------

#: coordinator topic -> (``fast_coordinator`` kind, table its records fill)
_COORDINATOR_KINDS: dict[str, tuple[int, str]] = {
    TRANSACTION_STATE_TOPIC: (fast_coordinator.TRANSACTION_STATE, "txn_log"),
    CONSUMER_OFFSETS_TOPIC: (fast_coordinator.CONSUMER_OFFSETS, "offset_commits"),
}


def _decode_coordinator_log(task: FileTask, buf: bytes | mmap.mmap, out: TableRows, pause_every: int) -> Iterator[None]:
    """``_decode_log`` for a whole v2 coordinator segment: the same rows and issues, in the same
    order. Headers come from ``fast_headers``, records from ``fast_coordinator`` and canonical
    markers from ``fast_markers``; the batches those leave (``fallback``, other markers) go
    through the reference decoders one by one, with the walk's issues replayed around them."""
    kind, table = _COORDINATOR_KINDS[task.topic]
    walk = cast(Generator[HeaderChunk, None, None], iter_header_chunks(buf, max_batches=pause_every))
    with closing(walk) as chunks:  # closed early too: an mmap cannot close while the walk holds a view
        for chunk in chunks:
            cols = chunk.columns
            if len(cols):
                out.add_struct("batches", _batch_struct(task, cols))
            trusted = cols.crc_ok
            controls = np.flatnonzero(cols.is_control & trusted)
            data = np.flatnonzero(~cols.is_control & trusted & (cols.record_count != 0))
            records = fast_coordinator.decode_coordinator_batches(buf, cols, data, kind)
            markers = canonical_markers(buf, cols, controls)
            record_rows = data[records.batch]  # the batch of each decoded record
            slow = np.union1d(records.fallback, np.setdiff1d(controls, markers.rows))
            issues, issue_rows = chunk.issues, chunk.issue_rows
            k = done_records = done_markers = 0
            for j in [*slow.tolist(), len(cols)]:
                upto = int(np.searchsorted(record_rows, j))
                if upto > done_records:
                    out.add_struct(table, _coordinator_struct(task, table, records.table.slice(done_records,
                                                                                               upto - done_records)))
                    done_records = upto
                upto = int(np.searchsorted(markers.rows, j))
                if upto > done_markers:
                    out.add_struct("control_markers", _marker_struct(task, cols, markers, slice(done_markers, upto)))
                    done_markers = upto
                while k < len(issues) and issue_rows[k] <= j:  # issues the walk met before batch j
                    out.issue(task, issues[k])
                    k += 1
                if j == len(cols):
                    break
                if cols.is_control[j]:
                    _add_marker(task, buf, cols.header(j), out)
                else:
                    _add_coordinator_records(task, buf, cols.header(j), out)
            for issue in issues[k:]:
                out.issue(task, issue)
            yield


def _coordinator_struct(task: FileTask, table: str, rows: pa.Table) -> pa.StructArray:
    """``txn_log`` / ``offset_commits`` rows decoded column-wise, with the task's columns."""
    n = rows.num_rows
    values = _task_columns(task, n)
    schema = WORKER_OUTPUTS[table]
    arrays = [values[f.name] if f.name in values else rows.column(f.name).combine_chunks() for f in schema]
    return pa.StructArray.from_arrays(arrays, fields=list(schema))


# -- coordinator records, one batch at a time (the reference) ----------------------------


def _add_coordinator_records(task: FileTask, buf: bytes | mmap.mmap, h: BatchHeader, out: TableRows) -> None:
    try:
        records = iter_records(buf, h)
    except CorruptInputError as err:
        out.issue(task, _issue(err.kind, Severity.ERROR, f"batch at offset {h.base_offset}: {err.detail}",
                               err.position))
        return
    for record in records:
        try:
            if task.topic == TRANSACTION_STATE_TOPIC:
                _add_txn_log_row(task, h, record.offset, record.timestamp, record.key, record.value, out)
            else:
                _add_offset_commit_row(task, h, record.offset, record.timestamp, record.key, record.value, out)
        except CorruptInputError as err:
            sev = Severity.WARNING if err.kind == IssueKind.UNKNOWN_VERSION else Severity.ERROR
            out.issue(
                task,
                _issue(err.kind, sev, f"record at offset {record.offset}: {err.detail}", h.position),
            )


def _add_txn_log_row(
    task: FileTask, h: BatchHeader, offset: int, ts: int, key: bytes | None, value: bytes | None, out: TableRows
) -> None:
    if key is None:
        raise CorruptInputError(IssueKind.CORRUPT_RECORD, h.position, "__transaction_state record without a key")
    k = decode_txn_log_key(key)
    v = decode_txn_log_value(value)
    if v is None:
        tail: tuple[Any, ...] = (None, True) + (None,) * 12
    else:
        parts = None
        if v.topic_partitions is not None:
            parts = [{"topic": tp.topic, "partition": p} for tp in v.topic_partitions for p in tp.partitions]
        tail = (
            v.version,
            False,
            v.producer_id,
            v.producer_epoch,
            v.previous_producer_id,
            v.next_producer_id,
            v.next_producer_epoch,
            v.txn_timeout_ms,
            v.state_code,
            v.state,
            parts,
            v.txn_last_update_timestamp,
            v.txn_start_timestamp,
            v.client_transaction_version,
        )
    out.add("txn_log",
            task.replica() + (offset, ts, k.transactional_id, k.version) + tail + (task.base_offset, task.rel_path))


def _add_offset_commit_row(
    task: FileTask, h: BatchHeader, offset: int, ts: int, key: bytes | None, value: bytes | None, out: TableRows
) -> None:
    if key is None:
        raise CorruptInputError(IssueKind.CORRUPT_RECORD, h.position, "__consumer_offsets record without a key")
    k = decode_offsets_key(key)
    if not isinstance(k, OffsetCommitKey):
        return  # group metadata and newer coordinator records: not offset commits
    v = decode_offset_commit_value(value)
    if v is None:
        tail: tuple[Any, ...] = (None, True, None, None, None, None, None)
    else:
        tail = (v.version, False, v.committed_offset, v.leader_epoch, v.metadata, v.commit_timestamp,
                v.expire_timestamp)
    out.add(
        "offset_commits",
        task.replica()
        + (offset, ts, k.group, k.topic, k.partition, k.version)
        + tail
        + (h.is_transactional, h.producer_id, h.producer_epoch, task.base_offset, task.rel_path),
    )


def _decode_snapshot(task: FileTask, data: bytes, out: TableRows) -> None:
    try:
        snap = decode_producer_snapshot(data)
    except CorruptInputError as err:
        out.issue(task, _issue(err.kind, Severity.ERROR, err.detail, err.position))
        return
    if not snap.crc_ok:
        out.issue(
            task,
            _issue(
                IssueKind.CRC_MISMATCH,
                Severity.ERROR,
                f"producer snapshot CRC stored {snap.stored_crc} computed {snap.computed_crc}; "
                "the broker would discard this snapshot",
                2,
            ),
        )
    for e in snap.entries:
        out.add(
            "producer_snapshots",
            task.replica()
            + (
                task.base_offset,
                e.producer_id,
                e.producer_epoch,
                e.last_sequence,
                e.last_offset,
                e.offset_delta,
                e.timestamp,
                e.coordinator_epoch,
                e.current_txn_first_offset,
                snap.crc_ok,
                task.rel_path,
            ),
        )


def _decode_txnindex(task: FileTask, data: bytes, out: TableRows) -> None:
    """``aborted_txns`` rows of an index, column by column (``decode_txn_index_columns``)."""
    columns, issues = decode_txn_index_columns(data, segment_base_offset=task.base_offset)
    for issue in issues:
        out.issue(task, issue)
    n = len(columns)
    if not n:
        return
    out.add_struct("aborted_txns", _struct_of("aborted_txns", _task_columns(task, n), columns))


def replica_runs(table: pa.Table) -> Iterator[tuple[Replica, pa.Table]]:
    """``table`` cut where its rows' replica or segment changes (rows come file by file, so each
    replica's rows are together), each run with its replica. Written as row groups of their own,
    their statistics show their replica, and the offsets of one segment's run: readers then skip
    other replicas' row groups, and ingest's manifest (``txn_audit.manifest``), read from the
    statistics, gives extents without reading a row and names a replica's row groups, which
    tasks read in log order (``replica_tasks.reading.log_order``)."""
    changes = np.zeros(max(table.num_rows - 1, 0), dtype=bool)
    for name in REPLICA_COLUMNS:
        codes = pc.fill_null(pc.dictionary_encode(table.column(name).combine_chunks()).indices, -1)
        values = codes.to_numpy(zero_copy_only=False)
        changes |= values[1:] != values[:-1]
    if "segment_base_offset" in table.column_names:
        segments = pc.fill_null(table.column("segment_base_offset"), -1).to_numpy(zero_copy_only=False)
        changes |= segments[1:] != segments[:-1]
    bounds = [0, *(np.flatnonzero(changes) + 1).tolist(), table.num_rows]
    for start, stop in zip(bounds, bounds[1:], strict=False):
        if stop > start:
            rows = table.slice(start, stop - start)
            yield tuple(rows.column(name)[0].as_py() for name in REPLICA_COLUMNS), rows


def write_partition(
    batches: Iterator[pa.RecordBatch], out_dir: str, run: int = 0, flush_rows: int = 65536
) -> Iterator[pa.RecordBatch]:
    """``mapInArrow`` body that writes the decoded tables itself: task rows in, Parquet files
    under ``out_dir/<table>/`` out, and one ``WRITTEN_FILES`` row per file and per slice.

    Rows go to Arrow and then Parquet without passing through the JVM. Each slice task gets
    its own files, so that the driver can drop a slice's rows by deleting its files; the
    other tasks of a partition share one file per table. File names begin with ``run``, the
    Spark partition and a sequence number, so the same input gives the same files in the same
    name order.
    """
    import pyarrow.parquet as pq
    from pyspark import TaskContext

    context = TaskContext.get()
    prefix = f"part-{run}{context.partitionId() if context else 0:05d}"
    sequence = 0

    out = TableRows()
    writers: dict[str, pq.ParquetWriter] = {}
    paths: dict[str, str] = {}
    written: dict[str, int] = {}
    replicas: dict[str, set[Replica]] = {}  # of each open file's rows, for its footer
    report: list[dict[str, Any]] = []
    summaries: list[pa.StructArray] = []

    def flush() -> None:
        for name in DECODED_TABLES:
            out._seal(name)
            parts = out.parts[name]
            if not parts:
                continue
            if name not in writers:
                paths[name] = os.path.join(out_dir, name, f"{prefix}.{sequence:05d}-{uuid.uuid4().hex}.parquet")
                schema = RAW_TABLES[name]
                writers[name] = pq.ParquetWriter(paths[name], schema, **raw_writer_options(schema))
                written[name] = 0
                replicas[name] = set()
            table = declared(pa.Table.from_batches([pa.RecordBatch.from_struct_array(p) for p in parts]),
                             RAW_TABLES[name])
            for replica, rows in replica_runs(table):  # a row group per replica: its statistics name it
                if name in REPLICA_ROW_GROUP_TABLES:
                    writers[name].write_table(rows)
                replicas[name].add(replica)
            if name not in REPLICA_ROW_GROUP_TABLES:
                writers[name].write_table(table)
            written[name] += table.num_rows
            out.clear_parts(name)
        out._seal("slice_summary")
        summaries.extend(out.parts["slice_summary"])
        out.clear_parts("slice_summary")

    def close() -> None:
        nonlocal sequence
        sequence += 1
        for name, writer in writers.items():
            writer.add_key_value_metadata(replicas_metadata(replicas[name]))
            writer.close()
            report.append({"table": name, "task": out.task, "file": paths[name], "rows": written[name],
                           "slice_summary": None})
        writers.clear()
        written.clear()
        replicas.clear()

    for batch in batches:
        for row in batch.to_pylist():
            task = FileTask(**row)
            if task.task != out.task:
                flush()
                close()
                out.task = task.task
            for _ in decode_task(task, out):
                if len(out) >= flush_rows:
                    flush()
    flush()
    close()
    for struct in summaries:
        for summary in struct.to_pylist():
            report.append({"table": "slice_summary", "task": summary["task"], "file": None, "rows": 1,
                           "slice_summary": summary})
    if report:
        yield pa.RecordBatch.from_pylist(report, schema=WRITTEN_FILES)
