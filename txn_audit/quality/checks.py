"""What the data-quality suites check, table by table, as plain data.

Each check is one Great Expectations expectation. ``data_health`` marks checks that fail
when the *dump* is damaged (a CRC mismatch, a torn tail) rather than when the tables are
wrong: detection already reports those as ``corrupt_batch`` / ``truncated_segment``, so
they become no second finding. ``severity`` is the severity of the ``invariant_violation``
finding a failure of any other check produces.

A rule on one row of a raw table (``RowRule``) is a pyarrow condition, tested where the table's
rows are read, once for all its rules (``row_faults``); its check counts the rows found to break it.

Great Expectations is imported when a check builds its expectation, not with this module:
quality's tasks (``replica_order``, ``epoch_order``, ``row_faults``) run in Python workers that
import this package and never build one, and the import costs about 2 s of a core in each.
"""

from __future__ import annotations

import json
import operator
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache, reduce
from typing import TYPE_CHECKING, Any, ClassVar

import pyarrow.compute as pc
import pyarrow.dataset as ds

from txn_audit.schemas import ALL_TABLES
from txn_audit.severity import SEVERITIES, Severity
from txn_audit.tuning.imports import import_great_expectations

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

TXN_STATES = ("Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit", "CompleteAbort",
              "Dead", "PrepareEpochFence")


@dataclass(frozen=True)
class Check:
    table: str
    name: str
    rule: str  # one sentence a human can check
    #: (meta, the suite's row queries) -> expectation; the row queries (``Check.query``) of the
    #: checks of one table, in order, which the suite counts in one Spark query (``SUITE_ROW_COUNTS``)
    build: Callable[..., Any]
    severity: Severity = Severity.WARNING
    data_health: bool = False
    #: views besides the table that the check's query reads, as ``{batch}_<name>``: the suite
    #: builds each from the same frame (``quality.COMPANIONS``)
    companions: tuple[str, ...] = ()

    @property
    def query(self) -> str | None:
        """A row check's query (a template over ``{batch}``: no row may come out), else None."""
        return self.build.query if isinstance(self.build, RowsBuilder) else None


@dataclass(frozen=True)
class RowRule:
    """A rule each row of a raw table keeps, checked by pyarrow where the table's files are read
    (``row_faults``): ``broken``, a condition on one row's columns, is true on a row that breaks it
    (a null, as in SQL's ``WHERE``, is no fault). It is the check ``name`` of ``table``'s suite,
    whose rows are the table's faults that carry its ``flag``."""

    table: str
    name: str
    rule: str
    broken: ds.Expression
    severity: Severity = Severity.WARNING
    data_health: bool = False

    @property
    def flag(self) -> str:
        """The column of the table's faults that tells which break this rule."""
        return f"breaks_{self.name}"


#: the view the row checks' queries read their table from (``{batch}``), registered by
#: ``SUITE_ROW_COUNTS`` as Great Expectations' own query metrics register theirs
BATCH_VIEW = "tmp_view"
#: the metric that counts the rows of every row check of a table's suite in one Spark query
SUITE_ROW_COUNTS = "txn_audit.suite_row_counts"
#: the column that tells apart the rows of each query in ``row_counts``' union
_QUERY_INDEX = "txn_audit_query"


def row_counts(spark: SparkSession, queries: list[str]) -> dict[str, list[Any]]:
    """The rows each of ``queries`` (Spark SQL) returns, counted by one query: their rows, each
    tagged with its query's index, in one union, counted per index. A query that Spark cannot
    run would fail them all: then each is counted alone, and one that fails has its error in
    its place (``{"counts": [int | None], "errors": [str | None]}``, in the order given).

    Each query of a suite run on its own costs a Spark job, its planning and its result's trip
    to the driver: on a small dump 0.1-0.5 s each, whatever its rows (git log -- docs/performance.md)."""
    union = " UNION ALL ".join(f"SELECT {index} AS {_QUERY_INDEX} FROM ({query})"
                               for index, query in enumerate(queries))
    try:
        found = {int(row[0]): int(row[1]) for row in spark.sql(
            f"SELECT {_QUERY_INDEX}, count(*) FROM ({union}) GROUP BY {_QUERY_INDEX}").collect()}
        return {"counts": [found.get(index, 0) for index in range(len(queries))], "errors": [None] * len(queries)}
    except Exception:  # noqa: BLE001 - found again below, for the one query that causes it
        counts: list[int | None] = []
        errors: list[str | None] = []
        for query in queries:
            try:
                counts.append(spark.sql(query).count())
                errors.append(None)
            except Exception as err:  # noqa: BLE001 - that check's result, not the suite's end
                counts.append(None)
                errors.append(f"{type(err).__name__}: {err}")
        return {"counts": counts, "errors": errors}


