"""Outputs on remote stores: ``scan --out`` and the nightly warehouse on S3 and HDFS.

A scan always builds its output in a local folder; this module publishes that finished folder
to ``s3://``, ``webhdfs://`` or ``hdfs://`` (``txn_audit.ingest.storage`` says how each is
reached) and reads back what the warehouse needs. The guarantee is the local one
(``txn_audit.outputs``): a run that fails or is killed at any moment leaves the previous output,
or the previous files of a warehouse date, whole and readable. How, per store:

**HDFS** (``webhdfs://``, ``hdfs://``): a rename of a folder is one atomic operation of the
NameNode. A folder is uploaded to a hidden sibling (``.<name>.staging-<run>``); then the previous
output is renamed aside (``.<name>.previous-<run>``), the staging folder renamed in, and the
previous one deleted. A run killed between the two renames leaves no folder at the target: a
later run puts the previous one back first (``recover``), as ``outputs.py`` does where the
kernel cannot exchange two folders. Readers that list folders (Spark) see the old folder or the
new one, never a mix; in the instant between the renames they see none. The warehouse publishes
each ``<table>/audit_date=D/`` this way, the run folder ``runs/audit_date=D/`` last, so
``audit_dates`` lists a date once all of its tables are in place.

**S3** (no rename; a single PUT is atomic, and a reader sees an object whole or not at all):

- ``scan --out s3://b/out``: the files go under a fresh run prefix, ``out/run-<time>-<id>/``;
  then one small object, the pointer ``out/.txn-audit-output`` (JSON: the run and its files), is
  written last and names the complete run; only then are the objects of the run it replaced
  deleted. A killed run's objects are never named by the pointer; a later run deletes them.
  Readers follow the pointer (``current_output``, or read ``out/.txn-audit-output``): the
  output is ``s3://b/out/<run>/`` (``tables/<table>/``, ``summary.json``, ``report.html``).
- the warehouse: a date's table files get fresh names (``part-<run>-00000.parquet``) beside the
  previous ones in ``<table>/audit_date=D/``, the run's report and summary go to
  ``runs/audit_date=D/<run>/``, and the date's manifest ``runs/audit_date=D/run.json``, written
  last, is the commit point: it names the run and lists every file of the date, table by table.
  ``audit_dates`` lists the dates that have a manifest. Then the date's files of the run the
  previous manifest named are deleted, and a killed run's.

What a reader that lists folders sees on S3 (Spark's ``spark.read.parquet("s3a://b/wh/findings")``):
while a date is being published, and after a run of that date was killed until a later run
deletes its files, ``<table>/audit_date=D/`` holds the files of two runs, so a listing reader
counts that date's rows twice (or reads half of the new run's files). Readers that must not see
that window read the files the manifest lists (``committed_files``; with Spark,
``spark.read.option("basePath", table_uri).parquet(*files)``). Other dates are never touched.

**Runs that overlap** on one output or warehouse date (a store has no lock a killed run would
release) never delete each other's files: what another run left, a staging folder or objects no
pointer or manifest names, is deleted (or an output moved aside put back) only once nothing in it
was written for ``LEFTOVER_AGE`` (an hour): a run still uploading writes more often, a killed
run's leftovers go with the first run that publishes after that. The run that publishes last is
the output.

Objects are deleted one at a time: some S3-compatible servers refuse the batch delete that the
AWS SDK sends without a Content-MD5 header.

Every storage failure while publishing or reading back is a ``StoreError``: one line that names
the URI.
"""

from __future__ import annotations

import functools
import json
import os
import posixpath
import re
import time
import uuid
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import quote, unquote, urlsplit, urlunsplit

import pyarrow.fs as pafs

from txn_audit.errors import OutputError, UsageError
from txn_audit.outputs import MARKER

__all__ = [
    "OUTPUT_SCHEMES", "RUN_MANIFEST", "Store", "StoreError", "audit_dates", "check_output", "committed_files",
    "current_output", "is_remote", "new_run_id", "open_store", "output_uri", "publish_date", "publish_folder",
]

