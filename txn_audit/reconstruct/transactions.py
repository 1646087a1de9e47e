"""Transactions per partition, rebuilt the way a partition leader's producer state sees them.

For each (topic, partition, producer id), data batches written with the transactional flag and
COMMIT/ABORT markers are taken in offset order; every marker closes the producer's open
transaction on that partition, so the n-th transaction is everything after the (n-1)-th
marker up to and including the n-th. Data left after the last marker is an open transaction.
An empty control batch (compaction leftover) is no marker, as for the broker.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import cast

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import Column, DataFrame, Observation, SparkSession, Window
from pyspark.sql.types import BooleanType, IntegerType, LongType, StructField, StructType
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.window import WindowSpec
from pyspark.sql import functions as F

from txn_audit.formats.layout import COMPACTED_TOPICS  # their producers' sequences are not checked
from txn_audit.formats.layout import TRANSACTION_STATE_TOPIC
from txn_audit.formats.model import LAST_PRODUCER_EPOCH, PREPARE_STATES
from txn_audit.reconstruct.ordered_pass import (
    DATA,
    KEY_COLUMNS,
    MARKER,
    MARKER_FIELDS,
    MAXIMA,
    PASS_INPUT,
    SEQUENCE_FIELDS,
    Const,
    transaction_pass,
    txn_fields,
)
from txn_audit.reconstruct.pass_files import PASS_ITEM, item_weight, pass_items, pass_over_files
from txn_audit.reconstruct.coordinator_pass import (
    COORDINATOR_PASS,
    EPOCH_RECORD,
    LISTING_STATES,
    coordinator_over_files,
    newest_current,
    newest_producer_ids,
)
from txn_audit.reconstruct.producer_summary import READ as SUMMARY_READ
from txn_audit.reconstruct.producer_summary import summarize_producers
from txn_audit.reconstruct.prepare_follows import (
    ABORT_MARKER,
    COMMIT_MARKER,
    COMMIT_STATE,
    FOLLOW_FIELDS,
    PREPARE_FIELDS,
)
from txn_audit.reconstruct.divergence import compare_replicas
from txn_audit.manifest import TableManifest
from txn_audit.reconstruct.replicas import (
    chosen_replicas,
    on_replicas,
    RankedReplicas,
    ranked_replicas,
)
from txn_audit.reconstruct.transaction_files import (
    ENDED,
    FROM_LOG,
    MARKER_STATES,
    OPEN,
    pass_writing_transactions,
)
from txn_audit.replica_tasks import drop_table, finish_table, new_job, replicas_rows, start_table, tasks_over_items
from txn_audit.replica_tasks.commit import TableFile, file_name
from txn_audit.replica_tasks.reading import REPLICA_FILES_ITEM, item_int, manifest_dataset, replica_file_items
from txn_audit.reconstruct.stability import TRANSACTION_COLUMNS as STABILITY_READ
from txn_audit.reconstruct.stability import manifest_extent, partition_extent, partition_stability
from txn_audit.schemas import (
    COORDINATOR_CURRENT,
    COPY_COLUMNS,
    DERIVED_TABLES,
    PARTITION_COLUMNS,
    PARTITION_STABILITY,
    PARTITION_TRANSACTIONS,
    PRODUCER_IDS,
    REPLICA_COLUMNS,
    REPLICA_STABILITY,
    Replica,
    cast_select_list,
    conform,
    conform_table,
    spark_schema,
)
from txn_audit.tables import RawTables, arrow_frame, read_arrow_table
from txn_audit.spark import side_by_side

KEY = ("topic", "partition", "producer_id")


def _partition_name(topic: Column, partition: Column) -> Column:
    return F.concat(topic, F.lit("-"), partition.cast("string"))




def producer_pass(batches: DataFrame, markers: DataFrame, *, late_tolerance_ms: int,
                  batch_files: TableManifest | None = None, marker_files: TableManifest | None = None) -> DataFrame:
    """One ordered pass over every data batch written with a producer id (transactional or
    idempotent) and every COMMIT/ABORT marker, per (topic, partition, producer id) in offset
    order. When ``batch_files`` and ``marker_files`` are the manifests of the frames' rows in the
    raw tables' files (``replica_tasks.replicas_rows``), each task reads one replica's rows from
    them in log order (``pass_files``); otherwise Spark shuffles
    and sorts the rows. Its rows have two struct columns, one of them null
    (``ordered_pass.transaction_pass``):

    * ``event``: the rows a rule may flag, with what the rows before them say: ``txn_seq``
      (earlier markers) and the previous marker (``prev_marker_*``), from which lateness is
      judged (a transactional data batch is *late* when its newest record was created more than
      ``late_tolerance_ms`` before the previous marker of its producer, or when it carries an
      epoch below that marker's: a TV2 marker bumps the epoch); ``prev_seq_*``, the previous
      batch with a sequence (not on compacted topics), for gaps; ``max_*_epoch_before``, the
      highest data, marker and coordinator epoch seen before;
    * ``txn``: one per transaction (``ordered_pass.TXN_FIELDS``): every marker closes the
      producer's open transaction on that partition, data after the last marker is open.

    Use ``producer_events`` and ``transaction_rows`` to read them.
    """
    items = _pass_items(batches, batch_files, marker_files)
    output = _pass_output(batches, markers)
    if items is not None:
        # each task reads its replicas' rows from the files itself
        body = functools.partial(pass_over_files, late_tolerance_ms=late_tolerance_ms,
                                 unsequenced_topics=COMPACTED_TOPICS)
        return tasks_over_items(batches.sparkSession, items, PASS_ITEM, body, output, weight=item_weight)

    def walk(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        return transaction_pass(batches, late_tolerance_ms=late_tolerance_ms, unsequenced_topics=COMPACTED_TOPICS)

    # each producer's rows on a partition end up together in one task, in offset order
    ordered = _pass_rows(batches, markers).repartition(*KEY).sortWithinPartitions(*KEY, "offset")
    return ordered.mapInArrow(walk, output)  # type: ignore[arg-type]  # pyspark's stub types mapInArrow's function too narrowly


def producer_pass_writing(batches: DataFrame, markers: DataFrame, producer_ids: pa.Table,
                          coordinator_log: CoordinatorLog, directory: str, follows_dir: str, *,
                          late_tolerance_ms: int, batch_files: TableManifest | None,
                          marker_files: TableManifest | None) -> DataFrame | None:
    """``producer_pass`` whose tasks write the transactions themselves, as the files of
    ``partition_transactions`` in ``directory`` (``transaction_files``), rather than return them:
    its ``txn`` column is always null. They also write what follows each of the coordinator
    log's Prepare* records (``CoordinatorLog.prepare_files``), once per record and partition
    listed, whether a task reads that partition or not, as files of
    ``prepare_follows.FOLLOW_FIELDS`` in ``follows_dir``. None unless ``batch_files`` and
    ``marker_files`` are the manifests of both frames' rows (as for ``producer_pass``) and name
    some replica. ``producer_ids``: each producer id's transactional id (``PRODUCER_IDS``, built
    on the driver), handed to every task with its function. The files are written when the frame
    is computed: compute it once, then call ``written_partition_transactions`` and
    ``written_prepare_follows``. The tables are committed as ``replica_tasks`` says."""
    items = _pass_items(batches, batch_files, marker_files)
    if not items:
        return None
    start_table(directory)
    start_table(follows_dir)
    output = _pass_output(batches, markers)
    # the records on partitions no item reads go to the task of the last (lightest) item
    read = sorted({(str(item["topic"]), item_int(item, "partition")) for item in items})
    body = functools.partial(pass_writing_transactions, late_tolerance_ms=late_tolerance_ms,
                             unsequenced_topics=COMPACTED_TOPICS, directory=directory, job=new_job(),
                             output=to_arrow_schema(output), prepares_dir=coordinator_log.prepare_files(),
                             follows_dir=follows_dir, strays_task=len(items) - 1, read_partitions=read,
                             producer_ids=producer_ids.select(["producer_id", "transactional_id"]))
    return tasks_over_items(batches.sparkSession, items, PASS_ITEM, body, output, weight=item_weight)


def written_prepare_follows(spark: SparkSession, follows_dir: str) -> DataFrame:
    """What ``producer_pass_writing``'s tasks wrote into ``follows_dir``, once that pass has been
    computed: one row per Prepare* record and partition it lists (``FOLLOW_FIELDS``)."""
    finish_table(follows_dir, FOLLOW_FIELDS)
    return spark.read.schema(spark_schema(FOLLOW_FIELDS)).parquet(follows_dir)


def _set_rows(frame: DataFrame, column: str) -> DataFrame:
    """The rows of a pass's output (one struct column set in each, the others null) that set
    struct ``column``, as that struct's columns."""
    return frame.where(F.col(column).isNotNull()).select(f"{column}.*")


