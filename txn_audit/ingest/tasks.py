"""What a Spark worker is given and what it fills: ``FileTask`` and ``TableRows``.

Discovery (``discover``, ``text``) makes the tasks; the decoders (``worker``, ``text``) fill the
row buffers. Both sides import this module, and it imports neither.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from txn_audit.formats.model import DecodeIssue
from txn_audit.schemas import WORKER_OUTPUTS, combined_decode_schema


@dataclass(frozen=True, slots=True)
class FileTask:
    """One file for a worker to decode. ``path`` is what to open, ``rel_path`` what to report."""

    path: str
    rel_path: str
    kind: str  # log | snapshot | txnindex
    broker_id: int | None
    log_dir: str
    topic: str
    partition: int
    base_offset: int
    size_bytes: int
    # A slice of a large segment (see ``ingest.slices``): bytes ``[start, end)``, ``end`` None
    # for the end of the file; ``task`` >= 0 tags its rows; ``prev_last_offset`` is the last
    # offset before ``start`` when the driver knows it (a slice decoded again).
    start: int = 0
    end: int | None = None
    task: int = -1
    prev_last_offset: int | None = None

    @property
    def is_slice(self) -> bool:
        return self.task >= 0

    def replica(self) -> tuple[int | None, str, str, int]:
        return (self.broker_id, self.log_dir, self.topic, self.partition)


class TableRows:
    """Row buffers for the decoded tables; rows are tuples in schema column order.

    Rows decoded column-wise arrive as ready Arrow struct arrays (``add_struct``); ``parts``
    keeps them in order with the tuple rows added before them. ``task`` is the tag written
    with every row drained (set it only between drains).
    """

    def __init__(self) -> None:
        self.rows: dict[str, list[tuple[Any, ...]]] = {name: [] for name in WORKER_OUTPUTS}
        self.parts: dict[str, list[pa.StructArray]] = {name: [] for name in WORKER_OUTPUTS}
        self.task = -1
        self._part_rows = 0  # the rows in ``parts``, counted as they come and go (``clear_parts``)

    def __len__(self) -> int:
        """The rows held: asked after each decoded file, so counted, not summed over every part."""
        return sum(len(r) for r in self.rows.values()) + self._part_rows

    def add(self, table: str, row: tuple[Any, ...]) -> None:
        self.rows[table].append(row)

    def add_struct(self, table: str, rows: pa.StructArray) -> None:
        """Append rows already in the table's struct type, after the tuple rows added so far."""
        self._seal(table)
        self.parts[table].append(rows)
        self._part_rows += len(rows)

    def clear_parts(self, table: str) -> None:
        """Forget the parts of ``table`` (written, or handed on)."""
        self._part_rows -= sum(len(part) for part in self.parts[table])
        self.parts[table].clear()

    def _seal(self, table: str) -> None:
        rows = self.rows[table]
        if rows:
            schema = WORKER_OUTPUTS[table]
            columns = list(zip(*rows, strict=True))
            self.parts[table].append(
                pa.StructArray.from_arrays(
                    [pa.array(col, type=f.type) for col, f in zip(columns, schema, strict=True)], fields=list(schema)
                )
            )
            self._part_rows += len(rows)
            rows.clear()

    def issue(self, task: FileTask, issue: DecodeIssue) -> None:
        self.rows["decode_issues"].append(
            task.replica() + (task.rel_path, issue.position, issue.kind, issue.severity, issue.detail)
        )

    def drain(self) -> Iterator[pa.RecordBatch]:
        """Yield one combined-schema record batch per non-empty table, then clear."""
        combined = combined_decode_schema()
        for name in WORKER_OUTPUTS:
            self._seal(name)
            parts = self.parts[name]
            if not parts:
                continue
            struct = parts[0] if len(parts) == 1 else pa.concat_arrays(parts)
            arrays: list[pa.Array] = [
                pa.repeat(pa.scalar(name, pa.string()), len(struct)),
                pa.repeat(pa.scalar(self.task, pa.int64()), len(struct)),
            ]
            for other in WORKER_OUTPUTS:
                arrays.append(struct if other == name else pa.nulls(len(struct), combined.field(other).type))
            yield pa.RecordBatch.from_arrays(arrays, schema=combined)
            self.clear_parts(name)