#: schemes an output (``scan --out``, ``--warehouse``) may be published to, besides local folders
OUTPUT_SCHEMES = ("s3", "webhdfs", "hdfs")
RUN_MANIFEST = "run.json"
RUNS = "runs"
_STAGING = ".staging-"
_OLD = ".previous-"
_RUN = re.compile(r"^run-\d{8}T\d{6}Z-[0-9a-f]{8}$")
_DATE = re.compile(r"^audit_date=(\d{4}-\d{2}-\d{2})$")
#: what txn-audit names a table file of the warehouse on S3
_PART = re.compile(r"^part-(run-\d{8}T\d{6}Z-[0-9a-f]{8})-\d{5}\.parquet$")
UPLOAD_THREADS = 8
#: what another run left (a staging folder, objects no pointer or manifest names) is deleted, or
#: put back, only once nothing in it was written for this long: a run still publishing writes
#: more often than that, so runs that overlap never delete each other's files
LEFTOVER_AGE = timedelta(hours=1)
CHUNK = 8 << 20
T = TypeVar("T")


class StoreError(OutputError, UsageError):
    """A remote store could not be written or read; the message is one line naming the URI. An
    output that cannot be written (``usage.ExitCode.OUTPUT``), whether found before the scan or
    while publishing."""


def is_remote(location: str | os.PathLike[str] | None) -> bool:
    """Whether ``location`` is a URI of a remote store (else a local path or ``file://``)."""
    if location is None or not isinstance(location, str):
        return False
    return urlsplit(location).scheme.lower() in OUTPUT_SCHEMES


def _one_line(err: BaseException) -> str:
    return " ".join(str(err).split()) or type(err).__name__


def _idle(infos: Iterable[pafs.FileInfo]) -> bool:
    """Whether nothing of ``infos`` was written for ``LEFTOVER_AGE``."""
    times = [i.mtime if i.mtime.tzinfo else i.mtime.replace(tzinfo=UTC) for i in infos if i.mtime is not None]
    return not times or datetime.now(UTC) - max(times) >= LEFTOVER_AGE


def _delete_runs(store: Store, files: dict[str, pafs.FileInfo], run_of: Callable[[str], str], keep: str,
                 replaced: str | None) -> None:
    """Delete ``files`` (``Store.file_infos``) of other runs (``run_of``) than ``keep``: the
    ``replaced`` run's, and another run's once idle (a killed run's, not one still uploading)."""
    runs: dict[str, list[str]] = {}
    for rel in files:
        runs.setdefault(run_of(rel), []).append(rel)
    stale = [rel for run, rels in runs.items() if run != keep and (run == replaced or _idle(files[r] for r in rels))
             for rel in rels]
    store.delete_files(stale)


def new_run_id() -> str:
    """``run-<UTC time>-<8 hex>``: sorts by time, unique per run."""
    return f"run-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}-{uuid.uuid4().hex[:8]}"