def _pass_output(batches: DataFrame, markers: DataFrame) -> StructType:
    """The schema of ``producer_pass``'s rows."""
    rows = _pass_rows(batches, markers)
    added = StructType([
        StructField("txn_seq", LongType()),
        *[StructField(name, rows.schema[column].dataType) for name, column in MARKER_FIELDS.items()],
        *[StructField(name, rows.schema[column].dataType) for name, column in SEQUENCE_FIELDS.items()],
        *[StructField(name, IntegerType()) for name in MAXIMA],
        StructField("is_late", BooleanType()),
    ])
    txn = StructType([*[rows.schema[name] for name in KEY_COLUMNS], *spark_schema(pa.schema(txn_fields())).fields])
    return StructType([StructField("event", StructType(rows.schema.fields + added.fields)), StructField("txn", txn)])


def _pass_rows(batches: DataFrame, markers: DataFrame) -> DataFrame:
    """The pass's input rows (``ordered_pass.PASS_INPUT``): data batches with a producer id, and markers."""
    def side(frame: DataFrame, index: int) -> DataFrame:
        columns = []
        for name, sources in PASS_INPUT.items():
            source = sources[index]
            if isinstance(source, Const):
                kind = spark_schema(pa.schema([pa.field(name, source.type)])).fields[0].dataType
                columns.append(F.lit(source.value).cast(kind).alias(name))
            else:
                columns.append(F.col(source).alias(name))
        return frame.select(*columns)

    data = batches.where(~F.col("is_control") & (F.col("producer_id") >= 0))
    return side(data, DATA).unionByName(side(markers, MARKER))


def _pass_items(batches: DataFrame, batch_files: TableManifest | None,
                marker_files: TableManifest | None) -> list[dict[str, object]] | None:
    """``pass_files.PASS_ITEM`` rows when the manifests of both tables' files are given; None
    otherwise (then the pass shuffles and sorts the rows in Spark)."""
    if batch_files is None or marker_files is None:
        return None
    parallelism = batches.sparkSession.sparkContext.defaultParallelism
    return pass_items(batch_files, marker_files, parallelism)


def producer_events(passed: DataFrame) -> DataFrame:
    """The ``event`` rows of ``producer_pass``: the producer rows a rule may flag."""
    return _set_rows(passed, "event")


def transaction_rows(passed: DataFrame) -> DataFrame:
    """The ``txn`` rows of ``producer_pass``: one per transaction of a producer on a partition."""
    return _set_rows(passed, "txn")


def producer_last_writes(txns: DataFrame, keys: tuple[str, ...] = PARTITION_COLUMNS) -> DataFrame:
    """Per producer id on each replica of ``keys`` (``partition_stability``'s): the time of the
    producer's last transactional write there, the newest record of the last event of its last
    transaction."""
    return txns.groupBy(*keys, "producer_id").agg(
        F.max_by("last_event_timestamp", "txn_seq").alias("producer_last_timestamp"))


def _listed_partitions() -> Column:
    """``<topic>-<partition>`` names a coordinator state lists: only Ongoing and Prepare* list any."""
    return F.when(
        F.col("state").isin(*LISTING_STATES),
        F.transform(F.coalesce("topic_partitions", F.array()),
                    lambda tp: _partition_name(tp["topic"], tp["partition"])),
    ).otherwise(F.array().cast("array<string>"))


def _newest(frame: DataFrame, window: WindowSpec) -> DataFrame:
    """The first row of each ``window`` partition in its order."""
    return frame.withColumn("_rank", F.row_number().over(window)).where(F.col("_rank") == 1)


def producer_transactional_ids(txn_log: DataFrame) -> DataFrame:
    """(producer_id, transactional_id) pairs the coordinator log ever recorded."""
    return _producer_ids_of(txn_log.where(~F.col("tombstone") & (F.col("producer_id") >= 0)))


def _producer_ids_of(pairs: DataFrame) -> DataFrame:
    """``producer_transactional_ids`` from ``pairs``: coordinator records that are no tombstone
    and name a producer id, or the newest of them per producer id and partition (``CoordinatorLog``)."""
    latest = Window.partitionBy("producer_id").orderBy(F.col("offset").desc(), F.col("transactional_id"))
    return (
        _newest(pairs.select("producer_id", "transactional_id", "client_transaction_version", "offset"), latest)
        .select(
            "producer_id",
            "transactional_id",
            F.when(F.col("client_transaction_version") >= 2, F.lit(2)).otherwise(F.lit(1)).alias("transaction_version"),
        )
    )


