"""Transactions per partition, rebuilt the way a partition leader's producer state sees them.

For each (topic, partition, producer id), data batches written with the transactional flag and
COMMIT/ABORT markers are taken in offset order; every marker closes the producer's open
transaction on that partition, so the n-th transaction is everything after the (n-1)-th
marker up to and including the n-th. Data left after the last marker is an open transaction.
An empty control batch (compaction leftover) is no marker, as for the broker.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

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
    read_prepares,
    unfollowed,
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
from txn_audit.replica_tasks.reading import REPLICA_FILES_ITEM, item_int, read_table, replica_file_items
from txn_audit.reconstruct.stability import TRANSACTION_COLUMNS as STABILITY_READ
from txn_audit.reconstruct.stability import manifest_extent, narrowed_candidates, partition_stability
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
    in_ms,
    read_frame,
    spark_schema,
    write_frame,
)
from txn_audit.tables import RawTables, arrow_frame, read_arrow_table
from txn_audit.spark import side_by_side

KEY = ("topic", "partition", "producer_id")


def _partition_name(topic: Column, partition: Column) -> Column:
    return F.concat(topic, F.lit("-"), partition.cast("string"))




def producer_pass(batches: DataFrame, markers: DataFrame, *, late_tolerance_ms: int,
                  batch_files: TableManifest, marker_files: TableManifest) -> DataFrame:
    """One ordered pass over every data batch written with a producer id (transactional or
    idempotent) and every COMMIT/ABORT marker, per (topic, partition, producer id) in offset
    order: each task reads one replica's rows of ``batch_files`` and ``marker_files`` (the
    manifests of the frames' rows, ``replica_tasks.replicas_rows``) in log order
    (``pass_files``). Its rows have two struct columns, one of them null
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
    body = functools.partial(pass_over_files, late_tolerance_ms=late_tolerance_ms, unsequenced_topics=COMPACTED_TOPICS)
    return tasks_over_items(batches.sparkSession, items, PASS_ITEM, body, _pass_output(batches, markers),
                            weight=item_weight)