@cache
def no_unexpected_rows() -> type:
    """``ExpectNoUnexpectedRows``: Great Expectations' ``UnexpectedRowsExpectation`` (no row of a
    query may exist), its rows counted with those of the other row checks of its suite.

    Its parent runs a query for the count of the rows and another that collects up to 200 of
    them, two Spark queries per check. This one depends on one metric for the whole suite,
    ``SUITE_ROW_COUNTS`` (``row_counts``: one Spark query), whose value keys, the suite's
    queries, are the same in each of its expectations: Great Expectations computes a metric once
    per suite for all the expectations that name it. The suite fetches a few rows itself when a
    check fails (``quality._offending_rows``). Defined on first use, since importing Great
    Expectations costs seconds; defining it registers it and its metric with Great Expectations,
    once per process."""
    import_great_expectations()
    from great_expectations.compatibility import pydantic
    from great_expectations.core.metric_domain_types import MetricDomainTypes
    from great_expectations.execution_engine.sparkdf_execution_engine import SparkDFExecutionEngine
    from great_expectations.expectations.core.unexpected_rows_expectation import UnexpectedRowsExpectation
    from great_expectations.expectations.metrics.metric_provider import metric_value
    from great_expectations.expectations.metrics.query_metric_provider import QueryMetricProvider

    class SuiteRowCounts(QueryMetricProvider):
        metric_name = SUITE_ROW_COUNTS
        value_keys = ("suite_queries",)

        @metric_value(engine=SparkDFExecutionEngine)
        def _spark(cls, execution_engine: Any, metric_domain_kwargs: dict[str, Any],
                   metric_value_kwargs: dict[str, Any], metrics: dict[str, Any],
                   runtime_configuration: dict[str, Any]) -> dict[str, list[Any]]:
            frame, _, _ = execution_engine.get_compute_domain(metric_domain_kwargs,
                                                              domain_type=MetricDomainTypes.TABLE)
            frame.createOrReplaceTempView(BATCH_VIEW)
            queries = [query.format(batch=BATCH_VIEW) for query in json.loads(metric_value_kwargs["suite_queries"])]
            return row_counts(execution_engine.spark, queries)

    class ExpectNoUnexpectedRows(UnexpectedRowsExpectation):
        #: the row queries of every check of the suite, in order, as a JSON list (a metric's value
        #: keys are compared as values: the same text in each expectation of the suite)
        suite_queries: str = pydantic.Field(description="The row queries of every check of the suite (JSON list).")
        metric_dependencies: ClassVar[tuple[str, ...]] = (SUITE_ROW_COUNTS,)
        #: the keys Great Expectations hands to the metrics (``suite_queries``: the metric's value key)
        success_keys: ClassVar[tuple[str, ...]] = ("unexpected_rows_query", "suite_queries")

        def _validate(self, metrics: dict[str, Any], runtime_configuration: dict[str, Any] | None = None,
                      execution_engine: Any = None) -> dict[str, Any]:
            counted = metrics[SUITE_ROW_COUNTS]
            index = json.loads(self.suite_queries).index(self.unexpected_rows_query)
            if counted["errors"][index] is not None:
                raise RuntimeError(counted["errors"][index])  # Great Expectations keeps it as this check's error
            count = counted["counts"][index]
            return {"success": count == 0, "result": {"observed_value": count}}

    return ExpectNoUnexpectedRows