@dataclass(frozen=True)
class Store:
    """A folder of a remote store: ``filesystem`` and ``root`` (its path there); ``display`` is
    the URI as given, without credentials; ``what`` names the option it came from."""

    filesystem: pafs.FileSystem
    root: str
    display: str
    scheme: str
    netloc: str
    query: str
    what: str = "--out"

    @property
    def renames(self) -> bool:
        """HDFS renames folders atomically; S3 has no rename."""
        return self.scheme != "s3"

    def path(self, rel: str = "") -> str:
        return posixpath.join(self.root, rel) if rel else self.root

    def uri(self, rel: str = "") -> str:
        """The URI of ``rel`` under this folder (with the query, so it can be opened again)."""
        path = self.path(rel)
        if self.scheme == "s3":
            return f"s3://{quote(path)}" + (f"?{self.query}" if self.query else "")
        return urlunsplit((self.scheme, self.netloc, quote("/" + path.lstrip("/")), self.query, ""))

    def child(self, rel: str) -> Store:
        return Store(self.filesystem, self.path(rel), self.display_of(rel), self.scheme, self.netloc, self.query,
                     self.what)

    def display_of(self, rel: str) -> str:
        base, _, query = self.display.partition("?")
        return posixpath.join(base, rel) + (f"?{query}" if query else "") if rel else self.display

    # -- the storage operations, each a ``StoreError`` on failure ------------------------

    def call(self, action: Callable[[], T], doing: str) -> T:
        try:
            return action()
        except (OSError, ValueError) as err:  # pyarrow's ArrowInvalid is a ValueError
            raise StoreError(f"{self.what} {self.display}: cannot {doing}: {_one_line(err)}") from None

    def kind(self, rel: str = "") -> pafs.FileType:
        return self.call(lambda: self.filesystem.get_file_info(self.path(rel)).type, f"look at {rel or 'it'}")

    def listing(self, rel: str = "", recursive: bool = True) -> list[pafs.FileInfo]:
        """Everything under ``rel`` (nothing when it does not exist)."""
        selector = pafs.FileSelector(self.path(rel), allow_not_found=True, recursive=recursive)
        return self.call(lambda: self.filesystem.get_file_info(selector), f"list {rel or 'it'}")

    def files(self, rel: str = "") -> list[str]:
        """The files under ``rel``, as paths relative to this folder, sorted."""
        return sorted(self.file_infos(rel))

    def file_infos(self, rel: str = "") -> dict[str, pafs.FileInfo]:
        """The files under ``rel`` by their paths relative to this folder."""
        base = self.path(rel).rstrip("/") + "/"
        return {posixpath.join(rel, i.path[len(base):]) if rel else i.path[len(base):]: i
                for i in self.listing(rel) if i.type == pafs.FileType.File and i.path.startswith(base)}

    def read_text(self, rel: str) -> str:
        def read() -> str:
            with self.filesystem.open_input_stream(self.path(rel)) as handle:
                data: bytes = handle.read()
            return data.decode("utf-8")

        return self.call(read, f"read {rel}")

    def write_bytes(self, rel: str, data: bytes) -> None:
        def write() -> None:
            with self.filesystem.open_output_stream(self.path(rel)) as handle:
                handle.write(data)

        self.call(write, f"write {rel}")

    def upload(self, pairs: Iterable[tuple[Path, str]]) -> None:
        """Copy local files to paths relative to this folder, several at a time."""
        todo = list(pairs)
        if self.renames:  # HDFS: the folders first (S3 has none)
            folders = sorted({posixpath.dirname(self.path(rel)) for _, rel in todo})
            for folder in folders:
                self.call(functools.partial(self.filesystem.create_dir, folder, recursive=True), f"create {folder}")

        def one(pair: tuple[Path, str]) -> None:
            source, rel = pair

            def copy() -> None:
                with open(source, "rb") as local, self.filesystem.open_output_stream(self.path(rel)) as remote:
                    while chunk := local.read(CHUNK):
                        remote.write(chunk)

            self.call(copy, f"upload {rel}")

        _parallel(one, todo)

    def delete_files(self, rels: Iterable[str]) -> None:
        """Delete files one by one (S3: one DeleteObject each), several at a time."""
        todo = list(rels)

        def one(rel: str) -> None:
            def delete() -> None:
                try:
                    self.filesystem.delete_file(self.path(rel))
                except FileNotFoundError:
                    pass

            self.call(delete, f"delete {rel}")

        _parallel(one, todo)

    def delete_tree(self, rel: str) -> None:
        if self.renames:
            if self.kind(rel) != pafs.FileType.NotFound:
                self.call(lambda: self.filesystem.delete_dir(self.path(rel)), f"delete {rel}")
            return
        self.delete_files(self.files(rel))

    def rename(self, source: str, dest: str) -> None:
        self.call(lambda: self.filesystem.move(self.path(source), self.path(dest)),
                  f"rename {source or '.'} to {dest}")


def _parallel(action: Callable[[T], None], items: list[T]) -> None:
    """``action`` on every item, ``UPLOAD_THREADS`` at a time; the first failure is raised once the
    running ones end, and what had not started is dropped (a dead server fails fast)."""
    if not items:
        return
    pool = ThreadPoolExecutor(min(UPLOAD_THREADS, len(items)))
    try:
        futures = [pool.submit(action, item) for item in items]
        for future in as_completed(futures):
            future.result()
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def open_store(location: str, what: str = "--out") -> Store:
    """The store folder of an ``s3://``, ``webhdfs://`` or ``hdfs://`` URI (``UsageError`` for
    another scheme, or a store that cannot be set up; nothing is read yet)."""
    from txn_audit.ingest.storage import check_libhdfs, webhdfs_filesystem

    parts = urlsplit(location)
    scheme = parts.scheme.lower()
    if scheme not in OUTPUT_SCHEMES:
        raise UsageError(f"{what} {location}: outputs go to local folders, file://, s3://, webhdfs:// or hdfs:// "
                         f"URIs, not {scheme}://")
    netloc = parts.netloc.rsplit("@", 1)[-1]
    display = urlunsplit((scheme, netloc, parts.path, parts.query, ""))
    if scheme == "hdfs":
        check_libhdfs(display)
    if not parts.path.strip("/"):  # checked before pyarrow, which may ask the network for the bucket's region
        raise UsageError(f"{what} {display}: name a folder " + ("inside the bucket (s3://bucket/folder), not the "
                                                                 "bucket" if scheme == "s3" else
                                                                 "(scheme://host/folder), not the root of the file "
                                                                 "system"))
    try:
        if scheme == "webhdfs":
            filesystem = webhdfs_filesystem(parts.netloc, parts.query)
            root = unquote(parts.path) or "/"
        else:
            filesystem, root = pafs.FileSystem.from_uri(location)
    except (OSError, ValueError) as err:
        raise StoreError(f"{what} {display}: {_one_line(err)}") from None
    return Store(filesystem, root.rstrip("/"), display, scheme, netloc, parts.query, what)


