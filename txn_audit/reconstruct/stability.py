"""Last stable offset per partition, computed the way the partition leader does.

``firstUnstable`` is the first offset of the earliest transaction that is still open, or whose
marker is not yet below the high watermark (unreplicated), clamped up to the log start
offset; ``LSO = firstUnstable if firstUnstable < HW else HW``. Where the clamp applies (records
deleted under an open transaction), brokers of Kafka 4.0 and later report the base offset of the
batch that holds the log start instead (``first_unstable_offset``). The HW is the one the broker
checkpointed (``replication-offset-checkpoint``), or for a text dump the one an offsets file
beside it reports; without either the log end is used and ``hw_source`` says so
(``checkpoint`` | ``offsets_file`` | ``log_end``). A HW beyond the replica's own log end is
capped there (``capped_at_log_end``): no LSO or held-records figure is ever reported beyond the
log it was computed from.

Computed per replica: for the chosen replica of each partition, and in the same way for each
other copy (every other copy at once, told apart by its broker, or one rank at a time).

Computed on the driver (``partition_stability``, rows of ``schemas.STABILITY_ROWS``): the
replicas are a few rows the driver ranked, and of their transactions only the unstable ones
and the open ones count, few in any dump. For the chosen copies they are read with pyarrow from
``partition_transactions``' files, a batch at a time; for the other copies, whose transactions
no table keeps, collected from their frame through the same filter in Spark
(``CANDIDATE_FILTER``); the rule that decides is ``_unstable``, on the driver, for both. Only
the records held back from ``read_committed`` consumers need the batches, and only when a
partition holds records: the batches of the held ranges, read with pyarrow from the raw
tables' files through a filter their row groups' statistics answer (``held_expression``), are
counted on the driver (``held_sums``).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from txn_audit.formats.cluster_metadata import METADATA_VERSION_4_0
from txn_audit.manifest import TableManifest, widen_extent
from txn_audit.reconstruct.transaction_files import OPEN
from txn_audit.replica_tasks.reading import manifest_dataset
from txn_audit.schemas import (
    HW_CAPPED, PARTITION_COLUMNS, PARTITION_EXTENT, PARTITION_TRANSACTIONS, REPLICA_COLUMNS, STABILITY_ROWS, in_ms,
)
from txn_audit.tables import arrow_frame

#: the most keys a filter of the batches names, so that Parquet answers it from its row groups'
#: statistics: the replicas whose records are held (``held_expression``), the files and segments a
#: rule reads (``detect.rules.batches_named``); with more, every batch is read
NAMED_MAX = 1024


def manifest_extent(files: TableManifest) -> pa.Table:
    """Per (topic, partition): ``covers_from``, the oldest ``first_timestamp``: from when on the
    dump holds its data (``PARTITION_EXTENT``), on the driver, no row read, from ``files``, the
    manifest of the batches' rows in the raw tables' files (``replica_tasks.replicas_rows``),
    whose row groups each give their extent (what ingest writes, ``TableManifest.extents``)."""
    extents = files.extents()
    if extents is None:
        raise ValueError("the batches' files do not give each row group's extent")
    per_partition: dict[tuple[str | None, int | None], tuple[int | None, int | None]] = {}
    topic, partition = REPLICA_COLUMNS.index("topic"), REPLICA_COLUMNS.index("partition")
    for replica, (_highest, lowest) in extents.items():
        key: tuple[str | None, int | None] = (replica[topic], replica[partition])  # type: ignore[assignment]  # REPLICA_COLUMNS' topic and partition
        widen_extent(per_partition, key, None, lowest)
    rows = [{"topic": t, "partition": p, "covers_from": lowest}
            for (t, p), (_none, lowest) in sorted(per_partition.items())]
    return pa.Table.from_pylist(rows, schema=PARTITION_EXTENT)


#: the columns of ``partition_transactions`` the stability reads
TRANSACTION_COLUMNS = ("state", "first_offset", "marker_offset", "producer_id", "max_epoch", "transactional_id",
                       "first_timestamp", "producer_last_timestamp")


def replica_bounds(replica: Mapping[str, Any]) -> dict[str, Any]:
    """A replica's row (``replicas.RankedReplicas.rows``) with the HW its LSO is measured against:
    ``hw`` (the checkpointed HW, else the log end, else the log start, else 0; the log end when
    the checkpoint says more than a copy cut short holds, ``cut_short``), ``hw_source``,
    ``high_watermark`` (capped like ``hw``), ``checkpoint_high_watermark`` (as the file said) and
    ``log_end_offset`` (the log start when no batch gives it)."""
    capped = bool(replica.get("cut_short"))  # replica_choice.CopyFacts.torn
    high, end, start = replica.get("high_watermark"), replica.get("log_end_offset"), replica.get("log_start_offset")
    source: str
    if capped:
        source, hw = HW_CAPPED, end
    elif high is not None:
        given = replica.get("hw_source")
        source, hw = ("checkpoint" if given is None else str(given)), high
    else:
        source, hw = "log_end", next((v for v in (end, start) if v is not None), 0)
    return {**replica, "checkpoint_high_watermark": high, "hw_source": source, "hw": hw,
            "high_watermark": end if capped else high, "log_end_offset": end if end is not None else start}


def _hw_table(bounds: Sequence[Mapping[str, Any]], keys: tuple[str, ...]) -> pa.Table:
    """Each replica's ``keys`` and ``hw``, for the filters of its transactions."""
    fields = [STABILITY_ROWS.field(key) for key in keys] + [pa.field("hw", pa.int64())]
    return pa.Table.from_pylist([{key: b[key] for key in (*keys, "hw")} for b in bounds], schema=pa.schema(fields))