@dataclass(frozen=True)
class RowsBuilder:
    """The builder of a row check: its ``query`` (a template over ``{batch}``) as an
    ``ExpectNoUnexpectedRows``, counted with the suite's other row queries (``suite``: all of
    them, in order; empty: this one alone)."""

    query: str

    def __call__(self, meta: dict[str, Any], suite: tuple[str, ...] = ()) -> Any:
        queries = list(suite) or [self.query]
        if self.query not in queries:
            raise ValueError(f"the suite's row queries do not hold this check's: {self.query!r}")
        return no_unexpected_rows()(unexpected_rows_query=self.query, suite_queries=json.dumps(queries), meta=meta)


def _rows(sql: str) -> RowsBuilder:
    return RowsBuilder(sql)


def _columns_are(names: list[str]) -> Callable[..., Any]:
    def build(meta: dict[str, Any], suite: tuple[str, ...] = ()) -> Any:
        import_great_expectations()
        from great_expectations.expectations.core.expect_table_columns_to_match_set import (
            ExpectTableColumnsToMatchSet,
        )

        return ExpectTableColumnsToMatchSet(column_set=names, exact_match=True, meta=meta)
    return build


def _not_null(*columns: str) -> RowsBuilder:
    cond = " OR ".join(f"{c} IS NULL" for c in columns)
    return _rows(f"SELECT * FROM {{batch}} WHERE {cond}")


def _schema(table: str) -> Check:
    names = list(ALL_TABLES[table].names)
    return Check(table, "columns", f"{table} has exactly the columns of txn_audit.schemas",
                 _columns_are(names),
                 severity=Severity.CRITICAL)


def _one_of(column: str, values: tuple[str, ...]) -> str:
    """The rule that ``column`` holds one of ``values``, as a sentence."""
    return f"{column} is one of {', '.join(values)}"


def _in_set(table: str, column: str, values: tuple[str, ...]) -> Check:
    """``column`` holds one of ``values`` or nothing (as ``ExpectColumnValuesToBeInSet``, which
    costs three queries to this one)."""
    listed = ", ".join(f"'{v}'" for v in values)
    return Check(table, f"{column}_valid", _one_of(column, values),
                 _rows(f"SELECT * FROM {{batch}} WHERE {column} NOT IN ({listed})"))


def _never_down(epoch: str, offset: str, falls: str) -> str:
    """Rows (one per producer and epoch) where ``epoch`` goes down in ``offset`` order per
    producer and replica: an epoch with an entry after the first entry of a higher epoch, each
    shown at the entry that breaks the rule (``offset``) with the higher epoch it comes after
    (``higher_epoch``, from ``higher_epoch_<offset>``). They are the companion ``falls``
    (``epoch_order``), under the table's own column names."""
    return (f"SELECT topic, partition, broker_id, producer_id, offset AS {offset}, epoch AS {epoch}, higher_epoch, "
            f"higher_offset AS higher_epoch_{offset} FROM {{batch}}_{falls}")


def _broken_if_null(*columns: str) -> ds.Expression:
    return reduce(operator.or_, (ds.field(c).is_null() for c in columns))


def _not_in(column: str, values: tuple[str, ...]) -> ds.Expression:
    """``column`` holds a value and it is none of ``values`` (SQL's ``NOT IN``: a null is no fault)."""
    return ds.field(column).is_valid() & ~ds.field(column).isin(list(values))


_BATCH_RULES = (
    RowRule("batches", "keys_present", "every batch has its partition, file position and offsets",
            _broken_if_null("topic", "partition", "position", "base_offset", "last_offset", "magic")),
    RowRule("batches", "offsets_ordered", "last_offset >= base_offset >= 0 in every batch",
            (ds.field("last_offset") < ds.field("base_offset")) | (ds.field("base_offset") < 0),
            severity=Severity.CRITICAL),
    RowRule("batches", "control_is_one_record", "a control batch (marker) holds exactly one record",
            ds.field("is_control") & (ds.field("record_count") != 1) & ds.field("crc_ok")),
    RowRule("batches", "v2_size", "a v2 batch is at least 61 bytes",
            (ds.field("magic") == 2) & (ds.field("size_bytes") < 61), severity=Severity.CRITICAL),
)
#: a batch whose stored CRC does not match its bytes: damage to the dump (``data_health``)
_CRC_RULE = RowRule("batches", "crc_ok", "every batch's stored CRC matches its bytes", ~ds.field("crc_ok"),
                    data_health=True)
