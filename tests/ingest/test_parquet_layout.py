"""How the ingest workers lay out the decoded tables' Parquet files."""

from __future__ import annotations

from typing import Any

import pyarrow.parquet as pq

from txn_audit.schemas import PLAIN_COLUMNS


def test_offsets_are_stored_plain_and_names_as_dictionaries(sample_scan: Any) -> None:
    tables = sample_scan.out / "tables"
    checked = set()
    for table in ("batches", "control_markers", "txn_log"):
        files = sorted((tables / table).glob("*.parquet"))
        assert files, table
        for path in files:
            metadata = pq.ParquetFile(path).metadata
            for group in range(metadata.num_row_groups):
                row_group = metadata.row_group(group)
                for index in range(row_group.num_columns):
                    column = row_group.column(index)
                    dictionary = any("DICTIONARY" in encoding for encoding in column.encodings)
                    if column.path_in_schema in PLAIN_COLUMNS:
                        assert not dictionary, (path.name, column.path_in_schema)
                        checked.add(column.path_in_schema)
                    elif column.path_in_schema in ("topic", "producer_id"):
                        assert dictionary, (path.name, column.path_in_schema)
    assert {"base_offset", "position", "offset", "stored_crc"} <= checked