def coordinator_current(txn_log: DataFrame) -> DataFrame:
    """The latest coordinator record per transactional id, with the partitions it lists
    (only Ongoing and Prepare* list any: the partitions still awaiting markers). ``txn_log``: the
    coordinator log's records, or the newest of them per id and partition (``CoordinatorLog``)."""
    latest = Window.partitionBy("transactional_id").orderBy(F.col("partition").desc(), F.col("offset").desc())
    return (
        _newest(txn_log, latest)
        .select(
            "transactional_id",
            "tombstone",
            "producer_id",
            "producer_epoch",
            "state",
            _listed_partitions().alias("listed"),
            "txn_timeout_ms",
            "txn_start_timestamp",
            "txn_last_update_timestamp",
            "client_transaction_version",
            F.col("offset").alias("txn_log_offset"),
            F.col("partition").alias("txn_log_partition"),
        )
    )


def epoch_candidates(txn_log: DataFrame) -> DataFrame:
    """The records the coordinator epoch rule may flag (``coordinator_pass.EPOCH_FIELDS``): of the
    records that are no tombstone, those of the last epoch or two above the id's previous such
    record's, each with that previous record (``prev_*``) and the producer id of the id's newest
    (``now_producer_id``). One window over the id's records."""
    order = Window.partitionBy("transactional_id").orderBy("partition", "offset")
    whole = order.rowsBetween(Window.unboundedPreceding, Window.unboundedFollowing)
    rows = txn_log.where(~F.col("tombstone")).select(
        *EPOCH_RECORD,
        F.last("producer_id").over(whole).alias("now_producer_id"),
        *[F.lag(name).over(order).alias(f"prev_{name}") for name in ("state", "producer_id", "producer_epoch",
                                                                        "offset")],
    )
    return rows.where((F.col("producer_epoch") == LAST_PRODUCER_EPOCH)
                      | (F.col("producer_epoch") == F.col("prev_producer_epoch") + 2))


def log_partitions(replicas: Iterable[Replica]) -> int | None:
    """The coordinator log's partition count as far as a dump shows it: one more than the highest
    partition of ``__transaction_state`` among ``replicas`` (every partition folder, records or
    none); None without one. Kafka places a transactional id by that count: a dump without the
    last partition's folder shows too few, and the ids then seem misplaced (never the reverse)."""
    found = [partition for _, _, topic, partition in replicas
             if topic == TRANSACTION_STATE_TOPIC and partition is not None]
    return 1 + max(found) if found else None


def _in_two_partitions(passed: DataFrame) -> bool:
    """Whether a transactional id has records in two partitions of the coordinator log, from the
    ``current`` rows of its pass (one per id and partition)."""
    newest = _set_rows(passed, "current").select("transactional_id")
    return not newest.groupBy("transactional_id").count().where(F.col("count") > 1).isEmpty()


@dataclass(frozen=True)
class CoordinatorLog:
    """What reconstruct reads of the coordinator log (``records``: the chosen replicas' records):
    its Prepare* records (``prepare_records``), each transactional id's newest record
    (``coordinator_current``) and each producer id's transactional id
    (``producer_transactional_ids``), both as rows on the driver, and the records the epoch rule may flag
    (``epoch_candidates``). From one pass over the log's files (``coordinator_pass``,
    computed once: ``passed``) when their manifest is given, and no transactional id has records
    in two of the log's partitions (the pass orders each partition alone); otherwise from
    windows over every record. ``prepares_dir``: a folder for the Prepare* records' files
    (``prepare_files``), which the pass's tasks write when it runs; None: they stay in ``passed``."""

    records: DataFrame
    passed: DataFrame | None = None
    prepares_dir: str | None = None

    @classmethod
    def of(cls, records: DataFrame, files: TableManifest | None, prepares_dir: str | None = None,
           partitions: int | None = None) -> CoordinatorLog:
        """``records``' log, passed over through ``files`` (the manifest of their rows) when
        given; its Prepare* records written into ``prepares_dir`` when given. ``partitions``:
        the log's partition count as far as the dump shows it (``log_partitions``; None: as far
        as ``files`` show it), which tells the pass where each transactional id belongs."""
        items = [] if files is None else replica_file_items(files)
        if not items:
            return cls(records, prepares_dir=prepares_dir)
        if partitions is None and files is not None:
            partitions = log_partitions(files.replicas() or ())
        body = functools.partial(coordinator_over_files, partitions=partitions)
        if prepares_dir is not None:
            start_table(prepares_dir)
            body = functools.partial(body, prepares_dir=prepares_dir, job=new_job())
        # how many ids are not where their hash places them, counted while the pass runs
        placement = Observation()
        passed = tasks_over_items(records.sparkSession, items, REPLICA_FILES_ITEM, body,
                                  spark_schema(COORDINATOR_PASS)).observe(
            placement, F.coalesce(F.sum("misplaced"), F.lit(0)).alias("misplaced")).localCheckpoint(eager=True)
        # every id where its hash places it: none is in two partitions, with no grouping of them
        if placement.get["misplaced"] and _in_two_partitions(passed):
            # an id in two partitions: the Prepare* records' next states need the window
            if prepares_dir is not None:
                drop_table(prepares_dir)
            return cls(records, prepares_dir=prepares_dir)
        if prepares_dir is not None:
            finish_table(prepares_dir, PREPARE_FIELDS)
        return cls(records, passed, prepares_dir)

    def prepares(self) -> DataFrame:
        """The Prepare* records, once per partition listed: ``prepare_records``' columns, or
        (from the pass) ``prepare_follows.PREPARE_FIELDS``, all that ``producer_pass_writing`` reads."""
        if self.passed is None:
            return prepare_records(self.records)
        if self.prepares_dir is not None:
            return self.records.sparkSession.read.schema(spark_schema(PREPARE_FIELDS)).parquet(self.prepares_dir)
        return _set_rows(self.passed, "prepare")

    def prepare_files(self) -> str:
        """``prepares_dir`` (which must be given) holding the Prepare* records as files of
        ``PREPARE_FIELDS`` (``prepare_follows.read_prepares`` reads them): the pass's, or, when
        the windows give them, written now by Spark, ordered by topic and partition."""
        if self.prepares_dir is None:
            raise ValueError("the coordinator log was given no folder for its Prepare* records")
        if self.passed is None:
            columns = [F.col(f.name).cast(f.dataType).alias(f.name) for f in spark_schema(PREPARE_FIELDS).fields]
            self.prepares().select(*columns).sortWithinPartitions("topic", "partition").write.parquet(
                self.prepares_dir)
        return self.prepares_dir

    @functools.cached_property
    def _newest(self) -> tuple[pa.Table, pa.Table]:
        """``current_rows`` and ``producer_id_rows``: from the pass's few rows, collected at once
        (one job over its checkpoint) and chosen across the log's partitions on the driver; or
        the windows' answers over every record, collected."""
        if self.passed is None:
            return (coordinator_current(self.records).toArrow().select(COORDINATOR_CURRENT.names)
                    .cast(COORDINATOR_CURRENT),
                    producer_transactional_ids(self.records).toArrow().select(PRODUCER_IDS.names).cast(PRODUCER_IDS))
        rows = self.passed.where(F.col("current").isNotNull() | F.col("producer").isNotNull()).select(
            "current", "producer").toArrow()

        def set_rows(column: str) -> pa.Table:
            values = rows.column(column).combine_chunks()
            return pa.Table.from_struct_array(values.filter(values.is_valid()))

        return newest_current(set_rows("current")), newest_producer_ids(set_rows("producer"))

    def current_rows(self) -> pa.Table:
        """``coordinator_current`` as ``COORDINATOR_CURRENT`` rows on the driver, in id order."""
        return self._newest[0]

    def producer_id_rows(self) -> pa.Table:
        """``producer_transactional_ids`` as ``PRODUCER_IDS`` rows on the driver, in producer id order."""
        return self._newest[1]

    def epoch_candidates(self) -> DataFrame:
        """``epoch_candidates``."""
        if self.passed is None:
            return epoch_candidates(self.records)
        return _set_rows(self.passed, "epoch")


