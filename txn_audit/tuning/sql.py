"""Spark SQL's settings for txn-audit's sessions: the shuffles' partitions, the settings every
session gets (``SESSION_SQL``), and the interpreted expressions of a scan of a small input
(``sized_for``). Each setting, with the measurement behind it, is listed in ``txn_audit.tuning``'s
docstring.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

#: ``spark.sql.shuffle.partitions`` of a session ``spark.build_session`` builds, unless its caller
#: says otherwise. More partitions for the producer pass (16 or 32) were 1-3 s slower at 4 GiB;
#: 2 instead of 8 for a small dump was within the noise (git log -- docs/performance.md).
SHUFFLE_PARTITIONS = 8

#: settings of every session ``spark.build_session`` builds (under spark-submit, those its
#: ``--conf`` does not give)
SESSION_SQL = {
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    # PySpark otherwise makes about five extra calls into the JVM for every column function
    # called, to tag plans with the Python call site: a scan builds thousands of columns
    "spark.python.sql.dataFrameDebugging.enabled": "false",
    # a generated class named without its codegen stage's id: the same code at another stage id,
    # in another query or another branch of one, is a hit in Spark's cache of compiled classes
    # instead of a new compile by Janino (338 against 367 classes over a scan of the realistic
    # 1 GiB dump, about 9.5 ms each)
    "spark.sql.codegen.useIdInClassName": "false",
}

#: A scan of an input of at most this many bytes runs Spark SQL's expressions interpreted
#: (``INTERPRETED_SQL``). A small dump's scan runs about 180 queries over a few thousand rows each;
#: generating and compiling Java code for every one of them (Janino, then the JIT) costs more than
#: the rows' evaluation, while over a GiB the generated code pays for itself many times. Paired
#: scans (git log -- docs/performance.md): the 2.2 MB ``healthy`` dump about 3 s faster interpreted, the
#: realistic 1 GiB dump 12 s slower.
INTERPRETED_MAX_BYTES = 64 << 20
#: the session settings of an interpreted scan (``sized_for``): no whole-stage code generation, and
#: expressions, projections and predicates evaluated by Spark's interpreted implementations
INTERPRETED_SQL = {"spark.sql.codegen.wholeStage": "false", "spark.sql.codegen.factoryMode": "NO_CODEGEN"}


@contextmanager
def sized_for(spark: SparkSession, input_bytes: int) -> Iterator[dict[str, str]]:
    """Within the block, ``spark`` runs its queries interpreted (``INTERPRETED_SQL``) when the
    input holds at most ``INTERPRETED_MAX_BYTES``; afterwards each setting is what it was (a
    notebook's session is left as it came). Yields the settings changed, none for a larger input.
    Results are the same either way: both are Spark's own implementations of every expression."""
    if input_bytes > INTERPRETED_MAX_BYTES:
        yield {}
        return
    conf = spark.conf
    before: dict[str, str | None] = {key: conf.get(key, None) for key in INTERPRETED_SQL}
    for key, value in INTERPRETED_SQL.items():
        conf.set(key, value)
    try:
        yield dict(INTERPRETED_SQL)
    finally:
        for key, previous in before.items():
            if previous is None:
                conf.unset(key)
            else:
                conf.set(key, previous)

