"""The warehouse's table schemas by version, and the one migration of an older date's tables.

Each published date records the version of the schemas its tables were written with, as
``schema_version`` in its run manifest (``runs/audit_date=D/run.json``, ``warehouse.publish_run``);
a date whose manifest has none was published before the versions were recorded: version 1.

* version 1: times as ``int64`` epoch milliseconds, Kafka's ``-1`` kept, and the names
  ``V1_RENAMES`` lists;
* version 2 (``SCHEMA_VERSION``): the tables of ``schemas.ALL_TABLES``, whose instants are
  ``TIMESTAMP(MILLIS, UTC)`` and whose time columns follow one naming rule (``schemas``).

``migrate`` brings a table of an older date to the current schemas as it is read (nothing is
rewritten in the warehouse): its columns renamed, its instants typed (``-1`` made null), its
durations given in minutes made milliseconds, a column it lacks null, the columns in order.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from txn_audit.schemas import ALL_TABLES, declared

__all__ = ["SCHEMA_VERSION", "V1_MINUTES", "V1_RENAMES", "manifest_version", "migrate"]

#: the version of the schemas this package writes (``schemas.ALL_TABLES``)
SCHEMA_VERSION = 2
#: version 1's names of the columns version 2 renamed, per table (every other name is kept)
V1_RENAMES: dict[str, dict[str, str]] = {
    "batches": {"delete_horizon_ms": "delete_horizon_timestamp"},
    "reported_transactions": {"run_at_ms": "run_timestamp", "max_transaction_timeout_min": "max_transaction_timeout_ms",
                              "duration_min": "duration_ms"},
    "findings": {"first_timestamp_ms": "first_timestamp", "last_timestamp_ms": "last_timestamp"},
    "incidents": {"held_since_ms": "held_since_timestamp"},
}
#: version 1's durations in minutes (by their version 2 names), which version 2 gives in ms
V1_MINUTES: dict[str, tuple[str, ...]] = {"reported_transactions": ("max_transaction_timeout_ms", "duration_ms")}


def manifest_version(manifest: Mapping[str, Any]) -> int:
    """The schema version a date's run manifest records (1 when it records none)."""
    version = manifest.get("schema_version", 1)
    return version if isinstance(version, int) else 1


def migrate(name: str, table: pa.Table, version: int) -> pa.Table:
    """``table`` of warehouse table ``name`` as a date of schema ``version`` holds it, with the
    current schema (``schemas.ALL_TABLES[name]``); other columns (e.g. the date's partition
    column) kept after them. A table of the current version is only cast to it."""
    if version > SCHEMA_VERSION:
        raise ValueError(f"table {name} is of schema version {version}; this txn-audit reads up to {SCHEMA_VERSION}")
    schema = ALL_TABLES[name]
    if version < SCHEMA_VERSION:
        renames = V1_RENAMES.get(name, {})
        table = table.rename_columns([renames.get(column, column) for column in table.column_names])
        for column in V1_MINUTES.get(name, ()):
            if column in table.column_names:
                index = table.column_names.index(column)
                table = table.set_column(index, column, pc.multiply(table.column(column).cast(pa.int64()), 60_000))
    columns = [table.column(f.name) if f.name in table.column_names else pa.nulls(table.num_rows, f.type)
               for f in schema]
    typed = declared(pa.Table.from_arrays(columns, names=schema.names), schema)
    for column in table.column_names:
        if column not in schema.names:
            typed = typed.append_column(table.schema.field(column), table.column(column))
    return typed
