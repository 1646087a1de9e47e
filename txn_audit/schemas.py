"""The one place where every table's columns are defined.

Schemas are Arrow schemas (the workers build Arrow record batches, and Parquet is written
from them); ``spark_schema`` converts one for Spark.

Time columns follow one rule in every table (``time_column_faults`` states it, a test holds
every schema to it):

* an *instant* is named ``timestamp`` or ``*_timestamp`` and typed ``TIMESTAMP``: Parquet
  ``TIMESTAMP(MILLIS, UTC)``, Arrow ``timestamp[ms, tz=UTC]``, Spark ``TimestampType``. Kafka's
  ``-1`` ("no time": a v0 batch, an Empty transaction's start, a snapshot's metadata states) is
  null there;
* a *duration* is named ``*_ms`` and is an integer of milliseconds;
* no other column holds a time.

A Parquet ``TIMESTAMP(MILLIS)`` is an ``INT64`` of epoch milliseconds, so the decoders keep
Kafka's integers (compared with ``kafka-dump-log`` digit for digit) and the tables are typed
where they are written (``declared``: an Arrow cast that copies nothing, ``-1`` made null).
The package's own code does its arithmetic in epoch milliseconds: it reads a table's instants
as ``int64`` through ``in_ms`` (Arrow: a cast that copies nothing; Spark: ``frame_in_ms``,
``unix_millis``), and ``conform`` / ``conform_table`` shape its frames that way.

Raw tables (one row per thing on disk) are filled by ``txn_audit.ingest``; derived tables
are added here by the reconstruction and detection layers.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import TYPE_CHECKING, Any

import pyarrow as pa

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

#: the type of every instant in a table: Parquet ``TIMESTAMP(MILLIS, UTC)``, an ``INT64`` of epoch ms
TIMESTAMP = pa.timestamp("ms", tz="UTC")
#: Kafka's "no time" (``RecordBatch.NO_TIMESTAMP``), null in a ``TIMESTAMP`` column
NO_TIME = -1
#: an instant as the package's code computes with it: epoch ms (``in_ms``)
_MS = pa.int64()

#: names of columns that hold no time though they say "time"
_NOT_TIMES = frozenset({"timestamp_type", "time_behind_from"})
#: how a column holding another kind of time would be named (minutes, seconds, a bare "at")
_OTHER_TIME_SUFFIXES = ("_min", "_sec", "_s", "_at", "_time", "_date")


def is_instant(name: str) -> bool:
    """Whether column ``name`` is an instant by the naming rule: ``timestamp`` or ``*_timestamp``."""
    return name == "timestamp" or name.endswith("_timestamp")


def time_column_faults(schema: pa.Schema) -> list[str]:
    """Where ``schema`` breaks the rule of time columns (the module docstring): an instant is
    named ``timestamp``/``*_timestamp`` and typed ``TIMESTAMP``; a duration is named ``*_ms`` and
    is an integer; no other column holds a time. Nested fields are checked too."""
    faults: list[str] = []

    def check(field: pa.Field, where: str) -> None:
        name, kind = field.name, field.type
        if pa.types.is_struct(kind):
            for child in kind:
                check(child, f"{where}{name}.")
            return
        if pa.types.is_list(kind) or pa.types.is_large_list(kind):
            check(kind.value_field.with_name(name), where)
            return
        if is_instant(name):
            if kind != TIMESTAMP:
                faults.append(f"{where}{name}: an instant typed {kind}, not {TIMESTAMP}")
        elif name.endswith("_ms"):
            if not pa.types.is_integer(kind):
                faults.append(f"{where}{name}: a duration typed {kind}, not an integer")
        elif pa.types.is_temporal(kind):
            faults.append(f"{where}{name}: typed {kind} but named neither *_timestamp nor *_ms")
        elif name not in _NOT_TIMES and ("time" in name or name.endswith(_OTHER_TIME_SUFFIXES)):
            faults.append(f"{where}{name}: a time named neither *_timestamp nor *_ms")

    for f in schema:
        check(f, "")
    return faults


def in_ms(schema: pa.Schema) -> pa.Schema:
    """``schema`` as the package's code computes with it: every ``TIMESTAMP`` column as ``int64``
    epoch milliseconds (null where the table has no time). Remembered per schema object (the
    readers ask for it per replica, 25 us each time; hashing a schema costs nearly as much)."""
    known = _IN_MS.get(id(schema))
    if known is not None and known[0] is schema:
        return known[1]
    found = schema if not any(f.type == TIMESTAMP for f in schema) else pa.schema(
        [f.with_type(_MS) if f.type == TIMESTAMP else f for f in schema], metadata=schema.metadata)
    if len(_IN_MS) < 1024:
        _IN_MS[id(schema)] = (schema, found)  # the schema kept, so its id is not reused
    return found


_IN_MS: dict[int, tuple[pa.Schema, pa.Schema]] = {}


def read_ms(table: pa.Table) -> pa.Table:
    """``table`` (as read from a file) with its ``TIMESTAMP`` columns as ``int64`` epoch ms: the one
    way the package's code reads times. An Arrow cast of the same buffers: nothing is copied, and
    only those columns are touched (a cast of the whole table, every column, cost 5 times as much
    per row group the passes read: 0.29 against 0.06 ms for one of ``batches``)."""
    return _columns_in_ms(table)


def read_batch_ms(batch: pa.RecordBatch) -> pa.RecordBatch:
    """``read_ms`` of one record batch."""
    return _columns_in_ms(batch)


def _columns_in_ms(rows: Any) -> Any:
    schema = rows.schema
    for index, kind in enumerate(schema.types):
        if kind == TIMESTAMP:
            rows = rows.set_column(index, schema.field(index).with_type(_MS), rows.column(index).cast(_MS))
    return rows


def declared(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """``table`` (its columns in ``schema``'s order, instants as epoch ms or already typed) with
    ``schema``'s types, as it is written: each ``TIMESTAMP`` column from its integers, Kafka's
    ``NO_TIME`` made null (vectorised; a cast of ``int64`` to ``TIMESTAMP`` copies nothing)."""
    import pyarrow.compute as pc

    if len(table.columns) != len(schema):
        raise ValueError(f"{len(table.columns)} columns given for a schema of {len(schema)}")
    columns = []
    for field, column in zip(schema, table.columns, strict=True):
        if field.type == TIMESTAMP and pa.types.is_integer(column.type):
            if column.type != pa.int64():
                column = column.cast(pa.int64())
            lowest = pc.min(column).as_py()  # one pass: times are rarely at or below NO_TIME
            if lowest is not None and lowest <= NO_TIME:
                none = pc.equal(column, NO_TIME)
                column = pc.if_else(none, pa.scalar(None, pa.int64()), column)
        if column.type != field.type:  # only the columns that need it (a cast costs per call)
            column = column.cast(field.type)
        if not field.nullable and column.null_count:
            raise ValueError(f"column {field.name} holds nulls, which its schema does not allow")
        columns.append(column)
    return pa.Table.from_arrays(columns, schema=schema)


_REPLICA = [
    pa.field("broker_id", pa.int32()),  # node.id / broker.id from meta.properties; null when unknown
    pa.field("log_dir", pa.string()),  # log dir path relative to the dump root
    pa.field("topic", pa.string()),
    pa.field("partition", pa.int32()),
]

SEGMENTS = pa.schema(
    _REPLICA
    + [
        pa.field("path", pa.string(), nullable=False),  # relative to the dump root
        pa.field("file_name", pa.string(), nullable=False),
        pa.field("kind", pa.string(), nullable=False),  # log, index, timeindex, txnindex, snapshot, checkpoint, ...
        pa.field("base_offset", pa.int64()),  # from the 20-digit file name, when it has one
        pa.field("size_bytes", pa.int64()),
        pa.field("status", pa.string(), nullable=False),  # live, deleted, cleaned, swap
        pa.field("replica_status", pa.string()),  # live, delete, future, stray (partition folder suffix)
        pa.field("decoded", pa.bool_(), nullable=False),  # whether ingest decoded its contents
        pa.field("skip_reason", pa.string()),  # why not, when not
    ]
)

BATCHES = pa.schema(
    _REPLICA
    + [
        pa.field("segment_base_offset", pa.int64(), nullable=False),
        pa.field("position", pa.int64(), nullable=False),
        pa.field("base_offset", pa.int64(), nullable=False),
        pa.field("last_offset", pa.int64(), nullable=False),
        pa.field("magic", pa.int32(), nullable=False),
        pa.field("codec", pa.string(), nullable=False),
        pa.field("timestamp_type", pa.string(), nullable=False),
        pa.field("is_transactional", pa.bool_(), nullable=False),
        pa.field("is_control", pa.bool_(), nullable=False),
        pa.field("producer_id", pa.int64(), nullable=False),
        pa.field("producer_epoch", pa.int32(), nullable=False),
        pa.field("base_sequence", pa.int32(), nullable=False),
        pa.field("last_sequence", pa.int32(), nullable=False),
        pa.field("record_count", pa.int32(), nullable=False),
        pa.field("first_timestamp", TIMESTAMP),
        pa.field("max_timestamp", TIMESTAMP),
        pa.field("delete_horizon_timestamp", TIMESTAMP),
        pa.field("partition_leader_epoch", pa.int32(), nullable=False),
        pa.field("stored_crc", pa.int64(), nullable=False),
        pa.field("computed_crc", pa.int64(), nullable=False),
        pa.field("crc_ok", pa.bool_(), nullable=False),
        pa.field("size_bytes", pa.int32(), nullable=False),
        pa.field("file", pa.string(), nullable=False),
    ]
)

CONTROL_MARKERS = pa.schema(
    _REPLICA
    + [
        pa.field("offset", pa.int64(), nullable=False),
        pa.field("producer_id", pa.int64(), nullable=False),
        pa.field("producer_epoch", pa.int32(), nullable=False),
        # COMMIT | ABORT | UNKNOWN (text without --deep-iteration)
        pa.field("marker_type", pa.string(), nullable=False),
        pa.field("control_type", pa.int32(), nullable=False),
        pa.field("coordinator_epoch", pa.int32(), nullable=False),
        pa.field("timestamp", TIMESTAMP),
        pa.field("key_version", pa.int32(), nullable=False),
        pa.field("value_version", pa.int32(), nullable=False),
        pa.field("segment_base_offset", pa.int64(), nullable=False),
        pa.field("position", pa.int64(), nullable=False),
        pa.field("file", pa.string(), nullable=False),
    ]
)

TOPIC_PARTITION = pa.struct([pa.field("topic", pa.string()), pa.field("partition", pa.int32())])

TXN_LOG = pa.schema(
    _REPLICA
    + [
        pa.field("offset", pa.int64(), nullable=False),
        pa.field("record_timestamp", TIMESTAMP),
        pa.field("transactional_id", pa.string(), nullable=False),
        pa.field("key_version", pa.int32(), nullable=False),
        pa.field("value_version", pa.int32()),  # null for a tombstone
        pa.field("tombstone", pa.bool_(), nullable=False),
        pa.field("producer_id", pa.int64()),
        pa.field("producer_epoch", pa.int32()),
        pa.field("previous_producer_id", pa.int64()),
        pa.field("next_producer_id", pa.int64()),
        pa.field("next_producer_epoch", pa.int32()),
        pa.field("txn_timeout_ms", pa.int32()),
        pa.field("state_code", pa.int32()),
        pa.field("state", pa.string()),
        pa.field("topic_partitions", pa.list_(TOPIC_PARTITION)),  # null in Empty
        pa.field("txn_last_update_timestamp", TIMESTAMP),
        pa.field("txn_start_timestamp", TIMESTAMP),
        pa.field("client_transaction_version", pa.int32()),
        pa.field("segment_base_offset", pa.int64(), nullable=False),
        pa.field("file", pa.string(), nullable=False),
    ]
)

PRODUCER_SNAPSHOTS = pa.schema(
    _REPLICA
    + [
        pa.field("snapshot_offset", pa.int64(), nullable=False),  # from the file name
        pa.field("producer_id", pa.int64(), nullable=False),
        pa.field("producer_epoch", pa.int32(), nullable=False),
        pa.field("last_sequence", pa.int32(), nullable=False),
        pa.field("last_offset", pa.int64(), nullable=False),
        pa.field("offset_delta", pa.int32(), nullable=False),
        pa.field("timestamp", TIMESTAMP),
        pa.field("coordinator_epoch", pa.int32(), nullable=False),
        pa.field("current_txn_first_offset", pa.int64(), nullable=False),
        pa.field("crc_ok", pa.bool_(), nullable=False),
        pa.field("file", pa.string(), nullable=False),
    ]
)

ABORTED_TXNS = pa.schema(
    _REPLICA
    + [
        pa.field("segment_base_offset", pa.int64(), nullable=False),
        pa.field("version", pa.int32(), nullable=False),
        pa.field("producer_id", pa.int64(), nullable=False),
        pa.field("first_offset", pa.int64(), nullable=False),
        pa.field("last_offset", pa.int64(), nullable=False),
        pa.field("last_stable_offset", pa.int64(), nullable=False),
        pa.field("file", pa.string(), nullable=False),
    ]
)

PARTITION_OFFSETS = pa.schema(
    _REPLICA
    + [
        pa.field("replica_status", pa.string(), nullable=False),
        pa.field("topic_id", pa.string()),  # from partition.metadata
        pa.field("high_watermark", pa.int64()),  # replication-offset-checkpoint (or an offsets file); null when absent
        pa.field("hw_source", pa.string()),  # checkpoint | offsets_file; null when no high watermark is known
        pa.field("recovery_point", pa.int64()),  # recovery-point-offset-checkpoint
        pa.field("log_start_offset_checkpoint", pa.int64()),  # log-start-offset-checkpoint, when listed
        pa.field("cleaner_offset", pa.int64()),  # cleaner-offset-checkpoint
        # the topic's cleanup.policy (compact | delete | compact,delete) as the KRaft metadata log
        # sets it, else the cluster's log.cleanup.policy; null when the dump does not show it
        pa.field("cleanup_policy", pa.string()),
        # the cluster's finalized metadata.version level as the KRaft metadata log leaves it (22 and
        # up: brokers of Kafka 4.0 or later, ``cluster_metadata.METADATA_VERSION_4_0``); null without one
        pa.field("metadata_version", pa.int32()),
        pa.field("first_segment_base_offset", pa.int64()),  # smallest live .log base offset
        pa.field("log_start_offset", pa.int64()),  # checkpoint if listed, else first segment base
        pa.field("live_segments", pa.int32(), nullable=False),
        pa.field("last_segment_base_offset", pa.int64()),  # largest live .log base offset: the log end is >= it
        pa.field("clean_shutdown", pa.bool_(), nullable=False),  # .kafka_cleanshutdown present in the log dir
        pa.field("leader_epoch", pa.int32()),  # newest epoch in leader-epoch-checkpoint; null when absent or empty
        pa.field("leader_epoch_start_offset", pa.int64()),  # the offset that epoch starts at
    ]
)

#: The partitions' states in the KRaft metadata log (``__cluster_metadata``), replayed from the
#: newest snapshot and the records after it: one row per state a partition took (the snapshot's,
#: then one per record that changed it) per copy of the metadata log (every KRaft broker or
#: controller in the dump holds one). A partition's state at a time is its last row stamped then
#: or before.
METADATA_PARTITIONS = pa.schema(
    [
        pa.field("broker_id", pa.int32()),  # whose copy of the metadata log
        pa.field("log_dir", pa.string()),
        pa.field("topic", pa.string()),  # from the TopicRecord; null when the copy lacks it
        pa.field("topic_id", pa.string(), nullable=False),  # as partition.metadata writes it
        pa.field("partition", pa.int32(), nullable=False),
        pa.field("leader", pa.int32(), nullable=False),  # -1: no leader
        pa.field("leader_epoch", pa.int32(), nullable=False),
        pa.field("partition_epoch", pa.int32(), nullable=False),
        pa.field("replicas", pa.list_(pa.int32())),
        pa.field("isr", pa.list_(pa.int32())),
        pa.field("record_offset", pa.int64(), nullable=False),  # the metadata record that set this state
        pa.field("record_timestamp", TIMESTAMP),  # its time; null for a snapshot's states
        pa.field("metadata_end_offset", pa.int64(), nullable=False),  # the highest offset this copy holds
    ]
)

#: The tiered storage's remote segments (KIP-405), replayed from each copy of the remote log
#: metadata topic (``__remote_log_metadata``, ``formats.remote_log_metadata.remote_segments``):
#: one row per remote segment of a user partition per copy of the topic's partitions that list it,
#: in the newest state its records leave it.
REMOTE_SEGMENTS = pa.schema(
    [
        pa.field("broker_id", pa.int32()),  # whose copy of __remote_log_metadata
        pa.field("log_dir", pa.string()),
        pa.field("topic", pa.string(), nullable=False),  # the user partition whose segment it is
        pa.field("partition", pa.int32(), nullable=False),
        pa.field("topic_id", pa.string(), nullable=False),
        pa.field("segment_id", pa.string(), nullable=False),
        pa.field("start_offset", pa.int64(), nullable=False),
        pa.field("end_offset", pa.int64(), nullable=False),  # the segment's last offset (inclusive)
        # COPY_SEGMENT_STARTED | COPY_SEGMENT_FINISHED | DELETE_SEGMENT_STARTED | DELETE_SEGMENT_FINISHED
        pa.field("state", pa.string(), nullable=False),
        pa.field("segment_broker_id", pa.int32(), nullable=False),  # the broker that wrote its newest event
        pa.field("max_timestamp", TIMESTAMP),  # the segment's newest record
        pa.field("event_timestamp", TIMESTAMP),  # its newest event
        pa.field("size_bytes", pa.int32(), nullable=False),
        pa.field("txn_index_empty", pa.bool_()),  # null where the text form (before 4.0) does not print it
    ]
)

OFFSET_COMMITS = pa.schema(
    _REPLICA
    + [
        pa.field("offset", pa.int64(), nullable=False),  # offset of the commit record in __consumer_offsets
        pa.field("record_timestamp", TIMESTAMP),
        pa.field("group_id", pa.string(), nullable=False),
        pa.field("commit_topic", pa.string(), nullable=False),
        pa.field("commit_partition", pa.int32(), nullable=False),
        pa.field("key_version", pa.int32(), nullable=False),
        pa.field("value_version", pa.int32()),
        pa.field("tombstone", pa.bool_(), nullable=False),
        pa.field("committed_offset", pa.int64()),
        pa.field("leader_epoch", pa.int32()),
        pa.field("metadata", pa.string()),
        pa.field("commit_timestamp", TIMESTAMP),
        pa.field("expire_timestamp", TIMESTAMP),
        pa.field("is_transactional", pa.bool_(), nullable=False),
        pa.field("producer_id", pa.int64(), nullable=False),
        pa.field("producer_epoch", pa.int32(), nullable=False),
        pa.field("segment_base_offset", pa.int64(), nullable=False),
        pa.field("file", pa.string(), nullable=False),
    ]
)

DECODE_ISSUES = pa.schema(
    _REPLICA
    + [
        pa.field("file", pa.string(), nullable=False),
        pa.field("position", pa.int64()),  # byte offset in the file (line number for text files)
        pa.field("kind", pa.string(), nullable=False),
        pa.field("severity", pa.string(), nullable=False),  # info | warning | error
        pa.field("detail", pa.string(), nullable=False),
    ]
)

#: What ``kafka-transactions.sh`` printed (list, describe, describe-producers, find-hanging), one row
#: per table row; an output with no rows (e.g. find-hanging finding nothing) is one row with null
#: ``line``, so that the run itself is known. Compared with txn-audit's own verdicts.
REPORTED_TRANSACTIONS = pa.schema(
    [
        pa.field("file", pa.string(), nullable=False),
        pa.field("tool", pa.string(), nullable=False),  # list | describe | describe-producers | find-hanging
        pa.field("command", pa.string()),  # the command line, when the file gives it
        pa.field("run_timestamp", TIMESTAMP),  # when the tool ran, when the file says
        pa.field("line", pa.int64()),  # line of the row in the file; null for an output without rows
        pa.field("broker_id", pa.int32()),  # find-hanging --broker-id
        pa.field("max_transaction_timeout_ms", pa.int64()),  # find-hanging --max-transaction-timeout (minutes given)
        pa.field("transactional_id", pa.string()),
        pa.field("coordinator_id", pa.int32()),
        pa.field("producer_id", pa.int64()),
        pa.field("producer_epoch", pa.int32()),
        pa.field("coordinator_epoch", pa.int32()),
        pa.field("state", pa.string()),  # coordinator state (list, describe)
        pa.field("txn_timeout_ms", pa.int64()),
        pa.field("txn_start_timestamp", TIMESTAMP),
        pa.field("topic_partitions", pa.list_(pa.struct([pa.field("topic", pa.string()),
                                                         pa.field("partition", pa.int32())]))),
        pa.field("topic", pa.string()),  # describe-producers, find-hanging
        pa.field("partition", pa.int32()),
        pa.field("start_offset", pa.int64()),  # open transaction's first offset; null when none
        pa.field("last_sequence", pa.int32()),
        pa.field("last_timestamp", TIMESTAMP),
        pa.field("duration_ms", pa.int64()),  # find-hanging Duration(min), in ms
    ]
)

RAW_TABLES: dict[str, pa.Schema] = {
    "segments": SEGMENTS,
    "batches": BATCHES,
    "control_markers": CONTROL_MARKERS,
    "txn_log": TXN_LOG,
    "producer_snapshots": PRODUCER_SNAPSHOTS,
    "aborted_txns": ABORTED_TXNS,
    "partition_offsets": PARTITION_OFFSETS,
    "metadata_partitions": METADATA_PARTITIONS,
    "remote_segments": REMOTE_SEGMENTS,
    "offset_commits": OFFSET_COMMITS,
    "decode_issues": DECODE_ISSUES,
    "reported_transactions": REPORTED_TRANSACTIONS,
}

#: Tables produced by the per-file decoders running on Spark workers.
DECODED_TABLES: tuple[str, ...] = (
    "batches",
    "control_markers",
    "txn_log",
    "producer_snapshots",
    "aborted_txns",
    "offset_commits",
    "decode_issues",
)

#: The decoded tables whose files hold each replica's rows in row groups of their own
#: (``ingest.worker.replica_runs``): the tables that tasks read replica by replica, through the
#: manifest (``txn_audit.manifest``). A row group costs about 0.4 ms to write however few its
#: rows, and a dump of thousands of partitions has thousands of small replicas; the other
#: tables (``aborted_txns``, only ever read whole) are written a row group per worker flush.
REPLICA_ROW_GROUP_TABLES: tuple[str, ...] = tuple(name for name in DECODED_TABLES if name != "aborted_txns")

#: Columns of the raw tables whose values seldom repeat within a file: offsets, file
#: positions, record and transaction times, sequences, CRCs (INT64 or INT32 all). They are stored without a
#: dictionary; as dictionaries of nearly every value they only cost each reader a dictionary to
#: decode per row group (on the 1 GiB benchmark, a scan of the batches table ran a third faster
#: without and the files were 30 % smaller). The other columns (names, ids, epochs, flags)
#: repeat and keep their dictionaries.
PLAIN_COLUMNS = frozenset({
    "position", "base_offset", "last_offset", "offset", "first_offset", "base_sequence", "last_sequence",
    "first_timestamp", "max_timestamp", "timestamp", "record_timestamp", "stored_crc", "computed_crc",
    "txn_last_update_timestamp", "txn_start_timestamp",
})
#: how ``PLAIN_COLUMNS`` are encoded: as differences from the previous value, bit-packed, which
#: rows in log order keep small (the realistic 4 GiB dump's batches: 71 MB of files against 181 MB
#: written as plain values; pyarrow writes them in 1.14 s against 1.34 s on one core, and tests
#: their rules on one row in 0.52-0.55 s against 1.04-1.16 s). Spark reads the encoding too.
PLAIN_ENCODING = "DELTA_BINARY_PACKED"


def dictionary_columns(schema: pa.Schema) -> list[str]:
    """The columns of a raw table to write dictionary-encoded (all but ``PLAIN_COLUMNS``), by the
    workers and by the driver alike."""
    return [name for name in schema.names if name not in PLAIN_COLUMNS]


def raw_writer_options(schema: pa.Schema) -> dict[str, Any]:
    """The Parquet writer's options for a file of a raw table of ``schema``, by the workers and by
    the driver alike: ``dictionary_columns`` as dictionaries, ``PLAIN_COLUMNS`` as ``PLAIN_ENCODING``."""
    return writer_options(schema, dictionary_columns(schema))


def writer_options(schema: pa.Schema, dictionary: Collection[str]) -> dict[str, Any]:
    """The Parquet writer's options (``pyarrow.parquet.ParquetWriter``'s keywords) for a file of
    ``schema`` whose columns ``dictionary`` repeat their values: those as dictionaries, the
    integer and ``TIMESTAMP`` columns among the others as ``PLAIN_ENCODING``, any other column plain."""
    return {"use_dictionary": [name for name in schema.names if name in dictionary],
            "column_encoding": {f.name: PLAIN_ENCODING for f in schema if f.name not in dictionary
                                and (pa.types.is_integer(f.type) or f.type == TIMESTAMP)}}


def repeating_columns(schema: pa.Schema) -> list[str]:
    """The columns of a file the tasks write (a derived table's, or one they hand on) whose values
    repeat, as ``writer_options`` takes them: strings (names, states), 32-bit integers
    (partitions, epochs, versions, timeouts) and producer ids; its offsets, times and counts,
    nearly unique, are not."""
    return [f.name for f in schema
            if pa.types.is_string(f.type) or pa.types.is_int32(f.type) or f.name == "producer_id"]


#: the columns that name the partition replica a raw row was read from
REPLICA_COLUMNS = tuple(f.name for f in _REPLICA)
#: the columns that name a partition replica, as every raw table has them
REPLICA_FIELDS = tuple(_REPLICA)
#: Parquet footer key under which a raw table's file lists the replicas its rows belong to (a
#: JSON list of ``REPLICA_COLUMNS`` values); ingest's manifest (``txn_audit.manifest``) carries
#: it over, and readers ask the manifest
REPLICAS_METADATA_KEY = "txn_audit.replicas"

Replica = tuple[int | None, str | None, str | None, int | None]

#: the columns that tell one partition's rows from another's in the derived frames, where each
#: partition has one copy (the chosen replicas, ``reconstruct.replicas``)
PARTITION_COLUMNS = ("topic", "partition")
#: the columns that tell one copy's rows from another's where several copies of a partition are
#: audited at once, each on its own broker (``RankedReplicas.told_apart``)
COPY_COLUMNS = ("broker_id", "topic", "partition")


def row_replicas(table: pa.Table | pa.RecordBatch) -> set[Replica]:
    """The distinct ``REPLICA_COLUMNS`` values of ``table``'s rows."""
    if not table.num_rows:
        return set()
    distinct = pa.table([table.column(name) for name in REPLICA_COLUMNS], names=list(REPLICA_COLUMNS))
    distinct = distinct.group_by(list(REPLICA_COLUMNS), use_threads=False).aggregate([])
    return set(zip(*(distinct.column(name).to_pylist() for name in REPLICA_COLUMNS), strict=True))


def replicas_metadata(replicas: set[Replica]) -> dict[str, str]:
    """The footer entry naming ``replicas`` (see ``REPLICAS_METADATA_KEY``), in a stable order."""
    import json

    ordered = sorted(replicas, key=lambda r: tuple((v is None, v if v is not None else 0) for v in r))
    return {REPLICAS_METADATA_KEY: json.dumps([list(r) for r in ordered])}


def replicas_from_metadata(metadata: dict[bytes, bytes] | None) -> set[Replica] | None:
    """The replicas a file's footer lists; None when it lists none (an older or foreign file)."""
    import json

    value = (metadata or {}).get(REPLICAS_METADATA_KEY.encode())
    if value is None:
        return None
    try:
        return {(r[0], r[1], r[2], r[3]) for r in json.loads(value)}
    except (ValueError, TypeError, IndexError, KeyError):
        return None


# -- derived tables ------------------------------------------------------------------------

_PARTITION = [pa.field("topic", pa.string(), nullable=False), pa.field("partition", pa.int32(), nullable=False)]

PARTITION_TRANSACTIONS = pa.schema(
    _PARTITION
    + [
        pa.field("broker_id", pa.int32()),  # replica the partition was read from
        pa.field("producer_id", pa.int64(), nullable=False),
        pa.field("txn_seq", pa.int64(), nullable=False),  # n-th transaction of this producer on this partition
        pa.field("transactional_id", pa.string()),
        pa.field("state", pa.string(), nullable=False),  # committed | aborted | ended (marker of unknown type) | open
        pa.field("first_offset", pa.int64()),  # first data offset (null: marker without data)
        pa.field("last_data_offset", pa.int64()),
        pa.field("marker_offset", pa.int64()),
        pa.field("marker_type", pa.string()),
        pa.field("marker_epoch", pa.int32()),
        pa.field("marker_timestamp", TIMESTAMP),
        pa.field("coordinator_epoch", pa.int32()),
        pa.field("min_epoch", pa.int32()),
        pa.field("max_epoch", pa.int32()),
        pa.field("batches", pa.int64(), nullable=False),
        pa.field("records", pa.int64(), nullable=False),
        pa.field("bytes", pa.int64(), nullable=False),
        pa.field("first_timestamp", TIMESTAMP),
        pa.field("last_timestamp", TIMESTAMP),
        pa.field("late_batches", pa.int64(), nullable=False),  # data batches that predate the previous marker
        pa.field("first_late_offset", pa.int64()),
        pa.field("prev_marker_offset", pa.int64()),
        pa.field("prev_marker_type", pa.string()),
        pa.field("prev_marker_timestamp", TIMESTAMP),
        pa.field("producer_last_timestamp", TIMESTAMP),  # the producer's last write here (find-hanging's clock)
        pa.field("source", pa.string(), nullable=False),  # log | snapshot (open before the log start)
    ]
)

TRANSACTIONS = pa.schema(
    [
        pa.field("transactional_id", pa.string()),
        pa.field("producer_id", pa.int64(), nullable=False),
        pa.field("producer_epoch", pa.int32()),
        pa.field("transaction_version", pa.int32()),  # 1 or 2 (TV2 clients), null when unknown
        pa.field("coordinator_state", pa.string()),  # the id's latest coordinator state
        pa.field("coordinator_listed", pa.list_(pa.string())),  # partitions the latest Ongoing/Prepare* lists
        pa.field("partitions_with_data", pa.list_(pa.string())),
        pa.field("open_partitions", pa.list_(pa.string())),
        pa.field("committed", pa.int64(), nullable=False),
        pa.field("aborted", pa.int64(), nullable=False),
        pa.field("open", pa.int64(), nullable=False),
        pa.field("first_timestamp", TIMESTAMP),
        pa.field("last_timestamp", TIMESTAMP),
        pa.field("txn_timeout_ms", pa.int32()),
    ]
)

#: Reconstruct's answers from the coordinator log that the pass and the rules read (never
#: written as tables): the newest coordinator record of each transactional id, with the partitions
#: it lists (only Ongoing and Prepare* list any) as ``<topic>-<partition>`` names, its times in
#: epoch ms (``in_ms``) (``coordinator_current``)...
COORDINATOR_CURRENT = pa.schema(
    [
        pa.field("transactional_id", pa.string()),
        pa.field("tombstone", pa.bool_()),
        pa.field("producer_id", pa.int64()),
        pa.field("producer_epoch", pa.int32()),
        pa.field("state", pa.string()),
        pa.field("listed", pa.list_(pa.string())),
        pa.field("txn_timeout_ms", pa.int32()),
        pa.field("txn_start_timestamp", pa.int64()),
        pa.field("txn_last_update_timestamp", pa.int64()),
        pa.field("client_transaction_version", pa.int32()),
        pa.field("txn_log_offset", pa.int64()),
        pa.field("txn_log_partition", pa.int32()),
    ]
)

#: ...and the transactional id of each producer id, from its newest record, with the transaction
#: version its client spoke (``producer_transactional_ids``)
PRODUCER_IDS = pa.schema(
    [
        pa.field("producer_id", pa.int64()),
        pa.field("transactional_id", pa.string()),
        pa.field("transaction_version", pa.int32()),  # 2 for a TV2 client, else 1
    ]
)

#: per partition: from when on the dump holds its data, its oldest batch's first timestamp
#: (``stability.manifest_extent``)
PARTITION_EXTENT = pa.schema([pa.field("topic", pa.string()), pa.field("partition", pa.int32()),
                              pa.field("covers_from", pa.int64())])

#: ``hw_source`` of a replica whose checkpointed HW lies beyond its own log end (the HW used is the log end)
HW_CAPPED = "capped_at_log_end"

#: what a replica's own data says of its partition's stability (LSO, what holds it back)
_STABILITY = [
    pa.field("high_watermark", pa.int64()),  # the HW the audit uses: the checkpointed one, never beyond the log end
    # checkpoint | offsets_file | log_end (no HW known) | capped_at_log_end (the file said more than the log holds)
    pa.field("hw_source", pa.string(), nullable=False),
    pa.field("checkpoint_high_watermark", pa.int64()),  # as the checkpoint (or offsets file) gives it
    pa.field("log_start_offset", pa.int64()),
    pa.field("log_end_offset", pa.int64()),
    pa.field("first_unstable_offset", pa.int64()),
    pa.field("last_stable_offset", pa.int64()),
    pa.field("open_transactions", pa.int64(), nullable=False),
    pa.field("held_records", pa.int64(), nullable=False),
    pa.field("held_bytes", pa.int64(), nullable=False),
    pa.field("held_since_timestamp", TIMESTAMP),
    pa.field("held_ms", pa.int64()),
    pa.field("culprit_producer_id", pa.int64()),
    pa.field("culprit_producer_epoch", pa.int32()),
    pa.field("culprit_transactional_id", pa.string()),
    # where the culprit's transaction starts: the first unstable offset as the log has it, below
    # the log start when its first records were deleted (retention, DeleteRecords: the LSO then stays at the log start,
    # or on brokers of 4.0 and later at the base offset of the batch holding it)
    pa.field("culprit_first_offset", pa.int64()),
    # the first unstable offset is the base offset of the batch holding the log start, below the
    # log start itself, as brokers of 4.0 and later report it (``reconstruct.stability.first_unstable_offset``)
    pa.field("unstable_at_batch_start", pa.bool_(), nullable=False),
    # the partition's status, computed once here and shown as is by every output: the HW the LSO
    # is computed against (``high_watermark``, or the log end when no HW is known) and whether
    # the LSO is below it (records held back from read_committed consumers)
    pa.field("effective_high_watermark", pa.int64()),
    pa.field("lso_below_hw", pa.bool_(), nullable=False),
]

#: One row per partition, from the replica chosen to speak for it (``replica_stability`` has them all).
PARTITION_STABILITY = pa.schema(
    _PARTITION
    + [pa.field("broker_id", pa.int32()), pa.field("log_dir", pa.string())]
    + _STABILITY
    + [
        pa.field("replicas", pa.int32(), nullable=False),  # live copies of the partition in the dump
        pa.field("chosen_replica", pa.string(), nullable=False),  # "broker 2 (broker-2)": whose data is audited
        pa.field("replica_choice_reason", pa.string(), nullable=False),  # the evidence that chose it
    ]
)

#: One row per live replica of every partition: each audited on its own data, and compared with
#: the chosen replica of its partition.
REPLICA_STABILITY = pa.schema(
    _REPLICA
    + _STABILITY
    + [
        pa.field("replica_rank", pa.int32(), nullable=False),  # 1: the chosen one, then in the order of the choice
        pa.field("replica_name", pa.string(), nullable=False),  # "broker 1 (broker-1)", as findings name it
        pa.field("chosen", pa.bool_(), nullable=False),
        pa.field("leader_epoch", pa.int32()),  # newest epoch in its leader-epoch-checkpoint
        pa.field("metadata_leader", pa.int32()),  # the leader the KRaft metadata log names (-1: none)
        pa.field("metadata_leader_epoch", pa.int32()),
        pa.field("in_isr", pa.bool_()),  # whether the KRaft metadata log lists it in the ISR; null: unknown
        # compared with the chosen replica: null (agrees, or is the chosen one) | conflict (the same
        # offset holds different batches) | behind (lacks offsets below the chosen one's HW) |
        # ahead (holds offsets the chosen one lacks)
        pa.field("divergence", pa.string()),
        pa.field("divergent_offset", pa.int64()),  # the first offset where it differs
        pa.field("replica_holds", pa.string()),  # what it holds at that offset
        pa.field("chosen_holds", pa.string()),  # what the chosen replica holds there
    ]
)

#: ``reconstruct.stability``'s rows, one per replica audited: its columns, its rank and the
#: columns of its partition's choice (``reconstruct.replicas.RankedReplicas.rows``), and what its
#: own data says (``_STABILITY``), its instants in epoch ms (``in_ms``). ``PARTITION_STABILITY`` and
#: ``REPLICA_STABILITY`` select theirs.
STABILITY_ROWS = in_ms(pa.schema(
    _REPLICA
    + [PARTITION_OFFSETS.field("cleaner_offset")]
    + [REPLICA_STABILITY.field(name) for name in (
        "replica_rank", "replica_name", "leader_epoch", "metadata_leader", "metadata_leader_epoch", "in_isr")]
    + [PARTITION_STABILITY.field(name) for name in ("replicas", "chosen_replica", "replica_choice_reason")]
    + _STABILITY
))

#: what a finding or an incident is (its kind, a severity: info | warning | critical) and where
_KIND_AND_PLACE = [
    pa.field("kind", pa.string(), nullable=False),
    pa.field("severity", pa.string(), nullable=False),
    pa.field("topic", pa.string()),
    pa.field("partition", pa.int32()),
    pa.field("broker_id", pa.int32()),
    pa.field("producer_id", pa.int64()),
    pa.field("producer_epoch", pa.int32()),
    pa.field("transactional_id", pa.string()),
    pa.field("first_offset", pa.int64()),
]

FINDINGS = pa.schema(
    _KIND_AND_PLACE
    + [
        pa.field("last_offset", pa.int64()),
        pa.field("first_timestamp", TIMESTAMP),
        pa.field("last_timestamp", TIMESTAMP),
        pa.field("evidence", pa.string(), nullable=False),
        pa.field("remediation", pa.string()),
        pa.field("remediation_pre_3_0", pa.string()),
        pa.field("file", pa.string()),
        # the incident (``INCIDENTS``) whose cause or consequence it is; null until incidents are built
        pa.field("incident_id", pa.string()),
    ]
)

#: one row per root cause (``txn_audit.detect.incidents``): the findings it explains are its
#: consequences, each naming it by ``incident_id``. The place is that of the cause (for a
#: transaction, its first partition in the findings' order); ``partitions`` lists every
#: partition a consequence is on.
INCIDENTS = pa.schema(
    [
        pa.field("incident_id", pa.string(), nullable=False),
    ]
    # kind: the cause (detect.incidents.INCIDENT_KINDS); severity: the worst of its findings
    + _KIND_AND_PLACE
    + [
        pa.field("partitions", pa.list_(pa.string()), nullable=False),  # "topic-partition", in order
        pa.field("consequences", pa.list_(pa.string()), nullable=False),  # its findings' kinds, in order
        pa.field("findings", pa.int32(), nullable=False),
        pa.field("held_records", pa.int64(), nullable=False),  # held from read_committed consumers
        pa.field("held_since_timestamp", TIMESTAMP),
        pa.field("summary", pa.string(), nullable=False),  # cause, consequence, impact: one paragraph
        pa.field("remediation", pa.string(), nullable=False),  # the commands, one a line, or why none
        # the commands of the remediation, one each, to be run as they are; empty when it says why none
        pa.field("commands", pa.list_(pa.string()), nullable=False),
    ]
)

#: one row per consumer group and partition whose group's committed offset sits at or below the
#: partition's last stable offset while an open transaction holds it (``detect.blocked_consumers``):
#: a read_committed consumer of the group reads nothing past the LSO until the transaction ends
BLOCKED_CONSUMERS = pa.schema(
    [
        pa.field("group_id", pa.string(), nullable=False),
        pa.field("topic", pa.string(), nullable=False),
        pa.field("partition", pa.int32(), nullable=False),
        pa.field("committed_offset", pa.int64(), nullable=False),  # the group's latest committed offset
        pa.field("commit_timestamp", TIMESTAMP),  # the commit's time (the value's commitTimestamp)
        # the commit record in __consumer_offsets: its partition and offset (kafka-dump-log shows it)
        pa.field("commit_log_partition", pa.int32(), nullable=False),
        pa.field("commit_log_offset", pa.int64(), nullable=False),
        pa.field("transactional_commit", pa.bool_(), nullable=False),  # committed by a transaction's marker
        pa.field("last_stable_offset", pa.int64(), nullable=False),
        pa.field("high_watermark", pa.int64(), nullable=False),  # partition_stability's effective_high_watermark
        pa.field("records_behind", pa.int64(), nullable=False),  # high_watermark - committed_offset (the lag)
        pa.field("records_to_lso", pa.int64(), nullable=False),  # last_stable_offset - committed_offset (0: at it)
        pa.field("held_since_timestamp", TIMESTAMP),  # the holding transaction's first record's time
        pa.field("time_behind_ms", pa.int64()),
        pa.field("time_behind_from", pa.string(), nullable=False),  # held_transaction | commit
        pa.field("culprit_producer_id", pa.int64()),
        pa.field("culprit_transactional_id", pa.string()),
    ]
)

DERIVED_TABLES: dict[str, pa.Schema] = {
    "partition_transactions": PARTITION_TRANSACTIONS,
    "transactions": TRANSACTIONS,
    "partition_stability": PARTITION_STABILITY,
    "replica_stability": REPLICA_STABILITY,
    "blocked_consumers": BLOCKED_CONSUMERS,
    "findings": FINDINGS,
    "incidents": INCIDENTS,
}

ALL_TABLES: dict[str, pa.Schema] = {**RAW_TABLES, **DERIVED_TABLES}
#: the derived tables detection writes; the others are final once the transactions are rebuilt
DETECTION_TABLES = ("findings", "incidents")



def spark_schema(schema: pa.Schema) -> StructType:
    """The Spark ``StructType`` equivalent of an Arrow schema (pyspark imported lazily)."""
    from pyspark.sql.pandas.types import from_arrow_schema

    return from_arrow_schema(schema)


def conform(df: DataFrame, schema: pa.Schema) -> DataFrame:
    """Select ``schema``'s columns from ``df`` in order, cast to their types, instants as epoch ms
    (``in_ms``); fail on a missing one."""
    have = set(df.columns)  # one call to the JVM, not one per field
    missing = [f.name for f in schema if f.name not in have]
    if missing:
        raise ValueError(f"missing columns {missing}; have {sorted(have)}")
    return df.selectExpr(*cast_select_list(schema, {name: f"`{name}`" for name in schema.names}))


def conform_table(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """``conform`` on the driver: ``schema``'s columns of ``table`` in order, cast to their types,
    instants as epoch ms (``in_ms``)."""
    missing = [name for name in schema.names if name not in table.column_names]
    if missing:
        raise ValueError(f"missing columns {missing}; have {sorted(table.column_names)}")
    return table.select(schema.names).cast(in_ms(schema))


def cast_select_list(schema: pa.Schema, sources: dict[str, str]) -> list[str]:
    """SQL select items giving ``schema``'s columns in order, each cast to its type (instants as
    epoch ms, ``in_ms``), from the SQL expression ``sources`` names for it (NULL when it names
    none). One SQL select list, because Column objects cost several calls to the JVM per column,
    and detection shapes dozens of frames."""
    return [f"CAST({sources.get(f.name, 'NULL')} AS {f.dataType.simpleString()}) AS `{f.name}`"
            for f in spark_schema(in_ms(schema)).fields]


def frame_in_ms(df: DataFrame) -> DataFrame:
    """``df`` (read from files with a declared schema) with its ``TimestampType`` columns as epoch
    ms (``unix_millis``): ``read_ms`` for Spark."""
    from pyspark.sql.types import TimestampType

    instants = {f.name for f in df.schema.fields if isinstance(f.dataType, TimestampType)}
    if not instants:
        return df
    return df.selectExpr(*(f"unix_millis(`{name}`) AS `{name}`" if name in instants else f"`{name}`"
                           for name in df.columns))


def frame_declared(df: DataFrame, schema: pa.Schema) -> DataFrame:
    """``declared`` for Spark: ``df`` (conformed, instants as epoch ms) with ``schema``'s types as it is
    written, each instant by ``timestamp_millis``, Kafka's ``NO_TIME`` made null."""
    return df.selectExpr(*(f"timestamp_millis(NULLIF(`{f.name}`, {NO_TIME})) AS `{f.name}`" if f.type == TIMESTAMP
                           else f"`{f.name}`" for f in schema))


def write_frame(df: DataFrame, schema: pa.Schema, path: str, mode: str = "errorifexists") -> None:
    """Write ``df`` (conformed to ``schema``, instants as epoch ms) as Parquet files of ``schema`` at
    ``path`` (``frame_declared``): its instants as ``TIMESTAMP(MILLIS)``, whatever the session's
    ``spark.sql.parquet.outputTimestampType`` (Spark's default, ``INT96``, is another type)."""
    df.sparkSession.conf.set("spark.sql.parquet.outputTimestampType", "TIMESTAMP_MILLIS")
    frame_declared(df, schema).write.mode(mode).parquet(path)


def read_frame(spark: SparkSession, schema: pa.Schema, *paths: str) -> DataFrame:
    """The Parquet files (or folders) at ``paths`` as a frame with ``schema``'s columns, its instants
    as epoch ms (``frame_in_ms``)."""
    return frame_in_ms(spark.read.schema(spark_schema(schema)).parquet(*paths))


#: Internal worker output, never written as a table: one row per slice task of a large
#: segment, which the driver needs to join the slices into the whole-file decode.
SLICE_SUMMARY = pa.schema(
    [
        pa.field("task", pa.int64(), nullable=False),
        pa.field("start", pa.int64(), nullable=False),
        pa.field("stop", pa.int64(), nullable=False),  # where the walk ended; the slice's end unless framing was lost
        pa.field("rows", pa.int64(), nullable=False),  # batches decoded
        pa.field("first_base_offset", pa.int64()),
        pa.field("first_position", pa.int64()),
        pa.field("last_offset", pa.int64()),
    ]
)

#: Everything the ingest workers emit, by tag: the decoded tables (as the decoders give them:
#: instants in epoch ms, ``in_ms``; typed as they are written, ``declared``) and the slice summaries.
WORKER_OUTPUTS: dict[str, pa.Schema] = {name: in_ms(RAW_TABLES[name]) for name in DECODED_TABLES} | {
    "slice_summary": SLICE_SUMMARY
}


#: What an ingest worker that writes its tables itself reports: one row per Parquet file
#: written (``file``, ``rows``) and one per slice task (``slice_summary``), each with the task tag.
WRITTEN_FILES = pa.schema(
    [
        pa.field("table", pa.string(), nullable=False),
        pa.field("task", pa.int64(), nullable=False),
        pa.field("file", pa.string()),
        pa.field("rows", pa.int64(), nullable=False),
        pa.field("slice_summary", pa.struct(list(SLICE_SUMMARY))),
    ]
)


def combined_decode_schema() -> pa.Schema:
    """Schema of the rows the ingest workers emit: a ``table`` tag, the ``task`` that made the
    row (-1 unless it is a slice of a large segment), plus one struct per worker output.

    Each emitted row fills exactly one struct column; the driver splits them per table.
    This lets one pass over the input files feed every table.
    """
    fields = [pa.field("table", pa.string(), nullable=False), pa.field("task", pa.int64(), nullable=False)]
    fields += [pa.field(name, pa.struct(list(schema))) for name, schema in WORKER_OUTPUTS.items()]
    return pa.schema(fields)