_MARKER_TYPES = ("COMMIT", "ABORT", "UNKNOWN")
_MARKER_TYPE_RULE = RowRule("control_markers", "marker_type_valid", _one_of("marker_type", _MARKER_TYPES),
                            _not_in("marker_type", _MARKER_TYPES))
_TXN_LOG_RULES = (
    RowRule("txn_log", "state_valid", f"every live record's state is one of {', '.join(TXN_STATES)}",
            ~ds.field("tombstone") & (ds.field("state").is_null() | _not_in("state", TXN_STATES))),
    RowRule("txn_log", "complete_lists_nothing", "Empty and Complete* records list no partitions",
            ds.field("state").isin(["Empty", "CompleteCommit", "CompleteAbort"])
            & (pc.list_value_length(ds.field("topic_partitions")) > 0)),
)
#: every rule on one row of a raw table (``RowRule``)
ROW_RULES: tuple[RowRule, ...] = (*_BATCH_RULES, _CRC_RULE, _MARKER_TYPE_RULE, *_TXN_LOG_RULES)
#: the columns a table's faults (``row_faults``) carry: those its rules read and a failed check's
#: examples show (every column, but for the batches, whose wide rows would cost a scan of them all)
FAULT_COLUMNS: dict[str, tuple[str, ...]] = {
    "batches": ("broker_id", "log_dir", "file", "topic", "partition", "segment_base_offset", "position", "base_offset",
                "last_offset", "magic", "is_control", "producer_id", "producer_epoch", "record_count", "size_bytes",
                "crc_ok"),
    **{table: tuple(ALL_TABLES[table].names) for table in ("control_markers", "txn_log")},
}


def row_faults_view(table: str) -> str:
    """The companion (``Check.companions``) that holds ``table``'s rows that break a ``RowRule``."""
    return f"{table}_row_faults"


def _row_check(rule: RowRule) -> Check:
    """``rule`` as a row check: the rows of its table's faults flagged as breaking it."""
    columns = ", ".join(FAULT_COLUMNS[rule.table])
    return Check(rule.table, rule.name, rule.rule,
                 _rows(f"SELECT {columns} FROM {{batch}}_{row_faults_view(rule.table)} WHERE {rule.flag}"),
                 severity=rule.severity, data_health=rule.data_health, companions=(row_faults_view(rule.table),))