def described_transactions(reported: DataFrame) -> DataFrame:
    """The rows of ``reported_transactions`` from ``kafka-transactions.sh describe`` outputs that
    name a transactional id: what ``reported_coordinator`` and ``reported_producer_ids`` read."""
    return reported.where((F.col("tool") == "describe") & F.col("transactional_id").isNotNull())


def reported_coordinator(reported: DataFrame, known: DataFrame) -> DataFrame:
    """``coordinator_current`` rows from ``kafka-transactions.sh describe`` outputs, for the
    transactional ids ``__transaction_state`` (``known``) does not hold: the newest report per id.
    ``list`` rows are not used here: they name no partitions, and a hanging verdict needs them."""
    latest = Window.partitionBy("transactional_id").orderBy(F.col("run_at_ms").desc_nulls_last(), "file", "line")
    return (
        _newest(described_transactions(reported).join(known.select("transactional_id"), "transactional_id",
                                                      "left_anti"), latest)
        .select(
            "transactional_id",
            F.lit(False).alias("tombstone"),
            "producer_id",
            "producer_epoch",
            "state",
            _listed_partitions().alias("listed"),
            "txn_timeout_ms",
            "txn_start_timestamp",
            F.lit(None).cast("long").alias("txn_last_update_timestamp"),
            F.lit(None).cast("int").alias("client_transaction_version"),
            F.lit(None).cast("long").alias("txn_log_offset"),
            F.lit(None).cast("int").alias("txn_log_partition"),
        )
    )


def reported_producer_ids(reported: DataFrame, known: DataFrame) -> DataFrame:
    """(producer_id, transactional_id) pairs from ``describe`` outputs for producer ids
    ``__transaction_state`` (``known``) does not name (with ``reported_coordinator``, so that an
    id is never named without the coordinator state that goes with it)."""
    latest = Window.partitionBy("producer_id").orderBy(F.col("run_at_ms").desc_nulls_last(), "file", "line")
    return (
        described_transactions(reported).where(F.col("producer_id") >= 0)
        .join(known.select("producer_id"), "producer_id", "left_anti")
        .transform(lambda frame: _newest(frame, latest))
        .select("producer_id", "transactional_id", F.lit(1).alias("transaction_version"))
    )


def prepare_decision() -> Column:
    """The marker type a Prepare* record's ``state`` decides (``prepare_records``' ``decision``)."""
    return F.when(F.col("state") == COMMIT_STATE, COMMIT_MARKER).otherwise(ABORT_MARKER)


def prepare_records(txn_log: DataFrame) -> DataFrame:
    """Every Prepare* record of the coordinator log, once per partition it lists, with the id's
    next record's state (``next_state``: null when the Prepare* is the latest), the decision,
    and when the transaction started and its timeout (``started``, ``timeout_ms``)."""
    next_record = Window.partitionBy("transactional_id").orderBy("partition", "offset")
    return (
        txn_log.withColumn("next_state", F.lead("state").over(next_record))
        .where(F.col("state").isin(*PREPARE_STATES))
        .select(
            "transactional_id",
            "producer_id",
            "state",
            "next_state",
            F.col("producer_epoch").alias("epoch"),
            F.col("txn_last_update_timestamp").alias("ts"),
            F.col("txn_start_timestamp").alias("started"),
            F.col("txn_timeout_ms").alias("timeout_ms"),
            F.col("offset").alias("txn_log_offset"),
            F.col("partition").alias("txn_log_partition"),
            prepare_decision().alias("decision"),
            F.explode(F.coalesce("topic_partitions", F.array())).alias("tp"),
        )
        .select("*", F.col("tp.topic").alias("topic"), F.col("tp.partition").alias("partition"))
        .drop("tp")
    )


def partition_transactions(
    txns: DataFrame, markers: DataFrame, snapshots: DataFrame, offsets: DataFrame, producer_ids: DataFrame, *,
    keys: tuple[str, ...] = PARTITION_COLUMNS, snapshot_files: TableManifest | None = None,
) -> DataFrame:
    """One row per transaction per partition (``PARTITION_TRANSACTIONS``) from the pass's
    ``transaction_rows``; ``keys`` tell the replicas' rows apart (``partition_stability``'s).

    Transactions a producer-state snapshot shows open from before the log's first retained
    batch (their data deleted by retention) are added with ``source = 'snapshot'`` when no
    later marker of that producer (``markers``) closed them. ``snapshot_files``: the manifest of
    the rows ``snapshots`` reads (``replicas_rows``), when known (``_open_before_log_start``).
    """
    state = F.when(F.col("marker_type").isNull(), OPEN)
    for marker_type, name in MARKER_STATES.items():
        state = state.when(F.col("marker_type") == marker_type, name)
    from_log = (
        # one row per producer and partition, far fewer than transactions: broadcast, so that the
        # transactions are not shuffled for the join
        txns.drop("last_event_timestamp")
        .join(F.broadcast(producer_last_writes(txns, keys)), [*keys, "producer_id"], "left")
        .withColumn("state", state.otherwise(ENDED))  # a marker whose type the dump does not show
        .withColumn("source", F.lit(FROM_LOG))
    )
    logged = _with_transactional_ids(from_log, producer_ids)
    from_snapshots = _snapshot_transactions(markers, snapshots, offsets, producer_ids, keys, snapshot_files)
    return logged if from_snapshots is None else logged.unionByName(from_snapshots)


