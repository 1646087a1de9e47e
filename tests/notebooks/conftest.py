"""A two-night warehouse built from the shared sample scan."""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

from tests.browser import browser  # noqa: F401 - a fixture of the notebooks' tests
from txn_audit.schemas import ALL_TABLES

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from tests.conftest import SampleScan

EARLIER = date(2026, 11, 20)
LATER = date(2026, 11, 21)
RESOLVED_KIND = "absorbed_late_record"  # absent on the earlier night


def read_table(folder: Path, name: str, where: ds.Expression | None = None) -> pa.Table:
    """A table straight from its Parquet folder (the tests' independent reading)."""
    return ds.dataset(str(folder / name), format="parquet", schema=ALL_TABLES[name]).to_table(filter=where)


def _rewrite(tables_dir: Path, name: str, table: pa.Table) -> None:
    folder = tables_dir / name
    shutil.rmtree(folder)
    folder.mkdir()
    pq.write_table(table, folder / "part-00000.parquet")


@dataclass(frozen=True)
class Warehouse:
    """``root`` holds ``EARLIER`` (the sample scan without its ``RESOLVED_KIND`` findings and with the
    most lagging partition not lagging yet) and ``LATER`` (the sample scan as it is)."""

    root: Path
    earlier_scan: Path
    later_scan: Path
    quiet_partition: tuple[str, int]  # the partition that did not lag on the earlier night


@pytest.fixture(scope="session")
def warehouse(spark: SparkSession, sample_scan: SampleScan, tmp_path_factory: pytest.TempPathFactory) -> Warehouse:
    from txn_audit.warehouse import partition_name, publish_run

    base = tmp_path_factory.mktemp("notebook-warehouse")
    earlier = base / "earlier-scan"
    shutil.copytree(sample_scan.out, earlier, ignore=shutil.ignore_patterns("report.html", "quality"))
    tables = earlier / "tables"
    findings = read_table(tables, "findings")
    _rewrite(tables, "findings", findings.filter(pc.field("kind") != RESOLVED_KIND))
    stability = read_table(tables, "partition_stability")
    held = stability.column("held_records").to_pylist()
    worst = held.index(max(held))
    lso = stability.column("last_stable_offset").to_pylist()
    lso[worst] = stability.column("high_watermark")[worst].as_py()
    index = stability.schema.get_field_index("last_stable_offset")
    stability = stability.set_column(index, stability.schema.field(index), pa.array(lso, pa.int64()))
    below = stability.column("lso_below_hw").to_pylist()
    below[worst] = False  # its status as the reconstruction would have computed it
    index = stability.schema.get_field_index("lso_below_hw")
    stability = stability.set_column(index, stability.schema.field(index), pa.array(below, pa.bool_()))
    _rewrite(tables, "partition_stability", stability)

    root = base / "warehouse"
    publish_run(spark, earlier, root, EARLIER)
    publish_run(spark, sample_scan.out, root, LATER)
    # what a reader must skip: a publish under way (hidden staging folders, an unlisted date)
    junk = read_table(tables, "findings").slice(0, 1)
    for hidden in (root / "findings" / f".{partition_name(LATER)}.staging-0",
                   root / "findings" / partition_name(LATER) / "_temporary",
                   root / "findings" / partition_name(date(2026, 11, 22))):
        hidden.mkdir(parents=True)
        pq.write_table(junk, hidden / "part-00000.parquet")
    pq.write_table(junk, root / "findings" / partition_name(LATER) / ".part-99999.parquet")
    quiet = (str(stability.column("topic")[worst]), int(stability.column("partition")[worst].as_py()))
    return Warehouse(root, earlier, sample_scan.out, quiet)
