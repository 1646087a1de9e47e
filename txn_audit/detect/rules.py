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
hanging, open, epoch mismatch) and of the coordinator's decisions against the markers
(``detect.decision_rules``: missing marker, outcome mismatch, coordinator stuck). Here remain
the rules that join their few rows with many: duplicate markers (with the markers before
them), offsets committed in open transactions (with the offset commits) and ``find-hanging``'s
verdicts (with the transactions they name).
"""

from __future__ import annotations


import pyarrow.compute as pc
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from txn_audit.detect.words import DURATION_STEPS, KNOWN_MARKERS
from txn_audit.reconstruct import NAMED_MAX
from txn_audit.schemas import FINDINGS, cast_select_list
from txn_audit.severity import Severity
from txn_audit.usage import AuditOptions

#: the severities as the ``findings`` table stores them
INFO, WARNING, CRITICAL = Severity.INFO.value, Severity.WARNING.value, Severity.CRITICAL.value


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


# -- coordinator against partitions ----------------------------------------------------------


#: the partition transactions that are a marker without data following another marker of their
#: producer there: every ``duplicate_marker_findings`` row is of one (a pyarrow filter)
BARE_MARKERS = (pc.field("first_offset").is_null() & pc.field("marker_offset").is_valid()
                & pc.field("prev_marker_offset").is_valid())


def duplicate_marker_findings(ptx: DataFrame, bare: DataFrame, matches: DataFrame,
                              producer_ids: DataFrame) -> DataFrame:
    """``duplicate_marker``: a marker that repeats the previous marker of its producer on the
    partition (same epoch) without a decision of its own: one decision written twice. A
    coordinator writes a marker again when it resends after a lost answer or after a failover
    reloads a Prepare* record; ``kafka-transactions.sh abort`` for a transaction that had already
    ended leaves one too.

    * With no record of the producer since the first, the repeat ends nothing (Kafka 4.2+
      accepts it for this reason, KAFKA-19999): info, or a warning when its result differs from
      the first's (whoever sent it may take a committed transaction for aborted).
    * When the producer's next transaction was open there, the repeat ended it before its own
      decision, whose marker then found nothing open (Kafka 4.2+ refuses such a repeat): a
      warning, critical when that decision's result differs from the repeat's (exactly-once
      violated). Seen from that later marker, so a next transaction never ended is not judged.

    A repeat is told from a transaction that added the partition and wrote nothing to it (its
    marker carries the same epoch under transaction version 1) by what is certain: the first
    marker's epoch is above the data it ended (a bumped epoch: every marker of transaction
    version 2, a coordinator's fence or timeout abort under version 1), or, under version 2, the
    repeat's epoch equals the data it ended; or the coordinator log holds the Prepare* record the
    first answered (``prepare_marker_matches``) and none is answered by the repeat (a later
    transaction would have left one, which compaction cannot have removed while an earlier
    record of its transactional id is still there).

    ``bare``: the (topic, partition, producer, ``txn_seq``) of the ``BARE_MARKERS`` rows of ``ptx``,
    few rows (read on the driver). Only those markers and the two before each are read, joined by
    broadcast.
    """
    key = ["topic", "partition", "producer_id"]
    wanted = bare.unionByName(bare.withColumn("txn_seq", F.col("txn_seq") - 1)).unionByName(
        bare.withColumn("txn_seq", F.col("txn_seq") - 2)).distinct()
    rows = ptx.join(F.broadcast(wanted), [*key, "txn_seq"]).where(F.col("marker_offset").isNotNull())
    answers = matches.where(F.col("has_marker")).select(
        *key, F.col("next_marker_offset").alias("marker_offset"), F.col("txn_log_partition").alias("log_partition"),
        F.col("txn_log_offset").alias("log_offset"), F.col("state").alias("decided"),
        ((F.col("state") == "PrepareAbort") & (F.col("ts") - F.col("started") >= F.col("timeout_ms")))
        .alias("timed_out"), F.col("timeout_ms"),
    )
    answered = answers.join(F.broadcast(rows.select(*key, "marker_offset")), [*key, "marker_offset"])
    tv2 = producer_ids.where(F.col("transaction_version") == 2).select("producer_id", F.lit(True).alias("tv2"))
    marker = (
        rows.join(answered, [*key, "marker_offset"], "left")
        .join(F.broadcast(tv2), "producer_id", "left")
        .select(
            *key, "txn_seq", "broker_id", "transactional_id", "marker_offset", "marker_type", "marker_epoch",
            "marker_timestamp", "first_offset", "last_data_offset", "max_epoch", "log_partition", "log_offset",
            "decided", "timed_out", "timeout_ms",
            F.coalesce("tv2", F.lit(False)).alias("tv2"),
            F.coalesce(F.col("max_epoch") < F.col("marker_epoch"), F.lit(False)).alias("bumped"),
        )
    ).localCheckpoint()  # the three markers of each chain below are read from it

    def step(back: int) -> DataFrame:
        """``marker``'s columns, prefixed ``m<back>_``, keyed to the marker ``back`` after it."""
        return marker.select(*key, (F.col("txn_seq") + back).alias("txn_seq"),
                             *[F.col(c).alias(f"m{back}_{c}") for c in marker.columns if c not in key + ["txn_seq"]])

    # the bare marker (m0), the one before it (m1) and the one before that (m2)
    chain = step(0).join(bare, [*key, "txn_seq"]).join(step(1), [*key, "txn_seq"]).join(step(2), [*key, "txn_seq"],
                                                                                         "left")

    def repeats(later: int) -> Column:
        """The marker ``later`` repeats the one before it: same epoch, no decision of its own, and
        the one before it certainly ended its transaction with that epoch."""
        first = later + 1
        return (
            (F.col(f"m{later}_marker_epoch") == F.col(f"m{first}_marker_epoch"))
            & F.col(f"m{later}_log_offset").isNull()
            & (F.col(f"m{first}_bumped") | F.col(f"m{first}_log_offset").isNotNull()
               | (F.col(f"m{later}_tv2") & F.col(f"m{later}_first_offset").isNotNull()
                  & (F.col(f"m{later}_max_epoch") == F.col(f"m{later}_marker_epoch"))))
        )

    noop = chain.where(repeats(0))
    ended = chain.where(F.col("m1_first_offset").isNotNull() & F.col("m2_marker_offset").isNotNull()
                        & F.coalesce(repeats(1), F.lit(False)))
    known = (F.col("m0_marker_type").isin(*KNOWN_MARKERS) & F.col("m1_marker_type").isin(*KNOWN_MARKERS))

    def word(column: str) -> Column:
        """What a marker's type did to its transaction."""
        return F.when(F.col(column) == "COMMIT", F.lit("committed")).when(
            F.col(column) == "ABORT", F.lit("aborted")).otherwise(F.lit("decided"))

    def first_was(first: int) -> Column:
        at = F.format_string("__transaction_state-%d offset %d", F.col(f"m{first}_log_partition"),
                             F.col(f"m{first}_log_offset"))
        return (
            F.when(F.col(f"m{first}_timed_out"), F.format_string(
                "; the first was the coordinator's abort of a transaction open longer than its timeout of %d ms "
                "(PrepareAbort at %s)", F.col(f"m{first}_timeout_ms"), at))
            .when(F.col(f"m{first}_log_offset").isNotNull(),
                  F.format_string("; the first answered the coordinator's %s at %s", F.col(f"m{first}_decided"), at))
            .otherwise(F.lit(""))
        )

    resend = (". A coordinator's resend (after a lost answer or a coordinator failover), or kafka-transactions.sh "
              "abort for a transaction that had ended, writes such a repeat")
    # the repeat's result against the first's (no-op), the decision's against the repeat's (ended)
    differs = known & (F.col("m0_marker_type") != F.col("m1_marker_type"))

    def placed(repeat: int) -> dict[str, Column]:
        """The finding's place, the marker ``repeat``, and its span: from the marker it repeats
        to the bare marker (m0)."""
        return {
            "broker_id": F.col(f"m{repeat}_broker_id"), "transactional_id": F.col(f"m{repeat}_transactional_id"),
            "producer_epoch": F.col(f"m{repeat}_marker_epoch"), "first_offset": F.col(f"m{repeat}_marker_offset"),
            "last_offset": F.col("m0_marker_offset"), "first_timestamp_ms": F.col(f"m{repeat + 1}_marker_timestamp"),
            "last_timestamp_ms": F.col("m0_marker_timestamp"),
        }

    noop_rows = finding(
        noop,
        "duplicate_marker",
        F.when(differs, WARNING).otherwise(INFO),
        F.concat(
            F.format_string(
                "%s marker at offset %d of %s repeats the %s marker at offset %d (producer %d, epoch %d) with no "
                "record of the producer between them",
                F.col("m0_marker_type"), F.col("m0_marker_offset"), pname(), F.col("m1_marker_type"),
                F.col("m1_marker_offset"), F.col("producer_id"), F.col("m0_marker_epoch")),
            first_was(1),
            F.when(differs, F.concat(
                F.lit(": it ended no transaction, but whoever sent it may take the transaction for "),
                word("m0_marker_type"),
                F.when(F.col("m1_first_offset").isNotNull(), F.format_string(
                    "; its records at offsets %d-%d stay %s", F.col("m1_first_offset"), F.col("m1_last_data_offset"),
                    word("m1_marker_type"))).otherwise(F.lit("")),
            )).otherwise(F.lit(": it ended no transaction and changed nothing")),
            F.lit(resend),
            F.when(F.col("m0_tv2"), F.lit("; under transaction version 2, brokers from Kafka 4.2 write it only when "
                                          "no transaction is open (KAFKA-19999)")).otherwise(F.lit("")),
        ),
        **placed(0),
    )
    ended_rows = finding(
        ended,
        "duplicate_marker",
        F.when(differs, CRITICAL).otherwise(WARNING),
        F.concat(
            F.format_string(
                "%s marker at offset %d of %s repeats the %s marker at offset %d (producer %d, epoch %d), but the "
                "producer's next transaction was open here: the repeat ended its records at offsets %d-%d as %s "
                "before their own decision, whose %s marker at offset %d then found nothing open",
                F.col("m1_marker_type"), F.col("m1_marker_offset"), pname(), F.col("m2_marker_type"),
                F.col("m2_marker_offset"), F.col("producer_id"), F.col("m1_marker_epoch"), F.col("m1_first_offset"),
                F.col("m1_last_data_offset"), word("m1_marker_type"), F.col("m0_marker_type"),
                F.col("m0_marker_offset")),
            F.when(differs, F.lit(" (an exactly-once violation: the outcome differs)")).otherwise(F.lit("")),
            first_was(2),
            F.lit(resend),
            F.lit("; brokers from Kafka 4.2 refuse a repeat while a transaction is open (KAFKA-19999)"),
        ),
        **placed(1),
    )
    return noop_rows.unionByName(ended_rows)


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
        F.min("c.record_timestamp").alias("first_timestamp_ms"),
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
    runs = fh.select("file", "run_at_ms", "max_transaction_timeout_min",
                     F.col("broker_id").alias("run_broker")).distinct()
    theirs = fh.where(F.col("line").isNotNull()).select(
        "file", "run_at_ms", "max_transaction_timeout_min", "topic", "partition", "producer_id", "producer_epoch",
        F.col("start_offset").alias("first_offset"), F.col("last_timestamp").alias("their_last_timestamp"),
    )
    ours = hanging.select(
        "topic", "partition", "producer_id", "first_offset", F.col("producer_epoch").alias("our_epoch"),
        F.col("last_timestamp_ms").alias("our_last_timestamp"), F.col("broker_id").alias("our_broker"),
    )
    key = ["topic", "partition", "producer_id", "first_offset"]
    tool = F.format_string(
        "kafka-transactions.sh find-hanging (%s, run at %s with --max-transaction-timeout %s min)",
        F.col("file"), F.coalesce(ts("run_at_ms"), F.lit("an unknown time")),
        F.coalesce(F.col("max_transaction_timeout_min").cast("string"), F.lit("?")),
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
            F.when(F.col("run_at_ms").isNotNull() & (F.col("run_at_ms") != F.lit(opts.audit_ms)), F.format_string(
                "; to judge it as the tool did, scan with --as-of %s --max-transaction-timeout %sm",
                F.date_format(F.timestamp_millis(F.col("run_at_ms")), "yyyy-MM-dd'T'HH:mm:ss.SSS'Z'"),
                F.coalesce(F.col("max_transaction_timeout_min").cast("string"), F.lit("<minutes>")),
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
        last_timestamp_ms=F.col("their_last_timestamp"),
    )

    # hanging for txn-audit, not listed by a find-hanging run
    only_ours = ours.crossJoin(runs).join(theirs.select("file", *key), ["file", *key], "left_anti")
    cutoff = F.col("run_at_ms") - F.col("max_transaction_timeout_min") * 60_000
    too_young = F.col("our_last_timestamp") > cutoff
    other_broker = (F.col("run_broker").isNotNull() & F.col("our_broker").isNotNull()
                    & (F.col("run_broker") != F.col("our_broker")))
    explained = F.coalesce(too_young, F.lit(False)) | F.coalesce(other_broker, F.lit(False))
    our_view = F.when(
        other_broker, F.format_string("the tool asked broker %d; this replica is on broker %d",
                                      F.col("run_broker"), F.col("our_broker")),
    ).when(
        F.col("run_at_ms").isNull() | F.col("max_transaction_timeout_min").isNull(),
        F.lit("the output does not say when the tool ran or with which timeout, so the difference cannot be explained"),
    ).when(
        too_young,
        F.format_string("when the tool ran the producer's last write was %s old, under its timeout",
                        duration(F.col("run_at_ms") - F.col("our_last_timestamp"))),
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
        last_timestamp_ms=F.col("our_last_timestamp"),
    )
    return theirs_rows.unionByName(ours_rows)