#: the transactions ``_unstable`` may count, as Spark SQL over rows joined with their replica's
#: ``hw``: open ones, and those whose marker is not below the HW (``_candidates`` on the driver)
CANDIDATE_FILTER = f"state = '{OPEN}' OR marker_offset >= hw"


def _candidates(rows: pa.Table) -> pa.Table:
    """``CANDIDATE_FILTER`` over rows joined with ``hw``, on the driver."""
    open_ = pc.equal(rows["state"], OPEN)
    unreplicated = pc.greater_equal(rows["marker_offset"], rows["hw"])
    return rows.filter(pc.or_kleene(open_, unreplicated).fill_null(False))


def transaction_candidates(transactions: Iterable[pa.RecordBatch], bounds: Sequence[Mapping[str, Any]],
                           keys: tuple[str, ...]) -> pa.Table:
    """The rows of the replicas' transactions (``keys`` and ``TRANSACTION_COLUMNS`` of
    ``partition_transactions`` rows, as record batches read on the driver) that
    ``CANDIDATE_FILTER`` keeps, with their replica's ``hw``: each batch joined with the replicas
    and filtered in turn."""
    hws = _hw_table(bounds, keys)
    columns = [*keys, *TRANSACTION_COLUMNS]
    parts = [_candidates(pa.Table.from_batches([batch]).select(columns).join(hws, list(keys), join_type="inner")
                         .select([*columns, "hw"]))
             for batch in transactions if batch.num_rows]
    schema = _candidate_schema(keys)
    return pa.concat_tables([part.cast(schema) for part in parts]) if parts else schema.empty_table()


def narrowed_candidates(transactions: DataFrame, replicas: Sequence[Mapping[str, Any]],
                        keys: tuple[str, ...]) -> Iterator[pa.RecordBatch]:
    """The few rows of a frame of ``partition_transactions`` rows (the other copies', which no
    table keeps) that ``CANDIDATE_FILTER`` keeps for ``replicas``, narrowed in Spark and collected
    as record batches, for ``partition_stability``."""
    hws = _hw_table([replica_bounds(replica) for replica in replicas], keys)
    found = (transactions.select(*keys, *TRANSACTION_COLUMNS)
             .join(F.broadcast(arrow_frame(transactions.sparkSession, hws)), list(keys))
             .where(CANDIDATE_FILTER).toArrow())
    yield from found.select([*keys, *TRANSACTION_COLUMNS]).to_batches()