def written_partition_transactions(directory: str, markers: DataFrame, snapshots: DataFrame, offsets: DataFrame,
                                   producer_ids: DataFrame, snapshot_files: TableManifest | None = None) -> DataFrame:
    """``partition_transactions`` from the files ``producer_pass_writing``'s tasks wrote into
    ``directory``, once that pass has been computed: the transactions only a producer snapshot
    shows (see ``partition_transactions``) are added to them, then the table is read."""
    from_snapshots = _snapshot_transactions(markers, snapshots, offsets, producer_ids, snapshot_files=snapshot_files)
    if from_snapshots is not None:
        from_snapshots.write.mode("append").parquet(directory)
    finish_table(directory, PARTITION_TRANSACTIONS)
    return markers.sparkSession.read.schema(spark_schema(PARTITION_TRANSACTIONS)).parquet(directory)


def _with_transactional_ids(frame: DataFrame, producer_ids: DataFrame, *, partial: bool = False) -> DataFrame:
    """``frame`` with its producers' transactional ids, as ``PARTITION_TRANSACTIONS`` rows
    (``partial``: the columns ``frame`` lacks are null)."""
    joined = frame.join(producer_ids.drop("transaction_version"), "producer_id", "left")
    if not partial:
        return conform(joined, PARTITION_TRANSACTIONS)
    have = set(joined.columns)
    return joined.selectExpr(*cast_select_list(PARTITION_TRANSACTIONS,
                                               {name: f"`{name}`" for name in PARTITION_TRANSACTIONS.names
                                                if name in have}))


def _snapshot_transactions(markers: DataFrame, snapshots: DataFrame, offsets: DataFrame,
                           producer_ids: DataFrame, keys: tuple[str, ...] = PARTITION_COLUMNS,
                           snapshot_files: TableManifest | None = None) -> DataFrame | None:
    """``partition_transactions`` rows of the transactions only a snapshot shows open; None when
    there is none (the usual case)."""
    if snapshot_files is not None and not _snapshots_may_show_open(snapshot_files, offsets):
        return None
    found = _open_before_log_start(markers, snapshots, offsets, keys)
    return None if found is None else _with_transactional_ids(found, producer_ids, partial=True)


def _snapshots_may_show_open(files: TableManifest, offsets: DataFrame) -> bool:
    """Whether a snapshot of the rows ``files`` describes (a ``replicas_rows`` manifest) could
    show what ``_open_before_log_start`` looks for, read on the driver without a Spark job: its
    intact entries with an open transaction (pyarrow, the filter pushed down to the files), each
    against its replica's log start and end in ``offsets`` (a few rows per partition: the ranked
    replicas' local rows). False only when no entry is taken at or below its replica's log start
    or beyond its log end: ``_open_before_log_start`` would find nothing, and need not ask Spark."""
    import pyarrow.dataset as ds

    replicas = files.replicas()
    if replicas is None:
        return True
    dataset = manifest_dataset(files)
    if dataset is None:
        return False
    entries = dataset.to_table(columns=[*REPLICA_COLUMNS, "snapshot_offset"],
                               filter=(ds.field("current_txn_first_offset") >= 0) & ds.field("crc_ok")).to_pylist()
    if not entries:
        return False
    bounds: dict[tuple[str, int, int | None], list[tuple[int | None, int | None]]] = {}
    for row in offsets.select("topic", "partition", "broker_id", "log_start_offset", "log_end_offset").collect():
        bounds.setdefault((row["topic"], row["partition"], row["broker_id"]), []).append(
            (row["log_start_offset"], row["log_end_offset"]))
    for entry in entries:
        if tuple(entry[c] for c in REPLICA_COLUMNS) not in replicas:
            continue
        offset = entry["snapshot_offset"]
        for start, end in bounds.get((entry["topic"], entry["partition"], entry["broker_id"]), []):
            # as the query's conditions have it; an absent bound (null) decides nothing
            if (start is not None and offset <= start) or (end is not None and offset > end):
                return True
    return False


def _open_before_log_start(markers: DataFrame, snapshots: DataFrame, offsets: DataFrame,
                           keys: tuple[str, ...]) -> DataFrame | None:
    """Open transactions that only a snapshot knows of; None when no snapshot shows one (the
    usual case), so that the markers are not read for nothing. Two cases:

    * below the log start: the newest snapshot taken at or before the log start shows a
      transaction open (its data deleted by retention); replay from there covers the rest;
    * beyond the log end: the replica's newest snapshot was taken past the end of its log (the
      log lost its tail after the snapshot: a torn copy, an unflushed crash) and shows a
      transaction open from an offset the log no longer reaches.
    """
    starts = offsets.select("topic", "partition", "broker_id", "log_start_offset", "log_end_offset")
    snaps = snapshots.join(starts, ["topic", "partition", "broker_id"])
    below_start = F.col("snapshot_offset") <= F.col("log_start_offset")
    beyond_end = F.col("log_end_offset").isNotNull() & (F.col("snapshot_offset") > F.col("log_end_offset"))
    usable = snaps.where(below_start | beyond_end).withColumn("_beyond", beyond_end)
    newest = Window.partitionBy(*keys, "_beyond").orderBy(F.col("snapshot_offset").desc())
    open_then = (
        usable.withColumn("_rank", F.dense_rank().over(newest))
        .where((F.col("_rank") == 1) & (F.col("current_txn_first_offset") >= 0) & F.col("crc_ok"))
        # beyond the end, only what the log shows nothing of: data below the end is the log's to say
        .where(~F.col("_beyond") | (F.col("current_txn_first_offset") >= F.col("log_end_offset")))
        .select(
            "topic", "partition", "broker_id", "producer_id", "snapshot_offset",
            F.col("current_txn_first_offset").alias("first_offset"),
            F.col("producer_epoch").alias("min_epoch"),
            F.col("timestamp").alias("producer_last_timestamp"),
        )
        .dropDuplicates([*keys, "producer_id", "first_offset"])
    )
    if open_then.isEmpty():  # a small job over the snapshots
        return None
    # markers of those producers at or after the snapshot: the snapshot side is a few rows, so
    # it is broadcast and the markers are not shuffled
    key = [*keys, "producer_id"]
    closed = (
        markers.select(*key, F.col("offset").alias("_marker_offset"))
        .join(F.broadcast(open_then.select(*key, F.col("snapshot_offset").alias("_from"))), key)
        .where(F.col("_marker_offset") >= F.col("_from"))
        .select(*key)
        .distinct()
    )
    still_open = open_then.join(closed, key, "left_anti")
    return still_open.select(
        *KEY,
        "broker_id",
        F.lit(-1).cast("long").alias("txn_seq"),
        "first_offset",
        F.col("min_epoch"),
        F.col("min_epoch").alias("max_epoch"),
        F.lit(0).cast("long").alias("batches"),
        F.lit(0).cast("long").alias("records"),
        F.lit(0).cast("long").alias("bytes"),
        F.lit(0).cast("long").alias("late_batches"),
        "producer_last_timestamp",
        F.lit(OPEN).alias("state"),
        F.lit("snapshot").alias("source"),
    )