def _parent_and_name(store: Store) -> tuple[Store, str]:
    """The folder holding ``store`` (its messages still name ``store``'s URI), and its name."""
    head, name = posixpath.split(store.root)
    return Store(store.filesystem, head or "/", store.display, store.scheme, store.netloc, store.query,
                 store.what), name


# -- one folder (scan --out) --------------------------------------------------------------


def check_output(location: str, what: str = "--out") -> Store:
    """``--out`` on a store: reachable, and new, empty or written by txn-audit (``UsageError``)."""
    store = open_store(location, what)
    if not store.renames:
        _check_s3_bucket(store)
    kind = store.kind()
    if kind == pafs.FileType.File:
        raise UsageError(f"{what} must be a folder, {store.display} is a file")
    if store.renames:
        recover(store)
        if kind == pafs.FileType.Directory and store.listing(recursive=False) and \
                store.kind(MARKER) != pafs.FileType.File:
            raise UsageError(f"{what} {store.display} already holds files that txn-audit did not write; choose a "
                             "new or empty folder")
    elif store.kind(MARKER) != pafs.FileType.File and \
            any(not _RUN.match(rel.split("/", 1)[0]) for rel in store.files()):  # a killed first run's are ours
        raise UsageError(f"{what} {store.display} already holds objects that txn-audit did not write; choose a new "
                         "or empty folder")
    return store


def _check_s3_bucket(store: Store) -> None:
    bucket = store.root.split("/", 1)[0]
    if store.call(lambda: store.filesystem.get_file_info(bucket).type, "look at the bucket") == \
            pafs.FileType.NotFound:
        raise StoreError(f"{store.what} {store.display}: bucket {bucket!r} not found; check the bucket name and the "
                         "endpoint (AWS_ENDPOINT_URL or ?endpoint_override=host:port&scheme=http)")


def recover(store: Store) -> None:
    """HDFS: undo what a killed run left beside ``store``, once idle (``LEFTOVER_AGE``): put a
    moved-aside output back, delete half-uploaded ones."""
    parent, name = _parent_and_name(store)
    siblings = {posixpath.basename(i.path): i for i in parent.listing(recursive=False)}
    # a sibling another run is still writing (``LEFTOVER_AGE``) is its own
    idle = [s for s in sorted(siblings) if s.startswith((f".{name}{_OLD}", f".{name}{_STAGING}"))
            and _idle([siblings[s], *parent.listing(s)])]
    previous = [s for s in idle if s.startswith(f".{name}{_OLD}")]
    if previous and name not in siblings:
        parent.rename(previous[-1], name)
        idle.remove(previous[-1])
    for leftover in idle:
        parent.delete_tree(leftover)


def _local_files(folder: Path) -> list[tuple[Path, str]]:
    out = []
    for here, _, names in os.walk(folder):
        for file_name in names:
            path = Path(here) / file_name
            out.append((path, path.relative_to(folder).as_posix()))
    return sorted(out, key=lambda pair: pair[1])


def output_uri(store: Store, run: str) -> str:
    """Where ``publish_folder(..., run=run)`` puts the output: the folder itself on HDFS, the
    run's folder on S3."""
    return store.uri() if store.renames else store.uri(run)