def producer_pass_writing(batches: DataFrame, markers: DataFrame, producer_ids: pa.Table,
                          coordinator_log: CoordinatorLog, directory: str, follows_dir: str, *,
                          late_tolerance_ms: int, batch_files: TableManifest, marker_files: TableManifest) -> DataFrame:
    """``producer_pass`` whose tasks write the transactions themselves, as the files of
    ``partition_transactions`` in ``directory`` (``transaction_files``), rather than return them:
    its ``txn`` column is always null. They also write what follows each of the coordinator
    log's Prepare* records (``CoordinatorLog.prepare_files``), once per record and partition
    listed, whether a task reads that partition or not, as files of
    ``prepare_follows.FOLLOW_FIELDS`` in ``follows_dir`` (the driver writes them when no task
    runs: a dump without a producer's write). ``producer_ids``: each producer id's transactional
    id (``PRODUCER_IDS``, built on the driver), handed to every task with its function. The files
    are written when the frame is computed: compute it once, then call
    ``written_partition_transactions`` and ``written_prepare_follows``. The tables are committed
    as ``replica_tasks`` says."""
    items = _pass_items(batches, batch_files, marker_files)
    prepares = coordinator_log.prepare_files()
    start_table(directory)
    start_table(follows_dir)
    if not items:
        with TableFile(follows_dir, file_name(0, new_job()), FOLLOW_FIELDS) as written:
            written.add(unfollowed(read_prepares(prepares, [], elsewhere=True)))
    output = _pass_output(batches, markers)
    # the records on partitions no item reads go to the task of the last (lightest) item
    read = sorted({(str(item["topic"]), item_int(item, "partition")) for item in items})
    body = functools.partial(pass_writing_transactions, late_tolerance_ms=late_tolerance_ms,
                             unsequenced_topics=COMPACTED_TOPICS, directory=directory, job=new_job(),
                             output=to_arrow_schema(output), prepares_dir=prepares,
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


def _pass_items(batches: DataFrame, batch_files: TableManifest, marker_files: TableManifest) -> list[dict[str, object]]:
    """``pass_files.PASS_ITEM`` rows for the replicas of both tables' files."""
    return pass_items(batch_files, marker_files, batches.sparkSession.sparkContext.defaultParallelism)


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
    (``producer_transactional_ids``), both as rows on the driver, and the records the epoch rule
    may flag (``epoch_candidates``). From one pass over the log's files (``coordinator_pass``,
    computed once: ``passed``), which orders each of the log's partitions alone: when a
    transactional id has records in two of them (the log's partition count changed), from
    windows over every record instead. ``prepares_dir``: a folder for the Prepare* records' files
    (``prepare_files``), which the pass's tasks write when it runs; None: they stay in ``passed``."""

    records: DataFrame
    passed: DataFrame | None = None
    prepares_dir: str | None = None

    @classmethod
    def of(cls, records: DataFrame, files: TableManifest, prepares_dir: str | None = None,
           partitions: int | None = None) -> CoordinatorLog:
        """``records``' log, passed over through ``files`` (the manifest of their rows); its
        Prepare* records written into ``prepares_dir`` when given. ``partitions``:
        the log's partition count as far as the dump shows it (``log_partitions``; None: as far
        as ``files`` show it), which tells the pass where each transactional id belongs."""
        items = replica_file_items(files)
        if not items:
            return cls(records, prepares_dir=prepares_dir)
        if partitions is None:
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
    latest = Window.partitionBy("transactional_id").orderBy(F.col("run_timestamp").desc_nulls_last(), "file", "line")
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
    latest = Window.partitionBy("producer_id").orderBy(F.col("run_timestamp").desc_nulls_last(), "file", "line")
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
    txns: DataFrame, markers: DataFrame, snapshots: DataFrame, offsets: DataFrame, producer_ids: DataFrame,
    snapshot_files: TableManifest, *, keys: tuple[str, ...] = PARTITION_COLUMNS,
) -> DataFrame:
    """One row per transaction per partition (``PARTITION_TRANSACTIONS``) from the pass's
    ``transaction_rows``; ``keys`` tell the replicas' rows apart (``partition_stability``'s).

    Transactions a producer-state snapshot shows open from before the log's first retained
    batch (their data deleted by retention) are added with ``source = 'snapshot'`` when no
    later marker of that producer (``markers``) closed them. ``snapshot_files``: the manifest of
    the rows ``snapshots`` reads (``replicas_rows``), from which the driver sees whether any can
    show one (``_snapshots_may_show_open``).
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
    from_snapshots = _snapshot_transactions(markers, snapshots, offsets, producer_ids, snapshot_files, keys)
    return logged if from_snapshots is None else logged.unionByName(from_snapshots)


def written_partition_transactions(directory: str, markers: DataFrame, snapshots: DataFrame, offsets: DataFrame,
                                   producer_ids: DataFrame, snapshot_files: TableManifest) -> DataFrame:
    """``partition_transactions`` from the files ``producer_pass_writing``'s tasks wrote into
    ``directory``, once that pass has been computed: the transactions only a producer snapshot
    shows (see ``partition_transactions``) are added to them, then the table is read."""
    from_snapshots = _snapshot_transactions(markers, snapshots, offsets, producer_ids, snapshot_files)
    if from_snapshots is not None:
        write_frame(from_snapshots, PARTITION_TRANSACTIONS, directory, "append")
    finish_table(directory, PARTITION_TRANSACTIONS)
    return read_frame(markers.sparkSession, PARTITION_TRANSACTIONS, directory)


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
                           producer_ids: DataFrame, snapshot_files: TableManifest,
                           keys: tuple[str, ...] = PARTITION_COLUMNS) -> DataFrame | None:
    """``partition_transactions`` rows of the transactions only a snapshot shows open; None when
    there is none (the usual case)."""
    if not _snapshots_may_show_open(snapshot_files, offsets):
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
    if not files.files:
        return False
    read = read_table(files, [*REPLICA_COLUMNS, "snapshot_offset", "current_txn_first_offset", "crc_ok"])
    entries = read.filter((ds.field("current_txn_first_offset") >= 0) & ds.field("crc_ok")).select(
        [*REPLICA_COLUMNS, "snapshot_offset"]).to_pylist()
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
    #: each producer id's transactional id and transaction version, on the driver (``PRODUCER_IDS``)
    producer_ids: pa.Table
    replicas: DataFrame  # the chosen replica of each partition (``replicas.ranked_replicas`` rank 1)
    #: every live copy of every partition, audited on its own data (``REPLICA_STABILITY``)
    replica_stability: DataFrame
    extent: DataFrame  # per partition: its oldest batch time (``manifest_extent``)
    #: the chosen replicas' rows of the raw tables detect reads (``on_replicas``)
    batches: DataFrame
    markers: DataFrame
    #: the chosen replicas' coordinator records, and what reconstruct and the rules read of them
    coordinator_log: CoordinatorLog
    offset_commits: DataFrame
    #: what follows each Prepare* record, once per partition it lists (``producer_pass_writing``:
    #: files of ``DerivedOutput.work_dir``)
    prepare_follows: DataFrame
    #: where the derived tables were written (``DerivedOutput.table_dir``)
    output: DerivedOutput

    def rows(self, name: str, where: pc.Expression | None = None) -> pa.Table:
        """The rows of derived table ``name`` that meet ``where`` (None: all), read on the driver
        with pyarrow from the files reconstruct wrote (no Spark job; Parquet answers ``where``
        from its row groups' statistics first). For few rows: ``partition_stability`` or
        ``replica_stability`` (a row per partition or per copy), or ``partition_transactions``
        through a filter that leaves few."""
        return read_arrow_table(self.output.tables_dir, name, where)


#: the folder under the tables of a ``DerivedOutput`` that holds intermediates
WORK_DIR = "_work"


@dataclass(frozen=True)
class DerivedOutput:
    """Where reconstruct puts what it derives: each derived table (``schemas.DERIVED_TABLES``)
    is written once to ``tables_dir/<table>`` and read back from there (the pass's tasks write
    ``partition_transactions`` themselves, the driver ``transactions``, ``partition_stability``
    and, for a dump of one copy per partition, ``replica_stability``: ``keep_rows``); what the
    tasks of one pass hand to those of another, or to the rules, goes to ``work_dir``. Detection
    reads each of them several times: without this Spark would re-plan and re-run the whole
    lineage each time."""

    tables_dir: str

    def table_dir(self, name: str) -> str:
        """Where derived table ``name`` is written (a path or URI, absent until then)."""
        if name not in DERIVED_TABLES:
            raise KeyError(f"{name!r} is no derived table")
        return f"{self.tables_dir.rstrip('/')}/{name}"

    def work_dir(self, name: str) -> str:
        """Where the tasks of a pass write intermediate ``name`` for the tasks of another, or
        the rules, to read (``WORK_DIR`` under ``tables_dir``: readers of the tables skip a
        hidden folder). The frames of a ``Reconstruction`` may read them until ``clear_work``."""
        return f"{self.tables_dir.rstrip('/')}/{WORK_DIR}/{name}"

    def clear_work(self) -> None:
        """Delete the intermediates (``work_dir``), once nothing reads them."""
        drop_table(f"{self.tables_dir.rstrip('/')}/{WORK_DIR}")

    def keep_rows(self, spark: SparkSession, name: str, rows: pa.Table) -> DataFrame:
        """Table ``name``'s ``rows``, built on the driver: written with pyarrow as one file and
        read back (committed as ``replica_tasks`` commits the tasks' files)."""
        directory = self.table_dir(name)
        schema = DERIVED_TABLES[name]
        start_table(directory)
        with TableFile(directory, file_name(0, new_job()), schema) as written:
            written.add(rows)
        finish_table(directory, schema)
        return read_frame(spark, schema, directory)

    def keep(self, name: str, frame: DataFrame) -> DataFrame:
        """``frame`` computed once: written as table ``name`` and read back."""
        directory = self.table_dir(name)
        write_frame(frame, DERIVED_TABLES[name], directory)
        return read_frame(frame.sparkSession, DERIVED_TABLES[name], directory)

    def batches(self, name: str, columns: Sequence[str]) -> Iterator[pa.RecordBatch]:
        """``columns`` of derived table ``name``'s rows, a record batch at a time, on the driver."""
        import pyarrow.dataset as ds

        dataset = ds.dataset(self.table_dir(name), format="parquet", schema=in_ms(DERIVED_TABLES[name]))
        yield from dataset.to_batches(columns=list(columns))


@dataclass(frozen=True)
class Chosen:
    """The replicas that speak for their partitions (``replicas.ranked_replicas`` rank 1) and their
    rows of the raw tables, with the manifests of those rows in the files
    (``replica_tasks.replicas_rows``), from which the passes' tasks read each replica."""

    raw: RawTables
    ranked: RankedReplicas

    @staticmethod
    def of(raw: RawTables, as_of_ms: int) -> Chosen:
        """The replicas ranked with the metadata log's leadership as of ``as_of_ms``."""
        return Chosen(raw, ranked_replicas(raw["partition_offsets"], offsets_files=raw.files("partition_offsets"),
                                           metadata_files=raw.files("metadata_partitions"),
                                           batch_files=raw.files("batches"), as_of_ms=as_of_ms))

    @functools.cached_property
    def replicas(self) -> DataFrame:
        """One row per partition: its chosen replica."""
        return chosen_replicas(self.ranked)

    @property
    def keys(self) -> frozenset[Replica]:
        return self.ranked.keys(1)

    def rows(self, name: str) -> DataFrame:
        """The chosen replicas' rows of raw table ``name``."""
        return on_replicas(self.raw[name], self.replicas, self.keys, self.raw.files(name))

    def files(self, name: str) -> TableManifest:
        """The manifest of the chosen replicas' rows of raw table ``name``."""
        return replicas_rows(self.raw.files(name), self.keys)


def reconstruct(raw: RawTables, *, as_of_ms: int, late_tolerance_ms: int, output: DerivedOutput) -> Reconstruction:
    """Derive the transaction tables from the raw ones (see the module docstring) into ``output``.
    The producer pass's tasks write ``partition_transactions`` themselves
    (``producer_pass_writing``); the other copies' audits (a dump of several brokers), the
    ``transactions`` summary and the chosen copies' stability are independent of one another,
    so they are computed side by side (``spark.side_by_side``), the longest first."""
    chosen = Chosen.of(raw, as_of_ms)
    spark = raw["batches"].sparkSession
    coordinator_log = CoordinatorLog.of(chosen.rows("txn_log"), chosen.files("txn_log"), output.work_dir("prepares"),
                                        log_partitions(chosen.keys))
    current_rows, id_rows = coordinator_answers(raw, coordinator_log)
    ids = arrow_frame(spark, id_rows)
    passed, ptx, follows = rebuild_transactions(chosen, coordinator_log, id_rows, ids, output, late_tolerance_ms)
    groups = copy_groups(chosen.ranked)
    audit = functools.partial(copies_stability, raw, chosen.ranked, producer_ids=ids, as_of_ms=as_of_ms,
                              late_tolerance_ms=late_tolerance_ms)
    *others, summary, chosen_rows = side_by_side(spark, [
        *[functools.partial(audit, group) for group in groups],
        functools.partial(summarize_into, output, spark, current_rows, id_rows),
        functools.partial(chosen_stability, output, chosen, as_of_ms)])
    assert isinstance(summary, DataFrame) and isinstance(chosen_rows, pa.Table)
    copies = replica_stability(spark, output, raw, chosen.ranked, chosen.rows("batches"), chosen_rows,
                               list(zip(groups, others, strict=True)))
    return Reconstruction(
        partition_transactions=ptx, transactions=summary,
        partition_stability=output.keep_rows(spark, "partition_stability",
                                             conform_table(chosen_rows, PARTITION_STABILITY)),
        replica_stability=copies,
        producer_events=producer_events(passed),  # read once, by the producer rules, from the pass's checkpoint
        coordinator=current_rows, producer_ids=id_rows, replicas=chosen.replicas,
        extent=arrow_frame(spark, manifest_extent(chosen.files("batches"))),
        batches=chosen.rows("batches"), markers=chosen.rows("control_markers"), coordinator_log=coordinator_log,
        offset_commits=chosen.rows("offset_commits"), prepare_follows=follows, output=output)


def coordinator_answers(raw: RawTables, coordinator_log: CoordinatorLog) -> tuple[pa.Table, pa.Table]:
    """Each transactional id's newest record (``COORDINATOR_CURRENT``) and each producer id's
    transactional id (``PRODUCER_IDS``), few rows on the driver: the coordinator log's, and, for
    the ids it does not hold, those of attached ``kafka-transactions.sh describe`` outputs
    (``with_reports``). Most dumps attach none (the manifest says so without a query): then the
    coordinator log's answers are all, not computed again for the anti join."""
    current_rows, id_rows = coordinator_log.current_rows(), coordinator_log.producer_id_rows()
    reported = raw["reported_transactions"]
    if raw.holds_no_rows("reported_transactions") or described_transactions(reported).isEmpty():
        return current_rows, id_rows
    return with_reports(reported, current_rows, id_rows)


def rebuild_transactions(chosen: Chosen, coordinator_log: CoordinatorLog, id_rows: pa.Table, ids: DataFrame,
                         output: DerivedOutput, late_tolerance_ms: int) -> tuple[DataFrame, DataFrame, DataFrame]:
    """The chosen replicas' producer pass (``producer_pass_writing``), computed here once, its
    checkpoint; ``partition_transactions`` as its tasks wrote it, with the transactions only a
    snapshot shows; and what follows each Prepare* record."""
    directory, follows_dir = output.table_dir("partition_transactions"), output.work_dir("prepare_follows")
    markers = chosen.rows("control_markers")
    writing = producer_pass_writing(chosen.rows("batches"), markers, id_rows, coordinator_log, directory,
                                    follows_dir, late_tolerance_ms=late_tolerance_ms,
                                    batch_files=chosen.files("batches"), marker_files=chosen.files("control_markers"))
    passed = writing.localCheckpoint(eager=True)  # its tasks write the tables' files as they go
    ptx = written_partition_transactions(directory, markers, chosen.rows("producer_snapshots"), chosen.replicas, ids,
                                         chosen.files("producer_snapshots"))
    return passed, ptx, written_prepare_follows(markers.sparkSession, follows_dir)


def summarize_into(output: DerivedOutput, spark: SparkSession, current_rows: pa.Table,
                   id_rows: pa.Table) -> DataFrame:
    """The ``transactions`` table, built on the driver from ``partition_transactions``' rows."""
    summarized = summarize_producers(output.batches("partition_transactions", SUMMARY_READ), current_rows, id_rows)
    return output.keep_rows(spark, "transactions", summarized)


def chosen_stability(output: DerivedOutput, chosen: Chosen, as_of_ms: int) -> pa.Table:
    """The chosen replicas' stability, on the driver, from ``partition_transactions``' files
    (read a batch at a time)."""
    transactions = output.batches("partition_transactions", [*PARTITION_COLUMNS, *STABILITY_READ])
    return partition_stability(chosen.files("batches"), transactions, chosen.ranked.rows_of(1), as_of_ms=as_of_ms)


def with_reports(reported: DataFrame, current: pa.Table, producer_ids: pa.Table) -> tuple[pa.Table, pa.Table]:
    """``current`` (``COORDINATOR_CURRENT``) and ``producer_ids`` (``PRODUCER_IDS``) from the
    coordinator log, each with the rows ``kafka-transactions.sh describe`` outputs add for the ids
    the log does not hold (``reported_coordinator``, ``reported_producer_ids``)."""
    spark = reported.sparkSession
    more_current = reported_coordinator(reported, arrow_frame(spark, current)).toArrow()
    more_ids = reported_producer_ids(reported, arrow_frame(spark, producer_ids)).toArrow()
    return (pa.concat_tables([current, more_current.select(COORDINATOR_CURRENT.names).cast(COORDINATOR_CURRENT)]),
            pa.concat_tables([producer_ids, more_ids.select(PRODUCER_IDS.names).cast(PRODUCER_IDS)]))


def pass_manifests(raw: RawTables, keys: frozenset[Replica]) -> tuple[TableManifest, TableManifest]:
    """The manifests of the batches' and the markers' rows of replicas ``keys`` in the raw
    tables' files (``replicas_rows``), from which ``producer_pass`` reads each replica on its own."""
    return replicas_rows(raw.files("batches"), keys), replicas_rows(raw.files("control_markers"), keys)


def copy_groups(ranked: RankedReplicas) -> list[tuple[int, ...]]:
    """The ranks of the copies that are not chosen (2 and beyond: a dump of several brokers),
    grouped for ``copies_stability``: all in one group when the copies are told apart by their
    broker (``RankedReplicas.told_apart``); else one group per rank, each holding at most one
    copy of a partition."""
    others = tuple(range(2, ranked.ranks + 1))
    if not others:
        return []
    return [others] if ranked.told_apart(*others) else [(rank,) for rank in others]


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
    ptx = partition_transactions(transaction_rows(passed), markers, snapshots, these, producer_ids,
                                 replicas_rows(raw.files("producer_snapshots"), keys), keys=told)
    rows = ranked.rows_of(*ranks)
    return partition_stability(batch_files, narrowed_candidates(ptx, rows, told), rows, as_of_ms=as_of_ms, keys=told)


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
