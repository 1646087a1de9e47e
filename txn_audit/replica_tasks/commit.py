"""How a table written by per-replica tasks is committed (pyarrow only, no pyspark).

The driver creates the table's folder (``start_table``: refused when it exists, as Spark's
writer does) and draws a job id (``new_job``); each task writes at most one file, named as
Spark names its own from the task's number and the job (``file_name``), first under a hidden
staging name, then renamed into place (``commit_file``): readers never see a partial file, and
a retried task writes the same rows under the same name. ``TableFile`` writes such a file as
its rows come, created at the first of them. Once every task ran, ``finish_table`` gives a table
no task wrote a file to an empty file of its schema.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator, Mapping
from contextlib import ExitStack, contextmanager, suppress
from types import TracebackType
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from pyarrow import fs

from txn_audit.schemas import declared


def located(location: str) -> tuple[fs.FileSystem, str]:
    """The file system and path of ``location``: a URI, or a local path."""
    if "://" in location:
        found: tuple[fs.FileSystem, str] = fs.FileSystem.from_uri(location)
        return found
    return fs.LocalFileSystem(), os.path.abspath(location)


def file_name(task: int, job: str) -> str:
    """A task's file, named as Spark names its own (``warehouse`` orders a job's files by task)."""
    return f"part-{task:05d}-{job}-c000.snappy.parquet"


def new_job() -> str:
    return str(uuid.uuid4())


def start_table(directory: str) -> None:
    """Create ``directory`` for a table's files; refuse one that exists (as Spark's writer does)."""
    filesystem, path = located(directory)
    if filesystem.get_file_info(path).type != fs.FileType.NotFound:
        raise FileExistsError(f"{directory} already exists")
    filesystem.create_dir(path, recursive=True)


@contextmanager
def commit_file(directory: str, name: str) -> Iterator[pa.NativeFile]:
    """A stream to write the file ``directory/name`` to: written under a hidden name, then
    renamed into place when the block ends without an error (nothing is left otherwise)."""
    filesystem, path = located(directory)
    final = f"{path}/{name}"
    staging = f"{path}/.{name}.{uuid.uuid4().hex}.tmp"  # hidden: readers skip it
    try:
        with filesystem.open_output_stream(staging) as sink:
            yield sink
    except BaseException:
        with suppress(OSError):
            filesystem.delete_file(staging)
        raise
    filesystem.move(staging, final)


class TableFile:
    """One task's file ``directory/name`` of a table of ``schema``, written as rows are added
    (``add``), committed (``commit_file``) when the block ends without an error; none when no
    row was added. ``options``: the Parquet writer's keywords (``schemas.writer_options``; none:
    pyarrow's defaults, every column a dictionary). ``buffer_rows``: rows added are held and
    written in row groups of that many (a task adding a few rows per item, for thousands of
    items, would otherwise write as many tiny row groups); None: each ``add`` is written at once."""

    def __init__(self, directory: str, name: str, schema: pa.Schema, options: Mapping[str, Any] | None = None,
                 buffer_rows: int | None = None) -> None:
        self.directory, self.name, self.schema = directory, name, schema
        self.options = dict(options or {})
        self.buffer_rows = buffer_rows
        self.rows = 0
        self._stack = ExitStack()
        self._writer: pq.ParquetWriter | None = None
        self._held: list[pa.Table] = []
        self._held_rows = 0

    def __enter__(self) -> TableFile:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        if kind is None:
            try:
                self._write_held()
            except BaseException as failed:
                self._stack.__exit__(type(failed), failed, failed.__traceback__)  # the file dropped
                raise
        self._stack.__exit__(kind, error, trace)  # the writer closed, then the file committed or dropped

    def add(self, rows: pa.Table, row_group_size: int | None = None) -> None:
        """``rows`` (cast to the schema, instants from epoch ms: ``schemas.declared``) appended, as
        row groups of at most ``row_group_size`` (with ``buffer_rows``: held, then written in row
        groups of ``buffer_rows``)."""
        if not rows.num_rows:
            return
        self.rows += rows.num_rows
        if not rows.schema.equals(self.schema):
            rows = declared(rows, self.schema)
        if self.buffer_rows is None:
            self._write(rows, row_group_size)
            return
        self._held.append(rows)
        self._held_rows += rows.num_rows
        if self._held_rows >= self.buffer_rows:
            self._write_held()

    def _write_held(self) -> None:
        if self._held:
            held, self._held, self._held_rows = pa.concat_tables(self._held), [], 0
            self._write(held, self.buffer_rows)

    def _write(self, rows: pa.Table, row_group_size: int | None) -> None:
        if self._writer is None:
            sink = self._stack.enter_context(commit_file(self.directory, self.name))
            self._writer = self._stack.enter_context(pq.ParquetWriter(sink, self.schema, **self.options))
        self._writer.write_table(rows, row_group_size=row_group_size)


def drop_table(directory: str) -> None:
    """Delete ``directory`` and its files, if it exists."""
    filesystem, path = located(directory)
    if filesystem.get_file_info(path).type != fs.FileType.NotFound:
        filesystem.delete_dir(path)


def finish_table(directory: str, schema: pa.Schema) -> None:
    """Write an empty file of ``schema`` into ``directory`` when no task wrote one, so that the
    table has its schema on disk, as a table Spark wrote without rows."""
    filesystem, path = located(directory)
    found = filesystem.get_file_info(fs.FileSelector(path))
    if not any(f.base_name.endswith(".parquet") and not f.base_name.startswith((".", "_")) for f in found):
        with filesystem.open_output_stream(f"{path}/{file_name(0, new_job())}") as sink:
            pq.write_table(schema.empty_table(), sink)