def publish_folder(local_dir: Path, location: str | Store, what: str = "--out", run: str | None = None) -> str:
    """Publish the finished local folder ``local_dir`` as the output at ``location``, replacing
    the previous output whole or not at all (see the module's docstring); the URI of the folder
    that now holds it (``output_uri``). ``run``: the run's id (``new_run_id``), fresh by default."""
    store = location if isinstance(location, Store) else check_output(location, what)
    files = _local_files(local_dir)
    run = run or new_run_id()
    if store.renames:
        _publish_by_rename(store, files, run)
        return store.uri()
    try:
        store.upload((path, f"{run}/{rel}") for path, rel in files if rel != MARKER)
    except StoreError as err:
        raise StoreError(f"{err}; the previous output is unchanged") from None
    replaced = _named_run(store, MARKER)
    pointer = {"written_by": "txn-audit", "run": run, "files": [rel for _, rel in files if rel != MARKER]}
    store.write_bytes(MARKER, (json.dumps(pointer, indent=2) + "\n").encode())  # the commit point
    written = {rel: info for rel, info in store.file_infos().items() if rel != MARKER}
    _delete_runs(store, written, lambda rel: rel.split("/", 1)[0], run, replaced)
    return store.uri(run)


def _named_run(store: Store, rel: str) -> str | None:
    """The run the pointer or manifest ``rel`` names (None: none there, or not one)."""
    try:
        run = json.loads(store.read_text(rel))["run"]
    except (StoreError, ValueError, KeyError, TypeError):
        return None
    return run if isinstance(run, str) else None


def _publish_by_rename(store: Store, files: list[tuple[Path, str]], run: str) -> None:
    parent, name = _parent_and_name(store)
    staging = f".{name}{_STAGING}{run}"
    try:
        parent.upload((path, f"{staging}/{rel}") for path, rel in files)
        if not any(rel == MARKER for _, rel in files):
            parent.write_bytes(f"{staging}/{MARKER}", b"written by txn-audit; the whole folder is replaced by the "
                               b"next run\n")
    except BaseException as err:
        try:
            parent.delete_tree(staging)
        except StoreError:
            pass  # the next run deletes it
        if isinstance(err, StoreError):
            raise StoreError(f"{err}; the previous output is unchanged") from None
        raise
    if parent.kind(name) == pafs.FileType.NotFound:
        parent.rename(staging, name)
        return
    old = f".{name}{_OLD}{run}"
    parent.rename(name, old)
    parent.rename(staging, name)
    parent.delete_tree(old)


def current_output(location: str) -> str:
    """The URI of the complete output at ``location``: itself on HDFS, on S3 the run folder the
    pointer names (``StoreError`` when there is none)."""
    store = open_store(location)
    if store.renames:
        if store.kind(MARKER) != pafs.FileType.File:
            raise StoreError(f"--out {store.display}: no txn-audit output there")
        return store.uri()
    if store.kind(MARKER) != pafs.FileType.File:
        raise StoreError(f"--out {store.display}: no txn-audit output there (no {MARKER})")
    try:
        run = json.loads(store.read_text(MARKER))["run"]
    except (ValueError, KeyError, TypeError):
        raise StoreError(f"--out {store.display}: {MARKER} is not a txn-audit pointer") from None
    if not isinstance(run, str) or not _RUN.match(run):
        raise StoreError(f"--out {store.display}: {MARKER} names no run")
    return store.uri(run)


# -- the warehouse -----------------------------------------------------------------------


def _date_folder(audit_date: date) -> str:
    return f"audit_date={audit_date.isoformat()}"