@dataclass
class Reconstruction:
    """Everything reconstruct derives; the first three are tables, the rest helpers for detect."""

    partition_transactions: DataFrame
    transactions: DataFrame
    partition_stability: DataFrame
    producer_events: DataFrame  # the producer rows a rule may flag (``producer_pass``)
    #: each transactional id's newest coordinator record, on the driver (``COORDINATOR_CURRENT``)
    coordinator: pa.Table
    producer_ids: DataFrame
    replicas: DataFrame  # the chosen replica of each partition (``replicas.ranked_replicas`` rank 1)
    #: every live copy of every partition, audited on its own data (``REPLICA_STABILITY``)
    replica_stability: DataFrame
    extent: DataFrame  # per partition: its oldest batch time (``partition_extent``)
    #: the chosen replicas' rows of the raw tables detect reads (``on_replicas``)
    batches: DataFrame
    markers: DataFrame
    #: the chosen replicas' coordinator records, and what reconstruct and the rules read of them
    coordinator_log: CoordinatorLog
    offset_commits: DataFrame
    #: what follows each Prepare* record on the partitions the pass read (``producer_pass_writing``:
    #: files of ``DerivedOutput.work_dir``); None when the pass did not read the raw tables' files
    prepare_follows: DataFrame | None = None
    #: where the derived tables were written (``DerivedOutput.table_dir``), if they were
    output: DerivedOutput = field(default_factory=lambda: DerivedOutput())

    def rows(self, name: str, where: pc.Expression | None = None) -> pa.Table:
        """The rows of derived table ``name`` that meet ``where`` (None: all), read on the driver:
        with pyarrow from the files reconstruct wrote (no Spark job; Parquet answers ``where``
        from its row groups' statistics first), else collected from its frame (built in memory:
        tests, a notebook's own frames) and filtered. For few rows: ``partition_stability`` or
        ``replica_stability`` (a row per partition or per copy), or ``partition_transactions``
        through a filter that leaves few."""
        frame = {"partition_stability": self.partition_stability, "replica_stability": self.replica_stability,
                 "partition_transactions": self.partition_transactions}[name]
        if self.output.tables_dir is not None:
            return read_arrow_table(self.output.tables_dir, name, where)
        schema = DERIVED_TABLES[name]
        collected = frame.toArrow().select(schema.names).cast(schema)
        return collected if where is None else collected.filter(where)


#: the folder under the tables of a ``DerivedOutput`` that holds intermediates
WORK_DIR = "_work"


@dataclass(frozen=True)
class DerivedOutput:
    """Where reconstruct puts what it derives. Each derived table (``schemas.DERIVED_TABLES``) is
    written once to ``tables_dir/<table>`` and read back from there (the pass's tasks write
    ``partition_transactions`` themselves when they read the raw tables' files, the driver
    ``transactions``, ``partition_stability`` and, for a dump of one copy per partition,
    ``replica_stability``: ``keep_rows``); every other intermediate, and every table when
    ``tables_dir`` is None (tests, notebooks), is kept in a local checkpoint, or, built on the
    driver, is a frame of its rows. Detection reads each of them several times: without this
    Spark would re-plan and re-run the whole lineage each time."""

    tables_dir: str | None = None

    def table_dir(self, name: str) -> str | None:
        """Where table ``name`` is written (a path or URI, absent until then), or None."""
        if self.tables_dir is None or name not in DERIVED_TABLES:
            return None
        return f"{self.tables_dir.rstrip('/')}/{name}"

    def work_dir(self, name: str) -> str | None:
        """Where the tasks of a pass write intermediate ``name`` for the tasks of another, or
        the rules, to read (``WORK_DIR`` under ``tables_dir``: readers of the tables skip a
        hidden folder); None without ``tables_dir``. The frames of a ``Reconstruction`` may
        read them until ``clear_work``."""
        if self.tables_dir is None:
            return None
        return f"{self.tables_dir.rstrip('/')}/{WORK_DIR}/{name}"

    def clear_work(self) -> None:
        """Delete the intermediates (``work_dir``), once nothing reads them."""
        if self.tables_dir is not None:
            drop_table(f"{self.tables_dir.rstrip('/')}/{WORK_DIR}")

    def keep_rows(self, spark: SparkSession, name: str, rows: pa.Table) -> DataFrame:
        """Table ``name``'s ``rows``, built on the driver: written with pyarrow as one file and
        read back (committed as ``replica_tasks`` commits the tasks' files), or a frame of them."""
        directory = self.table_dir(name)
        if directory is None:
            return arrow_frame(spark, rows)
        schema = DERIVED_TABLES[name]
        start_table(directory)
        with TableFile(directory, file_name(0, new_job()), schema) as written:
            written.add(rows)
        finish_table(directory, schema)
        return spark.read.schema(spark_schema(schema)).parquet(directory)

    def keep(self, name: str, frame: DataFrame) -> DataFrame:
        """``frame`` computed once: written as table ``name`` and read back, or checkpointed."""
        directory = self.table_dir(name)
        if directory is None:
            return frame.localCheckpoint(eager=True)
        frame.write.parquet(directory)
        return frame.sparkSession.read.parquet(directory)