CHECKS: tuple[Check, ...] = (
    *(_schema(t) for t in ALL_TABLES),
    # batches (kafka-formats Appendix A.1, A.2)
    *(_row_check(rule) for rule in _BATCH_RULES),
    Check("batches", "one_batch_per_offset",
          "one batch per (broker, log dir, topic, partition, base offset)",
          # duplicates are neighbours in replica order (``replica_order``): k copies, k - 1 rows
          _rows("SELECT broker_id, log_dir, topic, partition, base_offset, count(*) + 1 AS copies "
                "FROM {batch}_replica_neighbours WHERE base_offset = previous_base "
                "GROUP BY broker_id, log_dir, topic, partition, base_offset"),
          severity=Severity.CRITICAL, companions=("replica_neighbours",)),
    Check("batches", "no_overlap",
          "batches of a replica do not overlap: each starts after the previous one's last offset",
          _rows("SELECT topic, partition, broker_id, base_offset, last_offset, previous_last "
                "FROM {batch}_replica_neighbours WHERE base_offset <= previous_last"),
          severity=Severity.CRITICAL, companions=("replica_neighbours",)),
    Check("batches", "epochs_non_decreasing",
          "a producer's epoch never goes down in offset order on a partition",
          _rows(_never_down("producer_epoch", "base_offset", "producer_epoch_falls")),
          severity=Severity.CRITICAL, companions=("producer_epoch_falls",)),
    _row_check(_CRC_RULE),
    # control markers (A.3)
    _row_check(_MARKER_TYPE_RULE),
    Check("control_markers", "coordinator_epoch_non_decreasing",
          "the coordinator epoch of a producer's markers never goes down on a partition",
          _rows(_never_down("coordinator_epoch", "offset", "coordinator_epoch_falls")),
          companions=("coordinator_epoch_falls",)),
    # coordinator log (A.5)
    *(_row_check(rule) for rule in _TXN_LOG_RULES),
    # derived tables
    Check("partition_stability", "lso_at_most_hw", "last stable offset <= high watermark",
          _rows("SELECT * FROM {batch} WHERE high_watermark IS NOT NULL AND last_stable_offset > high_watermark"),
          severity=Severity.CRITICAL),
    Check("partition_stability", "log_start_at_most_lso",
          "log start offset <= last stable offset, but where a 4.x broker reports the start of the batch holding it",
          _rows("SELECT * FROM {batch} WHERE log_start_offset > last_stable_offset AND NOT unstable_at_batch_start"),
          severity=Severity.CRITICAL),
    Check("partition_stability", "held_not_negative", "held records and bytes are not negative",
          _rows("SELECT * FROM {batch} WHERE held_records < 0 OR held_bytes < 0")),
    Check("replica_stability", "hw_at_most_log_end", "no copy's high watermark or LSO lies beyond its own log end",
          _rows("SELECT * FROM {batch} WHERE high_watermark > log_end_offset OR last_stable_offset > log_end_offset"),
          severity=Severity.CRITICAL),
    Check("replica_stability", "one_chosen_per_partition", "exactly one copy of each partition is the one audited",
          _rows("SELECT topic, partition, count_if(chosen) AS chosen FROM {batch} GROUP BY topic, partition "
                "HAVING count_if(chosen) <> 1"),
          severity=Severity.CRITICAL),
    Check("partition_transactions", "offsets_ordered",
          "a transaction's data starts at or before its last data offset, which precedes its marker",
          # the columns the rule and its examples need, not all of a wide table
          _rows("SELECT topic, partition, broker_id, producer_id, txn_seq, state, first_offset, last_data_offset, "
                "marker_offset, marker_type FROM {batch} "
                "WHERE first_offset > last_data_offset OR marker_offset <= last_data_offset")),
    Check("partition_transactions", "one_open_per_producer",
          "a producer has at most one open transaction per partition",
          _rows("SELECT topic, partition, broker_id, producer_id, count(*) AS open FROM {batch} "
                "WHERE marker_offset IS NULL GROUP BY topic, partition, broker_id, producer_id "
                "HAVING count(*) > 1"),
          severity=Severity.CRITICAL),
    Check("blocked_consumers", "at_or_below_held_lso",
          "a blocked group's committed offset is at or below the LSO, which is below the HW, and its records "
          "behind are the HW minus that offset",
          _rows("SELECT * FROM {batch} WHERE NOT (committed_offset <= last_stable_offset "
                "AND last_stable_offset < high_watermark AND records_behind = high_watermark - committed_offset "
                "AND records_to_lso = last_stable_offset - committed_offset)"),
          severity=Severity.CRITICAL),
    Check("blocked_consumers", "one_per_group_and_partition", "one row per consumer group and partition",
          _rows("SELECT group_id, topic, partition, count(*) AS rows FROM {batch} "
                "GROUP BY group_id, topic, partition HAVING count(*) > 1"),
          severity=Severity.CRITICAL),
    _in_set("blocked_consumers", "time_behind_from", ("held_transaction", "commit")),
    _in_set("findings", "severity", tuple(s.value for s in SEVERITIES)),
    _in_set("incidents", "severity", tuple(s.value for s in SEVERITIES)),
    Check("incidents", "explains_its_findings", "an incident explains at least one finding and lists its kinds",
          _rows("SELECT incident_id, kind, findings FROM {batch} WHERE findings < 1 OR size(consequences) < 1")),
    Check("findings", "evidence_present", "every finding carries its evidence",
          _not_null("kind", "severity", "evidence")),
)