def _candidate_schema(keys: tuple[str, ...]) -> pa.Schema:
    """``transaction_candidates``' columns: ``keys``, ``TRANSACTION_COLUMNS``, ``hw``."""
    return pa.schema([STABILITY_ROWS.field(key).with_nullable(True) for key in keys]
                     + [in_ms(PARTITION_TRANSACTIONS).field(name).with_nullable(True) for name in TRANSACTION_COLUMNS]
                     + [pa.field("hw", pa.int64())])


def _unstable(row: Mapping[str, Any]) -> bool:
    """A transaction that holds the LSO: it has a first offset and is open, or its marker is not
    yet below the HW (``transaction_candidates``' rows)."""
    if row["first_offset"] is None:
        return False
    marker = row["marker_offset"]
    return row["state"] == OPEN or (marker is not None and marker >= row["hw"])


def first_unstable_offset(first_offset: int, log_start: int | None, batch_start: int | None) -> int:
    """The broker's first unstable offset for a transaction open from ``first_offset``: the
    offset itself, clamped up to the log start (``UnifiedLog.maybeIncrementFirstUnstableOffset``:
    ``max(firstOffset, logStartOffset)``). That offset is then turned into a position in the log;
    brokers of 4.0 and later report the base offset of the batch holding it (``batch_start``, given
    only for them and only where the clamp applies; observed on 4.0.2, 4.1.2 and 4.4.0 in
    ``tests/corpus/*/delete-records-open``, where 3.9.2 reports the log start itself)."""
    if log_start is None or first_offset >= log_start:
        return first_offset
    return log_start if batch_start is None else max(first_offset, batch_start)


def partition_stability(
    batch_files: TableManifest, transactions: Iterable[pa.RecordBatch],
    replicas: Sequence[Mapping[str, Any]], *, as_of_ms: int, keys: tuple[str, ...] = PARTITION_COLUMNS,
) -> pa.Table:
    """One row per replica of ``replicas`` (``replicas.RankedReplicas.rows``), ``STABILITY_ROWS``,
    from its transactions (``transaction_candidates``: record batches of ``partition_transactions``
    rows, read on the driver from the table's files, or ``narrowed_candidates``' of the other
    copies); the batches are read again only for replicas whose records are held
    (``_held_counts``: with pyarrow from ``batch_files``, the manifest of the replicas' batches in
    the raw tables' files). ``keys`` tell the replicas' rows apart in every frame: a partition's
    (``PARTITION_COLUMNS``) when ``replicas`` hold at most one copy per partition (the chosen
    ones, or those of one rank), a copy's (``COPY_COLUMNS``) for several ranks at once.

    The HW is never beyond the replica's own log end: a checkpoint that says more (a copy cut
    short, ``cut_short``: its log lost its tail after the checkpoint was written) is capped there, ``hw_source`` says
    ``capped_at_log_end`` and ``checkpoint_high_watermark`` keeps what the file said."""
    bounds = [replica_bounds(replica) for replica in replicas]
    open_count: dict[tuple[Any, ...], int] = {}
    first: dict[tuple[Any, ...], dict[str, Any]] = {}
    for row in transaction_candidates(transactions, bounds, keys).to_pylist():
        key = tuple(row[k] for k in keys)
        if row["state"] == OPEN:
            open_count[key] = open_count.get(key, 0) + 1
        # the earliest unstable transaction; of two at one offset (never on one log), the lower producer id
        if _unstable(row) and (key not in first or (row["first_offset"], row["producer_id"] or 0)
                               < (first[key]["first_offset"], first[key]["producer_id"] or 0)):
            first[key] = row
    starts = _batch_starts(batch_files, [
        replica for replica in bounds if (culprit := first.get(tuple(replica[k] for k in keys))) is not None
        and _reports_batch_start(replica, culprit["first_offset"])])
    rows = []
    for replica in bounds:
        key = tuple(replica[k] for k in keys)
        culprit = first.get(key)
        hw = replica["hw"]
        unstable = None if culprit is None else first_unstable_offset(
            culprit["first_offset"], replica["log_start_offset"],
            starts.get(tuple(replica[name] for name in _REPLICA_OF_ROW)))
        rows.append({
            **replica,
            "open_transactions": open_count.get(key, 0),
            "first_unstable_offset": unstable,
            "unstable_at_batch_start": unstable is not None and unstable < (replica["log_start_offset"] or 0),
            "last_stable_offset": unstable if unstable is not None and unstable < hw else hw,
            "culprit_first_offset": None if culprit is None else culprit["first_offset"],  # before the clamp
            **{f"culprit_{name}": None if culprit is None else culprit[column] for name, column in _CULPRIT.items()},
        })
    return _with_held(rows, _held_counts(batch_files, rows, keys), as_of_ms, keys)