def reconstruct(
    raw: RawTables | Mapping[str, DataFrame], *, as_of_ms: int, late_tolerance_ms: int,
    output: DerivedOutput | None = None,
) -> Reconstruction:
    """Derive the transaction tables from the raw ones (see the module docstring).

    ``raw``: the raw tables with the manifest of their files (``tables.load_raw_tables``), or
    frames alone (no manifest: Spark shuffles what the passes read). ``output``: where the
    derived tables go (``DerivedOutput``; None: local checkpoints). When it names a folder and
    the pass reads the raw tables' files, the pass's tasks write ``partition_transactions``
    there themselves (``producer_pass_writing``).
    """
    tables = RawTables.of(raw)
    out = output or DerivedOutput()
    keep = out.keep

    files = tables.files

    # built on the driver from its rows: local data, read again at no cost, so not materialized
    ranked = ranked_replicas(tables["partition_offsets"], tables["metadata_partitions"], tables["batches"],
                             as_of_ms=as_of_ms, batch_files=files("batches"), offsets_files=files("partition_offsets"),
                             metadata_files=files("metadata_partitions"))
    replicas = chosen_replicas(ranked)
    keys = ranked.keys(1)

    def chosen(name: str) -> DataFrame:
        return on_replicas(tables[name], replicas, keys, files(name))

    # the manifests of the chosen replicas' rows, from which the pass's tasks read them
    batch_files, marker_files = pass_manifests(tables, keys)
    batches = chosen("batches")
    markers = chosen("control_markers")
    txn_log = chosen("txn_log")
    directory = out.table_dir("partition_transactions")
    follows_dir, prepares_dir = out.work_dir("prepare_follows"), out.work_dir("prepares")
    # the pass's tasks write the Prepare* records to files, which the producer pass's tasks read
    coordinator_log = CoordinatorLog.of(txn_log, replicas_rows(files("txn_log"), keys), prepares_dir,
                                        log_partitions(keys))
    snapshots = chosen("producer_snapshots")
    snapshot_files = replicas_rows(files("producer_snapshots"), keys)
    # kafka-transactions.sh outputs stand in for __transaction_state records a dump lacks. Most
    # dumps attach none (the manifest may say so without a query): then the coordinator log's
    # answers are all, and are not computed a second time for the anti join that keeps the
    # reports apart
    reported = tables["reported_transactions"]
    has_reports = not tables.holds_no_rows("reported_transactions") and not described_transactions(reported).isEmpty()
    # each transactional id's newest record and each producer id's transactional id: few rows,
    # on the driver (what the rules and the pass's tasks read); a frame of the producer ids for
    # the Spark joins
    current_rows, id_rows = coordinator_log.current_rows(), coordinator_log.producer_id_rows()
    if has_reports:
        current_rows, id_rows = with_reports(reported, current_rows, id_rows)
    spark = batches.sparkSession
    ids = arrow_frame(spark, id_rows)
    writing = None if directory is None or follows_dir is None else producer_pass_writing(
        batches, markers, id_rows, coordinator_log, directory, follows_dir, late_tolerance_ms=late_tolerance_ms,
        batch_files=batch_files, marker_files=marker_files)
    follows = None
    if writing is not None and directory is not None and follows_dir is not None:
        # computed here, once: its tasks write the tables' files as they go
        passed = writing.localCheckpoint(eager=True)
        ptx = written_partition_transactions(directory, markers, snapshots, replicas, ids, snapshot_files)
        follows = written_prepare_follows(batches.sparkSession, follows_dir)
    else:
        passed = keep("producer_pass", producer_pass(batches, markers, late_tolerance_ms=late_tolerance_ms,
                                                     batch_files=batch_files, marker_files=marker_files))
        ptx = keep("partition_transactions",
                   partition_transactions(transaction_rows(passed), markers, snapshots, replicas, ids,
                                          snapshot_files=snapshot_files))

    def kept_extent() -> DataFrame:
        """``partition_extent``: from the manifest, rows on the driver (read again at no cost), or kept."""
        known = manifest_extent(batch_files)
        return arrow_frame(spark, known) if known is not None else keep("partition_extent", partition_extent(batches))

    def summary() -> DataFrame:
        """The ``transactions`` table, built on the driver from ``partition_transactions``' rows."""
        summarized = summarize_producers(_table_batches(out, "partition_transactions", ptx, SUMMARY_READ),
                                         current_rows, id_rows)
        return out.keep_rows(spark, "transactions", summarized)

    # independent of one another, so computed side by side (spark.side_by_side). The other
    # copies' audits (a dump of several brokers) are the longest: they go first
    audit = functools.partial(copies_stability, tables, ranked, producer_ids=ids, as_of_ms=as_of_ms,
                              late_tolerance_ms=late_tolerance_ms)
    groups = copy_groups(tables, ranked)

    def chosen_stability() -> pa.Table:
        """The chosen replicas' stability, on the driver, from ``partition_transactions``' files
        when they were written (read a batch at a time), else from its frame."""
        written = out.table_dir("partition_transactions") is not None
        transactions = (_table_batches(out, "partition_transactions", ptx, [*PARTITION_COLUMNS, *STABILITY_READ])
                        if written else ptx)
        return partition_stability(batches, transactions, ranked.rows_of(1), as_of_ms=as_of_ms,
                                   batch_files=batch_files)

    first: list[Callable[[], DataFrame | pa.Table]] = [
        *[functools.partial(audit, group) for group in groups],
        summary,
        kept_extent,
        chosen_stability,
    ]
    *others, derived_transactions, extent, chosen_rows = side_by_side(spark, first)
    assert isinstance(derived_transactions, DataFrame) and isinstance(extent, DataFrame)
    assert isinstance(chosen_rows, pa.Table) and all(isinstance(rows, pa.Table) for rows in others)
    stability = out.keep_rows(spark, "partition_stability", conform_table(chosen_rows, PARTITION_STABILITY))
    copies = replica_stability(spark, out, tables, ranked, batches, chosen_rows,
                               list(zip(groups, cast(list[pa.Table], others), strict=True)))
    return Reconstruction(
        partition_transactions=ptx,
        transactions=derived_transactions,
        partition_stability=stability,
        replica_stability=copies,
        # read once, by the producer rules, from the pass's checkpoint (no copy of its own)
        producer_events=producer_events(passed),
        coordinator=current_rows,
        producer_ids=ids,
        replicas=replicas,
        extent=extent,
        batches=batches,
        markers=markers,
        coordinator_log=coordinator_log,
        offset_commits=chosen("offset_commits"),
        prepare_follows=follows,
        output=out,
    )


def _table_batches(out: DerivedOutput, name: str, frame: DataFrame, columns: Sequence[str]) -> Iterator[pa.RecordBatch]:
    """The rows of derived table ``name`` (``columns`` of them), a batch at a time on the driver:
    read with pyarrow from its files when ``out`` wrote them, else collected from ``frame``."""
    import pyarrow.dataset as ds

    directory = out.table_dir(name)
    if directory is None:
        yield from frame.select(*columns).toArrow().to_batches()
        return
    dataset = ds.dataset(directory, format="parquet", schema=DERIVED_TABLES[name])
    yield from dataset.to_batches(columns=list(columns))


