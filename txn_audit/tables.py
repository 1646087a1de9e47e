"""Reading the Parquet tables back, always with the declared schema."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from txn_audit.manifest import Manifest, TableManifest
from txn_audit.schemas import ALL_TABLES, RAW_TABLES, in_ms, read_frame, spark_schema

if TYPE_CHECKING:
    import pyarrow as pa
    import pyarrow.compute as pc
    from pyspark.sql import DataFrame, SparkSession


@dataclass(frozen=True)
class RawTables:
    """The raw tables as reconstruct takes them: a frame per table over the files ingest wrote,
    and the manifest of those files (``txn_audit.manifest``), from which the passes read each
    replica's rows in their own tasks and the rules read small tables on the driver."""

    frames: dict[str, DataFrame]
    manifest: Manifest

    def __getitem__(self, name: str) -> DataFrame:
        return self.frames[name]

    def files(self, name: str) -> TableManifest:
        """The manifest of table ``name``'s files."""
        table = self.manifest.table(name)
        if table is None:
            raise KeyError(f"the manifest lists no table {name!r}")
        return table

    def holds_no_rows(self, name: str) -> bool:
        """Whether the manifest shows table ``name`` without a row: then nothing need be asked
        of its frame."""
        return self.files(name).rows == 0


def load_table(spark: SparkSession, tables_dir: str | Path, name: str) -> DataFrame:
    """One table as a DataFrame with the schema of ``txn_audit.schemas`` (not the inferred one), its
    instants as epoch ms (``schemas.read_frame``)."""
    return read_frame(spark, ALL_TABLES[name], str(Path(tables_dir) / name))


def load_tables(spark: SparkSession, tables_dir: str | Path, names: Iterable[str]) -> dict[str, DataFrame]:
    return {name: load_table(spark, tables_dir, name) for name in names}


def load_raw_tables(spark: SparkSession, tables_dir: str | Path) -> RawTables:
    """Every raw table under ``tables_dir``, with their files as the scan's ledger beside them
    records them (``FileNotFoundError`` without one: tables ingest did not write)."""
    from txn_audit.ledger import Ledger

    ledger = Ledger.load(tables_dir)
    if ledger is None:
        raise FileNotFoundError(f"no ledger of the raw tables in {tables_dir}: ingest the dump again")
    return RawTables(load_tables(spark, tables_dir, RAW_TABLES), ledger.raw)


def rows_on_partitions(values: Mapping[tuple[str, int], Iterable[int]], column: str) -> pc.Expression | None:
    """A filter of the rows whose ``column`` is one of the ``values`` of their (topic, partition):
    few rows a rule names, which Parquet answers from its row groups' statistics first
    (``read_arrow_table``); None when no value is given."""
    import pyarrow.compute as pc

    condition: pc.Expression | None = None
    for (topic, partition), named in sorted(values.items()):
        term = ((pc.field("topic") == topic) & (pc.field("partition") == partition)
                & pc.field(column).isin(sorted(set(named))))
        condition = term if condition is None else condition | term
    return condition


def read_arrow_table(tables_dir: str | Path, name: str, where: pc.Expression | None = None) -> pa.Table:
    """A small table, or the few rows of one that meet ``where``, read on the driver with pyarrow,
    with its declared schema, instants as epoch ms (``schemas.in_ms``; no Spark job); Parquet
    answers ``where`` from its row groups' statistics first."""
    import pyarrow.dataset as ds

    return ds.dataset(str(Path(tables_dir) / name), format="parquet", schema=in_ms(ALL_TABLES[name])).to_table(
        filter=where)


def arrow_frame(spark: SparkSession, rows: pa.Table) -> DataFrame:
    """``rows`` (read or computed on the driver) as a frame of their schema. In one chunk:
    pyspark 4.1's ``createDataFrame`` loses the rows of a table whose first two chunks are empty
    (e.g. two rules that found nothing before one that did). No rows: no chunk, which pyspark
    refuses for a nested column, so an empty frame of the schema."""
    schema = spark_schema(rows.schema)
    if rows.num_rows == 0:
        return spark.createDataFrame([], schema)
    return spark.createDataFrame(rows.combine_chunks(), schema)