#: the culprit's columns (``culprit_<name>``) and the transaction's column each is taken from
_CULPRIT = {"producer_id": "producer_id", "producer_epoch": "max_epoch", "transactional_id": "transactional_id",
            "first_timestamp": "first_timestamp", "last_timestamp": "producer_last_timestamp"}


def _reports_batch_start(replica: Mapping[str, Any], first_offset: int) -> bool:
    """The replica's log start is past ``first_offset`` and its cluster's ``metadata.version``
    proves brokers of 4.0 or later, which report the LSO at a batch's start there."""
    start, version = replica.get("log_start_offset"), replica.get("metadata_version")
    return start is not None and first_offset < start and version is not None and version >= METADATA_VERSION_4_0


#: the batches' columns a batch holding an offset is found from
_AT_READ = ("log_dir", "topic", "partition", "base_offset", "last_offset")


def _batch_starts(batch_files: TableManifest, replicas: Sequence[Mapping[str, Any]]) -> dict[tuple[Any, ...], int]:
    """Per replica of ``replicas`` (by log dir, topic and partition), the base offset of its batch
    (data or control) that holds its log start offset; none where no batch holds it (a log start
    between batches). Read with pyarrow from ``batch_files``."""
    dataset = manifest_dataset(batch_files)
    if not replicas or dataset is None:
        return {}
    condition = ds.scalar(False)
    for row in replicas:
        start = row["log_start_offset"]
        condition = condition | ((ds.field("base_offset") <= start) & (ds.field("last_offset") >= start)
                                 & (ds.field("topic") == row["topic"]) & (ds.field("partition") == row["partition"])
                                 & (ds.field("log_dir") == row["log_dir"]))
    found = dataset.to_table(columns=list(_AT_READ), filter=condition).to_pylist()
    return {(row["log_dir"], row["topic"], row["partition"]): row["base_offset"] for row in found}


def _is_held(row: Mapping[str, Any]) -> bool:
    """The replica's last stable offset is below its high watermark: records are held."""
    return bool(row["last_stable_offset"] < row["hw"])


#: the batches' columns the held records are counted from; a replica's rows are told apart by
#: its log dir, topic and partition (a log dir holds one copy of a partition)
HELD_READ = ("log_dir", "topic", "partition", "base_offset", "last_offset", "size_bytes")
_REPLICA_OF_ROW = ("log_dir", "topic", "partition")


def _held_counts(batch_files: TableManifest, rows: Sequence[Mapping[str, Any]],
                 keys: tuple[str, ...]) -> dict[tuple[Any, ...], tuple[int, int]]:
    """Per replica of ``rows`` (``keys``) whose records are held, the records and bytes of its
    data batches from its LSO to its HW (``held_sums``); nothing read when none is held (the
    usual case). The batches are read with pyarrow from ``batch_files``, the manifest of the
    replicas' batches in the raw tables' files, a record batch at a time."""
    held = [row for row in rows if _is_held(row)]
    if not held:
        return {}
    ranges = pa.Table.from_pylist(
        [{name: row[name] for name in _REPLICA_OF_ROW} | {"last_stable_offset": row["last_stable_offset"],
                                                        "hw": row["hw"]} for row in held],
        schema=pa.schema([STABILITY_ROWS.field(name) for name in _REPLICA_OF_ROW]
                         + [pa.field("last_stable_offset", pa.int64()), pa.field("hw", pa.int64())]))
    condition = ~ds.field("is_control")
    if len(held) <= NAMED_MAX:
        condition = condition & held_expression(held)
    dataset = manifest_dataset(batch_files)
    found = [] if dataset is None else dataset.to_batches(columns=list(HELD_READ), filter=condition)
    sums = held_sums(found, ranges)
    return {tuple(row[key] for key in keys): sums.get(tuple(row[name] for name in _REPLICA_OF_ROW), (0, 0))
            for row in held}


