"""Reading the Parquet tables back, always with the declared schema."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from txn_audit.schemas import ALL_TABLES, spark_schema

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession


def load_table(spark: SparkSession, tables_dir: str | Path, name: str) -> DataFrame:
    """One table as a DataFrame with the schema of ``txn_audit.schemas`` (not the inferred one)."""
    return spark.read.schema(spark_schema(ALL_TABLES[name])).parquet(str(Path(tables_dir) / name))


def load_tables(spark: SparkSession, tables_dir: str | Path, names: Iterable[str]) -> dict[str, DataFrame]:
    return {name: load_table(spark, tables_dir, name) for name in names}


def read_arrow_table(tables_dir: str | Path, name: str) -> pa.Table:
    """A small table read on the driver with pyarrow, with its declared schema (no Spark job)."""
    import pyarrow.dataset as ds

    return ds.dataset(str(Path(tables_dir) / name), format="parquet", schema=ALL_TABLES[name]).to_table()