def with_reports(reported: DataFrame, current: pa.Table, producer_ids: pa.Table) -> tuple[pa.Table, pa.Table]:
    """``current`` (``COORDINATOR_CURRENT``) and ``producer_ids`` (``PRODUCER_IDS``) from the
    coordinator log, each with the rows ``kafka-transactions.sh describe`` outputs add for the ids
    the log does not hold (``reported_coordinator``, ``reported_producer_ids``)."""
    spark = reported.sparkSession
    more_current = reported_coordinator(reported, arrow_frame(spark, current)).toArrow()
    more_ids = reported_producer_ids(reported, arrow_frame(spark, producer_ids)).toArrow()
    return (pa.concat_tables([current, more_current.select(COORDINATOR_CURRENT.names).cast(COORDINATOR_CURRENT)]),
            pa.concat_tables([producer_ids, more_ids.select(PRODUCER_IDS.names).cast(PRODUCER_IDS)]))


def pass_manifests(raw: RawTables, keys: frozenset[Replica]) -> tuple[TableManifest | None, TableManifest | None]:
    """The manifests of the batches' and the markers' rows of replicas ``keys`` in the raw
    tables' files (``replicas_rows``), from which ``producer_pass`` reads each replica on its own;
    with either None, the pass shuffles the rows in Spark instead."""
    return replicas_rows(raw.files("batches"), keys), replicas_rows(raw.files("control_markers"), keys)


def copy_groups(raw: RawTables, ranked: RankedReplicas) -> list[tuple[int, ...]]:
    """The ranks of the copies that are not chosen (2 and beyond: a dump of several brokers),
    grouped for ``copies_stability``: all in one group when the producer pass reads each of them
    from the raw tables' files on its own (``pass_manifests`` known for all: the Spark shuffle
    would mix the copies of a partition) and the copies are told apart by their broker
    (``RankedReplicas.told_apart``); else one group per rank, each holding at most one copy of a
    partition."""
    others = tuple(range(2, ranked.ranks + 1))
    if not others:
        return []
    apart = ranked.told_apart(*others) and None not in pass_manifests(raw, ranked.keys(*others))
    return [others] if apart else [(rank,) for rank in others]


def rank_rows(raw: RawTables, ranked: RankedReplicas, ranks: Sequence[int], name: str) -> DataFrame:
    """The rows of raw table ``name`` that belong to the replicas ranked one of ``ranks``
    (``RankedReplicas.of_rank``)."""
    return on_replicas(raw[name], ranked.of_rank(*ranks), ranked.keys(*ranks), raw.files(name))


def copy_keys(ranks: Sequence[int]) -> tuple[str, ...]:
    """The columns that tell apart the rows of the copies ranked ``ranks`` (a ``copy_groups``
    group): a partition's for one rank, a copy's for several."""
    return PARTITION_COLUMNS if len(ranks) == 1 else COPY_COLUMNS


def copies_stability(raw: RawTables, ranked: RankedReplicas, ranks: Sequence[int], producer_ids: DataFrame, *,
                     as_of_ms: int, late_tolerance_ms: int) -> pa.Table:
    """The stability of the replicas ranked one of ``ranks`` (a ``copy_groups`` group), each
    audited on its own batches, markers and snapshots by the functions that audit the chosen ones
    (``producer_pass``, ``partition_transactions``, ``partition_stability``), their rows told
    apart by ``copy_keys``. It needs nothing of the chosen copies, so ``reconstruct`` computes it
    beside them."""
    these, keys, told = ranked.of_rank(*ranks), ranked.keys(*ranks), copy_keys(ranks)
    batches, markers, snapshots = (on_replicas(raw[name], these, keys, raw.files(name))
                                   for name in ("batches", "control_markers", "producer_snapshots"))
    batch_files, marker_files = pass_manifests(raw, keys)
    passed = producer_pass(batches, markers, late_tolerance_ms=late_tolerance_ms,
                           batch_files=batch_files, marker_files=marker_files)
    ptx = partition_transactions(transaction_rows(passed), markers, snapshots, these, producer_ids, keys=told,
                                 snapshot_files=replicas_rows(raw.files("producer_snapshots"), keys))
    return partition_stability(batches, ptx, ranked.rows_of(*ranks), as_of_ms=as_of_ms, keys=told,
                               batch_files=batch_files)


def replica_stability(spark: SparkSession, out: DerivedOutput, raw: RawTables, ranked: RankedReplicas,
                      chosen_batches: DataFrame, chosen_rows: pa.Table,
                      others: Sequence[tuple[Sequence[int], pa.Table]]) -> DataFrame:
    """``REPLICA_STABILITY``, kept: the chosen replicas' stability (``chosen_rows``) and every other
    copy's, ``others`` holding each ``copy_groups`` group with its ``copies_stability``, each
    copy compared with the chosen copy of its partition (``divergence.compare_replicas``). With
    no other copy (a dump of one broker) the table is the chosen rows, written on the driver. The
    comparisons are independent of one another and each waits on a few small jobs, so they run
    side by side (``spark.side_by_side``); their rows follow in the groups' order."""
    compared_columns = {"chosen": pa.bool_(), "divergence": pa.string(), "divergent_offset": pa.int64(),
                        "replica_holds": pa.string(), "chosen_holds": pa.string()}
    chosen = chosen_rows
    for name, kind in compared_columns.items():  # the chosen copy is compared with no other
        values = [True] * chosen.num_rows if name == "chosen" else [None] * chosen.num_rows
        chosen = chosen.append_column(pa.field(name, kind), pa.array(values, kind))
    chosen = conform_table(chosen, REPLICA_STABILITY)
    if not others:
        return out.keep_rows(spark, "replica_stability", chosen)
    chosen_stability = arrow_frame(spark, chosen_rows)

    def compared(ranks: Sequence[int], rows: pa.Table) -> DataFrame:
        return compare_replicas(arrow_frame(spark, rows), rank_rows(raw, ranked, ranks, "batches"), chosen_stability,
                                chosen_batches, keys=copy_keys(ranks))

    frame = arrow_frame(spark, chosen)
    for more in side_by_side(spark, [functools.partial(compared, ranks, rows) for ranks, rows in others]):
        frame = frame.unionByName(conform(more.withColumn("chosen", F.col("replica_rank") == 1), REPLICA_STABILITY))
    return out.keep("replica_stability", frame)
