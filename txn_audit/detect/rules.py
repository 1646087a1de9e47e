"""Finding rules computed by Spark: each takes DataFrames and returns ``findings`` rows.

Every finding carries a one-sentence evidence that names offsets, producer ids and
timestamps a person can check with ``kafka-dump-log.sh``, and, where Kafka offers one, the
command that repairs it. Kafka's own verdicts are mirrored exactly where they exist
(``hanging_transaction`` follows ``kafka-transactions.sh find-hanging``; LSO follows the
broker); the other rules go where Kafka's tools are silent. The rules whose rows are few run
on the driver with pyarrow: the decode-issue rule (``detect.decode_issues``), the rules of a
partition's status (``detect.stability_rules``: stuck LSO, HW beyond the log end, replica
divergence), those of a producer's writes (``detect.producer_rules``: late arrivals,
sequences, epochs), those of transactions judged alone (``detect.transaction_rules``: late
records absorbed, transactions retention cut), of the coordinator log's epochs
(``detect.coordinator_rules``), of open transactions (``detect.open_transaction_rules``:
hanging, open, epoch mismatch), of the coordinator's decisions against the markers
(``detect.decision_rules``: missing marker, outcome mismatch, coordinator stuck) and of
duplicate markers (``detect.duplicate_marker_rules``). Here remain the rules that join their
few rows with many: offsets committed in open transactions (with the offset commits) and
``find-hanging``'s verdicts (with the transactions they name).
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from txn_audit.detect.words import DURATION_STEPS
from txn_audit.reconstruct import NAMED_MAX
from txn_audit.schemas import FINDINGS, cast_select_list
from txn_audit.severity import Severity
from txn_audit.usage import AuditOptions

#: the severities as the ``findings`` table stores them
INFO, WARNING = Severity.INFO.value, Severity.WARNING.value


# -- formatting helpers -----------------------------------------------------------------


def ts(col: Column | str) -> Column:
    """Epoch milliseconds as ``2026-11-22 20:00:08.971 UTC``."""
    c = F.col(col) if isinstance(col, str) else col
    return F.concat(F.date_format(F.timestamp_millis(c), "yyyy-MM-dd HH:mm:ss.SSS"), F.lit(" UTC"))


def duration(ms: Column) -> Column:
    """``words.duration_text`` as a column: the same steps (``words.DURATION_STEPS``)."""
    secs = ms / 1000.0
    *steps, (_any, size, unit) = DURATION_STEPS
    text = F.format_string(f"%.1f {unit}", secs / size)
    for below, size, unit in reversed(steps):
        assert below is not None  # only the last step takes any duration
        text = F.when(ms < below, F.format_string(f"%.1f {unit}", secs / size)).otherwise(text)
    return text


def pname(topic: str = "topic", partition: str = "partition") -> Column:
    return F.concat(F.col(topic), F.lit("-"), F.col(partition).cast("string"))


def finding(df: DataFrame, kind: str | Column, severity: Column | str, evidence: Column,
            **columns: Column) -> DataFrame:
    """Shape ``df`` into findings rows; columns not given are taken from ``df`` by name, or null.
    ``kind``: one of ``FINDING_KINDS``, or a column whose values are."""
    sev = F.lit(Severity(severity).value) if isinstance(severity, str) else severity
    given = {"kind": F.lit(kind) if isinstance(kind, str) else kind, "severity": sev, "evidence": evidence, **columns}
    computed = df.select("*", *[column.alias(f"_finding_{name}") for name, column in given.items()])
    present = {name: f"`{name}`" for name in df.columns}
    sources = present | {name: f"`_finding_{name}`" for name in given}
    return computed.selectExpr(*cast_select_list(FINDINGS, sources))


# -- offsets ----------------------------------------------------------------------------------


def pending_offset_commit_findings(offset_commits: DataFrame, open_offsets: DataFrame) -> DataFrame:
    """``pending_offset_commit``: a group's offsets committed inside a transaction no marker ended.
    ``open_offsets``: the open transactions on ``__consumer_offsets`` (``partition_transactions``
    rows, read on the driver: few)."""
    open_ = open_offsets.select(
        "partition", "producer_id", "first_offset", "transactional_id", F.col("max_epoch").alias("epoch")
    )
    commits = offset_commits.where(F.col("is_transactional")).alias("c")
    joined = commits.join(
        open_.alias("o"),
        (F.col("c.partition") == F.col("o.partition")) & (F.col("c.producer_id") == F.col("o.producer_id"))
        & (F.col("c.offset") >= F.col("o.first_offset")),
    )
    grouped = joined.groupBy("c.topic", "c.partition", "c.broker_id", "c.producer_id", "c.group_id").agg(
        F.first("o.transactional_id").alias("transactional_id"),
        F.first("o.epoch").alias("producer_epoch"),
        F.min("c.offset").alias("first_offset"),
        F.max("c.offset").alias("last_offset"),
        F.min("c.record_timestamp").alias("first_timestamp"),
        F.array_sort(F.collect_set(F.concat(F.col("c.commit_topic"), F.lit("-"),
                                            F.col("c.commit_partition").cast("string")))).alias("committed"),
    )
    return finding(
        grouped,
        "pending_offset_commit",
        WARNING,
        F.format_string(
            "group %s has offsets for %s committed inside producer %d's transaction (offsets %d-%d of %s) that has "
            "no marker: the group's offsets stay unstable (UNSTABLE_OFFSET_COMMIT) until it ends",
            F.col("group_id"), F.array_join("committed", ", "), F.col("producer_id"), F.col("first_offset"),
            F.col("last_offset"), pname(),
        ),
    )


# -- the batches a rule names ------------------------------------------------------------------


def batches_named(batches: DataFrame, keys: DataFrame, columns: tuple[str, ...]) -> DataFrame:
    """The rows of ``batches`` whose ``columns`` equal a row of ``keys`` (a frame of distinct rows
    of those columns, few: the segments of a rule's findings). Up to
    ``NAMED_MAX`` of them are collected and named in a filter, one ``IN`` of the last column per
    value of the others, which Parquet answers from its row groups' statistics (a row group holds
    one segment's batches), so the other batches are not read; more are broadcast to a semi join,
    which reads every batch. A key with a null matches nothing, as in a join."""
    named = keys.limit(NAMED_MAX + 1).collect()
    if len(named) > NAMED_MAX:
        return batches.join(F.broadcast(keys), list(columns), "left_semi")
    *outer, last = columns
    by_outer: dict[tuple[object, ...], list[object]] = {}
    for row in named:
        values = tuple(row[column] for column in columns)
        if None not in values:
            by_outer.setdefault(values[:-1], []).append(values[-1])
    condition = F.lit(False)
    for prefix, lasts in sorted(by_outer.items()):
        term = F.col(last).isin(sorted(lasts))
        for column, value in zip(outer, prefix, strict=True):
            term = (F.col(column) == value) & term
        condition = condition | term
    return batches.where(condition)


# -- Kafka's own verdicts attached to the dump ------------------------------------------------


def find_hanging_outputs(reported: DataFrame) -> DataFrame:
    """The rows of ``reported_transactions`` that came from ``kafka-transactions.sh find-hanging``."""
    return reported.where(F.col("tool") == "find-hanging")


def find_hanging_disagreement_findings(
    reported: DataFrame, hanging: DataFrame, ptx: DataFrame, opts: AuditOptions
) -> DataFrame:
    """Compare txn-audit's ``hanging_transaction`` findings with every attached find-hanging output.

    A transaction one side calls hanging and the other does not becomes a ``tool_disagreement``
    finding that says what txn-audit sees of it, so the difference can be explained: the tool ran
    at another time or with another timeout, the marker came after it ran, the partition is not
    in the dump, or one of the two is wrong (warning).
    """
    fh = find_hanging_outputs(reported)
    runs = fh.select("file", "run_timestamp", "max_transaction_timeout_ms",
                     F.col("broker_id").alias("run_broker")).distinct()
    theirs = fh.where(F.col("line").isNotNull()).select(
        "file", "run_timestamp", "max_transaction_timeout_ms", "topic", "partition", "producer_id", "producer_epoch",
        F.col("start_offset").alias("first_offset"), F.col("last_timestamp").alias("their_last_timestamp"),
    )
    ours = hanging.select(
        "topic", "partition", "producer_id", "first_offset", F.col("producer_epoch").alias("our_epoch"),
        F.col("last_timestamp").alias("our_last_timestamp"), F.col("broker_id").alias("our_broker"),
    )
    key = ["topic", "partition", "producer_id", "first_offset"]
    # the tool's --max-transaction-timeout, in the minutes it takes
    timeout_minutes = (F.col("max_transaction_timeout_ms") / 60_000).cast("long").cast("string")
    tool = F.format_string(
        "kafka-transactions.sh find-hanging (%s, run at %s with --max-transaction-timeout %s min)",
        F.col("file"), F.coalesce(ts("run_timestamp"), F.lit("an unknown time")),
        F.coalesce(timeout_minutes, F.lit("?")),
    )
    here = pname()

    # listed by find-hanging, not hanging for txn-audit
    seen = ptx.select(
        *key, F.col("state").alias("our_state"), "marker_type", "marker_offset",
    )
    in_dump = ptx.select("topic", "partition").distinct().withColumn("partition_in_dump", F.lit(True))
    only_theirs = (
        theirs.join(ours.select(*key), key, "left_anti")
        .join(seen, key, "left")
        .join(in_dump, ["topic", "partition"], "left")
    )
    their_view = F.when(
        F.col("partition_in_dump").isNull(), F.format_string("%s is not in the dump", here)
    ).when(
        F.col("our_state").isNull(),
        F.format_string("the dump holds no transaction of producer %d starting at offset %d on %s",
                        F.col("producer_id"), F.col("first_offset"), here),
    ).when(
        F.col("our_state") == "open",
        F.format_string(
            "txn-audit sees it open but not hanging at the audit time %s (its open_transaction finding says why)%s",
            ts(F.lit(opts.audit_ms)),
            F.when(F.col("run_timestamp").isNotNull() & (F.col("run_timestamp") != opts.audit_ms), F.format_string(
                "; to judge it as the tool did, scan with --as-of %s --max-transaction-timeout %sm",
                F.date_format(F.timestamp_millis(F.col("run_timestamp")), "yyyy-MM-dd'T'HH:mm:ss.SSS'Z'"),
                F.coalesce(timeout_minutes, F.lit("<minutes>")),
            )).otherwise(F.lit("")),
        ),
    ).otherwise(
        F.format_string("in the dump a %s marker at offset %d closes it (written after the tool ran?)",
                        F.col("marker_type"), F.col("marker_offset"))
    )
    theirs_rows = finding(
        only_theirs,
        "tool_disagreement",
        F.when(F.col("partition_in_dump").isNull(), INFO).otherwise(WARNING),
        F.format_string(
            "%s lists producer %d (epoch %d) on %s as hanging from offset %d (last write %s); txn-audit does not "
            "call it hanging: %s",
            tool, F.col("producer_id"), F.col("producer_epoch"), here, F.col("first_offset"),
            ts("their_last_timestamp"), their_view,
        ),
        last_timestamp=F.col("their_last_timestamp"),
    )

    # hanging for txn-audit, not listed by a find-hanging run
    only_ours = ours.crossJoin(runs).join(theirs.select("file", *key), ["file", *key], "left_anti")
    cutoff = F.col("run_timestamp") - F.col("max_transaction_timeout_ms")
    too_young = F.col("our_last_timestamp") > cutoff
    other_broker = (F.col("run_broker").isNotNull() & F.col("our_broker").isNotNull()
                    & (F.col("run_broker") != F.col("our_broker")))
    explained = F.coalesce(too_young, F.lit(False)) | F.coalesce(other_broker, F.lit(False))
    our_view = F.when(
        other_broker, F.format_string("the tool asked broker %d; this replica is on broker %d",
                                      F.col("run_broker"), F.col("our_broker")),
    ).when(
        F.col("run_timestamp").isNull() | F.col("max_transaction_timeout_ms").isNull(),
        F.lit("the output does not say when the tool ran or with which timeout, so the difference cannot be explained"),
    ).when(
        too_young,
        F.format_string("when the tool ran the producer's last write was %s old, under its timeout",
                        duration(F.col("run_timestamp") - F.col("our_last_timestamp"))),
    ).otherwise(F.lit("its last write was older than the tool's timeout when it ran, so find-hanging should have "
                      "listed it: check that the coordinator, not this dump, is right"))
    ours_rows = finding(
        only_ours,
        "tool_disagreement",
        F.when(explained, INFO).otherwise(WARNING),
        F.format_string(
            "txn-audit finds producer %d (epoch %d) hanging on %s from offset %d (last write %s), but %s does not "
            "list it: %s",
            F.col("producer_id"), F.col("our_epoch"), here, F.col("first_offset"), ts("our_last_timestamp"), tool,
            our_view,
        ),
        producer_epoch=F.col("our_epoch"),
        broker_id=F.col("our_broker"),
        last_timestamp=F.col("our_last_timestamp"),
    )
    return theirs_rows.unionByName(ours_rows)