def held_sums(batches: Iterable[pa.RecordBatch], ranges: pa.Table) -> dict[tuple[Any, ...], tuple[int, int]]:
    """Records and bytes per replica of ``ranges`` (log dir, topic, partition, its LSO and HW)
    in ``batches`` (``HELD_READ`` of data batches, any others among them): the batches that end
    at or after the LSO and start below the HW, those straddling either counted by their offsets
    inside the range."""
    totals: dict[tuple[Any, ...], tuple[int, int]] = {}
    for batch in batches:
        if not batch.num_rows:
            continue
        rows = pa.Table.from_batches([batch]).select(list(HELD_READ)).join(
            ranges, list(_REPLICA_OF_ROW), join_type="inner")
        lso, hw = rows["last_stable_offset"], rows["hw"]
        rows = rows.filter(pc.and_(pc.greater_equal(rows["last_offset"], lso), pc.less(rows["base_offset"], hw)))
        if not rows.num_rows:
            continue
        last = pc.min_element_wise(rows["last_offset"], pc.subtract(rows["hw"], 1))
        first = pc.max_element_wise(rows["base_offset"], rows["last_stable_offset"])
        counted = rows.append_column("records", pc.add(pc.subtract(last, first), 1)).append_column(
            "bytes", pc.cast(rows["size_bytes"], pa.int64()))
        grouped = counted.group_by(list(_REPLICA_OF_ROW)).aggregate([("records", "sum"), ("bytes", "sum")])
        for row in grouped.to_pylist():
            key = tuple(row[name] for name in _REPLICA_OF_ROW)
            records, size = totals.get(key, (0, 0))
            totals[key] = (records + row["records_sum"], size + row["bytes_sum"])
    return totals


def held_expression(held: Sequence[Mapping[str, Any]]) -> ds.Expression:
    """A filter of the batches that may hold records of the ``held`` replicas (rows naming the
    replica, ``last_stable_offset`` and ``hw``): those that end at or after the LSO and start
    below the HW, which Parquet answers from its row groups' statistics first (a row group holds
    a part of one segment's batches, in offset order), so the batches of other partitions and
    the older segments are not read."""
    condition = ds.scalar(False)
    for row in held:
        term = ((ds.field("last_offset") >= row["last_stable_offset"]) & (ds.field("base_offset") < row["hw"])
                & (ds.field("topic") == row["topic"]) & (ds.field("partition") == row["partition"])
                & (ds.field("log_dir") == row["log_dir"]))
        condition = condition | term
    return condition


def _with_held(rows: Sequence[dict[str, Any]], held: Mapping[tuple[Any, ...], tuple[int, int]], as_of_ms: int,
               keys: tuple[str, ...]) -> pa.Table:
    """``rows`` with what ``held`` (records and bytes per replica of ``keys``) says, as
    ``STABILITY_ROWS``: the culprit is named only where records are held, since when."""
    out = []
    for row in rows:
        records, size = held.get(tuple(row[key] for key in keys), (0, 0))
        is_held = _is_held(row)
        since = None
        if is_held:
            since = next((v for v in (row["culprit_first_timestamp"], row["culprit_last_timestamp"]) if v is not None),
                         None)
        named = since is not None
        out.append({
            **row,
            "held_records": records, "held_bytes": size,
            "held_since_timestamp": since, "held_ms": None if since is None else as_of_ms - since,
            **{name: row[name] if named else None for name in (
                "culprit_producer_id", "culprit_producer_epoch", "culprit_transactional_id", "culprit_first_offset")},
            "effective_high_watermark": row["hw"],
            "lso_below_hw": is_held,
        })
    return pa.Table.from_pylist([{name: row.get(name) for name in STABILITY_ROWS.names} for row in out],
                                schema=STABILITY_ROWS)