def publish_date(store: Store, tables: dict[str, list[Path]], run_dir: Path, audit_date: date,
                 manifest: dict[str, Any], run: str | None = None) -> dict[str, str]:
    """Publish one date of the warehouse at ``store``: ``tables`` (each table's local Parquet
    files, in order) and the run folder's files (``run_dir``, a local folder of this run's own:
    summary, report, quality), then the date's manifest ``runs/audit_date=D/run.json``
    (``manifest`` plus what this adds). The URI of
    each table's partition folder, and of the run folder under ``"runs"``. ``run``: the run's
    id (``new_run_id``), fresh by default."""
    part = _date_folder(audit_date)
    run = run or new_run_id()
    if store.renames:
        for name in [*tables, RUNS]:  # every folder of the date, before anything is published
            _check_date_folder(store.child(f"{name}/{part}"))
        for name, files in tables.items():
            table = store.child(f"{name}/{part}")
            _publish_by_rename(table, [(f, f"part-{i:05d}.parquet") for i, f in enumerate(files)], run)
        runs = store.child(f"{RUNS}/{part}")
        (run_dir / RUN_MANIFEST).write_text(json.dumps(manifest | {"run": run}, indent=2, sort_keys=True) + "\n")
        _publish_by_rename(runs, _local_files(run_dir), run)
        return {**{name: store.uri(f"{name}/{part}") for name in tables}, "runs": store.uri(f"{RUNS}/{part}")}
    # S3: fresh names, the manifest last, then the date's other files go
    for name in tables:
        _check_s3_date_folder(store, f"{name}/{part}")
    listed: dict[str, list[str]] = {}
    uploads: list[tuple[Path, str]] = []
    for name, files in tables.items():
        keys = [f"{name}/{part}/part-{run}-{i:05d}.parquet" for i in range(len(files))]
        listed[name] = keys
        uploads.extend(zip(files, keys, strict=True))
    run_files = [(path, f"{RUNS}/{part}/{run}/{rel}") for path, rel in _local_files(run_dir) if rel != RUN_MANIFEST]
    try:
        store.upload([*uploads, *run_files])
    except StoreError as err:
        raise StoreError(f"{err}; the date's previous files are unchanged") from None
    replaced = _named_run(store, f"{RUNS}/{part}/{RUN_MANIFEST}")
    body = manifest | {"run": run, "tables": listed, "run_files": [rel for _, rel in run_files]}
    store.write_bytes(f"{RUNS}/{part}/{RUN_MANIFEST}", (json.dumps(body, indent=2, sort_keys=True) + "\n").encode())
    written = {rel: info for name in [*tables, RUNS] for rel, info in store.file_infos(f"{name}/{part}").items()
               if rel != f"{RUNS}/{part}/{RUN_MANIFEST}"}
    _delete_runs(store, written, _date_file_run, run, replaced)
    return {**{name: store.uri(f"{name}/{part}") for name in tables}, "runs": store.uri(f"{RUNS}/{part}/{run}")}


def _date_file_run(rel: str) -> str:
    """The run that wrote a file of a date: ``<table>/audit_date=D/part-<run>-NNNNN.parquet`` or
    ``runs/audit_date=D/<run>/...`` (else the file's own path: a run of its own)."""
    head, _, rest = rel.partition("/")
    match = _PART.match(posixpath.basename(rel))
    if match:
        return match.group(1)
    inner = rest.split("/")
    return inner[1] if head == RUNS and len(inner) > 2 else rel


def _check_date_folder(folder: Store) -> None:
    recover(folder)
    if folder.kind() == pafs.FileType.Directory and folder.listing(recursive=False) and \
            folder.kind(MARKER) != pafs.FileType.File:
        raise UsageError(f"{folder.display} holds files that txn-audit did not write; move them away or use another "
                         "warehouse")


def _check_s3_date_folder(store: Store, rel: str) -> None:
    foreign = [f for f in store.files(rel) if not _PART.match(posixpath.basename(f))]
    if foreign:
        raise UsageError(f"{store.display_of(rel)} holds objects that txn-audit did not write ({foreign[0]}); move "
                         "them away or use another warehouse")


def check_warehouse(location: str) -> Store:
    """``--warehouse`` on a store: reachable (``UsageError``)."""
    store = open_store(location, "--warehouse")
    if not store.renames:
        _check_s3_bucket(store)
    if store.kind() == pafs.FileType.File:
        raise UsageError(f"warehouse {store.display} is a file, not a folder")
    return store


def audit_dates(store: Store) -> list[date]:
    """The dates whose run is complete: those with a manifest ``runs/audit_date=D/run.json``."""
    found = []
    for rel in store.files(RUNS):
        head, file_name = posixpath.split(rel)
        match = _DATE.match(posixpath.basename(head))
        if file_name == RUN_MANIFEST and posixpath.dirname(head) == RUNS and match:
            try:
                found.append(date.fromisoformat(match.group(1)))
            except ValueError:
                continue
    return sorted(found)


def committed_files(store: Store, table: str, audit_date: date) -> list[str]:
    """The URIs of ``table``'s files of ``audit_date`` that the date's manifest names (S3), or
    that its partition folder holds (HDFS, where the folder is swapped whole)."""
    part = _date_folder(audit_date)
    if store.renames:
        return [store.uri(rel) for rel in store.files(f"{table}/{part}") if rel.endswith(".parquet")]
    try:
        manifest = json.loads(store.read_text(f"{RUNS}/{part}/{RUN_MANIFEST}"))
        keys = manifest["tables"][table]
    except (ValueError, KeyError, TypeError):
        raise StoreError(f"--warehouse {store.display}: no manifest lists {table} for {audit_date}") from None
    return [store.uri(key) for key in keys]
